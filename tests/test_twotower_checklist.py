"""The two-tower page's checklist designs (issue 43): cross-fitted correlations, the
pair-specific paper values with the symmetric ceiling rule, Table 4 across types, POS per
tower type under Holm, the ICA same-pipeline null and the collapse prerequisite."""

import numpy as np
import pytest

from lmsim import twotower as tt
from lmsim.claims import Claims, evidence_problems
from lmsim.papers import he2022_twotower as chapter


def toy_runs(n_chunks=200, per_chunk=40, vocab=60, preference=0.0, seed=0, names=("a", "b")):
    """Two runs scored on one text. Every occurrence has a context effect ``u`` that both
    runs share (the text) and that helps the first head more than the second; with
    ``preference`` > 0 both runs also share a per-token preference (the secondary head
    lags on some tokens beyond what the primary's difficulty predicts)."""
    rng = np.random.default_rng(seed)
    n = n_chunks * per_chunk
    token = rng.integers(0, vocab, n)  # equal frequencies: no frequency-dependent bias
    chunk = np.repeat(np.arange(n_chunks), per_chunk)
    u = rng.normal(size=n)
    pref_of = preference * rng.normal(size=vocab)
    out = {}
    for name in names:
        base = -3.0 + 0.3 * rng.normal(size=n)
        log_p = np.stack(
            [
                base + 0.6 * u + 0.2 * rng.normal(size=n),
                base + 0.1 * u - pref_of[token] + 0.2 * rng.normal(size=n),
                base,
            ]
        )
        out[name] = tt.Occurrences(token, chunk, np.minimum(log_p, 0), vocab)
    tokens = np.argsort(-np.bincount(token, minlength=vocab))[:40]
    return out, tokens


def test_crossfit_of_a_shared_context_toy_is_near_zero_where_same_text_is_not():
    """The issue's toy: no token preference, a shared context effect. Scored on the same
    text the runs correlate; cross-fitted they do not, and the ceiling is not exceeded."""
    occ, tokens = toy_runs(preference=0.0)
    halves = chapter.half_scores(occ, tokens, "probability", n_splits=10, n_boot=200)
    cf = chapter.crossfit_pair(halves, "a", "b")
    assert cf.same_text.estimate > 0.3
    assert abs(cf.r.estimate) < 0.1 and cf.r.low < 0 < cf.r.high
    assert cf.r.estimate <= cf.ceiling.estimate + 0.05


def test_crossfit_recovers_a_shared_preference_below_its_ceiling():
    occ, tokens = toy_runs(preference=0.5, seed=1)
    halves = chapter.half_scores(occ, tokens, "probability", n_splits=10, n_boot=200)
    cf = chapter.crossfit_pair(halves, "a", "b")
    assert cf.r.low > 0.3
    assert cf.disattenuated == pytest.approx(1.0, abs=0.2)


def test_chunk_splits_are_disjoint_halves_shared_by_every_run():
    splits = chapter.chunk_splits(11, 5, seed=3)
    assert splits.shape == (5, 11) and (splits.sum(1) == 5).all()
    assert (chapter.chunk_splits(11, 5, seed=3) == splits).all()


def test_crossfit_gap_null_cuts_the_shared_preference():
    occ, tokens = toy_runs(preference=0.5, seed=2)
    nulls = chapter.crossfit_gap_null(occ, tokens, n_draws=20)
    null = chapter.null_crossfit(nulls, "a", "b")
    halves = chapter.half_scores(occ, tokens, n_splits=5, n_boot=50)
    assert null.quantile < chapter.crossfit_pair(halves, "a", "b").r.low
    assert null.mean < null.quantile


def test_paper_pair_values_are_table2s_for_the_exact_setting():
    assert chapter.paper_pair_value("type", "elmo", "gpt")[0] == 0.91
    assert chapter.paper_pair_value("type", "gpt", "elmo")[0] == 0.91
    assert chapter.paper_pair_value("type", "bert", "gpt")[0] == 0.26
    assert chapter.paper_pair_value("type", "elmo", "bert")[0] == 0.27
    assert chapter.paper_pair_value("seed", "bert", "bert")[0] == 0.94
    assert chapter.paper_pair_value("variant", "elmo", "elmo") is None
    table = chapter.PAPER_TABLE2
    assert table.loc["ELMo", "GPT"] == 0.91 and table.loc["GPT", "Bert-base"] == 0.26


def _specs(*rows):
    return [tt.RunSpec.from_dict(r) for r in rows]


SPECS = _specs(
    {"name": "a", "tower": "gpt", "hidden": 8, "layers": 1, "heads": 1, "seed": 0},
    {"name": "b", "tower": "gpt", "hidden": 8, "layers": 1, "heads": 1, "seed": 1},
)


def _halves_and_bars(occ, tokens):
    """The cross-fitted halves of runs a and b and their pair's null bar."""
    halves = chapter.half_scores(occ, tokens, n_splits=5, n_boot=100)
    nulls = chapter.crossfit_gap_null(occ, tokens, n_draws=20)
    counts = np.bincount(occ["a"].token, minlength=60)[tokens]
    return halves, chapter.crossfit_bars([("a", "b")], halves, nulls, counts, n_perm=100)


def test_relation_claims_convict_with_the_ceiling_and_excuse_a_collapsed_run():
    occ, tokens = toy_runs(preference=0.0, seed=4)
    halves, bars = _halves_and_bars(occ, tokens)
    claims = Claims("t", "p")
    rows = chapter.relation_claims_crossfit(claims, [("a", "b")], SPECS, halves, bars, {})
    beyond, strong = (c.record() for c in claims.records[-2:])
    assert strong["role"] == "paper" and strong["ceiling"]["paper_value"] == 0.94
    assert beyond["role"] == "paper" and beyond["ceiling"] is None
    assert rows.loc[0, "as strong as the paper's"] in ("does not hold", "not testable here")
    assert not evidence_problems(beyond) and not evidence_problems(strong)
    claims = Claims("t", "p")
    rows = chapter.relation_claims_crossfit(claims, [("a", "b")], SPECS, halves, bars, {"a": True})
    assert rows.loc[0, "beyond the null"] == rows.loc[0, "as strong as the paper's"]
    assert rows.loc[0, "beyond the null"] == "not testable here"
    assert all("collapsed" in c.note for c in claims.records[-2:])


def test_table2_beyond_the_null_and_as_strong_as_the_papers_are_separate_claims():
    """Review finding A (second round): an interval wholly above the null bar but wholly
    below the paper's value x ceiling shares a pattern beyond the null (holds) and is not
    as strong as the paper's (does not hold); each verdict follows from its own record."""
    occ, tokens = toy_runs(preference=0.5, seed=4)
    b = occ["b"]
    log_p = b.log_p.copy()
    log_p[1] -= 0.45 * np.random.default_rng(9).normal(size=60)[b.token]  # b's own preference
    occ["b"] = tt.Occurrences(b.token, b.chunk, np.minimum(log_p, 0), 60)
    halves, bars = _halves_and_bars(occ, tokens)
    claims = Claims("t", "p")
    rows = chapter.relation_claims_crossfit(claims, [("a", "b")], SPECS, halves, bars, {})
    beyond, strong = (c.record() for c in claims.records)
    assert beyond["claim"].endswith("share a token preference pattern beyond the null (Table 2)")
    assert "as strong as the paper's" in strong["claim"]
    assert rows.loc[0, "low"] > rows.loc[0, "bar"]
    assert beyond["verdict"] == "holds" and strong["verdict"] == "does not hold"
    assert strong["ceiling"]["rule_verdict"] == "holds"
    assert not evidence_problems(beyond) and not evidence_problems(strong)
    # a record of the beyond-null claim that carried the verdict of the other fails the check
    assert evidence_problems({**beyond, "verdict": "does not hold"})


def test_lead_attenuation_shrinks_the_frequency_term_by_root_reliability_only():
    """Review finding E: the paper's lead between - freq shows here as between x c -
    freq x sqrt(max rel), not as (between - freq) x c."""
    from types import SimpleNamespace

    from lmsim import stats

    cf = SimpleNamespace(
        ceiling=stats.Estimate(0.5, 0.4, 0.6, unit="u", n=10),
        reliability_a=stats.Estimate(0.49, 0.36, 0.64, unit="u", n=10),
        reliability_b=stats.Estimate(0.25, 0.2, 0.3, unit="u", n=10),
    )
    f = chapter.lead_attenuation(0.93, 0.22, cf)
    assert f.estimate * 0.71 == pytest.approx(0.93 * 0.5 - 0.22 * 0.7)
    assert f.low * 0.71 == pytest.approx(0.93 * 0.4 - 0.22 * 0.8)
    assert f.high * 0.71 == pytest.approx(0.93 * 0.6 - 0.22 * 0.6)
    assert f.estimate < 0.5, "the frequency term shrinks less than the lead as a whole would"
    with pytest.raises(ValueError, match="lead"):
        chapter.lead_attenuation(0.2, 0.3, cf)


def test_collapse_claim_flags_a_run_whose_weaker_head_lags():
    occ, _ = toy_runs(seed=5)
    lagging = occ["b"].log_p.copy()
    lagging[1] -= 1.0  # the weaker head's perplexity e times the stronger's
    prefs = {
        "a": tt.Preference if False else type("P", (), {"occurrences": occ["a"]})(),
        "b": type("P", (), {"occurrences": tt.Occurrences(occ["b"].token, occ["b"].chunk,
                                                           lagging, 60)})(),
    }  # fmt: skip
    ratios = chapter.head_ratios(prefs, n_boot=50)
    claims = Claims("t", "p")
    collapsed = chapter.collapse_claim(claims, ratios)
    assert collapsed == {"a": False, "b": True}
    assert claims.records[-1].verdict == "does not hold" and claims.records[-1].role == "method"


def test_pos_claims_judge_each_tower_type_under_one_holm_family():
    """Review finding C: every (tag, tower type) is a claim, Holm over all of them together;
    the forward-only ELMo is its own type; the pooled estimate weighs types, not runs."""
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 200
    tokens = np.arange(n)
    tags = np.where(np.arange(n) < 40, "PROPN", np.where(np.arange(n) < 80, "VERB", "NOUN"))
    pos = pd.DataFrame({"upos": tags, "silver": False}, index=tokens)
    shift = np.where(tags == "PROPN", 1.0, 0.0)  # PROPN leans primary in gpt, secondary in bert
    specs = _specs(
        {"name": "g", "tower": "gpt", "hidden": 8, "layers": 1, "heads": 1, "seed": 0},
        {"name": "g1", "tower": "gpt", "hidden": 8, "layers": 1, "heads": 1, "seed": 1},
        {"name": "e", "tower": "bert", "hidden": 8, "layers": 1, "heads": 1, "seed": 0},
        {"name": "f", "tower": "elmo", "hidden": 8, "layers": 1, "seed": 0,
         "elmo_forward_only": True},
    )  # fmt: skip
    assert [chapter.tower_type(s) for s in specs] == ["gpt", "gpt", "bert", "elmo-fwd"]
    scores = {
        "g": shift + 0.3 * rng.normal(size=n),
        "g1": shift + 0.3 * rng.normal(size=n),
        "e": -shift + 0.3 * rng.normal(size=n),
        "f": 0.3 * rng.normal(size=n),
    }
    silver = pos.assign(silver=True)
    claims = Claims("t", "p")
    made = chapter.pos_claims_by_type(claims, scores, specs, pos, tokens, ["PROPN", "VERB"],
                                      n_boot=200, beside={"silver": silver})  # fmt: skip
    assert made[("PROPN", "bert")].verdict == "holds"
    assert made[("PROPN", "gpt")].verdict == "does not hold"
    per_type = [c for key, c in made.items() if isinstance(key, tuple)]
    assert len(per_type) == 6 and all(c.role == "paper" for c in per_type)
    assert {c.family["size"] for c in per_type} == {6}
    assert "beside: silver" in made[("PROPN", "gpt")].note
    # review finding D: a type with one run says so in its claim, and every note says what
    # the interval resamples
    assert "in the bert run e (one run, seed 0 only)" in made[("PROPN", "bert")].claim
    assert "in the gpt runs," in made[("PROPN", "gpt")].claim
    assert "resamples tokens within the 2 runs" in made[("PROPN", "gpt")].note
    assert "no seed spread" in made[("PROPN", "bert")].note
    pooled = made["PROPN"]
    assert pooled.role == "beyond" and pooled.verdict == "heterogeneous"
    naive = np.mean(
        [
            np.mean([chapter.pos_estimate({r: scores[r]}, pos, tokens, "PROPN", n_boot=10)
                     .estimate for r in runs])
            for runs in (["g", "g1"], ["e"], ["f"])
        ]
    )  # fmt: skip
    assert pooled.estimate == pytest.approx(naive, abs=1e-12)
    for c in made.values():
        assert not evidence_problems(c.record())


def test_structureless_embeddings_keep_weighted_moments_or_columns():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4)) + 2.0
    w = rng.integers(1, 20, 500).astype(float)
    G = chapter.structureless_embeddings(X, w, "gaussian", np.random.default_rng(1))
    wn = w / w.sum()
    assert np.allclose(wn @ G, wn @ X, atol=0.3)
    S = chapter.structureless_embeddings(X, w, "column-shuffle", np.random.default_rng(1))
    assert np.allclose(np.sort(S, 0), np.sort(X, 0))
    assert not np.allclose(S, X)
    with pytest.raises(ValueError, match="method"):
        chapter.structureless_embeddings(X, w, "rows", np.random.default_rng(1))


def test_ica_claims_judge_per_word_against_each_null_method_apart():
    rng = np.random.default_rng(0)
    X = rng.laplace(size=(400, 6)) @ rng.normal(size=(6, 6))
    w = rng.integers(1, 10, 400).astype(float)
    nulls = {
        m: chapter.ica_null(X, w, 4, m, n_iter=300, n_draws=1) for m in chapter.ICA_NULL_METHODS
    }
    fit = tt.fit_ica(X, 4, w, n_iter=300)
    claims = Claims("t", "p")
    made = chapter.ica_claims_null(claims, fit.Y, w, nulls, chapter.PAPER_ICA_FACTS, n_boot=50,
                                   vocab=500)  # fmt: skip
    assert set(made) == {(k, m) for k in chapter.ICA_CLAIM_FACTS for m in nulls}
    for (_, method), claim in made.items():
        record = claim.record()
        assert record["role"] == "paper" and "per word" in record["claim"]
        assert f"above {method} embeddings'" in record["claim"]
        assert record["unit"] == "words and null fits" and "at 1 df" in record["method"]
        assert "between every null fit at 1 df" in record["note"]
        assert not evidence_problems(record)
        if record["verdict"] == "inconclusive":
            settle = record["mde"]["settle"]
            assert "fits per null method (now 1)" in settle or "alone cannot" in settle
            assert "null fits per method" not in settle or "alone cannot" in settle
    table = chapter.ica_nulls_table(nulls, fit.Y, w)
    assert "gaussian null draws" in table and "mean groups per word (per word)" in table.index
    one = {"gaussian": {k: v[:1] for k, v in nulls["gaussian"].items()}}
    claims = Claims("t", "p")
    made = chapter.ica_claims_null(claims, fit.Y, w, one, chapter.PAPER_ICA_FACTS, n_boot=20)
    assert {c.verdict for c in made.values()} == {"not testable here"}


@pytest.mark.parametrize("seed", [0, 1])
def test_scale_free_ica_facts_ignore_each_components_scale(seed):
    """Review finding D: the standardised facts are unchanged when a component is rescaled
    (the raw fraction in [-1, 1] is not), and match a naive per-component loop."""
    rng = np.random.default_rng(seed)
    Y = rng.laplace(size=(3000, 5))
    w = rng.integers(1, 20, 3000).astype(float)
    keys = list(chapter.SCALE_FREE_FACTS)
    facts = chapter.ica_facts(Y, w)
    scaled = chapter.ica_facts(Y * np.array([0.2, 1, 3, 5, 0.5]), w)
    for key in keys:
        assert scaled[key] == pytest.approx(facts[key], abs=1e-12)
    raw = "fraction of values in [-1, 1]"
    assert abs(scaled[raw] - facts[raw]) > 0.01
    p = w / w.sum()
    inside, groups, kurt = 0.0, 0.0, []
    for j in range(5):
        mu = np.sum(p * Y[:, j])
        sd = np.sqrt(np.sum(p * (Y[:, j] - mu) ** 2))
        z = (Y[:, j] - mu) / sd
        inside += np.sum(p * (np.abs(z) <= 1)) / 5
        groups += np.sum(p * (np.abs(z) > 2.5))
        kurt.append(np.sum(p * z**4) - 3)
    assert facts[keys[0]] == pytest.approx(inside)
    assert facts[keys[1]] == pytest.approx(groups)
    assert facts[keys[2]] == pytest.approx(np.mean(kurt))
    gauss = chapter.ica_facts(rng.normal(size=(200_000, 2)))
    assert gauss[keys[0]] == pytest.approx(chapter.SCALE_FREE_FACTS[keys[0]], abs=0.005)
    assert abs(gauss[keys[2]]) < 0.05


def test_null_difference_uses_a_methods_own_spread_only_from_three_fits():
    """Review finding B (second round): with fewer than 3 fits of a null method, the interval
    carries the spread between every null fit at 1 df (t = 12.7); from 3 fits, the method's
    own spread at n - 1 df (never Welch's larger count)."""
    from scipy.stats import t as student

    from lmsim import stats

    ours = stats.Estimate(0.9, 0.88, 0.92, unit="words", n=100, sd=0.01)
    every = np.array([0.7, 0.8])
    got = chapter.null_difference(ours, every[:1], 100, spread_draws=every)
    se = np.sqrt(0.01**2 + every.var(ddof=1))
    assert got.estimate == pytest.approx(0.2) and got.df == 1
    assert got.high - got.estimate == pytest.approx(student.ppf(0.975, 1) * se)
    assert got.low < 0, "one fit per method cannot give a verdict here"
    own = np.array([0.70, 0.71, 0.69, 0.70])
    got = chapter.null_difference(ours, own, 100, spread_draws=np.r_[own, 0.2])
    se = np.sqrt(0.01**2 + own.var(ddof=1) / 4)
    assert got.df == 3 and got.high - got.estimate == pytest.approx(student.ppf(0.975, 3) * se)
    assert got.low > 0
    assert chapter.null_difference(ours, every[:1], 100) is None
    assert chapter.MIN_NULL_FITS == 3
    # what would settle it: the fewest fits whose own-spread interval at n - 1 df clears 0
    n = chapter.fits_to_settle(0.01, 0.05, 0.2)
    for m, ok in ((n - 1, False), (n, True)):
        se = np.sqrt(0.01**2 + 0.05**2 / m)
        clears = (student.ppf(0.975, m - 1) + student.ppf(0.8, m - 1)) * se <= 0.2
        assert bool(clears) == ok or m < chapter.MIN_NULL_FITS
    assert chapter.fits_to_settle(0.5, 0.05, 0.2) is None


# ------------------------------------------- every seed of a setting (review finding A)
def test_crossfit_runs_of_one_run_each_is_crossfit_pair():
    occ, tokens = toy_runs(preference=0.5, seed=1)
    halves = chapter.half_scores(occ, tokens, n_splits=5, n_boot=60)
    one, pair = chapter.crossfit_runs(halves, ["a"], "b"), chapter.crossfit_pair(halves, "a", "b")
    for name in ("r", "ceiling", "same_text"):
        got, want = getattr(one, name), getattr(pair, name)
        assert (got.estimate, got.low, got.high) == (want.estimate, want.low, want.high)
    assert one.r.unit == "tokens x chunk splits"


@pytest.mark.parametrize("seed", [0, 1])
def test_crossfit_runs_averages_every_cross_pair_and_resamples_seeds(seed):
    """Point value: the mean of crossfit_pair's over the cross pairs (a naive loop); the
    interval's unit names the seeds."""
    occ, tokens = toy_runs(preference=0.4, seed=seed, names=("a0", "a1", "b0", "b1"))
    halves = chapter.half_scores(occ, tokens, n_splits=4, n_boot=80)
    got = chapter.crossfit_runs(halves, ["a0", "a1"], ["b0", "b1"])
    naive = np.mean(
        [chapter.crossfit_pair(halves, x, y).r.estimate for x in ("a0", "a1") for y in ("b0", "b1")]
    )
    assert got.r.estimate == pytest.approx(naive, abs=1e-12)
    assert got.r.unit == "seeds x tokens x chunk splits" and got.r.low < got.r.estimate < got.r.high
    stat = chapter.crossfit_statistic(
        halves, ["a0", "a1"], ["b0", "b1"], lambda x, y, k: float(np.mean(x - y)), "mean diff"
    )
    loop = np.mean(
        [
            chapter.crossfit_statistic(
                halves, x, y, lambda u, v, k: float(np.mean(u - v)), "d"
            ).estimate
            for x in ("a0", "a1")
            for y in ("b0", "b1")
        ]
    )
    assert stat.estimate == pytest.approx(loop, abs=1e-12)
    with pytest.raises(ValueError, match="no pair"):
        chapter.crossfit_runs(halves, ["a0"], ["a0"])


def test_null_crossfit_of_settings_is_the_pairwise_mean_draw_by_draw():
    occ, tokens = toy_runs(preference=0.3, seed=3, names=("a0", "a1", "b0"))
    nulls = chapter.crossfit_gap_null(occ, tokens, n_draws=8)
    got = chapter.null_crossfit(nulls, ["a0", "a1"], ["b0"])
    each = [chapter.null_crossfit(nulls, x, "b0").distribution.draws for x in ("a0", "a1")]
    assert np.allclose(np.sort(got.distribution.draws), np.sort(np.mean(each, axis=0)))


def test_gap_null_draws_have_their_own_seed_per_run():
    """Review finding H: two runs of a pair never draw with the same stream."""
    seeds = {chapter.null_seed(0, r, k, h) for r in range(3) for k in range(4) for h in (0, 1)}
    assert len(seeds) == 24
    occ, tokens = toy_runs(seed=6)
    same = tt.Occurrences(occ["a"].token, occ["a"].chunk, occ["a"].log_p, 60)
    nulls = chapter.crossfit_gap_null({"a": occ["a"], "a2": same}, tokens, n_draws=3)
    assert not np.allclose(nulls["a"], nulls["a2"], equal_nan=True)


def test_frequency_null_uses_every_point_split_both_ways():
    occ, tokens = toy_runs(preference=0.2, seed=7)
    halves = chapter.half_scores(occ, tokens, n_splits=3, n_boot=10)
    counts = np.bincount(occ["a"].token, minlength=60)[tokens]
    null = chapter.frequency_null(halves, "a", "b", counts, n_perm=30)
    assert null.shape == (30,)
    naive = []
    for i in range(3):
        both = []
        for h in (0, 1):
            u, v = halves.scores["a"][i, h], halves.scores["b"][i, 1 - h]
            ok = np.isfinite(u) & np.isfinite(v)
            strata = chapter.frequency_strata(counts[ok])
            both.append(chapter.permutation_null(u[ok], v[ok], 10, seed=i, strata=strata))
        naive.append(np.mean(both, axis=0))
    assert np.allclose(null, np.concatenate(naive))


def test_claim_groups_use_every_seed_of_a_setting_and_say_one_seed_only():
    specs = _specs(
        {"name": "g0", "tower": "gpt", "hidden": 8, "layers": 1, "heads": 1, "seed": 0},
        {"name": "g1", "tower": "gpt", "hidden": 8, "layers": 1, "heads": 1, "seed": 1},
        {"name": "gs", "tower": "gpt", "hidden": 4, "layers": 1, "heads": 1, "seed": 0},
        {"name": "e0", "tower": "elmo", "hidden": 8, "layers": 1, "seed": 0},
    )
    groups = chapter.claim_groups([("g0", "g1"), ("g0", "gs"), ("g0", "e0")], specs)
    assert groups[("g0", "g1")] == (["g0"], ["g1"])
    assert groups[("g0", "gs")] == (["g0", "g1"], ["gs"])
    assert groups[("g0", "e0")] == (["g0", "g1"], ["e0"])
    assert chapter.group_label(["e0"], {"e0": 0}) == "e0 (seed 0 only)"
    occ, tokens = toy_runs(preference=0.3, seed=8, names=("g0", "g1", "gs", "e0"))
    halves = chapter.half_scores(occ, tokens, n_splits=4, n_boot=60)
    nulls = chapter.crossfit_gap_null(occ, tokens, n_draws=10)
    counts = np.bincount(occ["g0"].token, minlength=60)[tokens]
    bars = chapter.crossfit_bars(groups, halves, nulls, counts, n_perm=40)
    claims = Claims("t", "p")
    rows = chapter.relation_claims_crossfit(claims, groups, specs, halves, bars, {})
    texts = [c.claim for c in claims.records]
    assert texts[4].startswith("g0/g1 and e0 (seed 0 only) (type)")
    assert texts[5].startswith("g0/g1 and e0 (seed 0 only)'s (type) shared pattern")
    assert "one seed only" in claims.records[4].note and rows.loc[2, "run A"] == "g0/g1"
    assert "one seed only" not in claims.records[0].note, "a seed pair is not one seed"
    assert claims.records[4].unit == "seeds x tokens x chunk splits"
