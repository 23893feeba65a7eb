"""Planning: the manifest, a profile and the command line's choices become notebook runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmsim.reproduce._manifest import (
    MANIFEST,
    SKIP,
    ZOO_PROFILES,
    _check_profile,
    entry_source,
    is_skipped,
    output_dir_for,
)
from lmsim.reproduce._parameters import check_parameter_type, declared_parameters


@dataclass(frozen=True)
class NotebookRun:
    """One notebook to execute: where it is, where it goes, what it is given.

    Attributes
    ----------
    slug : str
        The chapter's slug (a BibTeX key, e.g. ``"zhang2022_lmd"``).
    name : str
        The page's name (the manifest entry's ``name``), e.g. ``"01_decomposition"``: the
        executed notebook is ``<slug>/<name>.ipynb``.
    source : Path
        The source notebook, ``notebooks/<slug>/<stem>.ipynb`` where ``stem`` is the
        entry's ``source`` (``name`` when it has none).
    output : Path
        Where the executed notebook is written.
    parameters : dict
        What papermill injects: the profile's overrides (plus ``profile`` when the
        notebook declares it, plus command-line overrides).
    title : str or None
        The entry's ``title``: replaces the source notebook's title on the executed page
        (a page that runs another page's source under its own name).
    """

    slug: str
    name: str
    source: Path
    output: Path
    parameters: dict[str, Any] = field(default_factory=dict)
    title: str | None = None

    @property
    def key(self) -> str:
        return f"{self.slug}/{self.name}"


def plan_runs(
    manifest: Mapping[str, Any],
    profile: str,
    root: str | Path,
    only: Sequence[str] | None = None,
    output_dir: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> list[NotebookRun]:
    """Turn the manifest into the list of notebooks to execute, validating everything first.

    Each entry's page executes its source notebook (:func:`entry_source`); pages marked
    ``skip`` for ``profile`` are left out (:func:`is_skipped`).

    Parameters
    ----------
    manifest : mapping
        As returned by :func:`load_manifest`.
    profile : {"smoke", "default", "paper"}
        Selects the overrides and the output folder.
    root : str or Path
        The repository root (holds ``notebooks/``).
    only : sequence of str, optional
        Chapters (``"slug"``) or single pages (``"slug/name"``) to keep; all by default.
    output_dir : str or Path, optional
        Overrides the profile's output folder.
    overrides : mapping, optional
        Parameters applied after the profile's, to every selected notebook that declares
        them (the ``-p NAME VALUE`` options).

    Raises
    ------
    ValueError
        Unknown profile, slug or page; a page asked for by ``only`` that is marked ``skip``
        for ``profile``; a manifest or command-line parameter the notebook does not
        declare (the message lists the declared ones) or of another type than the one it
        is declared with (the message names notebook, parameter, type and value); an
        output folder that is a file.
    FileNotFoundError
        A notebook listed in the manifest is missing on disk.
    """
    _check_profile(profile)
    root = Path(root)
    chapters = _select_chapters(list(manifest.get("chapters", [])), profile, only)
    out_root = output_dir_for(profile, root, output_dir)
    _check_output_folder(out_root)
    overrides = dict(overrides or {})
    runs: list[NotebookRun] = []
    used_overrides: set[str] = set()
    for chapter in chapters:
        for entry in chapter["notebooks"]:
            if is_skipped(entry, profile):
                continue
            run, used = _plan_run(chapter["slug"], entry, profile, root, out_root, overrides)
            runs.append(run)
            used_overrides |= used
    unused = sorted(set(overrides) - used_overrides)
    if unused and runs:
        raise ValueError(
            f"parameter(s) {unused} given with -p are declared by none of the selected "
            "notebooks; check the spelling with `papermill --help-notebook NOTEBOOK`"
        )
    return runs


def _select_chapters(chapters: list[dict], profile: str, only: Sequence[str] | None) -> list[dict]:
    """The chapters, each with only the pages ``only`` asks for (all when it is empty).

    Raises ``ValueError`` for an unknown slug or page, or a page asked for that is marked
    ``skip`` under ``profile``.
    """
    if not only:
        return chapters
    slugs = [chapter["slug"] for chapter in chapters]
    pages = {f"{c['slug']}/{entry['name']}" for c in chapters for entry in c["notebooks"]}
    unknown = [item for item in only if item not in slugs and item not in pages]
    if unknown:
        raise ValueError(
            f"unknown chapter slug(s) or page(s) {unknown} in --only; the manifest has "
            f"{slugs} (a page is 'slug/name', e.g. {sorted(pages)[0]!r})"
        )
    skipped = [
        f"{c['slug']}/{e['name']}"
        for c in chapters
        for e in c["notebooks"]
        if f"{c['slug']}/{e['name']}" in only and is_skipped(e, profile)
    ]
    if skipped:
        raise ValueError(
            f"page(s) {skipped} in --only are marked `{profile}: {SKIP}` in {MANIFEST}: "
            f"they do not run under profile {profile!r}; choose another --profile"
        )
    wanted = {p for p in pages if p in only or p.split("/", 1)[0] in only}
    kept = []
    for chapter in chapters:
        entries = [e for e in chapter["notebooks"] if f"{chapter['slug']}/{e['name']}" in wanted]
        if entries:
            kept.append({**chapter, "notebooks": entries})
    return kept


def _check_output_folder(out_root: Path) -> None:
    """Raise ``ValueError`` when ``out_root`` cannot be created: a file stands in its way."""
    for folder in (out_root, *out_root.parents):
        if folder.exists():
            if not folder.is_dir():
                raise ValueError(
                    f"output folder {str(out_root)!r} cannot be created: {str(folder)!r} is a "
                    "file; remove it or pass another --output-dir"
                )
            break


def _plan_run(
    slug: str,
    entry: Mapping[str, Any],
    profile: str,
    root: Path,
    out_root: Path,
    overrides: Mapping[str, Any],
) -> tuple[NotebookRun, set[str]]:
    """One page's run, and which of ``overrides`` its source notebook declares."""
    name = entry["name"]
    source = root / "notebooks" / slug / f"{entry_source(entry)}.ipynb"
    if not source.is_file():
        raise FileNotFoundError(
            f"notebook {slug}/{name} is listed in {MANIFEST} but {source} does not "
            "exist; add the notebook or remove its entry"
        )
    declared = declared_parameters(source)
    params = dict(entry.get(profile) or {}) if profile != "smoke" else {}
    undeclared = sorted(set(params) - set(declared))
    if undeclared:
        raise ValueError(
            f"{MANIFEST} sets parameter(s) {undeclared} for {slug}/{name} (profile "
            f"{profile!r}) but {source} does not declare them in its parameters "
            f"cell; declared: {sorted(declared)}"
        )
    used = {key for key in overrides if key in declared}
    params.update({key: value for key, value in overrides.items() if key in declared})
    for key, value in params.items():  # before any cell runs
        check_parameter_type(source, key, value, declared[key])
    if "profile" in declared:
        params["profile"] = profile
    if "zoo_profile" in declared and "zoo_profile" not in params and profile != "smoke":
        # The zoo build a profile's zoo/* names load, passed as a parameter (the
        # smoke profile runs the notebooks' own defaults, which are the smoke zoo).
        params["zoo_profile"] = ZOO_PROFILES[profile]
    output = out_root / slug / f"{name}.ipynb"
    return NotebookRun(slug, name, source, output, params, entry.get("title")), used
