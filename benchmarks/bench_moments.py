"""Streaming float64 moments: lmsim's in-place symmetric update vs a full-GEMM Chan merge.

``n_blocks`` blocks of width ``width`` (joint width ``D``), ``--n-samples`` rows streamed
in chunks of ``--chunk``. Two contenders accumulate the same mean and co-moment:

* **lmsim**: :meth:`lmsim.moments.Moments.update` — one rank-``(k + 1)`` ``dsyrk`` per
  chunk into one triangle of the existing buffer (``k D²`` flops), no temporaries;
* **full GEMM**: the textbook streaming form in NumPy (what ``Moments`` did before):
  centre the chunk, ``Xcᵀ Xc`` as a full GEMM (``2 k D²``), and a Chan merge that builds
  new ``D × D`` matrices (``M + C_b + c δδᵀ``).

The useful work is ``n D²`` flops (one triangle); the fraction of the GEMM limit is
reported against it for both. Contenders alternate, best of ``--repeats``, inside
``lmsim.threads(--threads)``; the JSON records threads, load average and the limits.

Usage::

    python benchmarks/bench_moments.py                      # 12 x 768, 100k samples
    python benchmarks/bench_moments.py --n-blocks 4 --width 128 --n-samples 20000 \\
        --out /tmp/moments_small.json
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
from lmsim.moments import Moments


def full_gemm_moments(chunks):
    n, mean, comoment = 0, None, None
    for x in chunks:
        k = len(x)
        mean_b = x.mean(axis=0)
        centred = x - mean_b
        comoment_b = centred.T @ centred
        if n == 0:
            n, mean, comoment = k, mean_b, comoment_b
            continue
        total = n + k
        delta = mean_b - mean
        comoment = comoment + comoment_b + np.outer(delta, delta) * (n * k / total)
        mean = mean + delta * (k / total)
        n = total
    return mean, comoment


def lmsim_moments(chunks, names, widths):
    mom = Moments(dict(zip(names, widths)))
    bounds = np.cumsum([0, *widths])
    for x in chunks:
        mom.update({name: x[:, lo:hi] for name, lo, hi in zip(names, bounds[:-1], bounds[1:])})
    return mom.mean(names).numpy(), mom.comoment(names).numpy()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-blocks", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--n-samples", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=4096)
    add_common_args(parser)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "moments.json"
    )
    args = parser.parse_args(argv)
    threads = lmsim.default_threads() if args.threads is None else args.threads
    load_before = os.getloadavg()
    limits = machine_limits(threads)
    dim = args.n_blocks * args.width
    rng = np.random.default_rng(0)
    mix = rng.standard_normal((64, dim)) / 8
    chunks = [
        rng.standard_normal((min(args.chunk, args.n_samples - lo), 64)) @ mix
        + rng.standard_normal((min(args.chunk, args.n_samples - lo), dim))
        + 3.0
        for lo in range(0, args.n_samples, args.chunk)
    ]
    names = [f"m/layer.{i}" for i in range(args.n_blocks)]
    widths = [args.width] * args.n_blocks
    with lmsim.threads(threads):
        runs = alternate(
            {
                "lmsim": lambda: lmsim_moments(chunks, names, widths),
                "full_gemm": lambda: full_gemm_moments(chunks),
            },
            args.repeats,
        )
    limits = remeasure(limits, threads)
    (m1, c1), (m2, c2) = runs["lmsim"]["result"], runs["full_gemm"]["result"]
    rel = float(np.abs(c1 - c2).max() / np.abs(c2).max())
    useful = args.n_samples * dim**2
    result = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        **record(threads, limits, load_before),
        "max_rel_comoment_difference": rel,
        "max_abs_mean_difference": float(np.abs(m1 - m2).max()),
        "ratio_full_gemm_over_lmsim": runs["full_gemm"]["best_s"] / runs["lmsim"]["best_s"],
    }
    for name in ("lmsim", "full_gemm"):
        best = runs[name]["best_s"]
        result[name] = {"best_s": best, "times_s": runs[name]["times_s"]}
        result[name].update(fraction(useful, best, limits))
        print(
            f"{name:>9}: best {best:.2f} s, {result[name]['gflops']:.1f} useful GFLOP/s = "
            f"{result[name]['fraction_of_gemm_limit']:.0%} of the GEMM limit"
        )
    print(f"ratio {result['ratio_full_gemm_over_lmsim']:.2f}x, max rel diff {rel:.1e}")
    result["load_average_after"] = list(os.getloadavg())
    write_result(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
