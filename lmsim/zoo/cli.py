"""``python -m lmsim.zoo``: build the zoo or list what is built."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence

import pandas as pd

from lmsim.zoo.builder import build
from lmsim.zoo.profiles import MODELS, PROFILES, _root, get_profile
from lmsim.zoo.report import summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lmsim.zoo",
        description="The lmsim model zoo: small transformer LMs that lmsim trains itself, offline.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="train the zoo (finished models are skipped)")
    p_build.add_argument(
        "--profile", default=None, choices=sorted(PROFILES), help="the zoo build (default: default)"
    )
    p_build.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        choices=list(MODELS),
        help="these models (and what they are built from); default: all",
    )
    p_build.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads per model (default: the profile's `threads`)",
    )
    p_build.add_argument(
        "--rebuild",
        action="store_true",
        help="train the named models (and what was built from them) again",
    )
    p_build.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="models trained at once on the CPU, one process each (default: the profile's)",
    )
    p_list = sub.add_parser(
        "list", help="print every zoo model: the facts of the built ones, which are not built"
    )
    p_list.add_argument(
        "--profile", default=None, choices=sorted(PROFILES), help="the zoo build (default: default)"
    )
    args = parser.parse_args(argv)
    prof = get_profile(args.profile)
    if args.command == "build":
        if args.threads:
            prof = dataclasses.replace(prof, threads=args.threads)
        started = time.perf_counter()
        try:
            paths = build(args.only, prof, jobs=args.jobs, rebuild=args.rebuild)
        except FileExistsError as err:  # a folder lmsim did not write, at a model's path
            print(f"python -m lmsim.zoo: error: {err}", file=sys.stderr)
            return 2
        seconds = time.perf_counter() - started
        print(f"built {len(paths)} models in {seconds:.1f} s under {_root(prof)}")
    print(list_table(prof))
    return 0


def list_table(prof) -> str:
    """Every model of the zoo: the facts of the built ones, ``not built`` for the others."""
    table = summary(prof)
    built = set(table.name)
    missing = [
        {"name": name, "objective": spec.objective, "status": "not built"}
        for name, spec in MODELS.items()
        if name not in built
    ]
    table.insert(1, "status", "built")
    if missing:
        table = pd.concat([table, pd.DataFrame(missing)], ignore_index=True)
    order = {name: i for i, name in enumerate(MODELS)}
    table = table.sort_values("name", key=lambda names: names.map(order))
    shown = table.drop(columns=["architecture", "val_ppl_of", "mfu"]).set_index("name")
    shown = shown.dropna(axis=1, how="all").astype(object).where(shown.notna(), "")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        text = shown.to_string(
            float_format=lambda v: f"{v:.3g}",
            formatters={c: _fmt for c in shown.columns},
        )
    lines = [f"zoo profile {prof.name!r}: {len(built)} of {len(MODELS)} models built", text]
    if missing:
        lines.append(
            f"not built: {len(missing)}; `lmsim zoo build --profile {prof.name}` trains them "
            "(resumable), or a command naming zoo/<name> trains that one on first use"
        )
    return "\n".join(lines)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
