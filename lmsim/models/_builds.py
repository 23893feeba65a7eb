"""Cached model folders: built once in a temporary folder, renamed into place, checked on use."""

from __future__ import annotations

import json
from pathlib import Path

from lmsim._cache import cache_dir
from lmsim._io import atomic_dir, move_aside


def _atomic_build(name: str, build, marker: dict) -> Path:
    """Return ``cache_dir("models")/name``, building it first in a temp dir if absent or stale.

    ``build(tmp_path)`` writes the model; the temp dir is renamed into place so an interrupted
    build never leaves a half directory. ``marker`` is stored as ``lmsim_build.json`` with
    the size of every file written; a directory whose marker differs is rebuilt, and one
    whose files are missing or of another size (truncated, half-copied) is named in a
    warning, moved aside (``<name>.corrupt``) and rebuilt.
    """
    target = cache_dir("models") / name
    marker_path = target / "lmsim_build.json"

    def problem() -> str | None:
        """None when the cached build is current and whole, else what is wrong."""
        try:
            stored = json.loads(marker_path.read_text())
        except FileNotFoundError:
            return "absent"
        except (OSError, ValueError) as err:
            return f"unreadable {marker_path.name} ({err})"
        if stored == marker:
            return None  # written before sizes were recorded
        if not isinstance(stored, dict) or stored.get("marker") != marker:
            return "stale"
        for file, size in stored.get("sizes", {}).items():
            path = target / file
            if not path.is_file():
                return f"{path} is missing"
            if path.stat().st_size != size:
                return f"{path} has {path.stat().st_size} bytes, {size} were written"
        return None

    found = problem()
    if found is None:
        return target
    if found not in ("absent", "stale"):
        move_aside(target, found, "rebuilding it", stacklevel=4)
    # A stale build is moved aside and replaced (two concurrent builds write the same bytes).
    with atomic_dir(target, replace=True) as tmp:
        build(tmp)
        sizes = {
            str(p.relative_to(tmp)): p.stat().st_size for p in sorted(tmp.rglob("*")) if p.is_file()
        }
        (tmp / "lmsim_build.json").write_text(json.dumps({"marker": marker, "sizes": sizes}))
    return target
