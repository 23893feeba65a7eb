"""Bootstrap intervals over a named unit, paired differences and permutation tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lmsim.stats._estimate import (
    Estimate,
    Test,
    _check_count,
    _check_level,
    _finite_draws,
    _input_problem,
    _percentile_interval,
    _rng,
)

_SEED_MODES = ("resample", "mean", "min", "max")


class _Units:
    """Resampling units: single rows, or groups of rows sharing a label."""

    def __init__(self, n_rows: int, groups=None):
        if groups is None:
            self.n = n_rows
            self.order = None
            return
        groups = np.asarray(groups)
        if groups.ndim != 1 or len(groups) != n_rows:
            raise ValueError(
                f"`groups` must be a 1-D array of one label per row ({n_rows}), got shape "
                f"{groups.shape}"
            )
        _, codes = np.unique(groups, return_inverse=True)
        self.order = np.argsort(codes, kind="stable")
        self.sizes = np.bincount(codes)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self.n = len(self.sizes)

    def rows(self, picked: np.ndarray) -> np.ndarray:
        """Row indices of the picked units (groups in the order picked)."""
        if self.order is None:
            return picked
        lengths = self.sizes[picked]
        begin = np.cumsum(lengths) - lengths
        within = np.arange(lengths.sum()) - np.repeat(begin, lengths)
        return self.order[np.repeat(self.starts[picked], lengths) + within]


def _rows_of(arrays: Sequence, what: str) -> tuple[list[np.ndarray], int]:
    if not arrays:
        raise ValueError(f"{what} needs at least one array")
    out = [np.asarray(a) for a in arrays]
    if any(a.ndim == 0 for a in out):
        raise ValueError(f"{what}: every array needs a first axis of units, got a scalar")
    lengths = {len(a) for a in out}
    if len(lengths) != 1:
        raise ValueError(
            f"{what}: the arrays must have the same number of rows, got {[len(a) for a in out]}"
        )
    return out, lengths.pop()


# ---------------------------------------------------------------------- bootstrap
def bootstrap(
    statistic: Callable[..., float],
    *arrays,
    unit: str = "examples",
    groups=None,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """Percentile bootstrap interval of ``statistic(*arrays)`` over a named unit.

    Parameters
    ----------
    statistic : callable
        ``statistic(*arrays) -> float`` on arrays whose first axis are rows.
    *arrays : array_like, each of shape (n_rows, ...)
        Resampled together, row by row (or group by group).
    unit : str
        What a row (or a group) is, for the record: ``"test examples"``, ``"sentences"``.
    groups : array_like of shape (n_rows,), optional
        A label per row; whole groups are resampled (the tokens of a sentence, the
        occurrences of a word type), and ``n`` counts groups.
    n_boot : int
        Resamples.
    level : float
        Coverage of the percentile interval.
    seed : int or Generator

    Returns
    -------
    Estimate
        ``estimate = statistic(*arrays)``; ``low``/``high`` the ``(1 - level) / 2`` and
        ``(1 + level) / 2`` quantiles (numpy's linear rule) of the resampled statistics.
    """
    arrays, n_rows = _rows_of(arrays, "bootstrap")
    n_boot, rng = _check_count("n_boot", n_boot), _rng(seed)
    _check_level(level)
    units = _Units(n_rows, groups)
    if units.n < 2:
        raise ValueError(f"bootstrap needs at least 2 units, got {units.n}")
    names = ["arrays[0]"] if len(arrays) == 1 else [f"arrays[{i}]" for i in range(len(arrays))]

    def inputs():
        return _input_problem(arrays, names)

    estimate = float(statistic(*arrays))
    if not np.isfinite(estimate) and inputs():
        raise ValueError(inputs())
    draws = []
    for _ in range(n_boot):
        rows = units.rows(rng.integers(0, units.n, units.n))
        draws.append(float(statistic(*(a[rows] for a in arrays))))
    draws = _finite_draws(draws, "bootstrap resamples", inputs)
    low, high = _percentile_interval(draws, level)
    return Estimate(
        estimate,
        low,
        high,
        level,
        unit,
        units.n,
        f"percentile bootstrap ({n_boot} resamples of {unit})",
        sd=float(draws.std(ddof=1)),
        draws=draws,
    )


def paired_bootstrap(
    a,
    b,
    statistic: Callable[[np.ndarray], float] | None = None,
    *,
    unit: str = "examples",
    groups=None,
    seeds: str | None = None,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """Interval of ``statistic(A) - statistic(B)`` with A and B resampled on the same units.

    A and B are measured on the same units (test examples, sentences), so their
    difference is resampled pair by pair: the interval of a difference of two correlated
    scores is much narrower than two separate intervals suggest.

    Parameters
    ----------
    a, b : array_like
        Without ``seeds``: per-unit rows of shape (n_rows, ...), e.g. 0/1 correctness of
        each test example, or rows of (prediction, label) for a metric. With ``seeds``:
        shape (n_seeds_a, n_rows, ...) and (n_seeds_b, n_rows, ...): one run per seed, all
        on the same units (B may have one "seed", e.g. a fixed baseline).
    statistic : callable, optional
        ``statistic(rows) -> float``; the mean by default.
    unit, groups, n_boot, level, seed
        As in :func:`bootstrap`.
    seeds : {None, "resample", "mean", "min", "max"}
        How runs of several seeds combine. ``"mean"``: the mean over the given seeds of
        each side (units resampled, seeds fixed). ``"resample"``: seeds are resampled too
        (with replacement, A's and B's separately, after the units); with few seeds this
        part of the interval is too narrow (a bootstrap of 3 values), so also state
        :func:`seed_summary`. ``"min"`` / ``"max"``: the smallest / largest difference
        over A's seeds (B averaged over its seeds): "A beats B at every seed" is
        ``seeds="min"`` with the rule ``"> 0"``. For an interval that varies the units and
        the seeds, pass a ``"mean"`` estimate and the per-seed differences to
        :func:`with_seed_spread`.

    Returns
    -------
    Estimate
        With ``seeds``, ``values`` holds each A seed's difference on all units.
    """
    if seeds is not None and seeds not in _SEED_MODES:
        raise ValueError(f"`seeds` must be None or one of {_SEED_MODES}, got {seeds!r}")
    statistic = statistic or (lambda rows: float(np.mean(rows)))
    a, b = np.asarray(a), np.asarray(b)
    if seeds is None:
        a, b = a[None], b[None]
    elif a.ndim < 2 or b.ndim < 2:
        raise ValueError(
            f"with `seeds`, `a` and `b` need a leading seed axis: shape (n_seeds, n_rows, ...),"
            f" got {a.shape} and {b.shape}"
        )
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"`a` and `b` must be measured on the same units: got {a.shape[1]} and "
            f"{b.shape[1]} rows"
        )
    n_boot, rng = _check_count("n_boot", n_boot), _rng(seed)
    _check_level(level)
    units = _Units(a.shape[1], groups)
    if units.n < 2:
        raise ValueError(f"paired_bootstrap needs at least 2 units, got {units.n}")
    n_a, n_b = len(a), len(b)

    def combine(values_a, values_b, pick_a=None, pick_b=None):
        va = values_a if pick_a is None else values_a[pick_a]
        vb = values_b if pick_b is None else values_b[pick_b]
        if seeds == "min":
            return float(np.min(va) - np.mean(vb))
        if seeds == "max":
            return float(np.max(va) - np.mean(vb))
        return float(np.mean(va) - np.mean(vb))

    def inputs():
        return _input_problem([a[0], b[0]] if seeds is None else [a, b], ["a", "b"])

    full_a = np.array([statistic(x) for x in a], dtype=np.float64)
    full_b = np.array([statistic(x) for x in b], dtype=np.float64)
    estimate = combine(full_a, full_b)
    if not np.isfinite(estimate) and inputs():
        raise ValueError(inputs())
    draws = []
    for _ in range(n_boot):
        rows = units.rows(rng.integers(0, units.n, units.n))
        values_a = np.array([statistic(x[rows]) for x in a], dtype=np.float64)
        values_b = np.array([statistic(x[rows]) for x in b], dtype=np.float64)
        if seeds == "resample":
            pick_a, pick_b = rng.integers(0, n_a, n_a), rng.integers(0, n_b, n_b)
            draws.append(combine(values_a, values_b, pick_a, pick_b))
        else:
            draws.append(combine(values_a, values_b))
    draws = _finite_draws(draws, "bootstrap resamples", inputs)
    low, high = _percentile_interval(draws, level)
    described = unit if seeds is None else f"{unit} x seeds ({n_a} vs {n_b}; {seeds})"
    return Estimate(
        estimate,
        low,
        high,
        level,
        described,
        units.n,
        f"paired percentile bootstrap ({n_boot} resamples of {described})",
        sd=float(draws.std(ddof=1)),
        values=None if seeds is None else tuple(full_a - full_b.mean()),
        draws=draws,
    )


# -------------------------------------------------------------------- permutation
def permutation_test(
    a,
    b,
    statistic: Callable[[np.ndarray, np.ndarray], float] | None = None,
    *,
    paired: bool = False,
    alternative: str = "greater",
    n_perm: int = 2000,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Test:
    """Permutation test of ``statistic(a, b)`` (by default ``mean(a) - mean(b)``).

    Parameters
    ----------
    a, b : array_like
        Unpaired: shapes (n_a, ...) and (n_b, ...); rows are exchanged between the two
        samples. Paired (``paired=True``): the same shape (n, ...); each pair is swapped
        with probability 1/2 (a sign flip for a difference of means).
    statistic : callable, optional
        ``statistic(a, b) -> float``.
    alternative : {"greater", "less", "two-sided"}
        ``"greater"``: large values of the statistic are evidence against the null.
        ``"two-sided"`` doubles the smaller one-sided p-value (capped at 1).
    n_perm, level, seed
        Permutations; coverage of the null's central interval; randomness.

    Returns
    -------
    Test
        ``p_value = (1 + #{null >= observed}) / (1 + n_perm)`` for "greater" (valid at
        every ``n_perm``: never 0).
    """
    if alternative not in ("greater", "less", "two-sided"):
        raise ValueError(
            f"`alternative` must be 'greater', 'less' or 'two-sided', got {alternative!r}"
        )
    statistic = statistic or (lambda x, y: float(np.mean(x) - np.mean(y)))
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("`a` and `b` must be arrays with a first axis of observations")
    if paired and a.shape != b.shape:
        raise ValueError(f"a paired test needs `a` and `b` of one shape, got {a.shape}, {b.shape}")
    n_perm, rng = _check_count("n_perm", n_perm), _rng(seed)
    _check_level(level)
    observed = float(statistic(a, b))
    if not np.isfinite(observed):
        problem = _input_problem([a, b], ["a", "b"])
        raise ValueError(problem or f"the statistic is {observed} on the observed samples")
    draws = np.empty(n_perm)
    if paired:
        expand = (slice(None),) + (None,) * (a.ndim - 1)
        for k in range(n_perm):
            swap = (rng.random(len(a)) < 0.5)[expand]
            draws[k] = statistic(np.where(swap, b, a), np.where(swap, a, b))
    else:
        pooled, n_a = np.concatenate([a, b]), len(a)
        for k in range(n_perm):
            order = rng.permutation(len(pooled))
            draws[k] = statistic(pooled[order[:n_a]], pooled[order[n_a:]])
    greater = (1 + int((draws >= observed).sum())) / (1 + n_perm)
    less = (1 + int((draws <= observed).sum())) / (1 + n_perm)
    p = {"greater": greater, "less": less, "two-sided": min(1.0, 2 * min(greater, less))}
    low, high = _percentile_interval(draws, level)
    kind = "paired swaps" if paired else "label permutations"
    null = Estimate(
        float(draws.mean()),
        low,
        high,
        level,
        "permutations",
        n_perm,
        f"permutation null ({n_perm} {kind})",
        sd=float(draws.std(ddof=1)),
        draws=draws,
    )
    return Test(observed, p[alternative], alternative, null)
