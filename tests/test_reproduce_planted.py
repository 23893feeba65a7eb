"""Wrong results planted on committed pages: ``--compare`` (and so ``--verify``, which
compares the same way after executing) must fail on each, and pass the page unmodified.

The planted errors are the ones a loose tolerance let through: a claim moved by 0.95 of its
interval's half-width on a page about pretrained models, a table cell scaled by 1.049, a
table row dropped, a verdict flipped.
"""

import copy
import json
import re
import shutil
from pathlib import Path

import pytest

from lmsim import reproduce
from lmsim.reproduce import _verify as verify
from lmsim.reproduce._manifest import load_manifest

REPO = Path(__file__).resolve().parents[1]
ENTRIES = {
    f"{chapter['slug']}/{entry['name']}": entry
    for chapter in load_manifest(REPO / "notebooks" / "runs.yml")["chapters"]
    for entry in chapter["notebooks"]
}
_TD = re.compile(r"(<td[^>]*>)(.*?)(</td>)", re.S)
_BODY_ROW = re.compile(r"(<tbody>\s*)(<tr>.*?</tr>\s*)", re.S)


def _committed(page: str) -> dict:
    return json.loads((REPO / "book" / f"{page}.ipynb").read_text(encoding="utf-8"))


def _claim_records(nb: dict):
    for cell in nb["cells"]:
        for output in cell.get("outputs", []) or []:
            records = (output.get("data") or {}).get(verify.CLAIMS_MIME)
            if records:
                yield from records["claims"]


def _html_outputs(nb: dict):
    for cell in nb["cells"]:
        for output in cell.get("outputs", []) or []:
            data = output.get("data") or {}
            if "text/html" in data and verify.CLAIMS_MIME not in data:
                yield data


def _html(data: dict) -> str:
    text = data["text/html"]
    return "".join(text) if isinstance(text, list) else text


def move_pretrained_claim(nb: dict, entry: dict | None = None) -> dict:
    """The first claim about pretrained models of fixed inputs (float64-tight: no model
    trained for it) with an interval, moved by 0.95 half-widths."""
    nb = copy.deepcopy(nb)
    tolerance_of = verify.Tolerances((entry or {}).get("verify", {}))
    for record in _claim_records(nb):
        interval = record.get("interval")
        key = f"claim: {record['claim']}"
        if (
            record.get("subject") == "pretrained"
            and interval
            and interval[1] > interval[0]
            and tolerance_of(key, verify._claim_quantity(record)).kind == "fixed"
        ):
            shift = 0.95 * (interval[1] - interval[0]) / 2
            record["estimate"] += shift
            record["interval"] = [interval[0] + shift, interval[1] + shift]
            return nb
    raise AssertionError("no claim about pretrained models with an interval on this page")


def flip_verdict(nb: dict) -> dict:
    """The first judged claim's verdict turned to another."""
    nb = copy.deepcopy(nb)
    for record in _claim_records(nb):
        if record.get("verdict") in ("holds", "does not hold", "inconclusive"):
            record["verdict"] = "inconclusive" if record["verdict"] != "inconclusive" else "holds"
            record["holds"] = {"holds": True, "inconclusive": None}[record["verdict"]]
            return nb
    raise AssertionError("no judged claim on this page")


def drop_row(nb: dict) -> dict:
    """The first body row of the first table with numbers, removed."""
    nb = copy.deepcopy(nb)
    for data in _html_outputs(nb):
        html = _html(data)
        match = _BODY_ROW.search(html)
        if match and verify.numbers("".join(m.group(2) for m in _TD.finditer(match.group(2)))):
            data["text/html"] = html[: match.start(2)] + html[match.end(2) :]
            return nb
    raise AssertionError("no table with numbers on this page")


def scale_fixed_cell(nb: dict, entry: dict, factor: float = 1.049) -> dict:
    """The first nonzero table cell whose tolerance is float64-tight or exact, scaled by
    ``factor`` and printed with its own number of decimals."""
    for index, data in enumerate(list(_html_outputs(nb))):
        for match in _TD.finditer(_html(data)):
            text = match.group(2).strip()
            if not re.fullmatch(r"-?\d+(\.\d+)?", text) or float(text) == 0:
                continue
            decimals = len(text.split(".")[1]) if "." in text else 0
            planted = copy.deepcopy(nb)
            target = list(_html_outputs(planted))[index]
            html = _html(target)
            scaled = f"{float(text) * factor:.{decimals}f}"
            target["text/html"] = html[: match.start(2)] + scaled + html[match.end(2) :]
            changed = [
                c for c in verify.compare_pages("p", nb, planted, entry.get("verify", {}))
                if c.committed != c.now
            ]  # fmt: skip
            if changed and changed[0].tolerance.startswith(("rtol", "exact")):
                return planted
    raise AssertionError("no fixed-input table cell on this page")


PLANTS = {
    "claim moved 0.95 half-widths (pretrained)": ("wu2020_similarity/02_attention", None),
    "table cell scaled by 1.049": ("thesis2022_redundancy/01_layer_similarity", None),
    "row dropped": ("lmsim_zoo/01_train_zoo", None),
    "verdict flipped": ("lmsim_zoo/01_train_zoo", None),
}


def _plant(kind: str, page: str) -> dict:
    nb = _committed(page)
    if kind.startswith("claim moved"):
        return move_pretrained_claim(nb, ENTRIES[page])
    if kind.startswith("table cell"):
        return scale_fixed_cell(nb, ENTRIES[page])
    if kind == "row dropped":
        return drop_row(nb)
    return flip_verdict(nb)


def _root_with(tmp_path: Path, page: str) -> Path:
    """A repository holding the manifest, the source notebooks and the committed ``page``."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "notebooks", root / "notebooks")
    target = root / "book" / f"{page}.ipynb"
    target.parent.mkdir(parents=True)
    shutil.copy(REPO / "book" / f"{page}.ipynb", target)
    return root


def _compare(root: Path, page: str, nb: dict, tmp_path: Path) -> int:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / page).parent.mkdir(parents=True, exist_ok=True)
    (elsewhere / f"{page}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    argv = ["--root", str(root), "--profile", "default", "--only", page, "--no-progress"]
    return reproduce.main([*argv, "--compare", str(elsewhere)])


@pytest.mark.parametrize("kind", list(PLANTS))
def test_compare_fails_each_planted_error_and_passes_the_page_as_committed(kind, tmp_path, capsys):
    page, _ = PLANTS[kind]
    root = _root_with(tmp_path, page)
    assert _compare(root, page, _committed(page), tmp_path) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert _compare(root, page, _plant(kind, page), tmp_path) == 1
    out = capsys.readouterr().out
    assert re.search(r"differs|verdict changed|missing", out), out


@pytest.mark.parametrize("page", sorted(ENTRIES))
def test_every_committed_page_agrees_with_itself_and_fails_each_planted_error(page):
    """The planted errors on every committed page (where the page has such a quantity)."""
    path = REPO / "book" / f"{page}.ipynb"
    if not path.is_file():
        pytest.skip(f"{page} has no committed page")
    nb, entry = _committed(page), ENTRIES[page].get("verify", {})
    assert all(c.ok for c in verify.compare_pages(page, nb, nb, entry))
    for plant in (flip_verdict, drop_row):
        checks = verify.compare_pages(page, nb, plant(nb), entry)
        assert any(not c.ok for c in checks), f"{plant.__name__} on {page} was not caught"
    for plant in (move_pretrained_claim, scale_fixed_cell):
        try:
            planted = plant(nb, ENTRIES[page])
        except AssertionError:
            continue  # no such quantity: the page's claims or cells all rest on training
        checks = verify.compare_pages(page, nb, planted, entry)
        assert any(not c.ok for c in checks), f"{plant.__name__} on {page} was not caught"
