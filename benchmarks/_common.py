"""What every benchmark records: the machine's limit measured in the same run, threads, load.

* :func:`machine_limits` measures float64 GEMM (``dgemm``) and Cholesky (``dpotrf``)
  GFLOP/s through SciPy's BLAS/LAPACK (the library lmsim's ``dsyrk``, ``dpotrf`` and
  ``dpotri`` calls use) at one thread and at the benchmark's thread count.
  They are measured before and after the runs (:func:`remeasure`) and the best is kept.
* :func:`alternate` runs the contenders in turn, ``repeats`` rounds, and keeps the best
  time of each, so a burst of load on a shared machine hits both sides alike.
* :func:`record` is the common header of every JSON: thread settings, load average before
  and after, library versions, the limits, and how a fraction of the limit is computed.

Nominal FLOP counts (Golub & Van Loan, *Matrix Computations*, 4th ed.): GEMM ``m × k`` by
``k × n`` = ``2 m k n``; ``syrk`` of ``k`` rows into ``D × D`` = ``k D²``; Cholesky
``n³ / 3``; inverse from the factor (``potri``) ``2 n³ / 3``; triangular solves with
``m`` right-hand sides ``2 n² m``.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable

import numpy as np
import scipy
import torch
from scipy.linalg.blas import dgemm
from scipy.linalg.lapack import dpotrf

import lmsim


def gflops(flops: float, seconds: float) -> float:
    return flops / seconds / 1e9


def _best(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _limits_at(n_threads: int, size: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((size, size)))
    b = np.asfortranarray(rng.standard_normal((size, size)))
    spd = a @ a.T / size + np.eye(size)
    with lmsim.threads(n_threads):
        t_gemm = _best(lambda: dgemm(1.0, a, b), repeats)
        t_chol = _best(lambda: dpotrf(spd, lower=0, clean=0, overwrite_a=0), repeats)
    return {
        "threads": n_threads,
        "gemm_gflops": gflops(2 * size**3, t_gemm),
        "cholesky_gflops": gflops(size**3 / 3, t_chol),
    }


def machine_limits(n_threads: int, size: int = 2048, repeats: int = 3) -> dict:
    """Float64 GEMM and Cholesky GFLOP/s at one thread and at ``n_threads`` (best of N).

    Returns
    -------
    dict
        ``{"size": size, "one_thread": {...}, "bench_threads": {...}}``, each with
        ``gemm_gflops`` and ``cholesky_gflops``.
    """
    one = _limits_at(1, size, repeats)
    more = one if n_threads == 1 else _limits_at(n_threads, size, repeats)
    return {"size": size, "one_thread": one, "bench_threads": more}


def remeasure(limits: dict, n_threads: int) -> dict:
    """Measure the limits again after the runs and keep the best of both (per entry).

    On a shared machine a burst of load during one measurement would otherwise lower the
    limit and inflate every fraction; both measurements stay in the record.
    """
    again = machine_limits(n_threads, limits["size"])
    best = {"size": limits["size"], "before": limits, "after": again}
    for key in ("one_thread", "bench_threads"):
        best[key] = {
            name: max(limits[key][name], again[key][name]) if name != "threads" else value
            for name, value in limits[key].items()
        }
    return best


def alternate(contenders: dict[str, Callable[[], object]], repeats: int) -> dict:
    """Run each contender once per round, ``repeats`` rounds; best and all times (s).

    Returns
    -------
    dict
        ``{name: {"best_s": float, "times_s": list, "result": last return value}}``.
    """
    out = {name: {"times_s": [], "result": None} for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            start = time.perf_counter()
            out[name]["result"] = fn()
            out[name]["times_s"].append(time.perf_counter() - start)
    for entry in out.values():
        entry["best_s"] = min(entry["times_s"])
    return out


def fraction(flops: float, seconds: float, limits: dict) -> dict:
    """Achieved GFLOP/s and its fraction of the GEMM limit at the benchmark's threads."""
    achieved = gflops(flops, seconds)
    return {
        "flops": flops,
        "gflops": achieved,
        "fraction_of_gemm_limit": achieved / limits["bench_threads"]["gemm_gflops"],
    }


def record(n_threads: int, limits: dict, load_before: tuple) -> dict:
    """Common JSON header: threads, load average before/after, versions, limits."""
    return {
        "threads": n_threads,
        "thread_info": lmsim.thread_info(),
        "load_average_before": list(load_before),
        "load_average_after": list(os.getloadavg()),
        "limits": limits,
        "fraction_is": "achieved GFLOP/s (nominal FLOP count / best time) over the float64 "
        "GEMM GFLOP/s measured in the same run at the same thread count",
        "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "versions": {
            "lmsim": lmsim.__version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
        },
    }


def add_common_args(parser) -> None:
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="BLAS/OpenMP/torch threads (lmsim.threads); default lmsim.default_threads()",
    )
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds, best kept")
