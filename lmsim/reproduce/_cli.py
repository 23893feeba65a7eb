"""The command line, ``python -m lmsim.reproduce``."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from lmsim._dryrun import DRY_RUN_NOTE
from lmsim._io import write_atomic
from lmsim.reproduce._budget import run_budget, run_session
from lmsim.reproduce._dryrun import dry_run_runs, enter_dry_run
from lmsim.reproduce._environment import environment_info, lock_warning
from lmsim.reproduce._execute import RunResult, _relative, execute_run, failed_path
from lmsim.reproduce._manifest import (
    MANIFEST,
    OPT_IN_PROFILES,
    PROFILES,
    SKIP,
    _check_profile,
    entry_source,
    find_root,
    is_skipped,
    load_manifest,
)
from lmsim.reproduce._pages import _executed_pages
from lmsim.reproduce._plan import plan_runs
from lmsim.reproduce._provenance import _format_seconds
from lmsim.reproduce._resources import load_machine
from lmsim.reproduce._schedule import expected_seconds, run_pages, schedule_of
from lmsim.reproduce._toc import write_toc
from lmsim.reproduce._verify import checks_json, compare_pages, read_page, report_lines

REFUSED = "refused by its plan"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lmsim.reproduce",
        description="Execute the book's notebooks (notebooks/runs.yml) with papermill.",
    )
    parser.add_argument(
        "--profile",
        default="default",
        help=f"one of {list(PROFILES)} (default: default, the book's pages)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        action="extend",
        metavar="SLUG[/PAGE]",
        help="run only these chapters, or single pages given as slug/name",
    )
    parser.add_argument("--output-dir", type=Path, help="write executed notebooks here instead")
    parser.add_argument("--root", type=Path, help="repository root (found from the cwd)")
    parser.add_argument(
        "--list",
        action="store_true",
        help="list chapters and pages (their source notebooks, the --profile's parameters "
        "or skip), exit",
    )
    parser.add_argument(
        "--write-toc", action="store_true", help="write _toc.yml from the manifest and exit"
    )
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="override a parameter in every selected notebook that declares it; VALUE is "
        "YAML (e.g. -p models '[minilm-l6, smollm2-135m]')",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="re-execute the selected pages into _build/verify/<profile>/ and compare every "
        "number of their claim records, tables and figures with the committed pages, each "
        "by its own tolerance (docs/reproducibility.md; a page's `verify` in "
        "notebooks/runs.yml adds what its records cannot say); exit 1 on any disagreement",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="DIR",
        help="compare the executed pages under DIR (<slug>/<name>.ipynb: another clone's "
        "book/, an --output-dir) with the committed pages as --verify does, executing nothing",
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print each selected page's estimated peak RAM, GPU memory, disk and time on "
        "--machine without running anything; exit 1 naming the page and the parameter to "
        "change when one does not fit",
    )
    parser.add_argument(
        "--machine",
        metavar="FILE|KEY=VALUE,...",
        help="the machine plans are checked against (a YAML/JSON file, key=value pairs, "
        "e.g. ram_gb=64,gpu_memory_gb=40, or 'this'); --plan's default is one H100 80 GB, "
        "128 GB RAM, 64 GB disk, an execution's is this machine (its GPU, RAM and free disk)",
    )
    parser.add_argument(
        "--no-plan-check",
        action="store_true",
        help="execute every selected page even when its plan does not fit the machine "
        "(by default such a page is refused before its kernel starts)",
    )
    parser.add_argument(
        "--keep-cache",
        action="store_true",
        help="never release a finished page's scratch cache entries (by default, when what "
        "every page keeps would not fit the machine's disk, the entries a page created that "
        "only it reads, e.g. the RegMean fine-tunes, are deleted once a later page follows)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="execute the selected pages with every hub model replaced by a tiny stand-in "
        "of its architecture class, every hub dataset by a generated set with its schema, "
        "and the sizes scaled down (lmsim.reproduce._dryrun.TINY); nothing is downloaded; "
        "pages go to _build/dry-run/",
    )
    parser.add_argument(
        "--jobs",
        default="1",
        metavar="N|auto",
        help="execute up to N pages at once (default 1); auto: the usable cores over the "
        "threads one page uses (2 on a 2-core machine, where a page runs on one thread; 1 on "
        "a larger one, where a page uses every core). `barrier` and `needs` in "
        "notebooks/runs.yml order the pages; a page's numbers do not depend on N",
    )
    parser.add_argument("--log-output", action="store_true", help="stream notebook output")
    parser.add_argument("--no-progress", action="store_true", help="hide papermill's bars")
    return parser


def _list(manifest: Mapping[str, Any], profile: str, root: Path) -> None:
    print("profiles:")
    for name, text in manifest.get("profiles", {}).items():
        print(f"  {name}: {text}")
    print("chapters:")
    if not manifest["chapters"]:
        print("  (none yet)")
    for chapter in manifest["chapters"]:
        print(f"  {chapter['slug']}: {chapter['title']}")
        for entry in chapter["notebooks"]:
            line = f"    {entry['name']}"
            if entry_source(entry) != entry["name"]:
                line += f"  (runs {entry_source(entry)}.ipynb)"
            params = entry.get(profile) or {}
            if is_skipped(entry, profile):
                line += f"  {profile}: skip (not run under this profile)"
            elif params and profile != "smoke":
                line += f"  {profile}: {params}"
            print(line)


def _parse_value(name: str, text: str) -> Any:
    """A ``-p NAME VALUE`` value as YAML; a ``ValueError`` naming both when it is not."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(
            f"-p {name} {text!r}: the value is not valid YAML ({problem}); quote strings "
            "and write lists as '[a, b]'"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 when every notebook ran)."""
    args = _parser().parse_args(argv)
    try:
        _check_profile(args.profile)
        root = (args.root or find_root()).resolve()
        manifest = load_manifest(root / MANIFEST)
        if args.list:
            _list(manifest, args.profile, root)
            return 0
        if args.write_toc:
            path = write_toc(manifest, root)
            n_chapters = len(_executed_pages(manifest, root))
            print(f"wrote {path} ({n_chapters} chapter(s) with executed pages)")
            return 0
        overrides = {name: _parse_value(name, value) for name, value in args.parameter}
        if args.verify and (args.output_dir or overrides):
            raise ValueError("--verify compares with the committed pages: drop --output-dir/-p")
        if args.dry_run and (args.verify or args.plan):
            raise ValueError("--dry-run executes stand-ins: drop --verify/--plan")
        if args.compare and (args.verify or args.dry_run or args.output_dir or overrides):
            raise ValueError(
                "--compare reads pages executed elsewhere: drop --verify/--dry-run/--output-dir/-p"
            )
        if args.compare and not args.compare.is_dir():
            raise ValueError(f"--compare {args.compare}: no such folder of executed pages")
        output_dir = root / "_build" / "verify" / args.profile if args.verify else args.output_dir
        if args.compare:
            output_dir = args.compare
        runs = plan_runs(manifest, args.profile, root, args.only, output_dir, overrides)
        if args.plan:
            return _plan(runs, args.machine, args.keep_cache)
        if args.compare:
            return _verify(manifest, args, root, [_found(run) for run in runs])
        if args.dry_run:
            _refuse_book(args.output_dir, root)
            runs = dry_run_runs(runs, root, args.output_dir)
            enter_dry_run()
            print(f"{DRY_RUN_NOTE}\n")
        budget = None
        if not args.dry_run:  # the stand-ins' sizes are not the plan's
            machine = load_machine(args.machine) if args.machine else None
            budget = run_budget(runs, machine, args.keep_cache)
        jobs = _jobs(args.jobs, len(runs))
        for run in runs:
            run.output.parent.mkdir(parents=True, exist_ok=True)
    except (ValueError, OSError, KeyError) as exc:
        # KeyError: a page or a model the planner has no figures for
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    skipped = [
        f"{chapter['slug']}/{entry['name']}"
        for chapter in manifest["chapters"]
        if not args.only or chapter["slug"] in args.only
        for entry in chapter["notebooks"]
        if is_skipped(entry, args.profile)
    ]
    if skipped:
        why = (
            f"no `{args.profile}:` parameters in {MANIFEST}"
            if args.profile in OPT_IN_PROFILES
            else f"`{args.profile}: {SKIP}` in {MANIFEST}"
        )
        print(f"not run under profile {args.profile!r} ({why}): " + ", ".join(skipped))
    warning = lock_warning(environment_info(root)) if runs else None
    if warning:
        print(warning, file=sys.stderr)
    if not runs:
        print(f"no notebooks in {MANIFEST} for profile {args.profile!r}; nothing to do")
    if budget is not None and budget.release:
        print(
            f"scratch cache entries are released after the pages that made them: what every "
            f"page keeps does not fit {budget.machine.name} (--keep-cache keeps them)"
        )
    if jobs > 1 and budget is not None and budget.release:
        print("--jobs: one page at a time, since scratch entries are released after each page")
        jobs = 1
    if jobs > 1:
        print(f"executing up to {jobs} pages at once (--jobs)")

    def execute(position: int) -> RunResult:
        index, run = position + 1, runs[position]
        # One write per line: pages running side by side must not splice their lines.
        print(f"[{index}/{len(runs)}] {run.key} -> {run.output}\n", end="", flush=True)
        refusal = budget.refusal(index - 1) if budget is not None else None
        if refusal and not args.no_plan_check:
            print(
                f"REFUSED {run.key} before it started: {refusal} (the plan: python -m "
                f"lmsim.reproduce --profile {args.profile} --plan --only {run.key}; "
                "--no-plan-check runs it anyway)",
                file=sys.stderr,
            )
            return RunResult(run, False, 0.0, f"{REFUSED}: {refusal}")
        before = budget.before(index - 1) if budget is not None else set()
        result = execute_run(
            run,
            args.profile,
            root,
            progress_bar=not args.no_progress and jobs == 1,
            log_output=args.log_output,
            dry_run=args.dry_run,
        )
        if budget is not None and result.ok:
            freed = budget.after(index - 1, before)
            if freed:
                print(freed)
        if not result.ok:
            kept = (
                f"kept the previous page {run.output}"
                if run.output.is_file()
                else f"no page written at {run.output}"
            )
            print(
                f"FAILED {run.source}: {result.error}\n  {kept}; the failed execution is at "
                f"{failed_path(run, args.profile, root, args.dry_run)}",
                file=sys.stderr,
            )
        elif jobs > 1:
            print(f"done {run.key} in {_format_seconds(result.wall_time_s)}\n", end="", flush=True)
        return result

    committed = {run.key: run.output for run in plan_runs(manifest, args.profile, root, args.only)}
    with run_session(budget.run_id if budget is not None else uuid.uuid4().hex):
        results = run_pages(
            [run.key for run in runs],
            jobs,
            execute,
            schedule_of(manifest),
            {key: expected_seconds(page) for key, page in committed.items()},
        )
    _summarise(results, args.profile, root, args.dry_run)
    failed = [result for result in results if not result.ok]
    if args.verify:
        return _verify(manifest, args, root, results)
    if failed:
        print(
            f"{len(failed)} notebook(s) failed (previous pages kept): "
            + ", ".join(
                f"{result.run.source} -> "
                + (
                    "refused by its plan"
                    if result.error.startswith(REFUSED)
                    else str(failed_path(result.run, args.profile, root, args.dry_run))
                )
                for result in failed
            ),
            file=sys.stderr,
        )
        return 1
    return 0


def _refuse_book(output_dir: Path | None, root: Path) -> None:
    """A dry run never writes into ``book/``: its stand-in pages would replace committed
    ones. Raise ``ValueError`` when ``--output-dir`` is ``book/`` or inside it."""
    if output_dir is None:
        return
    book = (root / "book").resolve()
    target = Path(output_dir).resolve()
    if target == book or target.is_relative_to(book):
        raise ValueError(
            f"--dry-run --output-dir {output_dir}: a dry run never writes into {book} (its "
            "stand-in pages would replace the committed ones); give another folder, or none "
            "for _build/dry-run/"
        )


def _found(run) -> RunResult:
    """``--compare``: a page executed elsewhere, as a run's result (failed when missing)."""
    there = run.output.is_file()
    return RunResult(run, there, 0.0, None if there else f"no executed page at {run.output}")


def _jobs(text: str, n_runs: int) -> int:
    """``--jobs``: a positive count, or ``auto`` (usable cores over one page's threads)."""
    if text == "auto":
        from lmsim._threads import _usable_cores, default_threads

        count = max(1, _usable_cores() // max(1, default_threads()))
    else:
        try:
            count = int(text)
        except ValueError:
            count = 0
        if count < 1:
            raise ValueError(f"--jobs {text!r}: give a positive number of pages, or auto")
    return max(1, min(count, n_runs))


def _plan(runs, machine_spec: str | None, keep_cache: bool = False) -> int:
    """``--plan``: the resource table of ``runs``; 1 when a page does not fit."""
    from lmsim.reproduce._estimates import plan_resources
    from lmsim.reproduce._resources import plan_table, problems

    machine = load_machine(machine_spec)
    estimates = plan_resources(runs, machine)
    release = False if keep_cache else None
    print(plan_table(estimates, machine, release=release))
    lines = problems(estimates, machine, release=release)
    for line in lines:
        print(f"does not fit: {line}", file=sys.stderr)
    return 1 if lines else 0


def _verify(manifest: Mapping[str, Any], args, root: Path, results: Sequence[RunResult]) -> int:
    """Compare each re-executed page with the committed one; print the table, write
    ``_build/verify/<profile>/report.json``; 0 only when everything agrees."""
    committed = {run.key: run for run in plan_runs(manifest, args.profile, root, args.only)}
    entries = {
        f"{chapter['slug']}/{entry['name']}": entry
        for chapter in manifest["chapters"]
        for entry in chapter["notebooks"]
    }
    checks, problems = [], []
    for result in results:
        key = result.run.key
        if not result.ok:
            problems.append(f"{key}: the re-execution failed ({result.error})")
            continue
        page = committed[key].output
        if not page.is_file():
            problems.append(f"{key}: no committed page at {_relative(page, root)} to compare")
            continue
        compared = compare_pages(
            key, read_page(page), read_page(result.run.output), entries[key].get("verify", {})
        )
        if not compared:
            problems.append(
                f"{key}: nothing to compare: neither the committed page "
                f"({_relative(page, root)}) nor {_relative(result.run.output, root)} shows a "
                "claim record or a table number (are their outputs cleared?)"
            )
        checks += compared
    if not results:
        problems.append("no pages were compared")
    for line in report_lines(checks):
        print(line)
    for problem in problems:
        print(f"verify: {problem}", file=sys.stderr)
    report = root / "_build" / "verify" / args.profile / "report.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps({"checks": checks_json(checks), "problems": problems}, indent=1))
    print(f"verify: report at {_relative(report, root)}")
    return 0 if not problems and all(check.ok for check in checks) else 1


def _summarise(
    results: Sequence[RunResult], profile: str, root: Path, dry_run: bool = False
) -> Path | None:
    if not results:
        return None
    width = max(len(result.run.key) for result in results)
    label = f"{profile}, dry run" if dry_run else profile
    print(f"\nwall time per notebook (profile {label}):")
    for result in results:
        flag = "ok" if result.ok else "FAILED"
        print(f"  {result.run.key:<{width}}  {_format_seconds(result.wall_time_s):>12}  {flag}")
    total = sum(result.wall_time_s for result in results)
    print(f"  {'total':<{width}}  {_format_seconds(total):>12}")
    path = root / "_build" / ("dry-run/times.json" if dry_run else f"{profile}_times.json")
    times = _read_times(path)
    times.update(
        {
            result.run.key: {
                "wall_time_s": round(result.wall_time_s, 3),
                "status": "ok" if result.ok else "failed",
                "output": _relative(result.run.output, root),
            }
            for result in results
        }
    )
    write_atomic(path, lambda tmp: tmp.write_text(json.dumps(times, indent=2) + "\n"))
    return path


def _read_times(path: Path) -> dict:
    """The wall times of earlier runs (a generated file); an unreadable one is reported and
    started afresh, never a reason for a finished run to fail."""
    if not path.is_file():
        return {}
    try:
        times = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(times, dict):
            raise ValueError(f"a JSON {type(times).__name__}, not an object")
        return times
    except (OSError, ValueError) as err:
        print(f"note: {path} is unreadable ({err}); writing it afresh", file=sys.stderr)
        return {}
