"""Pooled hidden states streamed shard by shard into one :class:`~lmsim.moments.Moments`.

:func:`extract_moments` is a short sequence of steps: plan the run on this rank, cut the
texts into shards, open the shard cache, resolve this rank's shards (load a cached one,
else claim and compute it), and merge them in shard order.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from lmsim._threads import thread_policy
from lmsim.extract.distributed import _device_scope, _owner, _plan_on_rank
from lmsim.extract.hashing import _cache_key, _content_hash
from lmsim.extract.pooling import (
    RowSettings,
    _Plan,
    _pooled_batches,
    _progress,
    _shard_plan,
    _text_lengths,
)
from lmsim.extract.room import check_room
from lmsim.extract.shard_cache import (
    _claim_shard,
    _load_shard,
    _read_manifest,
    _save_shard,
    _shard_path,
    _write_manifest,
)
from lmsim.moments import Moments

_CLAIM_POLL_S = 0.5
# Corpus-order shards (return_shards) tokenised a shard at a time, the next one on a
# background thread while the current one streams (tests switch either off).
_LAZY_ENCODING = True
_PREFETCH = True
# A corrupt cache entry is reported at the line that called extract_moments: move_aside,
# the reader, _cached_shard, _resolve_shard, _resolve_shards, extract_moments, its
# @thread_policy wrapper, the caller.
_CALLER_FRAME = 8


@thread_policy
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
        Compute precision (``torch.autocast``): None = float32 on every device; "bfloat16" or
        "float16" by name only.
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
        ``shard_size``). The texts are then tokenised a shard at a time, on a background
        thread, the next shard while the current one streams (host memory holds two
        shards' tokenisations, not the corpus's); the moments are the same bit for bit.
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
    rows = RowSettings(
        layers, pooling, subword, max_length, dtype, paper_compat_padding, lowercase, zoo_profile
    )
    if not isinstance(shard_size, (int, np.integer)) or shard_size < 1:
        raise ValueError(f"`shard_size` must be a positive int, got {shard_size!r}")
    extra_hash = _content_hash(cache_key_extra) if cache else None  # refuse early
    # Corpus-order shards need no lengths up front: each is tokenised when its turn comes.
    lazy = bool(return_shards) and _LAZY_ENCODING
    plan, group, rank, world = _plan_on_rank(
        models, texts, distributed, device, **rows.plan_kwargs(), encode=not lazy
    )
    shard_ids = _shards(plan, int(shard_size), by_length=not return_shards)
    mine = [k for k in range(len(shard_ids)) if _owner(k, world) == rank]
    # Before any forward pass: the moments it will hold must fit where they are held.
    check_room(plan.runs, plan.device, len(mine) + 1 if return_shards else 2, return_shards)
    store = None
    if cache:
        fields = _cache_fields(rows, int(shard_size), extra_hash, return_shards)
        store = _open_store(plan, fields, len(shard_ids))
    # One process returning only the merge folds each shard in as soon as the shards before
    # it are in: it holds the running merge and one shard, not every shard.
    merger = _InOrderMerge() if group is None and not return_shards else None
    encoder = _ShardEncoder(plan, shard_ids) if lazy else None
    try:
        shards, written = _resolve_shards(
            plan, shard_ids, mine, store, batch_size, merger, progress and rank == 0, encoder
        )
    finally:
        if encoder is not None:
            encoder.close()
    if group is not None and store is not None:
        _gather_records(store, written, plan.device, group, rank, world)
    return _merged(shards, merger, len(shard_ids), group, return_shards)


def _cache_fields(rows: RowSettings, shard_size: int, extra_hash, return_shards: bool) -> dict:
    """The fields of the shard cache's key besides the models, the texts, the device type
    and the autocast dtype."""
    fields = {**rows.cache_fields(), "shard_size": shard_size, "cache_key_extra": extra_hash}
    if not return_shards:
        # Only the new layout gets a field: corpus-order shards keep their old keys.
        fields["shard_order"] = "length"
    return fields


class _ShardEncoder:
    """Tokenises shards on one background thread (:func:`_shard_plan`), in the order they
    will be computed, one ahead: shard ``k + 1``'s texts are tokenised while shard ``k``
    streams through the models. One worker: a tokenizer is never used by two threads."""

    def __init__(self, plan: _Plan, shard_ids: list[np.ndarray]):
        self.plan, self.shard_ids = plan, shard_ids
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lmsim-tokenise")
        self.futures: dict[int, Future] = {}
        self.order: list[int] = []

    def schedule(self, order: list[int]) -> None:
        """The shards this process will compute, in order; the first starts now."""
        self.order = list(order)
        if self.order and _PREFETCH:
            self._submit(self.order[0])

    def _submit(self, k: int) -> None:
        if k not in self.futures:
            self.futures[k] = self.pool.submit(_shard_plan, self.plan, self.shard_ids[k])

    def get(self, k: int) -> _Plan:
        """Shard ``k``'s plan (waiting for its tokenisation); the next shard starts."""
        self._submit(k)
        if _PREFETCH and k in self.order:
            at = self.order.index(k)
            if at + 1 < len(self.order):
                self._submit(self.order[at + 1])
        return self.futures.pop(k).result()

    def close(self) -> None:
        for future in self.futures.values():
            future.cancel()
        self.pool.shutdown(wait=True)
        self.futures.clear()


def _shards(plan: _Plan, shard_size: int, by_length: bool) -> list[np.ndarray]:
    """Text indices of each shard: consecutive pieces of the corpus order, or of the
    order of all texts by length (longest first, ties in corpus order)."""
    n_texts = len(plan.texts)
    order = np.arange(n_texts)
    if by_length:
        order = order[np.argsort(-_text_lengths(plan), kind="stable")]
    return [order[start : start + shard_size] for start in range(0, n_texts, shard_size)]


@dataclass
class _Store:
    """The cache folder of one key: its shard files and the manifest fields."""

    folder: Path
    payload: dict
    n_shards: int


def _open_store(plan: _Plan, fields: dict, n_shards: int) -> _Store:
    """The cache folder of the key of ``plan`` and ``fields`` (the options that decide a
    shard besides the models, the texts, the device type and the autocast dtype)."""
    from lmsim._cache import cache_dir

    key, payload = _cache_key(plan, fields)
    return _Store(cache_dir("acts", key), payload, n_shards)


def _resolve_shards(
    plan: _Plan,
    shard_ids: list[np.ndarray],
    mine: list[int],
    store: _Store | None,
    batch_size: int,
    merger: _InOrderMerge | None,
    progress: bool,
    encoder: _ShardEncoder | None = None,
) -> tuple[dict[int, Moments], dict[str, dict]]:
    """Load or compute the shards ``mine``, in shard order.

    A shard another live process is computing is passed over and tried again after
    ``_CLAIM_POLL_S`` seconds, until all are done. Each shard goes to ``merger`` when one is
    given, else into the returned dict.

    Returns
    -------
    shards : dict of int to Moments
        Shard index to its moments (empty with a ``merger``).
    written : dict of str to dict
        Shard file name to its record, of the shards this process wrote.
    """
    # Finished shards are loaded (and checked) when their turn comes, not all up front.
    on_disk = set()
    if store is not None:
        on_disk = {k for k in mine if _shard_path(store.folder, k).exists()}
    if encoder is not None:
        encoder.schedule([k for k in mine if k not in on_disk])
    shards: dict[int, Moments] = {}
    written: dict[str, dict] = {}
    total = int(sum(len(shard_ids[k]) for k in mine if k not in on_disk))
    bar = _progress(total, progress, "extract")
    try:
        pending = mine
        while pending:
            waiting = []
            for k in pending:
                mom = _resolve_shard(
                    plan, k, shard_ids[k], store, on_disk, batch_size, bar, written, encoder
                )
                if mom is None:
                    waiting.append(k)  # another live process is computing it
                    continue
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
    return shards, written


def _resolve_shard(
    plan: _Plan,
    k: int,
    ids: np.ndarray,
    store: _Store | None,
    on_disk: set[int],
    batch_size: int,
    bar,
    written: dict[str, dict],
    encoder: _ShardEncoder | None = None,
) -> Moments | None:
    """Shard ``k`` (texts ``ids``): loaded if it was on disk and is whole, else computed
    under this process's claim (and saved, its record added to ``written``); None when
    another live process holds the claim."""
    mom = claim = None
    if k in on_disk:
        on_disk.discard(k)
        mom = _cached_shard(store, k, plan.device)
        if mom is None:  # corrupt and moved aside: computed below
            bar.total += len(ids)
            bar.refresh()
    if mom is None and store is not None:
        claim = _claim_shard(store.folder, k)
        if claim is None:
            return None
    try:
        if claim is not None:  # finished by another process since we looked?
            mom = _cached_shard(store, k, plan.device)
            if mom is not None:
                bar.update(len(ids))
        if mom is None:
            if encoder is None:
                batches = _pooled_batches(plan, ids, batch_size, bar)
            else:  # this shard's own tokenisation, its texts numbered 0 .. len(ids) - 1
                batches = _pooled_batches(encoder.get(k), np.arange(len(ids)), batch_size, bar)
            mom = _accumulate(batches, plan.device)
            if store is not None:
                name = _shard_path(store.folder, k).name
                written[name] = _save_shard(mom, store.folder, k)
                _write_manifest(store.folder, store.payload, store.n_shards, {name: written[name]})
    finally:
        if claim is not None:
            claim.unlink(missing_ok=True)
    return mom


def _cached_shard(store: _Store, k: int, device: torch.device) -> Moments | None:
    """Shard ``k`` from the cache, checked against its manifest record; None if missing
    or corrupt (then moved aside)."""
    name = _shard_path(store.folder, k).name
    record = _read_manifest(store.folder, stacklevel=_CALLER_FRAME).get("shards", {}).get(name)
    return _load_shard(store.folder, k, record, device, stacklevel=_CALLER_FRAME)


def _gather_records(
    store: _Store, written: dict, device: torch.device, group, rank: int, world: int
) -> None:
    """Ranks rewriting the manifest at once can drop each other's records: rank 0 writes
    all of them once more (the gather also waits for every rank's files)."""
    everyone: list = [None] * world
    with _device_scope(device):
        dist.all_gather_object(everyone, written, group=group)
    if rank == 0:
        records = {k: v for w in everyone for k, v in w.items()}
        _write_manifest(store.folder, store.payload, store.n_shards, records)


def _merged(shards: dict, merger, n_shards: int, group, return_shards: bool):
    """The merge of all shards in shard order, on every rank (and the shards themselves
    with ``return_shards``)."""
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
