"""Tests of lmsim.merge: RegMean, Fisher and simple averaging, from arrays to HF models.

Array functions are checked against naive implementations written from the formulas
(explicit inverses allowed there) and against the properties the paper states; the
model-level merge runs on tiny random models saved with ``save_pretrained`` and reloaded
through ``from_pretrained``.
"""

from __future__ import annotations

import functools
import json
import warnings

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from tokenizers import (
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)
from torch import nn
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    BertConfig,
    BertForSequenceClassification,
    DistilBertConfig,
    DistilBertForSequenceClassification,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MPNetConfig,
    MPNetForSequenceClassification,
    PreTrainedTokenizerFast,
    RobertaConfig,
    RobertaForSequenceClassification,
)

from lmsim.merge import (
    MergeReport,
    RegMeanAccumulator,
    SingularGramWarning,
    collect_fishers,
    collect_grams,
    ensemble_logits,
    fisher_average,
    linear_layers,
    load_fishers,
    load_grams,
    load_metadata,
    merge_models,
    regmean_linear,
    regularize_gram,
    save_fishers,
    save_grams,
    simple_average,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SEEDS = [0, 1, 2]
TEXTS = [
    "the cat sat on the mat",
    "a dog barked loudly at the postman",
    "green ideas sleep furiously",
    "she sells sea shells by the sea shore",
    "models are hard to interpret",
    "the quick brown fox jumps over the lazy dog",
]


# ====================================================================== naive references
def naive_regularize(G, alpha, gamma=0.0):
    D = np.diag(np.diag(G))
    return alpha * G + (1 - alpha) * D + gamma * np.eye(len(G))


def naive_regmean(Ws, Gs, alpha=1.0, gamma=0.0):
    """Eq. 2 with G̃ (Algorithm 1), an explicit inverse, back in the (out, in) layout."""
    Gt = [naive_regularize(G, alpha, gamma) for G in Gs]
    return (np.linalg.inv(sum(Gt)) @ sum(G @ W.T for G, W in zip(Gt, Ws))).T


def naive_regmean_or_ridge(Ws, Gs, alpha=1.0):
    """``naive_regmean``, or with the documented ridge where the sum is singular."""
    total = sum(naive_regularize(G, alpha) for G in Gs)
    eig = np.linalg.eigvalsh(total)
    if eig.min() > 1e-10 * eig.max():
        return naive_regmean(Ws, Gs, alpha)
    lam = 1e-8 * np.diag(total).mean() / len(Gs)
    return naive_regmean(Ws, Gs, alpha, gamma=lam)


def random_layer(seed, k=3, d_in=6, d_out=4, n=(40, 25, 60)):
    """K weights (d_out, d_in), their inputs X_i (n_i, d_in) with offsets, Grams X_iᵀX_i."""
    rng = np.random.default_rng(seed)
    Ws = [rng.normal(size=(d_out, d_in)) for _ in range(k)]
    Xs = [rng.normal(size=(n[i], d_in)) + rng.normal(size=d_in) for i in range(k)]
    return Ws, Xs, [X.T @ X for X in Xs]


# ====================================================================== array level
@pytest.mark.parametrize("alpha", [1.0, 0.9, 0.5, 0.0])
@pytest.mark.parametrize("seed", SEEDS)
def test_regmean_linear_matches_naive(seed, alpha):
    Ws, _, Gs = random_layer(seed)
    out = regmean_linear(Ws, Gs, alpha=alpha)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == (4, 6)
    np.testing.assert_allclose(out, naive_regmean(Ws, Gs, alpha), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("alpha", [1.0, 0.9])
@pytest.mark.parametrize("seed", SEEDS)
def test_float32_products_stay_within_the_rounding_bound(seed, alpha):
    """``product_dtype="float32"``: the float64 solve of float32-rounded ``G̃ Wᵀ`` sums.

    Its error against the naive float64 merge is bounded by the condition number of the
    Gram sum times the products' float32 rounding (a few ulps of ``|G̃| |W|``), and it is
    not zero (the products did run in float32)."""
    Ws, _, Gs = random_layer(seed, d_in=24, d_out=10, n=(80, 50, 120))
    ref = naive_regmean(Ws, Gs, alpha)
    out = regmean_linear(Ws, Gs, alpha=alpha, product_dtype="float32")
    Gt = [naive_regularize(G, alpha) for G in Gs]
    total = sum(Gt)
    cond = np.linalg.cond(total)
    scale = max(np.abs(G).max() * np.abs(W).max() for G, W in zip(Gt, Ws)) * 24
    bound = 4 * cond * np.finfo(np.float32).eps * scale / np.abs(total).max()
    err = np.abs(out - ref).max()
    assert err <= bound, (err, bound)
    assert 1e-12 * np.abs(ref).max() < err < 1e-3 * np.abs(ref).max()


def test_float32_products_in_the_accumulator_keep_float64_sums():
    Ws, _, Gs = random_layer(0)
    acc = RegMeanAccumulator(0.9, product_dtype="float32")
    for W, G in zip(Ws, Gs):
        acc.add({"fc": W}, {"fc": G})
    assert acc._gw_sum["fc"].dtype == torch.float64 and acc._gram_sum["fc"].dtype == torch.float64
    with pytest.raises(ValueError, match="product_dtype"):
        RegMeanAccumulator(product_dtype="float16")


@pytest.mark.parametrize("seed", SEEDS)
def test_diag_constant_matches_eq4(seed):
    Ws, _, Gs = random_layer(seed)
    out = regmean_linear(Ws, Gs, alpha=1.0, diag_constant=0.3)
    np.testing.assert_allclose(out, naive_regmean(Ws, Gs, 1.0, 0.3), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        regularize_gram(Gs[0], 0.7, 0.3), naive_regularize(Gs[0], 0.7, 0.3), rtol=1e-14
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_regmean_torch_in_torch_out(seed):
    Ws, _, Gs = random_layer(seed)
    out = regmean_linear([torch.tensor(w, dtype=torch.float32) for w in Ws], Gs, alpha=0.9)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    ref = naive_regmean([np.float32(w).astype(np.float64) for w in Ws], Gs, 0.9)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_merging_identical_weights_returns_them(seed):
    Ws, _, Gs = random_layer(seed)
    np.testing.assert_allclose(regmean_linear([Ws[0]] * 3, Gs, alpha=0.9), Ws[0], atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_identical_grams_give_simple_average(seed):
    Ws, _, Gs = random_layer(seed)
    out = regmean_linear(Ws, [Gs[0]] * 3)
    np.testing.assert_allclose(out, simple_average(Ws), atol=1e-12)
    np.testing.assert_allclose(simple_average(Ws), np.mean(Ws, axis=0), atol=1e-15)


@pytest.mark.parametrize("seed", SEEDS)
def test_regmean_equals_pooled_least_squares(seed):
    """Eq. 1: with G_i = X_iᵀX_i (sums), W_M fits every model's outputs on its own inputs."""
    Ws, Xs, Gs = random_layer(seed)
    X = np.vstack(Xs)
    Y = np.vstack([Xi @ W.T for Xi, W in zip(Xs, Ws)])
    lstsq = np.linalg.lstsq(X, Y, rcond=None)[0].T
    np.testing.assert_allclose(regmean_linear(Ws, Gs), lstsq, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_alpha_zero_weights_features_by_gram_diagonal(seed):
    Ws, _, Gs = random_layer(seed)
    d = [np.diag(G) for G in Gs]  # (d_in,) each
    expected = sum(W * di for W, di in zip(Ws, d)) / sum(d)  # column j weighted by G_i[j, j]
    np.testing.assert_allclose(regmean_linear(Ws, Gs, alpha=0.0), expected, rtol=1e-12)
    # Equal diagonals: simple average, even though the off-diagonals differ.
    scaled = [G / np.sqrt(np.outer(np.diag(G), np.diag(G))) for G in Gs]
    np.testing.assert_allclose(regmean_linear(Ws, scaled, alpha=0.0), np.mean(Ws, 0), atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_singular_sum_warns_and_solves_the_documented_ridge(seed):
    rng = np.random.default_rng(seed)
    Ws = [rng.normal(size=(3, 8)) for _ in range(2)]
    Gs = [(X := rng.normal(size=(2, 8))).T @ X for _ in range(2)]  # rank 4 < 8
    with pytest.warns(SingularGramWarning, match="layer 'fc'.*singular"):
        out = regmean_linear(Ws, Gs, name="fc")
    assert np.isfinite(out).all()
    # The documented fallback: λ = 1e-8 · mean(diag(ΣG)) / K added to every model's Gram.
    lam = 1e-8 * np.diag(sum(Gs)).mean() / 2
    ref = naive_regmean(Ws, [G + lam * np.eye(8) for G in Gs])
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    # The normal equations of Eq. 1 still hold: the fit on the spanned inputs is kept.
    lhs = sum(Gs) @ out.T
    np.testing.assert_allclose(lhs, sum(G @ W.T for G, W in zip(Gs, Ws)), atol=1e-6)
    with pytest.warns(SingularGramWarning):
        zero = regmean_linear(Ws, [np.zeros((8, 8))] * 2, name="fc")
    np.testing.assert_allclose(zero, np.mean(Ws, 0), atol=1e-12)  # no data: simple average


def test_nonsingular_sum_does_not_warn():
    Ws, _, Gs = random_layer(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        regmean_linear(Ws, Gs, alpha=0.9)


@pytest.mark.parametrize("seed", SEEDS)
def test_fisher_average_matches_naive(seed):
    rng = np.random.default_rng(seed)
    ps = [rng.normal(size=(3, 5)) for _ in range(3)]
    fs = [rng.exponential(size=(3, 5)) for _ in range(3)]
    fs[0][0, 0] = 0.0  # floored at eps
    floored = [np.maximum(f, 1e-6) for f in fs]
    ref = sum(f * p for f, p in zip(floored, ps)) / sum(floored)
    np.testing.assert_allclose(fisher_average(ps, fs), ref, rtol=1e-12)
    zeros = [np.zeros((3, 5))] * 3
    np.testing.assert_allclose(fisher_average(ps, zeros), np.mean(ps, 0), rtol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_accumulator_streams_with_constant_state(seed):
    Ws, _, Gs = random_layer(seed, k=3)
    acc = RegMeanAccumulator(alpha=0.9)
    sizes = []
    for W, G in zip(Ws, Gs):
        acc.add({"a": W, "b": W[:2]}, {"a": G, "b": G})
        state = [acc._gram_sum, acc._gw_sum, acc._w_sum]
        sizes.append(sum(t.numel() for store in state for t in store.values()))
    assert len(set(sizes)) == 1  # memory does not grow with the number of models
    merged = acc.merge()
    np.testing.assert_allclose(merged["a"].numpy(), naive_regmean(Ws, Gs, 0.9), rtol=1e-10)
    np.testing.assert_allclose(
        merged["b"].numpy(), naive_regmean([W[:2] for W in Ws], Gs, 0.9), rtol=1e-10
    )


def test_array_errors_name_the_problem():
    Ws, _, Gs = random_layer(0)
    with pytest.raises(ValueError, match="`weights` is empty"):
        regmean_linear([], [])
    with pytest.raises(ValueError, match="one entry per model"):
        regmean_linear(Ws, Gs[:2])
    bad = Gs[1].copy()
    bad[0, 1] = np.nan
    with pytest.raises(ValueError, match="Gram of layer 'q'.*NaN"):
        regmean_linear(Ws, [Gs[0], bad, Gs[2]], name="q")
    with pytest.raises(ValueError, match="weight of layer 'q'.*NaN"):
        regmean_linear([Ws[0] * np.inf, *Ws[1:]], Gs, name="q")
    with pytest.raises(ValueError, match="layer 'q' has size 5 but the layer has 6 inputs"):
        regmean_linear(Ws, [Gs[0], Gs[1][:5, :5], Gs[2]], name="q")
    with pytest.raises(ValueError, match="square"):
        regmean_linear(Ws, [G[:, :5] for G in Gs], name="q")
    with pytest.raises(ValueError, match="shape"):
        regmean_linear([Ws[0], Ws[1][:3], Ws[2]], Gs, name="q")
    with pytest.raises(ValueError, match="`alpha` must be in"):
        regmean_linear(Ws, Gs, alpha=1.5)
    with pytest.raises(ValueError, match="`params` is empty"):
        simple_average([])
    with pytest.raises(ValueError, match="one shape"):
        simple_average([np.zeros(3), np.zeros(4)])
    with pytest.raises(ValueError, match=">= 0"):
        fisher_average([np.zeros(3)], [-np.ones(3)])
    with pytest.raises(KeyError, match="no Gram for layer 'b'"):
        RegMeanAccumulator().add({"a": Ws[0], "b": Ws[0]}, {"a": Gs[0]})
    acc = RegMeanAccumulator()
    acc.add({"a": Ws[0]}, {"a": Gs[0]})
    with pytest.raises(KeyError, match="different linear layers"):
        acc.add({"c": Ws[0]}, {"c": Gs[0]})


# ====================================================================== tiny models
def _wordpiece():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=80, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    )
    tok.train_from_iterator(TEXTS * 3, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        padding_side="right",
    )


def _bytelevel():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(TEXTS * 3, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        padding_side="right",
    )


SMALL = dict(num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)


def _configs(wp, bl):
    return {
        "bert": (
            BertForSequenceClassification,
            BertConfig(vocab_size=len(wp), hidden_size=16, max_position_embeddings=64, **SMALL),
        ),
        "roberta": (
            RobertaForSequenceClassification,
            RobertaConfig(
                vocab_size=len(wp), hidden_size=16, max_position_embeddings=66, pad_token_id=0,
                **SMALL,
            ),
        ),
        "distilbert": (
            DistilBertForSequenceClassification,
            DistilBertConfig(
                vocab_size=len(wp), dim=16, n_layers=2, n_heads=2, hidden_dim=32,
                max_position_embeddings=64, pad_token_id=0,
            ),
        ),
        "mpnet": (
            MPNetForSequenceClassification,
            MPNetConfig(
                vocab_size=len(wp), hidden_size=16, max_position_embeddings=66, pad_token_id=0,
                **SMALL,
            ),
        ),
        "gpt2": (
            GPT2LMHeadModel,
            GPT2Config(vocab_size=len(bl), n_embd=16, n_layer=2, n_head=2, n_positions=64),
        ),
        "llama": (
            LlamaForCausalLM,
            LlamaConfig(
                vocab_size=len(bl), hidden_size=16, num_key_value_heads=1,
                max_position_embeddings=64, tie_word_embeddings=False, **SMALL,
            ),
        ),
    }  # fmt: skip


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """``{kind: (paths of 3 seeded models, tokenizer)}`` saved with save_pretrained."""
    root = tmp_path_factory.mktemp("merge")
    wp, bl = _wordpiece(), _bytelevel()
    out = {}
    for kind, (cls, config) in _configs(wp, bl).items():
        tok = bl if kind in ("gpt2", "llama") else wp
        paths = []
        for seed in range(3):
            torch.manual_seed(seed)
            if kind in ("gpt2", "llama"):
                config.pad_token_id = tok.pad_token_id
            else:
                config.num_labels = 3
            path = root / f"{kind}{seed}"
            cls(config).save_pretrained(path)
            tok.save_pretrained(path)
            paths.append(path)
        out[kind] = (paths, tok)
    return out


def _load(path, kind):
    auto = AutoModelForCausalLM if kind in ("gpt2", "llama") else AutoModelForSequenceClassification
    return auto.from_pretrained(path).eval()


def _grams(model, tok, texts=TEXTS, **kw):
    return collect_grams(model, tok, texts, batch_size=4, device="cpu", progress=False, **kw)


def _merge_with_grams(kind, zoo, **kw):
    paths, tok = zoo[kind]
    ms = [_load(p, kind) for p in paths]
    gs = [_grams(m, tok, TEXTS[i::2] + TEXTS[:2]) for i, m in enumerate(ms)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularGramWarning)  # heads see one row per text
        merged, report = merge_models(ms, gs, **kw)
    return ms, gs, merged, report


def _params(model):
    return {k: v.detach().double().numpy() for k, v in model.named_parameters()}


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert", "mpnet", "gpt2", "llama"])
def test_merge_follows_the_recipe_and_reports_every_parameter(zoo, kind):
    ms, gs, merged, report = _merge_with_grams(kind, zoo, alpha=0.9)
    report.check_complete(merged)
    names = [n for n, _ in merged.named_parameters(remove_duplicate=False)]
    assert list(report.entries) == names
    frame = report.to_frame()
    assert len(frame) == len(names) and set(frame["how"]) <= {"regmean", "simple", "tied"}
    layers = linear_layers(merged)
    merged_p, ps = _params(merged), [_params(m) for m in ms]
    n_regmean = 0
    for name, (how, _) in report.entries.items():
        if how == "regmean":
            module = name.removesuffix(".weight")
            transposed = layers[module][1]
            Ws = [p[name].T if transposed else p[name] for p in ps]
            ref = naive_regmean_or_ridge(Ws, [g[module].numpy() for g in gs], 0.9)
            got = merged_p[name].T if transposed else merged_p[name]
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5, err_msg=name)
            n_regmean += 1
        elif how == "simple":
            ref = np.mean([p[name] for p in ps], axis=0)
            np.testing.assert_allclose(merged_p[name], ref, rtol=1e-6, atol=1e-7, err_msg=name)
    # Every linear weight not tied to an embedding went through RegMean.
    tied = {n for n, (h, _) in report.entries.items() if h == "tied"}
    assert n_regmean == len(layers) - len(tied)
    assert "regmean" in str(report)


def test_gpt2_conv1d_is_a_transposed_linear_and_ties_survive(zoo):
    ms, gs, merged, report = _merge_with_grams("gpt2", zoo, alpha=1.0)
    name = "transformer.h.0.attn.c_attn"
    assert linear_layers(merged)[name][1] is True
    Ws = [m.get_submodule(name).weight.detach().double().numpy().T for m in ms]  # (out, in)
    # At alpha = 1 this Gram sum is singular: LayerNorm (unit gain at init) outputs sum to 0.
    ref = naive_regmean_or_ridge(Ws, [g[name].numpy() for g in gs])
    got = merged.get_submodule(name).weight.detach().double().numpy()  # (in, out)
    np.testing.assert_allclose(got, ref.T, rtol=1e-4, atol=1e-5)
    # lm_head is tied to the token embedding: merged once, by simple averaging, still tied.
    assert report.entries["lm_head.weight"][0] == "tied"
    assert report.entries["transformer.wte.weight"][0] == "simple"
    assert merged.lm_head.weight is merged.transformer.wte.weight
    wte = np.mean([m.transformer.wte.weight.detach().double().numpy() for m in ms], axis=0)
    np.testing.assert_allclose(merged.lm_head.weight.detach().double().numpy(), wte, atol=1e-7)


def test_llama_gqa_projections(zoo):
    ms, gs, merged, report = _merge_with_grams("llama", zoo, alpha=0.5)
    for name in ("model.layers.1.self_attn.k_proj", "lm_head"):
        Ws = [m.get_submodule(name).weight.detach().double().numpy() for m in ms]
        ref = naive_regmean_or_ridge(Ws, [g[name].numpy() for g in gs], 0.5)
        got = merged.get_submodule(name).weight.detach().double().numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
        assert report.entries[f"{name}.weight"][0] == "regmean"
    assert report.entries["model.norm.weight"][0] == "simple"


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_float32_products_merge_close_to_float64(zoo, kind):
    _, _, exact, _ = _merge_with_grams(kind, zoo, alpha=0.9)
    _, _, fast, report = _merge_with_grams(kind, zoo, alpha=0.9, product_dtype="float32")
    report.check_complete(fast)
    a, b = _params(exact), _params(fast)
    for name, (how, _) in report.entries.items():
        if how == "tied":  # an alias: named_parameters lists the tensor once
            continue
        tol = 1e-3 * max(np.abs(a[name]).max(), 1e-6) if how == "regmean" else 0.0
        np.testing.assert_allclose(b[name], a[name], rtol=0, atol=tol, err_msg=name)


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_merging_identical_models_returns_the_model(zoo, kind):
    paths, tok = zoo[kind]
    m = _load(paths[0], kind)
    g = _grams(m, tok)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularGramWarning)
        merged, _ = merge_models([m, m, m], [g, g, g], alpha=0.9)
    for name, value in _params(merged).items():
        np.testing.assert_allclose(value, _params(m)[name], atol=1e-6, err_msg=name)
    assert merged is not m


def test_heads_of_different_shapes_are_kept_and_exclude(zoo):
    paths, tok = zoo["bert"]
    ms = [_load(p, "bert") for p in paths[:2]]
    other = AutoModelForSequenceClassification.from_pretrained(
        paths[2], id2label={0: "no", 1: "yes"}, ignore_mismatched_sizes=True
    )
    ms.append(other.eval())
    merged, report = merge_models(ms, method="simple")
    for name in ("classifier.weight", "classifier.bias"):
        how, note = report.entries[name]
        assert how == "kept" and "model 2" in note
        torch.testing.assert_close(merged.get_parameter(name), ms[0].get_parameter(name))
    assert merged.classifier.out_features == 3
    merged, report = merge_models(ms[:2], method="simple", exclude=r"^bert\.pooler\.")
    assert report.names("kept") == ["bert.pooler.dense.weight", "bert.pooler.dense.bias"]


def test_streaming_from_disk_equals_in_memory(zoo, tmp_path):
    paths, tok = zoo["bert"]
    ms = [_load(p, "bert") for p in paths]
    files = []
    for i, m in enumerate(ms):
        files.append(tmp_path / f"g{i}.safetensors")
        save_grams(files[-1], _grams(m, tok), metadata={"model": str(paths[i])})
    assert load_metadata(files[0]) == {"model": str(paths[0])}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularGramWarning)
        a, _ = merge_models(ms, [load_grams(f) for f in files])
        loaders = [functools.partial(_load, p, "bert") for p in paths]
        b, _ = merge_models(loaders, files)  # models loaded one by one, Grams read lazily
    for name, value in _params(a).items():
        np.testing.assert_array_equal(value, _params(b)[name])
    lazy = load_grams(files[1], lazy=True)
    eager = load_grams(files[1])
    assert list(lazy) == list(eager) and len(lazy) == len(eager) and "nope" not in lazy
    torch.testing.assert_close(lazy["classifier"], eager["classifier"])


def test_merge_linear_models_is_pooled_least_squares():
    """Model-level Eq. 1 on plain nn.Linear models (no config, no HF class)."""
    Ws, Xs, Gs = random_layer(0)
    lins = []
    for W in Ws:
        lin = nn.Linear(6, 4, bias=False).double()
        lin.weight.data = torch.tensor(W)
        lins.append(lin)
    merged, report = merge_models(lins, [{"": torch.tensor(G)} for G in Gs], alpha=1.0)
    X, Y = np.vstack(Xs), np.vstack([X @ W.T for X, W in zip(Xs, Ws)])
    np.testing.assert_allclose(
        merged.weight.detach().numpy(), np.linalg.lstsq(X, Y, rcond=None)[0].T, rtol=1e-9
    )
    assert report.entries == {"weight": ("regmean", "")}


def test_model_errors_name_the_layer_and_the_fix(zoo):
    paths, tok = zoo["bert"]
    a, b = _load(paths[0], "bert"), _load(paths[1], "bert")
    ga = _grams(a, tok)
    with pytest.raises(ValueError, match="`models` is empty"):
        merge_models([], [], method="regmean")
    with pytest.raises(ValueError, match="needs `grams`"):
        merge_models([a, b])
    with pytest.raises(ValueError, match="is a GPT2LMHeadModel but models\\[0\\] a Bert"):
        merge_models([a, _load(zoo["gpt2"][0][0], "gpt2")], method="simple")
    deeper = BertForSequenceClassification(
        BertConfig(**{**a.config.to_dict(), "num_hidden_layers": 3})
    )
    with pytest.raises(ValueError, match="different config.*num_hidden_layers"):
        merge_models([a, deeper], method="simple")
    layer = "bert.encoder.layer.1.attention.self.query"
    missing = {k: v for k, v in ga.items() if k != layer}
    with pytest.raises(KeyError, match=f"{layer}.*collect_grams"):
        merge_models([a, b], [ga, missing])
    merged, report = merge_models(
        [a, b], [missing, missing], missing_gram="simple", method="regmean", alpha=0.5
    )
    assert report.entries[f"{layer}.weight"][0] == "simple"
    wrong = {**ga, layer: torch.eye(5)}
    with pytest.raises(ValueError, match=f"layer '{layer}.weight' has size 5 but the layer has 16"):
        merge_models([a, b], [ga, wrong])
    nan = {**ga, layer: ga[layer].clone().fill_(float("nan"))}
    with pytest.raises(ValueError, match=f"Gram of layer '{layer}.weight' contains NaN"):
        merge_models([a, b], [ga, nan])
    bad = _load(paths[1], "bert")
    with torch.no_grad():
        bad.bert.embeddings.LayerNorm.weight[0] = float("inf")
    with pytest.raises(ValueError, match="'bert.embeddings.LayerNorm.weight' of model 1.*NaN"):
        merge_models([a, bad], method="simple")
    with pytest.raises(ValueError, match="fewer entries than `models`"):
        merge_models([a, b], [ga])
    with pytest.raises(ValueError, match="more entries than `models`"):
        merge_models([a, b], [ga, ga, ga])
    with pytest.raises(KeyError, match="not linear layers"):
        merge_models([a, b], [ga, {**ga, "encoder.nope": torch.eye(16)}])
    with pytest.raises(ValueError, match="`method` must be one of"):
        merge_models([a, b], method="slerp")
    with pytest.raises(TypeError, match="`models\\[1\\]` must be an nn.Module"):
        merge_models([a, "bert"], method="simple")
    with pytest.raises(KeyError, match="no Fisher for parameter 'bert.embeddings"):
        merge_models([a, b], fishers=[{}, {}], method="fisher")
    one, two = nn.Sequential(nn.Linear(4, 4)), nn.Sequential(nn.Identity(), nn.Linear(4, 4))
    with pytest.raises(ValueError, match="different parameter names.*missing \\['0.weight'"):
        merge_models([one, two], method="simple")


def test_save_load_never_trusts_the_file(tmp_path):
    grams = {"a.b": torch.eye(3, dtype=torch.float64) * 2}
    path = tmp_path / "g.safetensors"
    save_grams(path, grams)
    torch.testing.assert_close(load_grams(path)["a.b"], grams["a.b"])
    save_fishers(tmp_path / "f.safetensors", {"w": torch.ones(2, 3)})
    assert load_fishers(tmp_path / "f.safetensors")["w"].shape == (2, 3)
    with pytest.raises(ValueError, match="holds 'fishers', not grams"):
        load_grams(tmp_path / "f.safetensors")
    meta = {"lmsim_kind": "grams", "shapes": json.dumps({"a": [4, 4]}), "user": "{}"}
    save_file({"a": torch.eye(3, dtype=torch.float64)}, str(tmp_path / "bad.st"), metadata=meta)
    with pytest.raises(ValueError, match="metadata says \\[4, 4\\]"):
        load_grams(tmp_path / "bad.st")
    with pytest.raises(ValueError, match="must be square"):
        save_grams(path, {"a": torch.zeros(2, 3)})
    with pytest.raises(FileNotFoundError, match="save_grams"):
        load_grams(tmp_path / "missing.safetensors")


def test_collect_grams_mean_sum_and_padding(zoo):
    paths, tok = zoo["bert"]
    m = _load(paths[0], "bert")
    mean, total = _grams(m, tok), _grams(m, tok, reduction="sum")
    name = "bert.encoder.layer.0.intermediate.dense"
    n_tokens = sum(len(tok(t)["input_ids"]) for t in TEXTS)
    torch.testing.assert_close(mean[name] * n_tokens, total[name])
    # Manual Gram on unpadded sequences, one at a time.
    rows = []
    hook = m.get_submodule(name).register_forward_pre_hook(lambda _, a: rows.append(a[0][0]))
    try:
        with torch.no_grad():
            for t in TEXTS:
                m(input_ids=torch.tensor([tok(t)["input_ids"]]))
    finally:
        hook.remove()
    X = torch.cat(rows).double()
    torch.testing.assert_close(total[name], X.T @ X, atol=1e-5, rtol=1e-6)
    compat = _grams(m, tok, paper_compat_padding=True, max_length=24)
    assert not torch.allclose(compat[name], mean[name])  # padding rows enter the mean


def _manual_fisher(model, tok, texts, labels_for):
    """Mean of per-example squared gradients of log p(y|x), y given per example."""
    p = model.classifier.bias
    total = torch.zeros_like(p, dtype=torch.float64)
    for i, t in enumerate(texts):
        logp = torch.log_softmax(model(input_ids=torch.tensor([tok(t)["input_ids"]])).logits[0], -1)
        for y, w in labels_for(i, logp):
            (g,) = torch.autograd.grad(logp[y], p, retain_graph=True)
            total += w * g.double() ** 2
    return total / len(texts)


def test_collect_fishers_modes(zoo):
    paths, tok = zoo["bert"]
    m = _load(paths[0], "bert")
    labels = [0, 1, 2, 0, 1, 2]
    kw = dict(progress=False)
    emp = collect_fishers(m, tok, TEXTS, labels, mode="empirical", **kw)
    ref = _manual_fisher(m, tok, TEXTS, lambda i, lp: [(labels[i], 1.0)])
    torch.testing.assert_close(emp["classifier.bias"].double(), ref, rtol=1e-4, atol=1e-9)
    exp = collect_fishers(m, tok, TEXTS, mode="expected", **kw)
    ref = _manual_fisher(
        m, tok, TEXTS, lambda i, lp: [(y, float(lp[y].detach().exp())) for y in range(3)]
    )
    torch.testing.assert_close(exp["classifier.bias"].double(), ref, rtol=1e-4, atol=1e-9)
    s1 = collect_fishers(m, tok, TEXTS, mode="sample", seed=3, **kw)
    s2 = collect_fishers(m, tok, TEXTS, mode="sample", seed=3, **kw)
    assert set(s1) == {n for n, _ in m.named_parameters()}
    torch.testing.assert_close(s1["classifier.weight"], s2["classifier.weight"])
    with pytest.raises(ValueError, match="needs `labels`"):
        collect_fishers(m, tok, TEXTS, mode="empirical", **kw)
    # Fisher merge of two models: every parameter is fisher_average of the two.
    b = _load(paths[1], "bert")
    fb = collect_fishers(b, tok, TEXTS, mode="expected", **kw)
    merged, report = merge_models([m, b], fishers=[exp, fb], method="fisher")
    assert set(h for h, _ in report.entries.values()) == {"fisher"}
    name = "bert.encoder.layer.1.output.dense.weight"
    ref = fisher_average(
        [m.get_parameter(name).detach(), b.get_parameter(name).detach()], [exp[name], fb[name]]
    )
    torch.testing.assert_close(merged.get_parameter(name).double(), ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", ["bert", "mpnet"])
def test_fisher_sparse_embedding_rows_equal_dense_squares(zoo, kind):
    """Every parameter's Fisher, embeddings included (sparse rows, repeated tokens such as
    "the" coalesced before squaring), equals per-example dense squared gradients."""
    paths, tok = zoo[kind]
    m = _load(paths[0], kind)
    labels = [0, 1, 2, 0, 1, 2]
    got = collect_fishers(m, tok, TEXTS, labels, mode="empirical", progress=False)
    assert not any(e.sparse for e in m.modules() if isinstance(e, torch.nn.Embedding))
    names = [n for n, _ in m.named_parameters()]
    ref = {n: torch.zeros_like(p, dtype=torch.float64) for n, p in m.named_parameters()}
    for text, y in zip(TEXTS, labels):
        logp = torch.log_softmax(m(**tok(text, return_tensors="pt")).logits[0], -1)
        grads = torch.autograd.grad(logp[y], list(m.parameters()), allow_unused=True)
        for n, g in zip(names, grads):
            if g is not None:
                ref[n] += g.double() ** 2
    emb = m.get_input_embeddings().weight
    assert any(n for n, p in m.named_parameters() if p is emb)
    for n in names:
        torch.testing.assert_close(got[n].double(), ref[n] / len(TEXTS), rtol=1e-5, atol=1e-12)


def test_ensemble_logits_is_the_mean_of_unpadded_logits(zoo):
    paths, tok = zoo["bert"]
    ms = [_load(p, "bert") for p in paths]
    out = ensemble_logits(ms, tok, TEXTS, batch_size=4)
    with torch.no_grad():
        ref = np.mean(
            [
                [m(input_ids=torch.tensor([tok(t)["input_ids"]])).logits[0].numpy() for t in TEXTS]
                for m in ms
            ],
            axis=0,
        )
    assert out.shape == (len(TEXTS), 3)
    np.testing.assert_allclose(out, ref, atol=1e-5)


def test_report_is_a_dataclass_with_counts():
    report = MergeReport("simple", 2, {"a": ("simple", ""), "b": ("kept", "why")})
    assert report.counts() == {"simple": 1, "kept": 1}
    assert "b: kept (why)" in str(report)
