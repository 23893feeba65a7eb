"""How much a run's preference scores can be trusted: split-half reliability (the ceiling of
any correlation between runs), an interval on the primary tower's lead before it orients
the scores, each head's perplexity against the unigram's, and a small percentile bootstrap.

Everything here reads a run's :class:`~lmsim.twotower.scores.Occurrences` (every scored
position, ``preference_scores(record=True)``), so no model is run again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lmsim.twotower.scores import Occurrences

SPLIT_UNITS = ("chunk", "occurrence")


def bootstrap_interval(
    stat: Callable[..., float],
    samples: Sequence[np.ndarray],
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat(*samples)``, each sample resampled on its own.

    A stand-in for ``lmsim.stats``' bootstrap (the functions that take a ``bootstrap``
    argument accept that one instead, with this signature).

    Parameters
    ----------
    stat : callable
        ``stat(*arrays) -> float``.
    samples : sequence of 1-D arrays
        Independent samples, each resampled with replacement to its own size.
    n_boot : int
    level : float
        Coverage, in (0, 1).
    seed : int

    Returns
    -------
    low, high : float
    """
    if not 0 < level < 1:
        raise ValueError(f"`level` must lie in (0, 1), got {level}")
    samples = [np.asarray(s) for s in samples]
    if any(len(s) == 0 for s in samples):
        raise ValueError("every sample of `samples` must be non-empty")
    rng = np.random.default_rng(seed)
    draws = np.array(
        [stat(*(s[rng.integers(0, len(s), len(s))] for s in samples)) for _ in range(int(n_boot))]
    )
    tail = (1 - level) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return float(low), float(high)


def spearman_brown(r):
    """Reliability of the whole from the correlation ``r`` of two halves: ``2r / (1 + r)``."""
    r = np.asarray(r, dtype=np.float64)
    return 2 * r / (1 + r)


def correlation_ceiling(reliability_a: float, reliability_b: float) -> float:
    """The highest correlation two runs' scores can show when their true scores are the same:
    ``√(rel_a · rel_b)`` (Spearman's attenuation); NaN when a reliability is not positive."""
    if reliability_a <= 0 or reliability_b <= 0:
        return math.nan
    return math.sqrt(reliability_a * reliability_b)


@dataclass
class SplitHalf:
    """Split-half reliability of one run's scores.

    Attributes
    ----------
    r_half : ndarray of shape (n_splits,)
        Pearson correlation of the two halves' scores over the tokens, per random split.
    reliability : float
        Spearman–Brown of the mean half correlation: the expected correlation of these
        scores with a replication on as much text.
    spread : tuple of float
        2.5 and 97.5 percentiles of the per-split Spearman–Brown values (the split's own
        variability, not a confidence interval).
    n_tokens : int
        Tokens scored in both halves of every split.
    unit : str
    """

    r_half: np.ndarray
    reliability: float
    spread: tuple[float, float]
    n_tokens: int
    unit: str


def split_half_reliability(
    occ: Occurrences,
    tokens: np.ndarray,
    unit: str = "chunk",
    n_splits: int = 20,
    mean: str = "probability",
    seed: int = 0,
) -> SplitHalf:
    """Within-run split-half reliability of the preference scores over ``tokens``.

    The scored positions are split at random into two halves (whole chunks, or single
    occurrences), each half gives every token a score (Eq. 4), and the two score vectors are
    correlated over the tokens scored in both; Spearman–Brown lifts the half correlation to
    the full amount of text. The orientation (which tower is primary) is the run's, in both
    halves.

    Parameters
    ----------
    occ : Occurrences
    tokens : ndarray of int
        The tokens compared (e.g. :func:`~lmsim.papers.he2022_twotower.compare.top_tokens`).
    unit : {"chunk", "occurrence"}
        What is split: chunks (conservative: occurrences in one chunk share context), or
        single positions.
    n_splits : int
    mean : {"probability", "log"}
    seed : int

    Returns
    -------
    SplitHalf
    """
    if unit not in SPLIT_UNITS:
        raise ValueError(f"`unit` must be one of {SPLIT_UNITS}, got {unit!r}")
    tokens = np.asarray(tokens)
    rng = np.random.default_rng(seed)
    ids = occ.chunk if unit == "chunk" else np.arange(len(occ))
    units, index = np.unique(ids, return_inverse=True)
    if len(units) < 2:
        raise ValueError(f"need at least 2 {unit}s to split, got {len(units)}")
    r_half, common = [], len(tokens)
    for _ in range(n_splits):
        first = np.zeros(len(units), dtype=bool)
        first[rng.permutation(len(units))[: len(units) // 2]] = True
        in_first = first[index]
        a = occ.subset(in_first).scores(mean)[tokens]
        b = occ.subset(~in_first).scores(mean)[tokens]
        ok = np.isfinite(a) & np.isfinite(b)
        common = min(common, int(ok.sum()))
        if ok.sum() < 3:
            raise ValueError(
                f"fewer than 3 of `tokens` are scored in both halves ({int(ok.sum())}); "
                "score more text or pass more frequent tokens"
            )
        r_half.append(np.corrcoef(a[ok], b[ok])[0, 1])
    r_half = np.array(r_half)
    per_split = spearman_brown(r_half)
    return SplitHalf(
        r_half=r_half,
        reliability=float(spearman_brown(r_half.mean())),
        spread=tuple(float(x) for x in np.percentile(per_split, [2.5, 97.5])),
        n_tokens=common,
        unit=unit,
    )


def primary_gap(
    occ: Occurrences,
    mean: str = "probability",
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict:
    """The primary tower's lead (Eq. 3) with a chunk-bootstrap interval, before it orients
    the scores.

    The lead is the mean over positions of ``p_1 − p_2`` (``mean="probability"``, Eq. 3) or
    of ``log p_1 − log p_2`` (``"log"``, the authors' loss), primary first. When the
    interval reaches 0, which tower is primary, and so the sign of every score, is not
    settled by the data.

    Returns
    -------
    dict
        ``estimate``, ``low``, ``high``, ``n_chunks``, ``settled`` (``low > 0``).
    """
    if mean not in ("probability", "log"):
        raise ValueError(f"`mean` must be 'probability' or 'log', got {mean!r}")
    values = np.exp(occ.log_p[:2]) if mean == "probability" else occ.log_p[:2]
    diff = values[0] - values[1]
    units, index = np.unique(occ.chunk, return_inverse=True)
    per_chunk = np.bincount(index, weights=diff)
    n_per_chunk = np.bincount(index).astype(np.float64)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(units), (int(n_boot), len(units)))
    boot = per_chunk[draws].sum(1) / n_per_chunk[draws].sum(1)
    tail = (1 - level) / 2
    low, high = np.quantile(boot, [tail, 1 - tail])
    return {
        "estimate": float(diff.mean()),
        "low": float(low),
        "high": float(high),
        "n_chunks": len(units),
        "settled": bool(low > 0),
    }


def perplexity_vs_unigram(occ: Occurrences, log_unigram) -> dict:
    """Each head's perplexity on the scored positions, and the unigram's on the same ones.

    Parameters
    ----------
    occ : Occurrences
    log_unigram : array of shape (vocab,)
        Log-probabilities of the unigram model (:func:`lmsim.zoo.unigram_log_probs` of the
        train counts).

    Returns
    -------
    dict
        ``primary``, ``secondary``, ``joint`` and ``unigram`` perplexities and each head's
        ratio to the unigram's (``<head> / unigram``; below 1: better than the unigram).
    """
    log_unigram = np.asarray(log_unigram, dtype=np.float64)
    ppl = {
        name: math.exp(-occ.log_p[k].mean())
        for k, name in enumerate(("primary", "secondary", "joint"))
    }
    ppl["unigram"] = math.exp(-log_unigram[occ.token].mean())
    for name in ("primary", "secondary", "joint"):
        ppl[f"{name} / unigram"] = ppl[name] / ppl["unigram"]
    return ppl


def perplexity_table(facts: dict[str, dict]) -> pd.DataFrame:
    """Validation perplexities of finished runs against the unigram's, from their facts.

    Parameters
    ----------
    facts : dict of run name to :attr:`TrainedTwoTower.facts`

    Returns
    -------
    DataFrame indexed by run
        ``val_ppl`` (the joint model, phase 1), ``unigram_ppl``, ``ppl / unigram``, and each
        phase-2 head's ``head k / unigram``.
    """
    rows = {}
    for name, f in facts.items():
        uni = f["unigram_ppl"]
        row = {"val_ppl": f["val_ppl"], "unigram_ppl": uni, "ppl / unigram": f["val_ppl"] / uni}
        for k, head in enumerate(f.get("head_val_ppl") or [], start=1):
            row[f"head {k} / unigram"] = head / uni
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def run_table(
    prefs: Mapping,
    tokens: np.ndarray,
    log_unigram,
    unit: str = "chunk",
    n_splits: int = 20,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per run: how good the heads are against the unigram, how settled the primary tower
    is, and how reliable the scores are (the ceiling of any correlation with another run).

    Parameters
    ----------
    prefs : dict of run name to :class:`~lmsim.twotower.scores.Preference`
        Scored with ``record=True``; each run's own ``mean`` is used.
    tokens : ndarray of int
    log_unigram : array of shape (vocab,)
    unit, n_splits : str, int
        :func:`split_half_reliability`'s.
    n_boot, seed : int

    Returns
    -------
    DataFrame indexed by run
        ``primary`` (1 or 2), ``joint / unigram``, ``primary / unigram``,
        ``secondary / unigram`` (perplexity ratios on the scored positions), ``gap``,
        ``gap low``, ``gap high``, ``gap settled`` (:func:`primary_gap`), ``reliability``,
        ``reliability low``, ``reliability high`` (the split spread) and ``n_tokens``.
    """
    rows = {}
    for name, pref in prefs.items():
        occ = pref.occurrences
        if occ is None:
            raise ValueError(f"run {name!r} was scored without `record=True`; score it again")
        ppl = perplexity_vs_unigram(occ, log_unigram)
        gap = primary_gap(occ, mean=pref.mean, n_boot=n_boot, seed=seed)
        rel = split_half_reliability(occ, tokens, unit, n_splits, pref.mean, seed)
        rows[name] = {
            "primary": pref.primary + 1,
            "joint / unigram": ppl["joint / unigram"],
            "primary / unigram": ppl["primary / unigram"],
            "secondary / unigram": ppl["secondary / unigram"],
            "gap": gap["estimate"],
            "gap low": gap["low"],
            "gap high": gap["high"],
            "gap settled": gap["settled"],
            "reliability": rel.reliability,
            "reliability low": rel.spread[0],
            "reliability high": rel.spread[1],
            "n_tokens": rel.n_tokens,
        }
    return pd.DataFrame.from_dict(rows, orient="index")
