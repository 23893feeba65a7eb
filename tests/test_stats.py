"""Tests of lmsim.stats against naive loops, closed forms and known distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from lmsim import stats


def _naive_percentile_bootstrap(statistic, x, n_boot, level, seed):
    """The documented draw order, written out: draw b takes rng.integers(0, n, n)."""
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(x), len(x))
        draws.append(statistic(x[idx]))
    return np.percentile(draws, [100 * (1 - level) / 2, 100 * (1 + level) / 2])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_interval_equals_a_naive_loop(seed):
    x = np.random.default_rng(100 + seed).gamma(2.0, size=57)
    est = stats.bootstrap(np.median, x, n_boot=300, level=0.9, seed=seed, unit="examples")
    low, high = _naive_percentile_bootstrap(np.median, x, 300, 0.9, seed)
    assert est.estimate == np.median(x)
    assert (est.low, est.high) == pytest.approx((low, high), abs=1e-12)
    assert est.unit == "examples" and est.n == 57 and est.level == 0.9
    assert len(est.draws) == 300


def test_bootstrap_of_a_normal_mean_covers_at_the_nominal_rate():
    covered, n_rep = 0, 300
    for rep in range(n_rep):
        x = np.random.default_rng(rep).normal(1.5, 2.0, size=60)
        est = stats.bootstrap(np.mean, x, n_boot=300, level=0.9, seed=rep)
        covered += est.low <= 1.5 <= est.high
    # percentile intervals undercover slightly at n = 60; binomial sd of the rate ~0.017
    assert 0.83 <= covered / n_rep <= 0.95


def test_bootstrap_width_matches_the_standard_error_of_the_mean():
    x = np.random.default_rng(5).normal(size=2000)
    est = stats.bootstrap(np.mean, x, n_boot=1000, seed=1)
    se = x.std(ddof=1) / math.sqrt(len(x))
    assert (est.high - est.low) / (2 * 1.96 * se) == pytest.approx(1, abs=0.1)
    assert est.sd == pytest.approx(se, rel=0.1)


@pytest.mark.parametrize("seed", [0, 1])
def test_group_bootstrap_resamples_whole_groups(seed):
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, 12, size=80)
    values = rng.normal(size=80) + groups  # rows of a group move together
    est = stats.bootstrap(np.sum, values, groups=groups, n_boot=200, seed=seed, unit="sentences")
    labels = np.unique(groups)
    naive_rng = np.random.default_rng(seed)
    naive = []
    for _ in range(200):
        picked = labels[naive_rng.integers(0, len(labels), len(labels))]
        naive.append(sum(values[groups == g].sum() for g in picked))
    assert est.n == len(labels)
    assert np.allclose(np.sort(est.draws), np.sort(naive), atol=1e-9)
    assert (est.low, est.high) == pytest.approx(tuple(np.quantile(naive, [0.025, 0.975])))


def test_bootstrap_resamples_several_arrays_together():
    rng = np.random.default_rng(3)
    x = rng.normal(size=200)
    y = x + rng.normal(scale=0.1, size=200)
    est = stats.bootstrap(lambda a, b: np.corrcoef(a, b)[0, 1], x, y, n_boot=300)
    assert est.low > 0.98, "rows must stay paired"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paired_bootstrap_equals_naive(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, 150).astype(float)
    b = np.clip(a + rng.integers(-1, 2, 150), 0, 1)
    est = stats.paired_bootstrap(a, b, n_boot=400, seed=seed, unit="test examples")
    naive_rng, draws = np.random.default_rng(seed), []
    for _ in range(400):
        idx = naive_rng.integers(0, 150, 150)
        draws.append(a[idx].mean() - b[idx].mean())
    assert est.estimate == pytest.approx(a.mean() - b.mean())
    assert (est.low, est.high) == pytest.approx(tuple(np.quantile(draws, [0.025, 0.975])))


def test_paired_interval_is_narrower_than_unpaired_for_correlated_scores():
    rng = np.random.default_rng(0)
    base = rng.normal(size=300)
    a, b = base + 0.1 + rng.normal(scale=0.1, size=300), base
    paired = stats.paired_bootstrap(a, b, n_boot=500)
    separate = [stats.bootstrap(np.mean, v, n_boot=500) for v in (a, b)]
    assert paired.low > 0
    assert separate[0].low < separate[1].high, "separate intervals overlap"


def test_paired_bootstrap_over_seeds_modes_against_naive():
    rng = np.random.default_rng(4)
    a = rng.integers(0, 2, (3, 100)).astype(float)
    b = rng.integers(0, 2, (1, 100)).astype(float)
    per_seed = a.mean(1) - b.mean()
    for mode, combine in (("mean", np.mean), ("min", np.min), ("max", np.max)):
        est = stats.paired_bootstrap(a, b, seeds=mode, n_boot=200, seed=7)
        assert est.estimate == pytest.approx(combine(per_seed))
        assert est.values == pytest.approx(tuple(per_seed))
        naive_rng, draws = np.random.default_rng(7), []
        for _ in range(200):
            idx = naive_rng.integers(0, 100, 100)
            draws.append(combine(a[:, idx].mean(1)) - b[:, idx].mean())
        assert np.allclose(est.draws, draws)
    est = stats.paired_bootstrap(a, b, seeds="resample", n_boot=200, seed=7)
    naive_rng, draws = np.random.default_rng(7), []
    for _ in range(200):
        idx = naive_rng.integers(0, 100, 100)
        sa, sb = naive_rng.integers(0, 3, 3), naive_rng.integers(0, 1, 1)
        draws.append(a[sa][:, idx].mean(1).mean() - b[sb][:, idx].mean(1).mean())
    assert np.allclose(est.draws, draws)
    assert "seeds" in est.unit


def test_paired_bootstrap_with_a_metric_on_rows():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, 120)
    pred_a = np.where(rng.random(120) < 0.8, labels, (labels + 1) % 3)
    pred_b = np.where(rng.random(120) < 0.5, labels, (labels + 1) % 3)

    def accuracy(rows):
        return float((rows[:, 0] == rows[:, 1]).mean())

    est = stats.paired_bootstrap(
        np.column_stack([pred_a, labels]), np.column_stack([pred_b, labels]), accuracy
    )
    assert est.estimate == pytest.approx((pred_a == labels).mean() - (pred_b == labels).mean())
    assert est.low > 0


@pytest.mark.parametrize("paired", [False, True])
def test_permutation_p_values_are_uniform_under_the_null(paired):
    ps = []
    for rep in range(300):
        rng = np.random.default_rng(rep)
        a, b = rng.normal(size=20), rng.normal(size=20)
        ps.append(stats.permutation_test(a, b, paired=paired, n_perm=199, seed=rep).p_value)
    ps = np.array(ps)
    assert ps.min() >= 1 / 200, "a permutation p-value is never 0"
    assert 0.02 <= (ps <= 0.05).mean() <= 0.09
    assert 0.42 <= (ps <= 0.5).mean() <= 0.58
    assert scipy.stats.kstest(ps, "uniform").pvalue > 0.01


def test_permutation_test_detects_a_shift_and_matches_naive():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, size=30), rng.normal(size=30)
    test = stats.permutation_test(a, b, n_perm=500, seed=3)
    naive_rng, pooled, null = np.random.default_rng(3), np.concatenate([a, b]), []
    for _ in range(500):
        order = naive_rng.permutation(60)
        null.append(pooled[order[:30]].mean() - pooled[order[30:]].mean())
    obs = a.mean() - b.mean()
    assert test.statistic == pytest.approx(obs)
    assert test.p_value == pytest.approx((1 + sum(v >= obs for v in null)) / 501)
    assert test.p_value < 0.01
    assert stats.permutation_test(a, b, alternative="less", n_perm=200).p_value > 0.9
    two = stats.permutation_test(a, b, alternative="two-sided", n_perm=500, seed=3)
    assert two.p_value == pytest.approx(min(1, 2 * test.p_value))


def _linear_cka(x, y):
    x, y = x - x.mean(0), y - y.mean(0)
    return np.linalg.norm(x.T @ y) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y))


def _mean_cca(x, y):
    qx, _ = np.linalg.qr(x - x.mean(0))
    qy, _ = np.linalg.qr(y - y.mean(0))
    return float(np.linalg.svd(qx.T @ qy, compute_uv=False).mean())


@pytest.mark.parametrize("measure", [_linear_cka, _mean_cca])
def test_chance_floor_matches_a_direct_simulation(measure):
    floor = stats.chance_floor(measure, 200, 10, 15, n_draws=50, seed=4)
    rng = np.random.default_rng(4)
    direct = [
        measure(rng.standard_normal((200, 10)), rng.standard_normal((200, 15))) for _ in range(50)
    ]
    assert np.allclose(floor.draws, direct)
    assert floor.estimate == pytest.approx(np.mean(direct))
    assert floor.unit == "random draws" and floor.n == 50


def test_chance_floor_of_cca_follows_the_rows_per_dimension():
    # Independent Gaussians, centred: the squared canonical correlations sum to
    # d_x d_y / (n - 1) in expectation (the trace of a matrix-variate beta; Muirhead 1982,
    # 10.7), so their mean over the d_y of them is d_x / (n - 1).
    def mean_sq_cca(x, y):
        qx, _ = np.linalg.qr(x - x.mean(0))
        qy, _ = np.linalg.qr(y - y.mean(0))
        return float((np.linalg.svd(qx.T @ qy, compute_uv=False) ** 2).sum() / y.shape[1])

    floor = stats.chance_floor(mean_sq_cca, 101, 20, 20, n_draws=200, seed=0)
    assert floor.estimate == pytest.approx(20 / 100, rel=0.03)
    assert stats.chance_floor(mean_sq_cca, 1001, 20, 20, n_draws=10).estimate < 0.03


def test_chance_floor_spectrum_and_rotation():
    spectrum = np.r_[100.0, np.full(9, 0.01)]
    floor = stats.chance_floor(
        lambda x, y: float(x.var(0).max() / x.var(0).sum()), 500, 10, 10, spectrum_x=spectrum
    )
    assert floor.estimate > 0.9, "one direction holds almost all the variance"
    rotated = stats.chance_floor(
        lambda x, y: float(x.var(0).max() / x.var(0).sum()), 500, 10, 10,
        spectrum_x=spectrum, rotate=True,
    )  # fmt: skip
    assert rotated.estimate < floor.estimate
    with pytest.raises(ValueError, match="spectrum_x"):
        stats.chance_floor(_linear_cka, 50, 3, 3, spectrum_x=[1.0, 2.0])


def test_shuffled_floor_breaks_the_pairing_only():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 5))
    y = x @ rng.normal(size=(5, 4))
    floor = stats.shuffled_floor(_linear_cka, x, y, n_draws=40, seed=1)
    naive_rng = np.random.default_rng(1)
    direct = [_linear_cka(x, y[naive_rng.permutation(300)]) for _ in range(40)]
    assert np.allclose(floor.draws, direct)
    assert _linear_cka(x, y) > 0.5 > floor.high


def test_spearman_brown_and_split_half_of_a_known_reliability():
    assert stats.spearman_brown(0.5) == pytest.approx(2 / 3)
    assert stats.spearman_brown(0.25, factor=3) == pytest.approx(0.75 / 1.5)
    # item true scores var 1, each observation adds noise var 4: with 8 observations,
    # the reliability of the item mean is 1 / (1 + 4 / 8) = 2/3
    rng = np.random.default_rng(0)
    truth = rng.normal(size=400)
    values = truth[:, None] + rng.normal(scale=2.0, size=(400, 8))
    est = stats.split_half_reliability(values, n_splits=50, n_boot=200)
    assert est.estimate == pytest.approx(2 / 3, abs=0.05)
    assert est.low < 2 / 3 < est.high
    assert est.unit == "items" and est.n == 400


def test_split_half_with_groups_equals_the_matrix_form_for_equal_counts():
    rng = np.random.default_rng(1)
    truth = rng.normal(size=150)
    values = truth[:, None] + rng.normal(size=(150, 6))
    groups = np.repeat(np.arange(150), 6)
    by_groups = stats.split_half_reliability(values.ravel(), groups, n_splits=100, n_boot=100)
    matrix = stats.split_half_reliability(values, n_splits=100, n_boot=100)
    assert by_groups.estimate == pytest.approx(matrix.estimate, abs=0.03)
    # singletons are dropped
    single = stats.split_half_reliability(
        np.r_[values.ravel(), 9.0], np.r_[groups, 999], n_splits=20, n_boot=20
    )
    assert single.n == 150


def test_split_half_spearman_on_noise_is_near_zero():
    values = np.random.default_rng(2).normal(size=(300, 4))
    est = stats.split_half_reliability(values, method="spearman", n_splits=50, n_boot=100)
    assert abs(est.estimate) < 0.15 and est.low < 0 < est.high


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 30, 200])
@pytest.mark.parametrize("p", [0.6, 0.9, 0.975, 0.995, 0.025])
def test_t_quantile_matches_scipy(df, p):
    assert stats.t_quantile(p, df) == pytest.approx(scipy.stats.t.ppf(p, df), rel=1e-9)


def test_seed_summary_is_the_t_interval():
    values = [0.71, 0.66, 0.75]
    s = stats.seed_summary(values)
    ci = scipy.stats.t.interval(0.95, 2, loc=np.mean(values), scale=scipy.stats.sem(values))
    assert (s.low, s.high) == pytest.approx(ci)
    assert s.sd == pytest.approx(np.std(values, ddof=1)) and s.values == tuple(values)
    assert s.unit == "seeds" and s.n == 3
    with pytest.raises(ValueError, match="at least 2"):
        stats.seed_summary([0.7])


def test_t_interval_over_seeds_covers_at_the_nominal_rate():
    rng = np.random.default_rng(0)
    covered = sum(
        (s := stats.seed_summary(rng.normal(2.0, 1.0, size=3))).low <= 2.0 <= s.high
        for _ in range(1000)
    )
    assert 0.93 <= covered / 1000 <= 0.97


def _combined_naive(estimate, sd_units, per_seed, level=0.95):
    """se² = sd² + s²/S; Satterthwaite df = se⁴ (S − 1) / (s²/S)², floored; scipy's t."""
    per_seed = np.asarray(per_seed, dtype=float)
    seed_var = per_seed.var(ddof=1) / len(per_seed)
    se = math.sqrt(sd_units**2 + seed_var)
    ratio = 0 if seed_var == 0 else (sd_units**2 + seed_var) ** 2 / seed_var**2
    df = (
        1000 if seed_var == 0 else max(1, min(1000, math.floor(ratio * (len(per_seed) - 1) + 1e-9)))
    )
    half = scipy.stats.t.ppf((1 + level) / 2, df) * se
    return estimate - half, estimate + half


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_seed_spread_is_the_satterthwaite_t_interval(seed):
    rng = np.random.default_rng(seed)
    per_seed = rng.normal(0.05, 0.02, size=3 + seed)
    sd_units = rng.uniform(0.001, 0.03)
    over = stats.Estimate(per_seed.mean(), -1, 1, unit="test examples", n=400, sd=sd_units)
    got = stats.with_seed_spread(over, per_seed, seeds_unit="fine-tuning seeds")
    assert got.estimate == over.estimate and got.n == 400
    assert (got.low, got.high) == pytest.approx(_combined_naive(over.estimate, sd_units, per_seed))
    assert got.values == pytest.approx(tuple(per_seed))
    assert got.unit == f"test examples and {len(per_seed)} fine-tuning seeds"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_seed_spread_seeds_df_is_the_conservative_t_interval(seed):
    """df_rule="seeds": mean ± t_{S-1} sqrt(sd² + s²/S), never narrower than Satterthwaite's;
    two seeds that agree no longer give the bootstrap's normal interval."""
    rng = np.random.default_rng(seed)
    per_seed = rng.normal(0.05, 0.02, size=2 + seed)
    sd_units = rng.uniform(0.001, 0.03)
    over = stats.Estimate(per_seed.mean(), -1, 1, unit="test sentences", n=80, sd=sd_units)
    got = stats.with_seed_spread(over, per_seed, df_rule="seeds")
    se = math.sqrt(sd_units**2 + per_seed.var(ddof=1) / per_seed.size)
    half = scipy.stats.t.ppf(0.975, per_seed.size - 1) * se
    assert (got.low, got.high) == pytest.approx((over.estimate - half, over.estimate + half))
    assert got.df == per_seed.size - 1
    wide = stats.with_seed_spread(over, per_seed)
    assert got.low <= wide.low and got.high >= wide.high
    agree = stats.Estimate(-0.0044, -1, 1, sd=0.002)
    loose = stats.with_seed_spread(agree, [-0.0041, -0.0047])
    tight = stats.with_seed_spread(agree, [-0.0041, -0.0047], df_rule="seeds")
    assert (
        loose.df > 100 and tight.df == 1 and tight.high - tight.low > 5 * (loose.high - loose.low)
    )
    with pytest.raises(ValueError, match="df_rule"):
        stats.with_seed_spread(over, per_seed, df_rule="welch")


def test_with_seed_spread_reduces_to_its_two_parts():
    """No test-set part: seed_summary's t interval. No seed spread: the normal interval."""
    values = [0.71, 0.66, 0.75]
    over = stats.Estimate(np.mean(values), 0.0, 1.0, unit="examples", sd=0.0)
    got, t = stats.with_seed_spread(over, values), stats.seed_summary(values)
    assert (got.low, got.high) == pytest.approx((t.low, t.high), rel=1e-12)
    flat = stats.with_seed_spread(stats.Estimate(0.7, 0.0, 1.0, sd=0.01), [0.7, 0.7, 0.7])
    assert (flat.low, flat.high) == pytest.approx((0.7 - 0.0196, 0.7 + 0.0196), abs=2e-4)
    wide = stats.with_seed_spread(stats.Estimate(np.mean(values), 0.0, 1.0, sd=0.05), values)
    assert wide.low < t.low and wide.high > t.high  # both parts: wider than either


def test_with_seed_spread_covers_a_crossed_design():
    """Seeds and a shared test set both random: the interval covers the truth at >= 95 %,
    where the interval over the test set alone (seeds fixed) covers far less often."""
    rng = np.random.default_rng(0)
    hits = naive_hits = 0
    for _ in range(2000):
        test_effect = rng.normal(0, 0.01)  # the test set's draw, shared by every seed
        per_seed = 0.02 + test_effect + rng.normal(0, 0.02, size=3)
        over = stats.Estimate(per_seed.mean(), 0, 1, sd=0.01)
        got = stats.with_seed_spread(over, per_seed)
        hits += got.low <= 0.02 <= got.high
        naive_hits += abs(per_seed.mean() - 0.02) <= 1.96 * 0.01
    assert 0.94 <= hits / 2000 <= 0.995
    assert naive_hits / 2000 < 0.85


def test_with_seed_spread_names_bad_input():
    over = stats.Estimate(0.5, 0.4, 0.6, sd=0.05)
    with pytest.raises(ValueError, match="at least 2"):
        stats.with_seed_spread(over, [0.5])
    with pytest.raises(ValueError, match="not the estimate"):
        stats.with_seed_spread(over, [0.1, 0.2])
    with pytest.raises(ValueError, match="resampling SD"):
        stats.with_seed_spread(stats.Estimate(0.5, 0.4, 0.6), [0.4, 0.6])


def test_estimate_validation_formatting_and_exact():
    est = stats.exact(12, n=12)
    assert est.interval == (12.0, 12.0) and est.unit == "none" and est.format() == "12.000"
    rec = stats.Estimate(0.71, 0.66, 0.75, unit="seeds", n=3).to_record()
    assert rec["interval"] == [0.66, 0.75] and rec["unit"] == "seeds"
    assert stats.Estimate(0.71, 0.66, 0.75).format(2) == "0.71 [0.66, 0.75]"
    with pytest.raises(ValueError, match="low <= high"):
        stats.Estimate(0.5, 0.6, 0.4)
    with pytest.raises(ValueError, match="NaN"):
        stats.Estimate(math.nan, 0, 1)
    with pytest.raises(ValueError, match="quantiles need"):
        est.quantile(0.5)


def test_errors_name_the_argument():
    x = np.arange(10.0)
    with pytest.raises(ValueError, match="same number of rows"):
        stats.bootstrap(np.mean, x, x[:5])
    with pytest.raises(ValueError, match="n_boot"):
        stats.bootstrap(np.mean, x, n_boot=0)
    with pytest.raises(ValueError, match="groups"):
        stats.bootstrap(np.mean, x, groups=[1, 2])
    with pytest.raises(ValueError, match="seeds"):
        stats.paired_bootstrap(x, x, seeds="all")
    with pytest.raises(ValueError, match="leading seed axis"):
        stats.paired_bootstrap(x, x, seeds="mean")
    with pytest.raises(ValueError, match="same units"):
        stats.paired_bootstrap(x, x[:4])
    with pytest.raises(ValueError, match="alternative"):
        stats.permutation_test(x, x, alternative="bigger")
    with pytest.raises(ValueError, match="one shape"):
        stats.permutation_test(x, x[:3], paired=True)
    with pytest.raises(ValueError, match="same rows"):
        stats.shuffled_floor(_linear_cka, x[:, None], x[:4, None])
    with pytest.raises(ValueError, match="n_items, n_obs"):
        stats.split_half_reliability(x)
    with pytest.raises(ValueError, match="level"):
        stats.bootstrap(np.mean, x, level=95)


def test_non_finite_resamples_are_dropped_with_a_warning_or_refused():
    x = np.r_[np.zeros(18), 1.0, 2.0]

    def ratio(v):
        return v.mean() / v.std() if v.std() > 0 else math.inf

    with pytest.warns(UserWarning, match="non-finite"):
        est = stats.bootstrap(ratio, x, n_boot=200)
    assert np.isfinite(est.draws).all()
    with pytest.raises(ValueError, match="undefined on most"):
        stats.bootstrap(lambda v: math.nan if len(v) else 0.0, x, n_boot=20)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_input_is_named_not_blamed_on_the_resamples(bad):
    """Issue 46, item 8: NaN or inf in the data was reported as "too few units, or a
    constant resample"; the input holding it is named, with where."""
    x = np.arange(20.0)
    x[7] = bad
    with pytest.raises(
        ValueError, match=r"`arrays\[0\]` holds 1 NaN or inf value\(s\) \(the first at \[7\]\)"
    ):
        stats.bootstrap(np.mean, x)
    with pytest.raises(
        ValueError, match=r"`a` holds 1 NaN or inf value\(s\) \(the first at \[7\]\)"
    ):
        stats.paired_bootstrap(x, np.ones(20))
    with pytest.raises(ValueError, match=r"`b` holds 1 NaN or inf"):
        stats.permutation_test(np.ones(20), x)
    values = np.arange(40.0).reshape(10, 4)
    values[3, 1] = bad
    with pytest.raises(
        ValueError, match=r"`values` holds 1 NaN or inf value\(s\) \(the first at \[3, 1\]\)"
    ):
        stats.split_half_reliability(values)
    # A statistic that ignores NaN still works on such data.
    assert np.isfinite(stats.bootstrap(np.nanmedian, np.where(x == bad, np.nan, x)).estimate)


def test_estimates_are_finite_and_spearman_brown_takes_correlations():
    """Issue 46, item 8: `Estimate(inf, 0, 1)` and `spearman_brown(1.5)` were accepted."""
    for value in (np.inf, -np.inf):
        with pytest.raises(ValueError, match=r"`estimate` is -?inf: the statistic is not finite"):
            stats.Estimate(value, 0.0, 1.0)
    for r in (1.5, -1.2, [0.5, 2.0]):
        with pytest.raises(ValueError, match=r"`r` must be a correlation in \[-1, 1\]"):
            stats.spearman_brown(r)
    for factor in (0, -2.0, np.inf, np.nan):
        with pytest.raises(ValueError, match=r"`factor` must be a finite number > 0"):
            stats.spearman_brown(0.5, factor)
    assert stats.spearman_brown(1 + 1e-15) == 1.0  # a correlation past 1 by rounding
    assert math.isnan(stats.spearman_brown(np.nan))
    assert stats.spearman_brown(0.5) == pytest.approx(2 / 3)
