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

References
----------
Zhang, H. (2022), "Language Model Decomposition: Quantifying the Dependency and
Correlation of Language Models", EMNLP 2022. Eq. 6-11.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from scipy.linalg import cho_factor, cho_solve
from scipy.linalg.lapack import dpotrf, dpotri
from tqdm.auto import tqdm

from lmsim.blocks import block_name, is_layer_block, layers_by_model, parse_block
from lmsim.moments import Moments, _mirror_upper

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
    "REGULARISERS",
    "PAPER_CHECKPOINTS",
    "PAPER_GROUP_RHO",
    "PAPER_TABLE2",
    "PAPER_TABLE3",
    "PAPER_SEQ_LENS",
]

REGULARISERS = ("code", "paper")

#: Table 1 of Zhang (2022): the 12 models and their Hugging Face checkpoints.
PAPER_CHECKPOINTS: dict[str, str] = {
    "XLM-R": "xlm-roberta-base",
    "M-BERT": "bert-base-multilingual-cased",
    "Longformer": "allenai/longformer-base-4096",
    "DeBERTa": "microsoft/deberta-base",
    "distil-M-BERT": "distilbert-base-multilingual-cased",
    "RoBERTa": "roberta-base",
    "XLNet": "xlnet-base-cased",
    "BERT": "bert-base-uncased",
    "ELECTRA": "google/electra-base-discriminator",
    "distil-RoBERTa": "distilroberta-base",
    "distil-BERT": "distilbert-base-uncased",
    "ALBERT": "albert-base-v2",
}

#: Published group correlation ρ (Eq. 10) by sequence length T: the paper's numbers.
PAPER_GROUP_RHO: dict[str, dict[int, float]] = {
    "Table 2 (Wikipedia + BooksCorpus)": {
        16: 0.7279, 32: 0.7858, 64: 0.8438, 128: 0.8741, 256: 0.8996, 512: 0.9125,
    },
    "Table 3 (Wikicorpus)": {
        16: 0.7427, 32: 0.7925, 64: 0.8543, 128: 0.8904, 256: 0.9151, 512: 0.9299,
    },
}  # fmt: skip

#: Published Table 2: R²(u_i, {u_-i}) per checkpoint (rows) and T (columns), test set.
PAPER_TABLE2: dict[str, list[float]] = {
    # T =                                   16      32      64      128     256     512
    "xlm-roberta-base":                   [0.6415, 0.7279, 0.7866, 0.8316, 0.8430, 0.8692],
    "bert-base-multilingual-cased":       [0.6861, 0.7278, 0.7541, 0.7483, 0.8139, 0.8306],
    "allenai/longformer-base-4096":       [0.8696, 0.9329, 0.9289, 0.9015, 0.9581, 0.9481],
    "microsoft/deberta-base":             [0.7492, 0.7883, 0.8503, 0.8984, 0.9105, 0.9038],
    "distilbert-base-multilingual-cased": [0.7932, 0.8190, 0.8568, 0.8830, 0.8940, 0.9035],
    "roberta-base":                       [0.8322, 0.9037, 0.9512, 0.9180, 0.9566, 0.9552],
    "xlnet-base-cased":                   [0.3412, 0.3925, 0.6733, 0.8341, 0.8865, 0.9154],
    "bert-base-uncased":                  [0.7381, 0.8293, 0.8476, 0.8803, 0.8808, 0.9124],
    "google/electra-base-discriminator":  [0.6190, 0.7278, 0.8029, 0.8499, 0.8852, 0.9067],
    "distilroberta-base":                 [0.8722, 0.8883, 0.9221, 0.9417, 0.9469, 0.9550],
    "distilbert-base-uncased":            [0.8505, 0.8827, 0.9141, 0.9323, 0.9199, 0.9472],
    "albert-base-v2":                     [0.7422, 0.8093, 0.8374, 0.8696, 0.9000, 0.9027],
}  # fmt: skip

#: Published Table 3 (Appendix B, raw English Wikicorpus, 128,000 / 12,800 / 12,800
#: train / validation / test): R²(u_i, {u_-i}) per checkpoint and T, test set.
PAPER_TABLE3: dict[str, list[float]] = {
    # T =                                   16      32      64      128     256     512
    "xlm-roberta-base":                   [0.6319, 0.7179, 0.7714, 0.8215, 0.8562, 0.8808],
    "bert-base-multilingual-cased":       [0.6847, 0.7234, 0.7690, 0.7753, 0.8312, 0.8741],
    "allenai/longformer-base-4096":       [0.9240, 0.9413, 0.9542, 0.9668, 0.9753, 0.9741],
    "microsoft/deberta-base":             [0.7555, 0.8260, 0.8738, 0.9022, 0.9202, 0.9311],
    "distilbert-base-multilingual-cased": [0.8048, 0.8331, 0.8659, 0.8843, 0.9035, 0.9176],
    "roberta-base":                       [0.9186, 0.9401, 0.9532, 0.9667, 0.9750, 0.9761],
    "xlnet-base-cased":                   [0.3255, 0.3766, 0.6868, 0.8419, 0.8959, 0.9194],
    "bert-base-uncased":                  [0.7829, 0.8385, 0.8784, 0.9036, 0.9189, 0.9283],
    "google/electra-base-discriminator":  [0.6143, 0.7173, 0.8066, 0.8618, 0.8993, 0.9228],
    "distilroberta-base":                 [0.8868, 0.9077, 0.9264, 0.9418, 0.9536, 0.9612],
    "distilbert-base-uncased":            [0.8593, 0.8959, 0.9230, 0.9396, 0.9477, 0.9514],
    "albert-base-v2":                     [0.7240, 0.7927, 0.8435, 0.8790, 0.9044, 0.9223],
}  # fmt: skip
PAPER_SEQ_LENS = (16, 32, 64, 128, 256, 512)


# ---------------------------------------------------------------------- containers
@dataclass
class _Stats:
    """Count, mean ``(D,)`` and centred co-moment ``(D, D)`` of the model blocks."""

    n: int
    mean: torch.Tensor
    comoment: torch.Tensor

    def cov(self, ddof: int) -> torch.Tensor:
        return self.comoment / (self.n - ddof)


@dataclass
class Decomposition:
    """Result of :func:`decompose`: R² of every leave-one-out and pairwise fit.

    Attributes
    ----------
    models : list of str
        Model labels, in the order of every table.
    group_r2 : pandas.Series of shape (n_models,)
        Test R² of each model regressed on all the others, ``R²(u_i, {u_-i})`` (Eq. 9).
    group_rho : float
        Group correlation, the mean of ``group_r2`` (Eq. 10).
    pairwise_r2 : pandas.DataFrame of shape (n_models, n_models)
        Entry ``[target, basis]`` is the test ``R²(target | basis)``; the diagonal is the
        R² of a model on itself (1 up to the ridge). Asymmetric.
    pairwise_rho : pandas.DataFrame of shape (n_models, n_models)
        Symmetric pairwise correlation ``(R²(u, v) + R²(v, u)) / 2`` (Eq. 11).
    train_group_r2, train_group_rho, train_pairwise_r2, train_pairwise_rho
        The same on the train set (in-sample fit).
    ridge, regulariser, n_train, n_test
        The settings and sample counts that produced the result.
    weights : dict or None
        With ``return_weights=True``: ``{(target, basis tuple): (W, b)}`` with ``W`` of
        shape ``(d_target, d_basis)`` and ``b`` of shape ``(d_target,)`` (numpy float64).
    """

    models: list[str]
    group_r2: pd.Series
    group_rho: float
    pairwise_r2: pd.DataFrame
    pairwise_rho: pd.DataFrame
    train_group_r2: pd.Series
    train_group_rho: float
    train_pairwise_r2: pd.DataFrame
    train_pairwise_rho: pd.DataFrame
    ridge: float
    regulariser: str
    n_train: int
    n_test: int
    weights: dict | None = field(default=None, repr=False)

    def table(self, split: str = "test") -> pd.Series:
        """Group R² per model plus the group correlation, the layout of Table 2.

        Parameters
        ----------
        split : {"test", "train"}
        """
        if split not in ("test", "train"):
            raise ValueError(f"`split` must be 'test' or 'train', got {split!r}")
        r2s = self.group_r2 if split == "test" else self.train_group_r2
        rho = self.group_rho if split == "test" else self.train_group_rho
        return pd.concat([r2s, pd.Series({"group ρ": rho})])


# ---------------------------------------------------------------------- validation
def _as_moments(data, name: str, device) -> Moments:
    if isinstance(data, Moments):
        return data if device is None else data.to(device)
    if isinstance(data, Mapping):
        return Moments.from_arrays(data, device="cpu" if device is None else device)
    raise TypeError(
        f"`{name}` must be a lmsim.moments.Moments or a dict of (n_samples, d) arrays, "
        f"got {type(data).__name__}"
    )


def _default_models(names: Sequence[str]) -> dict[str, str]:
    """Label blocks by model name when every model contributes one ``/layer.i`` block."""
    if all(is_layer_block(b) for b in names):
        labels = [parse_block(b)[0] for b in names]
        if len(set(labels)) == len(labels):
            return dict(zip(labels, names))
    return {b: b for b in names}


def _resolve_models(models, mom: Moments) -> dict[str, str]:
    if models is None:
        return _default_models(mom.names)
    if isinstance(models, str):
        raise TypeError(
            f"`models` must be a list of block names or a dict, got the string {models!r}"
        )
    if not isinstance(models, Mapping):
        models = {b: b for b in models}
    models = {str(k): v for k, v in models.items()}
    unknown = [b for b in models.values() if b not in mom.dims]
    if unknown:
        raise KeyError(
            f"`models` names blocks {unknown} that are not in the moments; available: {mom.names}"
        )
    return models


def _check_ridge(ridge: float, regulariser: str) -> float:
    if regulariser not in REGULARISERS:
        raise ValueError(f"`regulariser` must be one of {REGULARISERS}, got {regulariser!r}")
    ridge = float(ridge)
    if not np.isfinite(ridge) or ridge < 0:
        raise ValueError(f"`ridge` must be a finite number >= 0, got {ridge!r}")
    return ridge


def _check_pair(train: Moments, test: Moments, blocks: Sequence[str]) -> None:
    for b in blocks:
        if b not in test.dims:
            raise KeyError(f"block {b!r} is in the train moments but not in the test moments")
        if train.dims[b] != test.dims[b]:
            raise ValueError(
                f"block {b!r} has width {train.dims[b]} in train but {test.dims[b]} in test: "
                "train and test must come from the same models and layers"
            )
    if train.n < 2:
        raise ValueError(f"the train moments hold n={train.n} samples; need at least 2 to fit")
    if test.n < 1:
        raise ValueError(f"the test moments hold n={test.n} samples; need at least 1 to score")


class _Problem:
    """Train/test statistics of the model blocks and the slices of each model."""

    def __init__(self, train: Moments, test: Moments, models: dict[str, str], device):
        blocks = list(models.values())
        _check_pair(train, test, blocks)
        self.device = torch.device(device) if device is not None else train.device
        self.labels = list(models)
        self.slices: dict[str, slice] = {}
        start = 0
        for label, block in models.items():
            self.slices[label] = slice(start, start + train.dims[block])
            start += train.dims[block]
        self.train = _Stats(
            train.n, train.mean(blocks).to(self.device), _joint(train, blocks).to(self.device)
        )
        self.test = _Stats(
            test.n, test.mean(blocks).to(self.device), _joint(test, blocks).to(self.device)
        )
        self._check_variance()

    @classmethod
    def from_stats(cls, train: _Stats, test: _Stats, slices: dict[str, slice], device):
        self = cls.__new__(cls)
        self.device, self.labels, self.slices = device, list(slices), slices
        self.train, self.test = train, test
        self._check_variance()
        return self

    def _check_variance(self) -> None:
        for label, sl in self.slices.items():
            for split, stats in (("train", self.train), ("test", self.test)):
                if float(stats.comoment.diagonal()[sl].sum()) <= 0:
                    raise ValueError(
                        f"model {label!r} has zero variance on the {split} set (constant "
                        "embedding): R² is undefined; check the extraction or drop the model"
                    )

    def warn_small_variance(self, ridge: float) -> None:
        """Warn when a model's variance per dimension is not far above the ridge."""
        for label, sl in self.slices.items():
            var = float(self.train.comoment.diagonal()[sl].mean()) / max(self.train.n - 1, 1)
            if var < 100 * ridge:
                warnings.warn(
                    f"model {label!r} has a mean variance of {var:.3g} per dimension, within a "
                    f"factor 100 of ridge={ridge:g}: the ridge shrinks its fits (R² of the model "
                    "on itself falls below 1); lower `ridge` or rescale the embeddings",
                    UserWarning,
                    stacklevel=3,
                )

    def index(self, labels: Sequence[str]) -> torch.Tensor:
        return torch.cat(
            [torch.arange(self.slices[m].start, self.slices[m].stop) for m in labels]
        ).to(self.device)


def _joint(mom: Moments, blocks: list[str]) -> torch.Tensor:
    """Co-moment of ``blocks``: a read-only view when they are contiguous in layout order."""
    names = mom.names
    first = names.index(blocks[0])
    if names[first : first + len(blocks)] == blocks:
        sl = slice(mom._offsets[blocks[0]].start, mom._offsets[blocks[-1]].stop)
        return mom._comoment[sl, sl]
    return mom.comoment(blocks)


# ---------------------------------------------------------------------- the fit
def _warn_underdetermined(n_train: int, d_basis: int, basis: Sequence[str], ridge: float) -> None:
    msg = (
        f"n_train={n_train} samples <= basis dimension {d_basis} (basis {list(basis)}): "
        "the basis covariance is singular, the fit interpolates the train set and test R² "
        "is dominated by the ridge; use more train samples, fewer or narrower basis models, "
        "or a larger `ridge`"
    )
    if ridge == 0:
        raise ValueError(msg + " (with ridge=0 the fit is not defined)")
    warnings.warn(msg, UserWarning, stacklevel=4)


def _min_norm_solve(gram: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """``pinv(gram) @ rhs`` for a symmetric PSD ``gram`` via its eigendecomposition."""
    evals, evecs = torch.linalg.eigh(gram)
    tol = evals.abs().max() * gram.shape[0] * torch.finfo(gram.dtype).eps
    inv = torch.where(evals > tol, 1.0 / evals.clamp_min(tol), torch.zeros_like(evals))
    return evecs @ ((evecs.T @ rhs) * inv[:, None])


def _solve_weights(
    train: _Stats, zi: torch.Tensor, ui: torch.Tensor, ridge: float, regulariser: str
) -> tuple[torch.Tensor, torch.Tensor, float | None, torch.Tensor]:
    """Fit ``u ≈ W z + b`` on train statistics (Eq. 6-8).

    Returns ``W`` of shape ``(len(ui), len(zi))``, ``b`` of shape ``(len(ui),)``, the ridge
    ``s`` actually added to the covariance (``None`` for the minimum-norm fallback, which
    satisfies no ridge normal equations) and the train cross co-moment ``C_zu`` of shape
    ``(len(zi), len(ui))``, gathered once and reused by Eq. L2.
    """
    ddof = 1 if regulariser == "code" else 0
    comoment_zu = train.comoment.index_select(0, zi)
    cov_zz = comoment_zu.index_select(1, zi) / (train.n - ddof)
    comoment_zu = comoment_zu.index_select(1, ui)
    cov_zu = comoment_zu / (train.n - ddof)
    shift: float | None
    if regulariser == "code":
        shift = ridge
        cov_zz.diagonal().add_(ridge)
        try:
            w_t = torch.cholesky_solve(cov_zu, torch.linalg.cholesky(cov_zz))
        except torch.linalg.LinAlgError:
            warnings.warn(
                f"basis covariance + ridge ({ridge:g}) I is singular (Cholesky failed): using the "
                "minimum-norm solution (Moore-Penrose, Eq. 5); pass ridge > 0 for a unique fit",
                UserWarning,
                stacklevel=4,
            )
            w_t = _min_norm_solve(cov_zz, cov_zu)
            shift = None
    else:
        evals, evecs = torch.linalg.eigh(cov_zz)
        shift = max(ridge - float(evals[0]), 0.0)
        w_t = evecs @ ((evecs.T @ cov_zu) / (evals + shift)[:, None])
    weights = w_t.T
    bias = train.mean[ui] - weights @ train.mean[zi]
    return weights, bias, shift, comoment_zu


def _train_row_ssr(
    train: _Stats,
    weights: torch.Tensor,
    bias: torch.Tensor,
    ui: torch.Tensor,
    zi: torch.Tensor,
    shift: float,
    ddof: int,
    comoment_zu: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-dimension train SSR / n and SST / n from the normal equations (Eq. L2).

    ``W (Σ_zz + s I) = Σ_uz`` turns the quadratic form into
    ``W C_zz Wᵀ = W C_zu - (n - ddof) s W Wᵀ``, so
    ``n · SSR_r = C_rr - (W C_zu)_rr - (n - ddof) s ‖W_r‖²`` (+ the bias offset, zero up
    to rounding on the train set). Two tensors of shape ``(len(ui),)``.
    """
    var_u = train.comoment.diagonal()[ui] / train.n
    cross = (weights * comoment_zu.T).sum(dim=1)
    penalty = (train.n - ddof) * shift * (weights * weights).sum(dim=1)
    offset = train.mean[ui] - weights @ train.mean[zi] - bias
    return var_u - (cross + penalty) / train.n + offset**2, var_u


def _row_ssr(
    stats: _Stats, weights: torch.Tensor, bias: torch.Tensor, ui: torch.Tensor, zi: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-dimension residual and total sums of squares / n from moments (population).

    ``E(u_r - W_r z - b_r)² = S_rr - 2 W_r S_zr + W_r S_zz W_rᵀ + (m_r - W_r m_z - b_r)²``.
    Returns two tensors of shape ``(len(ui),)``.
    """
    rows = stats.comoment.index_select(0, zi)
    cov_zz = rows.index_select(1, zi) / stats.n
    cov_zu = rows.index_select(1, ui) / stats.n
    del rows
    var_u = stats.comoment.diagonal()[ui] / stats.n
    cross = (weights * cov_zu.T).sum(dim=1)
    quad = ((weights @ cov_zz) * weights).sum(dim=1)
    offset = stats.mean[ui] - weights @ stats.mean[zi] - bias
    ssr = var_u - 2 * cross + quad + offset**2
    return ssr, var_u


def _r2_by_block(ssr: torch.Tensor, sst: torch.Tensor, widths: Sequence[int]) -> list[float]:
    out, start = [], 0
    for width in widths:
        stop = start + width
        out.append(1.0 - float(ssr[start:stop].sum() / sst[start:stop].sum()))
        start = stop
    return out


def _fit_and_score(
    prob: _Problem,
    targets: Sequence[str],
    basis: Sequence[str],
    ridge: float,
    regulariser: str,
    fit_cache: dict | None = None,
):
    """Fit every target on one basis set; return train R², test R² and (W, b) per target.

    ``fit_cache`` (bootstrap of the test set only) keeps ``(W, b)`` of fits whose train
    statistics do not change between calls.
    """
    ui, zi = prob.index(targets), prob.index(basis)
    widths = [prob.slices[t].stop - prob.slices[t].start for t in targets]
    key = (tuple(targets), tuple(basis))
    if fit_cache is not None and key in fit_cache:
        weights, bias, train_r2 = fit_cache[key]
    else:
        if prob.train.n <= len(zi):
            _warn_underdetermined(prob.train.n, len(zi), basis, ridge)
        weights, bias, shift, comoment_zu = _solve_weights(prob.train, zi, ui, ridge, regulariser)
        if shift is None:  # minimum-norm fit: no normal equations with a ridge to use
            train_ssr = _row_ssr(prob.train, weights, bias, ui, zi)
        else:
            ddof = 1 if regulariser == "code" else 0
            train_ssr = _train_row_ssr(prob.train, weights, bias, ui, zi, shift, ddof, comoment_zu)
        del comoment_zu
        train_r2 = _r2_by_block(*train_ssr, widths)
        if fit_cache is not None:
            fit_cache[key] = (weights, bias, train_r2)
    test_r2 = _r2_by_block(*_row_ssr(prob.test, weights, bias, ui, zi), widths)
    return train_r2, test_r2, weights, bias, widths


def _spd_inverse(mat: torch.Tensor) -> torch.Tensor | None:
    """Inverse of a symmetric positive definite ``mat`` (D, D) by Cholesky; ``None`` if not PD.

    ``mat`` is overwritten. On CPU: LAPACK ``dpotrf`` + ``dpotri`` (``D³`` flops in all,
    one triangle, no extra full-size buffer); elsewhere torch's Cholesky.
    """
    if mat.device.type != "cpu":
        factor, info = torch.linalg.cholesky_ex(mat)
        return None if int(info) else torch.cholesky_inverse(factor)
    # The C-ordered symmetric buffer read in Fortran order is the same matrix.
    factor, info = dpotrf(mat.numpy().T, lower=0, clean=0, overwrite_a=1)
    if info != 0:
        return None
    inverse, info = dpotri(factor, lower=0, overwrite_c=1)
    if info != 0:
        return None
    out = torch.from_numpy(inverse)  # Fortran-ordered; its upper triangle holds P
    _mirror_upper(out)
    return out.T  # C-contiguous, equal to `out` (symmetric)


def _is_pd(mat: torch.Tensor) -> bool:
    if mat.device.type != "cpu":
        return not int(torch.linalg.cholesky_ex(mat)[1])
    return dpotrf(mat.numpy().T, lower=0, clean=0, overwrite_a=1)[1] == 0


def _common_shift(prob: _Problem, ridge: float, regulariser: str) -> float | None:
    """The ridge ``s`` shared by every leave-one-out fit, or ``None`` if the targets differ.

    ``"code"``: ``λ``. ``"paper"``: ``s_T = max(λ - e_min(Σ_OO), 0)`` per target; by
    interlacing ``e_min(Σ_OO) ≥ e_min(Σ)``, so ``Σ - λ I`` positive definite gives ``s = 0``
    for all; ``N - 1 < D - d_max`` makes every ``Σ_OO`` singular and ``s = λ`` for all.
    """
    if regulariser == "code":
        return ridge
    if ridge == 0:
        return 0.0
    train = prob.train
    dim = train.comoment.shape[0]
    shifted = train.comoment / train.n
    shifted.diagonal().sub_(ridge)
    if _is_pd(shifted):
        return 0.0
    widths = [sl.stop - sl.start for sl in prob.slices.values()]
    if train.n - 1 < dim - max(widths):
        return ridge
    return None


def _loo_fits(prob: _Problem, ridge: float, regulariser: str) -> dict | None:
    """Every leave-one-out fit from one inverse of the regularised joint covariance (Eq. L1).

    Returns ``{label: (W, b, shift)}`` with ``W`` of shape ``(d_T, D)`` (zero on the
    target's own columns, so that ``W @ x`` works on the joint vector) and ``b`` of shape
    ``(d_T,)``; ``None`` when the fits do not share one ridge or the regularised
    covariance is not numerically positive definite (then fit target by target).
    """
    shift = _common_shift(prob, ridge, regulariser)
    if shift is None:
        return None
    train = prob.train
    ddof = 1 if regulariser == "code" else 0
    joint = train.comoment / (train.n - ddof)
    joint.diagonal().add_(shift)
    prec = _spd_inverse(joint)
    del joint
    if prec is None:
        return None
    fits = {}
    on_cpu = prec.device.type == "cpu"
    for label, sl in prob.slices.items():
        rows = prec[sl]  # (d_T, D), contiguous: P_T· in place
        if on_cpu:
            factor = cho_factor(rows[:, sl].numpy(), lower=False, check_finite=False)
            sol = cho_solve(factor, rows.numpy(), check_finite=False)
            weights = torch.from_numpy(sol).neg_()
        else:
            weights = -torch.cholesky_solve(rows, torch.linalg.cholesky(rows[:, sl]))
        weights[:, sl] = 0.0
        bias = train.mean[sl] - weights @ train.mean
        fits[label] = (weights, bias, shift)
    return fits


def _loo_scores(prob: _Problem, label: str, weights, bias, shift: float, ddof: int):
    """Train (Eq. L2) and test R² of one leave-one-out fit with ``W`` as from :func:`_loo_fits`."""
    sl = prob.slices[label]
    start, stop = sl.start, sl.stop
    out = []
    for split, stats in (("train", prob.train), ("test", prob.test)):
        c = stats.comoment
        var_u = c.diagonal()[sl]
        cross = (weights * c[sl]).sum(dim=1)  # diag(W C_OT): W is zero on the T columns
        offset = stats.mean[sl] - weights @ stats.mean - bias
        if split == "train":
            penalty = (prob.train.n - ddof) * shift * (weights * weights).sum(dim=1)
            ssr = (var_u - cross - penalty) / stats.n + offset**2
        else:
            # diag(W C_OO Wᵀ) on views of C around the target's rows and columns.
            w_lo, w_hi = weights[:, :start], weights[:, stop:]
            y_lo = w_lo @ c[:start, :start] + w_hi @ c[stop:, :start]
            y_hi = w_lo @ c[:start, stop:] + w_hi @ c[stop:, stop:]
            quad = (y_lo * w_lo).sum(dim=1) + (y_hi * w_hi).sum(dim=1)
            ssr = (var_u - 2 * cross + quad) / stats.n + offset**2
        out.append(1.0 - float(ssr.sum() / (var_u.sum() / stats.n)))
    return out


# ---------------------------------------------------------------------- public API
def _decompose_problem(
    prob: _Problem,
    ridge: float,
    regulariser: str,
    return_weights: bool,
    pairwise: bool,
    progress: bool,
    fit_cache: dict | None = None,
) -> Decomposition:
    labels = prob.labels
    n_models = len(labels)
    if n_models < 2:
        raise ValueError(f"LMD needs at least 2 models, got {labels}")
    weights: dict | None = {} if return_weights else None

    def keep(target_list, basis, weights_t, bias_t, widths):
        if weights is None:
            return
        start = 0
        for target, width in zip(target_list, widths):
            stop = start + width
            weights[(target, tuple(basis))] = (
                weights_t[start:stop].cpu().numpy(),
                bias_t[start:stop].cpu().numpy(),
            )
            start = stop

    group_train, group_test = {}, {}
    total = prob.train.comoment.shape[0]
    for target in labels:
        width = prob.slices[target].stop - prob.slices[target].start
        if prob.train.n <= total - width:
            _warn_underdetermined(
                prob.train.n, total - width, [m for m in labels if m != target], ridge
            )
    key = ("leave-one-out", tuple(labels))
    if fit_cache is not None and key in fit_cache:
        loo = fit_cache[key]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # warned above, once per target
            loo = _loo_fits(prob, ridge, regulariser)
        if fit_cache is not None:
            fit_cache[key] = loo
    ddof = 1 if regulariser == "code" else 0
    for target in tqdm(labels, desc="LMD leave-one-out fits", disable=not progress):
        basis = [m for m in labels if m != target]
        if loo is not None:
            w_full, b_t, shift = loo[target]
            tr, te = _loo_scores(prob, target, w_full, b_t, shift, ddof)
            group_train[target], group_test[target] = tr, te
            if weights is not None:
                keep([target], basis, w_full[:, prob.index(basis)], b_t, [len(b_t)])
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            warnings.filterwarnings("always", message=".*minimum-norm", category=UserWarning)
            tr, te, w_t, b_t, widths = _fit_and_score(
                prob, [target], basis, ridge, regulariser, fit_cache
            )
        group_train[target], group_test[target] = tr[0], te[0]
        keep([target], basis, w_t, b_t, widths)

    pair_train = np.full((n_models, n_models), np.nan)
    pair_test = np.full((n_models, n_models), np.nan)
    if pairwise:
        for j, basis in enumerate(tqdm(labels, desc="LMD pairwise fits", disable=not progress)):
            # One factorisation of the basis covariance serves every target at once.
            tr, te, w_t, b_t, widths = _fit_and_score(
                prob, labels, [basis], ridge, regulariser, fit_cache
            )
            pair_train[:, j], pair_test[:, j] = tr, te
            keep(labels, [basis], w_t, b_t, widths)

    def frame(values):
        return pd.DataFrame(
            values, index=pd.Index(labels, name="target"), columns=pd.Index(labels, name="basis")
        )

    def rho(values):
        return frame((values + values.T) / 2)

    group_test_s = pd.Series(group_test, name="R² test")
    group_train_s = pd.Series(group_train, name="R² train")
    return Decomposition(
        models=list(labels),
        group_r2=group_test_s,
        group_rho=float(group_test_s.mean()),
        pairwise_r2=frame(pair_test),
        pairwise_rho=rho(pair_test),
        train_group_r2=group_train_s,
        train_group_rho=float(group_train_s.mean()),
        train_pairwise_r2=frame(pair_train),
        train_pairwise_rho=rho(pair_train),
        ridge=ridge,
        regulariser=regulariser,
        n_train=prob.train.n,
        n_test=prob.test.n,
        weights=weights,
    )


def decompose(
    train,
    test,
    ridge: float = 1e-6,
    regulariser: str = "code",
    models=None,
    device=None,
    return_weights: bool = False,
    pairwise: bool = True,
    progress: bool = False,
) -> Decomposition:
    """All leave-one-out and pairwise LMD fits of a group of models, from moments.

    Parameters
    ----------
    train, test : Moments or dict of str to array of shape (n_samples, d_block)
        Moments of the stacked sequence embeddings, one block per model (widths may
        differ). Raw arrays are converted with :meth:`Moments.from_arrays`. W and b are
        fitted on ``train``; R² is reported on ``test`` (and on ``train``).
    ridge : float, default=1e-6
        λ of Eq. 6 (the paper's value).
    regulariser : {"code", "paper"}, default="code"
        ``"code"``: λ added to the (N-1)-normalised covariance, as the released code
        does (a fixed ridge; see the module docstring for why it is the default).
        ``"paper"``: the smallest eigenvalue of the population covariance is floored at
        λ by a data-dependent shift, as the paper's text describes.
    models : list of str or dict of str to str, optional
        Model label -> block name. Default: every block; blocks named
        ``"{model}/layer.{i}"`` with one layer per model are labelled ``{model}``.
    device : str or torch.device, optional
        Where to solve; default the device of ``train`` (a GPU when extraction ran there).
    return_weights : bool, default=False
        Also return every ``(W, b)`` (memory: one ``d × (n-1) d`` matrix per model).
    pairwise : bool, default=True
        Also fit the ``n²`` single-basis regressions (cheap next to the leave-one-out fits).
    progress : bool, default=False
        Show tqdm progress bars over the fits.

    Returns
    -------
    Decomposition

    Warns
    -----
    UserWarning
        When ``n_train`` is not larger than a basis dimension (the fit is then set by the
        ridge); with ``ridge=0`` this is a ``ValueError``.

    References
    ----------
    Zhang (2022), Eq. 6-11.
    """
    ridge = _check_ridge(ridge, regulariser)
    train_m = _as_moments(train, "train", device)
    test_m = _as_moments(test, "test", device if device is not None else train_m.device)
    prob = _Problem(train_m, test_m, _resolve_models(models, train_m), device)
    prob.warn_small_variance(ridge)
    return _decompose_problem(prob, ridge, regulariser, return_weights, pairwise, progress)


def r2(
    train,
    test,
    target: str,
    basis: str | Sequence[str],
    ridge: float = 1e-6,
    regulariser: str = "code",
    models=None,
    device=None,
    split: str = "test",
) -> float:
    """R² of one target model regressed on a set of basis models (Eq. 9).

    Parameters
    ----------
    train, test : Moments or dict of arrays
        As in :func:`decompose`.
    target : str
        Model label (or block name).
    basis : str or list of str
        One or several model labels; the target itself is allowed.
    split : {"test", "train"}, default="test"
        Which set the R² is reported on.

    Returns
    -------
    float
    """
    if split not in ("test", "train"):
        raise ValueError(f"`split` must be 'test' or 'train', got {split!r}")
    ridge = _check_ridge(ridge, regulariser)
    basis = [basis] if isinstance(basis, str) else list(basis)
    if not basis:
        raise ValueError("`basis` is empty: name at least one basis model")
    train_m = _as_moments(train, "train", device)
    test_m = _as_moments(test, "test", device if device is not None else train_m.device)
    model_map = _resolve_models(models, train_m)
    unknown = [m for m in [target, *basis] if m not in model_map]
    if unknown:
        raise KeyError(f"unknown models {unknown}; available: {list(model_map)}")
    used = {m: model_map[m] for m in dict.fromkeys([target, *basis])}
    prob = _Problem(train_m, test_m, used, device)
    tr, te, *_ = _fit_and_score(prob, [target], basis, ridge, regulariser)
    return tr[0] if split == "train" else te[0]


def r2_vs_basis_size(
    train,
    test,
    target: str,
    order: Sequence[str] | None = None,
    ridge: float = 1e-6,
    regulariser: str = "code",
    models=None,
    device=None,
) -> pd.DataFrame:
    """R² of ``target`` as basis models are added one at a time.

    The basis after step ``k`` is the first ``k`` models of ``order``. On the train set
    the R² can only rise (up to the tiny ridge): a larger basis nests the smaller one.

    Parameters
    ----------
    order : list of str, optional
        Basis models in the order they are added; default the other models as listed.

    Returns
    -------
    pandas.DataFrame
        One row per basis size with columns ``n_basis``, ``added``, ``train_r2``,
        ``test_r2``.
    """
    ridge = _check_ridge(ridge, regulariser)
    train_m = _as_moments(train, "train", device)
    test_m = _as_moments(test, "test", device if device is not None else train_m.device)
    model_map = _resolve_models(models, train_m)
    if target not in model_map:
        raise KeyError(f"unknown target {target!r}; available: {list(model_map)}")
    order = [m for m in model_map if m != target] if order is None else list(order)
    unknown = [m for m in order if m not in model_map]
    if unknown or not order:
        raise ValueError(
            f"`order` must list known basis models, got {order}; available: {list(model_map)}"
        )
    used = {m: model_map[m] for m in dict.fromkeys([target, *order])}
    prob = _Problem(train_m, test_m, used, device)
    rows = []
    for k in range(1, len(order) + 1):
        tr, te, *_ = _fit_and_score(prob, [target], order[:k], ridge, regulariser)
        rows.append({"n_basis": k, "added": order[k - 1], "train_r2": tr[0], "test_r2": te[0]})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- layers
def _pick_layer(spec, available: list[int], model: str) -> int:
    if isinstance(spec, str) and spec == "last":
        return available[-1]
    if isinstance(spec, float) and not isinstance(spec, bool):
        if not 0.0 <= spec <= 1.0:
            raise ValueError(f"relative layer {spec!r} must lie in [0, 1]")
        return available[int(round(spec * (len(available) - 1)))]
    if isinstance(spec, (int, np.integer)):
        try:
            return available[int(spec)]
        except IndexError:
            raise ValueError(
                f"layer {spec} does not exist for model {model!r}, which has layers {available}"
            ) from None
    raise TypeError(f"a layer must be an int, a float in [0, 1] or 'last', got {spec!r}")


def layer_blocks(mom, layer="last", models: Sequence[str] | None = None) -> dict[str, str]:
    """Model name -> block name of one layer, for ``models=`` of :func:`decompose`.

    Parameters
    ----------
    mom : Moments or list of str
        Moments (or block names) with ``"{model}/layer.{i}"`` blocks.
    layer : "last", int or float
        As one entry of ``layers`` in :func:`decompose_layers`.
    models : list of str, optional
        Default: every model with ``/layer.`` blocks.
    """
    names = mom.names if isinstance(mom, Moments) else list(mom)
    by_model = layers_by_model(names)
    models = list(by_model) if models is None else list(models)
    unknown = [m for m in models if m not in by_model]
    if unknown:
        raise KeyError(f"no '/layer.' blocks for models {unknown}; available: {list(by_model)}")
    return {m: block_name(m, _pick_layer(layer, by_model[m], m)) for m in models}


def decompose_layers(
    train,
    test,
    layers="all",
    models: Sequence[str] | None = None,
    **kwargs,
) -> dict:
    """Run :func:`decompose` once per layer, on blocks named ``"{model}/layer.{i}"``.

    Parameters
    ----------
    train, test : Moments
        Moments holding ``"{model}/layer.{i}"`` blocks (e.g. ``extract_moments(...,
        layers="all")``).
    layers : "all", "last" or list of int / float
        ``int``: position in each model's list of layers (``0`` the embeddings, ``-1`` the
        last); ``float`` in [0, 1]: relative depth (models of different depths are
        aligned by it); ``"all"``: every layer index, which needs equal depths.
    models : list of str, optional
        Model names (the part before ``/layer.``); default all of them.
    **kwargs
        Passed to :func:`decompose`.

    Returns
    -------
    dict
        ``{layer spec: Decomposition}`` in the order of ``layers``.
    """
    train_m = _as_moments(train, "train", kwargs.get("device"))
    by_model = layers_by_model(train_m.names)
    if not by_model:
        raise ValueError(f"no block is named '{{model}}/layer.{{i}}'; blocks: {train_m.names}")
    models = list(by_model) if models is None else list(models)
    unknown = [m for m in models if m not in by_model]
    if unknown:
        raise KeyError(f"no '/layer.' blocks for models {unknown}; available: {list(by_model)}")
    if isinstance(layers, str):
        if layers == "last":
            layers = ["last"]
        elif layers == "all":
            depths = {m: len(by_model[m]) for m in models}
            if len(set(depths.values())) != 1:
                raise ValueError(
                    f"layers='all' needs models of equal depth, got {depths}; pass relative "
                    "depths instead, e.g. layers=[0.0, 0.25, 0.5, 0.75, 1.0]"
                )
            layers = list(range(next(iter(depths.values()))))
        else:
            raise ValueError(f"`layers` must be 'all', 'last' or a list, got {layers!r}")
    out = {}
    for spec in layers:
        out[spec] = decompose(train_m, test, models=layer_blocks(train_m, spec, models), **kwargs)
    return out


def r2_table(results: Mapping, split: str = "test") -> pd.DataFrame:
    """Table 2 layout: group R² per model (rows) and group ρ, one column per result.

    Parameters
    ----------
    results : mapping of column label to Decomposition
        E.g. ``{16: dec_16, 32: dec_32}`` for a sequence-length grid.
    """
    return pd.DataFrame({key: dec.table(split) for key, dec in results.items()})


# ---------------------------------------------------------------------- bootstrap
@dataclass
class BootstrapResult:
    """Percentile bootstrap over shards of :func:`decompose`'s statistics.

    Attributes
    ----------
    estimate : Decomposition
        The point estimate on all shards merged.
    group_r2_samples : pandas.DataFrame of shape (n_boot, n_models)
    group_rho_samples : ndarray of shape (n_boot,)
    pairwise_r2_samples : ndarray of shape (n_boot, n_models, n_models)
    level : float
        Coverage of the intervals, e.g. 0.95.
    """

    estimate: Decomposition
    group_r2_samples: pd.DataFrame
    group_rho_samples: np.ndarray
    pairwise_r2_samples: np.ndarray
    level: float

    @property
    def _quantiles(self) -> tuple[float, float]:
        alpha = (1 - self.level) / 2
        return alpha, 1 - alpha

    def group_r2_ci(self) -> pd.DataFrame:
        """Columns ``estimate``, ``lower``, ``upper``, one row per model."""
        lo, hi = np.quantile(self.group_r2_samples.to_numpy(), self._quantiles, axis=0)
        return pd.DataFrame(
            {"estimate": self.estimate.group_r2, "lower": lo, "upper": hi},
            index=self.estimate.group_r2.index,
        )

    def group_rho_ci(self) -> tuple[float, float]:
        """``(lower, upper)`` of the group correlation."""
        lo, hi = np.quantile(self.group_rho_samples, self._quantiles)
        return float(lo), float(hi)

    def pairwise_r2_ci(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``(lower, upper)`` tables shaped like ``estimate.pairwise_r2``."""
        return self._pair_ci(self.pairwise_r2_samples, self.estimate.pairwise_r2)

    def pairwise_rho_ci(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``(lower, upper)`` tables of the symmetric pairwise correlation."""
        samples = (self.pairwise_r2_samples + self.pairwise_r2_samples.transpose(0, 2, 1)) / 2
        return self._pair_ci(samples, self.estimate.pairwise_rho)

    def _pair_ci(self, samples, like: pd.DataFrame):
        lo, hi = np.quantile(samples, self._quantiles, axis=0)
        return (
            pd.DataFrame(lo, index=like.index, columns=like.columns),
            pd.DataFrame(hi, index=like.index, columns=like.columns),
        )


class _ShardPool:
    """Counts ``(S,)``, means ``(S, D)`` and co-moments of ``S`` shards, ready to resample."""

    # Stack the co-moments (one tensordot per replicate) when they fit in this many bytes.
    stack_limit_bytes = 1 << 30

    def __init__(self, shards, name: str, blocks: list[str], device, min_shards: int = 2):
        if isinstance(shards, (Moments, Mapping)) or len(shards) < min_shards:
            raise ValueError(
                f"`{name}` must be a list of at least {min_shards} shards (Moments) to resample"
            )
        moms = [_as_moments(shard, f"{name}[{k}]", None) for k, shard in enumerate(shards)]
        for k, mom in enumerate(moms):
            missing = [b for b in blocks if b not in mom.dims]
            if missing:
                raise KeyError(f"`{name}[{k}]` lacks blocks {missing}")
        moms = [mom for mom in moms if mom.n > 0]
        if len(moms) < min_shards:
            raise ValueError(
                f"`{name}` holds fewer than {min_shards} non-empty shards: nothing to resample"
            )
        self.counts = torch.tensor([m.n for m in moms], dtype=torch.float64, device=device)
        self.means = torch.stack([m.mean(blocks).to(device) for m in moms])
        comoments = [m.comoment(blocks).to(device) for m in moms]
        dim = self.means.shape[1]
        if len(moms) * dim * dim * 8 <= self.stack_limit_bytes:
            self.comoments: torch.Tensor | list[torch.Tensor] = torch.stack(comoments)
        else:
            self.comoments = comoments

    def __len__(self) -> int:
        return len(self.counts)

    def merge(self, draws: np.ndarray) -> _Stats:
        """Moments of the union of ``draws[k]`` copies of shard ``k`` (Chan et al. merge).

        ``M = Σ c_k M_k + Σ c_k n_k (μ_k - μ)(μ_k - μ)ᵀ``, centred on the pooled mean so
        large offsets do not cancel.
        """
        draws_t = torch.as_tensor(np.asarray(draws), dtype=torch.float64, device=self.means.device)
        weights = draws_t * self.counts
        n = float(weights.sum())
        mean = weights @ self.means / n
        deltas = self.means - mean
        comoment = (deltas.T * weights) @ deltas
        if isinstance(self.comoments, torch.Tensor):
            comoment += torch.tensordot(draws_t, self.comoments, dims=1)
        else:
            for draw, part in zip(draws, self.comoments):
                if draw:
                    comoment.add_(part, alpha=float(draw))
        return _Stats(int(round(n)), mean, comoment)


def _draw(rng: np.random.Generator, n_shards: int) -> np.ndarray:
    """How many times each of ``n_shards`` shards is drawn in one bootstrap resample."""
    return rng.multinomial(n_shards, np.full(n_shards, 1 / n_shards))


def bootstrap(
    train_shards: Sequence,
    test_shards: Sequence,
    n_boot: int = 200,
    seed: int = 0,
    level: float = 0.95,
    ridge: float = 1e-6,
    regulariser: str = "code",
    models=None,
    device=None,
    progress: bool = True,
    resample: str = "both",
) -> BootstrapResult:
    """Percentile confidence intervals for every group R², pairwise R² and ρ.

    Each replicate draws as many shards as there are, with replacement, merges their
    moments (weighted sums: no pass over the data) and reruns :func:`decompose`. Shards
    should be exchangeable (equal-sized random batches), and there should be enough of
    them (say >= 10) for the resampling to mean much. Beyond the paper, which reports
    point estimates only.

    What is resampled decides what the interval covers:

    - ``"test"``: the fit stays the one on all train data; the interval covers the
      sampling noise of the test score only. Cheap (no refit) and centred on the estimate.
    - ``"train"`` / ``"both"``: the fit is redone on resampled train data, so the interval
      also covers the variability of W. Caveat: a resample repeats shards, so it holds
      only about 63 % distinct samples; when ``n_train`` is only a few times the basis
      width the refitted models overfit more than the original one and the test R² of the
      replicates sit *below* the estimate (the percentile interval may then exclude it).
      Trust these intervals only when ``n_train`` is much larger than every basis width.

    Parameters
    ----------
    train_shards, test_shards : list of Moments
        Per-shard moments with the same blocks (``extract_moments(...,
        return_shards=True)``).
    n_boot : int, default=200
        Number of bootstrap replicates.
    seed : int, default=0
    level : float, default=0.95
        Coverage of the percentile intervals.
    ridge, regulariser, models, device
        As in :func:`decompose`.
    progress : bool, default=True
        Show a tqdm bar over the replicates.
    resample : {"both", "train", "test"}, default="both"
        Which shards are resampled (the others are used whole in every replicate).

    Returns
    -------
    BootstrapResult
    """
    ridge = _check_ridge(ridge, regulariser)
    if resample not in ("both", "train", "test"):
        raise ValueError(f"`resample` must be 'both', 'train' or 'test', got {resample!r}")
    if int(n_boot) < 2:
        raise ValueError(f"`n_boot` must be >= 2, got {n_boot!r}")
    if not 0 < level < 1:
        raise ValueError(f"`level` must lie in (0, 1), got {level!r}")
    if isinstance(train_shards, (Moments, Mapping)) or not len(train_shards):
        raise ValueError("`train_shards` must be a non-empty list of Moments")
    first = _as_moments(train_shards[0], "train_shards[0]", None)
    model_map = _resolve_models(models, first)
    blocks = list(model_map.values())
    device = torch.device(device) if device is not None else first.device
    resample_train, resample_test = resample in ("both", "train"), resample in ("both", "test")
    train_pool = _ShardPool(train_shards, "train_shards", blocks, device, 1 + resample_train)
    test_pool = _ShardPool(test_shards, "test_shards", blocks, device, 1 + resample_test)
    # With the train set fixed every replicate has the same fits: solve them once.
    fit_cache = None if resample_train else {}
    slices, start = {}, 0
    for label, block in model_map.items():
        slices[label] = slice(start, start + first.dims[block])
        start += first.dims[block]

    def run(train_counts, test_counts, quiet=True):
        prob = _Problem.from_stats(
            train_pool.merge(train_counts),
            test_pool.merge(test_counts),
            slices,
            device,
        )
        with warnings.catch_warnings():
            if quiet:  # the point estimate already warned once
                warnings.simplefilter("ignore", UserWarning)
            return _decompose_problem(prob, ridge, regulariser, False, True, False, fit_cache)

    estimate = run(np.ones(len(train_pool), int), np.ones(len(test_pool), int), quiet=False)
    rng = np.random.default_rng(seed)
    group, rho, pair = [], [], []
    for _ in tqdm(range(int(n_boot)), desc="LMD bootstrap", disable=not progress):
        train_counts = _draw(rng, len(train_pool)) if resample_train else np.ones(len(train_pool))
        test_counts = _draw(rng, len(test_pool)) if resample_test else np.ones(len(test_pool))
        dec = run(train_counts, test_counts)
        group.append(dec.group_r2.to_numpy())
        rho.append(dec.group_rho)
        pair.append(dec.pairwise_r2.to_numpy())
    return BootstrapResult(
        estimate=estimate,
        group_r2_samples=pd.DataFrame(group, columns=estimate.group_r2.index),
        group_rho_samples=np.asarray(rho),
        pairwise_r2_samples=np.stack(pair),
        level=float(level),
    )
