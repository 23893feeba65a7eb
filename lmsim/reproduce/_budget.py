"""The plan applied while pages run: each page checked before it starts, scratch released.

``python -m lmsim.reproduce`` plans every selected page on the machine (``--machine``, or
this one: :func:`~lmsim.reproduce._resources.detect_machine`) before executing any, then

* **refuses a page** whose plan does not fit (its peak host RAM or GPU memory, its disk,
  or the disk in use while it runs after the pages before it), before its kernel starts:
  the message names the page, the resource and the parameter to change
  (:meth:`RunBudget.refusal`); ``--no-plan-check`` runs it anyway;
* **releases scratch** when what every page keeps would not fit the disk
  (:func:`~lmsim.reproduce._resources.needs_release`): after a page has finished and a
  later page follows, the cache entries it created that match its scratch globs
  (:meth:`~lmsim.reproduce._resources.Estimate.scratch_entries`: entries only that page
  reads, e.g. the RegMean page's fine-tunes) are deleted, but only those that

  - this run wrote: every run has an id (:data:`lmsim._io.RUN_ENV`, set for its kernels),
    recorded in the marker of each entry as it is written;
  - lmsim verifies as whole entries of its own holding nothing their marker does not list
    (:func:`lmsim._io.remove_entry`), inside the cache;
  - were not there before the page started;

  and only while no other run uses the cache: every run holds a shared lock on
  ``$LMSIM_CACHE/.lmsim-runs.lock`` while it executes pages, and a release needs it
  alone (:func:`run_session`); when another run holds it, nothing is released and the
  runner says so. Entries of other runs, user files and anything without lmsim's marker
  are never touched. ``--keep-cache`` keeps everything.

A notebook run directly (papermill, Jupyter) can make the same check with
:func:`check_plan` after its parameters cell.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmsim._cache import cache_root
from lmsim._io import MARKER, RUN_ENV, SIDECAR, remove_entry
from lmsim.reproduce._resources import (
    GB,
    Estimate,
    Machine,
    declared_values,
    detect_machine,
    disk_timeline,
    load_machine,
    needs_release,
    page_problems,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux or macOS: no other run is seen
    fcntl = None  # type: ignore[assignment]

#: Every run holds a shared lock on this file (in the cache's root) while it runs pages.
RUNS_LOCK = ".lmsim-runs.lock"


class PlanError(RuntimeError):
    """A page's plan does not fit the machine (raised by :func:`check_plan`)."""


def _entries(root: Path, patterns: Sequence[str]) -> set[Path]:
    """The cache entries matching ``patterns`` below ``root``: folders, and files that are
    not markers (a file entry's marker goes with it); nothing outside ``root`` (a pattern
    with ``..``, or a link out of the cache)."""
    found: set[Path] = set()
    inside = Path(root).resolve()
    for pattern in patterns:
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            continue
        for path in root.glob(pattern):
            if path.name == MARKER or path.name.endswith(SIDECAR):
                continue
            if path.name.startswith(".") or ".corrupt" in path.name:
                continue
            try:
                if not path.parent.resolve().is_relative_to(inside):
                    continue
            except OSError:
                continue
            found.add(path)
    return found


def release_entries(
    paths: Sequence[Path], run: str | None = None, root: Path | None = None
) -> tuple[list[Path], float]:
    """Delete the paths that are whole lmsim cache entries (:func:`lmsim._io.remove_entry`)
    and, with ``run``, that run wrote; with ``root``, only those inside it. Return them and
    their bytes.

    Anything else (no marker, unfinished, damaged, a link, a file its marker does not
    list, another run's entry) is left in place.
    """
    gone, freed = [], 0.0
    inside = Path(root).resolve() if root is not None else None
    for path in sorted(paths):
        if inside is not None:
            try:
                if not path.parent.resolve().is_relative_to(inside):
                    continue
            except OSError:
                continue
        try:
            freed += remove_entry(path, run)
        except (PermissionError, FileNotFoundError):
            continue
        gone.append(path)
    return gone, freed


class _Lock:
    """``$LMSIM_CACHE/.lmsim-runs.lock``: shared (``shared=True``) while a run executes
    pages, exclusive while one releases, never waited for (a busy lock skips the release)."""

    def __init__(self, root: Path, shared: bool = False):
        self.handle = None
        self.shared = shared
        if fcntl is None:
            return
        try:
            root.mkdir(parents=True, exist_ok=True)
            self.handle = open(root / RUNS_LOCK, "a+")  # noqa: SIM115 - held for the run
        except OSError:
            return  # a read-only cache: nothing is written there, nothing released
        if shared:
            fcntl.flock(self.handle, fcntl.LOCK_SH)

    @contextlib.contextmanager
    def alone(self) -> Iterator[bool]:
        """Hold the lock alone while the block runs; yields False when another run holds it
        (or it cannot be taken): then nothing may be released."""
        if fcntl is None:
            yield True
            return
        if self.handle is None:
            yield False
            return
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if self.shared:  # a failed conversion may have dropped the shared lock: take it back
                with contextlib.suppress(OSError):
                    fcntl.flock(self.handle, fcntl.LOCK_SH)
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(self.handle, fcntl.LOCK_SH if self.shared else fcntl.LOCK_UN)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


_SESSION: dict[str, _Lock] = {}


@contextlib.contextmanager
def run_session(run_id: str) -> Iterator[str]:
    """While the block runs: this process's kernels record ``run_id`` in the markers of the
    entries they write (:data:`lmsim._io.RUN_ENV`), and the run holds the shared lock on
    ``$LMSIM_CACHE/.lmsim-runs.lock`` that tells other runs it uses the cache."""
    previous = os.environ.get(RUN_ENV)
    os.environ[RUN_ENV] = run_id
    lock = _Lock(cache_root(), shared=True)
    _SESSION[run_id] = lock
    try:
        yield run_id
    finally:
        _SESSION.pop(run_id, None)
        lock.close()
        if previous is None:
            os.environ.pop(RUN_ENV, None)
        else:
            os.environ[RUN_ENV] = previous


@dataclass
class RunBudget:
    """The plan of a run's pages (in the order they run) on ``machine``.

    Attributes
    ----------
    machine : Machine
    estimates : list of Estimate
        One per page, in run order.
    release : bool
        Whether scratch entries are released after each page but the last.
    timeline : list of float
        Disk in use while each page runs (:func:`~lmsim.reproduce._resources.disk_timeline`).
    run_id : str
        This run's id: only entries whose marker records it are released
        (:func:`run_session` sets it for the kernels).
    """

    machine: Machine
    estimates: list[Estimate]
    release: bool
    timeline: list[float] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self):
        self.timeline = disk_timeline(self.estimates, self.release)

    def refusal(self, index: int) -> str | None:
        """Why page ``index`` must not start (one line per resource), or None."""
        lines = page_problems(self.estimates[index], self.machine, self.timeline[index])
        return "; ".join(lines) if lines else None

    def before(self, index: int) -> set[Path]:
        """The scratch entries already there before page ``index`` runs (none looked for
        when nothing is released)."""
        if not self.release:
            return set()
        return _entries(cache_root(), self.estimates[index].scratch)

    def after(self, index: int, before: set[Path]) -> str | None:
        """After page ``index``: release the scratch entries this run's page created when
        the run releases and a later page follows, holding the runs' lock alone; a line
        saying what was freed (or why nothing was), or None."""
        est = self.estimates[index]
        if not (self.release and est.scratch and index < len(self.estimates) - 1):
            return None
        root = cache_root()
        new = _entries(root, est.scratch) - before
        if not new:
            return None
        lock = _SESSION.get(self.run_id) or _Lock(root)
        try:
            with lock.alone() as alone:
                if not alone:
                    return (
                        f"kept the scratch cache entries of {est.page}: another lmsim run is "
                        f"using the cache ({root / RUNS_LOCK}), and they may be its inputs"
                    )
                gone, freed = release_entries(sorted(new), self.run_id, root)
        finally:
            if lock is not _SESSION.get(self.run_id):
                lock.close()
        if not gone:
            return None
        return (
            f"released {len(gone)} scratch cache entr{'y' if len(gone) == 1 else 'ies'} of "
            f"{est.page} ({freed / GB:,.2f} GB; no later page reads them; --keep-cache keeps them)"
        )


def run_budget(
    runs: Sequence, machine: Machine | None = None, keep_cache: bool = False
) -> RunBudget:
    """Plan ``runs`` (``plan_runs``'s output) on ``machine`` (default: this one); a page
    the planner cannot estimate (no estimator, a model of unknown shape) is not checked."""
    from lmsim.reproduce._estimates import plan_resources

    machine = machine or detect_machine()
    estimates = []
    for run in runs:
        try:
            estimates += plan_resources([run], machine)
        except KeyError as err:  # no estimator, or a model the planner has no shape for
            estimates.append(Estimate(run.key, notes=[f"not planned: {err.args[0]}"]))
    release = not keep_cache and needs_release(estimates, machine)
    return RunBudget(machine, estimates, release)


def check_plan(
    page: str,
    parameters: Mapping[str, Any] | None = None,
    machine: str | Machine | None = None,
) -> Estimate:
    """Check one page's plan before its heavy work: a call a notebook can make after its
    parameters cell, e.g. ``check_plan("zhang2022_lmd/01_decomposition", globals())``.

    Parameters
    ----------
    page : str
        ``"<slug>/<source notebook stem>"``.
    parameters : mapping, optional
        The page's parameters (names it does not declare are ignored); its declared
        defaults otherwise.
    machine : str or Machine, optional
        A :class:`Machine`, a ``--machine`` spec, or ``$LMSIM_MACHINE``; this machine
        (:func:`detect_machine`) when none is given.

    Returns
    -------
    Estimate
        The page's plan, when it fits.

    Raises
    ------
    PlanError
        It does not fit: the message names the page, the resource and the parameter.
    """
    from lmsim.reproduce._estimates import ESTIMATORS, estimate_page
    from lmsim.reproduce._manifest import find_root

    if page not in ESTIMATORS:
        raise KeyError(f"no resource estimator for {page!r}; known: {sorted(ESTIMATORS)}")
    source = find_root() / "notebooks" / f"{page}.ipynb"
    declared = declared_values(source)
    given = {k: v for k, v in (parameters or {}).items() if k in declared}
    spec = machine if machine is not None else os.environ.get("LMSIM_MACHINE")
    if isinstance(spec, Machine):
        resolved = spec
    else:
        resolved = load_machine(spec) if spec else detect_machine()
    est = estimate_page(page, {**declared, **given}, resolved)
    lines = page_problems(est, resolved)
    if lines:
        raise PlanError("the plan does not fit: " + "; ".join(lines))
    return est
