"""lmsim.lmd checks of issue 42: cross-validated ridge R², the learning curve without
near-singular subsets, intervals over train and test shards, and ρ against group size."""

from __future__ import annotations

import copy
import warnings
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from _helpers import SEEDS

from lmsim import lmd, threads
from lmsim.moments import Moments
from lmsim.papers import zhang2022_lmd as chapter


@pytest.fixture(autouse=True)
def one_thread():
    # tiny solves: OpenBLAS and torch threads only contend on a shared machine
    with threads(1):
        yield


def latent_models(seed, n, widths=(6, 8, 5), n_latent=4, noise=1.0):
    """Models ``s A_m + noise`` sharing latents; the mixing matrices fixed across draws."""
    rng = np.random.default_rng(seed)
    out = {}
    z = rng.normal(size=(n, n_latent))
    for i, w in enumerate(widths):
        mix = np.random.default_rng(100 + i).normal(size=(n_latent, w))
        out[f"m{i}"] = z @ mix + noise * rng.normal(size=(n, w)) + 2.0
    return out


def shards_of(data, size):
    n = len(next(iter(data.values())))
    return [
        Moments.from_arrays({k: v[a : a + size] for k, v in data.items()})
        for a in range(0, n, size)
    ]


# --------------------------------------------------------------------------- cross-validation
def naive_cv(data, n_folds, alpha, ridge=1e-6):
    """K-fold ridge R² written from Eq. 6-9: contiguous folds, the code's ddof=1 ridge."""
    labels = list(data)
    n = len(data[labels[0]])
    bounds = np.linspace(0, n, n_folds + 1).round().astype(int)
    out = {m: [] for m in labels}
    for a, b in zip(bounds[:-1], bounds[1:]):
        held = np.zeros(n, bool)
        held[a:b] = True
        joint = np.concatenate([data[m][~held] for m in labels], axis=1)
        s = max(alpha * np.var(joint, axis=0, ddof=1).mean(), ridge)
        for t in labels:
            z_tr = np.concatenate([data[m][~held] for m in labels if m != t], axis=1)
            z_te = np.concatenate([data[m][held] for m in labels if m != t], axis=1)
            u_tr, u_te = data[t][~held], data[t][held]
            zc, uc = z_tr - z_tr.mean(0), u_tr - u_tr.mean(0)
            cov = zc.T @ zc / (len(zc) - 1) + s * np.eye(z_tr.shape[1])
            w = np.linalg.solve(cov, zc.T @ uc / (len(zc) - 1)).T
            bias = u_tr.mean(0) - w @ z_tr.mean(0)
            resid = u_te - z_te @ w.T - bias
            out[t].append(1 - (resid**2).sum() / ((u_te - u_te.mean(0)) ** 2).sum())
    return {m: float(np.mean(v)) for m, v in out.items()}


@pytest.mark.parametrize("seed", SEEDS)
def test_crossval_r2_matches_a_naive_k_fold_ridge(seed):
    data = latent_models(seed, 90)
    alphas = (0.0, 0.01, 0.3)
    cv = lmd.crossval_r2(data, n_folds=4, alphas=alphas)
    for alpha in alphas:
        expected = naive_cv(data, 4, alpha)
        for m, value in expected.items():
            assert cv.scores.loc[m, alpha] == pytest.approx(value, abs=1e-9)
        assert cv.scores.loc["group ρ", alpha] == pytest.approx(np.mean(list(expected.values())))
    best = cv.scores.loc[list(data)].idxmax(axis=1)
    pd.testing.assert_series_equal(
        cv.selected["alpha"].iloc[:3], best.astype(float), check_names=False
    )


def test_crossval_r2_on_shards_equals_arrays_and_refits_on_test():
    data, test = latent_models(0, 100), latent_models(1, 400)
    by_rows = lmd.crossval_r2(data, n_folds=5, alphas=(0.0, 0.1))
    by_shards = lmd.crossval_r2(shards_of(data, 20), n_folds=5, alphas=(0.0, 0.1), test=test)
    np.testing.assert_allclose(by_shards.scores.to_numpy(), by_rows.scores.to_numpy(), atol=1e-9)
    assert by_rows.selected["test_r2"].isna().all()
    # the selected ridge refitted on every shard, scored on the disjoint test set
    joint = np.concatenate(list(data.values()), axis=1)
    for m in data:
        alpha = by_shards.selected.loc[m, "alpha"]
        s = max(alpha * np.var(joint, axis=0, ddof=1).mean(), 1e-6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a large ridge is the point
            dec = lmd.decompose(data, test, ridge=s, pairwise=False)
        assert by_shards.selected.loc[m, "test_r2"] == pytest.approx(dec.group_r2[m], abs=1e-9)
    with pytest.raises(ValueError, match="n_folds"):
        lmd.crossval_r2(data, n_folds=1)
    with pytest.raises(ValueError, match="fewer than"):
        lmd.crossval_r2(shards_of(data, 50), n_folds=5)


def test_tuned_ridge_is_a_lower_bound_above_least_squares():
    """At ~2 train sequences per basis dimension least squares loses much of the
    population R²; the cross-validated ridge recovers most of it and stays below it."""
    widths = (24, 30, 20)
    train, test = latent_models(0, 120, widths, 6), latent_models(1, 4000, widths, 6)
    population = lmd.decompose(
        latent_models(2, 40_000, widths, 6), latent_models(3, 40_000, widths, 6), pairwise=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        raw = lmd.decompose(train, test, pairwise=False)
    cv = lmd.crossval_r2(train, n_folds=5, test=test)
    tuned = cv.selected["test_r2"].iloc[:3]
    assert (tuned > raw.group_r2 + 0.05).all()
    assert (tuned < population.group_r2 + 0.01).all()
    assert (cv.selected["alpha"].iloc[:3] > 0).all()


# --------------------------------------------------------------------------- learning curve
def test_extrapolate_r2_min_ratio_drops_near_singular_subsets():
    """Stein's line holds for n >= 2p; subsets near n = p fall below it (as on the page).
    With them the straight line extrapolates below the truth; without them it is exact."""
    p, r2_inf = 384, 0.9
    n = np.array([400, 420, 800, 1600, 3200, 6400])
    k = lmd.stein_factor(n, p)
    test_r2 = 1 - (1 - r2_inf) * k
    test_r2[n < 2 * p] -= 0.5  # the ridge and heavy tails near n = p: worse than Stein's
    curve = pd.DataFrame({"model": "a", "n_train": n, "n_basis": p, "test_r2": test_r2,
                          "stein_factor": k})  # fmt: skip
    everything = lmd.extrapolate_r2(curve).loc["a"]
    kept = lmd.extrapolate_r2(curve, min_ratio=2).loc["a"]
    assert everything.r2_inf < r2_inf - 0.02
    assert kept.r2_inf == pytest.approx(r2_inf, abs=1e-9) and kept.n_points == 4
    keep = n >= 2 * p
    slope, intercept = np.polyfit(k[keep], 1 - test_r2[keep], 1)
    assert kept.intercept == pytest.approx(intercept, abs=1e-9)
    with pytest.raises(ValueError, match="min_ratio"):
        lmd.extrapolate_r2(curve, min_ratio=-1)


# ------------------------------------------------------------------ train + test bootstrap
def test_effective_n_train_replays_the_draws():
    data, test = latent_models(0, 240), latent_models(1, 200)
    train = shards_of(data, 20)
    train[3] = Moments.from_arrays({k: v[60:70] for k, v in data.items()})  # an unequal shard
    boot = lmd.bootstrap(train, shards_of(test, 20), n_boot=6, seed=4, progress=False)
    sizes = np.array([m.n for m in train], dtype=float)
    rng = np.random.default_rng(4)
    for k in range(6):
        c = rng.multinomial(len(train), np.full(len(train), 1 / len(train)))
        rng.multinomial(10, np.full(10, 1 / 10))  # the test draw
        expected = (c @ sizes) ** 2 / ((c**2) @ sizes)
        assert boot.n_train_samples[k] == pytest.approx(expected)
    assert boot.resample == "both"
    only_test = lmd.bootstrap(train, shards_of(test, 20), n_boot=4, resample="test", progress=False)
    np.testing.assert_allclose(only_test.n_train_samples, only_test.estimate.n_train)


def test_test_only_bootstrap_is_corrected_as_before():
    data, test = latent_models(0, 200), latent_models(1, 200)
    boot = lmd.bootstrap(shards_of(data, 20), shards_of(test, 20), n_boot=10, resample="test",
                         progress=False)  # fmt: skip
    widths = {"m0": 6, "m1": 8, "m2": 5}
    legacy = copy.copy(boot)
    legacy.n_train_samples = legacy.train_draws = None
    for new, old in zip(lmd.replicate_views(boot, widths), lmd.replicate_views(legacy, widths)):
        pd.testing.assert_series_equal(new.group_r2, old.group_r2)
    est = lmd.bootstrap_estimate(
        lambda v: v[0].group_rho, {0: boot}, n_units=10, widths={0: widths}
    )
    assert est.unit == "test shards" and "resamples of the test shards, over" in est.method


def test_train_resampled_replicates_are_corrected_at_their_effective_n():
    """A resample that repeats train shards over-fits more; corrected at the nominal
    n_train its replicates sit below the estimate, at their effective n around it."""
    widths = (12, 16, 10)
    data, test = latent_models(0, 300, widths, 5), latent_models(1, 3000, widths, 5)
    boot = lmd.bootstrap(shards_of(data, 10), shards_of(test, 100), n_boot=60, progress=False)
    w = {f"m{i}": d for i, d in enumerate(widths)}
    views = lmd.replicate_views(boot, w)
    estimate = views[0].group_rho
    kish = np.mean([v.group_rho for v in views[1:]])
    nominal_boot = copy.copy(boot)
    nominal_boot.n_train_samples = nominal_boot.train_draws = None
    nominal = np.mean([v.group_rho for v in lmd.replicate_views(nominal_boot, w)[1:]])
    assert abs(kish - estimate) < 0.008
    assert nominal < estimate - 0.01
    est = lmd.bootstrap_estimate(lambda v: v[0].group_rho, {0: boot}, n_units=30, widths={0: w})
    assert est.unit == "train and test shards"
    assert "effective n_train" in est.method and est.low <= estimate <= est.high


def naive_resampled_n(draws, sizes, p):
    """El Karoui & Purdom's fixed point written row by row: weights w_i, κ = p / N,
    mean 1/(1 + c w) = 1 − κ, A = mean (c w / (1 + c w))², n / (n − p) = κ / (κ − A)."""
    from scipy.optimize import brentq

    w = np.repeat(np.asarray(draws, float), np.asarray(sizes))
    kappa = p / len(w)
    c = brentq(lambda c: np.mean(1 / (1 + c * w)) - (1 - kappa), 1e-20, 1e20, xtol=1e-300,
               rtol=1e-14)  # fmt: skip
    a = np.mean((c * w / (1 + c * w)) ** 2)
    factor = kappa / (kappa - a)
    return p * factor / (factor - 1)


@pytest.mark.parametrize("seed", SEEDS)
def test_resampled_n_train_matches_naive_and_weighted_least_squares(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(8, 15, size=20)
    p = 80
    assert lmd.resampled_n_train(np.ones(20), sizes, p) == sizes.sum()
    draws = rng.multinomial(20, np.full(20, 0.05))
    n_eff = lmd.resampled_n_train(draws, sizes, p)
    assert n_eff == pytest.approx(naive_resampled_n(draws, sizes, p), rel=1e-8)
    kish = (draws @ sizes) ** 2 / ((draws**2) @ sizes)
    assert kish < n_eff < sizes.sum()  # Kish over-states the over-fitting near n ≈ p
    # Monte-Carlo: the weighted fit's test error over the noise is Stein's factor at n_eff.
    w = np.repeat(draws, sizes).astype(float)
    beta, errors = rng.normal(size=p), []
    for _ in range(200):
        z = rng.normal(size=(len(w), p))
        y = z @ beta + rng.normal(size=len(w))
        design = np.column_stack([np.ones(len(w)), z]) * np.sqrt(w)[:, None]
        coef = np.linalg.lstsq(design, y * np.sqrt(w), rcond=None)[0]
        errors.append(1 + coef[0] ** 2 + np.sum((coef[1:] - beta) ** 2))
    assert np.mean(errors) == pytest.approx(lmd.stein_factor(n_eff, p), rel=0.06)
    with pytest.raises(ValueError, match="draws"):
        lmd.resampled_n_train(draws[:3], sizes, p)


def test_corrected_point_estimate_lies_inside_its_train_and_test_interval():
    """Near n ≈ 3p (the real group's regime) Kish's n over-corrects every replicate and the
    interval misses the point estimate above; the fixed point's n covers it, and each
    replicate's correction equals a naive one from the replicate's draws."""
    widths = (50, 60, 40)
    data, test = latent_models(0, 330, widths, 8), latent_models(1, 3000, widths, 8)
    boot = lmd.bootstrap(shards_of(data, 15), shards_of(test, 100), n_boot=100, progress=False)
    w = {f"m{i}": d for i, d in enumerate(widths)}
    est = lmd.bootstrap_estimate(lambda v: v[0].group_rho, {0: boot}, n_units=22, widths={0: w})
    assert est.low <= est.estimate <= est.high
    kish = copy.copy(boot)
    kish.train_draws = None  # the old correction: every basis at Kish's n
    old = lmd.bootstrap_estimate(lambda v: v[0].group_rho, {0: kish}, n_units=22, widths={0: w})
    assert old.low > old.estimate
    table = lmd.overfit_table(boot, w)
    assert table.loc["group ρ", "corrected_lower"] <= table.loc["group ρ", "corrected_r2"]
    assert table.loc["group ρ", "corrected_r2"] <= table.loc["group ρ", "corrected_upper"]
    nan_boot = copy.copy(boot)  # an underdetermined replicate (NaN) is left out, not NaN
    nan_boot.group_r2_samples = boot.group_r2_samples.copy()
    nan_boot.group_r2_samples.iloc[3] = np.nan
    nan_table = lmd.overfit_table(nan_boot, w)
    assert np.isfinite(nan_table[["corrected_lower", "corrected_upper"]].to_numpy()).all()
    views = lmd.replicate_views(boot, w)
    models, total = list(w), sum(widths)
    sizes = [m.n for m in shards_of(data, 15)]
    for i in (0, 7, 42):
        draws = boot.train_draws[i]
        for j, m in enumerate(models):
            n_g = naive_resampled_n(draws, sizes, total - w[m])
            raw = boot.group_r2_samples[m].iloc[i]
            expected = 1 - (1 - raw) / lmd.stein_factor(n_g, total - w[m])
            assert views[i + 1].group_r2[m] == pytest.approx(expected, abs=1e-9)
            for b in models:
                if b == m:
                    continue
                n_p = naive_resampled_n(draws, sizes, w[b])
                raw = boot.pairwise_r2_samples[i, j, models.index(b)]
                expected = 1 - (1 - raw) / lmd.stein_factor(n_p, w[b])
                assert views[i + 1].pairwise_r2.loc[m, b] == pytest.approx(expected, abs=1e-9)


# ------------------------------------------------------------------------------ group size
def test_rho_vs_group_size_ends_are_pairwise_and_group_rho():
    data, test = latent_models(0, 300, (6, 8, 5, 7)), latent_models(1, 300, (6, 8, 5, 7))
    curve = lmd.rho_vs_group_size(data, test)
    dec = lmd.decompose(data, test)
    pairs = curve[curve.group_size == 2]
    assert len(pairs) == 6
    for _, row in pairs.iterrows():
        a, b = row["models"].split(" + ")
        assert row["rho"] == pytest.approx(dec.pairwise_rho.loc[a, b], abs=1e-9)
    full = curve[curve.group_size == 4]
    assert len(full) == 1 and full["rho"].iloc[0] == pytest.approx(dec.group_rho, abs=1e-9)
    for _, row in curve[curve.group_size == 3].iterrows():
        sub = row["models"].split(" + ")
        small = lmd.decompose({m: data[m] for m in sub}, {m: test[m] for m in sub}, pairwise=False)
        assert row["rho"] == pytest.approx(small.group_rho, abs=1e-9)
        assert row["n_basis"] == pytest.approx(np.mean([sum(data[m].shape[1] for m in sub if m != t)
                                                        for t in sub]))  # fmt: skip
    # every basis set enumerated: the mean train ρ cannot fall as the basis grows
    means = curve.groupby("group_size")["train_rho"].mean().to_numpy()
    assert (np.diff(means) > -1e-9).all()
    assert mean_pairs_equal(dec)


def mean_pairs_equal(dec):
    values = dec.pairwise_r2.to_numpy()
    naive = np.mean([values[i, j] for i, j in combinations(range(len(values)), 2)] +
                    [values[j, i] for i, j in combinations(range(len(values)), 2)])  # fmt: skip
    return lmd.mean_pairwise_r2(dec.pairwise_r2) == pytest.approx(naive)


def test_rho_vs_group_size_samples_subsets():
    widths = (3, 4, 3, 2, 3, 4)
    data, test = latent_models(0, 200, widths), latent_models(1, 200, widths)
    curve = lmd.rho_vs_group_size(data, test, sizes=[3, 6], max_subsets=5, seed=1)
    assert curve.groupby("group_size").size().to_dict() == {3: 5, 6: 1}
    assert curve[curve.group_size == 3]["models"].is_unique
    again = lmd.rho_vs_group_size(data, test, sizes=[3, 6], max_subsets=5, seed=1)
    pd.testing.assert_frame_equal(curve, again)
    with pytest.raises(ValueError, match="sizes"):
        lmd.rho_vs_group_size(data, test, sizes=[1])


def test_authors_pairwise_level_and_group_size_points():
    # the issue's number: the authors' 128k table at T = 16 averages 0.493
    assert chapter.authors_mean_pairwise_r2(16) == pytest.approx(0.4928, abs=5e-5)
    table = chapter.authors_pairwise_r2("128k", 16)
    pair = ["bert-base-uncased", "distilbert-base-uncased"]
    expected = (table.loc[pair[0], pair[1]] + table.loc[pair[1], pair[0]]) / 2
    assert chapter.authors_mean_pairwise_r2(16, checkpoints=pair) == pytest.approx(expected)
    curve = chapter.authors_group_size_curve()
    assert len(curve) == 12 and set(curve.n_basis_models) == {1, 11}
    at16 = curve[(curve["T"] == 16) & (curve.n_basis_models == 11)]["rho"].iloc[0]
    assert at16 == pytest.approx(0.7427, abs=5e-5)  # Table 3, T = 16
    # the group of twelve explains more than one basis model, at every T
    wide = curve.pivot(index="T", columns="n_basis_models", values="rho")
    assert (wide[11] > wide[1]).all()
    with pytest.raises(ValueError, match="checkpoints"):
        chapter.authors_mean_pairwise_r2(16, checkpoints=["gpt2", "bert-base-uncased"])
