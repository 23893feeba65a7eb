"""Dry-run stand-ins of Hugging Face datasets: small generated sets with the real schema.

Under ``$LMSIM_DRY_RUN`` (:mod:`lmsim._dryrun`), :func:`lmsim.data._hub.hub_datasets` returns
this module in place of ``datasets``, so the loaders of :mod:`lmsim.data` call
:func:`load_dataset` here and read what the hub set would give them: the same splits (PUD
treebanks have only ``test``; MNLI ``validation_matched``), columns and features (a
``ClassLabel``'s ``names``, ``Sequence`` features, OntoNotes' nested ``sentences``), with
text and trees from the smoke grammar (:func:`lmsim.data.generate_smoke_sentences`) and
seeded random labels. Sizes are tiny (:data:`SIZES`). Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from lmsim.data.smoke import generate_smoke_sentences

# Rows per split: train, validation, test; a text corpus has `corpus` rows in its one split.
SIZES = {"train": 64, "validation": 32, "test": 32, "corpus": 3000}  # corpus: LMD at T = 512

# Universal Dependencies' UPOS ClassLabel, in the hub's id order.
UD_UPOS = (
    "NOUN", "PUNCT", "ADP", "NUM", "SYM", "SCONJ", "ADJ", "PART", "DET", "CCONJ", "PROPN",
    "PRON", "X", "_", "ADV", "INTJ", "VERB", "AUX",
)  # fmt: skip
GLUE_LABELS = {
    "cola": ("unacceptable", "acceptable"),
    "sst2": ("negative", "positive"),
    "mrpc": ("not_equivalent", "equivalent"),
    "stsb": None,  # float scores in [0, 5]
    "mnli": ("entailment", "neutral", "contradiction"),
    "qnli": ("entailment", "not_entailment"),
    "qqp": ("not_duplicate", "duplicate"),
    "rte": ("entailment", "not_entailment"),
}
GLUE_COLUMNS = {
    "cola": ("sentence",),
    "sst2": ("sentence",),
    "mrpc": ("sentence1", "sentence2"),
    "stsb": ("sentence1", "sentence2"),
    "mnli": ("premise", "hypothesis"),
    "qnli": ("question", "sentence"),
    "qqp": ("question1", "question2"),
    "rte": ("sentence1", "sentence2"),
}
ONTONOTES_TAGS = ("O",) + tuple(
    f"{p}-{t}"
    for t in (
        "PERSON",
        "NORP",
        "FAC",
        "ORG",
        "GPE",
        "LOC",
        "PRODUCT",
        "DATE",
        "TIME",
        "PERCENT",
        "MONEY",
        "QUANTITY",
        "ORDINAL",
        "CARDINAL",
        "EVENT",
        "WORK_OF_ART",
        "LAW",
        "LANGUAGE",
    )  # fmt: skip
    for p in ("B", "I")
)
CONLL2003_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
TTC_TAGS = ("B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER", "O")  # plain ints on the hub
_GENRES = ("bc", "bn", "mz", "nw", "pt", "tc", "wb")


class ClassLabel:
    """The part of ``datasets.ClassLabel`` the loaders read: ``names``."""

    def __init__(self, names):
        self.names = list(names)


class Sequence:
    """The part of ``datasets.Sequence`` the loaders read: ``feature``."""

    def __init__(self, feature):
        self.feature = feature


class Dataset:
    """A column store with the ``datasets.Dataset`` methods the loaders use."""

    def __init__(self, columns: dict[str, list], features: dict | None = None):
        self._columns = columns
        self.features = {c: None for c in columns} | dict(features or {})

    @property
    def column_names(self) -> list[str]:
        return list(self._columns)

    def __len__(self) -> int:
        return len(next(iter(self._columns.values()), []))

    def __getitem__(self, key):
        if isinstance(key, str):
            return list(self._columns[key])
        return {c: v[key] for c, v in self._columns.items()}

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def select_columns(self, columns):
        return Dataset(
            {c: self._columns[c] for c in columns}, {c: self.features[c] for c in columns}
        )

    def iter(self, batch_size: int):
        for start in range(0, len(self), batch_size):
            yield {c: v[start : start + batch_size] for c, v in self._columns.items()}


def _rng(*key) -> np.random.Generator:
    digest = hashlib.sha256(json.dumps(key).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _seed(*key) -> int:
    return int(_rng(*key).integers(2**31))


def _sentences(n: int, *key):
    return generate_smoke_sentences(n, seed=_seed(*key))


def _texts(n: int, *key) -> list[str]:
    return [" ".join(s.words) for s in _sentences(n, *key)]


def _corpus(path: str, config: str | None) -> Dataset:
    n = SIZES["corpus"]
    if path.split("/")[-1] == "bookcorpus":  # one sentence a row
        return Dataset({"text": _texts(n, path, config)})
    # Wikipedia-like: an article of ten sentences a row
    sentences = _texts(10 * n, path, config)
    texts = [" ".join(sentences[10 * i : 10 * i + 10]) for i in range(n)]
    columns = {"id": [str(i) for i in range(n)], "title": [f"Article {i}" for i in range(n)]}
    if "wikipedia" in path:
        columns["url"] = [f"https://en.wikipedia.org/wiki?curid={i}" for i in range(n)]
    return Dataset(columns | {"text": texts})


def _glue(task: str) -> dict[str, Dataset]:
    if task not in GLUE_COLUMNS:
        raise ValueError(f"the dry run has no stand-in of GLUE task {task!r}")
    names, columns = GLUE_LABELS[task], GLUE_COLUMNS[task]
    splits = ("train", "validation", "test")
    if task == "mnli":
        splits = ("train", "validation_matched", "validation_mismatched")
        splits += ("test_matched", "test_mismatched")
    out = {}
    for split in splits:
        n = SIZES[split.split("_")[0]]
        rng = _rng("glue", task, split)
        data = {c: _texts(n, "glue", task, split, c) for c in columns}
        if split.startswith("test"):  # GLUE's test labels are hidden
            labels = [-1.0 if names is None else -1] * n
        elif names is None:
            labels = np.round(rng.uniform(0, 5, n), 3).tolist()
        else:
            labels = (np.arange(n) % len(names))[rng.permutation(n)].tolist()
        features = {"label": None if names is None else ClassLabel(names)}
        out[split] = Dataset(data | {"label": labels, "idx": list(range(n))}, features)
    return out


def _treebank(config: str) -> dict[str, Dataset]:
    splits = ("test",) if config.endswith("_pud") else ("train", "validation", "test")
    out = {}
    for split in splits:
        n = 4 * SIZES[split] if config.endswith("_pud") else SIZES[split]
        rows = _sentences(n, "ud", config, split)
        columns = {
            "idx": [f"{config}-{split}-{i}" for i in range(n)],
            "text": [" ".join(s.words) for s in rows],
            "tokens": [list(s.words) for s in rows],
            "lemmas": [[w.lower() for w in s.words] for s in rows],
            "upos": [[UD_UPOS.index(u) for u in s.upos] for s in rows],
            "xpos": [[None] * len(s.words) for s in rows],
            "feats": [[None] * len(s.words) for s in rows],
            "head": [[str(h) for h in s.heads] for s in rows],
            "deprel": [list(s.deprels) for s in rows],
            "deps": [[None] * len(s.words) for s in rows],
            "misc": [[None] * len(s.words) for s in rows],
        }
        out[split] = Dataset(columns, {"upos": Sequence(ClassLabel(UD_UPOS))})
    return out


def _tags(rng, n_words: int, names) -> list[int]:
    """IOB2 tags: O mostly, entities of one or two words."""
    tags, i = [0] * n_words, 0
    types = sorted({name[2:] for name in names if name != "O"})
    while i < n_words:
        if rng.random() < 0.25:
            kind = types[int(rng.integers(len(types)))]
            tags[i] = names.index(f"B-{kind}")
            if i + 1 < n_words and rng.random() < 0.5:
                tags[i + 1] = names.index(f"I-{kind}")
                i += 1
        i += 1
    return tags


def _ner(path: str) -> dict[str, Dataset]:
    names, column = (TTC_TAGS, "tags") if "ttc" in path else (CONLL2003_TAGS, "ner_tags")
    out = {}
    for split in ("train", "validation", "test"):
        rng, rows = _rng("ner", path, split), _sentences(SIZES[split], "ner", path, split)
        columns = {"id": [str(i) for i in range(len(rows))], "tokens": [s.words for s in rows]}
        columns[column] = [_tags(rng, len(s.words), names) for s in rows]
        feature = None if "ttc" in path else Sequence(ClassLabel(names))
        out[split] = Dataset(columns, {column: feature})
    return out


def _ontonotes() -> dict[str, Dataset]:
    out = {}
    for split in ("train", "validation", "test"):
        rng, ids, docs = _rng("ontonotes", split), [], []
        for genre in _GENRES:
            for d in range(2):
                n = max(2, SIZES[split] // 8)
                sentences = [
                    {
                        "part_id": 0,
                        "words": list(s.words),
                        "pos_tags": [0] * len(s.words),
                        "named_entities": _tags(rng, len(s.words), ONTONOTES_TAGS),
                    }
                    for s in _sentences(n, "ontonotes", split, genre, d)
                ]
                ids.append(f"{genre}/standin/00/doc_{d:04d}")
                docs.append(sentences)
        feature = [{"words": None, "named_entities": Sequence(ClassLabel(ONTONOTES_TAGS))}]
        out[split] = Dataset({"document_id": ids, "sentences": docs}, {"sentences": feature})
    return out


def load_dataset(path: str, name: str | None = None, split: str | None = None, **kwargs):
    """Stand-in of ``datasets.load_dataset``: a dict of splits, or one split's set.

    Known: text corpora (``wikimedia/wikipedia``, ``bookcorpus``, ``wikicorpus``,
    ``wikitext``), GLUE tasks, ``universal_dependencies`` treebanks,
    ``conll2012_ontonotesv5``, ``conll2003``, ``tner/ttc``. ``kwargs`` (``revision``, ...)
    are accepted and ignored.

    Raises
    ------
    ValueError
        A set the dry run has no schema for, or a split it does not have (as the hub would).
    """
    base = path.split("/")[-1]
    if base == "glue":
        sets = _glue(name)
    elif base == "universal_dependencies":
        sets = _treebank(name or "en_ewt")
    elif base == "conll2012_ontonotesv5":
        sets = _ontonotes()
    elif base in ("conll2003", "ttc"):
        sets = _ner(path)
    elif base in ("wikipedia", "bookcorpus", "wikicorpus", "wikitext", "openwebtext"):
        sets = {"train": _corpus(path, name)}
        if base == "wikitext":
            sets |= {"validation": _corpus(path, f"{name}-v"), "test": _corpus(path, f"{name}-t")}
    else:
        raise ValueError(
            f"the dry run has no stand-in of the Hugging Face set {path!r} (config {name!r}); "
            "add its schema to lmsim.data._standin_sets"
        )
    if split is None:
        return sets
    if split not in sets:
        raise ValueError(f"Unknown split {split!r}. Should be one of {list(sets)}.")
    return sets[split]


def emotion_file(in_domain, out_of_domain, emotions) -> Path:
    """A generated ``unified-dataset.jsonl`` standing in for a missing one (the unified
    emotion collection is built locally with Bostan & Klinger's scripts, not downloaded).

    Every source of ``in_domain`` and ``out_of_domain`` gets generated texts with null or
    0/1 values over ``emotions`` (the first nine annotated in domain, six out of domain);
    written once to the dry-run cache.
    """
    from lmsim._cache import cache_dir

    target = cache_dir("dry-run-data") / "unified-dataset.jsonl"
    if target.is_file():
        return target
    lines = []
    for source in (*in_domain, *out_of_domain):
        rng = _rng("emotion", source)
        annotated = emotions[:6] if source in out_of_domain else emotions[:9]
        for text in _texts(SIZES["train"], "emotion", source):
            values = {e: None for e in emotions}
            values |= {e: int(rng.random() < 0.3) for e in annotated}
            lines.append(json.dumps({"source": source, "text": text, "emotions": values}))
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target
