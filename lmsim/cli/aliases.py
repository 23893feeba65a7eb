"""``lmsim reproduce`` and ``lmsim zoo``: the existing entries under the one command.

Every argument after the subcommand goes to ``python -m lmsim.reproduce`` /
``python -m lmsim.zoo`` unchanged; ``--help`` prints a worked example first. Neither runs
models on a device of its own choosing: the runner passes each notebook its profile's
``device`` parameter (override with ``-p device cuda``), and the zoo trains on the CPU
profile it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

_EXAMPLES = {
    "reproduce": """\
lmsim reproduce: alias of `python -m lmsim.reproduce` (the book's papermill runner).

examples:
  lmsim reproduce --list
  lmsim reproduce --profile default --only zhang2022_lmd
  lmsim reproduce --profile smoke --only zhang2022_lmd -p device cuda
""",
    "zoo": """\
lmsim zoo: alias of `python -m lmsim.zoo` (the offline model zoo).

examples:
  lmsim zoo list --profile default
  lmsim zoo build --profile default --only mlm-s0
""",
}


def _wants_help(argv: Sequence[str]) -> bool:
    return any(a in ("-h", "--help") for a in argv)


def _reproduce(prog: str, argv: Sequence[str]) -> int:
    from lmsim.reproduce import main

    return _run(main, "reproduce", argv)


def _zoo(prog: str, argv: Sequence[str]) -> int:
    from lmsim.zoo import main

    return _run(main, "zoo", argv)


def _run(main: Callable[[list[str]], int], name: str, argv: Sequence[str]) -> int:
    if _wants_help(argv):
        print(_EXAMPLES[name])
    try:
        return int(main(list(argv)) or 0)
    except SystemExit as exit_:  # argparse's --help (0) and usage errors (2)
        return exit_.code if isinstance(exit_.code, int) else 2


#: Subcommand -> its entry, called with (prog, arguments).
ALIASES: dict[str, Callable[[str, Sequence[str]], int]] = {
    "reproduce": _reproduce,
    "zoo": _zoo,
}
