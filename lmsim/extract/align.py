"""Tokenisation and word alignment: which token positions make each output row.

A text's rows are weighted gathers of its hidden states: the mean over its real tokens
(``pooling="mean"``), a word's last, first or mean subword (``"word"``), or each token
(``"token"``); :class:`_Encoded` holds them for every text of one model.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lmsim.encoding import word_tokenizer as _word_tokenizer
from lmsim.extract.runs import _Run

POOLINGS = ("mean", "word", "token")
_CALLER = 7  # warnings point at the extract_moments call (extract_moments -> ... -> _encode)
SUBWORDS = ("last", "first", "mean")


@dataclass
class _Encoded:
    """One model's tokenisation of all texts and where each output row comes from.

    ``rows[k]``, ``pos[k]``, ``weight[k]`` say that output row ``rows[k]`` of the text
    receives ``weight[k] * h[pos[k]]``: a mean, a word's subword(s) or single tokens are
    all such weighted gathers.
    """

    ids: list[list[int]]
    rows: list[np.ndarray]
    pos: list[np.ndarray]
    weight: list[np.ndarray]
    n_rows: np.ndarray  # (n_texts,)
    word_ids: list[list] | None = None  # per text, token -> word index or None

    @property
    def n_tokens(self) -> np.ndarray:
        return np.array([len(x) for x in self.ids], dtype=np.int64)


def _check_texts(texts, pooling: str) -> list:
    if isinstance(texts, (str, bytes)):
        raise TypeError("`texts` must be a list of texts, got a single string; wrap it: [text]")
    texts = list(texts)
    if not texts:
        raise ValueError("`texts` is empty: pass at least one text")
    for i, text in enumerate(texts):
        if pooling == "word":
            if isinstance(text, str) or not isinstance(text, Sequence):
                raise TypeError(
                    f"pooling='word' needs `texts` as sentences given as lists of words; "
                    f"texts[{i}] is {type(text).__name__}: split it first (e.g. text.split())"
                )
            if not text:
                raise ValueError(f"texts[{i}] has no words: drop empty sentences")
            bad = [w for w in text if not isinstance(w, str) or not w.strip()]
            if bad:
                raise ValueError(f"texts[{i}] contains empty or non-string words {bad[:3]!r}")
        elif not isinstance(text, str):
            raise TypeError(
                f"pooling={pooling!r} needs `texts` as a list of strings; texts[{i}] is "
                f"{type(text).__name__} (use pooling='word' for lists of words)"
            )
    if pooling != "word":
        empty = [i for i, text in enumerate(texts) if not text.strip()]
        if empty:
            # An empty text would be pooled from the special tokens alone: a row that
            # describes the tokenizer, not the text.
            raise ValueError(
                f"texts[{empty[0]}] is empty or whitespace ({len(empty)} of {len(texts)} "
                "texts are): drop them first, e.g. [t for t in texts if t.strip()]"
            )
        unseen = [i for i, text in enumerate(texts) if not _has_visible(text)]
        if unseen:
            raise ValueError(
                f"texts[{unseen[0]}] ({texts[unseen[0]]!r:.40}) holds only invisible "
                f"characters (zero-width, control or format characters; {len(unseen)} of "
                f"{len(texts)} texts do): drop or clean them first"
            )
    return texts


def _has_visible(text: str) -> bool:
    """Whether ``text`` has a character that is neither white space nor invisible (control,
    format such as U+200B, or unassigned): what a reader would see as text."""
    return any(c.isprintable() and not c.isspace() for c in text)


def _encode(
    run: _Run,
    texts: list,
    pooling: str,
    subword: str,
    paper_compat_padding: bool,
    lowercase: bool,
) -> _Encoded:
    tokenizer = run.tokenizer
    if lowercase:
        texts = [[w.lower() for w in t] if pooling == "word" else t.lower() for t in texts]
    kwargs = dict(truncation=True, max_length=run.max_length, add_special_tokens=True)
    if pooling == "word":
        tokenizer = _word_tokenizer(tokenizer)
        enc = tokenizer(texts, is_split_into_words=True, **kwargs)
    else:
        enc = tokenizer(texts, **kwargs)
    ids = [list(x) for x in enc["input_ids"]]
    word_ids = [enc.word_ids(i) for i in range(len(ids))] if pooling == "word" else None
    if pooling != "word":
        _check_not_only_special(run, texts, ids)
        if run.implicit_max_length:
            _warn_truncated(run, texts, ids)
    rows, pos, weight, n_rows = [], [], [], []
    for i, seq in enumerate(ids):
        n = len(seq)
        if n == 0:
            raise ValueError(
                f"texts[{i}] produced zero tokens with model {run.name!r}'s tokenizer: "
                "drop empty texts or use a tokenizer that adds special tokens"
            )
        if n > run.max_length:
            raise ValueError(
                f"model {run.name!r}'s tokenizer returned {n} tokens for texts[{i}] although "
                f"max_length={run.max_length}: it does not truncate as asked; raise max_length"
            )
        if pooling == "mean":
            denom = run.max_length if paper_compat_padding else n
            r, p, w = np.zeros(n, np.int64), np.arange(n), np.full(n, 1.0 / denom)
        elif pooling == "token":
            r, p, w = np.arange(n), np.arange(n), np.ones(n)
        else:
            r, p, w = _word_rows(word_ids[i], len(texts[i]), subword, i, run)
        rows.append(r)
        pos.append(np.asarray(p, np.int64))
        weight.append(np.asarray(w, np.float32))
        n_rows.append(int(r.max()) + 1)
    return _Encoded(
        ids=ids, rows=rows, pos=pos, weight=weight, n_rows=np.array(n_rows), word_ids=word_ids
    )


def _check_not_only_special(run: _Run, texts: list, ids: list[list[int]]) -> None:
    """A text the tokenizer turns into special tokens alone (``[CLS] [SEP]``) would be
    pooled from them: a row that describes the tokenizer, not the text."""
    special = set(getattr(run.tokenizer, "all_special_ids", []) or [])
    bare = [i for i, seq in enumerate(ids) if seq and all(t in special for t in seq)]
    if bare:
        raise ValueError(
            f"texts[{bare[0]}] ({texts[bare[0]]!r:.40}) gives only special tokens with model "
            f"{run.name!r}'s tokenizer ({len(bare)} of {len(texts)} texts do): it has no "
            "character the tokenizer keeps; drop or clean those texts"
        )


def _warn_truncated(run: _Run, texts: list, ids: list[list[int]]) -> None:
    """Warn when texts were cut at the model's own limit (the caller set no max_length)."""
    full = [i for i, seq in enumerate(ids) if len(seq) >= run.max_length]
    if not full:
        return
    longest = run.tokenizer([texts[i] for i in full], verbose=False)["input_ids"]
    lengths = [len(x) for x in longest]
    cut = [(i, n) for i, n in zip(full, lengths) if n > run.max_length]
    if cut:
        warnings.warn(
            f"{len(cut)} of {len(texts)} texts are longer than model {run.name!r}'s "
            f"{run.max_length} positions and were truncated there (texts[{cut[0][0]}] has "
            f"{cut[0][1]} tokens); split long texts into pieces, or pass max_length to "
            "truncate on purpose",
            stacklevel=_CALLER,
        )


def _word_rows(word_ids: list, n_words: int, subword: str, i: int, run: _Run):
    positions: list[list[int]] = [[] for _ in range(n_words)]
    for t, w in enumerate(word_ids):
        if w is not None:
            positions[w].append(t)
    missing = [j for j, p in enumerate(positions) if not p]
    if missing:
        raise ValueError(
            f"words {missing[:5]} of texts[{i}] got no tokens from model {run.name!r} "
            f"(truncated at max_length={run.max_length} tokens, or the tokenizer drops them); "
            "raise `max_length` or shorten the sentence"
        )
    rows, pos, weight = [], [], []
    for j, p in enumerate(positions):
        if subword == "last":
            p = p[-1:]
        elif subword == "first":
            p = p[:1]
        rows += [j] * len(p)
        pos += p
        weight += [1.0 / len(p)] * len(p)
    return np.array(rows, np.int64), np.array(pos, np.int64), np.array(weight)


def _check_alignment(runs: list[_Run], encs: list[_Encoded], pooling: str) -> None:
    if pooling == "token":
        first = encs[0]
        for run, enc in zip(runs[1:], encs[1:]):
            for i, (a, b) in enumerate(zip(first.ids, enc.ids)):
                if a != b:
                    raise ValueError(
                        f"pooling='token' needs models that tokenise identically, but "
                        f"{runs[0].name!r} and {run.name!r} differ on texts[{i}]; extract "
                        "them separately or use pooling='word' to align rows by words"
                    )
    else:
        for run, enc in zip(runs[1:], encs[1:]):
            if not np.array_equal(enc.n_rows, encs[0].n_rows):
                raise ValueError(f"row counts of {runs[0].name!r} and {run.name!r} differ")
