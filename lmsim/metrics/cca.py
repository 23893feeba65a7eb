"""Canonical correlation measures: SVCCA and projection-weighted CCA (PWCCA).

Both are computed from covariance blocks only. With ``Xc = U S Vᵀ`` the SVD of the
centred activations, ``Xcᵀ Xc = V S² Vᵀ`` gives the right singular vectors and singular
values, and the orthonormal basis ``U = Xc V S⁻¹`` never has to be formed:
``U_xᵀ U_y = S_x⁻¹ V_xᵀ (Xcᵀ Yc) V_y S_y⁻¹`` and the PWCCA alignments
``⟨H_i, Xc_j⟩ = (Xcᵀ Xc V_x S_x⁻¹ u_i)_j``. A per-block :class:`CCABasis` holds the map
from neurons to that basis (the "whitening" ``V S⁻¹``, with z-scoring folded in for the
paper-compatible variant) and is reused for every pair in :mod:`lmsim.metrics.pairwise`.

References
----------
Raghu, Gilmer, Yosinski & Sohl-Dickstein (2017), "SVCCA", NeurIPS, Sec. 2.
Morcos, Raghu & Bengio (2018), "Insights on representational similarity in neural
networks with canonical correlation", NeurIPS, Sec. 3.2 (projection weighting).
Wu et al. (2020), App. A.3 (svsim, pwsim).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lmsim.metrics._linalg import (
    BlockStats,
    drop_constant,
    eigh_desc,
    numerical_rank,
    pair_stats,
)

__all__ = ["CCABasis", "pwcca", "svcca"]

PAPER_THRESHOLD = 0.99


@dataclass
class CCABasis:
    """Orthonormal basis of one block's (truncated) principal subspace, as maps from neurons.

    Attributes
    ----------
    whiten : Tensor of shape (d, k)
        ``U = Xc @ whiten`` has orthonormal columns (``whiten = V_k S_k⁻¹``, or
        ``D⁻¹ V_k S_k⁻¹`` with ``D`` the per-neuron std when z-scoring).
    loading : Tensor of shape (d, k)
        ``Xcᵀ U = (Xcᵀ Xc) @ whiten``: inner products of each centred neuron with each basis
        vector (PWCCA weights are ``|loading @ u|`` summed over neurons).
    """

    whiten: torch.Tensor
    loading: torch.Tensor

    @property
    def k(self) -> int:
        return int(self.whiten.shape[1])


def _check_threshold(threshold: float) -> float:
    threshold = float(threshold)
    if not 0 < threshold <= 1:
        raise ValueError(
            f"`threshold` is the fraction of variance to keep and must be in (0, 1], "
            f"got {threshold!r}"
        )
    return threshold


def n_kept_components(evals: torch.Tensor, threshold: float, paper_compat: bool) -> int:
    """How many leading components keep ``threshold`` of the variance ``Σ s²``.

    Textbook: the smallest ``k`` with ``cumsum(s²)[k-1] ≥ threshold · Σ s²``. Paper-
    compatible (the authors' code): ``k = #{cumsum(s²) < threshold · Σ s²}``, one fewer,
    floored at 1 (their code would otherwise compare an empty basis).

    Parameters
    ----------
    evals : Tensor of shape (d,)
        Squared singular values, descending.
    """
    cumsum = torch.cumsum(evals, 0)
    below = int((cumsum < threshold * cumsum[-1]).sum())
    return max(below, 1) if paper_compat else min(below + 1, evals.numel())


def _whitening(cov: torch.Tensor, truncate: bool, threshold: float, paper_compat: bool):
    """``V_k S_k⁻¹`` of shape (d, k) from ``cov = V S² Vᵀ``, null directions removed."""
    evals, evecs = eigh_desc(cov)
    keep = numerical_rank(evals)
    if truncate:
        keep = min(n_kept_components(evals, threshold, paper_compat), keep)
    return evecs[:, :keep] / evals[:keep].sqrt()


def prepare_cca_basis(
    stats: BlockStats, *, truncate: bool, threshold: float, paper_compat: bool, fn: str
) -> CCABasis:
    """Per-block basis for SVCCA (``truncate=True``) or untruncated CCA (PWCCA default).

    Textbook: centred neurons, eigendecomposition of ``Xcᵀ Xc``. Paper-compatible: each
    neuron z-scored (unbiased std), i.e. the covariance rescaled to a correlation matrix,
    constant neurons dropped with a warning (the authors' code divides by their zero std).
    Null directions (numerical rank deficiency, e.g. ``d > n``) are always removed.
    """
    comoment = stats.comoment
    if paper_compat:
        kept = drop_constant(stats, fn)
        std = (comoment.diagonal()[kept] / (stats.n - 1)).sqrt()
        corr = comoment[kept][:, kept] / torch.outer(std, std)
        whiten_kept = _whitening(corr, True, threshold, True) / std[:, None]
        whiten = comoment.new_zeros(stats.dim, whiten_kept.shape[1])
        whiten[kept] = whiten_kept
    else:
        whiten = _whitening(comoment, truncate, threshold, False)
    if whiten.shape[1] == 0:
        raise ValueError(
            f"`{fn}`: block {stats.name!r} has zero variance (all {stats.dim} neurons constant "
            f"over {stats.n} samples); canonical correlations are undefined — check the "
            "extraction or pass more varied samples"
        )
    return CCABasis(whiten=whiten, loading=comoment @ whiten)


def canonical_correlations(bx: CCABasis, by: CCABasis, cxy: torch.Tensor):
    """SVD of ``U_xᵀ U_y``: returns ``u`` of shape (k_x, m) and ``ρ`` of shape (m,) in [0, 1]."""
    cross = bx.whiten.T @ cxy @ by.whiten
    if not bool(torch.isfinite(cross).all()):
        raise ValueError(
            "canonical correlations: the whitened cross-covariance has non-finite entries; "
            "check the activations for NaN/inf (e.g. a half-precision overflow)"
        )
    try:
        u, rho, _ = torch.linalg.svd(cross, full_matrices=False)
    except torch.linalg.LinAlgError:
        # LAPACK's divide-and-conquer SVD (gesdd) can fail to converge on the many repeated
        # singular values near 1 of two wide layers seen on few samples; the slower QR
        # iteration (gesvd) converges there.
        import scipy.linalg

        u_np, rho_np, _ = scipy.linalg.svd(
            cross.cpu().numpy(), full_matrices=False, lapack_driver="gesvd"
        )
        u = torch.from_numpy(u_np).to(cross.device)
        rho = torch.from_numpy(rho_np).to(cross.device)
    return u, rho.clamp(0.0, 1.0)


def svcca_pair(bx: CCABasis, by: CCABasis, cxy: torch.Tensor) -> float:
    """Mean canonical correlation of two prepared bases."""
    rho = torch.linalg.svdvals(bx.whiten.T @ cxy @ by.whiten).clamp(0.0, 1.0)
    return float(rho.mean())


def _weighted_mean(basis: CCABasis, u: torch.Tensor, rho: torch.Tensor) -> float:
    weights = (basis.loading @ u).abs().sum(dim=0)
    return float((weights * rho).sum() / weights.sum())


def pwcca_pair(bx: CCABasis, by: CCABasis, cxy: torch.Tensor) -> float:
    """Canonical correlations weighted by X's alignments ``a_i = Σ_j |⟨H_i, X_j⟩|``."""
    u, rho = canonical_correlations(bx, by, cxy)
    return _weighted_mean(bx, u, rho)


def pwcca_pair_both(bx: CCABasis, by: CCABasis, cxy: torch.Tensor) -> tuple[float, float]:
    """``(pwsim(X → Y), pwsim(Y → X))`` from one SVD.

    The CCA is shared: with ``U_xᵀ U_y = u diag(ρ) vᵀ`` (shape ``(k_x, k_y)``, thin SVD,
    ``m = min(k_x, k_y)`` columns in ``u`` and ``v``), the transposed problem
    ``U_yᵀ U_x = v diag(ρ) uᵀ`` has the same ``ρ`` and canonical directions ``v`` for Y.
    Only the weights differ: X's alignments ``|loading_x @ u|`` for X → Y, Y's
    ``|loading_y @ v|`` for Y → X. Equal to two :func:`pwcca_pair` calls up to the sign
    (irrelevant under ``|·|``) and, for repeated ``ρ``, the basis of the singular subspace.
    """
    cross = bx.whiten.T @ cxy @ by.whiten
    u, rho, vh = torch.linalg.svd(cross, full_matrices=False)
    rho = rho.clamp(0.0, 1.0)
    return _weighted_mean(bx, u, rho), _weighted_mean(by, vh.T, rho)


def prepare_svcca(stats: BlockStats, threshold: float = 0.99, paper_compat: bool = False):
    return prepare_cca_basis(
        stats,
        truncate=True,
        threshold=_check_threshold(threshold),
        paper_compat=paper_compat,
        fn="svcca",
    )


def prepare_pwcca(stats: BlockStats, paper_compat: bool = False):
    return prepare_cca_basis(
        stats,
        truncate=paper_compat,
        threshold=PAPER_THRESHOLD,
        paper_compat=paper_compat,
        fn="pwcca",
    )


def svcca(X, Y, b=None, *, threshold: float = 0.99, paper_compat: bool = False) -> float:
    """SVCCA similarity (svsim): mean canonical correlation of the top principal subspaces.

    Textbook (default): centre each neuron; keep the smallest ``k`` leading singular
    directions with ``cumsum(s²) ≥ threshold · Σ s²``; the canonical correlations are the
    singular values ``ρ_i`` of ``U_xᵀ U_y``; return ``mean(ρ)``.

    Parameters
    ----------
    X : ndarray or Tensor of shape (n_samples, d_x), or Moments
        First representation, or a :class:`~lmsim.moments.Moments` (then ``Y`` and ``b``
        are block names).
    Y : ndarray or Tensor of shape (n_samples, d_y), or str
        Second representation (same rows), or the first block name.
    b : str, optional
        Second block name (moments path only).
    threshold : float, default=0.99
        Fraction of variance the kept directions must explain (keyword-only).
    paper_compat : bool, default=False
        Reproduce Wu et al.'s code: z-score each neuron (unbiased std; constant neurons
        dropped with a warning) and keep ``k = #{cumsum(s²) < threshold · Σ s²}``
        components (one fewer than the textbook rule, at least 1).

    Returns
    -------
    float
        In ``[0, 1]``; symmetric; invariant to translation and isotropic scaling, and (by
        default) to orthogonal transforms; the paper-compatible variant is invariant to
        per-neuron scaling instead.

    Raises
    ------
    ValueError
        Mismatched rows, fewer than 2 samples, non-finite values, a constant block, or a
        threshold outside (0, 1].
    KeyError
        Unknown block name (moments path).

    References
    ----------
    Raghu et al. (2017), Sec. 2; Wu et al. (2020), App. A.3.
    """
    _check_threshold(threshold)
    sx, sy, cxy = pair_stats(X, Y, b, fn="svcca")
    bx = prepare_svcca(sx, threshold, paper_compat)
    by = prepare_svcca(sy, threshold, paper_compat)
    return svcca_pair(bx, by, cxy)


def pwcca(X, Y, b=None, *, paper_compat: bool = False) -> float:
    """Projection-weighted CCA similarity (pwsim), directional X → Y.

    Textbook (default): CCA of the centred ``X`` and ``Y`` without truncation (only null
    directions removed); canonical variates of X ``H = U_x u`` (orthonormal columns);
    weights ``a_i = Σ_j |⟨H_i, Xc[:, j]⟩|`` over X's centred neurons; return
    ``Σ a_i ρ_i / Σ a_i``.

    Parameters
    ----------
    X : ndarray or Tensor of shape (n_samples, d_x), or Moments
        Source representation (its neurons define the weights), or moments.
    Y : ndarray or Tensor of shape (n_samples, d_y), or str
        Target representation, or the first block name.
    b : str, optional
        Second block name (moments path only).
    paper_compat : bool, default=False
        Reproduce Wu et al.'s code: the bases of the paper-compatible SVCCA (z-scored,
        truncated at 99 % with their rule), weights taken against X's raw neurons (not
        centred, not scaled). Because every canonical variate ``H_i`` lies in the span of
        centred columns, ``⟨H_i, X_j⟩ = ⟨H_i, Xc_j⟩``: the raw-neuron weights equal the
        centred ones and are computed that way (no cancellation with large offsets).

    Returns
    -------
    float
        In ``[0, 1]``; asymmetric; invariant to translation and isotropic scaling, and (by
        default) to orthogonal transforms of X or Y.

    Raises
    ------
    ValueError
        Mismatched rows, fewer than 2 samples, non-finite values, or a constant block.
    KeyError
        Unknown block name (moments path).

    References
    ----------
    Morcos et al. (2018), Sec. 3.2; Wu et al. (2020), App. A.3.
    """
    sx, sy, cxy = pair_stats(X, Y, b, fn="pwcca")
    return pwcca_pair(prepare_pwcca(sx, paper_compat), prepare_pwcca(sy, paper_compat), cxy)


def pwcca_both(X, Y, *, paper_compat: bool = False) -> tuple[float, float]:
    """``(pwcca(X, Y), pwcca(Y, X))`` from one CCA (see :func:`pwcca_pair_both`).

    Parameters
    ----------
    X : ndarray or Tensor of shape (n_samples, d_x)
    Y : ndarray or Tensor of shape (n_samples, d_y)
    paper_compat : bool, default=False
        As in :func:`pwcca`.
    """
    sx, sy, cxy = pair_stats(X, Y, None, fn="pwcca")
    return pwcca_pair_both(prepare_pwcca(sx, paper_compat), prepare_pwcca(sy, paper_compat), cxy)
