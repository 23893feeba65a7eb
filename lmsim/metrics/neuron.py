"""Neuron-level (neuronsim) and mixed neuron–representation (mixedsim) similarity.

Both are directional, X → Y, and functions of the covariance blocks only.

Constant neurons (zero variance over the samples) have no defined correlation: they are
dropped from both blocks with a ``RuntimeWarning`` (a block with only constant neurons
raises ``ValueError``). The average is over X's remaining neurons.

References
----------
Bau et al. (2019), "Identifying and Controlling Important Neurons in Neural Machine
Translation", ICLR (max-correlation neurons). Wu et al. (2020), App. A.1 (neuronsim),
App. A.2 (mixedsim).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lmsim.metrics._linalg import BlockStats, drop_constant, eigh_desc, numerical_rank, pair_stats

__all__ = ["mixedsim", "neuronsim"]


@dataclass
class NeuronBlock:
    """Per-block part of neuronsim/mixedsim.

    Attributes
    ----------
    kept : Tensor of shape (d_kept,)
        Indices of the non-constant neurons.
    scale : Tensor of shape (d_kept,)
        ``‖Xc[:, k]‖`` of each kept neuron (std up to the factor ``sqrt(n)``).
    whiten : Tensor of shape (d_kept, r) or None
        ``D⁻¹ V_r S_r⁻¹`` with ``V S² Vᵀ`` the kept neurons' correlation matrix and ``D``
        their norms: ``Xc[:, kept] @ whiten`` is an orthonormal basis of the block's
        column space (mixedsim targets only).
    """

    kept: torch.Tensor
    scale: torch.Tensor
    whiten: torch.Tensor | None = None


def prepare_neuronsim(stats: BlockStats, fn: str = "neuronsim") -> NeuronBlock:
    kept = drop_constant(stats, fn)
    return NeuronBlock(kept=kept, scale=stats.comoment.diagonal()[kept].sqrt())


def prepare_mixedsim(stats: BlockStats) -> NeuronBlock:
    block = prepare_neuronsim(stats, fn="mixedsim")
    # Whiten the correlation matrix, not the co-moment: R is invariant to rescaling Y's
    # neurons, and real layers mix neurons whose variances differ by 1e16 (LayerNorm
    # outliers), which the rank cut-off of the raw co-moment would wrongly drop.
    scale = block.scale
    corr = stats.comoment[block.kept][:, block.kept] / torch.outer(scale, scale)
    evals, evecs = eigh_desc(corr)
    rank = numerical_rank(evals)
    block.whiten = evecs[:, :rank] / evals[:rank].sqrt() / scale[:, None]
    return block


def _kept_cross(bx: NeuronBlock, by: NeuronBlock, cxy: torch.Tensor) -> torch.Tensor:
    return cxy[bx.kept][:, by.kept]


def neuronsim_pair(bx: NeuronBlock, by: NeuronBlock, cxy: torch.Tensor) -> float:
    """Mean over X's neurons of the max |Pearson r| with Y's neurons."""
    corr = _kept_cross(bx, by, cxy) / torch.outer(bx.scale, by.scale)
    return float(corr.abs().amax(dim=1).clamp(max=1.0).mean())


def mixedsim_pair(bx: NeuronBlock, by: NeuronBlock, cxy: torch.Tensor) -> float:
    """Mean over X's neurons of the multiple correlation R of the regression on all of Y."""
    if by.whiten is None:
        raise ValueError("the target block was prepared for neuronsim, not mixedsim")
    projected = by.whiten.T @ _kept_cross(bx, by, cxy).T
    multiple_r = torch.linalg.vector_norm(projected, dim=0) / bx.scale
    return float(multiple_r.clamp(max=1.0).mean())


def neuronsim(X, Y, b=None) -> float:
    """neuronsim(X → Y): mean over neurons of X of the max absolute correlation with Y.

    ``neuronsim = (1/d_x) Σ_k max_k' |ρ(X[:, k], Y[:, k'])|`` with ``ρ`` the Pearson
    correlation.

    Parameters
    ----------
    X : ndarray or Tensor of shape (n_samples, d_x), or Moments
        Source representation, or a :class:`~lmsim.moments.Moments` (then ``Y`` and ``b``
        are block names).
    Y : ndarray or Tensor of shape (n_samples, d_y), or str
        Target representation (same rows), or the first block name.
    b : str, optional
        Second block name (moments path only).

    Returns
    -------
    float
        In ``[0, 1]``; asymmetric; invariant to translation, isotropic and per-neuron
        scaling (and sign flips), but not to rotations of either representation.

    Raises
    ------
    ValueError
        Mismatched rows, fewer than 2 samples, non-finite values, or a block whose
        neurons are all constant.
    KeyError
        Unknown block name (moments path).

    Warns
    -----
    RuntimeWarning
        When constant neurons are dropped.

    References
    ----------
    Wu et al. (2020), App. A.1; Bau et al. (2019).
    """
    sx, sy, cxy = pair_stats(X, Y, b, fn="neuronsim")
    return neuronsim_pair(prepare_neuronsim(sx), prepare_neuronsim(sy), cxy)


def mixedsim(X, Y, b=None) -> float:
    """mixedsim(X → Y): mean over neurons of X of the multiple correlation with all of Y.

    For each neuron ``x_k`` of X, the least-squares regression on Y with an intercept has
    ``R = ‖U_Yᵀ x̃_k‖ / ‖x̃_k‖`` with ``x̃_k`` the centred neuron and ``U_Y`` an
    orthonormal basis of the centred Y (R, not R²); the result averages R over X's
    neurons.

    Parameters
    ----------
    X : ndarray or Tensor of shape (n_samples, d_x), or Moments
        Regressands (one regression per neuron), or moments (then ``Y`` and ``b`` are
        block names).
    Y : ndarray or Tensor of shape (n_samples, d_y), or str
        Regressors, or the first block name.
    b : str, optional
        Second block name (moments path only).

    Returns
    -------
    float
        In ``[0, 1]``; asymmetric; invariant to translation and per-neuron scaling of X,
        and to any invertible linear map of Y.

    Raises
    ------
    ValueError
        Mismatched rows, fewer than 2 samples, non-finite values, or an all-constant block.
    KeyError
        Unknown block name (moments path).

    Warns
    -----
    RuntimeWarning
        When constant neurons are dropped.

    Notes
    -----
    With ``d_y ≥ n_samples − 1`` the regression interpolates and R = 1 for every neuron.

    References
    ----------
    Wu et al. (2020), App. A.2.
    """
    sx, sy, cxy = pair_stats(X, Y, b, fn="mixedsim")
    return mixedsim_pair(prepare_neuronsim(sx, fn="mixedsim"), prepare_mixedsim(sy), cxy)
