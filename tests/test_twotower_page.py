"""The two-tower page's evidence helpers (lmsim.papers.he2022_twotower.page) against naive computations."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm, spearmanr

from lmsim import twotower as tt
from lmsim.claims import Claims
from lmsim.papers import he2022_twotower as chapter


def occurrences(n_chunks=40, per_chunk=30, vocab=20, shift=(0.0, -0.1, 0.2), seed=0):
    rng = np.random.default_rng(seed)
    n = n_chunks * per_chunk
    token = rng.integers(0, vocab, n)
    chunk = np.repeat(np.arange(n_chunks), per_chunk)
    base = -rng.gamma(2.0, 1.0, n)
    log_p = np.stack([np.minimum(base + s + 0.1 * rng.normal(size=n), 0) for s in shift])
    return tt.Occurrences(token, chunk, log_p, vocab)


def pref(occ, mean="probability"):
    return SimpleNamespace(occurrences=occ, mean=mean)


def test_heads_vs_unigram_is_the_worst_heads_perplexity_ratio():
    prefs = {"a": pref(occurrences(seed=0)), "b": pref(occurrences(seed=1, shift=(0, -0.5, 0)))}
    log_uni = np.log(np.full(20, 1 / 20))
    est = chapter.heads_vs_unigram(prefs, log_uni, n_boot=200)
    naive = max(
        math.exp(np.mean(-p.occurrences.log_p[h]) - math.log(20))
        for p in prefs.values()
        for h in range(3)
    )
    assert est.estimate == pytest.approx(naive)
    assert est.low <= est.estimate <= est.high
    assert est.unit == "scored chunks" and est.n == 40


def test_token_correlation_matches_numpy_and_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=50), rng.normal(size=50)
    b[3] = np.nan
    tokens = np.arange(40)
    ok = np.isfinite(b[tokens])
    pear = chapter.token_correlation(a, b, tokens, n_boot=100)
    spear = chapter.token_correlation(a, b, tokens, method="spearman", n_boot=100)
    assert pear.estimate == pytest.approx(np.corrcoef(a[tokens][ok], b[tokens][ok])[0, 1])
    assert spear.estimate == pytest.approx(spearmanr(a[tokens][ok], b[tokens][ok]).statistic)
    assert pear.n == ok.sum()
    with pytest.raises(ValueError, match="method"):
        chapter.token_correlation(a, b, tokens, method="kendall")


def test_pair_relation_names_an_option_variant():
    base = tt.RunSpec("elmo-s0", tt.TowerConfig("elmo", hidden=8), 0)
    fwd = tt.RunSpec("elmo-fwd", tt.TowerConfig("elmo", hidden=8, elmo_forward_only=True), 0)
    wide = tt.RunSpec("elmo-wide", tt.TowerConfig("elmo", hidden=16), 0)
    seed = tt.RunSpec("elmo-s1", tt.TowerConfig("elmo", hidden=8), 1)
    gpt = tt.RunSpec("gpt", tt.TowerConfig("gpt", hidden=8), 0)
    assert chapter.pair_relation(base, fwd) == "variant"
    assert chapter.pair_relation(base, wide) == "size"
    assert chapter.pair_relation(base, seed) == "seed"
    assert chapter.pair_relation(base, gpt) == "type"


def _specs():
    cfg = tt.TowerConfig("gpt", hidden=8)
    return [tt.RunSpec("a", cfg, 0), tt.RunSpec("b", cfg, 1)]


def test_relation_claims_judge_testable_pairs_and_name_untestable_ones():
    rng = np.random.default_rng(0)
    shared = rng.normal(size=300)
    scores = {"a": shared + 0.3 * rng.normal(size=300), "b": shared + 0.3 * rng.normal(size=300)}
    tokens = np.arange(300)
    bars = {("a", "b"): {"bar": 0.2}}
    claims = Claims("t", "p")
    rows = chapter.relation_claims(
        claims, [("a", "b")], _specs(), scores, tokens, {"a": 0.9, "b": 0.9}, bars, 200
    )
    assert rows.loc[0, "verdict"] == "holds" and rows.loc[0, "relation"] == "seed"
    # Unrelated scores, reliable runs: the interval lies below the bar -> does not hold.
    # (A page records a claim once: each scenario gets its own Claims.)
    noise = {"a": rng.normal(size=300), "b": rng.normal(size=300)}
    rows = chapter.relation_claims(
        Claims("t", "p"), [("a", "b")], _specs(), noise, tokens, {"a": 0.9, "b": 0.9}, bars, 200
    )
    assert rows.loc[0, "verdict"] == "does not hold"
    # Unreliable runs: 0.94 * sqrt(0.04 * 0.04) = 0.04 < 0.2 -> not testable, never "does not hold".
    claims = Claims("t", "p")
    rows = chapter.relation_claims(
        claims, [("a", "b")], _specs(), noise, tokens, {"a": 0.04, "b": 0.04}, bars, 200
    )
    assert rows.loc[0, "verdict"] == "not testable here"
    assert "reliability 0.04" in claims.records[-1].note
    with pytest.raises(ValueError, match="claim_pairs"):
        chapter.relation_claims(
            claims, [("a", "zz")], _specs(), scores, tokens, {"a": 1, "b": 1}, bars
        )


def test_pair_null_bar_is_the_larger_p99():
    occ = {n: occurrences(seed=i) for i, n in enumerate("ab")}
    prefs = {n: pref(o) for n, o in occ.items()}
    scores = {n: o.scores() for n, o in occ.items()}
    nulls = chapter.run_nulls(prefs, n_draws=30)
    assert nulls["a"].shape == (30, 20)
    bar = chapter.pair_null_bar("a", "b", scores, nulls, np.arange(20), np.arange(20, 0, -1), 200)
    assert bar["bar"] == max(bar["gap null p99"], bar["frequency null p99"])


def test_table4_claim_lead_is_agreement_minus_frequency_agreement():
    rng = np.random.default_rng(1)
    shared = rng.normal(size=200)
    scores = {"a": shared + 0.2 * rng.normal(size=200), "b": shared + 0.2 * rng.normal(size=200)}
    tokens = np.arange(200)
    claims = Claims("t", "p")
    made = chapter.table4_claim(
        claims, ("a", "b"), scores, tokens, {"a": 0.9, "b": 0.9}, n_boot=200
    )
    rank = np.arange(1, 201)
    naive = spearmanr(scores["a"], scores["b"]).statistic - max(
        abs(spearmanr(scores["a"], rank).statistic), abs(spearmanr(scores["b"], rank).statistic)
    )
    assert made.estimate == pytest.approx(naive)
    assert made.verdict == "holds"


def test_pos_estimate_and_claims_follow_the_tag_shift():
    rng = np.random.default_rng(2)
    tokens = np.arange(200)
    tags = np.array(["VERB"] * 50 + ["PROPN"] * 50 + ["NOUN"] * 100)
    pos = pd.DataFrame({"upos": tags, "silver": False}, index=tokens)
    shift = np.where(tags == "VERB", 1.0, np.where(tags == "PROPN", -1.0, 0.0))
    scores = {r: shift + rng.normal(size=200) for r in "ab"}
    est = chapter.pos_estimate(scores, pos, tokens, "VERB", n_boot=200)
    naive = np.mean(
        [np.median(s[tags == "VERB"] / s.std()) - np.median(s / s.std()) for s in scores.values()]
    )
    assert est.estimate == pytest.approx(naive)
    assert est.n == 50
    claims = Claims("t", "p")
    made = chapter.pos_claims(claims, scores, pos, tokens, ["VERB", "PROPN", "ADV"], n_boot=200)
    assert made["VERB"].verdict == "holds" and made["PROPN"].verdict == "holds"
    assert made["ADV"].verdict == "not testable here"  # no ADV tokens
    none = chapter.pos_claims(Claims("t", "p"), {}, pos, tokens, ["VERB"])
    assert none["VERB"].verdict == "not testable here"


def test_gaussian_reference_matches_scipy():
    ref = chapter.gaussian_reference(32)
    assert ref["fraction of values in [-1, 1]"] == pytest.approx(norm.cdf(1) - norm.cdf(-1))
    assert ref["mean groups per word"] == pytest.approx(32 * 2 * norm.sf(2.5))


def test_ica_claims_tell_sparse_from_gaussian_sources():
    rng = np.random.default_rng(3)
    sparse = rng.laplace(size=(2000, 8)) / math.sqrt(2)  # unit variance, heavy tails
    gauss = rng.normal(size=(2000, 8))
    w = rng.integers(1, 5, 2000)
    made = chapter.ica_claims(Claims("t", "p"), sparse, w, chapter.PAPER_ICA_FACTS, n_boot=100)
    assert all(c.verdict == "holds" for c in made.values())
    made = chapter.ica_claims(Claims("t", "p"), gauss, w, chapter.PAPER_ICA_FACTS, n_boot=100)
    assert made["fraction of values in [-1, 1]"].verdict != "holds"


def test_pos_frequency_quantiles_share_of_null_medians_below():
    tokens = np.arange(100)
    tags = np.where(tokens % 5 == 0, "VERB", "NOUN")  # spread over every frequency stratum
    pos = pd.DataFrame({"upos": tags}, index=tokens)
    s = np.where(tags == "VERB", 5.0, 0.0) + np.linspace(0, 1, 100)
    rel = pd.DataFrame({"run": ["a"], "tag": ["VERB"], "median": [np.median(s[tags == "VERB"])]})
    q = chapter.pos_frequency_quantiles(
        rel, {"a": s}, pos, tokens, np.arange(100, 0, -1), n_draws=200
    )
    assert q[0] > 0.9
    # A tag whose tokens fill their frequency strata cannot beat frequency-matched sets.
    top = np.where(tokens < 20, "VERB", "NOUN")
    pos_top = pd.DataFrame({"upos": top}, index=tokens)
    s_top = np.where(top == "VERB", 5.0, 0.0)
    rel["median"] = np.median(s_top[:20])
    counts = np.arange(100, 0, -1)
    assert chapter.pos_frequency_quantiles(rel, {"a": s_top}, pos_top, tokens, counts, 50)[0] == 0


def test_index_page_lists_every_difference_from_the_authors_code():
    from pathlib import Path

    index = (Path(__file__).parents[1] / "book" / "he2022_twotower" / "index.md").read_text()
    rows = [line for line in index.splitlines() if line.startswith("| ")]
    for _, diff in chapter.AUTHORS_CODE_DIFFERENCES.iterrows():
        cells = [str(v).replace("|", "\\|") for v in diff]
        assert any(all(c in row for c in cells) for row in rows), diff["aspect"]
