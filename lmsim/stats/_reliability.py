"""Split-half reliability (Spearman-Brown), summaries over seeds (Student t) and the
delete-one-group jackknife."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from lmsim.stats._estimate import (
    Estimate,
    _check_count,
    _check_level,
    _finite_draws,
    _input_problem,
    _percentile_interval,
    _rng,
)


def spearman_brown(r, factor: float = 2.0):
    """Reliability of a measure ``factor`` times as long: ``k r / (1 + (k - 1) r)``.

    ``r`` is a correlation (in [-1, 1]; NaN, an undefined one, stays NaN) and ``factor``
    a finite number > 0; anything else raises ``ValueError``.
    """
    if isinstance(factor, bool) or not (np.isfinite(factor) and factor > 0):
        raise ValueError(f"`factor` must be a finite number > 0, got {factor!r}")
    r = np.asarray(r, dtype=np.float64)
    outside = np.abs(r[~np.isnan(r)]) > 1 + 1e-12  # a computed r may pass 1 by rounding
    if outside.any():
        raise ValueError(
            f"`r` must be a correlation in [-1, 1], got {r[~np.isnan(r)][outside][0]!r}"
        )
    r = np.clip(r, -1.0, 1.0)
    out = factor * r / (1 + (factor - 1) * r)
    return float(out) if out.ndim == 0 else out


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks with ties averaged (as scipy.stats.rankdata)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=np.float64)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse] + 1


def _correlation(x: np.ndarray, y: np.ndarray, method: str) -> float:
    if method == "spearman":
        x, y = _ranks(x), _ranks(y)
    x, y = x - x.mean(), y - y.mean()
    denom = math.sqrt(float(x @ x) * float(y @ y))
    return float(x @ y) / denom if denom > 0 else math.nan


def _halves_of_groups(codes, n_items, rng):
    """Per-item means of two random halves of each item's observations."""
    order = np.lexsort((rng.random(len(codes)), codes))
    sizes = np.bincount(codes, minlength=n_items)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    position = np.empty(len(codes), dtype=np.int64)
    position[order] = np.arange(len(codes)) - np.repeat(starts, sizes)
    size = sizes[codes]
    half = size // 2
    first, second = position < half, position >= size - half  # odd sizes drop the middle
    return first, second, half


def _item_halves(arrays, groups, rng, names):
    """The items of ``arrays`` (scored alike) and a function drawing one random split.

    Each call of the returned ``split()`` draws disjoint halves of every item's observations
    (the same halves for every array) and returns ``(x1, x2, y1, y2, ...)``: each array's
    per-item means over the first and the second half. Without ``groups`` the arrays are
    ``(n_items, n_obs)`` and the halves are columns; with ``groups`` they are 1-D, one
    observation per row, items with fewer than two observations dropped.

    Returns
    -------
    n_items : int
    split : callable
    """
    label = " and ".join(f"`{n}`" for n in names)
    if groups is None:
        first = arrays[0]
        if first.ndim != 2 or first.shape[1] < 2:
            raise ValueError(
                f"{label} without `groups` must have shape (n_items, n_obs >= 2), got "
                f"{first.shape}; pass `groups` for one observation per row"
            )
        n_items, half = first.shape[0], first.shape[1] // 2

        def split():
            cols = rng.permutation(first.shape[1])
            one, two = cols[:half], cols[half : 2 * half]
            return tuple(m for x in arrays for m in (x[:, one].mean(1), x[:, two].mean(1)))

        return n_items, split
    groups = np.asarray(groups)
    if arrays[0].ndim != 1 or groups.shape != arrays[0].shape:
        listed = ", ".join(f"`{n}`" for n in names)
        raise ValueError(
            f"with `groups`, {listed} and `groups` must be 1-D of one length, got "
            f"{arrays[0].shape} and {groups.shape}"
        )
    _, codes = np.unique(groups, return_inverse=True)
    kept = np.bincount(codes)[codes] >= 2
    arrays = [x[kept] for x in arrays]
    _, codes = np.unique(codes[kept], return_inverse=True)
    n_items = int(codes.max()) + 1 if len(codes) else 0

    def split():
        first, second, _ = _halves_of_groups(codes, n_items, rng)
        count = np.bincount(codes[first], minlength=n_items)
        return tuple(
            np.bincount(codes[h], x[h], minlength=n_items) / count
            for x in arrays
            for h in (first, second)
        )

    return n_items, split


def split_half_reliability(
    values,
    groups=None,
    *,
    method: str = "pearson",
    n_splits: int = 200,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """Split-half reliability of per-item means, Spearman-Brown corrected.

    Each item's observations are split at random into two halves; the item means of the
    two halves are correlated across items and the correlation corrected to the full
    length (:func:`spearman_brown`). It is the ceiling of any correlation of these item
    scores with something else.

    Parameters
    ----------
    values : array_like
        Either shape (n_items, n_obs): repeated observations of each item (seeds, runs),
        split by one random permutation of the columns per split; or shape (n_obs,) with
        ``groups``.
    groups : array_like of shape (n_obs,), optional
        The item of each observation (a word type for each token occurrence); items with
        fewer than 2 observations are left out, odd counts drop one observation at random.
    method : {"pearson", "spearman"}
    n_splits : int
        Random splits averaged for the estimate.
    n_boot : int
        Draws for the interval: each resamples the items with replacement under a fresh
        random split, so the interval covers both the choice of split and of items.
    level, seed

    Returns
    -------
    Estimate
        ``unit="items"``, ``n`` the items used.
    """
    if method not in ("pearson", "spearman"):
        raise ValueError(f"`method` must be 'pearson' or 'spearman', got {method!r}")
    n_splits, n_boot = _check_count("n_splits", n_splits), _check_count("n_boot", n_boot)
    rng = _rng(seed)
    _check_level(level)
    values = np.asarray(values, dtype=np.float64)
    problem = _input_problem([values], ["values"])
    if problem:  # the item means would be NaN or inf: no correlation is defined
        raise ValueError(problem)
    n_items, split = _item_halves([values], groups, rng, ["values"])
    if n_items < 3:
        raise ValueError(f"split-half reliability needs at least 3 items, got {n_items}")
    estimates = [spearman_brown(_correlation(*split(), method)) for _ in range(n_splits)]
    estimate = float(np.nanmean(estimates))
    draws = []
    for _ in range(n_boot):
        first, second = split()
        pick = rng.integers(0, n_items, n_items)
        draws.append(spearman_brown(_correlation(first[pick], second[pick], method)))
    draws = _finite_draws(draws, "split-half draws")
    low, high = _percentile_interval(draws, level)
    return Estimate(
        estimate,
        low,
        high,
        level,
        "items",
        n_items,
        f"split-half reliability ({method}, Spearman-Brown; mean of {n_splits} splits, "
        f"interval over {n_boot} item resamples x splits)",
        sd=float(draws.std(ddof=1)),
        draws=draws,
    )


# --------------------------------------------------------------------------- seeds
def _t_two_sided_mass(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer ``df`` (A&S 26.7.3, 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    c, s = math.cos(theta), math.sin(theta)
    if df % 2:  # odd
        if df == 1:
            return 2 * theta / math.pi
        term, total = c, c
        for k in range(3, df - 1, 2):
            term *= c * c * (k - 1) / k
            total += term
        return 2 / math.pi * (theta + s * total)
    term, total = 1.0, 1.0
    for k in range(2, df - 1, 2):
        term *= c * c * (k - 1) / k
        total += term
    return s * total


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with integer ``df`` (bisection on the exact CDF).

    Accurate to ~1e-12 relative; for ``df`` above 1000 the normal quantile is close.
    """
    df = _check_count("df", df)
    if not 0 < p < 1:
        raise ValueError(f"`p` must be in (0, 1), got {p}")
    if p == 0.5:
        return 0.0
    mass = abs(2 * p - 1)  # P(|T| < t) = 2 p - 1 for p > 1/2
    low, high = 0.0, 1.0
    while _t_two_sided_mass(high, df) < mass:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if _t_two_sided_mass(mid, df) < mass:
            low = mid
        else:
            high = mid
        if high - low <= 1e-13 * high:
            break
    t = (low + high) / 2
    return t if p > 0.5 else -t


def seed_summary(values, *, level: float = 0.95, unit: str = "seeds") -> Estimate:
    """Mean, spread and t interval of one quantity over seeds (or runs).

    Parameters
    ----------
    values : array_like of shape (n_seeds,)
        One value per seed, n_seeds >= 2.
    level : float
    unit : str

    Returns
    -------
    Estimate
        ``estimate`` the mean, ``low``/``high`` the Student t interval of the mean
        (``mean ± t sd / sqrt(n)``), ``sd`` the standard deviation (ddof 1), ``values`` the
        values (their range is the spread to state).
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    if len(values) < 2:
        raise ValueError(
            f"a seed summary needs at least 2 values, got {len(values)}; with one seed, say "
            "that the spread over seeds is not measured"
        )
    if not np.isfinite(values).all():
        raise ValueError(f"`values` must be finite, got {values.tolist()}")
    _check_level(level)
    mean, sd = float(values.mean()), float(values.std(ddof=1))
    half = t_quantile((1 + level) / 2, len(values) - 1) * sd / math.sqrt(len(values))
    return Estimate(
        mean,
        mean - half,
        mean + half,
        level,
        unit,
        len(values),
        f"t interval over {len(values)} {unit}",
        sd=sd,
        values=tuple(values),
        df=len(values) - 1,
    )


def with_seed_spread(
    over_units: Estimate,
    per_seed,
    *,
    seeds_unit: str = "seeds",
    max_df: int = 1000,
    df_rule: str = "satterthwaite",
) -> Estimate:
    """Widen an interval over units (seeds averaged) by the spread of the estimate over seeds.

    A quantity measured at S seeds on one shared test set varies with both: the test set
    (``over_units``, a bootstrap over its examples with the seed mean fixed) and the seeds
    (``per_seed``, the quantity at each seed). Under a crossed random-effects model the
    variance of the seed mean is the sum of the two parts,

        se² = sd_units² + s_seeds² / S,

    and the interval is ``estimate ± t_df se`` with the Welch–Satterthwaite degrees of
    freedom of the seed part, ``df = se⁴ (S − 1) / (s_seeds² / S)²`` (rounded down, at most
    ``max_df``; the bootstrap part counts as known). With a seed spread of zero it is the
    normal interval of the bootstrap; with a negligible test-set part it is
    :func:`seed_summary`'s t interval. The seed part already carries each seed's own test
    noise, so the sum errs wide.

    With few seeds the Satterthwaite ``df`` is itself a noisy estimate: two seeds that
    happen to agree give a tiny ``s_seeds²`` and a ``df`` in the hundreds, so the interval
    is the bootstrap's alone. ``df_rule="seeds"`` uses ``df = S − 1`` instead, the lower
    bound of the Satterthwaite value (``se² ≥ s_seeds² / S``): the conservative interval
    that treats the whole standard error as if it were estimated from the seeds.

    Parameters
    ----------
    over_units : Estimate
        The seed-averaged estimate with its resampling SD (``sd``), e.g. from
        :func:`lmsim.stats.paired_bootstrap` with ``seeds="mean"``.
    per_seed : array_like of shape (n_seeds,)
        The quantity at each seed, n_seeds >= 2; their mean must be ``over_units.estimate``.
    seeds_unit : str
        What a seed is (``"fine-tuning seeds"``), for the record's unit.
    max_df : int
    df_rule : {"satterthwaite", "seeds"}
        The degrees of freedom of the t quantile: Welch–Satterthwaite's (default), or the
        seeds' own ``S − 1`` (conservative; what a page with two or three seeds should use).

    Returns
    -------
    Estimate
        The same estimate; ``sd`` the combined standard error, ``values`` the per-seed
        values, ``unit`` both resampling units.

    References
    ----------
    Satterthwaite (1946), An approximate distribution of estimates of variance components.
    Biometrics Bulletin 2(6), 110–114.
    """
    if df_rule not in ("satterthwaite", "seeds"):
        raise ValueError(f"`df_rule` must be 'satterthwaite' or 'seeds', got {df_rule!r}")
    values = np.asarray(per_seed, dtype=np.float64).ravel()
    n_seeds = len(values)
    if n_seeds < 2 or not np.isfinite(values).all():
        raise ValueError(
            f"`per_seed` needs at least 2 finite values, got {values.tolist()}; with one seed "
            "the spread over seeds is not measured: report the interval over units alone"
        )
    if over_units.sd is None or not math.isfinite(over_units.sd):
        raise ValueError("`over_units` has no resampling SD (`sd`); pass a bootstrap estimate")
    if not math.isclose(values.mean(), over_units.estimate, rel_tol=1e-9, abs_tol=1e-12):
        raise ValueError(
            f"the per-seed values' mean {values.mean():.6g} is not the estimate "
            f"{over_units.estimate:.6g}: they must measure the same quantity"
        )
    seed_var = float(values.var(ddof=1)) / n_seeds
    se = math.sqrt(over_units.sd**2 + seed_var)
    df = max_df
    if seed_var > 0:
        # rounded down, past the float error of se**4 / seed_var**2 at a seed-only se
        df = max(1, min(max_df, math.floor(se**4 * (n_seeds - 1) / seed_var**2 * (1 + 1e-9))))
    if df_rule == "seeds":
        df = n_seeds - 1
    half = t_quantile((1 + over_units.level) / 2, df) * se
    return Estimate(
        over_units.estimate,
        over_units.estimate - half,
        over_units.estimate + half,
        over_units.level,
        f"{over_units.unit} and {n_seeds} {seeds_unit}",
        over_units.n,
        f"t interval (df {df}, {'Satterthwaite' if df_rule == 'satterthwaite' else 'seeds - 1'})"
        f" of the bootstrap SE over {over_units.unit} "
        f"combined with the SD over {n_seeds} {seeds_unit}",
        sd=se,
        values=tuple(values),
        components=(
            (over_units.unit, float(over_units.sd), int(over_units.n or 1)),
            (seeds_unit, math.sqrt(seed_var), n_seeds),
        ),
        df=df,
    )


def jackknife(
    statistic: Callable,
    full,
    replicates: Sequence,
    *,
    unit: str,
    level: float = 0.95,
) -> Estimate:
    """A statistic with a delete-one-group jackknife t interval.

    The ``G`` groups (blocks of sentences, say) are the independent units; replicate ``g``
    is the data without group ``g``. With ``θ`` the statistic on all the data and ``θ_g``
    on replicate ``g``, the standard error is
    ``se = sqrt((G - 1) / G · Σ_g (θ_g - mean_g θ_g)²)`` and the interval
    ``θ ± t_{G-1} se``. Where a resampled statistic is too costly to recompute many times
    (a layer x layer CKA matrix from moments of thousands of features) the ``G``
    replicates, each one :meth:`lmsim.moments.Moments.remove` away from the full moments,
    are cheap.

    Parameters
    ----------
    statistic : callable
        ``statistic(x) -> float`` of the full data ``full`` and of each replicate.
    full : object
        What the statistic reads on all the data (e.g. a list of per-model CKA matrices).
    replicates : sequence
        The same with each group left out in turn, ``G >= 2`` of them.
    unit : str
        The groups, e.g. ``"sentence blocks"``.
    level : float

    Returns
    -------
    Estimate
        ``estimate`` on the full data, ``sd`` the jackknife standard error, ``df = G - 1``,
        ``n = G``; no ``draws`` (replicates are not bootstrap draws: their spread is about
        ``sqrt(G - 1)`` times narrower than the standard error), so one-sided p-values take
        the t form.

    References
    ----------
    Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, ch. 11, Eq. 11.5
    (jackknife standard error); Shao & Tu (1995), *The Jackknife and Bootstrap*, §5.2
    (delete-one-group jackknife for dependent rows).
    """
    _check_level(level)
    if isinstance(replicates, (str, bytes)) or len(replicates) < 2:
        raise ValueError(
            f"`replicates` must hold at least 2 leave-one-group-out replicates, got {replicates!r}"
        )
    theta = float(statistic(full))
    reps = np.array([float(statistic(r)) for r in replicates], dtype=np.float64)
    if not np.isfinite(theta) or not np.isfinite(reps).all():
        raise ValueError(
            f"the statistic must be finite on the data and every replicate, got {theta} and "
            f"{reps.tolist()}"
        )
    g = len(reps)
    se = math.sqrt((g - 1) / g * float(((reps - reps.mean()) ** 2).sum()))
    half = t_quantile((1 + level) / 2, g - 1) * se
    return Estimate(
        theta, theta - half, theta + half, level, unit, g,
        f"delete-one-group jackknife t interval ({g} {unit})", sd=se, df=g - 1,
    )  # fmt: skip
