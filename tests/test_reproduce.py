"""lmsim.reproduce: the papermill runner over notebooks/runs.yml, on a throwaway repository."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from lmsim import reproduce

TITLE = "# Demo chapter\n\nA paragraph about the claim."
PARAMS = (
    'n: int = 2  # a count\nlabel: str = "smoke-label"  # a label\n'
    'profile: str = "smoke"  # which profile ran this notebook\n'
    'zoo_profile: str = "smoke"  # zoo build'
)
BODY = (
    "import os\nprint('RESULT', n * 10, label, profile, zoo_profile, os.path.basename(os.getcwd()))"
)


def _notebook(path: Path, params: str = PARAMS, body: str = BODY, title: str = TITLE) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(title),
        nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(body),
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def _repo(tmp_path: Path, chapters: list) -> Path:
    (tmp_path / "notebooks").mkdir(exist_ok=True)
    manifest = {"profiles": {p: p for p in reproduce.PROFILES}, "chapters": chapters}
    (tmp_path / "notebooks" / "runs.yml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return tmp_path


@pytest.fixture
def repo(tmp_path):
    _notebook(tmp_path / "notebooks" / "demo" / "01_first.ipynb")
    _notebook(tmp_path / "notebooks" / "demo" / "02_second.ipynb")
    _notebook(tmp_path / "notebooks" / "other" / "01_only.ipynb")
    chapters = [
        {
            "slug": "demo",
            "title": "Demo",
            "notebooks": [
                {"name": "01_first", "default": {"n": 5}, "paper": {"n": 7, "label": "big"}},
                {"name": "02_second"},
            ],
        },
        {"slug": "other", "title": "Other", "notebooks": [{"name": "01_only"}]},
    ]
    return _repo(tmp_path, chapters)


def _plan(root, profile, **kwargs):
    manifest = reproduce.load_manifest(root / "notebooks" / "runs.yml")
    return reproduce.plan_runs(manifest, profile, root, **kwargs)


# ----------------------------------------------------------------------------- planning
def test_plan_merges_profile_overrides_and_passes_profile(repo):
    runs = {run.key: run for run in _plan(repo, "paper")}
    assert list(runs) == ["demo/01_first", "demo/02_second", "other/01_only"]
    paper = {"profile": "paper", "zoo_profile": "gpu"}
    assert runs["demo/01_first"].parameters == {"n": 7, "label": "big", **paper}
    assert runs["demo/02_second"].parameters == paper
    assert runs["demo/01_first"].output == repo / "_build" / "paper" / "demo" / "01_first.ipynb"


@pytest.mark.parametrize(
    "profile, out",
    [("smoke", "_build/smoke"), ("default", "book"), ("paper", "_build/paper")],
)
def test_output_folder_per_profile(repo, profile, out):
    (run, *_) = _plan(repo, profile)
    assert run.output == repo / out / "demo" / "01_first.ipynb"
    assert run.source == repo / "notebooks" / "demo" / "01_first.ipynb"


def test_smoke_overrides_nothing_and_output_dir_wins(repo, tmp_path):
    runs = _plan(repo, "smoke", only=["demo"], output_dir=tmp_path / "elsewhere")
    assert [run.parameters for run in runs] == [{"profile": "smoke"}, {"profile": "smoke"}]
    assert runs[0].output == tmp_path / "elsewhere" / "demo" / "01_first.ipynb"


def test_command_line_overrides_apply_where_declared(repo):
    runs = _plan(repo, "default", overrides={"label": "cli"})
    assert runs[0].parameters == {
        "n": 5,
        "label": "cli",
        "profile": "default",
        "zoo_profile": "default",
    }
    with pytest.raises(ValueError, match=r"\['nope'\] given with -p are declared by none"):
        _plan(repo, "default", overrides={"nope": 1})


def test_profile_not_passed_when_not_declared(tmp_path):
    _notebook(tmp_path / "notebooks" / "c" / "nb.ipynb", params="n: int = 1  # count")
    root = _repo(tmp_path, [{"slug": "c", "notebooks": [{"name": "nb", "default": {"n": 3}}]}])
    (run,) = _plan(root, "default")
    assert run.parameters == {"n": 3}


def test_unknown_profile_lists_profiles(repo):
    with pytest.raises(
        ValueError, match=r"unknown profile 'fast'.*\['smoke', 'default', 'paper', 'gpu'\]"
    ):
        _plan(repo, "fast")


def test_unknown_slug_lists_slugs(repo):
    with pytest.raises(
        ValueError, match=r"\['nope'\] in --only; the manifest has \['demo', 'other'\]"
    ):
        _plan(repo, "default", only=["nope"])


def test_undeclared_manifest_parameter_names_notebook_and_declared(tmp_path):
    _notebook(tmp_path / "notebooks" / "c" / "nb.ipynb")
    root = _repo(tmp_path, [{"slug": "c", "notebooks": [{"name": "nb", "default": {"m": 1}}]}])
    with pytest.raises(ValueError) as info:
        _plan(root, "default")
    message = str(info.value)
    assert "['m']" in message and "c/nb" in message
    assert "declared: ['label', 'n', 'profile', 'zoo_profile']" in message


def test_missing_notebook_names_path(tmp_path):
    root = _repo(tmp_path, [{"slug": "c", "notebooks": [{"name": "ghost"}]}])
    with pytest.raises(
        FileNotFoundError, match=r"c/ghost is listed .*/c/ghost.ipynb does not exist"
    ):
        _plan(root, "smoke")


@pytest.mark.parametrize(
    "chapters, match",
    [
        ([{"slug": "a"}, {"slug": "a"}], "appears twice"),
        ([{"title": "no slug"}], "with a `slug`"),
        ([{"slug": "a", "notebooks": [{"default": {}}]}], "with a `name`"),
        (
            [{"slug": "a", "notebooks": [{"name": "x", "fast": {}}]}],
            "'fast', which is neither a profile nor one of",
        ),
        ([{"slug": "a", "notebooks": [{"name": "x", "default": [1]}]}], "must be a mapping"),
        (
            [{"slug": "a", "notebooks": [{"name": "x", "default": "skp"}]}],
            r"'default' value of a/x must be a mapping .* or the string 'skip'.*got 'skp'",
        ),
        ([{"slug": "a", "notebooks": [{"name": "x", "paper": True}]}], "or the string 'skip'"),
        ([{"slug": "a", "colour": "red"}], r"unknown keys \['colour'\]"),
    ],
)
def test_bad_manifest_is_named(tmp_path, chapters, match):
    root = _repo(tmp_path, chapters)
    with pytest.raises(ValueError, match=match):
        reproduce.load_manifest(root / "notebooks" / "runs.yml")


# ------------------------------------------------------- one source, several pages; skip
@pytest.fixture
def sourced(repo):
    """``repo`` plus two pages of ``demo`` that run ``01_first.ipynb``: ``03_first_big``
    (its own default, skipped by paper) and ``04_paper_only`` (paper only)."""
    path = repo / "notebooks" / "runs.yml"
    manifest = yaml.safe_load(path.read_text())
    manifest["chapters"][0]["notebooks"] += [
        {"name": "03_first_big", "source": "01_first", "default": {"n": 9}, "paper": "skip"},
        {
            "name": "04_paper_only",
            "source": "01_first",
            "smoke": "skip",
            "default": "skip",
            "paper": {"n": 11, "label": "paper-only"},
        },
    ]
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return repo


def test_page_runs_its_source_with_its_own_parameters(sourced):
    runs = {run.key: run for run in _plan(sourced, "default")}
    assert list(runs) == ["demo/01_first", "demo/02_second", "demo/03_first_big", "other/01_only"]
    big = runs["demo/03_first_big"]
    assert big.name == "03_first_big"
    assert big.source == sourced / "notebooks" / "demo" / "01_first.ipynb"
    assert big.output == sourced / "book" / "demo" / "03_first_big.ipynb"
    assert big.parameters == {"n": 9, "profile": "default", "zoo_profile": "default"}
    assert runs["demo/01_first"].parameters["n"] == 5, "the source's own page is unchanged"


@pytest.mark.parametrize(
    "profile, pages",
    [
        ("smoke", ["01_first", "02_second", "03_first_big"]),
        ("default", ["01_first", "02_second", "03_first_big"]),
        ("paper", ["01_first", "02_second", "04_paper_only"]),
    ],
)
def test_skip_leaves_a_page_out_of_its_profile(sourced, profile, pages):
    runs = _plan(sourced, profile, only=["demo"])
    assert [run.name for run in runs] == pages
    if profile == "paper":
        assert runs[-1].parameters == {
            "n": 11,
            "label": "paper-only",
            "profile": "paper",
            "zoo_profile": "gpu",
        }
        assert runs[-1].source.name == "01_first.ipynb"


def test_only_a_skipped_page_is_an_error_naming_the_profile(sourced):
    with pytest.raises(
        ValueError,
        match=r"\['demo/04_paper_only'\] in --only are marked "
        r"`default: skip`.*choose another --profile",
    ):
        _plan(sourced, "default", only=["demo/04_paper_only"])
    (run,) = _plan(sourced, "paper", only=["demo/04_paper_only"])
    assert run.output == sourced / "_build" / "paper" / "demo" / "04_paper_only.ipynb"


def test_page_sources_and_helpers(sourced):
    manifest = reproduce.load_manifest(sourced / "notebooks" / "runs.yml")
    assert reproduce.page_sources(manifest) == {
        "demo/01_first": "demo/01_first",
        "demo/02_second": "demo/02_second",
        "demo/03_first_big": "demo/01_first",
        "demo/04_paper_only": "demo/01_first",
        "other/01_only": "other/01_only",
    }
    entry = {"name": "x", "default": "skip", "paper": {}}
    assert reproduce.entry_source(entry) == "x"
    assert reproduce.entry_source({**entry, "source": "y"}) == "y"
    assert reproduce.is_skipped(entry, "default") and not reproduce.is_skipped(entry, "paper")
    assert not reproduce.is_skipped(entry, "smoke")


def test_source_equal_to_its_name_is_accepted(repo):
    path = repo / "notebooks" / "runs.yml"
    path.write_text(
        path.read_text().replace("- name: 02_second", "- name: 02_second\n    source: 02_second")
    )
    manifest = reproduce.load_manifest(path)
    assert manifest["chapters"][0]["notebooks"][1]["source"] == "02_second"
    assert [run.source.name for run in _plan(repo, "default", only=["demo"])] == [
        "01_first.ipynb",
        "02_second.ipynb",
    ]


@pytest.mark.parametrize(
    "entry, match",
    [
        (
            {"name": "05_x", "source": "01_nope"},
            r"`source: 01_nope` of demo/05_x names no notebook: .*demo/01_nope\.ipynb does not "
            r"exist; notebooks of 'demo': \['01_first', '02_second'\]",
        ),
        (
            {"name": "05_x", "source": "01_first.ipynb"},
            r"give the stem without \.ipynb: `source: 01_first`",
        ),
        ({"name": "05_x", "source": "../other/01_only"}, "must be the file stem of a notebook"),
        ({"name": "05_x", "source": 3}, "must be the file stem of a notebook"),
        ({"name": "05_x", "source": None}, "must be the file stem of a notebook"),
        (
            {"name": "02_second", "source": "01_first"},
            r"page demo/02_second runs `source: 01_first`, but notebooks/demo/02_second\.ipynb "
            "is another source notebook",
        ),
    ],
)
def test_bad_source_is_named(repo, entry, match):
    path = repo / "notebooks" / "runs.yml"
    manifest = yaml.safe_load(path.read_text())
    notebooks = manifest["chapters"][0]["notebooks"]
    manifest["chapters"][0]["notebooks"] = [e for e in notebooks if e["name"] != entry["name"]]
    manifest["chapters"][0]["notebooks"].append(entry)
    path.write_text(yaml.safe_dump(manifest))
    with pytest.raises(ValueError, match=match):
        reproduce.load_manifest(path)


def test_toc_and_status_leave_out_default_skipped_pages(sourced):
    manifest = reproduce.load_manifest(sourced / "notebooks" / "runs.yml")
    for name in ("01_first", "03_first_big", "04_paper_only"):  # 04: a stale leftover
        _page(sourced / "book" / "demo" / f"{name}.ipynb")
    (chapter,) = reproduce.build_toc(manifest, sourced)["parts"][0]["chapters"]
    assert chapter == {
        "file": "book/demo/01_first",
        "sections": [{"file": "book/demo/03_first_big"}],
    }
    status = reproduce.chapter_status_markdown(manifest, sourced)
    assert "(2 of 3 notebooks executed; 1 more not run by the default profile)" in status
    manifest["chapters"][1]["notebooks"][0]["default"] = "skip"
    status = reproduce.chapter_status_markdown(manifest, sourced)
    assert "| Other | | listed, not run by the default profile |" in status
    written = reproduce.write_results(manifest, sourced)
    assert sourced / "book" / "demo" / "_costs.md" in written
    costs = (sourced / "book" / "demo" / "_costs.md").read_text()
    assert "03_first_big" in costs and "04_paper_only" not in costs


def _with_gpu_page(repo: Path) -> Path:
    """``repo`` plus ``demo/05_gpu``: ``01_first`` under its own title, run only by ``gpu``."""
    path = repo / "notebooks" / "runs.yml"
    manifest = yaml.safe_load(path.read_text())
    manifest["chapters"][0]["notebooks"].append(
        {
            "name": "05_gpu",
            "source": "01_first",
            "title": "First, at GPU scale",
            "default": "skip",
            "paper": "skip",
            "smoke": "skip",
            "gpu": {"n": 13},
        }
    )
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return repo


def test_gpu_profile_runs_only_the_pages_declaring_it_into_the_book(repo):
    _with_gpu_page(repo)
    (run,) = _plan(repo, "gpu")
    assert run.key == "demo/05_gpu" and run.title == "First, at GPU scale"
    assert run.output == repo / "book" / "demo" / "05_gpu.ipynb"
    assert run.parameters == {"n": 13, "profile": "gpu", "zoo_profile": "default"}
    for profile in ("smoke", "default", "paper"):
        assert "demo/05_gpu" not in [r.key for r in _plan(repo, profile)]
    manifest = reproduce.load_manifest(repo / "notebooks" / "runs.yml")
    entries = {e["name"]: e for e in manifest["chapters"][0]["notebooks"]}
    assert reproduce.book_profile(entries["05_gpu"]) == "gpu"
    assert reproduce.book_profile(entries["01_first"]) == "default"
    assert reproduce.is_skipped(entries["01_first"], "gpu")
    _page(repo / "book" / "demo" / "01_first.ipynb")
    _page(repo / "book" / "demo" / "05_gpu.ipynb")
    (chapter,) = reproduce.build_toc(manifest, repo)["parts"][0]["chapters"]
    assert chapter["sections"] == [{"file": "book/demo/05_gpu"}]
    assert "(2 of 3 notebooks executed)" in reproduce.chapter_status_markdown(manifest, repo)


@pytest.mark.parametrize("title", ["", "two\nlines", 3])
def test_bad_title_is_named(repo, title):
    path = _with_gpu_page(repo) / "notebooks" / "runs.yml"
    manifest = yaml.safe_load(path.read_text())
    manifest["chapters"][0]["notebooks"][-1]["title"] = title
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    with pytest.raises(ValueError, match="`title` of demo/05_gpu must be one line"):
        reproduce.load_manifest(path)


def test_provenance_replaces_the_title_of_a_renamed_page(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Source title\n\nIntro text."),
        nbformat.v4.new_code_cell("x = 1"),
    ]
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, str(path))
    info = {
        "profile": "gpu",
        "parameters": {},
        "versions": {},
        "device": "cuda",
        "wall_time_s": 1.0,
        "date": "2026-11-26 16:00 UTC",
        "title": "Page title",
    }
    reproduce.add_provenance(path, info)
    cells = nbformat.read(str(path), as_version=4).cells
    assert cells[0].source == "# Page title\n\nIntro text."
    assert "Executed with profile `gpu`" in cells[1].source


def test_add_provenance_drops_papermills_machine_paths(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# T")]
    nb.metadata["papermill"] = {
        "input_path": "/work/main/notebooks/c/p.ipynb",
        "output_path": "/work/main/book/c/.p.running1.ipynb",
        "parameters": {"n": 1},
    }
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, str(path))
    info = {"profile": "default", "parameters": {}, "versions": {}, "device": "cpu",
            "wall_time_s": 1.0, "date": "2026-11-26 16:00 UTC"}  # fmt: skip
    reproduce.add_provenance(path, info)
    meta = nbformat.read(str(path), as_version=4).metadata
    assert meta["papermill"] == {"parameters": {"n": 1}}
    assert "/work/" not in path.read_text()


def test_list_names_sources_and_skipped_pages(sourced, capsys):
    assert reproduce.main(["--root", str(sourced), "--list", "--profile", "default"]) == 0
    out = capsys.readouterr().out
    assert "    03_first_big  (runs 01_first.ipynb)  default: {'n': 9}\n" in out
    assert (
        "    04_paper_only  (runs 01_first.ipynb)  default: skip (not run under this profile)\n"
        in out
    )
    assert "    02_second\n" in out
    assert reproduce.main(["--root", str(sourced), "--list", "--profile", "paper"]) == 0
    out = capsys.readouterr().out
    assert "03_first_big  (runs 01_first.ipynb)  paper: skip (not run under this profile)" in out
    assert "04_paper_only  (runs 01_first.ipynb)  paper: {'n': 11, 'label': 'paper-only'}" in out


def test_main_executes_a_page_from_its_source(sourced, capsys):
    common = ["--profile", "default", "--root", str(sourced), "--no-progress"]
    assert reproduce.main([*common, "--only", "demo/03_first_big", "-p", "label", "x"]) == 0
    page = nbformat.read(str(sourced / "book" / "demo" / "03_first_big.ipynb"), as_version=4)
    printed = "".join(
        o.get("text", "") for c in page.cells if c.cell_type == "code" for o in c.outputs
    )
    # n from the page's own entry, the kernel in the source's folder
    assert "RESULT 90 x default default demo" in printed
    meta = page.metadata["lmsim"]
    assert meta["source"] == "notebooks/demo/01_first.ipynb"
    assert meta["page"] == "demo/03_first_big"
    assert "executes the source notebook `notebooks/demo/01_first.ipynb`" in page.cells[1].source
    assert not (sourced / "book" / "demo" / "01_first.ipynb").exists()
    times = json.loads((sourced / "_build" / "default_times.json").read_text())
    assert times["demo/03_first_big"]["output"] == "book/demo/03_first_big.ipynb"


def test_main_says_which_pages_a_profile_skips(sourced, capsys):
    path = sourced / "notebooks" / "runs.yml"
    manifest = yaml.safe_load(path.read_text())
    manifest["chapters"][1]["notebooks"][0]["default"] = "skip"
    path.write_text(yaml.safe_dump(manifest))
    assert reproduce.main(["--root", str(sourced), "--only", "other"]) == 0
    out = capsys.readouterr().out
    assert "not run under profile 'default' (`default: skip` in notebooks/runs.yml): " in out
    assert "other/01_only\n" in out and "nothing to do" in out
    assert not (sourced / "book").exists()


def test_empty_manifest_plans_nothing(tmp_path):
    root = _repo(tmp_path, [])
    assert _plan(root, "default") == []
    assert reproduce.build_toc(reproduce.load_manifest(root / "notebooks/runs.yml"), root) == {
        "format": "jb-book",
        "root": "book/intro",
    }


# ---------------------------------------------------------------------------------- toc
def _page(path: Path, status: str | None = "ok") -> None:
    """An executed page as the runner writes it (provenance status), or without any."""
    meta = {} if status is None else {"lmsim": {"status": status}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": [], "metadata": meta}))


def test_toc_lists_only_chapters_with_executed_pages(repo):
    manifest = reproduce.load_manifest(repo / "notebooks" / "runs.yml")
    _page(repo / "book" / "demo" / "02_second.ipynb")
    toc = reproduce.build_toc(manifest, repo)
    assert toc["parts"] == [{"caption": "Chapters", "chapters": [{"file": "book/demo/02_second"}]}]
    (repo / "book" / "demo" / "index.md").write_text("# Demo\n")
    _page(repo / "book" / "demo" / "01_first.ipynb")
    toc = reproduce.build_toc(manifest, repo)
    (chapter,) = toc["parts"][0]["chapters"]
    assert chapter == {
        "file": "book/demo/index",
        "sections": [{"file": "book/demo/01_first"}, {"file": "book/demo/02_second"}],
    }
    path = reproduce.write_toc(manifest, repo)
    assert yaml.safe_load(path.read_text()) == toc
    status = (repo / "book" / "_chapters.md").read_text()
    assert "{doc}`Demo </book/demo/index>`" in status and "2 of 2 notebooks executed" in status
    assert "| Other | | listed, not yet executed |" in status
    assert "| Similarity analysis of contextual word representations |" in status
    assert "planned" in status


@pytest.mark.parametrize("status", ["failed", None, "half"])
def test_toc_skips_pages_without_complete_provenance(repo, status):
    manifest = reproduce.load_manifest(repo / "notebooks" / "runs.yml")
    _page(repo / "book" / "demo" / "01_first.ipynb")
    second = repo / "book" / "demo" / "02_second.ipynb"
    if status == "half":  # what a killed writer could leave
        second.write_text('{"cells": [')
    else:
        _page(second, status)
    (chapter,) = reproduce.build_toc(manifest, repo)["parts"][0]["chapters"]
    assert chapter == {"file": "book/demo/01_first"}


# --------------------------------------------------------------------------- provenance
def test_add_provenance_after_title_and_replaces_previous(tmp_path):
    path = _notebook(tmp_path / "nb.ipynb")
    info = {
        "profile": "default",
        "parameters": {"n": 5, "models": ["a", "b"]},
        "versions": {"python": "3.11", "torch": "2.13.0"},
        "device": "cpu (2 cores)",
        "wall_time_s": 75.0,
        "date": "2025-01-01 10:00 UTC",
        "source": "notebooks/x/nb.ipynb",
        "status": "ok",
    }
    reproduce.add_provenance(path, info)
    reproduce.add_provenance(path, {**info, "wall_time_s": 3.0})
    nb = nbformat.read(str(path), as_version=4)
    assert nb.metadata["lmsim"]["wall_time_s"] == 3.0
    tagged = [c for c in nb.cells if reproduce.PROVENANCE_TAG in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and nb.cells[1] is tagged[0]
    text = tagged[0].source
    assert text.startswith("Executed with profile `default` on 2025-01-01 10:00 UTC in 3.0 s")
    assert "`models=['a', 'b']`" in text and "torch 2.13.0" in text and "cpu (2 cores)" in text
    assert [c.cell_type for c in nb.cells] == ["markdown", "markdown", "code", "code"]


def test_provenance_text_marks_failures_and_long_times():
    info = {
        "profile": "paper",
        "parameters": {},
        "versions": {"python": "3.11"},
        "device": "cuda (H100)",
        "wall_time_s": 3725.0,
        "date": "d",
        "status": "failed",
    }
    text = reproduce.provenance_text(info)
    assert "in 1 h 2 min (cuda (H100)) **(execution FAILED)**; parameters: none" in text
    assert "injected by papermill" not in text, "no overrides: nothing to explain"
    explained = reproduce.provenance_text({**info, "overrides": {"n": 5}})
    assert "the cell after it, injected by papermill, sets this profile's values" in explained


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(9.54, "9.5 s"), (59.94, "59.9 s"), (59.96, "1 min 0 s"), (119.6, "2 min 0 s"),
     (3599.6, "1 h 0 min"), (8040.0, "2 h 14 min")],
)  # fmt: skip
def test_wall_times_round_to_the_second_before_splitting(seconds, text):
    """A verify run printed "1 min 60 s" for 119.6 s: seconds were rounded after divmod."""
    from lmsim.reproduce._provenance import _format_seconds

    assert _format_seconds(seconds) == text


# ----------------------------------------------------------------------- execution (kernel)
def test_main_executes_default_profile_with_provenance_and_times(repo, capsys, monkeypatch):
    monkeypatch.setenv("LMSIM_ZOO_PROFILE", "caller-value")
    _notebook(
        repo / "notebooks" / "demo" / "02_second.ipynb",
        body="raise RuntimeError('boom in the notebook')",
    )
    argv = ["--profile", "default", "--only", "demo", "--root", str(repo), "--no-progress"]
    status = reproduce.main([*argv, "-p", "label", "from-cli"])
    captured = capsys.readouterr()
    assert status == 1
    failed_out = repo / "_build" / "failed" / "default" / "demo" / "02_second.ipynb"
    assert "notebooks/demo/02_second.ipynb" in captured.err and str(failed_out) in captured.err
    assert not (repo / "book" / "demo" / "02_second.ipynb").exists(), "no page from a failure"
    assert "no page written" in captured.err

    page = nbformat.read(str(repo / "book" / "demo" / "01_first.ipynb"), as_version=4)
    printed = "".join(
        o.get("text", "") for c in page.cells if c.cell_type == "code" for o in c.outputs
    )
    # n from the profile's overrides, label from -p, the zoo profile passed as a parameter
    # from the run's profile (an environment variable is not read), cwd = the source folder
    assert "RESULT 50 from-cli default caller-value demo" not in printed
    assert "RESULT 50 from-cli default default demo" in printed
    meta = page.metadata["lmsim"]
    assert meta["profile"] == "default" and meta["status"] == "ok"
    expected = {"n": 5, "label": "from-cli", "profile": "default", "zoo_profile": "default"}
    assert meta["parameters"] == expected
    assert meta["overrides"] == expected
    assert meta["source"] == "notebooks/demo/01_first.ipynb"
    assert set(meta["versions"]) == {"python", "lmsim", "torch", "transformers", "numpy"}
    assert meta["wall_time_s"] > 0 and meta["device"] and meta["date"]
    assert reproduce.PROVENANCE_TAG in page.cells[1].metadata["tags"]
    parameter_cells = [
        c
        for c in page.cells
        if {"parameters", reproduce.INJECTED_TAG} & set(c.metadata.get("tags", []))
    ]
    assert len(parameter_cells) == 2, "the notebook's and papermill's"
    assert all(reproduce.FOLD_TAG in c.metadata["tags"] for c in parameter_cells), "folded"
    if meta["device"].startswith("cpu"):
        import torch

        assert torch.backends.cpu.get_cpu_capability() in meta["device"]
        assert "thread" in meta["device"]

    failed = nbformat.read(str(failed_out), as_version=4)
    assert failed.metadata["lmsim"]["status"] == "failed"
    times = json.loads((repo / "_build" / "default_times.json").read_text())
    assert times["demo/01_first"]["status"] == "ok"
    assert times["demo/02_second"]["status"] == "failed"
    assert not (repo / "book" / "other").exists()
    assert "wall time per notebook" in captured.out
    assert os.environ["LMSIM_ZOO_PROFILE"] == "caller-value"  # the runner sets no variable


def test_kernel_start_up_log_stays_off_the_terminal(repo, capfd):
    """ipykernel 7 logs a warning on every start (unencrypted local TCP sockets) to the
    terminal; the runner starts kernels at log level ERROR, cells' own output unchanged."""
    argv = ["--profile", "default", "--only", "demo/01_first", "--root", str(repo)]
    assert reproduce.main([*argv, "--no-progress"]) == 0
    captured = capfd.readouterr()
    assert "IPKernelApp" not in captured.err and "without encryption" not in captured.err
    assert "wall time per notebook" in captured.out


def test_cli_errors_exit_2_and_list(repo):
    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "lmsim.reproduce", "--root", str(repo), *args],
            capture_output=True,
            text=True,
        )

    bad = cli("--profile", "fast")
    assert (
        bad.returncode == 2 and "choose one of ['smoke', 'default', 'paper', 'gpu']" in bad.stderr
    )
    bad = cli("--only", "nope")
    assert bad.returncode == 2 and "unknown chapter slug(s) or page(s) ['nope']" in bad.stderr
    listing = cli("--list", "--profile", "paper")
    assert listing.returncode == 0 and "01_first  paper: {'n': 7, 'label': 'big'}" in listing.stdout


# ------------------------------------------------------------------- atomic page writes
def _outputs(path: Path) -> int:
    nb = nbformat.read(str(path), as_version=4)
    return sum(len(c.outputs) for c in nb.cells if c.cell_type == "code")


def test_failed_rerun_keeps_the_previous_page(repo, capsys):
    argv = ["--profile", "default", "--only", "other", "--root", str(repo), "--no-progress"]
    assert reproduce.main(argv) == 0
    page = repo / "book" / "other" / "01_only.ipynb"
    good = page.read_bytes()
    _notebook(repo / "notebooks" / "other" / "01_only.ipynb", body="raise RuntimeError('boom')")
    capsys.readouterr()
    assert reproduce.main(argv) == 1
    err = capsys.readouterr().err
    assert page.read_bytes() == good, "the good page was replaced by a failed run"
    assert f"kept the previous page {page}" in err and "RuntimeError" in err
    failed = repo / "_build" / "failed" / "default" / "other" / "01_only.ipynb"
    assert reproduce.page_status(failed) == "failed" and "boom" in failed.read_text()
    assert not list(page.parent.glob(".*running*")), "no temporary left behind"
    # A later success replaces the page and clears the failed copy.
    _notebook(repo / "notebooks" / "other" / "01_only.ipynb")
    assert reproduce.main(argv) == 0 and not failed.exists()


def test_killed_run_leaves_the_previous_page_intact(repo):
    import signal
    import time

    argv = ["--profile", "default", "--only", "other", "--root", str(repo), "--no-progress"]
    assert reproduce.main(argv) == 0
    page = repo / "book" / "other" / "01_only.ipynb"
    good = page.read_bytes()
    marker = repo / "started"
    _notebook(
        repo / "notebooks" / "other" / "01_only.ipynb",
        body=f"import pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(60)",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "lmsim.reproduce", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 120
        while not marker.exists() and time.time() < deadline:
            time.sleep(0.2)
        assert marker.exists(), "the notebook never started"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert page.read_bytes() == good
    assert reproduce.page_status(page) == "ok"
    manifest = reproduce.load_manifest(repo / "notebooks" / "runs.yml")
    assert reproduce.build_toc(manifest, repo)["parts"][0]["chapters"] == [
        {"file": "book/other/01_only"}
    ]


# ----------------------------------------------- command-line errors before any cell runs
@pytest.mark.parametrize(
    "extra, pattern",
    [
        (
            ["-p", "n", "many"],
            r"parameter `n` of .*01_first\.ipynb is declared `int` but got 'many'",
        ),
        (["-p", "n", "2.5"], r"`n` .* declared `int` but got 2\.5 \(float\)"),
        (["-p", "n", "true"], r"`n` .* declared `int` but got True \(bool\)"),
        (["-p", "label", "[a, b]"], r"`label` .* declared `str` but got \['a', 'b'\]"),
        (["-p", "n", "[1, 2"], r"-p n '\[1, 2': the value is not valid YAML"),
        (["--output-dir", "FILE"], r"output folder .*FILE.* is a file"),
    ],
)
def test_bad_command_lines_exit_2_with_one_line(repo, capsys, extra, pattern):
    (repo / "FILE").write_text("not a folder")
    extra = [str(repo / "FILE") if a == "FILE" else a for a in extra]
    argv = ["--profile", "default", "--only", "demo", "--root", str(repo), *extra]
    assert reproduce.main(argv) == 2
    err = capsys.readouterr().err
    assert re.search(pattern, err), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (repo / "book").exists(), "nothing ran"


def test_manifest_type_errors_are_checked_too(repo, capsys):
    path = repo / "notebooks" / "runs.yml"
    path.write_text(path.read_text().replace("n: 5", "n: five"))
    assert reproduce.main(["--profile", "default", "--root", str(repo)]) == 2
    assert "`n` of" in capsys.readouterr().err


def test_broken_manifest_yaml_is_one_line_in_a_subprocess(repo):
    (repo / "notebooks" / "runs.yml").write_text("chapters:\n  - slug: a\n   bad: [\n")
    out = subprocess.run(
        [sys.executable, "-m", "lmsim.reproduce", "--root", str(repo), "--list"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert re.search(r"runs\.yml' is not valid YAML at line \d+", out.stderr), out.stderr


def test_only_selects_single_pages(repo):
    runs = _plan(repo, "default", only=["demo/02_second"])
    assert [run.output.name for run in runs] == ["02_second.ipynb"]
    both = _plan(repo, "default", only=["other", "demo/01_first"])
    assert [f"{r.output.parent.name}/{r.output.stem}" for r in both] == [
        "demo/01_first",
        "other/01_only",
    ]
    with pytest.raises(ValueError, match=r"\['demo/03_none'\] in --only.*slug/name"):
        _plan(repo, "default", only=["demo/03_none"])
