"""Power of a design (the smallest effect it detects, what would settle it), one-sided
p-values of an estimate, and Holm's correction for a family of claims."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lmsim.stats._estimate import Estimate
from lmsim.stats._reliability import _t_two_sided_mass, t_quantile


def normal_cdf(x: float) -> float:
    """Φ(x), the standard normal distribution function."""
    return 0.5 * math.erfc(-x / math.sqrt(2))


def normal_quantile(p: float) -> float:
    """Φ⁻¹(p) by bisection on :func:`normal_cdf` (to ~1e-14)."""
    if not 0 < p < 1:
        raise ValueError(f"`p` must be in (0, 1), got {p}")
    low, high = -40.0, 40.0
    for _ in range(200):
        mid = (low + high) / 2
        if normal_cdf(mid) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-15:
            break
    return (low + high) / 2


def _quantile(p: float, df: int | None) -> float:
    return normal_quantile(p) if df is None else t_quantile(p, df)


def _cdf(x: float, df: int | None) -> float:
    if df is None:
        return normal_cdf(x)
    mass = _t_two_sided_mass(abs(x), df)  # P(|T| < |x|)
    return 0.5 + mass / 2 if x >= 0 else 0.5 - mass / 2


def standard_error(estimate: Estimate) -> float:
    """The standard error an interval implies: half its width over the quantile of its
    level, ``(high - low) / (2 q)``, with ``q`` Student's t quantile for a t interval
    (``estimate.df``) and the normal one otherwise."""
    q = _quantile((1 + estimate.level) / 2, estimate.df)
    return (estimate.high - estimate.low) / (2 * q)


def one_sided_p(estimate: Estimate, threshold: float, side: str) -> float:
    """Evidence that the estimate lies on one side of a threshold, as a one-sided p-value.

    ``side="above"``: the p-value of "the quantity is at most ``threshold``" (small when
    the estimate is clearly above it); ``side="below"`` the mirror. From the bootstrap or
    null draws when the estimate keeps them (the share of draws on the wrong side, the
    inversion of the percentile interval: the interval at level L excludes the threshold
    exactly when p < (1 - L) / 2, up to ties), else from the normal approximation with
    :func:`standard_error` (Student's t with ``estimate.df`` degrees of freedom for a t
    interval, whose tails a normal form would understate). An exact value gives 0 or 1.
    """
    if side not in ("above", "below"):
        raise ValueError(f"`side` must be 'above' or 'below', got {side!r}")
    sign = 1.0 if side == "above" else -1.0
    if estimate.draws is not None and len(estimate.draws):
        draws = np.asarray(estimate.draws, dtype=np.float64)
        return float(np.mean(sign * (draws - threshold) <= 0))
    se = standard_error(estimate)
    distance = sign * (estimate.estimate - threshold)
    if se == 0:
        return 0.0 if distance > 0 else 1.0
    return 1 - _cdf(distance / se, estimate.df)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (controls the family-wise error at every α).

    The i-th smallest of m p-values is multiplied by ``m - i + 1`` (i from 1), the products
    are made non-decreasing in that order (a running maximum) and capped at 1; a claim
    holds at family-wise level α when its adjusted p-value is at most α. Returned in the
    input's order.

    References
    ----------
    Holm (1979), A simple sequentially rejective multiple test procedure. Scandinavian
    Journal of Statistics 6(2), 65–70.
    """
    p = np.asarray(p_values, dtype=np.float64).ravel()
    if not len(p):
        return p
    if not (np.isfinite(p).all() and (p >= 0).all() and (p <= 1).all()):
        raise ValueError(f"`p_values` must lie in [0, 1], got {p.tolist()}")
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (len(p) - np.arange(len(p)))
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return adjusted


@dataclass(frozen=True)
class Power:
    """What an interval could detect, and what would settle an inconclusive claim.

    Attributes
    ----------
    mde : float
        The smallest distance from the threshold that this design detects (its interval
        excludes the threshold) with probability ``power``:
        ``(q_{(1+level)/2} + q_power) · se``, with normal quantiles, or Student's t at the
        interval's degrees of freedom for a t interval.
    power, level : float
    se : float
        The standard error the interval implies (:func:`standard_error`).
    distance : float
        The observed distance of the estimate from the threshold (or the nearer bound).
    components : tuple of (str, float, int)
        The variance components: (unit, its part of the standard error, how many).
    needed : dict of str to int or None
        For each component, how many would detect ``distance`` with ``power`` when only
        that one grows (None: growing it alone cannot, the others' part is too large). A
        large-sample (normal) figure: with a handful of seeds, add one or two.
    note : str
        The sentence a record shows: the mde and what would settle it.
    """

    mde: float
    power: float
    level: float
    se: float
    distance: float
    components: tuple[tuple[str, float, int], ...]
    needed: dict
    note: str

    def to_record(self) -> dict:
        return {
            "mde": self.mde,
            "power": self.power,
            "level": self.level,
            "se": self.se,
            "distance": self.distance,
            "components": [list(c) for c in self.components],
            "needed": dict(self.needed),
            "settle": self.note,
        }


def _components(estimate: Estimate, se: float, components) -> list[tuple[str, float, int]]:
    if components is None:
        if estimate.n is None or estimate.n < 1:
            return []
        return [(estimate.unit, se, int(estimate.n))]
    if isinstance(components, Mapping):
        components = [(k, *v) for k, v in components.items()]
    out = []
    for name, part, n in components:
        if not (math.isfinite(part) and part >= 0) or int(n) != n or n < 1:
            raise ValueError(
                f"each component is (name, its part of the standard error >= 0, count >= 1), "
                f"got {(name, part, n)!r}"
            )
        out.append((str(name), float(part), int(n)))
    total = math.sqrt(sum(p**2 for _, p, _ in out))
    if total > 0:  # scale the parts to the interval's standard error
        out = [(name, p * se / total, n) for name, p, n in out]
    return out


def power_note(
    estimate: Estimate,
    threshold: float | Sequence[float],
    *,
    power: float = 0.8,
    components=None,
    costs: Mapping[str, str] | None = None,
) -> Power:
    """The smallest effect an interval's design detects, and what would settle the claim.

    Parameters
    ----------
    estimate : Estimate
        With a non-degenerate interval (an inconclusive claim's).
    threshold : float or (float, float)
        The rule's threshold, or the bounds of a "within" rule (the nearer one counts).
    power : float
        0.8 by default.
    components : sequence of (name, se part, n) or mapping name -> (se part, n), optional
        The variance components behind the interval, e.g. ``{"test examples": (0.011,
        1000), "fine-tuning seeds": (0.02, 3)}``: each part's standard error at its count
        (they combine as the root of the sum of squares and are scaled to the interval's
        standard error). By default the estimate's own ``components`` (from
        :func:`with_seed_spread`) or its one unit.
    costs : mapping of name to str, optional
        The cost of one more unit of a component (``{"fine-tuning seeds": "40 min of GPU
        each"}``), added to the note.

    Returns
    -------
    Power
        Each component's needed count assumes its part of the variance falls as 1 / n.
    """
    if not 0 < power < 1:
        raise ValueError(f"`power` must be in (0, 1), got {power}")
    se = standard_error(estimate)
    mde = (_quantile((1 + estimate.level) / 2, estimate.df) + _quantile(power, estimate.df)) * se
    z = normal_quantile((1 + estimate.level) / 2) + normal_quantile(power)
    bounds = np.atleast_1d(np.asarray(threshold, dtype=np.float64))
    distance = float(np.min(np.abs(estimate.estimate - bounds)))
    parts = _components(estimate, se, components if components is not None else estimate.components)
    needed: dict[str, int | None] = {}
    target = (distance / z) ** 2 if distance > 0 else 0.0  # the variance that would do
    for name, part, n in parts:
        rest = se**2 - part**2
        if target <= rest or part == 0:
            needed[name] = None
        else:
            needed[name] = int(math.ceil(n * part**2 / (target - rest)))
    costs = dict(costs or {})
    pieces = []
    for name, _, n in parts:
        more = f" ({costs[name]})" if name in costs else ""
        if needed[name] is None:
            pieces.append(f"more {name} alone cannot (now {n}){more}")
        else:
            pieces.append(f"about {needed[name]:,} {name} (now {n}){more}")
    if distance == 0:
        settle = "the estimate sits on the threshold: no sample settles it; state a margin"
    elif not pieces:
        settle = "no variance components known"
    else:
        settle = f"the observed distance {distance:.3g} would be detected with " + "; ".join(pieces)
    note = f"detects {mde:.3g} from the threshold with {power:.0%} power (se {se:.3g}); {settle}"
    return Power(mde, power, estimate.level, se, distance, tuple(parts), needed, note)
