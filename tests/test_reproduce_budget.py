"""The plan while pages run: the whole paper book fits the default machine's disk by
releasing scratch entries, a page that does not fit is refused before its kernel starts,
and only whole lmsim entries a page created are ever released."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lmsim import reproduce
from lmsim._io import RUN_ENV, entry_dir, write_entry_file
from lmsim.reproduce import _budget
from lmsim.reproduce._budget import PlanError, RunBudget, check_plan, release_entries
from lmsim.reproduce._estimates import plan_resources
from lmsim.reproduce._resources import (
    GB,
    Estimate,
    Machine,
    disk_timeline,
    needs_release,
    problems,
    total_disk,
)

ROOT = Path(__file__).resolve().parents[1]


def _runs(profile: str, only=None):
    manifest = reproduce.load_manifest(ROOT / "notebooks" / "runs.yml")
    return reproduce.plan_runs(manifest, profile, ROOT, only)


def _est(page, kept=0.0, scratch=0.0, downloads=None):
    est = Estimate(page, disk_output=kept + scratch, downloads=dict(downloads or {}))
    if scratch:
        est.scratch_entries([f"x/{page}-*"], scratch)
    return est


def test_timeline_counts_downloads_once_and_releases_earlier_scratch():
    a = _est("a", kept=1 * GB, scratch=10 * GB, downloads={"hub": 5 * GB})
    b = _est("b", kept=2 * GB, downloads={"hub": 5 * GB, "other": 1 * GB})
    c = _est("c", scratch=4 * GB)
    kept = disk_timeline([a, b, c])
    assert kept == pytest.approx([16 * GB, 19 * GB, 23 * GB])
    assert total_disk([a, b, c]) == pytest.approx(23 * GB)
    freed = disk_timeline([a, b, c], release=True)
    assert freed == pytest.approx([16 * GB, 9 * GB, 13 * GB])  # a's 10 GB gone after a
    small = Machine(disk_gb=20)
    assert needs_release([a, b, c], small) and not needs_release([a, b, c], Machine())
    assert problems([a, b, c], small) == []  # auto: released, 16 GB at most
    (line,) = problems([a, b, c], small, release=False)
    assert "23 GB > 20 GB while c runs" in line


def test_whole_paper_book_fits_the_default_machine(capsys):
    """Issue 31: 83 GB if every page keeps its cache; the RegMean fine-tunes, Table 1's and
    the two-tower runs released after their pages bring the peak under 64 GB."""
    assert reproduce.main(["--root", str(ROOT), "--profile", "paper", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "scratch released" in out and "NO:" not in out
    estimates = plan_resources(_runs("paper"), Machine())
    assert total_disk(estimates) > 64 * GB  # what keeping everything would need
    assert total_disk(estimates, release=True) <= 64 * GB
    assert (
        reproduce.main(["--root", str(ROOT), "--profile", "paper", "--plan", "--keep-cache"]) == 1
    )
    assert "does not fit: all pages: disk" in capsys.readouterr().err


def test_default_profile_releases_nothing():
    estimates = plan_resources(_runs("default"), Machine())
    assert not needs_release(estimates, Machine())


def _entry(folder: Path) -> Path:
    with entry_dir(folder) as tmp:
        (tmp / "weights.bin").write_bytes(b"x" * 100)
    return folder


def test_release_only_whole_lmsim_entries_created_by_the_page(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    ft = tmp_path / "finetune"
    old = _entry(ft / "regmean-old-1")  # there before the page: kept
    est = _est("p", scratch=1 * GB)
    est.scratch = ("finetune/regmean-*", "stats/*")
    budget = RunBudget(Machine(), [est, _est("q")], release=True)
    before = budget.before(0)
    assert before == {old}
    monkeypatch.setenv(RUN_ENV, budget.run_id)  # what the run's kernels record
    new = _entry(ft / "regmean-new-2")
    foreign = ft / "regmean-user"  # no lmsim marker: never touched
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    unfinished = ft / "regmean-half"
    unfinished.mkdir()
    (unfinished / "lmsim_entry.json").write_text(json.dumps({"lmsim": "lmsim cache entry"}))
    other = _entry(ft / "wu-table1-3")  # another page's entry: not in the globs
    stats = tmp_path / "stats"
    stats.mkdir()
    grams = stats / "g.safetensors"
    write_entry_file(grams, lambda p: p.write_bytes(b"y" * 50))
    line = budget.after(0, before)
    assert "released 2 scratch cache entries of p" in line
    assert not new.exists() and not grams.exists()
    assert not (stats / "g.safetensors.lmsim.json").exists()
    assert old.exists() and foreign.exists() and unfinished.exists() and other.exists()


def test_nothing_is_released_after_the_last_page_or_when_keeping(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    est = _est("p", scratch=1 * GB)
    est.scratch = ("finetune/*",)
    for budget, index in (
        (RunBudget(Machine(), [est], True), 0),
        (RunBudget(Machine(), [est, _est("q")], False), 0),
    ):
        before = budget.before(index)
        made = _entry(tmp_path / "finetune" / f"e{len(before)}-{budget.release}")
        assert budget.after(index, before) is None and made.exists()


def test_release_entries_leaves_a_link_alone(tmp_path):
    target = _entry(tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert release_entries([link]) == ([], 0.0)
    assert target.exists()


def test_runner_refuses_a_page_that_does_not_fit_before_its_kernel(tmp_path, capsys, monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("the refused page was executed")

    monkeypatch.setattr(reproduce._cli, "execute_run", boom)
    args = ["--root", str(ROOT), "--profile", "paper", "--only", "jin2023_regmean/01_merging"]
    args += ["--machine", "ram_gb=64", "--output-dir", str(tmp_path)]
    assert reproduce.main(args) == 1
    err = capsys.readouterr().err
    assert "REFUSED jin2023_regmean/01_merging before it started" in err
    assert "ram" in err and "change `cache_stats`" in err and "--no-plan-check" in err


def test_check_plan_names_page_resource_and_parameter():
    page = "jin2023_regmean/01_merging"
    run = _runs("paper", [page])[0]
    machine = Machine(ram_gb=64, disk_gb=200)
    with pytest.raises(PlanError, match=r"01_merging: ram .* change `cache_stats`"):
        check_plan(page, run.parameters, machine)
    assert check_plan(page, {**run.parameters, "cache_stats": True}, machine).ram < 64 * GB
    assert check_plan(page, {"not_a_parameter": 1}, "ram_gb=64").page == page  # defaults fit


def test_cache_root_follows_lmsim_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    assert _budget.cache_root() == tmp_path


def test_runner_releases_a_pages_scratch_when_the_run_needs_it(tmp_path, capsys, monkeypatch):
    """A run that would not fit the disk keeping everything: after each page but the last,
    the whole entries it created in its scratch globs are deleted; --keep-cache keeps them."""
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "cache"))
    made = {}

    def fake_execute(run, *args, **kwargs):
        folder = "finetune/regmean-" if "regmean" in run.slug else "twotower/paper/"
        made[run.key] = _entry(tmp_path / "cache" / f"{folder}{run.name}-0")
        return reproduce.RunResult(run, True, 0.1)

    monkeypatch.setattr(reproduce._cli, "execute_run", fake_execute)
    args = ["--root", str(ROOT), "--profile", "paper", "--output-dir", str(tmp_path / "out")]
    args += ["--only", "jin2023_regmean", "he2022_twotower", "--machine", "disk_gb=40"]
    assert reproduce.main(args) == 0
    out = capsys.readouterr().out
    assert "scratch cache entries are released" in out
    assert out.count("released 1 scratch cache entry") == 2
    regmean = [k for k in made if "regmean" in k]
    assert len(regmean) == 2 and not any(made[k].exists() for k in regmean)
    assert made["he2022_twotower/01_preference"].exists()  # the last page's stay
    made.clear()
    assert reproduce.main([*args, "--keep-cache"]) == 1  # refused: 58 GB kept > 40 GB
    err = capsys.readouterr().err
    assert "REFUSED" in err and "in use while it runs" in err


def test_machine_this_is_the_detected_one(tmp_path, monkeypatch):
    from lmsim.reproduce._resources import load_machine

    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "not-yet"))
    here = load_machine("this")
    assert here.name.startswith("this machine") and here.ram_gb > 0 and here.disk_gb > 0


# ------------------------------------------------------- issue 46: only this run's entries
def _run_entry(folder: Path, run: str | None, monkeypatch) -> Path:
    """A whole entry written as if by the run ``run`` (None: outside any run)."""
    if run is None:
        monkeypatch.delenv(RUN_ENV, raising=False)
    else:
        monkeypatch.setenv(RUN_ENV, run)
    made = _entry(folder)
    monkeypatch.delenv(RUN_ENV, raising=False)
    return made


def test_release_deletes_only_whole_entries_this_run_wrote_and_nothing_else(tmp_path, monkeypatch):
    """Issue 46, item 2: an entry another run finished meanwhile, a user's byte-identical
    copy of an entry with their own file inside, and extra files a user put into an entry
    this run wrote are never deleted; only this run's untouched entries are."""
    import shutil

    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    est = _est("p", scratch=1 * GB)
    est.scratch = ("finetune/regmean-*",)
    budget = RunBudget(Machine(), [est, _est("q")], release=True)
    before = budget.before(0)
    ft = tmp_path / "finetune"
    mine = _run_entry(ft / "regmean-mine", budget.run_id, monkeypatch)
    theirs = _run_entry(ft / "regmean-theirs", "another-run", monkeypatch)
    no_run = _run_entry(ft / "regmean-no-run", None, monkeypatch)
    copy = ft / "regmean-mine-copy"
    shutil.copytree(_run_entry(ft / "regmean-orig", budget.run_id, monkeypatch), copy)
    (copy / "my-notes.txt").write_text("mine")
    touched = _run_entry(ft / "regmean-touched", budget.run_id, monkeypatch)
    (touched / "results.csv").write_text("a user's file inside an entry")
    line = budget.after(0, before)
    assert "released 2 scratch cache entries of p" in line
    assert not mine.exists() and not (ft / "regmean-orig").exists()
    assert theirs.exists() and no_run.exists()
    assert (copy / "my-notes.txt").read_text() == "mine" and (copy / "weights.bin").is_file()
    assert (touched / "results.csv").is_file() and (touched / "weights.bin").is_file()


def test_release_waits_for_no_run_and_spares_a_concurrent_runs_entries(tmp_path, monkeypatch):
    """Issue 46, item 2, end to end with two processes sharing the cache: while a second
    run (another process) holds the runs' lock and finishes an entry in this page's
    scratch globs, this run releases nothing; once it is gone, only this run's entries go."""
    import subprocess
    import sys

    cache = tmp_path / "cache"
    monkeypatch.setenv("LMSIM_CACHE", str(cache))
    est = _est("p", scratch=1 * GB)
    est.scratch = ("finetune/regmean-*",)
    budget = RunBudget(Machine(), [est, _est("q")], release=True)
    before = budget.before(0)
    script = (
        "import sys, uuid\n"
        "from lmsim._io import entry_dir\n"
        "from lmsim.reproduce._budget import run_session\n"
        "from lmsim._cache import cache_root\n"
        "with run_session(uuid.uuid4().hex):\n"
        "    with entry_dir(cache_root() / 'finetune' / 'regmean-other') as tmp:\n"
        "        (tmp / 'weights.bin').write_bytes(b'o' * 100)\n"
        "    print('ready', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LMSIM_CACHE": str(cache)}
    other = subprocess.Popen(
        [sys.executable, "-c", script],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert other.stdout.readline().strip() == "ready"
        from lmsim.reproduce._budget import run_session

        with run_session(budget.run_id):
            mine = _entry(cache / "finetune" / "regmean-mine")
            line = budget.after(0, before)
            assert "another lmsim run is using the cache" in line
            assert mine.exists() and (cache / "finetune" / "regmean-other").exists()
            other.stdin.write("\n")
            other.stdin.flush()
            assert other.wait(timeout=60) == 0
            line = budget.after(0, before)
        assert "released 1 scratch cache entry of p" in line
        assert (
            not mine.exists() and (cache / "finetune" / "regmean-other" / "weights.bin").is_file()
        )
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()


def test_release_never_reaches_outside_the_cache(tmp_path, monkeypatch):
    """Issue 46, item 12: a `profile` with '..' made the two-tower page's scratch glob reach
    outside the cache; the runner refuses it, and a glob that escapes releases nothing."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("LMSIM_CACHE", str(cache))
    est = _est("p", scratch=1 * GB)
    est.scratch = ("twotower/../../outside/*",)
    budget = RunBudget(Machine(), [est, _est("q")], release=True)
    before = budget.before(0)
    monkeypatch.setenv(RUN_ENV, budget.run_id)
    outside = _entry(tmp_path / "outside" / "run-1")
    monkeypatch.delenv(RUN_ENV)
    cache.mkdir(exist_ok=True)
    assert budget.after(0, before) is None and outside.exists()
    # The page's plan and its runs' cache folder refuse such a profile.
    page = "he2022_twotower/01_preference"
    with pytest.raises(ValueError, match=r"parameter `profile`.*'\.\./\.\./outside'"):
        check_plan(page, {"profile": "../../outside"}, Machine(disk_gb=500))
    from lmsim import twotower as tt
    from lmsim._cache import cache_dir

    with pytest.raises(ValueError, match=r"plain folder name.*'\.\.'"):
        cache_dir("twotower", "..")
    spec = tt.RunSpec("elmo-s0", tt.TowerConfig("elmo", hidden=8, layers=2, heads=2), seed=0)
    with pytest.raises(ValueError, match=r"plain folder name.*'\.\./\.\./outside'"):
        tt.run_dir(spec, tt.TwoTowerSettings(), "../../outside")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "outside"]
