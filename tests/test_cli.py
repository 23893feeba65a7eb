"""The ``lmsim`` command on tiny offline models: every subcommand, its files and its errors.

Subcommands run in-process through :func:`lmsim.cli.main` (one interpreter: a fresh one
costs seconds of imports), one through ``python -m lmsim.cli``. Each result is checked
against the library call it wraps, run here on the same inputs, or against an identity
the method guarantees; bad input must be one line on stderr and exit status 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from _helpers import EXTRACTION_TEXTS, tiny_tokenizer

from lmsim.cli import COMMANDS, main
from lmsim.metrics.floors import chance_floors

pytestmark = pytest.mark.usefixtures("one_torch_thread")
REPO = Path(__file__).resolve().parents[1]
TEXTS = EXTRACTION_TEXTS * 3  # 27 texts: more rows than the 16-wide layers below


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """``lmsim *argv`` in-process: (exit status, stdout, stderr)."""
    try:
        status = main([str(a) for a in argv])
    except SystemExit as exit_:  # argparse's --help and usage errors
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


def run_json(capsys, *argv) -> dict:
    status, out, err = run_cli(capsys, *argv, "--json", "--quiet")
    assert status == 0, err
    # --quiet silences progress and status; warnings stay (once each; also in the summary).
    noise = [line for line in err.splitlines() if "warning:" not in line]
    assert noise == [], f"--quiet printed on stderr: {err[:500]}"
    return json.loads(out)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A text file, a CoNLL-U file of generated sentences, and two tiny BERT classifiers
    (different seeds, one tokenizer) saved with ``save_pretrained``."""
    from transformers import BertConfig, BertForSequenceClassification

    from lmsim.data import generate_smoke_sentences

    root = tmp_path_factory.mktemp("cli")
    texts = root / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    conllu = root / "smoke.conllu"
    rows = []
    for s in generate_smoke_sentences(60, seed=0):
        for i, (w, u, h, d) in enumerate(zip(s.words, s.upos, s.heads, s.deprels), 1):
            rows.append(f"{i}\t{w}\t_\t{u}\t_\t_\t{h}\t{d}\t_\t_")
        rows.append("")
    conllu.write_text("\n".join(rows) + "\n")
    tok = tiny_tokenizer("wordpiece", TEXTS)
    config = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=3,
    )
    classifiers = []
    for seed in range(2):
        torch.manual_seed(seed)
        path = root / f"clf{seed}"
        BertForSequenceClassification(config).save_pretrained(path)
        tok.save_pretrained(path)
        classifiers.append(path)
    data = []
    for i, part in enumerate((TEXTS[:12], TEXTS[9:])):
        data.append(root / f"data{i}.txt")
        data[-1].write_text("\n".join(part) + "\n")
    return {"root": root, "texts": texts, "conllu": conllu, "clf": classifiers, "data": data}


# ---------------------------------------------------------------------- help and entry
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_has_help_with_a_worked_example(capsys, command):
    status, out, _ = run_cli(capsys, command, "--help")
    assert status == 0
    assert "example" in out and f"lmsim {command}" in out
    if command not in ("reproduce", "zoo"):
        assert "--device" in out and "--quiet" in out and "--json" in out


def test_top_level_help_lists_the_commands(capsys):
    status, out, _ = run_cli(capsys, "--help")
    assert status == 0
    assert all(f"  {name}" in out for name in COMMANDS)


def test_merge_help_documents_the_config_and_the_methods(capsys):
    from lmsim.merge import METHODS

    _, out, _ = run_cli(capsys, "merge", "--help")
    assert "merge_method:" in out and "models:" in out and "parameters:" in out
    assert all(method in out for method in METHODS)


def test_python_m_lmsim_cli_reports_bad_input_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "lmsim.cli", "similarity", "tiny-bert"]
        + ["--texts", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "sim")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no file at" in done.stderr, done.stderr


def test_warnings_are_one_line_and_errors_keep_their_traceback_on_request(capsys):
    from lmsim.cli import _guarded

    def warn():
        warnings.warn("a warning\nover two lines", UserWarning, stacklevel=1)
        return 0

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert _guarded("lmsim x", warn, traceback=False) == 0
    assert capsys.readouterr().err == "lmsim x: warning: UserWarning: a warning over two lines\n"

    def bad():
        raise ValueError("`alpha` must lie in [0, 1]")

    assert _guarded("lmsim x", bad, traceback=False) == 2
    assert capsys.readouterr().err == "lmsim x: error: `alpha` must lie in [0, 1]\n"
    with pytest.raises(ValueError, match="alpha"):
        _guarded("lmsim x", bad, traceback=True)


# ---------------------------------------------------------------------- bad input
def _merge_config(files, text: str) -> Path:
    path = files["root"] / "bad.yml"
    path.write_text(text)
    return path


def _text_file(files, name: str, text: str) -> Path:
    path = files["root"] / name
    path.write_text(text)
    return path


class _Planted:
    """Pickles to a call of ``Path.write_text``: code that would run on unpickling."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "pwned"))


def _planted(files) -> Path:
    """A copy of the first classifier whose weights are a pickle carrying code."""
    import shutil

    folder = files["root"] / "planted"
    if not folder.exists():
        shutil.copytree(files["clf"][0], folder)
        (folder / "model.safetensors").unlink()
        torch.save({"weight": _Planted(files["root"] / "pwned")}, folder / "pytorch_model.bin")
    return folder


BAD = [
    ("unknown-command", lambda f: ["similarityy"], "unknown command 'similarityy'"),
    (
        "missing-texts",
        lambda f: ["similarity", "tiny-bert", "--texts", f["root"] / "none.txt", "--out", "x"],
        "no file at",
    ),
    (
        "unknown-model",
        lambda f: ["extract", "no-such-model", "--texts", f["texts"], "--out", f["root"] / "m.st"],
        "unknown model 'no-such-model'",
    ),
    (
        "unknown-measure",
        lambda f: (
            ["similarity", "tiny-bert", "--texts", f["texts"], "--measures", "cka,foo"]
            + ["--out", f["root"] / "s"]
        ),
        "unknown 'foo'; choose from cka,",
    ),
    (
        "bad-layers",
        lambda f: (
            ["extract", "tiny-bert", "--texts", f["texts"], "--layers", "top"]
            + ["--out", f["root"] / "m.st"]
        ),
        "--layers takes 'all', 'last' or hidden-state indices",
    ),
    (
        "lmd-one-model",
        lambda f: ["lmd", "tiny-bert", "--texts", f["texts"], "--out", f["root"] / "l"],
        "at least two models",
    ),
    (
        "merge-unknown-method",
        lambda f: [
            "merge",
            _merge_config(f, f"merge_method: slerp\nmodels: [{f['clf'][0]}, {f['clf'][1]}]\n"),
            "--out",
            f["root"] / "merged",
        ],
        "merge_method 'slerp' is not one of regmean",
    ),
    (
        "merge-task-vectors-without-a-base",
        lambda f: [
            "merge",
            _merge_config(f, f"merge_method: ties\nmodels: [{f['clf'][0]}, {f['clf'][1]}]\n"),
            "--out",
            f["root"] / "merged",
        ],
        "merge_method ties merges task vectors and needs `base_model:`",
    ),
    (
        "merge-unknown-parameter",
        lambda f: [
            "merge",
            _merge_config(
                f,
                f"merge_method: simple\nmodels: [{f['clf'][0]}, {f['clf'][1]}]\n"
                "parameters: {alpha: 0.5, weight: 2}\n",
            ),
            "--out",
            f["root"] / "merged",
        ],
        "parameter 'weight' is not an argument of merge_models",
    ),
    (
        "merge-regmean-without-grams",
        lambda f: [
            "merge",
            _merge_config(f, f"merge_method: regmean\nmodels: [{f['clf'][0]}, {f['clf'][1]}]\n"),
            "--out",
            f["root"] / "merged",
        ],
        "needs `grams:` (from `lmsim grams`) or `data:` for regmean",
    ),
    (
        "merge-not-yaml",
        lambda f: ["merge", _merge_config(f, "models: [a, b\n"), "--out", f["root"] / "m"],
        "not valid YAML",
    ),
    (
        "merge-parameter-of-the-wrong-type",
        lambda f: [
            "merge",
            _merge_config(
                f,
                f"merge_method: regmean\nmodels:\n  - model: {f['clf'][0]}\n    data: {f['texts']}\n"
                f"  - model: {f['clf'][1]}\n    data: {f['texts']}\nparameters: {{alpha: high}}\n",
            ),
            "--out",
            f["root"] / "merged-bad",
        ],
        "parameter `alpha` must be a finite number, got 'high' (str)",
    ),
    (
        "merge-parameter-out-of-range",
        lambda f: [
            "merge",
            _merge_config(
                f,
                f"merge_method: ties\nbase_model: {f['clf'][0]}\n"
                f"models: [{f['clf'][0]}, {f['clf'][1]}]\nparameters: {{density: 1.5}}\n",
            ),
            "--out",
            f["root"] / "merged-bad",
        ],
        "parameters: `density` must be in (0, 1]",
    ),
    (
        "merge-out-is-an-input-model",
        lambda f: [
            "merge",
            _merge_config(f, f"merge_method: simple\nmodels: [{f['clf'][0]}, {f['clf'][1]}]\n"),
            "--out",
            f["clf"][1],
            "--force",
        ],
        "is the folder of the input model",
    ),
    (
        "merge-out-holds-files",
        lambda f: [
            "merge",
            _merge_config(f, f"merge_method: simple\nmodels: [{f['clf'][0]}, {f['clf'][1]}]\n"),
            "--out",
            f["root"],
        ],
        "exists and holds",
    ),
    (
        "merge-a-planted-pickle",
        lambda f: [
            "merge",
            _merge_config(f, f"merge_method: simple\nmodels: [{_planted(f)}, {f['clf'][1]}]\n"),
            "--out",
            f["root"] / "merged-planted",
        ],
        "its pickled weights (pytorch_model.bin) hold more than tensors and were refused",
    ),
    (
        "grams-pair-names-the-file-line",
        lambda f: [
            "grams",
            f["clf"][0],
            "--data",
            _text_file(f, "pairs.txt", "\n\na b\tc d\n\none text only\n"),
            "--kind",
            "pair",
            "--out",
            f["root"] / "p.grams.safetensors",
        ],
        "pairs.txt' line 5: --kind pair needs two texts separated by one tab",
    ),
    (
        "probe-dev-without-test",
        lambda f: (
            ["probe", "tiny-bert", "--conllu", f["conllu"], "--dev", f["conllu"]]
            + ["--task", "pos", "--out", f["root"] / "p"]
        ),
        "give both --dev and --test",
    ),
]


@pytest.mark.parametrize("argv, message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_exit_status_2(capsys, files, argv, message):
    status, out, err = run_cli(capsys, *argv(files))
    assert status == 2
    # Status lines may come first; the error is the last line, and the only one.
    last = err.rstrip("\n").split("\n")[-1]
    assert last.startswith("lmsim") and ": error: " in last and message in last, err
    assert err.count("error") == 1 and "Traceback" not in err, err
    assert not (files["root"] / "pwned").exists(), "a planted pickle ran its code"


def test_merge_checks_its_config_and_out_before_loading_anything(capsys, files, monkeypatch):
    """Issue 46, items 1 and 10: a parameter of the wrong type was found only after the
    models were loaded and their Grams collected; `--out` wrote over an existing folder,
    an input model's included. Both are refused before any model is loaded, and nothing
    in those folders changes; --force writes into a folder that is not an input's."""
    import lmsim.models

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded before the config and --out were checked")

    monkeypatch.setattr(lmsim.models, "load_model", no_loading)
    clf0, clf1 = files["clf"]
    data = files["texts"]
    config = _merge_config(
        files,
        f"merge_method: regmean\nmodels:\n  - model: {clf0}\n    data: {data}\n"
        f"  - model: {clf1}\n    data: {data}\nparameters: {{alpha: 1.5}}\n",
    )
    status, _, err = run_cli(capsys, "merge", config, "--out", files["root"] / "m-new")
    assert status == 2 and "`alpha` must be in [0, 1]" in err
    assert not (files["root"] / "m-new").exists()
    config.write_text(f"merge_method: simple\nmodels: [{clf0}, {clf1}]\n")
    before = {p.name: p.read_bytes() for p in clf0.iterdir()}
    for extra in ([], ["--force"]):
        status, _, err = run_cli(capsys, "merge", config, "--out", clf0, *extra)
        assert status == 2 and "is the folder of the input model" in err
    assert {p.name: p.read_bytes() for p in clf0.iterdir()} == before
    mine = files["root"] / "my-folder"
    mine.mkdir(exist_ok=True)
    (mine / "config.json").write_text('{"mine": true}')
    status, _, err = run_cli(capsys, "merge", config, "--out", mine)
    assert status == 2 and "exists and holds 1 file(s) (config.json)" in err and "--force" in err
    assert (mine / "config.json").read_text() == '{"mine": true}'
    monkeypatch.undo()
    status, _, err = run_cli(capsys, "merge", config, "--out", mine, "--force", "--quiet")
    assert status == 0, err
    assert json.loads((mine / "config.json").read_text())["model_type"] == "bert"


# ---------------------------------------------------------------------- extract, similarity
def test_extract_then_similarity_match_the_library(capsys, files):
    from lmsim.extract import extract_moments
    from lmsim.metrics import pairwise_matrix
    from lmsim.moments import Moments

    root, bert = files["root"], str(files["clf"][0])
    moments = root / "moments.safetensors"
    summary = run_json(
        capsys,
        "extract",
        bert,
        "tiny-gpt2",
        "--texts",
        files["texts"],
        "--out",
        moments,
        "--no-cache",
        "--device",
        "cpu",
    )
    mom = Moments.load(moments)
    ref = extract_moments([bert, "tiny-gpt2"], TEXTS, device="cpu", cache=False, progress=False)
    assert summary["n_rows"] == mom.n == len(TEXTS)
    assert summary["blocks"] == dict(mom.dims) == dict(ref.dims)
    np.testing.assert_allclose(mom.cov(mom.names).numpy(), ref.cov(ref.names).numpy(), atol=1e-10)

    out = root / "sim"
    summary = run_json(
        capsys,
        "similarity",
        "--moments",
        moments,
        "--measures",
        "cka,svcca",
        "--paper-compatible",
        "--floor-draws",
        "3",
        "--out",
        out,
    )
    cka = pd.read_csv(out / "cka.csv", index_col=0)
    svcca_table = pd.read_csv(out / "svcca.csv", index_col=0)
    assert list(cka.index) == list(cka.columns) == mom.names
    np.testing.assert_allclose(cka, pairwise_matrix(mom, mom.names, progress=False), atol=1e-12)
    paper = pairwise_matrix(mom, mom.names, metric="svcca", paper_compat=True, progress=False)
    np.testing.assert_allclose(svcca_table, paper, atol=1e-12)
    assert summary["measures"]["svcca"]["variant"] == "paper-compatible"
    assert summary["measures"]["cka"]["variant"] == "textbook"  # linear_cka has no variant
    assert (out / "cka.png").stat().st_size > 0 and (out / "svcca.png").stat().st_size > 0
    assert json.loads((out / "summary.json").read_text())["measures"].keys() == {"cka", "svcca"}
    rows = [n for n in mom.names if n.startswith(bert)]
    cols = [n for n in mom.names if n.startswith("tiny-gpt2")]
    pair = summary["measures"]["cka"]["by_model_pair"][f"{bert} -> tiny-gpt2"]
    assert pair == pytest.approx(cka.loc[rows, cols].to_numpy().mean(), abs=1e-12)
    chance = summary["measures"]["svcca"]["chance"]
    widths = sorted(set(mom.dims.values()))
    assert [(f["d_x"], f["d_y"]) for f in chance["floors"]] == [
        (a, b) for a in widths for b in widths
    ]
    ref = chance_floors(
        {"svcca": {"paper_compat": True}}, mom.n, widths, n_draws=3, seed=0, cache=False
    )
    for got, want in zip(chance["floors"], ref["svcca"], strict=True):
        assert got == pytest.approx(want, abs=1e-12)
    assert all(f["low"] <= f["mean"] <= f["high"] for f in chance["floors"])

    # The same texts straight through `similarity` (its own extraction): the same values.
    direct = root / "sim_direct"
    summary = run_json(
        capsys,
        "similarity",
        bert,
        "tiny-gpt2",
        "--texts",
        files["texts"],
        "--measures",
        "cka",
        "--floor-draws",
        "0",
        "--no-cache",
        "--device",
        "cpu",
        "--out",
        direct,
    )
    np.testing.assert_allclose(pd.read_csv(direct / "cka.csv", index_col=0), cka, atol=1e-9)
    assert summary["measures"]["cka"]["chance"]["note"].endswith("--floor-draws 0")


def test_word_pooling_keeps_the_sentences_of_at_most_max_words(capsys, files):
    out = files["root"] / "words.safetensors"
    summary = run_json(
        capsys,
        "extract",
        "tiny-gpt2",
        "--texts",
        files["texts"],
        "--pooling",
        "word",
        "--max-words",
        "4",
        "--layers",
        "last",
        "--no-cache",
        "--device",
        "cpu",
        "--out",
        out,
    )
    kept = [t.split() for t in TEXTS if len(t.split()) <= 4]
    assert summary["n_rows"] == sum(map(len, kept)) and summary["blocks"] == {
        "tiny-gpt2/layer.2": 32
    }


def test_progress_goes_to_stderr_unless_quiet(capsys, files):
    status, out, err = run_cli(
        capsys,
        "similarity",
        "--moments",
        files["root"] / "moments.safetensors",
        "tiny-gpt2",
        "--layers",
        "last",
        "--measures",
        "cka",
        "--out",
        files["root"] / "sim_last",
    )
    assert status == 0 and "cka" in err and "cka" in out
    assert pd.read_csv(files["root"] / "sim_last" / "cka.csv", index_col=0).shape == (1, 1)


# ---------------------------------------------------------------------- lmd
def test_lmd_tables_follow_the_definitions(capsys, files):
    out = files["root"] / "lmd"
    summary = run_json(
        capsys,
        "lmd",
        "tiny-bert",
        "tiny-gpt2",
        "--corpus",
        "smoke",
        "--split",
        "train",
        "--seq-len",
        "8",
        "--n-train",
        "80",
        "--n-test",
        "40",
        "--n-boot",
        "8",
        "--resample",
        "test",
        "--no-cache",
        "--device",
        "cpu",
        "--out",
        out,
    )
    group = pd.read_csv(out / "group.csv")
    rho = pd.read_csv(out / "rho.csv")
    pairs = pd.read_csv(out / "pairwise.csv")
    # Eq. 10: ρ is the mean of the leave-one-out R²; Eq. 11: pairwise ρ symmetrises R².
    assert rho.rho[0] == pytest.approx(group.r2.mean(), abs=1e-12)
    r2 = pairs.pivot(index="target", columns="basis", values="r2")
    rho_pairs = pairs.pivot(index="target", columns="basis", values="rho")
    np.testing.assert_allclose(rho_pairs, (r2 + r2.T) / 2, atol=1e-12)
    # Resampling the test shards only: the interval holds the estimate.
    assert (group.lower <= group.r2 + 1e-12).all() and (group.r2 <= group.upper + 1e-12).all()
    assert summary["rho"][0]["rho"] == pytest.approx(rho.rho[0])
    assert summary["seq_lens"] == [8] and (out / "lmd.png").stat().st_size > 0
    # A group of two: each model's group R² is its pairwise R² on the other.
    assert group.set_index("model").r2["tiny-bert"] == pytest.approx(
        r2.loc["tiny-bert", "tiny-gpt2"], abs=1e-10
    )


# ---------------------------------------------------------------------- grams, merge
def test_grams_then_merge_writes_a_folder_that_scores_like_merge_models(capsys, files):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from lmsim.merge import (
        SingularGramWarning,
        collect_grams,
        load_grams,
        load_metadata,
        merge_models,
    )

    root, (clf0, clf1), (data0, data1) = files["root"], files["clf"], files["data"]
    grams0 = root / "clf0.grams.safetensors"
    summary = run_json(capsys, "grams", clf0, "--data", data0, "--out", grams0, "--device", "cpu")
    assert load_metadata(grams0)["n_inputs"] == 12 and summary["metadata"]["task"] == (
        "sequence-classification"
    )
    models = [AutoModelForSequenceClassification.from_pretrained(p).eval() for p in (clf0, clf1)]
    tok = AutoTokenizer.from_pretrained(clf0)
    mine = collect_grams(models[0], tok, TEXTS[:12], device="cpu", progress=False)
    published = load_grams(grams0)
    assert published.keys() == mine.keys()
    for name in mine:
        torch.testing.assert_close(published[name], mine[name], rtol=1e-12, atol=1e-12)

    config = root / "merge.yml"
    config.write_text(
        "merge_method: regmean\n"
        "models:\n"
        f"  - model: {clf0.name}\n    grams: {grams0.name}\n"  # relative to the config
        f"  - model: {clf1}\n    data: {data1}\n"
        "parameters:\n  alpha: 0.8\n"
    )
    merged_dir = root / "merged"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularGramWarning)  # the head sees one row per text
        summary = run_json(capsys, "merge", config, "--out", merged_dir, "--device", "cpu")
        grams1 = collect_grams(models[1], tok, TEXTS[9:], device="cpu", progress=False)
        reference, report = merge_models(models, [mine, grams1], alpha=0.8)

    loaded = AutoModelForSequenceClassification.from_pretrained(merged_dir).eval()
    loaded_tok = AutoTokenizer.from_pretrained(merged_dir)
    batch = loaded_tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        ours = loaded(**batch).logits
        theirs = reference(**tok(TEXTS, padding=True, return_tensors="pt")).logits
        first = models[0](**batch).logits
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(ours, first, atol=1e-3)  # it did merge
    saved = json.loads((merged_dir / "merge_report.json").read_text())
    assert saved["counts"] == report.counts() == summary["counts"]
    assert saved["entries"].keys() == report.entries.keys()


def test_simple_merge_is_the_parameter_mean(capsys, files):
    from transformers import AutoModelForSequenceClassification

    clf0, clf1 = files["clf"]
    config = files["root"] / "simple.yml"
    config.write_text(f"merge_method: simple\nmodels:\n  - model: {clf0}\n  - model: {clf1}\n")
    out = files["root"] / "simple"
    run_json(capsys, "merge", config, "--out", out, "--device", "cpu")
    merged, a, b = (
        dict(AutoModelForSequenceClassification.from_pretrained(p).named_parameters())
        for p in (out, clf0, clf1)
    )
    for name, p in merged.items():
        torch.testing.assert_close(p, (a[name] + b[name]) / 2, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("method", ["task_arithmetic", "ties"])
def test_task_vector_merges_against_a_base_model_match_merge_models(capsys, files, method):
    """`base_model:` is loaded in the models' class and passed as `base`; the head, fresh in
    the base, is excluded as the config example says."""
    from transformers import AutoModelForSequenceClassification, BertForSequenceClassification

    from lmsim.merge import merge_models

    clf0, clf1 = files["clf"]
    base_dir = files["root"] / "base"
    torch.manual_seed(7)
    BertForSequenceClassification(
        AutoModelForSequenceClassification.from_pretrained(clf0).config
    ).save_pretrained(base_dir)
    config = files["root"] / f"{method}.yml"
    config.write_text(
        f"merge_method: {method}\nbase_model: {base_dir}\n"
        f"models:\n  - model: {clf0}\n  - model: {clf1}\n"
        "parameters:\n  scaling: 0.7\n  exclude: ['^classifier\\.']\n"
    )
    out = files["root"] / method
    summary = run_json(capsys, "merge", config, "--out", out, "--device", "cpu")
    assert summary["base_model"] == str(base_dir)
    models = [AutoModelForSequenceClassification.from_pretrained(p) for p in (clf0, clf1)]
    base = AutoModelForSequenceClassification.from_pretrained(base_dir)
    reference, _ = merge_models(
        models, method=method, base=base, scaling=0.7, exclude=["^classifier\\."]
    )
    merged = dict(AutoModelForSequenceClassification.from_pretrained(out).named_parameters())
    for name, p in reference.named_parameters():
        torch.testing.assert_close(merged[name], p, rtol=1e-6, atol=1e-7)
    first = dict(models[0].named_parameters())
    assert not torch.allclose(
        merged["bert.embeddings.word_embeddings.weight"],
        first["bert.embeddings.word_embeddings.weight"],
    )


# ---------------------------------------------------------------------- probe
def test_probe_reports_baselines_and_kept_neurons(capsys, files):
    from lmsim.data import read_conllu

    out = files["root"] / "probe"
    summary = run_json(
        capsys,
        "probe",
        "tiny-bert",
        "--conllu",
        files["conllu"],
        "--task",
        "pos",
        "--cluster-threshold",
        "0.5",
        "--epochs",
        "3",
        "--device",
        "cpu",
        "--out",
        out,
    )
    table = pd.read_csv(out / "probe.csv")
    kept = pd.read_csv(out / "kept_per_layer.csv", index_col=0)
    assert list(table.neurons) == ["all", "tau=0.5"]
    assert table.n_neurons[0] == sum(summary["blocks"].values()) == 3 * 32
    assert kept["tau=0.5"].sum() == table.n_neurons[1]
    assert list(kept.index) == list(summary["blocks"])
    # Baselines from the labels alone, recomputed here from the same 80/10/10 split.
    sentences = read_conllu(files["conllu"])
    order = np.random.default_rng(0).permutation(len(sentences))
    test = [sentences[i] for i in sorted(order[6:12])]
    train = [sentences[i] for i in sorted(order[12:])]
    train_tags = [t for s in train for t in s.upos]
    test_tags = [t for s in test for t in s.upos]
    majority = max(set(train_tags), key=train_tags.count)
    assert table.majority[0] == pytest.approx(np.mean([t == majority for t in test_tags]))
    assert summary["n_words"]["test"] == len(test_tags)
    assert ((table.test_accuracy >= 0) & (table.test_accuracy <= 1)).all()
    assert table.selectivity.to_numpy() == pytest.approx(table.test_accuracy - table.control)


# ---------------------------------------------------------------------- aliases
def test_aliases_hand_their_arguments_to_the_existing_entries(capsys):
    status, out, _ = run_cli(capsys, "reproduce", "--list")
    assert status == 0 and "chapters:" in out and "zhang2022_lmd" in out
    status, _, err = run_cli(capsys, "reproduce", "--profile", "nonesuch", "--list")
    assert status == 2 and "nonesuch" in err


@pytest.mark.slow  # three fresh interpreters under torchrun
def test_torchrun_launches_lmsim_extract(files, tmp_path):
    from lmsim.moments import Moments

    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    args = ["extract", str(files["clf"][0]), "--texts", str(files["texts"]), "--device", "cpu"]
    args += ["--shard-size", "4", "--no-cache", "--quiet"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    done = subprocess.run(
        [*torchrun, "--nproc_per_node", "2", "-m", "lmsim.cli", *args, "--out", "two.st"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert main([*args, "--out", str(tmp_path / "one.st")]) == 0
    two, one = Moments.load(tmp_path / "two.st"), Moments.load(tmp_path / "one.st")
    assert two.n == one.n
    torch.testing.assert_close(two.cov(two.names), one.cov(one.names), rtol=0, atol=0)
