"""The executed pages carry their evidence: every paper claim with its interval and rule,
pages that open with what they found, parameters folded (issue 26)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lmsim import claims as cl

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"

# Pages whose claims are not yet in the evidence form (an estimate with its interval over
# a named unit, a rule, the verdict it implies). Each chapter's issue of this round
# converts its pages and deletes them here: the list only shrinks.
NOT_CONVERTED: set[str] = set()  # every page is converted
_FOLDED = ("parameters", "injected-parameters")


def _executed_pages() -> dict[str, Path]:
    pages = {}
    for path in sorted(BOOK.glob("*/*.ipynb")):
        meta = json.loads(path.read_text()).get("metadata", {}).get("lmsim", {})
        if meta.get("status") == "ok":
            pages[f"{path.parent.name}/{path.stem}"] = path
    return pages


PAGES = _executed_pages()
CONVERTED = sorted(set(PAGES) - NOT_CONVERTED)


def test_allow_list_names_only_executed_pages_and_the_zoo_is_converted():
    assert NOT_CONVERTED <= set(PAGES), sorted(NOT_CONVERTED - set(PAGES))
    assert "lmsim_zoo/01_train_zoo" in CONVERTED


def _problems(record: dict) -> list[str]:
    """What a paper claim's record lacks to count as evidence."""
    verdict, interval = record.get("verdict"), record.get("interval")
    if verdict in ("not testable here", "not run"):
        problems = [] if (record.get("note") or "").strip() else ["no reason in `note`"]
        return problems + ([] if interval is None else ["an interval on a claim not judged"])
    if not (isinstance(interval, list) and len(interval) == 2):
        return [f"no interval (got {interval!r})"]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in interval):
        return [f"interval {interval} is not two finite numbers"]
    problems = [f"no `{k}`" for k in ("estimate", "level", "unit", "rule") if record.get(k) is None]
    if record.get("n") is None and record.get("unit") != "none":
        problems.append("no `n` (how many units were resampled)")
    if not problems and cl.judge(interval, record["rule"]) != verdict:
        problems.append(f"verdict {verdict!r} does not follow from the interval and rule")
    if record.get("kind") == "asserted" and verdict != "holds":
        problems.append(f"asserted but {verdict!r}")
    return problems


@pytest.mark.parametrize("page", CONVERTED)
def test_every_paper_claim_of_a_converted_page_has_its_interval(page):
    records = cl.collect([PAGES[page]])
    assert len(records), f"{page} records no claims"
    paper = records[records["kind"].isin(cl.PAPER_KINDS)]
    assert len(paper), f"{page} records no paper claims"
    payload = [c for c in json.loads(PAGES[page].read_text())["cells"] if c.get("outputs")]
    raw = next(
        o["data"][cl.MIME_TYPE]
        for cell in reversed(payload)
        for o in cell["outputs"]
        if cl.MIME_TYPE in o.get("data", {})
    )
    bad = {
        r["claim"]: _problems(r)
        for r in raw["claims"]
        if r["kind"] in cl.PAPER_KINDS and _problems(r)
    }
    assert not bad, f"{page}: claims that are not yet evidence: {bad}"


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("page", CONVERTED)
def test_a_converted_page_opens_with_what_it_found(page):
    cells = json.loads(PAGES[page].read_text())["cells"]
    first_code = next(
        i
        for i, c in enumerate(cells)
        if c["cell_type"] == "code" and not set(_FOLDED) & set(_tags(c))
    )
    top = "".join("".join(c["source"]) for c in cells[:first_code] if c["cell_type"] == "markdown")
    assert f"{{glue}} {cl.GLUE_KEY}" in top, (
        f"{page}: no findings before its first code cell; paste the claims near the top "
        f"with a ```{{glue}} {cl.GLUE_KEY}``` directive (Claims.glue() in the claim check)"
    )
    glued = [
        o
        for c in cells
        for o in c.get("outputs", [])
        if o.get("metadata", {}).get("scrapbook", {}).get("name") == cl.GLUE_KEY
    ]
    assert glued and cl.MIME_TYPE in glued[-1]["data"], f"{page}: the claims are not glued"


@pytest.mark.parametrize("page", CONVERTED)
def test_a_converted_page_folds_its_parameters(page):
    cells = json.loads(PAGES[page].read_text())["cells"]
    parameter_cells = [c for c in cells if set(_FOLDED) & set(_tags(c))]
    assert parameter_cells, f"{page} has no parameters cell"
    unfolded = ["".join(c["source"])[:60] for c in parameter_cells if "hide-cell" not in _tags(c)]
    assert not unfolded, f"{page}: parameter cells shown unfolded: {unfolded}"
