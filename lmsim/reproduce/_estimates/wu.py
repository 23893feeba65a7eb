"""Wu et al. (2020): similarity pages."""

from __future__ import annotations

from collections.abc import Mapping

from lmsim.reproduce._estimates._common import (
    DATASET_ROWS,
    DEFAULT_ROWS,
    TOKENS_PER_WORD,
    WORDS_PER_SENTENCE,
    Pass,
    _dtype,
    _fetch_data,
    _fetch_models,
    _finetune,
    _layers_kept,
    _on_gpu,
    _pairs_or_joint,
    _shape,
    _word_models,
    _words,
    moments_pass,
)
from lmsim.reproduce._resources import (
    BASE_GPU,
    BASE_RAM,
    GB,
    Estimate,
    Machine,
    forward_bytes,
    forward_flops,
    model_bytes,
)


def wu_representations(params: Mapping, machine: Machine) -> Estimate:
    """Wu et al. page 01: word moments of every kept hidden state of every model, jointly
    or pair by pair (``model_pairs``)."""
    est = Estimate("", knobs={"gpu": "model_pairs", "disk": "cache_pairs", "ram": "n_sentences"})
    _fetch_models(est, params["models"])
    models = _word_models(params, params["models"])
    _pairs_or_joint(est, models, params, machine, params["n_sentences"], "word moments")
    return est


def wu_attention(params: Mapping, machine: Machine) -> Estimate:
    """Wu et al. page 02: raw per-sentence attention maps of every head (float32 words x
    words), held for all models at once."""
    est = Estimate("", knobs={"ram": "n_sentences", "gpu": "batch_size"})
    _fetch_models(est, params["models"])
    zoo = params.get("zoo_profile", "default")
    words = WORDS_PER_SENTENCE.get(str(params.get("corpus")), 21.9)
    n = params["n_sentences"]
    shapes = [_shape(m, zoo) for m in params["models"]]
    maps = sum(s.layers * s.heads for s in shapes) * n * 1.3 * words**2 * 4.0
    est.peak(
        "ram",
        BASE_RAM + maps + max(model_bytes(s) for s in shapes),
        f"attention maps: {maps / GB:,.1f} GB",
    )
    T = round(words * TOKENS_PER_WORD + 2)
    dev = max(
        model_bytes(s)
        + forward_bytes(s, params["batch_size"], T)
        + 4.0 * params["batch_size"] * s.layers * s.heads * T * T
        for s in shapes
    )
    if _on_gpu(params, machine):
        est.peak("gpu", BASE_GPU + dev, "one model's forward with every attention map")
    dtype = _dtype(params.get("dtype"), params.get("device", "auto"))
    est.seconds += sum(forward_flops(s, n * T, T) for s in shapes) / machine.flops_per_s(dtype)
    heads = sum(s.layers * s.heads for s in shapes)
    est.seconds += heads**2 * n * words**2 * 20 / (machine.cpu_gflops * 1e9)
    est.notes.append(f"time: {heads:,} heads, all head pairs x {n} sentences on the CPU")
    return est


def wu_finetuning(params: Mapping, machine: Machine) -> Estimate:
    """Wu et al. page 03: joint word moments of the base and its fine-tuned copies (every
    hidden state), attention maps, and Table 1's fine-tunes (each frozen depth, at the
    bottom and the top, and the full model, at each of ``ft_seeds``)."""
    est = Estimate(
        "", knobs={"gpu": "finetuned", "disk": "cache_moments", "ram": "n_attn_sentences"}
    )
    names = [params["base"], *params["finetuned"]]
    _fetch_models(est, [*names, params["ft_base"]])
    _fetch_data(est, [params["ft_set"]])
    models = _word_models(params, names)
    _pairs_or_joint(est, models, params, machine, params["n_sentences"], "word moments")
    zoo = params.get("zoo_profile", "default")
    base = _shape(params["ft_base"], zoo)
    n_ft = (1 + 2 * len(params["ft_frozen"])) * len(params.get("ft_seeds") or [0])
    rows = DATASET_ROWS.get(params["ft_set"], DEFAULT_ROWS)
    n_train = min(params["n_ft_train"], rows) if params["n_ft_train"] else rows
    for _ in range(n_ft):
        _finetune(
            est,
            base,
            n_train,
            params["ft_epochs"],
            params["ft_max_length"],
            params["ft_batch_size"],
            machine,
            f"{params['ft_base']} ({n_ft} runs)",
            _on_gpu(params, machine),
        )
    # Table 1's fine-tunes (named wu-table1) are read by this page only.
    est.scratch_entries(["finetune/wu-table1-*"], est.disk_output)
    words = WORDS_PER_SENTENCE.get(str(params.get("corpus")), 21.9)
    maps = (
        sum(s.layers * s.heads for _, s, _ in models)
        * params["n_attn_sentences"]
        * 1.3
        * words**2
        * 4.0
    )
    est.peak("ram", BASE_RAM + maps, f"attention maps of {len(names)} models: {maps / GB:,.1f} GB")
    return est


def wu_controls(params: Mapping, machine: Machine) -> Estimate:
    """Wu et al. page 04: raw word vectors of the trained models and their random copies
    (Fig. 2, with ``gram``: one words x words Gram per layer), and Fig. 9's moments on two
    corpora, jointly or pair by pair."""
    est = Estimate("", knobs={"ram": "n_sentences", "gpu": "model_pairs", "disk": "cache_pairs"})
    _fetch_models(est, params["models"])
    models = _word_models(params, params["models"])
    n = params["n_sentences"]
    words = _words(params, n)
    width = 2 * sum(w for _, _, w in models)
    raw = words * width * 4.0
    layers = 2 * sum(len(_layers_kept(m, s, params.get("layers") or {})) for m, s, _ in models)
    grams = layers * words**2 * 4.0 if params.get("gram") else 0.0
    est.peak(
        "ram",
        BASE_RAM + raw + grams,
        f"raw word vectors {raw / GB:,.1f} GB (trained + random)"
        + (f", {layers} Grams {grams / GB:,.1f} GB" if grams else ""),
    )
    if not params.get("gram"):
        p = Pass(
            [*models, *models], n, words, words / n * TOKENS_PER_WORD + 2, params["batch_size"]
        )
        moments_pass(est, p, params, machine, "Fig. 2 joint moments, trained + random")
    for corpus in (params.get("corpus"), params.get("corpus2")):
        _pairs_or_joint(
            est, models, {**params, "corpus": corpus}, machine, n, f"Fig. 9 on {corpus}"
        )
    return est
