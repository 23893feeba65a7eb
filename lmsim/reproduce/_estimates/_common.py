"""What the per-chapter estimates share: corpus constants, downloads, one extraction
pass with streaming moments, one fine-tune."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lmsim.reproduce._resources import (
    BASE_GPU,
    BASE_RAM,
    ENCODED_BYTES_PER_TOKEN,
    GB,
    OFFLINE_SHAPES,
    SHAPES,
    TOKENIZER_BYTES_PER_TOKEN,
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
        if name in SHAPES and name not in OFFLINE_SHAPES:
            est.download(name, model_bytes(SHAPES[name]))


def _fetch_data(est: Estimate, specs) -> None:
    for spec in specs:
        spec = str(spec).split("#")[0]
        if spec.startswith("hf:"):
            small = any(k in spec for k in ("universal_dependencies", "glue", "conll2003", "ttc"))
            est.download(spec, DATASET_BYTES.get(spec, 0.05 * GB if small else 1.0 * GB))


def _dtype(value, device: str) -> str:
    """The forward precision a page gets: ``dtype`` or, for None / "auto", what
    ``lmsim._runtime.resolve_dtype`` picks (float32 on every device)."""
    if value in (None, "auto"):
        return "float32"
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
    # Tokenisations on the host: every text's for every model, held for the whole call;
    # with return_shards a shard at a time, the next one tokenised meanwhile (two held).
    tokenised = min(p.n_texts, 2 * p.shard_size) if p.return_shards else p.n_texts
    batch_texts = min(p.n_texts, p.shard_size) if p.return_shards else p.n_texts
    encoded = tokenised * p.tokens_per_text * len(shapes) * ENCODED_BYTES_PER_TOKEN
    encoded += batch_texts * p.tokens_per_text * TOKENIZER_BYTES_PER_TOKEN
    kept = f"{tokenised:,} texts' tokenisations ({encoded / GB:,.1f} GB)"
    host = BASE_RAM + max(model_bytes(s) for s in shapes) + (mom if p.cache else 0.0) + encoded
    what = f"{label}: {width:,} joint features ({mom / GB:,.1f} GB float64)"
    on_gpu = _on_gpu(params, machine)
    if on_gpu:
        est.peak("gpu", BASE_GPU + device, f"{what}, {held / GB:,.1f} GB of moments in flight")
        est.peak(
            "ram",
            host,
            f"{label}: the largest model loading, {kept}"
            + (", a shard to write" if p.cache else ""),
        )
    else:
        est.peak("ram", BASE_RAM + device + encoded, f"{what} in RAM (CPU), {kept}")
    if p.cache:
        est.disk_cache += n_shards * mom
    tokens = p.n_texts * p.tokens_per_text * p.runs_per_model
    fwd = sum(forward_flops(s, tokens, T) for s in shapes)
    stats = p.rows * p.runs_per_model * width**2
    device_s = fwd / machine.flops_per_s(dtype) + stats / machine.statistics_flops_per_s()
    host_s = len(shapes) * machine.tokenise_seconds(p.n_texts * p.runs_per_model, T)
    # Shard-at-a-time tokenisation overlaps the GPU's work (one shard ahead); otherwise,
    # and on a CPU that does both, the two add up.
    overlap = p.return_shards and on_gpu
    est.seconds += max(device_s, host_s) if overlap else device_s + host_s
    return width


def _layers_kept(name: str, shape: Shape, layers) -> list[int]:
    if isinstance(layers, Mapping):
        layers = layers.get(name, "all")
    if layers in (None, "all"):
        return list(range(shape.layers + 1))
    if layers == "last":
        return [shape.layers]
    return list(layers)


def _per(value, group: str):
    return value[group] if isinstance(value, Mapping) else value


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
        cache = params.get("cache_moments", True)
        p = Pass(models, n, words, tokens, params["batch_size"], cache=cache)
        moments_pass(est, p, params, machine, f"{label}, joint moments of {len(models)} models")
    return words


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


def _treebank_words(params: Mapping, n: int) -> float:
    corpus = str(params.get("corpus"))
    return n * WORDS_PER_SENTENCE.get(corpus, WORDS_PER_SENTENCE["ptb"])
