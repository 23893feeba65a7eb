"""The two-tower page's evidence: estimates with intervals and the claims they decide.

The page (``notebooks/he2022_twotower/01_preference.ipynb``) stays thin: each function here
turns measured scores into an :class:`lmsim.stats.Estimate` and registers the paper's claim
with its rule in a :class:`lmsim.claims.Claims`. A relation between two runs is "not
testable here" when the runs' split-half reliabilities leave no room to see it: even at
the paper's lowest value for that relation, the attenuated correlation
``r_paper · √(rel_a · rel_b)`` would not clear the null.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lmsim import stats
from lmsim.papers.he2022_twotower.compare import permutation_null, relation
from lmsim.papers.he2022_twotower.nulls import (
    frequency_matched_null,
    frequency_strata,
    global_gap_null,
    null_correlations,
)
from lmsim.papers.he2022_twotower.paper import PAPER_POS_CLAIMS, PAPER_RELATIONS
from lmsim.papers.he2022_twotower.reliability import correlation_ceiling
from lmsim.twotower.config import RunSpec
from lmsim.twotower.ica import ica_summary

#: The paper's Table 4: two models' score ranks agree at 0.56-0.93, with the frequency
#: rank at 0.16-0.22 (|Spearman|).
PAPER_TABLE4_RANGES = {"between models": (0.56, 0.93), "with frequency rank": (0.16, 0.22)}


def _finite(*arrays: np.ndarray) -> list[np.ndarray]:
    ok = np.all([np.isfinite(a) for a in arrays], axis=0)
    return [np.asarray(a)[ok] for a in arrays]


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = _finite(a, b)
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    a, b = _finite(a, b)
    return _pearson(pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy())


def pair_relation(a: RunSpec, b: RunSpec) -> str:
    """:func:`~lmsim.papers.he2022_twotower.compare.relation`, with ``"variant"`` for two runs of one
    tower type and size that differ only in an option (e.g. forward-only ELMo)."""
    rel = relation(a, b)
    if rel == "size" and a.config.key() != b.config.key():
        sizes = ("hidden", "layers", "heads", "intermediate", "embed", "lstm_proj")
        if all(getattr(a.config, k, None) == getattr(b.config, k, None) for k in sizes):
            return "variant"
    return rel


def heads_vs_unigram(prefs: Mapping, log_unigram, n_boot: int = 1000, seed: int = 0):
    """The worst head's perplexity relative to the unigram's, over every run and head,
    with an interval over the scored chunks (resampled jointly across runs).

    Parameters
    ----------
    prefs : dict of run name to Preference
        Scored with ``record=True`` on the same chunks.
    log_unigram : array of shape (vocab,)
    n_boot, seed : int

    Returns
    -------
    Estimate
        ``max over runs and heads of exp(mean(-log p) - mean(-log p_unigram))``; a value
        below 1 means every head predicts better than word frequencies alone.
    """
    log_uni = np.asarray(log_unigram, dtype=np.float64)
    n_chunks = 1 + max(int(p.occurrences.chunk.max()) for p in prefs.values())
    gains, counts = [], []
    for p in prefs.values():
        occ = p.occurrences
        for head in range(3):
            diff = occ.log_p[head] - log_uni[occ.token]
            gains.append(np.bincount(occ.chunk, weights=diff, minlength=n_chunks))
        counts.append(np.bincount(occ.chunk, minlength=n_chunks).astype(np.float64))
    gains = np.stack(gains, axis=1)  # (chunks, runs * 3)
    counts = np.repeat(np.stack(counts, axis=1), 3, axis=1)

    def worst(g, n):
        return float(np.exp(-(g.sum(0) / n.sum(0))).max())

    return stats.bootstrap(worst, gains, counts, unit="scored chunks", n_boot=n_boot, seed=seed)


def token_correlation(a, b, tokens, method: str = "pearson", n_boot: int = 1000, seed: int = 0):
    """Correlation of two runs' scores over ``tokens`` with a token-bootstrap interval.

    Parameters
    ----------
    a, b : array of shape (vocab,)
    tokens : ndarray of int
    method : {"pearson", "spearman"}
    n_boot, seed : int

    Returns
    -------
    Estimate over tokens (NaN scores left out)
    """
    if method not in ("pearson", "spearman"):
        raise ValueError(f"`method` must be 'pearson' or 'spearman', got {method!r}")
    x, y = _finite(np.asarray(a)[tokens], np.asarray(b)[tokens])
    stat = _pearson if method == "pearson" else _spearman
    return stats.bootstrap(stat, x, y, unit="tokens", n_boot=n_boot, seed=seed)


def run_nulls(prefs: Mapping, n_draws: int = 100, seed: int = 0) -> dict[str, np.ndarray]:
    """:func:`~lmsim.papers.he2022_twotower.nulls.global_gap_null` draws of every run (its own mean)."""
    return {
        n: global_gap_null(p.occurrences, n_draws=n_draws, mean=p.mean, seed=seed)
        for n, p in prefs.items()
    }


def pair_null_bar(
    a: str, b: str, scores: Mapping, gap_nulls: Mapping, tokens, counts, n_perm: int, seed: int = 0
) -> dict:
    """The bar a real shared pattern between runs ``a`` and ``b`` must clear.

    Returns
    -------
    dict
        ``gap null p99`` (the 99th percentile of correlations between the two runs' global-
        gap null draws), ``frequency null p99`` (of correlations under permutations within
        frequency strata) and ``bar``, the larger.
    """
    tokens = np.asarray(tokens)
    gap = null_correlations(gap_nulls[a], gap_nulls[b], tokens)
    x, y = np.asarray(scores[a])[tokens], np.asarray(scores[b])[tokens]
    ok = np.isfinite(x) & np.isfinite(y)
    strata = frequency_strata(np.asarray(counts, dtype=np.float64)[tokens][ok])
    perm = permutation_null(x[ok], y[ok], n_perm=n_perm, seed=seed, strata=strata)
    p99 = {
        "gap null p99": float(np.nanpercentile(gap, 99)),
        "frequency null p99": float(np.percentile(perm, 99)),
    }
    return {**p99, "bar": max(p99.values())}


def _testable(paper_low: float, ceiling: float, bar: float) -> bool:
    return bool(np.isfinite(ceiling) and paper_low * ceiling > bar)


def _judge_or_untestable(claims, claim, est, rule_bar, ceiling, paper_low, paper, note, rel_note):
    if est.low > rule_bar or _testable(paper_low, ceiling, rule_bar):
        return claims.report(claim, estimate=est, rule=f"> {rule_bar:.3f}", paper=paper, note=note)
    why = (
        f"{rel_note}: correlation ceiling {ceiling:.2f}, so even the paper's lowest value "
        f"{paper_low:.2f} would show as {paper_low * ceiling:.2f}, not above the null's "
        f"{rule_bar:.3f}; ours {est.format()}"
    )
    return claims.not_testable(claim, note=why, paper=paper, measured=est)


def relation_claims(
    claims,
    pairs: Sequence[Sequence[str]],
    specs: Sequence[RunSpec],
    scores: Mapping,
    tokens,
    reliability: Mapping[str, float],
    bars: Mapping,
    n_boot: int = 1000,
) -> pd.DataFrame:
    """Register, per pair of runs, the paper's Table 2 claim that their preference patterns
    are shared: the Pearson correlation over ``tokens`` must clear the pair's null bar.

    Parameters
    ----------
    claims : Claims
    pairs : sequence of (run A, run B)
    specs : sequence of RunSpec
    scores : dict of run name to ndarray of shape (vocab,)
    tokens : ndarray of int
    reliability : dict of run name to split-half reliability
    bars : dict of (A, B) to :func:`pair_null_bar`'s dict
    n_boot : int

    Returns
    -------
    DataFrame, one row per pair: relation, r with interval, ceiling, disattenuated r,
    bar and verdict.
    """
    by_name = {s.name: s for s in specs}
    unknown = sorted({n for pair in pairs for n in pair} - set(by_name))
    if unknown:
        raise ValueError(
            f"`pairs` name runs {unknown} that are not in `runs` ({sorted(by_name)}); "
            "list pairs of trained runs (the notebook's `claim_pairs`)"
        )
    rows = []
    for a, b in pairs:
        rel = pair_relation(by_name[a], by_name[b])
        low, high = PAPER_RELATIONS.get(rel, PAPER_RELATIONS["type"])
        est = token_correlation(scores[a], scores[b], tokens, n_boot=n_boot)
        ceiling = correlation_ceiling(reliability[a], reliability[b])
        bar = bars[(a, b)]["bar"]
        paper = f"{low:.2f}" if low == high else f"{low:.2f} to {high:.2f}"
        note = (
            f"Pearson over {est.n} tokens; bar: the larger 99th percentile of the global-gap "
            f"and frequency-stratified nulls; ceiling √(rel·rel) = {ceiling:.2f}, "
            f"r / ceiling = {est.estimate / ceiling:.2f}"
        )
        made = _judge_or_untestable(
            claims,
            f"{a} and {b} ({rel}) share a token preference pattern beyond the null (Table 2)",
            est, bar, ceiling, low, f"{paper} (Table 2, {rel})", note,
            f"split-half reliability {reliability[a]:.2f} and {reliability[b]:.2f}",
        )  # fmt: skip
        rows.append(
            {
                "run A": a, "run B": b, "relation": rel, "r": est.estimate, "low": est.low,
                "high": est.high, "ceiling": ceiling, "r / ceiling": est.estimate / ceiling,
                "null bar": bar, "paper": paper, "verdict": made.verdict,
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def table4_claim(claims, pair: Sequence[str], scores: Mapping, tokens, reliability, n_boot=1000):
    """Register Table 4's claim for ``pair``: the two runs' score ranks agree more than
    either agrees with the frequency rank (Spearman; the estimate is the difference)."""
    a, b = pair
    x, y = np.asarray(scores[a])[tokens], np.asarray(scores[b])[tokens]
    rank = np.arange(1, len(tokens) + 1, dtype=np.float64)
    x, y, rank = _finite(x, y, rank)

    def lead(x, y, rank):
        return _spearman(x, y) - max(abs(_spearman(x, rank)), abs(_spearman(y, rank)))

    est = stats.bootstrap(lead, x, y, rank, unit="tokens", n_boot=n_boot)
    between, freq = (
        PAPER_TABLE4_RANGES["between models"],
        PAPER_TABLE4_RANGES["with frequency rank"],
    )
    ceiling = correlation_ceiling(reliability[a], reliability[b])
    paper = f"{between[0]}-{between[1]} between models vs {freq[0]}-{freq[1]} with frequency"
    claim = f"{a} and {b}'s score ranks agree more than either with the frequency rank (Table 4)"
    if est.low > 0 or _testable(between[0], ceiling, freq[1]):
        note = f"Spearman(A, B) − max |Spearman(run, frequency rank)|; ceiling {ceiling:.2f}"
        return claims.report(claim, estimate=est, rule="> 0", paper=paper, note=note)
    note = (
        f"split-half reliability {reliability[a]:.2f} and {reliability[b]:.2f}: ceiling "
        f"{ceiling:.2f}, the paper's lowest agreement {between[0]} would show as "
        f"{between[0] * ceiling:.2f}, not above its frequency level {freq[1]}"
    )
    return claims.not_testable(claim, note=note, paper=paper, measured=est)


def pos_estimate(
    scores, pos, tokens, tag, reference="all", n_boot=1000, level=0.95, seed=0, weights=None
):
    """A tag's median score minus the reference's (all tagged tokens or PROPN), each run's
    scores in units of their own standard deviation, averaged over runs (weighted by
    ``weights``, one per run of ``scores``, when given: e.g. equal weight per tower type).

    The interval resamples the tag's tokens and the reference's tokens, each set to its own
    size (the same resample for every run; percentile bootstrap). None when the tag or the
    reference has fewer than 2 tokens.

    Returns
    -------
    Estimate over tokens, or None
    """
    tags = pos.reindex(tokens)["upos"].to_numpy()
    mat = np.stack([np.asarray(s)[tokens] for s in scores.values()], axis=1)
    keep = np.isfinite(mat).all(1) & pd.notna(tags)
    mat, tags = mat[keep] / np.std(mat[keep], axis=0), tags[keep]
    t_idx = np.flatnonzero(tags == tag)
    r_idx = np.arange(len(tags)) if reference == "all" else np.flatnonzero(tags == reference)
    if len(t_idx) < 2 or len(r_idx) < 2:
        return None

    def diff(t, r):
        return float(np.average(np.median(mat[t], 0) - np.median(mat[r], 0), weights=weights))

    rng = np.random.default_rng(seed)
    draws = np.array(
        [diff(rng.choice(t_idx, len(t_idx)), rng.choice(r_idx, len(r_idx))) for _ in range(n_boot)]
    )
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    method = f"percentile bootstrap ({n_boot} resamples of the tag's and the reference's tokens)"
    return stats.Estimate(
        diff(t_idx, r_idx), float(low), float(high), level, "tokens", int(len(t_idx)), method,
        sd=float(draws.std(ddof=1)),
    )  # fmt: skip


def pos_claims(claims, scores, pos, tokens, tags, reference="all", n_boot=1000, note=""):
    """Register Fig. 4's claims: each tag with a paper claim leans to its tower relative to
    ``reference`` (runs pooled by :func:`pos_estimate`; a run whose primary tower is a
    coin flip should be left out of ``scores``)."""
    made = {}
    for tag in tags:
        side = PAPER_POS_CLAIMS.get(tag)
        if side is None or tag == reference:
            continue
        claim = f"{tag} tokens lean to the {side} tower, relative to {reference} tokens (Fig. 4)"
        if not scores:
            made[tag] = claims.not_testable(
                claim, "no run's primary tower is settled (gap interval straddles 0)"
            )
            continue
        est = pos_estimate(scores, pos, tokens, tag, reference, n_boot)
        if est is None:
            made[tag] = claims.not_testable(claim, f"fewer than 2 {tag} or {reference} tokens")
            continue
        rule = "> 0" if side == "primary" else "< 0"
        note_all = f"median difference in score sd, mean over {len(scores)} runs; {note}"
        made[tag] = claims.report(
            claim, estimate=est, rule=rule, paper=f"{side} (Fig. 4)", note=note_all
        )
    return made


def gaussian_reference(d: int, threshold: float = 2.5) -> dict:
    """What unit-variance Gaussian sources give for the paper's ICA facts (no sparsity)."""
    within = math.erf(1 / math.sqrt(2))
    beyond = 1 - math.erf(threshold / math.sqrt(2))
    return {"fraction of values in [-1, 1]": within, "mean groups per word": d * beyond}


def ica_claims(claims, Y, weights, paper_facts: Mapping, n_boot: int = 200, note: str = ""):
    """Register the paper's ICA facts (Sec. 5.3): sources sparser than Gaussian ones (more
    values in [-1, 1]) and words in more groups (|y| > 2.5) than Gaussian sources give.
    Bootstrap over the distinct tokens (their occurrence weights kept)."""
    Y = np.asarray(Y)
    w = np.asarray(weights, dtype=np.float64)
    gauss = gaussian_reference(Y.shape[1])
    made = {}
    for key, side in (("fraction of values in [-1, 1]", ">"), ("mean groups per word", ">")):

        def fact(y, w, key=key):
            return ica_summary(y, weights=w / w.sum())[key]

        est = stats.bootstrap(fact, Y, w, unit="tokens", n_boot=n_boot)
        made[key] = claims.report(
            f"ICA sources are sparse: {key} above unit-variance Gaussian sources' (Sec. 5.3)",
            estimate=est,
            rule=f"{side} {gauss[key]:.3f}",
            paper=f"{paper_facts[key]} (Sec. 5.3, 128 components)",
            note=f"occurrence-weighted; Gaussian reference at d = {Y.shape[1]}; {note}",
        )
    return made


def annotate_pairs(side: pd.DataFrame, specs, prefs: Mapping, tokens, reliability) -> pd.DataFrame:
    """:func:`~lmsim.papers.he2022_twotower.compare.pair_table`'s rows with :func:`pair_relation`, the
    pair's correlation ceiling and its Pearson r under the authors' mean of log-probabilities.
    """
    by_name = {s.name: s for s in specs}
    out = side.copy()
    if out.empty:
        return out
    pairs = list(zip(out["run A"], out["run B"]))
    out["relation"] = [pair_relation(by_name[a], by_name[b]) for a, b in pairs]
    out["ceiling"] = [correlation_ceiling(reliability[a], reliability[b]) for a, b in pairs]
    logs = {n: p.occurrences.scores("log", orient=True) for n, p in prefs.items()}
    out["r (log mean)"] = [_pearson(logs[a][tokens], logs[b][tokens]) for a, b in pairs]
    return out


def pos_frequency_quantiles(rel_pos: pd.DataFrame, scores, pos, tokens, counts, n_draws=1000):
    """Where each (run, tag) median of :func:`~lmsim.papers.he2022_twotower.pos.relative_pos_test` falls
    among the medians of frequency-matched random token sets (the share of draws below)."""
    tags = pos.reindex(tokens)["upos"].to_numpy()
    strata = frequency_strata(np.asarray(counts, dtype=np.float64)[tokens])
    out = []
    for run, tag, median in zip(rel_pos["run"], rel_pos["tag"], rel_pos["median"]):
        s = np.asarray(scores[run])[tokens]
        ok = np.isfinite(s)
        if not np.isfinite(median) or not (ok & (tags == tag)).any():
            out.append(math.nan)
            continue
        null = frequency_matched_null(s[ok], strata[ok], (tags == tag)[ok], n_draws=n_draws)
        out.append(float(np.mean(null < median)))
    return np.array(out)
