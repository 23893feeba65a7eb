"""What exactness buys: lmsim's float64 RegMean against the released code's float32 path.

The authors' code (``bloomberg/dataless-model-merging``, ``regmean_merge``) keeps the Grams
in float32, scales their off-diagonals (``reduce_non_diag``), sums them and multiplies by
``torch.inverse`` of the sum. lmsim solves the same system in float64 by Cholesky with a
small relative ridge for singular sums (:func:`lmsim.merge.regmean_linear`). On the page's
real Grams, :func:`precision_table` measures how far the float32 path's merged weights are
from the float64 ones, layer by layer.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Eq. 1-2, Algorithm 1.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from lmsim.merge import SingularGramWarning, regmean_linear


def inverse_float32_regmean(weights: Sequence, grams: Sequence, alpha: float) -> torch.Tensor:
    """The released code's RegMean of one layer: float32, ``torch.inverse`` of the Gram sum.

    Parameters
    ----------
    weights : sequence of K tensors or arrays of shape (d_out, d_in)
    grams : sequence of K tensors or arrays of shape (d_in, d_in)
    alpha : float
        Off-diagonal scale (their ``reduce_non_diag``): ``G̃ = α G + (1 − α) diag(G)``.

    Returns
    -------
    Tensor of shape (d_out, d_in), float32
        ``((Σ G̃_i)⁻¹ Σ G̃_i W_iᵀ)ᵀ``; NaN where ``torch.inverse`` fails (an exactly
        singular sum).
    """
    f32 = [torch.as_tensor(np.asarray(g), dtype=torch.float32) for g in grams]
    scaled = [alpha * g + (1 - alpha) * torch.diag(torch.diag(g)) for g in f32]
    total = sum(scaled)
    products = sum(
        g @ torch.as_tensor(np.asarray(w), dtype=torch.float32).T for g, w in zip(scaled, weights)
    )
    try:
        return (torch.inverse(total) @ products).T
    except RuntimeError:  # torch.linalg.LinAlgError: singular to working precision
        return torch.full_like(products.T, float("nan"))


def relative_difference(a, b) -> float:
    """``‖a − b‖_F / ‖b‖_F`` in float64 (``b`` the reference)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def precision_table(
    weights: Sequence[Mapping[str, object]],
    grams: Sequence[Mapping[str, object]],
    alphas: Sequence[float] = (0.9, 1.0),
) -> list[dict]:
    """Per layer and α: the float32 ``torch.inverse`` merge's distance from lmsim's float64 one.

    Parameters
    ----------
    weights : sequence of K dicts of layer name to (d_out, d_in) weight
        The constituents' linear weights (``nn.Linear`` layout).
    grams : sequence of K dicts of layer name to (d_in, d_in) Gram
        Their Grams; the layers present in every model's Grams are compared.
    alphas : sequence of float

    Returns
    -------
    list of dict
        One row per (α, layer): ``alpha``, ``layer``, ``relative difference`` (float32 path
        vs float64, :func:`relative_difference`) and ``condition number`` of the float64
        Gram sum at that α.
    """
    layers = [n for n in grams[0] if all(n in g for g in grams) and all(n in w for w in weights)]
    rows = []
    for alpha in alphas:
        for name in layers:
            ws = [np.asarray(w[name], dtype=np.float64) for w in weights]
            gs = [np.asarray(g[name], dtype=np.float64) for g in grams]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SingularGramWarning)
                exact = regmean_linear(ws, gs, alpha)
            total = sum(alpha * g + (1 - alpha) * np.diag(np.diag(g)) for g in gs)
            rows.append(
                {
                    "alpha": alpha,
                    "layer": name,
                    "relative difference": relative_difference(
                        inverse_float32_regmean(ws, gs, alpha).numpy(), exact
                    ),
                    "condition number": float(np.linalg.cond(total)),
                }
            )
    return rows
