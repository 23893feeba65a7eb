"""What a verdict rests on beyond its interval: the claim's role, equivalence rules and
margins, symmetric ceilings, per-group verdicts, power, and families of claims.

These are the checklist's designs (``EVIDENCE.md``; ``docs/design.md``, "Evidence
designs"), applied by :class:`lmsim.claims.Claims` through keyword arguments of
:meth:`~lmsim.claims.Claims.report` and :meth:`~lmsim.claims.Claims.check`, and checked on
executed pages by :func:`evidence_problems`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from lmsim import stats
from lmsim.claims._rules import judge_op, parse_rule

#: What a record is for. ``paper``: the paper says it (the chapter's tallies count these);
#: ``beyond``: our own question; ``method``: a check that our method works (convergence,
#: selectivity, identities; sanity identities are ``method``); ``contrast``: a model the
#: paper says nothing about, shown for contrast; ``control``: the zoo or another control.
ROLES = ("paper", "beyond", "method", "contrast", "control")
COUNTED_ROLE = "paper"


# ---------------------------------------------------------------------------- roles
def default_role(kind: str, control_of) -> str | None:
    """The role a record without one implies: sanity identities are method checks, a
    record beside another claim (``control_of``) is a control; anything else has none."""
    if kind == "sanity":
        return "method"
    if isinstance(control_of, str) and control_of:
        return "control"
    return None


def effective_role(record: Mapping) -> str:
    """The record's role; for records written before roles existed, the role they were
    counted under: controls by ``control_of``, sanity identities as method checks, every
    other claim as a paper claim."""
    role = record.get("role")
    if isinstance(role, str) and role:
        return role
    return default_role(record.get("kind"), record.get("control_of")) or COUNTED_ROLE


def check_role(role) -> None:
    if role is not None and role not in ROLES:
        raise ValueError(f"`role` must be one of {ROLES}, got {role!r}")


# -------------------------------------------------------------------------- ceilings
def ceiling_verdict(interval, op: str, threshold, paper_value: float, ceiling, ours: str = ""):
    """The symmetric ceiling rule: what excuses a low value also convicts one.

    A measured quantity is attenuated by a ceiling ``c`` (a reliability bound): the
    paper's value ``p`` would show here as ``p · c``. The verdict is

    - ``does not hold`` when the interval lies wholly beyond the attenuated paper value
      (below ``p · c`` for every ``c`` in the ceiling's interval, for a ``>`` rule), even
      when it clears the rule's threshold, or when it is on the wrong side of the threshold;
    - ``holds`` when the interval is on the claimed side of the threshold and not wholly
      beyond the attenuated paper value;
    - ``not testable here`` when even the attenuated paper value would not clear the
      threshold (the design cannot tell the claim from its negation);
    - ``inconclusive`` otherwise.

    Parameters
    ----------
    interval : (low, high)
        The measured quantity's interval.
    op, threshold
        The rule's (``">"`` and the null's bar, say).
    paper_value : float
        The paper's value for this exact setting, before attenuation.
    ceiling : Estimate, float or dict
        The ceiling (e.g. :attr:`lmsim.stats.CrossFit.ceiling`); a dict as the record
        stores it (``estimate``, ``interval``).
    ours : str
        Our estimate as the reason should show it.

    Returns
    -------
    (verdict, record)
        ``record``: the ceiling, the paper value, the attenuated range, the rule's own
        verdict and the reason (a sentence for the note).
    """
    if op not in (">", ">=", "<", "<="):
        raise ValueError(f"a ceiling applies to a '>', '>=', '<' or '<=' rule, got {op!r}")
    if isinstance(ceiling, stats.Estimate):
        c_est, c_low, c_high = ceiling.estimate, ceiling.low, ceiling.high
    elif isinstance(ceiling, Mapping):
        c_est, (c_low, c_high) = float(ceiling["estimate"]), ceiling["interval"]
    else:
        c_est = c_low = c_high = float(ceiling)
    c_low, c_high = max(c_low, 0.0), max(c_high, 0.0)
    paper_value = float(paper_value)
    if not (math.isfinite(paper_value) and math.isfinite(c_est)):
        raise ValueError(f"`paper_value` and `ceiling` must be finite, got {paper_value}, {c_est}")
    attenuated = sorted((paper_value * c_low, paper_value * c_high))
    low, high = (float(v) for v in interval)
    base = judge_op((low, high), op, threshold)
    greater = op in (">", ">=")
    wrong = high < attenuated[0] if greater else low > attenuated[1]
    cannot = attenuated[1] <= threshold if greater else attenuated[0] >= threshold
    shows = f"{attenuated[0]:.3g}" + (
        "" if attenuated[0] == attenuated[1] else f" to {attenuated[1]:.3g}"
    )
    ceiling_text = f"ceiling {c_est:.3g}" + (
        "" if c_low == c_high else f" [{c_low:.3g}, {c_high:.3g}]"
    )
    if wrong:
        # checked first: clearing the rule's bar does not excuse a value the paper's own,
        # attenuated, would exceed (the symmetric rule convicts whatever the bar says)
        verdict = "does not hold"
        reason = (
            f"{ceiling_text}: the paper's {paper_value:.3g} would show here as {shows}, "
            f"{'above' if greater else 'below'} the whole interval"
            + (" (which clears the rule's bar)" if base == "holds" else "")
        )
    elif base == "holds":
        verdict, reason = "holds", ""
    elif base == "does not hold":
        verdict, reason = "does not hold", ""
    elif cannot:
        verdict = "not testable here"
        reason = (
            f"{ceiling_text}: even the paper's {paper_value:.3g} would show here only as "
            f"{shows}, not beyond the rule's {threshold:.3g}" + (f"; ours {ours}" if ours else "")
        )
    else:
        verdict, reason = "inconclusive", ""
    record = {
        "estimate": c_est,
        "interval": [c_low, c_high],
        "measured": [low, high],
        "paper_value": paper_value,
        "attenuated": attenuated,
        "rule_verdict": base,
        "reason": reason,
    }
    return verdict, record


# ---------------------------------------------------------------------------- groups
def combine_groups(pooled: str, group_verdicts: Sequence[str]) -> str:
    """``heterogeneous`` when the pooled verdict and the groups' include both "holds" and
    "does not hold" (a pooled "holds" with a group wholly on the wrong side, or a pooled
    "inconclusive" produced by cancellation); else the pooled verdict."""
    seen = {pooled, *group_verdicts}
    return "heterogeneous" if {"holds", "does not hold"} <= seen else pooled


def group_records(groups: Mapping, op: str, threshold) -> list[dict]:
    """Each group's estimate, interval and verdict under the pooled claim's rule."""
    if not isinstance(groups, Mapping) or len(groups) < 2:
        raise ValueError(
            "`groups` must map at least two group names to their lmsim.stats.Estimate "
            f"(each family, tower type, model or task pooled), got {groups!r}"
        )
    out = []
    for name, est in groups.items():
        if not isinstance(est, stats.Estimate):
            raise ValueError(
                f"`groups[{name!r}]` must be an lmsim.stats.Estimate, got {type(est).__name__}"
            )
        out.append(
            {
                "group": str(name),
                "estimate": est.estimate,
                "interval": [est.low, est.high],
                "level": est.level,
                "unit": est.unit,
                "n": est.n,
                "verdict": judge_op(est.interval, op, threshold),
            }
        )
    return out


def group_summary(groups: Sequence[Mapping]) -> str:
    """``"holds for A, B; does not hold for C"``: the groups by verdict."""
    by_verdict: dict[str, list[str]] = {}
    for g in groups:
        by_verdict.setdefault(g["verdict"], []).append(str(g["group"]))
    return "; ".join(f"{v} for {', '.join(names)}" for v, names in by_verdict.items())


# -------------------------------------------------------------------- families, power
def side_p_values(estimate, op: str, threshold, ceiling: Mapping | None = None):
    """One-sided p-values of (holds, does not hold) for an estimate under a rule."""
    if op == "within":
        a, b = threshold
        p_holds = max(stats.one_sided_p(estimate, a, "above"), _below(estimate, b))
        p_fails = min(_below(estimate, a), stats.one_sided_p(estimate, b, "above"))
    elif op in (">", ">="):
        p_holds = stats.one_sided_p(estimate, threshold, "above")
        p_fails = _below(estimate, threshold)
        if ceiling:
            p_fails = min(p_fails, _below(estimate, ceiling["attenuated"][0]))
    else:
        p_holds = _below(estimate, threshold)
        p_fails = stats.one_sided_p(estimate, threshold, "above")
        if ceiling:
            p_fails = min(p_fails, stats.one_sided_p(estimate, ceiling["attenuated"][1], "above"))
    return p_holds, p_fails


def _below(estimate, t: float) -> float:
    return 1.0 if math.isinf(t) else stats.one_sided_p(estimate, t, "below")


def adjust_family(members: Sequence[Mapping], name: str) -> list[dict]:
    """Holm-adjusted verdicts of a family: ``members`` hold each claim's ``verdict``,
    ``level`` and one-sided ``p_holds`` / ``p_fails``; returns each one's ``family``
    record (``verdict`` the adjusted one: "holds" or "does not hold" only when the
    unadjusted verdict says so and its Holm-adjusted p-value is at most ``(1 - level) /
    2``, else "inconclusive"; any other verdict is kept)."""
    adjusted_holds = stats.holm([m["p_holds"] for m in members])
    adjusted_fails = stats.holm([m["p_fails"] for m in members])
    out = []
    for m, p_h, p_f in zip(members, adjusted_holds, adjusted_fails):
        alpha = (1 - m["level"]) / 2
        verdict = m["verdict"]
        if verdict == "holds" and p_h > alpha:
            verdict = "inconclusive"
        elif verdict == "does not hold" and p_f > alpha:
            verdict = "inconclusive"
        p, p_adj = (
            (m["p_fails"], float(p_f))
            if m["verdict"] == "does not hold"
            else (m["p_holds"], float(p_h))
        )
        out.append(
            {
                "name": name,
                "size": len(members),
                "correction": "Holm",
                "alpha": alpha,
                "p_value": float(p),
                "p_adjusted": p_adj,
                "unadjusted_verdict": m["verdict"],
                "verdict": verdict,
            }
        )
    return out


# ------------------------------------------------------------- checks of executed pages
_NO_INTERVAL = ("not testable here", "not run")


def evidence_problems(record: Mapping, checklist: bool = True) -> list[str]:
    """What a claim record lacks to count as evidence (empty when nothing).

    Parameters
    ----------
    record : mapping
        A claim record as a page stores it (:meth:`Claim.record`).
    checklist : bool
        Ask what the checklist asks (``EVIDENCE.md``): a role on every record (sanity
        identities imply ``method``, ``control_of`` implies ``control``), ``groups`` on a
        pooled claim, ``mde`` with its note of what would settle it on an inconclusive
        one. False: only the interval form of pages not yet converted.

    Returns
    -------
    list of str
        Always checked: a reason for "not testable here" / "not run" and no interval on
        them; for a judged claim an interval of two finite numbers, ``estimate``,
        ``level``, ``unit``, ``rule`` and ``n``; the verdict follows from the interval and
        the rule (through the equivalence bounds, the ceiling, the groups and the family
        correction the record carries); an asserted claim holds.
    """
    problems = []
    role = record.get("role") or default_role(record.get("kind"), record.get("control_of"))
    if checklist and role not in ROLES:
        problems.append(f"no `role` (one of {ROLES})")
    if record.get("kind") == "sanity":
        return problems
    verdict, interval = record.get("verdict"), record.get("interval")
    if verdict in _NO_INTERVAL:
        if not (record.get("note") or "").strip():
            problems.append("no reason in `note`")
        if interval is not None:
            problems.append("an interval on a claim not judged")
        ceiling = record.get("ceiling")
        if ceiling and ceiling.get("measured") and record.get("rule"):
            op, threshold = parse_rule(record["rule"])
            again, _ = ceiling_verdict(
                ceiling["measured"], op, threshold, ceiling["paper_value"], ceiling
            )
            if again != verdict:
                problems.append(f"the ceiling rule gives {again!r}, not {verdict!r}")
        return problems
    if not (isinstance(interval, (list, tuple)) and len(interval) == 2):
        return [*problems, f"no interval (got {interval!r})"]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in interval):
        return [*problems, f"interval {list(interval)} is not two finite numbers"]
    missing = [f"no `{k}`" for k in ("estimate", "level", "unit", "rule") if record.get(k) is None]
    if record.get("n") is None and record.get("unit") != "none":
        missing.append("no `n` (how many units were resampled)")
    if missing:
        return problems + missing
    expected = _expected_verdict(record, problems, checklist)
    if expected is not None and expected != verdict:
        problems.append(
            f"verdict {verdict!r} does not follow from the record (expected {expected!r})"
        )
    if verdict == "inconclusive" and checklist:
        mde = record.get("mde")
        if not (isinstance(mde, Mapping) and isinstance(mde.get("mde"), (int, float))):
            problems.append("inconclusive without `mde` (the smallest effect it could detect)")
        elif not (mde["mde"] > 0 and str(mde.get("settle") or "").strip()):
            problems.append("`mde` without a positive value and a note of what would settle it")
    if record.get("kind") == "asserted" and verdict != "holds":
        problems.append(f"asserted but {verdict!r}")
    return problems


def _expected_verdict(record: Mapping, problems: list[str], checklist: bool) -> str | None:
    rule = record["rule"]
    equivalence = record.get("equivalence")
    try:
        if equivalence:
            bounds = equivalence["bounds"]
            high = math.inf if bounds[1] is None else bounds[1]
            op, threshold = (">", bounds[0]) if math.isinf(high) else ("within", (bounds[0], high))
        else:
            op, threshold = parse_rule(rule)
    except (ValueError, KeyError, TypeError) as err:
        problems.append(f"rule {rule!r} cannot be read: {err}")
        return None
    verdict = judge_op(record["interval"], op, threshold)
    ceiling = record.get("ceiling")
    if ceiling:
        verdict, _ = ceiling_verdict(
            record["interval"], op, threshold, ceiling["paper_value"], ceiling
        )
    groups = record.get("groups")
    if checklist and record.get("pooled") and not (isinstance(groups, list) and len(groups) >= 2):
        problems.append("a pooled claim without `groups` (each group's estimate and verdict)")
    if isinstance(groups, list) and groups:
        for g in groups:
            if judge_op(g["interval"], op, threshold) != g["verdict"]:
                problems.append(f"group {g['group']!r}: verdict does not follow from its interval")
        verdict = combine_groups(verdict, [g["verdict"] for g in groups])
    family = record.get("family")
    if family:
        if family.get("unadjusted_verdict") != verdict:
            problems.append("the family's unadjusted verdict is not the rule's")
        verdict = family.get("verdict")
    return verdict
