"""The claims' HTML table and the glue display (what a page shows of its records)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from lmsim.claims._evidence import group_summary

Claim = Any  # a lmsim.claims.Claim (not imported: _records imports this module)


def _fmt(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def _glue_display(name: str, variable: Any, display: bool = True) -> None:
    """``myst_nb.glue(name, variable, display=True)`` without myst-nb (its 1.x format)."""
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    mimebundle, metadata = format_display_data(variable)
    metadata["scrapbook"] = {"name": name, "mime_prefix": ""}
    ipy_display(mimebundle, raw=True, metadata=metadata)


def verdict_details(c) -> list[str]:
    """What qualifies a verdict, one short phrase each: the groups by verdict, the family
    correction, the equivalence margin, the ceiling and, for an inconclusive claim, its
    minimum detectable effect. ``c`` a :class:`Claim` or a row of :func:`collect`."""
    out = []
    groups = getattr(c, "groups", None)
    if isinstance(groups, list) and groups:
        out.append(group_summary(groups))
    family = getattr(c, "family", None)
    if isinstance(family, Mapping):
        out.append(
            f"Holm over {family['size']} ({family['name']}): p {family['p_adjusted']:.2g}"
            + (
                f", unadjusted {family['unadjusted_verdict']}"
                if family["unadjusted_verdict"] != family["verdict"]
                else ""
            )
        )
    equivalence = getattr(c, "equivalence", None)
    if isinstance(equivalence, Mapping):
        low, high = equivalence["bounds"]
        region = f"> {low:.3g}" if high is None else f"[{low:.3g}, {high:.3g}]"
        out.append(f"TOST: inside {region}, p {equivalence['p_value']:.2g}")
    mde = getattr(c, "mde", None)
    if isinstance(mde, Mapping) and getattr(c, "verdict", None) == "inconclusive":
        out.append(f"mde {mde['mde']:.3g}")
    return out


def _verdict_cell(c: Claim) -> str:
    tags = [t for t in (c.kind, c.role) if t not in ("reported", "not run", "paper", None)]
    small = "".join(f"<br><small>{html.escape(t)}</small>" for t in [*tags, *verdict_details(c)])
    return f"<b>{html.escape(c.verdict)}</b>{small}"


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
