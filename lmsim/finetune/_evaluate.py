"""Evaluating a fine-tuned classifier: its logits, accuracy and the majority baseline."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch import nn

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
