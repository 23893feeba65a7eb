"""Tests of lmsim.lmd against naive closed forms written from Eq. 6-11 of Zhang (2022)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from _helpers import SEEDS
from sklearn.linear_model import Ridge

from lmsim.lmd import (
    _ShardPool,
    bootstrap,
    decompose,
    decompose_layers,
    layer_blocks,
    r2,
    r2_table,
    r2_vs_basis_size,
)
from lmsim.moments import Moments
from lmsim.papers.zhang2022_lmd import (
    PAPER_CHECKPOINTS,
    PAPER_GROUP_RHO,
    PAPER_SEQ_LENS,
    PAPER_TABLE2,
)

# The matrices here are tiny: thread start-up would dominate, and on a busy shared
# machine oversubscribed BLAS threads make each solve 100x slower.
pytestmark = pytest.mark.usefixtures("one_torch_thread")

WIDTHS = {"a": 3, "b": 5, "c": 4, "d": 2}


def correlated_models(seed, n_train=400, n_test=150, widths=WIDTHS, noise=0.5, offset=0.0):
    """Embeddings of several 'models' sharing latent factors, with model-specific noise."""
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    latent = rng.normal(size=(n, 4))
    acts = {}
    for name, width in widths.items():
        mix = rng.normal(size=(4, width))
        acts[name] = latent @ mix + noise * rng.normal(size=(n, width)) + offset
    train = {k: v[:n_train] for k, v in acts.items()}
    test = {k: v[n_train:] for k, v in acts.items()}
    return train, test


def naive_fit(train, target, basis, ridge, regulariser="code"):
    """W, b of Eq. 6-8 from raw arrays with numpy."""
    Z = np.hstack([train[m] for m in basis])
    U = train[target]
    ddof = 1 if regulariser == "code" else 0
    Zc, Uc = Z - Z.mean(0), U - U.mean(0)
    cov_zz = Zc.T @ Zc / (len(Z) - ddof)
    cov_zu = Zc.T @ Uc / (len(Z) - ddof)
    if regulariser == "code":
        shift = ridge
    else:
        shift = max(ridge - np.linalg.eigvalsh(cov_zz).min(), 0.0)
    W = np.linalg.solve(cov_zz + shift * np.eye(len(cov_zz)), cov_zu).T
    b = U.mean(0) - W @ Z.mean(0)
    return W, b


def naive_r2(train, test, target, basis, ridge=1e-6, regulariser="code"):
    """R² of Eq. 9: residuals of the train fit on the test arrays, pooled over dims."""
    W, b = naive_fit(train, target, basis, ridge, regulariser)
    Z = np.hstack([test[m] for m in basis])
    U = test[target]
    ssr = ((U - Z @ W.T - b) ** 2).sum()
    sst = ((U - U.mean(0)) ** 2).sum()
    return 1 - ssr / sst


# ---------------------------------------------------------------------- agreement with naive
@pytest.mark.filterwarnings("ignore:model .* mean variance")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ridge", [1e-6, 0.3])
def test_decompose_matches_naive_closed_form(seed, ridge):
    train, test = correlated_models(seed, offset=3.0)
    dec = decompose(train, test, ridge=ridge)
    names = list(WIDTHS)
    for target in names:
        others = [m for m in names if m != target]
        assert dec.group_r2[target] == pytest.approx(
            naive_r2(train, test, target, others, ridge), abs=1e-8
        )
        assert dec.train_group_r2[target] == pytest.approx(
            naive_r2(train, train, target, others, ridge), abs=1e-8
        )
        for basis in names:
            assert dec.pairwise_r2.loc[target, basis] == pytest.approx(
                naive_r2(train, test, target, [basis], ridge), abs=1e-8
            )
            assert dec.train_pairwise_r2.loc[target, basis] == pytest.approx(
                naive_r2(train, train, target, [basis], ridge), abs=1e-8
            )


@pytest.mark.parametrize("seed", [0, 1])
def test_code_regulariser_is_sklearn_ridge_with_alpha_lambda_n_minus_1(seed):
    # Σ‖u - Wz - b‖² + α‖W‖² has W = C_uz (C_zz + α/(N-1) I)^-1 in (N-1)-normalised covariances.
    train, test = correlated_models(seed)
    ridge = 0.2
    n_train = len(train["a"])
    Z, Zt = np.hstack([train["b"], train["c"]]), np.hstack([test["b"], test["c"]])
    model = Ridge(alpha=ridge * (n_train - 1), fit_intercept=True, solver="cholesky")
    model.fit(Z, train["a"])
    resid = test["a"] - model.predict(Zt)
    expected = 1 - (resid**2).sum() / ((test["a"] - test["a"].mean(0)) ** 2).sum()
    assert r2(train, test, "a", ["b", "c"], ridge=ridge) == pytest.approx(expected, abs=1e-8)


@pytest.mark.parametrize("seed", SEEDS)
def test_return_weights_match_naive(seed):
    train, test = correlated_models(seed)
    dec = decompose(train, test, ridge=1e-3, return_weights=True)
    W, b = dec.weights[("b", ("a", "c", "d"))]
    W_naive, b_naive = naive_fit(train, "b", ["a", "c", "d"], 1e-3)
    assert W.shape == (WIDTHS["b"], WIDTHS["a"] + WIDTHS["c"] + WIDTHS["d"])
    np.testing.assert_allclose(W, W_naive, atol=1e-9)
    np.testing.assert_allclose(b, b_naive, atol=1e-9)
    W_pair, _ = dec.weights[("d", ("b",))]
    np.testing.assert_allclose(W_pair, naive_fit(train, "d", ["b"], 1e-3)[0], atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_moments_input_equals_array_input(seed):
    train, test = correlated_models(seed)
    from_arrays = decompose(train, test)
    from_moments = decompose(Moments.from_arrays(train), Moments.from_arrays(test))
    np.testing.assert_allclose(from_moments.pairwise_r2, from_arrays.pairwise_r2, atol=1e-12)
    assert from_moments.group_rho == pytest.approx(from_arrays.group_rho, abs=1e-12)


def per_target_fit(train, test, target, basis, ridge, regulariser):
    """The pre-block-inverse route written from Eq. 6-9: one solve per target on gathered
    moments, train and test residuals as explicit quadratic forms. Returns (W, R² train, R² test)."""
    Z, U = np.hstack([train[m] for m in basis]), train[target]
    n, ddof = len(Z), (1 if regulariser == "code" else 0)
    Zc, Uc = Z - Z.mean(0), U - U.mean(0)
    cov_zz, cov_zu = Zc.T @ Zc / (n - ddof), Zc.T @ Uc / (n - ddof)
    if regulariser == "code":
        shift = ridge
    else:
        shift = max(ridge - np.linalg.eigvalsh(cov_zz).min(), 0.0)
    W = np.linalg.solve(cov_zz + shift * np.eye(len(cov_zz)), cov_zu).T
    b = U.mean(0) - W @ Z.mean(0)
    r2s = []
    for acts in (train, test):
        Zs, Us = np.hstack([acts[m] for m in basis]), acts[target]
        m_z, m_u = Zs.mean(0), Us.mean(0)
        S_zz = (Zs - m_z).T @ (Zs - m_z) / len(Zs)
        S_zu = (Zs - m_z).T @ (Us - m_u) / len(Zs)
        sst = ((Us - m_u) ** 2).sum() / len(Zs)
        ssr = sst - 2 * np.trace(W @ S_zu) + np.trace(W @ S_zz @ W.T)
        ssr += ((m_u - W @ m_z - b) ** 2).sum()
        r2s.append(1 - ssr / sst)
    return W, *r2s


@pytest.mark.filterwarnings("ignore:model .* mean variance")
@pytest.mark.filterwarnings("ignore:n_train=")
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("ridge", [0.0, 1e-6, 1e-2, 0.3])
@pytest.mark.parametrize("regulariser", ["code", "paper"])
@pytest.mark.parametrize("case", ["n >> d", "n < basis width", "paper shifts differ"])
def test_leave_one_out_from_one_factorisation_equals_per_target_fits(
    seed, ridge, regulariser, case, monkeypatch
):
    # Eq. L1-L2: every leave-one-out W from one inverse of the regularised joint covariance
    # and train R² from the normal equations equal a per-target solve with explicit
    # quadratic forms, for any ridge and both regularisers.
    from lmsim.lmd import _loo as lmd_module  # where _loo_fits looks up _spd_inverse

    if case == "n >> d":
        train, test = correlated_models(seed, widths={**WIDTHS, "e": 6}, offset=3.0)
    elif case == "n < basis width":  # every basis covariance is singular: paper's s is λ
        if ridge < 1e-2:
            pytest.skip("λ << ‖Σ‖ with n < d is ill-posed: any two solvers differ by ~eps/λ")
        train, test = correlated_models(seed, n_train=9, n_test=30)
    else:  # a direction of variance λ/2 = 5e-3: with λ above it each paper fit has its own s
        train, test = ill_conditioned(seed)
        extra = np.random.default_rng(seed + 100).normal(size=(300, 3))
        train, test = {**train, "w": extra[:200]}, {**test, "w": extra[200:]}
    # One factorisation unless the paper's per-target shifts may differ: Σ - λI not positive
    # definite while some basis covariance is non-singular (then target by target).
    joint = np.hstack(list(train.values()))
    n, dim = joint.shape
    e_min = np.linalg.eigvalsh(np.cov(joint.T, ddof=0)).min()
    shared = e_min > ridge or n - 1 < dim - max(x.shape[1] for x in train.values())
    n_inverses = 1 if regulariser == "code" or ridge == 0 or shared else 0
    if case == "paper shifts differ":
        assert n_inverses == (0 if regulariser == "paper" and ridge >= 1e-2 else 1)
    spd_inverse, calls = lmd_module._spd_inverse, []
    monkeypatch.setattr(lmd_module, "_spd_inverse", lambda mat: calls.append(1) or spd_inverse(mat))
    dec = decompose(train, test, ridge=ridge, regulariser=regulariser, return_weights=True)
    assert len(calls) == n_inverses
    names = list(train)
    for target in names:
        basis = [m for m in names if m != target]
        W, r2_train, r2_test = per_target_fit(train, test, target, basis, ridge, regulariser)
        assert dec.group_r2[target] == pytest.approx(r2_test, abs=1e-10)
        assert dec.train_group_r2[target] == pytest.approx(r2_train, abs=1e-10)
        got = dec.weights[(target, tuple(basis))][0]
        np.testing.assert_allclose(got, W, rtol=0, atol=1e-9 * max(1.0, np.abs(W).max()))


# ---------------------------------------------------------------------- the paper's regulariser
def ill_conditioned(seed, n=300, ridge=1e-2):
    """A basis whose covariance has its smallest eigenvalue below the ridge, at ridge / 2.

    Along that direction the paper's floor gives eigenvalue λ, the code's ridge 1.5 λ.
    """
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, 3))
    thin = np.sqrt(ridge / 2) * rng.normal(size=(n, 1))
    basis = np.hstack([base, thin])
    target = np.hstack([base, thin / np.sqrt(ridge)]) @ rng.normal(size=(4, 2))
    target += 0.1 * rng.normal(size=(n, 2))
    acts = {"u": target, "v": basis}
    return {k: x[:200] for k, x in acts.items()}, {k: x[200:] for k, x in acts.items()}


@pytest.mark.parametrize("seed", SEEDS)
def test_paper_regulariser_matches_its_naive_form_and_differs_from_code(seed):
    train, test = ill_conditioned(seed)
    ridge = 1e-2
    paper = r2(train, test, "u", "v", ridge=ridge, regulariser="paper")
    code = r2(train, test, "u", "v", ridge=ridge, regulariser="code")
    assert paper == pytest.approx(naive_r2(train, test, "u", ["v"], ridge, "paper"), abs=1e-8)
    assert code == pytest.approx(naive_r2(train, test, "u", ["v"], ridge, "code"), abs=1e-8)
    assert abs(paper - code) > 1e-3, "the two regularisers should differ on this basis"


@pytest.mark.parametrize("seed", [0, 1])
def test_paper_regulariser_is_least_squares_when_well_conditioned(seed):
    train, test = correlated_models(seed)
    Z = np.hstack([train["b"], train["c"], np.ones((len(train["b"]), 1))])
    coef, *_ = np.linalg.lstsq(Z, train["a"], rcond=None)
    Zt = np.hstack([test["b"], test["c"], np.ones((len(test["b"]), 1))])
    resid = test["a"] - Zt @ coef
    expected = 1 - (resid**2).sum() / ((test["a"] - test["a"].mean(0)) ** 2).sum()
    got = r2(train, test, "a", ["b", "c"], ridge=1e-6, regulariser="paper")
    assert got == pytest.approx(expected, abs=1e-9)


# ---------------------------------------------------------------------- properties
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("regulariser", ["code", "paper"])
def test_model_on_itself_has_r2_one(seed, regulariser):
    train, test = correlated_models(seed, offset=-5.0)
    dec = decompose(train, test, ridge=1e-8, regulariser=regulariser)
    np.testing.assert_allclose(np.diag(dec.pairwise_r2), 1.0, atol=1e-6)
    np.testing.assert_allclose(np.diag(dec.train_pairwise_r2), 1.0, atol=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_train_r2_rises_with_basis_size(seed):
    widths = {f"m{i}": 2 + i % 3 for i in range(6)}
    train, test = correlated_models(seed, widths=widths, noise=1.5)
    for target in ["m0", "m3"]:
        curve = r2_vs_basis_size(train, test, target, ridge=1e-9)
        assert list(curve["n_basis"]) == list(range(1, 6))
        assert (np.diff(curve["train_r2"]) >= -1e-9).all(), curve
        assert curve["test_r2"].iloc[-1] == pytest.approx(
            naive_r2(train, test, target, list(curve["added"]), 1e-9), abs=1e-8
        )


@pytest.mark.parametrize("seed", SEEDS)
def test_group_rho_is_mean_and_pairwise_rho_is_symmetric_mean(seed):
    train, test = correlated_models(seed)
    dec = decompose(train, test)
    assert dec.group_rho == pytest.approx(float(np.mean(dec.group_r2)), abs=1e-14)
    assert dec.train_group_rho == pytest.approx(float(np.mean(dec.train_group_r2)), abs=1e-14)
    rho = dec.pairwise_rho.to_numpy()
    np.testing.assert_allclose(rho, rho.T, atol=1e-14)
    pair = dec.pairwise_r2.to_numpy()
    np.testing.assert_allclose(rho, (pair + pair.T) / 2, atol=1e-14)
    assert not np.allclose(pair, pair.T), "pairwise R² is asymmetric in general"
    table = dec.table()
    assert table["group ρ"] == dec.group_rho and list(table.index[:-1]) == dec.models


@pytest.mark.parametrize("seed", SEEDS)
def test_r2_invariant_to_invertible_basis_transform_without_ridge(seed):
    train, test = correlated_models(seed)
    rng = np.random.default_rng(100 + seed)
    mix = rng.normal(size=(9, 9)) + 3 * np.eye(9)
    shift = rng.normal(size=9)

    def transform(acts):
        joint = np.hstack([acts["b"], acts["c"]]) @ mix + shift
        return {"a": acts["a"], "bc": joint}

    before = r2(train, test, "a", ["b", "c"], ridge=0.0)
    after = r2(transform(train), transform(test), "a", "bc", ridge=0.0)
    assert after == pytest.approx(before, abs=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("regulariser", ["code", "paper"])
def test_r2_invariant_to_isotropic_scaling_and_shift_of_target(seed, regulariser):
    train, test = correlated_models(seed)
    scale, shift = np.random.default_rng(seed).uniform(0.1, 20), 7.0

    def transform(acts):
        return {**acts, "a": scale * acts["a"] + shift}

    before = r2(train, test, "a", ["b", "d"], ridge=0.1, regulariser=regulariser)
    after = r2(
        transform(train), transform(test), "a", ["b", "d"], ridge=0.1, regulariser=regulariser
    )
    assert after == pytest.approx(before, abs=1e-10)


def test_r2_of_independent_models_is_near_zero_on_test():
    rng = np.random.default_rng(0)
    acts = {"x": rng.normal(size=(3000, 3)), "y": rng.normal(size=(3000, 4))}
    train = {k: v[:2000] for k, v in acts.items()}
    test = {k: v[2000:] for k, v in acts.items()}
    assert abs(r2(train, test, "x", "y")) < 0.02
    assert abs(r2(train, test, "x", "y", split="train")) < 0.02


def test_r2_equals_decompose_entries():
    train, test = correlated_models(3)
    dec = decompose(train, test)
    assert r2(train, test, "c", "a") == pytest.approx(dec.pairwise_r2.loc["c", "a"], abs=1e-12)
    assert r2(train, test, "c", ["a", "b", "d"]) == pytest.approx(dec.group_r2["c"], abs=1e-12)
    assert r2(train, test, "c", ["a", "b", "d"], split="train") == pytest.approx(
        dec.train_group_r2["c"], abs=1e-12
    )


# ---------------------------------------------------------------------- layers
def layered(seed, depths):
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(300, 3))
    acts = {}
    for model, depth in depths.items():
        for layer in range(depth):
            width = 2 + layer
            acts[f"{model}/layer.{layer}"] = latent @ rng.normal(size=(3, width)) + rng.normal(
                size=(300, width)
            ) * (1 + layer)
    train = Moments.from_arrays({k: v[:200] for k, v in acts.items()})
    test = Moments.from_arrays({k: v[200:] for k, v in acts.items()})
    return train, test


def test_decompose_layers_equals_decompose_on_those_blocks():
    train, test = layered(0, {"p": 3, "q": 3, "r": 3})
    per_layer = decompose_layers(train, test, layers="all")
    assert list(per_layer) == [0, 1, 2]
    direct = decompose(train, test, models={m: f"{m}/layer.1" for m in "pqr"})
    np.testing.assert_allclose(per_layer[1].pairwise_r2, direct.pairwise_r2, atol=1e-12)
    assert per_layer[1].models == ["p", "q", "r"]
    table = r2_table(per_layer)
    assert list(table.columns) == [0, 1, 2]
    assert table.loc["group ρ", 2] == pytest.approx(per_layer[2].group_rho)


def test_decompose_layers_relative_depth_and_errors():
    train, test = layered(1, {"p": 3, "q": 5})
    with pytest.raises(ValueError, match="equal depth"):
        decompose_layers(train, test, layers="all")
    rel = decompose_layers(train, test, layers=[0.0, 1.0, -1, "last"])
    last = decompose(train, test, models={"p": "p/layer.2", "q": "q/layer.4"})
    for key in (1.0, -1, "last"):
        assert rel[key].group_rho == pytest.approx(last.group_rho, abs=1e-12)
    with pytest.raises(ValueError, match="does not exist"):
        decompose_layers(train, test, layers=[7])


def test_default_labels_strip_single_layer_suffix():
    rng = np.random.default_rng(0)
    acts = {"m1/layer.6": rng.normal(size=(50, 2)), "m2/layer.3": rng.normal(size=(50, 2))}
    assert decompose(acts, acts).models == ["m1", "m2"]


# ---------------------------------------------------------------------- bootstrap
def shards_of(acts, n_shards):
    n = len(next(iter(acts.values())))
    bounds = np.linspace(0, n, n_shards + 1).astype(int)
    return [
        Moments.from_arrays({k: v[lo:hi] for k, v in acts.items()})
        for lo, hi in zip(bounds[:-1], bounds[1:])
    ]


def test_weighted_merge_equals_merging_repeated_shards():
    train, _ = correlated_models(0, offset=1e3)
    shards = shards_of(train, 4)
    names = shards[0].names
    counts = np.array([2, 0, 1, 3])
    merged = _ShardPool(shards, "shards", names, "cpu").merge(counts)
    pool = _ShardPool(shards, "shards", names, "cpu")
    pool.comoments = list(pool.comoments)  # the unstacked path used for large widths
    looped = pool.merge(counts)
    np.testing.assert_allclose(looped.comoment, merged.comoment, rtol=1e-12, atol=1e-6)
    reference = Moments.merge_all([shards[0]] * 2 + [shards[2]] + [shards[3]] * 3)
    assert merged.n == reference.n
    np.testing.assert_allclose(merged.mean, reference.mean(names), rtol=0, atol=1e-9)
    np.testing.assert_allclose(merged.comoment, reference.comoment(names), rtol=1e-12, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_bootstrap_contains_estimate_and_shrinks_with_more_shards(seed):
    widths = {"a": 2, "b": 3, "c": 2}
    train, test = correlated_models(seed, n_train=3200, n_test=1600, widths=widths, noise=1.0)
    width = {}
    for n_shards in (10, 80):  # shards of 40 train and 20 test samples
        tr = {k: v[: 40 * n_shards] for k, v in train.items()}
        te = {k: v[: 20 * n_shards] for k, v in test.items()}
        res = bootstrap(
            shards_of(tr, n_shards),
            shards_of(te, n_shards),
            n_boot=40,
            seed=seed,
            progress=False,
        )
        full = decompose(tr, te)
        assert res.estimate.group_rho == pytest.approx(full.group_rho, abs=1e-10)
        ci = res.group_r2_ci()
        assert ((ci["lower"] <= ci["estimate"]) & (ci["estimate"] <= ci["upper"])).all(), ci
        lo, hi = res.group_rho_ci()
        assert lo <= res.estimate.group_rho <= hi
        lo_pair, hi_pair = res.pairwise_rho_ci()
        est = res.estimate.pairwise_rho.to_numpy()
        assert (lo_pair.to_numpy() <= est + 1e-12).all() and (
            est <= hi_pair.to_numpy() + 1e-12
        ).all()
        assert res.pairwise_r2_samples.shape == (40, 3, 3)
        width[n_shards] = hi - lo
    assert width[80] < width[10]


@pytest.mark.parametrize("seed", [0, 1])
def test_bootstrap_of_test_set_keeps_the_fit_and_contains_estimate(seed):
    train, test = correlated_models(seed, n_train=300, n_test=600, noise=1.0)
    one_train_shard = [Moments.from_arrays(train)]  # allowed: the train set is not resampled
    res = bootstrap(
        one_train_shard, shards_of(test, 30), n_boot=40, seed=seed, resample="test", progress=False
    )
    assert res.estimate.group_rho == pytest.approx(decompose(train, test).group_rho, abs=1e-10)
    ci = res.group_r2_ci()
    assert ((ci["lower"] <= ci["estimate"]) & (ci["estimate"] <= ci["upper"])).all(), ci
    assert (ci["upper"] > ci["lower"]).all()


def test_bootstrap_resampling_train_is_biased_down_when_the_fit_overfits():
    # Documented caveat: repeated shards shrink the effective n_train below the basis width.
    train, test = correlated_models(0, n_train=30, n_test=400, widths={"a": 3, "b": 12, "c": 12})
    res = bootstrap(
        shards_of(train, 10),
        shards_of(test, 10),
        n_boot=30,
        seed=0,
        resample="train",
        progress=False,
    )
    assert np.median(res.group_rho_samples) < res.estimate.group_rho


# ---------------------------------------------------------------------- errors
def test_errors_name_the_problem():
    train, test = correlated_models(0)
    with pytest.raises(ValueError, match="regulariser"):
        decompose(train, test, regulariser="ridge")
    with pytest.raises(ValueError, match="ridge"):
        decompose(train, test, ridge=-1)
    with pytest.raises(KeyError, match="unknown models"):
        r2(train, test, "a", ["zz"])
    with pytest.raises(KeyError, match="not in the moments"):
        decompose(train, test, models={"x": "nope", "a": "a"})
    with pytest.raises(ValueError, match="width 3 in train but 4 in test"):
        decompose(train, {**test, "a": np.random.default_rng(0).normal(size=(150, 4))})
    with pytest.raises(ValueError, match="at least 2 models"):
        decompose(train, test, models=["a"])
    with pytest.raises(ValueError, match="zero variance"):
        decompose({**train, "a": np.ones((400, 3))}, test)
    with pytest.raises(TypeError, match="Moments or a dict"):
        decompose([1, 2], test)
    with pytest.raises(ValueError, match="at least 2 shards"):
        bootstrap([Moments.from_arrays(train)], [Moments.from_arrays(test)] * 2)
    with pytest.raises(ValueError, match="resample"):
        bootstrap([Moments.from_arrays(train)] * 2, [Moments.from_arrays(test)] * 2, resample="x")


def test_underdetermined_fit_warns_and_ridge_zero_raises():
    rng = np.random.default_rng(0)
    train = {"u": rng.normal(size=(8, 2)), "v": rng.normal(size=(8, 12))}
    test = {"u": rng.normal(size=(20, 2)), "v": rng.normal(size=(20, 12))}
    with pytest.warns(UserWarning, match=r"n_train=8 samples <= basis dimension 12"):
        value = r2(train, test, "u", "v", ridge=1e-3)
    assert np.isfinite(value)
    with pytest.raises(ValueError, match="ridge=0"):
        r2(train, test, "u", "v", ridge=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r2(train, test, "v", "u", ridge=1e-3)  # a 2-wide basis is fine with 8 samples


@pytest.mark.parametrize("seed", [0, 1])
def test_singular_basis_without_ridge_uses_minimum_norm_solution(seed):
    train, test = correlated_models(seed)
    dup = {**train, "b2": train["b"].copy()}
    dup_test = {**test, "b2": test["b"].copy()}
    with pytest.warns(UserWarning, match="minimum-norm"):
        got = r2(dup, dup_test, "a", ["b", "b2"], ridge=0.0)
    Z = np.hstack([train["b"], train["b"]])
    Zc, Uc = Z - Z.mean(0), train["a"] - train["a"].mean(0)
    W = (np.linalg.pinv(Zc.T @ Zc) @ Zc.T @ Uc).T  # Eq. 5, Moore-Penrose
    b = train["a"].mean(0) - W @ Z.mean(0)
    resid = test["a"] - np.hstack([test["b"], test["b"]]) @ W.T - b
    expected = 1 - (resid**2).sum() / ((test["a"] - test["a"].mean(0)) ** 2).sum()
    assert got == pytest.approx(expected, abs=1e-8)
    assert got == pytest.approx(r2(train, test, "a", "b", ridge=0.0), abs=1e-8)


def _moments_of_covariance(cov: np.ndarray, n: int = 65) -> Moments:
    """Moments of one-wide blocks a, b, b2, ... whose covariance (ddof 1) is ``cov`` exactly:
    n - 1 = 64 makes the division by n - 1 exact."""
    names = ["a", "b", "b2", "c"][: len(cov)]
    mom = Moments({name: 1 for name in names})
    mom._comoment = torch.tensor(cov * (n - 1), dtype=torch.float64)
    mom.n = n
    return mom


def test_a_singular_basis_is_found_from_the_pivots_not_from_a_lapack_error():
    """Issue 46, numerical robustness: an exactly singular basis covariance fails Cholesky
    in one LAPACK build and factors with a tiny positive pivot in another (MKL), so the
    ridge-free fit skipped its minimum-norm solution there. [[1, 1], [1, 1 + eps]] factors
    exactly, with the pivot eps, on every platform: lmsim must call it singular."""
    from lmsim.lmd import _loo

    eps = np.finfo(np.float64).eps
    cov = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [0.0, 1.0, 1.0 + eps]])
    factor, info = torch.linalg.cholesky_ex(torch.tensor(cov[1:, 1:]))
    assert int(info) == 0 and float(factor[1, 1]) ** 2 == eps  # the premise, exact anywhere
    assert _loo._spd_inverse(torch.tensor(cov)) is None
    train, test = _moments_of_covariance(cov), _moments_of_covariance(cov)
    with pytest.warns(UserWarning, match="minimum-norm"):
        got = r2(train, test, "a", ["b", "b2"], ridge=0.0)
    assert got == pytest.approx(0.0, abs=1e-12)  # a is uncorrelated with b and b2
    with pytest.warns(UserWarning, match="minimum-norm"):
        dec = decompose(train, test, ridge=0.0, pairwise=False)
    # The leave-one-out route declined the singular joint: each target fit on its own.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for target in ("a", "b", "b2"):
            basis = [m for m in ("a", "b", "b2") if m != target]
            assert dec.group_r2[target] == pytest.approx(
                r2(train, test, target, basis, ridge=0.0), abs=1e-12
            )
    from lmsim.lmd._fit import cholesky_or_none

    assert cholesky_or_none(torch.tensor(cov[1:, 1:])) is None


def test_warns_when_variance_is_near_the_ridge():
    train, test = correlated_models(0)
    small = {k: 1e-4 * v for k, v in train.items()}
    small_test = {k: 1e-4 * v for k, v in test.items()}
    with pytest.warns(UserWarning, match="within a factor 100 of ridge"):
        dec = decompose(small, small_test, ridge=1e-6)
    assert np.diag(dec.pairwise_r2).min() < 0.999  # the ridge really does shrink the self-fit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decompose(train, test, ridge=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_matches_cpu():
    train, test = correlated_models(0)
    cpu = decompose(train, test)
    gpu = decompose(
        Moments.from_arrays(train, device="cuda"), Moments.from_arrays(test, device="cuda")
    )
    np.testing.assert_allclose(gpu.pairwise_r2, cpu.pairwise_r2, atol=1e-9)
    np.testing.assert_allclose(gpu.group_r2, cpu.group_r2, atol=1e-9)


def test_layer_blocks_picks_each_models_layer():
    names = ["p/layer.0", "p/layer.1", "p/layer.2", "q/layer.0", "q/layer.1"]
    assert layer_blocks(names) == {"p": "p/layer.2", "q": "q/layer.1"}
    assert layer_blocks(names, 0, models=["q"]) == {"q": "q/layer.0"}
    with pytest.raises(KeyError, match="no '/layer.' blocks"):
        layer_blocks(names, models=["r"])


def test_typed_paper_numbers_are_consistent():
    # Eq. 10: the published group ρ is the mean of the published per-model R² (to rounding).
    table = np.array(list(PAPER_TABLE2.values()))
    group = PAPER_GROUP_RHO["Table 2 (Wikipedia + BooksCorpus)"]
    np.testing.assert_allclose(table.mean(0), [group[t] for t in PAPER_SEQ_LENS], atol=6e-4)
    assert set(PAPER_TABLE2) == set(PAPER_CHECKPOINTS.values())


@pytest.mark.parametrize("seed", [0, 1])
def test_singular_joint_covariance_falls_back_to_per_target_fits(seed):
    # A duplicated model makes Σ + 0·I singular: one factorisation cannot serve every
    # target, and each leave-one-out fit is solved on its own (minimum norm where needed).
    train, test = correlated_models(seed)
    dup, dup_test = {**train, "b2": train["b"].copy()}, {**test, "b2": test["b"].copy()}
    with pytest.warns(UserWarning, match="minimum-norm"):
        dec = decompose(dup, dup_test, ridge=0.0, pairwise=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for target in dup:
            basis = [m for m in dup if m != target]
            assert dec.group_r2[target] == pytest.approx(
                r2(dup, dup_test, target, basis, ridge=0.0), abs=1e-12
            )
    assert dec.group_r2["b"] == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("models", [["b", "c"], ["c", "a", "d"], ["a", "b", "c"]])
def test_model_subsets_read_from_a_larger_joint_moments(models):
    # Contiguous subsets are read as views of the joint co-moment, others gathered; both
    # must equal moments of only those blocks.
    train, test = correlated_models(3)
    full = decompose(Moments.from_arrays(train), Moments.from_arrays(test), models=models)
    alone = decompose({m: train[m] for m in models}, {m: test[m] for m in models})
    np.testing.assert_allclose(full.pairwise_r2, alone.pairwise_r2, atol=1e-12)
    np.testing.assert_allclose(full.group_r2, alone.group_r2[full.models], atol=1e-12)
