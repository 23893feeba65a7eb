"""Tasks of every kind and their metrics: what a fine-tuned or merged model is scored on.

A :class:`Task` holds the inputs and labels of its parts (train, optional validation, test),
its kind and its metric. The kinds (``KINDS``) fix how labels and logits look:

``single_label``
    An ``int`` in ``range(n_labels)`` per example; logits ``(n, n_labels)``; argmax.
``multi_label``
    A multi-hot sequence of ``n_labels`` 0/1 per example; logits ``(n, n_labels)``; a label
    is predicted when its logit is > 0 (probability > 0.5).
``regression``
    A float per example, ``label_names == ("score",)``; logits ``(n, 1)``.
``token``
    Inputs are word lists, labels one int per word indexing IOB2 tags (``"O"``,
    ``"B-PER"``, ``"I-PER"``, ...); logits a list of ``(n_words_i, n_labels)`` arrays, one
    per example, NaN rows for words cut off by truncation (predicted ``"O"``).

Inputs of sequence kinds are strings or pairs ``(str, str)``. Metrics (``METRICS``) are the
paper's (Jin et al. 2023, App. B): accuracy, Matthews correlation (CoLA), Pearson
correlation (STS-B), macro-F1 over the annotated emotions, and CoNLL entity F1 (NER).
Pure numpy: nothing here touches models, disk or the hub.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "KINDS",
    "METRICS",
    "PARTS",
    "ONTONOTES_TO_CONLL",
    "Task",
    "accuracy",
    "matthews_corrcoef",
    "pearson",
    "multilabel_macro_f1",
    "entity_chunks",
    "entity_f1",
    "map_entity_types",
    "map_task_entity_types",
    "predict",
    "score",
    "score_predictions",
    "baseline_score",
]

KINDS = ("single_label", "multi_label", "regression", "token")
METRICS = ("accuracy", "matthews", "pearson", "macro_f1", "entity_f1")
PARTS = ("train", "validation", "test")
_METRIC_KINDS = {
    "accuracy": ("single_label",),
    "matthews": ("single_label",),
    "pearson": ("regression",),
    "macro_f1": ("multi_label",),
    "entity_f1": ("token",),
}

# OntoNotes entity types as the paper's released code scores them on CoNLL-2003 and Twitter
# NER (after Wang et al. 2020, "Multi-domain NER with genre-aware and agnostic inference"):
# PERSON -> PER, ORG -> ORG, and GPE, LOC and FAC -> LOC; every other type becomes "O".
ONTONOTES_TO_CONLL: dict[str, str] = {
    "PERSON": "PER",
    "ORG": "ORG",
    "GPE": "LOC",
    "LOC": "LOC",
    "FAC": "LOC",
}


# --------------------------------------------------------------------------------------
# Task
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """A labelled task: its kind, label names, metric and parts.

    Attributes
    ----------
    name : str
        What :func:`lmsim.data.load_task` was given (``"hf:glue:rte"``, ``"smoke-ner#a"``).
    kind : {"single_label", "multi_label", "regression", "token"}
    label_names : tuple of str
        Class names, emotion names, ``("score",)`` or IOB2 tags; ``n_labels`` of them.
    metric : {"accuracy", "matthews", "pearson", "macro_f1", "entity_f1"}
    train, test : tuple (inputs, labels)
        Two lists of the same length (``train`` may be empty for a test-only set).
    validation : tuple (inputs, labels) or None
    scored_labels : tuple of str or None
        ``macro_f1``: the label names averaged over; ``entity_f1``: the entity types scored
        (``"PER"``, not ``"B-PER"``). None scores all.
    info : mapping
        Source, sizes and notes (free-form, for the reader).
    """

    name: str
    kind: str
    label_names: tuple[str, ...]
    metric: str
    train: tuple[list, list]
    test: tuple[list, list]
    validation: tuple[list, list] | None = None
    scored_labels: tuple[str, ...] | None = None
    info: Mapping = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "label_names", tuple(self.label_names))
        if self.scored_labels is not None:
            object.__setattr__(self, "scored_labels", tuple(self.scored_labels))
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {list(KINDS)}, got {self.kind!r}")
        if self.metric not in _METRIC_KINDS:
            raise ValueError(f"`metric` must be one of {list(METRICS)}, got {self.metric!r}")
        if self.kind not in _METRIC_KINDS[self.metric]:
            raise ValueError(
                f"metric {self.metric!r} scores {list(_METRIC_KINDS[self.metric])} tasks, "
                f"not {self.kind!r}; choose one of "
                f"{[m for m, kinds in _METRIC_KINDS.items() if self.kind in kinds]}"
            )
        if not self.label_names or len(set(self.label_names)) != len(self.label_names):
            raise ValueError(f"`label_names` must be non-empty and unique, got {self.label_names}")
        if self.kind == "regression" and self.label_names != ("score",):
            raise ValueError(
                f"a regression task has label_names ('score',), got {self.label_names}"
            )
        if self.kind == "token":
            _check_tags(self.label_names, "`label_names`")
        self._check_scored_labels()
        for part in PARTS:
            data = getattr(self, part)
            if data is None:
                if part != "validation":
                    raise ValueError(f"`{part}` is required: a pair (inputs, labels)")
                continue
            _check_part(data, self.kind, len(self.label_names), f"{self.name!r} {part}")
            object.__setattr__(self, part, (list(data[0]), list(data[1])))
        if not self.test[0]:
            raise ValueError(f"task {self.name!r} has an empty test part")

    def _check_scored_labels(self):
        if self.scored_labels is None:
            return
        if self.metric == "macro_f1":
            known = self.label_names
        elif self.metric == "entity_f1":
            known = tuple(dict.fromkeys(t[2:] for t in self.label_names if t != "O"))
        else:
            raise ValueError(
                f"`scored_labels` applies to macro_f1 and entity_f1 tasks, not {self.metric!r}"
            )
        unknown = [s for s in self.scored_labels if s not in known]
        if unknown or not self.scored_labels:
            raise ValueError(
                f"`scored_labels` {list(self.scored_labels)} must be a non-empty subset of "
                f"{list(known)}; unknown: {unknown}"
            )

    @property
    def n_labels(self) -> int:
        """Number of label columns of the task's head (``len(label_names)``)."""
        return len(self.label_names)

    @property
    def parts(self) -> tuple[str, ...]:
        """The parts this task has, in ``PARTS`` order."""
        return tuple(p for p in PARTS if getattr(self, p) is not None)

    def subset(self, part: str = "train", idx: Sequence[int] | None = None) -> tuple[list, list]:
        """Inputs and labels of ``part``, or of the examples ``idx`` of it (in that order).

        Parameters
        ----------
        part : {"train", "validation", "test"}
        idx : sequence of int, optional
            Positions in the part; None returns the whole part (new lists).

        Returns
        -------
        inputs, labels : list
        """
        if part not in PARTS:
            raise ValueError(f"`part` must be one of {list(PARTS)}, got {part!r}")
        data = getattr(self, part)
        if data is None:
            raise ValueError(f"task {self.name!r} has no {part!r} part; it has {list(self.parts)}")
        inputs, labels = data
        if idx is None:
            return list(inputs), list(labels)
        idx = [int(i) for i in idx]
        bad = [i for i in idx if not 0 <= i < len(inputs)]
        if bad:
            raise IndexError(
                f"`idx` holds positions outside {part!r} (0..{len(inputs) - 1}): {bad[:5]}"
            )
        return [inputs[i] for i in idx], [labels[i] for i in idx]

    def sample(self, part: str = "train", n: int | None = None, seed: int = 0) -> tuple[list, list]:
        """A seeded uniform sample of ``n`` examples of ``part`` without replacement.

        Parameters
        ----------
        part : {"train", "validation", "test"}
        n : int, optional
            Sample size; None or more than the part holds returns the whole part.
        seed : int

        Returns
        -------
        inputs, labels : list
            In the part's order.
        """
        size = len(self.subset(part)[0])
        if n is not None and n < 1:
            raise ValueError(f"`n` must be a positive int or None, got {n}")
        if n is None or n >= size:
            return self.subset(part)
        idx = np.sort(np.random.default_rng(seed).choice(size, n, replace=False))
        return self.subset(part, idx.tolist())

    def with_parts(self, **parts) -> Task:
        """A copy with some parts replaced, e.g. ``task.with_parts(train=task.subset("train", a))``.

        Keyword arguments are ``train``, ``validation`` (None drops it) and ``test``, each a
        pair ``(inputs, labels)``; the copy is validated like a new task.
        """
        unknown = set(parts) - set(PARTS)
        if unknown:
            raise TypeError(f"unknown parts {sorted(unknown)}; parts are {list(PARTS)}")
        return dataclasses.replace(self, **parts)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{p}={len(getattr(self, p)[0])}" for p in self.parts)
        return (
            f"Task({self.name!r}, kind={self.kind!r}, metric={self.metric!r}, "
            f"n_labels={self.n_labels}, {sizes})"
        )


def _check_tags(tags: Sequence[str], what: str) -> None:
    bad = [t for t in tags if not (t == "O" or (t[:2] in ("B-", "I-") and len(t) > 2))]
    if bad:
        raise ValueError(f"{what} must be IOB2 tags ('O', 'B-<type>', 'I-<type>'), got {bad[:5]}")


def _is_text(x) -> bool:
    if isinstance(x, str):
        return True
    return isinstance(x, (tuple, list)) and len(x) == 2 and all(isinstance(s, str) for s in x)


def _check_part(data, kind: str, n_labels: int, where: str) -> None:
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise ValueError(f"{where} must be a pair (inputs, labels), got {type(data).__name__}")
    inputs, labels = data
    if isinstance(inputs, str) or isinstance(labels, str):
        raise ValueError(f"{where}: inputs and labels must be lists, not a single string")
    if len(inputs) != len(labels):
        raise ValueError(f"{where} has {len(inputs)} inputs but {len(labels)} labels")
    for i, (x, y) in enumerate(zip(inputs, labels)):
        problem = _example_problem(x, y, kind, n_labels)
        if problem:
            raise ValueError(f"{where} example {i}: {problem}")


def _example_problem(x, y, kind: str, n_labels: int) -> str | None:
    if kind == "token":
        if isinstance(x, str) or not all(isinstance(w, str) for w in x):
            return f"a token task's input is a list of words, got {x!r:.80}"
        if len(y) != len(x):
            return f"{len(x)} words but {len(y)} tags"
        if not all(_is_index(t, n_labels) for t in y):
            return f"tags must be ints in range({n_labels}), got {list(y)!r:.80}"
        return None
    if not _is_text(x):
        return f"an input is a string or a pair of strings, got {x!r:.80}"
    if kind == "single_label" and not _is_index(y, n_labels):
        return f"the label must be an int in range({n_labels}), got {y!r}"
    if kind == "multi_label":
        if isinstance(y, str) or len(y) != n_labels or any(v not in (0, 1) for v in y):
            return f"the label must be {n_labels} zeros and ones (multi-hot), got {y!r:.80}"
    if kind == "regression":
        if isinstance(y, bool) or not isinstance(y, (int, float, np.number)):
            return f"the label must be a float, got {y!r}"
        if not math.isfinite(float(y)):
            return f"the label must be finite, got {y!r}"
    return None


def _is_index(y, n: int) -> bool:
    return isinstance(y, (int, np.integer)) and not isinstance(y, bool) and 0 <= y < n


# --------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------


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


def map_entity_types(tags, mapping: Mapping[str, str]):
    """Rename entity types in IOB2 tags; types absent from ``mapping`` become ``"O"``.

    Parameters
    ----------
    tags : sequence of str, or sequence of sequences of str
        One sentence's tags or a list of sentences.
    mapping : mapping of str to str
        Old type to new type, e.g. :data:`ONTONOTES_TO_CONLL` (``{"GPE": "LOC", ...}``).

    Returns
    -------
    list of str, or list of lists of str
        Same nesting as ``tags``. Two adjacent entities of types mapped to one type stay
        two entities when the second starts with ``B-``.
    """
    if len(tags) and not isinstance(tags[0], str):
        return [map_entity_types(sentence, mapping) for sentence in tags]
    out = []
    for tag in tags:
        prefix, typ = _split_tag(tag)
        new = mapping.get(typ) if prefix != "O" else None
        out.append(f"{prefix}-{new}" if new else "O")
    return out


def map_task_entity_types(task: Task, mapping: Mapping[str, str]) -> Task:
    """A token task whose tags are renamed by ``mapping`` in every part (unmapped -> ``"O"``).

    The new tag set is ``"O"`` then ``B-``/``I-`` of each new type in the order of
    ``mapping``'s values. With :data:`ONTONOTES_TO_CONLL` this is the paper's released-code
    setup: OntoNotes models trained and scored on PER, LOC and ORG only, so their heads
    match the CoNLL / Twitter test sets' types.

    Parameters
    ----------
    task : Task
        ``kind="token"``.
    mapping : mapping of str to str
        Old entity type to new type.

    Returns
    -------
    Task
        Same inputs, new ``label_names`` and labels; ``scored_labels`` mapped too.
    """
    if task.kind != "token":
        raise ValueError(f"entity types are renamed in token tasks, not {task.kind!r} ones")
    types = list(dict.fromkeys(mapping.values()))
    names = ("O", *(f"{p}-{t}" for t in types for p in "BI"))
    index = {name: i for i, name in enumerate(names)}
    parts = {}
    for part in task.parts:
        inputs, labels = task.subset(part)
        tags = map_entity_types([[task.label_names[t] for t in s] for s in labels], mapping)
        parts[part] = (inputs, [[index[t] for t in s] for s in tags])
    scored = None
    if task.scored_labels is not None:
        scored = tuple(dict.fromkeys(mapping[t] for t in task.scored_labels if t in mapping))
    return dataclasses.replace(
        task,
        label_names=names,
        scored_labels=scored or None,
        info={**task.info, "entity_types_mapped": dict(mapping)},
        **parts,
    )


# --------------------------------------------------------------------------------------
# Scoring a task
# --------------------------------------------------------------------------------------


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
