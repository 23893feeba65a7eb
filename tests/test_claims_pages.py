"""The executed pages carry their evidence: every paper claim with its interval and rule,
pages that open with what they found, parameters folded (issue 26); every record with its
role, pooled claims with their groups, inconclusive ones with what would settle them, and
the landing pages' tallies equal to the paper records (issue 41, ``EVIDENCE.md``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmsim import claims as cl
from lmsim import reproduce
from lmsim.reproduce._pages import _executed_pages as _manifest_pages

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"

# Pages whose claims are not yet in the evidence form (an estimate with its interval over
# a named unit, a rule, the verdict it implies). Each chapter's issue of this round
# converts its pages and deletes them here: the list only shrinks.
NOT_CONVERTED: set[str] = set()  # every page is converted

# Pages whose records are not yet in the checklist form (issue 41, ../shared/EVIDENCE.md,
# lmsim.claims.evidence_problems): a `role` on every record, `groups` on every pooled claim,
# `mde` with what would settle it on every inconclusive one. Each chapter issue of this
# round converts its pages, re-executes them and deletes them here; the list only shrinks
# and is empty when the round ends.
NOT_IN_CHECKLIST_FORM: set[str] = {
    "he2022_twotower/02_preference_gpu",  # executed 2026-11-26, no GPU since: see its notice
    "zhang2022_lmd/01_decomposition",
}
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
CHECKLIST = sorted(set(PAGES) - NOT_IN_CHECKLIST_FORM)


def test_allow_list_names_only_executed_pages_and_the_zoo_is_converted():
    assert NOT_CONVERTED <= set(PAGES), sorted(NOT_CONVERTED - set(PAGES))
    assert "lmsim_zoo/01_train_zoo" in CONVERTED


def test_checklist_allow_list_names_only_executed_pages():
    stale = sorted(NOT_IN_CHECKLIST_FORM - set(PAGES))
    assert not stale, f"delete from NOT_IN_CHECKLIST_FORM (no such executed page): {stale}"


def _payload(path: Path) -> dict:
    """The last claim records a page displayed (what `cl.collect` reads)."""
    payload = [c for c in json.loads(path.read_text())["cells"] if c.get("outputs")]
    return next(
        o["data"][cl.MIME_TYPE]
        for cell in reversed(payload)
        for o in cell["outputs"]
        if cl.MIME_TYPE in o.get("data", {})
    )


@pytest.mark.parametrize("page", CONVERTED)
def test_every_paper_claim_of_a_converted_page_has_its_interval(page):
    records = cl.collect([PAGES[page]])
    assert len(records), f"{page} records no claims"
    paper = records[records["kind"].isin(cl.PAPER_KINDS)]
    assert len(paper), f"{page} records no paper claims"
    bad = {
        r["claim"]: problems
        for r in _payload(PAGES[page])["claims"]
        if r["kind"] in cl.PAPER_KINDS and (problems := cl.evidence_problems(r, checklist=False))
    }
    assert not bad, f"{page}: claims that are not yet evidence: {bad}"


def _checklist_problems(payload: dict) -> dict[str, list[str]]:
    """Every record (sanity identities too) against the checklist (EVIDENCE.md)."""
    return {
        r["claim"]: problems
        for r in payload["claims"]
        if (problems := cl.evidence_problems(r, checklist=True))
    }


@pytest.mark.parametrize("page", CHECKLIST)
def test_every_record_of_a_checklist_page_has_its_role_groups_and_power(page):
    """Roles on every record, `groups` on pooled claims, `mde` on inconclusive ones, and
    verdicts that follow from the designs each record carries."""
    bad = _checklist_problems(_payload(PAGES[page]))
    assert not bad, f"{page}: records not in the checklist form (EVIDENCE.md): {bad}"


def test_the_checklist_check_refuses_what_the_allow_list_excuses():
    """Whatever the allow-list holds, the check bites: a record without a role, a pooled
    claim without groups, an inconclusive one without `mde`."""
    from lmsim import stats

    claims = cl.Claims("demo", "01_page")
    claims.report("no role", estimate=stats.Estimate(0.3, 0.2, 0.4, n=9), rule="> 0")
    made = claims.report(
        "inconclusive", estimate=stats.Estimate(0.1, -0.1, 0.3, n=9), rule="> 0", role="paper"
    )
    payload = claims._payload()
    payload["claims"][1] = {**made.record(), "mde": None}
    payload["claims"].append({**made.record(), "claim": "pooled", "pooled": "families"})
    bad = _checklist_problems(payload)
    assert set(bad) == {"no role", "inconclusive", "pooled"}
    assert "no `role`" in bad["no role"][0] and "mde" in bad["inconclusive"][0]
    assert "without `groups`" in " ".join(bad["pooled"])


# ------------------------------------------------------- the landing pages' tallies
MANIFEST = reproduce.load_manifest(REPO / "notebooks" / "runs.yml")
CHAPTERS = {chapter["slug"]: (chapter, names) for chapter, names in _manifest_pages(MANIFEST, REPO)}


def _chapter_records(slug: str):
    """The records the tallies count: withdrawn pages (``withdrawn:`` in runs.yml) left out."""
    chapter, names = CHAPTERS[slug]
    withdrawn = reproduce.withdrawn_pages(chapter)
    return cl.collect([BOOK / slug / f"{name}.ipynb" for name in names if name not in withdrawn])


def _sections(text: str) -> dict[str, list[str]]:
    """The table rows under each ``**title** (n; ...)`` line of a chapter's results."""
    out, title = {}, None
    for line in text.splitlines():
        if line.startswith("**") and "** (" in line:
            title = line.split("**")[1]
            out[title] = []
        elif title and line.startswith("| ") and not line.startswith(("| claim |", "| --- |")):
            out[title].append(line)
    return out


@pytest.mark.parametrize("slug", sorted(CHAPTERS))
def test_a_chapter_results_table_lists_exactly_its_paper_records(slug):
    """`_results.md` is generated from the executed pages (`--write-toc`): its paper
    section has one row per paper record, in order, and each other role its own section."""
    records = _chapter_records(slug)
    shown = records[records["kind"] != "sanity"]
    role = cl.roles(shown)
    sections = _sections((BOOK / slug / "_results.md").read_text())
    for title, members, _ in cl.SECTIONS:
        expected = shown[role.isin(members)]
        rows = sections.get(title, [])
        assert len(rows) == len(expected), (
            f"{slug}/_results.md: {len(rows)} rows under {title!r}, the pages record "
            f"{len(expected)}: rerun `python -m lmsim.reproduce --write-toc`"
        )
        if title == "Paper claims":
            texts = [str(c).replace("|", "\\|").replace("\n", " ") for c in expected["claim"]]
            assert all(row.startswith(f"| {t}") for row, t in zip(rows, texts)), slug


def test_the_book_tallies_count_the_paper_records():
    """`book/_results.md`: each chapter's counts are those of its paper records."""
    text = (BOOK / "_results.md").read_text()
    for slug, (chapter, _) in CHAPTERS.items():
        counts = cl.chapter_counts(_chapter_records(slug))
        row = next((line for line in text.splitlines() if f"</book/{slug}/index>`" in line), None)
        assert row is not None, f"book/_results.md has no row for {slug}"
        cells = [c.strip() for c in row.strip("|").split("|")][1:]
        assert cells == [str(counts[k]) for k in counts], (
            f"book/_results.md, {chapter['title']}: {cells}, the pages say {counts}: rerun "
            "`python -m lmsim.reproduce --write-toc`"
        )


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
