"""One dependency-relation label set for English and French silver parses: coarse UD.

spaCy's English pipelines label dependencies in the ClearNLP scheme (``dobj``, ``pobj``,
``prep``, ...), its French pipelines in Universal Dependencies (``obj``, ``obl:arg``,
``case``, ...), so an English DEP probe cannot be scored on French labels as they come.
:func:`ud_relations` maps both to the 37 universal UD relations without subtypes
(``nsubj:pass`` → ``nsubj``): UD labels lose their subtype; ClearNLP labels map by
:data:`CLEARNLP_TO_UD`, with ``pobj`` (the object of a preposition) becoming ``obl`` when
the preposition hangs on a verb, adjective or adverb and ``nmod`` when on a noun (UD's rule).

The mapping is per word and ignores UD's different trees (UD heads a copular clause by its
predicate and a prepositional phrase by its noun): the word keeps ClearNLP's relation, renamed,
where UD would restructure. ``attr`` (a copula's nominal predicate), ``pcomp`` and ``meta``
have no per-word counterpart and become ``dep``. So the English labels are an approximation
of UD, stated as such on the page.

References
----------
de Marneffe et al. (2021), "Universal Dependencies", Computational Linguistics 47(2);
Choi & Palmer (2012), "Guidelines for the CLEAR style constituent to dependency
conversion" (ClearNLP labels); the thesis, Sec. 4.1 and Fig. 5.6 (DEP transfer).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["CLEARNLP_TO_UD", "ud_relations", "deprel_scheme", "as_ud"]

#: ClearNLP (spaCy English) relation → universal UD relation, per word.
CLEARNLP_TO_UD = {
    "root": "root", "acl": "acl", "acomp": "xcomp", "advcl": "advcl", "advmod": "advmod",
    "agent": "case", "amod": "amod", "appos": "appos", "attr": "dep", "aux": "aux",
    "auxpass": "aux", "case": "case", "cc": "cc", "ccomp": "ccomp", "compound": "compound",
    "conj": "conj", "csubj": "csubj", "csubjpass": "csubj", "dative": "iobj", "dep": "dep",
    "det": "det", "dobj": "obj", "expl": "expl", "intj": "discourse", "mark": "mark",
    "meta": "dep", "neg": "advmod", "nmod": "nmod", "npadvmod": "obl", "nsubj": "nsubj",
    "nsubjpass": "nsubj", "nummod": "nummod", "oprd": "xcomp", "parataxis": "parataxis",
    "pcomp": "dep", "pobj": "obl", "poss": "nmod", "preconj": "cc", "predet": "det",
    "prep": "case", "prt": "compound", "punct": "punct", "quantmod": "advmod",
    "relcl": "acl", "xcomp": "xcomp",
}  # fmt: skip

_NOMINAL = {"NOUN", "PROPN", "PRON", "NUM"}


def deprel_scheme(source: str) -> str:
    """The relation scheme of a probing or transfer source: ``"clearnlp"`` for the ones
    spaCy's English pipeline parses (``"brown"``, ``"udhr:eng"``), else ``"ud"``."""
    return "clearnlp" if source in ("brown", "udhr:eng") else "ud"


def ud_relations(sentence, scheme: str) -> list[str]:
    """Coarse universal UD relation of every word of ``sentence``.

    Parameters
    ----------
    sentence : Sentence
        With ``deprels``, ``heads`` (1-based, 0 the root) and ``upos``.
    scheme : {"ud", "clearnlp"}
        The scheme of ``sentence.deprels``.

    Returns
    -------
    list of str, one per word
    """
    rels: Sequence[str] = [r.lower() for r in sentence.deprels]
    if scheme == "ud":
        return [r.split(":", 1)[0] for r in rels]
    if scheme != "clearnlp":
        raise ValueError(f"`scheme` must be 'ud' or 'clearnlp', got {scheme!r}")
    unknown = sorted({r for r in rels if r not in CLEARNLP_TO_UD})
    if unknown:
        raise ValueError(f"ClearNLP relations without a UD counterpart: {unknown}")
    out = []
    for i, rel in enumerate(rels):
        label = CLEARNLP_TO_UD[rel]
        if rel == "pobj":
            prep = sentence.heads[i] - 1  # the preposition this object hangs on
            host = sentence.heads[prep] - 1 if prep >= 0 else -1
            if host >= 0 and sentence.upos[host] in _NOMINAL:
                label = "nmod"
        out.append(label)
    return out


def as_ud(sentences: Sequence, scheme: str) -> list:
    """Copies of ``sentences`` whose ``deprels`` are :func:`ud_relations` (coarse UD)."""
    from dataclasses import replace

    return [replace(s, deprels=ud_relations(s, scheme)) for s in sentences]
