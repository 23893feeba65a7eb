"""``lmsim probe``: what a model's neurons encode, and how many of them are needed.

A linear probe (:func:`lmsim.probe.train_probe`: elastic-net logistic regression, NeuroX's
settings) predicts each word's UPOS tag (``--task pos``) or dependency relation (``--task
dep``) from the model's word activations (:func:`lmsim.probe.word_activations`, all
requested layers concatenated), beside three baselines: the majority class, the control
task of Hewitt & Liang (random labels per word type, same probe; selectivity = accuracy −
control accuracy) and the word-identity lookup (:func:`lmsim.probe.lexical_baseline`).
With ``--cluster-threshold τ`` the neurons are clustered by correlation
(:func:`lmsim.cluster.cluster_neurons`, distance ``1 − |r|`` on the training words), one
neuron per cluster is kept (:func:`lmsim.cluster.representatives`) and a probe on the kept
neurons is trained too, with the kept count per layer (:func:`lmsim.cluster.kept_per_block`),
the redundancy analysis of Dalvi et al. (2020).
"""

from __future__ import annotations

import time

import numpy as np

from lmsim.cli._common import (
    CliError,
    Console,
    Parser,
    add_run_options,
    existing_file,
    finish,
    layer_spec,
    out_dir,
    positive_int,
    save_figure,
    unit_float,
    write_json,
)

SUMMARY = "probe accuracy with majority/control baselines; kept neurons per layer"
#: --task -> the annotation field of lmsim.data.Sentence it predicts.
TASKS = {"pos": "upos", "dep": "deprels"}
SPLITS = ("train", "dev", "test")

EPILOG = """\
example:
  lmsim probe minilm-l6 --conllu en_ewt-ud-train.conllu --task pos \\
      --cluster-threshold 0.3 0.5 --out probe/
  lmsim probe ./my-model --conllu train.conllu --dev dev.conllu --test test.conllu --task dep --out probe/

Without --dev/--test the sentences of --conllu are split 80/10/10 (seeded). Writes
probe/probe.csv (accuracy per split and the baselines, for all neurons and each τ),
probe/kept_per_layer.csv, probe/probe.png and probe/summary.json.
"""


def parser(prog: str = "lmsim probe") -> Parser:
    p = Parser(prog=prog, description=SUMMARY + ".", epilog=EPILOG)
    p.add_argument("model", metavar="MODEL", help="a model folder, registry name or hub id")
    d = p.add_argument_group("data")
    d.add_argument("--conllu", type=existing_file, required=True, metavar="FILE")
    d.add_argument("--dev", type=existing_file, default=None, metavar="FILE")
    d.add_argument("--test", type=existing_file, default=None, metavar="FILE")
    d.add_argument("--task", choices=sorted(TASKS), required=True, help="UPOS or dependency label")
    d.add_argument("--max-sentences", type=positive_int, default=None, help="per file")
    x = p.add_argument_group("activations")
    x.add_argument("--layers", nargs="+", default=["all"], metavar="L")
    x.add_argument("--subword", choices=("last", "first", "mean"), default="last")
    x.add_argument("--max-length", type=positive_int, default=None)
    x.add_argument("--batch-size", type=positive_int, default=32)
    x.add_argument("--zoo-profile", default="default", help="zoo build zoo/<name> loads")
    r = p.add_argument_group("probe")
    r.add_argument("--epochs", type=positive_int, default=10)
    r.add_argument("--l1", type=float, default=1e-5)
    r.add_argument("--l2", type=float, default=1e-5)
    r.add_argument("--seed", type=int, default=0, help="probe, control task, split, clusters")
    r.add_argument(
        "--cluster-threshold",
        type=unit_float,
        nargs="+",
        default=[],
        metavar="τ",
        help="cut the correlation clusters at these distances (1 - |r|)",
    )
    p.add_argument("--out", required=True, help="output folder (created if missing)")
    add_run_options(p)
    return p


def _read(path, field: str, limit: int | None):
    from lmsim.data import read_conllu

    sentences = read_conllu(path)[:limit]
    if not sentences:
        raise CliError(f"no sentence in {str(path)!r}")
    missing = sum(getattr(s, field) is None for s in sentences)
    if missing:
        raise CliError(
            f"{str(path)!r}: {missing} sentence(s) lack the {field} column this task needs"
        )
    return sentences


def _splits(args, field: str) -> dict:
    if (args.dev is None) != (args.test is None):
        raise CliError("give both --dev and --test, or neither (then --conllu is split 80/10/10)")
    train = _read(args.conllu, field, args.max_sentences)
    if args.dev is not None:
        return {
            "train": train,
            "dev": _read(args.dev, field, args.max_sentences),
            "test": _read(args.test, field, args.max_sentences),
        }
    if len(train) < 10:
        raise CliError(f"{str(args.conllu)!r} has {len(train)} sentences; split needs at least 10")
    order = np.random.default_rng(args.seed).permutation(len(train))
    n_dev = n_test = max(1, len(train) // 10)
    parts = {
        "dev": order[:n_dev],
        "test": order[n_dev : n_dev + n_test],
        "train": order[n_dev + n_test :],
    }
    return {k: [train[i] for i in sorted(parts[k])] for k in SPLITS}


def _row(key: str, n: int, result, lexical: float) -> dict:
    return {
        "neurons": key,
        "n_neurons": n,
        **{f"{k}_accuracy": result.accuracy.get(k) for k in SPLITS},
        "majority": result.majority["test"],
        "control": (result.control_accuracy or {}).get("test"),
        "selectivity": (result.selectivity or {}).get("test"),
        "lexical": lexical,
    }


def _figure(rows, kept):
    import pandas as pd

    from lmsim.plotting import panel_grid, use_style

    use_style()
    table = pd.DataFrame(rows).set_index("neurons")
    n_panels = 2 if kept else 1
    fig, axes = panel_grid(n_panels, ncols=n_panels, panel_size=(5.5, 4.0))
    ax = axes[0]
    x = np.arange(len(table))
    ax.bar(x, table.test_accuracy, width=0.6, label="probe")
    for column, marker, label in (
        ("majority", "_", "majority class"),
        ("control", "x", "control task"),
        ("lexical", "o", "word lookup"),
    ):
        ax.scatter(x, table[column], marker=marker, s=120, label=label, zorder=3)
    ax.set_xticks(x, [f"{k}\n({n})" for k, n in zip(table.index, table.n_neurons)])
    ax.set(ylabel="test accuracy", ylim=(0, 1), title="probe and baselines (test)")
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    if kept:
        frame = pd.DataFrame(kept).T
        frame.columns = [c.rsplit("/", 1)[-1] for c in frame.columns]
        frame.T.plot.bar(ax=axes[1], rot=0)
        axes[1].set(xlabel="layer", ylabel="kept neurons", title="kept neurons per layer")
        axes[1].legend(title="τ", frameon=False, fontsize=8)
    return fig


def run(args) -> int:
    import pandas as pd

    from lmsim.cluster import cluster_neurons, kept_per_block, representatives
    from lmsim.probe import lexical_baseline, train_probe, word_activations

    console = Console(args)
    folder = out_dir(args.out)
    field = TASKS[args.task]
    layers = layer_spec(args.layers)
    splits = _splits(args, field)
    start = time.perf_counter()
    names = sorted({t for part in splits.values() for s in part for t in getattr(s, field)})
    index = {name: i for i, name in enumerate(names)}
    y = {k: np.array([index[t] for s in v for t in getattr(s, field)]) for k, v in splits.items()}
    words = {k: [w for s in v for w in s.words] for k, v in splits.items()}
    console.say(
        f"{args.task}: {len(names)} labels; "
        + ", ".join(f"{k} {len(v):,} sentences / {len(y[k]):,} words" for k, v in splits.items())
    )
    from lmsim.models import load_model

    # Loaded once for the three splits; blocks are still named "{MODEL}/layer.{i}".
    loaded = {
        args.model: load_model(
            args.model, device=args.device, dtype=args.dtype, zoo_profile=args.zoo_profile
        )
    }
    X, dims = {}, None
    for k, part in splits.items():
        X[k], dims = word_activations(
            loaded,
            [s.words for s in part],
            layers=layers,
            subword=args.subword,
            batch_size=args.batch_size,
            max_length=args.max_length,
            device=args.device,
            dtype=args.dtype,
            progress=console.progress,
            zoo_profile=args.zoo_profile,
        )
    settings = dict(
        classes=np.arange(len(names)),
        epochs=args.epochs,
        l1=args.l1,
        l2=args.l2,
        seed=args.seed,
        device=args.device,
    )
    lexical = lexical_baseline(words["train"], y["train"], words["test"], y["test"])

    def probe(columns):
        return train_probe(
            *[a for k in SPLITS for a in (X[k][:, columns], y[k])],
            **{f"words_{k}": words[k] for k in SPLITS},
            **settings,
        )

    n_neurons = X["train"].shape[1]
    console.say(f"probe on all {n_neurons:,} neurons")
    rows = [_row("all", n_neurons, probe(np.arange(n_neurons)), lexical)]
    kept_counts = {}
    if args.cluster_threshold:
        console.say(f"clustering {n_neurons:,} neurons at τ = {args.cluster_threshold}")
        cuts = cluster_neurons(X["train"], [float(t) for t in args.cluster_threshold])
        for tau, labels in cuts.items():
            kept = representatives(labels, args.seed)
            kept_counts[f"τ={tau:g}"] = kept_per_block(kept, dims)
            rows.append(_row(f"τ={tau:g}", kept.size, probe(kept), lexical))
    table = pd.DataFrame(rows)
    table.to_csv(folder / "probe.csv", index=False)
    if kept_counts:
        pd.DataFrame(kept_counts).rename_axis("layer").to_csv(folder / "kept_per_layer.csv")
    save_figure(_figure(rows, kept_counts), folder / "probe.png")
    seconds = time.perf_counter() - start
    summary = {
        "command": "probe",
        "model": args.model,
        "task": args.task,
        "labels": names,
        "n_words": {k: int(len(v)) for k, v in y.items()},
        "blocks": dims,
        "results": rows,
        "kept_per_layer": kept_counts,
        "out": str(folder),
        "seconds": round(seconds, 3),
    }
    write_json(folder / "summary.json", summary)
    lines = [f"{args.model}, {args.task}: {len(names)} labels -> {folder}"]
    for row in rows:
        lines.append(
            f"  {row['neurons']:<8} {row['n_neurons']:>6} neurons: test accuracy "
            f"{row['test_accuracy']:.3f} (majority {row['majority']:.3f}, control "
            f"{row['control']:.3f}, word lookup {row['lexical']:.3f})"
        )
    return finish(console, summary, lines)
