"""Does a re-executed page agree with the committed one? (``--verify``)

Every number a reader judges a page by is compared: the claim records (estimates, interval
ends and the numbers of older records' ``ours`` text, and each verdict) and the cells of
every HTML table the page displays. Statistics of fixed inputs (pretrained models on fixed
text) must agree float64-tight: ``rtol`` 1e-6 by default, since float32 forward passes on
another CPU round differently in the last bits. Pages that train (their manifest entry
says ``verify: {trains: true, rtol: ...}``) agree within their stated spread: a claim's
estimate within its committed interval's half-width (or ``rtol``, whichever is wider), a
table cell within ``rtol``. Any changed verdict fails, whatever the numbers; so does a
quantity of the committed page the new one lacks, a claim only the new page has, and a page
with nothing to compare (its outputs cleared).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

CLAIMS_MIME = "application/vnd.lmsim.claims+json"
DEFAULT_RTOL = 1e-6
DEFAULT_ATOL = 1e-9
VERIFY_KEYS = {"trains", "rtol", "atol"}
# Columns that measure the run rather than the result: never compared.
_RUN_COLUMNS = re.compile(
    r"time|wall|seconds|\bs\b|tok/s|tokens?[_ ]per[_ ]s|seq/s|throughput|speed|date|elapsed|mfu",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"[-+−]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Check:
    """One compared quantity: a row of the ``--verify`` table."""

    page: str
    quantity: str
    committed: str
    now: str
    tolerance: str
    verdict: str  # "ok", "differs", "verdict changed", "missing", "not in the committed page"

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


def check_verify_entry(value: Any, where: str) -> dict:
    """Validate a manifest entry's ``verify`` mapping; a ``ValueError`` naming ``where``."""
    if not isinstance(value, Mapping) or set(value) - VERIFY_KEYS:
        raise ValueError(
            f"{where}: `verify` must be a mapping with keys among {sorted(VERIFY_KEYS)}, "
            f"got {value!r}"
        )
    for key in ("rtol", "atol"):
        if key in value and not (isinstance(value[key], int | float) and value[key] >= 0):
            raise ValueError(f"{where}: `verify.{key}` must be a number >= 0, got {value[key]!r}")
    if "trains" in value and not isinstance(value["trains"], bool):
        raise ValueError(f"{where}: `verify.trains` must be true or false")
    return dict(value)


def numbers(text: str) -> list[float]:
    """The decimal numbers written in ``text`` (thousands separators and − allowed)."""
    found = []
    for token in _NUMBER.findall(str(text)):
        token = token.replace(",", "").replace("−", "-")
        try:
            found.append(float(token))
        except ValueError:
            continue
    return found


class _Tables(HTMLParser):
    """Every ``<table>`` of an HTML output as a list of rows of cell texts."""

    def __init__(self):
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self.tables:
            self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def html_tables(html: str) -> list[list[list[str]]]:
    """The tables of an HTML string, each a list of rows of cell texts."""
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def page_quantities(nb: Mapping) -> dict[str, dict]:
    """The comparable quantities of an executed notebook (a JSON dict).

    Returns
    -------
    dict
        ``{key: {"values": [float, ...], "verdict": str or None, "half_width": float}}``;
        keys name the claim (``claim: <text>``) or the table cell
        (``table <cell>.<k>: <row label> / <column>``, the k-th table of the ``cell``-th
        code cell: markdown cells, such as the provenance the runner inserts or prose
        edited since, do not shift the numbering).
    """
    found: dict[str, dict] = {}
    code_cells = (c for c in nb.get("cells", []) if c.get("cell_type", "code") == "code")
    for index, cell in enumerate(code_cells):
        # Tables are numbered within their cell, not by output: how a kernel splits its
        # printed text into outputs varies from run to run.
        tables = []
        for output in cell.get("outputs", []) or []:
            data = output.get("data", {}) or {}
            if CLAIMS_MIME in data:
                for record in data[CLAIMS_MIME].get("claims", []):
                    found[f"claim: {record['claim']}"] = _claim_quantity(record)
            elif "text/html" in data:
                tables += html_tables(_text(data["text/html"]))
        for t_index, table in enumerate(tables):
            found.update(_table_quantities(table, f"table {index}.{t_index}"))
    return found


def _claim_quantity(record: Mapping) -> dict:
    interval = record.get("interval")
    values = []
    if record.get("estimate") is not None:
        values.append(float(record["estimate"]))
    if interval:
        values.extend(float(v) for v in interval)
    if not values:
        values = numbers(record.get("ours", ""))
    half = abs(float(interval[1]) - float(interval[0])) / 2 if interval else 0.0
    verdict = record.get("verdict")
    if verdict is None:
        verdict = {True: "holds", False: "does not hold", None: "not run"}[record.get("holds")]
    return {"values": values, "verdict": verdict, "half_width": half}


def _table_quantities(table: list[list[str]], where: str) -> dict[str, dict]:
    if not table:
        return {}
    header, rows = table[0], table[1:]
    found = {}
    for r_index, row in enumerate(rows):
        label = row[0] if row else str(r_index)
        for c_index, text in enumerate(row[1:], 1):
            column = header[c_index] if c_index < len(header) else str(c_index)
            if _RUN_COLUMNS.search(column):
                continue
            values = numbers(text)
            if values:
                key = f"{where}: {label} / {column}"
                found[key] = {"values": values, "verdict": None, "half_width": 0.0}
    return found


def _close(a: float, b: float, tol: float, atol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= max(tol * max(abs(a), abs(b)), atol)


def compare_pages(page: str, committed: Mapping, now: Mapping, verify: Mapping) -> list[Check]:
    """Compare two executed versions of one page (JSON dicts) quantity by quantity.

    Parameters
    ----------
    page : str
        ``"<slug>/<name>"``, for the table.
    committed, now : mapping
        The committed page and the re-executed one.
    verify : mapping
        The manifest entry's ``verify`` (``trains``, ``rtol``, ``atol``); empty for a page
        of fixed inputs.

    Returns
    -------
    list of Check
        One per quantity of the committed page, and one per claim only ``now`` has (a
        disagreement); empty when neither shows any (the caller fails such a page).
    """
    rtol = float(verify.get("rtol", DEFAULT_RTOL))
    atol = float(verify.get("atol", DEFAULT_ATOL))
    trains = bool(verify.get("trains", False))
    before, after = page_quantities(committed), page_quantities(now)
    checks = []
    for key, old in before.items():
        new = after.get(key)
        if new is None:
            checks.append(Check(page, key, _show(old), "—", "—", "missing"))
            continue
        spread = old["half_width"] if trains else 0.0
        # A claim's interval is relative to its estimate: compare it on the estimate's scale.
        tol_text = f"±{spread:.3g}" if spread > rtol else f"rtol {rtol:g}"
        same_shape = len(old["values"]) == len(new["values"])
        close = same_shape and all(
            _close(a, b, rtol, max(atol, spread)) for a, b in zip(old["values"], new["values"])
        )
        verdict = "ok" if close else "differs"
        if old["verdict"] is not None and old["verdict"] != new["verdict"]:
            verdict = "verdict changed"
        checks.append(Check(page, key, _show(old), _show(new), tol_text, verdict))
    for key, new in after.items():
        if key.startswith("claim: ") and key not in before:
            checks.append(Check(page, key, "—", _show(new), "—", "not in the committed page"))
    return checks


def _show(quantity: Mapping) -> str:
    values = ", ".join(f"{v:.6g}" for v in quantity["values"])
    return f"{values} ({quantity['verdict']})" if quantity["verdict"] else values


def report_lines(checks: Iterable[Check], all_rows: bool = False) -> list[str]:
    """The ``--verify`` table as text lines: failures always, passing rows when
    ``all_rows``; one summary line last."""
    checks = list(checks)
    shown = [c for c in checks if all_rows or not c.ok]
    lines = []
    if shown:
        columns = ("page", "quantity", "committed", "now", "tolerance", "verdict")
        rows = [[_clip(getattr(c, name)) for name in columns] for c in shown]
        widths = [max(len(name), *(len(row[i]) for row in rows)) for i, name in enumerate(columns)]
        lines.append("  ".join(name.ljust(w) for name, w in zip(columns, widths)))
        lines.extend("  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in rows)
    n_bad = sum(not c.ok for c in checks)
    pages = len({c.page for c in checks})
    if not checks:
        lines.append("verify: nothing was compared (no claim record or table number): a failure")
        return lines
    lines.append(
        f"verify: {len(checks)} quantities on {pages} page(s): "
        f"{len(checks) - n_bad} agree, {n_bad} do not"
    )
    return lines


def _clip(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def checks_json(checks: Iterable[Check]) -> list[dict]:
    return [asdict(c) for c in checks]


def read_page(path: str | Path) -> dict:
    """An executed notebook as JSON; a ``ValueError`` naming the file when it is not."""
    import json

    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the executed page ({exc})") from None
