"""Wu et al. family claims with models as the unit, above-floor values, and the permutation
null of the localization-depth trend (issue 42, items 1, 5 and 6)."""

import numpy as np
import pandas as pd
import pytest
from _helpers import SEEDS

from lmsim import claims as cl
from lmsim.metrics.floors import above_floor
from lmsim.metrics.localization import depth_trend, depth_trend_test
from lmsim.papers.wu2020_similarity import (
    family_cells,
    family_contrasts,
    measure_contrast,
    percentile_scale,
    relation_gap,
    split_half_agreement,
)

MODELS = {"enc1": 5, "enc2": 6, "dec1": 7, "dec2": 8}
FAMILIES = {"enc1": "enc", "enc2": "enc", "dec1": "dec", "dec2": "dec"}
NAMES = [f"{m}/layer.{i}" for m, n in MODELS.items() for i in range(n)]
OWNER = [n.split("/")[0] for n in NAMES]


def planted(seed, levels=None, noise=0.02):
    """Encoders alike (0.6 within model and family), the causal pair not (0.2), 0.3 across."""
    levels = levels or {("enc", "enc"): 0.6, ("dec", "dec"): 0.2}
    rng = np.random.default_rng(seed)
    fam = [FAMILIES[m] for m in OWNER]
    mean = np.array([[levels.get((a, b), 0.3) for b in fam] for a in fam])
    return mean + rng.normal(0, noise, mean.shape)


def naive_block(values, a, b):
    cells = [
        values[i, j]
        for i, x in enumerate(OWNER)
        for j, y in enumerate(OWNER)
        if x == a and y == b and i != j
    ]
    return np.mean(cells)


def naive_sym(values, a, b):
    return (naive_block(values, a, b) + naive_block(values, b, a)) / 2


@pytest.mark.parametrize("seed", SEEDS)
def test_family_contrasts_match_the_loop_of_the_formula(seed):
    values = planted(seed)
    out = family_contrasts(values, NAMES, FAMILIES, n_boot=20, seed=seed)
    pairs = out["within family > across families"]
    for a, b, others in (("enc1", "enc2", ("dec1", "dec2")), ("dec1", "dec2", ("enc1", "enc2"))):
        across = np.mean([naive_sym(values, x, c) for x in (a, b) for c in others])
        expected = naive_sym(values, a, b) - across
        assert pairs.groups[f"{a} | {b}"].estimate == pytest.approx(expected, abs=1e-12)
    models = out["within model > across families"]
    for a in MODELS:
        others = [c for c in MODELS if FAMILIES[c] != FAMILIES[a]]
        expected = naive_block(values, a, a) - np.mean([naive_sym(values, a, c) for c in others])
        assert models.groups[a].estimate == pytest.approx(expected, abs=1e-12)
    # pooled: each group weighs the same, whatever its number of layers
    gaps = [g.estimate for g in models.groups.values()]
    assert models.pooled.estimate == pytest.approx(np.mean(gaps), abs=1e-12)
    assert models.pooled.n == 4 and models.pooled.unit == "models > layers"


@pytest.mark.parametrize("seed", SEEDS)
def test_a_failing_group_is_not_pooled_away(seed):
    """The issue's case: the encoders hold, the causal pair fails; layer cells pooled
    (relation_gap) say "holds", the per-group verdicts say "heterogeneous"."""
    values = planted(seed)
    flat = relation_gap(family_cells(values, NAMES, FAMILIES), "within family", "across families",
                        n_boot=200, seed=seed)  # fmt: skip
    assert flat.low > 0  # the cell-pooled interval would pass the claim
    contrast = family_contrasts(values, NAMES, FAMILIES, n_boot=200, seed=seed)[
        "within family > across families"
    ]
    assert contrast.groups["enc1 | enc2"].low > 0
    assert contrast.groups["dec1 | dec2"].high < 0
    # two groups pointing apart: the pooled interval over model pairs spans zero
    assert contrast.pooled.low < 0 < contrast.pooled.high
    claims = cl.Claims("demo", "01_page")
    made = claims.report("within family > across", rule="> 0", role="paper",
                         **contrast.claim_kwargs())  # fmt: skip
    assert made.verdict == "heterogeneous"
    assert {g["group"]: g["verdict"] for g in made.groups} == {
        "enc1 | enc2": "holds",
        "dec1 | dec2": "does not hold",
    }


def test_group_intervals_resample_layers_not_cells():
    """Layers are the unit: a model whose layers differ from each other gets a wide
    interval; iid noise over cells alone gets a narrow one."""
    rng = np.random.default_rng(0)
    base = planted(0, noise=0.0)
    layer_effect = rng.normal(0, 0.2, len(NAMES))
    shifted = base + layer_effect[:, None] + layer_effect[None, :]
    narrow = family_contrasts(planted(0), NAMES, FAMILIES, n_boot=200)
    wide = family_contrasts(shifted, NAMES, FAMILIES, n_boot=200)
    key = "within model > across families"
    width = {n: g.high - g.low for n, g in narrow[key].groups.items()}
    assert all(wide[key].groups[n].high - wide[key].groups[n].low > 3 * w for n, w in width.items())


def test_family_contrasts_reproducible_and_restricted():
    values = planted(1)
    a = family_contrasts(values, NAMES, FAMILIES, n_boot=50, seed=3)
    b = family_contrasts(values, NAMES, FAMILIES, n_boot=50, seed=3)
    for key in a:
        np.testing.assert_array_equal(a[key].pooled.draws, b[key].pooled.draws)
    only = family_contrasts(values, NAMES, FAMILIES, models=["enc1", "enc2", "dec1"], n_boot=20)
    assert list(only["within family > across families"].groups) == ["enc1 | enc2"]
    # one group: the claim is that group, no groups= for the claims
    kwargs = only["within family > across families"].claim_kwargs()
    assert set(kwargs) == {"estimate"}
    with pytest.raises(ValueError, match="no family"):
        family_contrasts(values, NAMES, {"enc1": "enc"})
    with pytest.raises(ValueError, match="no layer"):
        family_contrasts(values, NAMES, FAMILIES, models=["gpt"])


@pytest.mark.parametrize("seed", SEEDS)
def test_measure_contrast_above_floor_removes_the_floor_margin(seed):
    """Item 6: mixedsim "higher" across families only by its floor: raw values say so,
    above-floor values do not."""
    rng = np.random.default_rng(seed)
    signal = planted(seed)
    floors = {"mixedsim": 0.48, "svsim": 0.38}
    mixed = signal + floors["mixedsim"] + rng.normal(0, 0.01, signal.shape)
    sv = signal + floors["svsim"] + rng.normal(0, 0.01, signal.shape)
    raw = measure_contrast(mixed, sv, NAMES, FAMILIES, n_boot=200, seed=seed)
    assert raw.pooled.low > 0.09  # the raw margin is the floors' difference
    above = measure_contrast(
        above_floor(mixed, NAMES, floors["mixedsim"]),
        above_floor(sv, NAMES, floors["svsim"]),
        NAMES, FAMILIES, n_boot=200, seed=seed,
    )  # fmt: skip
    assert above.pooled.low < 0 < above.pooled.high
    assert abs(above.pooled.estimate) < 0.01
    assert set(above.groups) == {"enc1 | dec1", "enc1 | dec2", "enc2 | dec1", "enc2 | dec2"}


def test_above_floor_per_pair_and_by_width():
    values = planted(0)
    widths = {"enc1": 384, "enc2": 768, "dec1": 576, "dec2": 640}
    by_pair = {
        (a, b): 0.01 * (i + 10 * j) for i, a in enumerate(MODELS) for j, b in enumerate(MODELS)
    }
    out = above_floor(values, NAMES, by_pair)
    for i, a in enumerate(OWNER):
        for j, b in enumerate(OWNER):
            assert out[i, j] == pytest.approx(values[i, j] - by_pair[a, b])
    listed = [{"d_x": dx, "d_y": dy, "mean": dx / 1000 + dy / 1e6}
              for dx in widths.values() for dy in widths.values()]  # fmt: skip
    out = above_floor(pd.DataFrame(values, index=NAMES, columns=NAMES), NAMES, listed, widths)
    assert isinstance(out, pd.DataFrame) and list(out.index) == NAMES
    i, j = NAMES.index("enc2/layer.1"), NAMES.index("dec1/layer.3")
    assert out.iloc[i, j] == pytest.approx(values[i, j] - (0.768 + 0.000576))
    # a symmetric floor given one way round serves both
    one_way = {("enc1", "enc2"): 0.5, **{(m, m): 0.0 for m in MODELS}}
    sub = [n for n in NAMES if n.startswith("enc")]
    k = len(sub)
    out = above_floor(values[:k, :k], sub, one_way)
    assert out[0, -1] == pytest.approx(values[0, k - 1] - 0.5)
    assert out[-1, 0] == pytest.approx(values[k - 1, 0] - 0.5)
    with pytest.raises(ValueError, match="no entry"):
        above_floor(values, NAMES, {("enc1", "enc1"): 0.1})
    with pytest.raises(ValueError, match="widths"):
        above_floor(values, NAMES, listed)


def naive_null(scores, names, n_perm, seed):
    """The documented draw order with scipy-free loops and pandas Spearman."""
    table = pd.DataFrame([n.rsplit("/layer.", 1) for n in names], columns=["model", "layer"])
    table["layer"] = table["layer"].astype(int)
    table["score"] = np.asarray(scores)
    rng = np.random.default_rng(seed)
    groups = [g for _, g in table.groupby("model", sort=False) if len(g) >= 3]
    rhos = np.empty((len(groups), n_perm))
    for k, g in enumerate(groups):
        for b in range(n_perm):
            perm = g["score"].to_numpy()[rng.permutation(len(g))]
            layer = pd.Series(g["layer"].to_numpy())
            rhos[k, b] = pd.Series(perm).corr(layer, method="spearman")
    return rhos.mean(axis=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_depth_trend_test_matches_a_naive_permutation_loop(seed):
    rng = np.random.default_rng(seed)
    names = [f"m{k}/layer.{i}" for k, n in enumerate((4, 5, 7)) for i in range(n)]
    scores = pd.Series(rng.normal(size=len(names)), index=names)
    out = depth_trend_test(scores, n_perm=200, seed=seed)
    np.testing.assert_allclose(out["draws"], naive_null(scores, names, 200, seed), atol=1e-12)
    assert out["observed"] == pytest.approx(depth_trend(scores)["spearman"].mean())
    expected_p = (1 + (out["draws"] >= out["observed"] - 1e-12).sum()) / 201
    assert out["p_value"] == pytest.approx(expected_p)


def test_depth_trend_test_four_layers_is_weak_evidence_and_an_inverted_u_is_not_a_rise():
    """The issue's numbers: over four models of four layers, a mean Spearman of 0.3 or more
    arises by chance with probability about 0.18; an inverted U over 13 layers is no rise."""
    names = [f"m{k}/layer.{i}" for k in range(4) for i in range(1, 5)]
    scores = pd.Series(np.random.default_rng(0).normal(size=16), index=names)
    out = depth_trend_test(scores, n_perm=20_000, seed=0)
    assert np.mean(out["draws"] >= 0.3 - 1e-12) == pytest.approx(0.18, abs=0.015)
    assert out["null_quantile"] > 0.3  # a 0.3 mean would not clear the null's bar
    depth = np.arange(13)
    u_names = [f"m{k}/layer.{i}" for k in range(3) for i in depth]
    inverted_u = np.tile(-((depth - 6.0) ** 2) + 0.1 * depth, 3)  # peaks mid-depth
    out = depth_trend_test(pd.Series(inverted_u, index=u_names), n_perm=2000)
    assert out["p_value"] > 0.05
    rising = np.tile(depth.astype(float), 3)
    out = depth_trend_test(pd.Series(rising, index=u_names), n_perm=2000)
    assert out["observed"] == pytest.approx(1.0) and out["p_value"] < 0.001
    with pytest.raises(ValueError, match="3 layers"):
        depth_trend_test(pd.Series([1.0, 2.0], index=["a/layer.0", "a/layer.1"]))


# ------------------------------------------- common scale, split-half agreement (item 8)
def test_percentile_scale_is_invariant_to_a_monotone_rescaling():
    values = planted(0)
    scaled = percentile_scale(values, NAMES)
    again = percentile_scale(1 - np.log(2) + np.log(2) * values**3, NAMES)
    np.testing.assert_allclose(scaled, again, equal_nan=True)
    assert np.isnan(np.diag(scaled)).all()
    off = scaled[~np.eye(len(NAMES), dtype=bool)]
    assert off.max() == pytest.approx(1.0) and off.min() > 0
    only = percentile_scale(values, NAMES, models=["enc1", "dec1"])
    assert np.isnan(only[np.ix_([OWNER.index("enc2")], range(len(NAMES)))]).all()


def _halves(seed, shift=0.0):
    """A shared cross-model structure, plus per-half noise; `shift` changes the second
    corpus's structure (so its heatmaps agree less than the reference's halves)."""
    rng = np.random.default_rng(seed)
    base = planted(seed, noise=0.2)
    other = base + shift * rng.normal(0, 0.2, base.shape)
    return [base + rng.normal(0, 0.02, base.shape) for _ in range(2)], [
        other + rng.normal(0, 0.02, base.shape) for _ in range(2)
    ]


@pytest.mark.parametrize("seed", SEEDS)
def test_split_half_agreement_is_near_zero_for_the_same_structure_and_negative_for_another(seed):
    ref, same = _halves(seed)
    out = split_half_agreement({"m": ref, "n": ref}, {"m": same, "n": same}, NAMES, n_boot=50)
    assert abs(out.pooled.estimate) < 0.05 and set(out.groups) == {"m", "n"}
    assert out.claim_kwargs()["pooled"] == "measures"
    ref, shifted = _halves(seed, shift=1.0)
    out = split_half_agreement({"m": ref}, {"m": shifted}, NAMES, n_boot=50)
    assert out.pooled.high < 0
    cross = [a != b for a in OWNER for b in OWNER]
    r = np.corrcoef(ref[0].ravel()[cross], shifted[1].ravel()[cross])[0, 1]
    r2 = np.corrcoef(ref[1].ravel()[cross], shifted[0].ravel()[cross])[0, 1]
    split = np.corrcoef(ref[0].ravel()[cross], ref[1].ravel()[cross])[0, 1]
    assert out.groups["m"].estimate == pytest.approx((r + r2) / 2 - split, abs=1e-12)


# ------------------------------------------------ Figs. 5-7 over fine-tuning seeds (item 7)
def test_seed_groups_pool_fine_tunes_that_drift_more_at_the_top():
    from lmsim.papers.wu2020_similarity import (
        bottom_minus_top,
        depth_spearman,
        diagonal_cka,
        seed_groups,
    )

    rng = np.random.default_rng(0)
    n_sent, per = 30, 6
    base = [rng.normal(size=(n_sent * per, 8)) for _ in range(6)]
    tuned = {
        f"seed {s}": [b + (0.2 + k) * rng.normal(size=b.shape) for k, b in enumerate(base)]
        for s in range(3)
    }
    rows = lambda drawn: (drawn[:, None] * per + np.arange(per)).ravel()  # noqa: E731
    pooled, groups = seed_groups(
        diagonal_cka, base, tuned, n_sent, bottom_minus_top, rows_of=rows, n_boot=50
    )
    assert set(groups) == set(tuned) and all(g.low > 0 for g in groups.values())
    assert pooled.estimate == pytest.approx(np.mean([g.estimate for g in groups.values()]))
    assert pooled.low > 0 and "seeds" in pooled.unit
    same, _ = seed_groups(diagonal_cka, base, {"seed 0": base}, n_sent, bottom_minus_top,
                          rows_of=rows, n_boot=5)  # fmt: skip
    assert same.estimate == pytest.approx(0.0, abs=1e-12)
    assert depth_spearman(np.array([3.0, 2.0, 1.0])) == pytest.approx(-1.0)


@pytest.mark.parametrize("seed", SEEDS)
def test_localization_shift_matches_a_naive_loop_and_sentence_rows(seed):
    """Fig. 7 from raw vectors: the moment pipeline equals neuronsim / svsim computed pair
    by pair on the arrays, then the authors' localization score (item 7)."""
    from lmsim.metrics import localization_scores, neuronsim, svcca
    from lmsim.papers.wu2020_similarity import localization_shift, sentence_rows

    rng = np.random.default_rng(seed)
    lengths = [3, 5, 4, 6, 2, 5, 4, 3, 6, 5, 4, 3]
    n = sum(lengths)
    base = [rng.normal(size=(n, 6)) for _ in range(3)]
    tuned = [b + 0.5 * rng.normal(size=b.shape) for b in base]
    rows = sentence_rows(lengths)(np.array([1, 1, 4, 0, 11, 7, 7, 3, 2, 9, 10, 5]))
    assert len(rows) == sum(lengths[s] for s in [1, 1, 4, 0, 11, 7, 7, 3, 2, 9, 10, 5])
    assert list(sentence_rows(lengths)(np.array([2]))) == [8, 9, 10, 11]
    layers = [a[rows] for a in base] + [a[rows] for a in tuned]
    k = len(layers)
    neuron = np.array([[1.0 if i == j else neuronsim(layers[i], layers[j]) for j in range(k)]
                       for i in range(k)])  # fmt: skip
    sv = np.array([[1.0 if i == j else svcca(layers[i], layers[j], paper_compat=True)
                    for j in range(k)] for i in range(k)])  # fmt: skip
    names = [f"b/layer.{i}" for i in range(3)] + [f"t/layer.{i}" for i in range(3)]
    for compat, options in [(True, {"paper_compat": True}), (False, {"normalize": "per_model"})]:
        score = localization_scores(neuron, sv, names, **options).to_numpy()
        got = localization_shift(base, tuned, rows, paper_compat=compat)
        np.testing.assert_allclose(got, score[3:] - score[:3], atol=1e-8)
    with pytest.raises(ValueError, match="layers"):
        localization_shift(base, tuned[:2])


@pytest.mark.parametrize("seed", SEEDS)
def test_fast_diagonals_equal_the_direct_ones_on_resampled_sentences(seed):
    """Per-sentence JS sums give the direct diagonal_js on any draw of sentences (repeats
    included), and a mapping of statistics shares the draws."""
    from lmsim.papers.wu2020_similarity import (
        bottom_minus_top,
        depth_spearman,
        diagonal_cka,
        diagonal_js,
        diagonal_js_sums,
        seed_groups,
        sentence_js_sums,
        sentence_rows,
    )

    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 7, 15)
    n = int(lengths.sum())
    base = [rng.normal(size=(n, 5)) for _ in range(4)]
    tuned = [b + rng.normal(size=b.shape) for b in base]
    other = [b + (1 + k) * rng.normal(size=b.shape) for k, b in enumerate(base)]

    def attention(heads):
        out = []
        for m in lengths:
            a = rng.random((heads, m, m))
            out.append(a / a.sum(-1, keepdims=True))
        return out

    b_attn = [attention(3) for _ in range(3)]
    t_attn = [attention(2) for _ in range(3)]
    picked = rng.integers(0, 15, 15)
    sums = sentence_js_sums(b_attn, t_attn)
    np.testing.assert_allclose(
        diagonal_js_sums(None, sums, picked), diagonal_js(b_attn, t_attn, picked), atol=1e-10
    )
    np.testing.assert_allclose(
        diagonal_js_sums(None, sums), diagonal_js(b_attn, t_attn), atol=1e-10
    )
    both = seed_groups(diagonal_cka, base, {"s0": tuned, "s1": other}, 15,
                       {"bt": bottom_minus_top, "rho": depth_spearman},
                       rows_of=sentence_rows(lengths), n_boot=20, seed=seed)  # fmt: skip
    one = seed_groups(diagonal_cka, base, {"s0": tuned, "s1": other}, 15, bottom_minus_top,
                      rows_of=sentence_rows(lengths), n_boot=20, seed=seed)  # fmt: skip
    assert set(both) == {"bt", "rho"}
    assert both["bt"][0].estimate == pytest.approx(one[0].estimate)
    assert (both["bt"][0].low, both["bt"][0].high) == pytest.approx((one[0].low, one[0].high))
