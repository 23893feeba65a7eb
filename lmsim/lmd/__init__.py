"""Language Model Decomposition (LMD): how well is one model a linear map of others?

Zhang (2022) fits a target model's sequence embedding ``u`` (width ``d_u``) as a
linear combination of basis models' embeddings ``z = [v_1; ...; v_k]`` with a bias,
``u ≈ W z + b`` (Eq. 7), by ridge-regularised least squares (Eq. 6, 8), and scores the fit
by a coefficient of determination pooled over all ``d_u`` dimensions (Eq. 9):

    W = Cov(u, z) (Cov(z, z) + λ I)^-1,    b = E[u] - W E[z],
    R²(u, {v_i}) = 1 - E‖u - W z - b‖² / E‖u - E[u]‖².

The group correlation is the mean of the leave-one-out R² (Eq. 10) and the pairwise
correlation the mean of the two directed pairwise R² (Eq. 11).

Every quantity is a function of the means and covariances of the stacked embeddings of
the train and of the test set, so this module works on :class:`lmsim.moments.Moments`:
one streaming pass over the data gives all ``n`` leave-one-out fits and all
``n (n - 1)`` pairwise fits. The fits are float64 linear solves (Cholesky; an
eigendecomposition for the paper's regulariser) on the device the moments live on.
The test-set residual is expanded in test moments (population normalisation):

    SSR = tr(S_uu) - 2 tr(W S_zu) + tr(W S_zz Wᵀ) + ‖m_u - W m_z - b‖²,   SST = tr(S_uu),

with ``m`` and ``S`` the test mean and covariance.

All leave-one-out fits from one factorisation
---------------------------------------------
Let ``A = Σ + s I`` be the regularised covariance of all ``k`` stacked models
(``D × D``) and ``P = A⁻¹``. For target block ``T`` and basis ``O`` (every other
block), the partitioned inverse gives ``P_TT = (A_TT - A_TO A_OO⁻¹ A_OT)⁻¹`` (the
inverse Schur complement) and ``P_TO = -P_TT A_TO A_OO⁻¹``, hence, since ``s I`` touches
only the diagonal blocks (``A_TO = Σ_TO``), exactly for any ``s``::

    W_T = Σ_TO (Σ_OO + s I)⁻¹ = A_TO A_OO⁻¹ = -P_TT⁻¹ P_TO.                      (L1)

One Cholesky factorisation and inverse of ``A`` (``D³`` flops) thus replace ``k``
factorisations of ``(D - d)``-wide bases, and every target reads its rows of ``P`` in
place (no gathered copy of ``Σ_OO``). The train residual follows from the normal
equations ``W (Σ_OO + s I) = Σ_TO`` instead of a quadratic form: with co-moments
``C = (N - ddof) Σ``::

    N · SSR_train = tr(C_TT) - tr(W C_OT) - (N - ddof) s ‖W‖²_F.                  (L2)

The test residual needs the test quadratic form ``tr(W S_OO Wᵀ)``, computed on views of
the test co-moment (four strided GEMMs around the target's rows and columns). The
route applies whenever all targets share one ridge ``s``: always for ``"code"``
(``s = λ``); for ``"paper"`` when ``Σ - λ I`` is positive definite (then every basis
covariance has ``e_min > λ`` by eigenvalue interlacing and ``s = 0``) or when
``N - 1 < D - d_max`` (every basis covariance is singular and ``s = λ``). Otherwise —
and when ``A`` is numerically singular (``ridge=0``) — each target is fitted on its
own, as :func:`r2` does. On CPU the factorisation is LAPACK ``dpotrf``/``dpotri``
through SciPy (float64); on a GPU, torch's Cholesky (float64).

Regularisers
------------
``regulariser="code"`` (default) follows the authors' released code: λ is added to the
diagonal of the (N - 1)-normalised basis covariance, i.e. the textbook ridge regression
``min Σ‖u - Wz - b‖² + λ (N - 1) ‖W‖²`` (``sklearn.linear_model.Ridge`` with
``alpha = λ (N - 1)``). It is the default because it is a fixed, data-independent ridge:
results are reproducible across sample sizes and conditioning, and it is what produced
the published numbers.

``regulariser="paper"`` follows the paper's text (Sec. 3.1): "a small regularization
term is added to ensure the minimal eigenvalue of λI + E[zzᵀ] is 10⁻⁶". We read it as
a ridge whose strength is chosen from the spectrum: with ``E`` the population
covariance of ``z`` and ``e_min`` its smallest eigenvalue, ``λ_eff = max(λ - e_min, 0)``
so that the smallest eigenvalue of ``λ_eff I + E`` is ``max(e_min, λ)``. A
well-conditioned basis is therefore fitted by plain least squares, an ill-conditioned one
with a ridge just large enough to floor the spectrum at λ. It is implemented with an
eigendecomposition of the basis covariance.

The package, by concern: :mod:`~lmsim.lmd._problem` (inputs and their statistics),
:mod:`~lmsim.lmd._fit` (one fit on a basis), :mod:`~lmsim.lmd._loo` (all leave-one-out fits
from one inverse),
:mod:`~lmsim.lmd._decompose` (:func:`decompose`, :func:`r2`, :func:`r2_vs_basis_size`),
:mod:`~lmsim.lmd._layers` (layer by layer), :mod:`~lmsim.lmd._bootstrap` and
:mod:`~lmsim.lmd._overfit` (R² against n_train, the over-fitting-corrected R²) and
:mod:`~lmsim.lmd._evidence` (claim estimates with their intervals over train and test
shards), :mod:`~lmsim.lmd._crossval` (cross-validated ridge R², a model-free check of the
over-fitting correction) and :mod:`~lmsim.lmd._groupsize` (ρ against the number of basis
models; the pairwise level). The
paper's and the authors' published tables are the chapter's, :mod:`lmsim.papers.zhang2022_lmd`.

References
----------
Zhang, H. (2022), "Language Model Decomposition: Quantifying the Dependency and
Correlation of Language Models", EMNLP 2022. Eq. 6-11.
"""

from lmsim.lmd._bootstrap import BootstrapResult, _ShardPool, bootstrap  # noqa: F401
from lmsim.lmd._crossval import DEFAULT_ALPHAS, CrossValR2, crossval_r2
from lmsim.lmd._decompose import Decomposition, decompose, r2, r2_vs_basis_size
from lmsim.lmd._evidence import View, bootstrap_estimate, lowest_margin, replicate_views
from lmsim.lmd._groupsize import mean_pairwise_r2, rho_vs_group_size
from lmsim.lmd._layers import decompose_layers, layer_blocks, r2_table
from lmsim.lmd._loo import _spd_inverse  # noqa: F401
from lmsim.lmd._overfit import (
    debias_r2,
    extrapolate_r2,
    learning_curve,
    overfit_table,
    resampled_n_train,
    stein_factor,
)
from lmsim.lmd._problem import REGULARISERS

__all__ = [
    "Decomposition",
    "BootstrapResult",
    "decompose",
    "r2",
    "r2_vs_basis_size",
    "decompose_layers",
    "bootstrap",
    "r2_table",
    "layer_blocks",
    "debias_r2",
    "View",
    "bootstrap_estimate",
    "lowest_margin",
    "replicate_views",
    "extrapolate_r2",
    "learning_curve",
    "overfit_table",
    "resampled_n_train",
    "stein_factor",
    "REGULARISERS",
    "CrossValR2",
    "DEFAULT_ALPHAS",
    "crossval_r2",
    "mean_pairwise_r2",
    "rho_vs_group_size",
]
