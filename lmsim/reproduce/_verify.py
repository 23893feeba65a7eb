"""Does a re-executed page agree with the committed one? (``--verify``, ``--compare``)

Every number a reader judges a page by is compared: the claim records (estimates, interval
ends and the numbers of older records' ``ours`` text, and each verdict), the cells of every
HTML table the page displays (numbers, and words as written), each addressed by its full row
and column labels (every level of a multi-level index), and its figures. How closely is a
property of each quantity (:class:`lmsim.claims.Tolerance`), known where it is produced:

- a claim record carries its tolerance (``exact``, ``fixed``, ``trained`` with its seed
  spread, ``run``), set by :class:`lmsim.claims.Claims`; records of pages executed before
  that get the same default from their kind, subject, unit and values;
- the page's manifest entry (``verify:`` in ``notebooks/runs.yml``) names what rests on
  models the page trains although no zoo model is named (``trained``: probes, fine-tunes,
  towers), what is a count or configuration (``exact``), what measures the run (``run``),
  and whether its figures are of fixed inputs (``figures: hash``);
- a table cell is ``run`` in a column of times, throughput or the machine, ``trained`` when
  its labels name a zoo model (``zoo/...``, ``mlm-s0``, ...), else ``fixed``.

``fixed``: float64-tight (``rtol`` 1e-6, absolute floor 1e-9); ``exact``: equal; ``trained``:
within its seed spread, or its verdict only (a trained table cell: only that it is there);
a printed number also agrees within one unit of its last printed digit. When both pages'
provenance names the same processor, CPU capability, threads and zoo weights
(:func:`same_machine`), training was bit-identical and ``trained`` quantities are held
float64-tight as well. Any changed verdict fails, whatever the numbers; so does a quantity
of the committed page the new one lacks, a claim only the new page has, and a page with
nothing to compare (its outputs cleared).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from lmsim.claims import Tolerance, default_tolerance, exact, fixed, run, trained
from lmsim.claims._tolerance import printed_unit

CLAIMS_MIME = "application/vnd.lmsim.claims+json"
VERIFY_KEYS = {"trained", "fixed", "exact", "run", "figures", "note"}
FIGURE_MODES = ("hash", "count")
# Columns that measure the run (or the machine) rather than the result: never compared.
_RUN_COLUMNS = re.compile(
    r"time|wall|seconds|\bs\b|tok/s|tokens?[_ ]per[_ ]s|seq/s|throughput|speed|date|elapsed|mfu"
    r"|built on|device|cpu",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"[-+−]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# Labels naming a model the book trains itself (the zoo): its numbers are `trained`.
_ZOO_NAMES = (
    "mlm-s0 mlm-s1 mlm-s2 mlm-deep-s0 clm-s0 electra-s0 electra-s1 electra-s2 distil-mlm "
    "distil-mlm-s1 distil-mlm-s2 ft-bbcnews ft-bbcnews-s1 ft-bbcnews-s2 ft-finefood "
    "ft-finefood-s1 ft-finefood-s2"
).split()
_ZOO = re.compile(r"(?<![\w-])(?:zoo|" + "|".join(map(re.escape, _ZOO_NAMES)) + r")(?![\w-])")


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
    """Validate a manifest entry's ``verify`` mapping; a ``ValueError`` naming ``where``.

    Keys: ``trained`` (``all`` or a list of regular expressions matched against the
    quantities' keys: ``claim: <text>``, ``table <cell>.<k>: <row> / <column>``),
    ``fixed``, ``exact`` and ``run`` (lists of regular expressions), ``figures`` (``hash``
    or ``count``) and ``note`` (why, for the reader of the manifest). Precedence: ``run``,
    ``exact``, ``fixed``, then ``trained`` (and labels naming the zoo), else ``fixed``.
    """
    if not isinstance(value, Mapping) or set(value) - VERIFY_KEYS:
        raise ValueError(
            f"{where}: `verify` must be a mapping with keys among {sorted(VERIFY_KEYS)}, "
            f"got {value!r} (the tolerance of each quantity is its own: see lmsim.claims."
            "Tolerance; `trains`/`rtol` are gone)"
        )
    for key in ("trained", "fixed", "exact", "run"):
        patterns = value.get(key, [])
        if key == "trained" and patterns == "all":
            continue
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise ValueError(f"{where}: `verify.{key}` must be a list of regular expressions")
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"{where}: `verify.{key}` pattern {pattern!r}: {err}") from None
    if value.get("figures", "count") not in FIGURE_MODES:
        raise ValueError(f"{where}: `verify.figures` must be one of {FIGURE_MODES}")
    return dict(value)


def numbers(text: str) -> list[float]:
    """The decimal numbers written in ``text`` (thousands separators and − allowed)."""
    return [value for value, _ in printed_numbers(text)]


def printed_numbers(text: str) -> list[tuple[float, float]]:
    """``(value, unit of its last printed digit)`` of every number written in ``text``."""
    found = []
    for token in _NUMBER.findall(str(text)):
        token = token.replace(",", "").replace("−", "-")
        try:
            found.append((float(token), printed_unit(token.lstrip("+-"))))
        except ValueError:
            continue
    return found


class _Tables(HTMLParser):
    """Every ``<table>`` of an HTML output: its header rows and body rows, each a list of
    ``(text, is_header_cell)``, with ``rowspan`` and ``colspan`` spelled out (a cell
    spanning two rows appears in both)."""

    def __init__(self):
        super().__init__()
        self.tables: list[dict] = []
        self._row: list | None = None
        self._cell: list[str] | None = None
        self._span = (1, 1, False)
        self._in_head = False
        self._spanned: dict = {}  # column -> (text, is_th, rows still to fill), this row
        self._next: dict = {}  # the same for the next row

    def _fill_spanned(self) -> None:
        while len(self._row) in self._spanned:
            text, is_th, left = self._spanned.pop(len(self._row))
            if left > 1:
                self._next[len(self._row)] = (text, is_th, left - 1)
            self._row.append((text, is_th))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append({"head": [], "body": []})
            self._spanned, self._next = {}, {}
        elif tag == "thead":
            self._in_head = True
        elif tag in ("tbody", "tfoot"):
            self._in_head = False
        elif tag == "tr" and self.tables:
            self._row = []
            self._spanned, self._next = self._next, {}
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
            self._span = (_span(attrs.get("rowspan")), _span(attrs.get("colspan")), tag == "th")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            text = " ".join("".join(self._cell).split())
            rows, cols, is_th = self._span
            for _ in range(cols):
                self._fill_spanned()
                if rows > 1:
                    self._next[len(self._row)] = (text, is_th, rows - 1)
                self._row.append((text, is_th))
            self._cell = None
        elif tag == "tr" and self._row is not None and self.tables:
            self._fill_spanned()
            self._next.update(self._spanned)  # spans past this row's end
            table = self.tables[-1]
            first = not table["head"] and not table["body"] and _all_th(self._row)
            table["head" if self._in_head or first else "body"].append(self._row)
            self._row = None
        elif tag == "thead":
            self._in_head = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _span(value) -> int:
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return 1


def _all_th(row) -> bool:
    return bool(row) and all(is_th for _, is_th in row)


def html_tables(html: str) -> list[list[list[str]]]:
    """The tables of an HTML string, each a list of rows of cell texts (header rows first;
    spanned cells repeated)."""
    return [[[t for t, _ in row] for row in t["head"] + t["body"]] for t in _parse(html)]


def _parse(html: str) -> list[dict]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


@dataclass
class Quantity:
    """One comparable quantity of a page: its numbers (with the unit of each one's last
    printed digit, 0 for full floats), its verdict (claims), its tolerance when the page
    recorded one, and what it is (``claim``, ``cell``, ``figure``)."""

    values: list[float]
    units: list[float]
    verdict: str | None = None
    tolerance: Tolerance | None = None
    what: str = "claim"
    record: Mapping | None = None
    digest: str | None = None
    row: str = ""
    column: str = ""
    text: str = ""

    def __getitem__(self, key):  # the dict view of older callers: q["values"]
        return getattr(self, key)


def page_quantities(nb: Mapping) -> dict[str, Quantity]:
    """The comparable quantities of an executed notebook (a JSON dict).

    Returns
    -------
    dict
        ``{key: Quantity}``; keys name the claim (``claim: <text>``; each group of a
        pooled claim ``claim: <text> | group <name>``), the table cell
        (``table <cell>.<k>: <row labels> / <column labels>``, the k-th table of the
        ``cell``-th code cell, every level of a multi-level label joined by `` | ``; a
        label met twice gets `` #2``) or the figure (``figure <cell>.<k>``). Markdown
        cells, such as the provenance the runner inserts, do not shift the numbering.
    """
    found: dict[str, Quantity] = {}
    code_cells = (c for c in nb.get("cells", []) if c.get("cell_type", "code") == "code")
    for index, cell in enumerate(code_cells):
        # Tables are numbered within their cell, not by output: how a kernel splits its
        # printed text into outputs varies from run to run.
        tables, figures = [], []
        for output in cell.get("outputs", []) or []:
            data = output.get("data", {}) or {}
            if CLAIMS_MIME in data:
                for record in data[CLAIMS_MIME].get("claims", []):
                    # A page shows its claims twice (glued near the top, and in its claim
                    # check): each copy is a quantity, the second one keyed `#2`.
                    found[_unique(f"claim: {record['claim']}", found)] = _claim_quantity(record)
                    for group in record.get("groups") or []:
                        key = f"claim: {record['claim']} | group {group.get('group')}"
                        found[_unique(key, found)] = _group_quantity(record, group)
            elif "text/html" in data:
                tables += _parse(_text(data["text/html"]))
            if "image/png" in data:
                figures.append(_text(data["image/png"]))
        for t_index, table in enumerate(tables):
            found.update(_table_quantities(table, f"table {index}.{t_index}"))
        for f_index, png in enumerate(figures):
            digest = hashlib.sha256(base64.b64decode("".join(png.split()))).hexdigest()[:16]
            found[f"figure {index}.{f_index}"] = Quantity([], [], what="figure", digest=digest)
    return found


def _unique(key: str, found: Mapping) -> str:
    """``key``, or ``key #2``, ``#3``, ... when ``found`` has it already."""
    if key not in found:
        return key
    return next(f"{key} #{k}" for k in range(2, len(found) + 3) if f"{key} #{k}" not in found)


def _claim_quantity(record: Mapping) -> Quantity:
    interval = record.get("interval")
    values: list[float] = []
    if record.get("estimate") is not None:
        values.append(float(record["estimate"]))
    if interval:
        values.extend(float(v) for v in interval)
    units = [0.0] * len(values)
    if not values:
        printed = printed_numbers(record.get("ours", ""))
        values, units = [v for v, _ in printed], [u for _, u in printed]
    verdict = record.get("verdict")
    if verdict is None:
        verdict = {True: "holds", False: "does not hold", None: "not run"}[record.get("holds")]
    own = record.get("tolerance")
    tolerance = Tolerance.from_record(own) if own else None
    return Quantity(values, units, verdict, tolerance, "claim", record)


def _group_quantity(record: Mapping, group: Mapping) -> Quantity:
    """One group of a pooled claim (``groups``: each family, model or task under the same
    rule): its estimate, interval and verdict, judged by the claim's tolerance, except that
    a trained claim's seed spread (of the pooled values) does not bound a group: its verdict
    is compared."""
    values = [float(group["estimate"])] if group.get("estimate") is not None else []
    values += [float(v) for v in group.get("interval") or []]
    own = record.get("tolerance")
    tolerance = Tolerance.from_record(own) if own else None
    if tolerance is not None and tolerance.kind == "trained":
        tolerance = trained()
    parent = {k: record.get(k) for k in ("kind", "subject")}
    return Quantity(
        values, [0.0] * len(values), group.get("verdict"), tolerance, "claim",
        {**parent, "unit": group.get("unit"), "values": None},
    )  # fmt: skip


def _table_quantities(table: Mapping, where: str) -> dict[str, Quantity]:
    head, body = table["head"], table["body"]
    if not body:
        return {}
    # Index columns: the header cells leading every body row (a pandas index, all levels).
    n_index = min(
        (next((i for i, (_, is_th) in enumerate(row) if not is_th), len(row)) for row in body),
        default=0,
    )
    if not any(is_th for row in body for _, is_th in row):
        n_index = 1  # a table without row headers: its first column names the row
    # Header rows that hold index names only (pandas' second header row) name no column.
    column_rows = [row for row in head if any(t for t, _ in row[n_index:])]
    found: dict[str, Quantity] = {}
    for r_index, row in enumerate(body):
        label = " | ".join(t for t, _ in row[:n_index] if t) or str(r_index)
        for c_index in range(n_index, len(row)):
            parts = [r[c_index][0] for r in column_rows if c_index < len(r) and r[c_index][0]]
            column = " | ".join(dict.fromkeys(parts)) or str(c_index)
            text = row[c_index][0]
            if not text:
                continue
            printed = printed_numbers(text)
            key = _unique(f"{where}: {label} / {column}", found)
            values, units = [v for v, _ in printed], [u for _, u in printed]
            found[key] = Quantity(
                values, units, None, None, "cell", row=label, column=column, text=text
            )
    return found


class Tolerances:
    """The tolerance of each quantity of one page: its own (a claim record's), else what
    the page's manifest entry and the labels say (see the module's docstring)."""

    def __init__(self, entry: Mapping | None, same_machine: bool = False):
        entry = dict(entry or {})
        self.same_machine = same_machine
        trained_patterns = entry.get("trained", [])
        self.all_trained = trained_patterns == "all"
        self.trained = [] if self.all_trained else [re.compile(p) for p in trained_patterns]
        self.exact = [re.compile(p) for p in entry.get("exact", [])]
        self.fixed = [re.compile(p) for p in entry.get("fixed", [])]
        self.run = [re.compile(p) for p in entry.get("run", [])]
        self.figures = entry.get("figures", "count")

    def __call__(self, key: str, old: Quantity, new: Quantity | None = None) -> Tolerance:
        tolerance = self._of(key, old, new)
        if self.same_machine and tolerance.kind == "trained":
            # Training is bit-identical on one kind of machine: nothing may move.
            return fixed()
        return tolerance

    def _of(self, key: str, old: Quantity, new: Quantity | None) -> Tolerance:
        own = old.tolerance or (new.tolerance if new is not None else None)
        if own is not None:
            return own
        if old.what == "figure":
            return fixed() if self.figures == "hash" else run()
        if any(p.search(key) for p in self.run):
            return run()
        if old.what == "cell" and _RUN_COLUMNS.search(old.column):
            return run()
        if any(p.search(key) for p in self.exact):
            return exact()
        if any(p.search(key) for p in self.fixed):
            return fixed()
        record = old.record or {}
        named = self.all_trained or any(p.search(key) for p in self.trained)
        if old.what == "claim":
            return default_tolerance(
                record.get("kind", "reported"), record.get("subject"), record.get("unit"),
                record.get("values"), trains=named,
            )  # fmt: skip
        if named or _ZOO.search(f"{old.row} / {old.column}"):
            return trained()
        return fixed()


def machine_of(nb: Mapping) -> tuple | None:
    """What a page's trained weights depend on, from its provenance: the processor (vendor,
    family, model), torch's CPU capability, lmsim's threads and the zoo weights' hashes;
    None for a page whose provenance predates the processor's record."""
    info = (nb.get("metadata") or {}).get("lmsim") or {}
    machine = info.get("machine") or {}
    if not machine.get("cpu_model"):
        return None
    return (
        machine["cpu_model"],
        machine.get("cpu_capability"),
        machine.get("lmsim_threads"),
        tuple(sorted((info.get("trained_models") or {}).items())),
    )


def same_machine(committed: Mapping, now: Mapping) -> bool:
    """Whether both pages were executed on the same kind of machine (:func:`machine_of`):
    then training is bit-identical and trained quantities are held float64-tight too."""
    key = machine_of(committed)
    return key is not None and key == machine_of(now)


def _agree(tolerance: Tolerance, old: Quantity, new: Quantity) -> bool | None:
    """Whether the numbers agree under ``tolerance``; None when they are not judged."""
    if old.what == "figure":
        return None if tolerance.kind == "run" else old.digest == new.digest
    if not tolerance.judges_numbers:
        return None
    if old.what == "cell" and not old.values:  # a word, a name, a setting: as written
        return old.text == new.text
    if len(old.values) != len(new.values):
        return False
    units = [max(a, b) for a, b in zip(old.units, new.units)]
    return all(tolerance.agrees(a, b, u) for a, b, u in zip(old.values, new.values, units))


def compare_pages(page: str, committed: Mapping, now: Mapping, verify: Mapping) -> list[Check]:
    """Compare two executed versions of one page (JSON dicts) quantity by quantity.

    Parameters
    ----------
    page : str
        ``"<slug>/<name>"``, for the table.
    committed, now : mapping
        The committed page and the re-executed one.
    verify : mapping
        The manifest entry's ``verify`` (``trained``, ``exact``, ``run``, ``figures``);
        empty for a page whose quantities all carry their tolerance or follow the defaults.

    Returns
    -------
    list of Check
        One per quantity of the committed page, and one per claim only ``now`` has (a
        disagreement); empty when neither shows any (the caller fails such a page).
    """
    tolerance_of = Tolerances(verify, same_machine=same_machine(committed, now))
    before, after = page_quantities(committed), page_quantities(now)
    checks = []
    for key, old in before.items():
        new = after.get(key)
        if new is None:
            tol = tolerance_of(key, old)
            checks.append(Check(page, key, _show(old), "—", _describe(tol, old), "missing"))
            continue
        tol = tolerance_of(key, old, new)
        close = _agree(tol, old, new)
        verdict = "differs" if close is False else "ok"
        if old.verdict is not None and old.verdict != new.verdict:
            verdict = "verdict changed"
        checks.append(Check(page, key, _show(old), _show(new), _describe(tol, old), verdict))
    for key, new in after.items():
        if key.startswith("claim: ") and key not in before:
            checks.append(Check(page, key, "—", _show(new), "—", "not in the committed page"))
    return checks


def _describe(tolerance: Tolerance, quantity: Quantity) -> str:
    if quantity.what == "figure":
        return "png hash" if tolerance.kind != "run" else "figure present (pixels not compared)"
    if quantity.what == "cell" and tolerance.kind == "trained" and tolerance.spread is None:
        return "trained: cell present (no seed spread)"
    return tolerance.describe()


def _show(quantity: Quantity) -> str:
    if quantity.what == "figure":
        return f"png {quantity.digest}"
    if quantity.what == "cell" and not quantity.values:
        return quantity.text
    values = ", ".join(f"{v:.6g}" for v in quantity.values)
    return f"{values} ({quantity.verdict})" if quantity.verdict else values


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
        lines.append(
            "verify: nothing was compared (no claim record, table cell or figure): a failure"
        )
        return lines
    lines.append(
        f"verify: {len(checks)} quantities on {pages} page(s): "
        f"{len(checks) - n_bad} agree, {n_bad} do not"
    )
    kinds: dict[str, int] = {}
    for check in checks:
        kind = _KIND_OF.get(check.tolerance.split(":")[0].split(",")[0].split(" (")[0])
        kind = kind or check.tolerance
        kinds[kind] = kinds.get(kind, 0) + 1
    lines.insert(
        len(lines) - 1,
        "verify: judged by "
        + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1])),
    )
    return lines


# The --verify summary's names of the tolerances (Check.tolerance's first words).
_KIND_OF = {
    "exact": "exact",
    "rtol 1e-06": "float64-tight",
    "trained": "trained",
    "not compared": "not compared (the run)",
    "png hash": "figure hash",
    "figure present": "figure present",
}


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
