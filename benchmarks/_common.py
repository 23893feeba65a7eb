"""What every benchmark records: the machine's limit measured in the same run, threads, load.

* :func:`machine_limits` measures float64 GEMM (``dgemm``) and Cholesky (``dpotrf``)
  GFLOP/s through SciPy's BLAS/LAPACK (the library lmsim's ``dsyrk``, ``dpotrf`` and
  ``dpotri`` calls use) and float32 GEMM through ``torch.mm`` on the CPU (the library
  float32 torch work uses: probes, extraction, training), at one thread and at the
  benchmark's thread count; given a CUDA device, also the device's ``torch.mm`` in
  float32 (TF32 off), bfloat16 and float64. They are measured before and after the runs
  (:func:`remeasure`) and the best is kept.
* :func:`alternate` runs the contenders in turn, ``repeats`` rounds, and keeps the best
  time of each, so a burst of load on a shared machine hits both sides alike.
* :func:`fraction` divides a nominal FLOP count by the best time and by the GEMM limit
  of the same precision on the same device (``precision``, ``device``).
* :func:`record` is the common header of every JSON: thread settings, load average before
  and after, library versions, the limits, and how a fraction of the limit is computed.
* :func:`write_result` writes a benchmark's JSON atomically (a temporary file in the same
  folder, then :func:`os.replace`), so an interrupted run never leaves a truncated result.

Nominal FLOP counts (Golub & Van Loan, *Matrix Computations*, 4th ed.): GEMM ``m × k`` by
``k × n`` = ``2 m k n``; ``syrk`` of ``k`` rows into ``D × D`` = ``k D²``; Cholesky
``n³ / 3``; inverse from the factor (``potri``) ``2 n³ / 3``; triangular solves with
``m`` right-hand sides ``2 n² m``.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

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
    a32, b32 = torch.from_numpy(a).float(), torch.from_numpy(b).float()
    with lmsim.threads(n_threads):
        t_gemm = _best(lambda: dgemm(1.0, a, b), repeats)
        t_chol = _best(lambda: dpotrf(spd, lower=0, clean=0, overwrite_a=0), repeats)
        t_sgemm = _best(lambda: torch.mm(a32, b32), repeats)
    return {
        "threads": n_threads,
        "gemm_gflops": gflops(2 * size**3, t_gemm),
        "cholesky_gflops": gflops(size**3 / 3, t_chol),
        "gemm_float32_gflops": gflops(2 * size**3, t_sgemm),
    }


def _cuda_limits(device: torch.device, size: int, repeats: int) -> dict:
    """``torch.mm`` GFLOP/s on a CUDA device: float32 (TF32 off), bfloat16, float64."""
    out = {"device": torch.cuda.get_device_name(device), "torch_device": str(device)}
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for name, dtype in (
            ("float32", torch.float32),
            ("bfloat16", torch.bfloat16),
            ("float64", torch.float64),
        ):
            a = torch.randn(size, size, device=device, dtype=dtype)
            b = torch.randn(size, size, device=device, dtype=dtype)

            def product(a=a, b=b):
                torch.mm(a, b)
                torch.cuda.synchronize(device)

            product()  # warm-up: cuBLAS handle and kernel selection
            out[f"gemm_{name}_gflops"] = gflops(2 * size**3, _best(product, repeats))
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return out


def machine_limits(
    n_threads: int, size: int = 2048, repeats: int = 3, device: str | None = None
) -> dict:
    """GEMM and Cholesky GFLOP/s at one thread and at ``n_threads`` (best of ``repeats``).

    Parameters
    ----------
    n_threads : int
        The benchmark's thread count.
    size : int
        Side of the square matrices (the CUDA products use ``max(size, 4096)``).
    repeats : int
        Timings per entry; the best is kept.
    device : str, optional
        A CUDA device (``"cuda"``, ``"cuda:1"``) to measure as well; CPU-only otherwise.

    Returns
    -------
    dict
        ``{"size": size, "one_thread": {...}, "bench_threads": {...}}``, each with
        ``gemm_gflops`` and ``cholesky_gflops`` (float64, SciPy) and
        ``gemm_float32_gflops`` (``torch.mm``); with a CUDA ``device`` also ``"cuda"``
        with ``gemm_float32_gflops``, ``gemm_bfloat16_gflops`` and ``gemm_float64_gflops``.
    """
    one = _limits_at(1, size, repeats)
    more = one if n_threads == 1 else _limits_at(n_threads, size, repeats)
    out = {"size": size, "one_thread": one, "bench_threads": more}
    if device is not None and torch.device(device).type == "cuda":
        out["cuda"] = _cuda_limits(torch.device(device), max(size, 4096), repeats)
    return out


def remeasure(limits: dict, n_threads: int) -> dict:
    """Measure the limits again after the runs and keep the best of both (per entry).

    On a shared machine a burst of load during one measurement would otherwise lower the
    limit and inflate every fraction; both measurements stay in the record.
    """
    cuda = limits.get("cuda")
    device = None if cuda is None else cuda.get("torch_device", "cuda")
    again = machine_limits(n_threads, limits["size"], device=device)
    best = {"size": limits["size"], "before": limits, "after": again}
    for key in ("one_thread", "bench_threads", "cuda"):
        if key not in limits:
            continue
        best[key] = {
            name: max(value, again[key][name]) if name.endswith("_gflops") else value
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


def fraction(
    flops: float,
    seconds: float,
    limits: dict,
    precision: str = "float64",
    device: str | torch.device = "cpu",
) -> dict:
    """Achieved GFLOP/s and its fraction of the GEMM limit of the same precision and device.

    Parameters
    ----------
    flops : float
        Nominal FLOP count of the task.
    seconds : float
        Its (best) time.
    limits : dict
        From :func:`machine_limits` / :func:`remeasure`.
    precision : {"float64", "float32", "bfloat16"}
        The arithmetic the work runs in: float64 is compared with SciPy's ``dgemm``,
        float32 with ``torch.mm``; bfloat16 exists on CUDA only.
    device : str or torch.device
        ``"cpu"`` (the limit at the benchmark's threads) or a CUDA device (the limits of
        ``machine_limits(..., device=...)``).
    """
    achieved = gflops(flops, seconds)
    if torch.device(device).type == "cuda":
        if "cuda" not in limits:
            raise ValueError(
                "no CUDA limits in `limits`: measure them with machine_limits(..., device=...)"
            )
        key, table = f"gemm_{precision}_gflops", limits["cuda"]
    else:
        key = {"float64": "gemm_gflops", "float32": "gemm_float32_gflops"}.get(precision)
        if key is None:
            raise ValueError(f"no CPU limit for precision {precision!r}: float64 or float32")
        table = limits["bench_threads"]
    if key not in table:
        raise ValueError(
            f"`limits` has no {key}: it predates {precision} limits; measure them again"
        )
    return {
        "flops": flops,
        "gflops": achieved,
        "precision": precision,
        "device": str(device),
        "limit_gflops": table[key],
        "fraction_of_gemm_limit": achieved / table[key],
    }


def record(n_threads: int, limits: dict, load_before: tuple) -> dict:
    """Common JSON header: threads, load average before/after, versions, limits."""
    return {
        "threads": n_threads,
        "thread_info": lmsim.thread_info(),
        "load_average_before": list(load_before),
        "load_average_after": list(os.getloadavg()),
        "limits": limits,
        "fraction_is": "achieved GFLOP/s (nominal FLOP count / best time) over the GEMM "
        "GFLOP/s of the same precision (float64: SciPy dgemm; float32: torch.mm) measured in "
        "the same run at the same thread count, or on a CUDA device its torch.mm",
        "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "versions": {
            "lmsim": lmsim.__version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
        },
    }


def _jsonable(value: object) -> object:
    """``json.dumps`` fallback: NumPy scalars and arrays as numbers, anything else as text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def write_result(path: str | os.PathLike, payload: dict, header: dict | None = None) -> Path:
    """Write a benchmark's result as indented JSON, atomically.

    Parameters
    ----------
    path : str or path-like
        The JSON file; its folder is created if missing.
    payload : dict
        The benchmark's figures. Benchmarks that meet the standard already hold the
        :func:`record` header in it.
    header : dict, optional
        A :func:`record` header to put first; ``payload``'s keys win on a clash.

    Returns
    -------
    Path
        ``path``.

    Notes
    -----
    The text goes to a temporary file in the same folder, is flushed to disk, and then
    replaces ``path`` (:func:`os.replace` is atomic on POSIX and Windows), so a run killed
    while writing leaves the previous result intact. NumPy scalars and arrays are written
    as numbers; other non-JSON values (paths, devices, dtypes) as their text.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({**(header or {}), **payload}, indent=2, default=_jsonable) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def add_common_args(parser) -> None:
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="BLAS/OpenMP/torch threads (lmsim.threads); default lmsim.default_threads()",
    )
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds, best kept")
