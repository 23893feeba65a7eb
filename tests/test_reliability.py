"""Reliability: nothing from the cache executes code, cache keys are content hashes,
corrupt cache files are named, moved aside and recomputed, builds are deterministic."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import torch

from lmsim import zoo

TINY = zoo.ZooProfile(
    name="tiny",
    vocab_size=300,
    hidden=16,
    layers=2,
    deep_layers=4,
    heads=2,
    seq_len=16,
    batch_size=8,
    steps=4,
    lr=3e-3,
    max_train_lines=300,
    max_valid_lines=40,
    max_ft_train=24,
    max_ft_test=24,
    eval_every=2,
    n_eval_chunks=4,
    checkpoint_every=2,
)


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    yield


# ----------------------------------------------------------------- no code from the cache


class _Payload:
    """Pickles to a call of ``Path.write_text(marker)``: code that runs on unpickling."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "pwned"))


def test_crafted_checkpoint_pickle_is_refused_and_the_build_completes(tmp_path):
    marker = tmp_path / "marker"
    work = Path(os.environ["LMSIM_CACHE"]) / "zoo" / "tiny" / ".mlm-s0.partial"
    work.mkdir(parents=True)
    crafted = work / "checkpoint.pt"
    torch.save({"modules": _Payload(marker), "optimizer": {}, "step": 1}, crafted)
    assert not marker.exists()
    with pytest.warns(UserWarning, match=r"cannot resume from .*checkpoint\.pt"):
        path = zoo.build_model("mlm-s0", TINY, progress=False)
    assert not marker.exists(), "unpickling the crafted checkpoint ran its code"
    assert (path / "model.safetensors").is_file() and (path / "zoo.json").is_file()


def test_no_unsafe_deserialisation_in_the_package():
    root = Path(__file__).resolve().parents[1] / "lmsim"
    banned = ("weights_only=False", "trust_remote_code=True", "yaml.load(", "pickle.load")
    for path in root.rglob("*.py"):
        text = path.read_text()
        for needle in banned:
            assert needle not in text, f"{path}: {needle}"
        for line in text.splitlines():
            if "torch.load(" in line and "``" not in line:
                assert "weights_only=True" in line, f"{path}: {line.strip()}"


# ----------------------------------------------------------------- deterministic builds

_BUILD = """
import hashlib, sys
from lmsim.models import model_dir
for model in sys.argv[1:]:
    path = model_dir(model)
    for name in ("tokenizer.json", "model.safetensors"):
        print(model, name, hashlib.sha256((path / name).read_bytes()).hexdigest())
"""


def test_tiny_model_builds_are_identical_across_fresh_caches(tmp_path, monkeypatch):
    """One build here, one in a fresh process (the WordPiece trainer's hash-map order
    differed per process), each in its own empty cache: the same bytes."""
    import subprocess
    import sys

    from lmsim.models import model_dir

    names = ["tiny-bert", "tiny-gpt2"]
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "a"))
    lines = []
    for model in names:
        path = model_dir(model)
        for name in ("tokenizer.json", "model.safetensors"):
            digest = hashlib.sha256((path / name).read_bytes()).hexdigest()
            lines.append(f"{model} {name} {digest}")
    env = {**os.environ, "LMSIM_CACHE": str(tmp_path / "b"), "OMP_NUM_THREADS": "1"}
    fresh = subprocess.run(
        [sys.executable, "-c", _BUILD, *names],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    ).stdout
    assert len(lines) == 4
    assert lines == [line for line in fresh.splitlines() if line.startswith("tiny-")]
