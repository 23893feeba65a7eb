"""The released RegMean code's settings, the Grams' precision policy, and what exactness buys.

``regmean_exactness`` is checked on synthetic Grams of known conditioning: its reference
against numpy's float64 solve, its condition numbers against numpy's, and the float32 errors
against the bound (condition number times float32's precision) they must respect.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lmsim._runtime import autocast_dtype
from lmsim.merge import (
    RELEASED_ALPHA,
    linear_weights,
    regmean_exactness,
    regmean_linear,
    regularize_gram,
    released_alpha,
)
from lmsim.merge._grams import gram_dtype

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SEEDS = [0, 1, 2]


# ====================================================================== released α
def test_released_alpha_table():
    assert released_alpha("glue") == 1.0  # regmean_reduce_nondiag unset: no scaling
    assert released_alpha("emotion") == released_alpha("ner") == 0.1
    assert released_alpha("ner", "deberta-large") == 0.9
    assert released_alpha("glue", "distilbert-base") == 1.0
    for row in RELEASED_ALPHA:
        assert 0.0 <= row.alpha <= 1.0 and row.configs
        assert all(c.startswith("src/configs/exps/") and c.endswith(".yaml") for c in row.configs)
    pairs = [(r.family, r.model) for r in RELEASED_ALPHA]
    assert len(pairs) == len(set(pairs))
    with pytest.raises(KeyError, match="known \\(family, model\\) pairs"):
        released_alpha("glue", "t5-base")


def test_released_scaling_is_regularize_gram():
    """The released ``reduce_non_diag(G, a)`` multiplies by a matrix of ``a`` with ones on its
    diagonal: that is ``regularize_gram(G, alpha=a)``."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 6))
    G = torch.from_numpy(X.T @ X)
    for a in (0.1, 0.9):
        diag_weight = torch.diag(torch.ones(6) - a).double()
        released = G * (diag_weight + torch.zeros_like(diag_weight).fill_(a))
        torch.testing.assert_close(released, regularize_gram(G, alpha=a))


# ====================================================================== precision policy
def test_grams_are_collected_in_float32_on_every_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    cuda = torch.device("cuda")
    # Neither the extraction default nor the Grams' autocasts to 16 bits on CUDA.
    assert autocast_dtype(cuda, None) is None
    assert gram_dtype(None) == "float32" and gram_dtype("auto") == "float32"
    assert autocast_dtype(cuda, gram_dtype(None)) is None
    # bfloat16 only when asked for.
    assert autocast_dtype(cuda, gram_dtype("bfloat16")) == torch.bfloat16
    # On the CPU the default was float32 before and is float32 now.
    assert autocast_dtype(torch.device("cpu"), None) is None
    assert autocast_dtype(torch.device("cpu"), gram_dtype(None)) is None


def test_collect_grams_passes_the_policy_to_the_extraction(monkeypatch):
    import lmsim.extract
    from lmsim.merge import collect_grams

    seen = []

    def fake(*args, dtype=None, **kwargs):
        seen.append(dtype)
        return {}

    monkeypatch.setattr(lmsim.extract, "extract_linear_grams", fake)
    collect_grams(None, None, ["a"])
    collect_grams(None, None, ["a"], dtype="bfloat16")
    assert seen == ["float32", "bfloat16"]


# ====================================================================== exactness
def _ill_conditioned(seed, d=24, d_out=5, log_cond=7.0, k=2):
    """K models' weights and Grams ``XᵀX / n`` whose inputs have singular values spanning
    ``10^(-log_cond / 2)`` to 1 (Gram condition number ~``10^log_cond``), with a shared
    ill-conditioned direction, as transformer activations have."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    weights, grams = [], []
    for _ in range(k):
        s = np.logspace(0, -log_cond / 2, d) * rng.uniform(0.8, 1.25, size=d)
        U, _ = np.linalg.qr(rng.normal(size=(200, d)))
        X = U @ np.diag(s) @ Q.T
        grams.append({"fc": X.T @ X / 200})
        weights.append({"fc": rng.normal(size=(d_out, d)).astype(np.float32).astype(np.float64)})
    return weights, grams


@pytest.mark.parametrize("seed", SEEDS)
def test_exactness_reference_and_condition_numbers(seed):
    weights, grams = _ill_conditioned(seed, log_cond=4.0)
    table = regmean_exactness(weights, grams, alphas=(0.9, 1.0))
    assert list(table["alpha"]) == [0.9, 1.0]
    for _, row in table.iterrows():
        total = sum(regularize_gram(g["fc"], row["alpha"]) for g in grams)
        assert row["condition"] == pytest.approx(np.linalg.cond(total), rel=1e-6)
        ref = np.linalg.solve(
            total,
            sum(regularize_gram(g["fc"], row["alpha"]) @ w["fc"].T for g, w in zip(grams, weights)),
        ).T
        ours = regmean_linear([w["fc"] for w in weights], [g["fc"] for g in grams], row["alpha"])
        expected = np.linalg.norm(ours - ref) / np.linalg.norm(ref)
        # Two float64 references (torch's LU, numpy's) agree to their own rounding error.
        tolerance = 10 * row["condition"] * np.finfo(np.float64).eps
        assert abs(row["lmsim float64"] - expected) < tolerance
    # α < 1 lifts the smallest eigenvalues: a better-conditioned sum.
    assert table["condition"].iloc[0] < table["condition"].iloc[1]


@pytest.mark.parametrize("seed", SEEDS)
def test_float32_paths_lose_digits_as_conditioning_grows(seed):
    eps32, eps64 = np.finfo(np.float32).eps, np.finfo(np.float64).eps
    well = regmean_exactness(*_ill_conditioned(seed, log_cond=1.0), alphas=(1.0,)).iloc[0]
    ill = regmean_exactness(*_ill_conditioned(seed, log_cond=7.0), alphas=(1.0,)).iloc[0]
    assert well["condition"] < 100 and ill["condition"] > 1e6
    for row in (well, ill):
        # Within the condition-number bound of each precision (a loose constant of 50 d).
        bound32 = 50 * 24 * row["condition"] * eps32
        assert row["float32 inverse (released code)"] < bound32
        assert row["float32 solve"] < bound32
        assert row["lmsim float64"] < 50 * 24 * row["condition"] * eps64
    assert well["float32 inverse (released code)"] < 1e-4
    assert ill["float32 inverse (released code)"] > 1e-3  # float32 keeps ~7 digits, cond 1e7
    assert ill["lmsim float64"] < 1e-7


def test_exactness_marks_singular_sums_and_checks_its_arguments():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3, 8))  # 3 rows, 8 inputs: a singular Gram
    weights = [{"fc": rng.normal(size=(2, 8))}] * 2
    grams = [{"fc": X.T @ X}] * 2
    table = regmean_exactness(weights, grams, alphas=(1.0, 0.5))
    singular, regular = table.iloc[0], table.iloc[1]
    assert singular["condition"] > 1e15 and np.isnan(singular["lmsim float64"])
    assert np.isfinite(regular["lmsim float64"])
    with pytest.raises(ValueError, match="one dict per model"):
        regmean_exactness(weights, grams[:1])
    with pytest.raises(ValueError, match="no layer has both"):
        regmean_exactness([{"a": weights[0]["fc"]}] * 2, grams)
    with pytest.raises(KeyError, match="layer 'fc' has no weight or Gram in models \\[1\\]"):
        regmean_exactness([weights[0], {}], grams, layers=["fc"])


def test_linear_weights_are_out_by_in():
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=20, n_embd=8, n_layer=1, n_head=2))
    ws = linear_weights(model)
    assert tuple(ws["transformer.h.0.mlp.c_fc"].shape) == (32, 8)  # Conv1D stores (8, 32)
    assert tuple(ws["lm_head"].shape) == (20, 8)


@pytest.mark.gpu
def test_cuda_grams_default_to_float32_forward_passes(tmp_path):
    """On a GPU the default Grams match the CPU's float32 ones to float32 rounding, while a
    bfloat16 autocast (asked for) is visibly coarser."""
    from _kinds import build_base
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from lmsim.merge import collect_grams

    path = build_base("bert", tmp_path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).eval()
    tok = AutoTokenizer.from_pretrained(path)
    texts = ["alice went to paris today", "bob saw a dog", "the cat and the bird"] * 4
    kw = dict(batch_size=4, progress=False)
    cpu = collect_grams(model, tok, texts, device="cpu", **kw)
    cuda = collect_grams(model.cuda(), tok, texts, device="cuda", **kw)
    bf16 = collect_grams(model, tok, texts, device="cuda", dtype="bfloat16", **kw)
    name = "bert.encoder.layer.1.output.dense"
    torch.testing.assert_close(cuda[name], cpu[name], rtol=1e-4, atol=1e-6)
    assert not torch.allclose(bf16[name], cpu[name], rtol=1e-4, atol=1e-6)
