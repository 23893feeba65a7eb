"""Content hashes for cache keys: weights, tokenizers, texts and ``cache_key_extra``.

A key is the sha256 of everything that decides a result, so a cache hit is what the call
would compute; nothing is hashed by name, ``str`` or ``repr`` alone.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from lmsim.extract.pooling import _Plan
from lmsim.extract.runs import _Run

# Bump when the extraction semantics change: old cache folders are then never reused.
_CACHE_VERSION = 2


# Full weight hashes are memoised per model object and invalidated by the parameters'
# in-place version counters: a second extraction with the same model costs nothing, an
# optimizer step or ``load_state_dict`` changes the key. (sha256 of a 110M-parameter BERT's
# 440 MB took 0.3-1.2 s here, a fraction of loading it, so every byte is hashed.)
_WEIGHT_HASHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _tensor_bytes(x: torch.Tensor) -> memoryview:
    x = x.detach().cpu().contiguous().reshape(-1)
    return memoryview(x.view(torch.uint8).numpy())


def _weights_hash(model: nn.Module) -> str:
    """sha256 of every parameter and buffer of ``model``: names, dtypes, shapes and bytes."""
    state = list(model.state_dict(keep_vars=True).items())
    versions = tuple((k, v.data_ptr(), v._version, v.dtype, tuple(v.shape)) for k, v in state)
    cached = _WEIGHT_HASHES.get(model)
    if cached is not None and cached[0] == versions:
        return cached[1]
    digest = hashlib.sha256()
    for name, tensor in state:
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}\n".encode())
        digest.update(_tensor_bytes(tensor))
    value = digest.hexdigest()
    _WEIGHT_HASHES[model] = (versions, value)
    return value


def _tokenizer_hash(tokenizer) -> str:
    """sha256 of everything that decides how ``tokenizer`` encodes a text.

    A fast tokenizer's backend serialises its vocabulary, merges, normaliser,
    pre-tokeniser, post-processor and added tokens (``to_str()``); a slow one is described
    by its sorted vocabulary. Both add the transformers-side settings (special tokens,
    padding and truncation side, ``model_max_length``).
    """
    digest = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        digest.update(backend.to_str().encode())
    elif hasattr(tokenizer, "get_vocab"):
        vocab = sorted(tokenizer.get_vocab().items())
        digest.update(json.dumps(vocab, ensure_ascii=False).encode())
    else:
        raise TypeError(
            f"cannot fingerprint a tokenizer of type {type(tokenizer).__name__} for the "
            "activation cache: it has neither `backend_tokenizer` nor `get_vocab()`; "
            "pass cache=False"
        )
    settings = {
        attr: getattr(tokenizer, attr, None)
        for attr in ("padding_side", "truncation_side", "model_max_length")
    }
    settings["special"] = getattr(tokenizer, "special_tokens_map", None)
    settings["added"] = sorted(getattr(tokenizer, "get_added_vocab", dict)().items())
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _model_fingerprint(run: _Run) -> dict:
    """Content hashes of a model: its config, all of its weights and its tokenizer."""
    config = getattr(run.model, "config", None)
    config_json = config.to_json_string(use_diff=False) if config is not None else ""
    return {
        "name": run.name,
        "config": hashlib.sha256(config_json.encode()).hexdigest(),
        "weights": _weights_hash(run.model),
        "tokenizer": _tokenizer_hash(run.tokenizer),
        "layers": run.layers,
        "max_length": run.max_length,
    }


def _texts_fingerprint(texts: list) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(json.dumps(text, ensure_ascii=False).encode())
        digest.update(b"\x00")
    return digest.hexdigest()


def _content_hash(value, path: str = "cache_key_extra") -> str:
    """sha256 of ``value`` by content: arrays by bytes, dtype and shape; containers
    recursively; str, int, float, bool and None by value (types kept apart: 1, 1.0, True
    and "1" differ).

    Raises
    ------
    TypeError
        Anything else (its ``str`` may hide content, its ``repr`` may change per process),
        naming where it sits in ``value``.
    """
    digest = hashlib.sha256()

    def feed(x, where: str) -> None:
        if x is None or isinstance(x, (bool, int, float, str)):
            digest.update(f"{type(x).__name__}:{x!r};".encode())
        elif isinstance(x, (np.integer, np.floating, np.bool_)):
            feed(x.item(), where)
        elif isinstance(x, (np.ndarray, torch.Tensor)):
            if isinstance(x, np.ndarray):
                if x.dtype.hasobject:
                    raise TypeError(
                        f"`{where}` is an object array, which cannot be hashed by content; "
                        "convert it to a numeric or string array, or to a list"
                    )
                x = np.ascontiguousarray(x)
                raw, dtype = x.tobytes(), str(x.dtype)
            else:
                raw, dtype = bytes(_tensor_bytes(x)), str(x.dtype).removeprefix("torch.")
            digest.update(f"array:{dtype}:{tuple(x.shape)}:".encode())
            digest.update(hashlib.sha256(raw).digest())
        elif isinstance(x, Mapping):
            digest.update(f"dict:{len(x)}{{".encode())
            items = []
            for k in x:
                if not isinstance(k, (str, int, float, bool)) and k is not None:
                    raise TypeError(
                        f"`{where}` has a key of type {type(k).__name__}; use str or int keys"
                    )
                items.append((f"{type(k).__name__}:{k!r}", k))
            for key_text, k in sorted(items, key=lambda kv: kv[0]):
                digest.update(key_text.encode() + b"=")
                feed(x[k], f"{where}[{k!r}]")
            digest.update(b"}")
        elif isinstance(x, (list, tuple)):
            digest.update(f"{type(x).__name__}:{len(x)}[".encode())
            for i, item in enumerate(x):
                feed(item, f"{where}[{i}]")
            digest.update(b"]")
        else:
            raise TypeError(
                f"`{where}` is a {type(x).__name__}, which cannot be hashed by content (its "
                "str/repr may hide data or change between processes); pass str, int, float, "
                "bool, None, numpy arrays, torch tensors, or lists/tuples/dicts of these"
            )

    feed(value, path)
    return digest.hexdigest()


def _cache_key(plan: _Plan, fields: dict) -> tuple[str, dict]:
    payload = {
        "version": _CACHE_VERSION,
        "models": [_model_fingerprint(r) for r in plan.runs],
        "texts": _texts_fingerprint(plan.texts),
        "n_texts": len(plan.texts),
        "device": plan.device.type,
        "amp_dtype": str(plan.amp_dtype),
        **fields,
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32], payload
