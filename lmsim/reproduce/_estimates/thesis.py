"""The redundancy thesis (2022): layer similarity, probes, cross-lingual transfer."""

from __future__ import annotations

from collections.abc import Mapping

from lmsim.reproduce._estimates._common import (
    TOKENS_PER_WORD,
    WORDS_PER_SENTENCE,
    Pass,
    _dtype,
    _fetch_data,
    _fetch_models,
    _on_gpu,
    _treebank_words,
    _word_models,
    moments_pass,
)
from lmsim.reproduce._resources import (
    BASE_GPU,
    BASE_RAM,
    GB,
    Estimate,
    Machine,
    forward_flops,
    model_bytes,
    moments_bytes,
)


def redundancy_similarity(params: Mapping, machine: Machine) -> Estimate:
    """Thesis page 01: one word-moments pass per teacher-student pair and one per model in
    no pair (``lmsim.extract.layer_pairs.pairwise_by_model_pairs`` with ``pairs``), every hidden state
    of the models of the pass; shards cached unless ``cache_pairs`` is false. Peaks: the
    largest pass; time and cache: all passes."""
    est = Estimate("", knobs={"gpu": "pairs", "disk": "cache_pairs", "ram": "pairs"})
    _fetch_models(est, params["models"])
    _fetch_data(est, (params.get("treebanks") or {}).values())
    models = {m[0]: m for m in _word_models(params, params["models"])}
    paired = [tuple(p) for p in params.get("pairs") or []]
    passes = paired + [(m,) for m in models if not any(m in p for p in paired)]
    n = params["n_sentences"]
    words = _treebank_words(params, n)
    cache = bool(params.get("cache_pairs", True))
    widest = max(passes, key=lambda ms: sum(models[m][2] for m in ms))
    for names in passes:
        sub = est if names == widest else Estimate("")
        label = f"word moments of all layers, largest of {len(passes)} passes ({' + '.join(names)})"
        p = Pass([models[m] for m in names], n, words, words / n * TOKENS_PER_WORD + 2, params["batch_size"], cache=cache)  # fmt: skip
        moments_pass(sub, p, params, machine, label)
        if sub is not est:
            est.seconds += sub.seconds
            est.disk_cache += sub.disk_cache
    width = sum(models[m][2] for m in widest)
    est.peak(
        "ram", BASE_RAM + moments_bytes(width), "the largest pass's moments on the host for CKA"
    )
    return est


def redundancy_probes(params: Mapping, machine: Machine) -> Estimate:
    """Thesis page 02: one model at a time (``lmsim.papers.thesis2022_redundancy.sweep.model_redundancy``):
    its word activations (float32) on train / dev / test, a correlation clustering from
    float64 moments, the probes on the GPU, scipy's dense check on ``scipy_rows`` words;
    then only tables are kept."""
    est = Estimate("", knobs={"ram": "n_train", "gpu": "n_train"})
    _fetch_models(est, params["models"])
    _fetch_data(est, (params.get("treebanks") or {}).values())
    models = _word_models(params, params["models"])
    n_train = _treebank_words(params, params["n_train"])
    n_all = (
        n_train
        + _treebank_words(params, params["n_dev"])
        + params["n_test"] * WORDS_PER_SENTENCE["pud"]
    )
    widest = max(w for _, _, w in models)
    acts = n_all * widest * 4.0
    rows = min(n_train, params.get("scipy_rows", 20_000))
    scipy = 2 * 8.0 * rows * widest + 2 * 8.0 * widest**2
    est.peak(
        "ram",
        BASE_RAM + acts + max(scipy, moments_bytes(widest)),
        f"one model's word activations: {n_all:,.0f} words x {widest:,} neurons float32 ({acts / GB:,.0f} GB) + scipy's dense check on {rows:,.0f} words ({scipy / GB:,.1f} GB)",
    )
    if _on_gpu(params, machine):
        est.peak(
            "gpu",
            BASE_GPU + acts + n_train * widest * 4.0,
            "one model's activations of every split (and a standardised copy of train) for a probe",
        )
    dtype = _dtype(params.get("dtype"), params.get("device", "auto"))
    T = round(
        n_all / max(1, params["n_train"] + params["n_dev"] + params["n_test"]) * TOKENS_PER_WORD + 2
    )
    n_sent = params["n_train"] + params["n_dev"] + params["n_test"]
    est.seconds += sum(forward_flops(s, n_sent * T, T) for _, s, _ in models) / machine.flops_per_s(
        dtype
    )
    n_taus = len(params.get("thresholds", []))
    n_random = len(params.get("random_for") or params.get("thresholds", []))
    n_probes = len(params.get("tasks", ["POS", "DEP"])) * (
        len(params.get("seeds", [0])) * (1 + n_taus + n_random) + 2 + 6
    )
    probe = n_probes * params["epochs"] * n_train * widest * 50 * 6
    est.seconds += len(models) * probe / machine.flops_per_s("float32", training=True)
    est.seconds += len(models) * n_train * widest**2 / machine.statistics_flops_per_s()
    return est


def redundancy_cross_lingual(params: Mapping, machine: Machine) -> Estimate:
    """Thesis page 03: word activations of each model on the English splits and every
    transfer set, held; clustering and probes per model."""
    est = Estimate("", knobs={"ram": "n_transfer"})
    _fetch_models(est, params["models"])
    _fetch_data(est, [*(params.get("treebanks") or {}).values(), *params["transfer"].values()])
    models = _word_models(params, params["models"])
    sentences = (
        params["n_train"]
        + params["n_dev"]
        + params["n_test"]
        + params["n_transfer"] * len(params["transfer"])
    )
    words = sentences * WORDS_PER_SENTENCE["pud"]
    width = sum(w for _, _, w in models)
    acts = words * width * 4.0
    # The largest model's float32 weights pass through the host (on a CPU they stay there):
    # measured 1.80 GB peak RSS against 0.74 GB planned without them (gemma-3-270m, 1.07
    # GB; benchmarks/results/plan_default.json).
    weights = max(model_bytes(s) for _, s, _ in models)
    est.peak(
        "ram",
        BASE_RAM + acts + weights,
        f"word activations: {words:,.0f} words x {width:,} neurons float32, the largest model",
    )
    widest = max(w for _, _, w in models)
    if _on_gpu(params, machine):
        est.peak(
            "gpu",
            BASE_GPU + 2 * 4.0 * widest * params["n_train"] * WORDS_PER_SENTENCE["pud"],
            "probe inputs",
        )
    T = round(WORDS_PER_SENTENCE["pud"] * TOKENS_PER_WORD + 2)
    dtype = _dtype(params.get("dtype"), params.get("device", "auto"))
    est.seconds += sum(
        forward_flops(s, sentences * T, T) for _, s, _ in models
    ) / machine.flops_per_s(dtype)
    return est
