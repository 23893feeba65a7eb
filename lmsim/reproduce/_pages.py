"""Which pages of the book a complete run wrote (provenance ``status: "ok"``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lmsim.reproduce._manifest import book_profile


def page_status(path: str | Path) -> str | None:
    """``metadata["lmsim"]["status"]`` of an executed page; None when the file is missing,
    unreadable or carries no provenance (not written by a complete run)."""
    try:
        meta = json.loads(Path(path).read_text()).get("metadata", {}).get("lmsim", {})
        return meta.get("status") if isinstance(meta, dict) else None
    except (OSError, ValueError, AttributeError):
        return None


def _executed_pages(manifest: Mapping[str, Any], root: Path) -> list[tuple[dict, list[str]]]:
    """Chapters and their pages that a complete run wrote (provenance ``status: "ok"``);
    pages marked ``default: skip`` are never among them, even when a file is left over,
    unless the book shows their ``gpu`` execution (:func:`book_profile`)."""
    present = []
    for chapter in manifest.get("chapters", []):
        slug = chapter["slug"]
        names = [
            entry["name"]
            for entry in chapter["notebooks"]
            if book_profile(entry) is not None
            and page_status(root / "book" / slug / f"{entry['name']}.ipynb") == "ok"
        ]
        if names:
            present.append((chapter, names))
    return present
