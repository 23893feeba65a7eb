"""Decompositions layer by layer, on blocks named ``"{model}/layer.{i}"``, and their table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lmsim.blocks import block_name, layers_by_model
from lmsim.lmd._decompose import decompose
from lmsim.lmd._problem import _as_moments
from lmsim.moments import Moments


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
