"""Executing one notebook with papermill: a temporary file, provenance, then the page."""

from __future__ import annotations

import datetime as dt
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from lmsim._io import pid_alive
from lmsim.reproduce._environment import environment_info, machine_info, trained_models
from lmsim.reproduce._manifest import ZOO_PROFILES, _check_profile
from lmsim.reproduce._parameters import _literal, declared_parameters
from lmsim.reproduce._plan import NotebookRun
from lmsim.reproduce._provenance import add_provenance

KERNEL_LOG_LEVEL = "--IPKernelApp.log_level=ERROR"  # the kernel's start-up log, not the cells'


@dataclass(frozen=True)
class RunResult:
    """Outcome of one :class:`NotebookRun`: ``ok``, wall time and, on failure, the error."""

    run: NotebookRun
    ok: bool
    wall_time_s: float
    error: str | None = None


def _relative(path: Path, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def _versions() -> dict[str, str]:
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for package in ("lmsim", "torch", "transformers", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def _device() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return f"cuda ({torch.cuda.get_device_name(0)})"
        from lmsim._runtime import cpu_model
        from lmsim._threads import default_threads

        # The processor, the instruction set torch dispatches to and the threads lmsim uses
        # by default: what a CPU build of a trained model depends on beyond its seed.
        capability, n = torch.backends.cpu.get_cpu_capability(), default_threads()
        return (
            f"cpu ({cpu_model()}, {os.cpu_count()} cores, {capability}, {n} thread{'s' * (n != 1)})"
        )
    except ImportError:
        pass
    return f"cpu ({os.cpu_count()} cores)"


def failed_path(run: NotebookRun, profile: str, root: str | Path, dry_run: bool = False) -> Path:
    """Where a failed execution of ``run`` is kept for debugging:
    ``_build/failed/<profile>/<slug>/<name>.ipynb`` (outside ``book/``, so the book never
    renders it and the previous good page stays in place); a dry run's under
    ``_build/dry-run/failed/``."""
    folder = Path(root) / "_build" / ("dry-run" if dry_run else "failed")
    return folder / ("failed" if dry_run else profile) / run.slug / f"{run.name}.ipynb"

    return True


def _remove_dead_temporaries(output: Path) -> None:
    """Delete ``.<name>.running<pid>.ipynb`` files left by killed runs (dead pids only)."""
    for tmp in output.parent.glob(f".{output.stem}.running*.ipynb"):
        pid = tmp.name.removeprefix(f".{output.stem}.running").removesuffix(".ipynb")
        if pid.isdigit() and not pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)


def execute_run(
    run: NotebookRun,
    profile: str,
    root: str | Path,
    progress_bar: bool = True,
    log_output: bool = False,
    dry_run: bool = False,
) -> RunResult:
    """Execute one notebook with papermill and stamp its provenance; replace the page
    only on success.

    The kernel's working directory is the source notebook's folder. Papermill writes into
    a temporary file next to the page (``.<name>.running<pid>.ipynb``); on success it is
    stamped with ``status: "ok"`` and renamed over the page (atomic: a killed run leaves
    the previous page as it was). A failed execution (traceback in its outputs,
    ``status: "failed"`` in its provenance) goes to :func:`failed_path` and the previous
    page, if any, is kept. ``dry_run``: the kernel runs under :mod:`lmsim._dryrun`
    (set by the caller), the provenance says so and a failure goes to the dry run's folder.
    """
    import papermill

    _check_profile(profile)
    root = Path(root)
    run.output.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_temporaries(run.output)
    tmp = run.output.with_name(f".{run.output.stem}.running{os.getpid()}.ipynb")
    declared = declared_parameters(run.source)
    effective = {name: _literal(spec["default"]) for name, spec in declared.items()}
    effective.update(run.parameters)
    error = None
    start = time.perf_counter()
    try:
        try:
            papermill.execute_notebook(
                str(run.source),
                str(tmp),
                parameters=dict(run.parameters),
                kernel_name="python3",
                cwd=str(run.source.parent),
                progress_bar=progress_bar,
                log_output=log_output,
                # the kernel's own log (ipykernel 7 warns on every start that its local TCP
                # sockets are unencrypted) stays off the terminal; cells' warnings are outputs
                extra_arguments=[KERNEL_LOG_LEVEL],
            )
        except Exception as exc:  # papermill raises PapermillExecutionError, kernels others
            error = f"{type(exc).__name__}: {exc}".strip()
        finally:
            wall = time.perf_counter() - start
        info = {
            "profile": profile,
            "parameters": effective,
            "overrides": dict(run.parameters),
            "versions": _versions(),
            "device": _device(),
            "environment": environment_info(root),
            "machine": machine_info(),
            # The weights the page's numbers rest on, to tell two machines' builds apart.
            "trained_models": {}
            if dry_run
            else trained_models(effective.get("zoo_profile", ZOO_PROFILES.get(profile))),
            "wall_time_s": round(wall, 3),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "source": _relative(run.source, root),
            "page": run.key,
            "status": "ok" if error is None else "failed",
        }
        if run.title:
            info["title"] = run.title
        if dry_run:
            info["dry_run"] = True
        failed = failed_path(run, profile, root, dry_run)
        if tmp.is_file():
            add_provenance(tmp, info)
            if error is None:
                os.replace(tmp, run.output)
                failed.unlink(missing_ok=True)
            else:
                failed.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, failed)
    finally:
        tmp.unlink(missing_ok=True)
    return RunResult(run, error is None, wall, error)
