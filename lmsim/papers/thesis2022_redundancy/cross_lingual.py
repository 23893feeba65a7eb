"""The cross-lingual page's controls: a kept share matched to the thesis's, a French
in-language reference, and labels the English training set never has.

The thesis compares its clustering's cost at τ = 0.3 (its Tables B.1-B.2), where mBERT keeps
18 % of its neurons (Table A.3); the same τ keeps 78 % of Gemma-3-270M's (issue 44, D6), so a
comparison at equal τ is a comparison at very different downsizing. This module gives the
number of clusters that keeps exactly the thesis's share (:func:`share_clusters`: the same
average-linkage tree cut into ``round(0.1831 · n)`` clusters; the τ of a grid whose share
was closest missed it by a quarter, issue 44 M3), with random subsets
of the same size beside it (:func:`matched_columns`), so the loss is separated from the size.
:func:`joint_unit_bootstrap` resamples the articles of the English and French sets together
(they are parallel article by article), and :func:`thesis_losses` gives the thesis's own
EN→FR losses per model.
:func:`cross_fitted_probe` trains a probe on one half of a test language's units (UDHR
articles) and scores the other half, and the reverse: the in-language reference the English
probe's transfer is read against (D7). :func:`seen_labels` marks the words whose gold label
occurs in the training labels at all (French ``cop``, ``fixed``, ``flat`` never do, D8).

References
----------
"Distillation and redundancy in language models" (master's thesis, 2022), Sec. 5.3,
Tables A.3, B.1, B.2, C.1; Dalvi et al. (2020), Sec. 3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from lmsim.papers.thesis2022_redundancy.subset_controls import same_size_subset, uniform_subset
from lmsim.probe import train_probe
from lmsim.stats import Estimate

__all__ = [
    "TABLE_A3_MBERT",
    "TABLE_B_EN_FR",
    "MODEL_FACTS",
    "thesis_kept_share",
    "thesis_losses",
    "share_clusters",
    "joint_unit_bootstrap",
    "matched_columns",
    "unit_halves",
    "cross_fitted_probe",
    "seen_labels",
]

#: The thesis's Table A.3 (mBERT): kept neurons per layer (embeddings, then layers 1-12) on
#: all neurons ("none") and at τ = 0.3, the cut its Tables B.1-B.2 compare with all neurons.
TABLE_A3_MBERT = {
    "none": (768,) * 12 + (767,),
    0.3: (385, 352, 362, 360, 368, 1, 0, 0, 0, 0, 0, 0, 0),
}


#: The thesis's EN→FR accuracies (%), all neurons and τ = 0.3: Table B.1 (POS) and B.2 (DEP).
TABLE_B_EN_FR = {
    "POS": {"mBERT": (84.94, 84.70), "distil-mBERT": (85.08, 83.33), "XLM-R": (88.00, 86.30)},
    "DEP": {"mBERT": (67.49, 63.65), "distil-mBERT": (67.33, 65.34), "XLM-R": (72.48, 65.53)},
}


#: What differs between the page's multilingual and English-only models besides the
#: languages of their pretraining (issue 44 M2): a difference between them is confounded.
MODEL_FACTS = {
    "gemma-3-270m": "Gemma-3-270M: 270M parameters, a 262k-token multilingual vocabulary, "
    "causal (left context only), 7 of its 19 hidden states probed, 4-bit (Q4_K_M) weights "
    "dequantised",
    "minilm-l6": "all-MiniLM-L6-v2: 22M parameters, a 30k-token uncased English vocabulary, "
    "bidirectional, all 7 hidden states probed, a contrastive sentence-embedding fine-tune",
}


def thesis_losses(task: str) -> dict[str, float]:
    """The thesis's EN→FR loss from all neurons to τ = 0.3, per model (accuracy points).

    Parameters
    ----------
    task : {"POS", "DEP"}

    Returns
    -------
    dict of str to float
        ``{model: all − τ 0.3}`` from :data:`TABLE_B_EN_FR`: POS mBERT 0.24, distil-mBERT
        1.75, XLM-R 1.70; DEP mBERT 3.84, distil-mBERT 1.99, XLM-R 6.95. The page's 3- and
        7-point rules round up the largest of the three, not mBERT's own loss.
    """
    if task not in TABLE_B_EN_FR:
        raise ValueError(f"`task` must be one of {sorted(TABLE_B_EN_FR)}, got {task!r}")
    return {m: round(a - b, 2) for m, (a, b) in TABLE_B_EN_FR[task].items()}


def share_clusters(n_neurons: int, share: float) -> int:
    """The number of clusters that keeps ``share`` of ``n_neurons``: ``round(share · n)``.

    One representative per cluster, so cutting the tree into this many clusters
    (:func:`~lmsim.papers.thesis2022_redundancy.redundancy.cluster_cuts` ``n_clusters=``)
    keeps exactly this many neurons, at least one.

    Returns
    -------
    int
        4,480 neurons at the thesis's 0.1831: 820.
    """
    n_neurons = int(n_neurons)
    if n_neurons < 1:
        raise ValueError(f"`n_neurons` must be >= 1, got {n_neurons!r}")
    if not 0 < share <= 1:
        raise ValueError(f"`share` must be in (0, 1], got {share!r}")
    return max(1, int(round(share * n_neurons)))


def thesis_kept_share(tau: float = 0.3) -> float:
    """The share of mBERT's neurons the thesis keeps at ``tau`` (Table A.3).

    Returns
    -------
    float
        ``Σ kept / Σ all``: 1,828 / 9,983 ≈ 0.183 at τ = 0.3.
    """
    if tau not in TABLE_A3_MBERT:
        raise ValueError(f"`tau` must be one of {sorted(k for k in TABLE_A3_MBERT if k != 'none')}")
    return sum(TABLE_A3_MBERT[tau]) / sum(TABLE_A3_MBERT["none"])


def matched_columns(kept, dims: Mapping[str, int], *, seed: int = 0) -> dict[str, np.ndarray]:
    """A kept set and two random subsets of its size: the loss separated from the size.

    Parameters
    ----------
    kept : array-like of int
        The kept neurons at the matched τ.
    dims : mapping of str to int
        ``{block: width}`` in column order.
    seed : int
        Seed of both random draws.

    Returns
    -------
    dict of str to ndarray of int64
        ``"kept"``; ``"random (per layer)"`` (as many neurons in every layer,
        :func:`~lmsim.papers.thesis2022_redundancy.subset_controls.same_size_subset`: the
        choice within a layer); ``"random (any layer)"`` (drawn from all neurons,
        :func:`~lmsim.papers.thesis2022_redundancy.subset_controls.uniform_subset`: the
        choice of layers too).
    """
    kept = np.unique(np.asarray(kept, dtype=np.int64))
    n = int(sum(dims.values()))
    return {
        "kept": kept,
        "random (per layer)": same_size_subset(kept, dims, seed=seed),
        "random (any layer)": uniform_subset(n, kept.size, seed=seed),
    }


def joint_unit_bootstrap(
    statistic: Callable[..., float],
    arrays: Mapping[str, Sequence],
    units: Mapping[str, object],
    *,
    unit: str = "articles",
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Percentile bootstrap over units shared by several sets of different lengths.

    Parallel test sets (the English and French UDHR, aligned article by article) have the
    same units but different words in each: a ratio of the French accuracy to the English
    one varies with the articles on both sides, so the articles are drawn once and every
    set takes the rows of the drawn articles (a paired bootstrap over articles).

    Parameters
    ----------
    statistic : callable
        ``statistic(**{name: tuple of arrays}) -> float``: each set's arrays, rows of the
        drawn units (a unit drawn twice appears twice).
    arrays : mapping of str to sequence of array-like
        Per set, arrays of shape (n_rows_set, ...) resampled together.
    units : mapping of str to array-like of shape (n_rows_set,)
        Per set (the same keys), the unit of every row; every set has the same units.
    unit : str
        What a unit is, for the record.
    n_boot, level, seed
        As :func:`lmsim.stats.bootstrap`.

    Returns
    -------
    Estimate
        ``n`` counts units.
    """
    if set(arrays) != set(units) or not arrays:
        raise ValueError(
            f"`arrays` and `units` must name the same sets, got {sorted(arrays)} and {sorted(units)}"
        )
    arrays = {k: tuple(np.asarray(a) for a in v) for k, v in arrays.items()}
    codes = {k: np.asarray(v) for k, v in units.items()}
    names = sorted(codes)
    shared = np.unique(codes[names[0]])
    for k in names:
        if not np.array_equal(np.unique(codes[k]), shared):
            raise ValueError(f"set {k!r} has other units than {names[0]!r}: not parallel")
        if any(a.shape[0] != codes[k].size for a in arrays[k]):
            raise ValueError(
                f"set {k!r}: every array needs one row per unit label ({codes[k].size})"
            )
    if shared.size < 2:
        raise ValueError(f"need at least 2 units, got {shared.size}")
    rows_of = {
        k: [np.flatnonzero(codes[k] == u) for u in shared] for k in names
    }  # per set, the rows of each unit
    rng = np.random.default_rng(seed)

    def value(pick):
        parts = {}
        for k in names:
            rows = np.concatenate([rows_of[k][i] for i in pick])
            parts[k] = tuple(a[rows] for a in arrays[k])
        return float(statistic(**parts))

    estimate = value(np.arange(shared.size))
    draws = np.array([value(rng.integers(0, shared.size, shared.size)) for _ in range(int(n_boot))])
    draws = draws[np.isfinite(draws)]
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(
        estimate, float(low), float(high), level, unit, int(shared.size),
        f"percentile bootstrap ({int(n_boot)} resamples of {unit}, shared by {', '.join(names)})",
        sd=float(draws.std(ddof=1)), draws=draws,
    )  # fmt: skip


def unit_halves(units) -> np.ndarray:
    """Split sentences into two halves by unit (a UDHR article), alternating over units.

    Parameters
    ----------
    units : array-like of int, shape (n_sentences,)
        The unit of every sentence (sentences of a unit share it).

    Returns
    -------
    ndarray of int64, shape (n_sentences,)
        0 or 1: the half of every sentence; units in sorted order alternate 0, 1, 0, ...
        (the preamble and the early articles fall on both sides), so no unit is split.
    """
    units = np.asarray(units)
    if units.ndim != 1 or np.unique(units).size < 2:
        raise ValueError(f"`units` must be 1-D with at least two distinct units, got {units!r}")
    _, rank = np.unique(units, return_inverse=True)
    return (rank % 2).astype(np.int64)


def cross_fitted_probe(
    X, y, halves, *, n_classes: int, **probe_kwargs
) -> tuple[np.ndarray, pd.DataFrame]:
    """Train on one half of a set and score the other, both ways: an in-language reference.

    Parameters
    ----------
    X : ndarray of shape (n_words, n_neurons)
        The test language's activations.
    y : array-like of int, shape (n_words,)
        Its labels.
    halves : array-like of int, shape (n_words,)
        0 or 1 for every word (:func:`unit_halves` of its sentence's unit).
    n_classes : int
        All label ids (the class list shared with the English probe).
    **probe_kwargs
        :func:`lmsim.probe.train_probe` options (the English probe's, its λ included).

    Returns
    -------
    correct : ndarray of bool, shape (n_words,)
        Whether the probe trained on the *other* half got each word right.
    table : DataFrame
        One row per held-out half: ``half``, ``n_train`` / ``n_test`` words, ``train`` and
        ``test`` accuracy, ``converged``, ``stop``, ``gradient``, ``epochs_run``.
    """
    y = np.asarray(y, dtype=np.int64)
    halves = np.asarray(halves)
    if halves.shape != y.shape or not set(np.unique(halves)) == {0, 1}:
        raise ValueError(f"`halves` must give 0 or 1 (both present) for each of the {y.size} words")
    correct, rows = np.zeros(y.size, dtype=bool), []
    for half in (0, 1):
        test, train = halves == half, halves != half
        r = train_probe(X[train], y[train], classes=np.arange(int(n_classes)), **probe_kwargs)
        correct[test] = r.predict(X[test]) == y[test]
        rows.append(
            dict(half=half, n_train=int(train.sum()), n_test=int(test.sum()),
                 train=r.accuracy["train"], test=float(correct[test].mean()),
                 converged=r.converged, stop=r.stopped_by,
                 gradient=r.gradient, epochs_run=r.n_epochs)
        )  # fmt: skip
    return correct, pd.DataFrame(rows)


def seen_labels(y, y_train) -> np.ndarray:
    """Which words have a gold label that occurs among the training labels.

    A label the probe never saw in training (French ``cop``, ``fixed``, ``flat`` under the
    English DEP labels) cannot be predicted; accuracy over the other words separates the
    label sets' mismatch from the transfer.

    Returns
    -------
    ndarray of bool, shape (n_words,)
    """
    return np.isin(np.asarray(y), np.unique(np.asarray(y_train)))
