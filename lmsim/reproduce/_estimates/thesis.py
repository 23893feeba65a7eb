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
    moments_bytes,
)


def redundancy_similarity(params: Mapping, machine: Machine) -> Estimate:
    """Thesis page 01: one joint word-moments pass over every hidden state of every model
    (``layers="all"``, default shards of 256 sentences, cached), then CKA of all pairs."""
    est = Estimate("", knobs={"gpu": "models", "disk": "models", "ram": "models"})
    _fetch_models(est, params["models"])
    _fetch_data(est, (params.get("treebanks") or {}).values())
    models = _word_models(params, params["models"])
    n = params["n_sentences"]
    words = _treebank_words(params, n)
    p = Pass(models, n, words, words / n * TOKENS_PER_WORD + 2, params["batch_size"])
    moments_pass(est, p, params, machine, "word moments of all layers")
    width = sum(w for _, _, w in models)
    est.peak("ram", BASE_RAM + moments_bytes(width), "the joint moments on the host for CKA")
    return est


def redundancy_probes(params: Mapping, machine: Machine) -> Estimate:
    """Thesis page 02: word activations (float32) of every model on train / dev / test,
    all held; per model a correlation clustering from its float64 moments and probes on
    the GPU; the largest float64 copy is one model's training activations."""
    est = Estimate("", knobs={"ram": "n_train", "gpu": "n_train"})
    _fetch_models(est, params["models"])
    _fetch_data(est, (params.get("treebanks") or {}).values())
    models = _word_models(params, params["models"])
    zoo = params.get("zoo_profile", "default")
    del zoo
    n_train = _treebank_words(params, params["n_train"])
    n_all = (
        n_train
        + _treebank_words(params, params["n_dev"])
        + params["n_test"] * WORDS_PER_SENTENCE["pud"]
    )
    width = sum(w for _, _, w in models)
    widest = max(w for _, _, w in models)
    acts = n_all * width * 4.0
    copy = n_train * widest * 8.0
    est.peak(
        "ram",
        BASE_RAM + acts + copy + moments_bytes(widest),
        f"word activations of {len(models)} models: {n_all:,.0f} words x {width:,} neurons float32 ({acts / GB:,.0f} GB) + one model's float64 copy ({copy / GB:,.0f} GB)",
    )
    if _on_gpu(params, machine):
        est.peak(
            "gpu",
            BASE_GPU + n_train * widest * 4.0 * 2,
            "one model's training activations (and a standardised copy) for the probes",
        )
    dtype = _dtype(params.get("dtype"), params.get("device", "auto"))
    T = round(
        n_all / max(1, params["n_train"] + params["n_dev"] + params["n_test"]) * TOKENS_PER_WORD + 2
    )
    n_sent = params["n_train"] + params["n_dev"] + params["n_test"]
    est.seconds += sum(forward_flops(s, n_sent * T, T) for _, s, _ in models) / machine.flops_per_s(
        dtype
    )
    n_probes = len(params.get("tasks", ["POS", "DEP"])) * (
        2 + len(params.get("thresholds", [])) * 3
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
    est.peak(
        "ram", BASE_RAM + acts, f"word activations: {words:,.0f} words x {width:,} neurons float32"
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
