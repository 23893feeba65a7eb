"""tools/stages.py, which `make test` (and so `.ci/run`) runs: the stages in order, stopping
at the first failure, and each stage's time printed at the end either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path, fail: str | None, *stages):
    fake = tmp_path / "fake-make"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'echo "ran $2" >> calls.txt\n'
        f'[[ "$2" == "{fail or "-"}" ]] && exit 3\n'
        "exit 0\n"
    )
    fake.chmod(0o755)
    env = {**os.environ, "MAKE": str(fake), "MAKEFLAGS": ""}
    return subprocess.run(
        [sys.executable, str(REPO / "tools" / "stages.py"), *stages],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )


def test_every_stage_runs_and_its_time_is_printed_at_the_end(tmp_path):
    done = _run(tmp_path, None, "lint", "pytest", "smoke")
    assert done.returncode == 0
    assert (tmp_path / "calls.txt").read_text().split() == [
        "ran", "lint", "ran", "pytest", "ran", "smoke",
    ]  # fmt: skip
    tail = done.stdout.strip().splitlines()
    assert tail[0] == "make test: time per stage (green)"
    assert [line.split()[0] for line in tail[1:]] == ["lint", "pytest", "smoke", "total"]
    record = json.loads((tmp_path / "_build" / "test_times.json").read_text())
    assert list(record["stages"]) == ["lint", "pytest", "smoke"] and record["not_run"] == []


def test_a_failing_stage_stops_the_run_and_still_prints_the_table(tmp_path):
    done = _run(tmp_path, "pytest", "lint", "pytest", "smoke")
    assert done.returncode == 3
    assert "smoke" not in (tmp_path / "calls.txt").read_text()
    out = done.stdout
    assert "time per stage (failed)" in out
    assert "FAILED" in out.split("pytest", 2)[-1] and "not run" in out
