"""Orthogonal Procrustes shape distance (angular form), a function of the moments.

With column-centred ``Xc`` and ``Yc`` (zero-padded to a common width), the rotation ``Q``
that best aligns them maximises ``⟨Xc Q, Yc⟩_F = ‖Xcᵀ Yc‖_*`` (the nuclear norm, the sum of
the singular values of the cross co-moment; Schönemann, 1966). The angular shape distance
is the angle between the aligned, centred representations::

    θ(X, Y) = arccos( ‖Xcᵀ Yc‖_* / (‖Xc‖_F ‖Yc‖_F) )

which is netrep's ``LinearMetric(alpha=1, center_columns=True, score_method="angular")``
(no whitening: the Procrustes case) and a metric on shapes (triangle inequality).
Everything it reads is in the moments: ``‖Xc‖_F² = tr(Xcᵀ Xc)`` and ``Xcᵀ Yc``. The
squared Euclidean Procrustes distance of Ding et al. (2021) on unit-norm ``Xc``, ``Yc`` is
``2 − 2 cos θ``.

References
----------
Williams, Kunz, Kornblith & Linderman (2021), "Generalized Shape Metrics on Neural
Representations", NeurIPS, Eq. 2–3 and Sec. 2.2 (angular distance, Procrustes, α = 1).
Ding, Denain & Steinhardt (2021), "Grounding Representation Similarity with Statistical
Testing", NeurIPS, Sec. 2 (orthogonal Procrustes distance).
"""

from __future__ import annotations

import math

import torch

from lmsim.metrics._linalg import BlockStats, check_nonzero_block, pair_stats

__all__ = ["procrustes"]


def prepare_procrustes(stats: BlockStats) -> torch.Tensor:
    """Per-block part: ``‖Xc‖_F = sqrt(tr Xcᵀ Xc)`` (raises for an all-constant block)."""
    check_nonzero_block(stats, "procrustes")
    return stats.comoment.diagonal().clamp_min(0).sum().sqrt()


def procrustes_pair(norm_x: torch.Tensor, norm_y: torch.Tensor, cxy: torch.Tensor) -> float:
    """Angular Procrustes distance from ``‖Xc‖_F``, ``‖Yc‖_F`` and ``Xcᵀ Yc``."""
    cosine = float(torch.linalg.svdvals(cxy).sum() / (norm_x * norm_y))
    return math.acos(min(max(cosine, 0.0), 1.0))


def procrustes(X, Y, b=None) -> float:
    """Orthogonal Procrustes shape distance, angular form (radians, 0 = the same shape).

    ``θ = arccos(‖Xcᵀ Yc‖_* / (‖Xc‖_F ‖Yc‖_F))`` with ``Xc``, ``Yc`` the column-centred
    activations and ``‖·‖_*`` the nuclear norm (see the module docstring).

    Parameters
    ----------
    X : ndarray or Tensor of shape (n_samples, d_x), or Moments
        First representation, or a :class:`~lmsim.moments.Moments` (then ``Y`` and ``b``
        are block names).
    Y : ndarray or Tensor of shape (n_samples, d_y), or str
        Second representation (same rows), or the first block name.
    b : str, optional
        Second block name (moments path only).

    Returns
    -------
    float
        In ``[0, π/2]``: a distance, not a similarity; symmetric; invariant to translation,
        isotropic scaling and orthogonal transforms of either representation; satisfies
        the triangle inequality. Near 0 the arccos turns rounding of the cosine into an
        error of about ``sqrt(eps) ≈ 1e-8`` radians.

    Raises
    ------
    ValueError
        Mismatched rows, fewer than 2 samples, non-finite values, or a constant block.
    KeyError
        Unknown block name (moments path).

    References
    ----------
    Williams et al. (2021), Sec. 2.2; Ding et al. (2021), Sec. 2.
    """
    sx, sy, cxy = pair_stats(X, Y, b, fn="procrustes")
    return procrustes_pair(prepare_procrustes(sx), prepare_procrustes(sy), cxy)
