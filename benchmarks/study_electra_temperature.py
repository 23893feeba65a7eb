"""Does the zoo's ELECTRA discriminator learn? A sweep over the generator's temperature.

Not a timing benchmark: a small controlled study behind the default zoo profile's
``gen_temperature = 3``. For each temperature it builds ``electra-s0`` of the default
profile with ``lmsim.zoo.build_model`` in a temporary cache (same seed, data, masks and
step budget; only the sampling temperature differs) and reports from its ``zoo.json``
what the zoo page reports, on all of PTB valid: the
discriminator's replaced-token loss beside the best constant predictor (the entropy of
the replaced fraction), its ROC AUC and accuracy, and the generator's perplexity beside
the unigram baseline. Writes ``benchmarks/results/electra_temperature.json``.

Usage::

    python benchmarks/study_electra_temperature.py                       # T = 1, 3; 1,500 steps
    python benchmarks/study_electra_temperature.py --temperatures 1 2 3 --steps 500
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import tempfile

import torch
from _common import write_result

from lmsim import zoo


def run(temperature: float, steps: int, threads: int) -> dict:
    """Build the default profile's ``electra-s0`` at one temperature in a temporary cache;
    its ``zoo.json`` (final evaluation on all of PTB valid)."""
    prof = dataclasses.replace(
        zoo.PROFILES["default"],
        name=f"study-t{temperature:g}",
        gen_temperature=temperature,
        steps=steps,
        eval_every=steps,
        threads=threads,
    )
    with tempfile.TemporaryDirectory() as cache:
        os.environ["LMSIM_CACHE"] = cache
        zoo.build_model("electra-s0", prof)
        facts = zoo.model_facts("electra-s0", prof)
    keep = ("val_ppl", "unigram_ppl", "rtd_accuracy", "rtd_baseline", "rtd_loss")
    keep += ("rtd_baseline_loss", "rtd_auc", "train_seconds")
    return {"temperature": temperature, "steps": steps, **{k: facts[k] for k in keep}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 3.0])
    parser.add_argument("--steps", type=int, default=zoo.PROFILES["default"].steps)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/results/electra_temperature.json")
    args = parser.parse_args()
    rows = [run(t, args.steps, args.threads) for t in args.temperatures]
    print(
        f"{'T':>4} {'RTD loss':>9} {'constant':>9} {'AUC':>6} {'acc':>6} {'base':>6} {'gen ppl':>8}"
    )
    for r in rows:
        print(
            f"{r['temperature']:>4g} {r['rtd_loss']:>9.4f} {r['rtd_baseline_loss']:>9.4f} "
            f"{r['rtd_auc']:>6.3f} {r['rtd_accuracy']:>6.3f} {r['rtd_baseline']:>6.3f} "
            f"{r['val_ppl']:>8.1f}"
        )
    out = {
        "study": "electra_temperature",
        "profile": "default",
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "rows": rows,
    }
    write_result(args.out, out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
