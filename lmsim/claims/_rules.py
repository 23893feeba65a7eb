"""Rules and verdicts: what an interval is judged by (a comparison, a range, an
equivalence margin) and the verdict it implies."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from lmsim import stats

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_COMPARE = re.compile(rf"^\s*(>=|<=|>|<)\s*({_NUMBER})\s*$")
_WITHIN = re.compile(rf"^\s*within\s*\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\]\s*$")
_AB = re.compile(r"^\s*A\s*(>=|<=|>|<)\s*B\s*$")
_EQUIVALENCE = re.compile(
    rf"^\s*(within|stable within|no worse than)\s*(±|\+/-|\+-)?\s*({_NUMBER})\s*(%?)\s*$"
)
_KIND_OF = {"within": "within", "stable within": "stable", "no worse than": "no worse"}


def parse_rule(rule: str, reference=None) -> tuple[str, float | tuple[float, float]]:
    """``(operator, threshold)`` of a rule string.

    ``">= 0.7"`` -> ``(">=", 0.7)``; ``"within [0.2, 0.4]"`` -> ``("within", (0.2, 0.4))``;
    ``"A > B"`` -> ``(">", 0.0)`` (the estimate is A - B). Equivalence rules (a TOST: the
    whole interval must lie inside the margin): ``"within ±0.02"`` -> ``("within",
    (-0.02, 0.02))``, ``"stable within ±0.01"`` the same test of a change, ``"no worse than
    0.02"`` -> ``(">", -0.02)`` (the estimate a difference where larger is better); a
    margin in percent (``"within ±1%"``) is relative to ``reference`` (a number or an
    Estimate: the baseline's value).
    """
    if not isinstance(rule, str):
        raise ValueError(f"`rule` must be a string such as '> 0', got {rule!r}")
    if m := _COMPARE.match(rule):
        return m.group(1), float(m.group(2))
    if m := _AB.match(rule):
        return m.group(1), 0.0
    if m := _WITHIN.match(rule):
        low, high = float(m.group(1)), float(m.group(2))
        if low > high:
            raise ValueError(f"`rule` {rule!r}: the range's low end exceeds its high end")
        return "within", (low, high)
    if equivalence := equivalence_threshold(rule, reference):
        return equivalence[0], equivalence[1]
    raise ValueError(
        f"`rule` {rule!r} is not understood; write '> t', '>= t', '< t', '<= t', "
        "'within [a, b]', 'A > B' / 'A < B' for a difference A - B, or an equivalence "
        "margin: 'within ±m', 'stable within ±m', 'no worse than m' (m or m%)"
    )


def judge(interval: Sequence[float], rule: str, reference=None) -> str:
    """The verdict of an interval under a rule: holds, does not hold or inconclusive.

    Parameters
    ----------
    interval : (low, high)
        ``[x, x]`` for an exact value.
    rule : str
        See :func:`parse_rule`.
    reference : float or Estimate, optional
        What a relative margin (``"within ±1%"``) is a fraction of.
    """
    low, high = (float(v) for v in interval)
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"`interval` must be finite with low <= high, got {interval!r}")
    return judge_op((low, high), *parse_rule(rule, reference))


def parse_equivalence(rule: str):
    """``(kind, margin, relative)`` of an equivalence rule, else None.

    ``"within ±0.02"`` (also ``+-``, ``+/-``), ``"stable within ±1%"``, ``"no worse than
    2"`` and ``"no worse than 1%"`` (relative to the claim's ``reference``).
    """
    m = _EQUIVALENCE.match(rule) if isinstance(rule, str) else None
    if m is None:
        return None
    words, sign, number, percent = m.groups()
    if words != "no worse than" and not sign:
        return None  # "within 0.2" is neither form; "within [a, b]" is matched elsewhere
    margin = float(number)
    if not margin > 0:
        raise ValueError(f"`rule` {rule!r}: the margin must be positive")
    return _KIND_OF[words], margin / 100 if percent else margin, bool(percent)


def equivalence_threshold(rule: str, reference=None):
    """``(op, threshold, (kind, margin, relative))`` of an equivalence rule, else None."""
    parsed = parse_equivalence(rule)
    if parsed is None:
        return None
    kind, margin, relative = parsed
    if isinstance(reference, stats.Estimate):
        reference = reference.estimate
    if relative and reference is None:
        raise ValueError(
            f"`rule` {rule!r} has a relative margin: pass `reference=` (the baseline's value "
            "the percentage is of)"
        )
    low, high = stats.margin_bounds(margin, kind, relative=relative, reference=reference)
    if kind == "no worse":
        return ">", low, parsed
    return "within", (low, high), parsed


def judge_op(interval: Sequence[float], op: str, threshold) -> str:
    """The verdict of an interval against an operator and threshold (see ``judge``)."""
    low, high = (float(v) for v in interval)
    if op == "within":
        a, b = threshold
        if a <= low and high <= b:
            return "holds"
        return "does not hold" if high < a or low > b else "inconclusive"
    t = float(threshold)
    holds, fails = {
        ">": (low > t, high <= t),
        ">=": (low >= t, high < t),
        "<": (high < t, low >= t),
        "<=": (high <= t, low > t),
    }[op]
    return "holds" if holds else "does not hold" if fails else "inconclusive"
