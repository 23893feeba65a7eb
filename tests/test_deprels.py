import pytest

from lmsim.data import Sentence
from lmsim.data.deprels import CLEARNLP_TO_UD, deprel_scheme, ud_relations


def _sent(words, upos, heads, deprels):
    return Sentence(words=words, upos=upos, heads=heads, deprels=deprels)


def test_clearnlp_labels_map_to_coarse_ud_with_pobj_by_the_prepositions_host():
    # "She read the book on the table in May": "on" hangs on the noun, "in" on the verb
    s = _sent(
        ["She", "read", "the", "book", "on", "the", "table", "in", "May"],
        ["PRON", "VERB", "DET", "NOUN", "ADP", "DET", "NOUN", "ADP", "PROPN"],
        [2, 0, 4, 2, 4, 7, 5, 2, 8],
        ["nsubj", "ROOT", "det", "dobj", "prep", "det", "pobj", "prep", "pobj"],
    )
    assert ud_relations(s, "clearnlp") == [
        "nsubj", "root", "det", "obj", "case", "det", "nmod", "case", "obl",
    ]  # fmt: skip


def test_ud_labels_lose_their_subtype_and_unknown_labels_raise():
    s = _sent(["Il", "est", "parti"], ["PRON", "AUX", "VERB"], [3, 3, 0],
              ["nsubj:pass", "aux:pass", "root"])  # fmt: skip
    assert ud_relations(s, "ud") == ["nsubj", "aux", "root"]
    bad = _sent(["x"], ["X"], [0], ["weird"])
    with pytest.raises(ValueError, match="weird"):
        ud_relations(bad, "clearnlp")
    with pytest.raises(ValueError, match="scheme"):
        ud_relations(s, "penn")


def test_every_target_is_a_universal_relation_and_the_schemes_of_the_sources():
    universal = {
        "acl", "advcl", "advmod", "amod", "appos", "aux", "case", "cc", "ccomp", "clf",
        "compound", "conj", "cop", "csubj", "dep", "det", "discourse", "dislocated", "expl",
        "fixed", "flat", "goeswith", "iobj", "list", "mark", "nmod", "nsubj", "nummod", "obj",
        "obl", "orphan", "parataxis", "punct", "reparandum", "root", "vocative", "xcomp",
    }  # fmt: skip
    assert set(CLEARNLP_TO_UD.values()) <= universal
    assert deprel_scheme("brown") == deprel_scheme("udhr:eng") == "clearnlp"
    assert deprel_scheme("udhr:fra") == deprel_scheme("smoke") == "ud"


def test_as_ud_copies_the_sentences_with_coarse_relations():
    from lmsim.data.deprels import as_ud

    s = _sent(["Il", "part"], ["PRON", "VERB"], [2, 0], ["nsubj:pass", "root"])
    (out,) = as_ud([s], "ud")
    assert out.deprels == ["nsubj", "root"] and s.deprels == ["nsubj:pass", "root"]
    assert out.words == s.words and out.heads == s.heads
