"""Helpers of the Wu et al. (2020) chapter: all-pairs attention, block summaries, layer heatmap."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from lmsim.metrics import attnsim, distattn_sim, pairwise_attention
from lmsim.metrics.localization import block_means, cross_model_mean, layer_table
from lmsim.plotting import layer_heatmap

SEEDS = [0, 1, 2]
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def random_attention(rng, n_heads, lengths, causal):
    out = []
    for n_words in lengths:
        logits = 2.0 * rng.normal(size=(n_heads, n_words, n_words))
        if causal:
            logits = np.where(np.tril(np.ones((n_words, n_words))) > 0, logits, -np.inf)
        weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
        out.append(weights / weights.sum(axis=-1, keepdims=True))
    return out


def random_blocks(seed):
    """Three layers of a bidirectional model (3 heads) and two of a causal one (2 heads)."""
    rng = np.random.default_rng(seed)
    lengths = (6, 4, 9)
    attn = {f"enc/layer.{i}": random_attention(rng, 3, lengths, False) for i in (1, 2, 3)}
    attn.update({f"dec/layer.{i}": random_attention(rng, 2, lengths, True) for i in (1, 2)})
    causal = {name: name.startswith("dec") for name in attn}
    return attn, causal


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["jensen_shannon", "frobenius", "pearson"])
def test_pairwise_attention_head_kinds_match_attnsim(seed, kind):
    attn, causal = random_blocks(seed)
    names = list(attn)
    out = pairwise_attention(attn, kind=kind, causal=causal, progress=False)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            assert out[i, j] == pytest.approx(attnsim(attn[a], attn[b], kind=kind), abs=1e-12)
    assert np.allclose(np.diag(out), 1.0)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["cka", "svcca", "pwcca"])
def test_pairwise_attention_distributed_kinds_match_distattn_sim(seed, kind):
    attn, causal = random_blocks(seed)
    names = list(attn)
    out = pairwise_attention(attn, kind=kind, causal=causal, progress=False)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            expected = distattn_sim(attn[a], attn[b], kind, causal=(causal[a], causal[b]))
            assert out[i, j] == pytest.approx(expected, abs=1e-10)


def test_pairwise_attention_pwcca_is_directional():
    attn, causal = random_blocks(0)
    out = pairwise_attention(attn, kind="pwcca", causal=causal, progress=False)
    assert not np.allclose(out, out.T)


def test_pairwise_attention_causal_mask_changes_distributed_similarity():
    attn, _ = random_blocks(1)
    full = pairwise_attention(attn, kind="cka", progress=False)
    tril = pairwise_attention(attn, kind="cka", causal=dict.fromkeys(attn, True), progress=False)
    assert not np.allclose(full, tril)


def test_pairwise_attention_bad_input():
    attn, _ = random_blocks(0)
    with pytest.raises(ValueError, match="unknown `kind`"):
        pairwise_attention(attn, kind="cosine")
    with pytest.raises(ValueError, match="empty"):
        pairwise_attention({})
    with pytest.raises(KeyError, match="not in `attn`"):
        pairwise_attention(attn, causal={"nope/layer.1": True})


NAMES = ["zoo/mlm-s0/layer.0", "zoo/mlm-s0/layer.2", "zoo/mlm-s0/layer.4"] + [
    f"gpt/layer.{i}" for i in range(3)
]


def test_layer_table_parses_models_with_slashes_and_relative_depth():
    table = layer_table(NAMES)
    assert list(table["model"]) == ["zoo/mlm-s0"] * 3 + ["gpt"] * 3
    assert list(table["layer"]) == [0, 2, 4, 0, 1, 2]
    assert np.allclose(table["depth"], [0, 0.5, 1, 0, 0.5, 1])
    with pytest.raises(ValueError, match="not of the form"):
        layer_table(["bert/embeddings"])


@pytest.mark.parametrize("seed", SEEDS)
def test_block_means_and_cross_model_mean_match_loops(seed):
    rng = np.random.default_rng(seed)
    matrix = rng.uniform(size=(6, 6))
    models = list(layer_table(NAMES)["model"])
    means = block_means(matrix, NAMES)
    for a in ("zoo/mlm-s0", "gpt"):
        for b in ("zoo/mlm-s0", "gpt"):
            cells = [
                matrix[i, j]
                for i in range(6)
                for j in range(6)
                if models[i] == a and models[j] == b and i != j
            ]
            assert means.loc[a, b] == pytest.approx(np.mean(cells))
    cross = cross_model_mean(matrix, NAMES)
    for i in range(6):
        others = [matrix[i, j] for j in range(6) if models[j] != models[i]]
        assert cross.iloc[i] == pytest.approx(np.mean(others))


def test_block_summaries_reject_bad_shapes():
    with pytest.raises(ValueError, match="shape"):
        block_means(np.zeros((3, 3)), NAMES)
    with pytest.raises(ValueError, match="single model"):
        cross_model_mean(np.zeros((2, 2)), ["a/layer.0", "a/layer.1"])


def test_layer_heatmap_marks_model_boundaries():
    matrix = np.random.default_rng(0).uniform(size=(6, 6))
    ax = layer_heatmap(matrix, NAMES, title="t", cbar_label="sim")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["zoo/mlm-s0", "gpt"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["zoo/mlm-s0", "gpt"]
    assert len(ax.lines) == 2  # one horizontal and one vertical boundary
    assert ax.get_title() == "t"
    plt.close("all")
    with pytest.raises(ValueError, match="rows"):
        layer_heatmap(matrix[:5], NAMES)


def test_pairwise_attention_restores_the_thread_count():
    attn, _ = random_blocks(2)
    torch.set_num_threads(2)
    try:
        pairwise_attention(attn, kind="frobenius", progress=False)
        assert torch.get_num_threads() == 2
        with pytest.raises(ValueError):
            pairwise_attention({"a/layer.1": [np.full((1, 2, 2), 0.7)]}, progress=False)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)


@pytest.mark.parametrize("seed", SEEDS)
def test_mixedsim_of_a_layer_with_itself_is_one_despite_tiny_neurons(seed):
    """Real layers (LayerNorm outliers) mix neuron variances 1e16 apart; each neuron still
    lies in the layer's span, so its regression on the layer is exact."""
    from lmsim.metrics import mixedsim
    from lmsim.moments import Moments

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 12)) * np.array([1e4] + [1.0] * 10 + [1e-4])
    mom = Moments.from_arrays({"x": X})
    assert mixedsim(mom, "x", "x") == pytest.approx(1.0, abs=1e-10)
    assert mixedsim(X, X) == pytest.approx(1.0, abs=1e-10)


def test_pairwise_matrix_runs_pairs_on_one_cpu_thread_and_restores_the_count():
    from lmsim.metrics import pairwise_matrix
    from lmsim.moments import Moments

    rng = np.random.default_rng(0)
    mom = Moments.from_arrays({"a": rng.normal(size=(50, 4)), "b": rng.normal(size=(50, 3))})
    torch.set_num_threads(2)
    try:
        out = pairwise_matrix(mom, ["a", "b"], metric="pwcca", progress=False)
        assert torch.get_num_threads() == 2
        assert np.allclose(np.diag(out), 1.0)
    finally:
        torch.set_num_threads(1)
