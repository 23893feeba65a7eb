"""Evaluating a fine-tuned classifier: its logits, accuracy, the majority baseline and the
accuracy gap between two settings over fine-tuning seeds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch import nn

from lmsim import stats
from lmsim.extract import extract_logits


def predict_logits(
    model: nn.Module,
    tokenizer,
    inputs: Sequence,
    *,
    max_length: int = 64,
    batch_size: int = 64,
    kind: str | None = None,
):
    """Logits of a fine-tuned classifier, float64.

    Parameters
    ----------
    model : nn.Module
        A sequence or token classifier (:func:`load_finetuned`).
    tokenizer : tokenizer
    inputs : sequence, length n
        Texts or ``(str, str)`` pairs; lists of words for a token classifier.
    max_length : int
        Truncation, as in training.
    batch_size : int
    kind : str, optional
        Default: the model's (its class, then ``config.problem_type``).

    Returns
    -------
    ndarray of shape (n, n_labels) for sequence kinds (regression: (n, 1)); for ``"token"``
    a list of n arrays of shape (n_words_i, n_labels), the first sub-word's logits per word,
    NaN rows for words cut off by truncation.
    """
    return extract_logits(
        model, tokenizer, inputs, kind=kind, max_length=max_length, batch_size=batch_size
    )


def accuracy(logits, labels) -> float:
    """Share of rows whose argmax is the label."""
    logits, labels = np.asarray(logits), np.asarray(labels)
    if logits.ndim != 2 or len(logits) != len(labels):
        raise ValueError(
            f"`logits` must be (n, n_labels) with one row per label, got {logits.shape} and "
            f"{labels.shape}"
        )
    return float((logits.argmax(1) == labels).mean())


def majority_baseline(train_labels, test_labels) -> float:
    """Test accuracy of always predicting the most frequent training label."""
    train_labels = np.asarray(train_labels)
    majority = np.bincount(train_labels).argmax()
    return float((np.asarray(test_labels) == majority).mean())


def accuracy_gap(
    correct_a, correct_b, *, seeds: str = "summary", n_boot: int = 2000, level: float = 0.95
):
    """Accuracy of setting A minus setting B, judged over fine-tuning seeds when there are
    several (Wu et al. 2020, Table 1: accuracy change from freezing layers).

    Parameters
    ----------
    correct_a, correct_b : array_like of shape (n_seeds, n_test) or (n_test,)
        0/1 correctness of each test example, one row per fine-tuning seed; row ``s`` of A
        and of B share seed ``s`` (head initialisation and batch order) and the test set.
    seeds : {"summary", "min"}
        ``"summary"``: with two or more seeds, :func:`lmsim.stats.seed_summary` of the
        per-seed differences ``mean(A_s) - mean(B_s)`` (``values`` holds them; a t interval
        over ``"fine-tuning seeds"``). ``"min"``: the seed with the smallest difference,
        its interval over the test examples (paired): "A beats B at every seed" is this
        with the rule ``"> 0"``. With one seed both are the paired bootstrap over the
        test examples (the seed spread is then not measured).
    n_boot, level
        As in :func:`lmsim.stats.paired_bootstrap`.

    Returns
    -------
    Estimate
    """
    a = np.atleast_2d(np.asarray(correct_a, dtype=np.float64))
    b = np.atleast_2d(np.asarray(correct_b, dtype=np.float64))
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(
            f"`correct_a` and `correct_b` must both be (n_seeds, n_test), got {a.shape} and "
            f"{b.shape}"
        )
    if seeds not in ("summary", "min"):
        raise ValueError(f"`seeds` must be 'summary' or 'min', got {seeds!r}")
    if len(a) > 1 and seeds == "summary":
        return stats.seed_summary(a.mean(1) - b.mean(1), level=level, unit="fine-tuning seeds")
    s = int(np.argmin(a.mean(1) - b.mean(1)))
    return stats.paired_bootstrap(a[s], b[s], unit="test examples", n_boot=n_boot, level=level)
