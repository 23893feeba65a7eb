"""Correlation clustering of ~10k neurons: lmsim (streaming moments) vs NeuroX's pipeline.

Synthetic activations of ``--layers`` × ``--width`` neurons over ``--n-tokens`` tokens
(64 shared latent factors mixed sparsely into every neuron, plus noise and per-neuron
offsets, a few dead neurons), generated chunk by chunk from a seed. Each side runs in its
own subprocess so its peak resident memory (``ru_maxrss`` above the post-import
baseline) is its own:

* lmsim: :func:`lmsim.cluster.cluster_neurons` on the stream of chunks (the activations
  never exist whole; one in-place ``D × D`` co-moment), all thresholds from one linkage;
* lmsim_moments: the same from a :class:`~lmsim.moments.Moments` updated chunk by chunk,
  as ``extract_moments`` returns it (``Moments.update`` allocates merge temporaries);
* NeuroX: the dense ``(n_tokens, n_neurons)`` float32 matrix, ``np.corrcoef``,
  ``nan_to_num``, symmetrisation, ``1 - |r|``, ``squareform``, scipy average linkage and one
  ``fcluster`` per threshold (``interpretation.clustering.create_correlation_clusters``,
  re-implemented from its definition; the linkage is not recomputed per τ here, which
  favours NeuroX).

Both give the same partition at every threshold (adjusted Rand index 1 is checked).
Time to generate the synthetic data is excluded from both.

Distance to the limit (``_common.py``): the task's nominal FLOP count is ``n · D²``
(``n`` = ``--n-tokens``, ``D`` neurons): the symmetric co-moment, one triangle of a
rank-``n`` update (``syrk``), in float64; NeuroX's ``np.corrcoef`` computes the full
product (``2 n D²``) but the task is the same, so both are charged ``n · D²``. The
float64 GEMM limit (SciPy ``dgemm``) is measured in the same run, before and after. The
rest is not FLOP-bound: the average linkage (scipy's nearest-neighbour chain) does
``O(D²)`` memory-bound work on the condensed distances whatever the number of tokens.
So the JSON also gives the **bound** of the task on this machine: ``n · D²`` at the
GEMM limit plus the linkage's own time (NeuroX's ``cluster_s``: scipy ``linkage`` and
the ``fcluster`` cuts, which lmsim runs too), and each side's ``fraction_of_bound``
(bound over its time). Sides alternate in rounds, best of ``--repeats``; every worker
runs inside ``lmsim.threads(--threads)``.

Usage::

    python benchmarks/bench_cluster.py                      # full: 13 × 768, 20k tokens
    python benchmarks/bench_cluster.py --layers 4 --width 256 --n-tokens 4000   # quick
    python benchmarks/bench_cluster.py --tiny --out /tmp/cluster.json           # seconds
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _common import fraction, machine_limits, record, remeasure, write_result

import lmsim

SIDES = ("lmsim", "lmsim_moments", "neurox")
THRESHOLDS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
N_FACTORS = 64


def _mixing(n_neurons: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, 0])
    mix = rng.standard_normal((N_FACTORS, n_neurons)) * (rng.random((N_FACTORS, n_neurons)) < 0.1)
    offset = rng.normal(0, 3, size=n_neurons)
    return mix.astype(np.float32), offset.astype(np.float32)


def chunks(n_tokens: int, n_neurons: int, seed: int, chunk: int = 2048):
    """Yield float32 activation chunks ``(rows, n_neurons)``; the same for every caller."""
    mix, offset = _mixing(n_neurons, seed)
    dead = np.arange(0, n_neurons, max(n_neurons // 8, 1))[:8]  # constant neurons
    for k, start in enumerate(range(0, n_tokens, chunk)):
        rng = np.random.default_rng([seed, 1, k])
        rows = min(chunk, n_tokens - start)
        z = rng.standard_normal((rows, N_FACTORS), dtype=np.float32)
        x = z @ mix + 0.7 * rng.standard_normal((rows, n_neurons), dtype=np.float32) + offset
        x[:, dead] = 1.5
        yield x


def _rss_mb() -> float:
    """Peak resident set size so far (MiB)."""
    # ru_maxrss is in KiB on Linux (bytes on macOS)
    scale = 1 / 1024 if sys.platform != "darwin" else 1 / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _current_rss_mb() -> float:
    """Resident set size now (MiB); the peak so far where /proc is missing.

    The baseline must be the current size: the peak after imports can sit well above it
    (transient import-time allocations), which would hide a smaller run's whole peak.
    """
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return _rss_mb()


def worker(which: str, n_tokens: int, n_neurons: int, seed: int, out: str, n_threads: int):
    with lmsim.threads(n_threads):
        _worker(which, n_tokens, n_neurons, seed, out)


def _worker(which: str, n_tokens: int, n_neurons: int, seed: int, out: str) -> None:
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    from lmsim.cluster import correlation_distances
    from lmsim.moments import Moments

    # warm the libraries on tiny data so their one-off allocations are in the baseline
    tiny = np.random.default_rng(0).standard_normal((50, 8))
    linkage(correlation_distances(tiny)[0], "average")
    np.corrcoef(tiny.T)
    base = _current_rss_mb()
    timings: dict[str, float] = {}
    if which == "lmsim":
        from lmsim.cluster import cluster_neurons

        t_gen = 0.0

        def timed_stream():
            nonlocal t_gen
            it = chunks(n_tokens, n_neurons, seed)
            while True:
                t0 = time.perf_counter()
                x = next(it, None)
                t_gen += time.perf_counter() - t0
                if x is None:
                    return
                yield x

        t0 = time.perf_counter()
        labels = cluster_neurons(timed_stream(), THRESHOLDS)
        timings = {"total_s": time.perf_counter() - t0 - t_gen}
    elif which == "lmsim_moments":
        from lmsim.cluster import cluster_neurons

        mom = Moments({"acts": n_neurons})
        t_gen = t_mom = 0.0
        it = chunks(n_tokens, n_neurons, seed)
        while True:
            t0 = time.perf_counter()
            x = next(it, None)
            t_gen += time.perf_counter() - t0
            if x is None:
                break
            t0 = time.perf_counter()
            mom.update({"acts": x})
            t_mom += time.perf_counter() - t0
        t0 = time.perf_counter()
        labels = cluster_neurons(mom, THRESHOLDS)
        timings = {"moments_s": t_mom, "cluster_s": time.perf_counter() - t0}
        timings["total_s"] = timings["moments_s"] + timings["cluster_s"]
    else:
        t0 = time.perf_counter()
        X = np.empty((n_tokens, n_neurons), dtype=np.float32)
        row = 0
        for x in chunks(n_tokens, n_neurons, seed):
            X[row : row + len(x)] = x
            row += len(x)
        t_gen = time.perf_counter() - t0
        t0 = time.perf_counter()
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = np.corrcoef(X.T)
        corr = np.nan_to_num(corr)
        corr = (corr + corr.T) / 2
        np.fill_diagonal(corr, 1)
        t_corr = time.perf_counter() - t0
        t0 = time.perf_counter()
        Z = linkage(squareform(1 - np.abs(corr), checks=False), method="average")
        labels = {t: fcluster(Z, t, criterion="distance") for t in THRESHOLDS}
        timings = {"corrcoef_s": t_corr, "cluster_s": time.perf_counter() - t0}
        timings["total_s"] = timings["corrcoef_s"] + timings["cluster_s"]
    result = {
        "which": which,
        **timings,
        "generate_s_excluded": t_gen,
        "peak_rss_mb_above_baseline": max(_rss_mb() - base, 0.0),
        "n_clusters": {str(t): int(np.unique(v).size) for t, v in labels.items()},
    }
    np.savez(out, **{str(t): v for t, v in labels.items()})
    print(json.dumps(result))


TINY = {"layers": 2, "width": 48, "n_tokens": 1500}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=13)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--n-tokens", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=1, help="lmsim.threads in every worker")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds, best kept")
    parser.add_argument(
        "--sides", nargs="+", choices=SIDES, default=list(SIDES), help="lmsim and neurox needed"
    )
    parser.add_argument("--tiny", action="store_true", help=f"a seconds-long check: {TINY}")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "cluster.json"))
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--labels", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tiny:
        for key, value in TINY.items():
            setattr(args, key, value)
    n_neurons = args.layers * args.width
    if args.worker:
        worker(args.worker, args.n_tokens, n_neurons, args.seed, args.labels, args.threads)
        return {}
    if not {"lmsim", "neurox"} <= set(args.sides):
        raise ValueError(f"`--sides` must include lmsim and neurox, got {args.sides}")

    from sklearn.metrics import adjusted_rand_score

    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(args.threads)
    load_before = os.getloadavg()
    limits = machine_limits(args.threads)
    runs, labels = {}, {}
    tmp = Path(args.out).parent
    tmp.mkdir(parents=True, exist_ok=True)
    # Sides alternate and each keeps its fastest of --repeats runs: on a shared machine
    # the load changes during the benchmark.
    for _ in range(args.repeats):
        for which in args.sides:
            path = tmp / f".labels_{which}_{os.getpid()}.npz"
            cmd = [sys.executable, __file__, "--worker", which, "--labels", str(path)]
            cmd += ["--layers", str(args.layers), "--width", str(args.width)]
            cmd += ["--n-tokens", str(args.n_tokens), "--seed", str(args.seed)]
            cmd += ["--threads", str(args.threads)]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"{which} worker failed:\n{proc.stderr[-3000:]}")
            run = json.loads(proc.stdout.strip().splitlines()[-1])
            run["times_s"] = runs.get(which, {}).get("times_s", []) + [run["total_s"]]
            if which not in runs or run["total_s"] < runs[which]["total_s"]:
                runs[which] = run
            else:
                runs[which]["times_s"] = run["times_s"]
            with np.load(path) as f:
                labels[which] = {k: f[k] for k in f.files}
            path.unlink()
            print(which, {k: v for k, v in run.items() if k != "n_clusters"}, flush=True)
    limits = remeasure(limits, args.threads)
    ari = {
        side: {
            t: float(adjusted_rand_score(labels["neurox"][t], labels[side][t]))
            for t in labels["neurox"]
        }
        for side in args.sides
        if side != "neurox"
    }
    assert all(v == 1.0 for a in ari.values() for v in a.values()), f"partitions differ: {ari}"
    d = n_neurons
    flops = args.n_tokens * d * d
    gemm = limits["bench_threads"]["gemm_gflops"]
    linkage_s = runs["neurox"]["cluster_s"]
    bound_s = flops / gemm / 1e9 + linkage_s
    for run in runs.values():
        run["best_s"] = run["total_s"]
        run.update(fraction(flops, run["total_s"], limits))
        run["fraction_of_bound"] = bound_s / run["total_s"]
    result = {
        "benchmark": "correlation clustering, lmsim (moments) vs NeuroX (corrcoef + scipy)",
        "config": {k: v for k, v in vars(args).items() if k not in ("worker", "labels")},
        **record(args.threads, limits, load_before),
        "n_tokens": args.n_tokens,
        "n_neurons": n_neurons,
        "layers_x_width": [args.layers, args.width],
        "thresholds": THRESHOLDS,
        "flops_nominal": flops,
        "flops_are": "n_tokens * n_neurons**2: the symmetric co-moment (syrk), float64",
        "bound": {
            "seconds": bound_s,
            "comoment_at_gemm_limit_s": flops / gemm / 1e9,
            "linkage_s": linkage_s,
            "is": "n D² at the float64 GEMM limit plus the measured scipy average linkage "
            "and fcluster cuts (O(D²), memory-bound), which both sides run",
        },
        **runs,
        "speedup_total": runs["neurox"]["total_s"] / runs["lmsim"]["total_s"],
        "memory_ratio": runs["neurox"]["peak_rss_mb_above_baseline"]
        / max(runs["lmsim"]["peak_rss_mb_above_baseline"], 1e-9),
        "adjusted_rand_index": ari,
        "expected_mb": {
            "comoment_float64": 8 * d * d / 2**20,
            "condensed_float64": 4 * d * (d - 1) / 2**20,
            "dense_float32_activations": 4 * args.n_tokens * d / 2**20,
        },
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    result["load_average_after"] = list(os.getloadavg())
    write_result(args.out, result)
    print(
        json.dumps(
            {
                "speedup_total": result["speedup_total"],
                "memory_ratio": result["memory_ratio"],
                "lmsim_fraction_of_gemm_limit": runs["lmsim"]["fraction_of_gemm_limit"],
                "lmsim_fraction_of_bound": runs["lmsim"]["fraction_of_bound"],
            }
        )
    )
    return result


if __name__ == "__main__":
    main()
