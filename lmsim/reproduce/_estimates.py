"""Per-page resource estimates: one function per source notebook, from its parameters.

Each function reads the parameters its notebook declares (defaults, then the profile's
overrides) and returns an :class:`~lmsim.reproduce._resources.Estimate`: the peak of
host RAM and GPU memory over the page's steps, the disk it leaves (extraction cache,
fine-tuned or trained models) and its time on the machine. The steps and what they hold
are the notebooks' own (read from their code; the comments in ``notebooks/runs.yml``
quote the same figures). Corpus statistics the plan cannot read without loading a corpus
are constants below, with their source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from lmsim.reproduce._resources import (
    BASE_GPU,
    BASE_RAM,
    GB,
    SHAPES,
    Estimate,
    Machine,
    Shape,
    ceil_div,
    forward_bytes,
    forward_flops,
    model_bytes,
    model_shape,
    moments_bytes,
    train_flops,
    training_bytes,
    zoo_shape,
)

# Words per sentence of the corpora the pages read (counted once from the corpora):
# PTB valid 73,760 words / 3,370 sentences; UD English GSD train 204,585 / 12,543; PUD
# 21,176 / 1,000; Brown ~20; generated smoke text ~8.
WORDS_PER_SENTENCE = {"ptb": 21.9, "treebank": 16.3, "pud": 21.2, "brown": 20.0, "smoke": 8.0}
# Sub-word tokens per word (BERT WordPiece on PTB: 1.25; byte-level BPE and SentencePiece
# on multilingual text split more): one figure for the plan.
TOKENS_PER_WORD = 1.3
# Training examples of the hub datasets the RegMean page fine-tunes on (their train
# splits; OntoNotes and the emotion sources approximately, by genre / source).
DATASET_ROWS = {
    "hf:glue:cola": 8_551,
    "hf:glue:sst2": 67_349,
    "hf:glue:mrpc": 3_668,
    "hf:glue:stsb": 5_749,
    "hf:glue:mnli": 392_702,
    "hf:glue:qnli": 104_743,
    "hf:glue:qqp": 363_846,
    "hf:glue:rte": 2_490,
    "ontonotes": 12_500,  # per genre, ≈ 75,187 train sentences / 6 genres
    "emotion": 20_000,  # per source of the unified collection, ≈
}
DEFAULT_ROWS = 10_000
# Download sizes of the hub datasets (Parquet as the hub serves them, ≈); unknown: 1 GB.
DATASET_BYTES = {
    "hf:wikimedia/wikipedia:20231101.en": 11.6 * GB,
    "hf:bookcorpus/bookcorpus": 2.9 * GB,
    "hf:wikicorpus:raw_en": 1.4 * GB,
    "hf:conll2012_ontonotesv5:english_v4": 0.2 * GB,
}


def _fetch_models(est: Estimate, names) -> None:
    """Hub checkpoints land in the hub cache once (float32 safetensors)."""
    for name in names:
        if not name.startswith("zoo/") and name in SHAPES:
            est.download(name, model_bytes(SHAPES[name]))


def _fetch_data(est: Estimate, specs) -> None:
    for spec in specs:
        spec = str(spec).split("#")[0]
        if spec.startswith("hf:"):
            small = any(k in spec for k in ("universal_dependencies", "glue", "conll2003", "ttc"))
            est.download(spec, DATASET_BYTES.get(spec, 0.05 * GB if small else 1.0 * GB))


def _dtype(value, device: str) -> str:
    """The forward precision a page gets: ``dtype`` or, for None / "auto", what
    ``lmsim._runtime.resolve_dtype`` picks today (bfloat16 on CUDA)."""
    if value in (None, "auto"):
        return "bfloat16" if device in ("cuda", "auto") else "float32"
    return {"bf16": "bfloat16", "fp32": "float32", "float": "float32"}.get(value, value)


def _shape(name: str, zoo_profile: str) -> Shape:
    if name.startswith("zoo/"):
        return zoo_shape(zoo_profile, deep="deep" in name)
    return model_shape(name)


def _on_gpu(params: Mapping, machine: Machine) -> bool:
    return params.get("device", "auto") in ("cuda", "auto") and machine.gpu_memory_gb > 0


@dataclass
class Pass:
    """One ``extract_moments`` call (or one per model pair) over ``n_texts`` texts."""

    models: Sequence[tuple[str, Shape, int]]  # name, shape, features it contributes
    n_texts: int
    rows: float  # rows of the moments (texts, words or tokens)
    tokens_per_text: float  # tokens each forward pass computes per text (padding included)
    batch_size: int
    shard_size: int = 256
    cache: bool = True
    return_shards: bool = False
    runs_per_model: float = 1.0  # model pairs run each model n_models - 1 times


def moments_pass(est: Estimate, p: Pass, params: Mapping, machine: Machine, label: str):
    """Add one extraction with streaming float64 moments to ``est``.

    Device memory: every model of the call (``extract_moments`` loads them all), one
    forward pass of the widest at ``batch_size``, and the moments in flight: the running
    merge and one shard (``2 M``), or all shards when the page keeps them
    (``return_shards``: ``(n_shards + 1) M``), ``M = 8 D²`` for ``D`` joint features.
    Host: the largest model while it loads, and with ``cache`` one shard copied out to be
    written. Disk: ``n_shards M`` with ``cache``. Time: the forward FLOPs at the page's
    precision plus ``rows D²`` float64 FLOPs of co-moment updates.
    """
    width = sum(w for _, _, w in p.models)
    mom = moments_bytes(width)
    n_shards = max(1, ceil_div(p.n_texts, p.shard_size))
    held = (n_shards + 1) * mom if p.return_shards else (2 * mom if n_shards > 1 else mom)
    T = max(1, round(p.tokens_per_text))
    shapes = [s for _, s, _ in p.models]
    dtype = _dtype(params.get("dtype"), params.get("device", "auto"))
    device = (
        sum(model_bytes(s, dtype) for s in shapes)
        + max(forward_bytes(s, p.batch_size, T) for s in shapes)
        + held
    )
    host = BASE_RAM + max(model_bytes(s) for s in shapes) + (mom if p.cache else 0.0)
    what = f"{label}: {width:,} joint features ({mom / GB:,.1f} GB float64)"
    if _on_gpu(params, machine):
        est.peak("gpu", BASE_GPU + device, f"{what}, {held / GB:,.1f} GB of moments in flight")
        est.peak(
            "ram",
            host,
            f"{label}: the largest model loading" + (", a shard to write" if p.cache else ""),
        )
    else:
        est.peak("ram", BASE_RAM + device, f"{what} in RAM (CPU)")
    if p.cache:
        est.disk_cache += n_shards * mom
    tokens = p.n_texts * p.tokens_per_text * p.runs_per_model
    fwd = sum(forward_flops(s, tokens, T) for s in shapes)
    stats = p.rows * p.runs_per_model * width**2
    est.seconds += fwd / machine.flops_per_s(dtype) + stats / machine.statistics_flops_per_s()
    return width


def _layers_kept(name: str, shape: Shape, layers) -> list[int]:
    if isinstance(layers, Mapping):
        layers = layers.get(name, "all")
    if layers in (None, "all"):
        return list(range(shape.layers + 1))
    if layers == "last":
        return [shape.layers]
    return list(layers)


# ------------------------------------------------------------------------------ zoo
def zoo_train(params: Mapping, machine: Machine) -> Estimate:
    """The zoo build: every listed model (and its parents) trained for the profile's
    steps; then a CKA map over ``n_sentences``."""
    from lmsim.zoo import MODELS, PROFILES

    prof = PROFILES[params["zoo_profile"]]
    est = Estimate("", knobs={"gpu": "zoo_profile", "ram": "n_sentences", "disk": "models"})
    names, todo = [], list(params["models"])
    while todo:  # the models and what they are built from
        name = todo.pop()
        if name not in names:
            names.append(name)
            parent = MODELS[name].parent
            if parent:
                todo.append(parent)
    mixed = prof.bf16
    dtype = "bfloat16" if mixed else "float32"
    for name in names:
        spec = MODELS[name]
        shape = zoo_shape(prof.name, spec.deep)
        tokens = prof.steps * prof.batch_size * prof.seq_len
        factor = {"electra": 1.5, "distil": 4 / 3}.get(spec.objective, 1.0)
        if spec.objective == "finetune":
            tokens = (prof.max_ft_train or 2_000) * prof.seq_len * prof.ft_epochs
        est.seconds += (
            factor
            * train_flops(shape, tokens, prof.seq_len)
            / machine.flops_per_s(dtype, training=True)
        )
        est.disk_output += 4.0 * shape.params * 4  # weights + AdamW checkpoint (3x)
        need = BASE_GPU + factor * training_bytes(shape, prof.batch_size, prof.seq_len, mixed)
        if _on_gpu(params, machine):
            est.peak("gpu", need, f"training {name}: AdamW state and activations")
        else:
            est.peak("ram", BASE_RAM + need, f"training {name} on the CPU")
    est.peak("ram", BASE_RAM + 0.5 * GB, "training data (PTB lines) and one model")
    est.notes.append(
        f"time: {len(names)} models x {prof.steps:,} steps of {prof.batch_size} x {prof.seq_len}"
    )
    return est


# ------------------------------------------------------------------------------ LMD
def _per(value, group: str):
    return value[group] if isinstance(value, Mapping) else value


def lmd_decomposition(params: Mapping, machine: Machine) -> Estimate:
    """Zhang et al. page 01: last-layer mean-pooled moments of each group at each T, train
    and test, shards kept (``return_shards``) and cached; the appendix corpus too."""
    est = Estimate("", knobs={"gpu": "shard_size", "disk": "shard_size", "ram": "max_docs"})
    _fetch_models(est, [m for g in params["groups"].values() for m in g])
    _fetch_data(est, [*params.get("corpora", []), *params.get("appendix_corpora", [])])
    zoo = params.get("zoo_profile", "default")
    pad = params.get("paper_compat_padding", False)
    passes = [("", params["n_train"], params["n_test"], list(params["groups"]))]
    sizes = params.get("appendix_sizes") or [params["n_train"], params["n_test"]]
    for corpus in params.get("appendix_corpora") or []:
        passes.append((f"{corpus}: ", *sizes, list(params.get("appendix_groups") or [])))
    for prefix, n_train, n_test, groups in passes:
        for g in groups:
            models = [(m, _shape(m, zoo), _shape(m, zoo).hidden) for m in params["groups"][g]]
            for T in params["seq_lens"][g]:
                for n in (_per(n_train, g), _per(n_test, g)):
                    tokens = T if pad else 0.8 * T  # chunks of T reference tokens, re-tokenised
                    p = Pass(
                        models,
                        n,
                        n,
                        tokens,
                        params["batch_size"],
                        params["shard_size"],
                        return_shards=True,
                    )
                    moments_pass(
                        est, p, params, machine, f"{prefix}group {g}, T={T}, {n:,} sequences"
                    )
    docs = params.get("max_docs") or 0
    corpora = params.get("corpora") or []
    text = sum(docs * (3_000 if "wikipedia" in c else 120) for c in corpora)
    est.peak(
        "ram",
        BASE_RAM + 3 * text,
        f"{len(corpora)} corpora x {docs:,} documents as Python text and chunks",
    )
    return est


def lmd_beyond(params: Mapping, machine: Machine) -> Estimate:
    """Zhang et al. page 02: page 01's last-layer moments at one T (a cache hit when 01 ran
    with the same sizes), then one pass over the layers at each depth, one shard each."""
    est = Estimate("", knobs={"gpu": "depths", "disk": "shard_size", "ram": "max_docs"})
    _fetch_models(est, params["models"])
    _fetch_data(est, params.get("corpora", []))
    zoo = params.get("zoo_profile", "default")
    T = params["seq_len"]
    tokens = T if params.get("paper_compat_padding") else 0.8 * T
    last = [(m, _shape(m, zoo), _shape(m, zoo).hidden) for m in params["models"]]
    depth = [(m, s, len(params["depths"]) * s.hidden) for m, s, _ in last]
    for n in (params["n_train"], params["n_test"]):
        moments_pass(
            est,
            Pass(
                last, n, n, tokens, params["batch_size"], params["shard_size"], return_shards=True
            ),
            params,
            machine,
            f"last layer, {n:,} sequences",
        )
        moments_pass(
            est,
            Pass(depth, n, n, tokens, params["batch_size"], n),
            params,
            machine,
            f"{len(params['depths'])} depths, {n:,} sequences",
        )
    docs = params.get("max_docs") or 0
    text = sum(docs * (3_000 if "wikipedia" in c else 120) for c in params.get("corpora") or [])
    est.peak("ram", BASE_RAM + 3 * text, "the corpora as Python text and chunks")
    est.notes.append("time: counts the last-layer pass, which page 01's cache may already hold")
    return est


# ------------------------------------------------------------------------------ Wu et al.
def _words(params: Mapping, n_sentences: int) -> float:
    corpus = str(params.get("corpus", "smoke"))
    return n_sentences * WORDS_PER_SENTENCE.get(corpus, WORDS_PER_SENTENCE["ptb"])


def _word_models(params: Mapping, names: Sequence[str]) -> list[tuple[str, Shape, int]]:
    zoo = params.get("zoo_profile", "default")
    out = []
    for m in names:
        s = _shape(m, zoo)
        out.append((m, s, len(_layers_kept(m, s, params.get("layers") or {})) * s.hidden))
    return out


def _pairs_or_joint(est, models, params, machine, n, label, cache_key="cache_pairs"):
    """One joint pass, or with ``model_pairs`` one pass per pair of models."""
    words = _words(params, n)
    tokens = words / n * TOKENS_PER_WORD + 2
    if params.get("model_pairs"):
        pairs = [(a, b) for i, a in enumerate(models) for b in models[i + 1 :]]
        worst = max(pairs, key=lambda ab: ab[0][2] + ab[1][2])
        p = Pass(
            list(worst), n, words, tokens, params["batch_size"], cache=params.get(cache_key, True)
        )
        moments_pass(est, p, params, machine, f"{label}, largest of {len(pairs)} pairs")
        # every other pair's time and cache
        for a, b in pairs:
            if (a, b) == worst:
                continue
            sub = Estimate("")
            moments_pass(
                sub,
                Pass([a, b], n, words, tokens, params["batch_size"], cache=p.cache),
                params,
                machine,
                "",
            )
            est.seconds += sub.seconds
            est.disk_cache += sub.disk_cache
    else:
        p = Pass(models, n, words, tokens, params["batch_size"], cache=True)
        moments_pass(est, p, params, machine, f"{label}, joint moments of {len(models)} models")
    return words


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


def _finetune(
    est, shape, n_examples, epochs, max_length, batch_size, machine, label, on_gpu, mixed=False
):
    tokens = n_examples * epochs * max_length * 0.7  # dynamic padding: ~70 % of max_length
    dtype = "bfloat16" if mixed else "float32"
    est.seconds += train_flops(shape, tokens, max_length) / machine.flops_per_s(
        dtype, training=True
    )
    need = training_bytes(shape, batch_size, max_length, mixed)
    if on_gpu:
        est.peak("gpu", BASE_GPU + need, f"fine-tuning {label}")
    else:
        est.peak("ram", BASE_RAM + need, f"fine-tuning {label} on the CPU")
    est.disk_output += 4.0 * shape.params


def wu_finetuning(params: Mapping, machine: Machine) -> Estimate:
    """Wu et al. page 03: joint word moments of the base and its fine-tuned copies (every
    hidden state), attention maps, and Table 1's fine-tunes (each frozen depth, at the
    bottom and the top, and the full model)."""
    est = Estimate("", knobs={"gpu": "finetuned", "disk": "finetuned", "ram": "n_attn_sentences"})
    names = [params["base"], *params["finetuned"]]
    _fetch_models(est, [*names, params["ft_base"]])
    _fetch_data(est, [params["ft_set"]])
    models = _word_models(params, names)
    _pairs_or_joint(est, models, params, machine, params["n_sentences"], "word moments")
    zoo = params.get("zoo_profile", "default")
    base = _shape(params["ft_base"], zoo)
    n_ft = 1 + 2 * len(params["ft_frozen"])
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


# ------------------------------------------------------------------------------ thesis
def _treebank_words(params: Mapping, n: int) -> float:
    corpus = str(params.get("corpus"))
    return n * WORDS_PER_SENTENCE.get(corpus, WORDS_PER_SENTENCE["ptb"])


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


# ------------------------------------------------------------------------------ RegMean
def _grams_bytes(shape: Shape) -> float:
    """float64 Grams of every linear layer's input, keyed by module (q, k, v, attention
    output and FFN input read ``d``, the FFN output reads ``ffn``)."""
    return 8.0 * shape.layers * (5 * shape.hidden**2 + shape.ffn**2)


def regmean_merging(params: Mapping, machine: Machine) -> Estimate:
    """Jin et al. page 01/02: every model fine-tuned (non-i.i.d. partitions A, B and the
    joint one of each task; each domain and the pooled one of each setup; extra tasks;
    one multi-task model), all loaded on the device, their Grams (float64) and diagonal
    Fishers (float64, float32 with ``cache_stats``) held in RAM for the merges."""
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
    for t, spec in params["noniid_tasks"].items():
        rows = DATASET_ROWS.get(spec, DEFAULT_ROWS)
        runs += [(f"{t}-A", n_part, epochs), (f"{t}-B", n_part, epochs)]
        runs.append((f"{t}-joint", rows if params.get("full_task_data") else 2 * n_part, epochs))
    for s, setup in params["domain_setups"].items():
        domains = setup.get("domains") or setup.get("keywords") or {}
        kind = "ontonotes" if s == "ner" else "emotion"
        per = params["n_domain_train"] or DATASET_ROWS[kind]
        e = by.get(s, epochs)
        runs += [(f"{s}-{d}", per, e) for d in domains] + [(f"{s}-joint", per * len(domains), e)]
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
    held = n_models * (fisher + (0.0 if params.get("cache_stats") else grams))
    est.peak(
        "ram",
        BASE_RAM + held,
        f"{n_models} models' Grams ({grams / GB:,.2f} GB each{', cached to disk' if params.get('cache_stats') else ''}) and Fishers ({fisher / GB:,.2f} GB each)",
    )
    if params.get("cache_stats"):
        est.disk_cache += n_models * grams
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
    est.notes.append(
        f"time: {n_models} fine-tunes ({sum(n * e for _, n, e in runs):,.0f} example-epochs) dominate"
    )
    return est


# ------------------------------------------------------------------------------ two-tower
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
    for run in params["runs"]:
        shape = _tower_shape(run, vocab)
        tokens = (params["steps"] + params["head_steps"]) * B * T
        est.seconds += train_flops(shape, tokens, T) / machine.flops_per_s(dtype, training=True)
        est.seconds += forward_flops(
            shape, params["n_score_chunks"] * T * params.get("mask_repeats", 1), T
        ) / machine.flops_per_s(dtype)
        need = training_bytes(shape, B, T, mixed)
        if on_gpu:
            est.peak(
                "gpu",
                BASE_GPU + need,
                f"training {run['name']} ({shape.params / 1e6:,.0f} M parameters)",
            )
        else:
            est.peak("ram", BASE_RAM + need, f"training {run['name']} on the CPU")
        est.disk_output += 4.0 * shape.params * 4
    est.peak(
        "ram",
        BASE_RAM + params["n_score_chunks"] * T * 8.0 * 2,
        "the scored chunks and their per-token scores",
    )
    return est


SHAPES_VOCAB = {"bert-base-uncased": 30_522}

ESTIMATORS: dict[str, Callable[[Mapping, Machine], Estimate]] = {
    "lmsim_zoo/01_train_zoo": zoo_train,
    "zhang2022_lmd/01_decomposition": lmd_decomposition,
    "zhang2022_lmd/02_beyond_the_paper": lmd_beyond,
    "wu2020_similarity/01_representations": wu_representations,
    "wu2020_similarity/02_attention": wu_attention,
    "wu2020_similarity/03_finetuning": wu_finetuning,
    "wu2020_similarity/04_controls": wu_controls,
    "thesis2022_redundancy/01_layer_similarity": redundancy_similarity,
    "thesis2022_redundancy/02_redundancy_probes": redundancy_probes,
    "thesis2022_redundancy/03_cross_lingual": redundancy_cross_lingual,
    "jin2023_regmean/01_merging": regmean_merging,
    "he2022_twotower/01_preference": twotower_preference,
}
