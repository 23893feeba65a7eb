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
executed page in ``book/`` and is left out of the table of contents). The smoke run (and
``make nbval``) still executes every *source* notebook with its parameters cell: a source
notebook's own page must keep its ``smoke`` values (tests/test_structure.py checks it).

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
parameters, package versions, device, wall time, date, source path and status, and a
markdown cell after the title says the same in words.

Pages are replaced atomically: papermill executes into a temporary file next to the page,
which replaces the page only when every cell ran. A failed run keeps the previous page,
says so on stderr, exits 1 and leaves the failed execution (with its traceback) under
``_build/failed/<profile>/<slug>/<name>.ipynb``; a killed run leaves the previous page
untouched. ``--write-toc`` lists only pages whose provenance says ``status: "ok"``.

``--dry-run`` executes the selected pages with every hub model and dataset replaced by a
tiny offline stand-in and the sizes scaled down (:mod:`lmsim._dryrun`,
:mod:`~lmsim.reproduce._dryrun`): pages go to ``_build/dry-run/<slug>/<name>.ipynb``,
failures to ``_build/dry-run/failed/``, wall times to ``_build/dry-run/times.json``.

Usage::

    python -m lmsim.reproduce --profile default [--only SLUG[/PAGE] ...] [--output-dir DIR]
    python -m lmsim.reproduce --profile smoke -p n_train 100
    python -m lmsim.reproduce --profile paper --dry-run
    python -m lmsim.reproduce --list
    python -m lmsim.reproduce --write-toc

The package, by concern: :mod:`~lmsim.reproduce._manifest` (the manifest),
:mod:`~lmsim.reproduce._parameters` (declared parameters), :mod:`~lmsim.reproduce._plan`
(:func:`plan_runs`), :mod:`~lmsim.reproduce._execute` (papermill),
:mod:`~lmsim.reproduce._provenance`, :mod:`~lmsim.reproduce._pages` (what a run wrote),
:mod:`~lmsim.reproduce._toc` and :mod:`~lmsim.reproduce._results` (the generated files),
:mod:`~lmsim.reproduce._resources` and ``_estimates`` (``--plan``),
:mod:`~lmsim.reproduce._budget` (each page's plan checked before it starts, scratch cache
entries released when the run needs the disk; :func:`check_plan` for a notebook run
directly) and :mod:`~lmsim.reproduce._cli`.
"""

# Names outside __all__ are re-exported too: tests and other modules use them.
from lmsim.reproduce._budget import PlanError, check_plan
from lmsim.reproduce._cli import main
from lmsim.reproduce._execute import RunResult, execute_run, failed_path
from lmsim.reproduce._manifest import (  # noqa: F401
    MANIFEST,
    OPT_IN_PROFILES,
    PLANNED_CHAPTERS,
    PROFILES,
    SKIP,
    ZOO_PROFILES,
    book_profile,
    entry_source,
    find_root,
    is_skipped,
    load_manifest,
    output_dir_for,
    page_sources,
)
from lmsim.reproduce._pages import page_status
from lmsim.reproduce._parameters import check_parameter_type, declared_parameters  # noqa: F401
from lmsim.reproduce._plan import NotebookRun, plan_runs
from lmsim.reproduce._provenance import (  # noqa: F401
    FOLD_TAG,
    INJECTED_TAG,
    PROVENANCE_TAG,
    add_provenance,
    provenance_text,
)
from lmsim.reproduce._results import cost_markdown, withdrawn_pages, write_results  # noqa: F401
from lmsim.reproduce._toc import build_toc, chapter_status_markdown, write_toc

__all__ = [
    "OPT_IN_PROFILES",
    "PROFILES",
    "ZOO_PROFILES",
    "NotebookRun",
    "RunResult",
    "find_root",
    "load_manifest",
    "SKIP",
    "entry_source",
    "book_profile",
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
    "check_plan",
    "PlanError",
]
