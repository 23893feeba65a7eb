"""Nulls for the preference claims: what a global quality gap between the two heads, or
token frequency alone, would give.

- :func:`global_gap_null`: the secondary head is the primary degraded in a way that does
  not depend on the token. Scores drawn under it keep the gap (and how it varies with how
  hard a position is), so whatever they share across runs or parts of speech is not a
  token-specific preference.
- :func:`frequency_strata` and :func:`frequency_matched_null`: sets of tokens drawn to
  match a group's frequencies, for statistics of a group (a tag's median score);
  :func:`~lmsim.twotower.compare.permutation_null` with ``strata`` permutes scores within
  frequency strata for correlations.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lmsim.twotower.scores import Occurrences


def global_gap_null(
    occ: Occurrences,
    n_draws: int = 100,
    n_bins: int = 50,
    mean: str = "probability",
    seed: int = 0,
) -> np.ndarray:
    """Score vectors drawn under "no token-specific preference, only a global gap".

    The positions are binned by the primary head's log-probability (``n_bins`` quantile
    bins). In a draw, each position keeps its token and its primary log-probability, and
    takes the secondary log-probability of a random position of its bin, whatever that
    position's token. The conditional distribution of the secondary given the primary is
    kept (so the gap, and its dependence on difficulty), the link to token identity beyond
    the primary's own difficulty is cut.

    Parameters
    ----------
    occ : Occurrences
    n_draws : int
    n_bins : int
    mean : {"probability", "log"}
    seed : int

    Returns
    -------
    ndarray of shape (n_draws, vocab_size)
        One score vector per draw (NaN for tokens never scored).
    """
    if n_bins < 1 or n_draws < 1:
        raise ValueError(f"`n_bins` and `n_draws` must be >= 1, got {n_bins} and {n_draws}")
    first, second = occ.log_p[0], occ.log_p[1]
    edges = np.quantile(first, np.linspace(0, 1, n_bins + 1)[1:-1])
    bins = np.searchsorted(edges, first, side="right")
    order = np.argsort(bins, kind="stable")
    sizes = np.bincount(bins, minlength=n_bins)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rng = np.random.default_rng(seed)
    out = np.empty((n_draws, occ.vocab_size))
    for k in range(n_draws):
        pick = order[starts[bins] + (rng.random(len(bins)) * sizes[bins]).astype(np.int64)]
        out[k] = occ.scores(mean, log_p=np.stack([first, second[pick]]))
    return out


def frequency_strata(counts, n_bins: int = 10) -> np.ndarray:
    """Quantile bins of ``log(counts)``: tokens of similar frequency share a stratum.

    Parameters
    ----------
    counts : array of shape (n_tokens,)
        Positive counts.
    n_bins : int

    Returns
    -------
    ndarray of int, shape (n_tokens,)
        Stratum of each token, 0 (rarest) to at most ``n_bins - 1``.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if (counts <= 0).any():
        raise ValueError("`counts` must be positive (pass the counts of scored tokens only)")
    logc = np.log(counts)
    edges = np.unique(np.quantile(logc, np.linspace(0, 1, n_bins + 1)[1:-1]))
    return np.searchsorted(edges, logc, side="right")


def frequency_matched_null(
    values,
    strata,
    members,
    stat: Callable[[np.ndarray], float] = np.median,
    n_draws: int = 1000,
    seed: int = 0,
) -> np.ndarray:
    """Null distribution of ``stat`` over token sets matched to a group's frequencies.

    Each draw takes, in every frequency stratum, as many tokens as the group has there, at
    random without replacement from all tokens of that stratum, and applies ``stat`` to
    their values.

    Parameters
    ----------
    values : array of shape (n_tokens,)
        E.g. the scores of the candidate tokens (finite).
    strata : array of int, shape (n_tokens,)
        :func:`frequency_strata` of their counts.
    members : array of bool, shape (n_tokens,)
        The group (e.g. the tokens tagged VERB).
    stat : callable
    n_draws : int
    seed : int

    Returns
    -------
    ndarray of shape (n_draws,)
    """
    values, strata, members = np.asarray(values), np.asarray(strata), np.asarray(members, bool)
    if not (values.shape == strata.shape == members.shape):
        raise ValueError(
            f"`values`, `strata` and `members` must have one shape, got {values.shape}, "
            f"{strata.shape} and {members.shape}"
        )
    if not members.any():
        raise ValueError("`members` selects no token")
    pools = {s: np.flatnonzero(strata == s) for s in np.unique(strata[members])}
    need = {s: int((strata[members] == s).sum()) for s in pools}
    rng = np.random.default_rng(seed)
    out = np.empty(n_draws)
    for k in range(n_draws):
        pick = np.concatenate([rng.choice(pools[s], need[s], replace=False) for s in pools])
        out[k] = stat(values[pick])
    return out
