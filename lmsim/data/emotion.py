"""Bostan & Klinger's unified emotion collection: one source as a multi-label task.

Reads ``unified-dataset.jsonl`` (JSON only, nothing executed) and splits it as Jin et al.
(2023) do: seeded 70 / 10 / 20 for the in-domain sources, all rows as test for the
out-of-domain ones.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from lmsim._dryrun import dry_run
from lmsim._io import utf8_lines
from lmsim.tasks import Task

# The unified collection's fixed emotion list (Bostan & Klinger 2018, create_unified_dataset):
# every emotion model shares one head of this shape.
EMOTIONS = (
    "joy", "anger", "sadness", "disgust", "fear", "trust", "surprise", "love", "noemo",
    "confusion", "anticipation", "shame", "guilt",
)  # fmt: skip
EMOTION_SOURCES_IN_DOMAIN = ("dailydialog", "crowdflower", "tec", "tales-emotion", "isear")
EMOTION_SOURCES_OOD = ("emoint", "ssec", "electoraltweets", "grounded_emotions", "affectivetext")
# The six emotions every paper source has; out-of-domain macro-F1 averages over these.
EMOTIONS_OOD = ("anger", "disgust", "fear", "joy", "sadness", "surprise")
# An emotion value counts as present above this (the released code's threshold; intensities
# such as AffectiveText's are fractions of 1).
_EMOTION_THRESHOLD = 0.1


def _split_70_10_20(n: int, seed: int) -> dict[str, list[int]]:
    """Seeded train / validation / test positions cut at ``⌊0.7 n⌋`` and ``⌊0.8 n⌋``.

    Integer arithmetic: these cuts reproduce the sizes of Jin et al. (2023)'s Table 4.
    """
    order = np.random.default_rng(seed).permutation(n).tolist()
    a, b = n * 7 // 10, n * 8 // 10
    return {"train": order[:a], "validation": order[a:b], "test": order[b:]}


def _emotion_value(value, where: str) -> int:
    """1 when an emotion value is present (> 0.1), 0 when not or null; anything but a
    number raises naming ``where`` (the file, line and emotion)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{where} is {value!r}; emotion values are numbers (or null)")
    return int(value > _EMOTION_THRESHOLD)


_SPLITS = {"train": "train", "dev": "validation", "validation": "validation"}
_SPLITS |= {"trial": "validation", "test": "test"}


def emotion_task(path: str | os.PathLike, source: str, seed: int = 0) -> Task:
    """One source of Bostan & Klinger's unified emotion collection as a multi-label task.

    The file is ``unified-dataset.jsonl`` as ``create_unified_dataset.py`` writes it: one JSON
    object per line with ``source``, ``text``, ``emotions`` ({emotion: value or null}) and
    ``split`` (often null or absent). Only JSON is read; nothing is executed.

    Labels are multi-hot over the collection's fixed :data:`EMOTIONS` (one head shape for
    every model); a value counts when > 0.1 (the paper's released code's threshold; some
    sources give intensities), null as 0. ``scored_labels`` are the emotions the source
    annotates (non-null), and for the out-of-domain sources of :data:`EMOTION_SOURCES_OOD`
    only those among anger, disgust, fear, joy, sadness, surprise (App. B).

    Splits: the paper's in-domain sources (:data:`EMOTION_SOURCES_IN_DOMAIN`) and any
    source without ``split`` values get a seeded 70 / 10 / 20 train / validation / test
    split (cut at ``⌊0.7 n⌋`` and ``⌊0.8 n⌋``, which gives Table 4's sizes exactly when
    ``n`` matches); the out-of-domain sources are test-only, all rows as test (Table 4
    counts all their rows; the released code's ``ood_all_is_test``). Other sources with
    ``split`` values keep them (``dev`` / ``trial`` / ``validation`` -> validation).

    Parameters
    ----------
    path : str or path-like
        ``unified-dataset.jsonl``.
    source : str
        E.g. ``"tec"``, ``"isear"``, ``"ssec"``.
    seed : int
        Seed of the 70 / 10 / 20 split.

    Returns
    -------
    Task
        ``kind="multi_label"``, ``metric="macro_f1"``. ``info["annotated"]`` lists the
        annotated emotions: the released code leaves the others out of the loss.

    References
    ----------
    Bostan & Klinger (2018), "An analysis of annotated corpora for emotion classification
    in text"; Jin et al. (2023), App. B and Table 4.
    """
    path = Path(path)
    if not path.is_file() and dry_run():  # a generated collection stands in
        from lmsim.data._standin_sets import emotion_file

        path = emotion_file(EMOTION_SOURCES_IN_DOMAIN, EMOTION_SOURCES_OOD, EMOTIONS)
    if not path.is_file():
        raise FileNotFoundError(
            f"no emotion collection at {str(path)!r}; build unified-dataset.jsonl with "
            "https://github.com/sarnthil/unify-emotion-datasets and pass its path"
        )
    rows, sources = [], set()
    for line_no, line in utf8_lines(path):
        where = f"{str(path)!r} line {line_no}"
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where} is not JSON: {err}") from None
        if not isinstance(row, dict):
            raise ValueError(
                f"{where} is a JSON {type(row).__name__}, not an object with 'source', "
                "'text', 'emotions' and 'split'"
            )
        row["_line"] = line_no
        sources.add(row.get("source"))
        if row.get("source") == source:
            rows.append(row)
    if not rows:
        raise ValueError(
            f"source {source!r} not in {str(path)!r}; it holds {sorted(map(str, sources))}"
        )
    texts, labels, annotated, n_empty = [], [], set(), 0
    for row in rows:
        text = str(row.get("text") or "").strip()
        if not text:
            n_empty += 1
            continue
        where = f"{str(path)!r} line {row['_line']}"
        emotions = row.get("emotions") or {}
        if not isinstance(emotions, dict):
            raise ValueError(f"{where}: 'emotions' must be an object, got {emotions!r:.60}")
        unknown = set(emotions) - set(EMOTIONS)
        if unknown:
            raise ValueError(f"{where}: emotions {sorted(unknown)} are outside {EMOTIONS}")
        annotated |= {e for e, v in emotions.items() if v is not None}
        texts.append(text)
        labels.append(
            [_emotion_value(emotions.get(e), f"{where}: emotion {e!r}") for e in EMOTIONS]
        )
    annotated_names = tuple(e for e in EMOTIONS if e in annotated)
    ood = source in EMOTION_SOURCES_OOD
    scored = tuple(e for e in annotated_names if e in EMOTIONS_OOD) if ood else annotated_names
    if not scored:
        raise ValueError(f"source {source!r} annotates none of the emotions scored")
    kept = [row for row in rows if str(row.get("text") or "").strip()]
    splits = [row.get("split") or None for row in kept]
    unknown = [(row["_line"], s) for row, s in zip(kept, splits) if s and s not in _SPLITS]
    if unknown:
        line, value = unknown[0]
        raise ValueError(
            f"{str(path)!r} line {line}: split {value!r} is none of {sorted(_SPLITS)} "
            f"({len(unknown)} such rows of {source!r}); fix the value (a typo would "
            "silently put a test row in train)"
        )
    n = len(texts)
    if ood:
        idx = {"train": [], "test": list(range(n))}
        how = "all rows as test (out-of-domain source)"
    elif source in EMOTION_SOURCES_IN_DOMAIN or all(s is None for s in splits):
        idx = _split_70_10_20(n, seed)
        how = f"seeded 70/10/20 split (seed {seed})"
    else:
        idx = {"train": [], "validation": [], "test": []}
        for i, s in enumerate(splits):
            idx[_SPLITS[s] if s else "train"].append(i)
        how = "the source's own splits"
    parts = {
        p: ([texts[i] for i in v], [labels[i] for i in v])
        for p, v in idx.items()
        if v or p != "validation"
    }
    return Task(
        name=f"emotion:{path.name}#{source}",
        kind="multi_label",
        label_names=EMOTIONS,
        metric="macro_f1",
        train=parts["train"],
        validation=parts.get("validation"),
        test=parts["test"],
        scored_labels=scored,
        info={
            "source": f"unified emotion collection, {source}",
            "split": how,
            "annotated": annotated_names,
            "sizes": {p: len(v[0]) for p, v in parts.items()},
            "empty_texts_dropped": n_empty,
        },
    )
