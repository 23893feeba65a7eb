"""``python -m lmsim.reproduce --verify`` and the locked environment in the provenance."""

import hashlib
import json
from pathlib import Path

import nbformat
import pytest
import yaml

from lmsim import claims as claims_lib
from lmsim import reproduce
from lmsim.reproduce import _environment as environment
from lmsim.reproduce import _verify as verify

CLAIMS = verify.CLAIMS_MIME


def _page(claims=(), html=()) -> dict:
    """A minimal executed page: one output per claim list and per HTML table."""
    outputs = [
        {"output_type": "display_data", "metadata": {}, "data": {CLAIMS: {"claims": list(claims)}}}
    ] + [
        {"output_type": "display_data", "metadata": {}, "data": {"text/html": table}}
        for table in html
    ]
    return {"cells": [{"cell_type": "code", "source": "", "outputs": outputs}]}


TABLE = (
    "<table><thead><tr><th></th><th>accuracy</th><th>wall time</th></tr></thead>"
    "<tbody><tr><th>{row}</th><td>{acc}</td><td>{t} s</td></tr></tbody></table>"
)


def _table(acc, t="1", row="minilm-l6"):
    return TABLE.format(acc=acc, t=t, row=row)


def _claim(estimate, interval, verdict="holds", claim="a beats b", **extra):
    return {"claim": claim, "estimate": estimate, "interval": interval, "verdict": verdict, **extra}


@pytest.mark.parametrize(
    "text, expected",
    [("0.71 [0.66, 0.75]", [0.71, 0.66, 0.75]), ("1,574 tok/s", [1574.0]), ("−0.5", [-0.5])],
)
def test_numbers_reads_what_pages_print(text, expected):
    assert verify.numbers(text) == pytest.approx(expected)


def test_tables_are_keyed_by_code_cell_so_markdown_does_not_shift_them():
    old = _page([], [_table("0.812", "3.2")])
    new = _page([], [_table("0.812", "3.2")])
    new["cells"].insert(0, {"cell_type": "markdown", "source": "Executed with profile ..."})
    checks = verify.compare_pages("c/p", old, new, {})
    assert checks[0].quantity == "table 0.0: minilm-l6 / accuracy" and all(c.ok for c in checks)


def test_identical_pages_agree_and_timing_columns_are_not_compared():
    old = _page([_claim(0.5, [0.4, 0.6])], [_table("0.812", "3.2")])
    new = _page([_claim(0.5, [0.4, 0.6])], [_table("0.812", "9.9")])
    checks = verify.compare_pages("c/p", old, new, {})
    assert [c.quantity for c in checks] == [
        "claim: a beats b",
        "table 0.0: minilm-l6 / accuracy",
        "table 0.0: minilm-l6 / wall time",
    ]
    assert all(c.ok for c in checks) and checks[2].tolerance == "not compared (the run)"


def test_throughput_and_machine_columns_measure_the_run():
    table = TABLE.replace("wall time", "tokens_per_s")
    old = _page([], [table.format(acc="0.812", t="3767.4", row="m")])
    new = _page([], [table.format(acc="0.812", t="14198.6", row="m")])
    assert all(c.ok for c in verify.compare_pages("c/p", old, new, {}))
    built = TABLE.replace("wall time", "built on")
    old = _page([], [built.format(acc="1", t="AVX512", row="m")])
    new = _page([], [built.format(acc="1", t="AVX2", row="m")])
    assert all(c.ok for c in verify.compare_pages("c/p", old, new, {}))


def test_fixed_inputs_are_held_float64_tight_and_rounding_aware():
    old = _page(html=[_table("0.812000")])
    assert verify.compare_pages("c/p", old, _page(html=[_table("0.812003")]), {})[0].verdict == (
        "differs"
    )
    # Printed to three decimals, 0.352 and 0.353 may be the same float rounded two ways.
    assert verify.compare_pages(
        "c/p", _page(html=[_table("0.352")]), _page(html=[_table("0.353")]), {}
    )[0].ok  # noqa: E501
    assert not verify.compare_pages(
        "c/p", _page(html=[_table("0.352")]), _page(html=[_table("0.354")]), {}
    )[0].ok  # noqa: E501
    # A count printed without a decimal point is compared exactly.
    assert not verify.compare_pages(
        "c/p", _page(html=[_table("320")]), _page(html=[_table("321")]), {}
    )[0].ok  # noqa: E501


def test_cells_naming_the_zoo_are_trained_and_only_need_to_be_there():
    old = _page(html=[_table("0.812", row="zoo/mlm-s0")])
    new = _page(html=[_table("0.701", row="zoo/mlm-s0")])
    (check, _) = verify.compare_pages("c/p", old, new, {})
    assert check.ok and check.tolerance == "trained: cell present (no seed spread)"
    assert verify.compare_pages("c/p", old, _page(), {})[0].verdict == "missing"


def test_the_manifest_names_what_the_page_trains_and_what_is_configuration():
    old = _page(
        html=[_table("0.812"), TABLE.replace("accuracy", "steps").format(acc="1500", t=1, row="m")]
    )  # noqa: E501
    new = _page(
        html=[_table("0.700"), TABLE.replace("accuracy", "steps").format(acc="1501", t=1, row="m")]
    )  # noqa: E501
    entry = {"trained": "all", "exact": ["/ steps$"]}
    checks = {c.quantity: c for c in verify.compare_pages("c/p", old, new, entry)}
    assert checks["table 0.0: minilm-l6 / accuracy"].ok
    assert checks["table 0.1: m / steps"].verdict == "differs"
    assert checks["table 0.1: m / steps"].tolerance == "exact"


def test_claims_carry_their_tolerance():
    fixed = claims_lib.fixed().record()
    old = _page([_claim(0.5, [0.4, 0.6], tolerance=fixed)])
    moved = _page([_claim(0.5001, [0.4001, 0.6001], tolerance=fixed)])
    assert verify.compare_pages("c/p", old, moved, {})[0].verdict == "differs"
    spread = claims_lib.trained(0.05).record()
    old = _page([_claim(0.5, [0.4, 0.6], tolerance=spread)])
    within = _page([_claim(0.54, [0.44, 0.64], tolerance=spread)])
    beyond = _page([_claim(0.56, [0.46, 0.66], tolerance=spread)])
    assert verify.compare_pages("c/p", old, within, {})[0].ok
    (check,) = verify.compare_pages("c/p", old, beyond, {})
    assert check.verdict == "differs" and "seed spread" in check.tolerance


def test_older_records_get_their_tolerance_from_subject_unit_and_values():
    zoo = {"subject": "zoo", "unit": "sentences"}
    old = _page([_claim(0.5, [0.4, 0.6], **zoo)])
    new = _page([_claim(0.9, [0.8, 1.0], **zoo)])
    (check,) = verify.compare_pages("c/p", old, new, {})
    assert check.ok and check.tolerance == "trained: verdict only"
    seeds = {"subject": "zoo", "unit": "seeds", "values": [0.50, 0.52, 0.56]}
    old = _page([_claim(0.527, [0.45, 0.60], **seeds)])
    assert verify.compare_pages("c/p", old, _page([_claim(0.58, [0.50, 0.65], **seeds)]), {})[0].ok
    assert not verify.compare_pages("c/p", old, _page([_claim(0.60, [0.52, 0.67], **seeds)]), {})[
        0
    ].ok
    pretrained = {"subject": "pretrained", "unit": "pairs of layers"}
    old = _page([_claim(0.5, [0.4, 0.6], **pretrained)])
    new = _page([_claim(0.5 + 1e-5, [0.4, 0.6], **pretrained)])
    assert verify.compare_pages("c/p", old, new, {})[0].verdict == "differs"
    assert verify.compare_pages("c/p", old, new, {"trained": ["^claim: a beats"]})[0].ok


def _pooled(effects: dict, subject: str = "pretrained") -> dict:
    """The record of a pooled claim (issue 41's ``groups=``) over groups with these effects."""
    from lmsim import stats

    def est(x):
        return stats.Estimate(x, x - 0.5, x + 0.5, unit="sentences", n=100, method="bootstrap")

    claims = claims_lib.Claims("demo", "01_page")
    made = claims.report(
        "alike across families", estimate=est(1.0), rule="> 0", subject=subject,
        groups={g: est(x) for g, x in effects.items()}, pooled="model families", role="paper",
    )  # fmt: skip
    return made.record()


def test_each_group_of_a_pooled_claim_is_compared_by_the_claims_tolerance():
    old = _page([_pooled({"BERT": 1.0, "GPT": 0.8})])
    keys = [c.quantity for c in verify.compare_pages("c/p", old, old, {})]
    assert keys == [
        "claim: alike across families",
        "claim: alike across families | group BERT",
        "claim: alike across families | group GPT",
    ]
    # A group moved (the pooled claim as it was): float64-tight for fixed inputs.
    moved = _page([_pooled({"BERT": 1.0, "GPT": 0.8001})])
    bad = [c for c in verify.compare_pages("c/p", old, moved, {}) if not c.ok]
    assert [c.quantity for c in bad] == ["claim: alike across families | group GPT"]
    # Trained: a group's verdict is compared, not its numbers.
    old = _page([_pooled({"BERT": 1.0, "GPT": 0.8}, "zoo")])
    moved = _page([_pooled({"BERT": 1.0, "GPT": 0.7}, "zoo")])
    assert all(c.ok for c in verify.compare_pages("c/p", old, moved, {}))
    flipped = _page([_pooled({"BERT": 1.0, "GPT": 0.3}, "zoo")])
    bad = [c for c in verify.compare_pages("c/p", old, flipped, {}) if not c.ok]
    assert "claim: alike across families | group GPT" in [c.quantity for c in bad]
    assert all(c.verdict == "verdict changed" for c in bad)


def test_pages_from_the_same_kind_of_machine_hold_trained_quantities_tight():
    machine = {"cpu_model": "AMD EPYC (AuthenticAMD, cpu family 25, model 17, stepping 1)",
               "cpu_capability": "AVX512", "lmsim_threads": 1}  # fmt: skip
    zoo = {"subject": "zoo", "unit": "sentences"}
    old = _page([_claim(0.5, [0.4, 0.6], **zoo)], [_table("0.812", row="zoo/mlm-s0")])
    new = _page([_claim(0.51, [0.41, 0.61], **zoo)], [_table("0.815", row="zoo/mlm-s0")])
    for page in (old, new):
        page["metadata"] = {"lmsim": {"machine": machine, "trained_models": {"zoo/a": "1f"}}}
    checks = verify.compare_pages("c/p", old, new, {})
    assert [c.verdict for c in checks[:2]] == ["differs", "differs"]
    new["metadata"]["lmsim"]["trained_models"] = {"zoo/a": "2e"}  # other weights
    assert all(c.ok for c in verify.compare_pages("c/p", old, new, {}))
    del old["metadata"]  # a page from before the processor was recorded
    assert all(c.ok for c in verify.compare_pages("c/p", old, new, {}))


def test_sanity_leftovers_near_zero_get_an_absolute_floor():
    old = _page([{"claim": "CKA(x, x) = 1", "kind": "sanity", "holds": True, "ours": "2.1e-08"}])
    new = _page([{"claim": "CKA(x, x) = 1", "kind": "sanity", "holds": True, "ours": "3.5e-09"}])
    assert verify.compare_pages("c/p", old, new, {})[0].ok


def test_a_changed_verdict_fails_whatever_the_numbers():
    old = _page([_claim(0.50, [0.40, 0.60], "holds", subject="zoo")])
    new = _page([_claim(0.50, [0.40, 0.60], "inconclusive", subject="zoo")])
    assert verify.compare_pages("c/p", old, new, {})[0].verdict == "verdict changed"


def test_old_records_compare_their_ours_text_and_holds():
    old = _page([{"claim": "x", "holds": True, "ours": "0.698 vs 0.658"}])
    new = _page([{"claim": "x", "holds": False, "ours": "0.658 vs 0.658"}])
    (check,) = verify.compare_pages("c/p", old, new, {})
    assert check.verdict == "verdict changed" and "0.698" in check.committed


def test_a_missing_quantity_fails():
    old = _page([_claim(0.5, [0.4, 0.6])])
    (check,) = verify.compare_pages("c/p", old, _page(), {})
    assert check.verdict == "missing"
    assert "1 do not" in verify.report_lines([check])[-1]


MULTI = """<table><thead>
<tr><th></th><th></th><th>test</th><th>test</th></tr>
<tr><th></th><th></th><th>POS</th><th>DEP</th></tr>
<tr><th>model</th><th>tau</th><th></th><th></th></tr></thead><tbody>
<tr><th rowspan="2" valign="top">minilm-l6</th><th>0.5</th><td>0.91</td><td>0.80</td></tr>
<tr><th>0.9</th><td>0.90</td><td>0.75</td></tr>
<tr><th rowspan="2" valign="top">all-mpnet-base-v2</th><th>0.5</th><td>0.93</td><td>0.82</td></tr>
<tr><th>0.9</th><td>0.92</td><td>0.79</td></tr>
</tbody></table>"""


def test_multi_level_rows_and_columns_are_addressed_by_every_level():
    keys = list(verify.page_quantities(_page(html=[MULTI])))
    assert len(keys) == 8, keys
    assert keys[:3] == [
        "table 0.0: minilm-l6 | 0.5 / test | POS",
        "table 0.0: minilm-l6 | 0.5 / test | DEP",
        "table 0.0: minilm-l6 | 0.9 / test | POS",
    ]
    assert "table 0.0: all-mpnet-base-v2 | 0.9 / test | DEP" in keys


def test_figures_are_hashed_where_the_page_says_its_figures_are_fixed():
    import base64

    def page(pixels: bytes) -> dict:
        data = {"image/png": base64.b64encode(pixels).decode(), "text/plain": "<Figure>"}
        output = {"output_type": "display_data", "metadata": {}, "data": data}
        return {"cells": [{"cell_type": "code", "source": "", "outputs": [output]}]}

    old, new = page(b"\x89PNG one"), page(b"\x89PNG two")
    assert verify.compare_pages("c/p", old, new, {})[0].ok  # present; pixels not compared
    (check,) = verify.compare_pages("c/p", old, new, {"figures": "hash"})
    assert check.verdict == "differs" and check.tolerance == "png hash"
    assert verify.compare_pages("c/p", old, _page(), {})[0].verdict == "missing"


@pytest.mark.parametrize(
    "bad",
    [{"rtol": 0.05}, {"trains": True}, {"trained": "some"}, {"exact": ["("]}, {"figures": 1}, [1]],
)
def test_bad_verify_entries_are_named(bad):
    with pytest.raises(ValueError, match="notebook c/p"):
        verify.check_verify_entry(bad, "runs.yml: notebook c/p")


def _notebook(path: Path, body: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Demo\n\nA page."),
        nbformat.v4.new_code_cell(
            "value: float = 0.5  # a value", metadata={"tags": ["parameters"]}
        ),
        nbformat.v4.new_code_cell(body),
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


SHOW = "import pandas as pd\npd.DataFrame({'accuracy': [value]}, index=['m'])"


def _demo_repository(root: Path) -> list[str]:
    """A one-page book under ``root`` (notebook and manifest); the runner's base argv."""
    _notebook(root / "notebooks" / "demo" / "01_page.ipynb", SHOW)
    manifest = {
        "profiles": {p: p for p in reproduce.PROFILES},
        "chapters": [{"slug": "demo", "title": "Demo", "notebooks": [{"name": "01_page"}]}],
    }
    (root / "notebooks" / "runs.yml").write_text(yaml.safe_dump(manifest))
    return ["--profile", "default", "--root", str(root), "--no-progress"]


def test_verify_reexecutes_into_scratch_and_compares(tmp_path, capsys):
    argv = _demo_repository(tmp_path)
    assert reproduce.main(argv) == 0
    committed = tmp_path / "book" / "demo" / "01_page.ipynb"
    before = committed.read_bytes()
    assert reproduce.main([*argv, "--verify"]) == 0
    assert committed.read_bytes() == before, "--verify never rewrites the committed page"
    assert (tmp_path / "_build" / "verify" / "default" / "demo" / "01_page.ipynb").is_file()
    assert "1 agree, 0 do not" in capsys.readouterr().out
    # A page whose numbers moved fails, with the quantity in the table.
    _notebook(tmp_path / "notebooks" / "demo" / "01_page.ipynb", SHOW.replace("value", "value + 1"))
    assert reproduce.main([*argv, "--verify"]) == 1
    out = capsys.readouterr().out
    assert "m / accuracy" in out and "differs" in out
    report = json.loads((tmp_path / "_build" / "verify" / "default" / "report.json").read_text())
    assert report["checks"][0]["verdict"] == "differs"


def test_lock_pins_and_differences(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text(
        "# header\nNumPy==2.0.0 \\\n    --hash=sha256:00\npandas==3.1.1 ; python_version >= '3'\n"
    )
    pins = environment.lock_pins(lock)
    assert pins == {"numpy": "2.0.0", "pandas": "3.1.1"}
    differences = environment.lock_differences(pins, {"numpy": "2.0.0", "pandas": None})
    assert differences == ["pandas: locked 3.1.1, installed nothing"]
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(ValueError, match="empty.txt.*make lock"):
        environment.lock_pins(tmp_path / "empty.txt")


def test_the_repository_lock_is_read_and_recorded():
    root = Path(__file__).resolve().parents[1]
    info = environment.environment_info(root)
    assert info["lock"] == "requirements/lock-cpu-py311.txt" and len(info["lock_sha256"]) == 16
    pins = environment.lock_pins(root / info["lock"])
    assert "torch" not in pins and "transformers" in pins and "jupyter-book" in pins
    warning = environment.lock_warning({**info, "matches_lock": False, "differences": ["a: b"]})
    assert "differs from requirements/lock-cpu-py311.txt" in warning
    machine = environment.machine_info()
    assert machine["usable_cores"] >= 1 and machine["cpu_model"]


def test_provenance_names_the_zoo_weights_by_their_hashes(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    assert environment.trained_models("default") == {}
    folder = tmp_path / "zoo" / "default"
    (folder / "mlm-s0").mkdir(parents=True)
    (folder / "mlm-s0" / "zoo.json").write_text(
        json.dumps({"weights_sha256": {"model.safetensors": "4ca9e11344bb0cca" + "0" * 48}})
    )
    (folder / "clm-s0").mkdir()
    (folder / "clm-s0" / "zoo.json").write_text(json.dumps({"name": "clm-s0"}))
    assert environment.trained_models("default") == {
        "zoo/mlm-s0": "4ca9e11344bb0cca",
        "zoo/clm-s0": "unrecorded",
    }
    # a record that predates the hashes: the weight file's own hash, read without writing
    (folder / "clm-s0" / "model.safetensors").write_bytes(b"weights")
    expected = hashlib.sha256(b"weights").hexdigest()[:16]
    assert environment.trained_models("default")["zoo/clm-s0"] == expected
    assert json.loads((folder / "clm-s0" / "zoo.json").read_text()) == {"name": "clm-s0"}
    assert environment.trained_models(None) == {}


def test_compare_judges_pages_executed_elsewhere_without_executing(tmp_path, capsys):
    argv = _demo_repository(tmp_path)
    assert reproduce.main(argv) == 0
    elsewhere = tmp_path / "other-clone-book"
    assert reproduce.main([*argv, "--output-dir", str(elsewhere)]) == 0
    page = elsewhere / "demo" / "01_page.ipynb"
    assert reproduce.main([*argv, "--compare", str(elsewhere)]) == 0
    assert "1 agree, 0 do not" in capsys.readouterr().out
    # Edit the number in the page executed elsewhere: --compare reads it as it is.
    page.write_text(page.read_text().replace("0.5", "0.75"))
    assert reproduce.main([*argv, "--compare", str(elsewhere)]) == 1
    assert "differs" in capsys.readouterr().out
    page.unlink()
    assert reproduce.main([*argv, "--compare", str(elsewhere)]) == 1
    assert "no executed page" in capsys.readouterr().err
    assert reproduce.main([*argv, "--compare", str(tmp_path / "nowhere")]) == 2
    assert reproduce.main([*argv, "--compare", str(elsewhere), "--verify"]) == 2


def test_a_claim_only_the_new_page_has_is_a_disagreement():
    """Issue 46, item 6: a claim present on one side only fails, either side."""
    old = _page([_claim(0.5, [0.4, 0.6])])
    new = _page([_claim(0.5, [0.4, 0.6]), _claim(0.9, [0.8, 1.0], claim="c beats d")])
    checks = verify.compare_pages("c/p", old, new, {})
    assert [(c.quantity, c.verdict) for c in checks] == [
        ("claim: a beats b", "ok"),
        ("claim: c beats d", "not in the committed page"),
    ]
    assert "1 do not" in verify.report_lines(checks)[-1]
    (gone,) = verify.compare_pages("c/p", new, old, {})[1:]
    assert gone.verdict == "missing"


def test_nothing_compared_fails_verify_and_compare(tmp_path, capsys):
    """Issue 46, item 6: pages whose outputs were cleared gave "0 quantities, 0 do not" and
    exit 0; a page with nothing to compare now fails, and so does a claim only the page
    executed elsewhere has."""
    argv = _demo_repository(tmp_path)
    assert reproduce.main(argv) == 0
    elsewhere = tmp_path / "other-clone-book"
    assert reproduce.main([*argv, "--output-dir", str(elsewhere)]) == 0
    capsys.readouterr()
    pages = [tmp_path / "book" / "demo" / "01_page.ipynb", elsewhere / "demo" / "01_page.ipynb"]
    for page in pages:
        nb = json.loads(page.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"] = []
        page.write_text(json.dumps(nb))
    assert reproduce.main([*argv, "--compare", str(elsewhere)]) == 1
    captured = capsys.readouterr()
    assert "nothing was compared" in captured.out and "nothing to compare" in captured.err
    assert verify.report_lines([]) == [
        "verify: nothing was compared (no claim record, table cell or figure): a failure"
    ]
    # A claim only the page executed elsewhere shows fails as well.
    claims = {"claims": [_claim(0.5, [0.4, 0.6])]}
    nb = json.loads(pages[1].read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"][-1]
    code["outputs"] = [{"output_type": "display_data", "metadata": {}, "data": {CLAIMS: claims}}]
    pages[1].write_text(json.dumps(nb))
    assert reproduce.main([*argv, "--compare", str(elsewhere)]) == 1
    assert "not in the committed page" in capsys.readouterr().out
