"""Where lmsim keeps what it computes once: converted models, the zoo, activation moments."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """Return (and create) a folder under the lmsim cache.

    The root is ``$LMSIM_CACHE`` when set, else ``~/.cache/lmsim``.

    Parameters
    ----------
    *parts : str
        Sub-folders below the root, e.g. ``cache_dir("zoo", "default")``.
    """
    root = Path(os.environ.get("LMSIM_CACHE", Path.home() / ".cache" / "lmsim"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
