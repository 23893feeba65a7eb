"""Over-fitting of the LMD fits: R² against n_train, and a bias-corrected group R².

A least-squares fit on ``n`` samples with ``p`` basis dimensions scores *below* the best
linear map on new data: its test error is the irreducible error inflated by the noise of
the fitted weights. For a Gaussian basis (random design) with an intercept, Stein's
formula gives the expected out-of-sample error of ordinary least squares exactly,

    E[MSE_test] = σ² · k(n, p),    k(n, p) = (n + 1)(n − 2) / (n (n − p − 2)),   n > p + 2,

so a test R² estimates ``1 − (1 − R²_∞) k``, where ``R²_∞`` is the R² of the population
linear map (infinite training data). LMD's group fits use every other model as basis:
with three 768-wide models ``p = 1,536``, and at ``n = 6,900`` sequences ``k ≈ 1.29``,
which alone lowers an R² of 0.60 to 0.48. Two estimates of ``R²_∞``:

- :func:`debias_r2`: invert Stein's factor, ``R²_∞ ≈ 1 − (1 − R²_test) / k(n, p)``
  (assumes a Gaussian basis, a residual independent of it and a negligible ridge);
- :func:`learning_curve` + :func:`extrapolate_r2`: refit on subsets of the train shards
  and extrapolate ``1 − R²_test`` linearly in ``k(n, p)`` to ``k = 1`` (``n → ∞``): an
  empirical check of the same model, with an interval from the regression.

A bootstrap replicate that resamples train shards with replacement fits rows with integer
weights; :func:`resampled_n_train` gives the ``n`` at which Stein's factor equals the
over-fitting of such a weighted fit (El Karoui & Purdom's fixed point), so a replicate and
the point estimate are corrected alike (all weights one give exactly ``n_train``).

Beyond the paper (which uses ≈ 61 training sequences per basis dimension, ``k ≈ 1.02``).

References
----------
Stein, C. (1960), "Multiple regression", in *Contributions to Probability and Statistics*;
Breiman & Freedman (1983), "How many variables should be entered in a regression
equation?", JASA 78, Eq. 1.4 (the random-design prediction error of least squares).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from scipy import optimize as spo
from scipy import stats as sps
from tqdm.auto import tqdm

from lmsim.lmd._bootstrap import BootstrapResult, _ShardPool
from lmsim.lmd._decompose import Decomposition, _decompose_problem
from lmsim.lmd._problem import _as_moments, _check_ridge, _Problem, _resolve_models
from lmsim.moments import Moments

__all__ = [
    "debias_r2",
    "extrapolate_r2",
    "learning_curve",
    "overfit_table",
    "resampled_n_train",
    "stein_factor",
]


def stein_factor(n_train, n_basis):
    """Expected out-of-sample error of least squares over the noise variance, ``k(n, p)``.

    Parameters
    ----------
    n_train : int or array of int
        Training samples ``n``.
    n_basis : int or array of int
        Basis dimensions ``p`` (regressors besides the intercept).

    Returns
    -------
    float or ndarray
        ``(n + 1)(n − 2) / (n (n − p − 2))``; NaN where ``n ≤ p + 2`` (the expected error
        is then infinite or the fit is underdetermined).
    """
    n = np.asarray(n_train, dtype=np.float64)
    p = np.asarray(n_basis, dtype=np.float64)
    if np.any(n < 1) or np.any(p < 0):
        raise ValueError(f"`n_train` must be >= 1 and `n_basis` >= 0, got {n_train}, {n_basis}")
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(n > p + 2, (n + 1) * (n - 2) / (n * (n - p - 2)), np.nan)
    return float(out) if out.ndim == 0 else out


def debias_r2(r2_test, n_train, n_basis):
    """Test R² corrected for the over-fitting of least squares: ``1 − (1 − R²) / k(n, p)``.

    Parameters
    ----------
    r2_test : float, array or pandas object
        Test R² of fits on ``n_train`` samples with ``n_basis`` basis dimensions.
    n_train, n_basis : int or array of int
        Broadcast against ``r2_test``.

    Returns
    -------
    Same type as ``r2_test``
        The estimate of the population R² (NaN where ``n_train ≤ n_basis + 2``).

    References
    ----------
    Stein (1960); Breiman & Freedman (1983), Eq. 1.4.
    """
    factor = stein_factor(n_train, n_basis)
    return 1.0 - (1.0 - r2_test) / factor


def resampled_n_train(draws, shard_sizes, n_basis) -> float:
    """Effective ``n_train`` of a least-squares fit on train shards drawn with replacement.

    Shard ``k`` (``n_k`` rows) drawn ``c_k`` times enters the fit as its rows with weight
    ``c_k``. For a Gaussian basis of ``p`` dimensions, ``N = Σ n_k`` rows and
    ``κ = p / N``, the weighted fit's excess test error over the noise variance is
    ``A / (κ − A)``, with ``c`` solving ``mean_i 1 / (1 + c w_i) = 1 − κ`` and
    ``A = mean_i (c w_i / (1 + c w_i))²`` over rows ``i`` (zero-weight rows included); with
    all weights one this is ``p / (N − p)``, Stein's factor to first order. The returned
    ``n`` solves ``n / (n − p) = κ / (κ − A)``, so ``stein_factor(n, p)`` is the weighted
    fit's over-fitting factor. Kish's ``(Σ c_k n_k)² / Σ c_k² n_k`` is its limit for
    ``N ≫ p``; near ``N ≈ p`` Kish's ``n`` is too small (at ``N = 3p`` it puts a multinomial
    resample's factor at 4.1 where fits give 2.3 and this gives 2.3) and the corrected
    replicates sit above the corrected point estimate.

    Parameters
    ----------
    draws : array of int of shape (n_shards,)
        Times each shard was drawn.
    shard_sizes : array of int of shape (n_shards,)
        Rows per shard.
    n_basis : int
        Basis dimensions ``p``.

    Returns
    -------
    float
        The effective ``n_train``: ``Σ n_k`` when every shard is drawn once; NaN when the
        drawn shards hold no more than ``p`` distinct rows (the fit is underdetermined).

    References
    ----------
    El Karoui & Purdom (2018), Sec. 3 and Theorem 3.1; El Karoui et al. (2013).
    """
    draws = np.asarray(draws, dtype=np.float64)
    sizes = np.asarray(shard_sizes, dtype=np.float64)
    if draws.shape != sizes.shape or draws.ndim != 1:
        raise ValueError(
            f"`draws` and `shard_sizes` must be 1-d of one length, got {draws.shape} and {sizes.shape}"
        )
    if np.any(draws < 0) or np.any(sizes < 0):
        raise ValueError("`draws` and `shard_sizes` must be >= 0")
    p, n_rows = float(n_basis), float(sizes.sum())
    if p < 0 or n_rows <= 0:
        raise ValueError(f"`n_basis` must be >= 0 and the shards non-empty, got {n_basis}")
    if np.all(draws == 1):
        return n_rows
    if p == 0:
        return float((draws @ sizes) ** 2 / ((draws**2) @ sizes))
    share = sizes / n_rows
    kappa = p / n_rows
    if share[draws > 0].sum() <= kappa:
        return float("nan")

    def excess(log_c):
        return float(share @ (1.0 / (1.0 + np.exp(log_c) * draws))) - (1.0 - kappa)

    log_c = spo.brentq(excess, -60.0, 60.0, xtol=1e-12)
    cw = np.exp(log_c) * draws
    a = float(share @ (cw / (1.0 + cw)) ** 2)
    factor = kappa / (kappa - a)
    return p * factor / (factor - 1.0)


def _replicate_n_train(boot: BootstrapResult, n_basis) -> np.ndarray:
    """Each replicate's effective ``n_train`` per basis width: shape ``(n_boot, len(n_basis))``."""
    n_basis = np.atleast_1d(np.asarray(n_basis))
    n_reps = len(boot.group_rho_samples)
    n = boot.estimate.n_train
    if boot.train_draws is not None and boot.train_shard_sizes is not None:
        cache: dict = {}
        out = np.empty((n_reps, len(n_basis)))
        for i, draw in enumerate(boot.train_draws):
            for j, p in enumerate(n_basis):
                key = (draw.tobytes(), int(p))
                if key not in cache:
                    cache[key] = resampled_n_train(draw, boot.train_shard_sizes, int(p))
                out[i, j] = cache[key]
        return out
    if boot.n_train_samples is not None and len(boot.n_train_samples) == n_reps:
        # Results made before the draws were kept: Kish's n (right for n_train >> p).
        return np.repeat(np.asarray(boot.n_train_samples, float)[:, None], len(n_basis), 1)
    return np.full((n_reps, len(n_basis)), float(n))


def _widths(slices: Mapping[str, slice]) -> dict[str, int]:
    return {label: sl.stop - sl.start for label, sl in slices.items()}


def overfit_table(result, widths: Mapping[str, int]) -> pd.DataFrame:
    """Group R² beside its over-fitting-corrected value, per model and for the group ρ.

    Parameters
    ----------
    result : Decomposition or BootstrapResult
        A :func:`~lmsim.lmd.decompose` (or :func:`~lmsim.lmd.bootstrap`) result.
    widths : mapping of str to int
        Embedding width of every model label of ``result`` (e.g. ``{m: mom.dims[block]}``).

    Returns
    -------
    pandas.DataFrame
        One row per model plus ``"group ρ"``, columns ``test_r2``, ``n_train``,
        ``n_basis`` (the basis width, Σ of the other models' widths),
        ``n_train_per_dim``, ``stein_factor``, ``corrected_r2``; with a
        :class:`BootstrapResult` also ``corrected_lower`` and ``corrected_upper``, the
        bootstrap percentiles of the corrected value (each replicate corrected at its own
        effective ``n_train``, :func:`resampled_n_train`, underdetermined replicates left
        out; covers the
        resampled noise, not a failure of the Gaussian model).
        The group ρ row averages the models' columns (its ``n_basis`` is the mean).
    """
    boot = result if isinstance(result, BootstrapResult) else None
    dec = boot.estimate if boot is not None else result
    if not isinstance(dec, Decomposition):
        raise TypeError(
            f"`result` must be a Decomposition or BootstrapResult, got {type(result).__name__}"
        )
    missing = [m for m in dec.models if m not in widths]
    if missing:
        raise KeyError(f"`widths` lacks the models {missing}; pass one width per model")
    total = sum(int(widths[m]) for m in dec.models)
    basis = pd.Series({m: total - int(widths[m]) for m in dec.models}, dtype=float)
    table = pd.DataFrame(
        {
            "test_r2": dec.group_r2,
            "n_train": float(dec.n_train),
            "n_basis": basis,
            "n_train_per_dim": dec.n_train / basis,
            "stein_factor": stein_factor(dec.n_train, basis.to_numpy()),
        }
    )
    table["corrected_r2"] = debias_r2(dec.group_r2, dec.n_train, basis.to_numpy())
    if boot is not None:
        samples = boot.group_r2_samples[dec.models].to_numpy()
        n_reps = _replicate_n_train(boot, basis.to_numpy())
        corrected = debias_r2(samples, n_reps, basis.to_numpy()[None, :])
        alpha = (1 - boot.level) / 2
        # A replicate whose drawn shards hold no more rows than a basis is wide has no
        # corrected value (NaN): it is left out, as bootstrap_estimate leaves it out.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a column of NaN only
            lo, hi = np.nanquantile(corrected, [alpha, 1 - alpha], axis=0)
            table["corrected_lower"], table["corrected_upper"] = lo, hi
            rho = corrected.mean(axis=1)
            rho_lo, rho_hi = np.nanquantile(rho, [alpha, 1 - alpha])
    group = table.mean(axis=0)
    if boot is not None:
        group["corrected_lower"], group["corrected_upper"] = rho_lo, rho_hi
    table.loc["group ρ"] = group
    return table


def learning_curve(
    train_shards: Sequence,
    test,
    sizes: Sequence[int] | None = None,
    n_repeats: int = 3,
    seed: int = 0,
    ridge: float = 1e-6,
    regulariser: str = "code",
    models=None,
    device=None,
    progress: bool = False,
) -> pd.DataFrame:
    """Group R² refitted on random subsets of the train shards: R² against ``n_train``.

    Every subset's moments are a weighted merge of the shards' (no pass over the data);
    the leave-one-out fits are those of :func:`~lmsim.lmd.decompose` and every fit is
    scored on the whole ``test``. The full train set is one more point (one repeat).

    Parameters
    ----------
    train_shards : list of Moments
        Per-shard train moments (``extract_moments(..., return_shards=True)``), ideally
        equal-sized random batches.
    test : Moments, list of Moments, or dict of arrays
        The test set (shards are merged).
    sizes : sequence of int, optional
        Numbers of train shards per subset; default about 1/8, 1/4, 1/2 of them and all.
    n_repeats : int, default=3
        Random subsets per size (sizes below the number of shards).
    seed : int, default=0
    ridge, regulariser, models, device
        As in :func:`~lmsim.lmd.decompose`.
    progress : bool, default=False

    Returns
    -------
    pandas.DataFrame
        Long format, one row per (size, repeat, model) plus a ``"group ρ"`` row per
        (size, repeat): ``n_shards``, ``repeat``, ``n_train``, ``model``, ``n_basis``,
        ``train_r2``, ``test_r2``, ``stein_factor``, ``corrected_r2``
        (:func:`debias_r2`); the group ρ rows average the models'.
    """
    ridge = _check_ridge(ridge, regulariser)
    if isinstance(train_shards, (Moments, Mapping)) or not len(train_shards):
        raise ValueError("`train_shards` must be a non-empty list of Moments (one per shard)")
    if int(n_repeats) < 1:
        raise ValueError(f"`n_repeats` must be >= 1, got {n_repeats!r}")
    first = _as_moments(train_shards[0], "train_shards[0]", None)
    model_map = _resolve_models(models, first)
    blocks = list(model_map.values())
    device = torch.device(device) if device is not None else first.device
    pool = _ShardPool(train_shards, "train_shards", blocks, device, min_shards=1)
    n_shards = len(pool)
    test_list = list(test) if isinstance(test, (list, tuple)) else [test]
    test_pool = _ShardPool(test_list, "test", blocks, device, min_shards=1)
    test_stats = test_pool.merge(np.ones(len(test_pool), int))
    if sizes is None:
        sizes = sorted({max(1, round(n_shards / f)) for f in (8, 4, 2)} | {n_shards})
    sizes = sorted({int(s) for s in sizes})
    if sizes[0] < 1 or sizes[-1] > n_shards:
        raise ValueError(f"`sizes` must lie in [1, {n_shards}] (the number of shards), got {sizes}")
    slices, start = {}, 0
    for label, block in model_map.items():
        slices[label] = slice(start, start + first.dims[block])
        start += first.dims[block]
    widths = _widths(slices)
    total = sum(widths.values())
    rng = np.random.default_rng(seed)
    plan = [(k, r) for k in sizes for r in range(1 if k == n_shards else int(n_repeats))]
    rows = []
    for k, r in tqdm(plan, desc="LMD learning curve", disable=not progress):
        draws = np.zeros(n_shards, int)
        draws[rng.choice(n_shards, size=k, replace=False)] = 1
        prob = _Problem.from_stats(pool.merge(draws), test_stats, slices, device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # small subsets are the point
            dec = _decompose_problem(prob, ridge, regulariser, False, False, False)
        for label in dec.models:
            p = total - widths[label]
            rows.append(
                {
                    "n_shards": k,
                    "repeat": r,
                    "n_train": dec.n_train,
                    "model": label,
                    "n_basis": p,
                    "train_r2": dec.train_group_r2[label],
                    "test_r2": dec.group_r2[label],
                    "stein_factor": stein_factor(dec.n_train, p),
                    "corrected_r2": debias_r2(dec.group_r2[label], dec.n_train, p),
                }
            )
    out = pd.DataFrame(rows)
    keys = ["n_shards", "repeat", "n_train"]
    group = out.groupby(keys, sort=False)[
        ["n_basis", "train_r2", "test_r2", "stein_factor", "corrected_r2"]
    ].mean()
    group = group.reset_index().assign(model="group ρ")
    return pd.concat([out, group], ignore_index=True)[out.columns]


def extrapolate_r2(
    curve: pd.DataFrame, level: float = 0.95, *, min_ratio: float = 0.0
) -> pd.DataFrame:
    """Population R² per model by extrapolating a learning curve to infinite ``n_train``.

    Fits ``1 − R²_test = a + c · k(n, p)`` by least squares over the curve's points
    (Stein's model says ``a = 0``, ``c = 1 − R²_∞``) and reports the value at ``k = 1``
    (``n → ∞``) with a t-interval of that prediction. Points with ``n ≤ p + 2`` are left
    out, and with ``min_ratio`` those with ``n < min_ratio · p``.

    Near ``n = p`` the factor ``k`` explodes and Stein's Gaussian model is least exact
    (heavy-tailed embeddings, the ridge that keeps the fit defined), yet those points
    dominate a straight-line fit in ``k``: a curve whose smallest subset has ``n = 400``
    at ``p = 384`` extrapolates below the raw full-data R². ``min_ratio=2`` keeps only
    subsets with at least twice as many train samples as basis dimensions.

    Parameters
    ----------
    curve : pandas.DataFrame
        :func:`learning_curve` output.
    level : float, default=0.95
    min_ratio : float, default=0.0
        Leave out points with ``n_train < min_ratio · n_basis`` (0 keeps every point with
        ``n > p + 2``).

    Returns
    -------
    pandas.DataFrame
        One row per model (and ``"group ρ"``): ``r2_inf``, ``lower``, ``upper``,
        ``intercept`` (``a``; near 0 when Stein's model holds), ``n_points``; NaN where
        fewer than 3 points at 2 or more distinct ``n_train`` remain.
    """
    if not 0 < level < 1:
        raise ValueError(f"`level` must lie in (0, 1), got {level!r}")
    min_ratio = float(min_ratio)
    if not np.isfinite(min_ratio) or min_ratio < 0:
        raise ValueError(f"`min_ratio` must be a finite number >= 0, got {min_ratio!r}")
    need = {"model", "n_train", "test_r2", "stein_factor"}
    if min_ratio > 0:
        need.add("n_basis")
    if not need <= set(curve.columns):
        raise ValueError(f"`curve` lacks columns {sorted(need - set(curve.columns))}")
    out = {}
    for model, rows in curve.groupby("model", sort=False):
        rows = rows[np.isfinite(rows["stein_factor"])]
        if min_ratio > 0:
            rows = rows[rows["n_train"] >= min_ratio * rows["n_basis"]]
        x = rows["stein_factor"].to_numpy()
        y = 1.0 - rows["test_r2"].to_numpy()
        res = {"r2_inf": np.nan, "lower": np.nan, "upper": np.nan, "intercept": np.nan}
        res["n_points"] = len(rows)
        if len(rows) >= 3 and rows["n_train"].nunique() >= 2:
            design = np.column_stack([np.ones_like(x), x])
            coef, *_ = np.linalg.lstsq(design, y, rcond=None)
            resid = y - design @ coef
            dof = len(y) - 2
            at = np.array([1.0, 1.0])
            pred = float(at @ coef)
            cov = np.linalg.pinv(design.T @ design)
            sigma2 = float(resid @ resid) / dof if dof > 0 else np.nan
            half = sps.t.ppf(0.5 + level / 2, dof) * np.sqrt(sigma2 * float(at @ cov @ at))
            res.update(
                r2_inf=1.0 - pred,
                lower=1.0 - pred - half,
                upper=1.0 - pred + half,
                intercept=float(coef[0]),
            )
        out[model] = res
    return pd.DataFrame.from_dict(out, orient="index")
