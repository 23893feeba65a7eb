"""Execute the book's notebooks with papermill under a named profile.

The manifest ``notebooks/runs.yml`` lists every chapter (``slug``, ``title``) and its
notebooks in order; each notebook entry may override parameters per profile::

    chapters:
      - slug: zhang2022_lmd
        title: "Language model decomposition (Zhang et al., 2022)"
        notebooks:
          - name: 01_decomposition
            default: {models: [minilm-l6, smollm2-135m], n_train: 2000}
            paper: {models: [bert-base-uncased, roberta-base]}
          - name: 02_decomposition_gpu
            source: 01_decomposition      # runs notebooks/<slug>/01_decomposition.ipynb
            smoke: skip                   # not run under smoke (its source is)
            default: skip                 # nor by the book: a paper-only page
            paper: {models: [gpt2, xlnet-base-cased]}

An entry's ``name`` is its page: the executed notebook is ``<slug>/<name>.ipynb``. By default
the page runs the source notebook of the same name; ``source: <stem>`` makes it run
``notebooks/<slug>/<stem>.ipynb`` instead, so one source notebook yields several pages with
different parameters (a page's name must then not be the stem of another source notebook).
A profile's value is either a mapping of parameter overrides or the string ``skip``: the
page does not run under that profile (``--list`` says so; a ``default: skip`` page has no
executed page in ``book/`` and is left out of the table of contents). nbval still runs
every *source* notebook with its parameters cell, whatever the pages' ``smoke`` values.

The parameters cell of each source notebook holds the *smoke* values, so the ``smoke``
profile overrides nothing. ``default`` writes the executed pages the book renders
(``book/<slug>/<name>.ipynb``); ``smoke`` and ``paper`` write under ``_build/<profile>/``.
Notebooks whose parameters cell declares ``profile`` receive the profile's name.

Each notebook runs with its *source folder* (``notebooks/<slug>/``) as the working
directory, as when it is opened in Jupyter or run by nbval, so relative paths behave the
same everywhere. Notebooks that declare ``zoo_profile`` receive the zoo build of the
profile (smoke → ``smoke``, default → ``default``, paper → ``gpu``) as a parameter, unless
the manifest sets it; no environment variable carries it.

Every executed notebook records its provenance: ``metadata["lmsim"]`` holds the profile,
parameters, package versions, device (on CPU with torch's instruction set and lmsim's
default thread count), wall time, date, source path and status, and a markdown cell after
the title says the same in words. The parameters cell and papermill's injected one are
tagged ``hide-cell``: the book shows them folded.

Pages are replaced atomically: papermill executes into a temporary file next to the page,
which replaces the page only when every cell ran. A failed run keeps the previous page,
says so on stderr, exits 1 and leaves the failed execution (with its traceback) under
``_build/failed/<profile>/<slug>/<name>.ipynb``; a killed run leaves the previous page
untouched. ``--write-toc`` lists only pages whose provenance says ``status: "ok"``.

Usage::

    python -m lmsim.reproduce --profile default [--only SLUG[/PAGE] ...] [--output-dir DIR]
    python -m lmsim.reproduce --profile smoke -p n_train 100
    python -m lmsim.reproduce --list
    python -m lmsim.reproduce --write-toc
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import functools
import json
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "PROFILES",
    "ZOO_PROFILES",
    "NotebookRun",
    "RunResult",
    "find_root",
    "load_manifest",
    "SKIP",
    "entry_source",
    "is_skipped",
    "page_sources",
    "output_dir_for",
    "declared_parameters",
    "plan_runs",
    "execute_run",
    "failed_path",
    "page_status",
    "add_provenance",
    "build_toc",
    "chapter_status_markdown",
    "write_toc",
    "main",
]

PROFILES: tuple[str, ...] = ("smoke", "default", "paper")
ZOO_PROFILES: dict[str, str] = {"smoke": "smoke", "default": "default", "paper": "gpu"}
MANIFEST = Path("notebooks") / "runs.yml"
PROVENANCE_TAG = "lmsim-provenance"
INJECTED_TAG = "injected-parameters"
FOLD_TAG = "hide-cell"
_CHAPTER_KEYS = {"slug", "title", "notebooks"}
_ENTRY_KEYS = {"name", "source"}
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
    """

    slug: str
    name: str
    source: Path
    output: Path
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.slug}/{self.name}"


@dataclass(frozen=True)
class RunResult:
    """Outcome of one :class:`NotebookRun`: ``ok``, wall time and, on failure, the error."""

    run: NotebookRun
    ok: bool
    wall_time_s: float
    error: str | None = None


# ---------------------------------------------------------------------------- manifest
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
    package_root = Path(__file__).resolve().parents[1]
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
    """Whether the manifest marks the entry's page ``skip`` under ``profile``."""
    return entry.get(profile) == SKIP


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

    ``default`` → ``book/``; ``smoke`` and ``paper`` → ``_build/<profile>/``; an explicit
    ``output_dir`` wins.
    """
    _check_profile(profile)
    if output_dir is not None:
        return Path(output_dir)
    root = Path(root)
    return root / "book" if profile == "default" else root / "_build" / profile


def declared_parameters(source: str | Path) -> dict[str, dict[str, Any]]:
    """Return the parameters declared in a notebook's ``parameters`` cell.

    Returns
    -------
    dict
        Name → ``{"name", "inferred_type_name", "default", "help"}`` as
        :func:`papermill.inspect_notebook` reports them (``default`` is source text).
    """
    path = Path(source).resolve()
    return dict(_inspect(str(path), path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=256)
def _inspect(path: str, mtime_ns: int) -> dict[str, dict[str, Any]]:
    # keyed on the modification time: a notebook edited between two calls is re-read
    import papermill

    return dict(papermill.inspect_notebook(path))


def _check_profile(profile: str) -> None:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {list(PROFILES)}")


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


# Declared type (``name: type = value`` in the parameters cell) -> accepted Python types.
_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "list": (list,),
    "dict": (dict,),
    "tuple": (tuple, list),
}


def check_parameter_type(source: Path, name: str, value: Any, spec: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` when ``value`` does not match the type ``name`` is declared with.

    Types other than those of :data:`_TYPES` (or none) are not checked; ``None`` passes
    where the declared default is ``None``; a bool is not an int.
    """
    declared = str(spec.get("inferred_type_name") or "").strip()
    accepted = _TYPES.get(declared)
    if accepted is None or (value is None and str(spec.get("default")).strip() == "None"):
        return
    if isinstance(value, bool) and bool not in accepted:
        ok = False
    else:
        ok = isinstance(value, accepted)
    if not ok:
        raise ValueError(
            f"parameter `{name}` of {source} is declared `{declared}` but got "
            f"{value!r} ({type(value).__name__}); pass a {declared} value (VALUE is YAML: "
            f"e.g. -p {name} {_example(declared)})"
        )


def _example(declared: str) -> str:
    return {
        "int": "3",
        "float": "0.5",
        "str": "text",
        "bool": "true",
        "list": "'[a, b]'",
        "dict": "'{a: 1}'",
        "tuple": "'[a, b]'",
    }[declared]


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
    chapters = list(manifest.get("chapters", []))
    slugs = [chapter["slug"] for chapter in chapters]
    pages = {f"{c['slug']}/{entry['name']}" for c in chapters for entry in c["notebooks"]}
    if only:
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
            entries = [
                e for e in chapter["notebooks"] if f"{chapter['slug']}/{e['name']}" in wanted
            ]
            if entries:
                kept.append({**chapter, "notebooks": entries})
        chapters = kept
    out_root = output_dir_for(profile, root, output_dir)
    for folder in (out_root, *out_root.parents):
        if folder.exists():
            if not folder.is_dir():
                raise ValueError(
                    f"output folder {str(out_root)!r} cannot be created: {str(folder)!r} is a "
                    "file; remove it or pass another --output-dir"
                )
            break
    overrides = dict(overrides or {})
    runs: list[NotebookRun] = []
    used_overrides: set[str] = set()
    for chapter in chapters:
        slug = chapter["slug"]
        for entry in chapter["notebooks"]:
            name = entry["name"]
            if is_skipped(entry, profile):
                continue
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
            for key, value in overrides.items():
                if key in declared:
                    params[key] = value
                    used_overrides.add(key)
            for key, value in params.items():  # before any cell runs
                check_parameter_type(source, key, value, declared[key])
            if "profile" in declared:
                params["profile"] = profile
            if "zoo_profile" in declared and "zoo_profile" not in params and profile != "smoke":
                # The zoo build a profile's zoo/* names load, passed as a parameter (the
                # smoke profile runs the notebooks' own defaults, which are the smoke zoo).
                params["zoo_profile"] = ZOO_PROFILES[profile]
            output = out_root / slug / f"{name}.ipynb"
            runs.append(NotebookRun(slug, name, source, output, params))
    unused = sorted(set(overrides) - used_overrides)
    if unused and runs:
        raise ValueError(
            f"parameter(s) {unused} given with -p are declared by none of the selected "
            "notebooks; check the spelling with `papermill --help-notebook NOTEBOOK`"
        )
    return runs


# --------------------------------------------------------------------------- execution
def _relative(path: Path, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def _versions() -> dict[str, str]:
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for package in ("lmsim", "torch", "transformers", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def _device() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return f"cuda ({torch.cuda.get_device_name(0)})"
        from lmsim._threads import default_threads

        # The instruction set torch dispatches to and the threads lmsim uses by default:
        # what a CPU build of a trained model depends on beyond its seed.
        capability, n = torch.backends.cpu.get_cpu_capability(), default_threads()
        return f"cpu ({os.cpu_count()} cores, {capability}, {n} thread{'s' * (n != 1)})"
    except ImportError:
        pass
    return f"cpu ({os.cpu_count()} cores)"


def _format_value(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _format_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{int(minutes)} min {secs:.0f} s"
    hours, minutes = divmod(minutes, 60)
    return f"{int(hours)} h {int(minutes)} min"


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
    return (
        f"{origin}Executed with profile `{info['profile']}` on {info['date']} in "
        f"{_format_seconds(info['wall_time_s'])} ({info['device']}){status}; "
        f"parameters: {params or 'none'}; versions: {versions}.{injected}"
    )


def _title_index(cells: list) -> int:
    for index, cell in enumerate(cells):
        if cell.get("cell_type") == "markdown" and cell.get("source", "").lstrip().startswith("#"):
            return index
        if cell.get("cell_type") == "code":
            break
    return -1


def add_provenance(path: str | Path, info: Mapping[str, Any]) -> None:
    """Record ``info`` in ``metadata["lmsim"]`` of the notebook at ``path`` and describe it
    in a markdown cell (tagged ``lmsim-provenance``) right after the title cell.

    Parameters
    ----------
    path : str or Path
        An executed notebook; rewritten in place.
    info : mapping
        ``profile, parameters, overrides, versions, device, wall_time_s, date, source,
        page, status`` (``page`` is ``"<slug>/<name>"``; it differs from the source's stem
        when the manifest entry has a ``source``).
    """
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    nb.metadata["lmsim"] = dict(info)
    nb.cells = [
        cell for cell in nb.cells if PROVENANCE_TAG not in cell.get("metadata", {}).get("tags", [])
    ]
    cell = nbformat.v4.new_markdown_cell(provenance_text(info), metadata={"tags": [PROVENANCE_TAG]})
    nb.cells.insert(_title_index(nb.cells) + 1, cell)
    for cell in nb.cells:  # readers see the parameters folded (Jupyter Book's hide-cell)
        tags = cell.get("metadata", {}).get("tags", [])
        if {"parameters", INJECTED_TAG} & set(tags) and FOLD_TAG not in tags:
            cell.setdefault("metadata", {})["tags"] = [*tags, FOLD_TAG]
    nbformat.write(nb, str(path))


def failed_path(run: NotebookRun, profile: str, root: str | Path) -> Path:
    """Where a failed execution of ``run`` is kept for debugging:
    ``_build/failed/<profile>/<slug>/<name>.ipynb`` (outside ``book/``, so the book never
    renders it and the previous good page stays in place)."""
    return Path(root) / "_build" / "failed" / profile / run.slug / f"{run.name}.ipynb"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_dead_temporaries(output: Path) -> None:
    """Delete ``.<name>.running<pid>.ipynb`` files left by killed runs (dead pids only)."""
    for tmp in output.parent.glob(f".{output.stem}.running*.ipynb"):
        pid = tmp.name.removeprefix(f".{output.stem}.running").removesuffix(".ipynb")
        if pid.isdigit() and not _pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)


def execute_run(
    run: NotebookRun,
    profile: str,
    root: str | Path,
    progress_bar: bool = True,
    log_output: bool = False,
) -> RunResult:
    """Execute one notebook with papermill and stamp its provenance; replace the page
    only on success.

    The kernel's working directory is the source notebook's folder. Papermill writes into
    a temporary file next to the page (``.<name>.running<pid>.ipynb``); on success it is
    stamped with ``status: "ok"`` and renamed over the page (atomic: a killed run leaves
    the previous page as it was). A failed execution (traceback in its outputs,
    ``status: "failed"`` in its provenance) goes to :func:`failed_path` and the previous
    page, if any, is kept.
    """
    import papermill

    _check_profile(profile)
    root = Path(root)
    run.output.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_temporaries(run.output)
    tmp = run.output.with_name(f".{run.output.stem}.running{os.getpid()}.ipynb")
    declared = declared_parameters(run.source)
    effective = {name: _literal(spec["default"]) for name, spec in declared.items()}
    effective.update(run.parameters)
    error = None
    start = time.perf_counter()
    try:
        try:
            papermill.execute_notebook(
                str(run.source),
                str(tmp),
                parameters=dict(run.parameters),
                kernel_name="python3",
                cwd=str(run.source.parent),
                progress_bar=progress_bar,
                log_output=log_output,
            )
        except Exception as exc:  # papermill raises PapermillExecutionError, kernels others
            error = f"{type(exc).__name__}: {exc}".strip()
        finally:
            wall = time.perf_counter() - start
        info = {
            "profile": profile,
            "parameters": effective,
            "overrides": dict(run.parameters),
            "versions": _versions(),
            "device": _device(),
            "wall_time_s": round(wall, 3),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "source": _relative(run.source, root),
            "page": run.key,
            "status": "ok" if error is None else "failed",
        }
        failed = failed_path(run, profile, root)
        if tmp.is_file():
            add_provenance(tmp, info)
            if error is None:
                os.replace(tmp, run.output)
                failed.unlink(missing_ok=True)
            else:
                failed.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, failed)
    finally:
        tmp.unlink(missing_ok=True)
    return RunResult(run, error is None, wall, error)


# --------------------------------------------------------------------------------- toc
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
    pages marked ``default: skip`` are never among them, even when a file is left over."""
    present = []
    for chapter in manifest.get("chapters", []):
        slug = chapter["slug"]
        names = [
            entry["name"]
            for entry in chapter["notebooks"]
            if not is_skipped(entry, "default")
            and page_status(root / "book" / slug / f"{entry['name']}.ipynb") == "ok"
        ]
        if names:
            present.append((chapter, names))
    return present


def build_toc(manifest: Mapping[str, Any], root: str | Path) -> dict[str, Any]:
    """The Jupyter Book table of contents for the chapters whose executed pages exist.

    A chapter appears only when at least one of its notebooks has an executed page in
    ``book/<slug>/`` with complete provenance (``metadata["lmsim"]["status"] == "ok"``),
    so the book never links a page that was not computed or whose run did not finish (pages
    marked ``default: skip`` are not linked either). Its entry is
    ``book/<slug>/index`` (the chapter's prose) with the executed notebooks as sections;
    without an ``index.md`` the first executed notebook heads the chapter.
    ``book/zoo.md``, when present, is listed before the chapters.
    """
    root = Path(root)
    chapters = []
    if (root / "book" / "zoo.md").is_file():
        chapters.append({"file": "book/zoo"})
    for chapter, names in _executed_pages(manifest, root):
        slug = chapter["slug"]
        files = [f"book/{slug}/{name}" for name in names]
        if (root / "book" / slug / "index.md").is_file():
            head, sections = f"book/{slug}/index", files
        else:
            head, sections = files[0], files[1:]
        entry: dict[str, Any] = {"file": head}
        if sections:
            entry["sections"] = [{"file": file} for file in sections]
        chapters.append(entry)
    toc: dict[str, Any] = {"format": "jb-book", "root": "book/intro"}
    if chapters:
        toc["parts"] = [{"caption": "Chapters", "chapters": chapters}]
    return toc


def chapter_status_markdown(manifest: Mapping[str, Any], root: str | Path) -> str:
    """A markdown table of every planned and listed chapter and whether it is in the book.

    Chapters with executed pages link to their first page; the others say "planned" or
    "listed, not yet executed", so the introduction never claims a chapter that was not
    computed. Pages marked ``default: skip`` are counted apart: the book never executes them.
    """
    root = Path(root)
    present = {chapter["slug"]: names for chapter, names in _executed_pages(manifest, root)}
    listed = {chapter["slug"]: chapter for chapter in manifest.get("chapters", [])}
    slugs = list(dict.fromkeys([*PLANNED_CHAPTERS, *listed]))
    lines = [
        "% Generated by `python -m lmsim.reproduce --write-toc`; do not edit.",
        "",
        "| Chapter | Paper | Status |",
        "| --- | --- | --- |",
    ]
    for slug in slugs:
        title = listed[slug]["title"] if slug in listed else PLANNED_CHAPTERS[slug]
        if slug in present:
            index = root / "book" / slug / "index.md"
            head = f"/book/{slug}/index" if index.is_file() else f"/book/{slug}/{present[slug][0]}"
            entries = listed[slug]["notebooks"]
            n_skipped = sum(is_skipped(entry, "default") for entry in entries)
            n_total = len(entries) - n_skipped
            status = f"in the book ({len(present[slug])} of {n_total} notebooks executed"
            status += f"; {n_skipped} more not run by the default profile)" if n_skipped else ")"
            cell = f"{{doc}}`{title} <{head}>`"
        else:
            status = "listed, not yet executed" if slug in listed else "planned"
            entries = listed[slug]["notebooks"] if slug in listed else []
            if entries and all(is_skipped(entry, "default") for entry in entries):
                status = "listed, not run by the default profile"
            cell = title
        lines.append(
            f"| {cell} | {{cite:t}}`{slug}` | {status} |"
            if slug in PLANNED_CHAPTERS
            else f"| {cell} | | {status} |"
        )
    return "\n".join(lines) + "\n"


def write_toc(manifest: Mapping[str, Any], root: str | Path) -> Path:
    """Write :func:`build_toc`'s result to ``<root>/_toc.yml`` and the chapter status table
    (:func:`chapter_status_markdown`) to ``<root>/book/_chapters.md``; return the toc path.
    """
    root = Path(root)
    header = (
        "# Generated by `python -m lmsim.reproduce --write-toc` from notebooks/runs.yml:\n"
        "# only chapters whose executed pages exist under book/ are listed. Do not edit.\n"
    )
    path = root / "_toc.yml"
    path.write_text(header + yaml.safe_dump(build_toc(manifest, root), sort_keys=False))
    (root / "book").mkdir(exist_ok=True)
    (root / "book" / "_chapters.md").write_text(chapter_status_markdown(manifest, root))
    write_results(manifest, root)
    return path


def cost_markdown(pages: Mapping[str, dict]) -> str:
    """A markdown table of what each executed page cost, read from its provenance.

    Landing pages include it instead of typing wall times, which drift from the pages.

    Parameters
    ----------
    pages : mapping of str to dict
        Page name (the notebook's stem) to the executed notebook's JSON.
    """
    lines = [
        "| page | profile | wall time | device | executed |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, nb in pages.items():
        info = nb.get("metadata", {}).get("lmsim", {})
        if not info:
            continue
        lines.append(
            f"| {{doc}}`{name} <{name}>` | {info.get('profile', '—')} | "
            f"{_format_seconds(info['wall_time_s']) if 'wall_time_s' in info else '—'} | "
            f"{info.get('device', '—')} | {info.get('date', '—')} |"
        )
    return "\n".join(lines) + "\n"


def write_results(manifest: Mapping[str, Any], root: str | Path) -> list[Path]:
    """Write the claim tables the landing pages include, from the executed pages.

    ``book/<slug>/_results.md``: every paper claim of the chapter's executed pages
    (:func:`lmsim.claims.results_markdown`: ours with its interval, the paper's value, the
    verdict and why; zoo controls beside the claims about pretrained models).
    ``book/_results.md``: per chapter the counts of holds / does not hold / inconclusive /
    not testable here / not run, then every claim that does not hold
    (:func:`lmsim.claims.overview_markdown`). Sanity identities are left out of both (they
    hold by construction; the pages show them). Nothing is typed by hand: rerun
    ``--write-toc`` after executing pages.
    """
    from lmsim import claims as claims_mod

    root = Path(root)
    written, chapters = [], []
    header = "% Generated by `python -m lmsim.reproduce --write-toc` from the executed pages.\n\n"
    for chapter, names in _executed_pages(manifest, root):
        slug = chapter["slug"]
        # Each page is read once, for its claim records and for its provenance.
        pages = {n: json.loads((root / "book" / slug / f"{n}.ipynb").read_text()) for n in names}
        records = claims_mod.collect(pages.values())
        path = root / "book" / slug / "_results.md"
        path.write_text(header + claims_mod.results_markdown(records, claims_mod.PAPER_KINDS))
        costs = root / "book" / slug / "_costs.md"
        costs.write_text(header + cost_markdown(pages))
        written += [path, costs]
        chapters.append((chapter["title"], slug, records))
    overall = root / "book" / "_results.md"
    overall.write_text(header + claims_mod.overview_markdown(chapters))
    return [*written, overall]


# --------------------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lmsim.reproduce",
        description="Execute the book's notebooks (notebooks/runs.yml) with papermill.",
    )
    parser.add_argument(
        "--profile",
        default="default",
        help=f"one of {list(PROFILES)} (default: default, the book's pages)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        action="extend",
        metavar="SLUG[/PAGE]",
        help="run only these chapters, or single pages given as slug/name",
    )
    parser.add_argument("--output-dir", type=Path, help="write executed notebooks here instead")
    parser.add_argument("--root", type=Path, help="repository root (found from the cwd)")
    parser.add_argument(
        "--list",
        action="store_true",
        help="list chapters and pages (their source notebooks, the --profile's parameters "
        "or skip), exit",
    )
    parser.add_argument(
        "--write-toc", action="store_true", help="write _toc.yml from the manifest and exit"
    )
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="override a parameter in every selected notebook that declares it; VALUE is "
        "YAML (e.g. -p models '[minilm-l6, smollm2-135m]')",
    )
    parser.add_argument("--log-output", action="store_true", help="stream notebook output")
    parser.add_argument("--no-progress", action="store_true", help="hide papermill's bars")
    return parser


def _list(manifest: Mapping[str, Any], profile: str, root: Path) -> None:
    print("profiles:")
    for name, text in manifest.get("profiles", {}).items():
        print(f"  {name}: {text}")
    print("chapters:")
    if not manifest["chapters"]:
        print("  (none yet)")
    for chapter in manifest["chapters"]:
        print(f"  {chapter['slug']}: {chapter['title']}")
        for entry in chapter["notebooks"]:
            line = f"    {entry['name']}"
            if entry_source(entry) != entry["name"]:
                line += f"  (runs {entry_source(entry)}.ipynb)"
            params = entry.get(profile) or {}
            if is_skipped(entry, profile):
                line += f"  {profile}: skip (not run under this profile)"
            elif params and profile != "smoke":
                line += f"  {profile}: {params}"
            print(line)


def _parse_value(name: str, text: str) -> Any:
    """A ``-p NAME VALUE`` value as YAML; a ``ValueError`` naming both when it is not."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(
            f"-p {name} {text!r}: the value is not valid YAML ({problem}); quote strings "
            "and write lists as '[a, b]'"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 when every notebook ran)."""
    args = _parser().parse_args(argv)
    try:
        _check_profile(args.profile)
        root = (args.root or find_root()).resolve()
        manifest = load_manifest(root / MANIFEST)
        if args.list:
            _list(manifest, args.profile, root)
            return 0
        if args.write_toc:
            path = write_toc(manifest, root)
            n_chapters = len(_executed_pages(manifest, root))
            print(f"wrote {path} ({n_chapters} chapter(s) with executed pages)")
            return 0
        overrides = {name: _parse_value(name, value) for name, value in args.parameter}
        runs = plan_runs(manifest, args.profile, root, args.only, args.output_dir, overrides)
        for run in runs:
            run.output.parent.mkdir(parents=True, exist_ok=True)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    skipped = [
        f"{chapter['slug']}/{entry['name']}"
        for chapter in manifest["chapters"]
        if not args.only or chapter["slug"] in args.only
        for entry in chapter["notebooks"]
        if is_skipped(entry, args.profile)
    ]
    if skipped:
        print(
            f"not run under profile {args.profile!r} (`{args.profile}: {SKIP}` in {MANIFEST}): "
            + ", ".join(skipped)
        )
    if not runs:
        print(f"no notebooks in {MANIFEST} for profile {args.profile!r}; nothing to do")
    results = []
    for index, run in enumerate(runs, 1):
        print(f"[{index}/{len(runs)}] {run.key} -> {run.output}", flush=True)
        result = execute_run(
            run, args.profile, root, progress_bar=not args.no_progress, log_output=args.log_output
        )
        if not result.ok:
            kept = (
                f"kept the previous page {run.output}"
                if run.output.is_file()
                else f"no page written at {run.output}"
            )
            print(
                f"FAILED {run.source}: {result.error}\n  {kept}; the failed execution is at "
                f"{failed_path(run, args.profile, root)}",
                file=sys.stderr,
            )
        results.append(result)
    _summarise(results, args.profile, root)
    failed = [result for result in results if not result.ok]
    if failed:
        print(
            f"{len(failed)} notebook(s) failed (previous pages kept): "
            + ", ".join(
                f"{result.run.source} -> {failed_path(result.run, args.profile, root)}"
                for result in failed
            ),
            file=sys.stderr,
        )
        return 1
    return 0


def _summarise(results: Sequence[RunResult], profile: str, root: Path) -> Path | None:
    if not results:
        return None
    width = max(len(result.run.key) for result in results)
    print(f"\nwall time per notebook (profile {profile}):")
    for result in results:
        flag = "ok" if result.ok else "FAILED"
        print(f"  {result.run.key:<{width}}  {_format_seconds(result.wall_time_s):>12}  {flag}")
    total = sum(result.wall_time_s for result in results)
    print(f"  {'total':<{width}}  {_format_seconds(total):>12}")
    path = root / "_build" / f"{profile}_times.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    times = json.loads(path.read_text()) if path.is_file() else {}
    times.update(
        {
            result.run.key: {
                "wall_time_s": round(result.wall_time_s, 3),
                "status": "ok" if result.ok else "failed",
                "output": _relative(result.run.output, root),
            }
            for result in results
        }
    )
    path.write_text(json.dumps(times, indent=2) + "\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
