"""The ensemble baseline: the mean of the models' logits.

References
----------
Jin et al. (2023), Sec. 4.1 ("Model ensembling").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from torch import nn

from lmsim.merge._models import _resolve


def ensemble_logits(
    models: Iterable,
    tokenizer,
    texts: Sequence,
    *,
    kind: str | None = None,
    batch_size: int = 16,
    max_length: int | None = None,
    device=None,
):
    """Ensemble baseline: the mean of the models' logits on ``texts``.

    Parameters
    ----------
    models : iterable of nn.Module or zero-arg callables returning one
        Classifiers with the same label set (one at a time in memory).
    tokenizer : tokenizer
        Shared by the models (copies of one base model).
    texts : list
        Texts or ``(str, str)`` pairs; lists of words for token classifiers.
    kind : str, optional
        Default: each model's (:func:`lmsim.encoding.model_kind`).
    batch_size, max_length, device
        Batching (padded on the right, masked), truncation, and where the inputs go
        (default: each model's device).

    Returns
    -------
    ndarray of shape (n_texts, n_labels), float64; for token classifiers a list of
    (n_words_i, n_labels) arrays, the mean per word (NaN rows for truncated words).

    References
    ----------
    Jin et al. (2023), Sec. 4.1 ("Model ensembling").
    """
    from lmsim.extract import extract_logits

    texts = list(texts)
    if not texts:
        raise ValueError("`texts` is empty: pass the texts to score")
    total, n = None, 0
    for i, item in enumerate(models):
        model = _resolve(item)
        if not isinstance(model, nn.Module):
            raise TypeError(f"`models[{i}]` must be an nn.Module, got {type(model).__name__}")
        logits = extract_logits(
            model,
            tokenizer,
            texts,
            kind=kind,
            max_length=max_length,
            batch_size=batch_size,
            device=device,
        )
        token = isinstance(logits, list)
        rows = logits if token else [logits]
        if total is not None:
            shapes = [r.shape for r in rows], [r.shape for r in total]
            if shapes[0] != shapes[1]:
                raise ValueError(
                    f"`models[{i}]` gives logits of shape {shapes[0][0]}, models[0] "
                    f"{shapes[1][0]}; ensemble only models with one label set"
                )
        total = rows if total is None else [a + b for a, b in zip(total, rows)]
        n += 1
    if total is None:
        raise ValueError("`models` is empty: pass at least one model")
    out = [t / n for t in total]
    return out if token else out[0]
