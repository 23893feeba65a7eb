"""Padding and time of ``extract_moments``: shards of the global length order vs corpus pieces.

Both layouts run the same code on the same texts and model, alternating:

* ``length``: the default, shards are consecutive pieces of the run's texts sorted by
  length, so every batch holds texts of nearly equal lengths;
* ``corpus``: shards are consecutive pieces of the corpus, each sorted inside (what
  ``extract_moments`` did for every call before, and still does with
  ``return_shards=True``, whose shards are a bootstrap's resampling units).

Padding is counted from the forward passes themselves (padded positions over real
tokens); the moments of both layouts are checked to agree (float32 forward noise only).

Usage::

    python benchmarks/bench_shard_order.py --threads 1          # minilm-l6, PTB valid

Writes ``benchmarks/results/extract_shard_order.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from _common import add_common_args, alternate, record, write_result

import lmsim
from lmsim import extract as ex
from lmsim.data import load_corpus
from lmsim.extract import pooling as ex_pooling
from lmsim.models import load_model

RESULTS = Path(__file__).resolve().parent / "results" / "extract_shard_order.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--n-texts", type=int, default=0, help="0: the whole valid split")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--shard-size", type=int, default=256)
    parser.add_argument("--pooling", default="mean", choices=["mean", "word"])
    parser.add_argument("--out", type=Path, default=RESULTS)
    add_common_args(parser)
    args = parser.parse_args()
    n_threads = args.threads or lmsim.default_threads()
    load_before = os.getloadavg()
    texts = load_corpus("ptb", split="valid", max_docs=args.n_texts or None)
    if args.pooling == "word":
        texts = [t.split() for t in texts]
    model, tokenizer = load_model(args.model, device="cpu")
    pair = {args.model: (model, tokenizer)}

    counts = {"padded": 0, "real": 0}
    real_states = ex._hidden_states

    def counting(run, input_ids, mask):
        counts["padded"] += int(input_ids.numel())
        counts["real"] += int(mask.sum())
        return real_states(run, input_ids, mask)

    ex_pooling._hidden_states = counting
    kw = dict(
        pooling=args.pooling,
        batch_size=args.batch_size,
        shard_size=args.shard_size,
        cache=False,
        progress=False,
        device="cpu",
    )
    padding = {}

    def run(layout: str):
        def go():
            counts.update(padded=0, real=0)
            mom = ex.extract_moments(pair, texts, return_shards=layout == "corpus", **kw)
            mom = mom[0] if layout == "corpus" else mom
            padding[layout] = {**counts, "fraction": counts["padded"] / counts["real"] - 1}
            return mom

        return go

    with lmsim.threads(n_threads):
        ex.extract_moments(pair, texts[: 2 * args.batch_size], **kw)  # warm-up
        timed = alternate({"length": run("length"), "corpus": run("corpus")}, args.repeats)
    ex_pooling._hidden_states = real_states
    a, b = timed["length"]["result"], timed["corpus"]["result"]
    cov_a, cov_b = a.cov(a.names), b.cov(b.names)
    n_real = padding["length"]["real"]
    result = {
        "model": args.model,
        "corpus": "ptb valid",
        "n_texts": len(texts),
        "pooling": args.pooling,
        "batch_size": args.batch_size,
        "shard_size": args.shard_size,
        "real_tokens": n_real,
        "layouts": {
            layout: {
                "padding": padding[layout],
                "best_s": timed[layout]["best_s"],
                "times_s": timed[layout]["times_s"],
                "real_tokens_per_s": n_real / timed[layout]["best_s"],
            }
            for layout in ("length", "corpus")
        },
        "speedup_length_over_corpus": timed["corpus"]["best_s"] / timed["length"]["best_s"],
        "max_abs_cov_difference": float((cov_a - cov_b).abs().max()),
        "max_abs_cov": float(cov_b.abs().max()),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        **record(n_threads, {}, load_before),
    }
    del result["limits"], result["fraction_is"]  # a float32 forward: no float64 BLAS limit
    write_result(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if k != "thread_info"}, indent=2))


if __name__ == "__main__":
    main()
