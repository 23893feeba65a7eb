"""Models prepared for extraction: loaded or given, in ``eval()`` mode on the device, with
their layers, length limit and pad token resolved."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from lmsim._runtime import architecture


def _autocast(device: torch.device, amp_dtype: torch.dtype | None):
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=amp_dtype)


@dataclass
class _Run:
    """One model prepared for extraction."""

    name: str
    model: nn.Module
    tokenizer: object
    layers: list[int] = field(default_factory=list)
    max_length: int = 0
    pad_id: int = 0
    # True when ``max_length`` is the model's own limit, not one the caller asked for: then
    # a text cut there is reported (the caller did not choose to truncate).
    implicit_max_length: bool = False


def _load_models(models, device, dtype, zoo_profile) -> list[tuple[str, nn.Module, object]]:
    if isinstance(models, (str, bytes)):
        raise TypeError(
            f"`models` must be a list of names or a dict, got the string {models!r}; wrap it: [{models!r}]"
        )
    if isinstance(models, Mapping):
        items = []
        for name, pair in models.items():
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(
                    f"`models[{name!r}]` must be a (model, tokenizer) pair, got {type(pair).__name__}"
                )
            items.append((str(name), pair[0], pair[1]))
    else:
        names = list(models)
        if len(set(names)) != len(names):
            raise ValueError(
                f"`models` has duplicate names {names}: each block name must be unique"
            )
        from lmsim.models import load_model

        items = [
            (name, *load_model(name, device=device, dtype=dtype, zoo_profile=zoo_profile))
            for name in names
        ]
    if not items:
        raise ValueError(
            "`models` is empty: pass at least one model name or (model, tokenizer) pair"
        )
    for name, model, _tok in items:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model {name!r} is a {type(model).__name__}, not a torch nn.Module")
    return items


def _n_layers(model: nn.Module) -> int:
    n_layers = architecture(model)["n_layers"]
    if not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"cannot read the number of layers from {type(model).__name__}'s config")
    return n_layers


def _max_positions(model: nn.Module, tokenizer) -> int:
    """Longest input the model accepts: its position limit, lowered by the tokenizer's
    ``model_max_length`` where that is set (RoBERTa: 514 positions but 512 usable)."""
    limits = []
    value = architecture(model)["max_positions"]
    if isinstance(value, int) and value > 0:
        limits.append(value)
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < 1_000_000:  # larger values mean "unset"
        limits.append(value)
    return min(limits) if limits else 1_000_000


def _resolve_layers(spec, name: str, n_layers: int) -> list[int]:
    if isinstance(spec, Mapping):
        if name not in spec:
            raise KeyError(
                f"`layers` is a dict without an entry for model {name!r}; keys: {list(spec)}"
            )
        spec = spec[name]
    valid = (
        f"0..{n_layers} (0 = embeddings; negative indices -{n_layers + 1}..-1 count from the end)"
    )
    if isinstance(spec, (bool, np.bool_)):
        raise TypeError(
            f"`layers` must be 'all', 'last', an int or a list of ints, got the bool {spec!r} "
            "(a bool is not a layer index)"
        )
    if isinstance(spec, str) and spec not in ("all", "last"):
        raise ValueError(f"`layers` must be 'all', 'last' or a list of ints, got {spec!r}")
    if spec == "all":
        return list(range(n_layers + 1))
    if spec == "last":
        return [n_layers]
    if isinstance(spec, (int, np.integer)):
        spec = [int(spec)]
    if isinstance(spec, str) or not isinstance(spec, Sequence) or not spec:
        raise ValueError(
            f"`layers` must be 'all', 'last' or a non-empty list of ints, got {spec!r}"
        )
    out = []
    for layer in spec:
        if not isinstance(layer, (int, np.integer)) or isinstance(layer, (bool, np.bool_)):
            raise TypeError(
                f"`layers` entries must be ints, got {layer!r} ({type(layer).__name__})"
            )
        if not -(n_layers + 1) <= layer <= n_layers:
            raise ValueError(
                f"layer {layer} does not exist in model {name!r}; valid layers are {valid}"
            )
        index = int(layer) % (n_layers + 1)
        if index not in out:
            out.append(index)
    return out


def _prepare(models, layers, max_length, device, dtype, zoo_profile="default") -> list[_Run]:
    runs = []
    for name, model, tokenizer in _load_models(models, device, dtype, zoo_profile):
        model.eval()
        if _model_device(model) != device:
            model.to(device)
        n_layers = _n_layers(model)
        limit = _max_positions(model, tokenizer)
        if max_length is not None:
            if (
                not isinstance(max_length, (int, np.integer))
                or isinstance(max_length, bool)
                or max_length < 1
            ):
                raise ValueError(f"`max_length` must be a positive int, got {max_length!r}")
            n_special = _n_special_tokens(tokenizer)
            if max_length <= n_special:
                # transformers ignores such a max_length (BERT) or keeps only <s> (Llama)
                raise ValueError(
                    f"`max_length`={max_length} leaves no room for text: model {name!r}'s "
                    f"tokenizer adds {n_special} special token(s) to every text; pass "
                    f"max_length >= {n_special + 1}"
                )
            if max_length > limit:
                raise ValueError(
                    f"`max_length`={max_length} exceeds model {name!r}'s maximum of {limit} "
                    "positions; pass max_length <= that (longer texts are truncated)"
                )
        pad_id = getattr(tokenizer, "pad_token_id", None)
        if pad_id is None:
            pad_id = getattr(tokenizer, "eos_token_id", None) or 0
        runs.append(
            _Run(
                name=name,
                model=model,
                tokenizer=tokenizer,
                layers=_resolve_layers(layers, name, n_layers),
                max_length=int(max_length if max_length is not None else limit),
                implicit_max_length=max_length is None,
                pad_id=int(pad_id),
            )
        )
    return runs


def _n_special_tokens(tokenizer) -> int:
    count = getattr(tokenizer, "num_special_tokens_to_add", None)
    try:
        return int(count(pair=False)) if callable(count) else 0
    except Exception:  # noqa: BLE001 - a tokenizer without this notion adds none we know of
        return 0


def _model_device(model: nn.Module) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def _backbone(model: nn.Module) -> nn.Module:
    """The transformer without its task head (hidden states are the same, and no
    vocabulary-sized logits are computed)."""
    base = getattr(model, "base_model", None)
    return base if isinstance(base, nn.Module) else model
