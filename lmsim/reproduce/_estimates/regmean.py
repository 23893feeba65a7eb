"""Jin et al. (2023): RegMean merging pages."""

from __future__ import annotations

from collections.abc import Mapping

from lmsim.reproduce._estimates._common import (
    DATASET_ROWS,
    DEFAULT_ROWS,
    _fetch_data,
    _fetch_models,
    _finetune,
    _on_gpu,
)
from lmsim.reproduce._resources import (
    BASE_GPU,
    BASE_RAM,
    GB,
    Estimate,
    Machine,
    Shape,
    forward_bytes,
    forward_flops,
    model_bytes,
    model_shape,
    zoo_shape,
)


def _grams_bytes(shape: Shape) -> float:
    """float64 Grams of every linear layer's input, one tensor per module as
    ``collect_grams`` returns them: per layer q, k, v, the attention output and the FFN
    input read ``d``, the FFN output reads ``ffn``; the pooler and the classification head
    (or RoBERTa's two-layer head) read ``d``."""
    return 8.0 * (shape.layers * (5 * shape.hidden**2 + shape.ffn**2) + 2 * shape.hidden**2)


def regmean_merging(params: Mapping, machine: Machine) -> Estimate:
    """Jin et al. page 01/02: every model fine-tuned (non-i.i.d. partitions A, B and each
    domain's model at every seed of ``seeds``; the joint one of each task and setup, extra
    tasks and one multi-task model at the first; the focus setup's domains again with
    different heads), all loaded on the device, their Grams (float64) and diagonal Fishers
    (float64) held in RAM for the merges, or with ``cache_stats`` written to the cache
    (Fishers in float32) and read back one tensor at a time."""
    est = Estimate("", knobs={"ram": "cache_stats", "disk": "noniid_tasks", "gpu": "batch_size"})
    _fetch_models(est, [params["base"]])
    specs = list(params["noniid_tasks"].values()) + list((params.get("extra_tasks") or {}).values())
    for setup in params["domain_setups"].values():
        specs += [setup.get("set", "")]
        specs += list((setup.get("domains") or {}).values()) + list(
            (setup.get("ood") or {}).values() if isinstance(setup.get("ood"), Mapping) else []
        )
    _fetch_data(est, specs)
    shape = (
        model_shape(params["base"])
        if not params["base"].startswith("zoo/")
        else zoo_shape("default")
    )
    n_part = params["n_partition"]
    runs: list[tuple[str, float, float]] = []  # name, examples, epochs
    epochs = params["epochs"]
    by = params.get("epochs_by_model") or {}
    n_seeds = len(params.get("seeds") or [0])
    for t, spec in params["noniid_tasks"].items():
        rows = DATASET_ROWS.get(spec, DEFAULT_ROWS)
        runs += [(f"{t}-{p}@{k}", n_part, epochs) for p in "AB" for k in range(n_seeds)]
        runs.append((f"{t}-joint", rows if params.get("full_task_data") else 2 * n_part, epochs))
    for s, setup in params["domain_setups"].items():
        domains = setup.get("domains") or setup.get("keywords") or {}
        kind = "ontonotes" if s == "ner" else "emotion"
        per = params["n_domain_train"] or DATASET_ROWS[kind]
        e = by.get(s, epochs)
        runs += [(f"{s}-{d}@{k}", per, e) for d in domains for k in range(n_seeds)]
        runs.append((f"{s}-joint", per * len(domains), e))
        if s == params.get("focus_setup") and params.get("head_init_variant"):
            runs += [(f"{s}-{d}-dh", per, e) for d in domains]
    for t in params.get("extra_tasks") or {}:
        runs.append((f"{t}-joint", params.get("n_task_train") or DEFAULT_ROWS, epochs))
    runs.append(("tasks-mtl", sum(n for name, n, _ in runs if name.endswith("-joint")), epochs))
    on_gpu = _on_gpu(params, machine)
    for _name, n, e in runs:
        _finetune(
            est,
            shape,
            n,
            e,
            params["max_length"],
            params["batch_size"],
            machine,
            f"{len(runs)} models",
            on_gpu,
        )
    n_models = len(runs)
    grams = _grams_bytes(shape)
    fisher = shape.params * (4.0 if params.get("cache_stats") else 8.0)
    held = 0.0 if params.get("cache_stats") else n_models * (fisher + grams)
    est.peak(
        "ram",
        BASE_RAM + held,
        f"{n_models} models' Grams ({grams / GB:,.2f} GB each) and Fishers ({fisher / GB:,.2f} GB "
        f"each){', cached to disk and read one tensor at a time' if params.get('cache_stats') else ''}",
    )
    if params.get("cache_stats"):
        est.disk_cache += n_models * (grams + fisher)
    if on_gpu:
        loaded = n_models * model_bytes(shape)
        est.peak(
            "gpu",
            max(
                est.gpu,
                BASE_GPU
                + loaded
                + forward_bytes(shape, params["batch_size"], params["max_length"]),
            ),
            f"{n_models} fine-tuned models loaded at once",
        )
    T = params["max_length"]
    stats_tokens = (
        n_models * (params["n_gram_batches"] * params["batch_size"] + 3 * params["n_fisher"]) * T
    )
    est.seconds += forward_flops(shape, stats_tokens, T) / machine.flops_per_s("float32")
    # The fine-tunes (named regmean-*) and their statistics are read by this page only.
    est.scratch_entries(["finetune/regmean-*", "regmean-stats/*"], est.disk_cache + est.disk_output)
    est.notes.append(
        f"time: {n_models} fine-tunes ({sum(n * e for _, n, e in runs):,.0f} example-epochs) dominate"
    )
    return est
