"""The inputs of a decomposition: validated moments, model blocks and their train/test statistics."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lmsim.blocks import is_layer_block, parse_block
from lmsim.moments import Moments

REGULARISERS = ("code", "paper")


@dataclass
class _Stats:
    """Count, mean ``(D,)`` and centred co-moment ``(D, D)`` of the model blocks."""

    n: int
    mean: torch.Tensor
    comoment: torch.Tensor

    def cov(self, ddof: int) -> torch.Tensor:
        return self.comoment / (self.n - ddof)


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
