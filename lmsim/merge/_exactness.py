"""What exactness buys: RegMean's float32 solves against lmsim's float64 one, on given Grams.

The released RegMean code (``bloomberg/dataless-model-merging``, ``src/model_merge/
avg_merger.py``, ``FedAvgMerger.regmean_mean_params``) and FusionBench
(``fusion_bench/method/regmean/regmean.py``, ``merging_with_regmean_weights``) merge each
layer in the weights' precision, float32, by an explicit inverse::

    W_Mᵀ = torch.inverse(Σ_i G̃_i) @ Σ_i G̃_i W_iᵀ

Its error grows with the condition number of ``Σ G̃_i``, which α controls: ``G̃ = α G +
(1 − α) diag(G)`` lifts the smallest eigenvalues, and α = 1 (no scaling, the released GLUE
configs) leaves Grams of transformer activations with condition numbers of 1e7 and more.
:func:`regmean_exactness` measures, layer by layer, how far that path, a float32 solve and
lmsim's float64 Cholesky solve (:func:`lmsim.merge.regmean_linear`) land from a float64 LU
reference, beside each layer's condition number.

References
----------
Jin et al. (2023), Eq. 2, Algorithm 1, App. A; Higham (2002), Accuracy and Stability of
Numerical Algorithms, Sec. 7 (a solve's relative error is bounded by the condition number
times the working precision) and Sec. 14 (explicit inverses).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from lmsim.merge._algebra import SingularGramWarning, _as_f64, regmean_linear
from lmsim.merge._models import linear_layers

# Condition numbers above this leave a float64 reference without a correct digit.
_COND_MAX = 1e15
COLUMNS = (
    "layer",
    "alpha",
    "d_in",
    "condition",
    "float32 inverse (released code)",
    "float32 solve",
    "lmsim float64",
)


def linear_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """``{module_name: weight (d_out, d_in)}`` of every linear layer (GPT-2's ``Conv1D``
    transposed), keyed as :func:`lmsim.merge.collect_grams` keys the Grams."""
    return {
        name: (module.weight.T if transposed else module.weight).detach()
        for name, (module, transposed) in linear_layers(model).items()
    }


def _scaled(g: torch.Tensor, alpha: float) -> torch.Tensor:
    """``G`` times the released code's weight matrix (``reduce_non_diag``): α off the diagonal,
    ``(1 − α) + α = 1`` on it, in ``g``'s dtype."""
    weight = torch.full_like(g, float(alpha))
    weight.diagonal().fill_(1.0)
    return g * weight


def _float32_paths(ws: list[torch.Tensor], gs: list[torch.Tensor], alpha: float):
    """The released code's float32 merge (explicit inverse) and a float32 solve."""
    g32 = [_scaled(g.float(), alpha) for g in gs]
    total = sum(g32)
    products = sum(g @ w.float().T for g, w in zip(g32, ws))
    inverse = (torch.inverse(total) @ products).T
    solve = torch.linalg.solve(total, products).T
    return inverse, solve


def _relative_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float(torch.linalg.norm(x.double() - ref) / torch.linalg.norm(ref))


def regmean_exactness(
    weights: Sequence[Mapping],
    grams: Sequence[Mapping],
    alphas: Sequence[float] = (0.9, 1.0),
    *,
    layers: Sequence[str] | None = None,
):
    """Relative error of float32 RegMean solves and of lmsim's float64 one, per layer and α.

    For every layer and α, with ``A = Σ_i G̃_i`` and ``B = Σ_i G̃_i W_iᵀ``:

    * *reference*: ``A⁻¹B`` by a float64 LU solve (``torch.linalg.solve``) of the float64
      sums, independent of lmsim's Cholesky path; its own relative error is about
      ``cond(A) · 1.1e-16``;
    * *float32 inverse (released code)*: the Grams rounded to float32 (the released code
      collects them in float32), scaled, multiplied and summed in float32, and
      ``torch.inverse(A) @ B``, as ``avg_merger.py`` and FusionBench do;
    * *float32 solve*: the same sums, ``torch.linalg.solve(A, B)`` in float32;
    * *lmsim float64*: :func:`lmsim.merge.regmean_linear` (float64 Cholesky).

    Each error is ``‖W − W_ref‖_F / ‖W_ref‖_F`` of the merged ``(d_out, d_in)`` weight.

    Parameters
    ----------
    weights : sequence of K dicts of str to array or tensor of shape (d_out, d_in)
        Each model's linear weights by module name (:func:`linear_weights` of the model).
    grams : sequence of K dicts of str to array or tensor of shape (d_in, d_in)
        Each model's Grams by module name (:func:`lmsim.merge.collect_grams`).
    alphas : sequence of float, default=(0.9, 1.0)
        Off-diagonal scales (the paper's text: 0.9; the released GLUE configs: 1.0).
    layers : sequence of str, optional
        Module names; default every layer of ``grams[0]`` that ``weights[0]`` has.

    Returns
    -------
    pandas.DataFrame
        One row per layer and α, columns :data:`COLUMNS`: ``condition`` is ``λ_max / λ_min``
        of ``A`` (float64 eigenvalues; inf when ``λ_min <= 0``). Where ``condition``
        exceeds 1e15 the float64 reference has no correct digit and the three errors are
        NaN (lmsim then solves with a ridge, :class:`lmsim.merge.SingularGramWarning`).

    References
    ----------
    Jin et al. (2023), Eq. 2 and Algorithm 1; the released code's
    ``FedAvgMerger.regmean_mean_params`` and ``reduce_non_diag``.
    """
    import pandas as pd

    weights, grams = list(weights), list(grams)
    if not weights or len(weights) != len(grams):
        raise ValueError(
            f"`weights` and `grams` must hold one dict per model (at least one), got "
            f"{len(weights)} and {len(grams)}"
        )
    if layers is None:
        layers = [name for name in grams[0] if name in weights[0]]
    if not layers:
        raise ValueError(
            "no layer has both a weight and a Gram: pass `weights` from linear_weights(model) "
            "and `grams` from collect_grams on the same models"
        )
    rows = []
    for name in layers:
        missing = [i for i in range(len(weights)) if name not in weights[i] or name not in grams[i]]
        if missing:
            raise KeyError(f"layer {name!r} has no weight or Gram in models {missing}")
        ws = [_as_f64(w[name], f"weight of {name!r}", "cpu") for w in weights]
        gs = [_as_f64(g[name], f"Gram of {name!r}", "cpu") for g in grams]
        for alpha in alphas:
            rows.append(_layer_row(name, ws, gs, float(alpha)))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _layer_row(name: str, ws: list[torch.Tensor], gs: list[torch.Tensor], alpha: float) -> tuple:
    scaled = [_scaled(g, alpha) for g in gs]
    total = sum(scaled)
    eig = torch.linalg.eigvalsh(total)
    lo, hi = float(eig[0]), float(eig[-1])
    cond = hi / lo if lo > 0 else float("inf")
    nan = float("nan")
    if not cond < _COND_MAX:
        return (name, alpha, total.shape[0], cond, nan, nan, nan)
    products = sum(g @ w.T for g, w in zip(scaled, ws))
    ref = torch.linalg.solve(total, products).T
    inverse, solve = _float32_paths(ws, gs, alpha)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularGramWarning)
        ours = regmean_linear(ws, gs, alpha=alpha, name=name)
    return (
        name,
        alpha,
        total.shape[0],
        cond,
        _relative_error(inverse, ref),
        _relative_error(solve, ref),
        _relative_error(ours, ref),
    )
