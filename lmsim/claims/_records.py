"""Claim records, rules and verdicts, and the page-side :class:`Claims` with its table."""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from lmsim._dryrun import dry_run
from lmsim.stats import Estimate, Test

MIME_TYPE = "application/vnd.lmsim.claims+json"
GLUE_KEY = "claims"
KINDS = ("sanity", "asserted", "reported", "not run")
PAPER_KINDS = ("asserted", "reported", "not run")
VERDICTS = ("holds", "does not hold", "inconclusive", "not testable here", "not run")
SUBJECTS = ("pretrained", "zoo", "trained here")
_LEGACY_VERDICT = {True: "holds", False: "does not hold", None: "not run"}
_NO_INTERVAL = ("not testable here", "not run")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_COMPARE = re.compile(rf"^\s*(>=|<=|>|<)\s*({_NUMBER})\s*$")
_WITHIN = re.compile(rf"^\s*within\s*\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\]\s*$")
_AB = re.compile(r"^\s*A\s*(>=|<=|>|<)\s*B\s*$")


# ---------------------------------------------------------------------------- rules
def parse_rule(rule: str) -> tuple[str, float | tuple[float, float]]:
    """``(operator, threshold)`` of a rule string.

    ``">= 0.7"`` -> ``(">=", 0.7)``; ``"within [0.2, 0.4]"`` -> ``("within", (0.2, 0.4))``;
    ``"A > B"`` -> ``(">", 0.0)`` (the estimate is A - B).
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
    raise ValueError(
        f"`rule` {rule!r} is not understood; write '> t', '>= t', '< t', '<= t', "
        "'within [a, b]', or 'A > B' / 'A < B' for a difference A - B"
    )


def judge(interval: Sequence[float], rule: str) -> str:
    """The verdict of an interval under a rule: holds, does not hold or inconclusive.

    Parameters
    ----------
    interval : (low, high)
        ``[x, x]`` for an exact value.
    rule : str
        See :func:`parse_rule`.
    """
    low, high = (float(v) for v in interval)
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"`interval` must be finite with low <= high, got {interval!r}")
    op, t = parse_rule(rule)
    if op == "within":
        a, b = t
        if a <= low and high <= b:
            return "holds"
        return "does not hold" if high < a or low > b else "inconclusive"
    holds, fails = {
        ">": (low > t, high <= t),
        ">=": (low >= t, high < t),
        "<": (high < t, low >= t),
        "<=": (high <= t, low > t),
    }[op]
    return "holds" if holds else "does not hold" if fails else "inconclusive"


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

    def record(self) -> dict:
        """The JSON-ready record (tuples as lists)."""
        out = asdict(self)
        for key in ("interval", "values", "threshold"):
            if isinstance(out[key], tuple):
                out[key] = list(out[key])
        return out


def _null_record(null) -> dict | None:
    if null is None:
        return None
    if isinstance(null, (Estimate, Test)):
        return null.to_record()
    if isinstance(null, str):
        return {"what": null}
    if isinstance(null, Mapping):
        return json.loads(json.dumps(dict(null), default=float))
    raise ValueError(
        f"`null` must be an lmsim.stats Estimate (a chance floor), a Test, a dict or a "
        f"description, got {type(null).__name__}"
    )


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


def _fmt(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


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

    Examples
    --------
    >>> from lmsim import stats
    >>> claims = Claims("demo", "01_page")
    >>> claims.sanity("CKA of a layer with itself is 1", abs(1.0 - 1.0) < 1e-9)
    >>> claims.report("rho rises with T", estimate=stats.exact(0.08), rule="> 0")
    >>> [c.verdict for c in claims.records]
    ['holds', 'holds']
    """

    def __init__(self, chapter: str, page: str, digits: int = 3):
        self.chapter, self.page, self.digits = str(chapter), str(page), int(digits)
        self.records: list[Claim] = []

    def _add(self, claim: Claim) -> Claim:
        """Record ``claim``; the same text again is the same record (a cell run twice), else
        a ``ValueError``: a later record must not silently replace an earlier one."""
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
        self, claim, kind, holds, ours, paper, note, estimate, rule, null, subject, control_of
    ) -> Claim:
        if estimate is None:
            if rule is not None:
                raise ValueError(f"{claim!r}: a `rule` needs an `estimate` to judge")
            if holds is None:
                raise ValueError(
                    f"{claim!r}: pass `estimate=` (an lmsim.stats.Estimate) and `rule=`"
                )
            return Claim(
                claim, kind, _truth(holds, claim, "condition" if kind == "asserted" else "holds"),
                ours or "—", paper, note,
                subject=subject, control_of=control_of, null=_null_record(null),
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
        op, threshold = parse_rule(rule)
        record = estimate.to_record()
        return Claim(
            claim,
            kind,
            None,
            ours or estimate.format(self.digits),
            paper,
            note,
            verdict=judge(estimate.interval, rule),
            rule=rule.strip(),
            threshold=threshold,
            null=_null_record(null),
            subject=subject,
            control_of=control_of,
            **{k: record[k] for k in ("estimate", "interval", "level", "unit", "n", "method", "sd", "values")},
        )  # fmt: skip

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
    ) -> Claim:
        """Assert a paper claim that must hold at every scale.

        With ``estimate`` and ``rule``, the whole interval must lie on the claimed side
        (verdict "holds"); otherwise the page fails with an ``AssertionError`` that gives
        the estimate, the interval and the rule. ``condition`` (a boolean, no interval)
        is the older form, kept for pages not yet converted. During a dry run
        (:mod:`lmsim._dryrun`: stand-in models and data) the verdict is recorded, never
        asserted.
        """
        made = self._add(
            self._judged(
                claim, "asserted", condition, ours, paper, note, estimate, rule, null,
                subject, control_of,
            )
        )  # fmt: skip
        if made.verdict != "holds" and not dry_run():  # stand-ins' numbers assert nothing
            detail = made.ours
            if made.interval is not None:
                detail = (
                    f"{made.estimate:.4g}, {made.level:.0%} interval [{made.interval[0]:.4g}, "
                    f"{made.interval[1]:.4g}] over {made.n} {made.unit}; rule {made.rule}: "
                    f"{made.verdict}"
                )
            raise AssertionError(
                f"paper claim asserted at every profile failed: {claim} ({detail})"
            )
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
    ) -> Claim:
        """Record a paper claim with its verdict at this scale, without asserting it.

        ``estimate`` (an :class:`~lmsim.stats.Estimate`) and ``rule`` give the verdict;
        ``holds`` (a boolean, no interval) is the older form.
        """
        return self._add(
            self._judged(
                claim, "reported", holds, ours, paper, note, estimate, rule, null, subject,
                control_of,
            )
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
    ) -> Claim:
        """Record a paper claim this page cannot decide, with the measured reason.

        ``note`` says why (e.g. "split-half reliability 0.12 [0.05, 0.20]: no cross-run
        correlation can exceed it"); ``measured``, an estimate behind that reason, is shown
        in ``ours`` (the record's ``interval`` stays null: there is no verdict to judge).
        """
        ours = measured.format(self.digits) if measured is not None else "—"
        return self._add(
            Claim(
                claim, "reported", None, ours, paper, note, verdict="not testable here",
                subject=subject, control_of=control_of,
            )
        )  # fmt: skip

    def not_run(self, claim: str, paper: str = "—", note: str = "") -> Claim:
        """Record a paper claim this profile does not attempt, and why (``note``)."""
        return self._add(Claim(claim, "not run", None, "—", paper, note or "not run here"))

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


def _glue_display(name: str, variable: Any, display: bool = True) -> None:
    """``myst_nb.glue(name, variable, display=True)`` without myst-nb (its 1.x format)."""
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    mimebundle, metadata = format_display_data(variable)
    metadata["scrapbook"] = {"name": name, "mime_prefix": ""}
    ipy_display(mimebundle, raw=True, metadata=metadata)


def _verdict_cell(c: Claim) -> str:
    kind = "" if c.kind in ("reported", "not run") else f"<br><small>{c.kind}</small>"
    return f"<b>{html.escape(c.verdict)}</b>{kind}"


def _ours_cell(c: Claim, digits: int) -> str:
    main = html.escape(c.ours if c.ours not in (None, "") else "—")
    if c.interval is None:
        return main
    text = (
        f"{_fmt(c.estimate, digits)} [{_fmt(c.interval[0], digits)}, {_fmt(c.interval[1], digits)}]"
    )
    if c.interval[0] == c.interval[1]:
        text = _fmt(c.estimate, digits)
    over = "exact" if c.unit == "none" else f"{c.level:.0%} over {c.n} {c.unit}"
    extra = f"<br><small>{main}</small>" if c.ours and c.ours != text else ""
    return f"{html.escape(text)}<br><small>{html.escape(over)}</small>{extra}"


def _rule_cell(c: Claim, digits: int) -> str:
    out = html.escape(c.rule or "—")
    null = c.null or {}
    if "estimate" in null and null.get("interval"):
        low, high = null["interval"]
        out += (
            f"<br><small>null {_fmt(null['estimate'], digits)} [{_fmt(low, digits)}, "
            f"{_fmt(high, digits)}]</small>"
        )
    elif "p_value" in null:
        out += f"<br><small>p = {null['p_value']:.3g}</small>"
    elif "what" in null:
        out += f"<br><small>{html.escape(str(null['what']))}</small>"
    return out


def claims_html(records: Sequence[Claim], digits: int = 3) -> str:
    """HTML table: claim (with its note), ours [interval], rule (and null), paper, verdict."""
    head = "".join(
        f"<th style='text-align:left'>{h}</th>"
        for h in ("claim", "ours [interval]", "rule", "paper", "verdict")
    )
    body = []
    for c in records:
        note = f"<br><small>{html.escape(c.note)}</small>" if c.note else ""
        subject = f" <small>({html.escape(c.subject)})</small>" if c.subject else ""
        cells = [
            f"{html.escape(c.claim)}{subject}{note}",
            _ours_cell(c, digits),
            _rule_cell(c, digits),
            html.escape(c.paper or "—"),
            _verdict_cell(c),
        ]
        body.append(
            "<tr>"
            + "".join(f"<td style='text-align:left;vertical-align:top'>{x}</td>" for x in cells)
            + "</tr>"
        )
    return (
        "<table class='lmsim-claims' style='width:100%;table-layout:auto'>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )
