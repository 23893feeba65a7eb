"""load_task: the generated smoke tasks of every kind, and the GLUE, OntoNotes, CoNLL, TTC and
emotion loaders against fake `datasets` modules / files carrying the real schemas."""

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
    animals = set(data._ANIMALS)
    for (premise, hypothesis), label in zip(*task.train):
        animal = bool(animals & set(premise.split()))
        alive = hypothesis in ("something alive moved .", "a living thing moved .")
        assert label == int(animal and alive)
    assert sum(task.train[1]) == 120
    # Both halves matter: each alone leaves examples of both labels.
    by_hypothesis = {}
    for (_, hypothesis), label in zip(*task.train):
        by_hypothesis.setdefault(hypothesis, set()).add(label)
    assert any(len(labels) == 2 for labels in by_hypothesis.values())


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
        assert len(vocab[x] - vocab[y]) >= 10
    mix = {w for text in load_task("smoke-multilabel#mix").test[0] for w in text.split()}
    for domain, (cues, _) in data._SMOKE_EMOTION_DOMAINS.items():
        assert mix & {c for c in cues.values() if c}, domain


def test_smoke_ner_domains_and_the_conll_set():
    a, b, conll = (load_task(f"smoke-ner#{d}") for d in ("a", "b", "conll"))
    assert a.label_names == b.label_names != conll.label_names
    names_a = {w for words in a.train[0] for w in words} - {
        w for words in b.train[0] for w in words
    }
    assert {"Anna", "Kazan"} <= names_a
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
