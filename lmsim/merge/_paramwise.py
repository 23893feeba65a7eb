"""Parameter-wise merge methods: how one parameter's copies in K models are combined.

:func:`lmsim.merge.merge_models` visits the models one at a time and hands every parameter
it merges parameter-wise (every parameter for ``method="simple"`` or ``"fisher"``; biases,
embeddings and norms for ``"regmean"``) to the combiner of its method, which keeps running
float64 sums and returns the merged value once all models are seen.

A new parameter-wise method is one class here with the interface below and one entry in
:data:`PARAMWISE`; its key becomes a valid ``method`` of ``merge_models``:

``statistics``
    The ``merge_models`` argument that gives each model's per-parameter statistics
    (``"fishers"``), or None.
``needs_base``
    True when the method needs the pretrained model's parameters (``merge_models(base=...)``):
    the task-vector methods.
``__init__(options)``
    ``options`` is a :class:`MergeOptions` (the device of the sums, the methods' knobs).
``add(pname, param, i, stats)``
    Add model ``i``'s ``param`` (its own tensor: never modify it in place); ``stats`` is
    that model's mapping named by ``statistics`` (None without).
``pop(pname, n_models)``
    The merged float64 value, its sums freed.
``discard(pname)``
    Forget the parameter (its shapes differ between models: it is not merged).
``start_model(i, params)`` (optional)
    Called before model ``i``'s parameters are added, with every parameter the model will
    hand to this combiner (TIES's whole-model magnitude threshold needs them all).

References
----------
Jin et al. (2023), Sec. 2 ("Simple averaging", "Fisher averaging"); Matena & Raffel
(2022), Eq. 3. Ilharco et al. (2023), Sec. 2; Yadav et al. (2023), Algorithm 1; Yu et al.
(2024), Eq. 2 (the task-vector methods, :mod:`lmsim.merge._taskvectors`). Jin et al.'s
released code, ``src/model_merge/avg_merger.py``,
``FedAvgMerger.avg_merge_multilabel_classification_heads`` (the masked head average).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from lmsim.merge._algebra import _as_f64
from lmsim.merge._taskvectors import (
    TRIM_SCOPES,
    check_density,
    check_drop_rate,
    check_scaling,
    dare_generator,
    dare_keep_mask,
    trim_threshold,
)


@dataclass(frozen=True)
class MergeOptions:
    """What every combiner may read: where the sums live, and the methods' settings.

    Attributes
    ----------
    device : torch.device
        Where the float64 sums live.
    fisher_eps : float
        Floor of the Fisher values (:func:`lmsim.merge.fisher_average`).
    base : mapping of str to Tensor, optional
        The pretrained model's parameters by name (the task-vector methods' ``θ_0``).
    scaling : float
        ``λ`` of the task-vector methods.
    density : float
        TIES's kept fraction.
    trim : {"model", "parameter"}
        Where TIES takes its magnitude threshold (:func:`lmsim.merge.trim_threshold`).
    drop_rate : float
        DARE's ``p``.
    seed : int
        DARE's seed (:func:`lmsim.merge.dare_generator`).
    """

    device: torch.device
    fisher_eps: float = 1e-6
    base: Mapping | None = None
    scaling: float = 1.0
    density: float = 0.2
    trim: str = "model"
    drop_rate: float = 0.9
    seed: int = 0

    def __post_init__(self):
        check_scaling(self.scaling)
        check_density(self.density)
        check_drop_rate(self.drop_rate)
        if self.trim not in TRIM_SCOPES:
            raise ValueError(f"`trim` must be one of {list(TRIM_SCOPES)}, got {self.trim!r}")


def _param_f64(param: torch.Tensor, pname: str, i: int, device) -> torch.Tensor:
    return _as_f64(param, f"parameter {pname!r} of model {i}", device)


class SimpleAverage:
    """``Σ_i θ_i / K``: one running float64 sum per parameter."""

    statistics = None
    needs_base = False

    def __init__(self, options: MergeOptions):
        self.device = options.device
        self._sums: dict[str, torch.Tensor] = {}

    def add(self, pname: str, param: torch.Tensor, i: int, stats: Mapping | None) -> None:
        value = _param_f64(param, pname, i, self.device)
        if pname in self._sums:
            self._sums[pname] += value
        else:
            # A float64 parameter converts to itself: copy before summing in place.
            self._sums[pname] = value.clone() if value.data_ptr() == param.data_ptr() else value

    def pop(self, pname: str, n_models: int) -> torch.Tensor:
        return self._sums.pop(pname) / n_models

    def discard(self, pname: str) -> None:
        self._sums.pop(pname, None)


class FisherAverage:
    """``Σ_i F_i θ_i / Σ_i F_i`` with ``F_i`` floored at ``fisher_eps``: two running sums."""

    statistics = "fishers"
    needs_base = False

    def __init__(self, options: MergeOptions):
        self.device = options.device
        self.eps = float(options.fisher_eps)
        self._sums: dict[str, torch.Tensor] = {}  # Σ F_i θ_i
        self._fisher_sums: dict[str, torch.Tensor] = {}  # Σ F_i

    def add(self, pname: str, param: torch.Tensor, i: int, stats: Mapping | None) -> None:
        value = _param_f64(param, pname, i, self.device)
        if pname not in stats:
            raise KeyError(
                f"no Fisher for parameter {pname!r} of model {i}; compute Fishers with "
                "collect_fishers on this model or exclude the parameter with `exclude`"
            )
        f = _as_f64(stats[pname], f"Fisher of {pname!r} of model {i}", self.device)
        if f.shape != value.shape:
            raise ValueError(
                f"Fisher of {pname!r} of model {i} has shape {tuple(f.shape)}, the "
                f"parameter {tuple(value.shape)}; recompute it on this model"
            )
        if bool((f < 0).any()):
            raise ValueError(f"Fisher of {pname!r} of model {i} has negative entries")
        f = f.clamp_min(self.eps)
        if pname in self._sums:
            self._sums[pname] += f * value
            self._fisher_sums[pname] += f
        else:
            self._sums[pname] = f * value
            self._fisher_sums[pname] = f

    def pop(self, pname: str, n_models: int) -> torch.Tensor:
        return self._sums.pop(pname) / self._fisher_sums.pop(pname)

    def discard(self, pname: str) -> None:
        self._sums.pop(pname, None)
        self._fisher_sums.pop(pname, None)


class _TaskVectorCombiner:
    """Shared by the task-vector methods: ``τ_i = θ_i − θ_0`` against ``options.base``."""

    statistics = None
    needs_base = True

    def __init__(self, options: MergeOptions):
        self.device = options.device
        self.base = options.base
        self.scaling = float(options.scaling)

    def _base(self, pname: str, shape) -> torch.Tensor:
        if pname not in self.base:
            raise KeyError(
                f"the base model has no parameter {pname!r}; pass as `base` the pretrained "
                "model loaded into the fine-tuned models' class (with the head they started "
                "from), or leave the parameter out of the merge with `exclude`"
            )
        b = _as_f64(self.base[pname], f"base parameter {pname!r}", self.device)
        if tuple(b.shape) != tuple(shape):
            raise ValueError(
                f"base parameter {pname!r} has shape {tuple(b.shape)}, the models "
                f"{tuple(shape)}; pass the base the models were fine-tuned from, or `exclude` it"
            )
        return b

    def _delta(self, pname: str, param: torch.Tensor, i: int) -> torch.Tensor:
        value = _param_f64(param, pname, i, self.device)
        return value - self._base(pname, value.shape)


class TaskArithmetic(_TaskVectorCombiner):
    """``θ_0 + λ Σ_i τ_i``: one running float64 sum of task vectors per parameter."""

    def __init__(self, options: MergeOptions):
        super().__init__(options)
        self._sums: dict[str, torch.Tensor] = {}

    def _contribution(self, pname: str, param: torch.Tensor, i: int) -> torch.Tensor:
        return self._delta(pname, param, i)

    def add(self, pname: str, param: torch.Tensor, i: int, stats: Mapping | None) -> None:
        tau = self._contribution(pname, param, i)
        if pname in self._sums:
            self._sums[pname] += tau
        else:
            self._sums[pname] = tau

    def pop(self, pname: str, n_models: int) -> torch.Tensor:
        total = self._sums.pop(pname)
        return self._base(pname, total.shape) + self.scaling * total

    def discard(self, pname: str) -> None:
        self._sums.pop(pname, None)


class Dare(TaskArithmetic):
    """DARE: each ``τ_i`` with entries dropped with probability ``p``, the rest times
    ``1/(1 − p)``, then summed as in task arithmetic (masks from :func:`dare_generator`)."""

    def __init__(self, options: MergeOptions):
        super().__init__(options)
        self.drop_rate = float(options.drop_rate)
        self.seed = int(options.seed)

    def _contribution(self, pname: str, param: torch.Tensor, i: int) -> torch.Tensor:
        tau = self._delta(pname, param, i)
        keep = dare_keep_mask(tau.shape, self.drop_rate, dare_generator(self.seed, i, pname))
        return torch.where(keep.to(tau.device), tau, torch.zeros_like(tau)) / (1 - self.drop_rate)


class Ties(_TaskVectorCombiner):
    """TIES: trimmed task vectors, elected sign, disjoint mean; four running sums.

    ``Σ`` and count of the positive and of the negative trimmed entries suffice: the
    elected sign is that of ``Σ_+ + Σ_−`` (the sum of the trimmed vectors), and the disjoint
    mean is ``Σ_+ / n_+`` or ``Σ_− / n_−``. With ``trim="model"`` each model's threshold is
    taken over all of its parameters merged by TIES (:meth:`start_model`).
    """

    def __init__(self, options: MergeOptions):
        super().__init__(options)
        self.density = float(options.density)
        self.trim = options.trim
        self._threshold: float | None = None
        self._sums: dict[str, list[torch.Tensor]] = {}  # [Σ_+, n_+, Σ_−, n_−]

    def start_model(self, i: int, params: Mapping[str, torch.Tensor]) -> None:
        if self.trim != "model" or not params:
            self._threshold = None
            return
        magnitudes = torch.cat([self._delta(n, p, i).abs().reshape(-1) for n, p in params.items()])
        self._threshold = trim_threshold(magnitudes, self.density, "model")

    def add(self, pname: str, param: torch.Tensor, i: int, stats: Mapping | None) -> None:
        tau = self._delta(pname, param, i)
        thr = self._threshold
        if thr is None:
            thr = trim_threshold(tau.abs().reshape(-1), self.density, "parameter")
        kept = tau.abs() >= thr
        pos, neg = kept & (tau > 0), kept & (tau < 0)
        zero = torch.zeros_like(tau)
        parts = [
            torch.where(pos, tau, zero),
            pos.double(),
            torch.where(neg, tau, zero),
            neg.double(),
        ]
        if pname in self._sums:
            for total, part in zip(self._sums[pname], parts):
                total += part
        else:
            self._sums[pname] = parts

    def pop(self, pname: str, n_models: int) -> torch.Tensor:
        pos_sum, n_pos, neg_sum, n_neg = self._sums.pop(pname)
        sign = torch.sign(pos_sum + neg_sum)
        merged = torch.where(
            sign > 0,
            pos_sum / n_pos.clamp_min(1),
            torch.where(sign < 0, neg_sum / n_neg.clamp_min(1), torch.zeros_like(pos_sum)),
        )
        return self._base(pname, merged.shape) + self.scaling * merged

    def discard(self, pname: str) -> None:
        self._sums.pop(pname, None)


class MaskedRowAverage:
    """The released code's head merge: row ``l`` averaged over the models trained on label ``l``.

    ``stats`` is the model's ``head_rows`` entry, the label ids (rows of the head weight)
    its training data annotates. A row no model was trained on becomes 0, as in the
    released code (``n_valid`` floored at 1e-10 under a zero sum).
    """

    statistics = "head_rows"
    needs_base = False

    def __init__(self, options: MergeOptions):
        self.device = options.device
        self._sums: dict[str, list[torch.Tensor]] = {}

    def add(self, pname: str, param: torch.Tensor, i: int, stats) -> None:
        value = _param_f64(param, pname, i, self.device)
        rows = torch.as_tensor(sorted(set(int(r) for r in stats)), dtype=torch.long)
        if len(rows) and not (0 <= int(rows.min()) and int(rows.max()) < value.shape[0]):
            raise ValueError(
                f"`head_rows[{i}]` has rows {rows.tolist()[:8]}, but {pname!r} has "
                f"{value.shape[0]} rows; give each model's label ids (0..{value.shape[0] - 1})"
            )
        if pname not in self._sums:
            self._sums[pname] = [
                torch.zeros_like(value),
                torch.zeros(value.shape[0], dtype=torch.float64, device=value.device),
            ]
        total, count = self._sums[pname]
        rows = rows.to(value.device)
        total[rows] += value[rows]
        count[rows] += 1

    def pop(self, pname: str, n_models: int) -> torch.Tensor:
        total, count = self._sums.pop(pname)
        return total / count.clamp_min(1).reshape(-1, *([1] * (total.ndim - 1)))

    def discard(self, pname: str) -> None:
        self._sums.pop(pname, None)


# Method name -> combiner. The order is the one `merge_models`' error message lists.
PARAMWISE = {
    "simple": SimpleAverage,
    "fisher": FisherAverage,
    "task_arithmetic": TaskArithmetic,
    "ties": Ties,
    "dare": Dare,
}
# Combiners that are options of every method rather than methods (`merge_models(head_rows=)`).
OPTIONS = {"masked": MaskedRowAverage}
