"""Linear, debiased and RBF CKA against naive numpy implementations and invariances."""

from functools import partial

import _helpers
import numpy as np
import pytest
import torch
from _helpers import SEEDS, random_orthogonal

from lmsim.metrics import (
    debiased_cka,
    linear_cka,
    pairwise_matrix,
    pairwise_matrix_raw,
    rbf_cka,
)
from lmsim.metrics.cka import (
    DebiasedCKAStats,
    debiased_cka_matrix,
    linear_cka_gram_matrix,
    linear_cka_matrix,
    outlier_neurons,
)
from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# Two noisy linear views of shared latents, anisotropic scales and offsets.
random_pair = partial(_helpers.random_pair, n=200, d_x=12, d_y=9, n_latent=6, noise=0.5)


# ----------------------------------------------------------------------- naive versions
def naive_centering(n):
    return np.eye(n) - np.ones((n, n)) / n


def naive_hsic(K, L):
    H = naive_centering(K.shape[0])
    return np.trace(K @ H @ L @ H)


def naive_linear_cka(X, Y):
    K, L = X @ X.T, Y @ Y.T
    return naive_hsic(K, L) / np.sqrt(naive_hsic(K, K) * naive_hsic(L, L))


def naive_unbiased_hsic(K, L):
    """Song et al. (2012), Eq. 5, with explicit (n, n) matrices."""
    n = K.shape[0]
    Kt, Lt = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    one = np.ones(n)
    term1 = np.trace(Kt @ Lt)
    term2 = (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
    term3 = 2.0 / (n - 2) * (one @ Kt @ Lt @ one)
    return (term1 + term2 - term3) / (n * (n - 3))


def naive_debiased_cka(X, Y):
    K, L = X @ X.T, Y @ Y.T
    return naive_unbiased_hsic(K, L) / np.sqrt(
        naive_unbiased_hsic(K, K) * naive_unbiased_hsic(L, L)
    )


def naive_rbf_gram(X, sigma=None):
    n = X.shape[0]
    sq = np.array([[np.sum((X[i] - X[j]) ** 2) for j in range(n)] for i in range(n)])
    if sigma is None:
        sigma_sq = np.median(sq[np.triu_indices(n, k=1)])
    else:
        sigma_sq = sigma**2
    return np.exp(-sq / (2 * sigma_sq))


def naive_rbf_cka(X, Y, sigma=None):
    K, L = naive_rbf_gram(X, sigma), naive_rbf_gram(Y, sigma)
    return naive_hsic(K, L) / np.sqrt(naive_hsic(K, K) * naive_hsic(L, L))


# ----------------------------------------------------------------------- agreement
@pytest.mark.parametrize("seed", SEEDS)
def test_linear_cka_matches_naive_hsic(seed):
    X, Y = random_pair(seed, n=100)
    assert linear_cka(X, Y) == pytest.approx(naive_linear_cka(X, Y), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_debiased_cka_matches_naive_unbiased_hsic(seed):
    X, Y = random_pair(seed, n=80)
    assert debiased_cka(X, Y) == pytest.approx(naive_debiased_cka(X, Y), abs=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_debiased_cka_differs_from_biased(seed):
    X, Y = random_pair(seed, n=60)
    assert abs(debiased_cka(X, Y) - linear_cka(X, Y)) > 1e-4


@pytest.mark.parametrize("seed", SEEDS)
def test_rbf_cka_matches_naive_with_median_bandwidth(seed):
    X, Y = random_pair(seed, n=60)
    assert rbf_cka(X, Y) == pytest.approx(naive_rbf_cka(X, Y), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_rbf_cka_explicit_sigma_matches_naive_and_changes_value(seed):
    X, Y = random_pair(seed, n=60)
    assert rbf_cka(X, Y, sigma=2.0) == pytest.approx(naive_rbf_cka(X, Y, sigma=2.0), abs=1e-12)
    assert abs(rbf_cka(X, Y, sigma=2.0) - rbf_cka(X, Y)) > 1e-4


def test_rbf_default_sigma_is_sqrt_median_squared_distance():
    X, Y = random_pair(5, n=50)
    sq = ((X[:, None] - X[None]) ** 2).sum(-1)
    sigma_x = np.sqrt(np.median(sq[np.triu_indices(50, k=1)]))
    sq = ((Y[:, None] - Y[None]) ** 2).sum(-1)
    sigma_y = np.sqrt(np.median(sq[np.triu_indices(50, k=1)]))
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / (2 * sigma_x**2))
    L = np.exp(-((Y[:, None] - Y[None]) ** 2).sum(-1) / (2 * sigma_y**2))
    expected = naive_hsic(K, L) / np.sqrt(naive_hsic(K, K) * naive_hsic(L, L))
    assert rbf_cka(X, Y) == pytest.approx(expected, abs=1e-12)


# ----------------------------------------------------------------------- properties
@pytest.mark.parametrize("fn", [linear_cka, debiased_cka, rbf_cka])
@pytest.mark.parametrize("seed", SEEDS)
def test_cka_identity_and_symmetry(fn, seed):
    X, Y = random_pair(seed, n=80)
    assert fn(X, X) == pytest.approx(1.0, abs=1e-12)
    assert fn(X, Y) == pytest.approx(fn(Y, X), abs=1e-12)


@pytest.mark.parametrize("fn", [linear_cka, rbf_cka])
@pytest.mark.parametrize("seed", SEEDS)
def test_cka_bounds(fn, seed):
    X, Y = random_pair(seed, n=80)
    unrelated = np.random.default_rng(seed + 7).normal(size=X.shape)
    for value in (fn(X, Y), fn(X, unrelated)):
        assert 0.0 <= value <= 1.0
    assert fn(X, unrelated) < fn(X, Y)


@pytest.mark.parametrize("fn", [linear_cka, debiased_cka, rbf_cka])
@pytest.mark.parametrize("seed", SEEDS)
def test_cka_invariant_to_rotation_scaling_translation(fn, seed):
    X, Y = random_pair(seed, n=80)
    Q = random_orthogonal(X.shape[1], seed)
    reference = fn(X, Y)
    assert fn(X @ Q, Y) == pytest.approx(reference, abs=1e-10)
    assert fn(3.7 * X, 0.2 * Y) == pytest.approx(reference, abs=1e-10)
    assert fn(X + 5.0, Y - np.arange(Y.shape[1])) == pytest.approx(reference, abs=1e-10)


@pytest.mark.parametrize("fn", [linear_cka, debiased_cka])
@pytest.mark.parametrize("seed", SEEDS)
def test_linear_cka_not_invariant_to_per_neuron_scaling(fn, seed):
    X, Y = random_pair(seed, n=80)
    scales = np.random.default_rng(seed).uniform(0.1, 10.0, size=X.shape[1])
    assert abs(fn(X * scales, Y) - fn(X, Y)) > 1e-3


def test_torch_input_matches_numpy():
    X, Y = random_pair(0, n=50)
    for fn in (linear_cka, debiased_cka, rbf_cka):
        from_torch = fn(torch.from_numpy(X).float(), torch.from_numpy(Y).float())
        assert isinstance(from_torch, float)
        assert from_torch == pytest.approx(fn(X.astype(np.float32), Y.astype(np.float32)))


# ----------------------------------------------------------------------- moments path
@pytest.mark.parametrize("seed", SEEDS)
def test_linear_cka_moments_match_raw_after_merging_chunks(seed):
    X, Y = random_pair(seed, n=300)
    parts = [
        Moments.from_arrays({"x": X[s], "y": Y[s]})
        for s in (slice(0, 7), slice(7, 150), slice(150, 300))
    ]
    mom = Moments.merge_all(parts)
    assert linear_cka(mom, "x", "y") == pytest.approx(linear_cka(X, Y), abs=1e-8)
    assert linear_cka(mom, "x", "x") == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_linear_cka_moments_stable_with_large_offset(seed):
    X, Y = random_pair(seed, n=400)
    mom = Moments({"x": X.shape[1], "y": Y.shape[1]})
    for chunk in np.array_split(np.arange(400), 8):
        mom.update({"x": X[chunk] + 1e6, "y": Y[chunk] - 1e6})
    assert linear_cka(mom, "x", "y") == pytest.approx(linear_cka(X, Y), abs=1e-8)


# ----------------------------------------------------------------------- bad input
@pytest.mark.parametrize("fn", [linear_cka, debiased_cka, rbf_cka])
def test_bad_input_raises_named_errors(fn):
    X, Y = random_pair(0, n=30)
    with pytest.raises(ValueError, match="same n_samples"):
        fn(X, Y[:-1])
    with pytest.raises(ValueError, match="at least"):
        fn(X[:1], Y[:1])
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        fn(bad, Y)
    bad[3, 2] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        fn(X, bad)
    with pytest.raises(ValueError, match="2-D"):
        fn(X[:, 0], Y)


@pytest.mark.parametrize("fn", [linear_cka, debiased_cka, rbf_cka])
def test_constant_block_raises_instead_of_nan(fn):
    X, _ = random_pair(0, n=30)
    constant = np.full((30, 4), 3.0)
    with pytest.raises(ValueError, match="(zero|constant|≤ 0|all rows equal|coincide)"):
        fn(X, constant)


def test_debiased_needs_four_samples_and_rbf_positive_sigma():
    X, Y = random_pair(0, n=3)
    with pytest.raises(ValueError, match="at least 4"):
        debiased_cka(X, Y)
    with pytest.raises(ValueError, match="sigma"):
        rbf_cka(X, Y, sigma=0.0)


def test_moment_path_errors():
    X, Y = random_pair(0, n=30)
    mom = Moments.from_arrays({"x": X, "y": Y})
    with pytest.raises(KeyError, match="available"):
        linear_cka(mom, "x", "nope")
    with pytest.raises(TypeError, match="block names"):
        linear_cka(mom, "x")
    with pytest.raises(TypeError, match="third positional"):
        linear_cka(X, Y, "y")
    one = Moments.from_arrays({"x": X[:1], "y": Y[:1]})
    with pytest.raises(ValueError, match="at least 2"):
        linear_cka(one, "x", "y")


# ----------------------------------------------------------------------- CKA without some neurons
@pytest.mark.parametrize("seed", SEEDS)
def test_linear_cka_matrix_drops_neurons_like_raw_cka_on_kept_columns(seed):
    rng = np.random.default_rng(seed)
    acts = {
        "m/layer.0": rng.normal(size=(60, 5)),
        "m/layer.1": rng.normal(size=(60, 4)) * np.array([50.0, 1, 1, 1]),
        "n/layer.0": rng.normal(size=(60, 3)),
    }
    mom = Moments.from_arrays(acts)
    names = list(acts)
    full = linear_cka_matrix(mom, names)
    want = [[naive_linear_cka(acts[a], acts[b]) for b in names] for a in names]
    np.testing.assert_allclose(full, want, atol=1e-10)
    drop = {"m/layer.1": [0]}
    kept = {k: np.delete(v, drop.get(k, []), axis=1) for k, v in acts.items()}
    got = linear_cka_matrix(mom, names, drop=drop)
    want = [[naive_linear_cka(kept[a], kept[b]) for b in names] for a in names]
    np.testing.assert_allclose(got, want, atol=1e-10)


def test_outlier_neurons_finds_the_massive_dimension_and_bad_drop_raises():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 6))
    x[:, 4] *= 1000.0
    mom = Moments.from_arrays({"m/layer.0": x})
    assert outlier_neurons(mom, "m/layer.0") == [4]
    with pytest.raises(ValueError, match="leaves no neuron"):
        linear_cka_matrix(mom, ["m/layer.0"], drop={"m/layer.0": range(6)})
    with pytest.raises(KeyError, match="not among `names`"):
        linear_cka_matrix(mom, ["m/layer.0"], drop={"x/layer.0": [0]})


@pytest.mark.parametrize("seed", SEEDS)
def test_linear_cka_gram_matrix_matches_naive_feature_space_cka(seed):
    rng = np.random.default_rng(seed)
    acts = {
        "a": rng.normal(size=(40, 7)) + 3.0,
        "b": rng.normal(size=(40, 3)),
        "c": rng.normal(size=(40, 12)),
    }
    acts["b"][:, 0] += 2.0 * acts["a"][:, 0]
    got = linear_cka_gram_matrix(acts)
    want = [[naive_linear_cka(acts[x], acts[y]) for y in acts] for x in acts]
    np.testing.assert_allclose(got, want, atol=1e-6)
    with pytest.raises(ValueError, match="same n_samples"):
        linear_cka_gram_matrix({"a": acts["a"], "z": acts["b"][:30]})


# ----------------------------------------------------------------------- all-pairs debiased
def debiased_blocks(seed, n=90):
    rng = np.random.default_rng(seed)
    X, Y = random_pair(seed, n=n)
    return {
        "x": X + 1e3,  # a large offset: the shift keeps it from cancelling
        "y": Y,
        "mix": X[:, :4] @ rng.normal(size=(4, 6)) + rng.normal(size=(n, 6)),
        "noise": rng.normal(size=(n, 3)),
    }


@pytest.mark.parametrize("seed", SEEDS)
def test_debiased_cka_matrix_matches_naive_and_streams(seed):
    acts = debiased_blocks(seed)
    names = list(acts)
    # The naive n × n form loses digits to the offset: give it centred blocks (the
    # estimator is translation invariant; the streaming form keeps the offset).
    centred = {name: x - x.mean(axis=0) for name, x in acts.items()}
    want = np.array([[naive_debiased_cka(centred[a], centred[b]) for b in names] for a in names])
    np.testing.assert_allclose(debiased_cka_matrix(acts), want, atol=1e-9)
    np.testing.assert_allclose(debiased_cka_matrix(centred), want, atol=1e-9)
    # Streaming in uneven chunks (and from torch input) gives the same statistics.
    stats = DebiasedCKAStats({name: acts[name].shape[1] for name in names})
    for start, stop in [(0, 7), (7, 8), (8, 50), (50, 90)]:
        stats.update({name: torch.from_numpy(x[start:stop]) for name, x in acts.items()})
    assert stats.n == 90
    np.testing.assert_allclose(stats.matrix(), want, atol=1e-9)
    sub = stats.matrix(["noise", "x"])
    np.testing.assert_allclose(sub, want[np.ix_([3, 0], [3, 0])], atol=1e-9)
    # Same through pairwise_matrix_raw (its all-pairs path) and pair by pair.
    raw = pairwise_matrix_raw(acts, metric="debiased_cka", progress=False)
    np.testing.assert_allclose(raw, want, atol=1e-9)
    cross = pairwise_matrix_raw(acts, names, ["y"], metric="debiased_cka", progress=False)
    np.testing.assert_allclose(cross[:, 0], want[:, 1], atol=1e-9)


def test_debiased_cka_matrix_is_near_zero_for_unrelated_blocks_and_checks_input():
    rng = np.random.default_rng(0)
    acts = {f"b{k}": rng.normal(size=(2000, 40)) for k in range(3)}
    unbiased = debiased_cka_matrix(acts)
    biased = np.array([[linear_cka(acts[a], acts[b]) for b in acts] for a in acts])
    off = ~np.eye(3, dtype=bool)
    assert np.abs(unbiased[off]).max() < 0.01 < biased[off].min()  # the biased floor is ~d/n
    with pytest.raises(ValueError, match="at least 4"):
        debiased_cka_matrix({k: v[:3] for k, v in acts.items()})
    with pytest.raises(KeyError, match="unknown blocks"):
        debiased_cka_matrix(acts, ["b0", "zz"])
    with pytest.raises(ValueError, match="itself"):
        debiased_cka_matrix({"a": np.ones((10, 2)), "b": rng.normal(size=(10, 2))})
    mom = Moments.from_arrays(acts)
    with pytest.raises(ValueError, match="pairwise_matrix_raw"):
        pairwise_matrix(mom, list(acts), metric="debiased_cka", progress=False)


# ----------------------------------------------------------------------- CKA of z-scored neurons
def _standardized(x):
    xc = x - x.mean(axis=0)
    return xc / np.sqrt((xc**2).sum(axis=0))


@pytest.mark.parametrize("seed", SEEDS)
def test_zscored_linear_cka_equals_plain_cka_on_prestandardized_data(seed):
    rng = np.random.default_rng(seed)
    acts = {
        "m/layer.0": rng.normal(size=(80, 6)) * rng.uniform(0.1, 30.0, 6) + 5.0,
        "m/layer.1": rng.normal(size=(80, 4)) * np.array([200.0, 1, 1, 1]),
        "n/layer.0": rng.normal(size=(80, 5)),
    }
    acts["n/layer.0"][:, 0] += acts["m/layer.1"][:, 0] / 100.0
    names = list(acts)
    got = linear_cka_matrix(Moments.from_arrays(acts), names, standardize=True)
    z = {k: _standardized(v) for k, v in acts.items()}
    want = [[naive_linear_cka(z[a], z[b]) for b in names] for a in names]
    np.testing.assert_allclose(got, want, atol=1e-10)
    # ... and differs from plain CKA on such unevenly scaled neurons
    plain = linear_cka_matrix(Moments.from_arrays(acts), names)
    assert np.abs(plain - got).max() > 0.05
    # with neurons left out too: the kept columns, standardised
    drop = {"m/layer.1": [0]}
    kept = {k: _standardized(np.delete(v, drop.get(k, []), axis=1)) for k, v in acts.items()}
    got = linear_cka_matrix(Moments.from_arrays(acts), names, drop=drop, standardize=True)
    want = [[naive_linear_cka(kept[a], kept[b]) for b in names] for a in names]
    np.testing.assert_allclose(got, want, atol=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_zscored_linear_cka_is_invariant_to_per_neuron_scaling_plain_is_not(seed):
    X, Y = random_pair(seed)
    scales = np.random.default_rng(seed).uniform(0.01, 100.0, X.shape[1])
    base = Moments.from_arrays({"x": X, "y": Y})
    scaled = Moments.from_arrays({"x": X * scales, "y": Y})
    z0 = linear_cka_matrix(base, ["x", "y"], standardize=True)[0, 1]
    z1 = linear_cka_matrix(scaled, ["x", "y"], standardize=True)[0, 1]
    assert z1 == pytest.approx(z0, abs=1e-10)
    p0 = linear_cka_matrix(base, ["x", "y"])[0, 1]
    p1 = linear_cka_matrix(scaled, ["x", "y"])[0, 1]
    assert abs(p1 - p0) > 1e-3


def test_zscored_linear_cka_leaves_constant_neurons_out():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(50, 4)), rng.normal(size=(50, 3))
    with_const = np.column_stack([x, np.full(50, 3.0)])
    a = linear_cka_matrix(Moments.from_arrays({"x": x, "y": y}), ["x", "y"], standardize=True)
    b = linear_cka_matrix(
        Moments.from_arrays({"x": with_const, "y": y}), ["x", "y"], standardize=True
    )
    np.testing.assert_allclose(a, b, atol=1e-12)
    with pytest.raises(ValueError, match="that is not constant"):
        linear_cka_matrix(Moments.from_arrays({"c": np.ones((5, 2))}), ["c"], standardize=True)


def test_outlier_neurons_top_k_takes_the_largest_variances():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 6)) * np.array([1.0, 9.0, 1.0, 30.0, 3.0, 1.0])
    mom = Moments.from_arrays({"m/layer.0": x})
    assert outlier_neurons(mom, "m/layer.0", top_k=2) == [3, 1]
    assert outlier_neurons(mom, "m/layer.0", top_k=0) == []
    # median variance (1 + 9) / 2 = 5: 81 is 16x it, 900 is 180x
    assert outlier_neurons(mom, "m/layer.0", factor=10.0) == [3, 1]
    assert outlier_neurons(mom, "m/layer.0", factor=100.0) == [3]
    with pytest.raises(ValueError, match="top_k"):
        outlier_neurons(mom, "m/layer.0", top_k=7)
