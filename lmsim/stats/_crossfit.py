"""Cross-fitted correlation of two runs scored on one text, with its real ceiling."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lmsim.stats._estimate import (
    Estimate,
    _check_count,
    _check_level,
    _finite_draws,
    _percentile_interval,
    _rng,
)
from lmsim.stats._reliability import _correlation, _item_halves

_NAMES = ("r", "reliability_a", "reliability_b", "ceiling", "same_text")


@dataclass(frozen=True)
class CrossFit:
    """A cross-fitted correlation with the split-half reliabilities of the same halves.

    Attributes
    ----------
    r : Estimate
        Run A's item means on one half of the text against run B's on the other half
        (both ways, averaged): what the two runs share beyond the text they both read.
    reliability_a, reliability_b : Estimate
        Each run's item means on one half against the same run's on the other half: the
        reliability of a half-length score (no Spearman-Brown step: ``r`` is half-length
        too).
    ceiling : Estimate
        ``sqrt(max(rel_a, 0) * max(rel_b, 0))``: the largest ``r`` two runs with perfectly
        correlated true scores reach at this length (Spearman 1904). ``r / ceiling`` above 1
        beyond its interval means the design is wrong.
    same_text : Estimate
        A's and B's item means on the *same* half (both ways, averaged): the correlation a
        same-text comparison reports, shared text noise included. Shown for contrast.
    """

    r: Estimate
    reliability_a: Estimate
    reliability_b: Estimate
    ceiling: Estimate
    same_text: Estimate

    @property
    def disattenuated(self) -> float:
        """``r / ceiling`` (NaN when the ceiling is 0)."""
        c = self.ceiling.estimate
        return self.r.estimate / c if c > 0 else math.nan

    def to_record(self) -> dict:
        """The five estimates' records under their names, and ``disattenuated``."""
        out = {name: getattr(self, name).to_record() for name in _NAMES}
        out["disattenuated"] = None if math.isnan(self.disattenuated) else self.disattenuated
        return out


def _five(a1, a2, b1, b2, method: str) -> np.ndarray:
    rel_a, rel_b = _correlation(a1, a2, method), _correlation(b1, b2, method)
    return np.array(
        [
            (_correlation(a1, b2, method) + _correlation(a2, b1, method)) / 2,
            rel_a,
            rel_b,
            math.sqrt(max(rel_a, 0.0) * max(rel_b, 0.0)),
            (_correlation(a1, b1, method) + _correlation(a2, b2, method)) / 2,
        ]
    )


def cross_fitted_correlation(
    a,
    b,
    groups=None,
    *,
    method: str = "pearson",
    n_splits: int = 200,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> CrossFit:
    """Correlation of two runs' per-item scores, each run scored on a disjoint half of the text.

    Two runs scored on the *same* text share its sampling noise: a word type's mean score
    over its occurrences depends on which contexts it happened to occur in, for every run
    alike, so two runs correlate even when they share nothing else. Splitting each item's
    observations into two random halves and correlating run A's means on one half with run
    B's on the other (cross-fitting) removes the shared text; the split-half reliabilities
    of A and of B from the *same* halves then bound ``r`` from above (:class:`CrossFit`).

    Parameters
    ----------
    a, b : array_like
        The two runs' scores on the same observations. Either shape (n_items, n_obs):
        column j is the same observation (context, sentence) for both runs; or shape
        (n_obs,) with ``groups``.
    groups : array_like of shape (n_obs,), optional
        The item of each observation (the word type of each token occurrence); items with
        fewer than 2 observations are left out, odd counts leave one out at random.
    method : {"pearson", "spearman"}
    n_splits : int
        Random splits averaged for the estimates.
    n_boot : int
        Draws for the intervals: each takes a fresh split and resamples the items with
        replacement, and all five quantities are computed on that draw.
    level, seed

    Returns
    -------
    CrossFit
        Five estimates over ``"items"`` (``n`` the items used).

    Notes
    -----
    Draw order: a split of the matrix form draws ``rng.permutation(n_obs)`` (the first
    ``n_obs // 2`` columns are half 1, the next ``n_obs // 2`` half 2); of the grouped form
    ``rng.random(n_obs)`` (as :func:`split_half_reliability`). The ``n_splits`` splits come
    first; each of the ``n_boot`` draws is a split, then ``rng.integers(0, n_items,
    n_items)``.

    References
    ----------
    Spearman (1904), The proof and measurement of association between two things. American
    Journal of Psychology 15, 72–101. Chernozhukov et al. (2018), Double/debiased machine
    learning (cross-fitting). Econometrics Journal 21(1), C1–C68.
    """
    if method not in ("pearson", "spearman"):
        raise ValueError(f"`method` must be 'pearson' or 'spearman', got {method!r}")
    n_splits, n_boot = _check_count("n_splits", n_splits), _check_count("n_boot", n_boot)
    rng = _rng(seed)
    _check_level(level)
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(
            f"`a` and `b` must score the same observations: got shapes {a.shape} and {b.shape}"
        )
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("`a` and `b` must be finite; drop the observations without a score")
    n_items, split = _item_halves([a, b], groups, rng, ["a", "b"])
    if n_items < 3:
        raise ValueError(f"a cross-fitted correlation needs at least 3 items, got {n_items}")
    estimates = np.nanmean([_five(*split(), method) for _ in range(n_splits)], axis=0)
    draws = []
    for _ in range(n_boot):
        halves = split()
        pick = rng.integers(0, n_items, n_items)
        draws.append(_five(*(h[pick] for h in halves), method))
    draws = np.array(draws)
    out = {}
    for j, name in enumerate(_NAMES):
        column = _finite_draws(draws[:, j], f"cross-fitting draws ({name})")
        low, high = _percentile_interval(column, level)
        out[name] = Estimate(
            float(estimates[j]),
            low,
            high,
            level,
            "items",
            n_items,
            f"cross-fitted {method} ({name.replace('_', ' ')}; mean of {n_splits} splits "
            f"into disjoint halves, interval over {n_boot} item resamples x splits)",
            sd=float(column.std(ddof=1)),
            draws=column,
        )
    return CrossFit(**out)
