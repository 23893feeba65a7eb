"""Reading claim records back from executed pages, and the landing pages' tables."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, fields
from pathlib import Path

import pandas as pd

from lmsim.claims._display import _fmt, verdict_details
from lmsim.claims._evidence import COUNTED_ROLE, effective_role
from lmsim.claims._records import KINDS, MIME_TYPE, PAPER_KINDS, VERDICTS, Claim

_COLUMNS = ["chapter", "page", *(f.name for f in fields(Claim))]

#: The sections of a chapter's ``_results.md``: (title, roles, what the title says).
SECTIONS = (
    ("Paper claims", ("paper",), "what the paper says; the chapter's tallies count these"),
    ("Beyond the paper", ("beyond",), "our own questions; not counted"),
    ("Method checks", ("method",), "that our method works, whatever their verdict; not counted"),
    ("Controls and contrasts", ("control", "contrast"), "not counted"),
)
#: The section of a chapter's ``_results.md`` that lists withdrawn pages' records.
WITHDRAWN_TITLE = "Withdrawn pages"
#: What the tallies call each group of roles outside ``paper``.
ROLE_COUNTS = {"beyond": ("beyond",), "method": ("method",), "controls": ("control", "contrast")}


def _records_of(nb: dict) -> Iterable[dict]:
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = output.get("data", {})
            if MIME_TYPE in data:
                payload = data[MIME_TYPE]
                if isinstance(payload, str):  # nbformat may store JSON mime data as text
                    payload = json.loads(payload)
                yield payload


def collect(pages: Iterable[str | Path | dict]) -> pd.DataFrame:
    """Claims recorded in executed notebooks (the last record of each page wins).

    Reads both record formats: older pages' records (``holds`` only) get the verdict it
    implies and empty interval fields.

    Parameters
    ----------
    pages : iterable of path or dict
        Executed ``.ipynb`` files, or notebooks already read (their JSON as a dict).

    Returns
    -------
    DataFrame
        Columns chapter, page (the executed page's name from its provenance, else the name
        the claims were recorded under) and every field of :class:`Claim`; pages without
        records contribute nothing.
    """
    rows = []
    known = {f.name for f in fields(Claim)}
    for page in pages:
        nb = page if isinstance(page, dict) else json.loads(Path(page).read_text())
        payloads = list(_records_of(nb))
        if payloads:
            last = payloads[-1]
            # A page that runs another page's source notebook records the source's name;
            # the runner's provenance names the page itself.
            info = nb.get("metadata", {}).get("lmsim", {})
            page_name = str(info.get("page") or "").rsplit("/", 1)[-1] or last["page"]
            for record in last["claims"]:
                claim = Claim(**{k: v for k, v in record.items() if k in known})
                rows.append({"chapter": last["chapter"], "page": page_name, **asdict(claim)})
    return pd.DataFrame(rows, columns=_COLUMNS)


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return "—"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _ours_text(row, digits: int = 3) -> str:
    interval = row.interval
    if isinstance(interval, (list, tuple)) and len(interval) == 2:
        low, high = interval
        if low == high:
            return _fmt(row.estimate, digits)
        return f"{_fmt(row.estimate, digits)} [{_fmt(low, digits)}, {_fmt(high, digits)}]"
    return _cell(row.ours)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip(" ,;") + "…"


# A note's first sentence ends at ". " or "; ", not after an abbreviation ("Jin et al. 2023",
# "e.g. the drug set", "Fig. 6"), which would drop what follows (the seeds' note).
_SENTENCE_END = re.compile(
    r"(?<!\bal\.)(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<!\bcf\.)(?<!\bFig\.)(?<!\bFigs\.)"
    r"(?<!\bEq\.)(?<!\bSec\.)(?<!\bApp\.)(?<!\bTab\.)(?<!\bNo\.)(?<=[.;])\s"
)


def _one_line(text, limit: int = 140) -> str:
    first = _SENTENCE_END.split(_cell(text), maxsplit=1)[0]
    return _short(first.rstrip(";,: ") or "—", limit)


def _is_control(records: pd.DataFrame) -> pd.Series:
    return records["control_of"].notna() & (records["control_of"] != "")


def roles(records: pd.DataFrame) -> pd.Series:
    """Each record's role (:func:`lmsim.claims._evidence.effective_role`: records made
    before roles count as they did: controls by ``control_of``, sanity as method checks,
    the rest as paper claims)."""
    if records.empty:
        return pd.Series([], index=records.index, dtype=object)
    return records.apply(lambda row: effective_role(row.to_dict()), axis=1)


def chapter_counts(records: pd.DataFrame) -> dict[str, int]:
    """The ``paper`` claims per verdict, then how many other records each role has.

    Returns
    -------
    dict
        One count per verdict of :data:`VERDICTS` over the paper claims (sanity
        identities never count), then ``"beyond"``, ``"method"`` and ``"controls"``
        (controls and contrasts): the claims of those roles, not counted in the verdicts.
    """
    shown = records[records["kind"].isin(PAPER_KINDS)]
    role = roles(shown)
    paper = shown[role == COUNTED_ROLE]
    counts = {v: int((paper["verdict"] == v).sum()) for v in VERDICTS}
    for name, members in ROLE_COUNTS.items():
        counts[name] = int(role.isin(members).sum())
    return counts


def _verdict_text(row) -> str:
    reasons = [r for r in (_one_line(row.note), *verdict_details(row)) if r and r != "—"]
    return f"**{row.verdict}**" + (f" ({'; '.join(reasons)})" if reasons else "")


def _table(rows: pd.DataFrame, beside: bool = False) -> list[str]:
    """Rows of claims; ``beside``: each claim prefixed with its role (control, contrast)."""
    lines = [
        "| claim | page | ours [95 % interval] | paper | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row, role in zip(rows.itertuples(index=False), roles(rows)):
        subject = f" ({row.subject})" if isinstance(row.subject, str) and row.subject else ""
        lines.append(
            f"| {f'{role}: ' if beside else ''}{_cell(row.claim)}{subject} | "
            f"{_cell(row.page)} | {_ours_text(row)} | {_cell(row.paper)} | "
            f"{_verdict_text(row)} |"
        )
    return lines


def chapter_markdown(records: pd.DataFrame) -> str:
    """A chapter's ``_results.md``: its claims by role, one table per role.

    Sections (:data:`SECTIONS`), each only when it has records: **Paper claims** (the
    claims the tallies count), **Beyond the paper**, **Method checks** (whatever their
    verdict), **Controls and contrasts** (each prefixed with its role). Sanity
    identities are left out (the pages show them). Each section opens with a line
    ``**<title>** (<count>; <what it is>)``.
    """
    shown = records[records["kind"] != "sanity"]
    if shown.empty:
        return "_No claims recorded yet: run `make book`._\n"
    role = roles(shown)
    out = []
    for title, members, what in SECTIONS:
        rows = shown[role.isin(members)]
        if len(rows):
            out += [f"**{title}** ({len(rows)}; {what})", ""]
            out += _table(rows, beside=title == SECTIONS[-1][0]) + [""]
    return "\n".join(out)


def withdrawn_markdown(records: pd.DataFrame, reasons: Mapping[str, str]) -> str:
    """The claims of withdrawn pages, listed apart and counted nowhere.

    One section ``**Withdrawn pages** (<count>; ...)``, each page's reason, then the
    page's non-sanity records in one table (their verdicts as recorded, not counted in
    any tally). Empty when no page is withdrawn or none has records.

    Parameters
    ----------
    records : DataFrame
        :func:`collect` of the withdrawn pages.
    reasons : mapping of page name to str
        Why each page is withdrawn (``withdrawn:`` in ``notebooks/runs.yml``).
    """
    shown = records[records["kind"] != "sanity"]
    if shown.empty:
        return ""
    out = [
        "",
        f"**{WITHDRAWN_TITLE}** ({len(shown)}; verdicts withdrawn by the page's notice; "
        "not counted in any tally)",
        "",
    ]
    for page in dict.fromkeys(shown["page"]):
        out.append(f"- `{page}`: {_cell(reasons.get(page, 'withdrawn'))}")
    out += ["", *_table(shown, beside=True), ""]
    return "\n".join(out)


def results_markdown(records: pd.DataFrame, kinds: Iterable[str] = KINDS) -> str:
    """A markdown table of claim records (one row per claim), for a chapter's landing page.

    Columns: claim (with what it was judged on), page, ours with its interval, paper,
    verdict (and the note's first sentence). A control follows the claim it accompanies,
    marked "control".
    """
    kinds = tuple(kinds)
    shown = records[records["kind"].isin(kinds)]
    if shown.empty:
        return "_No claims recorded yet: run `make book`._\n"
    controls = _is_control(shown)
    order = []
    for index, row in shown[~controls].iterrows():
        order.append(index)
        order += list(shown.index[controls & (shown["control_of"] == row["claim"])])
    order += [i for i in shown.index if i not in order]  # controls of claims not shown
    lines = [
        "| claim | page | ours [95 % interval] | paper | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in shown.loc[order].itertuples(index=False):
        subject = f" ({row.subject})" if isinstance(row.subject, str) and row.subject else ""
        prefix = "↳ control: " if isinstance(row.control_of, str) and row.control_of else ""
        note = _one_line(row.note)
        reason = f" ({note})" if note != "—" else ""
        lines.append(
            f"| {prefix}{_cell(row.claim)}{subject} | {_cell(row.page)} | {_ours_text(row)} | "
            f"{_cell(row.paper)} | **{row.verdict}**{reason} |"
        )
    return "\n".join(lines) + "\n"


def failing_markdown(records: pd.DataFrame) -> str:
    """The paper claims that do not hold or hold only for some groups (other roles left
    out), one line each: claim, paper, ours with interval, verdict, a one-line reason (the
    page has the rest)."""
    paper = records[records["kind"].isin(("asserted", "reported"))]
    paper = paper[roles(paper) == COUNTED_ROLE]
    failing = paper[paper["verdict"].isin(("does not hold", "heterogeneous"))]
    if failing.empty:
        return ""
    lines = [
        "| claim | paper | ours [95 % interval] | verdict | why |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in failing.itertuples(index=False):
        lines.append(
            f"| {_cell(row.claim)} ({_cell(row.chapter)}/{_cell(row.page)}) | "
            f"{_short(_cell(row.paper), 100)} | {_short(_ours_text(row), 100)} | "
            f"**{row.verdict}** | {'; '.join([_one_line(row.note), *verdict_details(row)])} |"
        )
    return "\n".join(lines) + "\n"


def overview_markdown(chapters: Sequence[tuple[str, str, pd.DataFrame]]) -> str:
    """The introduction's results: per chapter the paper claims' verdict counts (and the
    other roles' numbers beside them), then the paper claims that do not hold.

    Parameters
    ----------
    chapters : sequence of (title, slug, records)
        ``records`` as returned by :func:`collect` for the chapter's executed pages.
    """
    rows = []
    for title, slug, records in chapters:
        counts = chapter_counts(records)
        if sum(counts.values()):
            rows.append(
                f"| {{doc}}`{title} </book/{slug}/index>` | "
                + " | ".join(str(counts[v]) for v in (*VERDICTS, *ROLE_COUNTS))
                + " |"
            )
    if not rows:
        return "_No claim records in the executed pages yet: run `make book`._\n"
    lines = [
        "| Chapter | hold | do not hold | heterogeneous | inconclusive | not testable here | "
        "not run | beyond the paper | method checks | controls and contrasts |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]
    failing = failing_markdown(pd.concat([records for _, _, records in chapters]))
    if failing:
        lines += [
            "Paper claims that do **not** hold (or hold only for some groups) under the "
            "profile their page was executed "
            "with (the default profile; pages named `_gpu` ran the `gpu` profile on one GPU), "
            "and why (each page explains at length):",
            "",
            failing,
        ]
    return "\n".join(lines) + "\n"
