"""A sentence as words with optional gold or silver annotations (:class:`Sentence`), below
the readers that make them (:mod:`lmsim.data.treebanks`, :mod:`lmsim.data.smoke`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Sentence"]


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
