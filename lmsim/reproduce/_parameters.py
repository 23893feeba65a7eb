"""A source notebook's declared parameters (its ``parameters`` cell) and their types."""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def declared_parameters(source: str | Path) -> dict[str, dict[str, Any]]:
    """Return the parameters declared in a notebook's ``parameters`` cell.

    Returns
    -------
    dict
        Name → ``{"name", "inferred_type_name", "default", "help"}`` as
        :func:`papermill.inspect_notebook` reports them (``default`` is source text).
    """
    path = Path(source).resolve()
    return dict(_inspect(str(path), path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=256)
def _inspect(path: str, mtime_ns: int) -> dict[str, dict[str, Any]]:
    # keyed on the modification time: a notebook edited between two calls is re-read
    import papermill

    try:
        return dict(papermill.inspect_notebook(path))
    except Exception as err:  # noqa: BLE001 - nbformat and papermill raise many types
        raise ValueError(
            f"notebook {path!r} cannot be read ({type(err).__name__}: {str(err)[:200]}); "
            "it must be a valid .ipynb (restore it, e.g. with git checkout)"
        ) from None


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


# Declared type (``name: type = value`` in the parameters cell) -> accepted Python types.
_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "list": (list,),
    "dict": (dict,),
    "tuple": (tuple, list),
}


def check_parameter_type(source: Path, name: str, value: Any, spec: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` when ``value`` does not match the type ``name`` is declared with.

    Types other than those of :data:`_TYPES` (or none) are not checked; ``None`` passes
    where the declared default is ``None``; a bool is not an int.
    """
    declared = str(spec.get("inferred_type_name") or "").strip()
    accepted = _TYPES.get(declared)
    if accepted is None or (value is None and str(spec.get("default")).strip() == "None"):
        return
    if isinstance(value, bool) and bool not in accepted:
        ok = False
    else:
        ok = isinstance(value, accepted)
    if not ok:
        raise ValueError(
            f"parameter `{name}` of {source} is declared `{declared}` but got "
            f"{value!r} ({type(value).__name__}); pass a {declared} value (VALUE is YAML: "
            f"e.g. -p {name} {_example(declared)})"
        )


def _example(declared: str) -> str:
    return {
        "int": "3",
        "float": "0.5",
        "str": "text",
        "bool": "true",
        "list": "'[a, b]'",
        "dict": "'{a: 1}'",
        "tuple": "'[a, b]'",
    }[declared]
