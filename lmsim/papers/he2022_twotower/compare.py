"""Comparing runs' score vectors (Table 2, Table 4): correlations and their permutation null."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lmsim.papers.he2022_twotower.paper import PAPER_RELATIONS
from lmsim.twotower.config import RunSpec


def top_tokens(counts, exclude_ids: Sequence[int], n: int) -> np.ndarray:
    """Ids of the ``n`` most frequent tokens, most frequent first (ties: lower id first).

    Parameters
    ----------
    counts : array of shape (vocab,)
    exclude_ids : sequence of int
        Ids never returned (special tokens).
    n : int
    """
    counts = np.asarray(counts, dtype=np.float64).copy()
    counts[list(exclude_ids)] = -1
    order = np.lexsort((np.arange(len(counts)), -counts))
    order = order[counts[order] > 0]
    return order[:n]


def _finite_pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"score vectors differ in shape: {a.shape} and {b.shape}")
    ok = np.isfinite(a) & np.isfinite(b)
    return a[ok], b[ok]


def score_correlation(a, b) -> float:
    """Pearson correlation of two score vectors over the entries finite in both."""
    a, b = _finite_pair(a, b)
    if len(a) < 3:
        raise ValueError(f"need at least 3 tokens scored by both runs, got {len(a)}")
    return float(np.corrcoef(a, b)[0, 1])


def permutation_null(a, b, n_perm: int = 1000, seed: int = 0, strata=None) -> np.ndarray:
    """Correlations of ``a`` with random permutations of ``b``: the null of no shared
    pattern (the tokens' scores are exchangeable).

    Parameters
    ----------
    a, b : array of shape (n_tokens,)
        Entries not finite in both are dropped.
    n_perm, seed : int
    strata : array of int, shape (n_tokens,), optional
        Permute only within each stratum (e.g. :func:`~lmsim.papers.he2022_twotower.nulls.frequency_strata`
        of the tokens' counts): the null keeps whatever the scores share through frequency.

    Returns
    -------
    ndarray of shape (n_perm,)
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if strata is not None:
        strata = np.asarray(strata)
        if strata.shape != a.shape:
            raise ValueError(f"`strata` must have the shape of `a` {a.shape}, got {strata.shape}")
        strata = strata[np.isfinite(a) & np.isfinite(b)]
    a, b = _finite_pair(a, b)
    rng = np.random.default_rng(seed)
    za = (a - a.mean()) / a.std()
    zb = (b - b.mean()) / b.std()
    if strata is None:
        perms = np.stack([rng.permutation(len(b)) for _ in range(n_perm)])
    else:
        groups = [np.flatnonzero(strata == s) for s in np.unique(strata)]
        perms = np.tile(np.arange(len(b)), (n_perm, 1))
        for k in range(n_perm):
            for g in groups:
                perms[k, g] = rng.permutation(g)
    return (zb[perms] @ za) / len(a)


def correlation_matrix(scores: Mapping[str, np.ndarray], tokens: np.ndarray) -> pd.DataFrame:
    """Pairwise Pearson correlation of runs' scores over ``tokens`` (Table 2)."""
    names = list(scores)
    mat = [[score_correlation(scores[a][tokens], scores[b][tokens]) for b in names] for a in names]
    return pd.DataFrame(mat, index=names, columns=names)


def relation(a: RunSpec, b: RunSpec) -> str:
    """How two runs differ: ``"seed"`` (same architecture), ``"size"`` (same tower type) or
    ``"type"`` (different tower types)."""
    if a.config.tower != b.config.tower:
        return "type"
    return "seed" if a.config == b.config else "size"


def pair_table(
    corr: pd.DataFrame, specs: Sequence[RunSpec], null_p99: float | None = None
) -> pd.DataFrame:
    """Every pair of runs with its relation, our correlation and the paper's range for that
    relation (:data:`PAPER_RELATIONS`, from Table 2).

    Returns
    -------
    DataFrame, one row per pair
        ``run A``, ``run B``, ``relation``, ``ours r``, ``paper r (min)``, ``paper r (max)``
        and, with ``null_p99``, ``above null p99``.
    """
    by_name = {s.name: s for s in specs}
    rows = []
    for i, a in enumerate(corr.index):
        for b in corr.index[i + 1 :]:
            rel = relation(by_name[a], by_name[b])
            lo, hi = PAPER_RELATIONS[rel]
            rows.append(
                {
                    "run A": a,
                    "run B": b,
                    "relation": rel,
                    "ours r": corr.loc[a, b],
                    "paper r (min)": lo,
                    "paper r (max)": hi,
                }
            )
    table = pd.DataFrame(rows)
    if null_p99 is not None:
        table["above null p99"] = table["ours r"] > null_p99
    return table


def spearman_matrix(scores: Mapping[str, np.ndarray], tokens: np.ndarray) -> pd.DataFrame:
    """Pairwise Spearman correlation of runs' scores and the frequency rank (Table 4).

    ``tokens`` must be ordered by descending frequency (:func:`top_tokens`); the frequency
    rank is the position in it.
    """
    from scipy.stats import spearmanr

    columns = {name: s[tokens] for name, s in scores.items()}
    columns["frequency rank"] = np.arange(1, len(tokens) + 1, dtype=np.float64)
    names = list(columns)
    mat = np.eye(len(names))
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            x, y = _finite_pair(columns[a], columns[names[j]])
            mat[i, j] = mat[j, i] = spearmanr(x, y).statistic
    return pd.DataFrame(mat, index=names, columns=names)
