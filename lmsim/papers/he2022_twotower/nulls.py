"""Nulls for the preference claims: what a global quality gap between the two heads, or
token frequency alone, would give.

- :func:`global_gap_null`: the secondary head is the primary degraded in a way that does
  not depend on the token. Scores drawn under it keep the gap (and how it varies with how
  hard a position is), so whatever they share across runs or parts of speech is not a
  token-specific preference; :func:`null_correlations` correlates two runs' draws.
- :func:`frequency_strata` and :func:`frequency_matched_null`: sets of tokens drawn to
  match a group's frequencies, for statistics of a group (a tag's median score);
  :func:`~lmsim.papers.he2022_twotower.compare.permutation_null` with ``strata`` permutes scores within
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

    The positions are binned by the primary head's log-probability ``x`` (``n_bins``
    quantile bins); in each bin the secondary's log-probability ``y`` is fitted by a line in
    ``x``. A draw keeps every position's token and ``x``, and sets ``y`` to the position's
    fitted value plus the residual of a random position of the same bin, whatever that
    position's token. The secondary's dependence on the primary (the gap, and how it grows
    with difficulty) is kept; any link to token identity beyond the primary's own
    difficulty is cut.

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
    x, y = occ.log_p[0], occ.log_p[1]
    edges = np.quantile(x, np.linspace(0, 1, n_bins + 1)[1:-1])
    bins = np.searchsorted(edges, x, side="right")
    n = np.bincount(bins, minlength=n_bins).astype(np.float64)
    sums = [np.bincount(bins, weights=v, minlength=n_bins) for v in (x, y, x * x, x * y)]
    with np.errstate(divide="ignore", invalid="ignore"):
        mx, my = sums[0] / n, sums[1] / n
        sxx = sums[2] - n * mx * mx
        slope = np.where(sxx > 1e-12 * np.maximum(sums[2], 1), (sums[3] - n * mx * my) / sxx, 0)
    fitted = my[bins] + slope[bins] * (x - mx[bins])
    resid = y - fitted
    order = np.argsort(bins, kind="stable")
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
    size = n.astype(np.int64)[bins]
    rng = np.random.default_rng(seed)
    out = np.empty((n_draws, occ.vocab_size))
    for k in range(n_draws):
        pick = order[starts[bins] + (rng.random(len(bins)) * size).astype(np.int64)]
        out[k] = occ.scores(mean, log_p=np.stack([x, fitted + resid[pick]]))
    return out


def null_correlations(null_a: np.ndarray, null_b: np.ndarray, tokens) -> np.ndarray:
    """Correlation between two runs' :func:`global_gap_null` draws, draw by draw, over
    ``tokens``: how much two runs' scores would correlate through their gaps alone.

    Parameters
    ----------
    null_a, null_b : ndarray of shape (n_draws, vocab_size)
    tokens : array of int

    Returns
    -------
    ndarray of shape (n_draws,)
        Pearson correlation over the tokens finite in both draws.
    """
    from lmsim.papers.he2022_twotower.compare import score_correlation

    null_a, null_b = np.asarray(null_a), np.asarray(null_b)
    if null_a.shape != null_b.shape:
        raise ValueError(
            f"`null_a` and `null_b` must have one shape, got {null_a.shape} and {null_b.shape}"
        )
    tokens = np.asarray(tokens)
    return np.array([score_correlation(a[tokens], b[tokens]) for a, b in zip(null_a, null_b)])


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


ICA_NULL_METHODS = ("gaussian", "column-shuffle")


def structureless_embeddings(X, weights, method: str, rng: np.random.Generator) -> np.ndarray:
    """Embeddings with no structure beyond what the ICA pipeline must keep.

    ``"gaussian"``: Gaussian rows with ``X``'s occurrence-weighted mean and covariance (the
    authors' PCA does not centre, so the mean is kept); ``"column-shuffle"``: every column
    of ``X`` permuted on its own across the rows (each dimension's distribution kept, their
    joint structure cut). The rows keep their occurrence weights.

    Parameters
    ----------
    X : array of shape (n_tokens, embed)
    weights : array of shape (n_tokens,)
    method : {"gaussian", "column-shuffle"}
    rng : numpy Generator
    """
    X = np.asarray(X, dtype=np.float64)
    if method == "gaussian":
        w = np.asarray(weights, dtype=np.float64)
        w = w / w.sum()
        mu = w @ X
        cov = ((X - mu) * w[:, None]).T @ (X - mu)
        vals, vecs = np.linalg.eigh(cov)
        root = vecs * np.sqrt(np.clip(vals, 0, None))
        return mu + rng.standard_normal(X.shape) @ root.T
    if method == "column-shuffle":
        return np.stack([col[rng.permutation(len(col))] for col in X.T], axis=1)
    raise ValueError(f"`method` must be one of {ICA_NULL_METHODS}, got {method!r}")


#: The scale-free facts :func:`ica_facts` adds, and what unit-variance Gaussian sources
#: give for each (``d`` components; the groups' value is per component).
SCALE_FREE_FACTS = {
    "standardised: fraction of values in [-1, 1]": 0.6826894921370859,
    "standardised: mean groups per word (|z| > 2.5)": 0.012419330651552265,
    "standardised: mean excess kurtosis over components": 0.0,
}


def ica_facts(Y, weights=None, threshold: float = 2.5) -> dict[str, float]:
    """The paper's ICA facts (:func:`lmsim.twotower.ica_summary`) and their scale-free
    forms.

    The paper's "values in [-1, 1]" and "groups at |y| > 2.5" depend on each component's
    scale (a Gaussian embedding through the authors' pipeline passes them). The scale-free
    forms first standardise each component to mean 0 and standard deviation 1 (moments
    with the same ``weights`` as the aggregation), then count the same facts, and add the
    mean excess kurtosis over components; unit-variance Gaussian sources give
    :data:`SCALE_FREE_FACTS` (the groups' value times ``d``).

    Parameters
    ----------
    Y : ndarray of shape (n_words, d)
    weights : ndarray of shape (n_words,), optional
        Occurrences per word: facts per occurrence; None: per word (the authors').
    threshold : float

    Returns
    -------
    dict of str to float
    """
    from lmsim.twotower.ica import ica_summary

    Y = np.asarray(Y, dtype=np.float64)
    w = np.full(len(Y), 1.0 / len(Y)) if weights is None else np.asarray(weights, np.float64)
    w = w / w.sum()
    centred = Y - w @ Y
    z = centred / np.maximum(np.sqrt(w @ centred**2), 1e-300)
    keys = list(SCALE_FREE_FACTS)
    return {
        **ica_summary(Y, threshold, weights=weights),
        keys[0]: float(w @ (np.abs(z) <= 1).mean(1)),
        keys[1]: float(w @ (np.abs(z) > threshold).sum(1)),
        keys[2]: float(np.mean(w @ z**4 - 3.0)),
    }


def ica_null(
    X,
    weights,
    d: int,
    method: str,
    variant: str = "paper",
    n_iter: int = 10_000,
    n_draws: int = 2,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """The ICA facts (Sec. 5.3) of structureless embeddings through the page's own pipeline.

    Each draw makes :func:`structureless_embeddings` of ``X`` and runs exactly the page's
    fit (:func:`lmsim.twotower.fit_ica` with the same ``d``, ``variant``, ``n_iter`` and
    occurrence weights), then :func:`lmsim.twotower.ica_summary` per occurrence and per
    word, with their scale-free forms (:func:`ica_facts`). Gaussian sources at unit scale
    would give 0.68 of values in [-1, 1]; the pipeline's own null is what a sparse-looking
    fact must beat.

    Returns
    -------
    dict
        ``"<fact> (per occurrence)"`` and ``"<fact> (per word)"`` to an ndarray of shape
        (n_draws,), for every fact of :func:`ica_facts`.
    """
    from lmsim.twotower.ica import fit_ica

    rng = np.random.default_rng(seed)
    out: dict[str, list] = {}
    for _ in range(n_draws):
        Z = structureless_embeddings(X, weights, method, rng)
        Y = fit_ica(Z, d, weights, variant=variant, n_iter=n_iter).Y
        for per, w in (("per occurrence", weights), ("per word", None)):
            for key, value in ica_facts(Y, weights=w).items():
                out.setdefault(f"{key} ({per})", []).append(value)
    return {k: np.array(v) for k, v in out.items()}
