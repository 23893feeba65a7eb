"""Reliability: nothing from the cache executes code, cache keys are content hashes,
corrupt cache files are named, moved aside and recomputed, builds are deterministic."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch
from _helpers import tiny_two_tower_settings, tiny_zoo_profile

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


# ------------------------------------------------- verified entries, owned folders only


def _flip(path: Path, at: int = -64, n: int = 8) -> None:
    """Overwrite ``n`` bytes near the end with 0xff (float NaNs): the same size, other bytes."""
    data = bytearray(path.read_bytes())
    data[at : at + n] = b"\xff" * n
    path.write_bytes(bytes(data))


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_load_finetuned_never_moves_or_deletes_what_it_does_not_own(tmp_path):
    """Issue 33, defect 1: a folder without finetune.json is refused, and neither it nor
    its parent is renamed or removed, however often it is asked for."""
    from lmsim.finetune import load_finetuned
    from lmsim.models import model_dir

    project = tmp_path / "project"
    (project / "mymodel").mkdir(parents=True)
    (project / "notes.txt").write_text("results")
    built = model_dir("tiny-bert")  # a whole lmsim entry, but not a fine-tune
    before = _tree(tmp_path)
    for target in (project / "mymodel", project / "mymodel", built, built / "config.json"):
        with pytest.raises(FileNotFoundError, match="fine-tune"):
            load_finetuned(target)
    assert _tree(tmp_path) == before
    assert (project / "notes.txt").read_text() == "results"


def test_only_marked_entries_are_moved_and_corrupt_copies_are_numbered(tmp_path):
    """A folder without lmsim's marker is never moved (nor at a cache path); each new
    corruption of an entry gets its own ``.corrupt.<k>``, none overwrites an older one."""
    from lmsim._io import entry_dir, move_aside, open_entry

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.txt").write_text("mine")
    with pytest.raises(ValueError, match="refusing to move .*not an lmsim cache entry"):
        move_aside(foreign, "test", "nothing")
    with pytest.raises(FileExistsError, match="not an lmsim cache entry"):
        open_entry(foreign, "recomputing it")
    assert (foreign / "data.txt").read_text() == "mine"

    entry = tmp_path / "entry"
    for round_ in range(3):
        with entry_dir(entry) as tmp:
            (tmp / "payload.bin").write_bytes(bytes([round_]) * 100)
        assert open_entry(entry, "rebuilding it")
        _flip(entry / "payload.bin", at=10)
        with pytest.warns(UserWarning, match=r"payload\.bin's sha256 differs"):
            assert not open_entry(entry, "rebuilding it")
    copies = sorted(p.name for p in tmp_path.glob("entry.corrupt*"))
    assert copies == ["entry.corrupt", "entry.corrupt.1", "entry.corrupt.2"]
    assert [(tmp_path / c / "payload.bin").read_bytes()[0] for c in copies] == [0, 1, 2]
    shard = tmp_path / "shard.safetensors"  # a one-file entry (a shard, published stats)
    for round_ in range(3):
        shard.write_bytes(bytes([round_]))
        with pytest.warns(UserWarning, match=r"moved it to shard\.safetensors\.corrupt"):
            move_aside(shard, "test", "recomputing it")
    files = sorted(tmp_path.glob("shard.safetensors.corrupt*"))
    assert [(f.name[len("shard.safetensors") :], f.read_bytes()) for f in files] == [
        (".corrupt", b"\x00"),
        (".corrupt.1", b"\x01"),
        (".corrupt.2", b"\x02"),
    ]


@pytest.mark.parametrize("kind", ["tiny-model", "zoo-model", "fine-tune"])
def test_same_size_corruption_is_caught_by_sha256_and_rebuilt(kind):
    """Issue 33, defect 3: overwritten weights of the same size (NaN bytes) are named,
    moved aside and rebuilt to the same bytes; before, they loaded as NaN weights."""
    import dataclasses

    from safetensors.torch import load_file

    if kind == "tiny-model":
        from lmsim.models import model_dir

        def build():
            return model_dir("tiny-bert")
    elif kind == "zoo-model":
        prof = dataclasses.replace(TINY, name="sha", steps=2)

        def build():
            return zoo.model_dir("mlm-s0", prof)
    else:
        from lmsim.data import load_classification
        from lmsim.finetune import FinetuneSettings, finetune

        d = load_classification("smoke")
        settings = FinetuneSettings(
            base="tiny-bert", max_length=12, batch_size=8, epochs=1.0, lr=1e-2, device="cpu"
        )

        def build():
            texts, labels = d["train_texts"][:16], d["train_labels"][:16]
            return finetune(texts, labels, d["label_names"], settings, name="sha")

    path = build()
    weights = path / "model.safetensors"
    before = {k: v.clone() for k, v in load_file(weights).items()}
    size = weights.stat().st_size
    _flip(weights)
    assert weights.stat().st_size == size
    with pytest.warns(
        UserWarning, match=r"corrupt cache entry .*model\.safetensors's sha256 differs"
    ):
        again = build()
    assert again == path and path.with_name(path.name + ".corrupt").is_dir()
    after = load_file(path / "model.safetensors")
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_an_entry_written_before_markers_is_adopted_not_rebuilt():
    """Caches built by an earlier lmsim (no marker, sizes in their facts file) stay valid:
    the first read checks their sizes and records every file's sha256."""
    from lmsim._io import MARKER, entry_status
    from lmsim.models import model_dir

    path = model_dir("tiny-bert")
    (path / MARKER).unlink()
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert model_dir("tiny-bert") == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp, "not rebuilt"
    assert entry_status(path) == ("whole", "")
    _flip(path / "model.safetensors")
    with pytest.warns(UserWarning, match="sha256 differs"):
        model_dir("tiny-bert")


def _deny_writes_under(monkeypatch, root: Path) -> None:
    """A read-only cache, simulated (the tests may run as root, whom chmod does not stop):
    creating folders or temporary folders below ``root`` fails, os.access says no."""
    import tempfile

    root = root.resolve()

    def below(path) -> bool:
        return Path(path).resolve().is_relative_to(root)

    real_mkdir, real_mkdtemp, real_access = Path.mkdir, tempfile.mkdtemp, os.access

    def mkdir(self, *args, **kwargs):
        if below(self):
            raise PermissionError(13, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    def mkdtemp(*args, dir=None, **kwargs):
        if dir is not None and below(dir):
            raise PermissionError(13, "Permission denied", str(dir))
        return real_mkdtemp(*args, dir=dir, **kwargs)

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and below(path):
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(os, "access", access)


def test_a_read_only_cache_is_read_and_writing_to_it_is_named(monkeypatch):
    """Issue 33, defect 2: a shared cache that already holds a built model, and is not
    writable, serves it; only building something new there fails, naming the folder."""
    from lmsim.extract import extract_moments
    from lmsim.models import load_model

    texts = ["the cat sat on the mat", "a dog barked"]
    kw = {"device": "cpu", "progress": False}
    before = extract_moments(["tiny-bert"], texts, cache=False, **kw)
    cached = extract_moments(["tiny-bert"], texts, cache=True, **kw)
    _deny_writes_under(monkeypatch, Path(os.environ["LMSIM_CACHE"]))
    again = extract_moments(["tiny-bert"], texts, cache=False, **kw)
    assert torch.equal(again._comoment, before._comoment)
    assert torch.equal(extract_moments(["tiny-bert"], texts, **kw)._comoment, cached._comoment)
    load_model("tiny-bert", device="cpu")
    with pytest.raises(
        PermissionError,
        match=r"cannot write .*tiny-gpt2.*models' is not "
        r"writable .*set LMSIM_CACHE to a writable folder",
    ):
        load_model("tiny-gpt2", device="cpu")


def test_published_stats_recompute_a_file_holding_nan(tmp_path):
    """Issue 33, defect 9: statistics overwritten with NaN, or saved with NaN by an earlier
    lmsim, are recomputed (before, the lazy read returned them and the merge failed later)."""
    from safetensors.torch import save_file

    from lmsim.papers.jin2023_regmean import published_stats

    calls = []

    def compute():
        calls.append(1)
        return {"w": torch.eye(4, dtype=torch.float64)}

    path = tmp_path / "m.grams.safetensors"
    published_stats("grams", "m", compute, root=tmp_path)
    _flip(path, at=-16)  # NaN bytes over the last Gram entries, same size
    with pytest.warns(UserWarning, match=r"m\.grams\.safetensors's sha256 differs"):
        out = published_stats("grams", "m", compute, root=tmp_path)
    assert len(calls) == 2 and torch.equal(out["w"], torch.eye(4, dtype=torch.float64))
    # A file written before markers, holding NaN: lmsim's by its header, damaged.
    legacy = tmp_path / "old.grams.safetensors"
    meta = {"lmsim_kind": "grams", "lmsim_format": "1", "shapes": '{"w": [4, 4]}', "user": "{}"}
    save_file({"w": torch.full((4, 4), torch.nan, dtype=torch.float64)}, str(legacy), meta)
    with pytest.warns(UserWarning, match=r"old\.grams\.safetensors: .*NaN"):
        out = published_stats("grams", "old", compute, root=tmp_path)
    assert len(calls) == 3 and torch.isfinite(out["w"]).all()
    assert (tmp_path / "old.grams.safetensors.corrupt").is_file()


# ------------------------------------------------------------------ two-tower runs heal


def _tower_settings():
    from lmsim import twotower as tt

    settings = tiny_two_tower_settings()
    spec = tt.RunSpec("elmo-s0", tt.TowerConfig("elmo", hidden=8, layers=2, heads=2), seed=0)
    return tt, settings, spec


def _weights(path: Path) -> dict:
    return torch.load(path / "weights.pt", weights_only=True)


def _same(a: dict, b: dict) -> bool:
    return all(torch.equal(a[p][k], b[p][k]) for p in ("model", "heads") for k in a[p])


def test_a_damaged_two_tower_run_is_named_and_retrained():
    """Issue 33, defect 6: a truncated weights.pt no longer counts as a finished run, and
    load_two_tower names the file instead of failing in torch's zip reader."""
    tt, settings, spec = _tower_settings()
    path = tt.train_two_tower(spec, settings, "heal", progress=False)
    good = _weights(path)
    _truncate(path / "weights.pt")
    with pytest.raises(ValueError, match=r"weights\.pt .*differs|weights\.pt has \d+ bytes"):
        tt.load_two_tower(path)
    with pytest.warns(UserWarning, match=r"corrupt cache entry .*weights\.pt has \d+ bytes"):
        again = tt.train_two_tower(spec, settings, "heal", progress=False)
    assert again == path and _same(good, _weights(path))
    assert tt.load_two_tower(path).facts["frozen_bit_identical"]


def test_a_corrupt_phase1_state_is_redone_and_the_run_still_matches(tmp_path):
    """Issue 33, defect 6: phase1.pt is read under the same guard: a corrupt one is moved
    aside and phase 1 trained again, to the same weights as an uninterrupted run."""
    tt, settings, spec = _tower_settings()
    whole = _weights(tt.train_two_tower(spec, settings, "p1-whole", progress=False))
    tt.train_two_tower(spec, settings, "p1", progress=False, _stop_after=2)
    work = tt.train_two_tower(spec, settings, "p1", progress=False, _stop_after=2)
    assert (work / "phase1.pt").is_file(), "phase 1 done, phase 2 interrupted"
    (work / "phase1.pt").write_bytes(b"PK\x03\x04 not a torch file")
    with pytest.warns(UserWarning, match=r"phase1\.pt"):
        path = tt.train_two_tower(spec, settings, "p1", progress=False)
    assert _same(whole, _weights(path))


def test_a_kill_in_the_second_head_keeps_the_finished_first_one(monkeypatch):
    """Issue 33, defect 11: after an interruption in phase 2's tower 2, tower 1's finished
    head is read back, not trained again; the run equals an uninterrupted one."""
    import lmsim.twotower.training as training

    tt, settings, spec = _tower_settings()
    whole = _weights(tt.train_two_tower(spec, settings, "k-whole", progress=False))
    real_train, calls, interrupt = training.train, [], [True]

    def train(run, train_settings, work, device, desc, progress, stop_after):
        calls.append(desc)
        stop = 2 if interrupt[0] and desc.endswith("head 2") else stop_after
        return real_train(run, train_settings, work, device, desc, progress, stop)

    monkeypatch.setattr(training, "train", train)
    work = tt.train_two_tower(spec, settings, "k", progress=False)
    assert work.name.endswith(".partial") and calls[-1].endswith("head 2")
    interrupt[0] = False
    del calls[:]
    path = tt.train_two_tower(spec, settings, "k", progress=False)
    assert calls == ["elmo-s0 head 2"], "only tower 2's head is trained on (phase 1, tower 1 read)"
    assert _same(whole, _weights(path))


# ------------------------------------------------------------------- the runner's files


def test_a_corrupt_times_file_does_not_fail_a_finished_run(tmp_path, capsys):
    """Issue 33, defect 7: every run used to end in a traceback (exit 1) after writing good
    pages when _build/<profile>_times.json was corrupt."""
    import nbformat
    import yaml

    from lmsim import reproduce

    repo = tmp_path / "repo"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Demo"),
        nbformat.v4.new_code_cell("n: int = 2  # a count", metadata={"tags": ["parameters"]}),
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
    times = repo / "_build" / "default_times.json"
    times.parent.mkdir(parents=True)
    times.write_text('{"demo/01_a": {"wall_t')  # cut short by a crash
    argv = ["--root", str(repo), "--profile", "default", "--no-progress"]
    assert reproduce.main(argv) == 0
    assert "default_times.json is unreadable" in capsys.readouterr().err
    assert json.loads(times.read_text())["demo/01_a"]["status"] == "ok"
    assert (repo / "book" / "demo" / "01_a.ipynb").is_file()


def test_file_hashes_are_remembered_only_while_a_settled_file_is_unchanged(tmp_path, monkeypatch):
    """A model folder is hashed once per process, not by every loader that checks it; a
    file written just before (file times tick in milliseconds) is never remembered."""
    import time

    from lmsim import _io

    path = tmp_path / "f.bin"
    path.write_bytes(b"a" * 1000)
    opened, real_open = [], open

    def counting_open(file, *args, **kwargs):
        opened.append(file)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(_io, "open", counting_open, raising=False)
    first = _io.file_record(path)
    assert _io.file_record(path) == first and len(opened) == 2, "just written: hashed again"
    monkeypatch.setattr(_io, "_SETTLED_NS", -(10**15))  # as if written long ago
    _io.file_record(path)
    assert _io.file_record(path) == first and len(opened) == 3, "unchanged: remembered"
    time.sleep(0.05)
    path.write_bytes(b"b" * 1000)  # the same size, a later change time
    assert _io.file_record(path)["sha256"] != first["sha256"]


# ------------------------------------------- issue 46: markers tie themselves to entries


def _whole_entry(folder: Path, payload: bytes = b"x" * 100) -> Path:
    from lmsim._io import entry_dir

    with entry_dir(folder) as tmp:
        (tmp / "weights.bin").write_bytes(payload)
    return folder


def test_a_forged_or_copied_marker_makes_nothing_whole_or_deletable(tmp_path):
    """Issue 46, item 4: a marker listing no files, a sidecar copied beside a user's file,
    marker paths outside the entry and a copy of a whole entry under another name made
    "whole" entries that the runner's release deleted; none is whole now, none deleted."""
    import shutil

    from lmsim._io import MARKER, entry_status, file_record, open_entry, write_entry_file
    from lmsim.reproduce._budget import release_entries

    kind = {"lmsim": "lmsim cache entry", "state": "complete"}
    cache = tmp_path / "cache"
    forged = cache / "forged"
    forged.mkdir(parents=True)
    (forged / "thesis.tex").write_text("mine")
    (forged / MARKER).write_text(json.dumps({**kind, "files": {}}))
    # A one-file entry, and its sidecar copied beside a user's file in the same folder.
    real = cache / "g.safetensors"
    write_entry_file(real, lambda p: p.write_bytes(b"g" * 40))
    sidecar = real.with_name(real.name + ".lmsim.json")
    user = cache / "notes.safetensors"
    user.write_bytes(b"n" * 40)
    shutil.copy(sidecar, user.with_name(user.name + ".lmsim.json"))
    # Marker paths outside the entry (relative '..', absolute) verify nothing.
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    escapes = []
    for rel in ("../../secret.txt", str(secret)):
        escapes.append(cache / f"escape{len(escapes)}")
        escapes[-1].mkdir()
        (escapes[-1] / MARKER).write_text(json.dumps({**kind, "files": {rel: file_record(secret)}}))
    # A byte-identical copy of a whole entry under another name, a file of the user's added.
    whole = _whole_entry(cache / "key-1")
    copy = cache / "key-1-copy"
    shutil.copytree(whole, copy)
    (copy / "mine.txt").write_text("mine")
    plain_copy = cache / "key-1-plain-copy"
    shutil.copytree(whole, plain_copy)

    assert entry_status(forged)[0] == "corrupt" and entry_status(user)[0] == "foreign"
    for escape in escapes:
        status, detail = entry_status(escape)
        assert status == "corrupt" and "not a path inside the entry" in detail
    status, detail = entry_status(plain_copy)
    assert status == "foreign" and "written for the entry 'key-1'" in detail
    with pytest.raises(FileExistsError, match="not an lmsim cache entry"):
        open_entry(plain_copy, "recomputing it")
    targets = [forged, user, *escapes, copy, plain_copy]
    assert release_entries(targets) == ([], 0.0)
    assert (forged / "thesis.tex").read_text() == "mine" and user.read_bytes() == b"n" * 40
    assert all(e.is_dir() for e in escapes) and secret.read_text() == "outside"
    assert (copy / "mine.txt").is_file() and (plain_copy / "weights.bin").is_file()
    assert entry_status(whole) == ("whole", "") and entry_status(real) == ("whole", "")
    assert release_entries([whole, real])[0] == [real, whole]  # lmsim's own: released


def test_zoo_rebuild_never_deletes_a_folder_lmsim_did_not_write(monkeypatch):
    """Issue 46, item 3: `python -m lmsim.zoo build --rebuild` ran rmtree on
    zoo/<profile>/<name> whatever it held; a user's folder there, or a build holding a
    user's file, is never deleted: the first is refused (FileExistsError, exit 2), the
    second is not a whole build and is moved aside, the user's file in it."""
    from lmsim.zoo import builder
    from lmsim.zoo import cli as zoo_cli
    from lmsim.zoo.profiles import _root, get_profile

    built = []
    monkeypatch.setattr(builder, "build_model", lambda name, *a, **k: built.append(name))
    monkeypatch.setattr(builder, "_is_built", lambda path: path.is_dir())
    smoke = get_profile("smoke")
    mine = _root(smoke) / "clm-s0"
    mine.mkdir(parents=True)
    (mine / "draft.txt").write_text("my notes")
    assert zoo_cli.main(["build", "--profile", "smoke", "--only", "clm-s0", "--rebuild"]) == 2
    assert (mine / "draft.txt").read_text() == "my notes" and built == []
    # A build of lmsim's with a user's file put inside is not whole: moved aside with the
    # file, never deleted.
    lmsims = _whole_entry(_root(TINY) / "clm-s0")
    (lmsims / "results.csv").write_text("a user's file")
    with pytest.warns(UserWarning, match=r"does not list \(results\.csv\); moved it to clm-s0"):
        zoo.build(["clm-s0"], TINY, progress=False, rebuild=True)
    kept = _root(TINY) / "clm-s0.corrupt"
    assert (kept / "results.csv").read_text() == "a user's file" and built == ["clm-s0"]
    # A whole build of lmsim's alone is deleted and trained again.
    lmsims = _whole_entry(_root(TINY) / "clm-s0")
    zoo.build(["clm-s0"], TINY, progress=False, rebuild=True)
    assert not lmsims.exists() and built == ["clm-s0", "clm-s0"]


def test_a_dangling_link_at_a_corrupt_name_is_skipped_and_the_warning_tells_the_truth(tmp_path):
    """Issue 46, item 12: a dangling `<entry>.corrupt.1` link stopped a corrupt folder entry
    from ever being moved aside (with a message blaming a read-only cache), and a corrupt
    file entry was reported "moved" when it was not."""
    from lmsim._io import open_entry, write_entry_file

    entry = _whole_entry(tmp_path / "entry")
    (tmp_path / "entry.corrupt").mkdir()
    (tmp_path / "entry.corrupt.1").symlink_to(tmp_path / "nowhere")
    _flip(entry / "weights.bin", at=10)
    with pytest.warns(UserWarning, match=r"moved it to entry\.corrupt\.2 and"):
        assert not open_entry(entry, "recomputing it")
    assert not entry.exists() and (tmp_path / "entry.corrupt.2" / "weights.bin").is_file()
    assert (tmp_path / "entry.corrupt.1").is_symlink()
    shard = tmp_path / "shard.bin"
    write_entry_file(shard, lambda p: p.write_bytes(b"s" * 50))
    (tmp_path / "shard.bin.corrupt").write_bytes(b"older")
    (tmp_path / "shard.bin.corrupt.1").symlink_to(tmp_path / "nowhere")
    _flip(shard, at=10)
    with pytest.warns(UserWarning, match=r"moved it to shard\.bin\.corrupt\.2 and"):
        assert not open_entry(shard, "recomputing it")
    assert not shard.exists() and (tmp_path / "shard.bin.corrupt.2").is_file()
    assert (tmp_path / "shard.bin.corrupt").read_bytes() == b"older"
