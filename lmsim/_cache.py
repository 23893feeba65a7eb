"""Where lmsim keeps what it computes once: converted models, the zoo, activation moments
(``acts/``) and word-level attentions (``attn/``)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The lmsim cache's root: ``$LMSIM_CACHE`` when set, else ``~/.cache/lmsim`` (not
    created, and without the dry run's ``dry-run`` sub-folder that :func:`cache_dir` adds)."""
    return Path(os.environ.get("LMSIM_CACHE", Path.home() / ".cache" / "lmsim"))


def check_name(name, what: str) -> str:
    """``name`` when it is one plain folder or file name, else a ``ValueError`` naming
    ``what`` it is for (a profile, a run): no ``..``, no separator, nothing absolute."""
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "/" in name
        or "\\" in name
        or "\x00" in name
    ):
        raise ValueError(
            f"{what} must be a plain folder name (letters, digits, '-', '_', '.'; no '/' or "
            f"'..'), got {name!r}"
        )
    return name


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
    ValueError
        A part that is not one plain folder name (empty, ``.``, ``..``, absolute or holding
        a path separator): nothing may reach outside the cache.
    NotADirectoryError, PermissionError
        The root is a file, or the folder is missing and cannot be created; the message
        names ``LMSIM_CACHE`` and the fix.
    """
    from lmsim._dryrun import dry_run

    for part in parts:
        check_name(part, "a cache folder")
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
