"""LMD from moments vs one sklearn Ridge fit per (target, basis) on raw embeddings.

Synthetic correlated sequence embeddings of ``n_models`` models of width ``width``
(shared latent factors plus model-specific noise). Both sides compute the same
``n`` leave-one-out fits and ``n²`` pairwise fits (diagonal included) with the same
ridge (sklearn ``alpha = λ (N - 1)``, the exact correspondence of the "code" regulariser),
and the benchmark checks that the R² agree before reporting times and their ratio,
measured in the same run. Writes ``benchmarks/results/lmd.json``.

Usage::

    python benchmarks/bench_lmd.py                      # 12 x 768, 10000 train / 2000 test
    python benchmarks/bench_lmd.py --n-train 3000 --n-models 6 --width 256   # quick
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.linear_model import Ridge

from lmsim.lmd import decompose
from lmsim.moments import Moments


def synthetic_embeddings(n_models, width, n_samples, n_latent, seed):
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n_samples, n_latent))
    return {
        f"model{i:02d}": latent @ rng.normal(size=(n_latent, width)) / np.sqrt(n_latent)
        + 0.5 * rng.normal(size=(n_samples, width))
        for i in range(n_models)
    }


def pooled_r2(target_test, pred):
    return 1 - ((target_test - pred) ** 2).sum() / ((target_test - target_test.mean(0)) ** 2).sum()


def sklearn_all_fits(train, test, ridge):
    """Every leave-one-out and pairwise fit, one Ridge at a time, on raw arrays."""
    names = list(train)
    alpha = ridge * (len(train[names[0]]) - 1)
    group, pair = {}, np.zeros((len(names), len(names)))
    for target in names:
        basis = [m for m in names if m != target]
        model = Ridge(alpha=alpha, solver="cholesky").fit(
            np.hstack([train[m] for m in basis]), train[target]
        )
        group[target] = pooled_r2(test[target], model.predict(np.hstack([test[m] for m in basis])))
    for i, target in enumerate(names):
        for j, basis in enumerate(names):
            model = Ridge(alpha=alpha, solver="cholesky").fit(train[basis], train[target])
            pair[i, j] = pooled_r2(test[target], model.predict(test[basis]))
    return group, pair


def accumulate(acts, device, chunk=1000):
    n = len(next(iter(acts.values())))
    mom = Moments({k: v.shape[1] for k, v in acts.items()}, device=device)
    for start in range(0, n, chunk):
        mom.update({k: v[start : start + chunk] for k, v in acts.items()})
    return mom


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-models", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--n-train", type=int, default=10000)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--n-latent", type=int, default=256)
    parser.add_argument("--ridge", type=float, default=1e-6)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--skip-sklearn", action="store_true")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "lmd.json"))
    args = parser.parse_args()

    acts = synthetic_embeddings(
        args.n_models, args.width, args.n_train + args.n_test, args.n_latent, seed=0
    )
    train = {k: v[: args.n_train] for k, v in acts.items()}
    test = {k: v[args.n_train :] for k, v in acts.items()}

    t0 = time.perf_counter()
    mom_train, mom_test = accumulate(train, args.device), accumulate(test, args.device)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    t_moments = time.perf_counter() - t0
    t0 = time.perf_counter()
    dec = decompose(mom_train, mom_test, ridge=args.ridge, progress=True)
    t_decompose = time.perf_counter() - t0
    result = {
        "config": vars(args),
        "device": args.device,
        "torch_threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "group_rho": dec.group_rho,
        "seconds_moments_one_pass": t_moments,
        "seconds_decompose_from_moments": t_decompose,
        "seconds_lmsim_total": t_moments + t_decompose,
    }
    print(f"moments (one pass over {args.n_train + args.n_test} samples): {t_moments:.1f} s")
    print(
        f"decompose ({args.n_models} leave-one-out + {args.n_models**2} pairwise): {t_decompose:.1f} s"
    )
    if not args.skip_sklearn:
        t0 = time.perf_counter()
        group, pair = sklearn_all_fits(train, test, args.ridge)
        t_sklearn = time.perf_counter() - t0
        max_diff = max(
            max(abs(group[m] - dec.group_r2[m]) for m in dec.models),
            float(np.abs(pair - dec.pairwise_r2.to_numpy()).max()),
        )
        result.update(
            seconds_sklearn_one_by_one=t_sklearn,
            ratio_sklearn_over_lmsim_total=t_sklearn / (t_moments + t_decompose),
            ratio_sklearn_over_decompose=t_sklearn / t_decompose,
            max_abs_r2_difference=max_diff,
        )
        print(f"sklearn Ridge one by one: {t_sklearn:.1f} s; max |ΔR²| = {max_diff:.2e}")
        print(
            f"ratio sklearn / lmsim (moments + decompose): {result['ratio_sklearn_over_lmsim_total']:.2f}"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
