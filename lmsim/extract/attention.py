"""Word-level attention probabilities (:func:`extract_attentions`), cached by content."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn

from lmsim._io import check_record, file_record, move_aside, write_atomic, write_json_atomic
from lmsim._runtime import autocast_dtype, resolve_device
from lmsim._threads import thread_policy
from lmsim.blocks import block_name
from lmsim.extract.align import SUBWORDS, _check_texts, _encode
from lmsim.extract.hashing import _cache_key, _content_hash
from lmsim.extract.pooling import _batches, _pad, _Plan, _progress
from lmsim.extract.runs import _autocast, _backbone, _n_layers, _prepare, _resolve_layers, _Run
from lmsim.extract.shard_cache import _read_manifest


@thread_policy
def extract_attentions(
    models,
    sentences,
    *,
    layers="all",
    query: str = "mean",
    max_length: int | None = None,
    batch_size: int = 16,
    device="auto",
    dtype=None,
    lowercase: bool = False,
    cache: bool = True,
    cache_key_extra=None,
    progress: bool = True,
    zoo_profile: str = "default",
) -> dict[str, list[np.ndarray]]:
    """Per-head attention probabilities between words, keyed like :func:`extract_moments`.

    Subword attention is converted to words as Wu et al. (2020, Sec. 4) do after Clark
    et al. (2019, Sec. 2): the attention *to* a word is the **sum** over its subwords (the
    keys), the attention *from* a word is the **mean** over its subwords (the queries).
    Special tokens (``[CLS]``, ``[SEP]``, BOS) belong to no word: their key columns are
    dropped and each subword row is renormalised over the real words before averaging,
    so every word row is a probability distribution over the sentence's words. Causal
    models attend only to the past, so their word matrices are lower-triangular.

    Parameters
    ----------
    models : str, list of str, (model, tokenizer) or dict of str to (model, tokenizer)
        As in :func:`extract_moments`; a single name or a single loaded pair (named
        ``"model"``) is accepted too. Models are switched to eager attention for the call
        (SDPA / flash kernels return no probabilities) and switched back afterwards.
    sentences : list of list of str
        Pre-split words.
    layers : "all", "last", list of int, or dict of model name to any of these
        Transformer layers ``1..L`` (layer ``i`` is the attention inside the block whose
        output is hidden state ``i``); negative indices count from the end.
    query : {"mean", "last", "first"}
        How a word's query row is formed from its subwords' rows ("mean" as in the paper).
    max_length, batch_size, device, dtype, lowercase, progress, zoo_profile
        As in :func:`extract_moments` (sentences that would lose words raise).
    cache : bool
        Keep the result on disk under ``lmsim._cache.cache_dir("attn", key)``; a rerun with
        the same key (content hashes of each model's config, weights and tokenizer; the
        sentences; the layers kept, query, max_length, lowercase, batch_size, device type,
        autocast dtype, ``cache_key_extra``) loads it instead of running the models. The
        ``batch_size`` is in the key because it sets how far each sentence is padded, and
        kernels of other widths may round the last bit differently: a hit returns exactly
        the arrays this call would compute. The arrays are written atomically to
        ``attentions.safetensors``; ``manifest.json`` (written after it) lists the key
        fields, the blocks, the shape of every array and the file's size and sha256,
        checked when it is read: a corrupt or truncated file is named in a warning, moved
        aside (``.corrupt``) and recomputed.
    cache_key_extra : str, int, float, bool, None, array, tensor, or list/tuple/dict of these
        As in :func:`extract_moments`: anything else that should separate cache entries
        (e.g. a corpus version), hashed by content.

    Returns
    -------
    attn : dict of str to list of ndarray of shape (n_heads, n_words, n_words)
        Block ``"{model}/layer.{i}"`` (model then layer order) to one array per sentence
        in the original order; entry ``[h, i, j]`` is head ``h``'s attention from word
        ``i`` to word ``j``.
    """
    if query not in SUBWORDS:
        raise ValueError(f"`query` must be one of {SUBWORDS}, got {query!r}")
    if isinstance(models, str):
        models = [models]
    elif isinstance(models, tuple) and len(models) == 2 and isinstance(models[0], nn.Module):
        models = {"model": models}
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}")
    extra_hash = _content_hash(cache_key_extra) if cache else None  # refuse early
    sentences = _check_texts(sentences, "word")
    device = resolve_device(device)
    amp_dtype = autocast_dtype(device, dtype)
    runs = _prepare(models, "all", max_length, device, dtype, zoo_profile)
    kept = {run.name: _attention_layers(layers, run) for run in runs}
    blocks = [block_name(run.name, lay) for run in runs for lay in kept[run.name]]
    folder = payload = None
    if cache:
        from lmsim._cache import cache_dir

        fields = {
            "kind": "attention",
            "attention_layers": kept,
            "query": query,
            "max_length": max_length,
            "lowercase": bool(lowercase),
            "batch_size": int(batch_size),
            "cache_key_extra": extra_hash,
        }
        plan = _Plan(runs, [], device, amp_dtype, None, sentences)
        key, payload = _cache_key(plan, fields)
        folder = cache_dir("attn", key)
        cached = _load_attentions(folder, blocks, [len(s) for s in sentences])
        if cached is not None:
            return cached
    out: dict[str, list[np.ndarray]] = {}
    for run in runs:
        layer_ids = kept[run.name]
        enc = _encode(run, sentences, "word", query, False, lowercase)
        per_layer = _run_attentions(
            run, enc, sentences, layer_ids, query, batch_size, device, amp_dtype, progress
        )
        out.update({block_name(run.name, lay): per_layer[lay] for lay in layer_ids})
    if folder is not None:
        _save_attentions(out, folder, payload)
    return out


_ATTN_FILE = "attentions.safetensors"


def _save_attentions(attn: dict, folder: Path, payload: dict) -> None:
    """Write ``attn`` (block -> arrays of shape (H, W_i, W_i)) as one flat tensor per block,
    then the manifest with every shape and the file's record (atomic writes, in that order:
    a file without a matching manifest entry is never read)."""
    from safetensors.numpy import save_file

    flat = {
        name: np.concatenate([np.ascontiguousarray(a).reshape(-1) for a in arrays])
        for name, arrays in attn.items()
    }
    path = folder / _ATTN_FILE
    write_atomic(path, lambda tmp: save_file(flat, str(tmp)))
    manifest = {
        **payload,
        "blocks": list(attn),
        "dtypes": {name: str(arrays[0].dtype) for name, arrays in attn.items()},
        "shapes": {name: [list(a.shape) for a in arrays] for name, arrays in attn.items()},
        "files": {_ATTN_FILE: file_record(path)},
    }
    write_json_atomic(folder / "manifest.json", manifest, indent=1, default=str)


def _load_attentions(folder: Path, blocks: list[str], n_words: list[int]) -> dict | None:
    """The cached result in ``folder`` if it is there, whole and of the expected blocks and
    sentence lengths; a corrupt file is named in a warning, moved aside, and None returned."""
    path = folder / _ATTN_FILE
    if not path.exists():
        return None
    manifest = _read_manifest(folder)
    files = manifest.get("files")
    record = files.get(_ATTN_FILE) if isinstance(files, dict) else None
    if not isinstance(record, dict):
        return None  # written but its manifest is not (an interrupted run): recompute
    try:
        check_record(path, record)
        shapes, dtypes = manifest["shapes"], manifest["dtypes"]
        if manifest.get("blocks") != blocks:
            raise ValueError(f"{path} holds blocks {manifest.get('blocks')}, not {blocks}")
        from safetensors.numpy import load_file

        flat = load_file(str(path))
        out = {}
        for name in blocks:
            sizes = [int(np.prod(s)) for s in shapes[name]]
            words = [s[1] for s in shapes[name]]
            x = flat[name]
            if words != n_words or x.size != sum(sizes) or str(x.dtype) != dtypes[name]:
                raise ValueError(f"{path}: block {name!r} does not match its manifest")
            ends = np.cumsum(sizes)
            out[name] = [
                x[end - size : end].reshape(shape).copy()
                for shape, size, end in zip(shapes[name], sizes, ends)
            ]
        return out
    except Exception as err:  # noqa: BLE001 - safetensors raises its own error types
        # move_aside, _load_attentions, extract_attentions, its @thread_policy wrapper, the caller
        move_aside(path, f"{type(err).__name__}: {err}", "recomputing it", stacklevel=5)
        return None


def _attention_layers(layers, run: _Run) -> list[int]:
    n_layers = _n_layers(run.model)
    spec = layers.get(run.name, "all") if isinstance(layers, Mapping) else layers
    if spec == "all":
        return list(range(1, n_layers + 1))
    layer_ids = _resolve_layers(spec, run.name, n_layers)
    if 0 in layer_ids:
        raise ValueError(
            f"layer 0 is the embedding output and has no attention; valid layers are "
            f"1..{n_layers} (or -{n_layers}..-1)"
        )
    return layer_ids


def _run_attentions(run, enc, sentences, layer_ids, query, batch_size, device, amp_dtype, progress):
    """Word-level attention of one model: layer -> one array per sentence."""
    out: dict[int, list] = {lay: [None] * len(sentences) for lay in layer_ids}
    backbone = _backbone(run.model)
    bar = _progress(len(sentences), progress, f"attention {run.name}")
    with _eager_attention(run.model), torch.inference_mode():
        try:
            lengths = enc.n_tokens
            for batch in _batches(np.arange(len(sentences)), lengths, int(batch_size), sort=True):
                input_ids, mask = _pad(run, enc, batch, None, device)
                with _autocast(device, amp_dtype):
                    result = backbone(
                        input_ids=input_ids, attention_mask=mask, output_attentions=True
                    )
                attentions = getattr(result, "attentions", None)
                if not attentions:
                    raise TypeError(
                        f"model {run.name!r} returned no attentions even with eager attention"
                    )
                for b, i in enumerate(batch):
                    n = len(enc.ids[i])
                    key_map, query_map = _word_maps(
                        enc.word_ids[i], len(sentences[i]), query, device
                    )
                    for lay in layer_ids:
                        probs = attentions[lay - 1][b, :, :n, :n].float()
                        out[lay][i] = _to_words(probs, key_map, query_map).cpu().numpy()
                bar.update(len(batch))
        finally:
            bar.close()
    return out


def _word_maps(word_ids: list, n_words: int, query: str, device):
    """Token-to-word matrices: ``key_map (n_tokens, n_words)`` sums subword keys,
    ``query_map (n_words, n_tokens)`` averages (or picks) subword queries."""
    n_tokens = len(word_ids)
    key_map = torch.zeros(n_tokens, n_words, dtype=torch.float32)
    query_map = torch.zeros(n_words, n_tokens, dtype=torch.float32)
    positions: list[list[int]] = [[] for _ in range(n_words)]
    for t, w in enumerate(word_ids):
        if w is not None:
            key_map[t, w] = 1.0
            positions[w].append(t)
    for w, pos in enumerate(positions):
        chosen = pos[-1:] if query == "last" else pos[:1] if query == "first" else pos
        query_map[w, chosen] = 1.0 / len(chosen)
    return key_map.to(device), query_map.to(device)


def _to_words(probs: torch.Tensor, key_map: torch.Tensor, query_map: torch.Tensor) -> torch.Tensor:
    """``probs (H, T, T)`` over tokens to ``(H, W, W)`` over words."""
    to_words = probs @ key_map  # (H, T, W): attention to each word, special tokens dropped
    to_words = to_words / to_words.sum(-1, keepdim=True).clamp_min(1e-30)
    return query_map @ to_words


@contextlib.contextmanager
def _eager_attention(model: nn.Module):
    config = getattr(model, "config", None)
    previous = getattr(config, "_attn_implementation", None)
    switch = previous not in (None, "eager") and hasattr(model, "set_attn_implementation")
    if switch:
        model.set_attn_implementation("eager")
    try:
        yield
    finally:
        if switch:
            model.set_attn_implementation(previous)
