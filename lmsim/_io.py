"""Atomic writes: a file or folder appears complete or not at all; checked reads.

The one helper for every cache writer of lmsim (models, zoo, data, extraction): write
under a temporary name in the same folder, then ``os.replace`` into place. Readers check
what they read against a :func:`file_record` (size and sha256) kept at write time and
:func:`move_aside` what fails, so a corrupt entry is named once and recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "atomic_dir",
    "write_atomic",
    "write_json_atomic",
    "file_record",
    "check_record",
    "move_aside",
]


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary path next to ``path``, then rename it into place.

    The parent folder is created when missing (it may have been removed by a concurrent
    build that finished first). On error the temporary file is removed and ``path`` is
    left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One temporary name per writer (process and thread): two threads writing the same file
    # must not rename or remove each other's temporary.
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}-{threading.get_ident()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json_atomic(path: Path, payload, **dumps_kwargs) -> None:
    """Write ``json.dumps(payload)`` to ``path`` atomically."""
    text = json.dumps(payload, **dumps_kwargs)
    write_atomic(path, lambda tmp: tmp.write_text(text))


class atomic_dir:
    """Write a folder under a temporary name; rename it into place on success.

    Parameters
    ----------
    path : Path
        The folder to create.
    replace : bool
        When ``path`` exists at the end (another process finished first, or a stale
        build): False keeps the existing folder and discards ours; True moves the old one
        aside (a rename, atomic) and puts ours in place.

    Yields
    ------
    Path
        The temporary folder to write into (private to this process).
    """

    def __init__(self, path: Path, replace: bool = False):
        self.path = Path(path)
        self.replace = replace
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.tmp", dir=self.path.parent))
        self.tmp.chmod(0o755)  # mkdtemp makes it private; caches are shared like any folder
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        assert self.tmp is not None
        try:
            if exc_type is not None:
                return False
            if self.path.exists():
                if not self.replace:
                    return False  # built concurrently by another process: keep theirs
                trash = Path(
                    tempfile.mkdtemp(prefix=f".{self.path.name}.old", dir=self.path.parent)
                )
                os.replace(self.path, trash / self.path.name)
                shutil.rmtree(trash, ignore_errors=True)
            try:
                os.replace(self.tmp, self.path)
            except OSError:
                if not self.path.exists():
                    raise
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False


def file_record(path: Path) -> dict:
    """``{"size": bytes, "sha256": hex}`` of a file, to store at write time and check on read."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return {"size": Path(path).stat().st_size, "sha256": digest.hexdigest()}


def check_record(path: Path, record: dict | None) -> None:
    """Raise ``ValueError`` naming ``path`` when it differs from ``record`` (size, then hash).

    ``record`` None checks nothing (a file written before records were kept).
    """
    if not record:
        return
    size = Path(path).stat().st_size
    if size != record.get("size"):
        raise ValueError(f"{path} has {size} bytes, {record.get('size')} were written")
    if file_record(path)["sha256"] != record.get("sha256"):
        raise ValueError(f"{path}'s sha256 differs from the one recorded when it was written")


def move_aside(path: Path, reason: str, then: str, stacklevel: int = 3) -> Path:
    """Rename a corrupt cache file or folder to ``<name>.corrupt`` and warn, naming both.

    Parameters
    ----------
    path : Path
        The unreadable file or folder.
    reason : str
        What is wrong with it (the error it gave).
    then : str
        What happens instead, e.g. ``"recomputing it"``.

    Returns
    -------
    Path
        Where it now lies (kept for inspection; a later corruption replaces it).
    """
    path = Path(path)
    aside = path.with_name(path.name + ".corrupt")
    if aside.is_dir():
        shutil.rmtree(aside, ignore_errors=True)
    try:
        os.replace(path, aside)
    except FileNotFoundError:
        pass  # another process moved it first
    warnings.warn(
        f"corrupt cache entry {path}: {reason}; moved it to {aside.name} and {then}",
        stacklevel=stacklevel,
    )
    return aside
