"""Probe inputs: one activation row per word, the requested layers side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def word_activations(
    model,
    sentences: Sequence[Sequence],
    layers="all",
    *,
    subword: str = "last",
    batch_size: int = 32,
    max_length: int | None = None,
    device="auto",
    dtype=None,
    lowercase: bool = False,
    progress: bool = False,
    zoo_profile: str = "default",
) -> tuple[np.ndarray, dict[str, int]]:
    """One activation row per word, all requested layers concatenated (probe input).

    A thin wrapper over :func:`lmsim.extract.extract_activations` with ``pooling="word"``:
    a word's vector is its last subword's (``subword="last"``, as NeuroX) for encoders and
    causal models alike; special tokens belong to no word.

    Parameters
    ----------
    model : str, (model, tokenizer) pair, or mapping of one name to such a pair
        A name :func:`lmsim.models.load_model` knows, or a loaded Hugging Face model with
        its fast tokenizer (block names then start with ``"model"`` or the mapping's key).
    sentences : sequence of sequence of str or of (word, tag)
        Pre-split sentences; ``(word, tag)`` pairs (:func:`lmsim.data.brown.read_brown`) are
        reduced to their words.
    layers : "all", int or sequence of int
        Hidden-state layers (0 = embeddings), as in ``extract_activations``.
    subword : {"last", "first", "mean"}
    batch_size, max_length, device, dtype, lowercase, progress
        Passed to ``extract_activations``.
    zoo_profile : str, default="default"
        Which zoo build ``"zoo/<name>"`` names load (``lmsim.zoo.PROFILES``); without it a
        smoke run would silently load (or build) the default zoo.

    Returns
    -------
    X : ndarray of float32, shape (n_words, n_neurons)
        Rows: the words of ``sentences[0]``, then ``sentences[1]``, ...
    dims : dict of str to int
        ``{"{model}/layer.{i}": width}`` in column order (for
        :func:`lmsim.cluster.kept_per_block` and layer subsets).
    """
    from lmsim.extract import extract_activations

    if isinstance(model, str):
        models = [model]
    elif isinstance(model, Mapping):
        if len(model) != 1:
            raise ValueError(f"`model` must name one model, got {len(model)}")
        models = dict(model)
    elif isinstance(model, (tuple, list)) and len(model) == 2:
        models = {"model": tuple(model)}
    else:
        raise TypeError(
            "`model` must be a model name, a (model, tokenizer) pair or {name: (model, tokenizer)}"
        )
    texts = [
        [w[0] if isinstance(w, (tuple, list)) else w for w in sentence] for sentence in sentences
    ]
    acts = extract_activations(
        models,
        texts,
        layers=layers,
        pooling="word",
        subword=subword,
        max_length=max_length,
        batch_size=batch_size,
        device=device,
        dtype=dtype,
        lowercase=lowercase,
        progress=progress,
        zoo_profile=zoo_profile,
    )

    def layer_index(name: str) -> int:
        return int(name.rsplit(".", 1)[1])

    names = sorted(acts, key=layer_index)
    dims = {name: int(acts[name].shape[1]) for name in names}
    X = np.concatenate([acts.pop(name) for name in names], axis=1)
    return X, dims
