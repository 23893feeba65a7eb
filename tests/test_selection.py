"""Selection policies for cluster representatives and what they imply for Table 5.1."""

import itertools

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, linkage

from lmsim.cluster import kept_per_block
from lmsim.papers.thesis2022_redundancy.selection import (
    expected_kept_per_layer,
    is_refinement,
    only_layer_bound,
    policy_table,
    prob_only_layer,
    rising_counts,
    select_representatives,
)

DIMS = {f"m/layer.{i}": 4 for i in range(4)}  # embeddings + 3 layers, 4 neurons each
EMB = "m/layer.0"
TAUS = [0.2, 0.4, 0.6, 0.8, 0.95]


def nested_cuts(seed, n=16):
    """One average-linkage tree on random correlated columns, cut at every τ."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((200, 4))
    X = base[:, rng.integers(0, 4, n)] + rng.uniform(0.2, 2.0, n) * rng.standard_normal((200, n))
    d = 1 - np.abs(np.corrcoef(X, rowvar=False))
    Z = linkage(d[np.triu_indices(n, 1)], "average")
    return {t: fcluster(Z, t, "distance") for t in TAUS}, X.var(axis=0)


def naive_pick(labels, key):
    """Per cluster, the neuron of largest key (ties: lowest index), by a plain loop."""
    kept = []
    for c in np.unique(labels):
        members = [i for i in range(labels.size) if labels[i] == c]
        kept.append(max(members, key=lambda i: (key[i], -i)))
    return sorted(kept)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fixed_policies_match_a_naive_loop(seed):
    cuts, var = nested_cuts(seed)
    idx = np.arange(16)
    for labels in cuts.values():
        assert select_representatives(labels, "first").tolist() == naive_pick(labels, -idx)
        assert select_representatives(labels, "last").tolist() == naive_pick(labels, idx)
        got = select_representatives(labels, "max_score", scores=var)
        assert got.tolist() == naive_pick(labels, var)
    ties = np.array([0, 1, 0, 1])
    assert select_representatives(ties, "max_score", scores=np.ones(4)).tolist() == [0, 1]


def brute_force(labels, layers, layer):
    """Every joint choice of one neuron per cluster, equally likely: exact probabilities."""
    clusters = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    choices = list(itertools.product(*clusters))
    only = np.mean([all(layers[i] == layer for i in pick) for pick in choices])
    expected = {k: np.mean([sum(layers[i] == k for i in pick) for pick in choices]) for k in DIMS}
    return only, expected


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_random_policy_probabilities_equal_brute_force(seed):
    rng = np.random.default_rng(seed)
    layers = np.repeat(list(DIMS), 4)
    # Clusters of a handful of neurons, each holding an embedding neuron, so "only
    # embeddings" has a positive probability.
    labels = np.concatenate([np.arange(4), rng.integers(0, 4, 12)])
    only, expected = brute_force(labels, layers, EMB)
    prob, log10 = prob_only_layer(labels, DIMS, EMB)
    assert prob == pytest.approx(only, rel=1e-12) and log10 == pytest.approx(np.log10(only))
    got = expected_kept_per_layer(labels, DIMS)
    assert list(got) == list(DIMS)
    for k in DIMS:
        assert got[k] == pytest.approx(expected[k], rel=1e-12)
    assert sum(got.values()) == pytest.approx(4)
    assert prob <= only_layer_bound(4, 16)


def test_only_layer_is_impossible_when_a_cluster_lacks_the_layer():
    labels = np.array([0] * 4 + [1] * 12)  # cluster 1: no embedding neuron
    assert prob_only_layer(labels, DIMS, EMB) == (0.0, float("-inf"))
    one = np.zeros(16, dtype=int)  # one cluster: 4 of 16 neurons are embeddings
    assert prob_only_layer(one, DIMS, EMB)[0] == pytest.approx(only_layer_bound(4, 16))
    with pytest.raises(ValueError, match="no neuron is in layer"):
        prob_only_layer(labels, DIMS, "m/layer.9")
    with pytest.raises(ValueError, match="describes 16 neurons"):
        prob_only_layer(labels[:5], DIMS, EMB)
    with pytest.raises(ValueError, match="n_layer"):
        only_layer_bound(0, 10)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_fixed_order_policies_never_rise_under_nested_cuts(seed):
    cuts, var = nested_cuts(seed)
    for fine, coarse in zip(TAUS[:-1], TAUS[1:]):
        assert is_refinement(cuts[fine], cuts[coarse])
    for policy, scores in (("first", None), ("last", None), ("max_score", var)):
        table = {
            t: kept_per_block(select_representatives(lab, policy, scores=scores), DIMS)
            for t, lab in cuts.items()
        }
        assert rising_counts(table) == [], policy


def test_random_policy_can_rise_and_rising_counts_names_it():
    # The fine cut puts embedding neuron 0 with layer-1 neuron 4; the coarse cut adds neuron
    # 5. A fine draw of 4 and a coarse draw of 0 (probability 1/6) raise layer 0's count.
    fine = np.array([0, 1, 2, 3, 0, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14])
    assert is_refinement(fine, fine) and not is_refinement(fine, np.arange(16))
    rises = set()
    for seed in range(40):
        t1 = kept_per_block(select_representatives(fine, seed=seed), DIMS)
        coarse = np.where(fine == 4, 0, fine)
        t2 = kept_per_block(select_representatives(coarse, seed=1000 + seed), DIMS)
        rises |= {r[0] for r in rising_counts({0.1: t1, 0.2: t2})}
    assert EMB in rises
    thesis_like = {0.4: {"layer.0": 344, "layer.1": 10}, 0.5: {"layer.0": 559, "layer.1": 0}}
    assert rising_counts(thesis_like) == [("layer.0", 0.4, 0.5, 344, 559)]


def test_policy_table_rows_agree_with_the_functions():
    cuts, var = nested_cuts(0)
    table = policy_table(cuts, DIMS, layer=EMB, scores={"variance": var}, seeds=(0, 1))
    assert len(table) == len(TAUS) * 4
    assert set(table.policy) == {"random", "first", "last", "max_score:variance"}
    for t, labels in cuts.items():
        rows = table[table.tau == t].set_index("policy")
        assert (rows.n_kept == np.unique(labels).size).all()
        assert rows.loc["random", "only_layer"] == prob_only_layer(labels, DIMS, EMB)[0]
        first = select_representatives(labels, "first")
        assert rows.loc["first", "kept_in_layer"] == (first < 4).sum()
        assert rows.loc["first", "only_layer"] == float((first < 4).all())
    with pytest.raises(ValueError, match="policy"):
        select_representatives(cuts[0.2], "best")
    with pytest.raises(ValueError, match="needs `scores`"):
        select_representatives(cuts[0.2], "max_score")
