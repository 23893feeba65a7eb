"""LMD from streamed moments vs sklearn Ridge per fit vs minimal dense per-target algebra.

Synthetic correlated sequence embeddings of ``n_models`` models of width ``width``
(shared latent factors plus model-specific noise), the paper's regime ``n ≫ d``. Three
contenders compute the same ``n_models`` leave-one-out fits and ``n_models²`` pairwise
fits (diagonal included) with the same ridge (sklearn ``alpha = λ (N - 1)``, the exact
correspondence of the "code" regulariser):

* **lmsim**: one streaming :class:`~lmsim.moments.Moments` pass over train and test
  (chunks of ``--chunk`` rows) and :func:`lmsim.lmd.decompose` (one factorisation for all
  leave-one-out fits);
* **minimal**: per-target dense algebra on the same covariance matrices (NumPy/SciPy:
  gather ``Σ_OO``, ``cho_factor`` / ``cho_solve``, explicit train and test quadratic
  forms) — what the fits cost without the block-inverse identity;
* **sklearn**: one ``Ridge(solver="cholesky")`` per fit on the raw arrays.

The baselines are slow at full size: ``--sklearn-fits K`` / ``--minimal-fits K`` time K
leave-one-out fits (and, for sklearn, K pairwise fits) and extrapolate per-fit time × the
number of fits (flagged ``extrapolated``). The contenders alternate, best of
``--repeats``, inside ``lmsim.threads(--threads)``; the JSON records threads, load
average, the machine's GEMM / Cholesky GFLOP/s measured in the same run, each task's
nominal FLOP count and the achieved fraction of the GEMM limit. R² are checked to agree.

Usage::

    python benchmarks/bench_lmd.py                   # 12 x 768, 100k / 20k samples (~16 GB)
    python benchmarks/bench_lmd.py --n-models 4 --width 64 --n-train 5000 --n-test 1000 \\
        --out /tmp/lmd_small.json                    # seconds: checks that it works
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
from scipy.linalg import cho_factor, cho_solve
from sklearn.linear_model import Ridge

import lmsim
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


# ------------------------------------------------------------------------- contenders
def lmsim_run(train, test, chunk, ridge):
    def accumulate(acts):
        n = len(next(iter(acts.values())))
        mom = Moments({k: v.shape[1] for k, v in acts.items()})
        for start in range(0, n, chunk):
            mom.update({k: v[start : start + chunk] for k, v in acts.items()})
        return mom

    return decompose(accumulate(train), accumulate(test), ridge=ridge)


def minimal_loo(train_cov, test_cov, n_train, n_test, mean_tr, mean_te, slices, target, ridge):
    """One leave-one-out fit by dense per-target algebra on covariance matrices."""
    tsl = slices[target]
    other = np.concatenate(
        [np.arange(s.start, s.stop) for name, s in slices.items() if name != target]
    )
    t_idx = np.arange(tsl.start, tsl.stop)
    cov_zz = train_cov[np.ix_(other, other)] / (n_train - 1)
    cov_zz[np.diag_indices_from(cov_zz)] += ridge
    cov_zu = train_cov[np.ix_(other, t_idx)] / (n_train - 1)
    W = cho_solve(cho_factor(cov_zz, check_finite=False), cov_zu, check_finite=False).T
    b = mean_tr[t_idx] - W @ mean_tr[other]
    out = []
    for cov, n, mean in ((train_cov, n_train, mean_tr), (test_cov, n_test, mean_te)):
        s_zz, s_zu = cov[np.ix_(other, other)] / n, cov[np.ix_(other, t_idx)] / n
        sst = np.trace(cov[np.ix_(t_idx, t_idx)]) / n
        off = mean[t_idx] - W @ mean[other] - b
        ssr = sst - 2 * np.sum(W * s_zu.T) + np.sum((W @ s_zz) * W) + off @ off
        out.append(1 - ssr / sst)
    return out


def sklearn_loo(train, test, target, alpha):
    basis = [m for m in train if m != target]
    # copy_X=False: centre the stacked basis in place (it is a fresh hstack anyway).
    model = Ridge(alpha=alpha, solver="cholesky", copy_X=False)
    model.fit(np.hstack([train[m] for m in basis]), train[target])
    return pooled_r2(test[target], model.predict(np.hstack([test[m] for m in basis])))


def sklearn_pair(train, test, target, basis, alpha):
    model = Ridge(alpha=alpha, solver="cholesky").fit(train[basis], train[target])
    return pooled_r2(test[target], model.predict(test[basis]))


# ------------------------------------------------------------------------- FLOP counts
def flops_lmsim(k, d, n_train, n_test):
    dim = k * d
    moments = (n_train + n_test) * dim**2  # dsyrk, k rows into D x D
    loo = dim**3  # dpotrf D³/3 + dpotri 2D³/3
    loo += k * (d**3 / 3 + 2 * d**2 * dim + 2 * d * (dim - d) ** 2)  # P_TT solve, test quad
    pairwise = k * (d**3 / 3 + 2 * d**2 * dim + 2 * dim * d**2)  # factor, solve, test quad
    return {"moments": moments, "leave_one_out": loo, "pairwise": pairwise}


def flops_minimal_fit(k, d):
    p = (k - 1) * d
    return p**3 / 3 + 2 * p**2 * d + 2 * (2 * d * p**2)  # factor, solve, two quad forms


def flops_sklearn_loo(k, d, n_train, n_test):
    p = (k - 1) * d
    return 2 * n_train * p**2 + 2 * n_train * p * d + p**3 / 3 + 2 * p**2 * d + 2 * n_test * p * d


def flops_sklearn_pair(d, n_train, n_test):
    return 4 * n_train * d**2 + d**3 / 3 + 2 * d**3 + 2 * n_test * d**2


# ------------------------------------------------------------------------- main
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-models", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--n-train", type=int, default=100_000)
    parser.add_argument("--n-test", type=int, default=20_000)
    parser.add_argument("--n-latent", type=int, default=256)
    parser.add_argument("--chunk", type=int, default=4096, help="rows per Moments.update")
    parser.add_argument("--ridge", type=float, default=1e-6)
    parser.add_argument("--sklearn-fits", type=int, default=1, help="0: skip sklearn")
    parser.add_argument("--minimal-fits", type=int, default=2, help="0: skip minimal")
    add_common_args(parser)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "lmd.json")
    args = parser.parse_args(argv)
    threads = lmsim.default_threads() if args.threads is None else args.threads
    load_before = os.getloadavg()
    limits = machine_limits(threads)
    k, d = args.n_models, args.width
    print(f"limits: {limits}", flush=True)

    acts = synthetic_embeddings(k, d, args.n_train + args.n_test, args.n_latent, seed=0)
    train = {m: np.ascontiguousarray(v[: args.n_train]) for m, v in acts.items()}
    test = {m: np.ascontiguousarray(v[args.n_train :]) for m, v in acts.items()}
    del acts
    names = list(train)
    alpha = args.ridge * (args.n_train - 1)

    # The minimal baseline starts from the same moments (their cost is lmsim's pass).
    mom_tr, mom_te = Moments.from_arrays(train), Moments.from_arrays(test)
    cov_tr, cov_te = mom_tr.comoment(names).numpy(), mom_te.comoment(names).numpy()
    mean_tr, mean_te = mom_tr.mean(names).numpy(), mom_te.mean(names).numpy()
    slices = {m: mom_tr._offsets[m] for m in names}
    n_min = min(args.minimal_fits, k)
    n_skl = min(args.sklearn_fits, k)

    contenders = {"lmsim": lambda: lmsim_run(train, test, args.chunk, args.ridge)}
    if n_min:
        contenders["lmsim_loo"] = lambda: decompose(
            mom_tr, mom_te, ridge=args.ridge, pairwise=False
        )
        contenders["minimal"] = lambda: [
            minimal_loo(
                cov_tr, cov_te, args.n_train, args.n_test, mean_tr, mean_te, slices, t, args.ridge
            )
            for t in names[:n_min]
        ]
    if n_skl:
        contenders["sklearn"] = lambda: (
            [sklearn_loo(train, test, t, alpha) for t in names[:n_skl]],
            [
                sklearn_pair(train, test, t, names[-1 - i], alpha)
                for i, t in enumerate(names[:n_skl])
            ],
        )
    with lmsim.threads(threads):
        runs = alternate(contenders, args.repeats)
    limits = remeasure(limits, threads)

    dec = runs["lmsim"]["result"]
    fl = flops_lmsim(k, d, args.n_train, args.n_test)
    t_lmsim = runs["lmsim"]["best_s"]
    result = {
        "config": {k_: (str(v) if isinstance(v, Path) else v) for k_, v in vars(args).items()},
        **record(threads, limits, load_before),
        "group_rho": dec.group_rho,
        "lmsim": {
            "best_s": t_lmsim,
            "times_s": runs["lmsim"]["times_s"],
            **fraction(sum(fl.values()), t_lmsim, limits),
            "flops_by_step": fl,
        },
    }
    print(f"lmsim (moments pass + decompose): best {t_lmsim:.2f} s of {runs['lmsim']['times_s']}")
    if n_min:
        got = runs["minimal"]["result"]
        per_fit = runs["minimal"]["best_s"] / n_min
        diff = max(
            max(abs(tr - dec.train_group_r2[t]), abs(te - dec.group_r2[t]))
            for t, (tr, te) in zip(names, got)
        )
        t_loo = runs["lmsim_loo"]["best_s"]
        result["lmsim_leave_one_out_from_moments"] = {
            "best_s": t_loo,
            "times_s": runs["lmsim_loo"]["times_s"],
            **fraction(fl["leave_one_out"], t_loo, limits),
        }
        result["ratio_minimal_over_lmsim_leave_one_out"] = per_fit * k / t_loo
        result["minimal_leave_one_out"] = {
            "fits_timed": n_min,
            "extrapolated": n_min < k,
            "seconds_per_fit": per_fit,
            "seconds_all_fits": per_fit * k,
            **fraction(flops_minimal_fit(k, d), per_fit, limits),
            "max_abs_r2_difference": diff,
        }
        print(
            f"leave-one-out from moments: lmsim {t_loo:.2f} s for {k} fits, minimal "
            f"{per_fit:.2f} s per fit; ratio {per_fit * k / t_loo:.1f}x; max |ΔR²| {diff:.1e}"
        )
    if n_skl:
        loo, pairs = runs["sklearn"]["result"]
        diff = max(
            max(abs(v - dec.group_r2[t]) for t, v in zip(names, loo)),
            max(
                abs(v - dec.pairwise_r2.loc[t, names[-1 - i]])
                for i, (t, v) in enumerate(zip(names, pairs))
            ),
        )
        per_round = runs["sklearn"]["best_s"]
        f_loo = flops_sklearn_loo(k, d, args.n_train, args.n_test)
        f_pair = flops_sklearn_pair(d, args.n_train, args.n_test)
        # Split the round's time between the two kinds of fit by their FLOP share.
        t_loo = per_round * f_loo / (f_loo + f_pair) / n_skl
        t_pair = per_round * f_pair / (f_loo + f_pair) / n_skl
        total = t_loo * k + t_pair * k * k
        result["sklearn"] = {
            "fits_timed": {"leave_one_out": n_skl, "pairwise": n_skl},
            "extrapolated": n_skl < k or n_skl < k * k,
            "seconds_round": per_round,
            "seconds_all_fits": total,
            **fraction(f_loo * k + f_pair * k * k, total, limits),
            "max_abs_r2_difference": diff,
        }
        result["ratio_sklearn_over_lmsim"] = total / t_lmsim
        print(
            f"sklearn Ridge, all {k} + {k * k} fits: {total:.1f} s (extrapolated from "
            f"{n_skl} + {n_skl}); ratio {total / t_lmsim:.1f}x; max |ΔR²| {diff:.1e}"
        )
    for name, entry in result.items():
        if isinstance(entry, dict) and "fraction_of_gemm_limit" in entry:
            print(f"{name}: {entry['gflops']:.1f} GFLOP/s = {entry['fraction_of_gemm_limit']:.0%}")
    result["load_average_after"] = list(os.getloadavg())
    write_result(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
