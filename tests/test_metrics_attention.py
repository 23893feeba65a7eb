"""Attention-level similarities against naive loops over heads, sentences and words."""

import numpy as np
import pytest
import torch
from _helpers import SEEDS, random_attention
from scipy.spatial.distance import jensenshannon

from lmsim.metrics import (
    attention_head_similarity,
    attnsim,
    distattn_sim,
    distributed_attention_features,
    linear_cka,
    pwcca,
    svcca,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


KINDS = ["frobenius", "pearson", "jensen_shannon"]


# ----------------------------------------------------------------------- naive versions
def naive_head_similarity(A_list, B_list, kind):
    n_h, n_g = A_list[0].shape[0], B_list[0].shape[0]
    sim = np.zeros((n_h, n_g))
    for h in range(n_h):
        for g in range(n_g):
            if kind == "frobenius":
                dists = [np.linalg.norm(a[h] - b[g], "fro") for a, b in zip(A_list, B_list)]
                sim[h, g] = 1 - np.mean(dists)
            elif kind == "pearson":
                corrs = [
                    np.corrcoef(a[h, q], b[g, q])[0, 1]
                    for a, b in zip(A_list, B_list)
                    for q in range(a.shape[1])
                ]
                sim[h, g] = np.mean(corrs)
            else:
                divs = [
                    jensenshannon(a[h, q], b[g, q]) ** 2
                    for a, b in zip(A_list, B_list)
                    for q in range(a.shape[1])
                ]
                sim[h, g] = 1 - np.mean(divs)
    return sim


def naive_features(A_list, causal):
    rows = []
    for a in A_list:
        n_words = a.shape[1]
        for q in range(n_words):
            for k in range(n_words):
                if not causal or k <= q:
                    rows.append(a[:, q, k])
    return np.array(rows)


# ----------------------------------------------------------------------- agreement
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", SEEDS)
def test_head_similarity_matches_naive(kind, seed):
    A = random_attention(seed, n_heads=3)
    B = random_attention(seed + 10, n_heads=5, causal=True)
    sim = attention_head_similarity(A, B, kind=kind)
    assert sim.shape == (3, 5)
    np.testing.assert_allclose(sim, naive_head_similarity(A, B, kind), atol=1e-12)
    assert attnsim(A, B, kind) == pytest.approx(sim.max(axis=1).mean(), abs=1e-15)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", SEEDS)
def test_attnsim_identity_bounds_and_head_permutation(kind, seed):
    A = random_attention(seed, n_heads=4)
    B = random_attention(seed + 20, n_heads=6)
    assert attnsim(A, A, kind) == pytest.approx(1.0, abs=1e-12)
    value = attnsim(A, B, kind)
    assert value < 1.0
    if kind == "jensen_shannon":
        assert 1 - np.log(2) <= value
    if kind == "pearson":
        assert -1.0 <= value
    permuted = [b[::-1] for b in B]
    assert attnsim(A, permuted, kind) == pytest.approx(value, abs=1e-12)
    assert abs(attnsim(B, A, kind) - value) > 1e-6


def test_torch_input_matches_numpy():
    A, B = random_attention(0), random_attention(1)
    At = [torch.from_numpy(a) for a in A]
    Bt = [torch.from_numpy(b).float() for b in B]
    for kind in KINDS:
        np.testing.assert_allclose(
            attention_head_similarity(At, Bt, kind),
            attention_head_similarity(A, B, kind),
            atol=1e-6,
        )


# ----------------------------------------------------------------------- distributed
@pytest.mark.parametrize("causal", [False, True])
def test_distributed_features_match_naive(causal):
    A = random_attention(0, causal=causal)
    features = distributed_attention_features(A, causal=causal)
    expected = naive_features(A, causal)
    n_pairs = sum(n * (n + 1) // 2 if causal else n * n for n in (5, 3, 7, 2))
    assert features.shape == (n_pairs, 4)
    np.testing.assert_array_equal(features, expected)
    as_tensor = distributed_attention_features([torch.from_numpy(a) for a in A], causal=causal)
    assert isinstance(as_tensor, torch.Tensor)
    np.testing.assert_array_equal(as_tensor.numpy(), expected)


@pytest.mark.parametrize("seed", SEEDS)
def test_distattn_sim_is_metric_of_pair_features(seed):
    lengths = (6, 9, 4, 8, 7)
    A = random_attention(seed, n_heads=3, lengths=lengths)
    B = random_attention(seed + 5, n_heads=4, lengths=lengths, causal=True)
    # Mixed causal/bidirectional: only the (q, k ≤ q) pairs valid for both.
    XA, XB = naive_features(A, causal=True), naive_features(B, causal=True)
    assert distattn_sim(A, B, "cka", causal=(False, True)) == pytest.approx(
        linear_cka(XA, XB), abs=1e-12
    )
    assert distattn_sim(A, B, "svcca", causal=True) == pytest.approx(svcca(XA, XB), abs=1e-12)
    assert distattn_sim(A, B, "pwcca", causal=True) == pytest.approx(pwcca(XA, XB), abs=1e-12)
    full = distattn_sim(A, A, "cka")
    assert full == pytest.approx(1.0, abs=1e-12)
    assert distattn_sim(A, B, "cka") == pytest.approx(
        linear_cka(naive_features(A, False), naive_features(B, False)), abs=1e-12
    )


# ----------------------------------------------------------------------- bad input
def test_bad_attention_input():
    A, B = random_attention(0), random_attention(1)
    with pytest.raises(ValueError, match="kind"):
        attnsim(A, B, kind="cosine")
    with pytest.raises(ValueError, match="metric"):
        distattn_sim(A, B, metric="rbf")
    with pytest.raises(ValueError, match="same sentences"):
        attnsim(A, B[:-1])
    with pytest.raises(ValueError, match="words"):
        attnsim(A, random_attention(1, lengths=(5, 3, 6, 2)))
    unnormalised = [a * 2 for a in A]
    with pytest.raises(ValueError, match="probability distributions"):
        attnsim(unnormalised, B)
    negative = [a.copy() for a in A]
    negative[0][0, 0, 0] = -0.1
    with pytest.raises(ValueError, match="negative"):
        attnsim(negative, B)
    nan = [a.copy() for a in A]
    nan[1][0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        attnsim(A, nan)
    with pytest.raises(ValueError, match="n_heads, n_words, n_words"):
        attnsim([a[0] for a in A], B)
    with pytest.raises(ValueError, match="mixes head counts"):
        attnsim([A[0], A[1][:2]], B[:2])
    with pytest.raises(TypeError, match="list over sentences"):
        attnsim(A[0], B[0])
    with pytest.raises(ValueError, match="empty"):
        attnsim([], [])


def test_pearson_skips_constant_rows_with_warning():
    lengths = (1, 4, 5)
    A = random_attention(0, lengths=lengths)
    B = random_attention(1, lengths=lengths)
    with pytest.warns(RuntimeWarning, match="constant"):
        sim = attention_head_similarity(A, B, "pearson")
    np.testing.assert_allclose(sim, naive_head_similarity(A[1:], B[1:], "pearson"), atol=1e-12)
    with pytest.raises(ValueError, match="undefined"):
        attention_head_similarity(A[:1], B[:1], "pearson")
