"""Two-tower training throughput: tokens/s of each tower type, through lmsim's training loop.

For each tower type (ELMo-style LSTMs, GPT-style causal transformer, BERT-style masked LM)
one phase-1 run of ``--steps`` steps goes through :func:`lmsim.training.train` (the one
training loop: AdamW, schedule, clipping, checkpoints, logging), and the same model, data
and steps through a bare loop (forward, backward, clip, AdamW step, nothing else). The
ratio bare/lmsim is the loop's overhead (1.0 = none). On CUDA the MFU of the towers is
reported too (FLOPs/token of :func:`lmsim.twotower.two_tower_flops_per_token`, towers and
output head), with bf16 autocast; ``--gpu-speedups`` adds fused AdamW and ``torch.compile``.

``--paper-sizes`` measures the paper's Table 1 towers (the ``paper`` runs of
``notebooks/runs.yml``: ELMo 2 × 4,096 LSTM cells projected to 512, GPT 12 × 768, BERT-base
12 × 384, BERT-large 24 × 512) at the paper's T = 128 and batch 256, with an output layer of
``--vocab-size`` rows (BERT's 30,522 in the paper; the token ids still come from the offline
tokenizer, so only the speed is the paper's, not the text).

Distance to the limit (CPU, ``_common.py``): the nominal FLOP count of a run is
``steps · batch · T`` tokens times :func:`lmsim.twotower.two_tower_flops_per_token`
(6 FLOPs per weight per token, attention ``12 L T d``, the output head at the predicted
positions); achieved GFLOP/s over the float32 GEMM limit (``torch.mm``) measured in the
same run at the same threads, before and after. lmsim and the bare loop alternate in
rounds, each on a fresh model with the same seed, best of ``--repeats``, inside
``lmsim.threads(--threads)``; the JSON carries the :func:`_common.record` header.

Usage::

    python benchmarks/bench_twotower.py --threads 1           # PTB, zoo tokenizer, hidden 64
    python benchmarks/bench_twotower.py --tiny --out /tmp/twotower.json   # seconds
    python benchmarks/bench_twotower.py --hidden 128 --layers 4 --steps 30 --threads 1
    python benchmarks/bench_twotower.py --device cuda --hidden 512 --layers 8 --batch-size 64
    python benchmarks/bench_twotower.py --device cuda --paper-sizes --gpu-speedups \
        --vocab-size 30522 --seq-len 128 --batch-size 256 --steps 30

Writes ``benchmarks/results/twotower.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml
from _common import fraction, machine_limits, record, remeasure, write_result

import lmsim
from lmsim import twotower as tt
from lmsim._runtime import resolve_device
from lmsim.training import mfu, train

RESULTS = Path(__file__).resolve().parent / "results" / "twotower.json"
MANIFEST = Path(__file__).resolve().parents[1] / "notebooks" / "runs.yml"


def bare_loop(run, settings, device, steps: int) -> float:
    """Seconds of ``steps`` plain AdamW steps of ``run`` (no schedule, logging or checkpoints)."""
    params = [p for m in run.modules.values() for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=settings.lr, betas=(0.9, 0.98), weight_decay=0.01)
    use_bf16 = device.type == "cuda"
    start = time.perf_counter()
    for step in range(steps):
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16):
            loss, _, _ = run.loss_fn(step)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def measure(config: tt.TowerConfig, args, data, device) -> dict:
    on_gpu = device.type == "cuda"
    settings = tt.TwoTowerSettings(
        corpora=tuple(args.corpora),
        tokenizer=args.tokenizer,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        steps=args.steps,
        max_train_lines=args.max_train_lines,
        eval_every=10**9,
        checkpoint_every=10**9,
        bf16=on_gpu,
        fused_adamw=on_gpu and args.gpu_speedups,
        compile=on_gpu and args.gpu_speedups,
        device=str(device),
    )
    vocab_size = args.vocab_size or data.vocab_size
    out = {"tower": config.tower, **dataclasses.asdict(config), "vocab_size": vocab_size}
    times = {"lmsim": [], "bare": []}
    # Rounds alternate the two loops, each on a fresh model with the same seed, so a burst
    # of load on a shared machine hits both alike; the best time of each is kept.
    for _ in range(args.repeats):
        for label in ("lmsim", "bare"):
            torch.manual_seed(0)
            model = tt.TwoTowerLM(config, vocab_size, args.seq_len).to(device)
            run = tt.phase1_run(model, data, settings, 0, device)
            run.eval_fn = None
            bare_loop(run, settings, device, 2)  # warm-up: allocator, kernels
            if label == "lmsim":
                with tempfile.TemporaryDirectory() as work:
                    result = train(
                        run, settings.train_settings(), Path(work), device, progress=False
                    )
                times[label].append(result["train_seconds"])
            else:
                times[label].append(bare_loop(run, settings, device, args.steps))
    tokens = args.steps * args.batch_size * args.seq_len
    for label, seconds in times.items():
        out[f"{label}_times_s"] = seconds
        out[f"{label}_tokens_per_s"] = round(tokens / min(seconds), 1)
    out["overhead_ratio"] = round(out["bare_tokens_per_s"] / out["lmsim_tokens_per_s"], 3)
    out["params"] = sum(p.numel() for p in model.parameters())
    flops = tt.two_tower_flops_per_token(config, args.seq_len, vocab_size)
    out["flops_per_token"] = flops
    out["flops_nominal"] = flops * tokens
    out["mfu"] = mfu(out["lmsim_tokens_per_s"], flops, device)
    if on_gpu:
        out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
        torch.cuda.reset_peak_memory_stats(device)
    return out


def paper_configs() -> list[tt.TowerConfig]:
    """One config per distinct tower of the paper profile (Table 1), from the manifest."""
    manifest = yaml.safe_load(MANIFEST.read_text())
    chapter = next(c for c in manifest["chapters"] if c["slug"] == "he2022_twotower")
    configs = {}
    for run in chapter["notebooks"][0]["paper"]["runs"]:
        fields = {k: v for k, v in run.items() if k not in ("name", "seed")}
        configs.setdefault(tuple(sorted(fields.items())), tt.TowerConfig(**fields))
    return list(configs.values())


TINY = {"hidden": 16, "layers": 1, "seq_len": 16, "batch_size": 4, "steps": 3}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", nargs="+", default=["ptb"])
    parser.add_argument("--tokenizer", default="zoo:default")
    parser.add_argument("--max-train-lines", type=int, default=4000)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="lmsim.threads (CPU)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds, best kept")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--towers", nargs="+", default=list(tt.TOWER_TYPES))
    parser.add_argument("--paper-sizes", action="store_true", help="the paper's Table 1 towers")
    parser.add_argument("--vocab-size", type=int, default=None, help="output rows (tokenizer's)")
    parser.add_argument("--gpu-speedups", action="store_true", help="fused AdamW + compile")
    parser.add_argument("--tiny", action="store_true", help=f"a seconds-long check: {TINY}")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.tiny:
        for key, value in TINY.items():
            setattr(args, key, value)
    load_before = os.getloadavg()
    device = resolve_device(args.device)
    limits = machine_limits(
        args.threads,
        size=512 if args.tiny else 2048,
        device=str(device) if device.type == "cuda" else None,
    )
    settings = tt.TwoTowerSettings(
        corpora=tuple(args.corpora),
        tokenizer=args.tokenizer,
        seq_len=args.seq_len,
        max_train_lines=args.max_train_lines,
    )
    data = tt.load_data(settings)
    if args.paper_sizes:
        configs = paper_configs()
    else:
        heads = max(1, args.hidden // 32)
        configs = [
            tt.TowerConfig(tower, hidden=args.hidden, layers=args.layers, heads=heads)
            for tower in args.towers
        ]
    with lmsim.threads(args.threads):
        rows = [measure(config, args, data, device) for config in configs]
    limits = remeasure(limits, args.threads)
    # bf16 autocast on CUDA: its limit is the device's bf16 GEMM; float32 on the CPU.
    precision = "bfloat16" if device.type == "cuda" else "float32"
    for row in rows:
        for label in ("lmsim", "bare"):
            times = row.pop(f"{label}_times_s")
            seconds = min(times)
            row[label] = {"best_s": seconds, "times_s": times}
            row[label].update(fraction(row["flops_nominal"], seconds, limits, precision, device))
    report = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        **record(args.threads, limits, load_before),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "vocab_size": data.vocab_size,
        "seq_len": args.seq_len,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "gpu_speedups": args.gpu_speedups,
        "results": rows,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    for row in rows:
        mfu_text = "" if row["mfu"] is None else f", MFU {row['mfu']:.1%}"
        print(
            f"{row['tower']:>4} {row['hidden']}x{row['layers']}: "
            f"{row['lmsim_tokens_per_s']:,.0f} tokens/s through lmsim.training.train "
            f"({row['lmsim']['fraction_of_gemm_limit']:.1%} of the {precision} GEMM limit), "
            f"{row['bare_tokens_per_s']:,.0f} bare (overhead ratio {row['overhead_ratio']:.2f})"
            f"{mfu_text}"
        )
    report["load_average_after"] = list(os.getloadavg())
    write_result(args.out, report)
    return report


if __name__ == "__main__":
    main()
