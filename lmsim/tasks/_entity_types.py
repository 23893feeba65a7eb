"""Renaming entity types in IOB2 tags, e.g. OntoNotes' into CoNLL-2003's."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from lmsim.tasks._metrics import _split_tag
from lmsim.tasks._task import Task

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
