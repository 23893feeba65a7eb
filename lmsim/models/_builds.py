"""Cached model folders: built once in a temporary folder, renamed into place, checked on use."""

from __future__ import annotations

import json
from pathlib import Path

from lmsim._cache import cache_dir
from lmsim._io import MARKER, entry_dir, open_entry

_BUILD_JSON = "lmsim_build.json"


def _legacy_sizes(path: Path) -> dict | None:
    """Sizes recorded by a build written before entry markers (None: not such a build)."""
    facts = path / _BUILD_JSON
    if not facts.is_file():
        return None
    stored = json.loads(facts.read_text())
    if not isinstance(stored, dict):
        raise ValueError(f"{facts} is not a JSON object")
    return dict(stored.get("sizes", {}))  # the oldest builds recorded no sizes


def _atomic_build(name: str, build, marker: dict) -> Path:
    """Return ``cache_dir("models")/name``, building it first in a temp dir if absent or stale.

    ``build(tmp_path)`` writes the model; the temp dir is renamed into place so an interrupted
    build never leaves a half directory. It is a verified cache entry
    (:class:`lmsim._io.entry_dir`: the size and sha256 of every file), and ``marker`` is
    stored as ``lmsim_build.json``; a build whose marker differs is rebuilt, and one whose
    files are missing or differ from their records (truncated, half-copied, overwritten)
    is named in a warning, moved aside (``<name>.corrupt``) and rebuilt.
    """
    target = cache_dir("models") / name
    if open_entry(target, "rebuilding it", legacy=_legacy_sizes, stacklevel=4):
        stored = json.loads((target / _BUILD_JSON).read_text())
        if stored == marker or (isinstance(stored, dict) and stored.get("marker") == marker):
            return target
    # A stale build is replaced (two concurrent builds write the same bytes).
    with entry_dir(target, replace=True) as tmp:
        build(tmp)
        sizes = {
            str(p.relative_to(tmp)): p.stat().st_size
            for p in sorted(tmp.rglob("*"))
            if p.is_file() and p.name != MARKER
        }
        (tmp / _BUILD_JSON).write_text(json.dumps({"marker": marker, "sizes": sizes}))
    return target
