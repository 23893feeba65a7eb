"""``lmsim similarity``: every similarity measure between every pair of layers of models.

Extracts the joint moments of the models' layers (or reads a file from ``lmsim extract``)
and computes each measure for every (source, target) pair of blocks with
:func:`lmsim.metrics.pairwise_matrix`. Per measure: a CSV matrix (rows: source layer X,
columns: target layer Y; directional measures read X→Y) and a labelled heatmap; a JSON
summary with the means within and across models and the chance floor at this n.

The measures are those :data:`lmsim.metrics.pairwise.MOMENT_METRICS` computes from
moments (``cka`` is ``linear_cka``; ``procrustes`` is the angular shape distance, 0 = the
same shape) and those of :data:`~lmsim.metrics.pairwise.PREPARED_RAW_METRICS` that need
the rows themselves (``debiased_cka``, ``rbf_cka``, ``rsa``: the command then keeps the
pooled activations in memory, and ``--moments`` cannot give them), so a metric added
there appears here.
``--paper-compatible`` selects the authors' variant of every measure whose function takes
``paper_compat`` (SVCCA and PWCCA today: Wu et al.'s released code; FORMULAS §2).
"""

from __future__ import annotations

import inspect
import time

import numpy as np

from lmsim.cli._common import (
    CliError,
    Console,
    Parser,
    add_run_options,
    add_text_options,
    existing_file,
    finish,
    layer_spec,
    load_texts,
    nonnegative_int,
    out_dir,
    save_figure,
    split_list,
    write_json,
)
from lmsim.cli.extract import add_extraction_options, extract, model_names, pooled_texts

SUMMARY = (
    "CKA (linear, debiased, RBF), SVCCA, PWCCA, neuronsim, mixedsim, Procrustes, RSA "
    "between every pair of layers"
)
#: Short names the command accepts for metrics of lmsim.metrics.
SHORT_NAMES = {"linear_cka": "cka"}
#: Measures that are distances (0 = the same shape): unrelated data lie *above* their floor.
DISTANCES = {"procrustes": "angular distance, radians"}

EPILOG = """\
example:
  lmsim similarity minilm-l6 ./my-model --corpus ptb --max-docs 300 --pooling word \\
      --max-words 40 --measures cka,svcca,pwcca,neuronsim,mixedsim --paper-compatible --out sim/
  lmsim similarity --moments ptb.safetensors --measures cka --out sim/   # from `lmsim extract`

Writes sim/<measure>.csv (rows: source layer, columns: target layer), sim/<measure>.png
and sim/summary.json (means within and across models, the chance floor at this n).
"""


def measures() -> dict[str, str]:
    """Command-line measure name -> :mod:`lmsim.metrics` function name."""
    from lmsim.metrics.pairwise import MOMENT_METRICS, PREPARED_RAW_METRICS

    names = list(MOMENT_METRICS) + list(PREPARED_RAW_METRICS)
    return {SHORT_NAMES.get(name, name): name for name in names}


def row_measures() -> set[str]:
    """Function names of the measures that need the activations, not only their moments."""
    from lmsim.metrics.pairwise import PREPARED_RAW_METRICS

    return set(PREPARED_RAW_METRICS)


def has_paper_variant(metric: str) -> bool:
    """Whether the metric function of :mod:`lmsim.metrics` takes ``paper_compat``."""
    import lmsim.metrics

    return "paper_compat" in inspect.signature(getattr(lmsim.metrics, metric)).parameters


def parser(prog: str = "lmsim similarity") -> Parser:
    # Measure names from lmsim.cli._catalog (generated from lmsim.metrics, tested current), so
    # --help does not import torch; run() checks --measures against lmsim.metrics itself.
    from lmsim.cli._catalog import CATALOG

    p = Parser(prog=prog, description=SUMMARY + ".", epilog=EPILOG)
    p.add_argument("models", nargs="*", metavar="MODEL", help="models (with --moments: a subset)")
    p.add_argument(
        "--moments",
        type=existing_file,
        metavar="FILE",
        help="moments from `lmsim extract` instead of running the models",
    )
    p.add_argument(
        "--measures",
        default="cka,svcca,pwcca,neuronsim,mixedsim",
        help="comma-separated: " + ",".join(CATALOG["similarity_measures"]),
    )
    p.add_argument(
        "--paper-compatible",
        action="store_true",
        help="the authors' variants where lmsim.metrics has them ("
        + ", ".join(CATALOG["similarity_paper_variants"])
        + ")",
    )
    p.add_argument(
        "--floor-draws",
        type=nonnegative_int,
        default=20,
        help="pairs of unrelated Gaussian data per width pair for the chance floor (0: none)",
    )
    p.add_argument(
        "--save-moments", action="store_true", help="also write <out>/moments.safetensors"
    )
    add_text_options(p, required=False)
    add_extraction_options(p)
    p.add_argument("--out", required=True, help="output folder (created if missing)")
    add_run_options(p)
    return p


# ---------------------------------------------------------------------- chance floor
FLOOR_DATA = "independent isotropic Gaussian X, Y of the same n, widths"


def chance_floors(
    chosen: dict[str, dict],
    n: int,
    dims: dict[str, int],
    n_draws: int,
    progress: bool = False,
    cache: bool = True,
) -> dict[str, dict]:
    """Per measure ``{"floors": [...], "data": ...}`` over the distinct widths, or a note why not.

    ``chosen`` maps each :mod:`lmsim.metrics` function name to its options. All the measures
    read one set of random draws in the moment form (:func:`lmsim.metrics.floors.
    chance_floors`: shared across measures and across layer pairs of equal widths, cached
    under ``$LMSIM_CACHE/floors``): a similarity means something only above this floor
    (with few rows per dimension SVCCA and mixedsim are large on noise).
    """
    if not n_draws:
        return {
            m: {"floors": None, "note": "chance floor not computed: --floor-draws 0"}
            for m in chosen
        }
    if n_draws < 2:
        raise CliError("--floor-draws must be 0 (no floor) or at least 2")
    from lmsim.metrics.floors import FLOOR_VERSION
    from lmsim.metrics.floors import chance_floors as floors_of

    method = (
        "lmsim.metrics.floors (version "
        f"{FLOOR_VERSION}): random Wishart co-moments, each draw a pair of independent "
        "blocks, draws shared across measures and pairs of widths; se = jackknife over blocks"
    )
    floors = floors_of(
        chosen, n, dims.values(), n_draws=n_draws, seed=0, progress=progress, cache=cache
    )
    return {m: {"floors": floors[m], "data": FLOOR_DATA, "method": method} for m in chosen}


# ---------------------------------------------------------------------- moments
def _select(mom, models: list[str], layers):
    """Blocks of ``mom`` for the named models (all when none) and ``--layers``."""
    from lmsim.blocks import layers_by_model, model_of, parse_block

    names = list(mom.names)
    if models:
        available = sorted({model_of(n) for n in names})
        missing = [m for m in models if m not in available]
        if missing:
            raise CliError(
                f"model {missing[0]!r} has no blocks in the moments file; it holds {available}"
            )
        names = [n for n in names if model_of(n) in models]
    if layers != "all":
        by_model = layers_by_model(names)
        keep = set()
        for model, present in by_model.items():
            wanted = (
                [present[-1]]
                if layers == "last"
                else [i if i >= 0 else present[-1] + 1 + i for i in layers]
            )
            absent = [i for i in wanted if i not in present]
            if absent:
                raise CliError(f"--layers: {model!r} has no layer {absent[0]} in the moments file")
            keep |= {(model, i) for i in wanted}
        names = [n for n in names if parse_block(n) in keep]
    if len(names) < 1:
        raise CliError("no blocks selected: check MODEL names and --layers")
    return mom.subset(names) if names != list(mom.names) else mom


def _moments(args, console: Console, rows: list[str]):
    """``(moments, activations or None)``: activations only when a chosen measure needs them."""
    from lmsim.moments import Moments

    if args.moments is not None:
        if args.texts is not None or args.corpus is not None:
            raise CliError("give --moments or --texts/--corpus, not both")
        if rows:
            raise CliError(
                f"--measures {','.join(rows)}: these need the activations themselves, which a "
                "moments file does not hold; run from MODEL names with --texts/--corpus, or "
                "leave them out"
            )
        mom = Moments.load(args.moments, device="cpu")
        console.say(f"read {args.moments}: {mom.n:,} rows, {len(mom.names)} blocks")
        return _select(mom, list(args.models), layer_spec(args.layers)), None
    if args.texts is None and args.corpus is None:
        raise CliError("give --texts FILE or --corpus NAME (or --moments FILE)")
    names = model_names(args)
    layers = layer_spec(args.layers)
    texts = pooled_texts(args, load_texts(args))
    console.say(f"{len(texts):,} texts through {len(names)} model(s)")
    if not rows:
        return extract(args, console, texts), None
    from lmsim.extract import extract_activations
    from lmsim.extract.cli import row_options

    console.say(f"keeping the activations for {', '.join(rows)}")
    acts = extract_activations(
        names, texts, layers=layers, **row_options(args), progress=console.progress
    )
    return Moments.from_arrays(acts), acts


# ---------------------------------------------------------------------- summary
def _block_means(matrix: np.ndarray, names: list[str]) -> dict:
    """Means within a model (off the diagonal) and across models, and per model pair."""
    from lmsim.blocks import model_of

    models = np.array([model_of(n) for n in names])
    same = models[:, None] == models[None, :]
    off = ~np.eye(len(names), dtype=bool)
    order = list(dict.fromkeys(models.tolist()))
    pairs = {
        f"{a} -> {b}": float(matrix[np.ix_(models == a, models == b)].mean())
        for a in order
        for b in order
    }
    within = matrix[same & off]
    across = matrix[~same]
    return {
        "within_model_mean": float(within.mean()) if within.size else None,
        "across_models_mean": float(across.mean()) if across.size else None,
        "min": float(matrix.min()),
        "max": float(matrix.max()),
        "by_model_pair": pairs,
    }


def _figure(matrix, names, title, label):
    from lmsim.plotting import layer_heatmap, panel_grid, use_style

    use_style()
    side = min(2.5 + 0.38 * len(names), 24.0)
    fig, (ax,) = panel_grid(1, panel_size=(side + 1.5, side))
    layer_heatmap(matrix, names, ax=ax, title=title, cbar_label=label)
    return fig


def run(args) -> int:
    console = Console(args)
    table = measures()
    chosen = split_list(args.measures, list(table), "--measures")
    folder = out_dir(args.out)
    start = time.perf_counter()
    rows = [m for m in chosen if table[m] in row_measures()]
    mom, acts = _moments(args, console, rows)
    names = list(mom.names)
    if args.save_moments:
        mom.save(folder / "moments.safetensors")
    from lmsim.metrics import pairwise_matrix, pairwise_matrix_raw

    results = {}
    for measure in chosen:
        metric = table[measure]
        options = (
            {"paper_compat": True} if args.paper_compatible and has_paper_variant(metric) else {}
        )
        variant = "paper-compatible" if options else "textbook"
        console.say(f"{measure} ({variant}) over {len(names)}² block pairs")
        started = time.perf_counter()
        if metric in row_measures():
            matrix = pairwise_matrix_raw(
                acts, names, metric=metric, progress=console.progress, **options
            )
        else:
            matrix = pairwise_matrix(
                mom, names, metric=metric, progress=console.progress, **options
            )
        matrix_seconds = time.perf_counter() - started
        csv = folder / f"{measure}.csv"
        import pandas as pd

        pd.DataFrame(matrix, index=names, columns=names).rename_axis("source \\ target").to_csv(csv)
        png = save_figure(
            _figure(
                matrix,
                names,
                f"{measure} ({variant}), n = {mom.n:,}",
                f"{measure} ({DISTANCES[metric]})" if metric in DISTANCES else measure,
            ),
            folder / f"{measure}.png",
        )
        results[measure] = {
            "metric": f"lmsim.metrics.{metric}",
            "distance": metric in DISTANCES,
            "variant": variant,
            "options": options,
            "csv": csv.name,
            "png": png.name,
            **_block_means(matrix, names),
        }
        results[measure]["seconds"] = {"matrix": round(matrix_seconds, 3)}
    started = time.perf_counter()
    if args.floor_draws:
        console.say(f"chance floors: {args.floor_draws} draws per pair of widths, all measures")
    floors = chance_floors(
        {table[m]: results[m]["options"] for m in chosen},
        mom.n,
        dict(mom.dims),
        args.floor_draws,
        progress=console.progress,
        cache=not args.no_cache,
    )
    floor_seconds = time.perf_counter() - started
    for measure in chosen:
        results[measure]["chance"] = floors[table[measure]]
    summary = {
        "command": "similarity",
        "n_rows": mom.n,
        "blocks": dict(mom.dims),
        "pooling": None if args.moments is not None else args.pooling,
        "moments": str(args.moments) if args.moments is not None else None,
        "paper_compatible": bool(args.paper_compatible),
        "measures": results,
        "out": str(folder),
        "seconds": round(time.perf_counter() - start, 3),
        "chance_floor_seconds": round(floor_seconds, 3),
    }
    write_json(folder / "summary.json", summary)
    lines = [f"{mom.n:,} rows, {len(names)} blocks -> {folder}"]
    for measure, res in results.items():
        across = res["across_models_mean"]
        floors = res["chance"]["floors"]
        floor = ""
        if floors and table[measure] in DISTANCES:  # unrelated data: at least this far apart
            floor = f"; unrelated data ≥ {min(f['low'] for f in floors):.3f} (a distance)"
        elif floors:
            floor = f"; chance floor ≤ {max(f['high'] for f in floors):.3f}"
        lines.append(
            f"  {measure:<10} ({res['variant']}): within-model mean "
            f"{_fmt(res['within_model_mean'])}, across-model mean {_fmt(across)}{floor}"
        )
    return finish(console, summary, lines)


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"
