"""lmsim.lmd over-fitting: Stein's factor, the corrected group R², learning curves."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from _helpers import SEEDS

from lmsim.lmd import (
    bootstrap,
    debias_r2,
    decompose,
    extrapolate_r2,
    learning_curve,
    overfit_table,
    stein_factor,
)
from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def gaussian_group(seed, n_train, n_test, widths=(20, 20, 20), n_latent=10, noise=1.0):
    """Jointly Gaussian models ``s A_m + noise`` and their population leave-one-out R²."""
    rng = np.random.default_rng(seed)
    mix = {f"m{i}": rng.normal(size=(n_latent, w)) for i, w in enumerate(widths)}

    def draw(n):
        s = rng.normal(size=(n, n_latent))
        return {k: s @ a + noise * rng.normal(size=(n, a.shape[1])) + 3.0 for k, a in mix.items()}

    joint = np.concatenate(list(mix.values()), axis=1)
    cov = joint.T @ joint + noise**2 * np.eye(joint.shape[1])
    cols, start = {}, 0
    for k, a in mix.items():
        cols[k] = np.arange(start, start + a.shape[1])
        start += a.shape[1]
    truth = {}
    for k in mix:
        t, o = cols[k], np.concatenate([cols[j] for j in mix if j != k])
        resid = cov[np.ix_(t, t)] - cov[np.ix_(t, o)] @ np.linalg.solve(
            cov[np.ix_(o, o)], cov[np.ix_(o, t)]
        )
        truth[k] = 1 - np.trace(resid) / np.trace(cov[np.ix_(t, t)])
    return draw(n_train), draw(n_test), truth


def test_stein_factor_values_and_domain():
    # (n + 1)(n − 2) / (n (n − p − 2)) at n = 10, p = 3: 11 · 8 / (10 · 5).
    assert stein_factor(10, 3) == pytest.approx(1.76)
    assert stein_factor(10**7, 0) == pytest.approx(1.0, abs=1e-6)
    got = stein_factor(np.array([100, 5, 4]), np.array([10, 3, 3]))
    assert got[0] == pytest.approx(101 * 98 / (100 * 88)) and np.isnan(got[1:]).all()
    # The correction inverts the expected inflation: 1 − (1 − R²∞) k → R²∞.
    r2_inf = np.array([0.2, 0.6, 0.95])
    k = stein_factor(500, 120)
    np.testing.assert_allclose(debias_r2(1 - (1 - r2_inf) * k, 500, 120), r2_inf)
    with pytest.raises(ValueError, match="n_train"):
        stein_factor(0, 3)


def test_corrected_group_r2_is_unbiased_where_the_raw_one_is_not():
    # n_train = 4 basis dimensions per sample (the real page has 4.5).
    raw, corrected, truth = [], [], []
    for seed in range(6):
        train, test, true = gaussian_group(seed, 160, 4000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            dec = decompose(train, test, pairwise=False)
        table = overfit_table(dec, dict.fromkeys(true, 20))
        raw.append(table["test_r2"].iloc[:3])
        corrected.append(table["corrected_r2"].iloc[:3])
        truth.append(list(true.values()))
        assert table.loc["group ρ", "test_r2"] == pytest.approx(dec.group_rho)
        assert table.loc["m0", "n_basis"] == 40 and table.loc["m0", "n_train_per_dim"] == 4.0
    raw, corrected, truth = (np.array(v, dtype=float) for v in (raw, corrected, truth))
    assert (raw - truth).mean() < -0.03  # over-fitting lowers the test R²
    assert abs((corrected - truth).mean()) < 0.005
    assert np.abs(corrected - truth).max() < 0.03


def shards(acts, n_shards):
    size = len(next(iter(acts.values()))) // n_shards
    return [
        Moments.from_arrays({k: v[i * size : (i + 1) * size] for k, v in acts.items()})
        for i in range(n_shards)
    ]


@pytest.mark.parametrize("seed", SEEDS)
def test_learning_curve_rises_and_extrapolates_to_the_population_r2(seed):
    train, test, truth = gaussian_group(seed, 640, 5000)
    curve = learning_curve(shards(train, 16), Moments.from_arrays(test), n_repeats=3, seed=seed)
    assert sorted(curve["n_shards"].unique()) == [2, 4, 8, 16]
    assert (curve[curve["n_shards"] == 16]["repeat"] == 0).all()
    assert len(curve) == (3 * 3 + 1) * 4  # (3 sizes × 3 repeats + all) × (3 models + group)
    assert set(curve["n_train"]) == {80, 160, 320, 640}
    # The full-size point is the decomposition on all train data.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        full = decompose(train, test, pairwise=False)
    last = curve[(curve["n_shards"] == 16)].set_index("model")
    np.testing.assert_allclose(last.loc[full.models, "test_r2"], full.group_r2, atol=1e-10)
    assert last.loc["group ρ", "test_r2"] == pytest.approx(full.group_rho, abs=1e-10)
    by_n = curve[curve["model"] == "group ρ"].groupby("n_train")["test_r2"].mean()
    assert by_n.is_monotonic_increasing
    fit = extrapolate_r2(curve)
    for model, value in truth.items():
        assert fit.loc[model, "r2_inf"] == pytest.approx(value, abs=0.015)
        assert fit.loc[model, "lower"] < fit.loc[model, "r2_inf"] < fit.loc[model, "upper"]
    group_truth = np.mean(list(truth.values()))
    assert fit.loc["group ρ", "r2_inf"] == pytest.approx(group_truth, abs=0.01)
    assert by_n.iloc[-1] < group_truth - 0.005  # even all 640 fall short of the truth


def test_overfit_table_with_bootstrap_interval():
    train, test, _ = gaussian_group(0, 800, 1600)
    boot = bootstrap(
        shards(train, 10), shards(test, 10), n_boot=40, progress=False, resample="test"
    )
    table = overfit_table(boot, dict.fromkeys(boot.estimate.models, 20))
    assert {"corrected_lower", "corrected_upper"} <= set(table.columns)
    assert (table["corrected_lower"] <= table["corrected_r2"] + 1e-12).all()
    assert (table["corrected_r2"] <= table["corrected_upper"] + 1e-12).all()
    assert (table["corrected_r2"] > table["test_r2"]).all()


def test_overfit_errors():
    train, test, _ = gaussian_group(0, 200, 100)
    dec = decompose(train, test, pairwise=False)
    with pytest.raises(KeyError, match="widths"):
        overfit_table(dec, {"m0": 20})
    with pytest.raises(TypeError, match="Decomposition"):
        overfit_table(pd.Series([1.0]), {})
    parts = shards(train, 4)
    with pytest.raises(ValueError, match="sizes"):
        learning_curve(parts, Moments.from_arrays(test), sizes=[5])
    with pytest.raises(ValueError, match="list of Moments"):
        learning_curve(parts[0], Moments.from_arrays(test))
    with pytest.raises(ValueError, match="lacks columns"):
        extrapolate_r2(pd.DataFrame({"model": ["a"]}))
