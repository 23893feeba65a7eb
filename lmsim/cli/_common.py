"""What every ``lmsim`` subcommand shares: the parser, argument types, output and errors.

Conventions of the command line
    * Results go to files under ``--out`` (CSV, PNG, safetensors, model folders) and a
      summary to stdout: readable lines, or one JSON document with ``--json``.
    * Progress and status lines go to stderr; ``--quiet`` silences them (errors and
      warnings stay, each warning message printed once).
    * Bad input (a missing file, an unknown model, measure or method, a malformed config)
      is one line on stderr, ``lmsim <command>: error: ...``, and exit status 2; a bug
      keeps its traceback (``lmsim --traceback ...`` shows it for bad input too).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

EXIT_BAD_INPUT = 2


class CliError(Exception):
    """Bad input found by the command line itself; printed as one line, exit status 2."""


class Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Keeps the worked examples' layout and shows each option's default (when it has one)."""

    def _get_help_string(self, action):
        if action.default in (None, False, argparse.SUPPRESS) or action.default == []:
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line and exit with status 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---------------------------------------------------------------------- argument types
def existing_file(text: str) -> Path:
    """``type=`` for an input file that must exist."""
    path = Path(text).expanduser()
    if not path.is_file():
        hint = " (it is a folder)" if path.is_dir() else ""
        raise argparse.ArgumentTypeError(f"no file at {text!r}{hint}")
    return path


def positive_int(text: str) -> int:
    """``type=`` for an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    """``type=`` for an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def unit_float(text: str) -> float:
    """``type=`` for a number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def layer_spec(values: Sequence[str]):
    """``--layers`` values as ``extract_moments`` takes them: "all", "last" or ints."""
    if list(values) in (["all"], ["last"]):
        return values[0]
    try:
        return [int(v) for v in values]
    except ValueError:
        raise CliError(
            f"--layers takes 'all', 'last' or hidden-state indices (0 = embeddings), got "
            f"{' '.join(values)!r}"
        ) from None


def split_list(text: str, choices: Sequence[str], option: str) -> list[str]:
    """A comma-separated list whose items must be in ``choices`` (order kept, no repeats)."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [item for item in items if item not in choices]
    if unknown or not items:
        from lmsim._names import did_you_mean

        hint = did_you_mean(unknown[0], choices) if unknown else ""
        raise CliError(
            f"{option} {text!r}: unknown {', '.join(map(repr, unknown)) or 'empty list'}"
            f"{hint}; choose from {','.join(choices)}"
        )
    return list(dict.fromkeys(items))


# ---------------------------------------------------------------------- shared options
def add_run_options(parser: argparse.ArgumentParser, dtype: bool = True) -> None:
    """``--device``, ``--dtype``, ``--quiet`` and ``--json``."""
    group = parser.add_argument_group("running")
    group.add_argument(
        "--device", default="auto", help="'auto' (CUDA when available), 'cpu', 'cuda', 'cuda:1'"
    )
    if dtype:
        group.add_argument(
            "--dtype",
            default=None,
            help="compute precision: float32, bfloat16, float16 (default: lmsim's, see "
            "lmsim.models.resolve_dtype)",
        )
    group.add_argument(
        "--quiet",
        action="store_true",
        help="no progress or status on stderr (warnings and errors stay)",
    )
    group.add_argument(
        "--json", action="store_true", help="print the summary as one JSON document on stdout"
    )


def add_text_options(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """``--texts FILE`` or ``--corpus NAME``, with ``--split`` and ``--max-docs``."""
    group = parser.add_argument_group("texts")
    which = group.add_mutually_exclusive_group(required=required)
    which.add_argument(
        "--texts", type=existing_file, metavar="FILE", help="a text file, one text per line"
    )
    which.add_argument(
        "--corpus",
        metavar="NAME",
        help="an lmsim corpus: 'ptb', 'smoke', or 'hf:<dataset>[:<config>]' (network)",
    )
    group.add_argument("--split", default="valid", help="corpus split (train, valid, test)")
    group.add_argument(
        "--max-docs", type=positive_int, default=None, help="keep this many lines (default: all)"
    )


def load_texts(args) -> list[str]:
    """The lines ``--texts`` or ``--corpus`` name (:func:`lmsim.data.load_corpus`)."""
    from lmsim.data import load_corpus

    source = str(args.texts) if args.texts is not None else args.corpus
    texts = load_corpus(source, split=args.split, max_docs=args.max_docs)
    if not texts:
        raise CliError(f"no text in {source!r}: give a file with one non-empty line per text")
    return texts


def read_lines(path: Path, what: str) -> list[str]:
    """Non-empty lines of a UTF-8 text file."""
    return [line for _, line in read_numbered_lines(path, what)]


def read_numbered_lines(path: Path, what: str) -> list[tuple[int, str]]:
    """``(line number in the file, line)`` of the non-empty lines of a UTF-8 text file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"no {what} file at {str(path)!r}") from None
    except UnicodeDecodeError as err:
        raise CliError(f"{what} file {str(path)!r} is not UTF-8 text ({err.reason})") from None
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise CliError(f"{what} file {str(path)!r} has no non-empty line")
    return lines


def out_dir(path: str | os.PathLike) -> Path:
    """``--out`` as a folder, created if missing."""
    folder = Path(path).expanduser()
    if folder.exists() and not folder.is_dir():
        raise CliError(f"--out {str(path)!r} is a file; give a folder (it is created if missing)")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def out_file(path: str | os.PathLike) -> Path:
    """``--out`` as a file whose folder is created if missing."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise CliError(f"--out {str(path)!r} is a folder; give a file name")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


# ---------------------------------------------------------------------- output
class Console:
    """Status lines and progress settings of one run (stderr; silenced by ``--quiet``)."""

    def __init__(self, args):
        self.quiet = bool(getattr(args, "quiet", False))
        self.json = bool(getattr(args, "json", False))
        self.progress = not self.quiet
        if self.quiet:
            _quiet_libraries()

    def say(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)

    def warn(self, message: str) -> None:
        """A warning on stderr, also under ``--quiet`` (which silences progress only)."""
        print(f"warning: {message}", file=sys.stderr, flush=True)


def announce_zoo_builds(console: Console, names: Sequence[str], zoo_profile: str) -> None:
    """Say so before a ``zoo/<name>`` model that is not built yet is trained on first use
    (minutes on a CPU, once; then cached), so a long silent pause is never a mystery."""
    wanted = [n.split("/", 1)[1] for n in names if str(n).startswith("zoo/")]
    if not wanted:
        return
    from lmsim.zoo.builder import _is_built
    from lmsim.zoo.profiles import _dependencies, _root, get_profile

    prof = get_profile(zoo_profile)
    todo = []
    for name in wanted:
        try:
            chain = _dependencies(name)
        except KeyError:
            return  # an unknown name: the load reports it, with "did you mean"
        todo += [m for m in chain if m not in todo and not _is_built(_root(prof) / m)]
    if todo:
        console.say(
            f"zoo: training {', '.join(todo)} (profile {prof.name!r}) now, once: minutes on a "
            f"CPU, then cached under {_root(prof)}; `lmsim zoo build --profile {prof.name}` "
            "builds the zoo ahead"
        )


def _quiet_libraries() -> None:
    """No bars or info lines from transformers (their warnings stay)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers is a dependency
        return
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def jsonable(value):
    """``value`` with numpy/torch scalars and arrays, paths and non-finite floats made JSON."""
    import numpy as np

    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: Path, payload) -> Path:
    """Write ``payload`` as indented, strict JSON (NaN becomes null)."""
    Path(path).write_text(json.dumps(jsonable(payload), indent=2, allow_nan=False) + "\n")
    return Path(path)


def finish(console: Console, summary: Mapping, lines: Sequence[str]) -> int:
    """Print the summary (JSON with ``--json``, else ``lines``) on stdout; exit status 0."""
    if console.json:
        print(json.dumps(jsonable(summary), indent=2, allow_nan=False))
    else:
        for line in lines:
            print(line)
    return 0


def save_figure(fig, path: Path) -> Path:
    """Save a matplotlib figure and close it."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return path
