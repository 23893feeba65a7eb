"""The :class:`Task` container: kinds, metrics, parts, and how each example is checked."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

KINDS = ("single_label", "multi_label", "regression", "token")
METRICS = ("accuracy", "balanced_accuracy", "matthews", "pearson", "macro_f1", "entity_f1")
PARTS = ("train", "validation", "test")
_METRIC_KINDS = {
    "accuracy": ("single_label",),
    "balanced_accuracy": ("single_label",),
    "matthews": ("single_label",),
    "pearson": ("regression",),
    "macro_f1": ("multi_label",),
    "entity_f1": ("token",),
}


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
    metric : {"accuracy", "balanced_accuracy", "matthews", "pearson", "macro_f1", "entity_f1"}
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
        check_label_names(self.label_names, self.kind, least=1)
        if self.kind == "token":
            _check_tags(self.label_names, "`label_names`")
        if self.kind == "regression" and self.label_names != ("score",):
            raise ValueError(
                f"a regression task has label_names ('score',), got {self.label_names}"
            )
        self._check_scored_labels()
        for part in PARTS:
            data = getattr(self, part)
            if data is None:
                if part != "validation":
                    raise ValueError(f"`{part}` is required: a pair (inputs, labels)")
                continue
            labels = _check_part(data, self.kind, len(self.label_names), f"{self.name!r} {part}")
            object.__setattr__(self, part, (list(data[0]), labels))
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


def check_label_names(
    label_names, kind: str, *, least: int | None = None, where: str = "`label_names`"
) -> tuple[str, ...]:
    """The one check of a task's label names, for every kind; returns them as a tuple.

    Non-empty, unique strings; ``"regression"``: exactly one (e.g. ``("score",)``); at
    least ``least`` of them (default: 2 for single-label and token tasks, which need a
    choice, else 1). (A :class:`Task` further needs IOB2 tags for ``"token"``: its metric
    is entity F1.)

    Raises
    ------
    ValueError, TypeError
        Naming ``where`` and the offending names.
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {list(KINDS)}, got {kind!r}")
    if isinstance(label_names, (str, bytes)) or not isinstance(label_names, Sequence):
        raise TypeError(
            f"{where} must be a list of str, got {type(label_names).__name__} {label_names!r:.60}"
        )
    names = tuple(label_names)
    bad = [n for n in names if not isinstance(n, str) or not n.strip()]
    if bad:
        raise TypeError(f"{where} must be non-empty strings, got {bad[:5]!r}")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{where} must be unique, got {dupes} more than once in {list(names)}")
    if least is None:
        least = 2 if kind in ("single_label", "token") else 1
    if kind == "regression" and len(names) != 1:
        raise ValueError(
            f"a regression task has exactly 1 label name (e.g. ['score']), got {names}"
        )
    if len(names) < least:
        raise ValueError(f"a {kind} task needs at least {least} label names, got {list(names)}")
    return names


_WANTED = {
    "single_label": "an int in range({n}) indexing `label_names`",
    "multi_label": "a multi-hot list of {n} zeros and ones",
    "regression": "a finite float",
    "token": "a list of ints in range({n}), one per word, indexing `label_names`",
}


def _index_problem(y, n: int) -> str | None:
    if isinstance(y, (bool, np.bool_)):
        return f"the bool {y}"
    if isinstance(y, (str, bytes)):
        return f"the string {y!r} (a class name: map names to their index in `label_names`)"
    if isinstance(y, (float, np.floating)):
        return f"the float {y!r}"
    if not isinstance(y, (int, np.integer)):
        return f"{type(y).__name__} {y!r:.40}"
    return None if 0 <= y < n else f"{int(y)}, outside range({n})"


def _label_value(y, kind: str, n: int, n_words: int | None):
    """``y`` as a plain Python value of ``kind``; raises ``ValueError`` saying what it is."""
    if kind == "single_label":
        problem = _index_problem(y, n)
        if problem:
            raise ValueError(problem)
        return int(y)
    if kind == "regression":
        if isinstance(y, (bool, np.bool_)) or not isinstance(y, (int, float, np.number)):
            raise ValueError(f"{type(y).__name__} {y!r:.40}")
        if not math.isfinite(float(y)):
            raise ValueError(f"the non-finite {y!r}")
        return float(y)
    if isinstance(y, (str, bytes)) or not isinstance(y, (Sequence, np.ndarray)):
        raise ValueError(f"{type(y).__name__} {y!r:.40}")
    values = list(np.asarray(y).tolist()) if isinstance(y, np.ndarray) else list(y)
    if kind == "multi_label":
        if len(values) != n:
            raise ValueError(f"a list of {len(values)} values {values!r:.60}")
        off = [v for v in values if isinstance(v, (str, bytes)) or v not in (0, 1)]
        if off:
            raise ValueError(f"{values!r:.60}, which holds {off[0]!r} (not 0 or 1)")
        return [int(v) for v in values]
    if n_words is not None and len(values) != n_words:
        raise ValueError(f"a list of {len(values)} tags for {n_words} words")
    for v in values:
        problem = _index_problem(v, n)
        if problem:
            raise ValueError(f"a tag that is {problem}")
    return [int(v) for v in values]


def check_labels(labels, kind: str, n_labels: int, inputs=None, where: str = "labels") -> list:
    """The one label validator of every task kind: labels as plain Python values.

    Nothing is coerced: ``0.7`` is not class 0, ``[0.6, 0.4]`` is not multi-hot, and a
    class name is not its index.

    Parameters
    ----------
    labels : sequence, length n
        ``"single_label"``: ints in ``range(n_labels)``; ``"multi_label"``: multi-hot
        sequences of ``n_labels`` zeros and ones; ``"regression"``: finite floats;
        ``"token"``: per input, a list of ints in ``range(n_labels)``, one per word.
    kind : {"single_label", "multi_label", "regression", "token"}
    n_labels : int
    inputs : sequence, optional
        The inputs (word lists for ``"token"``): the tag count must match the word count.
    where : str
        Names the labels in messages (e.g. ``"task 'rte' labels"``).

    Returns
    -------
    list
        ``int``, ``list of int`` or ``float`` per label (JSON-able; equal labels hash
        equally whatever their numpy types).

    Raises
    ------
    ValueError
        Naming the first bad label, its position, and what ``kind`` takes.
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {list(KINDS)}, got {kind!r}")
    if isinstance(labels, (str, bytes)) or not isinstance(labels, (Sequence, np.ndarray)):
        raise TypeError(f"{where} must be a list, got {type(labels).__name__}")
    out = []
    for i, y in enumerate(labels):
        n_words = None
        if kind == "token" and inputs is not None and i < len(inputs):
            n_words = len(inputs[i])
        try:
            out.append(_label_value(y, kind, n_labels, n_words))
        except ValueError as err:
            wanted = _WANTED[kind].format(n=n_labels)
            raise ValueError(f"{where}[{i}] is {err}; a {kind} label is {wanted}") from None
    return out


def _is_text(x) -> bool:
    if isinstance(x, str):
        return True
    return isinstance(x, (tuple, list)) and len(x) == 2 and all(isinstance(s, str) for s in x)


def _check_part(data, kind: str, n_labels: int, where: str) -> list:
    """Check one part's inputs and labels; return the labels as :func:`check_labels` does."""
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise ValueError(f"{where} must be a pair (inputs, labels), got {type(data).__name__}")
    inputs, labels = data
    if isinstance(inputs, str) or isinstance(labels, str):
        raise ValueError(f"{where}: inputs and labels must be lists, not a single string")
    if len(inputs) != len(labels):
        raise ValueError(f"{where} has {len(inputs)} inputs but {len(labels)} labels")
    for i, x in enumerate(inputs):
        problem = _input_problem(x, kind)
        if problem:
            raise ValueError(f"{where} example {i}: {problem}")
    return check_labels(labels, kind, n_labels, inputs, where=f"{where} labels")


def _input_problem(x, kind: str) -> str | None:
    if kind == "token":
        if isinstance(x, str) or not all(isinstance(w, str) for w in x):
            return f"a token task's input is a list of words, got {x!r:.80}"
        return None
    if not _is_text(x):
        return f"an input is a string or a pair of strings, got {x!r:.80}"
    return None
