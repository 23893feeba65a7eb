"""Every leave-one-out fit from one inverse of the regularised joint covariance (Eq. L1-L2)."""

from __future__ import annotations

import torch
from scipy.linalg import cho_factor, cho_solve
from scipy.linalg.lapack import dpotrf, dpotri

from lmsim.lmd._fit import cholesky_or_none, negligible_pivot
from lmsim.lmd._problem import _Problem
from lmsim.moments import _mirror_upper


def _spd_inverse(mat: torch.Tensor) -> torch.Tensor | None:
    """Inverse of a symmetric positive definite ``mat`` (D, D) by Cholesky; ``None`` if not
    numerically PD (the factorisation fails, or a pivot is at rounding level:
    :func:`~lmsim.lmd._fit.negligible_pivot`, whatever the LAPACK build does).

    ``mat`` is overwritten. On CPU: LAPACK ``dpotrf`` + ``dpotri`` (``D³`` flops in all,
    one triangle, no extra full-size buffer); elsewhere torch's Cholesky.
    """
    if mat.device.type != "cpu":
        factor = cholesky_or_none(mat)
        return None if factor is None else torch.cholesky_inverse(factor)
    top, size = float(mat.diagonal().max()), mat.shape[0]
    # The C-ordered symmetric buffer read in Fortran order is the same matrix.
    factor, info = dpotrf(mat.numpy().T, lower=0, clean=0, overwrite_a=1)
    if info != 0 or negligible_pivot(torch.tensor(factor.diagonal()), top, size, mat.dtype):
        return None
    inverse, info = dpotri(factor, lower=0, overwrite_c=1)
    if info != 0:
        return None
    out = torch.from_numpy(inverse)  # Fortran-ordered; its upper triangle holds P
    _mirror_upper(out)
    return out.T  # C-contiguous, equal to `out` (symmetric)


def _is_pd(mat: torch.Tensor) -> bool:
    """Whether a symmetric ``mat`` is numerically positive definite (a pivot at rounding
    level counts as singular, as in :func:`_spd_inverse`); ``mat`` is overwritten."""
    if mat.device.type != "cpu":
        return cholesky_or_none(mat) is not None
    top, size = float(mat.diagonal().abs().max()), mat.shape[0]
    factor, info = dpotrf(mat.numpy().T, lower=0, clean=0, overwrite_a=1)
    return info == 0 and not negligible_pivot(torch.tensor(factor.diagonal()), top, size, mat.dtype)


def _common_shift(prob: _Problem, ridge: float, regulariser: str) -> float | None:
    """The ridge ``s`` shared by every leave-one-out fit, or ``None`` if the targets differ.

    ``"code"``: ``λ``. ``"paper"``: ``s_T = max(λ - e_min(Σ_OO), 0)`` per target; by
    interlacing ``e_min(Σ_OO) ≥ e_min(Σ)``, so ``Σ - λ I`` positive definite gives ``s = 0``
    for all; ``N - 1 < D - d_max`` makes every ``Σ_OO`` singular and ``s = λ`` for all.
    """
    if regulariser == "code":
        return ridge
    if ridge == 0:
        return 0.0
    train = prob.train
    dim = train.comoment.shape[0]
    shifted = train.comoment / train.n
    shifted.diagonal().sub_(ridge)
    if _is_pd(shifted):
        return 0.0
    widths = [sl.stop - sl.start for sl in prob.slices.values()]
    if train.n - 1 < dim - max(widths):
        return ridge
    return None


def _loo_fits(prob: _Problem, ridge: float, regulariser: str) -> dict | None:
    """Every leave-one-out fit from one inverse of the regularised joint covariance (Eq. L1).

    Returns ``{label: (W, b, shift)}`` with ``W`` of shape ``(d_T, D)`` (zero on the
    target's own columns, so that ``W @ x`` works on the joint vector) and ``b`` of shape
    ``(d_T,)``; ``None`` when the fits do not share one ridge or the regularised
    covariance is not numerically positive definite (then fit target by target).
    """
    shift = _common_shift(prob, ridge, regulariser)
    if shift is None:
        return None
    train = prob.train
    ddof = 1 if regulariser == "code" else 0
    joint = train.comoment / (train.n - ddof)
    joint.diagonal().add_(shift)
    prec = _spd_inverse(joint)
    del joint
    if prec is None:
        return None
    fits = {}
    on_cpu = prec.device.type == "cpu"
    for label, sl in prob.slices.items():
        rows = prec[sl]  # (d_T, D), contiguous: P_T· in place
        if on_cpu:
            factor = cho_factor(rows[:, sl].numpy(), lower=False, check_finite=False)
            sol = cho_solve(factor, rows.numpy(), check_finite=False)
            weights = torch.from_numpy(sol).neg_()
        else:
            weights = -torch.cholesky_solve(rows, torch.linalg.cholesky(rows[:, sl]))
        weights[:, sl] = 0.0
        bias = train.mean[sl] - weights @ train.mean
        fits[label] = (weights, bias, shift)
    return fits


def _loo_scores(prob: _Problem, label: str, weights, bias, shift: float, ddof: int):
    """Train (Eq. L2) and test R² of one leave-one-out fit with ``W`` as from :func:`_loo_fits`."""
    sl = prob.slices[label]
    start, stop = sl.start, sl.stop
    out = []
    for split, stats in (("train", prob.train), ("test", prob.test)):
        c = stats.comoment
        var_u = c.diagonal()[sl]
        cross = (weights * c[sl]).sum(dim=1)  # diag(W C_OT): W is zero on the T columns
        offset = stats.mean[sl] - weights @ stats.mean - bias
        if split == "train":
            penalty = (prob.train.n - ddof) * shift * (weights * weights).sum(dim=1)
            ssr = (var_u - cross - penalty) / stats.n + offset**2
        else:
            # diag(W C_OO Wᵀ) on views of C around the target's rows and columns.
            w_lo, w_hi = weights[:, :start], weights[:, stop:]
            y_lo = w_lo @ c[:start, :start] + w_hi @ c[stop:, :start]
            y_hi = w_lo @ c[:start, stop:] + w_hi @ c[stop:, stop:]
            quad = (y_lo * w_lo).sum(dim=1) + (y_hi * w_hi).sum(dim=1)
            ssr = (var_u - 2 * cross + quad) / stats.n + offset**2
        out.append(1.0 - float(ssr.sum() / (var_u.sum() / stats.n)))
    return out
