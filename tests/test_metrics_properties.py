"""Property-based tests of the metrics' invariances on arbitrary well-posed data (hypothesis).

Data: ``X (n, d_x)`` and ``Y (n, d_y)`` of bounded finite floats, ``n`` in [8, 60] and
``d`` in [2, 12] (so ``d > n - 1``, rank-deficient blocks, occur). ``assume`` rejects
degenerate draws: every neuron must vary, and the spectrum of ``Xcᵀ Xc`` must be clear —
each eigenvalue either a true zero or well above rounding, and (for SVCCA) the truncated
subspace well defined. On such data the claimed invariances hold to rounding; on
degenerate data they are not even defined (which zero-variance direction is "kept"?).

Which invariance holds for which metric (see each docstring):

============  ========  =========  ======  ========  =====================
metric        rotation  isotropic  symm.   [0, 1]    moments == arrays
============  ========  =========  ======  ========  =====================
linear_cka    X and Y   yes        yes     yes       yes
debiased_cka  X and Y   yes        yes     no (<0)   (no moment form)
rbf_cka       X and Y   yes        yes     yes       (no moment form)
svcca         X and Y   yes        yes     yes       yes
pwcca         Y only    yes        no      yes       yes
neuronsim     no        yes        no      yes       yes
mixedsim      Y only    yes        no      yes       yes
============  ========  =========  ======  ========  =====================
"""

import numpy as np
import pytest
from _helpers import random_orthogonal
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from lmsim.metrics import (
    debiased_cka,
    linear_cka,
    mixedsim,
    neuronsim,
    pwcca,
    rbf_cka,
    svcca,
)
from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# Fixed seed (derandomize) and no example database: the same examples on every run and no
# .hypothesis folder in the checkout.
PROPERTY = settings(max_examples=25, deadline=None, derandomize=True, database=None)

#: Smallest per-neuron variance accepted (values lie in [-10, 10]).
MIN_VAR = 1e-2
#: Eigenvalues of Xcᵀ Xc (relative to the largest) are either above COND or below ZERO.
COND, ZERO = 1e-6, 1e-20
#: SVCCA's default variance threshold and the margin the cumulative spectrum keeps from it.
THRESHOLD, MARGIN = 0.99, 1e-6
#: Rounding allowed on invariances and bounds.
TOL = 1e-9

FLOATS = st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False, allow_subnormal=False)
WIDTHS = st.integers(2, 12)

#: Metrics per property (the table above).
ROTATION_BOTH = {
    "linear_cka": linear_cka,
    "debiased_cka": debiased_cka,
    "rbf_cka": rbf_cka,
    "svcca": svcca,
}
ROTATION_TARGET = {"pwcca": pwcca, "mixedsim": mixedsim}
SYMMETRIC = ROTATION_BOTH
ISOTROPIC = {**ROTATION_BOTH, **ROTATION_TARGET, "neuronsim": neuronsim}
BOUNDED = {k: fn for k, fn in ISOTROPIC.items() if k != "debiased_cka"}
MOMENT_FORM = {k: fn for k, fn in ISOTROPIC.items() if k not in ("debiased_cka", "rbf_cka")}


def _relative_spectrum(A: np.ndarray) -> np.ndarray:
    """Eigenvalues of ``Xcᵀ Xc`` divided by the largest, descending, ``d`` of them."""
    s = np.linalg.svd(A - A.mean(axis=0), compute_uv=False)
    evals = np.zeros(A.shape[1])
    evals[: s.size] = s**2
    return evals / evals[0]


def well_posed(A: np.ndarray) -> bool:
    """Every neuron varies; every eigenvalue is clearly zero or clearly not; the SVCCA
    truncation at ``THRESHOLD`` is not a near-tie (cumulative share off the threshold, and
    a gap after the last kept direction)."""
    if A.var(axis=0).min() < MIN_VAR:
        return False
    evals = _relative_spectrum(A)
    if np.any((evals > ZERO) & (evals < COND)):
        return False
    share = np.cumsum(evals) / evals.sum()
    if np.any(np.abs(share - THRESHOLD) < MARGIN):
        return False
    k = int(np.argmax(share >= THRESHOLD)) + 1
    return k == evals.size or evals[k - 1] - evals[k] > COND


@st.composite
def blocks(draw, n: int):
    d = draw(WIDTHS)
    A = draw(arrays(np.float64, (n, d), elements=FLOATS, fill=st.nothing()))
    assume(well_posed(A))
    return A


@st.composite
def pairs(draw):
    """``(X, Y)`` with the same rows, each well posed."""
    n = draw(st.integers(8, 60))
    return draw(blocks(n)), draw(blocks(n))


def canonical_correlations(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Singular values of ``Qxᵀ Qy`` with ``Qx``, ``Qy`` orthonormal bases of the centred
    blocks' column spaces (null directions removed)."""

    def basis(A):
        u, s, _ = np.linalg.svd(A - A.mean(axis=0), full_matrices=False)
        return u[:, s > s[0] * 1e-8]

    return np.linalg.svd(basis(X).T @ basis(Y), compute_uv=False)


def pwcca_well_posed(X: np.ndarray, Y: np.ndarray) -> bool:
    """Distinct canonical correlations. With a repeated one (forced, e.g., as ones when
    ``rank X + rank Y > n - 1``) the canonical variates of that group are any rotation of
    each other and PWCCA's L1 weights, hence its value, depend on the one picked."""
    rho = canonical_correlations(X, Y)
    return bool(np.all(np.abs(np.diff(rho)) > 1e-4))


SEED = st.integers(0, 2**32 - 1)
SCALE = st.floats(1e-2, 1e2)


def pwcca_unless_ill_posed(metrics: dict, X: np.ndarray, Y: np.ndarray) -> dict:
    """``metrics`` without pwcca where its value is not defined by the data."""
    both_ways = pwcca_well_posed(X, Y) and pwcca_well_posed(Y, X)
    event("pwcca checked" if both_ways else "pwcca skipped: repeated canonical correlations")
    return {k: fn for k, fn in metrics.items() if k != "pwcca" or both_ways}


# ---------------------------------------------------------------------- invariances
@PROPERTY
@given(xy=pairs(), seed=SEED)
def test_invariant_to_rotations(xy, seed):
    """Rotating either block (CKA, SVCCA) or the target block (PWCCA, mixedsim)."""
    X, Y = xy
    qx, qy = random_orthogonal(X.shape[1], seed), random_orthogonal(Y.shape[1], seed + 1)
    for name, fn in ROTATION_BOTH.items():
        reference = fn(X, Y)
        assert fn(X @ qx, Y) == pytest.approx(reference, abs=TOL), name
        assert fn(X, Y @ qy) == pytest.approx(reference, abs=TOL), name
    for name, fn in pwcca_unless_ill_posed(ROTATION_TARGET, X, Y).items():
        assert fn(X, Y @ qy) == pytest.approx(fn(X, Y), abs=TOL), name


@PROPERTY
@given(xy=pairs(), a=SCALE, b=SCALE)
def test_invariant_to_isotropic_scaling(xy, a, b):
    X, Y = xy
    for name, fn in pwcca_unless_ill_posed(ISOTROPIC, X, Y).items():
        assert fn(a * X, b * Y) == pytest.approx(fn(X, Y), abs=TOL), name


@PROPERTY
@given(xy=pairs())
def test_symmetric(xy):
    X, Y = xy
    for name, fn in SYMMETRIC.items():
        assert fn(X, Y) == pytest.approx(fn(Y, X), abs=TOL), name


# ---------------------------------------------------------------------- values
@PROPERTY
@given(xy=pairs())
def test_bounded_in_zero_one(xy):
    X, Y = xy
    for name, fn in BOUNDED.items():
        for value in (fn(X, Y), fn(Y, X)):
            assert -TOL <= value <= 1.0 + TOL, name


@PROPERTY
@given(xy=pairs())
def test_cka_of_a_block_with_itself_is_one(xy):
    X, Y = xy
    assert linear_cka(X, X) == pytest.approx(1.0, abs=TOL)
    assert linear_cka(Y, Y) == pytest.approx(1.0, abs=TOL)


# ---------------------------------------------------------------------- moment form
@PROPERTY
@given(xy=pairs(), split=st.floats(0.0, 1.0))
def test_moment_form_equals_array_form(xy, split):
    """``fn(mom, a, b)`` from moments of two merged chunks equals ``fn(X, Y)``."""
    X, Y = xy
    cut = int(split * X.shape[0])
    mom = Moments.from_arrays({"x": X[:cut], "y": Y[:cut]}) + Moments.from_arrays(
        {"x": X[cut:], "y": Y[cut:]}
    )
    for name, fn in pwcca_unless_ill_posed(MOMENT_FORM, X, Y).items():
        assert fn(mom, "x", "y") == pytest.approx(fn(X, Y), abs=1e-8), name
        assert fn(mom, "y", "x") == pytest.approx(fn(Y, X), abs=1e-8), name
