"""``lmsim grams``: publish the statistics a model owner shares instead of data.

RegMean (Jin et al., 2023) merges models from the Gram matrices ``XᵀX / n`` of every linear
layer's inputs on each model's own data (:func:`lmsim.merge.collect_grams`); Fisher
averaging from diagonal Fishers (:func:`lmsim.merge.collect_fishers`). This command
computes either for one model and a text file and saves it as safetensors
(:func:`lmsim.merge.save_grams` / :func:`lmsim.merge.save_fishers`), which ``lmsim
merge`` reads (``grams:`` / ``fishers:`` in its config).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from lmsim.cli._common import (
    CliError,
    Console,
    Parser,
    add_run_options,
    announce_zoo_builds,
    existing_file,
    finish,
    out_file,
    positive_int,
    read_numbered_lines,
)

SUMMARY = "publish a model's RegMean Grams (or Fishers) for its data"
KINDS = ("text", "pair", "token")
#: Model task (lmsim.models.TASKS) by the suffix of the class named in config.json.
_TASK_OF_ARCHITECTURE = {
    "ForSequenceClassification": "sequence-classification",
    "ForTokenClassification": "token-classification",
    "ForCausalLM": "causal-lm",
    "LMHeadModel": "causal-lm",
    "ForMaskedLM": "masked-lm",
}

EPILOG = """\
example:
  lmsim grams ./my-finetuned-bert --data train.txt --out my-bert.grams.safetensors
  lmsim grams ./my-finetuned-bert --data train.txt --fishers --out my-bert.fishers.safetensors

--data: one input per line; with --kind pair two texts separated by a tab; with --kind
token a sentence as space-separated words (token classifiers). A few hundred batches
suffice (paper, Table 6). The file records the model, the reduction, the number of inputs
and their sha256 (lmsim.merge.load_metadata).
"""


def parser(prog: str = "lmsim grams") -> Parser:
    p = Parser(prog=prog, description=SUMMARY + ".", epilog=EPILOG)
    p.add_argument("model", metavar="MODEL", help="a model folder, registry name or hub id")
    p.add_argument(
        "--data",
        type=existing_file,
        required=True,
        metavar="FILE",
        help="the model's inputs, one per line (see --kind)",
    )
    p.add_argument("--kind", choices=KINDS, default=None, help="how lines are read (see below)")
    p.add_argument(
        "--task",
        default=None,
        help="the model class to load (lmsim.models.TASKS); default: from config.json",
    )
    p.add_argument("--fishers", action="store_true", help="diagonal Fishers instead of Grams")
    p.add_argument(
        "--reduction", choices=("mean", "sum"), default="mean", help="Grams: XᵀX / n or XᵀX"
    )
    p.add_argument(
        "--paper-compat-padding",
        action="store_true",
        help="Grams over every position, padding included (the authors' code)",
    )
    p.add_argument(
        "--max-length",
        type=positive_int,
        default=None,
        help="truncate inputs to this many tokens (default: the model's limit)",
    )
    p.add_argument("--batch-size", type=positive_int, default=16, help="inputs per pass")
    p.add_argument("--max-inputs", type=positive_int, default=None, help="use the first N lines")
    p.add_argument("--seed", type=int, default=0, help="Fishers: seed of the sampled labels")
    p.add_argument("--zoo-profile", default="default", help="zoo build zoo/<name> loads")
    p.add_argument("--out", required=True, help="the safetensors file to write")
    add_run_options(p)
    return p


# ---------------------------------------------------------------------- shared glue
def config_of(name: str, zoo_profile: str = "default") -> dict | None:
    """``config.json`` of a local folder or an offline model; None for a hub id."""
    folder = Path(name).expanduser()
    if not folder.is_dir():
        from lmsim.models import OFFLINE_MODELS, model_dir

        if name not in OFFLINE_MODELS and not name.startswith("zoo/"):
            return None
        folder = Path(model_dir(name, zoo_profile))
    path = folder / "config.json"
    if not path.is_file():
        raise CliError(f"folder {name!r} has no config.json; it is not a saved model")
    return json.loads(path.read_text())


def task_of(name: str, task: str | None, zoo_profile: str = "default") -> str:
    """The ``load_model`` task: ``task`` if given, else from the class in config.json."""
    from lmsim.models import TASKS

    if task is not None:
        if task not in TASKS:
            raise CliError(f"task {task!r} is unknown; choose one of {', '.join(TASKS)}")
        return task
    config = config_of(name, zoo_profile) or {}
    for architecture in config.get("architectures") or []:
        for suffix, found in _TASK_OF_ARCHITECTURE.items():
            if architecture.endswith(suffix):
                return found
    return "base"


def read_inputs(path: Path, kind: str, max_inputs: int | None = None) -> list:
    """Lines of ``path`` as texts, (text, text) pairs (tab) or word lists (``kind``)."""
    numbered = read_numbered_lines(path, "data")[:max_inputs]
    lines = [line for _, line in numbered]
    if kind == "token":
        return [line.split() for line in lines]
    if kind == "pair":
        pairs = [line.split("\t") for line in lines]
        bad = [number for (number, _), p in zip(numbered, pairs) if len(p) != 2]
        if bad:
            raise CliError(
                f"{str(path)!r} line {bad[0]}: --kind pair needs two texts separated by one tab"
            )
        return [tuple(p) for p in pairs]
    return lines


def default_kind(task: str) -> str:
    return "token" if task == "token-classification" else "text"


def collect(model, tokenizer, inputs, kind, *, fishers, args, progress) -> dict:
    """Grams (``collect_grams``) or Fishers (``collect_fishers``) of one loaded model."""
    from lmsim.merge import collect_fishers, collect_grams

    lib_kind = "token" if kind == "token" else None
    if fishers:
        return collect_fishers(
            model,
            tokenizer,
            inputs,
            kind=lib_kind,
            max_length=args.max_length,
            seed=args.seed,
            progress=progress,
        )
    return collect_grams(
        model,
        tokenizer,
        inputs,
        kind=lib_kind,
        reduction=args.reduction,
        paper_compat_padding=args.paper_compat_padding,
        batch_size=args.batch_size,
        max_length=args.max_length,
        device=args.device,
        dtype=getattr(args, "dtype", None),
        progress=progress,
    )


def fingerprint(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def run(args) -> int:
    from lmsim.merge import save_fishers, save_grams
    from lmsim.models import load_model

    console = Console(args)
    out = out_file(args.out)
    announce_zoo_builds(console, [args.model], args.zoo_profile)
    task = task_of(args.model, args.task, args.zoo_profile)
    kind = args.kind or default_kind(task)
    inputs = read_inputs(args.data, kind, args.max_inputs)
    what = "Fishers" if args.fishers else "Grams"
    console.say(f"{what} of {args.model} ({task}) on {len(inputs):,} inputs from {args.data}")
    start = time.perf_counter()
    model, tokenizer = load_model(
        args.model, device=args.device, dtype=args.dtype, task=task, zoo_profile=args.zoo_profile
    )
    stats = collect(
        model, tokenizer, inputs, kind, fishers=args.fishers, args=args, progress=console.progress
    )
    metadata = {
        "model": args.model,
        "task": task,
        "kind": kind,
        "n_inputs": len(inputs),
        "data": str(args.data),
        "data_sha256": fingerprint(args.data),
        "made_by": "lmsim grams",
    }
    if args.fishers:
        metadata["mode"] = "sample"
        save_fishers(out, stats, metadata)
    else:
        metadata.update(reduction=args.reduction, paper_compat_padding=args.paper_compat_padding)
        save_grams(out, stats, metadata)
    seconds = time.perf_counter() - start
    summary = {
        "command": "grams",
        "what": what.lower(),
        "out": str(out),
        "n_tensors": len(stats),
        "n_values": int(sum(t.numel() for t in stats.values())),
        "metadata": metadata,
        "seconds": round(seconds, 3),
    }
    return finish(console, summary, [f"{len(stats)} {what} of {args.model} -> {out}"])
