"""Grams and Fishers files: safetensors (which cannot execute code when loaded), checked on
reading, optionally read one tensor at a time."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch

from lmsim.merge._algebra import _as_f64


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


def _unreadable(path, kind: str, err: Exception) -> ValueError:
    writer = f"save_{kind}" if kind in ("grams", "fishers") else "save_grams or save_fishers"
    return ValueError(
        f"{str(path)!r} is not a readable {kind} file ({type(err).__name__}: {err}); it is "
        f"truncated or not safetensors: recompute it and write it with {writer}"
    )


def _safe_open(path, kind: str):
    """``safe_open`` of ``path``; a file safetensors cannot parse raises ``ValueError``
    naming it (safetensors' own error names no file)."""
    from safetensors import SafetensorError, safe_open

    try:
        return safe_open(str(path), framework="pt", device="cpu")
    except (SafetensorError, OSError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise _unreadable(path, kind, err) from None


def _open_checked(path, kind: str) -> dict[str, list[int]]:
    """Check a saved file's kind and return its recorded shapes."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {kind} file at {str(path)!r}; write one with save_{kind}")
    with _safe_open(path, kind) as handle:
        meta = handle.metadata() or {}
        keys = list(handle.keys())
    if meta.get("lmsim_kind") != kind:
        raise ValueError(
            f"{str(path)!r} holds {meta.get('lmsim_kind', 'no lmsim data')!r}, not {kind}; "
            f"load it with load_{meta.get('lmsim_kind', kind)}"
        )
    try:
        shapes = json.loads(meta["shapes"])
        if not isinstance(shapes, dict):
            raise ValueError("not a JSON object")
    except (KeyError, ValueError) as err:
        raise _unreadable(path, kind, ValueError(f"metadata 'shapes' is bad: {err}")) from None
    if sorted(keys) != sorted(shapes):
        raise ValueError(
            f"{str(path)!r} holds tensors {sorted(set(keys) ^ set(shapes))[:5]} that its "
            "metadata does not list (or lacks ones it lists); the file is corrupt: recompute it"
        )
    return shapes


def _read_checked(handle, path, kind: str, name: str, shapes, device) -> torch.Tensor:
    from safetensors import SafetensorError

    try:
        t = handle.get_tensor(name)
    except SafetensorError as err:
        raise _unreadable(path, kind, err) from None
    if list(t.shape) != shapes[name]:
        raise ValueError(
            f"{kind[:-1]} {name!r} in {str(path)!r} has shape {list(t.shape)}, its "
            f"metadata says {shapes[name]}; the file is corrupt: recompute it"
        )
    if not torch.isfinite(t).all():
        raise ValueError(f"{kind[:-1]} {name!r} in {str(path)!r} contains NaN or Inf")
    return t.to(device)


def _load_tensors(path, kind: str, device) -> dict[str, torch.Tensor]:
    shapes = _open_checked(path, kind)
    with _safe_open(path, kind) as handle:
        return {n: _read_checked(handle, path, kind, n, shapes, device) for n in shapes}


class _LazyTensors(Mapping):
    """A saved file's tensors, read (and checked) one at a time on access.

    Lets :func:`merge_models` hold one layer's Gram at a time instead of a model's all.
    """

    def __init__(self, path, kind: str, device="cpu"):
        self.path, self.kind, self.device = Path(path), kind, device
        self.shapes = _open_checked(path, kind)

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self.shapes:
            raise KeyError(name)
        with _safe_open(self.path, self.kind) as handle:
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
    if not Path(path).is_file():
        raise FileNotFoundError(f"no Grams or Fishers file at {str(path)!r}")
    with _safe_open(path, "grams or fishers") as handle:
        meta = handle.metadata() or {}
    return json.loads(meta.get("user", "{}"))
