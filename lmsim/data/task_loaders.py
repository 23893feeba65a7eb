"""Tasks of every kind by name: :func:`load_task` (GLUE, OntoNotes, CoNLL-2003, TTC, ...).

Each loader returns a :class:`lmsim.tasks.Task`: the classification sets of
:mod:`lmsim.data.classification`, Hugging Face GLUE tasks, OntoNotes genres and NER sets,
one source of the unified emotion collection (:mod:`lmsim.data.emotion`) and the generated
smoke tasks (:mod:`lmsim.data.smoke`).
"""

from __future__ import annotations

from collections.abc import Sequence

from lmsim.data._hub import hub_datasets
from lmsim.data.classification import (
    CLASSIFICATION_SETS,
    _classification_parts,
    load_classification,
)
from lmsim.data.emotion import emotion_task
from lmsim.data.smoke import _SMOKE_TASKS, smoke_task
from lmsim.tasks import Task

TASK_SETS: dict[str, str] = {
    **CLASSIFICATION_SETS,
    "smoke-pairs": "generated sentence pairs, 2 classes (both halves matter); no files",
    "smoke-regression": "generated sentence pairs scored 0-5 (STS-B-like regression); no files",
    "smoke-multilabel#<domain>": "generated multi-label 'emotion' texts; domains a, b, c, mix",
    "smoke-ner#<domain>": "generated NER sentences, OntoNotes-style tags in domains a, b, c; "
    "CoNLL-style tags (PER/LOC/ORG) in domain conll",
    "hf:glue:<task>": "GLUE: cola, sst2, mrpc, stsb, mnli, qnli, qqp, rte (test = validation)",
    "hf:conll2012_ontonotesv5:english_v4#<genre>": "OntoNotes 5 NER of one genre: bc bn mz nw tc wb",
    "hf:conll2003": "CoNLL-2003 English NER",
    "hf:tner/ttc": "Twitter NER (Rijhwani & Preotiuc-Pietro 2020; gated on the hub)",
    "emotion:<unified-dataset.jsonl>#<source>": "one source of Bostan & Klinger's unified "
    "emotion collection, multi-label",
}

# (text columns, metric) of the GLUE tasks the paper uses (Jin et al. 2023, App. B).
GLUE_TASKS: dict[str, tuple[tuple[str, ...], str]] = {
    "cola": (("sentence",), "matthews"),
    "sst2": (("sentence",), "accuracy"),
    "mrpc": (("sentence1", "sentence2"), "accuracy"),
    "stsb": (("sentence1", "sentence2"), "pearson"),
    "mnli": (("premise", "hypothesis"), "accuracy"),
    "qnli": (("question", "sentence"), "accuracy"),
    "qqp": (("question1", "question2"), "accuracy"),
    "rte": (("sentence1", "sentence2"), "accuracy"),
}

ONTONOTES_GENRES = ("bc", "bn", "mz", "nw", "pt", "tc", "wb")

# Tag sets of token datasets whose tag column is a plain int (no ClassLabel): position =
# id, from the dataset card's label2id (tner/ttc: {"B-LOC": 0, "B-ORG": 1, "B-PER": 2,
# "I-LOC": 3, "I-ORG": 4, "I-PER": 5, "O": 6}).
TOKEN_TAG_SETS: dict[str, tuple[str, ...]] = {
    "tner/ttc": ("B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER", "O"),
}

# The out-of-domain NER sets are scored on PER, LOC and ORG only, as the paper's released
# code does (its label space; MISC has no OntoNotes counterpart).
_OOD_NER_TYPES = ("PER", "LOC", "ORG")
_OOD_NER_SETS = ("conll2003", "tner/ttc")


def load_task(spec: str, seed: int = 0, test_fraction: float = 0.2) -> Task:
    """Load a task of any kind as a :class:`lmsim.tasks.Task`.

    Parameters
    ----------
    spec : str
        One of (see :data:`TASK_SETS`):

        - ``"bbcnews"``, ``"finefood"``, ``"smoke"``, ``"smoke-adverb"``: single-label
          classification, the data of :func:`load_classification`, metric accuracy.
        - ``"hf:glue:<task>"``: the GLUE tasks of :data:`GLUE_TASKS`; pairs where the task
          has two texts; the official validation split is the test part
          (``validation_matched`` for MNLI) since test labels are hidden; metric Matthews
          (CoLA), Pearson (STS-B, a regression on float labels) or accuracy (App. B).
        - ``"hf:conll2012_ontonotesv5:english_v4#<genre>"``: OntoNotes 5 NER restricted to the
          sentences of documents whose ``document_id`` starts with ``<genre>/``; the official
          train / validation / test splits; tags = the ClassLabel names of
          ``named_entities`` (18 types, IOB2). Any set with OntoNotes' nested schema works.
        - ``"hf:<dataset>[:<config>]"`` with ``tokens`` and ``ner_tags`` (or ``tags``)
          columns: NER (``hf:conll2003``, ``hf:tner/ttc``); tags from the ClassLabel, else
          from :data:`TOKEN_TAG_SETS`. CoNLL-2003 and TTC are scored on PER, LOC and ORG
          (the paper's released code), other sets on all types.
        - ``"hf:<dataset>[:<config>]"`` otherwise: single-label classification as
          :func:`load_classification` reads it.
        - ``"emotion:<path to unified-dataset.jsonl>#<source>"``: see :func:`emotion_task`.
        - ``"smoke-pairs"``, ``"smoke-regression"``, ``"smoke-multilabel#<domain>"``,
          ``"smoke-ner#<domain>"``: generated offline sets of every kind (:func:`smoke_task`).
    seed : int
        Seed of generated sets and of splits made here.
    test_fraction : float
        For the classification sets without an official split.

    Returns
    -------
    Task
    """
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"`spec` must be a non-empty str, got {spec!r}; see data.TASK_SETS")
    if spec.startswith("emotion:"):
        path, _, source = spec[len("emotion:") :].rpartition("#")
        if not path or not source:
            raise ValueError(
                f"an emotion task is written 'emotion:<path to unified-dataset.jsonl>#<source>', "
                f"got {spec!r}"
            )
        return emotion_task(path, source, seed=seed)
    name, _, domain = spec.partition("#")
    if name in _SMOKE_TASKS:
        return smoke_task(name, domain or None, seed=seed)
    if spec.startswith("hf:"):
        return _hf_task(spec)
    if domain:
        raise ValueError(f"{name!r} has no domains; got {spec!r}")
    if name in CLASSIFICATION_SETS:
        d = load_classification(name, seed=seed, test_fraction=test_fraction)
        return _classification_task(spec, d, CLASSIFICATION_SETS[name])
    raise ValueError(f"unknown task {spec!r}; choose one of {sorted(TASK_SETS)}")


def _classification_task(spec: str, d: dict, source: str) -> Task:
    """A single-label task scored by accuracy, from a :func:`load_classification`-style dict."""
    return Task(
        name=spec,
        kind="single_label",
        label_names=tuple(d["label_names"]),
        metric="accuracy",
        train=(d["train_texts"], d["train_labels"]),
        test=(d["test_texts"], d["test_labels"]),
        info={"source": source},
    )


def _ner_task(
    spec: str,
    names: Sequence[str],
    parts: dict,
    info: dict,
    scored_labels: tuple[str, ...] | None = None,
) -> Task:
    """A token task scored by entity F1 from ``{part: (words, tag ids)}``, with ``info`` as given.

    ``parts`` holds ``"train"`` and ``"test"``, and ``"validation"`` where the set has one.
    """
    return Task(
        name=spec,
        kind="token",
        label_names=tuple(names),
        metric="entity_f1",
        train=parts["train"],
        validation=parts.get("validation"),
        test=parts["test"],
        scored_labels=scored_labels,
        info=info,
    )


# ------------------------------------------------------------------ Hugging Face tasks


def _load_hf(dataset: str, config: str | None, spec: str):
    try:
        datasets = hub_datasets()
    except ImportError as err:
        raise ImportError(
            f"{spec!r} needs Hugging Face `datasets` (`pip install -e .[paper]`); offline, "
            "use a smoke task (smoke-pairs, smoke-regression, smoke-multilabel#a, smoke-ner#a)"
        ) from err
    args = (dataset,) if config is None else (dataset, config)
    try:
        return datasets.load_dataset(*args)
    except Exception as err:  # network and gating errors come in many types
        raise OSError(
            f"could not load {spec!r} ({type(err).__name__}: {err}); offline, use a smoke task; "
            "gated sets (tner/ttc) need access granted on the hub and a login"
        ) from err


def _parse_hf(spec: str) -> tuple[str, str | None, str | None]:
    body, _, fragment = spec[3:].partition("#")
    parts = body.split(":")
    if not parts[0] or len(parts) > 2 or (len(parts) == 2 and not parts[1]):
        raise ValueError(
            f"a Hugging Face task is written 'hf:<dataset>[:<config>][#<genre>]', got {spec!r}"
        )
    return parts[0], (parts[1] if len(parts) == 2 else None), (fragment or None)


def _hf_task(spec: str) -> Task:
    dataset, config, fragment = _parse_hf(spec)
    if dataset.split("/")[-1] == "glue":  # "glue" or the hub's "nyu-mll/glue"
        if config not in GLUE_TASKS:
            raise ValueError(f"GLUE task {config!r} unknown; choose one of {sorted(GLUE_TASKS)}")
        if fragment:
            raise ValueError(f"GLUE tasks have no genres; got {spec!r}")
        return _glue_task(_load_hf(dataset, config, spec), config, spec)
    ds = _load_hf(dataset, config, spec)
    if "train" not in ds:
        raise ValueError(f"{spec!r} has splits {list(ds)}; a task needs a 'train' split")
    columns = ds["train"].column_names
    if "sentences" in columns and "document_id" in columns:
        return _ontonotes_task(ds, fragment, spec)
    if fragment:
        raise ValueError(f"only OntoNotes-style sets have genres ('#...'); got {spec!r}")
    if "tokens" in columns:
        return _token_task(ds, dataset, spec)
    d = _classification_parts(ds, spec)
    source = f"Hugging Face {dataset}" + (f" ({config})" if config else "")
    return _classification_task(spec, d, source)


def _feature_names(feature) -> list[str] | None:
    """ClassLabel names inside a (possibly nested Sequence / List) feature, else None."""
    for _ in range(8):
        if hasattr(feature, "names"):
            return list(feature.names)
        if isinstance(feature, (list, tuple)) and len(feature) == 1:
            feature = feature[0]
        elif hasattr(feature, "feature"):
            feature = feature.feature
        else:
            return None
    return None


def _glue_task(ds, name: str, spec: str) -> Task:
    columns, metric = GLUE_TASKS[name]
    test_split = "validation_matched" if name == "mnli" else "validation"
    missing = [c for c in (*columns, "label") if c not in ds["train"].column_names]
    if missing or test_split not in ds:
        raise ValueError(
            f"{spec!r} lacks columns {missing} or split {test_split!r}: columns "
            f"{ds['train'].column_names}, splits {list(ds)}"
        )
    parts = {}
    for part, split in (("train", "train"), ("test", test_split)):
        texts = [list(ds[split][c]) for c in columns]
        inputs = [str(t) for t in texts[0]] if len(columns) == 1 else list(zip(*texts))
        inputs = [x if isinstance(x, str) else (str(x[0]), str(x[1])) for x in inputs]
        labels = list(ds[split]["label"])
        labels = [float(y) for y in labels] if metric == "pearson" else [int(y) for y in labels]
        parts[part] = (inputs, labels)
    regression = metric == "pearson"
    return Task(
        name=spec,
        kind="regression" if regression else "single_label",
        label_names=("score",) if regression else tuple(ds["train"].features["label"].names),
        metric=metric,
        train=parts["train"],
        test=parts["test"],
        info={
            "source": f"GLUE {name} (Hugging Face glue/{name})",
            "test_split": test_split,
            "note": "GLUE's test labels are hidden: the validation split is the test part",
            "sizes": {p: len(v[0]) for p, v in parts.items()},
        },
    )


def _ontonotes_task(ds, genre: str | None, spec: str) -> Task:
    if genre is not None and genre not in ONTONOTES_GENRES:
        raise ValueError(f"OntoNotes genre {genre!r} unknown; choose one of {ONTONOTES_GENRES}")
    sentence_feature = ds["train"].features["sentences"]
    names = None
    if isinstance(sentence_feature, (list, tuple)):
        names = _feature_names(sentence_feature[0]["named_entities"])
    elif hasattr(sentence_feature, "feature"):
        names = _feature_names(sentence_feature.feature["named_entities"])
    if names is None:
        raise ValueError(f"{spec!r}: `named_entities` carries no ClassLabel names")
    parts, n_empty = {}, 0
    for part, split in (("train", "train"), ("validation", "validation"), ("test", "test")):
        if split not in ds:
            continue
        words, tags = [], []
        for doc in ds[split].select_columns(["document_id", "sentences"]):
            if genre is not None and not doc["document_id"].startswith(f"{genre}/"):
                continue
            for sentence in doc["sentences"]:
                if not sentence["words"]:
                    n_empty += 1
                    continue
                words.append([str(w) for w in sentence["words"]])
                tags.append([int(t) for t in sentence["named_entities"]])
        parts[part] = (words, tags)
    if not parts.get("train", ([],))[0] or not parts.get("test", ([],))[0]:
        raise ValueError(f"{spec!r}: no sentences of genre {genre!r} in the train and test splits")
    return _ner_task(
        spec,
        names,
        parts,
        info={
            "source": "OntoNotes 5 (CoNLL-2012 format)" + (f", genre {genre}" if genre else ""),
            "sizes": {p: len(v[0]) for p, v in parts.items()},
            "empty_sentences_dropped": n_empty,
        },
    )


def _token_task(ds, dataset: str, spec: str) -> Task:
    columns = ds["train"].column_names
    column = next((c for c in ("ner_tags", "tags") if c in columns), None)
    if column is None:
        raise ValueError(f"{spec!r} has `tokens` but no `ner_tags` or `tags` column: {columns}")
    names = _feature_names(ds["train"].features[column])
    if names is None:
        names = TOKEN_TAG_SETS.get(dataset)
    if names is None:
        raise ValueError(
            f"{spec!r}: `{column}` is not a ClassLabel; add the set's tags (in id order) to "
            f"lmsim.data.TOKEN_TAG_SETS[{dataset!r}]"
        )
    test_split = "test" if "test" in ds else "validation"
    parts = {}
    for part, split in (("train", "train"), ("validation", "validation"), ("test", test_split)):
        if split in ds and not (part == "validation" and split == test_split):
            rows = ds[split]
            pairs = [(ws, ts) for ws, ts in zip(rows["tokens"], rows[column]) if len(ws)]
            parts[part] = (
                [[str(w) for w in ws] for ws, _ in pairs],
                [[int(t) for t in ts] for _, ts in pairs],
            )
    ood = dataset in _OOD_NER_SETS or dataset.split("/")[-1] in _OOD_NER_SETS
    types = {t[2:] for t in names if t != "O"}
    scored = tuple(t for t in _OOD_NER_TYPES if t in types) if ood else None
    return _ner_task(
        spec,
        names,
        parts,
        scored_labels=scored or None,
        info={
            "source": f"Hugging Face {dataset}",
            "test_split": test_split,
            "sizes": {p: len(v[0]) for p, v in parts.items()},
            "note": "scored on PER, LOC, ORG as the paper's released code" if scored else "",
        },
    )
