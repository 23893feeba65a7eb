"""Fisher collection: the diagonal Fisher information of a classifier, for every task kind.

References
----------
Jin et al. (2023), Sec. 2; Matena & Raffel (2022), Sec. 2.2.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from lmsim._threads import thread_policy

FISHER_LABELS = ("sample", "empirical", "expected", "hard", "hard_empirical")
# The released code's Fishers: squared gradients of batch-mean losses, not per-example squares.
_BATCH_MODES = ("hard", "hard_empirical")


@thread_policy
def collect_fishers(
    model: nn.Module,
    tokenizer,
    texts: Sequence,
    labels: Sequence | None = None,
    *,
    mode: str = "sample",
    kind: str | None = None,
    max_length: int | None = None,
    device=None,
    seed: int = 0,
    batch_size: int = 16,
    progress: bool = True,
) -> dict[str, torch.Tensor]:
    """Diagonal Fisher information of a sequence or token classifier, for every task kind.

    ``F = E_x E_y (∇_θ log p_θ(y|x))²``, averaged over ``texts``, one example per backward
    pass (the square of a batch gradient would not be the Fisher). The likelihood
    ``p_θ(y|x)`` of each kind:

    * ``"single_label"``: categorical, ``softmax(f)``;
    * ``"multi_label"``: independent Bernoullis, ``σ(f_l)`` per label;
    * ``"regression"``: ``y ~ N(f, 1)``, so ``∇ log p = (y − f) ∇f``;
    * ``"token"``: categorical per word (its first sub-word's logits), independent across
      the words, the example's log-likelihood summed over its words (words cut off by
      truncation are left out).

    Embedding tables get sparse gradients during the pass (only the rows of the example's
    tokens are non-zero), so a 30k-row vocabulary costs its used rows, not a dense table per
    example; the squares are accumulated in place in float64.

    Parameters
    ----------
    model : nn.Module
        A ``...ForSequenceClassification`` (logits (1, n_labels)) or
        ``...ForTokenClassification`` model.
    tokenizer : tokenizer
    texts : list, length n
        Texts or ``(str, str)`` pairs; lists of words for ``"token"``.
    labels : list, optional
        True labels in :func:`lmsim.finetune.finetune`'s form for ``kind``, required for
        ``mode="empirical"``.
    mode : {"sample", "empirical", "expected"}, default="sample"
        ``"sample"``: one label drawn from the model's predictive distribution per example
        (per label for multi-label, per word for token; ``f + ε`` for regression): the
        Fisher of the paper's Sec. 2. ``"empirical"``: the true labels (the empirical
        Fisher). ``"expected"``: the exact expectation, one backward pass per term: per
        class weighted by its probability (single-label; per word and class for token);
        per label ``σ(1 − σ) (∇f_l)²`` (multi-label: the cross terms vanish); ``(∇f)²``
        (regression).
        Paper-compatible, the released code's ``local_trainer.compute_fisher``: the mean
        over batches of ``batch_size`` (each padded to its longest text) of the *squared
        gradient of the batch's mean loss*, which is not the Fisher of the paper's formula
        (cross-example terms enter the square). ``"hard"`` (its ``fisher_variant: "hard"``):
        the loss is the negative log-likelihood of the argmax label under a softmax over the
        logits, also for multi-label heads (as there: it never uses their Bernoulli
        likelihood); per word for token classifiers (where the released function does not
        run: its ``nll_loss`` call takes (batch, n_labels) logits); regression uses the mean
        squared error with the true ``labels`` (as there: "can only compute empirical
        fisher"). ``"hard_empirical"`` (its ``emp_fisher: true``, set by every released NER
        Fisher config): the training loss with the true ``labels`` (cross-entropy; mean
        binary cross-entropy over labels for multi-label; per word for token; squared
        error for regression).
    kind : str, optional
        Default: the model's (:func:`lmsim.encoding.model_kind`).
    max_length : int, optional
        Truncation length.
    device : str or torch.device, optional
        Where the inputs go; default: the device of the model's parameters.
    seed : int, default=0
        Seed of the label sampling.
    batch_size : int, default=16
        Batch of the ``"hard"`` modes (the released configs' ``per_device_train_batch_size``,
        16); the other modes take one example per backward pass.
    progress : bool

    Returns
    -------
    fishers : dict of str to Tensor, float32 on the CPU
        Parameter name (``model.named_parameters()``) to a tensor of its shape.

    References
    ----------
    Jin et al. (2023), Sec. 2; Matena & Raffel (2022), Sec. 2.2. The released code:
    ``bloomberg/dataless-model-merging``, ``src/model_merge/local_trainer.py``,
    ``compute_fisher`` and ``collect_squared_gradients``; ``src/configs/defaults.yaml``
    (``fisher_variant: "hard"``).
    """
    from tqdm.auto import tqdm

    from lmsim.encoding import encode_inputs, pad_batch, resolve_kind
    from lmsim.extract import model_inputs

    if mode not in FISHER_LABELS:
        raise ValueError(f"`mode` must be one of {list(FISHER_LABELS)}, got {mode!r}")
    texts = list(texts)
    if not texts:
        raise ValueError("`texts` is empty: pass the model's training texts")
    kind = resolve_kind(model, kind)
    needs_labels = mode in ("empirical", "hard_empirical") or (
        mode == "hard" and kind == "regression"
    )
    if needs_labels and (labels is None or len(labels) != len(texts)):
        raise ValueError(
            f"mode={mode!r} needs `labels`, one per text (for kind {kind!r}); or use mode='sample'"
        )
    if mode in _BATCH_MODES and not (isinstance(batch_size, int) and batch_size >= 1):
        raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}")
    enc = encode_inputs(tokenizer, texts, max_length, kind)
    device = torch.device(device) if device is not None else _model_device(model)
    was_training = model.training
    model.eval()
    # Sparse embedding gradients for the pass (restored in `finally`); exact: coalescing
    # sums a repeated token's contributions before they are squared.
    embeddings = [m for m in model.modules() if isinstance(m, nn.Embedding) and not m.sparse]
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in model.named_parameters() if p.requires_grad]
    totals = [torch.zeros(p.shape, dtype=torch.float64, device=p.device) for p in params]
    gen = torch.Generator().manual_seed(int(seed))
    pad_id = getattr(tokenizer, "pad_token_id", None)
    pad_id = 0 if pad_id is None else int(pad_id)
    # One term per example (the Fisher), or per batch (the released code's squared batch
    # gradients): (rows, padding id) of each forward pass.
    if mode in _BATCH_MODES:
        passes = [
            (list(range(s, min(s + batch_size, len(texts)))), pad_id)
            for s in range(0, len(texts), batch_size)
        ]
    else:
        passes = [([i], 0) for i in range(len(texts))]
    try:
        for module in embeddings:
            module.sparse = True
        for rows, pad in tqdm(passes, disable=not progress, desc="fisher"):
            batch = pad_batch(enc, rows, pad)  # padded to the longest text of the pass
            logits = model(**model_inputs(model, batch, device)).logits
            if mode in _BATCH_MODES:
                ys = [labels[i] for i in rows] if labels is not None else None
                terms = [(_batch_loss(kind, logits, batch, mode, ys), 1.0)]
            else:
                label = labels[rows[0]] if mode == "empirical" else None
                terms = _fisher_terms(kind, logits, batch, mode, label, gen)
            for j, (value, weight) in enumerate(terms):
                grads = torch.autograd.grad(
                    value, params, retain_graph=j < len(terms) - 1, allow_unused=True
                )
                for total, g in zip(totals, grads):
                    _add_squared(total, g, weight)
    finally:
        for module in embeddings:
            module.sparse = False
        model.train(was_training)
    n_terms = len(passes)
    return {n: (t / n_terms).float().cpu() for n, t in zip(names, totals)}


def _batch_loss(kind: str, logits, batch, mode: str, labels) -> torch.Tensor:
    """The released code's batch-mean loss of one batch (see ``collect_fishers``' modes).

    ``logits`` is (B, n_labels), or (B, T, n_labels) for token classifiers;
    ``labels`` the batch's true labels (None for ``"hard"`` on classification).
    """
    hard = mode == "hard"
    if kind == "token":
        word = torch.from_numpy(batch["word_index"])
        rows, cols = torch.nonzero(word >= 0, as_tuple=True)
        if not len(rows):
            return logits.sum() * 0.0  # every word truncated away: a zero gradient
        log_probs = torch.log_softmax(logits[rows, cols].float(), dim=-1)
        if hard:
            ys = log_probs.argmax(-1)
        else:
            ys = torch.as_tensor(
                [int(labels[int(r)][int(word[r, c])]) for r, c in zip(rows, cols)],
                device=log_probs.device,
            )
        return nn.functional.nll_loss(log_probs, ys.to(log_probs.device))
    f = logits.float()
    if kind == "regression":  # the released code: the (empirical) squared error, either mode
        y = torch.as_tensor([float(v) for v in labels], device=f.device)
        return nn.functional.mse_loss(f[:, 0], y)
    if kind == "multi_label" and not hard:
        y = torch.as_tensor(labels, dtype=torch.float32, device=f.device)
        return nn.functional.binary_cross_entropy_with_logits(f, y)
    log_probs = torch.log_softmax(f, dim=-1)  # single-label; multi-label under "hard" too
    if hard:
        ys = log_probs.argmax(-1)
    else:
        ys = torch.as_tensor([int(v) for v in labels], device=f.device)
    return nn.functional.nll_loss(log_probs, ys)


def _fisher_terms(kind: str, logits, batch, mode: str, label, gen) -> list[tuple]:
    """``[(scalar, weight)]`` whose weighted squared gradients sum to one example's Fisher.

    ``logits`` is the model output for one example: (1, n_labels), or (1, T, n_labels)
    for token classifiers (``batch["word_index"]`` then picks each word's first sub-word).
    """
    if kind == "token":
        if logits.ndim != 3 or logits.shape[0] != 1:
            raise ValueError(
                f"collect_fishers with kind='token' needs a token classifier (logits of shape "
                f"(1, n_tokens, n_labels)), got logits of shape {tuple(logits.shape)}"
            )
        word = torch.from_numpy(batch["word_index"][0])
        pos = torch.nonzero(word >= 0).flatten()
        log_probs = torch.log_softmax(logits[0, pos.to(logits.device)].float(), dim=-1)
        if mode == "expected":
            probs = log_probs.exp().detach()
            return [
                (log_probs[k, y], float(probs[k, y]))
                for k in range(log_probs.shape[0])
                for y in range(log_probs.shape[1])
            ]
        if mode == "sample":
            ys = torch.multinomial(log_probs.exp().detach().cpu(), 1, generator=gen).flatten()
        else:
            ys = torch.as_tensor([int(label[int(w)]) for w in word[pos]], dtype=torch.long)
        if not len(ys):  # every word truncated away: no term
            return []
        return [(log_probs[torch.arange(len(ys)), ys.to(log_probs.device)].sum(), 1.0)]
    if logits.ndim != 2 or logits.shape[0] != 1:
        raise ValueError(
            f"collect_fishers needs a sequence-classification model (logits of shape "
            f"(1, n_labels)), got logits of shape {tuple(logits.shape)}"
        )
    f = logits[0].float()
    if kind == "single_label":
        log_probs = torch.log_softmax(f, dim=-1)
        if mode == "expected":
            probs = log_probs.exp().detach()
            return [(log_probs[y], float(probs[y])) for y in range(log_probs.shape[0])]
        if mode == "sample":
            y = int(torch.multinomial(log_probs.exp().detach().cpu(), 1, generator=gen))
        else:
            y = int(label)
        return [(log_probs[y], 1.0)]
    if kind == "multi_label":
        probs = torch.sigmoid(f).detach()
        if mode == "expected":
            return [(f[k], float(probs[k] * (1 - probs[k]))) for k in range(f.shape[0])]
        if mode == "sample":
            y = torch.bernoulli(probs.cpu(), generator=gen)
        else:
            y = torch.as_tensor(label, dtype=torch.float32)
        y = y.to(f.device)
        log_lik = y * nn.functional.logsigmoid(f) + (1 - y) * nn.functional.logsigmoid(-f)
        return [(log_lik.sum(), 1.0)]
    # regression: y ~ N(f, 1), ∇ log p = (y − f) ∇f
    f = f[0]
    if mode == "expected":
        return [(f, 1.0)]
    if mode == "sample":
        y = f.detach() + torch.randn((), generator=gen).to(f.device)
    else:
        y = torch.tensor(float(label), device=f.device)
    return [(-0.5 * (y - f) ** 2, 1.0)]


def _add_squared(total: torch.Tensor, g: torch.Tensor | None, weight: float) -> None:
    """``total += weight * g²`` in place (float64 ``total``), for a dense or sparse ``g``."""
    if g is None:
        return
    if g.is_sparse:
        g = g.coalesce()
        rows, values = g.indices()[0], g.values().double()
        total.index_add_(0, rows, values * values, alpha=weight)
    else:
        total.addcmul_(g, g, value=weight)


def _model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device
