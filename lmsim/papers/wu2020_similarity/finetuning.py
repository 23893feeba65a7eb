"""Figs. 5-7 of Wu et al. (2020) judged on fine-tunes of a pretrained model, one per seed.

How far fine-tuning moves layer ``l`` is ``ckasim(base l, fine-tuned l)`` (Fig. 5) or
Jensen–Shannon ``attnsim(base l → fine-tuned l)`` (Fig. 6); "top layers change more" is
the mean of the bottom third minus that of the top third. With several fine-tuning seeds
the claim is about the recipe, not one run: each seed is a group (its interval resamples
the sentences), and the pooled value is the mean over seeds, its interval the sentences'
bootstrap of the seed mean widened by the spread over seeds
(:func:`lmsim.stats.with_seed_spread`).

References
----------
Wu et al. (2020), Sec. 6, Figs. 5-7.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from lmsim import stats
from lmsim.metrics import attnsim, linear_cka
from lmsim.stats import Estimate

__all__ = [
    "bottom_minus_top",
    "depth_spearman",
    "seed_groups",
    "diagonal_cka",
    "diagonal_js",
    "diagonal_js_sums",
    "localization_shift",
    "sentence_js_sums",
    "sentence_rows",
]


def bottom_minus_top(diagonal: np.ndarray) -> float:
    """Mean of the first third of a per-layer profile minus the mean of its last third."""
    third = max(1, len(diagonal) // 3)
    return float(np.mean(diagonal[:third]) - np.mean(diagonal[-third:]))


def depth_spearman(diagonal: np.ndarray) -> float:
    """Spearman correlation of a per-layer profile with the layer index."""
    ranks = pd.Series(np.asarray(diagonal, dtype=np.float64)).rank().to_numpy()
    return float(np.corrcoef(ranks, np.arange(len(ranks)))[0, 1])


def diagonal_cka(base: Sequence[np.ndarray], tuned: Sequence[np.ndarray], rows=None) -> np.ndarray:
    """``ckasim(base[l], tuned[l])`` for every layer ``l`` on ``rows`` (all by default)."""
    take = (lambda a: a) if rows is None else (lambda a: a[rows])
    return np.array([linear_cka(take(a), take(b)) for a, b in zip(base, tuned)])


def diagonal_js(base: Sequence[list], tuned: Sequence[list], picked=None) -> np.ndarray:
    """JS ``attnsim(base[l] → tuned[l])`` for every attention layer on the sentences
    ``picked`` (all by default); each layer a list of per-sentence attention arrays."""
    idx = range(len(base[0])) if picked is None else picked
    return np.array(
        [attnsim([a[i] for i in idx], [b[i] for i in idx], kind="jensen_shannon")
         for a, b in zip(base, tuned)]
    )  # fmt: skip


def sentence_js_sums(base: Sequence[list], tuned: Sequence[list]) -> tuple[np.ndarray, np.ndarray]:
    """Per layer and sentence, the summed Jensen–Shannon divergence of every head pair.

    JS ``attnsim`` is ``1 − Σ_s D_s / Σ_s n_s`` maximised over the tuned heads and averaged
    over the base heads (:func:`lmsim.metrics.attention_head_similarity`), so a bootstrap
    over sentences needs the sums ``D_s`` (heads × heads) and query counts ``n_s`` of each
    sentence once (:func:`diagonal_js_sums`), not a pass over the attention per draw.

    Parameters
    ----------
    base, tuned : sequence (one per layer) of lists of arrays (heads, words, words)
        Word-level attention of the base and the fine-tuned model, per sentence.

    Returns
    -------
    (sums, counts)
        ``sums`` of shape (n_layers, n_sentences, heads, heads'), ``counts`` (n_sentences,).
    """
    import torch

    from lmsim.metrics.attention import _js_sum

    sums = np.stack([
        np.stack([_js_sum(torch.as_tensor(a, dtype=torch.float64),
                          torch.as_tensor(b, dtype=torch.float64))[0].numpy()
                  for a, b in zip(layer_a, layer_b)])
        for layer_a, layer_b in zip(base, tuned)
    ])  # fmt: skip
    counts = np.array([np.asarray(a).shape[1] for a in base[0]], dtype=np.float64)
    return sums, counts


def diagonal_js_sums(base, tuned: tuple[np.ndarray, np.ndarray], picked=None) -> np.ndarray:
    """:func:`diagonal_js` from :func:`sentence_js_sums` (``tuned``; ``base`` is unused, for
    :func:`seed_groups`' signature) on the sentences ``picked`` (all by default)."""
    sums, counts = tuned
    if picked is not None:
        weight = np.bincount(np.asarray(picked), minlength=len(counts)).astype(np.float64)
        total, n = np.einsum("s,lshg->lhg", weight, sums), weight @ counts
    else:
        total, n = sums.sum(axis=1), counts.sum()
    return (1.0 - total / n).max(axis=2).mean(axis=1)


def sentence_rows(lengths: Sequence[int]) -> Callable[[np.ndarray], np.ndarray]:
    """``rows_of`` for :func:`seed_groups`: drawn sentence indices -> the rows of their words.

    ``lengths[s]`` is the number of word rows of sentence ``s`` (rows are stored sentence
    after sentence); a sentence drawn twice contributes its words twice.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])

    def rows_of(drawn: np.ndarray) -> np.ndarray:
        drawn = np.asarray(drawn, dtype=np.int64)
        return np.concatenate([np.arange(starts[s], starts[s] + lengths[s]) for s in drawn])

    return rows_of


def localization_shift(
    base: Sequence[np.ndarray], tuned: Sequence[np.ndarray], rows=None, *, paper_compat=True
) -> np.ndarray:
    """Fig. 7: per layer, the fine-tuned model's localization score minus the base's.

    The score of every layer of the two models is
    :func:`lmsim.metrics.localization_scores` over the ``2 (L + 1)`` layers of the pair, from
    ``neuronsim`` and the authors' ``svsim`` (``svcca(paper_compat=True)``) on the word rows
    ``rows`` (all by default): the authors' notebooks z-score over all layers of the models
    compared (``paper_compat=True``); ``paper_compat=False`` z-scores within each model.

    Parameters
    ----------
    base, tuned : sequence of arrays of shape (n_words, width)
        Layer ``l`` of the base and of the fine-tuned model, the same words in the same order.
    rows : array of int, optional
        Word rows to use (a bootstrap draw repeats rows).
    paper_compat : bool, default=True

    Returns
    -------
    ndarray of shape (n_layers,)
        ``score(tuned l) − score(base l)``: negative where fine-tuning lowered localization.

    References
    ----------
    Wu et al. (2020), Sec. 6, Fig. 7.
    """
    import torch

    from lmsim.metrics import localization_scores, pairwise_matrix
    from lmsim.moments import Moments

    if len(base) != len(tuned):
        raise ValueError(f"`base` has {len(base)} layers and `tuned` {len(tuned)}")
    take = (lambda a: np.asarray(a, np.float64)) if rows is None else (
        lambda a: np.asarray(a, np.float64)[rows])  # fmt: skip
    acts = {f"base/layer.{i}": take(a) for i, a in enumerate(base)}
    acts.update({f"tuned/layer.{i}": take(a) for i, a in enumerate(tuned)})
    names = list(acts)
    # The page's own pipeline: joint float64 moments, each layer prepared once.
    mom = Moments({k: v.shape[1] for k, v in acts.items()})
    mom.update({k: torch.from_numpy(v) for k, v in acts.items()})
    neuron = pairwise_matrix(mom, names, metric="neuronsim", progress=False)
    sv = pairwise_matrix(mom, names, metric="svcca", progress=False, paper_compat=True)
    options = {"paper_compat": True} if paper_compat else {"normalize": "per_model"}
    score = localization_scores(neuron, sv, names, **options).to_numpy()
    return score[len(base) :] - score[: len(base)]


def seed_groups(
    profile: Callable,
    base,
    tuned: Mapping[str, object],
    n_sentences: int,
    statistic: Callable[[np.ndarray], float] | Mapping[str, Callable],
    *,
    rows_of: Callable | None = None,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[Estimate, dict[str, Estimate]] | dict:
    """A per-layer change statistic per fine-tuning seed and pooled over seeds.

    Parameters
    ----------
    profile : callable
        ``profile(base, tuned_one, picked) -> ndarray`` per layer (:func:`diagonal_cka`,
        :func:`diagonal_js`), on the resampled rows or sentences ``picked``.
    base, tuned
        The base model's layers; per seed (``"seed 0"``), the fine-tuned model's layers.
    n_sentences : int
        Sentences, the resampling unit (the same draw for every seed: they share them).
    statistic : callable or mapping of str to callable
        Per-layer profile -> float (:func:`bottom_minus_top`, :func:`depth_spearman`); a
        mapping computes each on the same profiles and draws.
    rows_of : callable, optional
        Drawn sentence indices -> what ``profile`` takes as ``picked`` (the word rows of
        those sentences for word vectors); the indices themselves by default.
    n_boot, level, seed
        Bootstrap resamples, coverage, seed of ``numpy.random.default_rng``.

    Returns
    -------
    (pooled, groups)
        ``groups``: per seed, the statistic with its sentence-bootstrap interval;
        ``pooled``: their mean, the interval over sentences widened by the seeds' spread
        (a percentile interval over sentences with one seed). With a mapping of
        statistics, a dict of such pairs under the same keys.
    """
    rows_of = rows_of or (lambda drawn: drawn)
    many = isinstance(statistic, Mapping)
    stat = dict(statistic) if many else {"": statistic}
    names = list(tuned)
    # One profile per seed and draw serves every statistic.
    profiles = {s: profile(base, tuned[s], None) for s in names}
    point = {k: np.array([f(profiles[s]) for s in names]) for k, f in stat.items()}
    rng = np.random.default_rng(seed)
    draws = {k: np.empty((int(n_boot), len(names))) for k in stat}
    for b in range(int(n_boot)):
        picked = rows_of(rng.integers(0, n_sentences, n_sentences))
        drawn = [profile(base, tuned[s], picked) for s in names]
        for k, f in stat.items():
            draws[k][b] = [f(d) for d in drawn]
    alpha = (1 - level) / 2
    method = f"percentile bootstrap ({int(n_boot)} resamples of the sentences)"

    def percentile(value, d, unit):
        d = d[np.isfinite(d)]
        low, high = np.quantile(d, [alpha, 1 - alpha])
        return Estimate(float(value), float(low), float(high), level, unit, n_sentences,
                        method, sd=float(d.std(ddof=1)), draws=d)  # fmt: skip

    out = {}
    for k in stat:
        groups = {s: percentile(point[k][j], draws[k][:, j], "sentences")
                  for j, s in enumerate(names)}  # fmt: skip
        over = percentile(point[k].mean(), draws[k].mean(axis=1), "sentences")
        if len(names) > 1:
            over = stats.with_seed_spread(over, point[k], seeds_unit="fine-tuning seeds")
        out[k] = (over, groups)
    return out if many else out[""]
