"""One fit ``u ≈ W z + b`` of target blocks on a basis (Eq. 6-9), scored from moments."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

from lmsim.lmd._problem import _Problem, _Stats


def _warn_underdetermined(n_train: int, d_basis: int, basis: Sequence[str], ridge: float) -> None:
    msg = (
        f"n_train={n_train} samples <= basis dimension {d_basis} (basis {list(basis)}): "
        "the basis covariance is singular, the fit interpolates the train set and test R² "
        "is dominated by the ridge; use more train samples, fewer or narrower basis models, "
        "or a larger `ridge`"
    )
    if ridge == 0:
        raise ValueError(msg + " (with ridge=0 the fit is not defined)")
    warnings.warn(msg, UserWarning, stacklevel=4)


def negligible_pivot(pivots: torch.Tensor, top: float, size: int, dtype: torch.dtype) -> bool:
    """Whether the smallest Cholesky pivot of a symmetric PSD matrix is at rounding level.

    ``pivots`` is the factor's diagonal (so a pivot is its square), ``top`` the matrix's
    largest diagonal entry and ``size`` its order. An exactly singular matrix fails to
    factor in one LAPACK build and factors with a tiny positive pivot in another (MKL on
    some CPUs): by interlacing the smallest eigenvalue is at most every pivot, so a pivot
    below ``size · eps · top`` means the matrix is singular to working precision, whichever
    way rounding went.
    """
    smallest = float(pivots.square().min()) if pivots.numel() else 0.0
    return not smallest > size * torch.finfo(dtype).eps * top  # NaN counts as negligible


def cholesky_or_none(mat: torch.Tensor) -> torch.Tensor | None:
    """The lower Cholesky factor of a symmetric PSD ``mat``, or None when it is singular to
    working precision: the factorisation fails or a pivot is negligible
    (:func:`negligible_pivot`), not only when LAPACK happens to raise."""
    factor, info = torch.linalg.cholesky_ex(mat)
    if int(info) != 0:
        return None
    top = float(mat.diagonal().max()) if mat.numel() else 0.0
    if negligible_pivot(factor.diagonal(), top, mat.shape[0], mat.dtype):
        return None
    return factor


def _min_norm_solve(gram: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """``pinv(gram) @ rhs`` for a symmetric PSD ``gram`` via its eigendecomposition."""
    evals, evecs = torch.linalg.eigh(gram)
    tol = evals.abs().max() * gram.shape[0] * torch.finfo(gram.dtype).eps
    inv = torch.where(evals > tol, 1.0 / evals.clamp_min(tol), torch.zeros_like(evals))
    return evecs @ ((evecs.T @ rhs) * inv[:, None])


def _solve_weights(
    train: _Stats, zi: torch.Tensor, ui: torch.Tensor, ridge: float, regulariser: str
) -> tuple[torch.Tensor, torch.Tensor, float | None, torch.Tensor]:
    """Fit ``u ≈ W z + b`` on train statistics (Eq. 6-8).

    Returns ``W`` of shape ``(len(ui), len(zi))``, ``b`` of shape ``(len(ui),)``, the ridge
    ``s`` actually added to the covariance (``None`` for the minimum-norm fallback, which
    satisfies no ridge normal equations) and the train cross co-moment ``C_zu`` of shape
    ``(len(zi), len(ui))``, gathered once and reused by Eq. L2.
    """
    ddof = 1 if regulariser == "code" else 0
    comoment_zu = train.comoment.index_select(0, zi)
    cov_zz = comoment_zu.index_select(1, zi) / (train.n - ddof)
    comoment_zu = comoment_zu.index_select(1, ui)
    cov_zu = comoment_zu / (train.n - ddof)
    shift: float | None
    if regulariser == "code":
        shift = ridge
        cov_zz.diagonal().add_(ridge)
        factor = cholesky_or_none(cov_zz)
        if factor is not None:
            w_t = torch.cholesky_solve(cov_zu, factor)
        else:
            warnings.warn(
                f"basis covariance + ridge ({ridge:g}) I is singular (a Cholesky pivot at "
                "rounding level, or none): using the minimum-norm solution (Moore-Penrose, "
                "Eq. 5); pass ridge > 0 for a unique fit",
                UserWarning,
                stacklevel=4,
            )
            w_t = _min_norm_solve(cov_zz, cov_zu)
            shift = None
    else:
        evals, evecs = torch.linalg.eigh(cov_zz)
        shift = max(ridge - float(evals[0]), 0.0)
        w_t = evecs @ ((evecs.T @ cov_zu) / (evals + shift)[:, None])
    weights = w_t.T
    bias = train.mean[ui] - weights @ train.mean[zi]
    return weights, bias, shift, comoment_zu


def _train_row_ssr(
    train: _Stats,
    weights: torch.Tensor,
    bias: torch.Tensor,
    ui: torch.Tensor,
    zi: torch.Tensor,
    shift: float,
    ddof: int,
    comoment_zu: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-dimension train SSR / n and SST / n from the normal equations (Eq. L2).

    ``W (Σ_zz + s I) = Σ_uz`` turns the quadratic form into
    ``W C_zz Wᵀ = W C_zu - (n - ddof) s W Wᵀ``, so
    ``n · SSR_r = C_rr - (W C_zu)_rr - (n - ddof) s ‖W_r‖²`` (+ the bias offset, zero up
    to rounding on the train set). Two tensors of shape ``(len(ui),)``.
    """
    var_u = train.comoment.diagonal()[ui] / train.n
    cross = (weights * comoment_zu.T).sum(dim=1)
    penalty = (train.n - ddof) * shift * (weights * weights).sum(dim=1)
    offset = train.mean[ui] - weights @ train.mean[zi] - bias
    return var_u - (cross + penalty) / train.n + offset**2, var_u


def _row_ssr(
    stats: _Stats, weights: torch.Tensor, bias: torch.Tensor, ui: torch.Tensor, zi: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-dimension residual and total sums of squares / n from moments (population).

    ``E(u_r - W_r z - b_r)² = S_rr - 2 W_r S_zr + W_r S_zz W_rᵀ + (m_r - W_r m_z - b_r)²``.
    Returns two tensors of shape ``(len(ui),)``.
    """
    rows = stats.comoment.index_select(0, zi)
    cov_zz = rows.index_select(1, zi) / stats.n
    cov_zu = rows.index_select(1, ui) / stats.n
    del rows
    var_u = stats.comoment.diagonal()[ui] / stats.n
    cross = (weights * cov_zu.T).sum(dim=1)
    quad = ((weights @ cov_zz) * weights).sum(dim=1)
    offset = stats.mean[ui] - weights @ stats.mean[zi] - bias
    ssr = var_u - 2 * cross + quad + offset**2
    return ssr, var_u


def _r2_by_block(ssr: torch.Tensor, sst: torch.Tensor, widths: Sequence[int]) -> list[float]:
    out, start = [], 0
    for width in widths:
        stop = start + width
        out.append(1.0 - float(ssr[start:stop].sum() / sst[start:stop].sum()))
        start = stop
    return out


def _fit_and_score(
    prob: _Problem,
    targets: Sequence[str],
    basis: Sequence[str],
    ridge: float,
    regulariser: str,
    fit_cache: dict | None = None,
):
    """Fit every target on one basis set; return train R², test R² and (W, b) per target.

    ``fit_cache`` (bootstrap of the test set only) keeps ``(W, b)`` of fits whose train
    statistics do not change between calls.
    """
    ui, zi = prob.index(targets), prob.index(basis)
    widths = [prob.slices[t].stop - prob.slices[t].start for t in targets]
    key = (tuple(targets), tuple(basis))
    if fit_cache is not None and key in fit_cache:
        weights, bias, train_r2 = fit_cache[key]
    else:
        if prob.train.n <= len(zi):
            _warn_underdetermined(prob.train.n, len(zi), basis, ridge)
        weights, bias, shift, comoment_zu = _solve_weights(prob.train, zi, ui, ridge, regulariser)
        if shift is None:  # minimum-norm fit: no normal equations with a ridge to use
            train_ssr = _row_ssr(prob.train, weights, bias, ui, zi)
        else:
            ddof = 1 if regulariser == "code" else 0
            train_ssr = _train_row_ssr(prob.train, weights, bias, ui, zi, shift, ddof, comoment_zu)
        del comoment_zu
        train_r2 = _r2_by_block(*train_ssr, widths)
        if fit_cache is not None:
            fit_cache[key] = (weights, bias, train_r2)
    test_r2 = _r2_by_block(*_row_ssr(prob.test, weights, bias, ui, zi), widths)
    return train_r2, test_r2, weights, bias, widths
