"""Baselines of a probe: control-task labels (Hewitt & Liang 2019) and the word-type lookup."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def control_labels(
    words_train: Sequence[str],
    y_train,
    *other_words: Sequence[str],
    seed: int = 0,
    lowercase: bool = False,
) -> tuple[np.ndarray, ...]:
    """Control-task labels (Hewitt & Liang 2019): one random label per word type.

    Every distinct word type of all splits gets a label drawn independently from the
    empirical distribution of ``y_train`` (over tokens), with
    ``np.random.default_rng(seed)``; every token then gets its type's label.

    Parameters
    ----------
    words_train : sequence of str, length n_train
        The word of every training row.
    y_train : array-like of int, shape (n_train,)
        Real labels (only their distribution is used).
    *other_words : sequence of str
        Words of further splits (dev, test) labelled with the same type → label map.
    seed : int
    lowercase : bool
        Fold case before grouping tokens into types.

    Returns
    -------
    tuple of ndarray of int64
        Control labels for ``words_train``, then for each of ``other_words``.
    """
    y_train = np.asarray(y_train)
    if y_train.ndim != 1 or y_train.size == 0:
        raise ValueError(
            f"`y_train` must be a non-empty 1-D array of labels (one per row of "
            f"`words_train`), got shape {y_train.shape}: the control labels are drawn from "
            "its distribution"
        )
    if len(words_train) != y_train.shape[0]:
        raise ValueError(
            f"`words_train` and `y_train` must have the same length, got "
            f"{len(words_train)} and {y_train.shape[0]}"
        )
    splits = [list(words_train), *[list(w) for w in other_words]]
    if lowercase:
        splits = [[w.lower() for w in s] for s in splits]
    values, counts = np.unique(y_train, return_counts=True)
    types = sorted(set().union(*[set(s) for s in splits]))
    rng = np.random.default_rng(seed)
    drawn = rng.choice(values, size=len(types), p=counts / counts.sum())
    label_of = dict(zip(types, drawn.tolist(), strict=True))
    return tuple(np.array([label_of[w] for w in s], dtype=np.int64) for s in splits)


def lexical_baseline(
    words_train: Sequence[str], y_train, words_test: Sequence[str], y_test
) -> float:
    """Accuracy of labelling each word with its type's most frequent training label.

    The ceiling of what word identity alone gives: a test word whose type never occurs in
    training gets the most frequent training label overall (ties: the smallest label).
    A probe below this baseline uses its features no better than a lookup table of word
    types, which is also what the control task of :func:`control_labels` rewards.

    Parameters
    ----------
    words_train, words_test : sequence of str
        The word of every row.
    y_train, y_test : array-like of int
        Labels of the same rows.

    Returns
    -------
    float
        Accuracy on the test rows.
    """
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    if len(words_train) != y_train.shape[0] or len(words_test) != y_test.shape[0]:
        raise ValueError(
            "`words_train`/`y_train` and `words_test`/`y_test` must pair up, got lengths "
            f"{len(words_train)}/{y_train.shape[0]} and {len(words_test)}/{y_test.shape[0]}"
        )
    if y_test.shape[0] == 0 or y_train.shape[0] == 0:
        raise ValueError("`y_train` and `y_test` must not be empty")
    counts: dict[str, dict[int, int]] = {}
    for w, label in zip(words_train, y_train.tolist(), strict=True):
        row = counts.setdefault(w, {})
        row[label] = row.get(label, 0) + 1
    values, totals = np.unique(y_train, return_counts=True)
    fallback = int(values[np.argmax(totals)])
    best = {w: min(row, key=lambda k: (-row[k], k)) for w, row in counts.items()}
    pred = np.array([best.get(w, fallback) for w in words_test])
    return float(np.mean(pred == y_test))
