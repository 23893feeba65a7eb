"""The paper's metrics on predictions and gold labels (Jin et al. 2023, App. B), pure numpy."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _pair(pred, gold, what: str) -> tuple[np.ndarray, np.ndarray]:
    pred, gold = np.asarray(pred), np.asarray(gold)
    if pred.shape != gold.shape:
        raise ValueError(
            f"`pred` and `gold` must have the same shape, got {pred.shape} and {gold.shape}"
        )
    if pred.size == 0:
        raise ValueError(f"{what} of no examples is undefined; pass at least one")
    return pred, gold


def accuracy(pred, gold) -> float:
    """Fraction of examples whose predicted class is the gold class.

    Parameters
    ----------
    pred, gold : array-like of int, shape (n,)

    Returns
    -------
    float in [0, 1]
    """
    pred, gold = _pair(pred, gold, "accuracy")
    return float(np.mean(pred == gold))


def balanced_accuracy(pred, gold) -> float:
    """Mean over the gold classes of each class's recall (balanced accuracy).

    ``BA = (1/|C|) Σ_{c ∈ C} #{pred = c, gold = c} / #{gold = c}`` over the classes ``C``
    present in ``gold``. A constant predictor scores ``1/|C|`` whatever the class shares (an
    always-majority predictor of a 74 %-positive set: 0.5, not 0.74), so a score above that
    floor means the model tells the classes apart.

    Parameters
    ----------
    pred, gold : array-like of int, shape (n,)

    Returns
    -------
    float in [0, 1]

    References
    ----------
    Brodersen, Ong, Stephan & Buhmann (2010), "The balanced accuracy and its posterior
    distribution", ICPR, Eq. 2 (the binary case; here its multi-class mean of recalls).
    """
    pred, gold = _pair(pred, gold, "balanced accuracy")
    classes, inverse = np.unique(gold, return_inverse=True)
    hits = np.bincount(inverse, weights=(pred == gold).astype(np.float64), minlength=len(classes))
    counts = np.bincount(inverse, minlength=len(classes))
    return float(np.mean(hits / counts))


def matthews_corrcoef(pred, gold) -> float:
    """Matthews correlation coefficient, multi-class (Gorodkin 2004), GLUE's CoLA metric.

    With the confusion matrix ``C`` (rows gold, columns predicted), ``s = n``, ``c =
    trace(C)``, ``t_k`` the gold and ``p_k`` the predicted counts of class ``k``::

        MCC = (c s - Σ_k p_k t_k) / sqrt((s² - Σ_k p_k²) (s² - Σ_k t_k²))

    which equals the binary ``(TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))``.

    Parameters
    ----------
    pred, gold : array-like of int, shape (n,)

    Returns
    -------
    float in [-1, 1]
        0.0 when the denominator is 0 (all predictions or all gold labels one class), as
        scikit-learn does.

    References
    ----------
    Gorodkin (2004), "Comparing two K-category assignments by a K-category correlation
    coefficient", Eq. 8; Jin et al. (2023), App. B.
    """
    pred, gold = _pair(pred, gold, "the Matthews correlation")
    classes, inverse = np.unique(np.concatenate([gold, pred]), return_inverse=True)
    k = len(classes)
    g, p = inverse[: len(gold)], inverse[len(gold) :]
    conf = np.zeros((k, k), dtype=np.float64)
    np.add.at(conf, (g, p), 1.0)
    t, q = conf.sum(axis=1), conf.sum(axis=0)
    s, c = conf.sum(), np.trace(conf)
    denom = (s * s - q @ q) * (s * s - t @ t)
    if denom <= 0:
        return 0.0
    return float((c * s - q @ t) / math.sqrt(denom))


def pearson(pred, gold) -> float:
    """Pearson correlation of predicted and gold scores, GLUE's STS-B metric.

    Parameters
    ----------
    pred, gold : array-like of float, shape (n,)

    Returns
    -------
    float in [-1, 1]
        0.0 when either vector is constant (no linear association can be measured; e.g.
        the training-mean baseline), where the formula divides by zero.
    """
    pred, gold = _pair(pred, gold, "a Pearson correlation")
    x = pred.astype(np.float64) - pred.mean(dtype=np.float64)
    y = gold.astype(np.float64) - gold.mean(dtype=np.float64)
    denom = math.sqrt(float(x @ x) * float(y @ y))
    if denom == 0.0:
        return 0.0
    return float(np.clip((x @ y) / denom, -1.0, 1.0))


def multilabel_macro_f1(pred01, gold01, classes: Sequence[int] | None = None) -> float:
    """Macro-F1 of a multi-label task: per-class F1 averaged over ``classes``.

    Per class ``F1 = 2 TP / (2 TP + FP + FN)`` over the examples. A class with no gold and
    no predicted positives (``2 TP + FP + FN = 0``) scores 0, as scikit-learn's ``f1_score``
    does by default (``zero_division``), and as the paper's released code computes it.

    Parameters
    ----------
    pred01, gold01 : array-like of 0/1, shape (n, n_labels)
    classes : sequence of int, optional
        Columns averaged over (the emotions a dataset annotates); None = all.

    Returns
    -------
    float in [0, 1]

    References
    ----------
    Jin et al. (2023), App. B: "Macro-F1 of all classes that present in the dataset".
    """
    pred, gold = _pair(pred01, gold01, "a macro-F1")
    if pred.ndim != 2:
        raise ValueError(f"`pred01` must be 2-d (n, n_labels), got shape {pred.shape}")
    if not (np.isin(pred, (0, 1)).all() and np.isin(gold, (0, 1)).all()):
        raise ValueError("`pred01` and `gold01` must hold only 0 and 1")
    cols = list(range(pred.shape[1])) if classes is None else [int(c) for c in classes]
    if not cols or any(not 0 <= c < pred.shape[1] for c in cols):
        raise ValueError(
            f"`classes` must be a non-empty list of columns < {pred.shape[1]}, got {cols}"
        )
    pred, gold = pred[:, cols].astype(bool), gold[:, cols].astype(bool)
    tp = (pred & gold).sum(axis=0)
    fp = (pred & ~gold).sum(axis=0)
    fn = (~pred & gold).sum(axis=0)
    denom = 2 * tp + fp + fn
    f1 = np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0)
    return float(f1.mean())


def _split_tag(tag: str) -> tuple[str, str]:
    if tag == "O":
        return "O", ""
    if tag[:2] in ("B-", "I-") and len(tag) > 2:
        return tag[0], tag[2:]
    raise ValueError(f"not an IOB2 tag: {tag!r}; tags are 'O', 'B-<type>' or 'I-<type>'")


def entity_chunks(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """Entity spans of one IOB2-tagged sentence, as conlleval reads them.

    A chunk starts at ``B-x``, and at ``I-x`` after ``O`` or after a tag of another type
    (conlleval's repair of ill-formed IOB2); it ends before ``O``, ``B-*`` or a tag of
    another type.

    Parameters
    ----------
    tags : sequence of str

    Returns
    -------
    list of (start, end, type)
        ``end`` exclusive, in sentence order.
    """
    chunks = []
    start, kind = None, ""
    for i, tag in enumerate(tags):
        prefix, typ = _split_tag(tag)
        if start is not None and (prefix in ("O", "B") or typ != kind):
            chunks.append((start, i, kind))
            start = None
        if prefix == "B" or (prefix == "I" and start is None):
            start, kind = i, typ
    if start is not None:
        chunks.append((start, len(tags), kind))
    return chunks


def entity_f1(
    pred_tags: Sequence[Sequence[str]],
    gold_tags: Sequence[Sequence[str]],
    types: Sequence[str] | None = None,
) -> float:
    """Chunk-level micro F1 of named entities, conlleval's FB1 (as a fraction).

    A predicted entity counts only when a gold entity has exactly its boundaries and type.
    ``F1 = 2 P R / (P + R)`` with ``P = correct / predicted`` and ``R = correct / gold``
    summed over all sentences; 0 when nothing is correct.

    Parameters
    ----------
    pred_tags, gold_tags : sequence of sequences of str
        IOB2 tags, one list per sentence, the same lengths.
    types : sequence of str, optional
        Entity types scored (``"PER"``); entities of other types, predicted or gold, are
        ignored. None scores all.

    Returns
    -------
    float in [0, 1]

    References
    ----------
    Tjong Kim Sang & De Meulder (2003), the CoNLL-2003 shared task's conlleval script.
    """
    if len(pred_tags) != len(gold_tags):
        raise ValueError(
            f"`pred_tags` and `gold_tags` must hold the same number of sentences, "
            f"got {len(pred_tags)} and {len(gold_tags)}"
        )
    keep = None if types is None else set(types)
    n_pred = n_gold = n_correct = 0
    for i, (p, g) in enumerate(zip(pred_tags, gold_tags)):
        if isinstance(p, str) or isinstance(g, str):
            raise ValueError("each sentence's tags must be a list of tags, not a string")
        if len(p) != len(g):
            raise ValueError(f"sentence {i}: {len(p)} predicted tags but {len(g)} gold tags")
        pc = {c for c in entity_chunks(p) if keep is None or c[2] in keep}
        gc = {c for c in entity_chunks(g) if keep is None or c[2] in keep}
        n_pred, n_gold, n_correct = n_pred + len(pc), n_gold + len(gc), n_correct + len(pc & gc)
    if n_correct == 0:
        return 0.0
    precision, recall = n_correct / n_pred, n_correct / n_gold
    return 2 * precision * recall / (precision + recall)
