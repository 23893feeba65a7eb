"""``lmsim similarity`` with chance floors vs without, and the floors vs the old raw-data floors.

The newcomer's run of issue 47: ``lmsim similarity --moments`` on the word-pooled moments
of two models, ``--n-words`` words (2,202), all five moment measures. Models: the offline
``minilm-l6`` (6 layers × 384) and a randomly initialised copy of its architecture
(:func:`lmsim.models.load_random_model`, seed 0) standing in for the newcomer's
``./my-model`` (2 × 7 blocks of 384, as there); ``--tiny``: ``tiny-bert`` and
``tiny-distilbert`` on 300 words. The moments are extracted once (not timed). Then, in the
same process, alternating (best of ``--repeats``):

* **without floors**: the command with ``--floor-draws 0`` (measures, CSVs, heatmaps);
* **with floors**: the command with ``--floor-draws 20`` (the default) and ``--no-cache``,
  so the floors are computed, not read back;

and once, the **old floors**: :func:`lmsim.metrics.floors._reference_chance_floors` (the
command's floors before this change: ``lmsim.stats.chance_floor`` on raw Gaussian data,
one measure and one pair of widths at a time) at the same 20 draws. The goal is
``with / without ≤ 2``. The script checks that every new floor mean equals the old one
within 4.5 combined Monte-Carlo errors (``se`` of each; the new one's is a conservative
jackknife). A cached rerun (the floors read back) is timed as well.

Nominal FLOP count of the floors' sampling: one Wishart draw of dimension ``D = K · d``
(``K`` blocks for 20 draws): ``min(n − 1, D/3) · D²``.

Usage::

    python benchmarks/bench_floors.py --threads 1 --repeats 3
    python benchmarks/bench_floors.py --tiny --threads 1 --repeats 1 --out /tmp/floors.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import add_common_args, alternate, fraction, machine_limits, record, remeasure
from _common import write_result as write_json_result

import lmsim
from lmsim.cli import main as lmsim_main
from lmsim.metrics.floors import _reference_chance_floors, n_null_blocks, null_comoment

MEASURES = ["linear_cka", "svcca", "pwcca", "neuronsim", "mixedsim"]
SHORT = {"linear_cka": "cka"}


def word_sentences(n_words: int, max_words: int = 40) -> list[list[str]]:
    """PTB validation sentences, whitespace words, cut so that they hold exactly ``n_words``."""
    from lmsim.data import load_corpus

    out, total = [], 0
    for line in load_corpus("ptb", split="valid"):
        words = line.split()[: min(max_words, n_words - total)]
        if not words:
            continue
        out.append(words)
        total += len(words)
        if total == n_words:
            return out
    raise ValueError(f"PTB's validation split has fewer than {n_words} words")


def moments_file(folder: Path, tiny: bool, n_words: int) -> tuple[Path, list[str]]:
    from lmsim.extract import extract_moments
    from lmsim.models import load_model, load_random_model

    if tiny:
        models = {name: load_model(name, device="cpu") for name in ("tiny-bert", "tiny-distilbert")}
    else:
        models = {
            "minilm-l6": load_model("minilm-l6", device="cpu"),
            "minilm-l6-random": load_random_model("minilm-l6", seed=0, device="cpu"),
        }
    mom = extract_moments(
        models,
        word_sentences(n_words, 10 if tiny else 40),
        pooling="word",
        device="cpu",
        cache=False,
        progress=False,
    )
    if mom.n != n_words:
        raise RuntimeError(f"extracted {mom.n} words, expected {n_words}")
    path = folder / "moments.safetensors"
    mom.save(path)
    return path, list(models)


#: Every run's summary, so that the split into measures and floors is the best run's.
SUMMARIES: dict[str, list] = {}


def similarity(moments: Path, out: Path, draws: int, cache: bool) -> dict:
    argv = [
        "similarity",
        "--moments",
        str(moments),
        "--measures",
        ",".join(SHORT.get(m, m) for m in MEASURES),
    ]
    argv += ["--floor-draws", str(draws), "--out", str(out), "--quiet", "--json"]
    argv += [] if cache else ["--no-cache"]
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = lmsim_main(argv)
    if status:
        raise RuntimeError(f"lmsim {' '.join(argv)} exited with {status}")
    summary = json.loads(buffer.getvalue())
    SUMMARIES.setdefault(f"{draws}-{cache}", []).append(summary)
    return summary


def _measure(args, tmp: Path):
    """Extract once, then alternate the command with and without floors; the old floors."""
    n_words = 300 if args.tiny else args.n_words
    moments, models = moments_file(tmp, args.tiny, n_words)
    print(f"{models}, {n_words} words; {args.threads} thread(s)", flush=True)
    similarity(moments, tmp / "cache_fill", args.draws, cache=True)  # fills the cache
    runs = alternate(
        {
            "without_floors": lambda: similarity(moments, tmp / "without", 0, cache=False),
            "with_floors": lambda: similarity(moments, tmp / "with", args.draws, cache=False),
            "cached_floors": lambda: similarity(moments, tmp / "cached", args.draws, cache=True),
        },
        args.repeats,
    )
    summary = runs["with_floors"]["result"]
    for name, entry in runs["cached_floors"]["result"]["measures"].items():
        if entry["chance"] != summary["measures"][name]["chance"]:
            raise RuntimeError(f"the cached floors of {name} differ from the computed ones")
    n, dims = summary["n_rows"], summary["blocks"]
    widths = sorted(set(dims.values()))
    old, old_s = {}, {}
    blocks = n_null_blocks(args.draws)
    dim = blocks * max(widths)
    rng = np.random.default_rng(0)
    sampling = alternate({"sampling": lambda: null_comoment(n, dim, rng)}, args.repeats)
    for metric in MEASURES:
        started = time.perf_counter()
        old[metric] = _reference_chance_floors(metric, {}, n, widths, args.draws, seed=0)
        old_s[metric] = time.perf_counter() - started
        print(f"old floors of {metric}: {old_s[metric]:.1f} s", flush=True)
    return runs, summary, sampling, old, old_s, n, dims, widths, blocks, dim, models


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-words", type=int, default=2202)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--tiny", action="store_true", help="tiny models, 300 words (seconds)")
    add_common_args(parser)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "floors.json"
    )
    args = parser.parse_args(argv)
    threads = lmsim.default_threads() if args.threads is None else args.threads
    load_before = os.getloadavg()
    limits = machine_limits(threads)
    args.threads = threads
    cache_before = os.environ.get("LMSIM_CACHE")
    with tempfile.TemporaryDirectory() as tmp, lmsim.threads(threads):
        tmp = Path(tmp)
        os.environ["LMSIM_CACHE"] = str(tmp / "cache")  # the cached rerun reads only ours
        try:
            measured = _measure(args, tmp)
            runs, summary, sampling, old, old_s, n, dims, widths, blocks, dim, models = measured
        finally:
            if cache_before is None:
                os.environ.pop("LMSIM_CACHE", None)
            else:
                os.environ["LMSIM_CACHE"] = cache_before
    limits = remeasure(limits, threads)

    agreement = []
    for metric in MEASURES:
        new = summary["measures"][SHORT.get(metric, metric)]["chance"]["floors"]
        for a, b in zip(new, old[metric], strict=True):
            err = math.hypot(a["se"], b["se"])
            z = abs(a["mean"] - b["mean"]) / err if err else 0.0
            agreement.append(
                {
                    "metric": metric,
                    "d_x": a["d_x"],
                    "d_y": a["d_y"],
                    "new_mean": a["mean"],
                    "new_se": a["se"],
                    "old_mean": b["mean"],
                    "old_se": b["se"],
                    "z": z,
                    "within_4.5_se": z < 4.5,
                }
            )
    without = runs["without_floors"]["best_s"]
    with_floors = runs["with_floors"]["best_s"]
    computed = SUMMARIES[f"{args.draws}-False"]
    floors_s = min(s["chance_floor_seconds"] for s in computed)
    measures_s = min(sum(m["seconds"]["matrix"] for m in s["measures"].values()) for s in computed)
    # dsyrk of n − 1 rows into D × D, or Bartlett's dlauum (D³/3) when n − 1 ≥ D
    sampling_flops = dim**3 / 3 if n - 1 >= dim else (n - 1) * dim**2
    sampling_s = sampling["sampling"]["best_s"]
    result = {
        "task": "lmsim similarity --moments, 5 measures: chance floors (20 draws) vs none; "
        "the floors vs the old raw-data floors",
        "models": models,
        "n_words": n,
        "blocks": dims,
        "draws": args.draws,
        "without_floors_s": without,
        "with_floors_s": with_floors,
        "ratio_with_over_without": with_floors / without,
        "goal_ratio": 2.0,
        "meets_goal": with_floors / without <= 2.0,
        "floors_s_best": floors_s,
        "measures_s_best": measures_s,
        "floors_over_measures": floors_s / measures_s,
        "cached_floors_s": runs["cached_floors"]["best_s"],
        "ratio_cached_over_without": runs["cached_floors"]["best_s"] / without,
        "sampling_s": sampling_s,
        "sampling_share_of_floors": sampling_s / floors_s,
        "old_floors_s": old_s,
        "old_floors_total_s": sum(old_s.values()),
        "speedup_floors_old_over_new": sum(old_s.values()) / floors_s,
        "times_s": {k: v["times_s"] for k, v in runs.items()},
        "null_blocks": blocks,
        "sampling_limit": fraction(sampling_flops, sampling_s, limits),
        "agreement": agreement,
        "all_within_4.5_se": all(row["within_4.5_se"] for row in agreement),
    }
    print(
        f"without floors {without:.2f} s, with {with_floors:.2f} s: ratio "
        f"{with_floors / without:.2f} (goal ≤ 2); floors {floors_s:.2f} s vs measures "
        f"{measures_s:.2f} s; old floors {sum(old_s.values()):.1f} s "
        f"({sum(old_s.values()) / floors_s:.1f}×); cached {runs['cached_floors']['best_s']:.2f} s; "
        f"sampling {sampling_s:.2f} s; "
        f"max z {max(r['z'] for r in agreement):.2f}"
    )
    payload = {
        "config": {
            "n_words": n,
            "draws": args.draws,
            "tiny": args.tiny,
            "repeats": args.repeats,
            "device": "cpu",
        },
        **record(threads, limits, load_before),
        **result,
    }
    write_json_result(args.out, payload)
    print(f"wrote {args.out}")
    if not result["all_within_4.5_se"]:
        raise SystemExit("a new floor differs from the old one by more than 4.5 errors")


if __name__ == "__main__":
    main()
