"""The cross-lingual page's controls: a kept share matched to the thesis's, a French
in-language reference, and labels the English training set never has.

The thesis compares its clustering's cost at τ = 0.3 (its Tables B.1-B.2), where mBERT keeps
18 % of its neurons (Table A.3); the same τ keeps 78 % of Gemma-3-270M's (issue 44, D6), so a
comparison at equal τ is a comparison at very different downsizing. This module finds the
cut whose kept share is closest to the thesis's (:func:`closest_share`), with random subsets
of the same size beside it (:func:`matched_columns`), so the loss is separated from the size.
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

from collections.abc import Mapping

import numpy as np
import pandas as pd

from lmsim.papers.thesis2022_redundancy.subset_controls import same_size_subset, uniform_subset
from lmsim.probe import train_probe

__all__ = [
    "TABLE_A3_MBERT",
    "thesis_kept_share",
    "closest_share",
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


def closest_share(sizes: Mapping[float, int], n_neurons: int, target: float) -> float:
    """The τ whose kept share ``sizes[τ] / n_neurons`` is closest to ``target``.

    Parameters
    ----------
    sizes : mapping of float to int
        Kept neurons at every τ of a grid (e.g. of :func:`cluster_cuts`).
    n_neurons : int
        All neurons.
    target : float
        The share to match, in (0, 1] (:func:`thesis_kept_share`).

    Returns
    -------
    float
        That τ; a tie goes to the smaller τ (the larger kept set).
    """
    if not sizes:
        raise ValueError("`sizes` must name at least one τ")
    if not 0 < target <= 1:
        raise ValueError(f"`target` must be a share in (0, 1], got {target!r}")
    return min(sorted(sizes), key=lambda t: abs(sizes[t] / int(n_neurons) - target))


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
                 converged=r.converged, stop=_stop(r),
                 gradient=r.gradient, epochs_run=r.n_epochs)
        )  # fmt: skip
    return correct, pd.DataFrame(rows)


def _stop(r) -> str:
    """Which rule stopped a probe: L-BFGS's reason, or Adam's rule / epoch limit."""
    return r.stop_reason or ("rule" if r.converged else "max epochs")


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
