"""``lmsim extract``: stream models' pooled hidden states over texts into float64 moments.

The command-line face of :func:`lmsim.extract.extract_moments`, as ``python -m
lmsim.extract`` is (same options, plus ``--texts``, ``--quiet`` and ``--json``). Under
``torchrun`` / ``accelerate launch`` the launcher's environment initialises the default
process group, every rank extracts its share of the shards, and rank 0 writes the merged
moments, bit for bit what one process computes.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from lmsim.cli._common import (
    CliError,
    Console,
    Parser,
    add_run_options,
    add_text_options,
    announce_zoo_builds,
    finish,
    layer_spec,
    load_texts,
    out_file,
    positive_int,
)

SUMMARY = "moments of models' hidden states over texts (a safetensors file)"
POOLINGS = ("mean", "word", "token")
SUBWORDS = ("last", "first", "mean")

EPILOG = """\
example:
  lmsim extract minilm-l6 ./my-model --corpus ptb --max-docs 500 --pooling word \\
      --max-words 40 --layers all --out ptb.safetensors
  torchrun --nproc_per_node 8 -m lmsim.cli extract bert-base-uncased gpt2 \\
      --corpus ptb --pooling word --out ptb.safetensors      # data parallel

MODEL is an offline name (lmsim.models.list_models()), zoo/<name>, a local folder with
config.json, or a hub id. Blocks are named "{model}/layer.{i}" (0 = embeddings). Read the
result with lmsim.moments.Moments.load, or pass it to `lmsim similarity --moments`.
Shards are cached under $LMSIM_CACHE/acts (a rerun resumes; --no-cache skips it).
"""


def add_extraction_options(parser: Parser) -> None:
    """Models, layers and pooling: what ``extract`` and ``similarity`` share."""
    group = parser.add_argument_group("extraction")
    group.add_argument(
        "--layers",
        nargs="+",
        default=["all"],
        metavar="L",
        help="'all', 'last', or hidden-state indices (0 = embeddings, -1 = last)",
    )
    group.add_argument(
        "--pooling",
        choices=POOLINGS,
        default="mean",
        help="one row per text (mean over its tokens), per word (whitespace words), per token",
    )
    group.add_argument("--subword", choices=SUBWORDS, default="last", help="a word's vector")
    group.add_argument(
        "--max-words",
        type=positive_int,
        default=None,
        help="--pooling word: skip longer sentences (a model that truncates one would leave "
        "words without a vector)",
    )
    group.add_argument("--max-length", type=positive_int, default=None, help="truncate to T")
    group.add_argument("--batch-size", type=positive_int, default=32, help="texts per pass")
    group.add_argument("--shard-size", type=positive_int, default=256, help="texts per shard")
    group.add_argument("--zoo-profile", default="default", help="zoo build zoo/<name> loads")
    group.add_argument("--no-cache", action="store_true", help="do not read or write shards")


def parser(prog: str = "lmsim extract") -> Parser:
    p = Parser(prog=prog, description=SUMMARY + ".", epilog=EPILOG)
    p.add_argument("models", nargs="*", metavar="MODEL", help="models to run")
    p.add_argument(
        "--models", dest="models_opt", nargs="+", metavar="MODEL", help=argparse.SUPPRESS
    )
    add_text_options(p)
    add_extraction_options(p)
    p.add_argument("--out", required=True, help="the moments file (safetensors) rank 0 writes")
    add_run_options(p)
    return p


def model_names(args) -> list[str]:
    """``MODEL...`` (or ``--models``, as ``python -m lmsim.extract`` spells it), checked."""
    names = list(args.models or []) + list(getattr(args, "models_opt", None) or [])
    if not names:
        raise CliError("name at least one MODEL (an offline name, zoo/<name>, a folder, a hub id)")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise CliError(f"model {repeated[0]!r} is named twice; name each model once")
    return names


def extract(args, console: Console, texts: list):
    """``extract_moments`` with the command's options; ``texts`` as ``pooling`` wants them."""
    from lmsim.extract.cli import moments_from_options

    layers = layer_spec(args.layers)
    announce_zoo_builds(console, model_names(args), args.zoo_profile)
    return moments_from_options(args, model_names(args), texts, layers, console.progress)


def pooled_texts(args, texts: list[str]) -> list:
    """Texts as the pooling takes them: whitespace-split words for ``--pooling word``
    (sentences of more than ``--max-words`` words left out)."""
    if args.pooling != "word":
        return texts
    sentences = [t.split() for t in texts]
    if args.max_words is not None:
        sentences = [s for s in sentences if len(s) <= args.max_words]
        if not sentences:
            raise CliError(f"no sentence has at most --max-words {args.max_words} words")
    return sentences


def run(args) -> int:
    console = Console(args)
    names = model_names(args)
    out = out_file(args.out)
    layer_spec(args.layers)  # bad --layers fail before any model loads
    from lmsim.extract.distributed import LauncherProcessGroup

    group = LauncherProcessGroup(args.device)
    try:
        if group.rank:
            console.quiet, console.progress = True, False
        texts = pooled_texts(args, load_texts(args))
        console.say(f"{len(texts):,} texts, {len(names)} model(s), rank {group.rank}/{group.world}")
        start = time.perf_counter()
        mom = extract(args, console, texts)
        seconds = time.perf_counter() - start
        if group.rank:
            return 0
        mom.save(out)
    finally:
        group.close()
    summary = {
        "command": "extract",
        "models": names,
        "out": str(Path(out)),
        "n_rows": mom.n,
        "pooling": args.pooling,
        "blocks": dict(mom.dims),
        "total_dim": mom.total_dim,
        "world_size": group.world,
        "seconds": round(seconds, 3),
    }
    lines = [f"{mom.n:,} rows x {mom.total_dim:,} features ({len(mom.dims)} blocks) -> {out}"]
    return finish(console, summary, lines)
