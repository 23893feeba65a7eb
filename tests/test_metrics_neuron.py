"""neuronsim and mixedsim against naive numpy implementations."""

import warnings
from functools import partial

import _helpers
import numpy as np
import pytest
import torch
from _helpers import SEEDS, random_orthogonal

from lmsim.metrics import mixedsim, neuronsim
from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# Two noisy views of shared latents, anisotropic scales and offsets.
random_pair = partial(_helpers.random_pair, n=250, d_x=10, d_y=14, n_latent=6, noise=0.7)


# ----------------------------------------------------------------------- naive versions
def naive_neuronsim(X, Y):
    corr = np.corrcoef(X.T, Y.T)[: X.shape[1], X.shape[1] :]
    return np.abs(corr).max(axis=1).mean()


def naive_mixedsim(X, Y):
    """One least-squares regression (with intercept) per neuron of X; R = sqrt(R²)."""
    design = np.column_stack([np.ones(len(Y)), Y])
    values = []
    for k in range(X.shape[1]):
        x = X[:, k]
        coef, *_ = np.linalg.lstsq(design, x, rcond=None)
        residual = x - design @ coef
        r_squared = 1 - residual @ residual / np.sum((x - x.mean()) ** 2)
        values.append(np.sqrt(max(r_squared, 0.0)))
    return float(np.mean(values))


# ----------------------------------------------------------------------- agreement
@pytest.mark.parametrize("seed", SEEDS)
def test_neuronsim_matches_corrcoef(seed):
    X, Y = random_pair(seed)
    assert neuronsim(X, Y) == pytest.approx(naive_neuronsim(X, Y), abs=1e-12)
    assert neuronsim(Y, X) == pytest.approx(naive_neuronsim(Y, X), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_mixedsim_matches_lstsq_with_intercept(seed):
    X, Y = random_pair(seed)
    assert mixedsim(X, Y) == pytest.approx(naive_mixedsim(X, Y), abs=1e-10)
    assert mixedsim(Y, X) == pytest.approx(naive_mixedsim(Y, X), abs=1e-10)


# ----------------------------------------------------------------------- properties
@pytest.mark.parametrize("fn", [neuronsim, mixedsim])
@pytest.mark.parametrize("seed", SEEDS)
def test_identity_bounds_asymmetry(fn, seed):
    X, Y = random_pair(seed)
    assert fn(X, X) == pytest.approx(1.0, abs=1e-12)
    assert 0.0 <= fn(X, Y) <= 1.0
    assert abs(fn(X, Y) - fn(Y, X)) > 1e-3


@pytest.mark.parametrize("fn", [neuronsim, mixedsim])
@pytest.mark.parametrize("seed", SEEDS)
def test_invariant_to_translation_and_per_neuron_scaling(fn, seed):
    X, Y = random_pair(seed)
    rng = np.random.default_rng(seed)
    scale_x = rng.uniform(0.05, 20.0, size=X.shape[1]) * rng.choice([-1, 1], size=X.shape[1])
    scale_y = rng.uniform(0.05, 20.0, size=Y.shape[1])
    reference = fn(X, Y)
    assert fn(X * scale_x, Y * scale_y) == pytest.approx(reference, abs=1e-10)
    assert fn(3.0 * X, 0.1 * Y) == pytest.approx(reference, abs=1e-10)
    assert fn(X + 50.0, Y - rng.normal(size=Y.shape[1])) == pytest.approx(reference, abs=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_neuronsim_not_rotation_invariant(seed):
    X, Y = random_pair(seed)
    Q = random_orthogonal(Y.shape[1], seed)
    assert abs(neuronsim(X, Y @ Q) - neuronsim(X, Y)) > 1e-3
    assert abs(neuronsim(X @ random_orthogonal(X.shape[1], seed), Y) - neuronsim(X, Y)) > 1e-3


@pytest.mark.parametrize("seed", SEEDS)
def test_mixedsim_invariant_to_invertible_maps_of_y_only(seed):
    X, Y = random_pair(seed)
    mix = np.random.default_rng(seed).normal(size=(Y.shape[1], Y.shape[1]))
    assert mixedsim(X, Y @ mix) == pytest.approx(mixedsim(X, Y), abs=1e-9)
    Q = random_orthogonal(X.shape[1], seed)
    assert abs(mixedsim(X @ Q, Y) - mixedsim(X, Y)) > 1e-4


def test_mixedsim_is_one_when_y_spans_the_samples():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(12, 3)), rng.normal(size=(12, 15))
    assert mixedsim(X, Y) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_mixedsim_of_a_layer_with_itself_is_one_despite_tiny_neurons(seed):
    """Real layers (LayerNorm outliers) mix neuron variances 1e16 apart; each neuron still
    lies in the layer's span, so its regression on the layer is exact."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 12)) * np.array([1e4] + [1.0] * 10 + [1e-4])
    mom = Moments.from_arrays({"x": X})
    assert mixedsim(mom, "x", "x") == pytest.approx(1.0, abs=1e-10)
    assert mixedsim(X, X) == pytest.approx(1.0, abs=1e-10)


def test_torch_input_matches_numpy():
    X, Y = random_pair(0)
    for fn in (neuronsim, mixedsim):
        assert fn(torch.from_numpy(X), torch.from_numpy(Y)) == pytest.approx(fn(X, Y), abs=1e-12)


# ----------------------------------------------------------------------- moments path
@pytest.mark.parametrize("seed", SEEDS)
def test_moments_match_raw_after_merging_chunks(seed):
    X, Y = random_pair(seed)
    parts = [Moments.from_arrays({"x": X[s], "y": Y[s]}) for s in (slice(0, 3), slice(3, 250))]
    mom = parts[0].merge(parts[1])
    for fn in (neuronsim, mixedsim):
        assert fn(mom, "x", "y") == pytest.approx(fn(X, Y), abs=1e-8)
        assert fn(mom, "y", "x") == pytest.approx(fn(Y, X), abs=1e-8)


@pytest.mark.parametrize("seed", SEEDS)
def test_moments_stable_with_large_offset(seed):
    X, Y = random_pair(seed)
    mom = Moments({"x": X.shape[1], "y": Y.shape[1]})
    for chunk in np.array_split(np.arange(X.shape[0]), 5):
        mom.update({"x": X[chunk] + 1e6, "y": Y[chunk] - 1e6})
    for fn in (neuronsim, mixedsim):
        assert fn(mom, "x", "y") == pytest.approx(fn(X, Y), abs=1e-8)


# ----------------------------------------------------------------------- bad input
@pytest.mark.parametrize("fn", [neuronsim, mixedsim])
def test_constant_neurons_dropped_with_warning(fn):
    X, Y = random_pair(1)
    X_const = np.column_stack([np.full(len(X), 2.0), X])
    Y_const = np.column_stack([Y, np.full(len(Y), -1e6)])
    with pytest.warns(RuntimeWarning, match="dropping 1 of"):
        value = fn(X_const, Y_const)
    assert value == pytest.approx(fn(X, Y), abs=1e-10)
    mom = Moments.from_arrays({"x": X_const, "y": Y_const})
    with pytest.warns(RuntimeWarning, match="constant"):
        assert fn(mom, "x", "y") == pytest.approx(fn(X, Y), abs=1e-8)


@pytest.mark.parametrize("fn", [neuronsim, mixedsim])
def test_bad_input(fn):
    X, Y = random_pair(0, n=30)
    with pytest.raises(ValueError, match="all 3 neurons"):
        fn(X, np.full((30, 3), 1.5))
    with pytest.raises(ValueError, match="same n_samples"):
        fn(X, Y[:10])
    with pytest.raises(ValueError, match="at least 2"):
        fn(X[:1], Y[:1])
    bad = X.copy()
    bad[1, 1] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        fn(bad, Y)
    mom = Moments.from_arrays({"x": X, "y": Y})
    with pytest.raises(KeyError, match="available"):
        fn(mom, "nope", "y")


def test_no_warning_without_constant_neurons():
    X, Y = random_pair(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        neuronsim(X, Y)
        mixedsim(X, Y)
