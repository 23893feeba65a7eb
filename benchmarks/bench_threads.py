"""CPU threads: a tiny RegMean merge at default thread settings vs pinned, before and after.

The task of issue 31: three small BERT sequence classifiers (random, seeded, built from
``BertConfig``; ``--layers`` x ``--hidden``, ``--intermediate``; the ``minilm-l6``
WordPiece tokenizer), :func:`lmsim.merge.collect_grams` of each over its own PTB
sentences, then :func:`lmsim.merge.merge_models` (RegMean, alpha = 0.9). Three sides, each
in a fresh process started with every thread variable removed (``LMSIM_THREADS``,
``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``), so torch and the
BLAS pools start at their own defaults (all cores):

* **default**: the calls as a user writes them, no thread setting: lmsim's thread policy
  (``@thread_policy``) applies ``lmsim.threads()`` inside each entry point (the
  **after**);
* **before**: the same calls inside ``lmsim._threads._as_chosen()``, which makes the
  policy stand aside and changes nothing: the behaviour before the policy, torch and
  OpenBLAS on their default thread counts;
* **pinned**: the same calls inside an explicit ``lmsim.threads(--threads)``.

Times cover ``collect_grams`` x 3 + ``merge_models`` (building the models and reading the
texts excluded). The merged weights of every side are checked against the pinned side's.

Distance to the limit (``_common.py``): nominal FLOPs = the forward passes on the real
tokens (``2 N`` per token, ``N`` the non-embedding parameters) + one ``syrk`` per linear
layer of the encoder (``n_tokens d_in²``) + the RegMean solves (per linear layer
``2 M d² o + d³ / 3 + 2 d² o``, as ``bench_merge.py``), compared with the float64 GEMM
limit at the ``--threads`` count measured in the same run, before and after. Sides
alternate in rounds of fresh processes, best of ``--repeats``.

Usage::

    python benchmarks/bench_threads.py                 # 3 models x 2 layers x 256, 200 texts each
    python benchmarks/bench_threads.py --tiny --out /tmp/threads.json   # seconds

Writes ``benchmarks/results/threads.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from _common import fraction, machine_limits, record, remeasure, write_result

import lmsim

RESULTS = Path(__file__).resolve().parent / "results" / "threads.json"
SIDES = ("default", "before", "pinned")
THREAD_VARS = ("LMSIM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
ARGS = ("n_models", "layers", "hidden", "intermediate", "n_texts", "batch_size", "threads")
TINY = {"layers": 1, "hidden": 32, "intermediate": 64, "n_texts": 12, "batch_size": 4}


def make_models(args, vocab_size: int) -> list:
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 64),
        intermediate_size=args.intermediate,
        num_labels=2,
    )
    models = []
    for seed in range(args.n_models):
        torch.manual_seed(seed)
        models.append(BertForSequenceClassification(config).eval())
    return models


def load_texts(n: int) -> list[str]:
    from lmsim.data import load_corpus

    return load_corpus("ptb", split="valid", max_docs=n)


def worker(args, side: str, out: Path) -> dict:
    """One side in this (fresh) process: build, then time the Grams and the merge."""
    from lmsim import _threads
    from lmsim.merge import collect_grams, merge_models
    from lmsim.models import load_tokenizer

    tok = load_tokenizer("minilm-l6")
    models = make_models(args, len(tok))
    texts = load_texts(args.n_models * args.n_texts)
    parts = [texts[i :: args.n_models] for i in range(args.n_models)]
    n_tokens = sum(len(tok(t)["input_ids"]) for t in texts)
    setting = {
        "default": nullcontext(),
        "before": _threads._as_chosen(),
        "pinned": lmsim.threads(args.threads),
    }[side]
    with setting:
        info = lmsim.thread_info()
        start = time.perf_counter()
        grams = [
            collect_grams(m, tok, part, batch_size=args.batch_size, device="cpu", progress=False)
            for m, part in zip(models, parts)
        ]
        t_grams = time.perf_counter() - start
        merged, _ = merge_models(models, grams, alpha=0.9)
        seconds = time.perf_counter() - start
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in merged.state_dict().items()}, str(out))
    return {
        "side": side,
        "seconds": seconds,
        "seconds_grams": t_grams,
        "seconds_merge": seconds - t_grams,
        "n_tokens": n_tokens,
        "thread_info_at_call": info,
        "policy_threads": lmsim.default_threads(),
        "lmsim_file": lmsim.__file__,
    }


def run_worker(side: str, args, tmp: Path) -> dict:
    tmp.mkdir(parents=True, exist_ok=True)
    out = tmp / f"{side}.safetensors"
    keys = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in ARGS]
    cmd = [sys.executable, __file__, "--worker", side, "--tmp", str(out), *keys]
    root = str(Path(__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    env["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(f"worker {side} failed:\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["file"] = str(out)
    return result


def max_difference(path: str, ref_path: str) -> float:
    from safetensors import safe_open

    worst = 0.0
    with safe_open(path, "pt") as got, safe_open(ref_path, "pt") as ref:
        for name in ref.keys():  # noqa: SIM118
            diff = (got.get_tensor(name).double() - ref.get_tensor(name).double()).abs()
            worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
    return worst


def task_flops(args, n_tokens: int) -> float:
    """Nominal FLOPs (module docstring) from the layer widths and the real token count."""
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=8,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 64),
        intermediate_size=args.intermediate,
    )
    with torch.device("meta"):
        shapes = BertModel(config).encoder
    n_params = sum(p.numel() for p in shapes.parameters())
    total = 2.0 * n_params * n_tokens
    for module in shapes.modules():
        if isinstance(module, torch.nn.Linear):
            d, o = module.in_features, module.out_features
            total += n_tokens * d * d  # each token passes one model: one syrk row
            total += 2 * args.n_models * d * d * o + d**3 / 3 + 2 * d * d * o
    return total


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-models", type=int, default=3)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--intermediate", type=int, default=1024)
    parser.add_argument("--n-texts", type=int, default=200, help="PTB sentences per model")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--threads", type=int, default=1, help="the pinned side's lmsim.threads count"
    )
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds, best kept")
    parser.add_argument("--tiny", action="store_true", help=f"a seconds-long check: {TINY}")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--tmp", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tiny:
        for key, value in TINY.items():
            setattr(args, key, value)

    if args.worker:
        result = worker(args, args.worker, Path(args.tmp))
        print(json.dumps(result))
        return result

    load_before = os.getloadavg()
    limits = machine_limits(args.threads, size=512 if args.tiny else 2048)
    runs, times = {}, {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="bench_threads_") as tmp:
        for round_ in range(args.repeats):
            for side in SIDES:
                print(f"running {side} ...", flush=True)
                run = run_worker(side, args, Path(tmp) / f"round_{round_}")
                times[side].append(run["seconds"])
                if side not in runs or run["seconds"] < runs[side]["seconds"]:
                    runs[side] = run
                print(f"  {side}: {run['seconds']:.2f} s", flush=True)
        for side in SIDES:
            runs[side]["max_abs_difference_vs_pinned"] = max_difference(
                runs[side]["file"], runs["pinned"]["file"]
            )
    limits = remeasure(limits, args.threads)
    flops = task_flops(args, runs["pinned"]["n_tokens"])
    for side, run in runs.items():
        run.pop("file")
        run["times_s"] = times[side]
        run["best_s"] = run["seconds"]
        run.update(fraction(flops, run["best_s"], limits))
    best = {side: runs[side]["best_s"] for side in SIDES}
    result = {
        "config": {k: getattr(args, k) for k in (*ARGS, "repeats", "tiny")},
        **record(args.threads, limits, load_before),
        "flops_nominal": flops,
        "flops_are": "forward 2 N per real token + n_tokens d² per linear layer + "
        "RegMean solves 2 M d² o + d³/3 + 2 d² o (module docstring)",
        **runs,
        "ratio_before_over_default": best["before"] / best["default"],
        "ratio_before_over_pinned": best["before"] / best["pinned"],
        "ratio_default_over_pinned": best["default"] / best["pinned"],
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    result["load_average_after"] = list(os.getloadavg())
    write_result(Path(args.out), result)
    for side in SIDES:
        r = runs[side]
        print(
            f"{side:8s} {r['best_s']:7.2f} s (grams {r['seconds_grams']:.2f} s, merge "
            f"{r['seconds_merge']:.2f} s)  torch threads at the call "
            f"{r['thread_info_at_call']['torch_threads']}, choice "
            f"{r['thread_info_at_call']['caller_choice']}, "
            f"{r['fraction_of_gemm_limit']:.1%} of the fp64 GEMM limit"
        )
    print(
        f"before / default {result['ratio_before_over_default']:.2f}x, "
        f"before / pinned {result['ratio_before_over_pinned']:.2f}x, "
        f"default / pinned {result['ratio_default_over_pinned']:.2f}x"
    )
    return result


if __name__ == "__main__":
    main()
