"""SVCCA and PWCCA against naive numpy implementations, invariances, paper-compatible forms."""

import warnings

import numpy as np
import pytest
import torch
from _helpers import SEEDS, random_orthogonal, random_pair

from lmsim.metrics import pwcca, svcca
from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ----------------------------------------------------------------------- naive versions
def naive_svcca_basis(A, threshold=0.99, paper=False):
    """Left singular vectors of the centred (paper: z-scored) data, truncated."""
    Ac = A - A.mean(axis=0)
    if paper:
        Ac = Ac / A.std(axis=0, ddof=1)
    U, s, _ = np.linalg.svd(Ac, full_matrices=False)
    cumsum = np.cumsum(s**2)
    if paper:
        k = max(int(np.sum(cumsum < threshold * cumsum[-1])), 1)
    else:
        k = int(np.argmax(cumsum >= threshold * cumsum[-1])) + 1
    return U[:, :k]


def naive_svcca(X, Y, threshold=0.99, paper=False):
    Ux = naive_svcca_basis(X, threshold, paper)
    Uy = naive_svcca_basis(Y, threshold, paper)
    return np.linalg.svd(Ux.T @ Uy, compute_uv=False).mean()


def naive_pwcca_from_bases(Qx, Qy, X_for_weights):
    u, rho, _ = np.linalg.svd(Qx.T @ Qy, full_matrices=False)
    H = Qx @ u
    weights = np.abs(H.T @ X_for_weights).sum(axis=1)
    return float((weights * rho).sum() / weights.sum())


def naive_pwcca(X, Y):
    """Explicit CCA: QR of the centred data, SVD of Qxᵀ Qy, weights on centred neurons."""
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    Qx, _ = np.linalg.qr(Xc)
    Qy, _ = np.linalg.qr(Yc)
    return naive_pwcca_from_bases(Qx, Qy, Xc)


def naive_pwcca_paper(X, Y):
    """Authors' form: z-scored truncated bases, weights against X's raw neurons."""
    Ux = naive_svcca_basis(X, 0.99, paper=True)
    Uy = naive_svcca_basis(Y, 0.99, paper=True)
    return naive_pwcca_from_bases(Ux, Uy, X)


# ----------------------------------------------------------------------- agreement
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("threshold", [0.99, 0.9])
def test_svcca_matches_naive(seed, threshold):
    X, Y = random_pair(seed)
    expected = naive_svcca(X, Y, threshold)
    assert svcca(X, Y, threshold=threshold) == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_svcca_paper_compat_matches_its_naive_and_differs_from_default(seed):
    X, Y = random_pair(seed)
    paper = svcca(X, Y, paper_compat=True)
    assert paper == pytest.approx(naive_svcca(X, Y, paper=True), abs=1e-10)
    assert abs(paper - svcca(X, Y)) > 1e-4


@pytest.mark.parametrize("seed", SEEDS)
def test_pwcca_matches_naive_explicit_cca(seed):
    X, Y = random_pair(seed)
    assert pwcca(X, Y) == pytest.approx(naive_pwcca(X, Y), abs=1e-10)
    assert pwcca(Y, X) == pytest.approx(naive_pwcca(Y, X), abs=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_pwcca_paper_compat_matches_its_naive_and_differs_from_default(seed):
    X, Y = random_pair(seed)
    paper = pwcca(X, Y, paper_compat=True)
    assert paper == pytest.approx(naive_pwcca_paper(X, Y), abs=1e-10)
    assert abs(paper - pwcca(X, Y)) > 1e-4


def test_paper_svcca_keeps_one_component_fewer():
    X, _ = random_pair(0)
    default = naive_svcca_basis(X).shape[1]
    paper = naive_svcca_basis(X, paper=True).shape[1]
    # The rule differs by exactly one component on the same spectrum (checked on X's spectrum).
    Xc = X - X.mean(axis=0)
    s = np.linalg.svd(Xc, compute_uv=False)
    cumsum = np.cumsum(s**2)
    assert int(np.sum(cumsum < 0.99 * cumsum[-1])) == default - 1
    assert paper >= 1
    assert svcca(X, X, paper_compat=True) == pytest.approx(1.0, abs=1e-12)


# ----------------------------------------------------------------------- properties
@pytest.mark.parametrize("paper_compat", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_identity_bounds_symmetry(seed, paper_compat):
    X, Y = random_pair(seed)
    assert svcca(X, X, paper_compat=paper_compat) == pytest.approx(1.0, abs=1e-10)
    assert pwcca(X, X, paper_compat=paper_compat) == pytest.approx(1.0, abs=1e-10)
    assert svcca(X, Y, paper_compat=paper_compat) == pytest.approx(
        svcca(Y, X, paper_compat=paper_compat), abs=1e-12
    )
    for value in (svcca(X, Y, paper_compat=paper_compat), pwcca(X, Y, paper_compat=paper_compat)):
        assert 0.0 <= value <= 1.0


@pytest.mark.parametrize("paper_compat", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_pwcca_is_directional(seed, paper_compat):
    X, Y = random_pair(seed)
    assert (
        abs(pwcca(X, Y, paper_compat=paper_compat) - pwcca(Y, X, paper_compat=paper_compat)) > 1e-4
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_svcca_invariant_to_rotation_scaling_translation(seed):
    X, Y = random_pair(seed)
    reference = svcca(X, Y)
    Q = random_orthogonal(X.shape[1], seed)
    assert svcca(X @ Q, Y) == pytest.approx(reference, abs=1e-10)
    assert svcca(X, Y @ random_orthogonal(Y.shape[1], seed + 1)) == pytest.approx(
        reference, abs=1e-10
    )
    assert svcca(0.01 * X, 42.0 * Y) == pytest.approx(reference, abs=1e-10)
    assert svcca(X + 7.0, Y - 3.0) == pytest.approx(reference, abs=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_svcca_per_neuron_scaling_only_paper_compat_invariant(seed):
    X, Y = random_pair(seed)
    scales = np.random.default_rng(seed).uniform(0.05, 20.0, size=X.shape[1])
    assert svcca(X * scales, Y, paper_compat=True) == pytest.approx(
        svcca(X, Y, paper_compat=True), abs=1e-10
    )
    assert abs(svcca(X * scales, Y) - svcca(X, Y)) > 1e-4


@pytest.mark.parametrize("seed", SEEDS)
def test_pwcca_default_invariances(seed):
    X, Y = random_pair(seed)
    reference = pwcca(X, Y)
    # Y enters only through its column space: any rotation of Y leaves pwsim(X → Y) as is.
    assert pwcca(X, Y @ random_orthogonal(Y.shape[1], seed)) == pytest.approx(reference, abs=1e-10)
    assert pwcca(0.5 * X, 9.0 * Y) == pytest.approx(reference, abs=1e-10)
    assert pwcca(X - 100.0, Y + 2.0) == pytest.approx(reference, abs=1e-10)
    # X's rotations change the neuron basis the weights are summed over (an L1 norm).
    assert abs(pwcca(X @ random_orthogonal(X.shape[1], seed), Y) - reference) > 1e-6


@pytest.mark.parametrize("seed", SEEDS)
def test_pwcca_paper_compat_translation_and_per_neuron_scaling_of_y(seed):
    X, Y = random_pair(seed)
    reference = pwcca(X, Y, paper_compat=True)
    # Raw (uncentred) weights: still translation invariant, the canonical variates are centred.
    assert pwcca(X + 1e3, Y, paper_compat=True) == pytest.approx(reference, abs=1e-9)
    scales = np.random.default_rng(seed).uniform(0.05, 20.0, size=Y.shape[1])
    assert pwcca(X, Y * scales, paper_compat=True) == pytest.approx(reference, abs=1e-10)


def test_rank_deficient_inputs_match_naive():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(20, 30))
    Y = X[:, :10] @ rng.normal(size=(10, 25)) + 0.1 * rng.normal(size=(20, 25))
    assert svcca(X, Y) == pytest.approx(naive_svcca(X, Y), abs=1e-8)
    value = pwcca(Y, X)
    assert 0.0 <= value <= 1.0
    assert np.isfinite(value)


def test_torch_input_matches_numpy():
    X, Y = random_pair(0)
    Xt, Yt = torch.from_numpy(X), torch.from_numpy(Y)
    assert svcca(Xt, Yt) == pytest.approx(svcca(X, Y), abs=1e-12)
    assert pwcca(Xt, Yt, paper_compat=True) == pytest.approx(
        pwcca(X, Y, paper_compat=True), abs=1e-12
    )


# ----------------------------------------------------------------------- moments path
@pytest.mark.parametrize("paper_compat", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_moments_match_raw_after_merging_chunks(seed, paper_compat):
    X, Y = random_pair(seed)
    mom = Moments.from_arrays({"x": X[:100], "y": Y[:100]}) + Moments.from_arrays(
        {"x": X[100:], "y": Y[100:]}
    )
    for fn in (svcca, pwcca):
        assert fn(mom, "x", "y", paper_compat=paper_compat) == pytest.approx(
            fn(X, Y, paper_compat=paper_compat), abs=1e-8
        )
        assert fn(mom, "y", "x", paper_compat=paper_compat) == pytest.approx(
            fn(Y, X, paper_compat=paper_compat), abs=1e-8
        )


@pytest.mark.parametrize("seed", SEEDS)
def test_moments_stable_with_large_offset(seed):
    X, Y = random_pair(seed)
    mom = Moments({"x": X.shape[1], "y": Y.shape[1]})
    for chunk in np.array_split(np.arange(X.shape[0]), 6):
        mom.update({"x": X[chunk] + 1e6, "y": Y[chunk] + 1e6})
    for paper_compat in (False, True):
        for fn in (svcca, pwcca):
            assert fn(mom, "x", "y", paper_compat=paper_compat) == pytest.approx(
                fn(X, Y, paper_compat=paper_compat), abs=1e-8
            )


# ----------------------------------------------------------------------- bad input
@pytest.mark.parametrize("fn", [svcca, pwcca])
def test_bad_input(fn):
    X, Y = random_pair(0, n=40)
    with pytest.raises(ValueError, match="same n_samples"):
        fn(X, Y[:-2])
    with pytest.raises(ValueError, match="at least 2"):
        fn(X[:1], Y[:1])
    bad = Y.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        fn(X, bad)
    with pytest.raises(ValueError, match="zero variance"):
        fn(X, np.ones((40, 3)))
    with pytest.raises(TypeError, match="keyword-only"):
        fn(X, Y, 0.9)
    mom = Moments.from_arrays({"x": X, "y": Y})
    with pytest.raises(KeyError, match="available"):
        fn(mom, "x", "z")


def test_threshold_validation():
    X, Y = random_pair(0, n=40)
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="threshold"):
            svcca(X, Y, threshold=bad)
    assert svcca(X, Y, threshold=1.0) == pytest.approx(naive_svcca(X, Y, threshold=1.0), abs=1e-10)


def test_paper_compat_drops_constant_neurons_with_warning():
    X, Y = random_pair(1)
    X_const = np.column_stack([X, np.full(X.shape[0], 5.0)])
    with pytest.warns(RuntimeWarning, match="constant"):
        value = svcca(X_const, Y, paper_compat=True)
    assert value == pytest.approx(svcca(X, Y, paper_compat=True), abs=1e-10)
    # The textbook form needs no special case: a constant neuron adds no variance.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert svcca(X_const, Y) == pytest.approx(svcca(X, Y), abs=1e-10)
        assert pwcca(X_const, Y) == pytest.approx(pwcca(X, Y), abs=1e-10)


def test_canonical_correlations_fall_back_to_gesvd_when_gesdd_fails(monkeypatch):
    import torch

    from lmsim.metrics import cca

    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(50, 4)), rng.normal(size=(50, 3))
    want = pwcca(X, Y)

    def failing_svd(*args, **kwargs):
        raise torch.linalg.LinAlgError("linalg.svd: The algorithm failed to converge")

    monkeypatch.setattr(cca.torch.linalg, "svd", failing_svd)
    assert pwcca(X, Y) == pytest.approx(want, abs=1e-12)
