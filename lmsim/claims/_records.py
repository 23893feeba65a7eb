"""Claim records, rules and verdicts, and the page-side :class:`Claims` with its table."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace

import pandas as pd

from lmsim import stats
from lmsim._dryrun import dry_run
from lmsim.claims._display import _glue_display, claims_html
from lmsim.claims._evidence import (
    adjust_family,
    ceiling_verdict,
    check_role,
    combine_groups,
    default_role,
    group_records,
    group_summary,
    side_p_values,
)
from lmsim.claims._rules import equivalence_threshold, judge_op, parse_rule
from lmsim.claims._tolerance import Tolerance, default_tolerance
from lmsim.stats import Estimate, Test

MIME_TYPE = "application/vnd.lmsim.claims+json"
GLUE_KEY = "claims"
KINDS = ("sanity", "asserted", "reported", "not run")
PAPER_KINDS = ("asserted", "reported", "not run")
VERDICTS = (
    "holds",
    "does not hold",
    "heterogeneous",
    "inconclusive",
    "not testable here",
    "not run",
)
SUBJECTS = ("pretrained", "zoo", "trained here")
_LEGACY_VERDICT = {True: "holds", False: "does not hold", None: "not run"}
_NO_INTERVAL = ("not testable here", "not run")


# --------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Claim:
    """One checked statement: the record a page stores and the landing pages read.

    Attributes
    ----------
    claim : str
        The statement, in the paper's terms.
    kind : {"sanity", "asserted", "reported", "not run"}
    holds : bool or None
        True when the verdict is "holds", False for "does not hold", else None (older
        records carry only this).
    ours : str
        Our number(s) as the reader should see them (the estimate with its interval by
        default).
    paper : str
        The paper's number or finding and where it is (``"0.913 (Table 2)"``), or "—".
    note : str
        Why it does (not) hold, what differs from the paper; the reason when not testable
        or not run.
    verdict : str
        One of :data:`VERDICTS`; derived from ``holds`` when not given.
    estimate, interval, level, unit, n, method, sd, values
        From the :class:`~lmsim.stats.Estimate` (``interval`` a ``[low, high]`` pair).
    rule : str or None
        What the estimate is judged by (``"> 0"``).
    threshold : float or [float, float] or None
        The rule's threshold.
    null : dict or None
        The null or chance floor the estimate is compared with (an estimate, a permutation
        test, or ``{"what": text}``).
    subject : {"pretrained", "zoo", "trained here"} or None
        What the claim was judged on.
    control_of : str or None
        For a control (the zoo's result beside a claim about pretrained models), the
        claim it accompanies; controls are counted apart.
    role : {"paper", "beyond", "method", "contrast", "control"} or None
        What the record is for (:data:`ROLES`): the tallies count ``paper`` claims only.
        Sanity identities are ``method`` and a record with ``control_of`` is a
        ``control`` unless told otherwise; records made before roles have None.
    pooled : str or None
        What a pooled claim pools over (``"model families"``); it then carries ``groups``.
    groups : list of dict or None
        Each group's ``group``, ``estimate``, ``interval``, ``level``, ``unit``, ``n`` and
        ``verdict`` under the same rule; the verdict is "heterogeneous" when the pooled and
        the groups' verdicts include both "holds" and "does not hold".
    mde : dict or None
        For an inconclusive claim, :meth:`lmsim.stats.Power.to_record`: the smallest
        effect the design detects with 80 % power and, in ``settle``, what would settle it.
    equivalence : dict or None
        For an equivalence rule, :meth:`lmsim.stats.Equivalence.to_record` (kind, margin,
        the absolute bounds, TOST p-values).
    ceiling : dict or None
        For a claim judged with a ceiling (:func:`~lmsim.claims._evidence.ceiling_verdict`):
        the ceiling, the paper value, the attenuated range, the rule's own verdict, the
        measured interval and the reason.
    family : dict or None
        For a member of a family of claims (:meth:`Claims.family`): its name and size, the
        correction (Holm), the p-value, the adjusted p-value, the unadjusted verdict and
        the adjusted one (which is ``verdict``).
    tolerance : dict or None
        How closely a re-execution elsewhere must agree
        (:class:`~lmsim.claims.Tolerance` as a record: exact, fixed, trained with its
        seed spread, or run); :class:`Claims` always sets it, records of older pages lack it.
    """

    claim: str
    kind: str
    holds: bool | None = None
    ours: str = "—"
    paper: str = "—"
    note: str = ""
    verdict: str | None = None
    estimate: float | None = None
    interval: tuple[float, float] | None = None
    level: float | None = None
    unit: str | None = None
    n: int | None = None
    method: str | None = None
    sd: float | None = None
    values: tuple[float, ...] | None = None
    rule: str | None = None
    threshold: float | tuple[float, float] | None = None
    null: dict | None = None
    subject: str | None = None
    control_of: str | None = None
    role: str | None = None
    pooled: str | None = None
    groups: list | None = None
    mde: dict | None = None
    equivalence: dict | None = None
    ceiling: dict | None = None
    family: dict | None = None
    tolerance: dict | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.claim, str) or not self.claim.strip():
            raise ValueError("`claim` must be a non-empty str")
        verdict = self.verdict
        if verdict is None:
            verdict = _LEGACY_VERDICT[None if self.holds is None else bool(self.holds)]
            object.__setattr__(self, "verdict", verdict)
        if verdict not in VERDICTS:
            raise ValueError(f"`verdict` must be one of {VERDICTS}, got {verdict!r}")
        holds = {"holds": True, "does not hold": False}.get(verdict)
        if self.holds is not None and bool(self.holds) != holds:
            raise ValueError(f"`holds`={self.holds!r} contradicts the verdict {verdict!r}")
        object.__setattr__(self, "holds", holds)
        if self.interval is not None:
            low, high = (float(v) for v in self.interval)
            if not (math.isfinite(low) and math.isfinite(high)) or low > high:
                raise ValueError(f"`interval` must be finite with low <= high, got {self.interval}")
            object.__setattr__(self, "interval", (low, high))
        if verdict in _NO_INTERVAL and self.interval is not None:
            raise ValueError(f"a claim that is {verdict!r} has no interval; say why in `note`")
        if self.subject is not None and self.subject not in SUBJECTS:
            raise ValueError(f"`subject` must be one of {SUBJECTS} or None, got {self.subject!r}")
        _check_evidence_fields(self)
        if isinstance(self.tolerance, Tolerance):
            object.__setattr__(self, "tolerance", self.tolerance.record())
        elif self.tolerance is not None:
            object.__setattr__(self, "tolerance", Tolerance.from_record(self.tolerance).record())

    def record(self) -> dict:
        """The JSON-ready record (tuples as lists)."""
        out = asdict(self)
        for key in ("interval", "values", "threshold"):
            if isinstance(out[key], tuple):
                out[key] = list(out[key])
        return out


def _check_evidence_fields(claim: Claim) -> None:
    check_role(claim.role)
    if claim.role is None and (role := default_role(claim.kind, claim.control_of)):
        object.__setattr__(claim, "role", role)
    if claim.groups is not None:
        object.__setattr__(claim, "groups", [dict(g) for g in claim.groups])
    if claim.pooled is not None and not (claim.groups and len(claim.groups) >= 2):
        raise ValueError(
            f"{claim.claim!r} pools over {claim.pooled}: pass `groups=` (each group's "
            "Estimate), so that no group pointing the other way is hidden"
        )
    if claim.verdict == "heterogeneous" and not claim.groups:
        raise ValueError(f"{claim.claim!r}: a 'heterogeneous' verdict needs its `groups`")


def _null_record(null) -> dict | None:
    if null is None:
        return None
    if isinstance(null, (Estimate, Test, stats.Null)):
        return null.to_record()
    if isinstance(null, str):
        return {"what": null}
    if isinstance(null, Mapping):
        return json.loads(json.dumps(dict(null), default=float))
    raise ValueError(
        f"`null` must be an lmsim.stats Estimate (a chance floor), a Test, a Null "
        f"(stats.pipeline_null), a dict or a description, got {type(null).__name__}"
    )


def _detail(made: Claim) -> str:
    """A claim with its estimate, interval, unit, rule and verdict, for an error."""
    detail = made.ours
    if made.interval is not None:
        detail = (
            f"{made.estimate:.4g}, {made.level:.0%} interval [{made.interval[0]:.4g}, "
            f"{made.interval[1]:.4g}] over {made.n} {made.unit}; rule {made.rule}: "
            f"{made.verdict}"
        )
    if made.groups:
        detail += f"; {group_summary(made.groups)}"
    return f"{made.claim} ({detail})"


def _truth(value, claim: str, name: str) -> bool:
    """``value`` as a verdict: True or False (Python, numpy, or a one-element bool tensor),
    never the truthiness of a number or a string (``NaN`` and ``'False'`` are truthy)."""
    item = value
    if not isinstance(value, bool) and hasattr(value, "dtype") and hasattr(value, "item"):
        size = value.numel() if hasattr(value, "numel") else getattr(value, "size", None)
        if size == 1 and "bool" in str(value.dtype):
            item = value.item()
    if isinstance(item, bool):
        return item
    raise ValueError(
        f"{claim!r}: `{name}` must be True or False (a comparison's result), got {value!r} "
        f"({type(value).__name__})"
    )


class Claims:
    """The claims of one page, shown as a table whose output carries the records.

    Parameters
    ----------
    chapter : str
        The chapter slug (``"zhang2022_lmd"``).
    page : str
        The notebook's name (``"01_decomposition"``).
    digits : int
        Decimals of the displayed estimates.
    trains : bool
        Every claim of the page rests on models the page trains (probes or fine-tunes on a
        pretrained model's features), whatever its ``subject``: their tolerance is
        ``trained`` (see :func:`~lmsim.claims.default_tolerance`). A claim's own
        ``tolerance=`` wins.

    Examples
    --------
    >>> from lmsim import stats
    >>> claims = Claims("demo", "01_page")
    >>> claims.sanity("CKA of a layer with itself is 1", abs(1.0 - 1.0) < 1e-9)
    >>> _ = claims.report("rho rises with T", estimate=stats.exact(0.08), rule="> 0", role="paper")
    >>> [c.verdict for c in claims.records]
    ['holds', 'holds']
    """

    def __init__(self, chapter: str, page: str, digits: int = 3, trains: bool = False):
        self.chapter, self.page, self.digits = str(chapter), str(page), int(digits)
        self.trains = bool(trains)
        self.records: list[Claim] = []
        self._family: dict | None = None

    def _add(self, claim: Claim, tolerance: Tolerance | None = None) -> Claim:
        """Record ``claim`` with its tolerance: the one given, else :func:`default_tolerance`
        of its kind, subject, unit and values. The same text again is the same record (a
        cell run twice), else a ``ValueError``: a later record must not silently replace an
        earlier one."""
        if tolerance is None and claim.tolerance is None:
            tolerance = default_tolerance(
                claim.kind, claim.subject, claim.unit, claim.values, self.trains
            )
        if tolerance is not None:
            claim = replace(claim, tolerance=tolerance.record())
        for earlier in self.records:
            if earlier.claim == claim.claim and earlier != claim:
                raise ValueError(
                    f"claim {claim.claim!r} is already recorded on this page with another "
                    f"result ({earlier.verdict}: {earlier.ours}; now {claim.verdict}: "
                    f"{claim.ours}); give each claim its own text"
                )
        self.records = [c for c in self.records if c.claim != claim.claim] + [claim]
        return claim

    def sanity(self, claim: str, condition, ours: str = "—", note: str = "") -> None:
        """Assert an identity that holds by construction (fails the page when broken)."""
        holds = _truth(condition, claim, "condition")
        self._add(Claim(claim, "sanity", holds, ours, "—", note))
        if not holds:
            raise AssertionError(f"sanity identity broken: {claim} ({ours})")

    def _judged(
        self, claim, kind, holds, ours, paper, note, estimate, rule, null, subject, control_of,
        *, role=None, groups=None, pooled=None, reference=None, ceiling=None, paper_value=None,
        costs=None,
    ) -> Claim:  # fmt: skip
        if estimate is None:
            if rule is not None:
                raise ValueError(f"{claim!r}: a `rule` needs an `estimate` to judge")
            if holds is None:
                raise ValueError(
                    f"{claim!r}: pass `estimate=` (an lmsim.stats.Estimate) and `rule=`"
                )
            if any(v is not None for v in (groups, pooled, reference, ceiling, paper_value)):
                raise ValueError(
                    f"{claim!r}: `groups`, `pooled`, `reference`, `ceiling` and `paper_value` "
                    "need an `estimate` and a `rule`"
                )
            return Claim(
                claim, kind, _truth(holds, claim, "condition" if kind == "asserted" else "holds"),
                ours or "—", paper, note, subject=subject, control_of=control_of,
                null=_null_record(null), role=role,
            )  # fmt: skip
        if holds is not None:
            raise ValueError(
                f"{claim!r}: give `estimate` and `rule`, not `holds`: the verdict follows"
            )
        if not isinstance(estimate, Estimate):
            raise ValueError(
                f"{claim!r}: `estimate` must be an lmsim.stats.Estimate (e.g. stats.bootstrap"
                f"(...), or stats.exact(value) for a count), got {type(estimate).__name__}"
            )
        if rule is None:
            raise ValueError(f"{claim!r}: an estimate needs a `rule` such as '> 0' to be judged")
        op, threshold = parse_rule(rule, reference)
        verdict = judge_op(estimate.interval, op, threshold)
        equivalence = None
        if (margin := equivalence_threshold(rule, reference)) is not None:
            kind_of, size, relative = margin[2]
            ref = reference.estimate if isinstance(reference, Estimate) else reference
            equivalence = stats.tost(
                estimate, size, kind_of, relative=relative, reference=ref
            ).to_record()
        elif reference is not None:
            raise ValueError(f"{claim!r}: `reference` is for a relative margin ('within ±1%')")
        ceiling_record = None
        if (ceiling is None) != (paper_value is None):
            raise ValueError(
                f"{claim!r}: pass `ceiling` (the reliability bound) and `paper_value` (the "
                "paper's value before attenuation) together"
            )
        if ceiling is not None:
            shown = estimate.format(self.digits)
            verdict, ceiling_record = ceiling_verdict(
                estimate.interval, op, threshold, paper_value, ceiling, shown
            )
            if ceiling_record["reason"]:
                note = f"{note.rstrip()} ({ceiling_record['reason']})" if note.strip() else (
                    ceiling_record["reason"]
                )  # fmt: skip
        group_list = None
        if groups is not None:
            group_list = group_records(groups, op, threshold)
            verdict = combine_groups(verdict, [g["verdict"] for g in group_list])
            pooled = pooled or "groups"
        elif pooled is not None:
            raise ValueError(
                f"{claim!r} pools over {pooled}: pass `groups=` (each group's Estimate)"
            )
        power = None
        if estimate.high > estimate.low:
            power = stats.power_note(estimate, threshold, costs=costs)
        if self._family is not None:
            p_holds, p_fails = side_p_values(estimate, op, threshold, ceiling_record)
            self._family["members"][claim] = {
                "p_holds": p_holds, "p_fails": p_fails, "level": estimate.level, "power": power,
            }  # fmt: skip
        record = estimate.to_record()
        fields = ("estimate", "interval", "level", "unit", "n", "method", "sd", "values")
        values = {k: record[k] for k in fields}
        if verdict == "not testable here":
            values["interval"] = None
        return Claim(
            claim,
            kind,
            None,
            ours or estimate.format(self.digits),
            paper,
            note,
            verdict=verdict,
            rule=rule.strip(),
            threshold=threshold,
            null=_null_record(null),
            subject=subject,
            control_of=control_of,
            role=role,
            pooled=pooled,
            groups=group_list,
            mde=power.to_record() if verdict == "inconclusive" and power else None,
            equivalence=equivalence,
            ceiling=ceiling_record,
            **values,
        )

    def check(
        self,
        claim: str,
        condition=None,
        ours: str | None = None,
        paper: str = "—",
        note: str = "",
        *,
        estimate: Estimate | None = None,
        rule: str | None = None,
        null=None,
        subject: str | None = None,
        control_of: str | None = None,
        role: str | None = None,
        groups: Mapping[str, Estimate] | None = None,
        pooled: str | None = None,
        reference=None,
        ceiling=None,
        paper_value: float | None = None,
        costs: Mapping[str, str] | None = None,
        tolerance: Tolerance | None = None,
    ) -> Claim:
        """Assert a claim that must hold at every scale.

        With ``estimate`` and ``rule``, the whole interval must lie on the claimed side
        (verdict "holds"); otherwise the page fails with an ``AssertionError`` that gives
        the estimate, the interval and the rule. ``condition`` (a boolean, no interval)
        is the older form, kept for pages not yet converted. During a dry run
        (:mod:`lmsim._dryrun`: stand-in models and data) the verdict is recorded, never
        asserted. The keyword arguments are those of :meth:`report`.
        """
        made = self._add(
            self._judged(
                claim, "asserted", condition, ours, paper, note, estimate, rule, null,
                subject, control_of, role=role, groups=groups, pooled=pooled,
                reference=reference, ceiling=ceiling, paper_value=paper_value, costs=costs,
            ),
            tolerance,
        )  # fmt: skip
        if made.verdict != "holds" and not dry_run():  # stand-ins' numbers assert nothing
            raise AssertionError(f"claim asserted at every profile failed: {_detail(made)}")
        return made

    def report(
        self,
        claim: str,
        holds=None,
        ours: str | None = None,
        paper: str = "—",
        note: str = "",
        *,
        estimate: Estimate | None = None,
        rule: str | None = None,
        null=None,
        subject: str | None = None,
        control_of: str | None = None,
        role: str | None = None,
        groups: Mapping[str, Estimate] | None = None,
        pooled: str | None = None,
        reference=None,
        ceiling=None,
        paper_value: float | None = None,
        costs: Mapping[str, str] | None = None,
        tolerance: Tolerance | None = None,
    ) -> Claim:
        """Record a claim with its verdict at this scale, without asserting it.

        ``estimate`` (an :class:`~lmsim.stats.Estimate`) and ``rule`` give the verdict;
        ``holds`` (a boolean, no interval) is the older form.

        Parameters
        ----------
        claim : str
            The statement, in the paper's terms.
        holds : bool, optional
            The older form (no interval).
        ours, paper, note : str
            Our number(s) as shown (the estimate with its interval by default), the
            paper's value and where it is, why it does (not) hold.
        estimate : Estimate
        rule : str
            See :func:`parse_rule`: a comparison, a range, or an equivalence margin
            (``"within ±0.02"``, ``"no worse than 1%"``, ``"stable within ±0.01"``; the
            verdict holds only when the whole interval is inside the margin, and the
            record carries the TOST p-values in ``equivalence``).
        null : Estimate, Test, Null, dict or str, optional
            The null the rule's threshold comes from (:func:`lmsim.stats.pipeline_null`).
        subject : {"pretrained", "zoo", "trained here"}, optional
        control_of : str, optional
            The claim this record accompanies as a control.
        role : {"paper", "beyond", "method", "contrast", "control"}
            What the record is for; the tallies count ``paper`` claims only. Required on
            converted pages (``tests/test_claims_pages.py``).
        groups : mapping of str to Estimate, optional
            For a pooled claim: each group's estimate (families, tower types, models,
            tasks), judged by the same rule. The verdict is "heterogeneous" when the pooled
            and the groups' verdicts include both "holds" and "does not hold".
        pooled : str, optional
            What the claim pools over (``"model families"``); "groups" by default.
        reference : float or Estimate, optional
            What a relative margin is a fraction of (the baseline's value).
        ceiling : Estimate or float, optional
            A reliability ceiling that attenuates the measured quantity
            (:attr:`lmsim.stats.CrossFit.ceiling`); with ``paper_value`` the symmetric
            ceiling rule decides (:func:`lmsim.claims._evidence.ceiling_verdict`): "not
            testable here" when even the attenuated paper value would not clear the rule,
            "does not hold" when the interval lies wholly beyond the attenuated paper value.
        paper_value : float, optional
            The paper's value for this exact setting, before attenuation.
        costs : mapping of str to str, optional
            The cost of one more unit of each variance component, for the note of what
            would settle an inconclusive claim (``{"seeds": "40 min each"}``).
        tolerance : Tolerance, optional
            How closely a re-execution elsewhere must agree (``--verify``); by default
            :func:`~lmsim.claims.default_tolerance` of the claim's kind, subject, unit and
            values, and the page's ``trains``.

        Returns
        -------
        Claim
            An inconclusive claim carries ``mde`` (:func:`lmsim.stats.power_note`).
        """
        return self._add(
            self._judged(
                claim, "reported", holds, ours, paper, note, estimate, rule, null, subject,
                control_of, role=role, groups=groups, pooled=pooled, reference=reference,
                ceiling=ceiling, paper_value=paper_value, costs=costs,
            ),
            tolerance,
        )  # fmt: skip

    def not_testable(
        self,
        claim: str,
        note: str,
        paper: str = "—",
        *,
        subject: str | None = None,
        control_of: str | None = None,
        measured: Estimate | None = None,
        role: str | None = None,
        tolerance: Tolerance | None = None,
    ) -> Claim:
        """Record a claim this page cannot decide, with the measured reason.

        ``note`` says why (e.g. "split-half reliability 0.12 [0.05, 0.20]: no cross-run
        correlation can exceed it"); ``measured``, an estimate behind that reason, is shown
        in ``ours`` (the record's ``interval`` stays null: there is no verdict to judge).
        Where the reason is a ceiling, prefer :meth:`report` with ``ceiling`` and
        ``paper_value``: the same rule then also says "does not hold" when it should.
        """
        ours = measured.format(self.digits) if measured is not None else "—"
        return self._add(
            Claim(
                claim, "reported", None, ours, paper, note, verdict="not testable here",
                subject=subject, control_of=control_of, role=role,
            ),
            tolerance,
        )  # fmt: skip

    def not_run(
        self, claim: str, paper: str = "—", note: str = "", *, role: str | None = None
    ) -> Claim:
        """Record a claim this profile does not attempt, and why (``note``)."""
        return self._add(
            Claim(claim, "not run", None, "—", paper, note or "not run here", role=role)
        )

    @contextmanager
    def family(self, name: str) -> Iterator[None]:
        """Judge the claims recorded inside the block as one family, Holm-corrected.

        Seventeen POS tags or five thresholds are one family: each member's verdict is
        adjusted (:func:`lmsim.stats.holm` over the one-sided p-values of "holds" and of
        "does not hold", at the interval's one-sided level), and its record carries
        ``family`` (name, size, correction, p-value, adjusted p-value, unadjusted and
        adjusted verdict). A member only loses a verdict ("holds" becomes "inconclusive"
        when its adjusted p-value is too large), never gains one. An asserted member that
        no longer holds fails the page at the end of the block.

        Examples
        --------
        >>> from lmsim import stats
        >>> claims = Claims("demo", "01_page")
        >>> with claims.family("two tags"):
        ...     for tag, est in {"NOUN": stats.exact(0.2), "VERB": stats.exact(0.1)}.items():
        ...         _ = claims.report(f"{tag} leans left", estimate=est, rule="> 0", role="paper")
        >>> [c.family["correction"] for c in claims.records]
        ['Holm', 'Holm']
        """
        if self._family is not None:
            raise ValueError(f"family {name!r} inside family {self._family['name']!r}: no nesting")
        self._family = {"name": str(name), "members": {}}
        try:
            yield
            members = self._family["members"]
        finally:
            self._family = None
        self._adjust_family(str(name), members)

    def _adjust_family(self, name: str, members: dict) -> None:
        index = {c.claim: i for i, c in enumerate(self.records)}
        named = [c for c in members if c in index and self.records[index[c]].interval is not None]
        if not named:
            return
        rows = [{**members[c], "verdict": self.records[index[c]].verdict} for c in named]
        failed = []
        for claim, family in zip(named, adjust_family(rows, name)):
            old = self.records[index[claim]]
            mde, power = old.mde, members[claim]["power"]
            if family["verdict"] == "inconclusive" and mde is None and power is not None:
                mde = power.to_record()
            new = replace(old, holds=None, verdict=family["verdict"], family=family, mde=mde)
            self.records[index[claim]] = new
            if new.kind == "asserted" and new.verdict != "holds":
                failed.append(new)
        if failed and not dry_run():
            raise AssertionError(
                f"claims asserted at every profile failed after Holm's correction in family "
                f"{name!r}: " + "; ".join(_detail(c) for c in failed)
            )

    # ------------------------------------------------------------------ display
    def table(self) -> pd.DataFrame:
        """One row per claim: claim, kind, ours, rule, paper, verdict, note."""
        columns = ["claim", "kind", "ours", "rule", "paper", "verdict", "note"]
        rows = [{k: getattr(c, k) or "—" for k in columns} for c in self.records]
        for row, c in zip(rows, self.records):
            row["note"] = c.note
        return pd.DataFrame(rows, columns=columns)

    def _payload(self) -> dict:
        return {
            "chapter": self.chapter,
            "page": self.page,
            "format": 2,
            "claims": [c.record() for c in self.records],
        }

    def html(self) -> str:
        """The claims as an HTML table of five columns that fits the book's width."""
        return claims_html(self.records, self.digits)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {
            "text/html": self.html(),
            "text/plain": self.table().to_string(index=False),
            MIME_TYPE: self._payload(),
        }

    def glue(self, key: str = GLUE_KEY) -> None:
        """Display the claims and glue them under ``key`` (myst-nb), so that a markdown
        cell near the top of the page can paste them: ``{glue} claims`` in a directive
        fence. The display carries the records as before (:func:`collect` reads it).

        Without myst-nb (a machine that executes pages but builds no book, such as a GPU
        machine) the same output is written as ``myst_nb.glue(key, self, display=True)``
        writes it: the display data with ``{"scrapbook": {"name": key, "mime_prefix": ""}}``
        in its metadata, which the book build reads."""
        try:
            from myst_nb import glue
        except ImportError:
            glue = _glue_display
        glue(key, self, display=True)
