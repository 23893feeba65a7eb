"""All-pairs layer similarity from streaming moments vs a naive per-pair loop over raw data.

Synthetic activations of 2 models × 7 layers × 384 neurons (correlated across layers and
across models), ``--n-tokens`` samples. For each of linear CKA, SVCCA, PWCCA, neuronsim
and mixedsim we time

* moments: one streaming :class:`~lmsim.moments.Moments` pass over all 14 layers
  (its time is split evenly over the five metrics' rows and also reported on its own)
  plus :func:`lmsim.metrics.pairwise_matrix` over all 14 × 14 pairs;
* naive: a numpy loop over the same pairs recomputing everything from the raw float64
  activations (SVD / QR / corrcoef / lstsq per pair, as in the tests' reference code).

The naive loop is far slower; ``--naive-pairs K`` times it on K random pairs per metric
and extrapolates per-pair time × number of pairs (reported as such). Both sides run in
the same process on the same data, alternate (best of ``--repeats``) inside
``lmsim.threads(--threads)``, and the script checks that they agree. The JSON records
threads, load average, the machine's float64 GEMM / Cholesky GFLOP/s measured in the same
run, and nominal FLOP counts with the achieved fraction of the GEMM limit: ``n D²`` for
the moments pass (``dsyrk``), and for the all-pairs step the dominant dense kernels
(Golub & Van Loan counts: symmetric eigendecomposition with vectors ``9 d³``, thin SVD
with both factors ``21 k³``, singular values only ``8 k³ / 3``, GEMM ``2 m k n``).

Usage::

    python benchmarks/bench_metrics.py --n-tokens 100000 --naive-pairs 8
    python benchmarks/bench_metrics.py --n-tokens 5000 --n-layers 3 --width 64 \\
        --naive-pairs 4 --out /tmp/metrics_small.json    # seconds: checks that it works
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from _common import (
    add_common_args,
    alternate,
    fraction,
    machine_limits,
    record,
    remeasure,
    write_result,
)

import lmsim
from lmsim.metrics import pairwise_matrix
from lmsim.moments import Moments

METRICS = ["linear_cka", "svcca", "pwcca", "neuronsim", "mixedsim"]


# --------------------------------------------------------------------------- data
def synthetic_activations(n_tokens: int, n_layers: int, width: int, seed: int = 0):
    """Two "models": chains of noisy tanh layers fed by related inputs (float32)."""
    rng = np.random.default_rng(seed)
    spectrum = (1.0 / np.sqrt(np.arange(1, width + 1))).astype(np.float32)
    tokens = rng.standard_normal((n_tokens, width), dtype=np.float32) * spectrum
    acts = {}
    for model in ("model_a", "model_b"):
        mix = rng.standard_normal((width, width), dtype=np.float32) / np.sqrt(width)
        h = tokens @ mix + 0.3 * rng.standard_normal((n_tokens, width), dtype=np.float32)
        for layer in range(n_layers):
            acts[f"{model}/layer.{layer}"] = h + rng.standard_normal(width, dtype=np.float32)
            weight = rng.standard_normal((width, width), dtype=np.float32) * (1.5 / np.sqrt(width))
            h = np.tanh(h @ weight) + 0.2 * rng.standard_normal((n_tokens, width), dtype=np.float32)
    return acts


# --------------------------------------------------------------------------- naive side
def _svd_basis(A, threshold=0.99):
    Ac = A - A.mean(axis=0)
    U, s, _ = np.linalg.svd(Ac, full_matrices=False)
    cumsum = np.cumsum(s**2)
    return U[:, : int(np.argmax(cumsum >= threshold * cumsum[-1])) + 1]


def naive_linear_cka(X, Y):
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    return np.linalg.norm(Xc.T @ Yc) ** 2 / (np.linalg.norm(Xc.T @ Xc) * np.linalg.norm(Yc.T @ Yc))


def naive_svcca(X, Y):
    return np.linalg.svd(_svd_basis(X).T @ _svd_basis(Y), compute_uv=False).mean()


def naive_pwcca(X, Y):
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    Qx, _ = np.linalg.qr(Xc)
    Qy, _ = np.linalg.qr(Yc)
    u, rho, _ = np.linalg.svd(Qx.T @ Qy, full_matrices=False)
    weights = np.abs((Qx @ u).T @ Xc).sum(axis=1)
    return (weights * rho).sum() / weights.sum()


def naive_neuronsim(X, Y):
    corr = np.corrcoef(X.T, Y.T)[: X.shape[1], X.shape[1] :]
    return np.abs(corr).max(axis=1).mean()


def naive_mixedsim(X, Y):
    design = np.column_stack([np.ones(len(Y)), Y])
    coef, *_ = np.linalg.lstsq(design, X, rcond=None)
    residual = X - design @ coef
    sst = ((X - X.mean(axis=0)) ** 2).sum(axis=0)
    return np.sqrt(np.clip(1 - (residual**2).sum(axis=0) / sst, 0, None)).mean()


NAIVE = {
    "linear_cka": naive_linear_cka,
    "svcca": naive_svcca,
    "pwcca": naive_pwcca,
    "neuronsim": naive_neuronsim,
    "mixedsim": naive_mixedsim,
}


def nominal_pair_flops(metric: str, n_blocks: int, d: int) -> float:
    """Dominant dense FLOPs of ``pairwise_matrix`` over all ``n_blocks²`` ordered pairs.

    Upper bounds with every block at full rank ``k = d`` (SVCCA truncation keeps fewer).
    """
    ordered, unordered = n_blocks**2, n_blocks * (n_blocks + 1) // 2
    eigh = 9 * d**3
    cross = 2 * d**3 + 2 * d**3  # whitenᵀ @ C_xy @ whiten
    if metric == "linear_cka":
        return unordered * 2 * d**2 + n_blocks * 2 * d**2
    if metric == "svcca":
        return n_blocks * (eigh + 2 * d**3) + unordered * (cross + 8 * d**3 / 3)
    if metric == "pwcca":  # one full SVD per unordered pair, weights for both directions
        return n_blocks * (eigh + 2 * d**3) + unordered * (cross + 21 * d**3 + 2 * 2 * d**3)
    if metric == "neuronsim":
        return ordered * 3 * d**2
    if metric == "mixedsim":
        return n_blocks * eigh + ordered * (2 * d**3 + 2 * d**2)
    raise ValueError(metric)


# --------------------------------------------------------------------------- runs
def run(
    n_tokens: int,
    n_layers: int,
    width: int,
    naive_pairs: int | None,
    chunk: int,
    seed: int,
    repeats: int,
):
    acts = synthetic_activations(n_tokens, n_layers, width, seed)
    names = list(acts)
    n_pairs = len(names) ** 2

    def accumulate():
        mom = Moments({name: width for name in names})
        for lo in range(0, n_tokens, chunk):
            mom.update({name: x[lo : lo + chunk] for name, x in acts.items()})
        return mom

    acc = alternate({"moments": accumulate}, repeats)["moments"]
    mom, accumulate_s = acc["result"], acc["best_s"]

    acts64 = {name: x.astype(np.float64) for name, x in acts.items()}
    rng = np.random.default_rng(seed + 1)
    all_pairs = [(i, j) for i in range(len(names)) for j in range(len(names))]
    if naive_pairs is None or naive_pairs >= n_pairs:
        timed_pairs = all_pairs
    else:
        timed_pairs = [all_pairs[k] for k in rng.choice(n_pairs, naive_pairs, replace=False)]

    rows = []
    for metric in METRICS:
        runs = alternate(
            {
                "moments": lambda m=metric: pairwise_matrix(mom, names, metric=m, progress=False),
                "naive": lambda m=metric: [
                    NAIVE[m](acts64[names[i]], acts64[names[j]]) for i, j in timed_pairs
                ],
            },
            repeats,
        )
        matrix, pairwise_s = runs["moments"]["result"], runs["moments"]["best_s"]
        naive_values, naive_timed_s = runs["naive"]["result"], runs["naive"]["best_s"]
        naive_s = naive_timed_s * n_pairs / len(timed_pairs)
        max_diff = max(abs(matrix[i, j] - v) for (i, j), v in zip(timed_pairs, naive_values))

        moments_s = pairwise_s + accumulate_s / len(METRICS)
        rows.append(
            {
                "metric": metric,
                "moments_s": moments_s,
                "pairwise_only_s": pairwise_s,
                "naive_s": naive_s,
                "naive_pairs_timed": len(timed_pairs),
                "naive_extrapolated": len(timed_pairs) < n_pairs,
                "speedup": naive_s / moments_s,
                "max_abs_diff": float(max_diff),
                "pairwise_flops": nominal_pair_flops(metric, len(names), width),
            }
        )
        print(
            f"{metric:>11}  moments {moments_s:8.2f} s  (pairs {pairwise_s:6.2f} s)  "
            f"naive {naive_s:9.1f} s{'*' if len(timed_pairs) < n_pairs else ' '}  "
            f"×{naive_s / moments_s:7.1f}  max|diff| {max_diff:.1e}",
            flush=True,
        )
    return {
        "accumulate_s": accumulate_s,
        "accumulate_flops": n_tokens * (len(names) * width) ** 2,
        "n_pairs": n_pairs,
        "rows": rows,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-tokens", type=int, default=100_000)
    parser.add_argument("--n-layers", type=int, default=7, help="layers per model (2 models)")
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument(
        "--naive-pairs",
        type=int,
        default=None,
        help="time the naive loop on this many random pairs per metric and extrapolate "
        "(default: all pairs)",
    )
    parser.add_argument("--chunk", type=int, default=4096, help="tokens per moments update")
    parser.add_argument("--seed", type=int, default=0)
    add_common_args(parser)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "metrics.json"
    )
    args = parser.parse_args(argv)
    threads = lmsim.default_threads() if args.threads is None else args.threads
    load_before = os.getloadavg()
    limits = machine_limits(threads)

    print(
        f"2 models × {args.n_layers} layers × {args.width} dims × {args.n_tokens} tokens, "
        f"{threads} thread(s); limits {limits}",
        flush=True,
    )
    with lmsim.threads(threads):
        result = run(
            args.n_tokens,
            args.n_layers,
            args.width,
            args.naive_pairs,
            args.chunk,
            args.seed,
            args.repeats,
        )
    limits = remeasure(limits, threads)
    result["accumulate_limit"] = fraction(
        result["accumulate_flops"], result["accumulate_s"], limits
    )
    for row in result["rows"]:
        row["pairwise_limit"] = fraction(row["pairwise_flops"], row["pairwise_only_s"], limits)
    print(
        f"moment accumulation (all {2 * args.n_layers} layers, one pass): {result['accumulate_s']:.2f} s"
    )
    print(
        "moments column = all-pairs time + accumulation / 5; * = naive extrapolated from a sample"
    )
    print("\n| metric | moments (s) | naive (s) | speed-up | max abs diff |")
    print("|---|---:|---:|---:|---:|")
    for row in result["rows"]:
        star = "*" if row["naive_extrapolated"] else ""
        print(
            f"| {row['metric']} | {row['moments_s']:.2f} | {row['naive_s']:.1f}{star} | "
            f"{row['speedup']:.1f}× | {row['max_abs_diff']:.1e} |"
        )
    total_moments = result["accumulate_s"] + sum(r["pairwise_only_s"] for r in result["rows"])
    total_naive = sum(r["naive_s"] for r in result["rows"])
    print(
        f"| all five | {total_moments:.2f} | {total_naive:.1f} | {total_naive / total_moments:.1f}× | |"
    )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "config": {
            "n_models": 2,
            "n_layers": args.n_layers,
            "width": args.width,
            "n_tokens": args.n_tokens,
            "naive_pairs": args.naive_pairs,
            "chunk": args.chunk,
            "seed": args.seed,
            "repeats": args.repeats,
            "device": "cpu",
        },
        **record(threads, limits, load_before),
        **result,
        "total_moments_s": total_moments,
        "total_naive_s": total_naive,
    }
    write_result(args.out, payload)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
