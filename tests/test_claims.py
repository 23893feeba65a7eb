"""Tests of lmsim.claims: rules and verdicts, records, display, and the landing tables."""

import json

import nbformat
import pandas as pd
import pytest

from lmsim import claims as cl
from lmsim import stats


def _est(estimate, low, high, unit="test examples", n=100):
    return stats.Estimate(estimate, low, high, 0.95, unit, n, "test")


def _claims():
    """One claim of each form, the older boolean ones included."""
    claims = cl.Claims("demo", "01_page")
    claims.sanity("a layer with itself is 1", True, ours="1.000")
    claims.check(
        "student closer to teacher",
        estimate=_est(0.4, 0.3, 0.5, "sentences", 200),
        rule="A > B",
        paper="yes (Fig. 3)",
        subject="zoo",
    )
    claims.report(
        "rho rises with T",
        estimate=_est(-0.01, -0.03, 0.01),
        rule="> 0",
        paper="0.73 -> 0.91",
        note="short T",
        subject="pretrained",
    )
    claims.report(
        "rho rises with T (zoo)",
        estimate=_est(0.05, 0.02, 0.08),
        rule="> 0",
        subject="zoo",
        control_of="rho rises with T",
    )
    claims.report(
        "SVCCA across families", estimate=_est(0.3, 0.25, 0.35), rule=">= 0.5", note="far below"
    )
    claims.report("twelve layers kept", estimate=stats.exact(12, n=12), rule=">= 10")
    claims.not_testable(
        "seed pair correlates",
        note="split-half reliability 0.12: no correlation can exceed it",
        measured=_est(0.12, 0.05, 0.2, "items", 500),
    )
    claims.not_run("second corpus (App. B)", paper="Table 3", note="no second corpus offline")
    claims.report("old boolean form", False, ours="0.70 -> 0.69", note="legacy")
    return claims


@pytest.mark.parametrize(
    "interval, rule, verdict",
    [
        ((0.1, 0.3), "> 0", "holds"),
        ((-0.1, 0.3), "> 0", "inconclusive"),
        ((-0.3, 0.0), "> 0", "does not hold"),
        ((0.0, 0.2), "> 0", "inconclusive"),
        ((0.0, 0.2), ">= 0", "holds"),
        ((-0.2, -0.1), ">= 0", "does not hold"),
        ((0.71, 0.75), ">= 0.7", "holds"),
        ((0.65, 0.75), ">= 0.7", "inconclusive"),
        ((0.2, 0.4), "< 0.5", "holds"),
        ((0.5, 0.6), "< 0.5", "does not hold"),
        ((0.4, 0.5), "<= 0.5", "holds"),
        ((0.3, 0.4), "within [0.2, 0.5]", "holds"),
        ((0.1, 0.4), "within [0.2, 0.5]", "inconclusive"),
        ((0.6, 0.7), "within [0.2, 0.5]", "does not hold"),
        ((0.02, 0.05), "A > B", "holds"),
        ((0.02, 0.05), "A < B", "does not hold"),
        ((3.0, 3.0), "> 2", "holds"),  # a count: degenerate interval
        ((2.0, 2.0), "> 2", "does not hold"),
        ((1e-3, 2e-3), "> 1e-4", "holds"),
    ],
)
def test_judge_follows_the_interval(interval, rule, verdict):
    assert cl.judge(interval, rule) == verdict


def test_parse_rule_and_its_errors():
    assert cl.parse_rule(">= 0.7") == (">=", 0.7)
    assert cl.parse_rule("within [-1, 2.5]") == ("within", (-1.0, 2.5))
    assert cl.parse_rule("A < B") == ("<", 0.0)
    for bad in ("about 0.7", "> x", "within [2, 1]", "=> 1"):
        with pytest.raises(ValueError, match="rule"):
            cl.parse_rule(bad)


def test_records_carry_the_fields_of_each_kind():
    records = {c.claim: c.record() for c in _claims().records}
    judged = records["student closer to teacher"]
    for field in ("claim", "kind", "verdict", "estimate", "interval", "level", "unit", "n"):
        assert judged[field] is not None, field
    assert judged["rule"] == "A > B" and judged["threshold"] == 0.0
    assert judged["interval"] == [0.3, 0.5] and judged["unit"] == "sentences"
    assert judged["verdict"] == "holds" and judged["holds"] is True
    assert records["rho rises with T"]["verdict"] == "inconclusive"
    assert records["rho rises with T"]["holds"] is None
    assert records["SVCCA across families"]["verdict"] == "does not hold"
    count = records["twelve layers kept"]
    assert count["interval"] == [12.0, 12.0] and count["unit"] == "none"
    untestable = records["seed pair correlates"]
    assert untestable["verdict"] == "not testable here" and untestable["interval"] is None
    assert "reliability" in untestable["note"] and untestable["ours"] == "0.120 [0.050, 0.200]"
    assert records["second corpus (App. B)"]["verdict"] == "not run"
    assert records["old boolean form"]["verdict"] == "does not hold"
    assert records["old boolean form"]["interval"] is None
    json.dumps(list(records.values()))  # JSON-ready


def test_asserted_claims_must_hold_with_the_whole_interval():
    claims = cl.Claims("demo", "p")
    with pytest.raises(
        AssertionError, match=r"asserted at every profile failed: close.*inconclusive"
    ):
        claims.check("close", estimate=_est(0.04, -0.01, 0.09), rule="> 0")
    with pytest.raises(AssertionError, match=r"interval \[-0.01, 0.09\] over 100 test examples"):
        claims.check("close", estimate=_est(0.04, -0.01, 0.09), rule="> 0")
    with pytest.raises(AssertionError, match="asserted at every profile failed: must"):
        claims.check("must", 1 > 2, ours="1 vs 2")  # the older boolean form
    with pytest.raises(AssertionError, match="sanity identity broken: broken"):
        claims.sanity("broken", False)
    claims.report("may", estimate=_est(-1, -2, -0.5), rule="> 0")  # reported never raises


def test_bad_uses_name_the_fix():
    claims = cl.Claims("demo", "p")
    with pytest.raises(ValueError, match="lmsim.stats.Estimate"):
        claims.report("x", estimate=0.5, rule="> 0")
    with pytest.raises(ValueError, match="needs a `rule`"):
        claims.report("x", estimate=_est(1, 0, 2))
    with pytest.raises(ValueError, match="not `holds`"):
        claims.report("x", True, estimate=_est(1, 0, 2), rule="> 0")
    with pytest.raises(ValueError, match="pass `estimate=`"):
        claims.report("x")
    with pytest.raises(ValueError, match="kind"):
        cl.Claim("x", "finding", True)
    with pytest.raises(ValueError, match="subject"):
        claims.report("x", estimate=_est(1, 0, 2), rule="> 0", subject="real")
    with pytest.raises(ValueError, match="no interval"):
        cl.Claim("x", "reported", verdict="not run", interval=(0.0, 1.0))
    with pytest.raises(ValueError, match="contradicts"):
        cl.Claim("x", "reported", True, verdict="inconclusive")


def test_the_older_positional_calls_still_work():
    import numpy as np

    claims = cl.Claims("demo", "p")
    claims.report("positional", np.bool_(True), "0.5", "0.6 (Fig. 1)", "a note")
    claims.check("asserted positional", np.float64(0.8) > 0.3, "0.80 vs 0.30")
    claims.not_run("skipped", "Table 3", "no data")
    rows = claims.table()
    assert list(rows["verdict"]) == ["holds", "holds", "not run"]
    assert list(rows["ours"]) == ["0.5", "0.80 vs 0.30", "—"]
    assert claims.records[0].paper == "0.6 (Fig. 1)" and claims.records[0].note == "a note"


def test_a_claim_text_recorded_again_with_another_result_is_refused():
    """Issue 46, item 7: the later record silently replaced the earlier one. The same
    record again (a cell run twice) is one record; another result under the same text
    raises, naming both."""
    claims = cl.Claims("demo", "p")
    claims.report("same", True, ours="1")
    claims.report("same", True, ours="1")
    assert [(c.claim, c.verdict) for c in claims.records] == [("same", "holds")]
    with pytest.raises(ValueError, match=r"'same' is already recorded .*holds: 1.*does not hold"):
        claims.report("same", estimate=_est(-1, -2, -0.5), rule="> 0")
    assert [(c.verdict, c.ours) for c in claims.records] == [("holds", "1")]


@pytest.mark.parametrize("value", [float("nan"), "False", "no", 0.0, 1, [True]])
def test_a_verdict_is_a_boolean_not_the_truthiness_of_a_value(value):
    """Issue 46, item 7: `sanity(..., np.nan)` and `holds='False'` recorded "holds"."""
    import numpy as np
    import torch

    claims = cl.Claims("demo", "p")
    with pytest.raises(ValueError, match=r"`condition` must be True or False"):
        claims.sanity("an identity", value)
    with pytest.raises(ValueError, match=r"`holds` must be True or False"):
        claims.report("a finding", holds=value)
    with pytest.raises(ValueError, match=r"`condition` must be True or False"):
        claims.check("a claim", value)
    assert claims.records == []
    for ok in (np.bool_(True), torch.tensor(True), np.array(True)):
        claims.sanity(f"holds as {type(ok).__name__}", ok)
    assert [c.verdict for c in claims.records] == ["holds"] * 3


def test_display_is_five_columns_and_carries_the_records():
    bundle = _claims()._repr_mimebundle_()
    payload = bundle[cl.MIME_TYPE]
    assert payload["chapter"] == "demo" and len(payload["claims"]) == 9
    page = bundle["text/html"]
    assert page.count("<th style") == 5, "claim, ours [interval], rule, paper, verdict"
    assert "0.400 [0.300, 0.500]" in page and "95% over 200 sentences" in page
    assert "rho rises with T" in page and "…" not in page
    assert "<th>0</th>" not in page.replace(" ", ""), "no stray index column"
    assert "a &lt; b" in cl.claims_html([cl.Claim("a < b", "reported", True)])


def test_glue_displays_the_claims_under_their_key(monkeypatch):
    pytest.importorskip("myst_nb")
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append((a, k)))
    import myst_nb.ext.glue as glue_module

    monkeypatch.setattr(glue_module, "ipy_display", lambda *a, **k: shown.append((a, k)))
    _claims().glue()
    (args, kwargs), *_ = shown
    assert cl.MIME_TYPE in args[0] and kwargs["metadata"]["scrapbook"]["name"] == cl.GLUE_KEY


def test_glue_without_myst_nb_writes_what_myst_nb_writes(monkeypatch):
    """A machine without the book tools (a GPU machine) glues in myst-nb's format."""
    pytest.importorskip("myst_nb")
    import sys

    import myst_nb.ext.glue as glue_module

    expected, written = [], []
    monkeypatch.setattr(glue_module, "ipy_display", lambda *a, **k: expected.append((a, k)))
    _claims().glue()
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # import myst_nb -> ImportError
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: written.append((a, k)))
    _claims().glue()
    assert written == expected


def test_collect_names_the_executed_page_not_its_source():
    nb = _nb({"chapter": "c", "page": "01_source", "claims": [{"claim": "x", "kind": "reported"}]})
    assert cl.collect([nb])["page"].tolist() == ["01_source"]
    nb.metadata["lmsim"] = {"page": "c/02_gpu"}
    assert cl.collect([nb])["page"].tolist() == ["02_gpu"]


def _nb(payload):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("claims")
    cell.outputs = [nbformat.v4.new_output("display_data", data={cl.MIME_TYPE: payload})]
    nb.cells = [cell]
    return nb


def _page(path, payload):
    nbformat.write(_nb(payload), str(path))
    return path


# The record format of pages executed before intervals (main 0f3691c): holds only.
_LEGACY = {
    "chapter": "old",
    "page": "01_old",
    "claims": [
        {"claim": "identity", "kind": "sanity", "holds": True, "ours": "—", "paper": "—", "note": ""},
        {"claim": "held", "kind": "asserted", "holds": True, "ours": "0.9", "paper": "—", "note": ""},
        {"claim": "failed", "kind": "reported", "holds": False, "ours": "0.4", "paper": "0.9", "note": "small. More."},
        {"claim": "skipped", "kind": "not run", "holds": None, "ours": "—", "paper": "T3", "note": ""},
    ],
}  # fmt: skip


def test_collect_reads_both_record_formats(tmp_path):
    new = _page(tmp_path / "p.ipynb", _claims()._payload())
    old = _page(tmp_path / "o.ipynb", _LEGACY)
    empty = tmp_path / "e.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), str(empty))
    records = cl.collect([new, old, empty])
    assert len(records) == 13 and set(records["page"]) == {"01_page", "01_old"}
    old_rows = records[records["page"] == "01_old"].set_index("claim")
    assert list(old_rows["verdict"]) == ["holds", "holds", "does not hold", "not run"]
    assert old_rows["interval"].isna().all()
    new_rows = records[records["page"] == "01_page"].set_index("claim")
    assert new_rows.loc["student closer to teacher", "interval"] == (0.3, 0.5)


def test_counts_leave_controls_and_sanity_out():
    records = cl.collect([_nb(_claims()._payload())])
    counts = cl.chapter_counts(records)
    assert counts == {
        "holds": 2,
        "does not hold": 2,
        "heterogeneous": 0,
        "inconclusive": 1,
        "not testable here": 1,
        "not run": 1,
        "beyond": 0,
        "method": 0,
        "controls": 1,
    }


def test_chapter_table_puts_controls_beside_their_claim_and_marks_missing():
    records = cl.collect([_nb(_claims()._payload()), _nb(_LEGACY)])
    text = cl.results_markdown(records, cl.PAPER_KINDS)
    lines = text.splitlines()
    assert "a layer with itself" not in text and "identity" not in text, "sanity left out"
    at = next(
        i for i, line in enumerate(lines) if line.startswith("| rho rises with T (pretrained)")
    )
    assert lines[at + 1].startswith("| ↳ control: rho rises with T (zoo)")
    assert "| -0.010 [-0.030, 0.010] |" in lines[at] and "**inconclusive** (short T)" in lines[at]
    assert "| 12.000 |" in next(line for line in lines if "twelve layers" in line)
    row = next(line for line in lines if "second corpus" in line)
    assert "| — |" in row and "**not run**" in row
    assert "**does not hold** (small.)" in text, "one line of the note"
    weird = pd.DataFrame([{**records.iloc[1].to_dict(), "claim": "a | b"}])
    assert "a \\| b" in cl.results_markdown(weird)
    assert "No claims recorded" in cl.results_markdown(records.iloc[:0])


def test_failing_list_is_one_line_per_claim_at_the_book_width():
    records = cl.collect([_nb(_claims()._payload()), _nb(_LEGACY)])
    text = cl.failing_markdown(records)
    rows = text.splitlines()[2:]
    assert len(rows) == 3 and all(row.count(" | ") == 4 for row in rows)
    assert {r.split(" (")[0].strip("| ") for r in rows} == {
        "SVCCA across families",
        "old boolean form",
        "failed",
    }
    assert "0.300 [0.250, 0.350]" in text
    records.loc[records["claim"] == "failed", ["note", "ours", "paper"]] = "x" * 400
    assert max(len(r) for r in cl.failing_markdown(records).splitlines()) < 420
    assert "| small. |" in text, "the note's first sentence"


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
    assert "| {doc}`Demo </book/demo/index>` | 2 | 2 | 0 | 1 | 1 | 1 | 0 | 0 | 1 |" in overall
    assert "SVCCA across families" in overall, "claims that do not hold are listed on the intro"
    assert "rho rises with T" not in overall, "inconclusive claims are not listed as failing"
    chapter = (tmp_path / "book" / "demo" / "_results.md").read_text()
    assert "student closer to teacher" in chapter and "a layer with itself" not in chapter
    paper, controls = chapter.split("**Controls and contrasts** (1;")
    assert "**Paper claims** (7;" in paper and "rho rises with T (zoo)" not in paper
    assert "| control: rho rises with T (zoo) (zoo) |" in controls


def test_a_withdrawn_page_is_listed_apart_and_not_counted(tmp_path):
    """A page marked ``withdrawn:`` in the manifest: its records sit in their own section
    of the chapter's table and count in no tally (the chapter's or the book's)."""
    from lmsim import reproduce

    (tmp_path / "book" / "demo").mkdir(parents=True)
    for name in ("01_page", "02_gpu"):
        _page(tmp_path / "book" / "demo" / f"{name}.ipynb", _claims()._payload())
        nb = json.loads((tmp_path / "book" / "demo" / f"{name}.ipynb").read_text())
        nb["metadata"]["lmsim"] = {"status": "ok", "page": f"demo/{name}"}
        (tmp_path / "book" / "demo" / f"{name}.ipynb").write_text(json.dumps(nb))
    entries = [{"name": "01_page"}, {"name": "02_gpu", "withdrawn": "overturned by issue 43"}]
    manifest = {"chapters": [{"slug": "demo", "title": "Demo", "notebooks": entries}]}
    assert reproduce.withdrawn_pages(manifest["chapters"][0]) == {
        "02_gpu": "overturned by issue 43"
    }
    reproduce.write_results(manifest, tmp_path)
    overall = (tmp_path / "book" / "_results.md").read_text()
    assert "| {doc}`Demo </book/demo/index>` | 2 | 2 | 0 | 1 | 1 | 1 | 0 | 0 | 1 |" in overall
    assert "02_gpu" not in overall, "a withdrawn page's failing claims are not listed"
    chapter = (tmp_path / "book" / "demo" / "_results.md").read_text()
    counted, apart = chapter.split(f"**{cl.WITHDRAWN_TITLE}** (")
    assert "**Paper claims** (7;" in counted and "02_gpu" not in counted
    assert apart.startswith("8;") and "- `02_gpu`: overturned by issue 43" in apart
    assert "| paper: student closer to teacher" in apart


# ------------------------------------------------------------------------ tolerances
def test_every_record_carries_the_tolerance_it_is_verified_by():
    claims = cl.Claims("demo", "01_page")
    claims.sanity("CKA of a layer with itself is 1", True)
    claims.report("a count", estimate=stats.exact(3), rule="> 0")
    sampled = stats.Estimate(0.4, 0.3, 0.5, unit="sentences", n=200, method="bootstrap")
    claims.report("pretrained", estimate=sampled, rule="> 0", subject="pretrained")
    claims.report("zoo", estimate=sampled, rule="> 0", subject="zoo")
    claims.report("given", estimate=stats.exact(0.4), rule="> 0", tolerance=cl.trained(0.02))
    kinds = {c.claim: c.tolerance for c in claims.records}
    assert kinds["CKA of a layer with itself is 1"] == {"kind": "fixed", "rtol": 1e-6, "atol": 1e-6}
    assert kinds["a count"] == {"kind": "exact"}
    assert kinds["pretrained"] == {"kind": "fixed", "rtol": 1e-6, "atol": 1e-9}
    assert kinds["zoo"] == {"kind": "trained", "spread": None}
    assert kinds["given"] == {"kind": "trained", "spread": 0.02}
    probes = cl.Claims("demo", "02_probes", trains=True)
    probes.report("probe", estimate=stats.exact(0.4), rule="> 0", subject="pretrained")
    assert probes.records[0].tolerance["kind"] == "trained"
    assert "tolerance" in probes._payload()["claims"][0]


def test_seed_spread_is_the_range_of_per_seed_values():
    assert cl.seed_spread([0.5, 0.52, 0.56], "seeds") == pytest.approx(0.06)
    assert cl.seed_spread([0.5, 0.52, 0.56], "test sentences") is None
    assert cl.default_tolerance("reported", "zoo", "3 fine-tuning seeds", [1.0, 3.0]).spread == 2.0


@pytest.mark.parametrize(
    "text, unit", [("0.352", 0.001), ("1,574", 0.0), ("12.50", 0.01), ("2.1e-08", 1e-9)]
)
def test_printed_unit_is_one_unit_of_the_last_digit(text, unit):
    assert cl.printed_unit(text) == pytest.approx(unit)


def test_tolerance_agrees_and_rejects_bad_records():
    Tolerance, exact, fixed, run, trained = cl.Tolerance, cl.exact, cl.fixed, cl.run, cl.trained
    assert fixed().agrees(1.0, 1.0 + 5e-7) and not fixed().agrees(1.0, 1.0 + 5e-6)
    assert fixed().agrees(0.352, 0.353, unit=0.001) and not exact().agrees(320, 321)
    assert trained().agrees(0.1, 0.9) is None and run().agrees(1, 2) is None
    assert trained(0.1).agrees(0.5, 0.59) and not trained(0.1).agrees(0.5, 0.61)
    assert Tolerance.from_record(trained(0.1).record()) == trained(0.1)
    with pytest.raises(ValueError, match="kind"):
        Tolerance("loose")
    with pytest.raises(ValueError, match="rtol"):
        Tolerance("fixed", rtol=-1)


def test_one_line_keeps_abbreviations_and_cuts_at_the_first_sentence():
    from lmsim.claims._tables import _one_line

    note = "task arithmetic (Ilharco et al. 2023) is not in the paper; 3 seeds, per seed +0.1"
    assert _one_line(note) == "task arithmetic (Ilharco et al. 2023) is not in the paper"
    assert (
        _one_line("e.g. Fig. 6 and Eq. 2 vs. Sec. 3. Rest") == "e.g. Fig. 6 and Eq. 2 vs. Sec. 3."
    )
    assert _one_line("small. rest") == "small."
