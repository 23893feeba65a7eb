"""GPU figures in one run: the device's limits, extraction MFU, float64 moments, LMD fits.

Run on a CUDA machine (no downloads: every model is random, built from a config, and the
texts are generated)::

    python benchmarks/bench_gpu.py                  # ~3 minutes on one H100
    python benchmarks/bench_gpu.py --quick          # seconds: checks that it works

What it measures, each against a limit measured in the same run:

* **limits**: dense matrix products of 8192 × 8192 random matrices in bf16, float32 with
  TF32 off, and float64 (CUDA events, median of 10 after 3 warm-ups), and the
  device-to-device copy bandwidth (bytes read + written).
* **extraction** (:func:`lmsim.extract.extract_moments`, statistics on the device): a random
  BERT-base-shaped model (``BertConfig()``, 12 × 768, 85 M non-embedding parameters) in
  bf16 at T = 128 and 512, last layer (D = 768) and all 13 hidden states (D = 9,984), against
  the bare forward pass on the same batches. MFU = tokens/s × FLOPs/token / peak, with
  FLOPs/token = 2 N + 2 L T d (forward only) and the datasheet dense bf16 peak
  (``--peak-tflops``; H100 SXM 989); the overhead of the statistics is 1 − extract/forward.
* **moments**: :meth:`lmsim.moments.Moments.update` in float64 on the device at D = 9,984
  (chunks of 4,096 rows), as TFLOP/s of the rank-k update (2 k D² as ``addmm_`` runs it) and
  as a fraction of the float64 GEMM limit; beside it the error a float32 accumulation would
  make on activations with large offsets (relative Frobenius error of the covariance and
  the worst correlation error), which is why lmsim keeps float64 on GPUs.
* **lmd**: all 12 leave-one-out and 144 pairwise ridge fits of :func:`lmsim.lmd.decompose`
  at the paper's width (12 × 768) from moments of 100k / 20k synthetic samples streamed on the
  device, and the same fits on the CPU from the same moments.

Writes ``benchmarks/results/gpu.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402
from bench_lmd import synthetic_embeddings  # noqa: E402

from lmsim.extract import extract_moments  # noqa: E402
from lmsim.extract.pooling import _plan  # noqa: E402
from lmsim.lmd import decompose  # noqa: E402
from lmsim.moments import Moments  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "gpu.json"
WORDS = "the quick brown fox jumps over lazy dog a of and to in is was".split()


def cuda_time(fn, warmup: int = 3, repeats: int = 10) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs timed with CUDA events."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def limits(device, size: int) -> dict:
    out = {}
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32), ("fp64", torch.float64)):
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        seconds = cuda_time(lambda a=a, b=b: a @ b)
        out[f"gemm_{name}_tflops"] = 2 * size**3 / seconds / 1e12
        del a, b
    buf = torch.randn(256 * 2**20, device=device)  # 1 GiB
    dst = torch.empty_like(buf)
    seconds = cuda_time(lambda: dst.copy_(buf))
    out["copy_tb_per_s"] = 2 * buf.numel() * 4 / seconds / 1e12
    return out


def word_tokenizer():
    """A BERT WordPiece tokenizer over :data:`WORDS` (the generated texts are made of them)."""
    from lmsim.zoo.text import word_counts, wordpiece_tokenizer, wordpiece_vocab

    counts = word_counts([" ".join(WORDS)])
    return wordpiece_tokenizer(wordpiece_vocab(counts, 200), 512, bos_eos=False)


def extraction(
    device, tokenizer, seq_len: int, n_texts: int, batch: int, peak: float, shard_size: int
) -> dict:
    from transformers import BertConfig, BertModel

    config = BertConfig(max_position_embeddings=512)
    model = BertModel(config).to(device=device, dtype=torch.bfloat16).eval()
    n_params = sum(p.numel() for p in model.parameters())
    n_nonembed = n_params - sum(p.numel() for p in model.embeddings.parameters())
    flops = 2 * n_nonembed + 2 * config.num_hidden_layers * seq_len * config.hidden_size
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, size=seq_len)) for _ in range(n_texts)]
    out = {"seq_len": seq_len, "batch_size": batch, "n_texts": n_texts, "flops_per_token": flops}
    pair = {"bert-base-random": (model, tokenizer)}
    kw = dict(max_length=seq_len, cache=False, progress=False, device=device, batch_size=batch)
    kw["shard_size"] = shard_size
    for layers in ("last", "all"):
        extract_moments(pair, texts[: 2 * batch], layers=layers, **kw)  # warm-up
        torch.cuda.synchronize()
        start = time.perf_counter()
        mom = extract_moments(pair, texts, layers=layers, **kw)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        # The fixed part: tokenising and planning (what a larger corpus amortises).
        start = time.perf_counter()
        _plan(pair, texts, layers=layers, pooling="mean", subword="last", max_length=seq_len,
              device=device, dtype=None, paper_compat_padding=False, lowercase=False,
              zoo_profile="default")  # fmt: skip
        plan_seconds = time.perf_counter() - start
        tok_s = n_texts * seq_len / seconds
        out[f"layers_{layers}"] = {
            "dim": mom.total_dim,
            "seconds": seconds,
            "plan_seconds": plan_seconds,
            "tokens_per_s": tok_s,
            "streaming_tokens_per_s": n_texts * seq_len / max(seconds - plan_seconds, 1e-9),
            "mfu": tok_s * flops / (peak * 1e12),
        }
    ids = torch.randint(5, len(tokenizer), (batch, seq_len), device=device)
    n_batches = max(1, n_texts // batch)
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):

        def forward():
            for _ in range(n_batches):
                model(input_ids=ids, output_hidden_states=True)

        seconds = cuda_time(forward, warmup=1, repeats=3)
    tok_s = n_batches * batch * seq_len / seconds
    out["forward_only"] = {"tokens_per_s": tok_s, "mfu": tok_s * flops / (peak * 1e12)}
    for layers in ("last", "all"):
        row = out[f"layers_{layers}"]
        row["statistics_overhead"] = 1 - row["tokens_per_s"] / tok_s
        row["streaming_overhead"] = 1 - row["streaming_tokens_per_s"] / tok_s
    return out


def moments(device, n_blocks: int, width: int, n_chunks: int, chunk: int) -> dict:
    gen = torch.Generator(device=device).manual_seed(0)
    dim = n_blocks * width
    mixing = torch.randn(256, dim, device=device, generator=gen) / 16
    offset = torch.zeros(dim, device=device)
    offset[:: width // 4] = 50.0  # a few outlier dimensions, as in real hidden states
    names = {f"layer.{i}": width for i in range(n_blocks)}

    def chunk_rows():
        z = torch.randn(chunk, 256, device=device, generator=gen)
        noise = torch.randn(chunk, dim, device=device, generator=gen)
        return (z @ mixing + 0.5 * noise + offset).to(torch.bfloat16).float()

    data = [chunk_rows() for _ in range(n_chunks)]

    def split(x):
        return {name: x[:, i * width : (i + 1) * width] for i, name in enumerate(names)}

    def accumulate():
        mom = Moments(names, device=device)
        for x in data:
            mom.update(split(x))
        return mom

    seconds = cuda_time(accumulate, warmup=1, repeats=3)
    mom = accumulate()
    rate = n_chunks * 2 * chunk * dim**2 / seconds / 1e12
    # The float32 alternative: the same chunked Chan merge with a float32 co-moment.
    torch.backends.cuda.matmul.allow_tf32 = False
    n, mean32, m32 = 0, torch.zeros(dim, device=device), torch.zeros(dim, dim, device=device)
    for x in data:
        k = x.shape[0]
        mb = x.mean(0)
        xc = x - mb
        delta = mb - mean32
        m32 += xc.T @ xc + torch.outer(delta, delta) * (n * k / (n + k))
        mean32 += delta * k / (n + k)
        n += k
    cov64 = mom.cov(list(names)).double()
    cov32 = (m32 / (n - 1)).double()
    sd64 = cov64.diagonal().sqrt()
    corr64 = cov64 / torch.outer(sd64, sd64)
    sd32 = cov32.diagonal().clamp_min(1e-30).sqrt()
    corr32 = cov32 / torch.outer(sd32, sd32)
    return {
        "dim": dim,
        "n_samples": n,
        "chunk": chunk,
        "seconds": seconds,
        "samples_per_s": n / seconds,
        "update_tflops": rate,
        "float32_cov_relative_error": float((cov32 - cov64).norm() / cov64.norm()),
        "float32_max_correlation_error": float((corr32 - corr64).abs().max()),
    }


def lmd(device, n_models: int, width: int, n_train: int, n_test: int, chunk: int) -> dict:
    def stream(n_samples, seed):
        data = synthetic_embeddings(n_models, width, n_samples, 256, seed)
        mom = Moments({k: width for k in data}, device=device)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for lo in range(0, n_samples, chunk):
            mom.update(
                {k: torch.from_numpy(v[lo : lo + chunk]).to(device) for k, v in data.items()}
            )
        torch.cuda.synchronize()
        return mom, time.perf_counter() - start

    train, t_train = stream(n_train, 0)
    test, t_test = stream(n_test, 1)
    out = {"n_models": n_models, "width": width, "n_train": n_train, "n_test": n_test}
    out["moments_seconds"] = t_train + t_test
    decompose(train, test, device=device)  # warm-up: cuSOLVER handles
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = decompose(train, test, device=device)
    torch.cuda.synchronize()
    out["decompose_gpu_seconds"] = time.perf_counter() - start
    train_cpu, test_cpu = train.to("cpu"), test.to("cpu")
    start = time.perf_counter()
    result_cpu = decompose(train_cpu, test_cpu)
    out["decompose_cpu_seconds"] = time.perf_counter() - start
    out["cpu_threads"] = torch.get_num_threads()
    out["group_rho_gpu"] = float(result.group_rho)
    out["group_rho_cpu"] = float(result_cpu.group_rho)
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks it runs")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak")
    parser.add_argument("--skip", nargs="*", default=[], help="sections to skip")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--shard-size", type=int, default=12_800, help="texts per shard (the paper profiles')"
    )
    parser.add_argument(
        "--check-every",
        type=int,
        default=None,
        help="batches between reads of the finiteness flags on CUDA (1: the sync after every "
        "batch of lmsim before 2026-11-26; a baseline)",
    )
    args = parser.parse_args(argv)
    if args.check_every is not None:
        import lmsim.extract.pooling as pooling

        pooling._CHECK_EVERY_CUDA = args.check_every
    device = torch.device("cuda")
    q = args.quick
    report = {
        "gpu": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "peak_bf16_tflops_datasheet": args.peak_tflops,
    }
    sections = {
        "limits": lambda: limits(device, 1024 if q else 8192),
        "extraction": lambda: extraction_all(device, q, args.peak_tflops, args.shard_size),
        "moments": lambda: moments(device, 13, 768, 2 if q else 24, 512 if q else 4096),
        "lmd": lambda: lmd(
            device, 12, 64 if q else 768, 2000 if q else 100_000, 500 if q else 20_000, 4096
        ),
    }
    for name, fn in sections.items():
        if name in args.skip:
            continue
        start = time.perf_counter()
        report[name] = fn()
        print(
            f"{name} ({time.perf_counter() - start:.0f} s): {json.dumps(report[name])}", flush=True
        )
    write_result(args.out, report)
    return report


def extraction_all(device, quick: bool, peak: float, shard_size: int) -> list[dict]:
    tokenizer = word_tokenizer()
    sizes = [(128, 64, 128), (512, 16, 32)] if quick else [(128, 8192, 256), (512, 2048, 64)]
    return [extraction(device, tokenizer, T, n, b, peak, shard_size) for T, n, b in sizes]


if __name__ == "__main__":
    main()
