"""Task-vector merges: task arithmetic, TIES and DARE, on arrays.

These methods work on *task vectors* ``τ_i = θ_i − θ_0``, the change fine-tuning made to the
pretrained (base) parameters ``θ_0``, and return ``θ_0 + λ τ_M``:

* **task arithmetic** (Ilharco et al. 2023): ``τ_M = Σ_i τ_i``; with ``λ = 1/K`` it is the
  simple average of the models.
* **TIES** (Yadav et al. 2023, Sec. 3 and Algorithm 1): *trim* each ``τ_i`` to its
  ``density`` fraction of largest magnitudes, *elect* per entry the sign of the sum of the
  trimmed vectors, and take the *disjoint mean*, over the models whose trimmed entry is
  non-zero and has the elected sign.
* **DARE** (Yu et al. 2024, Eq. 2): drop each entry of ``τ_i`` with probability ``p`` and
  rescale the kept ones by ``1 / (1 − p)`` (unbiased: ``E[τ̂_i] = τ_i``), then sum the
  rescaled vectors as task arithmetic does.

None of these is in Jin et al. (2023); FusionBench and mergekit users expect them beside the
paper's simple, Fisher and RegMean merges. The array functions here compute in float64
(torch, on the input's device) and return numpy when given numpy, as the rest of
:mod:`lmsim.merge` does; :func:`lmsim.merge.merge_models` streams the same formulas over
whole models (``method="task_arithmetic"``, ``"ties"``, ``"dare"``).

References
----------
Ilharco, Ribeiro, Wortsman, Gururangan, Schmidt, Hajishirzi & Farhadi (2023). Editing Models
with Task Arithmetic. ICLR. Sec. 2.
Yadav, Tam, Choshen, Raffel & Bansal (2023). TIES-Merging: Resolving Interference When
Merging Models. NeurIPS. Sec. 3, Algorithm 1 (reference code: ``prateeky2806/ties-merging``,
``ties_minimal.ipynb``; FusionBench ``fusion_bench/method/ties_merging/ties_merging_utils.py``).
Yu, Yu, Yu, Huang & Li (2024). Language Models are Super Mario: Absorbing Abilities from
Homologous Models as a Free Lunch. ICML. Sec. 3, Eq. 2.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import torch

from lmsim.merge._algebra import _all_numpy, _as_f64, _out_like, _same_shapes

# Where TIES takes its magnitude threshold: per parameter, or over each whole task vector.
TRIM_SCOPES = ("model", "parameter")


def check_scaling(scaling: float) -> float:
    """``λ`` as a float; it must be finite (0 gives the base model back)."""
    value = float(scaling)
    if not np.isfinite(value):
        raise ValueError(f"`scaling` must be a finite number (λ, e.g. 1.0 or 1/K), got {scaling!r}")
    return value


def check_density(density: float) -> float:
    """TIES's kept fraction, in (0, 1]."""
    value = float(density)
    if not 0.0 < value <= 1.0:
        raise ValueError(
            f"`density` must be in (0, 1] (the fraction of each task vector TIES keeps; the "
            f"paper uses 0.2), got {density!r}"
        )
    return value


def check_drop_rate(drop_rate: float) -> float:
    """DARE's drop probability, in [0, 1)."""
    value = float(drop_rate)
    if not 0.0 <= value < 1.0:
        raise ValueError(
            f"`drop_rate` must be in [0, 1) (DARE's p; the kept entries are rescaled by "
            f"1/(1 − p)), got {drop_rate!r}"
        )
    return value


def trim_threshold(magnitudes: torch.Tensor, density: float, scope: str = "parameter") -> float:
    """The smallest magnitude TIES keeps; entries with ``|τ| >= threshold`` are kept.

    With ``k = ⌊density · n⌋`` over the ``n`` entries trimmed together, the kept count
    follows the implementation that trims at that scope:

    * ``"parameter"`` (one tensor at a time, mergekit's ``sparsify.magnitude``): the
      ``max(1, k)`` largest;
    * ``"model"`` (the whole flattened task vector, the TIES reference code's
      ``topk_values_mask``, also FusionBench's): ``|τ| >= kthvalue(|τ|, n − k)``, i.e. the
      ``k + 1`` largest (one more than its text's top-k %).

    Parameters
    ----------
    magnitudes : Tensor of shape (n,)
        ``|τ|`` of every entry trimmed together.
    density : float in (0, 1]
    scope : {"parameter", "model"}, default="parameter"

    Returns
    -------
    float
        0.0 when everything is kept (``k = n``).
    """
    if scope not in TRIM_SCOPES:
        raise ValueError(f"`trim` must be one of {list(TRIM_SCOPES)}, got {scope!r}")
    n = magnitudes.numel()
    k = int(density * n)
    if k >= n:
        return 0.0
    rank = k + 1 if scope == "model" else max(1, k)  # kept entries, counted from the top
    return float(torch.kthvalue(magnitudes.reshape(-1), n - rank + 1).values)


def dare_generator(seed: int, model: int, name: str) -> torch.Generator:
    """The CPU generator of DARE's mask of parameter ``name`` of model ``model``.

    Seeded from ``(seed, model, crc32(name))``, so a mask does not depend on the order in
    which parameters or models are visited.
    """
    state = np.random.SeedSequence([int(seed), int(model), zlib.crc32(name.encode())])
    return torch.Generator().manual_seed(int(state.generate_state(1, np.uint64)[0] >> 1))


def dare_keep_mask(shape, drop_rate: float, generator: torch.Generator) -> torch.Tensor:
    """Boolean mask of the entries DARE keeps: ``u > p`` for ``u ~ U[0, 1)`` (float32, CPU).

    The same rule as FusionBench's ``param_random_drop_`` (``torch.rand_like(param) >
    sparsity_level``).
    """
    return torch.rand(tuple(shape), generator=generator, dtype=torch.float32) > drop_rate


def _deltas(params: Sequence, base, what: str) -> tuple[list[torch.Tensor], torch.Tensor]:
    params = list(params)
    if not params:
        raise ValueError(f"`params` is empty: pass one array per model ({what})")
    ps = [_as_f64(p, f"params[{i}]") for i, p in enumerate(params)]
    b = _as_f64(base, "base")
    _same_shapes([*ps, b], "params and base")
    return [p.to(b.device) - b for p in ps], b


def task_arithmetic(params: Sequence, base, scaling: float = 1.0):
    """``θ_0 + λ Σ_i (θ_i − θ_0)`` for one parameter.

    Parameters
    ----------
    params : sequence of K arrays or tensors of one shape
        The parameter in each fine-tuned model.
    base : array or tensor of that shape
        The parameter in the pretrained model they were fine-tuned from.
    scaling : float, default=1.0
        ``λ``; ``1/K`` gives the simple average.

    Returns
    -------
    ndarray or Tensor of that shape, float64

    References
    ----------
    Ilharco et al. (2023), Sec. 2 ("task vectors", addition).
    """
    lam = check_scaling(scaling)
    deltas, b = _deltas(params, base, "task_arithmetic")
    merged = b + lam * torch.stack(deltas).sum(0)
    return _out_like(merged, _all_numpy([*params, base]))


def ties_merging(params: Sequence, base, density: float = 0.2, scaling: float = 1.0):
    """TIES merge of one parameter: trim, elect sign, disjoint mean; ``θ_0 + λ τ_M``.

    Parameters
    ----------
    params : sequence of K arrays or tensors of one shape
    base : array or tensor of that shape
    density : float in (0, 1], default=0.2
        Fraction of each task vector kept by magnitude (the paper's ``k`` = 20 %), the
        threshold taken over this parameter's entries (:func:`trim_threshold` with
        ``scope="parameter"``; ``merge_models(trim="model")`` takes it over the whole
        model, as the TIES reference code does).
    scaling : float, default=1.0
        ``λ`` (the paper: 1 with the disjoint mean).

    Returns
    -------
    ndarray or Tensor of that shape, float64

    Notes
    -----
    Where no model keeps an entry, or the kept entries cancel exactly, the merged change is
    0 (the reference code gives an exactly cancelling entry the sign of the majority of all
    entries; its disjoint mean is then over the models of that sign).

    References
    ----------
    Yadav et al. (2023), Algorithm 1 (steps Trim, Elect, Disjoint Merge).
    """
    d = check_density(density)
    lam = check_scaling(scaling)
    deltas, b = _deltas(params, base, "ties_merging")
    trimmed = []
    for t in deltas:
        thr = trim_threshold(t.abs().reshape(-1), d, "parameter")
        trimmed.append(torch.where(t.abs() >= thr, t, torch.zeros_like(t)))
    tau = torch.stack(trimmed)
    sign = torch.sign(tau.sum(0))
    agree = torch.where(sign > 0, tau > 0, tau < 0) & (sign != 0)
    count = agree.sum(0).clamp_min(1)
    merged = b + lam * (tau * agree).sum(0) / count
    return _out_like(merged, _all_numpy([*params, base]))


def dare(
    params: Sequence,
    base,
    drop_rate: float = 0.9,
    scaling: float = 1.0,
    *,
    seed: int = 0,
    name: str = "",
):
    """DARE then task arithmetic: ``θ_0 + λ Σ_i m_i ⊙ τ_i / (1 − p)``, ``m_i ~ Bernoulli(1 − p)``.

    Parameters
    ----------
    params : sequence of K arrays or tensors of one shape
    base : array or tensor of that shape
    drop_rate : float in [0, 1), default=0.9
        ``p``, the probability of dropping an entry of a task vector (the paper: 0.9).
    scaling : float, default=1.0
        ``λ``.
    seed : int, default=0
    name : str, default=""
        The parameter's name: model ``i``'s mask is drawn from
        :func:`dare_generator` ``(seed, i, name)``, as :func:`lmsim.merge.merge_models` draws
        it, so both give the same merge.

    Returns
    -------
    ndarray or Tensor of that shape, float64

    References
    ----------
    Yu et al. (2024), Sec. 3, Eq. 2 (drop and rescale).
    """
    p = check_drop_rate(drop_rate)
    lam = check_scaling(scaling)
    deltas, b = _deltas(params, base, "dare")
    total = torch.zeros_like(b)
    for i, t in enumerate(deltas):
        keep = dare_keep_mask(t.shape, p, dare_generator(seed, i, name)).to(t.device)
        total += torch.where(keep, t, torch.zeros_like(t)) / (1.0 - p)
    return _out_like(b + lam * total, _all_numpy([*params, base]))
