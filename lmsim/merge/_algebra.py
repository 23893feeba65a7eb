"""RegMean's algebra on arrays: regularised Grams, the Cholesky solve, the streaming sums,
and simple and Fisher averaging.

Array functions take numpy arrays or torch tensors and compute in float64 (torch, on the
input's device); they return float64 numpy arrays when given numpy, float64 tensors when
given torch.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Eq. 1-2, Algorithm 1, App. A (Eq. 4, 8, 9), App. C (Table 8).
Matena & Raffel (2022). Merging Models with Fisher-Weighted Averaging. NeurIPS.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import torch

# Pivot ratio (min/max of Cholesky pivots, i.e. diag(L)²) under which a float64 Gram sum
# is treated as singular: its solve would lose more than ~12 of float64's 16 digits.
_PIVOT_RATIO_MIN = 1e-12
_RIDGE_MAX = 1e-2


class SingularGramWarning(UserWarning):
    """A layer's Gram sum was singular; it was solved with a small documented ridge."""


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
    weights, grams = _per_model(weights, grams, ("weights", "grams"), "one (d_out, d_in) weight")
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
    params, fishers = _per_model(params, fishers, ("params", "fishers"), "one array")
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


def _per_model(values, stats, names: tuple[str, str], one: str) -> tuple[list, list]:
    """``values`` and ``stats`` as lists, checked to hold one entry per model, at least one."""
    values, stats = list(values), list(stats)
    if not values:
        raise ValueError(f"`{names[0]}` is empty: pass {one} per model")
    if len(values) != len(stats):
        raise ValueError(
            f"`{names[0]}` and `{names[1]}` must have one entry per model, got {len(values)} "
            f"and {len(stats)}"
        )
    return values, stats


def _same_shapes(ts: Sequence[torch.Tensor], what: str) -> None:
    shapes = {tuple(t.shape) for t in ts}
    if len(shapes) != 1:
        raise ValueError(f"{what} must all have one shape, got {sorted(shapes)}")
