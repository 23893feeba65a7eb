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
    pairwise_attention,
    pwcca,
    svcca,
)
from lmsim.metrics.attention import paper_attention_features

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


# ----------------------------------------------------------------------- the authors' form
def authors_attention_cca(attn, ar_mask=True, threshold=0.99):
    """Wu et al.'s ``load_attentions`` + ``ReprCorr`` + ``AttnCCA``, rewritten as numpy loops.

    ``attn`` is an ordered {network: list of (n_heads, n, n)}. Returns svsim and pwsim as
    dicts of dicts ``sim[x][y]`` (pwsim directional, weights against x's raw features).
    """
    reps = {}
    for name, sentences in attn.items():
        rows = []
        for a in sentences:
            if ar_mask:  # np.tril, then renormalise each row
                a = np.tril(a)
                a = a / a.sum(axis=-1, keepdims=True)
            n_heads, n_words, _ = a.shape
            for q in range(n_words):
                for k in range(n_words):
                    rows.append([a[h, q, k] for h in range(n_heads)])
        reps[name] = np.array(rows)
    first = next(iter(reps))
    keep = np.all(reps[first] != 0, axis=1)  # computed once, from the first network
    reps = {name: t[keep] for name, t in reps.items()}
    bases = {}
    for name, t in reps.items():
        z = (t - t.mean(axis=0)) / t.std(axis=0, ddof=1)
        u, s, _ = np.linalg.svd(z, full_matrices=False)
        var = np.cumsum(s**2)
        bases[name] = u[:, : int(np.sum(var < var[-1] * threshold))]
    sv, pw = {x: {} for x in reps}, {x: {} for x in reps}
    for x in reps:
        for y in reps:
            if x == y:
                continue
            u, s, vt = np.linalg.svd(bases[x].T @ bases[y], full_matrices=False)
            sv[x][y] = s.mean()
            weights = np.abs((bases[x] @ u).T @ reps[x]).sum(axis=1)
            pw[x][y] = np.sum(s * weights) / np.sum(weights)
    return sv, pw


def _run(seed, first_causal):
    lengths = (6, 9, 4, 8, 7, 5)
    rng = np.random.default_rng(seed)
    return (
        {
            "gpt/layer.1": random_attention(rng, n_heads=3, lengths=lengths, causal=True),
            "bert/layer.1": random_attention(rng, n_heads=4, lengths=lengths),
            "bert/layer.2": random_attention(rng, n_heads=4, lengths=lengths, sharpness=1.0),
        }
        if first_causal
        else {
            "bert/layer.1": random_attention(rng, n_heads=4, lengths=lengths),
            "gpt/layer.1": random_attention(rng, n_heads=3, lengths=lengths, causal=True),
            "bert/layer.2": random_attention(rng, n_heads=4, lengths=lengths, sharpness=1.0),
        }
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ar_mask", [True, False])
@pytest.mark.parametrize("first_causal", [True, False])
def test_paper_distattn_matches_the_authors_attncca(seed, ar_mask, first_causal):
    attn = _run(seed, first_causal)
    names = list(attn)
    sv, pw = authors_attention_cca(attn, ar_mask=ar_mask)
    got_sv = pairwise_attention(attn, "svcca", progress=False, paper_compat=True, ar_mask=ar_mask)
    got_pw = pairwise_attention(attn, "pwcca", progress=False, paper_compat=True, ar_mask=ar_mask)
    for i, x in enumerate(names):
        for j, y in enumerate(names):
            if i == j:
                continue
            assert got_sv[i, j] == pytest.approx(sv[x][y], abs=1e-10)
            assert got_pw[i, j] == pytest.approx(pw[x][y], abs=1e-10)
    # One pair on its own: the mask comes from A_list, the run's first model.
    a, b = names[0], names[2]
    assert distattn_sim(
        attn[a], attn[b], "svcca", paper_compat=True, ar_mask=ar_mask
    ) == pytest.approx(sv[a][b], abs=1e-10)
    assert distattn_sim(
        attn[a], attn[b], "pwcca", paper_compat=True, ar_mask=ar_mask
    ) == pytest.approx(pw[a][b], abs=1e-10)


def test_paper_distattn_differs_from_textbook_and_cka_only_centres():
    attn = _run(0, first_causal=False)
    a, b = attn["bert/layer.1"], attn["bert/layer.2"]
    textbook = distattn_sim(a, b, "svcca")
    paper = distattn_sim(a, b, "svcca", paper_compat=True)
    assert abs(textbook - paper) > 1e-3
    feats_a = paper_attention_features(a)
    feats_b = paper_attention_features(b)
    lower = (feats_a != 0).all(dim=1)  # the keys ≤ query pairs
    assert int(lower.sum()) == sum(n * (n + 1) // 2 for n in (6, 9, 4, 8, 7, 5))
    assert distattn_sim(a, b, "cka", paper_compat=True) == pytest.approx(
        linear_cka(feats_a[lower], feats_b[lower]), abs=1e-12
    )
    # ar_mask: lower triangle renormalised, the upper triangle exactly zero.
    first = feats_a[: 6 * 6].reshape(6, 6, -1).numpy()
    assert np.allclose(first.sum(axis=1), 1.0)
    assert np.all(first[np.triu_indices(6, 1)] == 0)
    raw = paper_attention_features(a, ar_mask=False).numpy()
    np.testing.assert_array_equal(raw, naive_features(a, causal=False))
    with pytest.raises(ValueError, match="causal"):
        distattn_sim(a, b, "svcca", causal=True, paper_compat=True)
    with pytest.raises(ValueError, match="causal"):
        pairwise_attention(
            attn, "svcca", causal={"gpt/layer.1": True}, progress=False, paper_compat=True
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
