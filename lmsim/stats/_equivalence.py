"""Equivalence and non-inferiority: "within ±m", "no worse than by m", "stable"."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lmsim.stats._estimate import Estimate
from lmsim.stats._power import one_sided_p

KINDS = ("within", "no worse", "stable")


def margin_bounds(
    margin: float, kind: str = "within", *, relative: bool = False, reference: float | None = None
) -> tuple[float, float]:
    """The region a difference must lie in for an equivalence claim to hold.

    Parameters
    ----------
    margin : float
        ``m > 0``: absolute, or with ``relative=True`` a fraction of ``|reference|``
        (0.01 for Dalvi et al.'s "within 1 % of the full model").
    kind : {"within", "no worse", "stable"}
        ``"within"`` and ``"stable"``: ``(-m, m)`` (two one-sided tests; "stable" is the
        same test of a change between conditions). ``"no worse"``: ``(-m, inf)``, a
        non-inferiority test of a difference where larger is better (write a loss as
        baseline minus method).
    relative : bool
    reference : float, optional
        The reference a relative margin is a fraction of (the baseline's score).

    Returns
    -------
    (low, high)
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}, got {kind!r}")
    margin = float(margin)
    if not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"`margin` must be a positive number, got {margin!r}")
    if relative:
        if reference is None or not math.isfinite(float(reference)) or reference == 0:
            raise ValueError(
                f"a relative margin needs a finite non-zero `reference` (the baseline's value), "
                f"got {reference!r}"
            )
        margin *= abs(float(reference))
    return (-margin, math.inf if kind == "no worse" else margin)


@dataclass(frozen=True)
class Equivalence:
    """A two one-sided tests (TOST) summary of an estimate against a margin.

    Attributes
    ----------
    kind : {"within", "no worse", "stable"}
    margin : float
        As given (a fraction when ``relative``).
    relative : bool
    reference : float or None
    bounds : (float, float)
        The absolute region (:func:`margin_bounds`).
    p_lower, p_upper : float
        One-sided p-values of "the difference is at most the low bound" and "at least the
        high bound" (0 for an infinite bound).
    p_value : float
        ``max(p_lower, p_upper)``: equivalence at level α when at most α.
    alpha : float
        ``(1 - level) / 2``: the interval at ``level`` lying inside the bounds is the TOST
        at this α (a 95 % interval is a TOST at 2.5 %, a 90 % one the textbook 5 %).
    """

    kind: str
    margin: float
    relative: bool
    reference: float | None
    bounds: tuple[float, float]
    p_lower: float
    p_upper: float
    p_value: float
    alpha: float

    def to_record(self) -> dict:
        low, high = self.bounds
        return {
            "kind": self.kind,
            "margin": self.margin,
            "relative": self.relative,
            "reference": self.reference,
            "bounds": [low, None if math.isinf(high) else high],
            "p_lower": self.p_lower,
            "p_upper": self.p_upper,
            "p_value": self.p_value,
            "alpha": self.alpha,
        }


def tost(
    estimate: Estimate,
    margin: float,
    kind: str = "within",
    *,
    relative: bool = False,
    reference: float | None = None,
) -> Equivalence:
    """Two one-sided tests of an estimate (a difference) against an equivalence margin.

    "Failing to find a difference" is not equality: a claim that two things are within m
    of each other holds only when the whole interval lies inside ``(-m, m)``
    (:mod:`lmsim.claims` judges the rules ``"within ±m"``, ``"no worse than m"`` and
    ``"stable within ±m"`` this way); this gives the p-values of the same test, for a
    family correction (:func:`holm`) or the record.

    Parameters
    ----------
    estimate : Estimate
        A difference (method minus baseline), with its interval and, for bootstrap
        estimates, its draws.
    margin, kind, relative, reference
        See :func:`margin_bounds`.

    Returns
    -------
    Equivalence
        p-values from the draws where the estimate keeps them, else the normal
        approximation (:func:`one_sided_p`).

    References
    ----------
    Schuirmann (1987), A comparison of the two one-sided tests procedure and the power
    approach for assessing the equivalence of average bioavailability. Journal of
    Pharmacokinetics and Biopharmaceutics 15(6), 657–680.
    """
    low, high = margin_bounds(margin, kind, relative=relative, reference=reference)
    p_lower = one_sided_p(estimate, low, "above")
    p_upper = 0.0 if math.isinf(high) else one_sided_p(estimate, high, "below")
    return Equivalence(
        kind,
        float(margin),
        bool(relative),
        None if reference is None else float(reference),
        (low, high),
        p_lower,
        p_upper,
        max(p_lower, p_upper),
        (1 - estimate.level) / 2,
    )
