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

Usage::

    python benchmarks/bench_twotower.py                       # PTB, zoo tokenizer, hidden 64
    python benchmarks/bench_twotower.py --hidden 128 --layers 4 --steps 30 --threads 1
    python benchmarks/bench_twotower.py --device cuda --hidden 512 --layers 8 --batch-size 64
    python benchmarks/bench_twotower.py --device cuda --paper-sizes --gpu-speedups \
        --vocab-size 30522 --seq-len 128 --batch-size 256 --steps 30

Writes ``benchmarks/results/twotower.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import tempfile
import time
from pathlib import Path

import torch
import yaml
from _common import write_result

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
    for label in ("lmsim", "bare"):
        torch.manual_seed(0)
        model = tt.TwoTowerLM(config, vocab_size, args.seq_len).to(device)
        run = tt.phase1_run(model, data, settings, 0, device)
        run.eval_fn = None
        bare_loop(run, settings, device, 2)  # warm-up: allocator, kernels
        if label == "lmsim":
            with tempfile.TemporaryDirectory() as work:
                result = train(run, settings.train_settings(), Path(work), device, progress=False)
            seconds = result["train_seconds"]
        else:
            seconds = bare_loop(run, settings, device, args.steps)
        tokens_per_s = args.steps * args.batch_size * args.seq_len / seconds
        out[f"{label}_tokens_per_s"] = round(tokens_per_s, 1)
    out["overhead_ratio"] = round(out["bare_tokens_per_s"] / out["lmsim_tokens_per_s"], 3)
    out["params"] = sum(p.numel() for p in model.parameters())
    flops = tt.two_tower_flops_per_token(config, args.seq_len, vocab_size)
    out["flops_per_token"] = flops
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
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--towers", nargs="+", default=list(tt.TOWER_TYPES))
    parser.add_argument("--paper-sizes", action="store_true", help="the paper's Table 1 towers")
    parser.add_argument("--vocab-size", type=int, default=None, help="output rows (tokenizer's)")
    parser.add_argument("--gpu-speedups", action="store_true", help="fused AdamW + compile")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
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
    rows = [measure(config, args, data, device) for config in configs]
    report = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "vocab_size": data.vocab_size,
        "seq_len": args.seq_len,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "gpu_speedups": args.gpu_speedups,
        "results": rows,
    }
    for row in rows:
        mfu_text = "" if row["mfu"] is None else f", MFU {row['mfu']:.1%}"
        print(
            f"{row['tower']:>4} {row['hidden']}x{row['layers']}: {row['lmsim_tokens_per_s']:,.0f} tokens/s through "
            f"lmsim.training.train, {row['bare_tokens_per_s']:,.0f} bare "
            f"(overhead ratio {row['overhead_ratio']:.2f}){mfu_text}"
        )
    write_result(args.out, report)
    return report


if __name__ == "__main__":
    main()
