"""Claim records: what each page checked, in words and numbers, machine-readable.

Every chapter separates three kinds of statement (see the brief's *Claims* standard):

``sanity``
    Identities that hold by construction (a layer's CKA with itself is 1). Asserted, so a
    bug fails the page, but never presented as a finding.
``asserted``
    Paper claims that must hold at every scale (a distilled student depends on its teacher
    more than on an unrelated model). Asserted.
``reported``
    Paper claims that may or may not hold at this profile's scale: recorded as holds /
    does not hold with our numbers, the paper's, and a plausible reason.
``not run``
    A paper claim this profile cannot test (no model, no data offline), with why.

A page collects its claims in a :class:`Claims` and shows it as its last claim cell. The
displayed output carries the records under :data:`MIME_TYPE` beside an HTML table, so the
book's landing pages are generated from the executed pages (:func:`collect`,
:func:`results_markdown`) and never drift from them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

__all__ = ["MIME_TYPE", "KINDS", "Claim", "Claims", "collect", "results_markdown"]

MIME_TYPE = "application/vnd.lmsim.claims+json"
KINDS = ("sanity", "asserted", "reported", "not run")
_VERDICT = {True: "holds", False: "does not hold", None: "not run here"}


@dataclass(frozen=True)
class Claim:
    """One checked statement.

    Attributes
    ----------
    claim : str
        The statement, in the paper's terms.
    kind : {"sanity", "asserted", "reported", "not run"}
    holds : bool or None
        None when not run.
    ours : str
        Our number(s), formatted for the reader.
    paper : str
        The paper's number or finding and where it is (``"0.913 (Table 2)"``), or "—".
    note : str
        What differs from the paper's setting, or why it does not hold here.
    """

    claim: str
    kind: str
    holds: bool | None
    ours: str = "—"
    paper: str = "—"
    note: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.claim, str) or not self.claim.strip():
            raise ValueError("`claim` must be a non-empty str")

    @property
    def verdict(self) -> str:
        return _VERDICT[self.holds]


class Claims:
    """The claims of one page, shown as a table whose output carries the records.

    Parameters
    ----------
    chapter : str
        The chapter slug (``"zhang2022_lmd"``).
    page : str
        The notebook's name (``"01_decomposition"``).

    Examples
    --------
    >>> claims = Claims("demo", "01_page")
    >>> claims.sanity("CKA of a layer with itself is 1", abs(1.0 - 1.0) < 1e-9)
    >>> claims.report("rho rises with T", True, ours="0.72 -> 0.80", paper="0.73 -> 0.91")
    >>> len(claims.records)
    2
    """

    def __init__(self, chapter: str, page: str):
        self.chapter, self.page = str(chapter), str(page)
        self.records: list[Claim] = []

    def _add(self, claim: Claim) -> None:
        self.records = [c for c in self.records if c.claim != claim.claim] + [claim]

    def sanity(self, claim: str, condition, ours: str = "—", note: str = "") -> None:
        """Assert an identity that holds by construction (fails the page when broken)."""
        holds = bool(condition)
        self._add(Claim(claim, "sanity", holds, ours, "—", note))
        if not holds:
            raise AssertionError(f"sanity identity broken: {claim} ({ours})")

    def check(self, claim: str, condition, ours: str = "—", paper: str = "—", note: str = ""):
        """Assert a paper claim that must hold at every scale."""
        holds = bool(condition)
        self._add(Claim(claim, "asserted", holds, ours, paper, note))
        if not holds:
            raise AssertionError(f"paper claim asserted at every profile failed: {claim} ({ours})")

    def report(self, claim: str, holds, ours: str, paper: str = "—", note: str = "") -> None:
        """Record a paper claim as holds / does not hold here, without asserting it."""
        self._add(Claim(claim, "reported", bool(holds), ours, paper, note))

    def not_run(self, claim: str, paper: str = "—", note: str = "") -> None:
        """Record a paper claim this profile cannot test, and why (``note``)."""
        self._add(Claim(claim, "not run", None, "—", paper, note))

    def table(self) -> pd.DataFrame:
        """One row per claim: claim, kind, paper, ours, verdict, note."""
        rows = [
            {
                "claim": c.claim,
                "kind": c.kind,
                "paper": c.paper,
                "ours": c.ours,
                "verdict": c.verdict,
                "note": c.note,
            }
            for c in self.records
        ]
        return pd.DataFrame(rows, columns=["claim", "kind", "paper", "ours", "verdict", "note"])

    def _payload(self) -> dict:
        return {
            "chapter": self.chapter,
            "page": self.page,
            "claims": [asdict(c) for c in self.records],
        }

    def _repr_mimebundle_(self, include=None, exclude=None):
        table = self.table()
        html = (
            table.style.hide(axis="index")
            .set_properties(**{"text-align": "left", "white-space": "normal"})
            .to_html()
        )
        return {
            "text/html": html,
            "text/plain": table.to_string(index=False),
            MIME_TYPE: self._payload(),
        }


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

    Parameters
    ----------
    pages : iterable of path or dict
        Executed ``.ipynb`` files, or notebooks already read (their JSON as a dict).

    Returns
    -------
    DataFrame
        Columns chapter, page, claim, kind, holds, ours, paper, note; pages without
        records contribute nothing.
    """
    rows = []
    for page in pages:
        nb = page if isinstance(page, dict) else json.loads(Path(page).read_text())
        payloads = list(_records_of(nb))
        if payloads:
            last = payloads[-1]
            rows += [
                {"chapter": last["chapter"], "page": last["page"], **c} for c in last["claims"]
            ]
    columns = ["chapter", "page", "claim", "kind", "holds", "ours", "paper", "note"]
    return pd.DataFrame(rows, columns=columns)


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return "—"
    return str(value).replace("|", "\\|").replace("\n", " ")


def results_markdown(records: pd.DataFrame, kinds: Iterable[str] = KINDS) -> str:
    """A markdown table of claim records (one row per claim), for a landing page.

    Parameters
    ----------
    records : DataFrame
        As returned by :func:`collect`.
    kinds : iterable of str
        Which kinds to list (e.g. only the paper claims: ``("asserted", "reported",
        "not run")``).
    """
    kinds = tuple(kinds)
    shown = records[records["kind"].isin(kinds)]
    if shown.empty:
        return "_No claims recorded yet: run `make book`._\n"
    lines = [
        "| claim | page | kind | paper | ours | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in shown.itertuples(index=False):
        verdict = _VERDICT[None if pd.isna(row.holds) else bool(row.holds)]
        note = f" ({_cell(row.note)})" if _cell(row.note) != "—" else ""
        lines.append(
            f"| {_cell(row.claim)} | {_cell(row.page)} | {row.kind} | {_cell(row.paper)} | "
            f"{_cell(row.ours)} | **{verdict}**{note} |"
        )
    return "\n".join(lines) + "\n"
