"""Raw pooled hidden states (:func:`extract_activations`), rows in the texts' order."""

from __future__ import annotations

import numpy as np
import torch.distributed as dist

from lmsim._threads import thread_policy
from lmsim.extract.distributed import _device_scope, _plan_on_rank
from lmsim.extract.pooling import RowSettings, _pooled_batches, _progress, _rank_batches


@thread_policy
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
    rows = RowSettings(
        layers, pooling, subword, max_length, dtype, paper_compat_padding, lowercase, zoo_profile
    )
    plan, group, rank, world = _plan_on_rank(
        models, texts, distributed, device, **rows.plan_kwargs()
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
