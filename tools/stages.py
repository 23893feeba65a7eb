"""Run ``make`` stages one after another and print each stage's wall time at the end.

``make test`` (and so ``.ci/run``) is ``python tools/stages.py install lint pytest smoke
dry-run book-strict``: each stage runs as ``make STAGE``, in order, stopping at the first
that fails; the table of stage times is printed last, whether the run passed or not, and
written to ``_build/test_times.json``. Standard library only (it runs before the install).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def _format(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def _dry_make() -> bool:
    """Whether this runs under ``make -n`` (then the stages only print their commands)."""
    flags = os.environ.get("MAKEFLAGS", "").split()
    return bool(flags) and not flags[0].startswith("-") and "n" in flags[0]


def main(argv: list[str]) -> int:
    make = os.environ.get("MAKE", "make")
    stages = [a for a in argv if a != "--"]
    if not stages:
        print("usage: python tools/stages.py STAGE [STAGE ...]", file=sys.stderr)
        return 2
    times: list[tuple[str, float, str]] = []
    status = 0
    start = time.perf_counter()
    for stage in stages:
        began = time.perf_counter()
        code = subprocess.call([make, "--no-print-directory", stage])
        times.append((stage, time.perf_counter() - began, "ok" if code == 0 else "FAILED"))
        if code:
            status = code
            break
    total = time.perf_counter() - start
    skipped = stages[len(times) :]
    width = max(len(s) for s in stages + ["total"])
    print(f"\nmake test: time per stage ({'green' if status == 0 else 'failed'})")
    for stage, seconds, flag in times:
        print(f"  {stage:<{width}}  {_format(seconds):>12}  {flag}")
    for stage in skipped:
        print(f"  {stage:<{width}}  {'':>12}  not run")
    print(f"  {'total':<{width}}  {_format(total):>12}")
    if not _dry_make():
        out = Path("_build") / "test_times.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "stages": {s: {"wall_time_s": round(t, 1), "status": f} for s, t, f in times},
            "not_run": skipped,
            "total_s": round(total, 1),
        }
        out.write_text(json.dumps(record, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
