"""``lmsim merge``: merge models of one architecture from a YAML config, mergekit-style.

The config names the models, the method, its parameters and where each model's Grams (or
Fishers) come from; the command runs :func:`lmsim.merge.merge_models` and writes a Hugging
Face model folder (``save_pretrained`` and the tokenizer) that ``transformers`` loads,
with ``merge_report.json`` beside the weights (how every parameter was merged).

The methods are :data:`lmsim.merge.METHODS` (regmean, fisher, simple, and the task-vector
methods task_arithmetic, ties and dare, which need ``base_model``: the pretrained model the
others were fine-tuned from, as in mergekit); a method added there is accepted here with no
change, and :data:`STATS` says which per-model statistics a method needs.
"""

from __future__ import annotations

import functools
import inspect
import math
import textwrap
import time
from pathlib import Path

from lmsim.cli._common import (
    CliError,
    Console,
    Parser,
    add_run_options,
    existing_file,
    finish,
    out_dir,
    write_json,
)
from lmsim.cli.grams import KINDS, collect, default_kind, read_inputs, task_of

SUMMARY = "merge models from a YAML config into a Hugging Face model folder"
#: Per-model statistics a method needs: method -> config key (and lmsim.merge's argument).
STATS = {"regmean": "grams", "fisher": "fishers"}
CONFIG_KEYS = (
    "merge_method",
    "models",
    "base_model",
    "parameters",
    "task",
    "kind",
    "tokenizer_source",
    "dtype",
)
MODEL_KEYS = ("model", "grams", "fishers", "data")
#: merge_models arguments the config's models and the command line set, not `parameters`.
_NOT_PARAMETERS = ("models", "grams", "fishers", "method", "device", "base")

EXAMPLE = """\
# merge.yml: merge two fine-tuned classifiers with RegMean
merge_method: regmean            # one of: {methods}
models:
  - model: ./bert-sst2            # a folder, registry name, zoo/<name> or hub id
    grams: sst2.grams.safetensors # published with `lmsim grams` ...
  - model: ./bert-cola
    data: cola_train.txt          # ... or collected here from the model's own inputs
parameters:                       # keyword arguments of lmsim.merge.merge_models
  alpha: 0.9                      # RegMean's off-diagonal scale (the paper's default)
  exclude: ["^classifier\\\\."]     # regexes of parameters kept from the first model
# base_model: ./bert-base        # task_arithmetic, ties, dare: the pretrained model the
                                 # models were fine-tuned from (its head is fresh: exclude it)
task: sequence-classification     # optional: default from the first model's config.json
kind: text                        # how `data:` lines read: text, pair (tab), token
tokenizer_source: ./bert-sst2     # optional: default the first model
dtype: float32                    # optional: of the saved weights (default: float32)
"""

EPILOG = """\
example:
  lmsim grams ./bert-sst2 --data sst2_train.txt --out sst2.grams.safetensors
  lmsim merge merge.yml --out merged/
  python -c "from transformers import AutoModelForSequenceClassification as A; A.from_pretrained('merged')"

config format (YAML, close to mergekit's):
{example}
{notes}
"""

NOTES = (
    "Per method, each model needs: {needs}. `grams:`, `fishers:` and `data:` paths are read "
    "relative to the config file's folder, and so is `model:` when such a folder exists "
    "there. `parameters` and their defaults: {parameters}."
)


def needs_base(method: str) -> bool:
    """Whether ``method`` merges task vectors against a base model (``base_model:``)."""
    from lmsim.merge._paramwise import PARAMWISE

    return method in PARAMWISE and PARAMWISE[method].needs_base


def methods() -> tuple[str, ...]:
    """The methods :func:`lmsim.merge.merge_models` supports (one list, in lmsim.merge)."""
    from lmsim.merge import METHODS

    return tuple(METHODS)


def merge_parameters() -> dict[str, inspect.Parameter]:
    """Keyword arguments of ``merge_models`` a config's ``parameters`` may set."""
    from lmsim.merge import merge_models

    params = inspect.signature(merge_models).parameters
    return {k: p for k, p in params.items() if k not in _NOT_PARAMETERS}


def _needs(method: str) -> str:
    if method in STATS:
        return f"{STATS[method]}: or data:"
    return "a base_model: (once)" if needs_base(method) else "nothing but its weights"


def parameter_defaults() -> dict[str, str]:
    """Parameter a config may set -> its default, as Python source (for ``--help``)."""
    return {k: repr(p.default) for k, p in merge_parameters().items() if p.default is not p.empty}


def parser(prog: str = "lmsim merge") -> Parser:
    # From lmsim.cli._catalog (generated from lmsim.merge, tested current): no torch import.
    from lmsim.cli._catalog import CATALOG

    listed = ", ".join(CATALOG["merge_methods"])
    needs = "; ".join(f"{m}: {CATALOG['merge_needs'][m]}" for m in CATALOG["merge_methods"])
    parameters = ", ".join(f"{k}={v}" for k, v in CATALOG["merge_parameters"].items())
    notes = textwrap.fill(NOTES.format(needs=needs, parameters=parameters), width=90)
    epilog = EPILOG.format(example=EXAMPLE.format(methods=listed), notes=notes)
    p = Parser(prog=prog, description=SUMMARY + ".", epilog=epilog)
    p.add_argument("config", type=existing_file, metavar="CONFIG.yml", help="the merge config")
    p.add_argument(
        "--out",
        required=True,
        help="the model folder to write: new or empty (created if missing); never an input "
        "model's folder or one inside the lmsim cache",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write into --out even when it holds files (its config.json, weights, tokenizer "
        "files and merge_report.json are replaced; never allowed for an input's folder)",
    )
    p.add_argument("--zoo-profile", default="default", help="zoo build zoo/<name> loads")
    p.add_argument("--batch-size", type=int, default=16, help="for statistics from `data:`")
    p.add_argument("--max-length", type=int, default=None, help="for statistics from `data:`")
    add_run_options(p, dtype=False)
    return p


# ---------------------------------------------------------------------- config
def read_config(path: Path) -> dict:
    """The YAML config, checked: keys, method, models, their statistics, parameters."""
    import yaml

    try:
        config = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        raise CliError(
            f"{str(path)!r}{line}: not valid YAML ({getattr(err, 'problem', err)})"
        ) from None
    if not isinstance(config, dict):
        raise CliError(f"{str(path)!r} must be a YAML mapping with merge_method and models")
    unknown = [k for k in config if k not in CONFIG_KEYS]
    if unknown:
        raise CliError(
            f"{str(path)!r}: unknown key {unknown[0]!r}; keys are {', '.join(CONFIG_KEYS)}"
        )
    method = config.get("merge_method")
    if method not in methods():
        from lmsim._names import did_you_mean

        raise CliError(
            f"{str(path)!r}: merge_method {method!r} is not one of {', '.join(methods())}"
            + did_you_mean(str(method), methods())
        )
    models = config.get("models")
    if not isinstance(models, list) or len(models) < 2:
        raise CliError(f"{str(path)!r}: `models` must list at least two models (- model: NAME)")
    base = Path(path).resolve().parent
    entries = [_model_entry(item, i, method, base, path) for i, item in enumerate(models)]
    parameters = config.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise CliError(f"{str(path)!r}: `parameters` must be a mapping, e.g. alpha: 0.9")
    allowed = merge_parameters()
    bad = [k for k in parameters if k not in allowed]
    if bad:
        raise CliError(
            f"{str(path)!r}: parameter {bad[0]!r} is not an argument of merge_models; use "
            f"{', '.join(allowed)}"
        )
    _check_parameters(parameters, allowed, method, path)
    base_model = _model_path(config.get("base_model"), base)
    if needs_base(method) and base_model is None:
        raise CliError(
            f"{str(path)!r}: merge_method {method} merges task vectors and needs `base_model:`, "
            "the pretrained model the models were fine-tuned from"
        )
    kind = config.get("kind")
    if kind is not None and kind not in KINDS:
        raise CliError(f"{str(path)!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
    return {
        "merge_method": method,
        "models": entries,
        "base_model": base_model,
        "parameters": parameters,
        "task": config.get("task"),
        "kind": kind,
        "tokenizer_source": _model_path(config.get("tokenizer_source"), base)
        or entries[0]["model"],
        "dtype": config.get("dtype", "float32"),
    }


def _expected(param: inspect.Parameter) -> tuple[str, object]:
    """``(what the value must be, a test of a value)`` from a parameter's default and
    annotation (merge_models' keyword arguments are numbers, ints, strings, or lists)."""

    def number(v):
        return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)

    def text_or_texts(v):
        return isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))

    def int_lists(v):
        return isinstance(v, list) and all(
            isinstance(row, list)
            and all(isinstance(x, int) and not isinstance(x, bool) for x in row)
            for row in v
        )

    default, annotation = param.default, str(param.annotation)
    if isinstance(default, bool):
        return "true or false", lambda v: isinstance(v, bool)
    if isinstance(default, int):
        return "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)
    if isinstance(default, float):
        return "a finite number", number
    if isinstance(default, str):
        return "a string", lambda v: isinstance(v, str)
    if "Sequence[Sequence[int]]" in annotation:
        return "a list of lists of label ids", lambda v: v is None or int_lists(v)
    if annotation.startswith("str"):
        return "a string or a list of strings", lambda v: v is None or text_or_texts(v)
    return "a value", lambda v: True


def _check_parameters(parameters: dict, allowed: dict, method: str, path) -> None:
    """Each of ``parameters`` of the type merge_models takes, then merge_models' own checks
    of their values: a ``CliError`` naming the parameter, before any model is loaded."""
    for name, value in parameters.items():
        what, test = _expected(allowed[name])
        if not test(value):
            raise CliError(
                f"{str(path)!r}: parameter `{name}` must be {what}, got {value!r} "
                f"({type(value).__name__})"
            )
    from lmsim.merge import check_merge_options

    try:
        check_merge_options(method, **parameters)
    except (ValueError, TypeError) as err:
        raise CliError(f"{str(path)!r}: parameters: {err}") from None


def _model_path(name, base: Path):
    if name is None:
        return None
    local = base / str(name)
    return str(local) if not Path(str(name)).is_absolute() and local.is_dir() else str(name)


def _model_entry(item, i: int, method: str, base: Path, path) -> dict:
    if isinstance(item, str):
        item = {"model": item}
    if not isinstance(item, dict) or "model" not in item:
        raise CliError(f"{str(path)!r}: models[{i}] must be a mapping with `model: NAME`")
    unknown = [k for k in item if k not in MODEL_KEYS]
    if unknown:
        raise CliError(
            f"{str(path)!r}: models[{i}] has unknown key {unknown[0]!r}; keys are "
            f"{', '.join(MODEL_KEYS)}"
        )
    entry = {"model": _model_path(item["model"], base)}
    for key in ("grams", "fishers", "data"):
        if item.get(key) is not None:
            file = Path(str(item[key])).expanduser()
            file = file if file.is_absolute() else base / file
            if not file.is_file():
                raise CliError(f"{str(path)!r}: models[{i}].{key}: no file at {str(file)!r}")
            entry[key] = file
    need = STATS.get(method)
    if need is not None and need not in entry and "data" not in entry:
        raise CliError(
            f"{str(path)!r}: models[{i}] ({entry['model']}) needs `{need}:` (from `lmsim grams"
            f"{' --fishers' if need == 'fishers' else ''}`) or `data:` for {method}"
        )
    return entry


# ---------------------------------------------------------------------- merge
def _load(name: str, task: str, device, zoo_profile: str):
    from lmsim.models import load_model

    model, _ = load_model(name, device=device, dtype="float32", task=task, zoo_profile=zoo_profile)
    return model


def _statistics(config, task, args, console) -> list | None:
    """Per model: a statistics file path (read lazily by merge_models) or collected dict."""
    need = STATS.get(config["merge_method"])
    if need is None:
        return None
    from lmsim.models import load_model

    out = []
    for entry in config["models"]:
        if need in entry:
            out.append(entry[need])
            continue
        kind = config["kind"] or default_kind(task)
        inputs = read_inputs(entry["data"], kind)
        console.say(f"{need} of {entry['model']} from {len(inputs):,} inputs in {entry['data']}")
        model, tokenizer = load_model(
            entry["model"],
            device=args.device,
            dtype="float32",
            task=task,
            zoo_profile=args.zoo_profile,
        )
        out.append(
            collect(
                model,
                tokenizer,
                inputs,
                kind,
                fishers=need == "fishers",
                args=_StatsArgs(args),
                progress=console.progress,
            )
        )
        del model
    return out


class _StatsArgs:
    """The options ``grams.collect`` reads, for statistics collected by ``merge``."""

    def __init__(self, args):
        self.reduction = "mean"
        self.paper_compat_padding = False
        self.batch_size = args.batch_size
        self.max_length = args.max_length
        self.device = args.device
        self.dtype = "float32"
        self.seed = 0


def _check_out(out: str, config: dict, force: bool) -> Path:
    """``--out`` checked before anything is loaded: not a file, not an input model's folder
    (merging there would replace its config.json and weights), not inside the lmsim cache,
    and new or empty unless ``--force``; returned as given (created when written)."""
    from lmsim._cache import cache_root

    folder = Path(out).expanduser()
    if folder.exists() and not folder.is_dir():
        raise CliError(f"--out {out!r} is a file; give a folder (it is created if missing)")
    where = folder.resolve()
    named = [entry["model"] for entry in config["models"]]
    named += [config["base_model"], config["tokenizer_source"]]
    for name in filter(None, named):
        source = Path(str(name)).expanduser()
        if source.is_dir() and source.resolve() == where:
            raise CliError(
                f"--out {out!r} is the folder of the input model {str(name)!r}: the merge "
                "would replace its config.json and weights; give another folder"
            )
    cache = cache_root().expanduser().resolve()
    if where == cache or where.is_relative_to(cache):
        raise CliError(
            f"--out {out!r} is inside the lmsim cache ({cache}), whose entries lmsim alone "
            "writes; give a folder outside it"
        )
    if folder.is_dir() and not force:
        held = sorted(p.name for p in folder.iterdir())
        if held:
            shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
            raise CliError(
                f"--out {out!r} exists and holds {len(held)} file(s) ({shown}), which the "
                "merge would replace; give a new or empty folder, or --force to write into it"
            )
    return folder


def report_dict(report) -> dict:
    """A :class:`lmsim.merge.MergeReport` as JSON."""
    return {
        "method": report.method,
        "n_models": report.n_models,
        "counts": report.counts(),
        "entries": {
            name: {"how": how, "note": note} for name, (how, note) in report.entries.items()
        },
    }


def run(args) -> int:
    import torch

    from lmsim.merge import merge_models
    from lmsim.models import load_tokenizer, resolve_device, resolve_dtype

    console = Console(args)
    config = read_config(args.config)
    folder = _check_out(args.out, config, args.force)
    names = [entry["model"] for entry in config["models"]]
    task = task_of(names[0], config["task"], args.zoo_profile)
    device = resolve_device(args.device)
    dtype = resolve_dtype(config["dtype"], torch.device("cpu"))
    start = time.perf_counter()
    stats = _statistics(config, task, args, console)
    need = STATS.get(config["merge_method"])
    console.say(f"{config['merge_method']} merge of {len(names)} models ({task}) on {device}")
    loaders = [functools.partial(_load, n, task, device, args.zoo_profile) for n in names]
    base_model = config["base_model"]
    if base_model is not None:
        console.say(f"task vectors against the base model {base_model}")
    merged, report = merge_models(
        loaders,
        grams=stats if need == "grams" else None,
        fishers=stats if need == "fishers" else None,
        method=config["merge_method"],
        device=device,
        base=None
        if base_model is None
        else functools.partial(_load, base_model, task, device, args.zoo_profile),
        **config["parameters"],
    )
    merged = merged.to(device="cpu", dtype=dtype)
    folder = out_dir(folder)
    merged.save_pretrained(folder)
    load_tokenizer(config["tokenizer_source"], zoo_profile=args.zoo_profile).save_pretrained(folder)
    seconds = time.perf_counter() - start
    details = report_dict(report)
    details.update(
        config=str(args.config),
        task=task,
        models=[{k: str(v) for k, v in entry.items()} for entry in config["models"]],
        base_model=base_model,
        parameters=config["parameters"],
        tokenizer_source=config["tokenizer_source"],
        dtype=str(dtype).removeprefix("torch."),
        seconds=round(seconds, 3),
    )
    write_json(folder / "merge_report.json", details)
    summary = {
        "command": "merge",
        "out": str(folder),
        **{k: v for k, v in details.items() if k != "entries"},
    }
    counts = ", ".join(f"{v} {k}" for k, v in sorted(report.counts().items()))
    lines = [
        f"{config['merge_method']} merge of {len(names)} models: {counts} -> {folder}",
        f"  report: {folder / 'merge_report.json'}",
    ]
    return finish(console, summary, lines)
