"""``avgcorr``: a layer's mean similarity to its model's other layers, with an interval over
the layers averaged over.

References
----------
The 2022 thesis on distillation and redundancy, Eq. 3.2 (``avgcorr``); Wu et al. (2020)
compare every layer of every model with every other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["avgcorr_bootstrap"]


def _avgcorr_weighted(block: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``avgcorr`` of every layer with column ``j`` counted ``counts[j]`` times (j ≠ i)."""
    w = np.broadcast_to(counts, block.shape).astype(np.float64).copy()
    np.fill_diagonal(w, 0.0)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (block * w).sum(axis=1) / total


def avgcorr_bootstrap(
    blocks: Sequence[np.ndarray],
    statistic: Callable[[list[np.ndarray]], float],
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
):
    """A statistic of the layers' ``avgcorr`` with an interval over the layers averaged over.

    ``avgcorr`` of layer ``i`` is its mean CKA to the model's other layers (the thesis's
    Eq. 3.2, :func:`lmsim.metrics.localization.mean_to_others`). Which layers a model has is
    the sample: every draw resamples, for each block independently, the columns ``j`` (the
    layers averaged over) with replacement and recomputes every ``avgcorr_i`` over the drawn
    ``j ≠ i``; draws where some ``avgcorr`` is undefined are dropped.

    Parameters
    ----------
    blocks : sequence of ndarray of shape (n_layers_m, n_layers_m)
        Each model's own layer x layer CKA (or a part of it, e.g. without the embeddings).
    statistic : callable
        ``statistic([avgcorr_0, avgcorr_1, ...]) -> float``, one array per block.
    n_boot, level, seed
        Resamples, coverage, seed of :func:`numpy.random.default_rng` (block 0's columns
        drawn first, then block 1's, ... in every draw).

    Returns
    -------
    lmsim.stats.Estimate
        ``unit`` "layers averaged over", ``n`` the number of layers of all blocks.
    """
    from lmsim.stats import Estimate

    blocks = [np.asarray(b, dtype=np.float64) for b in blocks]
    if not blocks or any(b.ndim != 2 or b.shape[0] != b.shape[1] or len(b) < 2 for b in blocks):
        raise ValueError("`blocks` must be square layer x layer matrices with >= 2 layers each")
    if not 0 < level < 1:
        raise ValueError(f"`level` must lie in (0, 1), got {level}")
    observed = float(statistic([_avgcorr_weighted(b, np.ones(len(b))) for b in blocks]))
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(int(n_boot)):
        counts = [np.bincount(rng.integers(0, len(b), len(b)), minlength=len(b)) for b in blocks]
        value = statistic([_avgcorr_weighted(b, c) for b, c in zip(blocks, counts, strict=True)])
        if np.isfinite(value):
            draws.append(value)
    if len(draws) < 2:
        raise ValueError("fewer than 2 finite resamples: too few layers to resample")
    draws = np.asarray(draws)
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(
        observed, low, high, level, "layers averaged over",
        sum(len(b) for b in blocks), f"percentile bootstrap ({len(draws)} resamples of layers)",
        float(draws.std(ddof=1)), draws=draws,
    )  # fmt: skip
