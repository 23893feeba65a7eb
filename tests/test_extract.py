"""Tests of lmsim.extract on tiny random models saved and reloaded via ``from_pretrained``.

Every pooled value is checked against a naive reference: one sentence at a time, no
padding, pooling written out from its definition.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch
from _helpers import EXTRACTION_SENTENCES as SENTENCES
from _helpers import EXTRACTION_TEXTS as TEXTS
from _helpers import tiny_tokenizer
from tokenizers import Tokenizer
from torch import nn
from transformers import (
    AutoModel,
    AutoTokenizer,
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaModel,
    PreTrainedTokenizerFast,
)

from lmsim import extract as ex
from lmsim.blocks import block_name
from lmsim.extract import attention as ex_attention
from lmsim.extract import (
    extract_activations,
    extract_attentions,
    extract_linear_grams,
    extract_moments,
    record_outputs,
    scoped_hooks,
)
from lmsim.extract import pooling as ex_pooling
from lmsim.extract import streaming as ex_streaming
from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CORPUS = [
    "the cat sat on the mat",
    "a dog barked loudly at the unbelievable postman",
    "colourless green ideas sleep furiously",
    "she sells sea shells by the sea shore",
    "interpretability of language models is hard",
    "tokenisation splits uncommon words into subwords",
    "the quick brown fox jumps over the lazy dog",
    "representations of different networks are compared",
]


# ---------------------------------------------------------------------- tiny models
def _save_load(model, tokenizer, path):
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """``{"bert": (model, tokenizer), "gpt2": ..., "llama": ...}``, reloaded from disk."""
    root = tmp_path_factory.mktemp("tiny")
    # Longer words split into several subwords; the two vocabularies differ.
    wp, bl = tiny_tokenizer("wordpiece", CORPUS), tiny_tokenizer("bytelevel", CORPUS)
    small = dict(num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    torch.manual_seed(0)
    bert = BertModel(
        BertConfig(vocab_size=wp.vocab_size, hidden_size=16, max_position_embeddings=64, **small)
    )
    gpt2 = GPT2LMHeadModel(
        GPT2Config(vocab_size=bl.vocab_size, n_embd=12, n_layer=3, n_head=2, n_positions=64)
    )
    llama = LlamaModel(
        LlamaConfig(
            vocab_size=bl.vocab_size,
            hidden_size=16,
            num_key_value_heads=1,
            max_position_embeddings=64,
            **small,
        )
    )
    return {
        "bert": _save_load(bert, wp, root / "bert"),
        "gpt2": _save_load(gpt2, bl, root / "gpt2"),
        "llama": _save_load(llama, bl, root / "llama"),
    }


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


KW = dict(device="cpu", progress=False)


# ---------------------------------------------------------------------- references
def _states(model, ids: list[int]) -> list[np.ndarray]:
    """Hidden states of one unpadded sequence: list over layers of (T, d)."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    return [h[0].double().numpy() for h in out.hidden_states]


def _word_pieces(tokenizer, words: list[str], kind: str) -> tuple[list[int], list]:
    """Token ids and word index per token built word by word, independently of
    ``is_split_into_words``: BERT adds [CLS] ... [SEP], the byte-level tokenizer nothing
    but a space before every word (as in running text)."""
    ids, owner = [], []
    for j, word in enumerate(words):
        piece = tokenizer((" " if kind == "gpt2" else "") + word, add_special_tokens=False)
        ids += piece["input_ids"]
        owner += [j] * len(piece["input_ids"])
    if kind == "bert":
        ids = [tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]
        owner = [None, *owner, None]
    return ids, owner


def _hooks_from(model: nn.Module, module_name: str) -> list:
    """Forward (pre-)hooks on ``model`` defined in module ``module_name`` or its submodules
    (transformers 5 installs and keeps its own output-recording hooks, which are not ours
    to remove)."""
    hooks = [
        fn
        for m in model.modules()
        for fn in [*m._forward_hooks.values(), *m._forward_pre_hooks.values()]
    ]
    inside = [getattr(fn, "__module__", None) or "" for fn in hooks]
    return [fn for fn, where in zip(hooks, inside) if f"{where}.".startswith(f"{module_name}.")]


# ---------------------------------------------------------------------- mean pooling
@pytest.mark.parametrize("kind", ["bert", "gpt2", "llama"])
def test_mean_pooling_equals_unpadded_loop(tiny, kind):
    model, tok = tiny[kind]
    acts = extract_activations({kind: (model, tok)}, TEXTS, batch_size=4, **KW)
    n_layers = model.config.num_hidden_layers
    assert sorted(acts) == sorted(f"{kind}/layer.{i}" for i in range(n_layers + 1))
    for i, text in enumerate(TEXTS):
        states = _states(model, tok(text)["input_ids"])
        for layer, h in enumerate(states):
            np.testing.assert_allclose(acts[f"{kind}/layer.{layer}"][i], h.mean(0), atol=1e-5)


def test_paper_compat_padding_divides_by_padded_length(tiny):
    model, tok = tiny["bert"]
    pair = {"bert": (model, tok)}
    kw = dict(layers="last", max_length=40, batch_size=3, **KW)
    textbook = extract_activations(pair, TEXTS, **kw)["bert/layer.2"]
    paper = extract_activations(pair, TEXTS, paper_compat_padding=True, **kw)["bert/layer.2"]
    for i, text in enumerate(TEXTS):
        ids = tok(text)["input_ids"]
        h = _states(model, ids)[-1]
        np.testing.assert_allclose(paper[i], h.sum(0) / 40, atol=1e-5)
        np.testing.assert_allclose(paper[i] * 40 / len(ids), textbook[i], atol=1e-5)
    assert not np.allclose(paper, textbook, atol=1e-3)
    with pytest.raises(ValueError, match="max_length=T"):
        extract_activations(pair, TEXTS, paper_compat_padding=True, **KW)


def test_raw_order_restored_after_length_sorting(tiny):
    model, tok = tiny["gpt2"]
    pair = {"g": (model, tok)}
    perm = np.random.default_rng(0).permutation(len(TEXTS))
    base = extract_activations(pair, TEXTS, layers=[-1], batch_size=2, **KW)["g/layer.3"]
    permuted = extract_activations(pair, [TEXTS[i] for i in perm], layers=[-1], batch_size=3, **KW)
    np.testing.assert_allclose(permuted["g/layer.3"], base[perm], atol=1e-5)
    lengths = [len(tok(t)["input_ids"]) for t in TEXTS]
    assert lengths != sorted(lengths) and lengths != sorted(lengths, reverse=True)


# ---------------------------------------------------------------------- words and tokens
@pytest.mark.parametrize("subword", ["last", "first", "mean"])
@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_word_pooling_matches_manual_word_ids(tiny, kind, subword):
    model, tok = tiny[kind]
    acts = extract_activations(
        {kind: (model, tok)}, SENTENCES, pooling="word", subword=subword, batch_size=4, **KW
    )
    n_layers = model.config.num_hidden_layers
    row = 0
    n_multi = 0
    for words in SENTENCES:
        ids, owner = _word_pieces(tok, words, kind)
        states = _states(model, ids)
        for j in range(len(words)):
            pos = [t for t, w in enumerate(owner) if w == j]
            n_multi += len(pos) > 1
            pick = {"last": pos[-1:], "first": pos[:1], "mean": pos}[subword]
            for layer in range(n_layers + 1):
                expected = states[layer][pick].mean(0)
                np.testing.assert_allclose(acts[f"{kind}/layer.{layer}"][row], expected, atol=1e-5)
            row += 1
    assert row == acts[f"{kind}/layer.0"].shape[0]
    assert n_multi > 5  # the tiny vocabularies really split words


def test_bytelevel_words_get_a_prefix_space_without_changing_the_tokenizer(tiny):
    _, tok = tiny["gpt2"]
    words = ["the", "unbelievable", "postman"]
    fixed = ex._word_tokenizer(tok)
    split = fixed(words, is_split_into_words=True)["input_ids"]
    assert split == tok(" the unbelievable postman")["input_ids"]
    assert tok.backend_tokenizer.pre_tokenizer.add_prefix_space is False


def test_word_rows_align_across_different_tokenizers(tiny):
    pairs = {"bert": tiny["bert"], "gpt2": tiny["gpt2"]}
    n_words = sum(len(s) for s in SENTENCES)
    n_tokens = [sum(len(tok(t)["input_ids"]) for t in TEXTS) for _, tok in pairs.values()]
    assert len(set(n_tokens)) == 2  # the two tokenizers really differ
    acts = extract_activations(pairs, SENTENCES, pooling="word", layers="last", **KW)
    assert {k: v.shape for k, v in acts.items()} == {
        "bert/layer.2": (n_words, 16),
        "gpt2/layer.3": (n_words, 12),
    }
    mom = extract_moments(pairs, SENTENCES, pooling="word", layers="last", cache=False, **KW)
    assert mom.n == n_words


def test_token_pooling_rows_and_tokenizer_check(tiny):
    model, tok = tiny["gpt2"]
    llama, _ = tiny["llama"]
    pairs = {"gpt2": (model, tok), "llama": (llama, tok)}
    acts = extract_activations(pairs, TEXTS, pooling="token", layers=[0, -1], batch_size=4, **KW)
    for i, text in enumerate(TEXTS[:3]):
        ids = tok(text)["input_ids"]
        start = sum(len(tok(t)["input_ids"]) for t in TEXTS[:i])
        np.testing.assert_allclose(
            acts["llama/layer.2"][start : start + len(ids)], _states(llama, ids)[-1], atol=1e-5
        )
    assert acts["gpt2/layer.0"].shape[0] == sum(len(tok(t)["input_ids"]) for t in TEXTS)
    with pytest.raises(ValueError, match="tokenise identically"):
        extract_activations(
            {"bert": tiny["bert"], "gpt2": tiny["gpt2"]}, TEXTS, pooling="token", **KW
        )


# ---------------------------------------------------------------------- moments
@pytest.mark.parametrize("pooling", ["mean", "word"])
def test_moments_equal_moments_of_raw_activations(tiny, pooling):
    pairs = {"bert": tiny["bert"], "gpt2": tiny["gpt2"]}
    texts = SENTENCES if pooling == "word" else TEXTS
    kw = dict(pooling=pooling, layers={"bert": "all", "gpt2": [1, -1]}, batch_size=2, **KW)
    # One shard: the same length-sorted batches as extract_activations, so the forward
    # passes are identical and only the accumulation differs.
    mom, shards = extract_moments(
        pairs, texts, shard_size=99, cache=False, return_shards=True, **kw
    )
    acts = extract_activations(pairs, texts, **kw)
    assert mom.names == [
        "bert/layer.0",
        "bert/layer.1",
        "bert/layer.2",
        "gpt2/layer.1",
        "gpt2/layer.3",
    ]
    assert len(shards) == 1
    ref = Moments.from_arrays(acts)
    assert mom.n == ref.n
    torch.testing.assert_close(mom.mean(mom.names), ref.mean(ref.names), atol=1e-8, rtol=0)
    torch.testing.assert_close(mom.cov(mom.names), ref.cov(ref.names), atol=1e-8, rtol=0)
    # Several shards batch differently (float32 forward noise only) and merge exactly.
    sharded, parts = extract_moments(
        pairs, texts, shard_size=4, cache=False, return_shards=True, **kw
    )
    assert len(parts) == 3
    assert sum(p.n for p in parts) == ref.n
    torch.testing.assert_close(sharded.cov(mom.names), ref.cov(ref.names), atol=1e-6, rtol=0)


def _padded_widths(monkeypatch) -> list:
    """Record ``(texts, padded width)`` of every forward pass."""
    real, widths = ex._hidden_states, []

    def spy(run, input_ids, mask):
        widths.append(tuple(input_ids.shape))
        return real(run, input_ids, mask)

    monkeypatch.setattr(ex_pooling, "_hidden_states", spy)
    return widths


def test_shards_are_pieces_of_the_global_length_order(tiny, monkeypatch):
    pairs = {"bert": tiny["bert"], "gpt2": tiny["gpt2"]}
    per_model = np.array([[len(tok(t)["input_ids"]) for t in TEXTS] for _, tok in pairs.values()])
    order = np.argsort(-per_model.max(axis=0), kind="stable")  # longest tokenisation first
    batches = np.split(order, [2, 4, 6, 8])
    widths = _padded_widths(monkeypatch)
    extract_moments(pairs, TEXTS, shard_size=4, batch_size=2, layers="last", **KW)
    # Batches are consecutive pairs of the global order; each model pads to its own longest.
    for m, lengths in enumerate(per_model):
        assert widths[m::2] == [(len(b), int(lengths[b].max())) for b in batches]
    padded = sum(n * w for n, w in widths)
    widths.clear()  # the old layout: corpus pieces of 4 texts, each sorted inside
    extract_moments(
        pairs, TEXTS, shard_size=4, batch_size=2, layers="last", return_shards=True, **KW
    )
    assert padded < sum(n * w for n, w in widths)


@pytest.mark.parametrize("pooling", ["mean", "token", "word"])
def test_length_ordered_shards_hold_the_moments_of_the_same_rows(tiny, pooling):
    """Statistics unchanged: sharded and cached, the moments equal float64 moments of
    the raw rows of the same forward passes (1e-10 relative); the corpus-order shards of
    before batch differently, so they agree up to float32 forward noise."""
    pairs = {"gpt2": tiny["gpt2"], "llama": tiny["llama"]}  # one tokenizer: token rows align
    texts = SENTENCES if pooling == "word" else TEXTS
    kw = dict(pooling=pooling, batch_size=2, layers=[0, -1], **KW)
    mom = extract_moments(pairs, texts, shard_size=4, **kw)
    cached = extract_moments(pairs, texts, shard_size=4, **kw)
    ref = Moments.from_arrays(extract_activations(pairs, texts, **kw))
    assert mom.n == ref.n == cached.n
    for got in (mom, cached):
        torch.testing.assert_close(got.mean(got.names), ref.mean(ref.names), rtol=1e-10, atol=0)
        scale = float(ref.comoment(ref.names).abs().max())
        torch.testing.assert_close(
            got.comoment(got.names), ref.comoment(ref.names), rtol=0, atol=1e-10 * scale
        )
    before = extract_moments(pairs, texts, shard_size=4, return_shards=True, **kw)[0]
    torch.testing.assert_close(before.cov(before.names), ref.cov(ref.names), rtol=0, atol=1e-6)


def test_returned_shards_are_pieces_of_the_corpus(tiny):
    pairs = {"bert": tiny["bert"]}
    acts = extract_activations(pairs, TEXTS, layers="last", **KW)["bert/layer.2"]
    _, parts = extract_moments(pairs, TEXTS, shard_size=4, layers="last", return_shards=True, **KW)
    assert [p.n for p in parts] == [4, 4, 1]
    for k, part in enumerate(parts):
        np.testing.assert_allclose(
            part.mean("bert/layer.2").numpy(), acts[4 * k : 4 * k + 4].mean(0), atol=1e-6
        )


def test_second_call_loads_from_cache(tiny, monkeypatch):
    pairs = {"bert": tiny["bert"]}
    first = extract_moments(pairs, TEXTS, shard_size=4, **KW)

    def boom(*args, **kwargs):
        raise AssertionError("the model ran although every shard was cached")

    monkeypatch.setattr(ex_pooling, "_hidden_states", boom)
    second = extract_moments(pairs, TEXTS, shard_size=4, **KW)
    assert second.n == first.n == len(TEXTS)
    torch.testing.assert_close(second.cov(second.names), first.cov(first.names), atol=0, rtol=0)
    with pytest.raises(AssertionError, match="the model ran"):  # a different key recomputes
        extract_moments(pairs, TEXTS, shard_size=4, cache_key_extra="v2", **KW)


def test_interrupted_run_resumes(tiny, monkeypatch):
    pairs = {"gpt2": tiny["gpt2"]}
    kw = dict(shard_size=3, batch_size=2, layers=[0, 2], **KW)
    reference = extract_moments(pairs, TEXTS, cache=False, **kw)
    real_save = ex._save_shard
    saved = []

    def save_then_crash(mom, folder, k):
        if saved:
            raise KeyboardInterrupt("simulated crash after the first shard")
        real_save(mom, folder, k)
        saved.append(k)

    monkeypatch.setattr(ex_streaming, "_save_shard", save_then_crash)
    with pytest.raises(KeyboardInterrupt):
        extract_moments(pairs, TEXTS, **kw)
    monkeypatch.setattr(ex_streaming, "_save_shard", real_save)
    real_states, n_forward = ex._hidden_states, []

    def counting(run, input_ids, mask):
        n_forward.append(input_ids.shape[0])
        return real_states(run, input_ids, mask)

    monkeypatch.setattr(ex_pooling, "_hidden_states", counting)
    resumed = extract_moments(pairs, TEXTS, **kw)
    assert sum(n_forward) == len(TEXTS) - 3  # only the two missing shards ran
    assert resumed.n == reference.n
    torch.testing.assert_close(
        resumed.cov(resumed.names), reference.cov(reference.names), atol=1e-10, rtol=0
    )
    torch.testing.assert_close(
        resumed.mean(resumed.names), reference.mean(reference.names), atol=1e-10, rtol=0
    )


def _shards_alive(monkeypatch) -> list:
    """After each shard is computed or loaded: how many shard Moments are alive."""
    refs, counts = [], []

    def tracked(fn):
        def wrapper(*args, **kwargs):
            mom = fn(*args, **kwargs)
            if mom is not None:
                refs.append(weakref.ref(mom))
                gc.collect()
                counts.append(sum(ref() is not None for ref in refs))
            return mom

        return wrapper

    monkeypatch.setattr(ex_streaming, "_accumulate", tracked(ex._accumulate))
    monkeypatch.setattr(ex_streaming, "_load_shard", tracked(ex._load_shard))
    return counts


def _same_bits(a: Moments, b: Moments) -> None:
    assert a.n == b.n and a.names == b.names
    np.testing.assert_array_equal(a.mean(a.names).numpy(), b.mean(b.names).numpy())
    np.testing.assert_array_equal(a.comoment(a.names).numpy(), b.comoment(b.names).numpy())


def test_merge_streams_one_shard_at_a_time_and_equals_merge_all(tiny, monkeypatch):
    """Memory seen before: every shard was held (all cached ones loaded up front) and
    merge_all copied the first, (n_shards + 1) x the moments; 21 GB each on Wu et al.'s
    largest pair. Now at most the running merge (shard 0, taken over) and one more."""
    pairs = {"gpt2": tiny["gpt2"], "bert": tiny["bert"]}
    kw = dict(shard_size=2, batch_size=2, **KW)  # 9 texts: 5 shards
    real, computed = ex._accumulate, []  # copies of the shards, computed in shard order

    def copying(batches, device):
        mom = real(batches, device)
        computed.append(mom.copy())
        return mom

    monkeypatch.setattr(ex_streaming, "_accumulate", copying)
    reference = extract_moments(pairs, TEXTS, cache=False, **kw)
    _same_bits(reference, Moments.merge_all(computed))
    monkeypatch.setattr(ex_streaming, "_accumulate", real)
    alive, calls = _shards_alive(monkeypatch), _count_forwards(monkeypatch)
    # Twice from the cache: merging into loaded shard 0 must leave its file intact.
    for cache, loaded in [(False, False), (True, False), (True, True), (True, True)]:
        alive.clear(), calls.clear()
        got = extract_moments(pairs, TEXTS, cache=cache, **kw)
        assert len(alive) == 5 and (sum(calls) == 0) == loaded
        assert max(alive) == 2, f"shards alive after each shard, cache={cache}: {alive}"
        _same_bits(got, reference)
        del got  # the running merge is shard 0 itself: drop it before the next run
    merged, parts = extract_moments(pairs, TEXTS, return_shards=True, **kw)
    _same_bits(merged, Moments.merge_all(parts))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_in_order_merge_of_shards_arriving_in_any_order(seed):
    """Shards finished out of order (another process held an earlier one) wait only until
    the shards before them are merged, and the result is merge_all's bit for bit."""
    rng = np.random.default_rng(seed)
    parts = [
        Moments.from_arrays({"a": rng.normal(size=(n, 3)) + 5, "b": rng.normal(size=(n, 2))})
        for n in rng.integers(1, 20, size=7)
    ]
    reference = Moments.merge_all(parts)
    order = rng.permutation(len(parts))
    merger = ex._InOrderMerge()
    for k in order:
        merger.add(int(k), parts[k].copy())
        done = set(order[: list(order).index(k) + 1].tolist())
        prefix = next(i for i in range(len(parts) + 1) if i not in done)
        assert merger.n_merged == prefix and set(merger.early) == done - set(range(prefix))
    _same_bits(merger.result(len(parts)), reference)
    with pytest.raises(RuntimeError, match="merged 0 of 2 shards"):
        ex._InOrderMerge().result(2)


def test_cache_separates_models_with_equal_configs(tiny):
    model, tok = tiny["bert"]
    other = BertModel(model.config).eval()  # same config, new random weights
    a = extract_moments({"m": (model, tok)}, TEXTS, layers="last", **KW)
    b = extract_moments({"m": (other, tok)}, TEXTS, layers="last", **KW)
    assert not torch.allclose(a.mean("m/layer.2"), b.mean("m/layer.2"))


def _count_forwards(monkeypatch) -> list:
    real, calls = ex._hidden_states, []

    def counting(run, input_ids, mask):
        calls.append(input_ids.shape[0])
        return real(run, input_ids, mask)

    monkeypatch.setattr(ex_pooling, "_hidden_states", counting)
    return calls


def _swap_vocab(tokenizer, a: str, b: str):
    """The same tokenizer with the ids of tokens ``a`` and ``b`` exchanged."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)), **tokenizer.special_tokens_map
    )


def test_cache_key_changes_with_the_tokenizer_vocabulary(tiny, monkeypatch):
    """Stale hit seen before: same weights, a rebuilt tokenizer with another vocabulary."""
    model, tok = tiny["bert"]
    other = _swap_vocab(tok, "the", "sea")
    assert len(other) == len(tok) and other("the cat")["input_ids"] != tok("the cat")["input_ids"]
    a = extract_moments({"m": (model, tok)}, TEXTS, layers="last", **KW)
    calls = _count_forwards(monkeypatch)
    b = extract_moments({"m": (model, other)}, TEXTS, layers="last", **KW)
    assert sum(calls) == len(TEXTS), "a changed vocabulary must not hit the old cache"
    assert not torch.allclose(a.mean("m/layer.2"), b.mean("m/layer.2"))


def test_cache_key_hashes_every_weight(tiny, monkeypatch):
    """A change in the last element of one matrix (the old key sampled 16 per tensor)."""
    model, tok = tiny["bert"]
    changed = copy.deepcopy(model)
    with torch.no_grad():
        changed.encoder.layer[-1].output.dense.weight.view(-1)[-1] += 1.0
    extract_moments({"m": (model, tok)}, TEXTS, layers="last", **KW)
    calls = _count_forwards(monkeypatch)
    extract_moments({"m": (changed, tok)}, TEXTS, layers="last", **KW)
    assert sum(calls) == len(TEXTS)
    extract_moments({"m": (changed, tok)}, TEXTS, layers="last", **KW)
    assert sum(calls) == len(TEXTS), "the same weights hit the cache"


def test_cache_key_extra_arrays_by_content(tiny, monkeypatch):
    """Stale hit seen before: arrays equal in their (truncated) print, different bytes."""
    x = np.arange(5000, dtype=np.float64)
    y = x.copy()
    y[2500] = -1.0
    assert str(x) == str(y)
    pair = {"m": tiny["bert"]}
    extract_moments(pair, TEXTS, layers="last", cache_key_extra={"w": x}, **KW)
    calls = _count_forwards(monkeypatch)
    extract_moments(pair, TEXTS, layers="last", cache_key_extra={"w": y}, **KW)
    assert sum(calls) == len(TEXTS)
    extract_moments(pair, TEXTS, layers="last", cache_key_extra={"w": torch.tensor(y)}, **KW)
    assert sum(calls) == len(TEXTS), "a tensor of the same bytes, dtype and shape hits"
    extract_moments(pair, TEXTS, layers="last", cache_key_extra={"w": x.astype("f4")}, **KW)
    assert sum(calls) == 2 * len(TEXTS), "another dtype is another key"


@pytest.mark.parametrize(
    "extra, where",
    [(object(), r"cache_key_extra` is a object"), ({"a": [1, {2, 3}]}, r"\['a'\]\[1\]` is a set")],
)
def test_cache_key_extra_without_stable_content_is_refused(tiny, extra, where):
    """Stale miss seen before: an object whose repr changes per process never resumed."""
    with pytest.raises(TypeError, match=rf"{where}.*cannot be hashed by content.*pass str"):
        extract_moments({"m": tiny["bert"]}, TEXTS, cache_key_extra=extra, **KW)


def test_content_hash_separates_types_and_orders():
    h = ex._content_hash
    assert h({"a": 1, "b": 2}) == h({"b": 2, "a": 1})
    assert len({h(1), h(1.0), h(True), h("1"), h([1]), h((1,)), h(None)}) == 7
    assert h(np.zeros((2, 3))) != h(np.zeros((3, 2)))


@pytest.mark.parametrize("damage", ["truncate", "flip", "manifest"])
def test_corrupt_shard_is_named_moved_aside_and_recomputed(tiny, monkeypatch, damage):
    pairs = {"gpt2": tiny["gpt2"]}
    kw = dict(shard_size=4, layers=[0, 2], **KW)
    reference = extract_moments(pairs, TEXTS, **kw)
    (folder,) = [p.parent for p in Path(os.environ["LMSIM_CACHE"]).rglob("manifest.json")]
    shard = folder / "shard_00001.safetensors"
    data = bytearray(shard.read_bytes())
    if damage == "truncate":
        shard.write_bytes(data[: len(data) // 2])
        pattern = r"shard_00001\.safetensors has \d+ bytes, \d+ were written"
    elif damage == "flip":  # same size, one bit of a float changed: only the hash sees it
        data[-3] ^= 0x01
        shard.write_bytes(bytes(data))
        pattern = r"shard_00001\.safetensors's sha256 differs"
    else:  # no records to check against: the file itself must still load cleanly
        (folder / "manifest.json").write_text("{not json")
        shard.write_bytes(data[:100])
        pattern = r"manifest\.json"
    calls = _count_forwards(monkeypatch)
    with pytest.warns(UserWarning, match=pattern) as record:
        again = extract_moments(pairs, TEXTS, **kw)
    assert any("shard_00001" in str(w.message) for w in record)
    # reported at the line that called extract_moments (through its @thread_policy wrapper)
    assert {w.filename for w in record if "corrupt" in str(w.message)} == {__file__}
    assert sum(calls) == 4, "only the damaged shard is recomputed"
    assert (folder / "shard_00001.safetensors.corrupt").is_file()
    torch.testing.assert_close(again.cov(again.names), reference.cov(reference.names))
    calls.clear()
    extract_moments(pairs, TEXTS, **kw)  # the recomputed shard and its record are good
    assert calls == []


def test_concurrent_extractions_of_one_key_compute_each_shard_once(tiny, monkeypatch):
    """Two callers at once (threads here; the claim is a lock file, so processes too)."""
    import threading

    pairs = {"gpt2": tiny["gpt2"]}
    kw = dict(shard_size=2, layers=[2], **KW)
    real, computed, lock = ex._accumulate, [], threading.Lock()

    def slow_accumulate(batches, device):
        batches = list(batches)
        with lock:
            computed.append(tuple(int(i) for b, _ in batches for i in b))
        time.sleep(0.3)  # long enough for the other caller to reach the same shard
        return real(batches, device)

    monkeypatch.setattr(ex_streaming, "_accumulate", slow_accumulate)
    monkeypatch.setattr(ex_streaming, "_CLAIM_POLL_S", 0.05)
    results = [None, None]

    def work(i):
        results[i] = extract_moments(pairs, TEXTS, **kw)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(computed) == 5 == len(set(computed)), "each of the 5 shards computed once"
    torch.testing.assert_close(results[0].cov(results[0].names), results[1].cov(results[1].names))
    assert not list(Path(os.environ["LMSIM_CACHE"]).rglob("*.lock"))


def test_stale_shard_lock_of_a_dead_process_is_taken_over(tiny):
    import socket
    import subprocess
    import sys

    pairs = {"gpt2": tiny["gpt2"]}
    kw = dict(shard_size=4, layers=[2], **KW)
    reference = extract_moments(pairs, TEXTS, cache=False, **kw)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(dead.stdout)
    # Every shard is found claimed by a process that has exited (a killed run).
    real_claim = ex._claim_shard
    folders = []

    def spy(folder, k):
        folders.append(folder)
        (folder / f"shard_{k:05d}.lock").write_text(f"{pid} {socket.gethostname()}")
        return real_claim(folder, k)

    ex_streaming._claim_shard = spy
    try:
        got = extract_moments(pairs, TEXTS, **kw)
    finally:
        ex_streaming._claim_shard = real_claim
    assert len(set(folders)) == 1 and not list(folders[0].glob("*.lock*"))
    torch.testing.assert_close(got.cov(got.names), reference.cov(reference.names))


# ---------------------------------------------------------------------- errors
def test_invalid_layer_lists_valid_range(tiny):
    with pytest.raises(ValueError, match=r"layer 5 does not exist.*0\.\.2.*-3\.\.-1"):
        extract_moments({"bert": tiny["bert"]}, TEXTS, layers=[0, 5], cache=False, **KW)
    with pytest.raises(ValueError, match=r"layer -4 does not exist"):
        extract_activations({"bert": tiny["bert"]}, TEXTS, layers=[-4], **KW)


def test_bad_inputs_raise_clear_errors(tiny):
    pair = {"gpt2": tiny["gpt2"]}
    with pytest.raises(ValueError, match="`texts` is empty"):
        extract_moments(pair, [], **KW)
    with pytest.raises(ValueError, match=r"texts\[1\] is empty"):
        extract_activations(pair, ["the cat", ""], **KW)
    with pytest.raises(ValueError, match="exceeds model 'gpt2'.s maximum of 64"):
        extract_activations(pair, TEXTS, max_length=65, **KW)
    with pytest.raises(TypeError, match="lists of words"):
        extract_activations(pair, TEXTS, pooling="word", **KW)
    with pytest.raises(ValueError, match="`pooling` must be one of"):
        extract_activations(pair, TEXTS, pooling="max", **KW)
    with pytest.raises(ValueError, match=r"words \[\d+.*max_length"):
        extract_activations(pair, SENTENCES, pooling="word", max_length=4, **KW)


def test_truncation_to_max_length(tiny):
    model, tok = tiny["bert"]
    acts = extract_activations({"b": (model, tok)}, TEXTS, layers="last", max_length=5, **KW)
    ids = tok(TEXTS[1], truncation=True, max_length=5)["input_ids"]
    assert len(ids) == 5
    np.testing.assert_allclose(acts["b/layer.2"][1], _states(model, ids)[-1].mean(0), atol=1e-5)


def test_non_finite_activations_name_the_model(tiny, tmp_path):
    model, tok = tiny["bert"]
    broken, _ = _save_load(model, tok, tmp_path / "broken")
    with torch.no_grad():
        broken.embeddings.word_embeddings.weight[5:] = float("nan")
    pairs = {"fine": (model, tok), "broken": (broken, tok)}
    with pytest.raises(ValueError, match="model 'broken' produced non-finite"):
        extract_moments(pairs, TEXTS, cache=False, **KW)


# ---------------------------------------------------------------------- hooks
def test_scoped_hooks_removed_after_exception(tiny):
    model, _ = tiny["bert"]

    def raising_hook(module, args, output):
        raise RuntimeError("hook failed")

    with pytest.raises(RuntimeError, match="hook failed"):
        with scoped_hooks(
            [(model, raising_hook, "forward"), (model.encoder, lambda m, a: None, "pre")]
        ):
            assert len(model._forward_hooks) == 1 and len(model.encoder._forward_pre_hooks) == 1
            model(input_ids=torch.tensor([[2, 7, 3]]))
    assert not model._forward_hooks and not model.encoder._forward_pre_hooks


def test_record_outputs_handles_tensor_and_tuple_outputs(tiny):
    model, tok = tiny["llama"]
    ids = torch.tensor([tok("the cat sat")["input_ids"]])
    with record_outputs(model, ["layers.0", "embed_tokens"]) as captured:
        with torch.no_grad():
            out = model(input_ids=ids, output_hidden_states=True)
    torch.testing.assert_close(captured["layers.0"], out.hidden_states[1])
    torch.testing.assert_close(captured["embed_tokens"], out.hidden_states[0])
    assert not _hooks_from(model, "lmsim.extract")
    assert ex._first_tensor((out.hidden_states[1], None)) is out.hidden_states[1]


# ---------------------------------------------------------------------- attentions
def _manual_word_attention(probs: np.ndarray, owner: list, n_words: int) -> np.ndarray:
    """(H, T, T) token attention -> (H, W, W): sum over key subwords, drop special
    tokens and renormalise, mean over query subwords; written with loops."""
    n_heads, n_tokens, _ = probs.shape
    out = np.zeros((n_heads, n_words, n_words))
    for h in range(n_heads):
        for i in range(n_words):
            queries = [t for t in range(n_tokens) if owner[t] == i]
            for q in queries:
                row = np.zeros(n_words)
                for k in range(n_tokens):
                    if owner[k] is not None:
                        row[owner[k]] += probs[h, q, k]
                out[h, i] += row / row.sum() / len(queries)
    return out


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_attentions_match_manual_conversion(tiny, kind):
    model, tok = tiny[kind]
    attn = extract_attentions((model, tok), SENTENCES, batch_size=3, **KW)
    n_layers = model.config.num_hidden_layers
    assert list(attn) == [block_name("model", i) for i in range(1, n_layers + 1)]
    eager = AutoModel.from_pretrained(model.name_or_path, attn_implementation="eager").eval()
    for s, words in enumerate(SENTENCES[:4]):
        ids, owner = _word_pieces(tok, words, kind)
        with torch.no_grad():
            out = eager(input_ids=torch.tensor([ids]), output_attentions=True)
        for layer in range(1, n_layers + 1):
            got = attn[block_name("model", layer)][s]
            assert got.shape == (model.config.num_attention_heads, len(words), len(words))
            np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)
            expected = _manual_word_attention(
                out.attentions[layer - 1][0].double().numpy(), owner, len(words)
            )
            np.testing.assert_allclose(got, expected, atol=1e-5)
    assert model.config._attn_implementation != "eager" or kind == "gpt2"


def test_causal_attention_is_lower_triangular_and_mode_restored(tiny):
    model, tok = tiny["llama"]
    before = model.config._attn_implementation
    attn = extract_attentions((model, tok), SENTENCES, layers=[-1], query="last", **KW)
    assert list(attn) == ["model/layer.2"]
    for a in attn["model/layer.2"]:
        assert np.allclose(np.triu(a, k=1), 0.0)
        np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-5)
    assert model.config._attn_implementation == before
    with pytest.raises(ValueError, match="layer 0 is the embedding output"):
        extract_attentions((model, tok), SENTENCES, layers=[0], **KW)


def _count_attention_runs(monkeypatch) -> list:
    """Names of the models whose attention is computed (not loaded from the cache)."""
    real, calls = ex._run_attentions, []

    def counting(run, *args, **kwargs):
        calls.append(run.name)
        return real(run, *args, **kwargs)

    monkeypatch.setattr(ex_attention, "_run_attentions", counting)
    return calls


def _assert_same_attentions(got: dict, expected: dict) -> None:
    """Same blocks in the same order, same arrays bit for bit (dtype and shape included)."""
    assert list(got) == list(expected)
    for name in expected:
        assert len(got[name]) == len(expected[name])
        for a, b in zip(got[name], expected[name]):
            assert type(a) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes()


ATTN_KW = dict(layers={"gpt2": [1, 3]}, batch_size=3, **KW)


def test_attention_cache_hit_equals_fresh_extraction_bitwise(tiny, monkeypatch):
    pairs = {"bert": tiny["bert"], "gpt2": tiny["gpt2"]}
    fresh = extract_attentions(pairs, SENTENCES, cache=False, **ATTN_KW)
    calls = _count_attention_runs(monkeypatch)
    first = extract_attentions(pairs, SENTENCES, **ATTN_KW)  # miss: computes and writes
    assert calls == ["bert", "gpt2"]
    calls.clear()
    second = extract_attentions(pairs, SENTENCES, **ATTN_KW)  # hit: no model runs
    assert calls == []
    for got in (first, second):
        _assert_same_attentions(got, fresh)
    assert list(second) == [*(f"bert/layer.{i}" for i in (1, 2)), "gpt2/layer.1", "gpt2/layer.3"]
    (folder,) = [p.parent for p in Path(os.environ["LMSIM_CACHE"], "attn").rglob("manifest.json")]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["shapes"]["gpt2/layer.3"][0] == [2, len(SENTENCES[0]), len(SENTENCES[0])]
    assert set(manifest["files"]["attentions.safetensors"]) == {"size", "sha256"}
    assert not [p for p in folder.iterdir() if ".tmp" in p.name]


@pytest.mark.parametrize(
    "change",
    [
        dict(sentences=SENTENCES[:-1]),
        dict(sentences=[[w.upper() for w in s] for s in SENTENCES]),
        dict(layers=[-1]),
        dict(query="last"),
        dict(max_length=40),
        dict(lowercase=True),
        dict(batch_size=2),
        dict(cache_key_extra={"corpus": "other"}),
    ],
    ids=lambda c: next(iter(c)),
)
def test_attention_cache_key_covers_what_changes_the_result(tiny, monkeypatch, change):
    pair = {"m": tiny["gpt2"]}
    kw = {"sentences": SENTENCES, "layers": "all", "batch_size": 3, **KW}
    extract_attentions(pair, **kw)
    calls = _count_attention_runs(monkeypatch)
    extract_attentions(pair, **kw)
    assert calls == [], "the same arguments hit the cache"
    extract_attentions(pair, **{**kw, **change})
    assert calls == ["m"], f"{change} must not hit the cache of the defaults"
    assert len(list(Path(os.environ["LMSIM_CACHE"], "attn").iterdir())) == 2


def test_attention_cache_honours_lmsim_cache_and_cache_false_writes_nothing(
    tiny, tmp_path, monkeypatch
):
    pair = {"m": tiny["bert"]}
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "elsewhere"))
    extract_attentions(pair, SENTENCES, cache=False, **KW)
    assert not (tmp_path / "elsewhere").exists() or not any((tmp_path / "elsewhere").rglob("*"))
    extract_attentions(pair, SENTENCES, **KW)
    (path,) = (tmp_path / "elsewhere" / "attn").rglob("attentions.safetensors")
    assert (path.parent / "manifest.json").is_file()


@pytest.mark.parametrize("damage", ["truncate", "flip", "no_record"])
def test_corrupt_attention_cache_is_named_moved_aside_and_recomputed(tiny, monkeypatch, damage):
    pair = {"m": tiny["gpt2"]}
    reference = extract_attentions(pair, SENTENCES, cache=False, **KW)
    extract_attentions(pair, SENTENCES, **KW)
    (path,) = Path(os.environ["LMSIM_CACHE"], "attn").rglob("attentions.safetensors")
    data = bytearray(path.read_bytes())
    calls = _count_attention_runs(monkeypatch)
    if damage == "no_record":  # the run stopped between the file and its manifest
        (path.parent / "manifest.json").unlink()
        again = extract_attentions(pair, SENTENCES, **KW)
    else:
        if damage == "truncate":
            path.write_bytes(data[: len(data) // 2])
            pattern = r"attentions\.safetensors has \d+ bytes, \d+ were written"
        else:  # same size, one bit of a float changed: only the hash sees it
            data[-3] ^= 0x01
            path.write_bytes(bytes(data))
            pattern = r"attentions\.safetensors's sha256 differs"
        with pytest.warns(UserWarning, match=pattern):
            again = extract_attentions(pair, SENTENCES, **KW)
        assert (path.parent / "attentions.safetensors.corrupt").is_file()
    assert calls == ["m"]
    _assert_same_attentions(again, reference)
    calls.clear()
    _assert_same_attentions(extract_attentions(pair, SENTENCES, **KW), reference)
    assert calls == [], "the recomputed file and its record are good"


# ---------------------------------------------------------------------- linear grams
@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_linear_grams_equal_manual_xtx(tiny, kind):
    model, tok = tiny[kind]
    grams = extract_linear_grams(model, tok, TEXTS, batch_size=4, **KW)
    names = [
        n
        for n, m in model.named_modules()
        if isinstance(m, nn.Linear) or type(m).__name__ == "Conv1D"
    ]
    assert sorted(grams) == sorted(names)
    name = names[1]
    module = dict(model.named_modules())[name]
    rows = []
    handle = module.register_forward_pre_hook(lambda m, args: rows.append(args[0][0].double()))
    try:
        with torch.no_grad():
            for text in TEXTS:
                model(input_ids=torch.tensor([tok(text)["input_ids"]]))
    finally:
        handle.remove()
    X = torch.cat(rows)
    assert grams[name].n == X.shape[0] == sum(len(tok(t)["input_ids"]) for t in TEXTS)
    torch.testing.assert_close(grams[name].gram("input"), X.T @ X, atol=1e-6, rtol=1e-6)
    assert not _hooks_from(model, "lmsim.extract")


def test_linear_grams_paper_compat_counts_padding(tiny):
    model, tok = tiny["bert"]
    grams = extract_linear_grams(
        model, tok, TEXTS, batch_size=4, max_length=40, paper_compat_padding=True, **KW
    )
    # The released code's batches: in order, each padded to its longest text (max_length
    # only truncates); every per-token input counts all of a batch's positions, the pooler
    # one vector per text.
    lengths = [len(tok(t, truncation=True, max_length=40)["input_ids"]) for t in TEXTS]
    padded = sum(len(lengths[i : i + 4]) * max(lengths[i : i + 4]) for i in range(0, len(TEXTS), 4))
    assert padded > sum(lengths)  # the test texts differ in length: padding is counted
    assert grams.pop("pooler.dense").n == len(TEXTS)
    assert all(mom.n == padded for mom in grams.values())


def test_linear_grams_remove_hooks_after_error(tiny, monkeypatch):
    model, tok = tiny["bert"]

    def broken(*args, **kwargs):
        raise RuntimeError("layer crashed")

    monkeypatch.setattr(model.encoder.layer[1], "forward", broken)
    with pytest.raises(RuntimeError, match="layer crashed"):
        extract_linear_grams(model, tok, TEXTS, **KW)
    assert not _hooks_from(model, "lmsim.extract")


# ---------------------------------------------------------------------- by name
def test_models_by_name_use_load_model(monkeypatch, tiny):
    import lmsim.models

    calls = []

    def fake_load(name, device="auto", dtype=None, task="base", zoo_profile="default"):
        calls.append((name, str(device), zoo_profile))
        return tiny["bert"]

    monkeypatch.setattr(lmsim.models, "load_model", fake_load)
    mom = extract_moments(["tiny-x"], TEXTS, layers="last", cache=False, **KW)
    assert calls == [("tiny-x", "cpu", "default")] and mom.names == ["tiny-x/layer.2"]
    extract_moments(["tiny-x"], TEXTS, layers="last", cache=False, zoo_profile="smoke", **KW)
    assert calls[-1] == ("tiny-x", "cpu", "smoke"), "the zoo profile is passed on, explicitly"
    with pytest.raises(ValueError, match="duplicate"):
        extract_moments(["a", "a"], TEXTS, **KW)


def test_local_directory_through_load_model(tiny):
    model, tok = tiny["bert"]
    acts = extract_activations([model.name_or_path], TEXTS[:3], layers="last", **KW)
    ref = extract_activations({model.name_or_path: (model, tok)}, TEXTS[:3], layers="last", **KW)
    np.testing.assert_allclose(
        acts[f"{model.name_or_path}/layer.2"], ref[f"{model.name_or_path}/layer.2"], atol=1e-6
    )


# ---------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_gpu_matches_cpu(tiny):
    pairs = {"bert": tiny["bert"], "gpt2": tiny["gpt2"]}
    cpu = extract_moments(pairs, SENTENCES, pooling="word", cache=False, **KW)
    kw = dict(pooling="word", cache=False, device="cuda", progress=False)
    fp32 = extract_moments(pairs, SENTENCES, dtype="float32", **kw)
    assert extract_moments(pairs, SENTENCES, **kw).cov(cpu.names).dtype == torch.float64
    bf16 = extract_moments(pairs, SENTENCES, dtype="bfloat16", **kw)
    assert fp32.device.type == "cuda" and bf16.device.type == "cuda"
    torch.testing.assert_close(fp32.cov(cpu.names).cpu(), cpu.cov(cpu.names), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(bf16.mean(cpu.names).cpu(), cpu.mean(cpu.names), atol=0.1, rtol=0.05)
    for model, _ in pairs.values():
        model.to("cpu")


def test_lowercase_and_progress_bar(tiny, capsys):
    model, tok = tiny["gpt2"]
    pair = {"g": (model, tok)}
    upper = [t.upper() for t in TEXTS[:4]]
    lowered = extract_activations(pair, upper, lowercase=True, device="cpu", progress=True)
    plain = extract_activations(pair, TEXTS[:4], **KW)
    np.testing.assert_allclose(lowered["g/layer.3"], plain["g/layer.3"], atol=1e-6)
    assert not np.allclose(extract_activations(pair, upper, **KW)["g/layer.3"], plain["g/layer.3"])
    assert "tok_s" in capsys.readouterr().err


# ------------------------------------------------------------------ non-finite activations
@pytest.mark.parametrize("check_every", [1, 100])
def test_non_finite_activations_name_the_model_blocks_and_texts(tiny, monkeypatch, check_every):
    """Checked after every batch, or (as on a GPU) deferred: then at the latest when the
    batches run out, before a caller could save what it accumulated."""
    import copy

    monkeypatch.setattr("lmsim.extract.pooling._CHECK_EVERY_CPU", check_every)
    model, tok = tiny["bert"]
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.get_input_embeddings().weight.fill_(float("nan"))
    with pytest.raises(ValueError, match=r"model 'bert' produced non-finite activations .* in "):
        extract_activations({"bert": (broken, tok)}, TEXTS, batch_size=4, **KW)


def test_deferred_finiteness_checks_raise_for_the_first_bad_batch():
    from lmsim.extract.pooling import _check_finite

    ok, bad = torch.tensor([True, True]), torch.tensor([True, False])
    pending = [(np.array([0, 1]), "m", ["m/a", "m/b"], ok)]
    _check_finite(pending)
    assert pending == [], "read flags are cleared"
    pending = [
        (np.array([0, 1]), "m", ["m/a", "m/b"], ok),
        (np.array([7, 3]), "m", ["m/a", "m/b"], bad),
        (np.array([5]), "m", ["m/a", "m/b"], bad),
    ]
    with pytest.raises(ValueError, match=r"in \['m/b'\] for texts \[7, 3\]"):
        _check_finite(pending)


# ------------------------------------------------- tokenised a shard at a time, overlapped
def _corpus_order_shards(pairs, **kw):
    return extract_moments(
        pairs, TEXTS * 3, shard_size=5, batch_size=2, cache=False, return_shards=True, **kw
    )


@pytest.mark.parametrize("pooling", ["mean", "token"])
def test_shard_at_a_time_tokenisation_gives_the_same_moments_bit_for_bit(
    tiny, monkeypatch, pooling
):
    """Corpus-order shards tokenised one at a time on a background thread (the next while
    the current one streams), one at a time without the thread, or all up front: the same
    batches, so every shard's moments and the merge are equal bit for bit."""
    pairs = {"bert": tiny["bert"], "bert2": tiny["bert"]} if pooling == "token" else tiny
    kw = dict(pooling=pooling, layers="all", paper_compat_padding=pooling == "mean", **KW)
    if pooling == "mean":
        kw["max_length"] = 12
    results = {}
    for lazy, prefetch in ((True, True), (True, False), (False, False)):
        monkeypatch.setattr(ex_streaming, "_LAZY_ENCODING", lazy)
        monkeypatch.setattr(ex_streaming, "_PREFETCH", prefetch)
        results[lazy, prefetch] = _corpus_order_shards(pairs, **kw)
    (merged, parts), *others = results.values()
    assert len(parts) > 2
    for other, other_parts in others:
        assert other.names == merged.names and other.n == merged.n
        for a, b in zip([merged, *parts], [other, *other_parts]):
            assert torch.equal(a.mean(a.names), b.mean(b.names))
            assert torch.equal(a.cov(a.names), b.cov(b.names))


def test_shard_tokenisation_runs_one_shard_ahead_on_one_thread(tiny, monkeypatch):
    import threading

    seen, real = [], ex_pooling._shard_plan

    def spy(plan, ids):
        seen.append((threading.current_thread().name, int(ids[0])))
        return real(plan, ids)

    monkeypatch.setattr(ex_streaming, "_shard_plan", spy)
    _corpus_order_shards({"bert": tiny["bert"]}, layers="last", **KW)
    assert [first for _, first in seen] == list(range(0, 3 * len(TEXTS), 5))
    assert {name.split("_")[0] for name, _ in seen} == {"lmsim-tokenise"}


def test_a_tokenisation_error_in_the_background_reaches_the_caller(tiny, monkeypatch):
    real = ex_pooling._shard_plan

    def second_fails(plan, ids):
        if ids[0] > 0:
            raise ValueError("tokeniser broke on shard 2")
        return real(plan, ids)

    monkeypatch.setattr(ex_streaming, "_shard_plan", second_fails)
    with pytest.raises(ValueError, match="tokeniser broke on shard 2"):
        _corpus_order_shards({"bert": tiny["bert"]}, layers="last", **KW)


def test_moments_that_cannot_fit_are_refused_before_any_forward_pass(tiny, monkeypatch):
    from lmsim.extract import room

    def no_forward(*args, **kwargs):
        raise AssertionError("a forward pass ran")

    monkeypatch.setattr(room, "_free_bytes", lambda device: 1000.0)
    monkeypatch.setattr(ex_streaming, "_pooled_batches", no_forward)
    with pytest.raises(MemoryError, match=r"hold 7 float64 moments .* larger shard_size"):
        _corpus_order_shards({"bert": tiny["bert"]}, layers="last", **KW)
    with pytest.raises(MemoryError, match=r"hold 2 float64 moments .* fewer layers"):
        extract_moments({"bert": tiny["bert"]}, TEXTS, cache=False, **KW)
