"""Forward hooks, scoped: registered for a ``with`` block and removed in ``finally``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import torch
from torch import nn


@contextlib.contextmanager
def scoped_hooks(
    registrations: Sequence[tuple[nn.Module, Callable, str]],
) -> Iterator[list[torch.utils.hooks.RemovableHandle]]:
    """Register forward (pre-)hooks for the duration of a ``with`` block.

    The hooks are removed in ``finally``, so an exception inside the block (or inside a
    hook) never leaves a model with stray hooks.

    Parameters
    ----------
    registrations : sequence of (module, hook, kind)
        ``kind`` is ``"forward"`` (``hook(module, args, output)``) or ``"pre"``
        (``hook(module, args)``).

    Yields
    ------
    handles : list of RemovableHandle
    """
    handles = []
    try:
        for module, hook, kind in registrations:
            if kind == "forward":
                handles.append(module.register_forward_hook(hook))
            elif kind == "pre":
                handles.append(module.register_forward_pre_hook(hook))
            else:
                raise ValueError(f"hook kind must be 'forward' or 'pre', got {kind!r}")
        yield handles
    finally:
        for handle in handles:
            handle.remove()


def _first_tensor(output) -> torch.Tensor:
    """The hidden-state tensor of a module output: a tensor, a tuple's first item, or
    a ``ModelOutput``'s first field (transformers 5 decoder layers return tensors, older
    versions tuples)."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, Mapping):
        output = tuple(output.values())
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise TypeError(f"cannot find a tensor in a module output of type {type(output).__name__}")


@contextlib.contextmanager
def record_outputs(model: nn.Module, module_names: Sequence[str]) -> Iterator[dict]:
    """Capture the outputs of named submodules during forward passes.

    Parameters
    ----------
    model : nn.Module
    module_names : sequence of str
        Names as in ``model.named_modules()``, e.g. ``"encoder.layer.3"``.

    Yields
    ------
    captured : dict of str to Tensor
        Filled by each forward pass with the module's output tensor (tuple outputs give
        their first element), overwritten by the next pass.
    """
    modules = dict(model.named_modules())
    unknown = [n for n in module_names if n not in modules]
    if unknown:
        raise KeyError(f"modules {unknown} not found in the model; see model.named_modules()")
    captured: dict[str, torch.Tensor] = {}

    def make_hook(name):
        def hook(_module, _args, output):
            captured[name] = _first_tensor(output)

        return hook

    with scoped_hooks([(modules[n], make_hook(n), "forward") for n in module_names]):
        yield captured
