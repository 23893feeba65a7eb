"""Classifier logits (:func:`extract_logits`) and :func:`model_inputs`, the one place a
padded :mod:`lmsim.encoding` batch becomes the tensors a model takes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from lmsim._threads import thread_policy
from lmsim.encoding import encode_inputs, forward_keys, pad_batch, resolve_kind
from lmsim.extract.runs import _model_device


def model_inputs(model: nn.Module, batch: Mapping[str, np.ndarray], device) -> dict:
    """The tensors of a :func:`lmsim.encoding.pad_batch` batch that ``model`` takes.

    ``input_ids`` and ``attention_mask`` always, ``token_type_ids`` (pairs) only where the
    model has segment embeddings (:func:`lmsim.encoding.forward_keys`).
    """
    return {k: torch.from_numpy(batch[k]).to(device) for k in forward_keys(model, batch)}


def _pad_id(tokenizer) -> int | None:
    return getattr(tokenizer, "pad_token_id", None)


@thread_policy
def extract_logits(
    model: nn.Module,
    tokenizer,
    inputs: Sequence,
    *,
    kind: str | None = None,
    max_length: int | None = None,
    batch_size: int = 64,
    device=None,
):
    """Logits of a classifier on texts, text pairs or word lists, in float64.

    Parameters
    ----------
    model : nn.Module
        A ``...ForSequenceClassification`` or ``...ForTokenClassification`` model.
    tokenizer : tokenizer
    inputs : sequence, length n
        Texts or ``(str, str)`` pairs; lists of words for token classifiers
        (:func:`lmsim.encoding.encode_inputs`).
    kind : str, optional
        The task kind; default the model's (:func:`lmsim.encoding.model_kind`).
    max_length : int, optional
        Truncation (special tokens included); None does not truncate.
    batch_size : int
        Inputs per forward pass, in the given order, right-padded and masked (one at a
        time when the tokenizer has no pad token).
    device : str or torch.device, optional
        Where the inputs go; default the model's device.

    Returns
    -------
    ndarray of shape (n, n_labels), float64, for sequence kinds; for ``"token"`` a list of n
    float64 arrays of shape (n_words_i, n_labels): each word's first sub-word's logits, NaN
    rows for words cut off by truncation.
    """
    kind = resolve_kind(model, kind)
    enc = encode_inputs(tokenizer, inputs, max_length, kind)
    pad_id = _pad_id(tokenizer)
    step = int(batch_size) if pad_id is not None else 1
    device = torch.device(device) if device is not None else _model_device(model)
    was_training = model.training
    model.eval()
    rows: list = []
    try:
        with torch.inference_mode():
            for start in range(0, len(inputs), step):
                idx = list(range(start, min(start + step, len(inputs))))
                batch = pad_batch(enc, idx, pad_id if pad_id is not None else 0)
                out = model(**model_inputs(model, batch, device)).logits.double().cpu().numpy()
                if kind != "token":
                    rows.append(out)
                    continue
                for b, i in enumerate(idx):
                    words = np.full((len(inputs[i]), out.shape[-1]), np.nan)
                    where = np.flatnonzero(batch["word_index"][b] >= 0)
                    words[batch["word_index"][b][where]] = out[b, where]
                    rows.append(words)
    finally:
        model.train(was_training)
    return rows if kind == "token" else np.concatenate(rows)
