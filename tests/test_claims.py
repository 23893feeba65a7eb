"""Tests of lmsim.claims: claim records, their display, and the landing-page tables."""

import json

import nbformat
import pandas as pd
import pytest

from lmsim import claims as cl


def _claims():
    claims = cl.Claims("demo", "01_page")
    claims.sanity("a layer with itself is 1", True, ours="1.000")
    claims.check("student closer to teacher", 0.8 > 0.3, ours="0.80 vs 0.30", paper="yes (Fig. 3)")
    claims.report(
        "rho rises with T", False, ours="0.70 -> 0.69", paper="0.73 -> 0.91", note="short T"
    )
    claims.not_run("second corpus (App. B)", paper="Table 3", note="no second corpus offline")
    return claims


def test_kinds_verdicts_and_assertions():
    claims = _claims()
    table = claims.table()
    assert list(table["kind"]) == ["sanity", "asserted", "reported", "not run"]
    assert list(table["verdict"]) == ["holds", "holds", "does not hold", "not run here"]
    with pytest.raises(AssertionError, match="sanity identity broken: broken"):
        claims.sanity("broken", False)
    with pytest.raises(AssertionError, match="asserted at every profile failed: must"):
        claims.check("must", 1 > 2, ours="1 vs 2")
    claims.report("may", False, ours="x")  # reported claims never raise
    with pytest.raises(ValueError, match="kind"):
        cl.Claim("x", "finding", True)


def test_recording_a_claim_twice_keeps_the_last():
    claims = cl.Claims("demo", "p")
    claims.report("same", True, ours="1")
    claims.report("same", False, ours="2")
    assert [(c.holds, c.ours) for c in claims.records] == [(False, "2")]


def test_display_carries_machine_readable_records_and_full_text():
    bundle = _claims()._repr_mimebundle_()
    payload = bundle[cl.MIME_TYPE]
    assert payload["chapter"] == "demo" and len(payload["claims"]) == 4
    assert "rho rises with T" in bundle["text/html"] and "…" not in bundle["text/html"]
    assert "<th>0</th>" not in bundle["text/html"].replace(" ", ""), "no stray index column"


def _page(path, payload):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("claims")
    cell.outputs = [nbformat.v4.new_output("display_data", data={cl.MIME_TYPE: payload})]
    nb.cells = [cell]
    nbformat.write(nb, str(path))
    return path


def test_collect_reads_executed_pages_and_markdown_marks_missing(tmp_path):
    payload = _claims()._payload()
    page = _page(tmp_path / "p.ipynb", payload)
    empty = tmp_path / "e.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), str(empty))
    records = cl.collect([page, empty])
    assert len(records) == 4 and set(records["page"]) == {"01_page"}
    text = cl.results_markdown(records, ("asserted", "reported", "not run"))
    assert "a layer with itself" not in text, "sanity identities are not findings"
    assert "**does not hold** (short T)" in text and "**not run here**" in text
    row = next(line for line in text.splitlines() if "second corpus" in line)
    assert "| — |" in row, "a missing value shows as a dash"
    weird = pd.DataFrame([{**records.iloc[1].to_dict(), "claim": "a | b"}])
    assert "a \\| b" in cl.results_markdown(weird)
    assert "No claims recorded" in cl.results_markdown(records.iloc[:0])


def test_write_results_generates_landing_tables(tmp_path):
    from lmsim import reproduce

    (tmp_path / "book" / "demo").mkdir(parents=True)
    _page(tmp_path / "book" / "demo" / "01_page.ipynb", _claims()._payload())
    for page in tmp_path.glob("book/demo/*.ipynb"):
        nb = json.loads(page.read_text())
        nb["metadata"]["lmsim"] = {"status": "ok"}
        page.write_text(json.dumps(nb))
    manifest = {"chapters": [{"slug": "demo", "title": "Demo", "notebooks": [{"name": "01_page"}]}]}
    reproduce.write_results(manifest, tmp_path)
    overall = (tmp_path / "book" / "_results.md").read_text()
    assert "| {doc}`Demo </book/demo/index>` | 1 | 1 | 1 |" in overall
    assert "rho rises with T" in overall, "claims that do not hold are listed on the intro"
    chapter = (tmp_path / "book" / "demo" / "_results.md").read_text()
    assert "student closer to teacher" in chapter and "a layer with itself" not in chapter
