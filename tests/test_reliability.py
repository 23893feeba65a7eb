"""Reliability: nothing from the cache executes code, cache keys are content hashes,
corrupt cache files are named, moved aside and recomputed, builds are deterministic."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch
from _helpers import tiny_zoo_profile

from lmsim import zoo

TINY = tiny_zoo_profile()


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


# ----------------------------------------------------------------- corrupt cache entries


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def test_moments_load_refuses_metadata_that_disagree_with_tensors(tmp_path):
    import json

    import numpy as np
    from safetensors.torch import save_file

    from lmsim.moments import Moments

    rng = np.random.default_rng(0)
    mom = Moments.from_arrays({"a": rng.normal(size=(20, 3)), "b": rng.normal(size=(20, 2))})
    good = tmp_path / "good.safetensors"
    mom.save(good)
    assert Moments.load(good).n == 20
    tensors = {"mean": mom._mean, "comoment": mom._comoment}
    cases = {
        "widths.safetensors": ({"n": "20", "dims": json.dumps([["a", 2], ["b", 3]])}, None),
        "sum.safetensors": ({"n": "20", "dims": json.dumps([["a", 3], ["b", 3]])}, "sum to 6"),
        "square.safetensors": (
            {"n": "20", "dims": json.dumps([["a", 3], ["b", 2]])},
            "not \\(5, 5\\)",
        ),
        "count.safetensors": ({"n": "-4", "dims": json.dumps([["a", 3], ["b", 2]])}, "negative"),
        "nodims.safetensors": ({"n": "20"}, "metadata 'dims'/'n'"),
    }
    for name, (meta, pattern) in cases.items():
        data = dict(tensors)
        if name == "square.safetensors":
            data["comoment"] = mom._comoment[:, :4].contiguous()
        save_file(data, str(tmp_path / name), metadata=meta)
        if pattern is None:  # same total width, other split: undetectable, loads
            assert Moments.load(tmp_path / name).dims == {"a": 2, "b": 3}
            continue
        with pytest.raises(ValueError, match=rf"{name}.*{pattern}"):
            Moments.load(tmp_path / name)
    _truncate(good)
    with pytest.raises(ValueError, match=r"good\.safetensors is not a readable moments file"):
        Moments.load(good)


def test_truncated_cached_tiny_model_is_rebuilt():
    from lmsim.models import load_model, model_dir

    model, _ = load_model("tiny-bert", device="cpu")
    # Copies: the loaded tensors may be memory-mapped from the file truncated below.
    reference = {k: v.clone() for k, v in model.state_dict().items()}
    del model
    weights = model_dir("tiny-bert") / "model.safetensors"
    _truncate(weights)
    with pytest.warns(UserWarning, match=r"tiny-bert.*model\.safetensors has \d+ bytes"):
        again, _ = load_model("tiny-bert", device="cpu")
    assert (weights.parent.parent / "tiny-bert.corrupt").is_dir()
    for key, value in again.state_dict().items():
        assert torch.equal(value, reference[key]), key


@pytest.mark.parametrize("damage", ["zoo.json", "model.safetensors"])
def test_damaged_zoo_model_is_named_moved_aside_and_rebuilt(damage):
    import dataclasses

    from safetensors.torch import load_file

    prof = dataclasses.replace(TINY, name="damage", steps=2)
    path = zoo.build_model("mlm-s0", prof, progress=False)
    before = {k: v.clone() for k, v in load_file(path / "model.safetensors").items()}
    _truncate(path / damage)
    with pytest.warns(UserWarning, match=rf"corrupt cache entry .*mlm-s0.*{damage}"):
        again = zoo.model_dir("mlm-s0", prof)
    assert again == path and (path.parent / "mlm-s0.corrupt").is_dir()
    after = load_file(path / "model.safetensors")
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert zoo.model_facts("mlm-s0", prof)["steps"] == 2


def test_unreadable_zoo_tokenizer_is_rebuilt():
    from lmsim.zoo.text import tokenizer_dir

    prof = dataclasses_replace_tiny(vocab_size=200)
    path = tokenizer_dir(prof)
    good = (path / "tokenizer.json").read_bytes()
    _truncate(path / "tokenizer.json")
    with pytest.warns(UserWarning, match=r"tokenizer.*moved it to tokenizer\.corrupt"):
        assert tokenizer_dir(prof) == path
    assert (path / "tokenizer.json").read_bytes() == good


def dataclasses_replace_tiny(**changes):
    import dataclasses

    return dataclasses.replace(TINY, **changes)


def test_atomic_writes_of_one_file_from_two_threads_do_not_collide(tmp_path):
    """Threads of one process writing the same file (the extraction manifest) each use their
    own temporary: none renames or removes another's, and the file is one whole payload."""
    import threading

    from lmsim._io import write_json_atomic

    path, errors = tmp_path / "manifest.json", []
    barrier = threading.Barrier(4)

    def work(i):
        barrier.wait()
        try:
            for k in range(200):
                write_json_atomic(path, {"writer": i, "k": k, "pad": "x" * 2000})
        except Exception as err:  # noqa: BLE001 - any failure is the finding
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:1]
    assert json.loads(path.read_text())["k"] == 199
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
