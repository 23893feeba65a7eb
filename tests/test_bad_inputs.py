"""The bad-input battery: one table of hostile or mistaken inputs, each of which must fail
with a given exception type and a message that names the problem (and usually the fix).

Each case is ``(category, id, call, exception type, regex)``; ``call(ctx)`` gets a
:class:`Ctx` with a temporary folder, tiny models built from configs (never the hub) and
helpers. Categories: models, extraction, metrics, moments, data, runner, zoo, labels
(every task kind's labels and label names), analysis (probes, clustering, merging) and
caches (files lmsim reads back, and folders it must not touch). The runner is
driven in-process through ``reproduce.main``; a non-zero exit becomes :class:`CLIError`
holding the status and what was printed to stderr, so a case can check both.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import save_file

from lmsim import data, models, reproduce, tasks, twotower, zoo
from lmsim.cluster import cluster_neurons
from lmsim.extract import extract_activations, extract_moments
from lmsim.extract.layer_pairs import pairwise_by_model_pairs
from lmsim.finetune import FinetuneSettings, finetune, load_finetuned
from lmsim.merge import load_fishers, load_grams, merge_models, save_fishers, save_grams
from lmsim.metrics import (
    attnsim,
    linear_cka,
    neuronsim,
    pairwise_matrix,
    pwcca,
    rbf_cka,
    svcca,
)
from lmsim.moments import Moments
from lmsim.papers.jin2023_regmean import published_stats
from lmsim.papers.thesis2022_redundancy.selection import select_representatives
from lmsim.papers.thesis2022_redundancy.subset_controls import paired_bootstrap
from lmsim.probe import control_labels, get_top_neurons, train_probe
from lmsim.training import TrainSettings

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXTS = ["the cat sat on the mat", "a dog barked", "green ideas sleep"]
RNG = np.random.default_rng(0)
X = RNG.normal(size=(30, 4))
Y = RNG.normal(size=(30, 3))


class CLIError(Exception):
    """``reproduce.main`` returned a non-zero status; ``str`` is ``exit N: <stderr>``."""


@dataclass
class Ctx:
    tmp: Path
    bert: tuple
    gpt2: tuple
    mom_path: Path
    repo: Path

    def pair(self, which: str = "bert") -> dict:
        return {which: getattr(self, which)}

    def extract(self, texts=TEXTS, **kw):
        kw.setdefault("device", "cpu")
        kw.setdefault("progress", False)
        return extract_moments(kw.pop("models", self.pair()), texts, **kw)

    def cli(self, *args: str) -> int:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = reproduce.main(["--root", str(self.repo), *args])
        if status != 0:
            raise CLIError(f"exit {status}: {err.getvalue()}")
        return status

    def moments_file(self, name: str, meta: dict, square: bool = True) -> Path:
        mom = Moments.load(self.mom_path)
        tensors = {"mean": mom._mean, "comoment": mom._comoment}
        if not square:
            tensors["comoment"] = mom._comoment[:, :-1].contiguous()
        path = self.tmp / name
        save_file(tensors, str(path), metadata=meta)
        return path

    def conllu(self, rows: list[str]) -> Path:
        path = self.tmp / "bad.conllu"
        path.write_text("# sent_id = s1\n" + "\n".join(rows) + "\n\n")
        return path


def _row(i: int, form: str, head: int | str) -> str:
    return f"{i}\t{form}\t{form}\tNOUN\t_\t_\t{head}\tdep\t_\t_"


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    root = tmp_path_factory.mktemp("battery")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("LMSIM_CACHE", str(root / "cache"))
        bert = models.load_model(
            str(models.build_tiny_model("bert", root / "bert", vocab_size=200)), device="cpu"
        )
        gpt2 = models.load_model(
            str(models.build_tiny_model("gpt2", root / "gpt2", vocab_size=300)), device="cpu"
        )
    mom_path = root / "good.safetensors"
    Moments.from_arrays({"m/layer.0": X, "m/layer.1": Y}).save(mom_path)
    repo = root / "repo"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Demo"),
        nbformat.v4.new_code_cell(
            "n: int = 2  # a count\nrate: float = 0.5  # a rate\nmodels: list = ['a']  # names",
            metadata={"tags": ["parameters"]},
        ),
        nbformat.v4.new_code_cell("print(n)"),
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    (repo / "notebooks" / "demo").mkdir(parents=True)
    nbformat.write(nb, str(repo / "notebooks" / "demo" / "01_a.ipynb"))
    manifest = {"chapters": [{"slug": "demo", "title": "Demo", "notebooks": [{"name": "01_a"}]}]}
    (repo / "notebooks" / "runs.yml").write_text(yaml.safe_dump(manifest))
    return bert, gpt2, mom_path, repo


@pytest.fixture
def ctx(shared, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "cache"))
    bert, gpt2, mom_path, repo = shared
    return Ctx(tmp_path, bert, gpt2, mom_path, repo)


def _file_as_cache(c: Ctx):
    (c.tmp / "afile").write_text("not a folder")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LMSIM_CACHE", str(c.tmp / "afile"))
        c.extract()


def _read_only_cache(c: Ctx):
    # Simulated: the tests may run as root, for whom chmod does not deny writes.
    def deny(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LMSIM_CACHE", str(c.tmp / "ro"))
        mp.setattr(Path, "mkdir", deny)
        c.extract()


def _bad_manifest(c: Ctx, text: str, *args: str):
    repo = c.tmp / "repo"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "notebooks" / "runs.yml").write_text(text)
    c.repo = repo
    return c.cli(*args)


def _missing_notebook(c: Ctx):
    manifest = {"chapters": [{"slug": "x", "notebooks": [{"name": "01_gone"}]}]}
    return _bad_manifest(c, yaml.safe_dump(manifest))


def _zoo_not_built(c: Ctx):
    return zoo.model_dir("mlm-s0", "smoke", build=False)


# A tiny fine-tune: the labels are checked before any model is loaded.
FT = FinetuneSettings(base="tiny-bert", max_length=12, batch_size=4, epochs=1.0, device="cpu")
FT_TEXTS = ["the cat sat", "a dog barked", "the cat ran", "a dog sat"]


def _finetune(c: Ctx, labels, names=("neg", "pos"), kind="single_label"):
    return finetune(FT_TEXTS, labels, list(names), FT, kind=kind, name="bad-labels")


def _task(train_labels, kind="single_label", names=("neg", "pos"), metric="accuracy"):
    return tasks.Task("t", kind, names, metric, train=(["a"], train_labels), test=(["b"], [0]))


def _emotion(c: Ctx, *rows, source="tec"):
    """``load_task`` of a unified emotion file holding ``rows`` (str or bytes lines)."""
    path = c.tmp / "unified.jsonl"
    path.write_bytes(b"".join(r if isinstance(r, bytes) else (r + "\n").encode() for r in rows))
    return data.load_task(f"emotion:{path}#{source}")


ROW = '{"source": "tec", "text": "a happy day", "emotions": {"joy": 1}, "split": null}'


def _foreign_folder_at_a_cache_path(c: Ctx):
    """A user's folder where lmsim would keep a built model: refused, never moved."""
    folder = c.tmp / "cache" / "models" / "tiny-bert"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    return models.load_model("tiny-bert", device="cpu")


def _stats_file(c: Ctx, kind: str, keep: int | None, garbage: bool = False) -> Path:
    """A Grams or Fishers file, cut to its first ``keep`` bytes or replaced by garbage."""
    path = c.tmp / f"{kind}.safetensors"
    save = save_grams if kind == "grams" else save_fishers
    save(path, {"w": torch.eye(3, dtype=torch.float64)})
    data_ = b"not a safetensors header" * 4 if garbage else path.read_bytes()[:keep]
    path.write_bytes(data_)
    return path


def _corrupt_source_notebook(c: Ctx):
    repo = c.tmp / "repo"
    (repo / "notebooks" / "x").mkdir(parents=True)
    (repo / "notebooks" / "x" / "01_a.ipynb").write_text('{"cells": [')  # cut short
    manifest = {"chapters": [{"slug": "x", "notebooks": [{"name": "01_a"}]}]}
    (repo / "notebooks" / "runs.yml").write_text(yaml.safe_dump(manifest))
    c.repo = repo
    return c.cli()


# -------------------------------------------------------------------------------- cases
E = "extraction"
# fmt: off
CASES = [
    # ------------------------------------------------------------------ models
    ("models", "unknown-name", lambda c: models.load_model("no-such-model", device="cpu"),
     ValueError, r"unknown model 'no-such-model'.*offline models"),
    ("models", "name-not-str", lambda c: models.load_model(123, device="cpu"),
     ValueError, r"`name` must be a non-empty str, got 123"),
    ("models", "device-unknown", lambda c: models.load_model("tiny-bert", device="tpu"),
     ValueError, r"`device` must be .*got 'tpu'"),
    ("models", "dtype-unknown", lambda c: models.load_model("tiny-bert", device="cpu", dtype="float8"),
     ValueError, r"`dtype` must be .*got 'float8'"),
    ("models", "task-unknown", lambda c: models.load_model("tiny-bert", device="cpu", task="bogus"),
     ValueError, r"`task` must be one of .*got 'bogus'"),
    ("models", "zoo-name-unknown", lambda c: models.load_model("zoo/bogus", device="cpu"),
     KeyError, r"unknown zoo model 'bogus'; the zoo has"),
    ("models", "zoo-profile-unknown",
     lambda c: models.load_model("zoo/mlm-s0", device="cpu", zoo_profile="huge"),
     ValueError, r"unknown zoo profile 'huge'; choose one of"),
    ("models", "dir-without-config",
     lambda c: (c.tmp / "empty").mkdir() or models.load_model(str(c.tmp / "empty"), device="cpu"),
     ValueError, r"empty' has no config\.json"),
    ("models", "dir-broken-config",
     lambda c: (c.tmp / "b").mkdir() or (c.tmp / "b" / "config.json").write_text("{x")
     and models.load_model(str(c.tmp / "b"), device="cpu"),
     OSError, r"b/config\.json' is not a valid JSON"),
    ("models", "hub-offline-not-cached",
     lambda c: models.load_model("someorg/no-such-model-xyz", device="cpu"),
     models.HubUnreachableError, r"'someorg/no-such-model-xyz' is not in the local .*OFFLINE"),
    ("models", "tokenizer-unknown", lambda c: models.load_tokenizer("no-such-model"),
     ValueError, r"unknown model 'no-such-model'"),
    ("models", "tiny-kind-unknown", lambda c: models.build_tiny_model("t5", c.tmp),
     ValueError, r"`kind` must be one of .*got 't5'"),
    ("models", "tiny-heads-indivisible",
     lambda c: models.build_tiny_model("bert", c.tmp, hidden_size=30, n_heads=4),
     ValueError, r"`hidden_size`=30 must be divisible by `n_heads`=4"),
    ("models", "seq-len-too-long", lambda c: models.check_seq_len(10**6, *c.bert, name="tb"),
     ValueError, r"maximum of \d+ positions of tb"),
    ("models", "cache-is-a-file", _file_as_cache,
     NotADirectoryError, r"lmsim cache .*afile.*LMSIM_CACHE.*is not a folder.*set LMSIM_CACHE"),
    ("models", "cache-read-only", _read_only_cache,
     PermissionError, r"lmsim cache .*ro.*LMSIM_CACHE.*not writable.*set LMSIM_CACHE"),
    ("models", "config-without-model-type",
     lambda c: (c.tmp / "e").mkdir() or (c.tmp / "e" / "config.json").write_text("{}")
     and models.load_model(str(c.tmp / "e"), device="cpu"),
     ValueError, r"e/config\.json' names no `model_type`: it is not a Hugging Face model config"),
    ("models", "task-without-a-head",
     lambda c: models.load_model("tiny-gpt2", device="cpu", task="masked-lm"),
     ValueError, r"model 'tiny-gpt2' is a 'gpt2' model, which has no 'masked-lm' head in "
     r"transformers; its tasks are \['base', 'causal-lm'"),
    # -------------------------------------------------------------- extraction
    (E, "texts-a-string", lambda c: c.extract("one text"),
     TypeError, r"`texts` must be a list of texts, got a single string; wrap it"),
    (E, "texts-empty-list", lambda c: c.extract([]), ValueError, r"`texts` is empty"),
    (E, "texts-empty-string", lambda c: c.extract(["a cat", "b", ""]),
     ValueError, r"texts\[2\] is empty or whitespace \(1 of 3"),
    (E, "texts-whitespace", lambda c: c.extract(["a cat", "  \n", ""]),
     ValueError, r"texts\[1\] is empty or whitespace \(2 of 3"),
    (E, "texts-not-str", lambda c: c.extract([1, 2]),
     TypeError, r"texts\[0\] is int"),
    (E, "texts-zero-width", lambda c: c.extract(["a cat", "\u200b\u200b"]),
     ValueError, r"texts\[1\] \('\\u200b\\u200b'\) holds only invisible characters \(zero-width"),
    (E, "texts-control-characters", lambda c: c.extract(["\x00\x01", "a cat"]),
     ValueError, r"texts\[0\] .* holds only invisible characters .*1 of 2 texts"),
    (E, "pooling-unknown", lambda c: c.extract(pooling="max"),
     ValueError, r"`pooling` must be one of .*'max'"),
    (E, "subword-unknown", lambda c: c.extract(pooling="word", subword="middle"),
     ValueError, r"`subword` must be one of .*'middle'"),
    (E, "layers-bool", lambda c: c.extract(layers=True),
     TypeError, r"got the bool True \(a bool is not a layer index\)"),
    (E, "layers-entry-bool", lambda c: c.extract(layers=[0, False]),
     TypeError, r"`layers` entries must be ints, got False \(bool\)"),
    (E, "layers-entry-float", lambda c: c.extract(layers=[1.5]),
     TypeError, r"`layers` entries must be ints, got 1\.5"),
    (E, "layers-out-of-range", lambda c: c.extract(layers=[0, 99]),
     ValueError, r"layer 99 does not exist in model 'bert'; valid layers are 0\.\.2"),
    (E, "layers-unknown-word", lambda c: c.extract(layers="first"),
     ValueError, r"`layers` must be 'all', 'last' .*'first'"),
    (E, "layers-dict-missing-model", lambda c: c.extract(layers={"other": [1]}),
     KeyError, r"without an entry for model 'bert'"),
    (E, "max-length-1", lambda c: c.extract(max_length=1),
     ValueError, r"`max_length`=1 leaves no room for text: .*adds 2 special.*max_length >= 3"),
    (E, "max-length-0", lambda c: c.extract(max_length=0),
     ValueError, r"`max_length` must be a positive int, got 0"),
    (E, "max-length-bool", lambda c: c.extract(max_length=True),
     ValueError, r"`max_length` must be a positive int, got True"),
    (E, "max-length-too-long", lambda c: c.extract(max_length=10**6),
     ValueError, r"`max_length`=1000000 exceeds model 'bert''s maximum of 128"),
    (E, "batch-size-0", lambda c: c.extract(batch_size=0, cache=False),
     ValueError, r"`batch_size` must be a positive int, got 0"),
    (E, "shard-size-0", lambda c: c.extract(shard_size=0),
     ValueError, r"`shard_size` must be a positive int, got 0"),
    (E, "distributed-without-a-group", lambda c: c.extract(distributed=True),
     RuntimeError, r"distributed=True but torch\.distributed is not initialised: launch with "
     r"`torchrun"),
    (E, "distributed-unknown", lambda c: c.extract(distributed="yes"),
     TypeError, r"`distributed` must be 'auto', True, False or a .*ProcessGroup, got 'yes'"),
    (E, "cache-extra-object", lambda c: c.extract(cache_key_extra=object()),
     TypeError, r"`cache_key_extra` is a object, which cannot be hashed by content.*pass str"),
    (E, "cache-extra-nested-set", lambda c: c.extract(cache_key_extra={"v": [1, {2}]}),
     TypeError, r"`cache_key_extra\['v'\]\[1\]` is a set"),
    (E, "cache-extra-object-array",
     lambda c: c.extract(cache_key_extra=np.array([object()])),
     TypeError, r"`cache_key_extra` is an object array"),
    (E, "models-a-string", lambda c: c.extract(models="tiny-bert"),
     TypeError, r"`models` must be a list of names or a dict, got the string 'tiny-bert'"),
    (E, "models-empty", lambda c: c.extract(models=[]), ValueError, r"`models` is empty"),
    (E, "models-not-a-pair", lambda c: c.extract(models={"m": c.bert[0]}),
     ValueError, r"`models\['m'\]` must be a \(model, tokenizer\) pair"),
    (E, "models-duplicate", lambda c: c.extract(models=["tiny-bert", "tiny-bert"]),
     ValueError, r"`models` has duplicate names"),
    (E, "word-pooling-strings", lambda c: c.extract(pooling="word"),
     TypeError, r"pooling='word' needs `texts` as sentences given as lists of words"),
    (E, "word-pooling-empty-sentence", lambda c: c.extract([["a"], []], pooling="word"),
     ValueError, r"texts\[1\] has no words"),
    (E, "paper-padding-without-max-length", lambda c: c.extract(paper_compat_padding=True),
     ValueError, r"paper_compat_padding=True .*pass max_length=T"),
    (E, "token-pooling-different-tokenizers",
     lambda c: c.extract(models={"b": c.bert, "g": c.gpt2}, pooling="token"),
     ValueError, r"pooling='token' needs models that tokenise identically, but 'b' and 'g' "
     r"differ on texts\[0\]"),
    (E, "activations-layers-bool",
     lambda c: extract_activations(c.pair(), TEXTS, layers=True, device="cpu", progress=False),
     TypeError, r"a bool is not a layer index"),
    # ----------------------------------------------------------------- metrics
    ("metrics", "complex", lambda c: linear_cka(X + 1j, Y),
     TypeError, r"`X` is complex \(complex128\).*x\.real"),
    ("metrics", "complex-tensor", lambda c: linear_cka(X, torch.tensor(Y) * 1j),
     TypeError, r"`Y` is a complex tensor"),
    ("metrics", "strings", lambda c: svcca(X.astype(str), Y),
     TypeError, r"`X` must hold real numbers, got dtype <U"),
    ("metrics", "objects", lambda c: neuronsim(X, Y.astype(object)),
     TypeError, r"`Y` must hold real numbers, got dtype object"),
    ("metrics", "overflow", lambda c: linear_cka(X * 1e200, Y),
     ValueError, r"`X` has values up to .*e\+200.*overflow float64.*divide `X`"),
    ("metrics", "underflow", lambda c: pwcca(X, Y * 1e-200),
     ValueError, r"`Y` has values of at most .*e-200.*underflow.*multiply `Y`"),
    ("metrics", "nan", lambda c: linear_cka(np.where(X > 1, np.nan, X), Y),
     ValueError, r"`X` contains \d+ non-finite values"),
    ("metrics", "rows-differ", lambda c: linear_cka(X, Y[:-1]),
     ValueError, r"same n_samples \(rows\), got 30 and 29"),
    ("metrics", "one-dimensional", lambda c: linear_cka(X[:, 0], Y),
     ValueError, r"`X` must be 2-D \(n_samples, n_features\), got shape \(30,\)"),
    ("metrics", "one-sample", lambda c: svcca(X[:1], Y[:1]),
     ValueError, r"need at least 2 samples"),
    ("metrics", "not-an-array", lambda c: linear_cka({"a": 1}, Y),
     TypeError, r"`X` must be a numpy array or torch tensor"),
    ("metrics", "constant-block", lambda c: linear_cka(np.ones_like(X), Y),
     ValueError, r"block 'X' has zero variance"),
    ("metrics", "svcca-threshold", lambda c: svcca(X, Y, threshold=2),
     ValueError, r"`threshold` .* must be in \(0, 1\], got 2"),
    ("metrics", "rbf-sigma", lambda c: rbf_cka(X, Y, sigma=-1),
     ValueError, r"`sigma` must be a positive bandwidth"),
    ("metrics", "attention-kind", lambda c: attnsim([np.eye(3)], [np.eye(3)], kind="bogus"),
     ValueError, r"unknown `kind` 'bogus'"),
    ("metrics", "pairwise-metric",
     lambda c: pairwise_matrix(Moments.load(c.mom_path), ["m/layer.0"], metric="bogus"),
     ValueError, r"unknown `metric` 'bogus'"),
    ("metrics", "moments-unknown-block",
     lambda c: linear_cka(Moments.load(c.mom_path), "m/layer.0", "m/layer.9"),
     KeyError, r"m/layer\.9"),
    ("metrics", "moments-one-name",
     lambda c: linear_cka(Moments.load(c.mom_path), "m/layer.0"),
     TypeError, r"needs two block names"),
    ("metrics", "moments-second",
     lambda c: linear_cka(X, Moments.load(c.mom_path)),
     TypeError, r"pass the moments first"),
    # ----------------------------------------------------------------- moments
    ("moments", "missing-file", lambda c: Moments.load(c.tmp / "nope.safetensors"),
     FileNotFoundError, r"no moments file at .*nope\.safetensors"),
    ("moments", "merge-ranks-without-a-group",
     lambda c: Moments.merge_all_ranks({0: Moments.load(c.mom_path)}, 1),
     RuntimeError, r"needs an initialised torch\.distributed process group; launch with torchrun"),
    ("moments", "truncated",
     lambda c: (c.tmp / "t.st").write_bytes(c.mom_path.read_bytes()[:200])
     and Moments.load(c.tmp / "t.st"),
     ValueError, r"t\.st is not a readable moments file"),
    ("moments", "not-safetensors",
     lambda c: (c.tmp / "x.st").write_text("hello") and Moments.load(c.tmp / "x.st"),
     ValueError, r"x\.st is not a readable moments file"),
    ("moments", "dims-sum-mismatch",
     lambda c: Moments.load(
         c.moments_file("d.st", {"n": "30", "dims": json.dumps([["a", 4], ["b", 4]])})),
     ValueError, r"d\.st: metadata and tensors disagree: block widths \[4, 4\] sum to 8"),
    ("moments", "comoment-not-square",
     lambda c: Moments.load(
         c.moments_file("s.st", {"n": "30", "dims": json.dumps([["a", 4], ["b", 3]])}, False)),
     ValueError, r"s\.st: .*'comoment' has shape \(7, 6\), not \(7, 7\)"),
    ("moments", "negative-count",
     lambda c: Moments.load(
         c.moments_file("n.st", {"n": "-1", "dims": json.dumps([["a", 4], ["b", 3]])})),
     ValueError, r"n\.st: .*sample count n=-1 is negative"),
    ("moments", "metadata-missing",
     lambda c: Moments.load(c.moments_file("m.st", {"n": "30"})),
     ValueError, r"m\.st: metadata 'dims'/'n' missing or malformed"),
    ("moments", "zero-width-block",
     lambda c: Moments.load(
         c.moments_file("z.st", {"n": "30", "dims": json.dumps([["a", 7], ["b", 0]])})),
     ValueError, r"z\.st: metadata .*block 'b' must have a positive integer width"),
    ("moments", "empty-layout", lambda c: Moments({}),
     ValueError, r"`dims` must name at least one block"),
    ("moments", "update-missing-block",
     lambda c: Moments.load(c.mom_path).update({"m/layer.0": X}),
     KeyError, r"missing blocks \['m/layer\.1'\]"),
    ("moments", "update-overflows-float64",
     lambda c: Moments({"a": 2}).update({"a": np.arange(10.0).reshape(5, 2) * 1e200}),
     ValueError, r"blocks \['a'\] reach 9e\+200 in magnitude: their products overflow float64"),
    ("moments", "width-not-an-int", lambda c: Moments({"x": 3.7}),
     ValueError, r"block 'x' must have a positive integer width, got 3\.7"),
    ("moments", "ragged-rows", lambda c: Moments.from_arrays({"a": [[1.0, 2.0], [3.0]]}),
     ValueError, r"block 'a' must be an array of numbers of shape \(n_samples, d\).*ragged"),
    ("moments", "merge-different-layouts",
     lambda c: Moments.load(c.mom_path).merge(Moments.from_arrays({"a": X})),
     ValueError, r"cannot merge moments of different blocks"),
    # -------------------------------------------------------------------- data
    ("data", "conllu-missing", lambda c: data.read_conllu(c.tmp / "none.conllu"),
     FileNotFoundError, r"no CoNLL-U file at .*none\.conllu"),
    ("data", "conllu-columns", lambda c: data.read_conllu(c.conllu(["1\tcat\tcat"])),
     ValueError, r"bad\.conllu:2: expected 10 tab-separated CoNLL-U columns, got 3"),
    ("data", "conllu-id-not-int",
     lambda c: data.read_conllu(c.conllu([_row(1, "a", 0).replace("1", "x", 1)])),
     ValueError, r"bad\.conllu:2: ID column must be an integer, got 'x'"),
    ("data", "conllu-ids-skip",
     lambda c: data.read_conllu(c.conllu([_row(1, "a", 0), _row(3, "b", 1)])),
     ValueError, r"bad\.conllu:3: word IDs must count 1, 2, \.\.\.; expected 2, got 3"),
    ("data", "conllu-head-not-int",
     lambda c: data.read_conllu(c.conllu([_row(1, "a", "x")])),
     ValueError, r"bad\.conllu:2: HEAD column must be an integer, got 'x'"),
    ("data", "conllu-head-beyond-sentence",
     lambda c: data.read_conllu(c.conllu([_row(1, "a", 0), _row(2, "b", 7)])),
     ValueError, r"bad\.conllu: sentence #1 \(sent_id s1\): word 2 has HEAD 7, beyond .* 2 words"),
    ("data", "conllu-cycle-no-root",
     lambda c: data.read_conllu(c.conllu([_row(1, "a", 2), _row(2, "b", 1), _row(3, "c", 0)])),
     ValueError, r"bad\.conllu: sentence #1 \(sent_id s1\): the heads of words \[1, 2\] form a "
     r"cycle that never reaches the root"),
    ("data", "conllu-no-sentences",
     lambda c: (c.tmp / "e.conllu").write_text("# only a comment\n")
     and data.read_conllu(c.tmp / "e.conllu"),
     ValueError, r"e\.conllu: no sentences found"),
    ("data", "conllu-latin1",
     lambda c: c.conllu([_row(1, "caf\u00e9", 0)]).write_bytes(
         c.conllu([_row(1, "caf\u00e9", 0)]).read_text().encode("latin-1"))
     and data.read_conllu(c.tmp / "bad.conllu"),
     ValueError, r"bad\.conllu:2: not UTF-8 text \(byte 0xe9 at column 6\)"),
    ("data", "corpus-binary-file",
     lambda c: (c.tmp / "c.txt").write_bytes(b"fine line\n\x89PNG\x00\x1a\n")
     and data.load_corpus(str(c.tmp / "c.txt")),
     ValueError, r"c\.txt:2: not UTF-8 text \(byte 0x89 at column 1\).*binary file"),
    ("data", "emotion-json-list", lambda c: _emotion(c, ROW, "[1, 2]"),
     ValueError, r"unified\.jsonl' line 2 is a JSON list, not an object"),
    ("data", "emotion-value-not-a-number", lambda c: _emotion(c, ROW.replace("1}", '"high"}')),
     ValueError, r"unified\.jsonl' line 1: emotion 'joy' is 'high'; emotion values are numbers"),
    ("data", "emotion-latin1", lambda c: _emotion(c, ROW.replace("happy", "caf\u00e9").encode("latin-1")),
     ValueError, r"unified\.jsonl:1: not UTF-8 text \(byte 0xe9"),
    ("data", "emotion-split-typo",
     lambda c: _emotion(c, *[ROW.replace('"tec"', '"x"').replace("null", '"tset"' if i == 1 else '"test"')
                              for i in range(3)], source="x"),
     ValueError, r"unified\.jsonl' line 2: split 'tset' is none of \['dev', 'test', 'train'"),
    ("data", "corpus-unknown", lambda c: data.load_corpus("nope"),
     ValueError, r"unknown corpus 'nope': use one of"),
    ("data", "corpus-split", lambda c: data.load_corpus("smoke", split="dev"),
     ValueError, r"`split` must be one of \['train', 'valid', 'test'\], got 'dev'"),
    ("data", "sentences-split", lambda c: data.load_sentences("smoke", split="dev"),
     ValueError, r"`split` must be one of .*got 'dev'"),
    ("data", "chunk-seq-len-0", lambda c: data.chunk_corpus(TEXTS, c.gpt2[1], 0, 1),
     ValueError, r"`seq_len` and `n_samples` must be >= 1, got 0 and 1"),
    ("data", "chunk-too-few", lambda c: data.chunk_corpus(TEXTS, c.gpt2[1], 8, 100),
     ValueError, r"fewer than `n_samples`=100; lower `n_samples` or `seq_len`"),
    ("data", "classification-unknown", lambda c: data.load_classification("nope"),
     ValueError, r"unknown classification set 'nope'; choose one of"),
    ("data", "split-fraction", lambda c: data.split_chunks([1, 2, 3], test_fraction=1.5),
     ValueError, r"`test_fraction` must be in \(0, 1\), got 1\.5"),
    ("data", "task-unknown", lambda c: data.load_task("nope"),
     ValueError, r"unknown task 'nope'; choose one of"),
    ("data", "task-smoke-no-domain", lambda c: data.load_task("smoke-ner"),
     ValueError, r"'smoke-ner' needs a domain, 'smoke-ner#<domain>' with one of"),
    ("data", "task-emotion-missing", lambda c: data.load_task(f"emotion:{c.tmp / 'u.jsonl'}#tec"),
     FileNotFoundError, r"no emotion collection at .*unify-emotion-datasets"),
    ("metrics", "entity-f1-lengths", lambda c: tasks.entity_f1([["O", "B-PER"]], [["O"]]),
     ValueError, r"sentence 0: 2 predicted tags but 1 gold tags"),
    ("metrics", "probe-tol-negative",
     lambda c: train_probe(X, np.arange(30) % 2, tol=-1, device="cpu"),
     ValueError, r"`tol` must be a finite relative decrease >= 0 or None, got -1"),
    ("metrics", "selection-policy-unknown",
     lambda c: select_representatives([0, 1], "best"),
     ValueError, r"`policy` must be one of \('random', 'first', 'last', 'max_score'\), got 'best'"),
    ("metrics", "bootstrap-groups-length",
     lambda c: paired_bootstrap([True, False], [True, True], groups=[0]),
     ValueError, r"`groups` must give one unit per word \(2\)"),
    ("metrics", "layersim-pair-unknown-model",
     lambda c: pairwise_by_model_pairs(["tiny-bert"], [["a"]], {}, pairs=[["tiny-bert", "nope"]]),
     ValueError, r"every entry of `pairs` must be two different names of `models`"),
    ("metrics", "macro-f1-not-binary", lambda c: tasks.multilabel_macro_f1([[2]], [[1]]),
     ValueError, r"`pred01` and `gold01` must hold only 0 and 1"),
    # ------------------------------------------------------------------ runner
    ("runner", "p-wrong-type-int", lambda c: c.cli("-p", "n", "many"),
     CLIError, r"exit 2: error: parameter `n` of .*01_a\.ipynb is declared `int` but got 'many'"),
    ("runner", "p-float-for-int", lambda c: c.cli("-p", "n", "2.5"),
     CLIError, r"exit 2: .*`n` .*declared `int` but got 2\.5 \(float\)"),
    ("runner", "p-bool-for-int", lambda c: c.cli("-p", "n", "yes"),
     CLIError, r"exit 2: .*`n` .*declared `int` but got True \(bool\)"),
    ("runner", "p-str-for-list", lambda c: c.cli("-p", "models", "a"),
     CLIError, r"exit 2: .*`models` .*declared `list` but got 'a' \(str\).*-p models '\[a, b\]'"),
    ("runner", "p-str-for-float", lambda c: c.cli("-p", "rate", "fast"),
     CLIError, r"exit 2: .*`rate` .*declared `float` but got 'fast'"),
    ("runner", "p-bad-yaml", lambda c: c.cli("-p", "models", "[a, b"),
     CLIError, r"exit 2: error: -p models '\[a, b': the value is not valid YAML"),
    ("runner", "p-undeclared", lambda c: c.cli("-p", "n_trian", "3"),
     CLIError, r"exit 2: .*\['n_trian'\] given with -p are declared by none"),
    ("runner", "profile-unknown", lambda c: c.cli("--profile", "fast"),
     CLIError, r"exit 2: error: unknown profile 'fast'"),
    ("runner", "plan-machine-unknown-key", lambda c: c.cli("--plan", "--machine", "ram=64"),
     CLIError, r"exit 2: error: --machine: unknown key 'ram'; known: \["),
    ("runner", "plan-machine-not-pairs", lambda c: c.cli("--plan", "--machine", "big"),
     CLIError, r"exit 2: error: --machine 'big': expected a YAML/JSON file or key=value pairs"),
    ("runner", "plan-machine-negative-disk", lambda c: c.cli("--plan", "--machine", "disk_gb=-5"),
     CLIError, r"exit 2: error: --machine: disk_gb='-5' must be a finite number > 0"),
    ("runner", "plan-machine-infinite-ram", lambda c: c.cli("--plan", "--machine", "ram_gb=inf"),
     CLIError, r"exit 2: error: --machine: ram_gb='inf' must be a finite number > 0"),
    ("runner", "plan-page-without-estimator", lambda c: c.cli("--plan"),
     CLIError, r"exit 2: error: no resource estimator for \w+/\w+: add one to lmsim/reproduce/_estimates/"),
    ("runner", "slug-unknown", lambda c: c.cli("--only", "nope"),
     CLIError, r"exit 2: error: unknown chapter slug\(s\) or page\(s\) \['nope'\]"),
    ("runner", "output-dir-is-file",
     lambda c: (c.tmp / "f").write_text("x") and c.cli("--output-dir", str(c.tmp / "f")),
     CLIError, r"exit 2: error: output folder .*f' cannot be created: .*is a file"),
    ("runner", "manifest-bad-yaml", lambda c: _bad_manifest(c, "chapters:\n - slug: a\n  b: [\n"),
     CLIError, r"exit 2: error: manifest .*runs\.yml' is not valid YAML at line \d+"),
    ("runner", "manifest-not-mapping", lambda c: _bad_manifest(c, "- a\n- b\n"),
     CLIError, r"exit 2: error: manifest .*runs\.yml' must be a mapping, got list"),
    ("runner", "manifest-chapters-not-list", lambda c: _bad_manifest(c, "chapters: 3\n"),
     CLIError, r"exit 2: error: `chapters` in .*runs\.yml' must be a list"),
    ("runner", "manifest-unknown-key",
     lambda c: _bad_manifest(c, "chapters:\n - slug: a\n   color: red\n"),
     CLIError, r"exit 2: error: chapter 'a' has unknown keys \['color'\]"),
    ("runner", "manifest-bad-source",
     lambda c: _bad_manifest(c, "chapters:\n - slug: a\n   notebooks:\n    - {name: p, source: q}\n"),
     CLIError, r"exit 2: error: `source: q` of a/p names no notebook: .*q\.ipynb does not exist"),
    ("runner", "manifest-bad-skip",
     lambda c: _bad_manifest(c, "chapters:\n - slug: a\n   notebooks:\n    - {name: p, paper: skipped}\n"),
     CLIError, r"exit 2: error: the 'paper' value of a/p must be a mapping .* or the string 'skip'"),
    ("runner", "manifest-missing-notebook", _missing_notebook,
     CLIError, r"exit 2: error: notebook x/01_gone is listed .* does not exist"),
    ("runner", "no-manifest", lambda c: setattr(c, "repo", c.tmp) or c.cli(),
     CLIError, r"exit 2: error: manifest .*runs\.yml' does not exist"),
    ("runner", "source-notebook-corrupt", _corrupt_source_notebook,
     CLIError, r"exit 2: error: notebook '.*x/01_a\.ipynb' cannot be read .*valid \.ipynb"),
    # --------------------------------------------------------------------- zoo
    ("zoo", "profile-unknown", lambda c: zoo.get_profile("huge"),
     ValueError, r"unknown zoo profile 'huge'"),
    ("zoo", "model-unknown", lambda c: zoo.model_dir("bert-huge", "smoke"),
     KeyError, r"unknown zoo model 'bert-huge'; the zoo has \['mlm-s0'"),
    ("zoo", "model-not-built", _zoo_not_built,
     FileNotFoundError, r"zoo model 'mlm-s0' \(profile 'smoke'\) is not built; .*lmsim\.zoo build"),
    ("zoo", "facts-not-built", lambda c: zoo.model_facts("clm-s0", "smoke"),
     FileNotFoundError, r"zoo model 'clm-s0' .*is not built"),
    ("zoo", "profile-heads", lambda c: zoo.ZooProfile(name="bad", hidden=10, heads=4),
     ValueError, r"divisible"),
    ("zoo", "profile-distil-positions",
     lambda c: zoo.ZooProfile(name="bad", distil_ce_positions="some"),
     ValueError, r"distil_ce_positions"),
    ("zoo", "build-jobs-0", lambda c: zoo.build(["mlm-s0"], "smoke", progress=False, jobs=0),
     ValueError, r"`jobs` must be >= 1, got 0"),
    ("zoo", "build-unknown-name", lambda c: zoo.build(["mlm-s9"], "smoke", progress=False),
     KeyError, r"unknown zoo model 'mlm-s9'"),
    ("zoo", "train-settings-lr", lambda c: TrainSettings(lr=-1.0),
     ValueError, r"`lr` must be a positive finite float, got -1\.0"),
    ("zoo", "train-settings-warmup", lambda c: TrainSettings(lr=1e-3, warmup_frac=1.0),
     ValueError, r"`warmup_frac` must lie in \[0, 1\), got 1\.0"),
    ("zoo", "vocab-too-small", lambda c: zoo.text.wordpiece_vocab({"abc": 3}, 4),
     ValueError, r"`vocab_size`=4 is smaller than the \d+ special tokens and characters"),
    ("zoo", "chunks-too-short", lambda c: zoo.make_chunks(np.arange(3), 16, 0),
     ValueError, r"the corpus has 3 tokens, fewer than one chunk of `seq_len`-1=15"),
    # ------------------------------------------------------------------ labels
    ("labels", "finetune-float-label", lambda c: _finetune(c, [0, 0.7, 1, 0]),
     ValueError, r"task 'bad-labels': labels\[1\] is the float 0\.7; a single_label label is an "
     r"int in range\(2\)"),
    ("labels", "finetune-probabilities-as-multi-hot",
     lambda c: _finetune(c, [[0.6, 0.4]] * 4, kind="multi_label"),
     ValueError, r"labels\[0\] is \[0\.6, 0\.4\], which holds 0\.6 \(not 0 or 1\); a multi_label "
     r"label is a multi-hot list of 2 zeros and ones"),
    ("labels", "finetune-duplicate-label-names", lambda c: _finetune(c, [0, 1, 0, 1], ("a", "a")),
     ValueError, r"`label_names` must be unique, got \['a'\] more than once"),
    ("labels", "finetune-class-names-as-labels",
     lambda c: _finetune(c, ["neg", "pos", "neg", "pos"]),
     ValueError, r"labels\[0\] is the string 'neg' \(a class name: map names to their index in "
     r"`label_names`\)"),
    ("labels", "task-float-label", lambda c: _task([0.7]),
     ValueError, r"'t' train labels\[0\] is the float 0\.7; a single_label label is an int"),
    ("labels", "task-bool-label", lambda c: _task([True]),
     ValueError, r"'t' train labels\[0\] is the bool True"),
    ("labels", "token-tags-per-word",
     lambda c: tasks.check_labels([[0]], "token", 3, [["a", "b"]]),
     ValueError, r"labels\[0\] is a list of 1 tags for 2 words"),
    ("labels", "label-names-a-string", lambda c: tasks.check_label_names("ab", "single_label"),
     TypeError, r"`label_names` must be a list of str, got str 'ab'"),
    # ---------------------------------------------------------------- analysis
    ("analysis", "probe-nan-activations",
     lambda c: train_probe(np.where(X > 1, np.nan, X), np.arange(30) % 2, device="cpu"),
     ValueError, r"`X_train` contains \d+ non-finite values \(NaN or Inf\) \(first at index "),
    ("analysis", "probe-activations-overflow-float32",
     lambda c: train_probe(X, np.arange(30) % 2, X_dev=X * 1e200, y_dev=np.arange(30) % 2,
                           device="cpu"),
     ValueError, r"`X_dev` has values beyond float32's range \(3\.4e38\), in which the probe "),
    ("analysis", "top-neurons-nan-weights", lambda c: get_top_neurons([[np.nan, 1.0]], 0.5),
     ValueError, r"`weights` contains 1 non-finite values"),
    ("analysis", "cluster-threshold-beyond-the-largest-distance",
     lambda c: cluster_neurons(X, 1.5),
     ValueError, r"`threshold`=1\.5 is beyond the largest distance 1 - \|r\| can take \(1\): every "
     r"neuron would fall in one cluster"),
    ("analysis", "control-labels-without-labels", lambda c: control_labels([], []),
     ValueError, r"`y_train` must be a non-empty 1-D array of labels"),
    ("analysis", "two-tower-tokenizer-train-size-not-a-number",
     lambda c: twotower.TwoTowerSettings(tokenizer="train:abc"),
     ValueError, r"`tokenizer` 'train:abc': after 'train:' give the vocabulary size as an integer"),
    ("analysis", "merge-a-single-model", lambda c: merge_models(torch.nn.Linear(3, 3)),
     TypeError, r"`models` must be a list of models .*got a single Linear; pass them all"),
    ("analysis", "merge-a-single-grams-dict",
     lambda c: merge_models([torch.nn.Linear(3, 3)] * 2, grams={"w": torch.eye(3)}),
     TypeError, r"`grams` must be a list with one entry per model, got a single dict"),
    # ------------------------------------------------------------------- caches
    ("caches", "load-finetuned-of-a-plain-folder",
     lambda c: (c.tmp / "project" / "mymodel").mkdir(parents=True)
     or load_finetuned(c.tmp / "project" / "mymodel"),
     FileNotFoundError, r"project/mymodel' holds no finetune\.json .*it is not a fine-tuned model "
     r"written by lmsim\.finetune"),
    ("caches", "foreign-folder-at-a-cache-path", _foreign_folder_at_a_cache_path,
     FileExistsError, r"models/tiny-bert' has no lmsim marker .*not an lmsim cache entry, and lmsim "
     r"never moves or deletes what it did not write"),
    ("caches", "load-two-tower-of-a-plain-folder", lambda c: twotower.load_two_tower(c.tmp),
     FileNotFoundError, r"has no lmsim marker .*it is not a finished two-tower run"),
    ("caches", "load-two-tower-of-another-lmsim-entry",
     lambda c: twotower.load_two_tower(models.model_dir("tiny-bert")),
     FileNotFoundError, r"tiny-bert' is an lmsim cache entry without run\.json and weights\.pt: "
     r"it is not a finished two-tower run"),
    ("caches", "grams-truncated", lambda c: load_grams(_stats_file(c, "grams", 60)),
     ValueError, r"grams\.safetensors' is not a readable grams file \(SafetensorError: .*\); it is "
     r"truncated or not safetensors"),
    ("caches", "grams-garbage-read-lazily",
     lambda c: load_grams(_stats_file(c, "grams", None, garbage=True), lazy=True),
     ValueError, r"grams\.safetensors' is not a readable grams file"),
    ("caches", "fishers-truncated", lambda c: load_fishers(_stats_file(c, "fishers", 60)),
     ValueError, r"fishers\.safetensors' is not a readable fishers file"),
    ("caches", "merge-with-a-corrupt-grams-file",
     lambda c: merge_models([torch.nn.Linear(3, 3)] * 2, grams=[_stats_file(c, "grams", 60)] * 2),
     ValueError, r"grams\.safetensors' is not a readable grams file"),
    ("caches", "published-stats-non-finite",
     lambda c: published_stats("grams", "k", lambda: {"w": torch.full((2, 2), torch.nan)},
                               root=c.tmp),
     ValueError, r"the grams computed for 'k' hold NaN or Inf in 'w'; nothing was saved"),
]
# fmt: on

CATEGORIES = (
    "models",
    "extraction",
    "metrics",
    "moments",
    "data",
    "runner",
    "zoo",
    "labels",
    "analysis",
    "caches",
)


@pytest.mark.parametrize(
    "category, case_id, call, exc_type, pattern",
    CASES,
    ids=[f"{case[0]}-{case[1]}" for case in CASES],
)
def test_bad_input_gives_a_clear_error(ctx, category, case_id, call, exc_type, pattern):
    assert category in CATEGORIES
    with pytest.raises(exc_type) as info:
        call(ctx)
    message = str(info.value)
    if isinstance(info.value, KeyError) and info.value.args:
        message = str(info.value.args[0])
    assert re.search(pattern, message, flags=re.DOTALL), (
        f"{category}/{case_id}: {type(info.value).__name__}: {message}"
    )
    assert "Traceback" not in message


def test_battery_covers_every_category_and_ids_are_unique():
    ids = [(c[0], c[1]) for c in CASES]
    assert len(ids) == len(set(ids))
    counts = {cat: sum(c[0] == cat for c in CASES) for cat in CATEGORIES}
    assert all(n >= 5 for n in counts.values()), counts
    assert len(CASES) >= 60


def test_truncation_at_the_models_own_limit_is_warned(ctx):
    """A text longer than the model's positions is cut there: said when the caller set no
    ``max_length`` (with one, truncating is what was asked)."""
    long = "the cat sat on the mat " * 60
    with pytest.warns(
        UserWarning,
        match=r"1 of 2 texts are longer than model 'bert''s 128 "
        r"positions and were truncated there \(texts\[0\] has \d+ tokens\)",
    ):
        ctx.extract([long, "a cat"], cache=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ctx.extract([long, "a cat"], cache=False, max_length=16)
