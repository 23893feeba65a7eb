"""load_task: the generated smoke tasks of every kind, and the GLUE, OntoNotes, CoNLL, TTC and
emotion loaders against fake `datasets` modules / files carrying the real schemas."""

import json
import sys
import types

import numpy as np
import pytest

from lmsim import data, tasks
from lmsim.data import load_task

SMOKE_SPECS = [
    "smoke-pairs",
    "smoke-regression",
    *[f"smoke-multilabel#{d}" for d in ("a", "b", "c", "mix")],
    *[f"smoke-ner#{d}" for d in ("a", "b", "c", "conll")],
]


# ---------------------------------------------------------------- smoke tasks


@pytest.mark.parametrize("spec", SMOKE_SPECS)
def test_smoke_tasks_are_seeded_valid_and_sized(spec):
    task = load_task(spec)
    assert task.name == spec and task.parts == ("train", "validation", "test")
    assert [len(task.subset(p)[0]) for p in task.parts] == [240, 60, 120]
    assert load_task(spec).train == task.train  # same seed, same data
    assert load_task(spec, seed=1).train != task.train
    assert task.train[0] != task.test[0]
    # The trivial predictor leaves room to learn.
    assert tasks.baseline_score(task) < 0.6


def test_smoke_pairs_follow_their_rule_and_are_balanced():
    task = load_task("smoke-pairs")
    for (premise, hypothesis), label in zip(*task.train):
        alive = bool(set(data._ALIVE) & set(premise.split()))
        when = bool(set(data._TIME_WORDS) & set(hypothesis.split()))
        assert label == int(alive and when)
    assert sum(task.train[1]) == 120
    # Both halves matter: neither alone determines the label.
    for half, cue in ((0, data._ALIVE), (1, data._TIME_WORDS)):
        with_cue = {y for x, y in zip(*task.train) if set(cue) & set(x[half].split())}
        assert with_cue == {0, 1}


def test_smoke_regression_scores_count_intense_adjectives():
    task = load_task("smoke-regression")
    intense = set(data._INTENSE)
    for (a, b), y in zip(*task.train):
        assert y == 1.25 * (len(intense & set(a.split())) + len(intense & set(b.split())))
    assert set(task.train[1]) <= {0, 1.25, 2.5, 3.75, 5.0} and len(set(task.train[1])) == 5


def test_smoke_multilabel_domains_share_labels_not_vocabulary():
    vocab, scored = {}, {}
    for domain in ("a", "b", "c"):
        task = load_task(f"smoke-multilabel#{domain}")
        cues = data._SMOKE_EMOTION_DOMAINS[domain][0]
        for text, label in zip(*task.train):
            words = set(text.split())
            assert label == [int(cues[e] in words) for e in task.label_names]
        vocab[domain] = {w for text in task.train[0] for w in text.split()}
        scored[domain] = task.scored_labels
        assert task.label_names == data._SMOKE_EMOTIONS
    assert scored["c"] == ("joy", "anger", "fear", "sadness")  # c does not annotate surprise
    for x, y in (("a", "b"), ("a", "c"), ("b", "c")):
        assert len(vocab[x] - vocab[y]) >= 8  # cue verbs and subjects
    mix = {w for text in load_task("smoke-multilabel#mix").test[0] for w in text.split()}
    for domain, (cues, _) in data._SMOKE_EMOTION_DOMAINS.items():
        assert mix & {c for c in cues.values() if c}, domain


def test_smoke_ner_domains_and_the_conll_set():
    a, b, conll = (load_task(f"smoke-ner#{d}") for d in ("a", "b", "conll"))
    assert a.label_names == b.label_names != conll.label_names
    names_a = {w for words in a.train[0] for w in words} - {
        w for words in b.train[0] for w in words
    }
    assert {"teacher", "river", "market"} <= names_a
    for tags in a.train[1]:
        for chunk in tasks.entity_chunks([a.label_names[t] for t in tags]):
            assert chunk[2] in ("PERSON", "GPE", "ORG", "DATE")
    used = {t for tags in conll.test[1] for t in tags}
    assert {conll.label_names[t] for t in used} >= {"B-PER", "B-LOC", "B-ORG", "I-LOC"}
    # A perfect OntoNotes-style tagger, mapped to CoNLL types, is perfect on the conll set.
    gold = [[conll.label_names[t] for t in tags] for tags in conll.test[1]]
    onto = {"PER": "PERSON", "LOC": "GPE", "ORG": "ORG"}
    onto_tags = tasks.map_entity_types(gold, onto)
    logits = [np.eye(a.n_labels)[[a.label_names.index(t) for t in s]] for s in onto_tags]
    assert (
        tasks.score(conll, logits, label_names=a.label_names, type_map=tasks.ONTONOTES_TO_CONLL)
        == 1.0
    )


def test_smoke_words_are_whole_words_of_the_tiny_bert_vocabulary():
    from lmsim.models import load_tokenizer

    vocab = load_tokenizer("tiny-bert").get_vocab()
    for spec in SMOKE_SPECS:
        task = load_task(spec)
        words = set()
        for x in task.train[0] + task.test[0]:
            for text in [x] if isinstance(x, str) else x:
                words |= set(text.split()) if isinstance(text, str) else {text}
        assert words <= set(vocab), (spec, sorted(words - set(vocab)))


@pytest.mark.parametrize(
    "spec, match",
    [
        ("smoke-ner", "needs a domain"),
        ("smoke-ner#z", "needs a domain"),
        ("smoke-pairs#a", "no domains"),
        ("smoke#a", "no domains"),
        ("nope", "unknown task"),
        ("", "non-empty"),
        ("emotion:x.jsonl", "emotion:<path"),
        ("hf:", "hf:<dataset>"),
        ("hf:glue:wnli", "GLUE task 'wnli' unknown"),
    ],
)
def test_bad_specs_name_the_fix(spec, match):
    with pytest.raises(ValueError, match=match):
        load_task(spec)


def test_classification_sets_become_single_label_tasks():
    d = data.load_classification("smoke", seed=3)
    task = load_task("smoke", seed=3)
    assert task.kind == "single_label" and task.metric == "accuracy"
    assert task.train == (d["train_texts"], d["train_labels"])
    assert task.test == (d["test_texts"], d["test_labels"])
    assert task.label_names == tuple(d["label_names"]) and task.validation is None


def _bag_of_words(inputs, vocab):
    """Word counts, pairs' halves in separate blocks: what a linear model sees."""
    X = np.zeros((len(inputs), 2 * len(vocab)))
    for i, x in enumerate(inputs):
        for half, text in enumerate([x] if isinstance(x, str) else x):
            for w in text.split():
                if w in vocab:
                    X[i, half * len(vocab) + vocab[w]] += 1
    return np.hstack([X, np.ones((len(inputs), 1))])


@pytest.mark.parametrize("spec", SMOKE_SPECS)
def test_smoke_tasks_are_learnable_by_a_linear_model(spec):
    """Ridge regression on bags of words (tokens: each word's majority tag) nearly solves
    every smoke task, so a tiny transformer can learn them in a few dozen steps."""
    task = load_task(spec)
    if task.kind == "token":
        counts = {}
        for words, tags in zip(*task.train):
            for w, t in zip(words, tags):
                counts.setdefault(w, np.zeros(task.n_labels))[t] += 1
        prior = np.eye(task.n_labels)[task.label_names.index("O")]
        logits = [np.array([counts.get(w, prior) for w in words]) for words in task.test[0]]
    else:
        words = sorted(
            {
                w
                for x in task.train[0]
                for t in ([x] if isinstance(x, str) else x)
                for w in t.split()
            }
        )
        vocab = {w: i for i, w in enumerate(words)}
        X = _bag_of_words(task.train[0], vocab)
        Y = np.asarray(task.train[1], dtype=float)
        if task.kind == "single_label":
            Y = np.eye(task.n_labels)[task.train[1]]
        elif task.kind == "multi_label":
            Y = 2 * Y - 1
        W = np.linalg.solve(X.T @ X + 1e-1 * np.eye(X.shape[1]), X.T @ Y.reshape(len(Y), -1))
        logits = _bag_of_words(task.test[0], vocab) @ W
    # smoke-pairs is an AND of the halves: linear, but not by a margin ridge fits exactly.
    assert tasks.score(task, logits) >= (0.85 if spec == "smoke-pairs" else 0.95), spec


# ---------------------------------------------------------------- a fake `datasets` module


class ClassLabel:
    def __init__(self, names):
        self.names = list(names)


class Value:
    def __init__(self, dtype):
        self.dtype = dtype


class Sequence:
    """``datasets.Sequence`` (and datasets 4's ``List``): the element feature under ``.feature``."""

    def __init__(self, feature):
        self.feature = feature


class FakeDataset:
    """The slice of ``datasets.Dataset`` load_task uses, column-major like Arrow."""

    def __init__(self, columns: dict, features: dict):
        lengths = {len(v) for v in columns.values()}
        assert len(lengths) == 1, "columns of one split must have one length"
        self._columns, self.features = columns, features
        self.column_names = list(columns)

    def __len__(self):
        return len(next(iter(self._columns.values())))

    def __getitem__(self, key):
        assert isinstance(key, str), "load_task reads whole columns"
        return list(self._columns[key])

    def __iter__(self):
        for i in range(len(self)):
            yield {c: v[i] for c, v in self._columns.items()}

    def select_columns(self, columns):
        return FakeDataset(
            {c: self._columns[c] for c in columns}, {c: self.features[c] for c in columns}
        )


def install_fake_datasets(monkeypatch, sets: dict):
    """``datasets.load_dataset(path, config=None)`` answers from ``sets[(path, config)]``."""
    calls = []

    def load_dataset(path, config=None, **kwargs):
        assert not kwargs
        calls.append((path, config))
        if (path, config) not in sets:
            raise FileNotFoundError(f"Dataset {path!r} doesn't exist on the Hub")
        return dict(sets[(path, config)])

    module = types.ModuleType("datasets")
    module.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", module)
    return calls


GLUE_SCHEMAS = {
    # task: (text columns, label names or None for float, test split)
    "cola": (["sentence"], ["unacceptable", "acceptable"], "validation"),
    "sst2": (["sentence"], ["negative", "positive"], "validation"),
    "mrpc": (["sentence1", "sentence2"], ["not_equivalent", "equivalent"], "validation"),
    "stsb": (["sentence1", "sentence2"], None, "validation"),
    "mnli": (
        ["premise", "hypothesis"],
        ["entailment", "neutral", "contradiction"],
        "validation_matched",
    ),
    "qnli": (["question", "sentence"], ["entailment", "not_entailment"], "validation"),
    "qqp": (["question1", "question2"], ["not_duplicate", "duplicate"], "validation"),
    "rte": (["sentence1", "sentence2"], ["entailment", "not_entailment"], "validation"),
}


def glue_split(columns, names, n, tag, rng):
    out = {c: [f"{tag} {c} {i}" for i in range(n)] for c in columns}
    if names is None:
        out["label"] = [float(np.float32(x)) for x in rng.uniform(0, 5, n)]
    else:
        out["label"] = [int(x) for x in rng.integers(0, len(names), n)]
    out["idx"] = list(range(n))
    return out


def glue_dataset(task, rng):
    columns, names, _ = GLUE_SCHEMAS[task]
    features = {c: Value("string") for c in columns}
    features["label"] = Value("float32") if names is None else ClassLabel(names)
    features["idx"] = Value("int32")
    splits = {"train": 12, "test": 5}
    splits |= (
        {"validation_matched": 6, "validation_mismatched": 4, "test_matched": 5}
        if task == "mnli"
        else {"validation": 6}
    )
    ds = {}
    for split, n in splits.items():
        cols = glue_split(columns, names, n, split, rng)
        if split.startswith("test"):
            cols["label"] = [-1] * n  # GLUE's hidden test labels
        ds[split] = FakeDataset(cols, features)
    return ds


@pytest.mark.parametrize("name", sorted(data.GLUE_TASKS))
def test_glue_tasks_read_the_right_columns_and_splits(monkeypatch, name):
    rng = np.random.default_rng(0)
    ds = glue_dataset(name, rng)
    calls = install_fake_datasets(monkeypatch, {("glue", name): ds})
    task = load_task(f"hf:glue:{name}")
    assert calls == [("glue", name)]
    columns, names, test_split = GLUE_SCHEMAS[name]
    for part, split in (("train", "train"), ("test", test_split)):
        inputs, labels = task.subset(part)
        expected = (
            ds[split][columns[0]]
            if len(columns) == 1
            else list(zip(*(ds[split][c] for c in columns)))
        )
        assert inputs == expected
        assert labels == ds[split]["label"]
    assert task.validation is None and task.info["test_split"] == test_split
    if name == "stsb":
        assert (task.kind, task.metric, task.label_names) == ("regression", "pearson", ("score",))
        assert all(isinstance(y, float) for y in task.train[1])
    else:
        assert task.kind == "single_label" and task.label_names == tuple(names)
        assert task.metric == ("matthews" if name == "cola" else "accuracy")
    if len(columns) == 2:
        assert all(isinstance(x, tuple) and len(x) == 2 for x in task.train[0])


def test_glue_under_its_hub_owner(monkeypatch):
    ds = glue_dataset("rte", np.random.default_rng(1))
    install_fake_datasets(monkeypatch, {("nyu-mll/glue", "rte"): ds})
    task = load_task("hf:nyu-mll/glue:rte")
    assert isinstance(task.train[0][0], tuple) and task.metric == "accuracy"


def test_hf_errors_say_what_to_do(monkeypatch):
    install_fake_datasets(monkeypatch, {})
    with pytest.raises(OSError, match="offline, use a smoke task"):
        load_task("hf:glue:rte")
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ImportError, match="pip install -e .\\[paper\\]"):
        load_task("hf:conll2003")


def test_generic_hf_classification(monkeypatch):
    features = {"text": Value("string"), "label": ClassLabel(["neg", "pos"])}
    ds = {
        "train": FakeDataset({"text": ["a", "b"], "label": [0, 1]}, features),
        "test": FakeDataset({"text": ["c"], "label": [1]}, features),
    }
    install_fake_datasets(monkeypatch, {("imdb", None): ds})
    task = load_task("hf:imdb")
    assert task.kind == "single_label" and task.train == (["a", "b"], [0, 1])
    assert task.test == (["c"], [1])


# ---------------------------------------------------------------- NER sets

ONTO_TAGS = [
    "O", "B-PERSON", "I-PERSON", "B-NORP", "I-NORP", "B-FAC", "I-FAC", "B-ORG", "I-ORG", "B-GPE",
    "I-GPE", "B-LOC", "I-LOC", "B-PRODUCT", "I-PRODUCT", "B-DATE", "I-DATE", "B-TIME", "I-TIME",
    "B-PERCENT", "I-PERCENT", "B-MONEY", "I-MONEY", "B-QUANTITY", "I-QUANTITY", "B-ORDINAL",
    "I-ORDINAL", "B-CARDINAL", "I-CARDINAL", "B-EVENT", "I-EVENT", "B-WORK_OF_ART",
    "I-WORK_OF_ART", "B-LAW", "I-LAW", "B-LANGUAGE", "I-LANGUAGE",
]  # fmt: skip
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def onto_sentence(words, tags, part_id=0):
    """One element of OntoNotes' nested `sentences` column, every real field present."""
    n = len(words)
    return {
        "part_id": part_id,
        "words": words,
        "pos_tags": [0] * n,
        "parse_tree": "(TOP (S ...))",
        "predicate_lemmas": [None] * n,
        "predicate_framenet_ids": [None] * n,
        "word_senses": [None] * n,
        "speaker": "-",
        "named_entities": tags,
        "srl_frames": [],
        "coref_spans": [],
    }


def onto_features(list_style: bool):
    sentence = {
        "part_id": Value("int32"),
        "words": Sequence(Value("string")),
        "pos_tags": Sequence(ClassLabel(["XX", "NNP"])),
        "parse_tree": Value("string"),
        "predicate_lemmas": Sequence(Value("string")),
        "predicate_framenet_ids": Sequence(Value("string")),
        "word_senses": Sequence(Value("float32")),
        "speaker": Value("string"),
        "named_entities": Sequence(ClassLabel(ONTO_TAGS)),
        "srl_frames": [{"verb": Value("string"), "frames": Sequence(Value("string"))}],
        "coref_spans": Sequence(Sequence(Value("int32"))),
    }
    # datasets < 4 keeps the script's `[{...}]`; datasets 4 reads List({...}) from parquet.
    return {
        "document_id": Value("string"),
        "sentences": [sentence] if list_style else Sequence(sentence),
    }


def onto_dataset(list_style=True):
    per, gpe = ONTO_TAGS.index("B-PERSON"), ONTO_TAGS.index("B-GPE")
    docs = {
        "train": [
            ("bc/cctv/00/cctv_0001", [(["Li", "Wei", "spoke"], [per, per + 1, 0]), ([], [])]),
            ("nw/wsj/00/wsj_0001", [(["Paris", "rose"], [gpe, 0])]),
            ("bc/cnn/00/cnn_0002", [(["Hello"], [0]), (["Beijing", "wins"], [gpe, 0])]),
            ("tc/ch/00/ch_0002", [(["okay"], [0])]),
        ],
        "validation": [("bc/msnbc/00/msnbc_0001", [(["Tom", "left"], [per, 0])])],
        "test": [
            ("bc/phoenix/00/phoenix_0001", [(["Ann", "ran"], [per, 0])]),
            ("tc/ch/00/ch_0001", [(["yeah"], [0])]),
        ],
    }
    return onto_splits(docs, list_style)


def onto_splits(docs: dict, list_style: bool = True) -> dict:
    """Fake OntoNotes splits: ``{split: [(document_id, [(words, tag ids), ...]), ...]}``."""
    features = onto_features(list_style)
    return {
        split: FakeDataset(
            {
                "document_id": [d for d, _ in rows],
                "sentences": [
                    [onto_sentence(w, t, i) for i, (w, t) in enumerate(s)] for _, s in rows
                ],
            },
            features,
        )
        for split, rows in docs.items()
    }


@pytest.mark.parametrize("list_style", [True, False])
def test_ontonotes_genre_keeps_that_genres_sentences(monkeypatch, list_style):
    calls = install_fake_datasets(
        monkeypatch, {("conll2012_ontonotesv5", "english_v4"): onto_dataset(list_style)}
    )
    task = load_task("hf:conll2012_ontonotesv5:english_v4#bc")
    assert calls == [("conll2012_ontonotesv5", "english_v4")]
    assert (task.kind, task.metric, task.label_names) == ("token", "entity_f1", tuple(ONTO_TAGS))
    assert task.train[0] == [["Li", "Wei", "spoke"], ["Hello"], ["Beijing", "wins"]]
    assert task.train[1][0] == [1, 2, 0]
    assert task.validation[0] == [["Tom", "left"]] and task.test[0] == [["Ann", "ran"]]
    assert task.info["empty_sentences_dropped"] == 1
    assert load_task("hf:conll2012_ontonotesv5:english_v4#tc").test[0] == [["yeah"]]
    with pytest.raises(ValueError, match="no sentences of genre 'nw'"):
        load_task("hf:conll2012_ontonotesv5:english_v4#nw")  # train only
    with pytest.raises(ValueError, match="genre 'xx' unknown"):
        load_task("hf:conll2012_ontonotesv5:english_v4#xx")


def test_conll2003_reads_tokens_and_ner_tags(monkeypatch):
    features = {
        "id": Value("string"),
        "tokens": Sequence(Value("string")),
        "pos_tags": Sequence(ClassLabel(["NNP", "VBZ"])),
        "chunk_tags": Sequence(ClassLabel(["O", "B-NP"])),
        "ner_tags": Sequence(ClassLabel(CONLL_TAGS)),
    }

    def split(rows):
        return FakeDataset(
            {
                "id": [str(i) for i in range(len(rows))],
                "tokens": [w for w, _ in rows],
                "pos_tags": [[0] * len(w) for w, _ in rows],
                "chunk_tags": [[0] * len(w) for w, _ in rows],
                "ner_tags": [t for _, t in rows],
            },
            features,
        )

    ds = {
        "train": split([(["EU", "rejects", "German", "call"], [3, 0, 7, 0])]),
        "validation": split([(["Peter", "Blackburn"], [1, 2])]),
        "test": split([(["Japan", "won"], [5, 0]), (["Nadim", "Ladki"], [1, 2])]),
    }
    install_fake_datasets(monkeypatch, {("conll2003", None): ds})
    task = load_task("hf:conll2003")
    assert (task.kind, task.label_names) == ("token", tuple(CONLL_TAGS))
    assert task.train == ([["EU", "rejects", "German", "call"]], [[3, 0, 7, 0]])
    assert task.validation[0] == [["Peter", "Blackburn"]] and len(task.test[0]) == 2
    assert task.scored_labels == ("PER", "LOC", "ORG")  # MISC is not scored (released code)
    # An OntoNotes tagger scored through the type map: "Japan" GPE -> LOC, "Nadim Ladki" PERSON -> PER.
    onto = [np.eye(37)[[9, 0]], np.eye(37)[[1, 2]]]
    assert tasks.score(task, onto, label_names=ONTO_TAGS, type_map=tasks.ONTONOTES_TO_CONLL) == 1.0


def test_tner_ttc_takes_its_tags_from_the_table(monkeypatch):
    features = {"tokens": Sequence(Value("string")), "tags": Sequence(Value("int32"))}

    def split(rows):
        return FakeDataset({"tokens": [w for w, _ in rows], "tags": [t for _, t in rows]}, features)

    ds = {
        "train": split([(["lemme", "ask", "Timb"], [6, 6, 2])]),
        "validation": split([(["in", "NYC"], [6, 0])]),
        "test": split([(["at", "Google", "HQ"], [6, 1, 4])]),
    }
    install_fake_datasets(monkeypatch, {("tner/ttc", None): ds})
    task = load_task("hf:tner/ttc")
    assert task.label_names == data.TOKEN_TAG_SETS["tner/ttc"]
    assert [task.label_names[t] for t in task.train[1][0]] == ["O", "O", "B-PER"]
    assert [task.label_names[t] for t in task.test[1][0]] == ["O", "B-ORG", "I-ORG"]
    assert task.scored_labels == ("PER", "LOC", "ORG")
    install_fake_datasets(monkeypatch, {("someone/tweets", None): ds})
    with pytest.raises(ValueError, match="TOKEN_TAG_SETS\\['someone/tweets'\\]"):
        load_task("hf:someone/tweets")


# ---------------------------------------------------------------- emotion


def unified_row(i, source, emotions, text=None, split="absent"):
    """One line of unified-dataset.jsonl as create_unified_dataset.py writes it."""
    row = {
        "id": i,
        "VAD": {"valence": None, "arousal": None, "dominance": None},
        "source": source,
        "text": f"{source} text {i}" if text is None else text,
        "emotions": {e: emotions.get(e) for e in data.EMOTIONS},
        "domain": "tweets",
        "labeled": "single",
        "annotation_procedure": "expert annotation",
        "emotion_model": "Ekman",
    }
    if split != "absent":
        row["split"] = split
    return row


def annotate(names, on):
    return {e: (1 if e in on else 0) for e in names}


EKMAN = ["joy", "sadness", "anger", "surprise", "fear", "disgust"]


@pytest.fixture
def unified(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(50):  # TEC: Ekman's six, split null
        rows.append(unified_row(len(rows), "tec", annotate(EKMAN, {EKMAN[i % 6]}), split=None))
    dd = ["noemo", "anger", "disgust", "fear", "joy", "sadness", "surprise"]
    for i in range(20):  # DailyDialog: no `split` key at all
        rows.append(unified_row(len(rows), "dailydialog", annotate(dd, {dd[i % 7]})))
    rows.append(unified_row(len(rows), "dailydialog", annotate(dd, {"joy"}), text="  "))
    ssec = ["anger", "trust", "disgust", "fear", "joy", "sadness", "surprise"]
    for i in range(12):  # SSEC: multi-label, its own train/test splits
        on = {ssec[j] for j in rng.choice(7, size=2, replace=False)}
        rows.append(
            unified_row(len(rows), "ssec", annotate(ssec, on), split=["train", "test"][i % 2])
        )
    for i in range(6):  # AffectiveText: intensities / 100
        values = {e: [0.0, 0.05, 0.3, 0.8][(i + k) % 4] for k, e in enumerate(EKMAN)}
        rows.append(
            unified_row(len(rows), "affectivetext", values, split="trial" if i < 2 else "test")
        )
    for i in range(4):  # GroundedEmotions: happy / sad only
        rows.append(
            unified_row(
                len(rows),
                "grounded_emotions",
                annotate(["joy", "sadness"], {["joy", "sadness"][i % 2]}),
                split=None,
            )
        )
    meld = ["anger", "joy", "noemo", "sadness", "surprise", "fear", "disgust"]
    for i, split in enumerate(["train"] * 4 + ["dev"] * 2 + ["test"] * 3):
        rows.append(unified_row(len(rows), "meld", annotate(meld, {meld[i % 7]}), split=split))
    path = tmp_path / "unified-dataset.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def naive_labels(rows, source):
    return {
        r["text"].strip(): [
            int(r["emotions"][e] is not None and r["emotions"][e] > 0.1) for e in data.EMOTIONS
        ]
        for r in rows
        if r["source"] == source and r["text"].strip()
    }


@pytest.mark.parametrize("seed", [0, 1])
def test_in_domain_emotion_source_gets_a_seeded_70_10_20_split(unified, seed):
    path, rows = unified
    task = load_task(f"emotion:{path}#tec", seed=seed)
    assert (task.kind, task.metric, task.label_names) == ("multi_label", "macro_f1", data.EMOTIONS)
    assert [len(task.subset(p)[0]) for p in task.parts] == [35, 5, 10]
    texts = [t for p in task.parts for t in task.subset(p)[0]]
    assert sorted(texts) == sorted(naive_labels(rows, "tec")) and len(set(texts)) == 50
    expected = naive_labels(rows, "tec")
    for part in task.parts:
        for text, label in zip(*task.subset(part)):
            assert label == expected[text]
    assert task.scored_labels == ("joy", "anger", "sadness", "disgust", "fear", "surprise")
    assert task.info["annotated"] == task.scored_labels
    other = load_task(f"emotion:{path}#tec", seed=seed + 5)
    assert other.test[0] != task.test[0]
    assert load_task(f"emotion:{path}#tec", seed=seed).test == task.test


def test_the_split_reproduces_table_4_sizes():
    table4 = {
        "DailyDialog": (72_085, 10_298, 20_596),
        "CrowdFlower": (27_818, 3_974, 7_948),
        "TEC": (14_735, 2_105, 4_211),
        "Tales-Emotion": (10_339, 1_477, 2_955),
        "ISEAR": (5_366, 766, 1_534),
    }
    for name, sizes in table4.items():
        split = data._split_70_10_20(sum(sizes), seed=0)
        assert tuple(len(split[p]) for p in ("train", "validation", "test")) == sizes, name
        assert sorted(split["train"] + split["validation"] + split["test"]) == list(
            range(sum(sizes))
        )


def test_dailydialog_without_split_key_scores_noemo_too(unified):
    path, rows = unified
    task = load_task(f"emotion:{path}#dailydialog")
    assert len(task.train[0]) + len(task.validation[0]) + len(task.test[0]) == 20
    assert task.info["empty_texts_dropped"] == 1
    assert "noemo" in task.scored_labels and "trust" not in task.scored_labels


def test_ood_emotion_sources_are_test_only_on_the_six_emotions(unified):
    path, rows = unified
    ssec = load_task(f"emotion:{path}#ssec")
    assert ssec.train == ([], []) and ssec.validation is None and len(ssec.test[0]) == 12
    assert ssec.scored_labels == ("joy", "anger", "sadness", "disgust", "fear", "surprise")
    assert "trust" in ssec.info["annotated"]
    expected = naive_labels(rows, "ssec")
    assert all(label == expected[text] for text, label in zip(*ssec.test))
    affective = load_task(f"emotion:{path}#affectivetext")
    expected = naive_labels(rows, "affectivetext")
    assert all(label == expected[text] for text, label in zip(*affective.test))
    assert len(affective.test[0]) == 6  # trial and test rows, all as test
    grounded = load_task(f"emotion:{path}#grounded_emotions")
    assert grounded.scored_labels == ("joy", "sadness")
    with pytest.raises(ValueError, match="no training examples"):
        tasks.baseline_score(grounded)


def test_other_sources_keep_their_own_splits(unified):
    path, _ = unified
    task = load_task(f"emotion:{path}#meld")
    assert [len(task.subset(p)[0]) for p in task.parts] == [4, 2, 3]


def test_emotion_errors(unified, tmp_path):
    path, _ = unified
    with pytest.raises(ValueError, match="it holds \\[.*'tec'"):
        load_task(f"emotion:{path}#isear")
    with pytest.raises(FileNotFoundError, match="unify-emotion-datasets"):
        load_task(f"emotion:{tmp_path / 'missing.jsonl'}#tec")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "tec"}\nnot json\n')
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        load_task(f"emotion:{bad}#tec")
