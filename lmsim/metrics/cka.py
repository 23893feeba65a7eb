"""Centered kernel alignment: linear (biased), debiased (unbiased HSIC) and RBF.

References
----------
Kornblith, Norouzi, Lee & Hinton (2019), "Similarity of Neural Network Representations
Revisited", ICML, Eq. 1–4 (HSIC, CKA). Song, Smola, Gretton, Bedo & Borgwardt (2012),
"Feature Selection via Dependence Maximization", JMLR 13, Eq. 5 (unbiased HSIC).
Wu et al. (2020), "Similarity Analysis of Contextual Word Representation Models", ACL,
App. A.3 (ckasim).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from lmsim.metrics._linalg import (
    BlockStats,
    _check_matrix,
    as_float64,
    check_nonzero_block,
    check_pair,
    constant_mask,
    pair_stats,
)
from lmsim.moments import Moments

__all__ = [
    "DebiasedCKAStats",
    "debiased_cka",
    "debiased_cka_matrix",
    "linear_cka",
    "linear_cka_gram_matrix",
    "linear_cka_matrix",
    "outlier_neurons",
    "rbf_cka",
]


# --------------------------------------------------------------------------- linear CKA
def prepare_linear_cka(stats: BlockStats) -> torch.Tensor:
    """Per-block part of linear CKA: ``‖Xcᵀ Xc‖_F`` (raises for an all-constant block)."""
    check_nonzero_block(stats, "linear_cka")
    return torch.linalg.matrix_norm(stats.comoment)


def linear_cka_pair(norm_x: torch.Tensor, norm_y: torch.Tensor, cxy: torch.Tensor) -> float:
    """Linear CKA from ``‖Xcᵀ Xc‖_F``, ``‖Ycᵀ Yc‖_F`` and the cross co-moment ``Xcᵀ Yc``."""
    return float(torch.linalg.matrix_norm(cxy) ** 2 / (norm_x * norm_y))


def linear_cka(X, Y, b=None) -> float:
    """Linear CKA between two representations of the same samples.

    ``CKA(X, Y) = ‖Ycᵀ Xc‖_F² / (‖Xcᵀ Xc‖_F ‖Ycᵀ Yc‖_F)`` with ``Xc``, ``Yc`` the
    column-centred activations (the biased HSIC estimator with linear kernels).

    Parameters
    ----------
    X : ndarray or Tensor of shape (n_samples, d_x), or Moments
        Activations of the first representation; or a :class:`~lmsim.moments.Moments`,
        in which case ``Y`` and ``b`` are two of its block names.
    Y : ndarray or Tensor of shape (n_samples, d_y), or str
        Activations of the second representation (same rows), or block name ``a``.
    b : str, optional
        Second block name (moments path only).

    Returns
    -------
    float
        In ``[0, 1]``; symmetric; invariant to orthogonal transforms, isotropic scaling
        and translation of either representation.

    Raises
    ------
    ValueError
        Mismatched ``n_samples``, fewer than 2 samples, non-finite values, or a block whose
        neurons are all constant (CKA would be 0/0).
    KeyError
        Unknown block name (moments path).

    References
    ----------
    Kornblith et al. (2019), Eq. 5; Wu et al. (2020), App. A.3.
    """
    sx, sy, cxy = pair_stats(X, Y, b, fn="linear_cka")
    return linear_cka_pair(prepare_linear_cka(sx), prepare_linear_cka(sy), cxy)


def outlier_neurons(
    mom: Moments, name: str, factor: float = 100.0, top_k: int | None = None
) -> list[int]:
    """Neurons of a block whose variance exceeds ``factor`` times the block's median variance.

    Llama-family models carry a few "massive activation" dimensions (Sun et al. 2024):
    one or two neurons whose variance is orders of magnitude above the rest. Linear CKA
    weighs neurons by their variance, so such neurons dominate it.

    Parameters
    ----------
    mom : Moments
    name : str
        A block of ``mom``.
    factor : float, default=100.0
        Ratio to the median neuron variance above which a neuron is an outlier.
    top_k : int, optional
        Instead of the ratio rule, the ``top_k`` neurons of largest variance (``factor``
        is then ignored).

    Returns
    -------
    list of int
        Indices of the outlier neurons within the block, by decreasing variance.
    """
    var = mom.var(name).double()
    order = torch.argsort(var, descending=True)
    if top_k is not None:
        if not isinstance(top_k, (int, np.integer)) or not 0 <= top_k <= len(var):
            raise ValueError(f"`top_k` must be an int in [0, {len(var)}], got {top_k!r}")
        return [int(i) for i in order[: int(top_k)]]
    if not factor > 0:
        raise ValueError(f"`factor` must be positive, got {factor!r}")
    ratio = var / var.median().clamp_min(torch.finfo(torch.float64).tiny)
    return [int(i) for i in order if ratio[i] > factor]


def linear_cka_matrix(
    mom: Moments,
    names: Sequence[str],
    drop: Mapping[str, Sequence[int]] | None = None,
    standardize: bool = False,
) -> np.ndarray:
    """Linear CKA of every pair of blocks, with some neurons left out or every neuron z-scored.

    ``out[i, j]`` is :func:`linear_cka` of block ``names[i]`` and block ``names[j]`` after
    removing the neurons ``drop[name]`` from each (the columns of ``Xc``) and, with
    ``standardize``, dividing every kept neuron by its standard deviation over the samples:
    ``Xc D_x^{-1/2}`` with ``D_x = diag(Xcᵀ Xc)``, so the co-moments become
    ``D_x^{-1/2} Xcᵀ Yc D_y^{-1/2}`` (correlations). All of it is read from the joint
    moments (the co-moment's diagonal gives the scales) without another pass over the data.

    Plain linear CKA weighs each neuron by its variance, so a few neurons of huge variance
    can decide it; z-scored CKA weighs every neuron alike and is invariant to rescaling
    any single neuron (plain CKA is invariant to isotropic scaling only).

    Parameters
    ----------
    mom : Moments
    names : sequence of str
        Blocks of ``mom``.
    drop : dict of str to sequence of int, optional
        Block -> neuron indices to leave out (e.g. :func:`outlier_neurons`).
    standardize : bool, default=False
        Z-score every kept neuron. Constant neurons (zero variance up to rounding,
        ``lmsim.metrics._linalg.constant_mask``) carry no signal and are left out.

    Returns
    -------
    ndarray of shape (len(names), len(names))

    References
    ----------
    Kornblith et al. (2019), Eq. 5 (CKA) and Sec. 3 (invariances; CKA of z-scored features
    is not invariant to invertible linear maps, only to per-neuron scaling and orthogonal
    maps of the standardised features); Wu et al. (2020), App. A.3.
    """
    names = list(names)
    drop = dict(drop or {})
    unknown = sorted(set(drop) - set(names))
    if unknown:
        raise KeyError(f"`drop` names blocks {unknown} that are not among `names`")
    keep, scale = {}, {}
    for name in names:
        dim = int(mom.mean(name).shape[0])
        mask = torch.ones(dim, dtype=torch.bool, device=mom.device)
        mask[list(drop.get(name, []))] = False
        if standardize:
            stats = BlockStats(name, mom.n, mom.mean(name), mom.comoment(name))
            mask &= ~constant_mask(stats)
        if not mask.any():
            what = " that is not constant" if standardize else ""
            raise ValueError(f"`drop` leaves no neuron of block {name!r}{what}")
        keep[name] = mask
        if standardize:
            scale[name] = mom.comoment(name).diagonal()[mask].rsqrt()

    def block(a, b):
        c = mom.comoment(a, b)[keep[a]][:, keep[b]]
        return c * torch.outer(scale[a], scale[b]) if standardize else c

    norms = {}
    for name in names:
        cxx = block(name, name)
        check_nonzero_block(BlockStats(name, mom.n, mom.mean(name)[keep[name]], cxx), "linear_cka")
        norms[name] = torch.linalg.matrix_norm(cxx)
    out = np.empty((len(names), len(names)), dtype=np.float64)
    for i, a in enumerate(names):
        for j in range(i, len(names)):
            b = names[j]
            out[i, j] = out[j, i] = linear_cka_pair(norms[a], norms[b], block(a, b))
    return out


def linear_cka_gram_matrix(acts: Mapping[str, object], names: Sequence[str] | None = None):
    """Linear CKA of every pair of blocks of raw activations, through the samples' Gram matrices.

    ``CKA = ⟨K̃, L̃⟩_F / (‖K̃‖_F ‖L̃‖_F)`` with ``K̃ = Xc Xcᵀ`` the centred linear Gram
    matrix (n × n). Each block costs one ``O(n² d)`` product and each pair ``O(n²)``, so
    many wide blocks over a few thousand samples cost far less than the ``O(n d_x d_y)``
    per pair of the feature-space form (same value: ``⟨K̃, L̃⟩ = ‖Xcᵀ Yc‖_F²``).

    Parameters
    ----------
    acts : mapping of str to array or Tensor of shape (n_samples, d_name)
        Activations of the same samples per block.
    names : sequence of str, optional
        Blocks to compare (default: all of ``acts``), in the output's order.

    Returns
    -------
    ndarray of shape (len(names), len(names))
        Symmetric, ones on the diagonal.

    Notes
    -----
    Holds ``len(names)`` Gram matrices of ``n² × 4`` bytes (float32 storage; inner
    products accumulated in float64): 2,000 samples and 100 blocks take 1.6 GB.

    References
    ----------
    Kornblith et al. (2019), Eq. 1–5; Wu et al. (2020), App. A.3.
    """
    names = list(acts) if names is None else list(names)
    unknown = sorted(set(names) - set(acts))
    if unknown:
        raise KeyError(f"unknown blocks {unknown}; available: {list(acts)}")
    n_rows = {int(np.shape(acts[name])[0]) for name in names}
    if len(n_rows) > 1:
        raise ValueError(f"all blocks must have the same n_samples, got {sorted(n_rows)}")
    n = n_rows.pop()
    if n < 2:
        raise ValueError(f"linear CKA needs at least 2 samples, got {n}")
    # One row per block: its centred Gram matrix, flattened, stored in float32.
    grams = torch.empty((len(names), n * n), dtype=torch.float32)
    for k, name in enumerate(names):
        x = torch.as_tensor(np.asarray(acts[name]), dtype=torch.float64)
        xc = x - x.mean(dim=0)
        grams[k] = (xc @ xc.T).reshape(-1).float()
    # ⟨K̃_a, K̃_b⟩ for all pairs, accumulated in float64 over column chunks.
    inner = torch.zeros((len(names), len(names)), dtype=torch.float64)
    step = max(1, 2**24 // max(1, len(names)))
    for start in range(0, n * n, step):
        chunk = grams[:, start : start + step].double()
        inner += chunk @ chunk.T
    norms = inner.diagonal().sqrt()
    if bool((norms == 0).any()):
        flat = [names[k] for k in torch.nonzero(norms == 0).ravel().tolist()]
        raise ValueError(f"`linear_cka`: blocks {flat} have zero variance (CKA is 0/0)")
    return (inner / torch.outer(norms, norms)).numpy()


# --------------------------------------------------------------------------- debiased CKA
def _unbiased_hsic_terms(xc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Feature-space pieces of the zero-diagonal linear Gram ``K̃ = Xc Xcᵀ − diag``.

    Returns ``diag(K)`` of shape (n,), ``1ᵀK̃1`` (scalar) and ``K̃1`` of shape (n,), all in
    O(n d) without forming the (n, n) Gram matrix.
    """
    diag = (xc * xc).sum(dim=1)
    col_sum = xc.sum(dim=0)
    total = col_sum @ col_sum - diag.sum()
    row_sums = xc @ col_sum - diag
    return diag, total, row_sums


def _unbiased_hsic(xc, yc, terms_x, terms_y) -> torch.Tensor:
    n = xc.shape[0]
    diag_x, total_x, rows_x = terms_x
    diag_y, total_y, rows_y = terms_y
    cross = xc.T @ yc
    trace = (cross * cross).sum() - diag_x @ diag_y
    value = trace + total_x * total_y / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (rows_x @ rows_y)
    return value / (n * (n - 3))


def debiased_cka(X, Y) -> float:
    """Debiased linear CKA: CKA with the unbiased HSIC estimator of Song et al. (2012).

    ``HSIC₁(K, L) = [tr(K̃L̃) + 1ᵀK̃1 · 1ᵀL̃1 / ((n−1)(n−2)) − 2/(n−2) · 1ᵀK̃L̃1] / (n(n−3))``
    with ``K̃`` the linear Gram matrix with its diagonal zeroed, and
    ``CKA = HSIC₁(K, L) / sqrt(HSIC₁(K, K) HSIC₁(L, L))``. Computed in feature space
    (O(n d²), never an (n, n) matrix); features are centred first, which leaves the
    estimator unchanged and keeps large offsets from cancelling.

    Parameters
    ----------
    X : ndarray or Tensor of shape (n_samples, d_x)
    Y : ndarray or Tensor of shape (n_samples, d_y)

    Returns
    -------
    float
        Symmetric, invariant to orthogonal transforms, isotropic scaling and translation;
        unlike the biased estimator it can be slightly negative for unrelated data.

    Raises
    ------
    ValueError
        Fewer than 4 samples (the estimator divides by ``n − 3``), mismatched rows,
        non-finite values, or a block with non-positive self-HSIC (e.g. constant).

    References
    ----------
    Song et al. (2012), Eq. 5; Kornblith et al. (2019), Sec. 3 ("debiased").
    """
    x, y = check_pair(X, Y, min_samples=4)
    xc = x - x.mean(dim=0)
    yc = y - y.mean(dim=0)
    terms_x = _unbiased_hsic_terms(xc)
    terms_y = _unbiased_hsic_terms(yc)
    hsic_xx = _unbiased_hsic(xc, xc, terms_x, terms_x)
    hsic_yy = _unbiased_hsic(yc, yc, terms_y, terms_y)
    for name, value in (("X", hsic_xx), ("Y", hsic_yy)):
        if not float(value) > 0:
            raise ValueError(
                f"`debiased_cka`: the unbiased HSIC of `{name}` with itself is {float(value):.3g} "
                "(≤ 0), so the similarity is undefined; the block is constant or n_samples is "
                "too small — pass more varied samples"
            )
    hsic_xy = _unbiased_hsic(xc, yc, terms_x, terms_y)
    return float(hsic_xy / torch.sqrt(hsic_xx * hsic_yy))


def prepare_debiased_cka(x, name: str = "X"):
    """Per-block part of debiased CKA: ``(Xc, its HSIC terms, HSIC₁(K, K))``."""
    x = as_float64(x, name)
    _check_matrix(x, name)
    if x.shape[0] < 4:
        raise ValueError(f"`debiased_cka` needs at least 4 samples, got {x.shape[0]}")
    xc = x - x.mean(dim=0)
    terms = _unbiased_hsic_terms(xc)
    self_hsic = _unbiased_hsic(xc, xc, terms, terms)
    if not float(self_hsic) > 0:
        raise ValueError(
            f"`debiased_cka`: the unbiased HSIC of `{name}` with itself is {float(self_hsic):.3g} "
            "(≤ 0), so the similarity is undefined; the block is constant or n_samples is "
            "too small — pass more varied samples"
        )
    return xc, terms, self_hsic


def debiased_cka_prepared_pair(a, b) -> float:
    """Debiased CKA of two blocks prepared by :func:`prepare_debiased_cka`."""
    xc, terms_x, hsic_xx = a
    yc, terms_y, hsic_yy = b
    return float(_unbiased_hsic(xc, yc, terms_x, terms_y) / torch.sqrt(hsic_xx * hsic_yy))


class DebiasedCKAStats:
    """Streaming statistics for debiased linear CKA between every pair of blocks.

    The unbiased HSIC needs, besides the means and co-moments a :class:`Moments` holds,
    two fourth-order sums over samples ``i``: with ``y_i = x_i − c`` (a fixed shift ``c``,
    the first chunk's column means, so large offsets do not cancel; the estimator is
    translation invariant) and ``q_a(i) = ‖y_i^a‖²`` per block ``a``,
    ``Q = Σ_i q(i) q(i)ᵀ`` (n_blocks × n_blocks) and ``R = Σ_i y_i q(i)ᵀ``
    (total width × n_blocks). Then for blocks ``a, b`` with ``G = Σ_i y_i y_iᵀ``,
    ``s = Σ_i y_i``::

        tr(K̃L̃)  = ‖G_ab‖²_F − Q_ab
        1ᵀK̃1    = ‖s_a‖² − tr G_aa
        1ᵀK̃L̃1  = s_aᵀ G_ab s_b − s_aᵀ R_{a,b} − s_bᵀ R_{b,a} + Q_ab

    which is :func:`debiased_cka`'s estimator for all pairs from one pass, at the memory
    of the joint moments plus ``total width × n_blocks``. One stream: statistics of two
    accumulators (different shifts) are not merged.

    Parameters
    ----------
    dims : mapping of str to int
        Block name -> width.
    device : str or torch.device, default="cpu"

    Attributes
    ----------
    moments : Moments
        The joint means and co-moments of the same samples.
    """

    def __init__(self, dims: Mapping[str, int], device: str | torch.device = "cpu"):
        self.moments = Moments(dims, device=device)
        self.names = list(dims)
        self._shift: dict[str, torch.Tensor] | None = None
        device = self.moments.device
        n_blocks = len(self.names)
        self._q = torch.zeros((n_blocks, n_blocks), dtype=torch.float64, device=device)
        self._r = torch.zeros(
            (self.moments.total_dim, n_blocks), dtype=torch.float64, device=device
        )

    @classmethod
    def from_arrays(cls, acts: Mapping[str, object], batch_size: int = 4096) -> DebiasedCKAStats:
        """Statistics of raw activations ``{name: (n_samples, d)}``, in chunks of ``batch_size``."""
        dims = {name: int(np.shape(x)[1]) for name, x in acts.items()}
        stats = cls(dims)
        n = {int(np.shape(x)[0]) for x in acts.values()}
        if len(n) != 1:
            raise ValueError(f"all blocks must have the same n_samples, got {sorted(n)}")
        total = n.pop()
        for start in range(0, total, batch_size):
            stats.update({name: x[start : start + batch_size] for name, x in acts.items()})
        return stats

    @property
    def n(self) -> int:
        return self.moments.n

    def update(self, acts: Mapping[str, object]) -> DebiasedCKAStats:
        """Add a chunk of samples, one array ``(n_chunk, d_name)`` per block (as Moments)."""
        self.moments.update(acts)  # validates names, shapes and finiteness
        device = self.moments.device
        parts = {name: as_float64(acts[name], name).to(device=device) for name in self.names}
        if next(iter(parts.values())).shape[0] == 0:
            return self
        if self._shift is None:
            self._shift = {name: x.mean(dim=0) for name, x in parts.items()}
        y = torch.cat([parts[name] - self._shift[name] for name in self.names], dim=1)
        del parts
        q = torch.stack(
            [(y[:, sl] ** 2).sum(dim=1) for sl in self.moments._offsets.values()], dim=1
        )
        self._q += q.T @ q
        self._r += y.T @ q
        return self

    def _block_terms(self, name: str):
        mom = self.moments
        k = self.names.index(name)
        delta = mom.mean(name) - self._shift[name]
        sl = mom._offsets[name]
        return k, sl, delta

    def _gram(self, a, b):
        mom = self.moments
        ka, sla, da = a
        kb, slb, db = b
        return mom.comoment(self.names[ka], self.names[kb]) + mom.n * torch.outer(da, db)

    def _hsic(self, a, b) -> torch.Tensor:
        n = self.moments.n
        ka, sla, da = a
        kb, slb, db = b
        g_ab = self._gram(a, b)
        s_a, s_b = n * da, n * db
        q_ab = self._q[ka, kb]
        trace = (g_ab * g_ab).sum() - q_ab
        total_a = s_a @ s_a - self._gram(a, a).diagonal().sum()
        total_b = s_b @ s_b - self._gram(b, b).diagonal().sum()
        rows = s_a @ g_ab @ s_b - s_a @ self._r[sla, kb] - s_b @ self._r[slb, ka] + q_ab
        value = trace + total_a * total_b / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * rows
        return value / (n * (n - 3))

    def matrix(self, names: Sequence[str] | None = None) -> np.ndarray:
        """Debiased linear CKA of every pair of ``names`` (default all blocks).

        Returns
        -------
        ndarray of shape (len(names), len(names))
            Symmetric, ones on the diagonal; ``out[i, j] == debiased_cka(X_i, X_j)``.
        """
        names = self.names if names is None else list(names)
        self.moments._check_names(names)
        if self.n < 4:
            raise ValueError(
                f"`debiased_cka` needs at least 4 samples (it divides by n − 3), got {self.n}"
            )
        terms = {name: self._block_terms(name) for name in names}
        self_hsic = {}
        for name in names:
            value = self._hsic(terms[name], terms[name])
            if not float(value) > 0:
                raise ValueError(
                    f"`debiased_cka`: the unbiased HSIC of block {name!r} with itself is "
                    f"{float(value):.3g} (≤ 0), so the similarity is undefined; the block is "
                    "constant or n_samples is too small — pass more varied samples"
                )
            self_hsic[name] = value
        out = np.empty((len(names), len(names)), dtype=np.float64)
        for i, a in enumerate(names):
            out[i, i] = 1.0
            for j in range(i + 1, len(names)):
                b = names[j]
                value = self._hsic(terms[a], terms[b]) / torch.sqrt(self_hsic[a] * self_hsic[b])
                out[i, j] = out[j, i] = float(value)
        return out


def debiased_cka_matrix(
    acts: Mapping[str, object], names: Sequence[str] | None = None, batch_size: int = 4096
) -> np.ndarray:
    """Debiased linear CKA of every pair of blocks of raw activations, from one pass.

    Parameters
    ----------
    acts : mapping of str to array or Tensor of shape (n_samples, d_name)
        Activations of the same samples per block (e.g. :func:`lmsim.extract.extract_activations`).
    names : sequence of str, optional
        Blocks to compare (default: all of ``acts``), in the output's order.
    batch_size : int, default=4096
        Rows per chunk of the accumulation.

    Returns
    -------
    ndarray of shape (len(names), len(names))
        ``out[i, j] == debiased_cka(acts[names[i]], acts[names[j]])`` to rounding.

    References
    ----------
    Song et al. (2012), Eq. 5; Kornblith et al. (2019), Sec. 3.
    """
    names = list(acts) if names is None else list(names)
    unknown = sorted(set(names) - set(acts))
    if unknown:
        raise KeyError(f"unknown blocks {unknown}; available: {list(acts)}")
    return DebiasedCKAStats.from_arrays({name: acts[name] for name in names}, batch_size).matrix(
        names
    )


# --------------------------------------------------------------------------- RBF CKA
def _sq_distances(xc: torch.Tensor) -> torch.Tensor:
    sq_norms = (xc * xc).sum(dim=1)
    dist = sq_norms[:, None] + sq_norms[None, :] - 2.0 * (xc @ xc.T)
    dist.clamp_(min=0)
    dist.fill_diagonal_(0)
    return dist


def median_sq_distance(dist: torch.Tensor) -> torch.Tensor:
    """Median of the squared distances over distinct pairs ``i < j``."""
    n = dist.shape[0]
    rows, cols = torch.triu_indices(n, n, offset=1, device=dist.device)
    return torch.quantile(dist[rows, cols], 0.5) if n > 2 else dist[0, 1]


def _centred_rbf_gram(xc: torch.Tensor, sigma: float | None, name: str) -> torch.Tensor:
    dist = _sq_distances(xc)
    if sigma is None:
        sigma_sq = median_sq_distance(dist)
        if not float(sigma_sq) > 0:
            raise ValueError(
                f"`rbf_cka`: the median squared distance between rows of `{name}` is 0 (more "
                "than half the samples coincide), so the default bandwidth is undefined; pass "
                "`sigma=` explicitly or deduplicate the samples"
            )
    else:
        sigma_sq = torch.as_tensor(float(sigma) ** 2, dtype=torch.float64, device=xc.device)
    gram = torch.exp(-dist / (2.0 * sigma_sq))
    gram = gram - gram.mean(dim=0, keepdim=True)
    return gram - gram.mean(dim=1, keepdim=True)


def rbf_cka(X, Y, sigma: float | None = None) -> float:
    """CKA with Gaussian (RBF) kernels, biased HSIC.

    ``K_ij = exp(−‖x_i − x_j‖² / (2σ²))``, ``CKA = ⟨HKH, HLH⟩_F / (‖HKH‖_F ‖HLH‖_F)``
    with ``H = I − 11ᵀ/n``.

    Parameters
    ----------
    X : ndarray or Tensor of shape (n_samples, d_x)
    Y : ndarray or Tensor of shape (n_samples, d_y)
    sigma : float, optional
        Kernel bandwidth used for both representations. Default: for each representation
        separately, ``σ = sqrt(median squared pairwise distance)`` over distinct pairs
        ``i < j`` (Kornblith et al.'s code takes the median over the full (n, n) matrix,
        zero diagonal included, which gives a slightly smaller σ).

    Returns
    -------
    float
        In ``[0, 1]``; symmetric; with the default bandwidth invariant to orthogonal
        transforms, isotropic scaling and translation.

    Notes
    -----
    Forms (n, n) matrices: memory grows as n_samples²; use a few thousand samples.

    References
    ----------
    Kornblith et al. (2019), Sec. 3 (RBF kernel, bandwidth a fraction of the median
    distance); Wu et al. (2020), App. A.3.
    """
    if sigma is not None and not float(sigma) > 0:
        raise ValueError(f"`sigma` must be a positive bandwidth or None, got {sigma!r}")
    x, y = check_pair(X, Y, min_samples=2)
    gram_x = _centred_rbf_gram(x - x.mean(dim=0), sigma, "X")
    gram_y = _centred_rbf_gram(y - y.mean(dim=0), sigma, "Y")
    norm_x = torch.linalg.matrix_norm(gram_x)
    norm_y = torch.linalg.matrix_norm(gram_y)
    for name, norm in (("X", norm_x), ("Y", norm_y)):
        if not float(norm) > 0:
            raise ValueError(
                f"`rbf_cka`: the centred RBF Gram matrix of `{name}` is zero (all rows equal), "
                "so the similarity is 0/0; pass more varied samples"
            )
    return float((gram_x * gram_y).sum() / (norm_x * norm_y))


def prepare_rbf_cka(x, sigma: float | None = None, name: str = "X") -> torch.Tensor:
    """Per-block part of RBF CKA: the centred RBF Gram matrix over its Frobenius norm."""
    if sigma is not None and not float(sigma) > 0:
        raise ValueError(f"`sigma` must be a positive bandwidth or None, got {sigma!r}")
    x = as_float64(x, name)
    _check_matrix(x, name)
    gram = _centred_rbf_gram(x - x.mean(dim=0), sigma, name)
    norm = torch.linalg.matrix_norm(gram)
    if not float(norm) > 0:
        raise ValueError(
            f"`rbf_cka`: the centred RBF Gram matrix of `{name}` is zero (all rows equal), "
            "so the similarity is 0/0; pass more varied samples"
        )
    return gram / norm


def rbf_cka_prepared_pair(a: torch.Tensor, b: torch.Tensor) -> float:
    """RBF CKA of two blocks prepared by :func:`prepare_rbf_cka`."""
    if a.shape != b.shape:
        raise ValueError(f"blocks of {a.shape[0]} and {b.shape[0]} samples: pass the same rows")
    return float((a * b).sum())
