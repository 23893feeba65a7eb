"""The manifest ``notebooks/runs.yml``: profiles, chapters, pages and their source notebooks."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

PROFILES: tuple[str, ...] = ("smoke", "default", "paper", "gpu")
ZOO_PROFILES: dict[str, str] = {
    "smoke": "smoke",
    "default": "default",
    "paper": "gpu",
    "gpu": "default",
}
# Profiles that run only the pages declaring them (a mapping under the profile's name): the
# `gpu` profile is the default profile's offline data at the scale of one GPU machine, for the
# pages sized for it; their executed pages go into the book beside the default ones.
OPT_IN_PROFILES: tuple[str, ...] = ("gpu",)
# Profiles whose executed pages are the book's (book/): the default and the opt-in ones.
BOOK_PROFILES: tuple[str, ...] = ("default", *OPT_IN_PROFILES)
MANIFEST = Path("notebooks") / "runs.yml"
_CHAPTER_KEYS = {"slug", "title", "notebooks"}
_ENTRY_KEYS = {"name", "source", "verify", "title", "barrier", "needs", "withdrawn"}
# A profile's value that keeps a page from running under that profile.
SKIP = "skip"
# The five papers the book sets out to reproduce; the slugs are their BibTeX keys.
PLANNED_CHAPTERS: dict[str, str] = {
    "zhang2022_lmd": "Language model decomposition",
    "wu2020_similarity": "Similarity analysis of contextual word representations",
    "jin2023_regmean": "Dataless knowledge fusion by merging weights (RegMean)",
    "thesis2022_redundancy": "Distillation and redundancy",
    "he2022_twotower": "Spontaneous emerging preference in a two-tower language model",
}


def find_root(start: str | Path | None = None) -> Path:
    """Return the repository root: the first folder from ``start`` upwards with a manifest.

    Parameters
    ----------
    start : str or Path, optional
        Where to start looking; the current directory by default.
    """
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / MANIFEST).is_file():
            return folder
    package_root = Path(__file__).resolve().parents[2]
    if (package_root / MANIFEST).is_file():
        return package_root
    raise FileNotFoundError(
        f"no {MANIFEST} found in {here} or its parents; run from the lmsim repository "
        "or pass --root"
    )


def load_manifest(path: str | Path) -> dict[str, Any]:
    """Read and validate ``runs.yml``.

    Parameters
    ----------
    path : str or Path
        The manifest file.

    Returns
    -------
    dict
        ``{"profiles": {name: description}, "chapters": [chapter, ...]}`` where each chapter
        is ``{"slug", "title", "notebooks": [entry, ...]}`` and each entry
        ``{"name", ["source",] <profile>: {...} or "skip", ...}``.

    Raises
    ------
    ValueError
        When the file is not valid YAML (the message gives the line) or a chapter or
        notebook entry is malformed (the message names the entry): an unknown key, a
        profile's value that is neither a mapping nor the string ``skip``, a ``source``
        that is not the stem of a notebook in ``notebooks/<slug>/`` next to the manifest,
        or a page with a ``source`` whose own name is the stem of another source notebook.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"manifest {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(
            f"manifest {str(path)!r} is not valid YAML{at}: {problem}; fix the file"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"manifest {str(path)!r} must be a mapping, got {type(data).__name__}")
    chapters = data.get("chapters") or []
    if not isinstance(chapters, list):
        raise ValueError(f"`chapters` in {str(path)!r} must be a list of chapter mappings")
    seen: set[str] = set()
    for index, chapter in enumerate(chapters):
        where = f"chapter #{index} in {str(path)!r}"
        if not isinstance(chapter, dict) or "slug" not in chapter:
            raise ValueError(f"{where} must be a mapping with a `slug`, got {chapter!r}")
        slug = chapter["slug"]
        if slug in seen:
            raise ValueError(f"chapter slug {slug!r} appears twice in {str(path)!r}")
        seen.add(slug)
        unknown = set(chapter) - _CHAPTER_KEYS
        if unknown:
            raise ValueError(
                f"chapter {slug!r} has unknown keys {sorted(unknown)}; "
                f"allowed: {sorted(_CHAPTER_KEYS)}"
            )
        notebooks = chapter.setdefault("notebooks", []) or []
        chapter["notebooks"] = notebooks
        chapter.setdefault("title", slug)
        names: set[str] = set()
        for entry in notebooks:
            if not isinstance(entry, dict) or "name" not in entry:
                raise ValueError(
                    f"a notebook entry of chapter {slug!r} must be a mapping with a `name`, "
                    f"got {entry!r}"
                )
            if entry["name"] in names:
                raise ValueError(f"notebook {entry['name']!r} appears twice in chapter {slug!r}")
            names.add(entry["name"])
            for key, value in entry.items():
                if key in _ENTRY_KEYS:
                    continue
                if key not in PROFILES:
                    raise ValueError(
                        f"notebook {slug}/{entry['name']} has key {key!r}, which is neither a "
                        f"profile nor one of {sorted(_ENTRY_KEYS)}; use one of "
                        f"{list(PROFILES)} or {sorted(_ENTRY_KEYS)}"
                    )
                if value is not None and value != SKIP and not isinstance(value, dict):
                    raise ValueError(
                        f"the {key!r} value of {slug}/{entry['name']} must be a mapping of "
                        f"parameter names to values, or the string {SKIP!r} to not run the "
                        f"page under that profile; got {value!r}"
                    )
            if "source" in entry:
                _check_source(path.parent, slug, entry)
            title = entry.get("title")
            if title is not None and (not isinstance(title, str) or "\n" in title or not title):
                raise ValueError(
                    f"`title` of {slug}/{entry['name']} must be one line of text (the page's "
                    f"heading), got {title!r}"
                )
            from lmsim.reproduce._schedule import check_schedule_entry

            check_schedule_entry(entry, f"{path}: notebook {slug}/{entry['name']}")
            if "verify" in entry:
                from lmsim.reproduce._verify import check_verify_entry

                check_verify_entry(entry["verify"], f"{path}: notebook {slug}/{entry['name']}")
    data["chapters"] = chapters
    data.setdefault("profiles", {name: "" for name in PROFILES})
    return data


def _check_source(folder: Path, slug: str, entry: Mapping[str, Any]) -> None:
    """Validate an entry's ``source`` against the notebooks in ``folder/<slug>/``."""
    name, stem = entry["name"], entry["source"]
    if not isinstance(stem, str) or not stem or "/" in stem or "\\" in stem:
        raise ValueError(
            f"`source` of {slug}/{name} must be the file stem of a notebook in "
            f"notebooks/{slug}/ (e.g. `source: 01_merging`), got {stem!r}"
        )
    if stem.endswith(".ipynb"):
        raise ValueError(
            f"`source` of {slug}/{name} is {stem!r}; give the stem without .ipynb: "
            f"`source: {stem.removesuffix('.ipynb')}`"
        )
    existing = sorted(p.stem for p in (folder / slug).glob("*.ipynb"))
    if stem not in existing:
        raise ValueError(
            f"`source: {stem}` of {slug}/{name} names no notebook: "
            f"{folder / slug / stem}.ipynb does not exist; notebooks of {slug!r}: {existing}"
        )
    if stem != name and name in existing:
        raise ValueError(
            f"page {slug}/{name} runs `source: {stem}`, but notebooks/{slug}/{name}.ipynb is "
            "another source notebook, which its executed page would be mistaken for; rename "
            "the page or drop its `source`"
        )


def entry_source(entry: Mapping[str, Any]) -> str:
    """The stem of the source notebook a manifest entry executes: its ``source``, else its
    ``name``."""
    return entry.get("source") or entry["name"]


def is_skipped(entry: Mapping[str, Any], profile: str) -> bool:
    """Whether the entry's page does not run under ``profile``: the manifest marks it
    ``skip``, or ``profile`` is opt-in (:data:`OPT_IN_PROFILES`) and the entry declares no
    parameters for it."""
    if profile in OPT_IN_PROFILES:
        return not isinstance(entry.get(profile), dict)
    return entry.get(profile) == SKIP


def book_profile(entry: Mapping[str, Any]) -> str | None:
    """The profile whose execution of the entry's page the book shows.

    ``"default"`` unless the page is marked ``default: skip``; then the first opt-in profile
    it declares parameters for (``"gpu"``: executed on a GPU machine with ``--profile gpu``
    and committed, a CPU build keeps that page as it is), else None (not in the book).
    """
    return next((p for p in BOOK_PROFILES if not is_skipped(entry, p)), None)


def page_sources(manifest: Mapping[str, Any]) -> dict[str, str]:
    """Every page of the manifest and the source notebook it executes.

    Returns
    -------
    dict
        ``"<slug>/<name>"`` (the page, ``book/<slug>/<name>.ipynb`` once executed) to
        ``"<slug>/<stem>"`` (its source, ``notebooks/<slug>/<stem>.ipynb``), in manifest
        order.
    """
    return {
        f"{chapter['slug']}/{entry['name']}": f"{chapter['slug']}/{entry_source(entry)}"
        for chapter in manifest.get("chapters", [])
        for entry in chapter["notebooks"]
    }


def output_dir_for(profile: str, root: str | Path, output_dir: str | Path | None = None) -> Path:
    """Return the folder that receives ``<slug>/<name>.ipynb`` for ``profile``.

    ``default`` and ``gpu`` (pages of the book executed on a GPU machine) → ``book/``;
    ``smoke`` and ``paper`` → ``_build/<profile>/``; an explicit ``output_dir`` wins.
    """
    _check_profile(profile)
    if output_dir is not None:
        return Path(output_dir)
    root = Path(root)
    return root / "book" if profile in BOOK_PROFILES else root / "_build" / profile


def _check_profile(profile: str) -> None:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {list(PROFILES)}")
