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
``__init__(options)``
    ``options`` is a :class:`MergeOptions` (the device of the sums, the methods' knobs).
``add(pname, param, i, stats)``
    Add model ``i``'s ``param`` (its own tensor: never modify it in place); ``stats`` is
    that model's mapping named by ``statistics`` (None without).
``pop(pname, n_models)``
    The merged float64 value, its sums freed.
``discard(pname)``
    Forget the parameter (its shapes differ between models: it is not merged).

References
----------
Jin et al. (2023), Sec. 2 ("Simple averaging", "Fisher averaging"); Matena & Raffel
(2022), Eq. 3.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from lmsim.merge._algebra import _as_f64


@dataclass(frozen=True)
class MergeOptions:
    """What every combiner may read: where the sums live, and the methods' settings.

    Attributes
    ----------
    device : torch.device
        Where the float64 sums live.
    fisher_eps : float
        Floor of the Fisher values (:func:`lmsim.merge.fisher_average`).
    """

    device: torch.device
    fisher_eps: float = 1e-6


def _param_f64(param: torch.Tensor, pname: str, i: int, device) -> torch.Tensor:
    return _as_f64(param, f"parameter {pname!r} of model {i}", device)


class SimpleAverage:
    """``Σ_i θ_i / K``: one running float64 sum per parameter."""

    statistics = None

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


# Method name -> combiner. The order is the one `merge_models`' error message lists.
PARAMWISE = {"simple": SimpleAverage, "fisher": FisherAverage}
