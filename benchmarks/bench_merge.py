"""RegMean merge of BERT-base-shaped models: lmsim's streaming float64 merge vs the authors' way.

Five randomly initialised ``BertModel(BertConfig())`` models (12 layers x 768, 3072
intermediate; seeded) and synthetic Grams for every linear layer are merged with RegMean
(alpha = 0.9, the paper's default) in three separate processes, so that each peak memory
is its own:

* **lmsim**: :func:`lmsim.merge.merge_models` with models and Grams given as loaders,
  visited one at a time; float64 sums, Cholesky solves; the merged model is float32.
* **lmsim_f32**: the same with ``product_dtype="float32"``: the ``G̃_i W_iᵀ`` products
  (most of the FLOPs) at float32 GEMM speed, added into float64 sums; float64 solves.
* **authors**: the released code's approach: every model and every model's Grams held at
  once (float32, as their hooks record them), ``Σ G̃_i`` and ``Σ G̃_i W_iᵀ`` in float32,
  ``torch.inverse`` with no safeguard, then a matmul.
* **reference**: numpy float64 ``np.linalg.solve`` (LU) of the same sums, layer by layer.

Merge time excludes building the models and Grams (the loaders' time is subtracted for
lmsim). Peak memory is the process's maximum resident set size (``ru_maxrss``), reported
also above the resident size after imports. Accuracy: max absolute error of each merged
RegMean weight against the float64 reference, and that error relative to the largest
reference weight.

Synthetic Grams mimic uncentred activation Grams: ``G = A Aᵀ / r + μ μᵀ + δ diag(u)``
with ``A`` of shape (d, r = 64), a random mean ``μ`` (a large common direction, as in real
activations) and ``δ = 1e-2``: a few large eigenvalues and a long low tail, condition
number ~1e5 before RegMean's alpha. q, k and v share one Gram (they read one input).

Distance to the limit (``_common.py``): the task's nominal FLOP count, per linear layer
of input width ``d`` and output width ``o`` merged over ``M`` models, is
``2 M d² o`` (every ``G̃_i W_iᵀ``) + ``d³ / 3`` (Cholesky of ``Σ G̃_i``) + ``2 d² o`` (the two
triangular solves with ``o`` right-hand sides), summed over the layers; the ``M d²``
additions and the averaged non-linear parameters are not counted. Both sides are charged
the same count (the authors' ``torch.inverse`` does more: ``d³`` instead of ``d³ / 3``) and
compared with the float64 GEMM limit (SciPy ``dgemm``), measured in the same run before
and after; the float64 Cholesky limit is in the record too. lmsim and the authors' way
alternate in rounds of fresh processes, best of ``--repeats`` (time; peak memory of the
fastest run); the float64 reference runs once. Every process runs inside
``lmsim.threads(--threads)``.

Usage::

    python benchmarks/bench_merge.py                 # 5 models x 12 layers x 768 (full size)
    python benchmarks/bench_merge.py --layers 2      # quick check
    python benchmarks/bench_merge.py --tiny --out /tmp/merge.json   # seconds

Writes ``benchmarks/results/merge.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from _common import fraction, machine_limits, record, remeasure, write_result

import lmsim

RESULTS = Path(__file__).resolve().parent / "results" / "merge.json"


# ====================================================================== synthetic data
def make_config(args):
    from transformers import BertConfig

    return BertConfig(
        num_hidden_layers=args.layers,
        hidden_size=args.hidden,
        num_attention_heads=max(1, args.hidden // 64),
        intermediate_size=args.intermediate,
    )


def make_model(seed: int, args):
    from transformers import BertModel

    config = make_config(args)
    torch.manual_seed(seed)
    model = BertModel(config).eval()
    with torch.no_grad():  # BERT's init leaves biases and LayerNorm at 0/1: spread them.
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.02 * torch.randn_like(p))
    return model


def _source(module_name: str) -> str:
    """q, k and v read the same input, so they share one Gram."""
    for proj in (".query", ".key", ".value"):
        if module_name.endswith(proj):
            return module_name[: -len(proj)] + ".qkv"
    return module_name


def make_gram(seed: int, module_name: str, d: int, rank: int) -> torch.Tensor:
    """Seeded synthetic SPD Gram (float64) of one model's linear-layer input."""
    gen = torch.Generator().manual_seed(
        seed * 1_000_003 + zlib.crc32(_source(module_name).encode())
    )
    a = torch.randn(d, rank, generator=gen, dtype=torch.float64)
    mu = torch.randn(d, generator=gen, dtype=torch.float64)
    u = 0.5 + torch.rand(d, generator=gen, dtype=torch.float64)
    return a @ a.T / rank + torch.outer(mu, mu) + torch.diag(1e-2 * u)


def model_grams(seed: int, model, args) -> dict[str, torch.Tensor]:
    from lmsim.merge import linear_layers

    return {
        name: make_gram(seed, name, module.in_features, args.rank)
        for name, (module, _) in linear_layers(model).items()
    }


def reduce_non_diag(g: torch.Tensor, alpha: float) -> torch.Tensor:
    """The authors' ``G̃ = α G + (1 − α) diag(G)``."""
    return g * alpha + torch.diag(torch.diagonal(g)) * (1 - alpha)


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# ====================================================================== workers
def worker_lmsim(args, out: Path, product_dtype: str = "float64") -> dict:
    from safetensors.torch import save_file

    from lmsim.merge import merge_models

    spent = [0.0]

    def timed(fn, *a):
        def load():
            t0 = time.perf_counter()
            value = fn(*a)
            spent[0] += time.perf_counter() - t0
            return value

        return load

    from transformers import BertModel

    seeds = range(args.n_models)
    with torch.device("meta"):  # layer widths without allocating a model
        shapes = BertModel(make_config(args))
    widths = {n: m.in_features for n, m in shapes.named_modules() if isinstance(m, torch.nn.Linear)}

    class LazyGrams(Mapping):
        """One model's Grams, built on access: as ``load_grams(path, lazy=True)`` reads a
        published file one layer at a time, without the disk in the timing."""

        def __init__(self, seed):
            self.seed = seed

        def __getitem__(self, name):
            if name not in widths:
                raise KeyError(name)
            return timed(make_gram, self.seed, name, widths[name], args.rank)()

        def __contains__(self, name):
            return name in widths

        def __iter__(self):
            return iter(widths)

        def __len__(self):
            return len(widths)

    base = rss_mib()
    t0 = time.perf_counter()
    merged, report = merge_models(
        [timed(make_model, s, args) for s in seeds],
        [LazyGrams(s) for s in seeds],
        alpha=args.alpha,
        product_dtype=product_dtype,
    )
    total = time.perf_counter() - t0
    names = report.names("regmean")
    params = dict(merged.named_parameters())
    save_file({n: params[n].detach().contiguous() for n in names}, str(out))
    return {
        "seconds_merge": total - spent[0],
        "seconds_building_models_and_grams": spent[0],
        "n_regmean_weights": len(names),
        "report_counts": report.counts(),
        "rss_after_imports_mib": base,
    }


def worker_authors(args, out: Path) -> dict:
    from safetensors.torch import save_file

    from lmsim.merge import linear_layers

    base = rss_mib()
    models = [make_model(s, args) for s in range(args.n_models)]
    # Their hooks record float32 Grams; all models' Grams are held at once.
    grams = [
        {k: v.float() for k, v in model_grams(s, m, args).items()} for s, m in enumerate(models)
    ]
    t0 = time.perf_counter()
    merged = {}
    with torch.no_grad():
        for name in linear_layers(models[0]):
            key = f"{name}.weight"
            ws = [m.get_parameter(key) for m in models]
            # As their regmean_merge: lists of every model's G̃ and G̃ Wᵀ, then the sums.
            gs = [reduce_non_diag(g[name], args.alpha) for g in grams]
            gram_m_ws = [g @ w.T for g, w in zip(gs, ws)]
            sum_gram, sum_gram_m_ws = sum(gs), sum(gram_m_ws)
            merged[key] = (torch.inverse(sum_gram) @ sum_gram_m_ws).T.contiguous()
        for key, _ in models[0].named_parameters():
            if key not in merged:
                merged[key] = sum(m.get_parameter(key) for m in models) / len(models)
    seconds = time.perf_counter() - t0
    names = [f"{n}.weight" for n in linear_layers(models[0])]
    save_file({n: merged[n] for n in names}, str(out))
    return {"seconds_merge": seconds, "rss_after_imports_mib": base}


def worker_reference(args, out: Path) -> dict:
    from safetensors.torch import save_file

    from lmsim.merge import linear_layers

    models = [make_model(s, args) for s in range(args.n_models)]
    layers = linear_layers(models[0])
    merged, cond = {}, {}
    t0 = time.perf_counter()
    for name, (module, _) in layers.items():
        gs = [
            reduce_non_diag(make_gram(s, name, module.in_features, args.rank), args.alpha).numpy()
            for s in range(args.n_models)
        ]
        ws = [m.get_submodule(name).weight.detach().double().numpy() for m in models]
        total = sum(gs)
        rhs = sum(g @ w.T for g, w in zip(gs, ws))
        merged[f"{name}.weight"] = torch.from_numpy(np.linalg.solve(total, rhs).T.copy())
        if (".0." in name or name.startswith("pooler")) and _source(name) not in cond:
            eig = np.linalg.eigvalsh(total)
            cond[_source(name)] = float(eig[-1] / eig[0])
    save_file(merged, str(out))
    return {"seconds_reference": time.perf_counter() - t0, "condition_numbers_layer0": cond}


def worker_lmsim_f32(args, out: Path) -> dict:
    return worker_lmsim(args, out, product_dtype="float32")


WORKERS = {
    "lmsim": worker_lmsim,
    "lmsim_f32": worker_lmsim_f32,
    "authors": worker_authors,
    "reference": worker_reference,
}
SIDES = ("lmsim", "lmsim_f32", "authors")


def run_worker(name: str, args, tmp: Path) -> dict:
    tmp.mkdir(parents=True, exist_ok=True)
    out = tmp / f"{name}.safetensors"
    cmd = [sys.executable, __file__, "--worker", name, "--tmp", str(tmp)]
    cmd += [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in ARGS]
    # Workers import lmsim from this checkout, whatever is installed.
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    # numpy's BLAS (the reference) gets the same thread count as torch.
    env.update({k: str(args.threads) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(f"worker {name} failed:\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["seconds_process"] = time.perf_counter() - t0
    result["file"] = str(out)
    return result


def compare(path: str, ref_path: str) -> dict:
    from safetensors import safe_open

    worst, worst_name, ref_max, sq_err, sq_ref = 0.0, None, 0.0, 0.0, 0.0
    with safe_open(path, "pt") as got, safe_open(ref_path, "pt") as ref:
        for name in ref.keys():  # noqa: SIM118
            r = ref.get_tensor(name)
            g = got.get_tensor(name).double()
            err = (g - r).abs()
            if float(err.max()) > worst:
                worst, worst_name = float(err.max()), name
            ref_max = max(ref_max, float(r.abs().max()))
            sq_err += float((err**2).sum())
            sq_ref += float((r**2).sum())
    return {
        "max_abs_error": worst,
        "max_abs_error_over_max_abs_weight": worst / ref_max,
        "relative_frobenius_error": (sq_err / sq_ref) ** 0.5,
        "worst_layer": worst_name,
    }


ARGS = ("n_models", "layers", "hidden", "intermediate", "rank", "alpha", "threads")


TINY = {"n_models": 2, "layers": 1, "hidden": 64, "intermediate": 128, "rank": 8}


def merge_flops(args) -> float:
    """Nominal FLOPs of the RegMean solves (module docstring), from the layer widths."""
    from transformers import BertModel

    with torch.device("meta"):  # layer widths without allocating a model
        shapes = BertModel(make_config(args))
    total = 0.0
    for module in shapes.modules():
        if isinstance(module, torch.nn.Linear):
            d, o = module.in_features, module.out_features
            total += 2 * args.n_models * d * d * o + d**3 / 3 + 2 * d * d * o
    return total


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-models", type=int, default=5)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--intermediate", type=int, default=3072)
    parser.add_argument("--rank", type=int, default=64, help="rank of the Grams' random part")
    parser.add_argument("--alpha", type=float, default=0.9)
    parser.add_argument("--threads", type=int, default=1, help="lmsim.threads in every process")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds, best kept")
    parser.add_argument("--tiny", action="store_true", help=f"a seconds-long check: {TINY}")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--tmp", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tiny:
        for key, value in TINY.items():
            setattr(args, key, value)

    if args.worker:
        with lmsim.threads(args.threads):
            from transformers import BertModel  # noqa: F401 - loaded before every baseline RSS

            from lmsim import merge  # noqa: F401

            tmp = Path(args.tmp)
            result = WORKERS[args.worker](args, tmp / f"{args.worker}.safetensors")
        result["peak_rss_mib"] = peak_mib()
        result["lmsim_file"] = lmsim.__file__
        print(json.dumps(result))
        return result

    load_before = os.getloadavg()
    limits = machine_limits(args.threads, size=512 if args.tiny else 2048)
    with tempfile.TemporaryDirectory(prefix="bench_merge_") as tmp:
        tmp = Path(tmp)
        runs, times = {}, {name: [] for name in SIDES}
        # Fresh processes alternate, so a burst of load hits both sides alike; each keeps
        # its fastest run (and that run's peak memory and merged weights).
        for _ in range(args.repeats):
            for name in SIDES:
                print(f"running {name} ...", flush=True)
                run = run_worker(name, args, tmp / f"round_{len(times[name])}")
                times[name].append(run["seconds_merge"])
                if name not in runs or run["seconds_merge"] < runs[name]["seconds_merge"]:
                    runs[name] = run
                print(f"  {json.dumps({k: v for k, v in run.items() if k != 'file'})}")
        print("running reference ...", flush=True)
        runs["reference"] = run_worker("reference", args, tmp / "reference")
        for name in SIDES:
            runs[name]["accuracy_vs_float64_reference"] = compare(
                runs[name]["file"], runs["reference"]["file"]
            )
    limits = remeasure(limits, args.threads)
    flops = merge_flops(args)
    for name, run in runs.items():
        run.pop("file")
        if "rss_after_imports_mib" in run:
            run["peak_above_imports_mib"] = run["peak_rss_mib"] - run["rss_after_imports_mib"]
        if name in times:
            run["times_s"] = times[name]
            run["best_s"] = run["seconds_merge"]
            run.update(fraction(flops, run["best_s"], limits))
    lm, au = runs["lmsim"], runs["authors"]
    result = {
        "config": {k: getattr(args, k) for k in (*ARGS, "repeats", "tiny")},
        **record(args.threads, limits, load_before),
        "flops_nominal": flops,
        "flops_are": "per linear layer 2 M d² o + d³/3 + 2 d² o (module docstring)",
        "runs": runs,
        "ratio_time_authors_over_lmsim": au["seconds_merge"] / lm["seconds_merge"],
        "ratio_time_authors_over_lmsim_f32": au["seconds_merge"]
        / runs["lmsim_f32"]["seconds_merge"],
        "ratio_peak_above_imports_authors_over_lmsim": au["peak_above_imports_mib"]
        / max(lm["peak_above_imports_mib"], 1e-9),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    result["load_average_after"] = list(os.getloadavg())
    out = Path(args.out)
    write_result(out, result)
    for name in SIDES:
        r, acc = runs[name], runs[name]["accuracy_vs_float64_reference"]
        print(
            f"{name:9s} merge {r['seconds_merge']:7.1f} s ({r['fraction_of_gemm_limit']:.0%} of "
            f"the GEMM limit)  peak {r['peak_rss_mib']:8.0f} MiB "
            f"(+{r['peak_above_imports_mib']:.0f} above imports)  max |err| "
            f"{acc['max_abs_error']:.2e} (rel. {acc['max_abs_error_over_max_abs_weight']:.1e})"
        )
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
