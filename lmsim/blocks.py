"""Block names: the one place that writes and reads ``"{model}/layer.{i}"``.

Every activation, moment and attention result of lmsim is keyed by a block name:
``"{model}/layer.{i}"`` with ``i = 0`` the embedding output and ``1..L`` the transformer
layers (as ``output_hidden_states`` numbers them). ``{model}`` is the name the user passed
and may itself contain ``/`` (``"zoo/mlm-s0"``, ``"org/name"``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "block_name",
    "blocks_at_depth",
    "is_layer_block",
    "layers_by_model",
    "model_of",
    "model_spans",
    "parse_block",
]

_SEP = "/layer."


def block_name(model: str, layer: int) -> str:
    """Block name of a model's layer: ``"{model}/layer.{i}"`` (``i = 0`` the embeddings).

    Parameters
    ----------
    model : str
        The model's name as the user passed it.
    layer : int
        ``0`` the embedding output, ``1..L`` the transformer layers.
    """
    if not isinstance(model, str) or not model:
        raise ValueError(f"`model` must be a non-empty str, got {model!r}")
    if isinstance(layer, bool) or not isinstance(layer, int) and not hasattr(layer, "__index__"):
        raise TypeError(f"`layer` must be an int, got {layer!r}")
    if int(layer) < 0:
        raise ValueError(f"`layer` must be >= 0 (0 = embeddings), got {layer}")
    return f"{model}{_SEP}{int(layer)}"


def parse_block(name: str) -> tuple[str, int]:
    """Split ``"{model}/layer.{i}"`` into ``(model, i)``.

    Raises
    ------
    ValueError
        ``name`` is not of that form.
    """
    model, sep, layer = str(name).rpartition(_SEP)
    if not sep or not model or not layer.isdigit():
        raise ValueError(f"block name {name!r} is not of the form '{{model}}/layer.{{i}}'")
    return model, int(layer)


def is_layer_block(name: str) -> bool:
    """Whether ``name`` is of the form ``"{model}/layer.{i}"``."""
    model, sep, layer = str(name).rpartition(_SEP)
    return bool(sep and model and layer.isdigit())


def model_of(name: str) -> str:
    """The model part of a layer block name, or ``name`` itself for any other block."""
    return parse_block(name)[0] if is_layer_block(name) else str(name)


def layers_by_model(names: Iterable[str]) -> dict[str, list[int]]:
    """Model -> sorted layer indices of the layer blocks among ``names`` (others ignored)."""
    out: dict[str, list[int]] = {}
    for name in names:
        if is_layer_block(name):
            model, layer = parse_block(name)
            out.setdefault(model, []).append(layer)
    return {m: sorted(v) for m, v in out.items()}


def model_spans(names: Sequence[str]) -> list[tuple[str, int, int]]:
    """``(model, start, stop)`` runs of consecutive block names of one model."""
    spans: list[tuple[str, int, int]] = []
    for i, name in enumerate(names):
        model = model_of(name)
        if spans and spans[-1][0] == model:
            spans[-1] = (model, spans[-1][1], i + 1)
        else:
            spans.append((model, i, i + 1))
    return spans


def blocks_at_depth(n_layers: dict[str, int], depth: float) -> dict[str, str]:
    """Model -> block name of the layer at relative ``depth`` (``round(depth * L)``).

    Parameters
    ----------
    n_layers : dict of str to int
        Each model's number of transformer layers ``L``.
    depth : float in [0, 1]
        0 the embeddings, 1 the last layer; models of different depths are aligned by it.
    """
    if not 0.0 <= float(depth) <= 1.0:
        raise ValueError(f"`depth` must lie in [0, 1], got {depth!r}")
    return {m: block_name(m, round(depth * n)) for m, n in n_layers.items()}
