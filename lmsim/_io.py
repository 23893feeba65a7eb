"""Atomic writes: a file or folder appears complete or not at all.

The one helper for every cache writer of lmsim (models, zoo, data, extraction): write
under a temporary name in the same folder, then ``os.replace`` into place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_dir", "write_atomic", "write_json_atomic"]


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary path next to ``path``, then rename it into place.

    The parent folder is created when missing (it may have been removed by a concurrent
    build that finished first). On error the temporary file is removed and ``path`` is
    left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
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
