"""Correlation clustering of neurons (Dalvi et al., 2020), from streaming moments.

The redundancy analysis of Dalvi et al. (2020), reused by the 2022 distillation thesis
(FORMULAS §4), groups the neurons of all layers by the Pearson correlation of their
activations: distance ``1 - |r|``, average-linkage agglomerative clustering, flat clusters
cut at distance ``τ``, and one representative neuron kept per cluster.

NeuroX computes ``np.corrcoef`` on the dense ``(n_tokens, n_neurons)`` activation matrix,
which must then sit in RAM (float32 BERT-base activations of 200k words: 8 GB). Here the
correlations come from a :class:`~lmsim.moments.Moments` (one streaming pass, memory
independent of the number of samples), or from an array or a stream of chunks reduced in
place chunk by chunk, and the condensed distance vector is written row block by row block,
so the only
``O(n_neurons²)`` objects are the co-moment matrix (float64, ``8·D²`` bytes), the condensed
distances (``4·D(D-1)`` bytes) and scipy's working copy of them.

Cost at BERT-base scale (13 layers × 768 = 9,984 neurons): co-moment 0.80 GB, condensed
distances 0.40 GB, scipy's copy inside ``linkage`` 0.40 GB. From an array or a stream the
co-moment is freed before the linkage: 1.26 GB peak measured above the interpreter
(``benchmarks/results/cluster_9984.json``: 1,000 tokens, nine cuts, 25 s on one busy core,
of which the linkage and cuts ~15 s; NeuroX's pipeline 2.38 GB and 32 s, and its memory
grows with the number of tokens while this does not). From a Moments, the caller's 0.80 GB co-moment
stays alive (about 2 GB). Cutting the same tree at several thresholds is free: pass a
list of thresholds.

Constant neurons
    A neuron whose variance is zero (numerically: ``std <= 1e-10 · |mean|``, far below
    float32 resolution) has no defined correlation. By default (``constant="singleton"``)
    its correlation with every other neuron is 0, exactly as NeuroX's ``np.nan_to_num``
    makes it: it sits at distance 1 from everything, so for any ``τ < 1`` it is a cluster
    of its own and is always kept. ``constant="merge"`` instead puts all constant neurons
    at distance 0 from each other (and 1 from the rest): they form one cluster, so one
    dead neuron represents them all.

References
----------
Dalvi, Sajjad, Durrani & Belinkov (2020), "Analyzing Redundancy in Pretrained Transformer
Models", EMNLP, Sec. 3 (correlation clustering) — NeuroX
``interpretation.clustering.create_correlation_clusters`` / ``extract_independent_neurons``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from lmsim._threads import thread_policy
from lmsim.moments import Moments

__all__ = [
    "correlation_distances",
    "cluster_neurons",
    "representatives",
    "neuron_blocks",
    "kept_per_block",
    "reconstruction_r2",
]

CONSTANT_MODES = ("singleton", "merge")
# A neuron is constant when std <= _CONSTANT_RTOL * |mean|: float32 activations cannot vary
# by less than ~6e-8 relative, so this only catches round-off of truly constant columns.
_CONSTANT_RTOL = 1e-10


class _Stats:
    """Count, mean and centred co-moment matrix (float64) plus the neuron index to use."""

    def __init__(self, n: int, mean: torch.Tensor, comoment: torch.Tensor, index: torch.Tensor):
        self.n, self.mean, self.comoment, self.index = n, mean, comoment, index


def _float64(x, device) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.ascontiguousarray(x))
    elif not isinstance(x, torch.Tensor):
        x = torch.as_tensor(np.asarray(x))
    return x.to(device=device, dtype=torch.float64)


def _accumulate(chunks, device) -> _Stats:
    """Co-moment of a stream of ``(rows, n_neurons)`` chunks, updated in place.

    Shifted sums (the shift is the first chunk's mean, so large common offsets do not
    cancel catastrophically): ``S = Σ (x - c)(x - c)ᵀ`` and ``s = Σ (x - c)``, then
    ``M = S - s sᵀ / n``. On the CPU ``S`` is a Fortran-ordered array updated by BLAS
    ``dsyrk`` in place (upper triangle only: half the flops of a matrix product); on
    other devices by ``addmm_``. Only the upper triangle and diagonal of the result are
    valid, all that :func:`correlation_distances` reads. Peak memory: one ``D × D``
    float64 matrix plus one chunk (:meth:`~lmsim.moments.Moments.update` also allocates
    the chunk's own co-moment and merge temporaries).
    """
    from scipy.linalg.blas import dsyrk

    on_cpu = device.type == "cpu"
    n, shift, total, S = 0, None, None, None
    for k, chunk in enumerate(chunks):
        if on_cpu:
            a = chunk.detach().cpu().numpy() if isinstance(chunk, torch.Tensor) else chunk
            a = np.asarray(a)
        else:
            a = _float64(chunk, device)
        if a.ndim != 2:
            raise ValueError(f"chunk {k} must have shape (rows, n_neurons), got {tuple(a.shape)}")
        if a.shape[0] == 0:
            continue
        if shift is None:
            d = a.shape[1]
            if on_cpu:
                shift = a.mean(axis=0, dtype=np.float64)
                total = np.zeros(d)
                S = np.zeros((d, d), dtype=np.float64, order="F")
            else:
                shift = a.mean(dim=0)
                total = torch.zeros_like(shift)
                S = torch.zeros(d, d, dtype=torch.float64, device=device)
        elif a.shape[1] != S.shape[0]:
            raise ValueError(f"chunk {k} has {a.shape[1]} neurons, earlier chunks {S.shape[0]}")
        if on_cpu:
            # One pass converts to float64 and centres into a new C-contiguous array (the
            # caller's data is never modified); its transpose is Fortran-contiguous, so
            # dsyrk reads it without a copy and updates S in place.
            with np.errstate(invalid="ignore", over="ignore"):  # non-finite: raised below
                x = np.subtract(a, shift, dtype=np.float64)
                dsyrk(1.0, x.T, beta=1.0, c=S, trans=0, lower=0, overwrite_c=1)
                total += x.sum(axis=0)
        else:
            x = a - shift
            S.addmm_(x.T, x)
            total += x.sum(dim=0)
        n += int(a.shape[0])
    if S is None:
        raise ValueError("need at least 2 samples for correlations, got none")
    if on_cpu:
        S, shift, total = torch.from_numpy(S), torch.from_numpy(shift), torch.from_numpy(total)
    # A NaN or Inf anywhere in a neuron's column reaches its diagonal entry: one check.
    if not (torch.isfinite(S.diagonal()).all() and torch.isfinite(total).all()):
        bad = torch.nonzero(~torch.isfinite(S.diagonal())).flatten()[:5].tolist()
        raise ValueError(f"non-finite activations (NaN or Inf) in neurons {bad}")
    mean_c = total / n
    S.addr_(mean_c, mean_c, alpha=-float(n))
    return _Stats(n, shift + mean_c, S, torch.arange(S.shape[0], device=device))


def _stats(X_or_moments, blocks, chunk_rows: int, device) -> _Stats:
    if isinstance(X_or_moments, Moments):
        mom = X_or_moments
        names = (
            [blocks] if isinstance(blocks, str) else (mom.names if blocks is None else list(blocks))
        )
        mom._check_names(names)
        # The state is read in place: mom.comoment(names) would copy the D × D matrix.
        index = torch.cat(
            [torch.arange(mom._offsets[n].start, mom._offsets[n].stop) for n in names]
        ).to(mom.device)
        return _Stats(mom.n, mom._mean, mom._comoment, index)
    if blocks is not None:
        raise ValueError("`blocks` selects blocks of a Moments; with an array `X` slice it instead")
    dev = torch.device("cpu") if device is None else torch.device(device)
    X = X_or_moments
    if isinstance(X, (np.ndarray, torch.Tensor)):
        if X.ndim != 2:
            raise ValueError(f"`X` must have shape (n_samples, n_neurons), got {tuple(X.shape)}")
        # Chunked: a float64 copy of one chunk, never of the whole matrix.
        rows = int(X.shape[0])
        return _accumulate((X[s : s + chunk_rows] for s in range(0, rows, chunk_rows)), dev)
    if isinstance(X, (list, tuple)) and X and np.ndim(X[0]) < 2:
        return _stats(np.asarray(X), None, chunk_rows, device)
    return _accumulate(iter(X), dev)


def correlation_distances(
    X_or_moments,
    blocks: Sequence[str] | None = None,
    *,
    absolute: bool = True,
    constant: str = "singleton",
    chunk_rows: int = 4096,
    row_block: int = 1024,
    device=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Condensed correlation distances ``1 - |r|`` between all neurons.

    Parameters
    ----------
    X_or_moments : ndarray or Tensor (n_samples, n_neurons), iterable of chunks, or Moments
        Raw activations; an iterable (e.g. a generator) of ``(rows, n_neurons)`` chunks,
        reduced one at a time so the activations never exist whole; or moments whose
        blocks (all, or ``blocks``) are concatenated in order into the neuron axis.
    blocks : sequence of str, optional
        Block names of a :class:`~lmsim.moments.Moments` to use (default: all, in layout
        order). Not allowed with an array.
    absolute : bool, default=True
        Distance ``1 - |r|`` (anti-correlated neurons are redundant too, as in NeuroX);
        ``False`` gives ``1 - r`` (range [0, 2]).
    constant : {"singleton", "merge"}
        Treatment of zero-variance neurons (module docstring).
    chunk_rows : int
        Samples per chunk when reducing a dense ``X`` (float64 copy of one chunk at a time).
    row_block : int
        Neurons per row block when filling the condensed vector (bounds the temporary
        ``(row_block, n_neurons)`` correlation slab).
    device : str or torch.device, optional
        Where an array or chunk stream is reduced (default CPU; moments keep their own).

    Returns
    -------
    dist : ndarray of shape (n_neurons * (n_neurons - 1) // 2,)
        float64, scipy's condensed layout (``squareform`` order), clipped to ``[0, 1]``
        (``[0, 2]`` without ``absolute``).
    is_constant : ndarray of bool, shape (n_neurons,)
    """
    if constant not in CONSTANT_MODES:
        raise ValueError(f"`constant` must be one of {CONSTANT_MODES}, got {constant!r}")
    st = _stats(X_or_moments, blocks, chunk_rows, device)
    if st.n < 2:
        raise ValueError(f"need at least 2 samples for correlations, got {st.n}")
    index = st.index
    n = int(index.shape[0])
    if n < 2:
        raise ValueError(f"need at least 2 neurons to cluster, got {n}")
    comoment = st.comoment
    diag = comoment.diagonal()[index]
    mean = st.mean[index]
    std = diag.clamp_min(0).sqrt()
    is_constant = std <= _CONSTANT_RTOL * mean.abs() * np.sqrt(st.n)
    inv = torch.where(is_constant, torch.zeros_like(std), 1.0 / std.clamp_min(1e-300))
    top = 2.0 if not absolute else 1.0
    dist = np.empty(n * (n - 1) // 2, dtype=np.float64)
    const_np = is_constant.cpu().numpy()
    contiguous = bool((index[1:] - index[:-1] == 1).all()) if n > 1 else True
    for start in range(0, n, row_block):
        stop = min(start + row_block, n)
        rows = index[start:stop]
        # Only columns >= start (the upper triangle) are read: an in-place stream
        # accumulation leaves the lower triangle unset.
        if contiguous:
            lo = int(index[0])
            slab = comoment[int(rows[0]) : int(rows[-1]) + 1, lo + start : lo + n]
        else:
            slab = comoment[rows][:, index[start:]]
        corr = slab * inv[start:stop, None] * inv[None, start:]
        d = 1.0 - (corr.abs() if absolute else corr)
        d = d.clamp_(0.0, top).cpu().numpy()
        for i in range(start, stop):
            offset = i * n - i * (i + 1) // 2
            dist[offset : offset + n - i - 1] = d[i - start, i + 1 - start :]
    if constant == "merge" and const_np.sum() > 1:
        idx = np.flatnonzero(const_np)
        for a in idx[:-1]:
            partners = idx[idx > a]
            dist[a * n - a * (a + 1) // 2 + partners - a - 1] = 0.0
    return dist, const_np


def _canonical(labels: np.ndarray) -> np.ndarray:
    """Relabel clusters 0..k-1 in order of their first neuron."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inverse].astype(np.int64)


@thread_policy
def cluster_neurons(
    X_or_moments,
    threshold: float | Sequence[float] | None = None,
    blocks: Sequence[str] | None = None,
    *,
    n_clusters: int | Sequence[int] | None = None,
    absolute: bool = True,
    constant: str = "singleton",
    method: str = "average",
    chunk_rows: int = 4096,
    device=None,
) -> np.ndarray | dict[float, np.ndarray]:
    """Cluster neurons by activation correlation and cut the tree at distance ``threshold``.

    The partition is the one of ``scipy.cluster.hierarchy.fcluster(linkage(dist,
    "average"), t=threshold, criterion="distance")`` on the condensed distances
    ``1 - |r|`` (:func:`correlation_distances`): two neurons share a cluster iff their
    cophenetic (average-linkage merge) distance is ``<= threshold``.

    Parameters
    ----------
    X_or_moments : ndarray or Tensor (n_samples, n_neurons), iterable of chunks, or Moments
        Activations, a stream of activation chunks, or moments (no dense activation
        matrix needed); see :func:`correlation_distances`.
    threshold : float or sequence of float, optional
        Cut distance τ. A sequence cuts one tree at each value (the linkage, the costly
        part, is computed once).
    n_clusters : int or sequence of int, optional
        Instead of (or beside) ``threshold``: cut the same tree into this many clusters
        (``fcluster(Z, k, criterion="maxclust")``, the lowest cut with at most ``k``
        clusters; exactly ``k`` unless merge heights tie). A kept share is then set
        exactly, ``k = round(share · n_neurons)``, instead of by the τ whose share is
        closest on a grid.
    blocks : sequence of str, optional
        Moments blocks to concatenate into the neuron axis (default: all, layout order).
    absolute, constant, chunk_rows, device
        See :func:`correlation_distances`.
    method : str, default="average"
        scipy linkage method (the paper: average).

    Returns
    -------
    labels : ndarray of int64, shape (n_neurons,)
        Cluster ids ``0..k-1`` numbered by the first neuron of each cluster (neuron 0 is in
        cluster 0). With a sequence of thresholds, a dict ``{τ: labels}``; with a sequence
        of ``n_clusters``, a dict ``{k: labels}`` (int keys); with both, one dict holding
        the float ``τ`` keys and the int ``k`` keys.

    Notes
    -----
    Memory for ``D`` neurons: ``8·D²`` bytes of co-moment (the caller's Moments, or built
    in place from ``X`` chunk by chunk and freed before the linkage) plus ``8·D(D-1)``
    bytes for the condensed distances and scipy's copy; 1.26 GB measured at D = 9,984
    from a stream. Time: ``O(n_samples·D²/2)`` for the co-moment (BLAS ``syrk``) and
    ``O(D²)`` for the linkage (nearest-neighbour chain).

    References
    ----------
    Dalvi et al. (2020), Sec. 3; FORMULAS §4.
    """
    from scipy.cluster.hierarchy import fcluster, linkage

    if threshold is None and n_clusters is None:
        raise ValueError("give `threshold` (cut distances τ) or `n_clusters` (cluster counts)")
    many = threshold is not None and not np.isscalar(threshold)
    many |= n_clusters is not None and not np.isscalar(n_clusters)
    many |= threshold is not None and n_clusters is not None
    thresholds = [] if threshold is None else [float(t) for t in np.atleast_1d(threshold)]
    counts = [] if n_clusters is None else list(np.atleast_1d(n_clusters))
    for k in counts:
        if isinstance(k, (bool, np.bool_)) or not float(k).is_integer() or int(k) < 1:
            raise ValueError(f"`n_clusters` must be integers >= 1, got {n_clusters!r}")
    counts = [int(k) for k in counts]
    if set(thresholds) & set(counts):  # 1.0 == 1: the dict could not hold both cuts
        raise ValueError(f"τ {thresholds} and `n_clusters` {counts} share a key; cut them apart")
    # The largest distance 1 - |r| (or 1 - r) can take: beyond it, one cluster.
    top, formula = (1.0, "1 - |r|") if absolute else (2.0, "1 - r")
    for t in thresholds:
        if not np.isfinite(t) or t < 0:
            raise ValueError(f"`threshold` must be a finite distance >= 0, got {t!r}")
        if t > top:
            raise ValueError(
                f"`threshold`={t!r} is beyond the largest distance {formula} can take "
                f"({top:g}): every neuron would fall in one cluster; cut at a distance in "
                f"[0, {top:g}]"
            )
    dist, _ = correlation_distances(
        X_or_moments,
        blocks,
        absolute=absolute,
        constant=constant,
        chunk_rows=chunk_rows,
        device=device,
    )
    n_neurons = int(round((1 + np.sqrt(1 + 8 * dist.size)) / 2))
    for k in counts:
        if k > n_neurons:
            raise ValueError(f"`n_clusters`={k} exceeds the {n_neurons} neurons")
    Z = linkage(dist, method=method)
    del dist
    out = {t: _canonical(fcluster(Z, t, criterion="distance")) for t in thresholds}
    out |= {k: _canonical(fcluster(Z, k, criterion="maxclust")) for k in counts}
    return out if many else next(iter(out.values()))


def representatives(labels, seed: int | np.random.Generator | None = 0) -> np.ndarray:
    """One neuron per cluster, drawn uniformly within each cluster with a seeded generator.

    NeuroX draws each representative with the unseeded global ``np.random.choice``, so its
    kept set changes from run to run; ``seed=None`` reproduces that (fresh OS entropy).

    Parameters
    ----------
    labels : array-like of int, shape (n_neurons,)
        Cluster id of every neuron (any integers).
    seed : int, numpy Generator or None
        Seed of :func:`numpy.random.default_rng` (or a generator to draw from).

    Returns
    -------
    kept : ndarray of int64, shape (n_clusters,)
        Indices of the kept neurons, ascending; exactly one per cluster.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"`labels` must be a non-empty 1-D array, got shape {labels.shape}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    keys = rng.random(labels.size)
    # Each neuron gets a uniform key; the smallest key of each cluster is a uniform draw.
    order = np.lexsort((keys, labels))
    first = np.ones(labels.size, dtype=bool)
    first[1:] = labels[order][1:] != labels[order][:-1]
    return np.sort(order[first]).astype(np.int64)


def neuron_blocks(dims: Mapping[str, int] | Moments) -> np.ndarray:
    """Block name of every neuron of the concatenation ``dims`` describes (layout order).

    ``dims`` is ``{block: width}`` (e.g. ``Moments.dims``) or a Moments.
    """
    if isinstance(dims, Moments):
        dims = dims.dims
    return np.concatenate([np.full(int(w), name, dtype=object) for name, w in dims.items()])


def kept_per_block(kept, layer_of: Mapping[str, int] | Moments | Sequence) -> dict:
    """Number of kept neurons per layer (the thesis's Table 5.1), zeros included.

    Parameters
    ----------
    kept : array-like of int
        Kept neuron indices (e.g. :func:`representatives`).
    layer_of : mapping of str to int, Moments, or array-like of shape (n_neurons,)
        ``{block: width}`` in layout order (every block reported, in that order), or the
        layer of every neuron (reported in sorted order of the distinct values).

    Returns
    -------
    counts : dict
        ``{layer: n_kept}``.
    """
    if isinstance(layer_of, (Mapping, Moments)):
        per_neuron = neuron_blocks(layer_of)
        keys = list(layer_of.dims if isinstance(layer_of, Moments) else layer_of)
    else:
        per_neuron = np.asarray(layer_of)
        keys = sorted(set(per_neuron.tolist()))
    kept = np.asarray(kept, dtype=np.int64)
    if kept.size and (kept.min() < 0 or kept.max() >= per_neuron.size):
        raise ValueError(
            f"`kept` indices must lie in [0, {per_neuron.size}), got {kept.min()}..{kept.max()}"
        )
    counts = dict.fromkeys(keys, 0)
    for layer in per_neuron[kept].tolist():
        counts[layer] += 1
    return counts


def _standardised(X, mean, std) -> np.ndarray:
    return (np.asarray(X, dtype=np.float64) - mean) / std


def reconstruction_r2(
    X_fit,
    X_eval,
    subsets: Mapping,
    *,
    ridge: float = 1e-3,
    n_targets: int | None = 2000,
    seed: int = 0,
) -> dict:
    """Share of all neurons' variance a subset of them reconstructs linearly, held out.

    A probe-free measure of redundancy: with every neuron standardised on ``X_fit``, each
    target neuron is regressed (ridge) on the subset's neurons from the fit rows, and
    ``R² = 1 - SSE / SST`` is pooled over the targets on the ``X_eval`` rows. A subset that
    keeps one neuron per cluster of correlated neurons should reconstruct more than a
    random subset of the same size.

    Parameters
    ----------
    X_fit : ndarray, shape (n_fit, n_neurons)
        Rows (words) the regression is fitted on; also the standardisation.
    X_eval : ndarray, shape (n_eval, n_neurons)
        Held-out rows the R² is measured on.
    subsets : mapping of key to ndarray of int
        Column indices of each subset (e.g. the kept neurons per τ).
    ridge : float
        Added to the diagonal of the subset's correlation matrix (its trace is its size),
        so a subset wider than the fit rows' rank still has a unique fit.
    n_targets : int or None
        Regress a seeded random sample of this many target neurons (an unbiased estimate
        of the pooled R² over all neurons, each standardised, so each weighs the same);
        None: all neurons.
    seed : int
        Draws the target sample.

    Returns
    -------
    dict of key to float
        Held-out pooled R² per subset, ``1 - Σ_j SSE_j / Σ_j SST_j`` over the targets.
    """
    X_fit = np.asarray(X_fit)
    X_eval = np.asarray(X_eval)
    if X_fit.ndim != 2 or X_eval.ndim != 2 or X_fit.shape[1] != X_eval.shape[1]:
        raise ValueError(
            "`X_fit` and `X_eval` must be 2-D with the same number of columns (neurons), "
            f"got {X_fit.shape} and {X_eval.shape}"
        )
    n = X_fit.shape[1]
    mean = X_fit.mean(axis=0, dtype=np.float64)
    std = X_fit.std(axis=0, dtype=np.float64)
    std[std <= 1e-10 * np.maximum(np.abs(mean), 1.0)] = 1.0  # a constant neuron: centred only
    rng = np.random.default_rng(seed)
    targets = (
        np.arange(n)
        if n_targets is None or n_targets >= n
        else np.sort(rng.choice(n, size=int(n_targets), replace=False))
    )
    Z = _standardised(X_fit, mean, std)
    E = _standardised(X_eval, mean, std)
    gram = Z.T @ Z / len(Z)  # (n, n) correlations of the fit rows
    E_t = E[:, targets]
    sst = float(((E_t - E_t.mean(axis=0)) ** 2).sum())
    out = {}
    for key, cols in subsets.items():
        cols = np.asarray(cols, dtype=np.int64)
        if cols.size == 0:
            out[key] = 0.0
            continue
        A = gram[np.ix_(cols, cols)] + float(ridge) * np.eye(cols.size)
        B = np.linalg.solve(A, gram[np.ix_(cols, targets)])  # (k, n_targets)
        residual = E_t - E[:, cols] @ B
        out[key] = float(1.0 - (residual**2).sum() / sst)
    return out
