"""``lmsim evaluate``: score a (merged) model on each task's test data, as FusionBench does.

A merge of fine-tuned classifiers is judged task by task: the merged model (the body the
merge wrote) scored on every task it is meant to serve, each with that task's metric
(:data:`lmsim.tasks.METRICS`: accuracy, Matthews, Pearson, macro-F1, entity F1), beside
the fine-tuned model of that task alone and the task's trivial baseline; then the average
over tasks (FusionBench's table: one column per task and the mean).

``--task SPEC=MODEL`` gives a task (:func:`lmsim.data.load_task`) and the fine-tuned model
that was merged for it: the merged body is scored with that model's classification head
(:func:`lmsim.finetune.with_head`; heads of different tasks differ in shape and are left
out of a merge, as with ``exclude: ["^classifier\\."]``), and the model itself is scored
as the "individual" reference. ``--task SPEC`` alone scores the merged model's own head.
"""

from __future__ import annotations

import time

from lmsim.cli._common import (
    CliError,
    Console,
    Parser,
    add_run_options,
    finish,
    out_dir,
    positive_int,
    write_json,
)

SUMMARY = "score a (merged) model on each task's test data, with each task's own head"

EPILOG = """\
example:
  lmsim merge merge.yml --out merged/
  lmsim evaluate merged/ --task hf:glue:sst2=./bert-sst2 --task hf:glue:cola=./bert-cola \\
      --out eval/
  lmsim evaluate merged/ --task smoke --out eval/    # the merged model's own head

TASK is a spec of lmsim.data.load_task (smoke, smoke-adverb, bbcnews, hf:glue:<task>, ...);
=MODEL names the fine-tuned model merged for it (its head is put on the merged body, and
it is scored alone as the reference). Writes eval/scores.csv (one row per task: metric,
merged, individual, baseline, test examples) and eval/summary.json with the averages.
"""


def parser(prog: str = "lmsim evaluate") -> Parser:
    p = Parser(prog=prog, description=SUMMARY + ".", epilog=EPILOG)
    p.add_argument(
        "model", metavar="MODEL", help="the model to score (e.g. `lmsim merge`'s folder)"
    )
    p.add_argument(
        "--task",
        dest="tasks",
        action="append",
        required=True,
        metavar="SPEC[=MODEL]",
        help="a task (lmsim.data.load_task) and the fine-tuned model whose head it uses; repeat",
    )
    p.add_argument(
        "--part", choices=("test", "validation"), default="test", help="which part to score"
    )
    p.add_argument("--max-length", type=positive_int, default=128, help="truncate to T tokens")
    p.add_argument("--batch-size", type=positive_int, default=32, help="examples per pass")
    p.add_argument("--zoo-profile", default="default", help="zoo build zoo/<name> loads")
    p.add_argument("--out", required=True, help="output folder (created if missing)")
    add_run_options(p)
    return p


def parse_task(text: str) -> tuple[str, str | None]:
    """``"SPEC=MODEL"`` -> ``(SPEC, MODEL)``; ``"SPEC"`` -> ``(SPEC, None)``."""
    spec, sep, head = text.partition("=")
    if not spec or (sep and not head):
        raise CliError(f"--task {text!r}: write SPEC or SPEC=MODEL (e.g. smoke=./bert-smoke)")
    return spec, head or None


def _kind_task(kind: str) -> str:
    return "token-classification" if kind == "token" else "sequence-classification"


def _score(model, tokenizer, task, part: str, args) -> float:
    from lmsim.finetune import predict_logits
    from lmsim.tasks import score

    inputs, _ = task.subset(part)
    logits = predict_logits(
        model, tokenizer, inputs, max_length=args.max_length, batch_size=args.batch_size
    )
    return score(task, logits, part)


def _check_head(model, task, who: str) -> None:
    n_labels = int(model.config.num_labels)
    if n_labels != task.n_labels:
        raise CliError(
            f"{who} has {n_labels} output labels but task {task.name!r} has {task.n_labels} "
            f"({', '.join(task.label_names)}): name the model fine-tuned for it as "
            f"--task {task.name}=MODEL"
        )


def run(args) -> int:
    from lmsim.data import load_task
    from lmsim.finetune import with_head
    from lmsim.models import load_model
    from lmsim.tasks import baseline_score

    console = Console(args)
    pairs = [parse_task(t) for t in args.tasks]
    specs = [spec for spec, _ in pairs]
    repeated = sorted({s for s in specs if specs.count(s) > 1})
    if repeated:
        raise CliError(f"--task {repeated[0]!r} is given twice; name each task once")
    start = time.perf_counter()
    tasks = {spec: load_task(spec) for spec in specs}
    for spec, task in tasks.items():
        if args.part not in task.parts:
            raise CliError(f"task {spec!r} has no {args.part} part; it has {list(task.parts)}")
    kinds = {_kind_task(t.kind) for t in tasks.values()}
    if len(kinds) > 1:
        raise CliError("mix of token and sequence tasks: evaluate them in separate runs")
    load_as = kinds.pop()
    options = {"device": args.device, "dtype": args.dtype, "zoo_profile": args.zoo_profile}
    merged, tokenizer = load_model(args.model, task=load_as, **options)
    donors = {}  # every head is checked before anything is scored or written
    for spec, head in pairs:
        if head is None:
            _check_head(merged, tasks[spec], f"{args.model!r}")
        else:
            donors[spec] = load_model(head, task=load_as, **options)
            _check_head(donors[spec][0], tasks[spec], f"{head!r}")
    folder = out_dir(args.out)
    rows = []
    for spec, head in pairs:
        task = tasks[spec]
        console.say(f"{spec}: {len(task.subset(args.part)[0]):,} {args.part} examples")
        individual = None
        scored = merged
        if head is not None:
            donor, donor_tokenizer = donors[spec]
            scored = with_head(merged, donor)
            individual = _score(donor, donor_tokenizer, task, args.part, args)
        value = _score(scored, tokenizer, task, args.part, args)
        try:
            baseline = baseline_score(task, args.part)
        except ValueError:  # a test-only set: no training labels to learn a baseline from
            baseline = None
        rows.append(
            {
                "task": spec,
                "metric": task.metric,
                "head": head,
                "merged": value,
                "individual": individual,
                "retained": value / individual if individual else None,
                "baseline": baseline,
                "n_examples": len(task.subset(args.part)[0]),
            }
        )
    import pandas as pd

    table = pd.DataFrame(rows)
    csv = folder / "scores.csv"
    table.to_csv(csv, index=False)
    with_individual = [r for r in rows if r["individual"] is not None]
    summary = {
        "command": "evaluate",
        "model": args.model,
        "part": args.part,
        "tasks": rows,
        "average": {
            "merged": float(table["merged"].mean()),
            "individual": (
                sum(r["individual"] for r in with_individual) / len(with_individual)
                if with_individual
                else None
            ),
        },
        "csv": csv.name,
        "out": str(folder),
        "seconds": round(time.perf_counter() - start, 3),
    }
    write_json(folder / "summary.json", summary)
    lines = [f"{args.model} on {len(rows)} task(s), {args.part} part -> {folder}"]
    for row in rows:
        alone = "" if row["individual"] is None else f", alone {row['individual']:.3f}"
        base = "" if row["baseline"] is None else f", baseline {row['baseline']:.3f}"
        lines.append(
            f"  {row['task']:<16} {row['metric']}: merged {row['merged']:.3f}{alone}{base}"
        )
    lines.append(f"  average merged {summary['average']['merged']:.3f}")
    return finish(console, summary, lines)
