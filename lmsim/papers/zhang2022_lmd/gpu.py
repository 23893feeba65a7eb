"""GPU "paper-lite" LMD: every offline real model at T = 16 and 64, the pairwise fits at
n_train ≥ 20 × the basis width, the pairwise level beside the authors' released tables.

The paper's checkpoints are not offline, so its cells cannot be recomputed here; what can be
compared is the level of pairwise dependency (a pairwise fit depends only on its two models,
``EVIDENCE.md`` §3) at the paper's T with a ratio of train sequences to basis dimensions close
to the paper's (≈ 61 for its twelve-model fits). Prepared for one GPU machine (issue 42,
Beyond): four models, 40,000 / 4,000 sequences at T = 16 and 16,000 / 1,600 at T = 64 (the
widest pairwise basis, MPNet's 768 dimensions, gives n / p = 52 and 21; the leave-one-out
fits of the four-model group, 1,984 dimensions at most, 20 and 8), every interval over train
and test shards. Expected cost on one H100: a few minutes of extraction, seconds of fits.

Run::

    python -m lmsim.papers.zhang2022_lmd.gpu --output-dir DIR            # on a GPU machine
    python -m lmsim.papers.zhang2022_lmd.gpu --output-dir DIR --dry-run  # CPU, tiny stand-ins

The dry run replaces the models by the tiny offline ones and the sizes by a few hundred
sequences: it checks the code path, its numbers mean nothing. Writes ``pairwise.csv`` (every
ordered pair per T: raw, corrected, interval), ``summary.csv`` (per T: our mean pairwise R²
and its interval beside the authors') and ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from lmsim import data, lmd
from lmsim.extract import extract_moments
from lmsim.models import load_tokenizer
from lmsim.papers.zhang2022_lmd.authors import authors_mean_pairwise_r2, authors_pairwise_r2
from lmsim.papers.zhang2022_lmd.paper import PAPER_SEQ_LENS

__all__ = ["MODELS", "STANDINS", "plan", "run"]

#: Every offline real model (lmsim.models.OFFLINE_MODELS without the tiny random ones).
MODELS = ["minilm-l6", "all-mpnet-base-v2", "smollm2-135m", "gemma-3-270m"]
#: Their dry-run stand-ins.
STANDINS = ["tiny-bert", "tiny-gpt2", "tiny-llama", "tiny-distilbert"]
#: (T, n_train, n_test) of the GPU run.
SIZES = ((16, 40_000, 4_000), (64, 16_000, 1_600))


def plan(widths: dict[str, int], sizes=SIZES, min_ratio: float = 20.0) -> pd.DataFrame:
    """Train sequences per basis dimension of every T: pairwise (widest single basis) and group.

    Raises ``ValueError`` when a T's pairwise fits fall below ``min_ratio``.
    """
    widest = max(widths.values())
    group = sum(widths.values()) - min(widths.values())
    rows = []
    for T, n_train, n_test in sizes:
        rows.append({"T": T, "n_train": n_train, "n_test": n_test,
                     "pairwise n/p": n_train / widest, "group n/p": n_train / group})  # fmt: skip
        if n_train / widest < min_ratio:
            raise ValueError(
                f"T={T}: {n_train} train sequences give n/p = {n_train / widest:.1f} for a "
                f"{widest}-wide basis, below {min_ratio}"
            )
    return pd.DataFrame(rows)


def run(
    output_dir,
    dry_run: bool = False,
    corpora=("ptb", "bbcnews"),
    n_boot: int = 200,
    shard_size: int = 500,
    test_shard_size: int = 100,
    batch_size: int = 256,
    device: str = "auto",
    seed: int = 0,
) -> pd.DataFrame:
    """Extract, decompose, bootstrap over train and test shards; write the tables.

    Returns the per-T summary (also written to ``output_dir/summary.csv``).
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    models = STANDINS if dry_run else MODELS
    sizes = ((16, 400, 200), (64, 400, 200)) if dry_run else SIZES
    if dry_run:
        corpora, n_boot, shard_size, test_shard_size, batch_size = ("ptb",), 20, 40, 20, 32
    reference = "tiny-bert" if dry_run else "minilm-l6"  # BERT's uncased WordPiece
    start = time.perf_counter()
    texts = [line for name in corpora for line in data.load_corpus(name, seed=seed)]
    ref_tokenizer = load_tokenizer(reference)
    splits = data.chunk_splits(
        texts, ref_tokenizer, {T: (T, n, m) for T, n, m in sizes}, seed=seed, lowercase=True
    )
    pairs, summary = [], []
    for T, (train_texts, test_texts) in splits.items():
        (train, train_shards), (_, test_shards) = (
            extract_moments(models, part, layers="last", pooling="mean", max_length=T,
                            batch_size=batch_size, device=device, shard_size=size, cache=False,
                            progress=False, return_shards=True)
            for part, size in ((train_texts, shard_size), (test_texts, test_shard_size))
        )  # fmt: skip
        boot = lmd.bootstrap(train_shards, test_shards, n_boot=n_boot, seed=seed,
                             resample="both", progress=False)  # fmt: skip
        labels = list(boot.estimate.models)
        widths = dict(zip(labels, train.dims.values()))
        if T == sizes[0][0]:
            plan(widths, sizes, min_ratio=0 if dry_run else 20).to_csv(out / "plan.csv")
        views = lmd.replicate_views(boot, widths)
        draws = np.stack([v.pairwise_r2.to_numpy() for v in views[1:]])
        lo, hi = np.quantile(draws, [0.025, 0.975], axis=0)
        for i, target in enumerate(labels):
            for j, basis in enumerate(labels):
                if i != j:
                    pairs.append({"T": T, "target": target, "basis": basis,
                                  "raw": boot.estimate.pairwise_r2.iloc[i, j],
                                  "corrected": views[0].pairwise_r2.iloc[i, j],
                                  "lower": lo[i, j], "upper": hi[i, j],
                                  "n_train / basis": train.n / widths[basis]})  # fmt: skip
        ours = lmd.bootstrap_estimate(
            lambda v, T=T: lmd.mean_pairwise_r2(v[T].pairwise_r2),
            {T: boot},
            n_units=min(len(train_shards), len(test_shards)),
            widths={T: widths},
        )
        row = {"T": T, "n_train": train.n, "ours, mean pairwise R² (corrected)": ours.estimate,
               "lower": ours.low, "upper": ours.high,
               "ours, raw": lmd.mean_pairwise_r2(boot.estimate.pairwise_r2)}  # fmt: skip
        if T in PAPER_SEQ_LENS:
            theirs = authors_pairwise_r2("128k", T).to_numpy()
            cells = theirs[~np.eye(len(theirs), dtype=bool)]
            row.update({"authors' mean pairwise R²": authors_mean_pairwise_r2(T),
                        "authors' min": float(np.nanmin(cells)),
                        "authors' max": float(np.nanmax(cells))})  # fmt: skip
        summary.append(row)
    pd.DataFrame(pairs).to_csv(out / "pairwise.csv", index=False)
    table = pd.DataFrame(summary)
    table.to_csv(out / "summary.csv", index=False)
    meta = {"models": models, "dry_run": dry_run, "corpora": list(corpora), "n_boot": n_boot,
            "seconds": time.perf_counter() - start}  # fmt: skip
    (out / "summary.json").write_text(json.dumps(meta, indent=1))
    return table


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--dry-run", action="store_true", help="tiny stand-ins on the CPU")
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    table = run(args.output_dir, dry_run=args.dry_run, n_boot=args.n_boot, device=args.device)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.round(3).to_string(index=False))
    if not math.isfinite(float(table.iloc[:, 2].min())):
        raise SystemExit("a mean pairwise R² is not finite")


if __name__ == "__main__":
    main()
