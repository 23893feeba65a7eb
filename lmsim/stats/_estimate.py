"""The results of lmsim.stats (Estimate, Test) and the helpers every function shares."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval over a named resampling unit.

    Attributes
    ----------
    estimate : float
        The statistic on all the data (not the mean of the resamples).
    low, high : float
        The interval's ends (``low <= high``); equal for an exact value.
    level : float
        Coverage of the interval, e.g. 0.95.
    unit : str
        What was resampled (``"test examples"``, ``"sentences"``, ``"seeds"``,
        ``"random draws"``) or ``"none"`` for an exact value (a count).
    n : int or None
        How many units there are (examples, sentences, seeds, draws).
    method : str
        How the interval was made (``"percentile bootstrap (2000 resamples)"``).
    sd : float or None
        Standard deviation of the values (seed summaries) or of the resamples.
    values : tuple of float or None
        Small per-unit values worth showing (one per seed), else None.
    draws : ndarray or None
        The resampled or null statistics (not part of the record).
    components : tuple of (str, float, int) or None
        The variance components behind the interval, where more than one unit varies:
        (unit, its part of the standard error, how many), e.g. test examples and seeds
        (:func:`lmsim.stats.with_seed_spread`). :func:`lmsim.stats.power_note` reads them
        to say what would settle an inconclusive claim.
    df : int or None
        The degrees of freedom of a Student t interval (:func:`lmsim.stats.seed_summary`,
        :func:`lmsim.stats.with_seed_spread`); None for a percentile or normal interval.
    """

    estimate: float
    low: float
    high: float
    level: float = 0.95
    unit: str = "none"
    n: int | None = None
    method: str = "exact"
    sd: float | None = None
    values: tuple[float, ...] | None = None
    draws: np.ndarray | None = field(default=None, repr=False, compare=False)
    components: tuple[tuple[str, float, int], ...] | None = field(default=None, repr=False)
    df: int | None = field(default=None, repr=False)

    def __post_init__(self):
        for name in ("estimate", "low", "high"):
            object.__setattr__(self, name, float(getattr(self, name)))
        if math.isnan(self.estimate):
            raise ValueError("`estimate` is NaN: the statistic is undefined on these data")
        if not math.isfinite(self.estimate):
            raise ValueError(
                f"`estimate` is {self.estimate}: the statistic is not finite on these data"
            )
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low > self.high:
            raise ValueError(
                f"the interval must be two finite numbers with low <= high, got "
                f"[{self.low}, {self.high}]"
            )
        if not 0 < self.level < 1:
            raise ValueError(f"`level` must be in (0, 1), got {self.level}")
        if self.values is not None:
            object.__setattr__(self, "values", tuple(float(v) for v in self.values))

    @property
    def interval(self) -> tuple[float, float]:
        """``(low, high)``."""
        return (self.low, self.high)

    def quantile(self, q: float | Sequence[float]) -> float | np.ndarray:
        """Quantile(s) of the draws (e.g. the 95th percentile of a chance floor)."""
        if self.draws is None:
            raise ValueError("this estimate keeps no draws; quantiles need a resampled estimate")
        out = np.quantile(self.draws, q)
        return float(out) if np.ndim(out) == 0 else out

    def format(self, digits: int = 3) -> str:
        """``"0.710 [0.660, 0.750]"``; an exact value prints alone."""
        if self.low == self.high == self.estimate:
            return f"{self.estimate:.{digits}f}"
        return f"{self.estimate:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    def to_record(self) -> dict:
        """The JSON-ready fields a claim record takes from an estimate."""
        return {
            "estimate": self.estimate,
            "interval": [self.low, self.high],
            "level": self.level,
            "unit": self.unit,
            "n": self.n,
            "method": self.method,
            "sd": self.sd,
            "values": list(self.values) if self.values is not None else None,
        }


@dataclass(frozen=True)
class Test:
    """A permutation test: observed statistic, p-value and the null distribution.

    Attributes
    ----------
    statistic : float
    p_value : float
        ``(1 + #{null draws at least as extreme}) / (1 + n_perm)``.
    alternative : {"greater", "less", "two-sided"}
    null : Estimate
        Mean and central interval of the null draws (``draws`` holds them).
    """

    statistic: float
    p_value: float
    alternative: str
    null: Estimate

    def to_record(self) -> dict:
        return {
            "statistic": self.statistic,
            "p_value": self.p_value,
            "alternative": self.alternative,
            **{k: v for k, v in self.null.to_record().items() if k != "values"},
        }


def exact(value: float, unit: str = "none", n: int | None = None) -> Estimate:
    """A value without sampling variability (a count, a property of a fixed model).

    Returns the degenerate interval ``[value, value]`` with ``unit="none"``.
    """
    return Estimate(value, value, value, unit=unit, n=n, method="exact")


# ------------------------------------------------------------------------ helpers
def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1), got {level}")


def _check_count(name: str, value: int, least: int = 1) -> int:
    if int(value) != value or value < least:
        raise ValueError(f"`{name}` must be an integer >= {least}, got {value!r}")
    return int(value)


def _percentile_interval(draws: np.ndarray, level: float) -> tuple[float, float]:
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def _input_problem(arrays: Sequence, names: Sequence[str]) -> str | None:
    """Which input holds NaN or inf (numbers only), as a message; None when all are finite."""
    for name, array in zip(names, arrays):
        array = np.asarray(array)
        if not np.issubdtype(array.dtype, np.number):
            continue
        bad = ~np.isfinite(array)
        if bad.any():
            first = np.unravel_index(int(np.flatnonzero(bad)[0]), array.shape)
            where = ", ".join(map(str, first))
            return (
                f"`{name}` holds {int(bad.sum())} NaN or inf value(s) (the first at [{where}]):"
                " the statistic is not finite on them; drop or fix them first"
            )
    return None


def _finite_draws(draws: Sequence[float], what: str, inputs=None) -> np.ndarray:
    """The finite draws; most of them non-finite raises, naming the input that holds NaN or
    inf when ``inputs`` (a callable returning :func:`_input_problem`'s message) finds one."""
    draws = np.asarray(draws, dtype=np.float64)
    bad = int((~np.isfinite(draws)).sum())
    if bad > len(draws) // 2:
        problem = inputs() if inputs is not None else None
        if problem:
            raise ValueError(problem)
        raise ValueError(
            f"{bad} of {len(draws)} {what} gave a non-finite statistic; the statistic is "
            "undefined on most resamples (too few units, or a constant resample)"
        )
    if bad:
        warnings.warn(
            f"{bad} of {len(draws)} {what} gave a non-finite statistic; they are left out",
            stacklevel=3,
        )
    return draws[np.isfinite(draws)]
