"""The LMD chunking protocol: a corpus tokenised once, cut into T-token chunks, drawn, split.

Token ids are held in compact numpy arrays (:class:`_TokenIds`), so paper-scale corpora fit
in memory; :func:`chunk_corpus` and :func:`chunk_splits` draw seeded chunks for one or
several T from one tokenisation, :func:`split_chunks` shuffles them into train and test.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence

import numpy as np


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
