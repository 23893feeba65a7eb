"""Scoring a task: predictions from logits per kind, then the task's metric; baselines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lmsim.tasks._entity_types import map_entity_types
from lmsim.tasks._metrics import (
    accuracy,
    balanced_accuracy,
    entity_f1,
    matthews_corrcoef,
    multilabel_macro_f1,
    pearson,
)
from lmsim.tasks._task import KINDS, Task


def predict(kind: str, logits, label_names: Sequence[str] | None = None):
    """Predictions from logits, per kind.

    Parameters
    ----------
    kind : {"single_label", "multi_label", "regression", "token"}
    logits : ndarray of shape (n, n_labels), or (token) a list of (n_words_i, n_labels)
    label_names : sequence of str
        Required for ``token``: the tags of the logits' columns.

    Returns
    -------
    ndarray of int (n,) | ndarray of 0/1 (n, n_labels) | ndarray of float (n,) | list of lists of str
        argmax; ``logit > 0``; ``logits[:, 0]``; per word the argmax tag, ``"O"`` for NaN rows
        (words cut off by truncation).
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {list(KINDS)}, got {kind!r}")
    if kind == "token":
        if label_names is None:
            raise ValueError("token predictions need `label_names`, the tags of the logit columns")
        names = list(label_names)
        out = []
        for i, rows in enumerate(logits):
            rows = np.asarray(rows, dtype=np.float64)
            if rows.ndim != 2 or rows.shape[1] != len(names):
                raise ValueError(
                    f"token logits of example {i} must have shape (n_words, {len(names)}), "
                    f"got {rows.shape}"
                )
            cut = np.isnan(rows).any(axis=1)
            best = np.argmax(np.where(np.isnan(rows), -np.inf, rows), axis=1)
            out.append(["O" if c else names[j] for c, j in zip(cut, best)])
        return out
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 2:
        raise ValueError(f"`logits` must be 2-d (n, n_labels), got shape {logits.shape}")
    if np.isnan(logits).any():
        raise ValueError("`logits` of a sequence task hold NaN; check the model's outputs")
    if kind == "single_label":
        return np.argmax(logits, axis=1)
    if kind == "multi_label":
        return (logits > 0).astype(np.int64)
    if logits.shape[1] != 1:
        raise ValueError(f"regression logits must have shape (n, 1), got {logits.shape}")
    return logits[:, 0]


def _gold(task: Task, part: str, labels):
    if labels is None:
        return task.subset(part)[1]
    return list(labels)


def score_predictions(task: Task, predictions, part: str = "test", *, labels=None) -> float:
    """The task's metric of predictions (as :func:`predict` returns them) against gold labels.

    Parameters
    ----------
    task : Task
    predictions : see :func:`predict`; token predictions are tag strings.
    part : {"train", "validation", "test"}
        Whose gold labels, when ``labels`` is None.
    labels : sequence, optional
        Gold labels in the task's encoding (e.g. of a subset of ``part``).

    Returns
    -------
    float
        ``task.metric``; macro-F1 over ``task.scored_labels``, entity F1 over its types.
    """
    gold = _gold(task, part, labels)
    if len(predictions) != len(gold):
        raise ValueError(f"{len(predictions)} predictions but {len(gold)} gold labels")
    if task.metric == "accuracy":
        return accuracy(predictions, gold)
    if task.metric == "balanced_accuracy":
        return balanced_accuracy(predictions, gold)
    if task.metric == "matthews":
        return matthews_corrcoef(predictions, gold)
    if task.metric == "pearson":
        return pearson(
            np.asarray(predictions, dtype=np.float64), np.asarray(gold, dtype=np.float64)
        )
    if task.metric == "macro_f1":
        scored = task.scored_labels or task.label_names
        classes = [task.label_names.index(name) for name in scored]
        return multilabel_macro_f1(np.asarray(predictions), np.asarray(gold), classes)
    gold_tags = [[task.label_names[t] for t in sentence] for sentence in gold]
    return entity_f1([list(p) for p in predictions], gold_tags, task.scored_labels)


def score(
    task: Task,
    logits,
    part: str = "test",
    *,
    labels=None,
    type_map: Mapping[str, str] | None = None,
    label_names: Sequence[str] | None = None,
) -> float:
    """Score logits on a task: predictions per kind (:func:`predict`), then ``task.metric``.

    Parameters
    ----------
    task : Task
    logits : ndarray of shape (n, L), or (token) a list of (n_words_i, L) arrays
        In the order of ``part``'s examples (or of ``labels``).
    part : {"train", "validation", "test"}
    labels : sequence, optional
        Gold labels to score against instead of ``part``'s (e.g. a subset's).
    type_map : mapping of str to str, optional
        Token tasks: rename the *predicted* tags' entity types into the gold set's before
        scoring (:func:`map_entity_types`), e.g. :data:`ONTONOTES_TO_CONLL` to score an
        OntoNotes model on CoNLL-2003; unmapped types become ``"O"``.
    label_names : sequence of str, optional
        Names of the logits' columns when the model's label set is not the task's (an
        OntoNotes tagger scored on CoNLL); default ``task.label_names``.

    Returns
    -------
    float
    """
    names = tuple(task.label_names if label_names is None else label_names)
    if task.kind == "token":
        if len(logits) and np.asarray(logits[0]).shape[-1] != len(names):
            hint = "" if label_names is not None else "; pass `label_names=` the model's tags"
            raise ValueError(
                f"token logits have {np.asarray(logits[0]).shape[-1]} columns but "
                f"{len(names)} label names{hint}"
            )
        tags = predict("token", logits, names)
        if type_map is not None:
            tags = map_entity_types(tags, type_map)
        else:
            foreign = {t for sentence in tags for t in sentence} - set(task.label_names)
            if foreign:
                raise ValueError(
                    f"predicted tags {sorted(foreign)[:5]} are not in task {task.name!r}'s tag "
                    f"set; pass `type_map=` to rename the model's entity types"
                )
        return score_predictions(task, tags, part, labels=labels)
    if type_map is not None:
        raise ValueError("`type_map` applies to token tasks only")
    arr = np.asarray(logits)
    if arr.ndim != 2 or arr.shape[1] != len(names):
        raise ValueError(
            f"`logits` must have shape (n, {len(names)}) for task {task.name!r}, got {arr.shape}"
        )
    if label_names is not None and tuple(label_names) != task.label_names:
        raise ValueError(
            f"`label_names` {list(label_names)} differ from the task's {list(task.label_names)}; "
            "sequence tasks score logits in the task's own label order"
        )
    return score_predictions(task, predict(task.kind, arr), part, labels=labels)


def baseline_score(task: Task, part: str = "test") -> float:
    """Score of the trivial predictor learnt from the training part.

    ``single_label``: the majority training class; ``multi_label``: each label's majority
    training value; ``regression``: the training mean (Pearson 0 by convention);
    ``token``: every word ``"O"`` (entity F1 0).

    Parameters
    ----------
    task : Task
    part : {"train", "validation", "test"}

    Returns
    -------
    float
    """
    _, gold = task.subset(part)
    train = task.train[1]
    if not train and task.kind != "token":
        raise ValueError(
            f"task {task.name!r} has no training examples to learn a baseline from "
            "(a test-only set); score the baseline of the task the model was trained on"
        )
    n = len(gold)
    if task.kind == "single_label":
        majority = int(np.bincount(np.asarray(train), minlength=task.n_labels).argmax())
        predictions = np.full(n, majority)
    elif task.kind == "multi_label":
        majority = (np.asarray(train).mean(axis=0) > 0.5).astype(np.int64)
        predictions = np.tile(majority, (n, 1))
    elif task.kind == "regression":
        predictions = np.full(n, float(np.mean(train)))
    else:
        predictions = [["O"] * len(sentence) for sentence in gold]
    return score_predictions(task, predictions, part)
