"""NeuroX's neuron rankings from probe weights: top neurons by weight mass, global ordering."""

from __future__ import annotations

import numpy as np

from lmsim._checks import check_finite


def get_top_neurons(weights, percentage: float) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Neurons holding ``percentage`` of each class's absolute weight mass (NeuroX semantics).

    Parameters
    ----------
    weights : array-like of shape (n_classes, n_neurons)
        Probe weights (signed; absolute values are used).
    percentage : float
        In [0, 1]; 0 keeps one neuron per class (the largest), 1 keeps every neuron up to
        the one completing the mass.

    Returns
    -------
    overall : ndarray of int64
        Union over classes, ascending (NeuroX returns it in set order).
    per_class : dict of int to ndarray of int64
        Class index → its top neurons, largest weight first.

    References
    ----------
    Dalvi et al. (2019), Sec. 3.2; NeuroX ``linear_probe.get_top_neurons``.
    """
    W = np.abs(np.asarray(weights, dtype=np.float64))
    if W.ndim != 2:
        raise ValueError(f"`weights` must have shape (n_classes, n_neurons), got {W.shape}")
    check_finite(W, "weights")
    if not 0.0 <= percentage <= 1.0:
        raise ValueError(f"`percentage` must lie in [0, 1], got {percentage!r}")
    per_class = {}
    for c in range(W.shape[0]):
        # Stable sort of the negated weights: ties keep the lower neuron index first.
        order = np.argsort(-W[c], kind="stable")
        cum = np.cumsum(W[c, order])
        reached = np.flatnonzero(cum >= cum[-1] * percentage)
        n_keep = W.shape[1] if reached.size == 0 else int(reached[0]) + 1
        per_class[c] = order[:n_keep].astype(np.int64)
    overall = np.unique(np.concatenate(list(per_class.values()))).astype(np.int64)
    return overall, per_class


def neuron_ordering(weights, search_stride: int = 100) -> tuple[np.ndarray, list[int]]:
    """Global neuron ordering by weight mass (NeuroX ``get_neuron_ordering``).

    Top neurons at masses ``0, 1/stride, ..., 1`` are appended in turn (neurons new at a
    step in ascending index order); ``cutoffs[k]`` is the length after step ``k``.
    Neurons never selected (zero weights) are not in the ordering, as in NeuroX.
    """
    seen: set[int] = set()
    ordering: list[int] = []
    cutoffs = []
    for p in range(search_stride + 1):
        top, _ = get_top_neurons(weights, p / search_stride)
        new = sorted(set(top.tolist()) - seen)
        ordering += new
        seen.update(new)
        cutoffs.append(len(ordering))
    return np.asarray(ordering, dtype=np.int64), cutoffs
