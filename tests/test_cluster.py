"""Correlation clustering: scipy's partition on the same correlations, from arrays or moments."""

import numpy as np
import pytest
import torch
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform
from sklearn.metrics import adjusted_rand_score

from lmsim.cluster import (
    cluster_neurons,
    correlation_distances,
    kept_per_block,
    neuron_blocks,
    representatives,
)
from lmsim.moments import Moments

THRESHOLDS = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9]


def correlated_neurons(seed, n=400, d=60, k=6, noise=0.6):
    """``d`` neurons driven by ``k`` latent factors (with random signs) plus noise."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, k))
    mix = rng.standard_normal((k, d)) * (rng.random((k, d)) < 0.4)
    X = latent @ mix + noise * rng.standard_normal((n, d)) + rng.normal(0, 5, size=d)
    return X


def neurox_labels(X, t):
    """NeuroX's create_correlation_clusters, written from its definition."""
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.nan_to_num(np.corrcoef(X.T))
    corr = (corr + corr.T) / 2
    np.fill_diagonal(corr, 1)
    Z = linkage(squareform(1 - np.abs(corr), checks=False), method="average")
    return fcluster(Z, t, criterion="distance")


def canonical(labels):
    _, first, inv = np.unique(labels, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[inv]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_distances_equal_one_minus_abs_corrcoef(seed):
    X = correlated_neurons(seed)
    dist, is_constant = correlation_distances(X)
    ref = squareform(1 - np.abs(np.corrcoef(X.T)), checks=False)
    assert not is_constant.any()
    np.testing.assert_allclose(dist, np.clip(ref, 0, 1), atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_partition_equals_scipy_on_same_correlations(seed):
    X = correlated_neurons(seed)
    dist, _ = correlation_distances(X)
    Z = linkage(dist, "average")
    ours = cluster_neurons(X, THRESHOLDS)
    for t in THRESHOLDS:
        exact = fcluster(Z, t, criterion="distance")
        np.testing.assert_array_equal(ours[t], canonical(exact))
        # and NeuroX's corrcoef pipeline gives the same partition
        assert adjusted_rand_score(neurox_labels(X, t), ours[t]) == 1.0


@pytest.mark.parametrize("seed", [0, 1])
def test_moments_input_equals_dense_input(seed):
    X = correlated_neurons(seed)
    mom = Moments({"m/layer.0": 20, "m/layer.1": 25, "m/layer.2": 15})
    for chunk in np.array_split(X, 7):
        mom.update(
            {"m/layer.0": chunk[:, :20], "m/layer.1": chunk[:, 20:45], "m/layer.2": chunk[:, 45:]}
        )
    dense = cluster_neurons(X, THRESHOLDS)
    from_mom = cluster_neurons(mom, THRESHOLDS)
    for t in THRESHOLDS:
        np.testing.assert_array_equal(from_mom[t], dense[t])
    # a subset of blocks (non-contiguous) equals the dense columns of those blocks
    sub = cluster_neurons(mom, 0.5, blocks=["m/layer.2", "m/layer.0"])
    cols = np.r_[45:60, 0:20]
    np.testing.assert_array_equal(sub, cluster_neurons(X[:, cols], 0.5))
    # a generator of chunks (the activations never whole) gives the same result
    stream = cluster_neurons((c for c in np.array_split(X, 9)), THRESHOLDS)
    for t in THRESHOLDS:
        np.testing.assert_array_equal(stream[t], dense[t])
    # torch input and a small chunk size give the same result
    np.testing.assert_array_equal(
        cluster_neurons(torch.from_numpy(X), 0.5, chunk_rows=33), dense[0.5]
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_higher_threshold_never_more_clusters(seed):
    X = correlated_neurons(seed)
    grid = np.linspace(0, 1, 21).tolist()
    labels = cluster_neurons(X, grid)
    counts = [labels[t].max() + 1 for t in grid]
    assert all(a >= b for a, b in zip(counts, counts[1:]))
    assert counts[0] == X.shape[1] and counts[-1] == 1
    # clusters are nested: a cut at a higher τ only merges clusters of a lower cut
    for lo, hi in zip(grid, grid[1:]):
        for c in np.unique(labels[lo]):
            assert np.unique(labels[hi][labels[lo] == c]).size == 1


def test_constant_neurons_singleton_and_merge():
    X = correlated_neurons(0, d=20)
    X[:, 3] = 7.25
    X[:, 11] = 0.0
    X[:, 15] = 0.1  # not exactly representable: round-off must still count as constant
    dist, is_constant = correlation_distances(X)
    assert np.flatnonzero(is_constant).tolist() == [3, 11, 15]
    square = squareform(dist)
    for c in (3, 11, 15):
        others = np.delete(np.arange(20), c)
        assert np.all(square[c, others] == 1.0)
    for t in (0.0, 0.5, 0.99):
        labels = cluster_neurons(X, t)
        for c in (3, 11, 15):
            assert np.sum(labels == labels[c]) == 1  # a singleton, always kept
    assert np.unique(cluster_neurons(X, 1.0)).size == 1  # every distance is <= 1
    merged = cluster_neurons(X, 0.5, constant="merge")
    assert merged[3] == merged[11] == merged[15]
    assert np.sum(merged == merged[3]) == 3
    # apart from the constant neurons, the partitions agree
    single = cluster_neurons(X, 0.5)
    rest = np.setdiff1d(np.arange(20), [3, 11, 15])
    assert adjusted_rand_score(single[rest], merged[rest]) == 1.0
    # NeuroX (nan_to_num of corrcoef) gives the singleton treatment
    assert adjusted_rand_score(neurox_labels(X, 0.5), single) == 1.0
    # moments merged over chunks detect the same constant neurons
    mom = Moments({"a": 8, "b": 12})
    for chunk in np.array_split(X, 6):
        mom.update({"a": chunk[:, :8], "b": chunk[:, 8:]})
    assert np.flatnonzero(correlation_distances(mom)[1]).tolist() == [3, 11, 15]
    np.testing.assert_array_equal(cluster_neurons(mom, 0.5), single)


def test_labels_canonical():
    labels = cluster_neurons(correlated_neurons(1), 0.6)
    assert labels[0] == 0
    firsts = [np.flatnonzero(labels == c)[0] for c in range(labels.max() + 1)]
    assert firsts == sorted(firsts)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_representatives_one_per_cluster_and_seeded(seed):
    labels = cluster_neurons(correlated_neurons(seed), 0.6)
    kept = representatives(labels, seed=seed)
    assert np.all(np.diff(kept) > 0)
    assert np.array_equal(np.sort(labels[kept]), np.arange(labels.max() + 1))
    np.testing.assert_array_equal(kept, representatives(labels, seed=seed))
    draws = {tuple(representatives(labels, seed=s)) for s in range(10)}
    assert len(draws) > 1


def test_representatives_uniform_within_cluster():
    labels = np.array([5, 5, 5, 2, 9, 9])
    counts = np.zeros(6)
    rng = np.random.default_rng(0)
    for _ in range(3000):
        counts[representatives(labels, rng)] += 1
    assert counts[3] == 3000
    np.testing.assert_allclose(counts[:3] / 3000, 1 / 3, atol=0.04)
    np.testing.assert_allclose(counts[4:] / 3000, 1 / 2, atol=0.04)


def test_kept_per_block():
    dims = {"m/layer.0": 3, "m/layer.1": 2, "m/layer.2": 4}
    assert neuron_blocks(dims).tolist() == ["m/layer.0"] * 3 + ["m/layer.1"] * 2 + ["m/layer.2"] * 4
    assert kept_per_block([0, 2, 6, 8], dims) == {"m/layer.0": 2, "m/layer.1": 0, "m/layer.2": 2}
    assert kept_per_block([1, 4], [0, 0, 1, 1, 2]) == {0: 1, 1: 0, 2: 1}
    with pytest.raises(ValueError, match="kept"):
        kept_per_block([9], dims)


def test_validation_messages():
    X = correlated_neurons(0, d=5)
    with pytest.raises(ValueError, match="threshold"):
        cluster_neurons(X, -0.1)
    with pytest.raises(ValueError, match="constant"):
        cluster_neurons(X, 0.5, constant="drop")
    with pytest.raises(ValueError, match="blocks"):
        cluster_neurons(X, 0.5, blocks=["a"])
    with pytest.raises(ValueError, match="2 samples"):
        cluster_neurons(X[:1], 0.5)


def test_input_not_modified():
    X = correlated_neurons(0, d=12)
    before = X.copy()
    cluster_neurons(X, 0.5, chunk_rows=50)
    cluster_neurons(torch.from_numpy(X), 0.5)
    np.testing.assert_array_equal(X, before)


def test_large_offsets_do_not_cancel():
    X = correlated_neurons(2, d=30)
    ref, _ = correlation_distances(X)
    for shifted in (X + 1e6, X[::-1] + 1e6):  # shift from the first chunk's mean
        dist, is_constant = correlation_distances(shifted, chunk_rows=64)
        assert not is_constant.any()
        np.testing.assert_allclose(dist, ref, atol=1e-8)


def test_non_finite_activations_raise():
    X = correlated_neurons(0, d=6)
    X[17, 4] = np.nan
    with pytest.raises(ValueError, match=r"non-finite .* neurons \[4\]"):
        cluster_neurons(X, 0.5)
    X[17, 4] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        cluster_neurons(X, 0.5)


def _naive_r2(X_fit, X_eval, cols, targets, ridge):
    """One ridge regression per target neuron, the loop written out."""
    mean, std = X_fit.mean(0), X_fit.std(0)
    Z, E = (X_fit - mean) / std, (X_eval - mean) / std
    sse = sst = 0.0
    for j in targets:
        A = Z[:, cols].T @ Z[:, cols] / len(Z) + ridge * np.eye(len(cols))
        b = np.linalg.solve(A, Z[:, cols].T @ Z[:, j] / len(Z))
        sse += ((E[:, j] - E[:, cols] @ b) ** 2).sum()
        sst += ((E[:, j] - E[:, j].mean()) ** 2).sum()
    return 1 - sse / sst


def test_reconstruction_r2_equals_per_target_regressions_and_rewards_representatives():
    from lmsim.cluster import reconstruction_r2

    rng = np.random.default_rng(0)
    base = rng.normal(size=(400, 5))
    # 20 neurons: four noisy copies of each of five sources
    X = np.repeat(base, 4, axis=1) + 0.1 * rng.normal(size=(400, 20))
    fit, held = X[:300], X[300:]
    one_per_source = np.arange(0, 20, 4)
    same_source = np.arange(5)  # sources 0 and 1 only
    got = reconstruction_r2(
        fit, held, {"rep": one_per_source, "same": same_source, "all": np.arange(20)},
        ridge=1e-3, n_targets=None,
    )  # fmt: skip
    for key, cols in (("rep", one_per_source), ("same", same_source)):
        assert got[key] == pytest.approx(_naive_r2(fit, held, cols, range(20), 1e-3), rel=1e-9)
    assert got["all"] > 0.999 and got["rep"] > 0.95 and got["same"] < 0.5
    sample = reconstruction_r2(fit, held, {"rep": one_per_source}, n_targets=8, seed=3)["rep"]
    targets = np.sort(np.random.default_rng(3).choice(20, size=8, replace=False))
    assert sample == pytest.approx(_naive_r2(fit, held, one_per_source, targets, 1e-3), rel=1e-9)
    with pytest.raises(ValueError, match="same number of columns"):
        reconstruction_r2(fit, held[:, :5], {"rep": one_per_source})


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 7, 11, 30, 60])
def test_n_clusters_cut_equals_scipy_maxclust_and_gives_exactly_k(seed, k):
    X = correlated_neurons(seed)
    dist, _ = correlation_distances(X)
    Z = linkage(dist, method="average")
    ours = cluster_neurons(X, n_clusters=k)
    np.testing.assert_array_equal(ours, canonical(fcluster(Z, k, criterion="maxclust")))
    # continuous data: no tied merge heights, so the cut has exactly k clusters
    assert ours.max() + 1 == k
    # and it is one of the distance cuts: the cut just below the (n - k + 1)-th merge
    if k < X.shape[1]:
        t = Z[X.shape[1] - k - 1, 2]
        assert adjusted_rand_score(cluster_neurons(X, float(t)), ours) == 1.0


def test_n_clusters_and_thresholds_cut_one_tree():
    X = correlated_neurons(0)
    both = cluster_neurons(X, [0.3, 0.5], n_clusters=[12])
    assert set(both) == {0.3, 0.5, 12}
    np.testing.assert_array_equal(both[12], cluster_neurons(X, n_clusters=12))
    np.testing.assert_array_equal(both[0.3], cluster_neurons(X, 0.3))
    many = cluster_neurons(X, n_clusters=[5, 9])
    assert [many[k].max() + 1 for k in (5, 9)] == [5, 9]


@pytest.mark.parametrize("bad", [0, -3, 2.5, 61, True])
def test_n_clusters_is_validated(bad):
    with pytest.raises(ValueError, match="n_clusters"):
        cluster_neurons(correlated_neurons(0), n_clusters=bad)


def test_a_cut_is_required_and_keys_never_collide():
    with pytest.raises(ValueError, match="threshold"):
        cluster_neurons(correlated_neurons(0))
    with pytest.raises(ValueError, match="share a key"):
        cluster_neurons(correlated_neurons(0), [1.0], n_clusters=[1])
