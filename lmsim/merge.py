"""Dataless merging of fine-tuned language models: RegMean, Fisher and simple averaging.

RegMean (Jin et al. 2023) merges linear layers by the closed-form solution of a regression
problem: the merged weight is the one whose outputs are closest, in least squares, to each
individual model's outputs on that model's own (private) inputs. Only the Gram matrices
``G_i = X_iᵀX_i`` of the layer inputs are needed, never the data:

    W_M = ((Σ_i G̃_i)⁻¹ Σ_i G̃_i W_iᵀ)ᵀ,    G̃_i = α G_i + (1 − α) diag(G_i)      (Eq. 2, App. A)

with ``W_i`` in the ``nn.Linear`` layout ``(out, in)``. Every other parameter (embeddings,
biases, LayerNorm) is simply averaged.

Layout
    * Array functions (:func:`regmean_linear`, :func:`regularize_gram`,
      :func:`simple_average`, :func:`fisher_average`) take numpy arrays or torch tensors
      and compute in float64 (torch, on the input's device). They return float64 numpy
      arrays when given numpy, float64 tensors when given torch.
    * :class:`RegMeanAccumulator` keeps only ``Σ G̃_i``, ``Σ G̃_i W_iᵀ`` and ``Σ W_i`` per
      layer, so memory does not grow with the number of models.
    * :func:`merge_models` merges any set of Hugging Face models of one architecture
      (BERT, RoBERTa, MPNet, DistilBERT, GPT-2 with its transposed ``Conv1D``, Llama-style
      decoders), one model at a time, and returns a :class:`MergeReport` that names how
      each parameter was merged.
    * :func:`collect_grams` and :func:`collect_fishers` compute the statistics a model owner
      publishes instead of data, for every task kind (texts, text pairs, word lists;
      categorical, multi-label Bernoulli, Gaussian regression and per-word likelihoods); :func:`save_grams` / :func:`load_grams` (and the Fisher
      pair) store them as safetensors, which cannot execute code when loaded.

Design decisions
    * **Grams are means by default.** :func:`collect_grams` returns ``XᵀX / n`` (``n`` the
      number of token positions), as the authors' code does (a running mean of ``xxᵀ``).
      Each model then weighs equally in the merge whatever the number of tokens its Gram
      saw (models fine-tuned on longer texts would otherwise dominate). ``reduction="sum"``
      gives the literal ``X_iᵀX_i`` of Eq. 1, the pooled least-squares solution, which
      weighs each model by its token count. :func:`regmean_linear` uses what it is given.
    * **Padding is excluded by default**; ``paper_compat_padding=True`` averages over all
      positions, padding included, as the released code does.
    * **Singular sums.** When ``Σ G̃_i`` is not numerically positive definite (Cholesky
      fails or its pivot ratio is below ``1e-12``), a :class:`SingularGramWarning` names
      the layer and the solve adds ``λ I`` to every model's Gram, ``λ = ridge ·
      mean(diag(Σ G̃_i)) / K`` (``ridge = 1e-8``, multiplied by 100 until Cholesky
      succeeds): the paper's additive regulariser (App. A, Eq. 4), which pulls the merged
      weight towards the simple average in input directions no model's data spans (never
      towards zero), and leaves spanned directions nearly untouched. Singular sums are
      common at ``alpha = 1``: a head sees one row per text (fewer rows than inputs), and
      the outputs of a LayerNorm with zero bias and uniform gain sum to zero, so the Gram
      of the layer after it has the null vector ``1``; any ``alpha < 1`` with positive
      diagonals makes the sum positive definite.
    * **Heads.** Parameters whose shapes differ between models (task heads with different
      numbers of labels) and parameters matching ``exclude`` are not merged: the merged
      model keeps the first model's values, and the report says so.
    * **Tied weights** (an LM head sharing the token embedding) are merged once, by simple
      averaging, as embeddings are; RegMean is not applied to a tied output layer because
      the same tensor is also the input embedding. The report lists the alias.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Eq. 1-2, Algorithm 1, App. A (Eq. 4, 8, 9), App. C (Table 8).
Matena & Raffel (2022). Merging Models with Fisher-Weighted Averaging. NeurIPS.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

__all__ = [
    "SingularGramWarning",
    "regularize_gram",
    "regmean_linear",
    "simple_average",
    "fisher_average",
    "RegMeanAccumulator",
    "MergeReport",
    "linear_layers",
    "merge_models",
    "grams_from_moments",
    "collect_grams",
    "collect_fishers",
    "save_grams",
    "load_grams",
    "save_fishers",
    "load_fishers",
    "load_metadata",
    "ensemble_logits",
]

METHODS = ("regmean", "simple", "fisher")
FISHER_LABELS = ("sample", "empirical", "expected")
# Pivot ratio (min/max of Cholesky pivots, i.e. diag(L)²) under which a float64 Gram sum
# is treated as singular: its solve would lose more than ~12 of float64's 16 digits.
_PIVOT_RATIO_MIN = 1e-12
_RIDGE_MAX = 1e-2
# Config fields that legitimately differ between fine-tuned copies of one architecture.
_CONFIG_IGNORED = {
    "num_labels",
    "id2label",
    "label2id",
    "_name_or_path",
    "name_or_path",
    "architectures",
    "problem_type",
    "finetuning_task",
    "torch_dtype",
    "dtype",
    "transformers_version",
    "_commit_hash",
    "_attn_implementation_autoset",
    "_attn_implementation",
}


class SingularGramWarning(UserWarning):
    """A layer's Gram sum was singular; it was solved with a small documented ridge."""


# ====================================================================== helpers
def _as_f64(x, what: str, device=None) -> torch.Tensor:
    """A float64 torch tensor (numpy converted without copy where possible), finite."""
    if isinstance(x, np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(x))
    elif isinstance(x, torch.Tensor):
        t = x.detach()
    else:
        try:
            t = torch.as_tensor(np.asarray(x))
        except (TypeError, ValueError) as err:
            raise TypeError(f"{what} must be a numpy array or torch tensor, got {type(x)}") from err
    if not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64)):
        raise TypeError(f"{what} must hold real numbers, got dtype {t.dtype}")
    t = t.to(device=device if device is not None else t.device, dtype=torch.float64)
    # One reduction instead of a boolean copy: a NaN or Inf anywhere makes the sum
    # non-finite; the exact check then rules out an overflowing sum of finite values.
    if not torch.isfinite(t.sum()) and not torch.isfinite(t).all():
        raise ValueError(
            f"{what} contains NaN or Inf; recompute it (in float32 or bfloat16, not float16) "
            "or leave this layer out of the merge"
        )
    return t


def _out_like(t: torch.Tensor, numpy_out: bool):
    return t.cpu().numpy() if numpy_out else t


def _all_numpy(items) -> bool:
    return all(isinstance(x, np.ndarray) for x in items)


def _label(name: str | None) -> str:
    return f"layer {name!r}" if name else "the layer"


def regularize_gram(gram, alpha: float = 1.0, diag_constant: float = 0.0, *, name=None):
    """RegMean's regularised Gram ``G̃ = α G + (1 − α) diag(G) + γ I``.

    Parameters
    ----------
    gram : array or tensor of shape (d_in, d_in)
        ``G = XᵀX`` (or its mean ``XᵀX / n``) of a linear layer's inputs.
    alpha : float in [0, 1], default=1.0
        Scale of the off-diagonal entries (relative scaling; the paper uses 0.9, 0.1 for
        T5). ``alpha = 0`` keeps only the diagonal.
    diag_constant : float >= 0, default=0.0
        ``γ``, a constant added to the diagonal: the paper's alternative regulariser
        (App. C, Table 8, "adding a constant to diagonals"). It depends on the scale of the
        Gram, so it means different things for sums and means.
    name : str, optional
        Layer name, quoted in error messages.

    Returns
    -------
    ndarray or Tensor of shape (d_in, d_in), float64

    References
    ----------
    Jin et al. (2023), Sec. 3.3, Algorithm 1 (relative scaling); App. A, Eq. 4, 8-9; App. C.
    """
    numpy_out = isinstance(gram, np.ndarray)
    g = _check_gram(_as_f64(gram, f"Gram of {_label(name)}"), None, name)
    return _out_like(_regularize(g, alpha, diag_constant), numpy_out)


def _check_alpha(alpha: float, diag_constant: float) -> None:
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"`alpha` must be in [0, 1] (the paper uses 0.9), got {alpha!r}")
    if not float(diag_constant) >= 0.0:
        raise ValueError(f"`diag_constant` must be >= 0, got {diag_constant!r}")


def _regularize(
    g: torch.Tensor, alpha: float, diag_constant: float, inplace: bool = False
) -> torch.Tensor:
    _check_alpha(alpha, diag_constant)
    if alpha == 1.0 and diag_constant == 0.0:
        return g
    diag = torch.diagonal(g).clone()
    out = g.mul_(float(alpha)) if inplace else g * float(alpha)
    idx = torch.arange(g.shape[0], device=g.device)
    out[idx, idx] = diag + float(diag_constant)
    return out


def _product_dtype(name) -> torch.dtype:
    options = {"float64": torch.float64, "float32": torch.float32}
    key = str(name).removeprefix("torch.")
    if key not in options:
        raise ValueError(
            f"`product_dtype` must be 'float64' (exact) or 'float32' (faster G̃ Wᵀ products, "
            f"float32-accurate merged weights), got {name!r}"
        )
    return options[key]


def _check_gram(g: torch.Tensor, d_in: int | None, name: str | None) -> torch.Tensor:
    if g.ndim != 2 or g.shape[0] != g.shape[1]:
        raise ValueError(
            f"the Gram of {_label(name)} must be a square (d_in, d_in) matrix, got shape "
            f"{tuple(g.shape)}"
        )
    if d_in is not None and g.shape[0] != d_in:
        raise ValueError(
            f"the Gram of {_label(name)} has size {g.shape[0]} but the layer has {d_in} inputs; "
            "the Grams belong to another model or layer: recompute them with collect_grams "
            "on this model"
        )
    return g


def _solve_spd(
    a: torch.Tensor,
    b: torch.Tensor,
    w_sum: torch.Tensor,
    n_models: int,
    name: str | None,
    ridge: float,
) -> torch.Tensor:
    """Solve ``a x = b`` for SPD ``a`` by Cholesky; regularise (and warn) when singular.

    ``w_sum`` is ``Σ W_iᵀ`` (d_in, d_out): the ridge ``λ I`` is added to every model's
    Gram, i.e. ``λ K I`` to ``a`` and ``λ Σ W_iᵀ`` to ``b`` (Eq. 4 of App. A).
    """
    chol, info = torch.linalg.cholesky_ex(a)
    if int(info) == 0 and _pivot_ratio(chol) >= _PIVOT_RATIO_MIN:
        return torch.cholesky_solve(b, chol)
    scale = float(torch.diagonal(a).mean()) / n_models
    if not scale > 0.0:
        # All Grams are zero: no data constrains the layer; any λ gives the simple average.
        scale = 1.0
    r = float(ridge)
    eye = torch.eye(a.shape[0], dtype=a.dtype, device=a.device)
    while True:
        lam = r * scale
        a_reg = a + (lam * n_models) * eye
        chol, info = torch.linalg.cholesky_ex(a_reg)
        if int(info) == 0 and _pivot_ratio(chol) >= _PIVOT_RATIO_MIN:
            break
        if r >= _RIDGE_MAX:
            raise ValueError(
                f"the Gram sum of {_label(name)} is not positive semi-definite even with a "
                f"ridge of {r:g} x its mean diagonal; check that the Grams are XᵀX matrices"
            )
        r *= 100.0
    warnings.warn(
        f"the Gram sum of {_label(name)} is singular (inputs span fewer directions than its "
        f"{a.shape[0]} features); solved with λ = {r:g} x mean(diag) added to every model's "
        "Gram, which pulls unconstrained directions to the simple average. Use alpha < 1 or "
        "more Gram data to avoid this.",
        SingularGramWarning,
        stacklevel=3,
    )
    return torch.cholesky_solve(b + lam * w_sum.to(b.dtype), chol)


def _pivot_ratio(chol: torch.Tensor) -> float:
    piv = torch.diagonal(chol) ** 2
    top = float(piv.max())
    return float(piv.min()) / top if top > 0 else 0.0


# ====================================================================== array level
class RegMeanAccumulator:
    """Streaming RegMean: add one model's layers at a time, solve at the end.

    Per layer it keeps ``Σ_i G̃_i`` (d_in, d_in) and ``Σ_i G̃_i W_iᵀ`` (d_in, d_out) in
    float64, and ``Σ_i W_iᵀ`` (d_in, d_out, for the singular fallback) in the weights'
    precision: memory is about that of one model's Grams and weights in float64,
    whatever the number of models.

    Parameters
    ----------
    alpha : float in [0, 1], default=1.0
        Off-diagonal scale of :func:`regularize_gram` (the paper's default is 0.9).
    diag_constant : float, default=0.0
        Constant added to each Gram's diagonal (App. C, Table 8).
    ridge : float, default=1e-8
        Relative ridge of the singular fallback (see the module notes).
    device : str or torch.device, default="cpu"
        Where the sums live and the solves run.
    product_dtype : {"float64", "float32"}, default="float64"
        Precision of each ``G̃_i W_iᵀ`` product, the bulk of the work (``2 d_in² d_out``
        FLOPs per model and layer against ``d_in³ / 3`` for the one Cholesky). ``"float32"``
        runs it at float32 GEMM speed (about 2x on CPUs) and adds the result into the
        float64 sum; the sums of Grams and the solve stay float64. The product's rounding
        error (relative ~1e-7 of ``|G̃| |W|``) is amplified by the condition number of
        ``Σ G̃_i`` in the solve, so use it only where a merged weight accurate to float32
        is enough; ``benchmarks/bench_merge.py`` measures both against a float64 reference.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> acc = RegMeanAccumulator(alpha=0.9)
    >>> for _ in range(3):
    ...     X = rng.normal(size=(50, 4))
    ...     acc.add({"fc": rng.normal(size=(2, 4))}, {"fc": X.T @ X})
    >>> tuple(acc.merge()["fc"].shape)
    (2, 4)

    References
    ----------
    Jin et al. (2023), Eq. 2 and Algorithm 1.
    """

    def __init__(
        self,
        alpha: float = 1.0,
        diag_constant: float = 0.0,
        ridge: float = 1e-8,
        device: str | torch.device = "cpu",
        product_dtype: str = "float64",
    ):
        _check_alpha(alpha, diag_constant)
        if not float(ridge) > 0.0:
            raise ValueError(f"`ridge` must be > 0, got {ridge!r}")
        self.product_dtype = _product_dtype(product_dtype)
        self.alpha = float(alpha)
        self.diag_constant = float(diag_constant)
        self.ridge = float(ridge)
        self.device = torch.device(device)
        self.n_models = 0
        self._gram_sum: dict[str, torch.Tensor] = {}
        self._gw_sum: dict[str, torch.Tensor] = {}
        self._w_sum: dict[str, torch.Tensor] = {}
        self._shapes: dict[str, tuple[int, int]] = {}

    @property
    def names(self) -> list[str]:
        """Layer names, in the order of the first model."""
        return list(self._shapes)

    def add(self, weights: Mapping[str, object], grams: Mapping[str, object]) -> None:
        """Add one model: ``weights[name]`` of shape (out, in), ``grams[name]`` (in, in).

        The first call fixes the layer names and shapes; every later model must match.
        """
        if not weights:
            raise ValueError("`weights` is empty: pass at least one layer")
        if self.n_models:
            missing = [k for k in self._shapes if k not in weights]
            extra = [k for k in weights if k not in self._shapes]
            if missing or extra:
                raise KeyError(
                    f"model {self.n_models} has different linear layers than model 0: "
                    f"missing {missing[:5]}, unexpected {extra[:5]}; merge only models of one "
                    "architecture"
                )
        for name in weights:
            if name not in grams:
                raise KeyError(
                    f"no Gram for layer {name!r} of model {self.n_models}; collect Grams for "
                    "every linear layer (collect_grams) or leave the layer out of the merge"
                )
        for name, weight in weights.items():
            self.add_layer(name, weight, grams[name])
        self.n_models += 1

    def add_layer(self, name: str, weight, gram, transposed: bool = False) -> None:
        """Add one layer of the current model (use :meth:`add` unless streaming layers).

        ``transposed=True`` takes ``weight`` in the ``(in, out)`` layout of GPT-2's Conv1D.
        Call :meth:`next_model` after the last layer of a model added this way.
        """
        w = _as_f64(weight, f"weight of layer {name!r}", self.device)
        if w.ndim != 2:
            raise ValueError(
                f"weight of layer {name!r} must be 2-D (out, in), got {tuple(w.shape)}"
            )
        wt = w if transposed else w.T  # (in, out)
        shape = (int(wt.shape[1]), int(wt.shape[0]))
        g = _check_gram(_as_f64(gram, f"Gram of layer {name!r}", self.device), shape[1], name)
        # A fresh float64 copy (the usual float32 input) is regularised in place.
        owned = not (isinstance(gram, torch.Tensor) and gram.dtype == torch.float64)
        owned = owned and not isinstance(gram, np.ndarray)
        g = _regularize(g, self.alpha, self.diag_constant, inplace=owned)
        # Σ W_iᵀ only serves the singular fallback (null directions get the simple average,
        # rounded to the weights' precision anyway): kept in the weights' own precision.
        w_dtype = weight.dtype if isinstance(weight, torch.Tensor) else torch.float64
        w_dtype = w_dtype if w_dtype.is_floating_point else torch.float64
        if name not in self._shapes:
            if self.n_models:
                raise KeyError(
                    f"layer {name!r} is not in model 0; merge only models of one architecture"
                )
            self._shapes[name] = shape
            self._gram_sum[name] = g if owned and g is not gram else g.clone()
            self._gw_sum[name] = self._product(g, wt).to(torch.float64)
            self._w_sum[name] = wt.to(w_dtype, copy=True)
            return
        if self._shapes[name] != shape:
            raise ValueError(
                f"layer {name!r} has shape {shape} (out, in) in model {self.n_models} but "
                f"{self._shapes[name]} in model 0; merge only models of one architecture"
            )
        self._gram_sum[name] += g
        if self.product_dtype == torch.float64:
            self._gw_sum[name].addmm_(g, wt)
        else:  # the float32 product is added into the float64 sum, no float64 temporary
            self._gw_sum[name].add_(self._product(g, wt))
        self._w_sum[name] += wt.to(self._w_sum[name].dtype)

    def _product(self, g: torch.Tensor, wt: torch.Tensor) -> torch.Tensor:
        """``G̃ Wᵀ`` (d_in, d_out), computed and returned in ``product_dtype``."""
        pd = self.product_dtype
        return g @ wt if pd == torch.float64 else torch.mm(g.to(pd), wt.to(pd))

    def next_model(self) -> None:
        """Close a model added layer by layer with :meth:`add_layer`."""
        self.n_models += 1

    def solve(self, name: str, transposed: bool = False) -> torch.Tensor:
        """Merged float64 weight of one layer, (out, in) (or (in, out) if ``transposed``)."""
        if name not in self._shapes:
            raise KeyError(f"unknown layer {name!r}; accumulated layers: {self.names[:8]}")
        if not self.n_models:
            raise ValueError("no model added yet: call add() first")
        wt = _solve_spd(
            self._gram_sum[name],
            self._gw_sum[name],
            self._w_sum[name],
            self.n_models,
            name,
            self.ridge,
        )
        return wt if transposed else wt.T.contiguous()

    def merge(self) -> dict[str, torch.Tensor]:
        """Merged float64 weights ``{name: (out, in)}`` of every layer."""
        return {name: self.solve(name) for name in self._shapes}

    def release(self, name: str) -> None:
        """Free one layer's sums (after :meth:`solve`), to lower peak memory."""
        for store in (self._gram_sum, self._gw_sum, self._w_sum):
            store.pop(name, None)


def regmean_linear(
    weights: Sequence,
    grams: Sequence,
    alpha: float = 1.0,
    *,
    diag_constant: float = 0.0,
    ridge: float = 1e-8,
    name: str | None = None,
    product_dtype: str = "float64",
):
    """RegMean merge of one linear layer: ``W_M = ((Σ G̃_i)⁻¹ Σ G̃_i W_iᵀ)ᵀ``.

    Parameters
    ----------
    weights : sequence of K arrays or tensors of shape (d_out, d_in)
        The layer's weight in each model (``nn.Linear`` layout).
    grams : sequence of K arrays or tensors of shape (d_in, d_in)
        ``G_i = X_iᵀX_i`` of the layer's inputs in each model (sums or means, see the
        module notes: means weigh models equally, sums by their number of rows).
    alpha : float in [0, 1], default=1.0
        Off-diagonal scale, ``G̃_i = α G_i + (1 − α) diag(G_i)`` (paper: 0.9).
    diag_constant : float, default=0.0
        ``γ`` added to every ``G̃_i``'s diagonal (App. C, Table 8).
    ridge : float, default=1e-8
        Relative ridge for singular sums (:class:`SingularGramWarning`).
    name : str, optional
        Layer name, quoted in warnings and errors.
    product_dtype : {"float64", "float32"}, default="float64"
        Precision of the ``G̃_i W_iᵀ`` products (:class:`RegMeanAccumulator`).

    Returns
    -------
    ndarray or Tensor of shape (d_out, d_in), float64
        Numpy when all inputs are numpy, else a tensor on the first weight's device.

    Notes
    -----
    The linear system is solved in float64 by Cholesky, never by an explicit inverse.
    With identical Grams the result is the simple average; with ``alpha = 0`` column
    ``j`` is the average of the models' columns ``j`` weighted by ``diag(G_i)[j]``.

    References
    ----------
    Jin et al. (2023), Eq. 1-2 (linear models), Algorithm 1; App. A, Eq. 4.
    """
    weights, grams = list(weights), list(grams)
    if not weights:
        raise ValueError("`weights` is empty: pass one (d_out, d_in) weight per model")
    if len(weights) != len(grams):
        raise ValueError(
            f"`weights` and `grams` must have one entry per model, got {len(weights)} and "
            f"{len(grams)}"
        )
    numpy_out = _all_numpy(weights) and _all_numpy(grams)
    device = weights[0].device if isinstance(weights[0], torch.Tensor) else "cpu"
    acc = RegMeanAccumulator(
        alpha, diag_constant, ridge, device=device, product_dtype=product_dtype
    )
    key = name or "layer"
    for w, g in zip(weights, grams):
        acc.add_layer(key, w, g)
        acc.next_model()
    return _out_like(acc.solve(key), numpy_out)


def simple_average(params: Sequence):
    """Element-wise mean of K same-shaped parameters, in float64.

    Parameters
    ----------
    params : sequence of K arrays or tensors of one shape

    Returns
    -------
    ndarray or Tensor of that shape, float64

    References
    ----------
    Jin et al. (2023), Sec. 2 ("Simple averaging").
    """
    params = list(params)
    if not params:
        raise ValueError("`params` is empty: pass one array per model")
    ts = [_as_f64(p, f"params[{i}]") for i, p in enumerate(params)]
    _same_shapes(ts, "params")
    total = ts[0].clone()
    for t in ts[1:]:
        total += t.to(total.device)
    return _out_like(total / len(ts), _all_numpy(params))


def fisher_average(params: Sequence, fishers: Sequence, eps: float = 1e-6):
    """Fisher-weighted average ``Σ_i F_i θ_i / Σ_i F_i`` with a floor on ``F_i``.

    Parameters
    ----------
    params : sequence of K arrays or tensors of one shape
    fishers : sequence of K arrays or tensors of that shape
        Diagonal Fisher information of each model for these parameters (>= 0).
    eps : float, default=1e-6
        Floor: ``F_i ← max(F_i, eps)`` (Matena & Raffel's ``fisher_floor``), so entries
        where every Fisher vanishes get the simple average instead of 0/0.

    Returns
    -------
    ndarray or Tensor of that shape, float64

    References
    ----------
    Matena & Raffel (2022), Eq. 3; Jin et al. (2023), Sec. 2 ("Fisher averaging").
    """
    params, fishers = list(params), list(fishers)
    if not params:
        raise ValueError("`params` is empty: pass one array per model")
    if len(params) != len(fishers):
        raise ValueError(
            f"`params` and `fishers` must have one entry per model, got {len(params)} and "
            f"{len(fishers)}"
        )
    if not float(eps) > 0.0:
        raise ValueError(f"`eps` must be > 0 (it keeps Σ F_i away from 0), got {eps!r}")
    ps = [_as_f64(p, f"params[{i}]") for i, p in enumerate(params)]
    fs = [_as_f64(f, f"fishers[{i}]") for i, f in enumerate(fishers)]
    _same_shapes(ps + fs, "params and fishers")
    if any(bool((f < 0).any()) for f in fs):
        raise ValueError("`fishers` must be >= 0 (diagonal Fisher = mean squared gradient)")
    num = torch.zeros_like(ps[0])
    den = torch.zeros_like(ps[0])
    for p, f in zip(ps, fs):
        f = f.clamp_min(float(eps))
        num += f * p
        den += f
    return _out_like(num / den, _all_numpy(params) and _all_numpy(fishers))


def _same_shapes(ts: Sequence[torch.Tensor], what: str) -> None:
    shapes = {tuple(t.shape) for t in ts}
    if len(shapes) != 1:
        raise ValueError(f"{what} must all have one shape, got {sorted(shapes)}")


# ====================================================================== model level
def linear_layers(model: nn.Module) -> dict[str, tuple[nn.Module, bool]]:
    """Linear layers of a model: ``{module_name: (module, transposed)}``.

    ``transposed`` is True for GPT-2's ``transformers.pytorch_utils.Conv1D``, whose weight
    is stored ``(in, out)``; ``nn.Linear`` stores ``(out, in)``.
    """
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - transformers is a dependency
        Conv1D = ()
    out = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            out[name] = (module, False)
        elif Conv1D and isinstance(module, Conv1D):
            out[name] = (module, True)
    return out


@dataclass
class MergeReport:
    """How each parameter of a merged model was obtained.

    Attributes
    ----------
    method : str
        ``"regmean"``, ``"simple"`` or ``"fisher"``: the method asked for.
    n_models : int
    entries : dict of str to (how, note)
        Every name of ``model.named_parameters(remove_duplicate=False)``. ``how`` is one of
        ``"regmean"``, ``"simple"``, ``"fisher"``, ``"kept"`` (first model's value, not
        merged) or ``"tied"`` (an alias of another parameter, merged once under that name);
        ``note`` says why.
    """

    method: str
    n_models: int = 0
    entries: dict[str, tuple[str, str]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Number of parameters per ``how``."""
        out: dict[str, int] = {}
        for how, _ in self.entries.values():
            out[how] = out.get(how, 0) + 1
        return out

    def names(self, how: str) -> list[str]:
        """Parameter names merged by ``how``."""
        return [k for k, (h, _) in self.entries.items() if h == how]

    def to_frame(self):
        """A ``pandas.DataFrame`` with columns ``parameter``, ``how``, ``note``."""
        import pandas as pd

        return pd.DataFrame(
            [(k, h, n) for k, (h, n) in self.entries.items()],
            columns=["parameter", "how", "note"],
        )

    def check_complete(self, model: nn.Module) -> None:
        """Raise ``ValueError`` unless every parameter name of ``model`` is accounted for."""
        names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
        missing = [n for n in names if n not in self.entries]
        extra = [n for n in self.entries if n not in set(names)]
        if missing or extra:
            raise ValueError(f"report does not match the model: missing {missing}, extra {extra}")

    def __str__(self) -> str:
        counts = ", ".join(f"{v} {k}" for k, v in sorted(self.counts().items()))
        lines = [f"{self.method} merge of {self.n_models} models: {counts}"]
        for name, (how, note) in self.entries.items():
            if how in ("kept", "tied") or note:
                lines.append(f"  {name}: {how}" + (f" ({note})" if note else ""))
        return "\n".join(lines)


def _resolve(item):
    """An item of a lazily given sequence: the value itself, or a zero-arg callable's result."""
    if isinstance(item, nn.Module):
        return item
    if callable(item):
        return item()
    return item


def _param_aliases(model: nn.Module) -> dict[str, str]:
    """``{alias_name: canonical_name}`` for parameters shared under several names."""
    canonical: dict[int, str] = {}
    aliases = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in canonical:
            aliases[name] = canonical[id(p)]
        else:
            canonical[id(p)] = name
    return aliases


def _config_diff(a: nn.Module, b: nn.Module) -> list[str]:
    ca, cb = getattr(a, "config", None), getattr(b, "config", None)
    if ca is None or cb is None or not hasattr(ca, "to_dict"):
        return []
    da, db = ca.to_dict(), cb.to_dict()
    keys = (set(da) | set(db)) - _CONFIG_IGNORED
    return sorted(k for k in keys if da.get(k) != db.get(k))


def _load_stats(item, what: str, i: int, loader: Callable) -> Mapping:
    item = _resolve(item)
    if isinstance(item, (str, Path)):
        return loader(item)
    if isinstance(item, Mapping):
        return item
    from lmsim.moments import Moments

    if isinstance(item, Moments):
        raise TypeError(
            f"`{what}[{i}]` is one Moments; pass a dict of Grams: grams_from_moments(moms)"
        )
    raise TypeError(
        f"`{what}[{i}]` must be a dict of tensors, a saved file path or a zero-arg callable "
        f"returning one, got {type(item).__name__}"
    )


def merge_models(
    models: Iterable,
    grams: Iterable | None = None,
    fishers: Iterable | None = None,
    method: str = "regmean",
    alpha: float = 0.9,
    *,
    diag_constant: float = 0.0,
    fisher_eps: float = 1e-6,
    exclude: str | Sequence[str] | None = None,
    missing_gram: str = "raise",
    ridge: float = 1e-8,
    device: str | torch.device = "cpu",
    product_dtype: str = "float64",
) -> tuple[nn.Module, MergeReport]:
    """Merge models of one architecture by RegMean, Fisher or simple averaging.

    Models are visited one at a time: with ``models`` (and ``grams``/``fishers``) given
    as zero-arg callables that load them, memory is one model plus the float64 sums,
    whatever the number of models.

    Parameters
    ----------
    models : iterable of nn.Module or zero-arg callables returning one
        Hugging Face models of one class and config (labels aside), e.g.
        ``[functools.partial(AutoModelForSequenceClassification.from_pretrained, p)
        for p in paths]``. They are not modified.
    grams : iterable of dict, path or callable, optional
        Per model, ``{linear_module_name: (d_in, d_in) Gram}`` as returned by
        :func:`collect_grams`, a file written by :func:`save_grams`, or a callable returning
        either (a path is read lazily, one layer's Gram at a time). Required for
        ``method="regmean"``.
    fishers : iterable of dict, path or callable, optional
        Per model, ``{parameter_name: diagonal Fisher}`` (:func:`collect_fishers`).
        Required for ``method="fisher"``.
    method : {"regmean", "simple", "fisher"}, default="regmean"
    alpha : float in [0, 1], default=0.9
        RegMean's off-diagonal scale (the paper's default, 0.1 for T5).
    diag_constant : float, default=0.0
        RegMean's additive diagonal regulariser (App. C, Table 8).
    fisher_eps : float, default=1e-6
        Floor of the Fisher values (:func:`fisher_average`).
    exclude : regex or list of regexes, optional
        Parameter names (``re.search``) not to merge, e.g. ``r"^classifier\\."`` for task
        heads of different tasks; the merged model keeps the first model's values.
    missing_gram : {"raise", "simple"}, default="raise"
        A linear layer without a Gram raises ``KeyError``, or is simply averaged.
    ridge : float, default=1e-8
        Relative ridge for singular Gram sums (:class:`SingularGramWarning`).
    device : str or torch.device, default="cpu"
        Where the float64 sums live and the solves run.
    product_dtype : {"float64", "float32"}, default="float64"
        Precision of RegMean's ``G̃_i W_iᵀ`` products, most of a merge's FLOPs; the sums
        and solves stay float64 (see :class:`RegMeanAccumulator` for the accuracy cost).

    Returns
    -------
    merged : nn.Module
        The first model with the merged parameters (its dtype kept): a deep copy when
        ``models[0]`` is a module, the loaded model itself when it is a callable (so a
        callable must return a fresh model). Buffers (e.g. position ids) are the first
        model's.
    report : MergeReport
        How each parameter was merged; every parameter name is listed.

    Notes
    -----
    * RegMean applies to every ``nn.Linear`` and GPT-2 ``Conv1D`` weight; biases,
      embeddings and norms are simply averaged (the paper's recipe).
    * Parameters whose shapes differ between models (task heads with different label
      counts) are kept from the first model and reported as ``"kept"``.
    * A weight tied to another parameter (an LM head tied to the embeddings) is simply
      averaged once and its alias reported as ``"tied"``.

    References
    ----------
    Jin et al. (2023), Algorithm 1; Matena & Raffel (2022).
    """
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {list(METHODS)}, got {method!r}")
    if missing_gram not in ("raise", "simple"):
        raise ValueError(f"`missing_gram` must be 'raise' or 'simple', got {missing_gram!r}")
    _check_alpha(alpha, diag_constant)
    if method == "regmean" and grams is None:
        raise ValueError(
            "method='regmean' needs `grams` (one dict per model, from collect_grams); "
            "or use method='simple'"
        )
    if method == "fisher" and fishers is None:
        raise ValueError(
            "method='fisher' needs `fishers` (one dict per model, from collect_fishers); "
            "or use method='simple'"
        )
    patterns = [exclude] if isinstance(exclude, str) else list(exclude or [])
    try:
        regexes = [re.compile(p) for p in patterns]
    except re.error as err:
        raise ValueError(f"`exclude` has an invalid regex: {err}") from err
    device = torch.device(device)

    gram_iter = iter(grams) if method == "regmean" else None
    fisher_iter = iter(fishers) if method == "fisher" else None
    acc = RegMeanAccumulator(
        alpha, diag_constant, ridge, device=device, product_dtype=product_dtype
    )
    sums: dict[str, torch.Tensor] = {}  # Σ θ_i (simple) or Σ F_i θ_i (fisher)
    fisher_sums: dict[str, torch.Tensor] = {}
    report = MergeReport(method=method)
    first = None
    plan: dict[str, tuple[str, str]] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    regmean_layers: dict[str, tuple[str, bool]] = {}  # param name -> (module name, transposed)
    n = 0
    for i, item in enumerate(models):
        model = _resolve(item)
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"`models[{i}]` must be an nn.Module or a zero-arg callable returning one, "
                f"got {type(model).__name__}"
            )
        params = dict(model.named_parameters())  # canonical names only (ties removed)
        if first is None:
            # A model the merge loaded itself (from a callable) becomes the output; a
            # caller's model is copied, never modified.
            first = copy.deepcopy(model) if model is item else model
            plan, regmean_layers = _plan(model, method, regexes)
            shapes = {k: tuple(p.shape) for k, p in params.items()}
        else:
            _check_compatible(first, model, i, shapes, params)
        gmap = fmap = None
        if gram_iter is not None:
            gmap = _next_stats(gram_iter, "grams", i, functools.partial(load_grams, lazy=True))
            _check_gram_names(gmap, model, i)
        if fisher_iter is not None:
            fmap = _next_stats(
                fisher_iter, "fishers", i, functools.partial(load_fishers, lazy=True)
            )
        for pname, p in params.items():
            how, _ = plan[pname]
            if how == "kept":
                continue
            if shapes[pname] != tuple(p.shape):
                plan[pname] = (
                    "kept",
                    f"shape {tuple(p.shape)} in model {i} vs {shapes[pname]} in model 0",
                )
                sums.pop(pname, None)
                fisher_sums.pop(pname, None)
                acc.release(pname)
                continue
            if how == "regmean":
                module_name, transposed = regmean_layers[pname]
                if module_name not in gmap:
                    if missing_gram == "raise":
                        raise KeyError(
                            f"no Gram for linear layer {module_name!r} of model {i}; collect "
                            "Grams with collect_grams on this model, exclude the layer with "
                            "`exclude`, or pass missing_gram='simple'"
                        )
                    if i:
                        raise KeyError(
                            f"no Gram for linear layer {module_name!r} of model {i}, but model "
                            "0 had one; give every model Grams for the same layers"
                        )
                    plan[pname] = ("simple", "no Gram for this layer (missing_gram='simple')")
                    how = "simple"
                else:
                    acc.add_layer(pname, p, gmap[module_name], transposed=transposed)
                    continue
            value = _as_f64(p, f"parameter {pname!r} of model {i}", device)
            if how == "simple":
                if pname in sums:
                    sums[pname] += value
                else:
                    # A float64 parameter converts to itself: copy before summing in place.
                    sums[pname] = value.clone() if value.data_ptr() == p.data_ptr() else value
            else:  # fisher
                if pname not in fmap:
                    raise KeyError(
                        f"no Fisher for parameter {pname!r} of model {i}; compute Fishers with "
                        "collect_fishers on this model or exclude the parameter with `exclude`"
                    )
                f = _as_f64(fmap[pname], f"Fisher of {pname!r} of model {i}", device)
                if f.shape != value.shape:
                    raise ValueError(
                        f"Fisher of {pname!r} of model {i} has shape {tuple(f.shape)}, the "
                        f"parameter {tuple(value.shape)}; recompute it on this model"
                    )
                if bool((f < 0).any()):
                    raise ValueError(f"Fisher of {pname!r} of model {i} has negative entries")
                f = f.clamp_min(float(fisher_eps))
                if pname in sums:
                    sums[pname] += f * value
                    fisher_sums[pname] += f
                else:
                    sums[pname] = f * value
                    fisher_sums[pname] = f
        acc.next_model()
        n += 1
        del model, params, gmap, fmap
    if first is None:
        raise ValueError("`models` is empty: pass at least one model to merge")
    for what, it in (("grams", gram_iter), ("fishers", fisher_iter)):
        if it is not None and next(it, None) is not None:
            raise ValueError(f"`{what}` has more entries than `models` ({n}); pass one per model")
    report.n_models = n
    merged_params = dict(first.named_parameters())
    with torch.no_grad():
        for pname, p in merged_params.items():
            how, _ = plan[pname]
            if how == "kept":
                continue
            if how == "regmean":
                value = acc.solve(pname, transposed=regmean_layers[pname][1])
                acc.release(pname)
            elif how == "simple":
                value = sums.pop(pname) / n
            else:
                value = sums.pop(pname) / fisher_sums.pop(pname)
            p.copy_(value.to(device=p.device, dtype=p.dtype))
    aliases = _param_aliases(first)
    for name, _ in first.named_parameters(remove_duplicate=False):
        if name in aliases:
            target = aliases[name]
            report.entries[name] = ("tied", f"same tensor as {target!r} ({plan[target][0]})")
        else:
            report.entries[name] = plan[name]
    return first, report


def _plan(model: nn.Module, method: str, regexes) -> tuple[dict, dict]:
    """Per canonical parameter name: (how, note); and RegMean's ``{param: (module, transposed)}``."""
    aliases = _param_aliases(model)  # alias -> canonical name
    shared: dict[str, list[str]] = {}
    for alias, target in aliases.items():
        shared.setdefault(target, []).append(alias)
    linear_weight = {}
    for mname, (_, transposed) in linear_layers(model).items():
        pname = f"{mname}.weight" if mname else "weight"
        linear_weight[aliases.get(pname, pname)] = (mname, transposed)
    plan, regmean_layers = {}, {}
    for pname, _ in model.named_parameters():
        if any(r.search(pname) for r in regexes):
            plan[pname] = ("kept", "excluded by `exclude`")
        elif method == "fisher":
            plan[pname] = ("fisher", "")
        elif method == "regmean" and pname in linear_weight:
            if pname in shared:
                # A tied LM head is also the input embedding: RegMean's regression for the
                # output layer would silently change the embedding lookup too.
                plan[pname] = ("simple", f"tied with {shared[pname]}; RegMean not applied")
            else:
                plan[pname] = ("regmean", "")
                regmean_layers[pname] = linear_weight[pname]
        else:
            plan[pname] = ("simple", "")
    return plan, regmean_layers


def _check_compatible(first: nn.Module, model: nn.Module, i: int, shapes, params) -> None:
    if type(model) is not type(first):
        raise ValueError(
            f"`models[{i}]` is a {type(model).__name__} but models[0] a "
            f"{type(first).__name__}; merge only models of one architecture"
        )
    diff = _config_diff(first, model)
    if diff:
        raise ValueError(
            f"`models[{i}]` has a different config from models[0] in {diff[:8]}; merge only "
            "fine-tuned copies of one architecture"
        )
    missing = [k for k in shapes if k not in params]
    extra = [k for k in params if k not in shapes]
    if missing or extra:
        raise ValueError(
            f"`models[{i}]` has different parameter names from models[0]: missing "
            f"{missing[:5]}, unexpected {extra[:5]}; merge only models of one architecture"
        )


def _next_stats(it, what: str, i: int, loader) -> Mapping:
    try:
        item = next(it)
    except StopIteration:
        raise ValueError(
            f"`{what}` has fewer entries than `models` (none for model {i}); pass one per model"
        ) from None
    return _load_stats(item, what, i, loader)


def _check_gram_names(gmap: Mapping, model: nn.Module, i: int) -> None:
    modules = set(linear_layers(model))
    unknown = [k for k in gmap if k not in modules]
    if unknown:
        raise KeyError(
            f"`grams[{i}]` has Grams for {unknown[:5]}, which are not linear layers of "
            f"models[{i}] ({type(model).__name__}); the Grams belong to another architecture"
        )


# ====================================================================== statistics
def grams_from_moments(moms: Mapping, reduction: str = "mean") -> dict[str, torch.Tensor]:
    """RegMean Grams from :func:`lmsim.extract.extract_linear_grams` moments.

    Parameters
    ----------
    moms : dict of str to Moments
        Module name to a Moments with block ``"input"``.
    reduction : {"mean", "sum"}, default="mean"
        ``XᵀX / n`` (the authors' running mean; each model weighs equally in a merge) or
        ``XᵀX`` (Eq. 1 literally; models weigh by their number of token positions).

    Returns
    -------
    dict of str to Tensor of shape (d_in, d_in), float64, on the moments' device
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"`reduction` must be 'mean' or 'sum', got {reduction!r}")
    out = {}
    for name, mom in moms.items():
        g = mom.gram("input")
        out[name] = g / mom.n if reduction == "mean" else g
    return out


def collect_grams(
    model: nn.Module,
    tokenizer,
    texts: Sequence,
    *,
    kind: str | None = None,
    reduction: str = "mean",
    paper_compat_padding: bool = False,
    batch_size: int = 16,
    max_length: int | None = None,
    device="auto",
    dtype=None,
    progress: bool = True,
) -> dict[str, torch.Tensor]:
    """Grams of every linear layer's inputs, in one forward pass over ``texts``.

    Parameters
    ----------
    model : nn.Module
        A Hugging Face model; its task head's input is recorded too.
    tokenizer : tokenizer
    texts : list of str, of (str, str) pairs, or of word lists
        The model's own training inputs (a few hundred batches suffice, paper Table 6),
        encoded as fine-tuning encodes them (:func:`lmsim.encoding.encode_inputs`).
    kind : str, optional
        ``"token"`` reads word lists (the default for a token classifier).
    reduction : {"mean", "sum"}, default="mean"
        See :func:`grams_from_moments`.
    paper_compat_padding : bool, default=False
        False: real tokens only. True: every position, padding included, padded to
        ``max_length`` when given (the authors' code).
    batch_size, max_length, device, dtype, progress
        As in :func:`lmsim.extract.extract_linear_grams`.

    Returns
    -------
    grams : dict of str to Tensor of shape (d_in, d_in), float64 on the CPU
        Keyed by module name (``model.named_modules()``), as :func:`merge_models` wants.

    References
    ----------
    Jin et al. (2023), Sec. 3.2 (inner product matrices of linear layer inputs).
    """
    from lmsim.extract import extract_linear_grams

    moms = extract_linear_grams(
        model,
        tokenizer,
        texts,
        kind=kind,
        batch_size=batch_size,
        max_length=max_length,
        device=device,
        dtype=dtype,
        paper_compat_padding=paper_compat_padding,
        progress=progress,
    )
    return {k: v.cpu() for k, v in grams_from_moments(moms, reduction).items()}


def collect_fishers(
    model: nn.Module,
    tokenizer,
    texts: Sequence,
    labels: Sequence | None = None,
    *,
    mode: str = "sample",
    kind: str | None = None,
    max_length: int | None = None,
    device=None,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, torch.Tensor]:
    """Diagonal Fisher information of a sequence or token classifier, for every task kind.

    ``F = E_x E_y (∇_θ log p_θ(y|x))²``, averaged over ``texts``, one example per backward
    pass (the square of a batch gradient would not be the Fisher). The likelihood
    ``p_θ(y|x)`` of each kind:

    * ``"single_label"``: categorical, ``softmax(f)``;
    * ``"multi_label"``: independent Bernoullis, ``σ(f_l)`` per label;
    * ``"regression"``: ``y ~ N(f, 1)``, so ``∇ log p = (y − f) ∇f``;
    * ``"token"``: categorical per word (its first sub-word's logits), independent across
      the words, the example's log-likelihood summed over its words (words cut off by
      truncation are left out).

    Embedding tables get sparse gradients during the pass (only the rows of the example's
    tokens are non-zero), so a 30k-row vocabulary costs its used rows, not a dense table per
    example; the squares are accumulated in place in float64.

    Parameters
    ----------
    model : nn.Module
        A ``...ForSequenceClassification`` (logits (1, n_labels)) or
        ``...ForTokenClassification`` model.
    tokenizer : tokenizer
    texts : list, length n
        Texts or ``(str, str)`` pairs; lists of words for ``"token"``.
    labels : list, optional
        True labels in :func:`lmsim.finetune.finetune`'s form for ``kind``, required for
        ``mode="empirical"``.
    mode : {"sample", "empirical", "expected"}, default="sample"
        ``"sample"``: one label drawn from the model's predictive distribution per example
        (per label for multi-label, per word for token; ``f + ε`` for regression): the
        Fisher of the paper's Sec. 2. ``"empirical"``: the true labels (the empirical
        Fisher). ``"expected"``: the exact expectation, one backward pass per term: per
        class weighted by its probability (single-label; per word and class for token);
        per label ``σ(1 − σ) (∇f_l)²`` (multi-label: the cross terms vanish); ``(∇f)²``
        (regression).
    kind : str, optional
        Default: the model's (:func:`lmsim.encoding.model_kind`).
    max_length : int, optional
        Truncation length.
    device : str or torch.device, optional
        Where the inputs go; default: the device of the model's parameters.
    seed : int, default=0
        Seed of the label sampling.
    progress : bool

    Returns
    -------
    fishers : dict of str to Tensor, float32 on the CPU
        Parameter name (``model.named_parameters()``) to a tensor of its shape.

    References
    ----------
    Jin et al. (2023), Sec. 2; Matena & Raffel (2022), Sec. 2.2.
    """
    from tqdm.auto import tqdm

    from lmsim.encoding import encode_inputs, pad_batch, resolve_kind
    from lmsim.extract import model_inputs

    if mode not in FISHER_LABELS:
        raise ValueError(f"`mode` must be one of {list(FISHER_LABELS)}, got {mode!r}")
    texts = list(texts)
    if not texts:
        raise ValueError("`texts` is empty: pass the model's training texts")
    if mode == "empirical":
        if labels is None or len(labels) != len(texts):
            raise ValueError("mode='empirical' needs `labels`, one per text; or use mode='sample'")
    kind = resolve_kind(model, kind)
    enc = encode_inputs(tokenizer, texts, max_length, kind)
    device = torch.device(device) if device is not None else _model_device(model)
    was_training = model.training
    model.eval()
    # Sparse embedding gradients for the pass (restored in `finally`); exact: coalescing
    # sums a repeated token's contributions before they are squared.
    embeddings = [m for m in model.modules() if isinstance(m, nn.Embedding) and not m.sparse]
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in model.named_parameters() if p.requires_grad]
    totals = [torch.zeros(p.shape, dtype=torch.float64, device=p.device) for p in params]
    gen = torch.Generator().manual_seed(int(seed))
    try:
        for module in embeddings:
            module.sparse = True
        for i in tqdm(range(len(texts)), disable=not progress, desc="fisher"):
            batch = pad_batch(enc, [i], 0)
            logits = model(**model_inputs(model, batch, device)).logits
            label = labels[i] if mode == "empirical" else None
            terms = _fisher_terms(kind, logits, batch, mode, label, gen)
            for j, (value, weight) in enumerate(terms):
                grads = torch.autograd.grad(
                    value, params, retain_graph=j < len(terms) - 1, allow_unused=True
                )
                for total, g in zip(totals, grads):
                    _add_squared(total, g, weight)
    finally:
        for module in embeddings:
            module.sparse = False
        model.train(was_training)
    return {n: (t / len(texts)).float().cpu() for n, t in zip(names, totals)}


def _fisher_terms(kind: str, logits, batch, mode: str, label, gen) -> list[tuple]:
    """``[(scalar, weight)]`` whose weighted squared gradients sum to one example's Fisher.

    ``logits`` is the model output for one example: (1, n_labels), or (1, T, n_labels)
    for token classifiers (``batch["word_index"]`` then picks each word's first sub-word).
    """
    if kind == "token":
        if logits.ndim != 3 or logits.shape[0] != 1:
            raise ValueError(
                f"collect_fishers with kind='token' needs a token classifier (logits of shape "
                f"(1, n_tokens, n_labels)), got logits of shape {tuple(logits.shape)}"
            )
        word = torch.from_numpy(batch["word_index"][0])
        pos = torch.nonzero(word >= 0).flatten()
        log_probs = torch.log_softmax(logits[0, pos.to(logits.device)].float(), dim=-1)
        if mode == "expected":
            probs = log_probs.exp().detach()
            return [
                (log_probs[k, y], float(probs[k, y]))
                for k in range(log_probs.shape[0])
                for y in range(log_probs.shape[1])
            ]
        if mode == "sample":
            ys = torch.multinomial(log_probs.exp().detach().cpu(), 1, generator=gen).flatten()
        else:
            ys = torch.as_tensor([int(label[int(w)]) for w in word[pos]], dtype=torch.long)
        if not len(ys):  # every word truncated away: no term
            return []
        return [(log_probs[torch.arange(len(ys)), ys.to(log_probs.device)].sum(), 1.0)]
    if logits.ndim != 2 or logits.shape[0] != 1:
        raise ValueError(
            f"collect_fishers needs a sequence-classification model (logits of shape "
            f"(1, n_labels)), got logits of shape {tuple(logits.shape)}"
        )
    f = logits[0].float()
    if kind == "single_label":
        log_probs = torch.log_softmax(f, dim=-1)
        if mode == "expected":
            probs = log_probs.exp().detach()
            return [(log_probs[y], float(probs[y])) for y in range(log_probs.shape[0])]
        if mode == "sample":
            y = int(torch.multinomial(log_probs.exp().detach().cpu(), 1, generator=gen))
        else:
            y = int(label)
        return [(log_probs[y], 1.0)]
    if kind == "multi_label":
        probs = torch.sigmoid(f).detach()
        if mode == "expected":
            return [(f[k], float(probs[k] * (1 - probs[k]))) for k in range(f.shape[0])]
        if mode == "sample":
            y = torch.bernoulli(probs.cpu(), generator=gen)
        else:
            y = torch.as_tensor(label, dtype=torch.float32)
        y = y.to(f.device)
        log_lik = y * nn.functional.logsigmoid(f) + (1 - y) * nn.functional.logsigmoid(-f)
        return [(log_lik.sum(), 1.0)]
    # regression: y ~ N(f, 1), ∇ log p = (y − f) ∇f
    f = f[0]
    if mode == "expected":
        return [(f, 1.0)]
    if mode == "sample":
        y = f.detach() + torch.randn((), generator=gen).to(f.device)
    else:
        y = torch.tensor(float(label), device=f.device)
    return [(-0.5 * (y - f) ** 2, 1.0)]


def _add_squared(total: torch.Tensor, g: torch.Tensor | None, weight: float) -> None:
    """``total += weight * g²`` in place (float64 ``total``), for a dense or sparse ``g``."""
    if g is None:
        return
    if g.is_sparse:
        g = g.coalesce()
        rows, values = g.indices()[0], g.values().double()
        total.index_add_(0, rows, values * values, alpha=weight)
    else:
        total.addcmul_(g, g, value=weight)


def _model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


# ====================================================================== persistence
def _save_tensors(path, tensors: Mapping, kind: str, metadata: Mapping | None, dtype) -> None:
    from safetensors.torch import save_file

    if not tensors:
        raise ValueError(f"nothing to save: the {kind} dict is empty")
    out = {}
    for name, t in tensors.items():
        out[str(name)] = _as_f64(t, f"{kind[:-1]} {name!r}", "cpu").to(dtype).contiguous()
    meta = {
        "lmsim_kind": kind,
        "lmsim_format": "1",
        "shapes": json.dumps({k: list(v.shape) for k, v in out.items()}),
        "user": json.dumps(dict(metadata or {})),
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_file(out, str(path), metadata=meta)


def _open_checked(path, kind: str) -> dict[str, list[int]]:
    """Check a saved file's kind and return its recorded shapes."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {kind} file at {str(path)!r}; write one with save_{kind}")
    with safe_open(str(path), framework="pt", device="cpu") as handle:
        meta = handle.metadata() or {}
        keys = list(handle.keys())
    if meta.get("lmsim_kind") != kind:
        raise ValueError(
            f"{str(path)!r} holds {meta.get('lmsim_kind', 'no lmsim data')!r}, not {kind}; "
            f"load it with load_{meta.get('lmsim_kind', kind)}"
        )
    shapes = json.loads(meta["shapes"])
    if sorted(keys) != sorted(shapes):
        raise ValueError(
            f"{str(path)!r} holds tensors {sorted(set(keys) ^ set(shapes))[:5]} that its "
            "metadata does not list (or lacks ones it lists); the file is corrupt: recompute it"
        )
    return shapes


def _read_checked(handle, path, kind: str, name: str, shapes, device) -> torch.Tensor:
    t = handle.get_tensor(name)
    if list(t.shape) != shapes[name]:
        raise ValueError(
            f"{kind[:-1]} {name!r} in {str(path)!r} has shape {list(t.shape)}, its "
            f"metadata says {shapes[name]}; the file is corrupt: recompute it"
        )
    if not torch.isfinite(t).all():
        raise ValueError(f"{kind[:-1]} {name!r} in {str(path)!r} contains NaN or Inf")
    return t.to(device)


def _load_tensors(path, kind: str, device) -> dict[str, torch.Tensor]:
    from safetensors import safe_open

    shapes = _open_checked(path, kind)
    with safe_open(str(path), framework="pt", device="cpu") as handle:
        return {n: _read_checked(handle, path, kind, n, shapes, device) for n in shapes}


class _LazyTensors(Mapping):
    """A saved file's tensors, read (and checked) one at a time on access.

    Lets :func:`merge_models` hold one layer's Gram at a time instead of a model's all.
    """

    def __init__(self, path, kind: str, device="cpu"):
        self.path, self.kind, self.device = Path(path), kind, device
        self.shapes = _open_checked(path, kind)

    def __getitem__(self, name: str) -> torch.Tensor:
        from safetensors import safe_open

        if name not in self.shapes:
            raise KeyError(name)
        with safe_open(str(self.path), framework="pt", device="cpu") as handle:
            return _read_checked(handle, self.path, self.kind, name, self.shapes, self.device)

    def __contains__(self, name) -> bool:
        return name in self.shapes

    def __iter__(self):
        return iter(self.shapes)

    def __len__(self) -> int:
        return len(self.shapes)


def save_grams(path, grams: Mapping, metadata: Mapping | None = None) -> None:
    """Save Grams ``{module_name: (d_in, d_in)}`` as float64 safetensors.

    Parameters
    ----------
    path : str or Path
    grams : dict of str to array or tensor of shape (d_in, d_in)
    metadata : dict, optional
        JSON-serialisable notes (model name, reduction, number of tokens), returned by
        :func:`load_metadata`.
    """
    for name, g in grams.items():
        shape = tuple(g.shape)
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ValueError(f"Gram {name!r} must be square (d_in, d_in), got shape {shape}")
    _save_tensors(path, grams, "grams", metadata, torch.float64)


def load_grams(path, device="cpu", lazy: bool = False) -> Mapping[str, torch.Tensor]:
    """Load Grams written by :func:`save_grams` (safetensors: no code is executed).

    Shapes are checked against the metadata, squareness and finiteness are verified.
    ``lazy=True`` returns a read-only mapping that reads each Gram when it is accessed
    (what :func:`merge_models` does with a path): one layer's Gram in memory at a time.
    """
    if lazy:
        out = _LazyTensors(path, "grams", device)
        bad = {k: v for k, v in out.shapes.items() if len(v) != 2 or v[0] != v[1]}
        if bad:
            raise ValueError(f"Grams {list(bad)[:5]} in {str(path)!r} are not square: {bad}")
        return out
    out = _load_tensors(path, "grams", device)
    for name, g in out.items():
        if g.ndim != 2 or g.shape[0] != g.shape[1]:
            raise ValueError(f"Gram {name!r} in {str(path)!r} is not square: {tuple(g.shape)}")
    return out


def save_fishers(path, fishers: Mapping, metadata: Mapping | None = None) -> None:
    """Save diagonal Fishers ``{parameter_name: tensor}`` as float32 safetensors."""
    _save_tensors(path, fishers, "fishers", metadata, torch.float32)


def load_fishers(path, device="cpu", lazy: bool = False) -> Mapping[str, torch.Tensor]:
    """Load Fishers written by :func:`save_fishers` (no code is executed; ``lazy`` as in
    :func:`load_grams`)."""
    if lazy:
        return _LazyTensors(path, "fishers", device)
    return _load_tensors(path, "fishers", device)


def load_metadata(path) -> dict:
    """The ``metadata`` dict saved with :func:`save_grams` or :func:`save_fishers`."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        meta = handle.metadata() or {}
    return json.loads(meta.get("user", "{}"))


# ====================================================================== baselines
def ensemble_logits(
    models: Iterable,
    tokenizer,
    texts: Sequence,
    *,
    kind: str | None = None,
    batch_size: int = 16,
    max_length: int | None = None,
    device=None,
):
    """Ensemble baseline: the mean of the models' logits on ``texts``.

    Parameters
    ----------
    models : iterable of nn.Module or zero-arg callables returning one
        Classifiers with the same label set (one at a time in memory).
    tokenizer : tokenizer
        Shared by the models (copies of one base model).
    texts : list
        Texts or ``(str, str)`` pairs; lists of words for token classifiers.
    kind : str, optional
        Default: each model's (:func:`lmsim.encoding.model_kind`).
    batch_size, max_length, device
        Batching (padded on the right, masked), truncation, and where the inputs go
        (default: each model's device).

    Returns
    -------
    ndarray of shape (n_texts, n_labels), float64; for token classifiers a list of
    (n_words_i, n_labels) arrays, the mean per word (NaN rows for truncated words).

    References
    ----------
    Jin et al. (2023), Sec. 4.1 ("Model ensembling").
    """
    from lmsim.extract import extract_logits

    texts = list(texts)
    if not texts:
        raise ValueError("`texts` is empty: pass the texts to score")
    total, n = None, 0
    for i, item in enumerate(models):
        model = _resolve(item)
        if not isinstance(model, nn.Module):
            raise TypeError(f"`models[{i}]` must be an nn.Module, got {type(model).__name__}")
        logits = extract_logits(
            model,
            tokenizer,
            texts,
            kind=kind,
            max_length=max_length,
            batch_size=batch_size,
            device=device,
        )
        token = isinstance(logits, list)
        rows = logits if token else [logits]
        if total is not None:
            shapes = [r.shape for r in rows], [r.shape for r in total]
            if shapes[0] != shapes[1]:
                raise ValueError(
                    f"`models[{i}]` gives logits of shape {shapes[0][0]}, models[0] "
                    f"{shapes[1][0]}; ensemble only models with one label set"
                )
        total = rows if total is None else [a + b for a, b in zip(total, rows)]
        n += 1
    if total is None:
        raise ValueError("`models` is empty: pass at least one model")
    out = [t / n for t in total]
    return out if token else out[0]
