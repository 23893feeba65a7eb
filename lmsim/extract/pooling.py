"""Batches, forward passes and pooling: the one batch iterator under
:func:`~lmsim.extract.extract_moments` and :func:`~lmsim.extract.extract_activations`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from lmsim._runtime import autocast_dtype, resolve_device
from lmsim.blocks import block_name
from lmsim.extract.align import (
    POOLINGS,
    SUBWORDS,
    _check_alignment,
    _check_texts,
    _encode,
    _Encoded,
)
from lmsim.extract.runs import _autocast, _backbone, _prepare, _Run


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


def _forward_blocks(
    run: _Run, enc: _Encoded, batch, pad_to, device, amp_dtype
) -> tuple[dict, torch.Tensor]:
    """One model's pooled blocks of one batch, and whether each block is finite (a bool
    tensor of shape (n_blocks,) on ``device``: checked later, so a GPU is not stopped to
    answer it after every batch)."""
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
    return blocks, torch.stack([torch.isfinite(x).all() for x in blocks.values()])


# Batches whose finiteness flags a CUDA device answers at once (one sync): the host keeps
# enqueuing forwards meanwhile. A CPU answers every batch at once (no sync to save).
_CHECK_EVERY_CUDA = 16
_CHECK_EVERY_CPU = 1


def _check_finite(pending: list) -> None:
    """Raise for the first batch of ``pending`` (``(batch, model, block names, flags)``)
    with a non-finite block; one device sync for all of them. Clears ``pending``."""
    if not pending:
        return
    flags = torch.cat([f for *_, f in pending]).cpu()
    if bool(flags.all()):
        pending.clear()
        return
    at = 0
    for batch, name, keys, _ in pending:
        bad = [k for k, ok in zip(keys, flags[at : at + len(keys)].tolist()) if not ok]
        at += len(keys)
        if bad:
            pending.clear()
            raise ValueError(
                f"model {name!r} produced non-finite activations (NaN or Inf) in {bad} for "
                f"texts {batch[:5].tolist()}...; with float16 this is usually overflow: use "
                "dtype='bfloat16' or 'float32'"
            )


@dataclass(frozen=True)
class RowSettings:
    """What one row of an extraction is: the settings that travel together from
    :func:`~lmsim.extract.extract_moments` and :func:`~lmsim.extract.extract_activations` to
    the run's plan and, for the moments, into the shard cache's key (each documented there).
    """

    layers: object = "all"
    pooling: str = "mean"
    subword: str = "last"
    max_length: int | None = None
    dtype: object = None
    paper_compat_padding: bool = False
    lowercase: bool = False
    zoo_profile: str = "default"

    def plan_kwargs(self) -> dict:
        """The keywords :func:`_plan` takes besides the models, texts and device."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def cache_fields(self) -> dict:
        """The settings that decide a cached shard besides the models, the texts, the device
        type and the autocast dtype (which :func:`~lmsim.extract.hashing._cache_key` adds)."""
        return {
            "pooling": self.pooling,
            "subword": self.subword if self.pooling == "word" else None,
            "max_length": self.max_length,
            "paper_compat_padding": bool(self.paper_compat_padding),
            "lowercase": bool(self.lowercase),
        }


@dataclass
class _Plan:
    """A run's models, its texts and their tokenisations (``encs``: one per model, or None
    when the texts are tokenised a shard at a time: :func:`_shard_plan`)."""

    runs: list[_Run]
    encs: list[_Encoded] | None
    device: torch.device
    amp_dtype: torch.dtype | None
    pad_to: int | None
    texts: list
    encoding: tuple = ()  # pooling, subword, paper_compat_padding, lowercase


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
    encode: bool = True,
) -> _Plan:
    """Prepare the models and, with ``encode``, tokenise every text for each of them;
    without, the texts are tokenised later, a shard at a time (:func:`_shard_plan`)."""
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
    encoding = (pooling, subword, paper_compat_padding, lowercase)
    encs = _encode_all(runs, texts, encoding) if encode else None
    pad_to = max_length if (paper_compat_padding and pooling == "mean") else None
    return _Plan(runs, encs, device, amp_dtype, pad_to, texts, encoding)


def _encode_all(runs: list[_Run], texts: list, encoding: tuple) -> list[_Encoded]:
    encs = [_encode(r, texts, *encoding) for r in runs]
    _check_alignment(runs, encs, encoding[0])
    return encs


def _shard_plan(plan: _Plan, ids: np.ndarray) -> _Plan:
    """The plan of the texts ``ids`` alone, tokenised now: text ``j`` of the result is
    ``plan.texts[ids[j]]``. Batches of ``arange(len(ids))`` in it are those of ``ids`` in
    ``plan`` (:func:`_batches` sorts stably by length), so the moments are the same."""
    texts = [plan.texts[i] for i in ids]
    encs = _encode_all(plan.runs, texts, plan.encoding)
    return _Plan(plan.runs, encs, plan.device, plan.amp_dtype, plan.pad_to, texts, plan.encoding)


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
    cuda = torch.device(plan.device).type == "cuda"
    check_every = _CHECK_EVERY_CUDA if cuda else _CHECK_EVERY_CPU
    pending: list = []  # finiteness flags not yet read back from the device
    for batch in _rank_batches(plan, indices, batch_size, part):
        blocks = {}
        with torch.inference_mode():
            for run, enc in zip(plan.runs, plan.encs):
                run_blocks, finite = _forward_blocks(
                    run, enc, batch, plan.pad_to, plan.device, plan.amp_dtype
                )
                blocks.update(run_blocks)
                pending.append((batch, run.name, list(run_blocks), finite))
        if len(pending) >= check_every * len(plan.runs):
            _check_finite(pending)
        yield batch, blocks
        if progress_bar is not None:
            n_tokens += int(sum(enc.n_tokens[batch].sum() for enc in plan.encs))
            progress_bar.update(len(batch))
            elapsed = max(time.perf_counter() - start, 1e-9)
            progress_bar.set_postfix(tok_s=f"{n_tokens / elapsed:,.0f}")
    # Before the caller's loop ends (and it saves what it accumulated): every flag read.
    _check_finite(pending)


def _progress(total: int, progress: bool, desc: str):
    return tqdm(total=total, desc=desc, unit="text", disable=not progress, leave=False)
