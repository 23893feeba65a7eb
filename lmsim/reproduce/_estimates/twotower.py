"""He & Toyoizumi (2022): the two-tower page."""

from __future__ import annotations

from collections.abc import Mapping

from lmsim._cache import check_name
from lmsim.reproduce._estimates._common import (
    _fetch_data,
    _on_gpu,
)
from lmsim.reproduce._resources import (
    BASE_GPU,
    BASE_RAM,
    Estimate,
    Machine,
    Shape,
    forward_flops,
    train_flops,
    training_bytes,
)


def _tower_shape(run: Mapping, vocab: int) -> Shape:
    """Both towers of a run as one :class:`Shape` (twice the layers): the FLOPs and the
    parameters of the pair. An ELMo-style run's projected LSTMs (both directions are its
    towers) are written as the FFN width that gives their parameter count per layer."""
    hidden, layers = run["hidden"], run["layers"]
    if run["tower"] == "elmo":
        embed = run.get("embed", hidden)
        proj = run.get("lstm_proj", hidden)
        # per layer, two directions: 4 gates of (input + projection) -> hidden, projection
        per = 2 * (4 * hidden * (max(embed, proj) + proj) + hidden * proj)
        ffn = max(1, round((per - 4 * proj**2) / (2 * proj)))
        shape = Shape(proj, layers, vocab, 0.0, 1, ffn)
    else:
        shape = Shape(hidden, 2 * layers, vocab, 0.0, run.get("heads", 1), run.get("intermediate"))
    return Shape(
        shape.hidden,
        shape.layers,
        vocab,
        shape.forward_params + vocab * shape.hidden,
        shape.heads,
        shape.intermediate,
    )


def twotower_preference(params: Mapping, machine: Machine) -> Estimate:
    """He & Toyoizumi page 01: each run's two towers trained for ``steps`` (phase 1) and
    ``head_steps`` (phase 2), then the preference pass over ``n_score_chunks``."""
    est = Estimate("", knobs={"gpu": "batch_size", "disk": "runs"})
    _fetch_data(est, params.get("corpora", []))
    tok = str(params.get("tokenizer", ""))
    vocab = SHAPES_VOCAB.get(tok, 8_000)
    mixed = bool(params.get("gpu_speedups"))
    dtype = "bfloat16" if mixed else "float32"
    T, B = params["seq_len"], params["batch_size"]
    on_gpu = _on_gpu(params, machine)
    # Runs trained at once (`jobs` processes): on a GPU each holds its own memory, and the
    # time divides among them.
    jobs = max(1, min(int(params.get("jobs", 1) or 1), len(params["runs"])))
    train_seconds = 0.0
    for run in params["runs"]:
        shape = _tower_shape(run, vocab)
        tokens = (params["steps"] + params["head_steps"]) * B * T
        flops_time = train_flops(shape, tokens, T) / machine.flops_per_s(dtype, training=True)
        if on_gpu:  # small towers are bound by kernel launches, not FLOPs
            layer_steps = 2 * run["layers"] * params["steps"] * (2 if run["tower"] == "elmo" else 1)
            launch_time = (
                layer_steps * GPU_LAYER_STEP_S + 2 * params["head_steps"] * GPU_HEAD_STEP_S
            )
            flops_time = max(flops_time, launch_time)
        train_seconds += flops_time
        est.seconds += forward_flops(
            shape, params["n_score_chunks"] * T * params.get("mask_repeats", 1), T
        ) / machine.flops_per_s(dtype)
        need = training_bytes(shape, B, T, mixed)
        if on_gpu:
            est.peak(
                "gpu",
                (BASE_GPU + need) * jobs,
                f"training {run['name']} ({shape.params / 1e6:,.0f} M parameters)"
                + (f" in each of {jobs} processes at once" if jobs > 1 else ""),
            )
        else:
            est.peak("ram", BASE_RAM + need, f"training {run['name']} on the CPU")
        est.disk_output += 4.0 * shape.params * 4
    est.seconds += train_seconds / (jobs if on_gpu else 1)
    # The trained towers (twotower/<profile>/) are read by this page only.
    profile = check_name(params.get("profile", "smoke"), "parameter `profile` (a cache folder)")
    est.scratch_entries([f"twotower/{profile}/*"], est.disk_output)
    est.peak(
        "ram",
        BASE_RAM + params["n_score_chunks"] * T * 8.0 * 2,
        "the scored chunks and their per-token scores",
    )
    return est


SHAPES_VOCAB = {"bert-base-uncased": 30_522}
# Seconds a training step costs per tower layer (an LSTM direction counts as a layer) and a
# phase-2 head step, when small towers are launch-bound: measured on one H100 with four runs
# sharing it (he2022 02_preference_gpu, 2026-11-26: 0.058-0.126 s a phase-1 step of 8 layers,
# 8,400 head steps in 242 s).
GPU_LAYER_STEP_S = 0.0095
GPU_HEAD_STEP_S = 0.029
