"""The designs behind the intervals (issue 41), against naive loops and on simulated data:
nested resampling, cross-fitting, equivalence, same-pipeline nulls, power and Holm.

Each test names the point of the checklist (``EVIDENCE.md``) it exercises."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from lmsim import stats


# ------------------------------------------------------------------ §1 nested units
def _nested(rng, n_models=10, n_layers=20, model_sd=1.0, layer_sd=1.0, mu=0.0):
    models = np.repeat(np.arange(n_models), n_layers)
    layers = np.tile(np.arange(n_layers), n_models)
    y = mu + rng.normal(0, model_sd, n_models)[models] + rng.normal(0, layer_sd, len(models))
    return y, models, layers


def _naive_hierarchical(statistic, y, levels, n_boot, seed, resample):
    """The documented draw order, written out with dictionaries."""
    rng = np.random.default_rng(seed)

    def tree(rows, depth):
        if depth == len(levels):
            return rows
        labels = levels[depth][rows]
        return {v: tree(rows[labels == v], depth + 1) for v in sorted(set(labels.tolist()))}

    root = tree(np.arange(len(y)), 0)

    def visit(node, depth, out):
        if depth == len(levels):
            out.extend(node.tolist())
            return
        keys = sorted(node)
        picked = (
            [keys[i] for i in rng.integers(0, len(keys), len(keys))] if resample[depth] else keys
        )
        for key in picked:
            visit(node[key], depth + 1, out)

    draws = []
    for _ in range(n_boot):
        rows = []
        visit(root, 0, rows)
        draws.append(statistic(y[np.array(rows)]))
    return np.array(draws)


@pytest.mark.parametrize("resample", [(True, True), (True, False), (False, True)])
def test_hierarchical_bootstrap_equals_a_naive_loop(resample):
    rng = np.random.default_rng(1)
    y, models, layers = _nested(rng, n_models=5, n_layers=4)
    order = rng.permutation(len(y))  # rows in any order
    y, models, layers = y[order], models[order], layers[order]
    est = stats.hierarchical_bootstrap(
        np.median, y, levels=(models, layers), unit="models > layers", resample=resample,
        n_boot=150, seed=3,
    )  # fmt: skip
    naive = _naive_hierarchical(np.median, y, (models, layers), 150, 3, resample)
    assert np.array_equal(est.draws, naive)
    assert (est.low, est.high) == pytest.approx(tuple(np.quantile(naive, [0.025, 0.975])))
    assert est.estimate == np.median(y)
    fixed = "models (fixed) > layers" if not resample[0] else "models > layers"
    assert est.unit == (fixed if resample[1] else "models > layers (fixed)")
    assert est.n == (5 if resample[0] else 20)


def test_hierarchical_bootstrap_numbers_units_drawn_twice_apart():
    rng = np.random.default_rng(0)
    y, models, layers = _nested(rng, n_models=6, n_layers=5)
    seen = []

    def mean_of_model_means(y, ids):
        seen.append(len(np.unique(ids[:, 0])))
        return np.mean([y[ids[:, 0] == m].mean() for m in np.unique(ids[:, 0])])

    est = stats.hierarchical_bootstrap(
        mean_of_model_means, y, levels=(models, layers), unit=("models", "layers"), labels=True,
        n_boot=50,
    )  # fmt: skip
    assert set(seen) == {6}, "every resample has 6 model units, duplicates numbered apart"
    assert est.estimate == pytest.approx(np.mean([y[models == m].mean() for m in range(6)]))


def test_rows_sharing_every_label_move_together():
    """§1: an example that enters several pairs is one unit (rows share its labels)."""
    rng = np.random.default_rng(0)
    examples = np.repeat(np.arange(8), 3)  # each example in three pairs
    y = rng.normal(size=8)[examples]
    est = stats.hierarchical_bootstrap(
        lambda v: len(v), y, levels=(examples,), unit="examples", n_boot=30
    )
    assert set(est.draws) == {24.0} and est.n == 8


def test_hierarchical_bootstrap_covers_nested_data_where_the_flat_one_under_covers():
    """§1: 10 models x 20 layers, the models differ. An interval over the 200 layers as if
    independent covers the mean far too rarely; models, then layers, covers."""
    rng = np.random.default_rng(0)
    flat = nested = 0
    n_rep = 100
    for rep in range(n_rep):
        y, models, layers = _nested(rng)
        f = stats.bootstrap(np.mean, y, unit="layers", n_boot=200, seed=rep)
        h = stats.hierarchical_bootstrap(
            np.mean, y, levels=(models, layers), unit="models > layers", n_boot=200, seed=rep
        )
        flat += f.low <= 0 <= f.high
        nested += h.low <= 0 <= h.high
    assert flat / n_rep < 0.5
    assert nested / n_rep >= 0.85


def test_stratified_by_task_with_examples_in_several_pairs_covers():
    """§1: examples enter two pairs each (their rows share the example's effect); a row
    bootstrap under-covers, (task fixed, example) resampling covers."""
    rng = np.random.default_rng(1)
    row_hits = unit_hits = 0
    n_rep = 100
    for rep in range(n_rep):
        tasks = np.repeat(np.arange(3), 40)  # 3 tasks x 20 examples x 2 pairs
        examples = np.repeat(np.arange(60), 2)
        y = rng.normal(0, 1, 60)[examples] + rng.normal(0, 0.2, 120) + tasks * 0.5
        truth = 0.5
        row = stats.bootstrap(np.mean, y, n_boot=200, seed=rep)
        unit = stats.hierarchical_bootstrap(
            np.mean, y, levels=(tasks, examples), unit="tasks > examples",
            resample=(False, True), n_boot=200, seed=rep,
        )  # fmt: skip
        row_hits += row.low <= truth <= row.high
        unit_hits += unit.low <= truth <= unit.high
    assert row_hits / n_rep < 0.86
    assert unit_hits / n_rep >= 0.88


def test_hierarchical_bootstrap_names_bad_input():
    y = np.arange(6.0)
    with pytest.raises(ValueError, match="name each of the 2 levels"):
        stats.hierarchical_bootstrap(np.mean, y, levels=(y, y), unit="models")
    with pytest.raises(ValueError, match="one label per row"):
        stats.hierarchical_bootstrap(np.mean, y, levels=(y[:3],), unit="x")
    with pytest.raises(ValueError, match="at least one True"):
        stats.hierarchical_bootstrap(np.mean, y, levels=(y,), unit="x", resample=(False,))
    with pytest.raises(ValueError, match="at least 2 units"):
        stats.hierarchical_bootstrap(np.mean, y, levels=(np.zeros(6), y), unit="a > b",
                                     resample=(True, False))  # fmt: skip


# ------------------------------------------------------------------ §1 cross-fitting
def _toy_runs(rng, n_items=300, n_obs=20, item_sd=0.0):
    """Two runs on one text: a shared context effect per observation, independent run
    noise, and an item effect of ``item_sd``."""
    context = rng.normal(size=(n_items, n_obs))
    item = rng.normal(0, item_sd, size=(n_items, 1))
    a = item + context + rng.normal(size=context.shape)
    b = item + context + rng.normal(size=context.shape)
    return a, b


def test_cross_fitting_removes_the_shared_text():
    """§1, the issue's toy: a shared context effect and no item effect. The same-text
    correlation is ~0.5, the reliabilities ~0, and the cross-fitted r ~0."""
    a, b = _toy_runs(np.random.default_rng(0))
    fit = stats.cross_fitted_correlation(a, b, n_splits=50, n_boot=300)
    assert abs(fit.r.estimate) < 0.06 and fit.r.low < 0 < fit.r.high
    assert fit.same_text.estimate == pytest.approx(0.5, abs=0.06)
    assert abs(fit.reliability_a.estimate) < 0.08 and abs(fit.reliability_b.estimate) < 0.08
    assert fit.r.unit == "items" and fit.r.n == 300


def test_cross_fitted_ceiling_is_a_real_ceiling():
    """§1: with an item effect, r / ceiling is ~1 (two runs with the same true scores);
    the same-text correlation over the same ceiling is far above 1 (the design is wrong)."""
    a, b = _toy_runs(np.random.default_rng(1), item_sd=0.3)
    fit = stats.cross_fitted_correlation(a, b, n_splits=50, n_boot=300)
    assert fit.disattenuated == pytest.approx(1.0, abs=0.15)
    assert fit.same_text.estimate / fit.ceiling.estimate > 1.6
    rec = fit.to_record()
    assert set(rec) == {"r", "reliability_a", "reliability_b", "ceiling", "same_text",
                        "disattenuated"}  # fmt: skip


def _corr(x, y):
    return float(np.corrcoef(x, y)[0, 1])


def test_cross_fitted_correlation_equals_a_naive_loop():
    a, b = _toy_runs(np.random.default_rng(2), n_items=30, n_obs=7, item_sd=0.5)
    fit = stats.cross_fitted_correlation(a, b, n_splits=5, n_boot=40, seed=9)
    rng = np.random.default_rng(9)

    def five(a1, a2, b1, b2):
        ra, rb = _corr(a1, a2), _corr(b1, b2)
        return [
            (_corr(a1, b2) + _corr(a2, b1)) / 2, ra, rb,
            math.sqrt(max(ra, 0) * max(rb, 0)), (_corr(a1, b1) + _corr(a2, b2)) / 2,
        ]  # fmt: skip

    def split():
        cols = rng.permutation(7)
        f, s = cols[:3], cols[3:6]
        return a[:, f].mean(1), a[:, s].mean(1), b[:, f].mean(1), b[:, s].mean(1)

    estimates = np.mean([five(*split()) for _ in range(5)], axis=0)
    draws = []
    for _ in range(40):
        halves = split()
        pick = rng.integers(0, 30, 30)
        draws.append(five(*(h[pick] for h in halves)))
    draws = np.array(draws)
    names = ("r", "reliability_a", "reliability_b", "ceiling", "same_text")
    for j, name in enumerate(names):
        got = getattr(fit, name)
        assert got.estimate == pytest.approx(estimates[j], abs=1e-12), name
        assert np.allclose(got.draws, draws[:, j], atol=1e-12), name


def test_cross_fitting_of_token_occurrences_matches_the_matrix_form():
    a, b = _toy_runs(np.random.default_rng(3), n_items=200, n_obs=10, item_sd=0.4)
    groups = np.repeat(np.arange(200), 10)
    grouped = stats.cross_fitted_correlation(a.ravel(), b.ravel(), groups, n_splits=50, n_boot=100)
    matrix = stats.cross_fitted_correlation(a, b, n_splits=50, n_boot=100)
    for name in ("r", "reliability_a", "ceiling", "same_text"):
        assert getattr(grouped, name).estimate == pytest.approx(
            getattr(matrix, name).estimate, abs=0.03
        )
    with pytest.raises(ValueError, match="same observations"):
        stats.cross_fitted_correlation(a, b[:, :5])
    with pytest.raises(ValueError, match="finite"):
        stats.cross_fitted_correlation(np.where(a > 2, np.nan, a), b)


# -------------------------------------------------------------------- §3 equivalence
def test_margin_bounds_absolute_and_relative():
    assert stats.margin_bounds(0.02) == (-0.02, 0.02)
    assert stats.margin_bounds(0.01, "no worse") == (-0.01, math.inf)
    assert stats.margin_bounds(0.01, "stable", relative=True, reference=-0.8) == pytest.approx(
        (-0.008, 0.008)
    )
    with pytest.raises(ValueError, match="reference"):
        stats.margin_bounds(0.01, relative=True)
    with pytest.raises(ValueError, match="positive"):
        stats.margin_bounds(-1)
    with pytest.raises(ValueError, match="kind"):
        stats.margin_bounds(1, "about")


def test_tost_p_values_equal_a_naive_count_and_the_normal_form():
    x = np.random.default_rng(0).normal(0.01, 0.1, 200)
    est = stats.bootstrap(np.mean, x, n_boot=500)
    got = stats.tost(est, 0.02)
    naive_low = sum(d <= -0.02 for d in est.draws) / len(est.draws)
    naive_high = sum(d >= 0.02 for d in est.draws) / len(est.draws)
    assert (got.p_lower, got.p_upper) == (naive_low, naive_high)
    assert got.p_value == max(naive_low, naive_high) and got.alpha == pytest.approx(0.025)
    t = stats.seed_summary([0.01, 0.012, 0.008, 0.011])  # no draws: Student t, df 3
    se = (t.high - t.low) / (2 * scipy.stats.t.ppf(0.975, 3))
    got = stats.tost(t, 0.005)
    assert got.p_upper == pytest.approx(scipy.stats.t.sf((0.005 - t.estimate) / se, 3))
    assert got.p_lower == pytest.approx(scipy.stats.t.sf((t.estimate + 0.005) / se, 3))
    normal = stats.Estimate(t.estimate, t.low, t.high)  # no df: the normal form
    se = (t.high - t.low) / (2 * scipy.stats.norm.ppf(0.975))
    assert stats.tost(normal, 0.005).p_upper == pytest.approx(
        scipy.stats.norm.sf((0.005 - t.estimate) / se)
    )
    assert stats.tost(t, 0.005, "no worse").p_upper == 0


def test_failing_to_find_a_difference_is_not_equivalence():
    """§3: no true difference, few examples: the interval straddles 0 (no difference
    found) but also the margin, so "within ±m" is not shown; with many it is. At a true
    difference exactly at the margin, "within" holds at most at the one-sided level."""
    rng = np.random.default_rng(0)
    small = [stats.bootstrap(np.mean, rng.normal(0, 1, 30), n_boot=300, seed=k) for k in range(60)]
    assert np.mean([e.low < 0 < e.high for e in small]) > 0.85  # "no difference"
    assert np.mean([stats.tost(e, 0.1).p_value <= 0.025 for e in small]) < 0.05
    big = [stats.bootstrap(np.mean, rng.normal(0, 1, 3000), n_boot=300, seed=k) for k in range(30)]
    assert np.mean([stats.tost(e, 0.1).p_value <= 0.025 for e in big]) > 0.9
    at_margin = [
        stats.tost(stats.bootstrap(np.mean, rng.normal(0.1, 1, 400), n_boot=300, seed=k), 0.1)
        for k in range(300)
    ]
    assert np.mean([t.p_value <= 0.025 for t in at_margin]) < 0.06


# -------------------------------------------------------------------- §5 same-pipeline nulls
def _cka(x, y):
    x, y = x - x.mean(0), y - y.mean(0)
    return float(np.linalg.norm(x.T @ y) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)))


def test_pipeline_null_reproduces_the_chance_and_shuffled_floors():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(40, 5)) * [3, 2, 1, 1, 0.5], rng.normal(size=(40, 4))
    null = stats.pipeline_null(_cka, x, y, method="gaussian", n_draws=30, seed=4)
    spectra = [np.clip(np.linalg.eigvalsh(np.cov(v, rowvar=False)), 0, None) for v in (x, y)]
    floor = stats.chance_floor(
        _cka, 40, 5, 4, spectrum_x=spectra[0], spectrum_y=spectra[1], n_draws=30, seed=4
    )
    assert np.array_equal(null.distribution.draws, floor.draws)
    shuffled = stats.pipeline_null(_cka, x, y, n_draws=30, seed=5)
    assert np.array_equal(
        shuffled.distribution.draws, stats.shuffled_floor(_cka, x, y, n_draws=30, seed=5).draws
    )
    assert null.quantile == pytest.approx(np.quantile(floor.draws, 0.95))
    assert null.rule() == f"> {null.quantile:.4f}" and null.mean == pytest.approx(floor.estimate)
    rec = null.to_record()
    assert rec["q"] == 0.95 and rec["quantile"] == null.quantile and rec["estimate"] == null.mean


def test_pipeline_null_keeps_weights_and_draws_in_the_documented_order():
    rng = np.random.default_rng(1)
    x, y, w = rng.normal(size=(25, 3)), rng.normal(size=(25, 2)), rng.integers(1, 5, 25)

    def weighted_corr(x, y, w):
        return float(np.corrcoef(x[:, 0] * w, y[:, 0])[0, 1])

    null = stats.pipeline_null(weighted_corr, x, y, w, keep=(2,), n_draws=20, seed=2)
    naive_rng, naive = np.random.default_rng(2), []
    for _ in range(20):
        naive.append(weighted_corr(x, y[naive_rng.permutation(25)], w))
    assert np.allclose(null.distribution.draws, naive)
    gauss = stats.pipeline_null(weighted_corr, x, y, w, keep=(2,), weights=w, method="gaussian",
                                n_draws=20, seed=2)  # fmt: skip
    assert gauss.distribution.n == 20
    with pytest.raises(ValueError, match="every array is kept"):
        stats.pipeline_null(weighted_corr, x, keep=(0,), method="gaussian")


def test_a_large_sample_floor_is_wrong_at_the_page_size_and_the_pipeline_null_is_right():
    """§5: the best |correlation| of 20 columns with a target at n = 30 is far above its
    asymptotic 0 on structureless data: "> 0" would hold every time; the same-pipeline
    null's 95th percentile holds at about the nominal 5 %."""
    rng = np.random.default_rng(0)

    def best_corr(x, y):
        x, y = x - x.mean(0), y - y.mean()
        return float(np.max(np.abs(x.T @ y) / (np.linalg.norm(x, axis=0) * np.linalg.norm(y))))

    x0, y0 = rng.normal(size=(30, 20)), rng.normal(size=30)
    null = stats.pipeline_null(best_corr, x0, y0, n_draws=400, seed=1)
    assert null.mean > 0.25
    values = [best_corr(rng.normal(size=(30, 20)), rng.normal(size=30)) for _ in range(400)]
    assert np.mean(np.array(values) > 0) == 1.0
    assert np.mean(np.array(values) > null.quantile) < 0.09


# -------------------------------------------------------------------- §12 power
def test_mde_is_the_normal_power_formula_and_has_its_power():
    """§12: at a true effect equal to the mde, 80 % of intervals exclude the threshold."""
    rng = np.random.default_rng(0)
    est = stats.bootstrap(np.mean, rng.normal(0, 1, 200), n_boot=400)
    power = stats.power_note(est, 0.0)
    se = (est.high - est.low) / (2 * scipy.stats.norm.ppf(0.975))
    assert power.se == pytest.approx(se)
    assert power.mde == pytest.approx(
        (scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8)) * se
    )
    hits = [
        stats.bootstrap(np.mean, rng.normal(power.mde, 1, 200), n_boot=300, seed=k).low > 0
        for k in range(300)
    ]
    assert 0.72 <= np.mean(hits) <= 0.88


def test_what_would_settle_it_comes_from_the_variance_components():
    """§12 and §2: one unit: n (mde / d)^2; units and seeds: each alone, or "cannot"."""
    est = stats.Estimate(0.01, -0.01, 0.03, unit="test examples", n=1000)
    power = stats.power_note(est, 0.0)
    assert power.needed["test examples"] == math.ceil(1000 * (power.mde / 0.01) ** 2)
    assert "test examples (now 1000)" in power.note
    over = stats.Estimate(0.02, 0.0, 0.04, unit="test examples", n=1000, sd=0.002)
    combined = stats.with_seed_spread(over, [0.0, 0.05, 0.01], seeds_unit="seeds")
    assert [c[0] for c in combined.components] == ["test examples", "seeds"]
    power = stats.power_note(combined, 0.0, costs={"seeds": "2 GPU hours each"})
    assert power.needed["test examples"] is None, "the seeds' part alone is too large"
    z = scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8)
    seed_part, target = combined.components[1][1], (0.02 / z) ** 2
    assert power.needed["seeds"] == math.ceil(3 * seed_part**2 / (target - 0.002**2))
    assert "2 GPU hours each" in power.note
    assert "more test examples alone cannot" in power.note
    assert "no sample settles it" in stats.power_note(est, 0.01).note


# -------------------------------------------------------------------- §11 Holm
def _naive_holm(p):
    m, order = len(p), sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_holm_equals_the_step_down_definition(seed):
    p = np.random.default_rng(seed).uniform(0, 0.2, 17)
    assert np.allclose(stats.holm(p), _naive_holm(list(p)))
    assert stats.holm([]).shape == (0,)
    with pytest.raises(ValueError, match="lie in"):
        stats.holm([0.1, 1.5])


def test_holm_keeps_the_family_wise_error_where_picking_the_best_does_not():
    """§11: 17 tags with no effect: some tag "holds" in most families unadjusted; with
    Holm's correction, in at most ~α of them."""
    rng = np.random.default_rng(0)
    any_raw = any_holm = 0
    for _ in range(300):
        tags = [stats.seed_summary(rng.normal(0, 1, 10)) for _ in range(17)]
        p = [stats.one_sided_p(t, 0.0, "above") for t in tags]
        any_raw += min(p) <= 0.025
        any_holm += stats.holm(p).min() <= 0.025
    assert any_raw / 300 > 0.2
    assert any_holm / 300 < 0.05


def test_one_sided_p_from_draws_inverts_the_percentile_interval():
    x = np.random.default_rng(0).normal(0.1, 1, 300)
    est = stats.bootstrap(np.mean, x, n_boot=1000)
    assert stats.one_sided_p(est, est.low - 1e-9, "above") <= 0.025
    assert stats.one_sided_p(est, est.low + 0.01, "above") > 0.025
    assert stats.one_sided_p(stats.exact(1.0), 0.5, "above") == 0.0
    assert stats.normal_quantile(0.975) == pytest.approx(scipy.stats.norm.ppf(0.975), abs=1e-12)
