"""Procrustes shape distance and RSA against naive implementations, invariances, bounds."""

from __future__ import annotations

import math
from functools import partial

import _helpers
import numpy as np
import pytest
from _helpers import SEEDS, random_orthogonal
from scipy.linalg import orthogonal_procrustes
from scipy.spatial.distance import pdist
from scipy.stats import pearsonr, spearmanr

from lmsim.metrics import pairwise_matrix, pairwise_matrix_raw, procrustes, rsa
from lmsim.metrics.cka import debiased_cka, rbf_cka
from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")

random_pair = partial(_helpers.random_pair, n=120, d_x=12, d_y=9, n_latent=6, noise=0.5)


# ----------------------------------------------------------------------- naive versions
def naive_procrustes(X, Y):
    """netrep's angular Procrustes: centre, zero-pad, unit norm, align by the best rotation."""
    X = X - X.mean(axis=0)
    Y = Y - Y.mean(axis=0)
    width = max(X.shape[1], Y.shape[1])
    X = np.pad(X, ((0, 0), (0, width - X.shape[1])))
    Y = np.pad(Y, ((0, 0), (0, width - Y.shape[1])))
    X, Y = X / np.linalg.norm(X), Y / np.linalg.norm(Y)
    Q, _ = orthogonal_procrustes(X, Y)
    return math.acos(np.clip(np.sum((X @ Q) * Y), -1.0, 1.0))


def naive_rsa(X, Y, rdm="correlation", compare="spearman"):
    dx, dy = pdist(X, metric=rdm), pdist(Y, metric=rdm)
    return (spearmanr if compare == "spearman" else pearsonr)(dx, dy)[0]


# ----------------------------------------------------------------------- Procrustes
@pytest.mark.parametrize("seed", SEEDS)
def test_procrustes_matches_the_naive_alignment(seed):
    X, Y = random_pair(seed)
    assert procrustes(X, Y) == pytest.approx(naive_procrustes(X, Y), abs=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_procrustes_is_invariant_to_rotation_translation_and_scale(seed):
    X, Y = random_pair(seed)
    Q = random_orthogonal(X.shape[1], seed)
    ref = procrustes(X, Y)
    assert procrustes(3.0 * X @ Q + 5.0, Y) == pytest.approx(ref, abs=1e-10)
    assert procrustes(Y, X) == pytest.approx(ref, abs=1e-12)  # symmetric


@pytest.mark.parametrize("seed", SEEDS)
def test_procrustes_is_a_metric_within_its_bounds(seed):
    rng = np.random.default_rng(seed)
    X, Y = random_pair(seed)
    Z = rng.normal(size=(X.shape[0], 7))
    assert procrustes(X, X @ random_orthogonal(X.shape[1], seed + 9)) == pytest.approx(
        0.0, abs=1e-6
    )
    xy, yz, xz = procrustes(X, Y), procrustes(Y, Z), procrustes(X, Z)
    assert 0 < xy <= math.pi / 2 and 0 < xz <= math.pi / 2
    assert xz <= xy + yz + 1e-12  # triangle inequality


def test_procrustes_from_moments_equals_the_raw_path_for_every_pair():
    acts = _helpers.random_layers(0)
    mom = Moments.from_arrays(acts)
    names = list(acts)
    matrix = pairwise_matrix(mom, names, metric="procrustes", progress=False)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            # arccos near 1 amplifies rounding to about sqrt(eps) ~ 1e-8 on the diagonal
            assert matrix[i, j] == pytest.approx(procrustes(acts[a], acts[b]), abs=1e-7)
            assert procrustes(mom, a, b) == pytest.approx(matrix[i, j], abs=1e-12)


def test_procrustes_rejects_a_constant_block():
    X, _ = random_pair(0)
    with pytest.raises(ValueError, match="zero variance"):
        procrustes(X, np.ones((X.shape[0], 3)))


# ----------------------------------------------------------------------- RSA
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rdm", ["correlation", "euclidean"])
@pytest.mark.parametrize("compare", ["spearman", "pearson"])
def test_rsa_matches_scipy(seed, rdm, compare):
    X, Y = random_pair(seed)
    got = rsa(X, Y, rdm=rdm, compare=compare)
    assert got == pytest.approx(naive_rsa(X, Y, rdm, compare), abs=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_rsa_invariances_and_bounds(seed):
    X, Y = random_pair(seed)
    Q = random_orthogonal(X.shape[1], seed)
    rng = np.random.default_rng(seed)
    euclid = rsa(X, Y, rdm="euclidean")
    assert rsa(2.0 * X @ Q - 4.0, Y, rdm="euclidean") == pytest.approx(euclid, abs=1e-10)
    corr = rsa(X, Y)
    row_shift = rng.normal(size=(X.shape[0], 1))
    assert rsa(3.0 * X + row_shift, Y) == pytest.approx(corr, abs=1e-10)
    assert rsa(Y, X) == pytest.approx(corr, abs=1e-12)
    assert rsa(X, X) == pytest.approx(1.0, abs=1e-12)
    assert -1.0 <= corr <= 1.0
    # Spearman sees only the order of the dissimilarities: squaring Euclidean distances
    # (an increasing map) leaves it unchanged.
    assert rsa(X, Y, rdm="euclidean") == pytest.approx(
        spearmanr(pdist(X, "sqeuclidean"), pdist(Y, "euclidean"))[0], abs=1e-10
    )


def test_rsa_of_unrelated_data_is_near_zero():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(200, 10)), rng.normal(size=(200, 10))
    assert abs(rsa(X, Y)) < 0.05


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"rdm": "cosine"}, "unknown `rdm`"), ({"compare": "kendall"}, "unknown `compare`")],
)
def test_rsa_rejects_unknown_options(kwargs, message):
    X, Y = random_pair(0)
    with pytest.raises(ValueError, match=message):
        rsa(X, Y, **kwargs)


def test_rsa_names_constant_rows():
    X, Y = random_pair(0)
    X[3] = 1.0
    with pytest.raises(ValueError, match="constant across features"):
        rsa(X, Y)


# ----------------------------------------------------------------------- raw pairwise
@pytest.mark.parametrize(
    ("metric", "fn"),
    [("rsa", rsa), ("rbf_cka", rbf_cka), ("debiased_cka", debiased_cka)],
)
def test_pairwise_raw_prepares_each_block_once_and_equals_the_pair_function(metric, fn):
    acts = _helpers.random_layers(1, n=80)
    names = list(acts)
    rows = names[:2]
    matrix = pairwise_matrix_raw(acts, rows, names, metric=metric, progress=False)
    for i, a in enumerate(rows):
        for j, b in enumerate(names):
            assert matrix[i, j] == pytest.approx(fn(acts[a], acts[b]), abs=1e-10)


def test_moments_refuse_the_measures_that_need_rows():
    acts = _helpers.random_layers(0)
    mom = Moments.from_arrays(acts)
    with pytest.raises(ValueError, match="needs more than the means and co-moments"):
        pairwise_matrix(mom, list(acts), metric="rsa", progress=False)
