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
  reads, e.g. the RegMean page's fine-tunes) are deleted, but only those lmsim verifies
  as its own, whole entries (:func:`lmsim._io.entry_status`); entries that were there
  before the page started, user files and anything without lmsim's marker are never
  touched. ``--keep-cache`` keeps everything.

A notebook run directly (papermill, Jupyter) can make the same check with
:func:`check_plan` after its parameters cell.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmsim._cache import cache_root
from lmsim._io import MARKER, SIDECAR, entry_status
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


class PlanError(RuntimeError):
    """A page's plan does not fit the machine (raised by :func:`check_plan`)."""


def _entries(root: Path, patterns: Sequence[str]) -> set[Path]:
    """The cache entries matching ``patterns`` below ``root``: folders, and files that are
    not markers (a file entry's marker goes with it)."""
    found: set[Path] = set()
    for pattern in patterns:
        for path in root.glob(pattern):
            if path.name == MARKER or path.name.endswith(SIDECAR):
                continue
            if path.name.startswith(".") or ".corrupt" in path.name:
                continue
            found.add(path)
    return found


def release_entries(paths: Sequence[Path]) -> tuple[list[Path], float]:
    """Delete the paths that are whole lmsim cache entries; return them and their bytes.

    Anything else (no marker, unfinished, damaged, a symbolic link) is left in place.
    """
    gone, freed = [], 0.0
    for path in sorted(paths):
        if path.is_symlink() or entry_status(path)[0] != "whole":
            continue
        if path.is_dir():
            size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
            shutil.rmtree(path)
        else:
            sidecar = path.with_name(path.name + SIDECAR)
            size = path.stat().st_size
            path.unlink()
            sidecar.unlink(missing_ok=True)
        gone.append(path)
        freed += size
    return gone, freed


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
    """

    machine: Machine
    estimates: list[Estimate]
    release: bool
    timeline: list[float] = field(default_factory=list)

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
        """After page ``index``: release the scratch entries it created when the run
        releases and a later page follows; a line saying what was freed, or None."""
        est = self.estimates[index]
        if not (self.release and est.scratch and index < len(self.estimates) - 1):
            return None
        new = _entries(cache_root(), est.scratch) - before
        gone, freed = release_entries(sorted(new))
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
