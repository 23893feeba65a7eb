"""Cross-fitted comparisons of runs scored on one text (Table 2, Table 4).

Every run of a page scores the same chunks, so two runs' per-token scores share the text's
sampling noise: a token's score depends on which contexts it happened to occur in, for
every run alike (a toy with no token preference at all gives a cross-run r of 0.51 on
shared text). Here the scored chunks are split at random into two disjoint halves, the
*same* split for every run; run A's scores on one half are compared with run B's on the
other (both ways, averaged), and each run's split-half reliability comes from the same
halves, so ``√(rel_A · rel_B)`` is a real ceiling of the cross-fitted r (both half-length:
no Spearman-Brown step). This is :func:`lmsim.stats.cross_fitted_correlation` for
scores that are ratios of means over a token's occurrences (Eq. 4), not item means.

References
----------
Spearman (1904), the attenuation ceiling; ``EVIDENCE.md`` §1 (cross-fitting).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lmsim import stats
from lmsim.papers.he2022_twotower.nulls import global_gap_null
from lmsim.twotower.scores import Occurrences

_NAMES = ("r", "reliability_a", "reliability_b", "ceiling", "same_text")


@dataclass
class Halves:
    """Each run's scores over ``tokens`` on the two halves of random splits of the chunks.

    Attributes
    ----------
    scores : dict of run name to ndarray of shape (n_draws, 2, n_tokens)
        NaN where a token has no occurrence in that half.
    n_splits : int
        The first ``n_splits`` draws give the point estimates; the rest the intervals.
    n_chunks : int
    """

    scores: dict[str, np.ndarray]
    n_splits: int
    n_chunks: int


def chunk_splits(n_chunks: int, n_draws: int, seed: int = 0) -> np.ndarray:
    """``n_draws`` random halves of ``n_chunks`` chunks: bool array (n_draws, n_chunks),
    True for the first half (``n_chunks // 2`` chunks)."""
    if n_chunks < 2:
        raise ValueError(f"need at least 2 chunks to split, got {n_chunks}")
    rng = np.random.default_rng(seed)
    out = np.zeros((n_draws, n_chunks), dtype=bool)
    for k in range(n_draws):
        out[k, rng.permutation(n_chunks)[: n_chunks // 2]] = True
    return out


def half_scores(
    occurrences: Mapping[str, Occurrences],
    tokens,
    mean: Mapping[str, str] | str = "probability",
    n_splits: int = 20,
    n_boot: int = 1000,
    seed: int = 0,
) -> Halves:
    """Score every run on both halves of the same ``n_splits + n_boot`` random chunk splits.

    Parameters
    ----------
    occurrences : dict of run name to Occurrences
        Scored on the same chunks (chunk indices refer to the same text in every run).
    tokens : ndarray of int
    mean : str or dict of run name to str
        ``"probability"`` (Eq. 4) or ``"log"`` (the authors' code), per run.
    n_splits, n_boot, seed : int

    Returns
    -------
    Halves
    """
    tokens = np.asarray(tokens)
    n_chunks = 1 + max(int(o.chunk.max()) for o in occurrences.values())
    splits = chunk_splits(n_chunks, n_splits + n_boot, seed)
    out = {}
    for name, occ in occurrences.items():
        how = mean if isinstance(mean, str) else mean[name]
        arr = np.empty((len(splits), 2, len(tokens)))
        for k, first in enumerate(splits):
            in_first = first[occ.chunk]
            arr[k, 0] = occ.subset(in_first).scores(how)[tokens]
            arr[k, 1] = occ.subset(~in_first).scores(how)[tokens]
        out[name] = arr
    return Halves(out, n_splits, n_chunks)


def _corr(x: np.ndarray, y: np.ndarray, method: str) -> float:
    if method == "spearman":
        x, y = _rank(x), _rank(y)
    if x.std() == 0 or y.std() == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def _rank(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=np.float64)
    return ranks


def _five(a: np.ndarray, b: np.ndarray, method: str) -> np.ndarray:
    """r (cross-fitted), rel_a, rel_b, ceiling, same-text r from one split's halves."""
    a1, a2, b1, b2 = a[0], a[1], b[0], b[1]
    ok = np.isfinite(a1) & np.isfinite(a2) & np.isfinite(b1) & np.isfinite(b2)
    if ok.sum() < 3:
        return np.full(5, math.nan)
    a1, a2, b1, b2 = a1[ok], a2[ok], b1[ok], b2[ok]
    rel_a, rel_b = _corr(a1, a2, method), _corr(b1, b2, method)
    return np.array(
        [
            (_corr(a1, b2, method) + _corr(a2, b1, method)) / 2,
            rel_a,
            rel_b,
            math.sqrt(max(rel_a, 0.0) * max(rel_b, 0.0)),
            (_corr(a1, b1, method) + _corr(a2, b2, method)) / 2,
        ]
    )


def _estimates(
    point, draws, n_tokens, what, level=0.95, unit="tokens x chunk splits"
) -> dict[str, stats.Estimate]:
    out = {}
    tail = (1 - level) / 2
    for j, name in enumerate(_NAMES):
        column = draws[:, j][np.isfinite(draws[:, j])]
        if len(column) < 2:
            raise ValueError(f"cross-fitting draws of {name} are not finite; score more text")
        low, high = np.quantile(column, [tail, 1 - tail])
        out[name] = stats.Estimate(
            float(point[j]), float(low), float(high), level, unit, n_tokens,
            f"cross-fitted {what} ({name.replace('_', ' ')}; mean of the point splits, "
            f"interval over {len(column)} {unit} resamples)",
            sd=float(column.std(ddof=1)), draws=column,
        )  # fmt: skip
    return out


def crossfit_pair(halves: Halves, a: str, b: str, method: str = "pearson", seed: int = 0):
    """Cross-fitted correlation of runs ``a`` and ``b`` with the ceiling from the same halves.

    The point estimates average the first ``halves.n_splits`` splits; each interval draw
    takes one of the other splits and resamples the tokens with replacement.

    Returns
    -------
    lmsim.stats.CrossFit
        ``r``, ``reliability_a``, ``reliability_b``, ``ceiling`` and ``same_text`` (A and B
        on the same half: the design the review found inflated), over tokens.
    """
    if method not in ("pearson", "spearman"):
        raise ValueError(f"`method` must be 'pearson' or 'spearman', got {method!r}")
    A, B = halves.scores[a], halves.scores[b]
    k = halves.n_splits
    point = np.nanmean([_five(A[i], B[i], method) for i in range(k)], axis=0)
    rng = np.random.default_rng(seed)
    n_tokens = A.shape[2]
    draws = []
    for i in range(k, len(A)):
        pick = rng.integers(0, n_tokens, n_tokens)
        draws.append(_five(A[i][:, pick], B[i][:, pick], method))
    return stats.CrossFit(**_estimates(point, np.array(draws), n_tokens, method))


def _names(runs) -> list[str]:
    return [runs] if isinstance(runs, str) else list(runs)


def _cross(runs_a: Sequence[str], runs_b: Sequence[str]) -> list[tuple[str, str]]:
    return [(x, y) for x in runs_a for y in runs_b if x != y]


def _resample(runs: list[str], rng) -> list[str]:
    # one run: nothing to resample (and no random draw, so one pair's interval is
    # crossfit_pair's exactly)
    return runs if len(runs) == 1 else [runs[i] for i in rng.integers(0, len(runs), len(runs))]


def _hierarchical_draws(halves: Halves, runs_a: list[str], runs_b: list[str], seed: int):
    """The interval draws shared by :func:`crossfit_runs` and :func:`crossfit_statistic`:
    for each resample split ``i`` (after the ``n_splits`` point splits), the runs of each
    side resampled with replacement (the seeds), then the tokens. Yields ``(i, cross,
    pick)``: the split, the resampled cross pairs (maybe none) and the token indices."""
    n_tokens = halves.scores[runs_a[0]].shape[2]
    rng = np.random.default_rng(seed)
    for i in range(halves.n_splits, len(halves.scores[runs_a[0]])):
        ra, rb = _resample(runs_a, rng), _resample(runs_b, rng)
        pick = rng.integers(0, n_tokens, n_tokens)
        yield i, _cross(ra, rb), pick


def crossfit_runs(
    halves: Halves, runs_a, runs_b, method: str = "pearson", seed: int = 0
) -> stats.CrossFit:
    """Cross-fitted correlation between two settings, each with every seed it has.

    The point estimate is the mean over every cross pair ``(x, y)``, ``x`` in ``runs_a``,
    ``y`` in ``runs_b`` (``x != y``), of :func:`crossfit_pair`'s point values (r, both
    reliabilities, the ceiling, the same-text r). Each interval draw is hierarchical: it
    resamples the runs of each side with replacement (the seeds), then one chunk split
    and the tokens (the same for every pair), and averages over the resampled cross pairs.
    With one run on each side this is :func:`crossfit_pair`.

    Parameters
    ----------
    halves : Halves
    runs_a, runs_b : str or sequence of str
        The runs of each setting (e.g. ``["gpt-s0", "gpt-s1"]`` and ``["bert-s0",
        "bert-s1"]``).
    method : {"pearson", "spearman"}
    seed : int

    Returns
    -------
    lmsim.stats.CrossFit
        Its unit is "seeds x tokens x chunk splits" when a side has more than one run.
    """
    if method not in ("pearson", "spearman"):
        raise ValueError(f"`method` must be 'pearson' or 'spearman', got {method!r}")
    runs_a, runs_b = _names(runs_a), _names(runs_b)
    pairs = _cross(runs_a, runs_b)
    if not pairs:
        raise ValueError(f"`runs_a` {runs_a} and `runs_b` {runs_b} form no pair of two runs")
    S = halves.scores
    k, n_tokens = halves.n_splits, S[runs_a[0]].shape[2]
    point = np.nanmean(
        [_five(S[x][i], S[y][i], method) for x, y in pairs for i in range(k)], axis=0
    )
    draws = []
    for i, cross, pick in _hierarchical_draws(halves, runs_a, runs_b, seed):
        vals = [_five(S[x][i][:, pick], S[y][i][:, pick], method) for x, y in cross]
        draws.append(np.nanmean(vals, axis=0) if vals else np.full(5, math.nan))
    several = len(runs_a) > 1 or len(runs_b) > 1
    unit = "seeds x tokens x chunk splits" if several else "tokens x chunk splits"
    what = f"{method}, mean over {len(pairs)} cross pairs" if len(pairs) > 1 else method
    return stats.CrossFit(**_estimates(point, np.array(draws), n_tokens, what, unit=unit))


def crossfit_statistic(
    halves: Halves, a: str, b: str, statistic: Callable, what: str, seed: int = 0
) -> stats.Estimate:
    """Any statistic of (A on one half, B on the other), both ways averaged, with the same
    split-and-token-resample interval as :func:`crossfit_pair`.

    ``statistic(x, y) -> float`` on two finite score vectors over the same tokens (in the
    tokens' frequency order, so a statistic may use the position as the frequency rank).
    ``a`` and ``b`` may each be several runs (the seeds of one setting): the statistic is
    then averaged over every cross pair, and each interval draw resamples the runs of each
    side first, as :func:`crossfit_runs` does.
    """
    runs_a, runs_b = _names(a), _names(b)
    pairs = _cross(runs_a, runs_b)
    if not pairs:
        raise ValueError(f"`a` {runs_a} and `b` {runs_b} form no pair of two runs")
    S = halves.scores
    k, n_tokens = halves.n_splits, S[runs_a[0]].shape[2]

    def both_ways(A_i, B_i, pick):
        vals = []
        for x, y in ((A_i[0], B_i[1]), (A_i[1], B_i[0])):
            x, y = x[pick], y[pick]
            ok = np.isfinite(x) & np.isfinite(y)
            vals.append(statistic(x[ok], y[ok], pick[ok]))
        return float(np.mean(vals))

    def over(cross, i, pick):
        return float(np.mean([both_ways(S[x][i], S[y][i], pick) for x, y in cross]))

    every = np.arange(n_tokens)
    point = float(np.nanmean([over(pairs, i, every) for i in range(k)]))
    draws = np.array(
        [
            over(cross, i, pick) if cross else math.nan
            for i, cross, pick in _hierarchical_draws(halves, runs_a, runs_b, seed)
        ]
    )
    draws = draws[np.isfinite(draws)]
    low, high = np.quantile(draws, [0.025, 0.975])
    several = len(runs_a) > 1 or len(runs_b) > 1
    unit = "seeds x tokens x chunk splits" if several else "tokens x chunk splits"
    return stats.Estimate(
        point, float(low), float(high), 0.95, unit, n_tokens,
        f"cross-fitted {what} (mean of {k} splits" + (
            f" and {len(pairs)} cross pairs" if len(pairs) > 1 else "") +
        f"; interval over {len(draws)} {unit} resamples)",
        sd=float(draws.std(ddof=1)), draws=draws,
    )  # fmt: skip


def reliability_by_frequency(halves: Halves, bands: int = 4) -> dict[str, list[float]]:
    """Each run's half-length split-half reliability in ``bands`` equal bands of the tokens
    by frequency rank (the tokens in frequency order), mean over the point splits.

    Returns
    -------
    dict of run name to list of float (one per band, most frequent first)
    """
    k = halves.n_splits
    out = {}
    for name, arr in halves.scores.items():
        edges = np.linspace(0, arr.shape[2], bands + 1).astype(int)
        row = []
        for lo, hi in zip(edges[:-1], edges[1:]):
            vals = []
            for i in range(k):
                x, y = arr[i, 0, lo:hi], arr[i, 1, lo:hi]
                ok = np.isfinite(x) & np.isfinite(y)
                if ok.sum() >= 3:
                    vals.append(_corr(x[ok], y[ok], "pearson"))
            row.append(float(np.nanmean(vals)) if vals else math.nan)
        out[name] = row
    return out


def crossfit_gap_null(
    occurrences: Mapping[str, Occurrences],
    tokens,
    mean: Mapping[str, str] | str = "probability",
    n_draws: int = 100,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Global-gap null draws of every run on both halves of ``n_draws`` chunk splits.

    Draw ``k`` splits the chunks (the same split for every run) and draws each half's
    scores under :func:`~lmsim.papers.he2022_twotower.nulls.global_gap_null` (the heads'
    global gap kept, token identity cut), so :func:`null_crossfit` correlates two runs'
    null scores across halves exactly as :func:`crossfit_pair` correlates their scores.

    Returns
    -------
    dict of run name to ndarray of shape (n_draws, 2, n_tokens)
    """
    tokens = np.asarray(tokens)
    n_chunks = 1 + max(int(o.chunk.max()) for o in occurrences.values())
    splits = chunk_splits(n_chunks, n_draws, seed + 1)
    out = {}
    for r, (name, occ) in enumerate(occurrences.items()):
        how = mean if isinstance(mean, str) else mean[name]
        arr = np.empty((n_draws, 2, len(tokens)))
        for k, first in enumerate(splits):
            in_first = first[occ.chunk]
            for h, keep in enumerate((in_first, ~in_first)):
                # every run, draw and half its own stream: two runs of a pair never share
                # the positions their residuals are drawn from
                stream = null_seed(seed, r, k, h)
                arr[k, h] = global_gap_null(occ.subset(keep), 1, mean=how, seed=stream)[0][tokens]
        out[name] = arr
    return out


def null_seed(seed: int, run: int, draw: int, half: int) -> int:
    """The seed of one global-gap null draw: distinct for every (run, draw, half), so the
    two runs of a pair draw independently (before issue 43's review every run used the
    draw's index, so a pair's null draws shared their random positions)."""
    return int(np.random.SeedSequence([seed, run, draw, half]).generate_state(1)[0])


def null_crossfit(nulls: Mapping[str, np.ndarray], a, b, q: float = 0.99):
    """The cross-fitted r of two runs' global-gap null draws, as a :class:`lmsim.stats.Null`
    (its mean and its ``q`` quantile, the bar).

    ``a`` and ``b`` may each be several runs: each draw's r is then the mean over every
    cross pair (the null of :func:`crossfit_runs`' statistic)."""
    pairs = _cross(_names(a), _names(b))
    if not pairs:
        raise ValueError(f"`a` {a} and `b` {b} form no pair of two runs")
    n_draws = len(nulls[pairs[0][0]])
    r = np.array(
        [
            np.nanmean([_five(nulls[x][k], nulls[y][k], "pearson")[0] for x, y in pairs])
            for k in range(n_draws)
        ]
    )
    r = r[np.isfinite(r)]
    low, high = np.quantile(r, [0.025, 0.975])
    dist = stats.Estimate(
        float(r.mean()), float(low), float(high), 0.95, "null draws", len(r),
        "global-gap null through the same cross-fitted pipeline (heads' gap kept, token "
        f"identity cut; {len(r)} draws, each its own chunk split)",
        sd=float(r.std(ddof=1)), draws=r,
    )  # fmt: skip
    return stats.Null(dist, float(q), float(np.quantile(r, q)))
