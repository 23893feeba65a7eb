"""Where lmsim keeps what it computes once: converted models, the zoo, activation moments
(``acts/``) and word-level attentions (``attn/``)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The lmsim cache's root: ``$LMSIM_CACHE`` when set, else ``~/.cache/lmsim`` (not
    created, and without the dry run's ``dry-run`` sub-folder that :func:`cache_dir` adds)."""
    return Path(os.environ.get("LMSIM_CACHE", Path.home() / ".cache" / "lmsim"))


def cache_dir(*parts: str) -> Path:
    """Return (and create) a folder under the lmsim cache.

    The root is ``$LMSIM_CACHE`` when set, else ``~/.cache/lmsim``; during a dry run
    (:mod:`lmsim._dryrun`) its ``dry-run`` sub-folder, except for the zoo. A folder that exists
    but is not writable (a shared or CI cache) is returned as it is: what it holds can be
    read; writing a new entry there raises ``PermissionError`` naming the folder
    (:mod:`lmsim._io`).

    Parameters
    ----------
    *parts : str
        Sub-folders below the root, e.g. ``cache_dir("zoo", "default")``.

    Raises
    ------
    NotADirectoryError, PermissionError
        The root is a file, or the folder is missing and cannot be created; the message
        names ``LMSIM_CACHE`` and the fix.
    """
    from lmsim._dryrun import dry_run

    from_env = "LMSIM_CACHE" in os.environ
    root = cache_root()
    if dry_run() and parts[:1] != ("zoo",):
        # Stand-ins never mix with real models, extractions or fine-tunes; the zoo (lmsim's
        # own models, trained offline) is the same in a dry run and is shared.
        root = root / "dry-run"
    path = root.joinpath(*parts)
    source = "$LMSIM_CACHE" if from_env else "the default cache (~/.cache/lmsim)"
    fix = "set LMSIM_CACHE to a writable folder (e.g. export LMSIM_CACHE=/tmp/lmsim-cache)"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise NotADirectoryError(
            f"the lmsim cache {str(root)!r} ({source}) is not a folder: "
            f"{str(path)!r} cannot be created below a file; {fix}"
        ) from None
    except PermissionError:
        if path.is_dir():
            return path  # read-only: its entries can still be read
        raise PermissionError(
            f"the lmsim cache {str(root)!r} ({source}) is not writable: cannot create "
            f"{str(path)!r}; {fix}"
        ) from None
    return path
