"""Run language models and capture what they compute: hidden states, attentions, linear inputs.

This is the only module of lmsim that touches model internals. Everything else works on
the arrays or :class:`~lmsim.moments.Moments` it returns.

Hidden states
    :func:`extract_moments` and :func:`extract_activations` run any Hugging Face encoder or
    decoder over a list of texts and pool the hidden states of the embedding layer and of
    every transformer layer (as ``output_hidden_states`` numbers them: ``layer.0`` is the
    embedding output, ``layer.L`` the last layer, after the final norm where the model has
    one) into one row per sequence (``pooling="mean"``), per word (``"word"``) or per token
    (``"token"``). Several models see the same texts batch by batch, so their rows align
    and one joint :class:`~lmsim.moments.Moments` holds the blocks ``"{model}/layer.{i}"``
    of all of them. Both functions share one batch iterator (``_pooled_batches``).

Data parallel
    Under ``torch.distributed`` (``torchrun``, ``accelerate launch``; ``python -m
    lmsim.extract`` is a command-line entry) :func:`extract_moments` splits its shards over
    the ranks and merges them exactly, and :func:`extract_activations` its batches.

Attentions
    :func:`extract_attentions` returns per-head attention probabilities converted from
    subwords to words as Wu et al. (2020, Sec. 4) and Clark et al. (2019) do, cached by
    content like the moments (one safetensors file per key, checked against its sha256).

Linear-layer inputs
    :func:`extract_linear_grams` records the inputs of every ``nn.Linear`` (and GPT-2
    ``Conv1D``) with forward pre-hooks, the statistics RegMean merges with, on texts, text
    pairs or word lists encoded as fine-tuning encodes them (:mod:`lmsim.encoding`).

Classifier logits
    :func:`extract_logits` runs a sequence or token classifier over the same encodings
    (word-level logits for token classifiers); :func:`model_inputs` is the one place a
    padded batch becomes the tensors a model takes.

Conventions shared by all extractors
    * Padding is on the right and the attention mask hides it; padded positions never
      enter any statistic (except through the denominator with ``paper_compat_padding``).
    * Special tokens (``[CLS]``, ``[SEP]``, ``<s>``) are *real* tokens: they are in the
      attention mask, so sequence means and token rows include them, as the LMD authors'
      mask-based mean does. Word rows and word attentions exclude them (they belong to no
      word).
    * Sequences longer than ``max_length`` tokens (default: the model's maximum number of
      positions) are truncated; with ``pooling="word"`` a truncation that would drop a
      word raises instead, since rows must stay aligned across models.
    * Models are switched to ``eval()`` mode (dropout off) and run under
      ``torch.inference_mode()``; on CUDA under ``torch.autocast`` (bfloat16 unless
      ``dtype`` says otherwise), on CPU in float32. Pooling and moment updates happen on
      the model's device.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm.auto import tqdm

from lmsim._io import check_record, file_record, move_aside, write_atomic, write_json_atomic
from lmsim._runtime import architecture, autocast_dtype, resolve_device
from lmsim.blocks import block_name
from lmsim.encoding import (
    encode_inputs,
    forward_keys,
    input_form,
    model_kind,
    pad_batch,
    resolve_kind,
)
from lmsim.encoding import word_tokenizer as _word_tokenizer
from lmsim.moments import Moments

__all__ = [
    "extract_moments",
    "extract_activations",
    "extract_attentions",
    "extract_linear_grams",
    "extract_logits",
    "model_inputs",
    "scoped_hooks",
    "record_outputs",
    "block_name",
]

POOLINGS = ("mean", "word", "token")
SUBWORDS = ("last", "first", "mean")
# Bump when the extraction semantics change: old cache folders are then never reused.
_CACHE_VERSION = 2


# ====================================================================== hooks
@contextlib.contextmanager
def scoped_hooks(
    registrations: Sequence[tuple[nn.Module, Callable, str]],
) -> Iterator[list[torch.utils.hooks.RemovableHandle]]:
    """Register forward (pre-)hooks for the duration of a ``with`` block.

    The hooks are removed in ``finally``, so an exception inside the block (or inside a
    hook) never leaves a model with stray hooks.

    Parameters
    ----------
    registrations : sequence of (module, hook, kind)
        ``kind`` is ``"forward"`` (``hook(module, args, output)``) or ``"pre"``
        (``hook(module, args)``).

    Yields
    ------
    handles : list of RemovableHandle
    """
    handles = []
    try:
        for module, hook, kind in registrations:
            if kind == "forward":
                handles.append(module.register_forward_hook(hook))
            elif kind == "pre":
                handles.append(module.register_forward_pre_hook(hook))
            else:
                raise ValueError(f"hook kind must be 'forward' or 'pre', got {kind!r}")
        yield handles
    finally:
        for handle in handles:
            handle.remove()


def _first_tensor(output) -> torch.Tensor:
    """The hidden-state tensor of a module output: a tensor, a tuple's first item, or
    a ``ModelOutput``'s first field (transformers 5 decoder layers return tensors, older
    versions tuples)."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, Mapping):
        output = tuple(output.values())
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise TypeError(f"cannot find a tensor in a module output of type {type(output).__name__}")


@contextlib.contextmanager
def record_outputs(model: nn.Module, module_names: Sequence[str]) -> Iterator[dict]:
    """Capture the outputs of named submodules during forward passes.

    Parameters
    ----------
    model : nn.Module
    module_names : sequence of str
        Names as in ``model.named_modules()``, e.g. ``"encoder.layer.3"``.

    Yields
    ------
    captured : dict of str to Tensor
        Filled by each forward pass with the module's output tensor (tuple outputs give
        their first element), overwritten by the next pass.
    """
    modules = dict(model.named_modules())
    unknown = [n for n in module_names if n not in modules]
    if unknown:
        raise KeyError(f"modules {unknown} not found in the model; see model.named_modules()")
    captured: dict[str, torch.Tensor] = {}

    def make_hook(name):
        def hook(_module, _args, output):
            captured[name] = _first_tensor(output)

        return hook

    with scoped_hooks([(modules[n], make_hook(n), "forward") for n in module_names]):
        yield captured


# ====================================================================== devices
def _autocast(device: torch.device, amp_dtype: torch.dtype | None):
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=amp_dtype)


# ====================================================================== models
@dataclass
class _Run:
    """One model prepared for extraction."""

    name: str
    model: nn.Module
    tokenizer: object
    layers: list[int] = field(default_factory=list)
    max_length: int = 0
    pad_id: int = 0


def _load_models(models, device, dtype, zoo_profile) -> list[tuple[str, nn.Module, object]]:
    if isinstance(models, (str, bytes)):
        raise TypeError(
            f"`models` must be a list of names or a dict, got the string {models!r}; wrap it: [{models!r}]"
        )
    if isinstance(models, Mapping):
        items = []
        for name, pair in models.items():
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(
                    f"`models[{name!r}]` must be a (model, tokenizer) pair, got {type(pair).__name__}"
                )
            items.append((str(name), pair[0], pair[1]))
    else:
        names = list(models)
        if len(set(names)) != len(names):
            raise ValueError(
                f"`models` has duplicate names {names}: each block name must be unique"
            )
        from lmsim.models import load_model

        items = [
            (name, *load_model(name, device=device, dtype=dtype, zoo_profile=zoo_profile))
            for name in names
        ]
    if not items:
        raise ValueError(
            "`models` is empty: pass at least one model name or (model, tokenizer) pair"
        )
    for name, model, _tok in items:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model {name!r} is a {type(model).__name__}, not a torch nn.Module")
    return items


def _n_layers(model: nn.Module) -> int:
    n_layers = architecture(model)["n_layers"]
    if not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"cannot read the number of layers from {type(model).__name__}'s config")
    return n_layers


def _max_positions(model: nn.Module, tokenizer) -> int:
    """Longest input the model accepts: its position limit, lowered by the tokenizer's
    ``model_max_length`` where that is set (RoBERTa: 514 positions but 512 usable)."""
    limits = []
    value = architecture(model)["max_positions"]
    if isinstance(value, int) and value > 0:
        limits.append(value)
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < 1_000_000:  # larger values mean "unset"
        limits.append(value)
    return min(limits) if limits else 1_000_000


def _resolve_layers(spec, name: str, n_layers: int) -> list[int]:
    if isinstance(spec, Mapping):
        if name not in spec:
            raise KeyError(
                f"`layers` is a dict without an entry for model {name!r}; keys: {list(spec)}"
            )
        spec = spec[name]
    valid = (
        f"0..{n_layers} (0 = embeddings; negative indices -{n_layers + 1}..-1 count from the end)"
    )
    if isinstance(spec, (bool, np.bool_)):
        raise TypeError(
            f"`layers` must be 'all', 'last', an int or a list of ints, got the bool {spec!r} "
            "(a bool is not a layer index)"
        )
    if isinstance(spec, str) and spec not in ("all", "last"):
        raise ValueError(f"`layers` must be 'all', 'last' or a list of ints, got {spec!r}")
    if spec == "all":
        return list(range(n_layers + 1))
    if spec == "last":
        return [n_layers]
    if isinstance(spec, (int, np.integer)):
        spec = [int(spec)]
    if isinstance(spec, str) or not isinstance(spec, Sequence) or not spec:
        raise ValueError(
            f"`layers` must be 'all', 'last' or a non-empty list of ints, got {spec!r}"
        )
    out = []
    for layer in spec:
        if not isinstance(layer, (int, np.integer)) or isinstance(layer, (bool, np.bool_)):
            raise TypeError(
                f"`layers` entries must be ints, got {layer!r} ({type(layer).__name__})"
            )
        if not -(n_layers + 1) <= layer <= n_layers:
            raise ValueError(
                f"layer {layer} does not exist in model {name!r}; valid layers are {valid}"
            )
        index = int(layer) % (n_layers + 1)
        if index not in out:
            out.append(index)
    return out


def _prepare(models, layers, max_length, device, dtype, zoo_profile="default") -> list[_Run]:
    runs = []
    for name, model, tokenizer in _load_models(models, device, dtype, zoo_profile):
        model.eval()
        if _model_device(model) != device:
            model.to(device)
        n_layers = _n_layers(model)
        limit = _max_positions(model, tokenizer)
        if max_length is not None:
            if (
                not isinstance(max_length, (int, np.integer))
                or isinstance(max_length, bool)
                or max_length < 1
            ):
                raise ValueError(f"`max_length` must be a positive int, got {max_length!r}")
            n_special = _n_special_tokens(tokenizer)
            if max_length <= n_special:
                # transformers ignores such a max_length (BERT) or keeps only <s> (Llama)
                raise ValueError(
                    f"`max_length`={max_length} leaves no room for text: model {name!r}'s "
                    f"tokenizer adds {n_special} special token(s) to every text; pass "
                    f"max_length >= {n_special + 1}"
                )
            if max_length > limit:
                raise ValueError(
                    f"`max_length`={max_length} exceeds model {name!r}'s maximum of {limit} "
                    "positions; pass max_length <= that (longer texts are truncated)"
                )
        pad_id = getattr(tokenizer, "pad_token_id", None)
        if pad_id is None:
            pad_id = getattr(tokenizer, "eos_token_id", None) or 0
        runs.append(
            _Run(
                name=name,
                model=model,
                tokenizer=tokenizer,
                layers=_resolve_layers(layers, name, n_layers),
                max_length=int(max_length if max_length is not None else limit),
                pad_id=int(pad_id),
            )
        )
    return runs


def _n_special_tokens(tokenizer) -> int:
    count = getattr(tokenizer, "num_special_tokens_to_add", None)
    try:
        return int(count(pair=False)) if callable(count) else 0
    except Exception:  # noqa: BLE001 - a tokenizer without this notion adds none we know of
        return 0


def _model_device(model: nn.Module) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def _backbone(model: nn.Module) -> nn.Module:
    """The transformer without its task head (hidden states are the same, and no
    vocabulary-sized logits are computed)."""
    base = getattr(model, "base_model", None)
    return base if isinstance(base, nn.Module) else model


# ====================================================================== tokenisation
@dataclass
class _Encoded:
    """One model's tokenisation of all texts and where each output row comes from.

    ``rows[k]``, ``pos[k]``, ``weight[k]`` say that output row ``rows[k]`` of the text
    receives ``weight[k] * h[pos[k]]``: a mean, a word's subword(s) or single tokens are
    all such weighted gathers.
    """

    ids: list[list[int]]
    rows: list[np.ndarray]
    pos: list[np.ndarray]
    weight: list[np.ndarray]
    n_rows: np.ndarray  # (n_texts,)
    word_ids: list[list] | None = None  # per text, token -> word index or None

    @property
    def n_tokens(self) -> np.ndarray:
        return np.array([len(x) for x in self.ids], dtype=np.int64)


def _check_texts(texts, pooling: str) -> list:
    if isinstance(texts, (str, bytes)):
        raise TypeError("`texts` must be a list of texts, got a single string; wrap it: [text]")
    texts = list(texts)
    if not texts:
        raise ValueError("`texts` is empty: pass at least one text")
    for i, text in enumerate(texts):
        if pooling == "word":
            if isinstance(text, str) or not isinstance(text, Sequence):
                raise TypeError(
                    f"pooling='word' needs `texts` as sentences given as lists of words; "
                    f"texts[{i}] is {type(text).__name__}: split it first (e.g. text.split())"
                )
            if not text:
                raise ValueError(f"texts[{i}] has no words: drop empty sentences")
            bad = [w for w in text if not isinstance(w, str) or not w.strip()]
            if bad:
                raise ValueError(f"texts[{i}] contains empty or non-string words {bad[:3]!r}")
        elif not isinstance(text, str):
            raise TypeError(
                f"pooling={pooling!r} needs `texts` as a list of strings; texts[{i}] is "
                f"{type(text).__name__} (use pooling='word' for lists of words)"
            )
    if pooling != "word":
        empty = [i for i, text in enumerate(texts) if not text.strip()]
        if empty:
            # An empty text would be pooled from the special tokens alone: a row that
            # describes the tokenizer, not the text.
            raise ValueError(
                f"texts[{empty[0]}] is empty or whitespace ({len(empty)} of {len(texts)} "
                "texts are): drop them first, e.g. [t for t in texts if t.strip()]"
            )
    return texts


def _texts_fingerprint(texts: list) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(json.dumps(text, ensure_ascii=False).encode())
        digest.update(b"\x00")
    return digest.hexdigest()


def _encode(
    run: _Run,
    texts: list,
    pooling: str,
    subword: str,
    paper_compat_padding: bool,
    lowercase: bool,
) -> _Encoded:
    tokenizer = run.tokenizer
    if lowercase:
        texts = [[w.lower() for w in t] if pooling == "word" else t.lower() for t in texts]
    kwargs = dict(truncation=True, max_length=run.max_length, add_special_tokens=True)
    if pooling == "word":
        tokenizer = _word_tokenizer(tokenizer)
        enc = tokenizer(texts, is_split_into_words=True, **kwargs)
    else:
        enc = tokenizer(texts, **kwargs)
    ids = [list(x) for x in enc["input_ids"]]
    word_ids = [enc.word_ids(i) for i in range(len(ids))] if pooling == "word" else None
    rows, pos, weight, n_rows = [], [], [], []
    for i, seq in enumerate(ids):
        n = len(seq)
        if n == 0:
            raise ValueError(
                f"texts[{i}] produced zero tokens with model {run.name!r}'s tokenizer: "
                "drop empty texts or use a tokenizer that adds special tokens"
            )
        if n > run.max_length:
            raise ValueError(
                f"model {run.name!r}'s tokenizer returned {n} tokens for texts[{i}] although "
                f"max_length={run.max_length}: it does not truncate as asked; raise max_length"
            )
        if pooling == "mean":
            denom = run.max_length if paper_compat_padding else n
            r, p, w = np.zeros(n, np.int64), np.arange(n), np.full(n, 1.0 / denom)
        elif pooling == "token":
            r, p, w = np.arange(n), np.arange(n), np.ones(n)
        else:
            r, p, w = _word_rows(word_ids[i], len(texts[i]), subword, i, run)
        rows.append(r)
        pos.append(np.asarray(p, np.int64))
        weight.append(np.asarray(w, np.float32))
        n_rows.append(int(r.max()) + 1)
    return _Encoded(
        ids=ids, rows=rows, pos=pos, weight=weight, n_rows=np.array(n_rows), word_ids=word_ids
    )


def _word_rows(word_ids: list, n_words: int, subword: str, i: int, run: _Run):
    positions: list[list[int]] = [[] for _ in range(n_words)]
    for t, w in enumerate(word_ids):
        if w is not None:
            positions[w].append(t)
    missing = [j for j, p in enumerate(positions) if not p]
    if missing:
        raise ValueError(
            f"words {missing[:5]} of texts[{i}] got no tokens from model {run.name!r} "
            f"(truncated at max_length={run.max_length} tokens, or the tokenizer drops them); "
            "raise `max_length` or shorten the sentence"
        )
    rows, pos, weight = [], [], []
    for j, p in enumerate(positions):
        if subword == "last":
            p = p[-1:]
        elif subword == "first":
            p = p[:1]
        rows += [j] * len(p)
        pos += p
        weight += [1.0 / len(p)] * len(p)
    return np.array(rows, np.int64), np.array(pos, np.int64), np.array(weight)


def _check_alignment(runs: list[_Run], encs: list[_Encoded], pooling: str) -> None:
    if pooling == "token":
        first = encs[0]
        for run, enc in zip(runs[1:], encs[1:]):
            for i, (a, b) in enumerate(zip(first.ids, enc.ids)):
                if a != b:
                    raise ValueError(
                        f"pooling='token' needs models that tokenise identically, but "
                        f"{runs[0].name!r} and {run.name!r} differ on texts[{i}]; extract "
                        "them separately or use pooling='word' to align rows by words"
                    )
    else:
        for run, enc in zip(runs[1:], encs[1:]):
            if not np.array_equal(enc.n_rows, encs[0].n_rows):
                raise ValueError(f"row counts of {runs[0].name!r} and {run.name!r} differ")


# ====================================================================== batches
def _batches(
    indices: np.ndarray, lengths: np.ndarray, batch_size: int, sort: bool
) -> list[np.ndarray]:
    if sort:
        # Longest first: a memory error shows up at once, not after most of the work.
        indices = indices[np.argsort(-lengths[indices], kind="stable")]
    return [indices[s : s + batch_size] for s in range(0, len(indices), batch_size)]


def _pad(run: _Run, enc: _Encoded, batch: np.ndarray, pad_to: int | None, device):
    seqs = [enc.ids[i] for i in batch]
    width = pad_to if pad_to is not None else max(len(s) for s in seqs)
    input_ids = torch.full((len(seqs), width), run.pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for b, seq in enumerate(seqs):
        input_ids[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[b, : len(seq)] = 1
    return input_ids.to(device), mask.to(device)


def _gather_plan(enc: _Encoded, batch: np.ndarray, width: int, device):
    """Flat (row, position, weight) index of a batch: row offsets per text, positions
    offset by ``b * width`` into the flattened ``(B * T, d)`` hidden states."""
    rows, pos, weight = [], [], []
    offset = 0
    for b, i in enumerate(batch):
        rows.append(enc.rows[i] + offset)
        pos.append(enc.pos[i] + b * width)
        weight.append(enc.weight[i])
        offset += int(enc.n_rows[i])
    to = dict(device=device)
    return (
        torch.from_numpy(np.concatenate(rows)).to(**to),
        torch.from_numpy(np.concatenate(pos)).to(**to),
        torch.from_numpy(np.concatenate(weight)).to(**to),
        offset,
    )


def _hidden_states(run: _Run, input_ids, mask) -> tuple[torch.Tensor, ...]:
    out = _backbone(run.model)(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
    states = getattr(out, "hidden_states", None)
    if states is None:
        raise TypeError(
            f"model {run.name!r} ({type(run.model).__name__}) returned no hidden_states; "
            "lmsim needs a Hugging Face model that supports output_hidden_states=True"
        )
    return states


def _forward_blocks(run: _Run, enc: _Encoded, batch, pad_to, device, amp_dtype) -> dict:
    input_ids, mask = _pad(run, enc, batch, pad_to, device)
    with _autocast(device, amp_dtype):
        states = _hidden_states(run, input_ids, mask)
    rows, pos, weight, n_rows = _gather_plan(enc, batch, input_ids.shape[1], device)
    blocks = {}
    for layer in run.layers:
        h = states[layer]
        flat = h.reshape(-1, h.shape[-1])[pos].float() * weight[:, None]
        pooled = torch.zeros(n_rows, h.shape[-1], dtype=torch.float32, device=device)
        blocks[block_name(run.name, layer)] = pooled.index_add_(0, rows, flat)
    # One device sync for all layers, not one per layer.
    if not bool(torch.stack([torch.isfinite(x).all() for x in blocks.values()]).all()):
        bad = [k for k, x in blocks.items() if not torch.isfinite(x).all()]
        raise ValueError(
            f"model {run.name!r} produced non-finite activations (NaN or Inf) in {bad} for "
            f"texts {batch[:5].tolist()}...; with float16 this is usually overflow: use "
            "dtype='bfloat16' or 'float32'"
        )
    return blocks


@dataclass
class _Plan:
    runs: list[_Run]
    encs: list[_Encoded]
    device: torch.device
    amp_dtype: torch.dtype | None
    pad_to: int | None
    texts: list


def _plan(
    models,
    texts,
    *,
    layers,
    pooling,
    subword,
    max_length,
    device,
    dtype,
    paper_compat_padding,
    lowercase,
    zoo_profile,
) -> _Plan:
    if pooling not in POOLINGS:
        raise ValueError(f"`pooling` must be one of {POOLINGS}, got {pooling!r}")
    if subword not in SUBWORDS:
        raise ValueError(f"`subword` must be one of {SUBWORDS}, got {subword!r}")
    if paper_compat_padding and pooling == "mean" and max_length is None:
        raise ValueError(
            "paper_compat_padding=True divides by the padded length, which is only well "
            "defined with a fixed `max_length` (the LMD authors pad every sequence to T): "
            "pass max_length=T"
        )
    texts = _check_texts(texts, pooling)
    device = resolve_device(device)
    amp_dtype = autocast_dtype(device, dtype)
    runs = _prepare(models, layers, max_length, device, dtype, zoo_profile)
    encs = [_encode(r, texts, pooling, subword, paper_compat_padding, lowercase) for r in runs]
    _check_alignment(runs, encs, pooling)
    pad_to = max_length if (paper_compat_padding and pooling == "mean") else None
    return _Plan(runs, encs, device, amp_dtype, pad_to, texts)


def _text_lengths(plan: _Plan) -> np.ndarray:
    """Tokens of each text in its longest tokenisation over the models, shape (n_texts,)."""
    return np.max([enc.n_tokens for enc in plan.encs], axis=0)


def _rank_batches(plan: _Plan, indices, batch_size: int, part=(0, 1)) -> list[np.ndarray]:
    """The length-sorted batches of ``indices``, every ``part[1]``-th from ``part[0]``."""
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}")
    batches = _batches(np.asarray(indices), _text_lengths(plan), int(batch_size), sort=True)
    return batches[part[0] :: part[1]]


def _pooled_batches(
    plan: _Plan,
    indices: np.ndarray,
    batch_size: int,
    progress_bar=None,
    part: tuple[int, int] = (0, 1),
) -> Iterator[tuple[np.ndarray, dict[str, torch.Tensor]]]:
    """Yield ``(text_indices, {block: tensor of shape (n_rows, d)})`` batch by batch.

    Texts are batched longest first (by their longest tokenisation over the models) to
    minimise padding; the rows of a batch are grouped by text in the order of
    ``text_indices``. ``part=(i, n)`` keeps batches ``i, i + n, ...`` only (rank ``i`` of
    ``n``). The one code path under :func:`extract_moments` and :func:`extract_activations`.
    """
    start = time.perf_counter()
    n_tokens = 0
    for batch in _rank_batches(plan, indices, batch_size, part):
        blocks = {}
        with torch.inference_mode():
            for run, enc in zip(plan.runs, plan.encs):
                blocks.update(
                    _forward_blocks(run, enc, batch, plan.pad_to, plan.device, plan.amp_dtype)
                )
        yield batch, blocks
        if progress_bar is not None:
            n_tokens += int(sum(enc.n_tokens[batch].sum() for enc in plan.encs))
            progress_bar.update(len(batch))
            elapsed = max(time.perf_counter() - start, 1e-9)
            progress_bar.set_postfix(tok_s=f"{n_tokens / elapsed:,.0f}")


def _progress(total: int, progress: bool, desc: str):
    return tqdm(total=total, desc=desc, unit="text", disable=not progress, leave=False)


# ====================================================================== cache
# Full weight hashes are memoised per model object and invalidated by the parameters'
# in-place version counters: a second extraction with the same model costs nothing, an
# optimizer step or ``load_state_dict`` changes the key. (sha256 of a 110M-parameter BERT's
# 440 MB took 0.3-1.2 s here, a fraction of loading it, so every byte is hashed.)
_WEIGHT_HASHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _tensor_bytes(x: torch.Tensor) -> memoryview:
    x = x.detach().cpu().contiguous().reshape(-1)
    return memoryview(x.view(torch.uint8).numpy())


def _weights_hash(model: nn.Module) -> str:
    """sha256 of every parameter and buffer of ``model``: names, dtypes, shapes and bytes."""
    state = list(model.state_dict(keep_vars=True).items())
    versions = tuple((k, v.data_ptr(), v._version, v.dtype, tuple(v.shape)) for k, v in state)
    cached = _WEIGHT_HASHES.get(model)
    if cached is not None and cached[0] == versions:
        return cached[1]
    digest = hashlib.sha256()
    for name, tensor in state:
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}\n".encode())
        digest.update(_tensor_bytes(tensor))
    value = digest.hexdigest()
    _WEIGHT_HASHES[model] = (versions, value)
    return value


def _tokenizer_hash(tokenizer) -> str:
    """sha256 of everything that decides how ``tokenizer`` encodes a text.

    A fast tokenizer's backend serialises its vocabulary, merges, normaliser,
    pre-tokeniser, post-processor and added tokens (``to_str()``); a slow one is described
    by its sorted vocabulary. Both add the transformers-side settings (special tokens,
    padding and truncation side, ``model_max_length``).
    """
    digest = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        digest.update(backend.to_str().encode())
    elif hasattr(tokenizer, "get_vocab"):
        vocab = sorted(tokenizer.get_vocab().items())
        digest.update(json.dumps(vocab, ensure_ascii=False).encode())
    else:
        raise TypeError(
            f"cannot fingerprint a tokenizer of type {type(tokenizer).__name__} for the "
            "activation cache: it has neither `backend_tokenizer` nor `get_vocab()`; "
            "pass cache=False"
        )
    settings = {
        attr: getattr(tokenizer, attr, None)
        for attr in ("padding_side", "truncation_side", "model_max_length")
    }
    settings["special"] = getattr(tokenizer, "special_tokens_map", None)
    settings["added"] = sorted(getattr(tokenizer, "get_added_vocab", dict)().items())
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _model_fingerprint(run: _Run) -> dict:
    """Content hashes of a model: its config, all of its weights and its tokenizer."""
    config = getattr(run.model, "config", None)
    config_json = config.to_json_string(use_diff=False) if config is not None else ""
    return {
        "name": run.name,
        "config": hashlib.sha256(config_json.encode()).hexdigest(),
        "weights": _weights_hash(run.model),
        "tokenizer": _tokenizer_hash(run.tokenizer),
        "layers": run.layers,
        "max_length": run.max_length,
    }


def _content_hash(value, path: str = "cache_key_extra") -> str:
    """sha256 of ``value`` by content: arrays by bytes, dtype and shape; containers
    recursively; str, int, float, bool and None by value (types kept apart: 1, 1.0, True
    and "1" differ).

    Raises
    ------
    TypeError
        Anything else (its ``str`` may hide content, its ``repr`` may change per process),
        naming where it sits in ``value``.
    """
    digest = hashlib.sha256()

    def feed(x, where: str) -> None:
        if x is None or isinstance(x, (bool, int, float, str)):
            digest.update(f"{type(x).__name__}:{x!r};".encode())
        elif isinstance(x, (np.integer, np.floating, np.bool_)):
            feed(x.item(), where)
        elif isinstance(x, (np.ndarray, torch.Tensor)):
            if isinstance(x, np.ndarray):
                if x.dtype.hasobject:
                    raise TypeError(
                        f"`{where}` is an object array, which cannot be hashed by content; "
                        "convert it to a numeric or string array, or to a list"
                    )
                x = np.ascontiguousarray(x)
                raw, dtype = x.tobytes(), str(x.dtype)
            else:
                raw, dtype = bytes(_tensor_bytes(x)), str(x.dtype).removeprefix("torch.")
            digest.update(f"array:{dtype}:{tuple(x.shape)}:".encode())
            digest.update(hashlib.sha256(raw).digest())
        elif isinstance(x, Mapping):
            digest.update(f"dict:{len(x)}{{".encode())
            items = []
            for k in x:
                if not isinstance(k, (str, int, float, bool)) and k is not None:
                    raise TypeError(
                        f"`{where}` has a key of type {type(k).__name__}; use str or int keys"
                    )
                items.append((f"{type(k).__name__}:{k!r}", k))
            for key_text, k in sorted(items, key=lambda kv: kv[0]):
                digest.update(key_text.encode() + b"=")
                feed(x[k], f"{where}[{k!r}]")
            digest.update(b"}")
        elif isinstance(x, (list, tuple)):
            digest.update(f"{type(x).__name__}:{len(x)}[".encode())
            for i, item in enumerate(x):
                feed(item, f"{where}[{i}]")
            digest.update(b"]")
        else:
            raise TypeError(
                f"`{where}` is a {type(x).__name__}, which cannot be hashed by content (its "
                "str/repr may hide data or change between processes); pass str, int, float, "
                "bool, None, numpy arrays, torch tensors, or lists/tuples/dicts of these"
            )

    feed(value, path)
    return digest.hexdigest()


def _cache_key(plan: _Plan, fields: dict) -> tuple[str, dict]:
    payload = {
        "version": _CACHE_VERSION,
        "models": [_model_fingerprint(r) for r in plan.runs],
        "texts": _texts_fingerprint(plan.texts),
        "n_texts": len(plan.texts),
        "device": plan.device.type,
        "amp_dtype": str(plan.amp_dtype),
        **fields,
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32], payload


def _shard_path(folder: Path, k: int) -> Path:
    return folder / f"shard_{k:05d}.safetensors"


def _save_shard(mom: Moments, folder: Path, k: int) -> dict:
    """Write a shard atomically (a crash leaves the whole file or none); return its record."""
    path = _shard_path(folder, k)
    write_atomic(path, mom.save)
    return file_record(path)


def _read_manifest(folder: Path) -> dict:
    """The folder's ``manifest.json``, or {} (an unreadable one is moved aside)."""
    path = folder / "manifest.json"
    if not path.exists():
        return {}
    try:
        manifest = json.loads(path.read_text())
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
        return manifest
    except (OSError, ValueError) as err:
        move_aside(path, f"{type(err).__name__}: {err}", "rewriting it", stacklevel=4)
        return {}


def _write_manifest(folder: Path, payload: dict, n_shards: int, records: dict) -> None:
    """Merge ``records`` (shard file -> size and sha256) into the manifest on disk.

    Another process may be adding shards of the same key: its records are kept (a record
    lost to a race only means that shard is checked by loading it, not by its hash).
    """
    shards = {**_read_manifest(folder).get("shards", {}), **records}
    shards = {name: shards[name] for name in sorted(shards) if (folder / name).exists()}
    manifest = {**payload, "n_shards": n_shards, "shards": shards}
    write_json_atomic(folder / "manifest.json", manifest, indent=1, default=str)


_CLAIM_POLL_S = 0.5


def _claim_shard(folder: Path, k: int) -> Path | None:
    """Claim shard ``k`` for this process: its lock file, or None when a live process
    holds it.

    The lock (``shard_NNNNN.lock``, holding ``pid host``) is created with
    ``O_CREAT | O_EXCL``, atomic on local and NFSv3+ file systems, so two processes never
    compute the same shard. A lock whose pid is dead on this host is stale (a killed run)
    and taken over: renamed away first (atomic, so one taker wins), then claimed afresh.
    Locks of other hosts are waited for.
    """
    lock = folder / f"shard_{k:05d}.lock"
    mine = f"{os.getpid()} {socket.gethostname()}"
    for _attempt in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid_text, _, host = lock.read_text().partition(" ")
            except FileNotFoundError:
                continue  # released meanwhile: try again
            if host.strip() != socket.gethostname() or not pid_text.isdigit():
                return None
            if _pid_alive(int(pid_text)):
                return None
            stale = lock.with_name(f"{lock.name}.stale{os.getpid()}")
            try:
                os.replace(lock, stale)
                stale.unlink(missing_ok=True)
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(mine)
        return lock
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _load_shard(folder: Path, k: int, record: dict | None, device) -> Moments | None:
    """Shard ``k`` if it is there and whole; a corrupt one is named, moved aside, None."""
    path = _shard_path(folder, k)
    if not path.exists():
        return None
    try:
        check_record(path, record)
        return Moments.load(path, device=device)
    except (OSError, ValueError) as err:
        move_aside(path, str(err), "recomputing that shard", stacklevel=4)
        return None


# ====================================================================== public API
def extract_moments(
    models,
    texts,
    *,
    layers="all",
    pooling: str = "mean",
    subword: str = "last",
    max_length: int | None = None,
    batch_size: int = 32,
    device="auto",
    dtype=None,
    paper_compat_padding: bool = False,
    lowercase: bool = False,
    cache: bool = True,
    cache_key_extra=None,
    shard_size: int = 256,
    progress: bool = True,
    return_shards: bool = False,
    zoo_profile: str = "default",
    distributed="auto",
):
    """Stream pooled hidden states of one or more models into one joint :class:`Moments`.

    Parameters
    ----------
    models : list of str or dict of str to (model, tokenizer)
        Names are loaded with :func:`lmsim.models.load_model`; a dict gives loaded Hugging
        Face models (moved to ``device`` and put in ``eval()`` mode) with their tokenizers.
        All models see the same texts batch by batch, so rows align.
    texts : list of str, or list of list of str
        Texts; with ``pooling="word"`` sentences given as lists of words.
    layers : "all", "last", list of int, or dict of model name to any of these
        Hidden-state indices: 0 is the embedding output, ``L`` the last layer; negative
        indices count from the end (``-1`` is the last layer).
    pooling : {"mean", "word", "token"}
        One row per text (mean over its real tokens, special tokens included), per word
        (``subword`` picks the word's vector among its subwords, special tokens excluded),
        or per real token (only for models sharing a tokenizer; checked).
    subword : {"last", "first", "mean"}
        Word vector = last / first / mean of its subword vectors (Wu et al. 2020 and
        Liu et al. 2019 use the last).
    max_length : int, optional
        Truncate longer tokenisations to this many tokens (default: each model's maximum
        positions); larger than a model's maximum raises.
    batch_size : int
        Texts per forward pass; a shard's texts are batched longest first.
    device : str or torch.device
        ``"auto"``: CUDA if available, else CPU. The returned moments live there.
    dtype : str or torch.dtype, optional
        Compute precision (``torch.autocast``): None = bfloat16 on CUDA, float32 on CPU.
        Models given by name are also loaded in it; models passed as objects keep the
        dtype of their weights.
    paper_compat_padding : bool
        Reproduce the LMD authors' ``mean(h * mask, dim=1)``: every text is padded to
        ``max_length`` (required) and the masked sum is divided by it rather than by the
        number of real tokens (FORMULAS §1). Only affects ``pooling="mean"``.
    lowercase : bool
        Lower-case texts (words) before tokenising.
    cache : bool
        Keep per-shard moments on disk under ``lmsim._cache.cache_dir("acts", key)``; a
        rerun with the same key (content hashes of each model's config, weights and
        tokenizer; the texts; layers, pooling, subword, max_length, padding mode,
        lowercase, shard_size, shard order, device type, autocast dtype, ``cache_key_extra``)
        loads finished shards and computes only the missing ones, so an interrupted run
        resumes. Shards are written atomically; ``manifest.json`` lists the key fields
        and each shard's size and sha256, checked when the shard is read: a corrupt or
        truncated shard is named in a warning, moved aside (``.corrupt``) and recomputed.
        Concurrent calls with the same key split the work: each shard is claimed with a
        lock file (``O_CREAT | O_EXCL``, holding the pid) before it is computed, others
        wait for it and load it; a lock left by a dead process is taken over.
    cache_key_extra : str, int, float, bool, None, array, tensor, or list/tuple/dict of these
        Anything else that should separate cache entries (e.g. a corpus version), hashed
        by content: arrays by bytes, dtype and shape. Other types raise ``TypeError``
        (their ``str`` may hide data, their ``repr`` may change between processes).
    shard_size : int
        Texts per shard, the unit of the cache and of the work split between ranks. By
        default the shards are consecutive pieces of the run's texts sorted by length
        (longest first, ties in corpus order): the same order for every call with the same
        texts and models, so a shard is fixed by its position in it, and batches hold
        texts of nearly equal lengths (on Penn Treebank's 3,370 validation sentences with
        all-MiniLM-L6-v2 and 32 texts per batch, padding adds 2.4 % tokens instead of
        21.7 % with sorting inside 256-text pieces of the corpus). With
        ``return_shards=True`` they are consecutive pieces of the corpus order instead,
        each sorted inside: the exchangeable resampling units a bootstrap needs
        (:func:`lmsim.lmd.bootstrap`); such shards are cached under another key.
    progress : bool
        Show a tqdm bar with tokens/s.
    return_shards : bool
        Also return the list of per-shard moments (shards in corpus order, see
        ``shard_size``).
    zoo_profile : str
        Which zoo build ``"zoo/<name>"`` model names load (see :func:`lmsim.models.load_model`).
    distributed : "auto", bool or torch.distributed.ProcessGroup
        Split the shards over the ranks of a process group (data parallel, launched by
        ``torchrun`` or ``accelerate launch``). The ranks take the shards in turns, back
        and forth (``0, 1, ..., W-1, W-1, ..., 0, 0, ...``), so each gets long and short
        texts alike, and compute each into its own :class:`Moments`;
        :meth:`Moments.merge_all_ranks` merges them in shard order, so every rank returns
        the same moments, equal bit for bit to one process's (given the same forward
        passes per shard). With ``cache``, each rank writes the shards it computed; shards
        do not depend on the number of ranks, so a run resumes or is reused with any
        number of them. An unindexed ``device`` (``"auto"``, ``"cuda"``) means GPU
        ``rank % device_count`` on each rank. ``"auto"``: the default group when
        ``torch.distributed`` is initialised with more than one rank, else this process
        alone; ``True``: the default group (raises if not initialised); ``False``:
        this process alone. Give at least ``W`` shards, or ranks sit idle.

    Returns
    -------
    mom : Moments
        Blocks ``"{model}/layer.{i}"`` of widths ``hidden_size``, in model then layer
        order; ``mom.n`` is the number of rows (texts, words or tokens).
    shards : list of Moments
        Only with ``return_shards=True``; ``Moments.merge_all(shards)`` equals ``mom``.

    Raises
    ------
    ValueError
        Empty texts, an unknown layer (the message lists the valid range), a text with
        zero tokens, ``max_length`` beyond a model's positions, non-finite activations.

    Notes
    -----
    Memory: one process without ``return_shards`` resolves the shards one at a time in
    shard order (loading a cached one when its turn comes, else computing it) and merges
    each into the running moments as soon as the shards before it are merged, then drops
    it: it holds at most the running merge and one shard's moments, two times
    ``8 D²`` bytes for ``D`` features in all (a shard that another process was computing
    is waited for, and the shards finished meanwhile wait in memory until it comes). The
    merges are :meth:`Moments.merge_all`'s in shard order, so the result is the same bit
    for bit. With ``return_shards`` every shard is held; under ``distributed`` each rank
    holds the shards it computed until :meth:`Moments.merge_all_ranks`.

    References
    ----------
    Zhang et al. (2022), LMD, Sec. 3 (sequence embedding = mean of the last layer);
    Wu et al. (2020), Sec. 4 (words as last subwords).
    """
    if not isinstance(shard_size, (int, np.integer)) or shard_size < 1:
        raise ValueError(f"`shard_size` must be a positive int, got {shard_size!r}")
    extra_hash = _content_hash(cache_key_extra) if cache else None  # refuse early
    group = _process_group(distributed)
    plan = _plan(
        models,
        texts,
        layers=layers,
        pooling=pooling,
        subword=subword,
        max_length=max_length,
        device=_rank_device(device, group),
        dtype=dtype,
        paper_compat_padding=paper_compat_padding,
        lowercase=lowercase,
        zoo_profile=zoo_profile,
    )
    rank, world = _rank_world(group)
    shard_ids = _shards(plan, int(shard_size), by_length=not return_shards)
    n_shards = len(shard_ids)
    mine = [k for k in range(n_shards) if _owner(k, world) == rank]
    folder = payload = None
    on_disk: set[int] = set()
    if cache:
        from lmsim._cache import cache_dir

        fields = {
            "pooling": pooling,
            "subword": subword if pooling == "word" else None,
            "max_length": max_length,
            "paper_compat_padding": bool(paper_compat_padding),
            "lowercase": bool(lowercase),
            "shard_size": int(shard_size),
            "cache_key_extra": extra_hash,
        }
        if not return_shards:
            # Only the new layout gets a field: corpus-order shards keep their old keys.
            fields["shard_order"] = "length"
        key, payload = _cache_key(plan, fields)
        folder = cache_dir("acts", key)
        # Finished shards are loaded (and checked) when their turn comes, not all up front.
        on_disk = {k for k in mine if _shard_path(folder, k).exists()}
    # One process returning only the merge folds each shard in as soon as the shards before
    # it are in: it holds the running merge and one shard, not every shard.
    merger = _InOrderMerge() if group is None and not return_shards else None
    shards: dict[int, Moments] = {}
    written: dict[str, dict] = {}  # shard file -> record, of the shards this rank wrote
    total = int(sum(len(shard_ids[k]) for k in mine if k not in on_disk))
    bar = _progress(total, progress and rank == 0, "extract")
    try:
        pending = mine
        while pending:
            waiting = []
            for k in pending:
                mom = claim = None
                name = _shard_path(folder, k).name if folder is not None else None
                if k in on_disk:
                    on_disk.discard(k)
                    record = _read_manifest(folder).get("shards", {}).get(name)
                    mom = _load_shard(folder, k, record, plan.device)
                    if mom is None:  # corrupt and moved aside: computed below
                        bar.total += len(shard_ids[k])
                        bar.refresh()
                if mom is None and folder is not None:
                    claim = _claim_shard(folder, k)
                    if claim is None:
                        waiting.append(k)  # another live process is computing it
                        continue
                try:
                    if claim is not None:  # finished by another process since we looked?
                        record = _read_manifest(folder).get("shards", {}).get(name)
                        mom = _load_shard(folder, k, record, plan.device)
                        if mom is not None:
                            bar.update(len(shard_ids[k]))
                    if mom is None:
                        batches = _pooled_batches(plan, shard_ids[k], batch_size, bar)
                        mom = _accumulate(batches, plan.device)
                        if folder is not None:
                            written[name] = _save_shard(mom, folder, k)
                            _write_manifest(folder, payload, n_shards, {name: written[name]})
                finally:
                    if claim is not None:
                        claim.unlink(missing_ok=True)
                if merger is not None:
                    merger.add(k, mom)
                else:
                    shards[k] = mom
                del mom  # held by the merger only until the shards before it are merged
            if waiting:
                time.sleep(_CLAIM_POLL_S)
            pending = waiting
    finally:
        bar.close()
    if group is not None and folder is not None:
        # Ranks rewriting the manifest at once can drop each other's records: rank 0
        # writes all of them once more (the gather also waits for every rank's files).
        everyone: list = [None] * world
        with _device_scope(plan.device):
            dist.all_gather_object(everyone, written, group=group)
        if rank == 0:
            _write_manifest(
                folder, payload, n_shards, {k: v for w in everyone for k, v in w.items()}
            )
    if merger is not None:
        merged = merger.result(n_shards)
    elif group is None:
        parts = [shards[k] for k in range(n_shards)]
        merged = Moments.merge_all(parts)
    elif return_shards:
        merged, parts = Moments.merge_all_ranks(shards, n_shards, group=group, return_parts=True)
    else:
        merged = Moments.merge_all_ranks(shards, n_shards, group=group)
    return (merged, parts) if return_shards else merged


class _InOrderMerge:
    """:meth:`Moments.merge_all` of parts handed over in any order, merged as they come.

    Part ``k`` is merged into the running accumulator as soon as parts ``0 .. k - 1`` are,
    then dropped; a part that comes early waits in memory until then. The merges are
    ``merge_all``'s, in index order, so the result is equal to it bit for bit; part 0
    becomes the accumulator without a copy, so the caller must not keep it.
    """

    def __init__(self):
        self.merged: Moments | None = None
        self.n_merged = 0
        self.early: dict[int, Moments] = {}

    def add(self, k: int, part: Moments) -> None:
        self.early[k] = part
        while self.n_merged in self.early:
            part = self.early.pop(self.n_merged)
            if self.merged is None:
                self.merged = part
            else:
                self.merged.merge_(part)
            self.n_merged += 1

    def result(self, n_parts: int) -> Moments:
        if self.merged is None or self.n_merged != n_parts:
            raise RuntimeError(
                f"merged {self.n_merged} of {n_parts} shards (waiting: {sorted(self.early)}); "
                "this is a bug in lmsim.extract: please report it"
            )
        return self.merged


def _shards(plan: _Plan, shard_size: int, by_length: bool) -> list[np.ndarray]:
    """Text indices of each shard: consecutive pieces of the corpus order, or of the
    order of all texts by length (longest first, ties in corpus order)."""
    n_texts = len(plan.texts)
    order = np.arange(n_texts)
    if by_length:
        order = order[np.argsort(-_text_lengths(plan), kind="stable")]
    return [order[start : start + shard_size] for start in range(0, n_texts, shard_size)]


def _owner(k: int, world: int) -> int:
    """Rank that computes shard ``k``: ranks take the longest-first shards in turns, back and
    forth (0, 1, ..., W-1, W-1, ..., 0, 0, 1, ...), so their token counts stay even."""
    turn, seat = divmod(k, world)
    return seat if turn % 2 == 0 else world - 1 - seat


def _rank_world(group) -> tuple[int, int]:
    """This process's rank in ``group`` and the group's size; (0, 1) without a group."""
    if group is None:
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def _rank_device(device, group):
    """Under ``torch.distributed``, an unindexed CUDA device means this rank's own GPU
    (``rank % device_count``, the local rank of the usual one-process-per-GPU launch)."""
    resolved = resolve_device(device)
    if group is None or resolved.type != "cuda" or resolved.index is not None:
        return device
    return torch.device("cuda", dist.get_rank() % torch.cuda.device_count())


def _device_scope(device: torch.device):
    """Make ``device`` the current CUDA device for a block: NCCL runs object collectives
    (``all_gather_object``) on the current device, which must be this rank's own."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def _process_group(distributed):
    """The process group extraction is split over, or None for this process alone."""
    if distributed is False:
        return None
    initialised = dist.is_available() and dist.is_initialized()
    if distributed == "auto":
        if not initialised or dist.get_world_size() == 1:
            return None
        return dist.group.WORLD
    if distributed is True:
        if not initialised:
            raise RuntimeError(
                "distributed=True but torch.distributed is not initialised: launch with "
                "`torchrun --nproc_per_node N script.py` and call "
                "torch.distributed.init_process_group() before extracting"
            )
        return dist.group.WORLD
    if isinstance(distributed, dist.ProcessGroup):
        return distributed
    raise TypeError(
        f"`distributed` must be 'auto', True, False or a torch.distributed.ProcessGroup, "
        f"got {distributed!r}"
    )


def _accumulate(batches, device: torch.device, min_rows: int = 2048) -> Moments:
    """Moments of all batches, updated in chunks of at least ``min_rows`` rows.

    Each :meth:`Moments.update` costs a few passes over the ``D x D`` co-moment whatever
    the chunk size, so small batches of sequence means (32 rows against D in the
    thousands) would spend most of the time there: buffering rows amortises it.
    """
    mom: Moments | None = None
    buffer: list[dict[str, torch.Tensor]] = []
    n_buffered = 0

    def flush():
        nonlocal mom, buffer, n_buffered
        chunk = {name: torch.cat([b[name] for b in buffer]) for name in buffer[0]}
        if mom is None:
            mom = Moments({name: x.shape[1] for name, x in chunk.items()}, device=device)
        mom.update(chunk)
        buffer, n_buffered = [], 0

    for _batch, blocks in batches:
        buffer.append(blocks)
        n_buffered += next(iter(blocks.values())).shape[0]
        if n_buffered >= min_rows:
            flush()
    if buffer:
        flush()
    return mom


def extract_activations(
    models,
    texts,
    *,
    layers="all",
    pooling: str = "mean",
    subword: str = "last",
    max_length: int | None = None,
    batch_size: int = 32,
    device="auto",
    dtype=None,
    paper_compat_padding: bool = False,
    lowercase: bool = False,
    progress: bool = True,
    zoo_profile: str = "default",
    distributed="auto",
) -> dict[str, np.ndarray]:
    """Raw pooled hidden states, one float32 array per block, rows in the original order.

    For metrics that need the samples themselves (debiased or RBF CKA, probes). Same
    parameters and the same code path as :func:`extract_moments` (which see); raw
    activations are not cached. Under ``torch.distributed`` each rank runs every
    ``world_size``-th batch of the length-sorted order and the rows are all-gathered
    (through pickling, so every rank ends up holding all of them): the same arrays as on
    one process, bit for bit.

    Returns
    -------
    acts : dict of str to ndarray of shape (n_rows, hidden_size)
        ``"{model}/layer.{i}"`` blocks. Rows follow ``texts``: one per text, or the words
        (tokens) of ``texts[0]`` then those of ``texts[1]`` and so on.
    """
    group = _process_group(distributed)
    rank, world = _rank_world(group)
    plan = _plan(
        models,
        texts,
        layers=layers,
        pooling=pooling,
        subword=subword,
        max_length=max_length,
        device=_rank_device(device, group),
        dtype=dtype,
        paper_compat_padding=paper_compat_padding,
        lowercase=lowercase,
        zoo_profile=zoo_profile,
    )
    n_rows = plan.encs[0].n_rows
    offsets = np.concatenate([[0], np.cumsum(n_rows)])
    n_total = int(offsets[-1])
    acts: dict[str, np.ndarray] = {}
    pieces: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []  # other ranks' share
    indices = np.arange(len(plan.texts))
    n_mine = sum(len(b) for b in _rank_batches(plan, indices, batch_size, (rank, world)))
    bar = _progress(n_mine, progress and rank == 0, "extract")
    try:
        for batch, blocks in _pooled_batches(plan, indices, batch_size, bar, (rank, world)):
            # Destination row of every batch row: the rows of text i go to
            # offsets[i]:offsets[i + 1], whatever order the length sort chose.
            dest = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in batch])
            rows = {name: x.cpu().numpy() for name, x in blocks.items()}
            if group is None:
                _place(acts, dest, rows, n_total)
            else:
                pieces.append((dest, rows))
    finally:
        bar.close()
    if group is not None:
        gathered: list = [None] * world
        with _device_scope(plan.device):
            dist.all_gather_object(gathered, pieces, group=group)
        del pieces
        for rank_pieces in gathered:
            for dest, rows in rank_pieces:
                _place(acts, dest, rows, n_total)
    return acts


def _place(acts: dict, dest: np.ndarray, rows: dict, n_total: int) -> None:
    """Write a batch's rows into rows ``dest`` of the (lazily allocated) arrays."""
    for name, x in rows.items():
        if name not in acts:
            acts[name] = np.empty((n_total, x.shape[1]), dtype=np.float32)
        acts[name][dest] = x


def extract_attentions(
    models,
    sentences,
    *,
    layers="all",
    query: str = "mean",
    max_length: int | None = None,
    batch_size: int = 16,
    device="auto",
    dtype=None,
    lowercase: bool = False,
    cache: bool = True,
    cache_key_extra=None,
    progress: bool = True,
    zoo_profile: str = "default",
) -> dict[str, list[np.ndarray]]:
    """Per-head attention probabilities between words, keyed like :func:`extract_moments`.

    Subword attention is converted to words as Wu et al. (2020, Sec. 4) do after Clark
    et al. (2019, Sec. 2): the attention *to* a word is the **sum** over its subwords (the
    keys), the attention *from* a word is the **mean** over its subwords (the queries).
    Special tokens (``[CLS]``, ``[SEP]``, BOS) belong to no word: their key columns are
    dropped and each subword row is renormalised over the real words before averaging,
    so every word row is a probability distribution over the sentence's words. Causal
    models attend only to the past, so their word matrices are lower-triangular.

    Parameters
    ----------
    models : str, list of str, (model, tokenizer) or dict of str to (model, tokenizer)
        As in :func:`extract_moments`; a single name or a single loaded pair (named
        ``"model"``) is accepted too. Models are switched to eager attention for the call
        (SDPA / flash kernels return no probabilities) and switched back afterwards.
    sentences : list of list of str
        Pre-split words.
    layers : "all", "last", list of int, or dict of model name to any of these
        Transformer layers ``1..L`` (layer ``i`` is the attention inside the block whose
        output is hidden state ``i``); negative indices count from the end.
    query : {"mean", "last", "first"}
        How a word's query row is formed from its subwords' rows ("mean" as in the paper).
    max_length, batch_size, device, dtype, lowercase, progress, zoo_profile
        As in :func:`extract_moments` (sentences that would lose words raise).
    cache : bool
        Keep the result on disk under ``lmsim._cache.cache_dir("attn", key)``; a rerun with
        the same key (content hashes of each model's config, weights and tokenizer; the
        sentences; the layers kept, query, max_length, lowercase, batch_size, device type,
        autocast dtype, ``cache_key_extra``) loads it instead of running the models. The
        ``batch_size`` is in the key because it sets how far each sentence is padded, and
        kernels of other widths may round the last bit differently: a hit returns exactly
        the arrays this call would compute. The arrays are written atomically to
        ``attentions.safetensors``; ``manifest.json`` (written after it) lists the key
        fields, the blocks, the shape of every array and the file's size and sha256,
        checked when it is read: a corrupt or truncated file is named in a warning, moved
        aside (``.corrupt``) and recomputed.
    cache_key_extra : str, int, float, bool, None, array, tensor, or list/tuple/dict of these
        As in :func:`extract_moments`: anything else that should separate cache entries
        (e.g. a corpus version), hashed by content.

    Returns
    -------
    attn : dict of str to list of ndarray of shape (n_heads, n_words, n_words)
        Block ``"{model}/layer.{i}"`` (model then layer order) to one array per sentence
        in the original order; entry ``[h, i, j]`` is head ``h``'s attention from word
        ``i`` to word ``j``.
    """
    if query not in SUBWORDS:
        raise ValueError(f"`query` must be one of {SUBWORDS}, got {query!r}")
    if isinstance(models, str):
        models = [models]
    elif isinstance(models, tuple) and len(models) == 2 and isinstance(models[0], nn.Module):
        models = {"model": models}
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}")
    extra_hash = _content_hash(cache_key_extra) if cache else None  # refuse early
    sentences = _check_texts(sentences, "word")
    device = resolve_device(device)
    amp_dtype = autocast_dtype(device, dtype)
    runs = _prepare(models, "all", max_length, device, dtype, zoo_profile)
    kept = {run.name: _attention_layers(layers, run) for run in runs}
    blocks = [block_name(run.name, lay) for run in runs for lay in kept[run.name]]
    folder = payload = None
    if cache:
        from lmsim._cache import cache_dir

        fields = {
            "kind": "attention",
            "attention_layers": kept,
            "query": query,
            "max_length": max_length,
            "lowercase": bool(lowercase),
            "batch_size": int(batch_size),
            "cache_key_extra": extra_hash,
        }
        plan = _Plan(runs, [], device, amp_dtype, None, sentences)
        key, payload = _cache_key(plan, fields)
        folder = cache_dir("attn", key)
        cached = _load_attentions(folder, blocks, [len(s) for s in sentences])
        if cached is not None:
            return cached
    out: dict[str, list[np.ndarray]] = {}
    for run in runs:
        layer_ids = kept[run.name]
        enc = _encode(run, sentences, "word", query, False, lowercase)
        per_layer = _run_attentions(
            run, enc, sentences, layer_ids, query, batch_size, device, amp_dtype, progress
        )
        out.update({block_name(run.name, lay): per_layer[lay] for lay in layer_ids})
    if folder is not None:
        _save_attentions(out, folder, payload)
    return out


_ATTN_FILE = "attentions.safetensors"


def _save_attentions(attn: dict, folder: Path, payload: dict) -> None:
    """Write ``attn`` (block -> arrays of shape (H, W_i, W_i)) as one flat tensor per block,
    then the manifest with every shape and the file's record (atomic writes, in that order:
    a file without a matching manifest entry is never read)."""
    from safetensors.numpy import save_file

    flat = {
        name: np.concatenate([np.ascontiguousarray(a).reshape(-1) for a in arrays])
        for name, arrays in attn.items()
    }
    path = folder / _ATTN_FILE
    write_atomic(path, lambda tmp: save_file(flat, str(tmp)))
    manifest = {
        **payload,
        "blocks": list(attn),
        "dtypes": {name: str(arrays[0].dtype) for name, arrays in attn.items()},
        "shapes": {name: [list(a.shape) for a in arrays] for name, arrays in attn.items()},
        "files": {_ATTN_FILE: file_record(path)},
    }
    write_json_atomic(folder / "manifest.json", manifest, indent=1, default=str)


def _load_attentions(folder: Path, blocks: list[str], n_words: list[int]) -> dict | None:
    """The cached result in ``folder`` if it is there, whole and of the expected blocks and
    sentence lengths; a corrupt file is named in a warning, moved aside, and None returned."""
    path = folder / _ATTN_FILE
    if not path.exists():
        return None
    manifest = _read_manifest(folder)
    files = manifest.get("files")
    record = files.get(_ATTN_FILE) if isinstance(files, dict) else None
    if not isinstance(record, dict):
        return None  # written but its manifest is not (an interrupted run): recompute
    try:
        check_record(path, record)
        shapes, dtypes = manifest["shapes"], manifest["dtypes"]
        if manifest.get("blocks") != blocks:
            raise ValueError(f"{path} holds blocks {manifest.get('blocks')}, not {blocks}")
        from safetensors.numpy import load_file

        flat = load_file(str(path))
        out = {}
        for name in blocks:
            sizes = [int(np.prod(s)) for s in shapes[name]]
            words = [s[1] for s in shapes[name]]
            x = flat[name]
            if words != n_words or x.size != sum(sizes) or str(x.dtype) != dtypes[name]:
                raise ValueError(f"{path}: block {name!r} does not match its manifest")
            ends = np.cumsum(sizes)
            out[name] = [
                x[end - size : end].reshape(shape).copy()
                for shape, size, end in zip(shapes[name], sizes, ends)
            ]
        return out
    except Exception as err:  # noqa: BLE001 - safetensors raises its own error types
        move_aside(path, f"{type(err).__name__}: {err}", "recomputing it", stacklevel=4)
        return None


def _attention_layers(layers, run: _Run) -> list[int]:
    n_layers = _n_layers(run.model)
    spec = layers.get(run.name, "all") if isinstance(layers, Mapping) else layers
    if spec == "all":
        return list(range(1, n_layers + 1))
    layer_ids = _resolve_layers(spec, run.name, n_layers)
    if 0 in layer_ids:
        raise ValueError(
            f"layer 0 is the embedding output and has no attention; valid layers are "
            f"1..{n_layers} (or -{n_layers}..-1)"
        )
    return layer_ids


def _run_attentions(run, enc, sentences, layer_ids, query, batch_size, device, amp_dtype, progress):
    """Word-level attention of one model: layer -> one array per sentence."""
    out: dict[int, list] = {lay: [None] * len(sentences) for lay in layer_ids}
    backbone = _backbone(run.model)
    bar = _progress(len(sentences), progress, f"attention {run.name}")
    with _eager_attention(run.model), torch.inference_mode():
        try:
            lengths = enc.n_tokens
            for batch in _batches(np.arange(len(sentences)), lengths, int(batch_size), sort=True):
                input_ids, mask = _pad(run, enc, batch, None, device)
                with _autocast(device, amp_dtype):
                    result = backbone(
                        input_ids=input_ids, attention_mask=mask, output_attentions=True
                    )
                attentions = getattr(result, "attentions", None)
                if not attentions:
                    raise TypeError(
                        f"model {run.name!r} returned no attentions even with eager attention"
                    )
                for b, i in enumerate(batch):
                    n = len(enc.ids[i])
                    key_map, query_map = _word_maps(
                        enc.word_ids[i], len(sentences[i]), query, device
                    )
                    for lay in layer_ids:
                        probs = attentions[lay - 1][b, :, :n, :n].float()
                        out[lay][i] = _to_words(probs, key_map, query_map).cpu().numpy()
                bar.update(len(batch))
        finally:
            bar.close()
    return out


def _word_maps(word_ids: list, n_words: int, query: str, device):
    """Token-to-word matrices: ``key_map (n_tokens, n_words)`` sums subword keys,
    ``query_map (n_words, n_tokens)`` averages (or picks) subword queries."""
    n_tokens = len(word_ids)
    key_map = torch.zeros(n_tokens, n_words, dtype=torch.float32)
    query_map = torch.zeros(n_words, n_tokens, dtype=torch.float32)
    positions: list[list[int]] = [[] for _ in range(n_words)]
    for t, w in enumerate(word_ids):
        if w is not None:
            key_map[t, w] = 1.0
            positions[w].append(t)
    for w, pos in enumerate(positions):
        chosen = pos[-1:] if query == "last" else pos[:1] if query == "first" else pos
        query_map[w, chosen] = 1.0 / len(chosen)
    return key_map.to(device), query_map.to(device)


def _to_words(probs: torch.Tensor, key_map: torch.Tensor, query_map: torch.Tensor) -> torch.Tensor:
    """``probs (H, T, T)`` over tokens to ``(H, W, W)`` over words."""
    to_words = probs @ key_map  # (H, T, W): attention to each word, special tokens dropped
    to_words = to_words / to_words.sum(-1, keepdim=True).clamp_min(1e-30)
    return query_map @ to_words


@contextlib.contextmanager
def _eager_attention(model: nn.Module):
    config = getattr(model, "config", None)
    previous = getattr(config, "_attn_implementation", None)
    switch = previous not in (None, "eager") and hasattr(model, "set_attn_implementation")
    if switch:
        model.set_attn_implementation("eager")
    try:
        yield
    finally:
        if switch:
            model.set_attn_implementation(previous)


def model_inputs(model: nn.Module, batch: Mapping[str, np.ndarray], device) -> dict:
    """The tensors of a :func:`lmsim.encoding.pad_batch` batch that ``model`` takes.

    ``input_ids`` and ``attention_mask`` always, ``token_type_ids`` (pairs) only where the
    model has segment embeddings (:func:`lmsim.encoding.forward_keys`).
    """
    return {k: torch.from_numpy(batch[k]).to(device) for k in forward_keys(model, batch)}


def _pad_id(tokenizer) -> int | None:
    return getattr(tokenizer, "pad_token_id", None)


def extract_logits(
    model: nn.Module,
    tokenizer,
    inputs: Sequence,
    *,
    kind: str | None = None,
    max_length: int | None = None,
    batch_size: int = 64,
    device=None,
):
    """Logits of a classifier on texts, text pairs or word lists, in float64.

    Parameters
    ----------
    model : nn.Module
        A ``...ForSequenceClassification`` or ``...ForTokenClassification`` model.
    tokenizer : tokenizer
    inputs : sequence, length n
        Texts or ``(str, str)`` pairs; lists of words for token classifiers
        (:func:`lmsim.encoding.encode_inputs`).
    kind : str, optional
        The task kind; default the model's (:func:`lmsim.encoding.model_kind`).
    max_length : int, optional
        Truncation (special tokens included); None does not truncate.
    batch_size : int
        Inputs per forward pass, in the given order, right-padded and masked (one at a
        time when the tokenizer has no pad token).
    device : str or torch.device, optional
        Where the inputs go; default the model's device.

    Returns
    -------
    ndarray of shape (n, n_labels), float64, for sequence kinds; for ``"token"`` a list of n
    float64 arrays of shape (n_words_i, n_labels): each word's first sub-word's logits, NaN
    rows for words cut off by truncation.
    """
    kind = resolve_kind(model, kind)
    enc = encode_inputs(tokenizer, inputs, max_length, kind)
    pad_id = _pad_id(tokenizer)
    step = int(batch_size) if pad_id is not None else 1
    device = torch.device(device) if device is not None else _model_device(model)
    was_training = model.training
    model.eval()
    rows: list = []
    try:
        with torch.inference_mode():
            for start in range(0, len(inputs), step):
                idx = list(range(start, min(start + step, len(inputs))))
                batch = pad_batch(enc, idx, pad_id if pad_id is not None else 0)
                out = model(**model_inputs(model, batch, device)).logits.double().cpu().numpy()
                if kind != "token":
                    rows.append(out)
                    continue
                for b, i in enumerate(idx):
                    words = np.full((len(inputs[i]), out.shape[-1]), np.nan)
                    where = np.flatnonzero(batch["word_index"][b] >= 0)
                    words[batch["word_index"][b][where]] = out[b, where]
                    rows.append(words)
    finally:
        model.train(was_training)
    return rows if kind == "token" else np.concatenate(rows)


def extract_linear_grams(
    model: nn.Module,
    tokenizer,
    texts: Sequence,
    *,
    kind: str | None = None,
    batch_size: int = 16,
    max_length: int | None = None,
    device="auto",
    dtype=None,
    paper_compat_padding: bool = False,
    progress: bool = True,
) -> dict[str, Moments]:
    """Moments of the inputs of every linear layer (``nn.Linear`` and GPT-2 ``Conv1D``).

    Forward pre-hooks record each layer's input at real-token positions (padding
    excluded). ``mom.gram("input")`` is then RegMean's ``G = XᵀX`` (Jin et al. 2023,
    Eq. 2) and ``mom.n`` the number of positions.

    Parameters
    ----------
    model : nn.Module
        A Hugging Face model (task heads included: their inputs are recorded too).
    tokenizer : tokenizer
    texts : list of str, of (str, str) pairs, or of word lists
        Encoded by :func:`lmsim.encoding.encode_inputs` as fine-tuning encodes them
        (pairs with their segment ids; word lists with ``is_split_into_words``).
    kind : str, optional
        ``"token"`` reads word lists; default ``"token"`` for a token classifier, texts or
        pairs otherwise.
    batch_size, max_length, device, dtype, progress
        As in :func:`extract_moments`.
    paper_compat_padding : bool
        Record all positions, padding included, as the released RegMean code does; texts
        are then padded to ``max_length`` when given, else to the longest text of each
        batch in the original order.

    Returns
    -------
    grams : dict of str to Moments
        Module name (as in ``model.named_modules()``) to a single-block Moments named
        ``"input"`` of width ``in_features``. Inputs that are not per-token, e.g. a
        classification head on the pooled ``(batch, d)`` vector, contribute one row per
        text.
    """
    from transformers.pytorch_utils import Conv1D

    if kind is None and model_kind(model) == "token":
        kind = "token"
    if input_form(texts, kind) == "text":
        texts = _check_texts(texts, "mean")
    device = resolve_device(device)
    amp_dtype = autocast_dtype(device, dtype)
    (run,) = _prepare({"model": (model, tokenizer)}, "last", max_length, device, dtype)
    enc = encode_inputs(tokenizer, texts, run.max_length, kind)
    linears = {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, (nn.Linear, Conv1D))
    }
    if not linears:
        raise ValueError(f"{type(model).__name__} has no nn.Linear or Conv1D layers")
    grams: dict[str, Moments] = {}
    state: dict[str, torch.Tensor] = {}

    def make_hook(name, module):
        width = module.in_features if isinstance(module, nn.Linear) else module.weight.shape[0]

        def hook(_module, args):
            x = args[0] if args else None
            if not isinstance(x, torch.Tensor):
                return
            mask = state["mask"]
            if x.ndim >= 3 and tuple(x.shape[:2]) == tuple(mask.shape) and not paper_compat_padding:
                x = x[mask.bool()]
            x = x.reshape(-1, width)
            if name not in grams:
                grams[name] = Moments({"input": width}, device=device)
            grams[name].update({"input": x.float()})

        return hook

    sort = not paper_compat_padding
    pad_to = max_length if paper_compat_padding else None
    lengths = np.array([len(x) for x in enc["input_ids"]], dtype=np.int64)
    batches = _batches(np.arange(len(texts)), lengths, int(batch_size), sort=sort)
    bar = _progress(len(texts), progress, "linear inputs")
    hooks = [(m, make_hook(n, m), "pre") for n, m in linears.items()]
    try:
        with scoped_hooks(hooks), torch.inference_mode():
            for batch in batches:
                inputs = model_inputs(model, pad_batch(enc, batch, run.pad_id, pad_to), device)
                state["mask"] = inputs["attention_mask"]
                with _autocast(device, amp_dtype):
                    model(**inputs)
                bar.update(len(batch))
    finally:
        bar.close()
    return grams


# ====================================================================== command line
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lmsim.extract``: moments of a corpus, on one process or data parallel.

    Under ``torchrun`` (or ``accelerate launch``) the launcher's environment initialises
    the default process group (NCCL on GPUs, gloo on CPUs), every rank runs
    :func:`extract_moments` on its share of the shards, and rank 0 saves the merged
    moments::

        torchrun --nproc_per_node 8 -m lmsim.extract --models bert-base-uncased gpt2 \\
            --corpus ptb --split valid --pooling word --out ptb_valid.safetensors

    Load the result with :meth:`lmsim.moments.Moments.load`.
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m lmsim.extract",
        description="Stream the pooled hidden states of models over a corpus into float64 "
        "moments (a safetensors file); data parallel under torchrun / accelerate launch.",
    )
    parser.add_argument("--models", nargs="+", required=True, help="names, zoo/<name>, dirs")
    parser.add_argument("--corpus", required=True, help="lmsim.data.load_corpus name or .txt")
    parser.add_argument("--split", default="valid", help="corpus split (default: valid)")
    parser.add_argument("--max-docs", type=int, default=None, help="keep this many lines")
    parser.add_argument("--pooling", choices=POOLINGS, default="mean")
    parser.add_argument("--subword", choices=SUBWORDS, default="last")
    parser.add_argument("--layers", nargs="+", default=["all"], help="'all', 'last' or ints")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--shard-size", type=int, default=256)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--zoo-profile", default="default")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write shards")
    parser.add_argument("--out", required=True, help="where rank 0 saves the moments")
    args = parser.parse_args(argv)

    from lmsim.data import load_corpus

    # An entry point may read the launcher's environment; the library function only sees
    # the process group it makes.
    owned = "RANK" in os.environ and "WORLD_SIZE" in os.environ and not dist.is_initialized()
    if owned:
        cuda = torch.cuda.is_available() and resolve_device(args.device).type == "cuda"
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group(backend="nccl" if cuda else "gloo")
    try:
        texts = load_corpus(args.corpus, split=args.split, max_docs=args.max_docs)
        if args.pooling == "word":
            texts = [t.split() for t in texts]
        layers = (
            args.layers[0] if args.layers in (["all"], ["last"]) else list(map(int, args.layers))
        )
        mom = extract_moments(
            args.models,
            texts,
            layers=layers,
            pooling=args.pooling,
            subword=args.subword,
            max_length=args.max_length,
            batch_size=args.batch_size,
            shard_size=args.shard_size,
            device=args.device,
            dtype=args.dtype,
            cache=not args.no_cache,
            zoo_profile=args.zoo_profile,
            progress=True,
        )
        if not dist.is_initialized() or dist.get_rank() == 0:
            mom.save(args.out)
            print(f"{mom.n:,} rows x {mom.total_dim:,} features -> {args.out}")
    finally:
        if owned:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
