"""``lmsim lmd``: language model decomposition of a group of models (Zhang, 2022).

The protocol of the book's LMD chapter (``notebooks/zhang2022_lmd/01_decomposition``):
a reference tokenizer cuts the texts into chunks of exactly T tokens
(:func:`lmsim.data.chunk_splits`), every model embeds each chunk as the mean of its last
layer (:func:`lmsim.extract.extract_moments`), and :func:`lmsim.lmd.decompose` fits every
leave-one-out and pairwise regression from the moments (Eq. 6-11). With ``--n-boot``,
:func:`lmsim.lmd.bootstrap` resamples the moment shards for percentile intervals of every
group R², group ρ and pairwise R² and ρ.
"""

from __future__ import annotations

import math
import time

from lmsim.cli._common import (
    CliError,
    Console,
    Parser,
    add_run_options,
    add_text_options,
    announce_zoo_builds,
    finish,
    load_texts,
    nonnegative_int,
    out_dir,
    positive_int,
    save_figure,
    unit_float,
    write_json,
)
from lmsim.cli.extract import model_names

SUMMARY = "language model decomposition: group and pairwise R², ρ with intervals"

EPILOG = """\
example:
  lmsim lmd tiny-bert tiny-gpt2 tiny-llama --corpus ptb --seq-len 16 64 \\
      --n-train 2000 --n-test 400 --n-boot 200 --out lmd/

Writes lmd/group.csv (R² of each model on all the others, Eq. 9, per T, with intervals),
lmd/rho.csv (group ρ, Eq. 10), lmd/pairwise.csv (R²(target | basis) and the symmetric
pairwise ρ, Eq. 11, with intervals), lmd/pairwise_rho_T<T>.csv, lmd/lmd.png and
lmd/summary.json. The reference tokenizer (default: the first model's) sets T.
R² needs n_train well above the widest basis (the other models' widths summed; the summary
gives the ratio, ≈ 61 in the paper; the example's three 32-wide models give 31). Below
{min_ratio:g} train chunks per basis dimension the fit overfits (Stein's factor: the test
error grows by more than {inflation:.0%}) and test R² falls, even below 0: a warning says so,
in the summary's "warnings" too, as it does for any negative test R². minilm-l6 (384 wide)
with two of those models has a 416-wide basis: give it --n-train {example_n:,} or more.
"""
#: Fewer train chunks per basis dimension than this: a warning (Stein's factor k(n, p) >
#: 1.1 at p = 64 and up, i.e. the test error of the fit inflated by more than 10 %).
MIN_CHUNKS_PER_DIM = 10


def _stein_inflation(ratio: float, p: int = 64) -> float:
    """How much the fit's expected test error exceeds the noise at ``ratio`` chunks per basis
    dimension (Stein's factor ``k(n, p) - 1``, :func:`lmsim.lmd.stein_factor`, torch-free)."""
    n = ratio * p
    return (n + 1) * (n - 2) / (n * (n - p - 2)) - 1


def parser(prog: str = "lmsim lmd") -> Parser:
    epilog = EPILOG.format(
        min_ratio=MIN_CHUNKS_PER_DIM,
        inflation=_stein_inflation(MIN_CHUNKS_PER_DIM),
        example_n=MIN_CHUNKS_PER_DIM * (384 + 32),
    )
    p = Parser(prog=prog, description=SUMMARY + ".", epilog=epilog)
    p.add_argument("models", nargs="+", metavar="MODEL", help="the group (at least two)")
    add_text_options(p)
    g = p.add_argument_group("protocol")
    g.add_argument(
        "--seq-len",
        nargs="+",
        type=positive_int,
        default=[64],
        metavar="T",
        help="chunk lengths in tokens of the reference tokenizer; one decomposition per T",
    )
    g.add_argument("--n-train", type=positive_int, default=2000, help="train chunks per T")
    g.add_argument("--n-test", type=positive_int, default=400, help="test chunks per T")
    g.add_argument("--reference-tokenizer", default=None, help="cuts the chunks (default: MODEL 1)")
    g.add_argument("--lowercase", action="store_true", help="lower-case the decoded chunks")
    g.add_argument("--ridge", type=float, default=1e-6, help="λ of Eq. 6")
    g.add_argument(
        "--regulariser",
        choices=("code", "paper"),
        default="code",
        help="'code': the authors' code (ridge added to the covariance, n - 1); 'paper': the "
        "paper's Eq. 6 (ridge on the eigenvalues, n)",
    )
    g.add_argument(
        "--paper-compat-padding",
        action="store_true",
        help="the authors' mean over all T positions, padding included",
    )
    g.add_argument("--seed", type=int, default=0, help="seed of the chunk draw and bootstrap")
    b = p.add_argument_group("intervals")
    b.add_argument("--n-boot", type=nonnegative_int, default=200, help="replicates; 0: none")
    b.add_argument("--level", type=unit_float, default=0.95, help="coverage of the intervals")
    b.add_argument(
        "--resample",
        choices=("test", "train", "both"),
        default="test",
        help="shards resampled: 'test' covers the noise of the test score of this fit (no "
        "refit); 'both' also refits W, which overfits more and can put the interval below "
        "the estimate unless n_train is far above the widest basis",
    )
    b.add_argument(
        "--shard-size",
        type=positive_int,
        default=None,
        help="chunks per shard, the bootstrap's unit (default: n_test / 10)",
    )
    x = p.add_argument_group("extraction")
    x.add_argument("--batch-size", type=positive_int, default=32, help="chunks per forward pass")
    x.add_argument("--zoo-profile", default="default", help="zoo build zoo/<name> loads")
    x.add_argument("--no-cache", action="store_true", help="do not read or write shards")
    p.add_argument("--out", required=True, help="output folder (created if missing)")
    add_run_options(p)
    return p


def _shard_size(args) -> int:
    size = args.shard_size or max(1, math.ceil(args.n_test / 10))
    if args.n_boot:
        few = [
            (k, n)
            for k, n in (("--n-train", args.n_train), ("--n-test", args.n_test))
            if n // size < 2
        ]
        if few:
            k, n = few[0]
            raise CliError(
                f"{k} {n} at --shard-size {size} gives fewer than 2 shards to resample; "
                "lower --shard-size or give --n-boot 0"
            )
    return size


def _extract(args, console, models, texts, T, shard_size):
    from lmsim.extract import extract_moments

    return extract_moments(
        models,
        texts,
        layers="last",
        pooling="mean",
        max_length=T,
        batch_size=args.batch_size,
        paper_compat_padding=args.paper_compat_padding,
        device=args.device,
        dtype=args.dtype,
        cache=not args.no_cache,
        shard_size=shard_size,
        progress=console.progress,
        return_shards=True,
        zoo_profile=args.zoo_profile,
    )


def _tables(T, dec, boot):
    """Rows of group.csv, rho.csv and pairwise.csv for one T."""
    nan = float("nan")
    if boot is not None:
        gci = boot.group_r2_ci()
        rho_lo, rho_hi = boot.group_rho_ci()
        r2_lo, r2_hi = boot.pairwise_r2_ci()
        p_lo, p_hi = boot.pairwise_rho_ci()
    group = [
        {
            "T": T,
            "model": m,
            "r2": float(dec.group_r2[m]),
            "lower": float(gci.loc[m, "lower"]) if boot is not None else nan,
            "upper": float(gci.loc[m, "upper"]) if boot is not None else nan,
            "train_r2": float(dec.train_group_r2[m]),
        }
        for m in dec.models
    ]
    rho = {
        "T": T,
        "rho": float(dec.group_rho),
        "lower": rho_lo if boot is not None else nan,
        "upper": rho_hi if boot is not None else nan,
        "train_rho": float(dec.train_group_rho),
        "n_train": dec.n_train,
        "n_test": dec.n_test,
    }
    pairs = [
        {
            "T": T,
            "target": a,
            "basis": b,
            "r2": float(dec.pairwise_r2.loc[a, b]),
            "r2_lower": float(r2_lo.loc[a, b]) if boot is not None else nan,
            "r2_upper": float(r2_hi.loc[a, b]) if boot is not None else nan,
            "rho": float(dec.pairwise_rho.loc[a, b]),
            "rho_lower": float(p_lo.loc[a, b]) if boot is not None else nan,
            "rho_upper": float(p_hi.loc[a, b]) if boot is not None else nan,
        }
        for a in dec.models
        for b in dec.models
    ]
    return group, rho, pairs


def _figure(group, decs, level):
    import numpy as np
    import pandas as pd

    from lmsim.plotting import heatmap, panel_grid, use_style

    use_style()
    table = pd.DataFrame(group)
    models = list(dict.fromkeys(table.model))
    n = len(models)
    fig, axes = panel_grid(2, ncols=2, panel_size=(2.5 + 0.9 * n, 2.0 + 0.7 * n))
    ax = axes[0]
    seq_lens = list(decs)
    width = 0.8 / len(seq_lens)
    for k, T in enumerate(seq_lens):
        rows = table[table["T"] == T].set_index("model").loc[models]
        x = np.arange(n) + (k - (len(seq_lens) - 1) / 2) * width
        ax.bar(x, rows.r2, width=width, label=f"T={T}")
        if rows.lower.notna().all():
            # The interval itself, even where a refit bootstrap puts it beside the estimate.
            ax.vlines(x, rows.lower, rows.upper, color="black", lw=1)
    ax.set_xticks(np.arange(n), models, rotation=30, ha="right")
    bars = f" ({level:.0%} intervals)" if table.lower.notna().all() else ""
    ax.set(ylabel="test R²", title=f"R²(u_i, {{u_-i}}) per model{bars}")
    ax.legend(frameon=False, fontsize=8)
    T = seq_lens[-1]
    rho = decs[T].pairwise_rho
    heatmap(
        rho,
        ax=axes[1],
        title=f"pairwise ρ, T={T}",
        # ρ can be negative (an overfit fit): the scale reaches down to it, never clipping
        # a negative ρ to the colour of 0.
        vmin=min(0.0, float(np.floor(np.nanmin(np.asarray(rho, dtype=float)) * 10) / 10)),
        vmax=1,
        cmap="viridis",
        annot=n <= 10,
        cbar_label="ρ",
        xlabel="model",
        ylabel="model",
    )
    return fig


def _fit_warnings(T: int, ratio: float, group: list, pairs: list, basis_width: int) -> list:
    """Warnings on one T's fits: too few train chunks per basis dimension for a stable fit,
    and every negative test R² (worse than predicting the mean)."""
    out = []
    if ratio < MIN_CHUNKS_PER_DIM:
        out.append(
            f"T={T}: {ratio:.1f} train chunks per basis dimension (fewer than "
            f"{MIN_CHUNKS_PER_DIM}; the paper has about 61): the fits overfit and test R² and "
            f"ρ are biased low, even negative; give --n-train of at least "
            f"{MIN_CHUNKS_PER_DIM * basis_width:,} "
            "or fewer / narrower models"
        )
    negative = [f"{row['model']} ({row['r2']:.2f})" for row in group if row["r2"] < 0]
    negative += [
        f"{row['target']} | {row['basis']} ({row['r2']:.2f})"
        for row in pairs
        if row["target"] != row["basis"] and row["r2"] < 0
    ]
    if negative:
        out.append(
            f"T={T}: negative test R² (worse than predicting the mean): {', '.join(negative)}; "
            "the fit does not generalise at these sizes"
        )
    return out


def run(args) -> int:
    import warnings

    import pandas as pd

    from lmsim.data import chunk_splits
    from lmsim.lmd import bootstrap, decompose
    from lmsim.models import load_model, load_tokenizer

    console = Console(args)
    names = model_names(args)
    if len(names) < 2:
        raise CliError("LMD needs a group of at least two models")
    folder = out_dir(args.out)
    shard_size = _shard_size(args)
    seq_lens = list(dict.fromkeys(args.seq_len))
    start = time.perf_counter()
    texts = load_texts(args)
    reference = args.reference_tokenizer or names[0]
    tokenizer = load_tokenizer(reference, zoo_profile=args.zoo_profile)
    sizes = {T: (T, args.n_train, args.n_test) for T in seq_lens}
    splits = chunk_splits(texts, tokenizer, sizes, seed=args.seed, lowercase=args.lowercase)
    # Loaded once for every T and split (by name, each call would load them again).
    announce_zoo_builds(console, names, args.zoo_profile)
    models = {
        name: load_model(name, device=args.device, dtype=args.dtype, zoo_profile=args.zoo_profile)
        for name in names
    }
    decs, group, rhos, pairs, notes = {}, [], [], [], []
    for T, (train_texts, test_texts) in splits.items():
        console.say(f"T={T}: {len(train_texts)} train / {len(test_texts)} test chunks")
        train, train_shards = _extract(args, console, models, train_texts, T, shard_size)
        test, test_shards = _extract(args, console, models, test_texts, T, shard_size)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            dec = decompose(train, test, ridge=args.ridge, regulariser=args.regulariser)
            boot = None
            if args.n_boot:
                boot = bootstrap(
                    train_shards,
                    test_shards,
                    n_boot=args.n_boot,
                    seed=args.seed,
                    level=args.level,
                    ridge=args.ridge,
                    regulariser=args.regulariser,
                    progress=console.progress,
                    resample=args.resample,
                )
        for message in dict.fromkeys(str(w.message) for w in caught):
            notes.append(f"T={T}: {message}")
            console.warn(f"T={T}: {message}")
        decs[T] = dec
        g, r, pw = _tables(T, dec, boot)
        widths = list(train.dims.values())
        # The leave-one-out fit of the narrowest model has the widest basis.
        r["n_train_per_basis_dim"] = train.n / (sum(widths) - min(widths))
        basis_width = sum(widths) - min(widths)
        for message in _fit_warnings(T, r["n_train_per_basis_dim"], g, pw, basis_width):
            notes.append(message)
            console.warn(message)
        group += g
        rhos.append(r)
        pairs += pw
        dec.pairwise_rho.rename_axis("model").to_csv(folder / f"pairwise_rho_T{T}.csv")
    pd.DataFrame(group).to_csv(folder / "group.csv", index=False)
    pd.DataFrame(rhos).to_csv(folder / "rho.csv", index=False)
    pd.DataFrame(pairs).to_csv(folder / "pairwise.csv", index=False)
    save_figure(_figure(group, decs, args.level), folder / "lmd.png")
    seconds = time.perf_counter() - start
    summary = {
        "command": "lmd",
        "models": names,
        "reference_tokenizer": reference,
        "seq_lens": seq_lens,
        "n_train": args.n_train,
        "n_test": args.n_test,
        "ridge": args.ridge,
        "regulariser": args.regulariser,
        "intervals": {"n_boot": args.n_boot, "level": args.level, "resample": args.resample}
        if args.n_boot
        else None,
        "shard_size": shard_size,
        "rho": rhos,
        "group": group,
        "pairwise": pairs,
        "warnings": notes,
        "files": ["group.csv", "rho.csv", "pairwise.csv", "lmd.png"]
        + [f"pairwise_rho_T{T}.csv" for T in seq_lens],
        "out": str(folder),
        "seconds": round(seconds, 3),
    }
    write_json(folder / "summary.json", summary)
    lines = [f"{len(names)} models, T in {seq_lens} -> {folder}"]
    if notes:
        lines.append(f"  {len(notes)} warning(s), on stderr and in summary.json")
    for r in rhos:
        ci = f" [{r['lower']:.3f}, {r['upper']:.3f}]" if args.n_boot else ""
        lines.append(
            f"  T={r['T']}: group ρ {r['rho']:.3f}{ci} (train ρ {r['train_rho']:.3f}; "
            f"{r['n_train_per_basis_dim']:.1f} train chunks per basis dimension)"
        )
    return finish(console, summary, lines)
