"""Tiny BERT, RoBERTa and DistilBERT bases and inline labelled data for every task kind.

Plain functions (no fixtures) shared by ``test_finetune_kinds.py`` and
``test_merge_kinds.py``: the data a test sees is fixed by its arguments alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from _helpers import _bpe_vocab_and_merges, _wordpiece_vocab

ARCHS = ("bert", "roberta", "distilbert")
SUBJECTS = ["alice", "bob", "carol"]
PLACES = ["paris", "rome", "oslo"]
FILLERS = ["the", "a", "went", "to", "saw", "with", "and", "today", "then"]
POSITIVE, NEGATIVE = ["good", "great"], ["bad", "awful"]
ANIMALS = ["cat", "dog", "bird"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC"]
VOCAB_WORDS = SUBJECTS + PLACES + FILLERS + POSITIVE + NEGATIVE + ANIMALS + ["smith", "x"]


def _wordpiece(arch: str):
    """BERT's (or DistilBERT's) own tokenizer class on a written-out WordPiece vocabulary:
    pairs as ``[CLS] a [SEP] b [SEP]``; BERT's makes segment ids, DistilBERT's none."""
    from transformers import BertTokenizer, DistilBertTokenizer

    cls = DistilBertTokenizer if arch == "distilbert" else BertTokenizer
    return cls(vocab=_wordpiece_vocab(VOCAB_WORDS, 3))


def _roberta_tokenizer():
    """RoBERTa's own tokenizer class on a written-out byte-level BPE (no prefix space)."""
    from tokenizers import pre_tokenizers
    from transformers import RobertaTokenizer

    words = [w for v in VOCAB_WORDS for w in (v, "Ġ" + v)]
    bpe, merges = _bpe_vocab_and_merges(words, 3, pre_tokenizers.ByteLevel.alphabet())
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    vocab = {t: i for i, t in enumerate(dict.fromkeys([*specials, *bpe]))}
    return RobertaTokenizer(vocab=vocab, merges=merges)


def build_base(arch: str, root: Path, seed: int = 0) -> str:
    """Save a tiny random ``arch`` encoder and its tokenizer under ``root``; return the path.

    Every model stays in float32 with 2 layers of width 16, so a fine-tune takes a second.
    """
    import torch
    from transformers import (
        BertConfig,
        BertModel,
        DistilBertConfig,
        DistilBertModel,
        RobertaConfig,
        RobertaModel,
    )

    tok = _roberta_tokenizer() if arch == "roberta" else _wordpiece(arch)
    small = dict(num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    if arch == "bert":
        model = BertModel(
            BertConfig(vocab_size=len(tok), hidden_size=16, max_position_embeddings=64, **small)
        )
    elif arch == "roberta":
        config = RobertaConfig(
            vocab_size=len(tok),
            hidden_size=16,
            max_position_embeddings=66,
            type_vocab_size=1,  # as roberta-base: one segment row
            pad_token_id=tok.pad_token_id,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            **small,
        )
        torch.manual_seed(seed)
        model = RobertaModel(config)
    else:
        config = DistilBertConfig(
            vocab_size=len(tok),
            dim=16,
            n_layers=2,
            n_heads=2,
            hidden_dim=32,
            max_position_embeddings=64,
            pad_token_id=tok.pad_token_id,
        )
        torch.manual_seed(seed)
        model = DistilBertModel(config)
    path = Path(root) / f"{arch}-{seed}"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


# ---------------------------------------------------------------------- labelled inputs
def _sentence(rng, n_words=(3, 7)) -> list[str]:
    return list(rng.choice(FILLERS, size=int(rng.integers(*n_words))))


def pairs_task(n: int = 48, seed: int = 0):
    """Sentence pairs; label 1 when the second sentence holds a positive word."""
    rng = np.random.default_rng(seed)
    inputs, labels = [], []
    for _ in range(n):
        y = int(rng.integers(2))
        second = _sentence(rng) + [str(rng.choice(POSITIVE if y else NEGATIVE))]
        rng.shuffle(second)
        inputs.append((" ".join(_sentence(rng)), " ".join(second)))
        labels.append(y)
    return inputs, labels, ["no", "yes"]


def multilabel_task(n: int = 48, seed: int = 0):
    """Texts holding a random subset of animals; one multi-hot label per animal."""
    rng = np.random.default_rng(seed)
    inputs, labels = [], []
    for _ in range(n):
        y = [int(v) for v in rng.integers(0, 2, size=len(ANIMALS))]
        words = _sentence(rng) + [a for a, v in zip(ANIMALS, y) if v]
        rng.shuffle(words)
        inputs.append(" ".join(words))
        labels.append(y)
    return inputs, labels, list(ANIMALS)


def regression_task(n: int = 48, seed: int = 0):
    """Texts scored by (positive − negative) word counts, a float per text."""
    rng = np.random.default_rng(seed)
    inputs, labels = [], []
    for _ in range(n):
        pos, neg = int(rng.integers(0, 3)), int(rng.integers(0, 3))
        words = _sentence(rng) + list(rng.choice(POSITIVE, pos)) + list(rng.choice(NEGATIVE, neg))
        rng.shuffle(words)
        inputs.append(" ".join(str(w) for w in words))
        labels.append(float(pos - neg))
    return inputs, labels, ["score"]


def token_task(n: int = 48, seed: int = 0):
    """Word lists with IOB2 tags: names (``alice smith``: B-PER I-PER) and places (B-LOC)."""
    rng = np.random.default_rng(seed)
    inputs, labels = [], []
    for _ in range(n):
        words, tags = [], []
        for _ in range(int(rng.integers(3, 8))):
            r = rng.random()
            if r < 0.25:
                words.append(str(rng.choice(SUBJECTS)))
                tags.append(1)
                if rng.random() < 0.5:
                    words.append("smith")
                    tags.append(2)
            elif r < 0.4:
                words.append(str(rng.choice(PLACES)))
                tags.append(3)
            else:
                words.append(str(rng.choice(FILLERS)))
                tags.append(0)
        inputs.append(words)
        labels.append(tags)
    return inputs, labels, list(TAGS)


TASKS = {
    "single_label": pairs_task,
    "multi_label": multilabel_task,
    "regression": regression_task,
    "token": token_task,
}
