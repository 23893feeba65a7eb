"""Provenance of an executed page: ``metadata["lmsim"]`` and the sentence under its title."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

PROVENANCE_TAG = "lmsim-provenance"
INJECTED_TAG = "injected-parameters"
# Jupyter Book 1 folds cells with this tag: readers see the parameters cells folded.
FOLD_TAG = "hide-cell"
# Keys papermill writes into a page's metadata that name the executing machine's files (its
# absolute input path and the runner's temporary output file): never kept in a page.
MACHINE_PATH_KEYS = ("input_path", "output_path")


def _format_value(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _format_seconds(seconds: float) -> str:
    """``"9.5 s"``, ``"2 min 0 s"`` (rounded to the second first: never "1 min 60 s"),
    ``"2 h 14 min"``."""
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def provenance_text(info: Mapping[str, Any]) -> str:
    """The provenance sentence inserted after the title of an executed notebook."""
    params = ", ".join(
        f"`{name}={_format_value(value)}`" for name, value in info["parameters"].items()
    )
    versions = ", ".join(f"{name} {version}" for name, version in info["versions"].items())
    status = "" if info.get("status", "ok") == "ok" else " **(execution FAILED)**"
    injected = ""
    if info.get("overrides"):
        injected = (
            " The first code cell below holds the notebook's own defaults (the smoke values CI"
            " runs); the cell after it, injected by papermill, sets this profile's values."
        )
    origin = ""
    source, page = info.get("source"), info.get("page")
    if source and page and Path(source).stem != page.rsplit("/", 1)[-1]:
        origin = (
            f"This page executes the source notebook `{source}` with the parameters of its "
            "own entry in `notebooks/runs.yml`. "
        )
    env = info.get("environment") or {}
    lock = ""
    if env.get("lock"):
        state = "matches" if env.get("matches_lock") else "differs from"
        lock = f" The environment {state} the lock `{env['lock']}` ({env['lock_sha256']})."
    dry = ""
    if info.get("dry_run"):
        from lmsim._dryrun import DRY_RUN_NOTE

        dry = f"**{DRY_RUN_NOTE}** "
    return (
        f"{dry}{origin}Executed with profile `{info['profile']}` on {info['date']} in "
        f"{_format_seconds(info['wall_time_s'])} ({info['device']}){status}; "
        f"parameters: {params or 'none'}; versions: {versions}.{lock}{injected}"
    )


def _title_index(cells: list) -> int:
    for index, cell in enumerate(cells):
        if cell.get("cell_type") == "markdown" and cell.get("source", "").lstrip().startswith("#"):
            return index
        if cell.get("cell_type") == "code":
            break
    return -1


def strip_machine_paths(metadata: dict) -> None:
    """Drop papermill's ``input_path`` and ``output_path`` from a page's ``metadata`` (in
    place): absolute paths of the machine that executed it, which a page must not keep."""
    papermill = metadata.get("papermill")
    if isinstance(papermill, dict):
        for key in MACHINE_PATH_KEYS:
            papermill.pop(key, None)


def add_provenance(path: str | Path, info: Mapping[str, Any]) -> None:
    """Record ``info`` in ``metadata["lmsim"]`` of the notebook at ``path`` and describe it
    in a markdown cell (tagged ``lmsim-provenance``) right after the title cell; papermill's
    machine paths are dropped from the metadata (:func:`strip_machine_paths`).

    Parameters
    ----------
    path : str or Path
        An executed notebook; rewritten in place.
    info : mapping
        ``profile, parameters, overrides, versions, device, wall_time_s, date, source,
        page, status`` (``page`` is ``"<slug>/<name>"``; it differs from the source's stem
        when the manifest entry has a ``source``), and optionally ``title``: the page's
        heading, replacing the first line of the source's title cell.
    """
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    nb.metadata["lmsim"] = dict(info)
    strip_machine_paths(nb.metadata)
    nb.cells = [
        cell for cell in nb.cells if PROVENANCE_TAG not in cell.get("metadata", {}).get("tags", [])
    ]
    cell = nbformat.v4.new_markdown_cell(provenance_text(info), metadata={"tags": [PROVENANCE_TAG]})
    title_at = _title_index(nb.cells)
    if info.get("title") and title_at >= 0:
        title_cell = nb.cells[title_at]
        rest = title_cell.source.lstrip().split("\n", 1)[1:]
        title_cell.source = "\n".join([f"# {info['title']}", *rest])
    nb.cells.insert(title_at + 1, cell)
    for cell in nb.cells:  # readers see the parameters folded (Jupyter Book's hide-cell)
        tags = cell.get("metadata", {}).get("tags", [])
        if {"parameters", INJECTED_TAG} & set(tags) and FOLD_TAG not in tags:
            cell.setdefault("metadata", {})["tags"] = [*tags, FOLD_TAG]
    nbformat.write(nb, str(path))
