"""RegMean's regulariser swept over α on model pairs (Fig. 5a), and the α = 1 check.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 4.4 ("Impact of Scaling Non-Diagonal Values"), Fig. 5.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

from lmsim.merge import SingularGramWarning


def pairwise_alpha_sweep(
    pairs: Sequence[tuple[str, str]],
    alphas: Sequence[float],
    merge: Callable[[list[str], float], object],
    score: Callable[[object, str], float],
):
    """RegMean merges of model pairs over α, each scored on both models' own sets (Fig. 5a).

    Parameters
    ----------
    pairs : sequence of (str, str)
        Model names merged two at a time.
    alphas : sequence of float
        Off-diagonal scales.
    merge : callable
        ``merge([a, b], alpha)`` returns the merged model.
    score : callable
        ``score(model, name)``: the model's score on the in-domain set of model ``name``.

    Returns
    -------
    pandas.DataFrame
        Columns ``pair`` ("a+b"), ``alpha``, ``model`` (whose set), ``score``: one row per
        pair, α and member, so that α's can be compared on the same (pair, set) units.

    Notes
    -----
    A pair's Gram sums of the pooler and the head are singular (two models' inputs span
    fewer directions than the layer is wide); ``merge_models`` solves them with its
    documented ridge, and the :class:`~lmsim.merge.SingularGramWarning` is not repeated here
    (as in :func:`pairwise_runs`).
    """
    import pandas as pd

    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularGramWarning)
        for a, b in pairs:
            for alpha in alphas:
                model = merge([a, b], float(alpha))
                rows += [(f"{a}+{b}", float(alpha), n, float(score(model, n))) for n in (a, b)]
    return pd.DataFrame(rows, columns=["pair", "alpha", "model", "score"])


def alpha_one_check(sweep, low: float = 0.1, high: float = 0.9) -> dict:
    """The α = 1 degeneration the paper reports (Sec. 4.4, Fig. 5a), on a pairwise sweep.

    Parameters
    ----------
    sweep : pandas.DataFrame
        From :func:`pairwise_alpha_sweep`, with α = 1 and at least one α in [low, high].
    low, high : float
        The range the paper finds stable (0.1 to 0.9).

    Returns
    -------
    dict
        ``alpha`` (the α in [low, high] with the best mean score), ``score_alpha``,
        ``score_one`` (means over the (pair, set) units), ``drop`` (``score_one −
        score_alpha``: negative where α = 1 degenerates) and ``differences`` (a Series of
        the paired per-unit differences, for an interval over pairs).
    """
    table = sweep.pivot_table(index=["pair", "model"], columns="alpha", values="score")
    if 1.0 not in table.columns:
        raise ValueError("`sweep` has no α = 1 rows; include 1.0 in `alphas`")
    inside = [a for a in table.columns if low <= a <= high]
    if not inside:
        raise ValueError(f"`sweep` has no α in [{low}, {high}]")
    best = max(inside, key=lambda a: (table[a].mean(), -a))
    diff = table[1.0] - table[best]
    return {
        "alpha": float(best),
        "score_alpha": float(table[best].mean()),
        "score_one": float(table[1.0].mean()),
        "drop": float(diff.mean()),
        "differences": diff,
    }
