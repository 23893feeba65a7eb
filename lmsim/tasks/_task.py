"""The :class:`Task` container: kinds, metrics, parts, and how each example is checked."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

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
