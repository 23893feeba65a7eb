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
        ValueError, match=r"unknown profile 'fast'.*\['smoke', 'default', 'paper'\]"
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
            "'fast', which is not a profile",
        ),
        ([{"slug": "a", "notebooks": [{"name": "x", "default": [1]}]}], "must be a mapping"),
        ([{"slug": "a", "colour": "red"}], r"unknown keys \['colour'\]"),
    ],
)
def test_bad_manifest_is_named(tmp_path, chapters, match):
    root = _repo(tmp_path, chapters)
    with pytest.raises(ValueError, match=match):
        reproduce.load_manifest(root / "notebooks" / "runs.yml")


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

    failed = nbformat.read(str(failed_out), as_version=4)
    assert failed.metadata["lmsim"]["status"] == "failed"
    times = json.loads((repo / "_build" / "default_times.json").read_text())
    assert times["demo/01_first"]["status"] == "ok"
    assert times["demo/02_second"]["status"] == "failed"
    assert not (repo / "book" / "other").exists()
    assert "wall time per notebook" in captured.out
    assert os.environ["LMSIM_ZOO_PROFILE"] == "caller-value"  # the runner sets no variable


def test_cli_errors_exit_2_and_list(repo):
    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "lmsim.reproduce", "--root", str(repo), *args],
            capture_output=True,
            text=True,
        )

    bad = cli("--profile", "fast")
    assert bad.returncode == 2 and "choose one of ['smoke', 'default', 'paper']" in bad.stderr
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
