"""The zoo's objectives as pure functions: BERT masking and the losses of MLM, causal LM,
ELECTRA and DistilBERT, plus the replaced-token-detection summary."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


def mask_tokens(
    input_ids: torch.Tensor,
    special_ids: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    generator: torch.Generator,
    mask_prob: float = 0.15,
    replace_mask: float = 0.8,
    replace_random: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: select ``mask_prob`` of the tokens; 80 % [MASK], 10 % random, 10 % kept.

    Parameters
    ----------
    input_ids : LongTensor of shape (batch, seq_len)
    special_ids : LongTensor of shape (n_special,)
        Ids never selected ([PAD], [CLS], [SEP], [MASK]).
    mask_id : int
    vocab_size : int
        Random replacements are drawn uniformly from the non-special ids below it.
    generator : torch.Generator
        CPU generator; the same generator state gives the same masking.
    mask_prob, replace_mask, replace_random : float

    Returns
    -------
    inputs : LongTensor of shape (batch, seq_len)
        The corrupted input.
    labels : LongTensor of shape (batch, seq_len)
        The original id at selected positions, ``-100`` elsewhere.

    References
    ----------
    Devlin et al. (2019), BERT, Sec. 3.1 "Task #1: Masked LM".
    """
    if not 0 < mask_prob <= 1 or replace_mask + replace_random > 1:
        raise ValueError(
            f"need 0 < mask_prob <= 1 and replace_mask + replace_random <= 1, got "
            f"{mask_prob}, {replace_mask}, {replace_random}"
        )
    ids = input_ids.cpu()
    eligible = ~torch.isin(ids, special_ids.cpu())
    if not eligible.any():
        raise ValueError("`input_ids` holds only special tokens: nothing to mask")
    selected = (torch.rand(ids.shape, generator=generator) < mask_prob) & eligible
    if not selected.any():  # a tiny batch may draw no position; keep the loss defined
        selected.view(-1)[eligible.view(-1).nonzero()[0]] = True
    labels = torch.where(selected, ids, torch.full_like(ids, IGNORE_INDEX))
    action = torch.rand(ids.shape, generator=generator)
    to_mask = selected & (action < replace_mask)
    to_random = selected & (action >= replace_mask) & (action < replace_mask + replace_random)
    allowed = torch.arange(vocab_size)
    allowed = allowed[~torch.isin(allowed, special_ids.cpu())]
    random_ids = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
    inputs = torch.where(to_mask, torch.full_like(ids, mask_id), ids)
    inputs = torch.where(to_random, random_ids, inputs)
    return inputs.to(input_ids.device), labels.to(input_ids.device)


def unigram_log_probs(counts: torch.Tensor, exclude_ids: Sequence[int] = ()) -> torch.Tensor:
    """Add-one smoothed unigram log-probabilities from training counts.

    Parameters
    ----------
    counts : Tensor of shape (vocab,)
    exclude_ids : sequence of int
        Ids that get probability 0 (log -inf); the rest is renormalised.

    Returns
    -------
    Tensor of shape (vocab,), float64
    """
    smoothed = counts.double() + 1.0
    smoothed[list(exclude_ids)] = 0.0
    return (smoothed / smoothed.sum()).log()


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over positions whose label is not ``-100``.

    Parameters
    ----------
    logits : Tensor of shape (..., vocab)
    labels : LongTensor of shape (...)
    """
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE_INDEX
    )


def soft_target_cross_entropy(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 2.0
) -> torch.Tensor:
    """DistilBERT's ``L_ce``: ``-T^2 mean_i sum_v p_t(v|i; T) log p_s(v|i; T)``.

    ``p(.; T) = softmax(logits / T)``. The ``T^2`` factor keeps the gradient scale of the
    soft targets independent of ``T`` (Hinton et al., 2015).

    Parameters
    ----------
    student_logits, teacher_logits : Tensor of shape (n_positions, vocab)
    temperature : float

    Returns
    -------
    Tensor, scalar

    Notes
    -----
    DistilBERT's code uses ``KLDivLoss(reduction="batchmean")``, which differs from this
    cross-entropy by the teacher's entropy, a constant with the same gradient.

    References
    ----------
    Sanh et al. (2019), DistilBERT, Sec. 3; Hinton et al. (2015), Sec. 2.
    """
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"student and teacher logits must have the same shape, got "
            f"{tuple(student_logits.shape)} and {tuple(teacher_logits.shape)}"
        )
    if temperature <= 0:
        raise ValueError(f"`temperature` must be > 0, got {temperature}")
    log_p_student = F.log_softmax(student_logits.float() / temperature, dim=-1)
    p_teacher = F.softmax(teacher_logits.float() / temperature, dim=-1)
    return -(p_teacher * log_p_student).sum(-1).mean() * temperature**2


def cosine_embedding_loss(
    student_hidden: torch.Tensor, teacher_hidden: torch.Tensor
) -> torch.Tensor:
    """DistilBERT's ``L_cos``: ``mean_i (1 - cos(h_s,i, h_t,i))``.

    Parameters
    ----------
    student_hidden, teacher_hidden : Tensor of shape (n_positions, hidden)
        Last hidden states at real (non-padding) tokens.
    """
    return (
        1.0 - F.cosine_similarity(student_hidden.float(), teacher_hidden.float(), dim=-1)
    ).mean()


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    labels: torch.Tensor,
    student_hidden: torch.Tensor,
    teacher_hidden: torch.Tensor,
    temperature: float = 2.0,
    alpha_ce: float = 5.0,
    alpha_mlm: float = 2.0,
    alpha_cos: float = 1.0,
) -> dict[str, torch.Tensor]:
    """DistilBERT's loss ``alpha_ce L_ce + alpha_mlm L_mlm + alpha_cos L_cos``.

    Parameters
    ----------
    student_logits, teacher_logits : Tensor of shape (n_positions, vocab)
        At the positions where the soft-target loss is taken.
    labels : LongTensor of shape (n_positions,)
        MLM labels at those positions (``-100`` where not masked).
    student_hidden, teacher_hidden : Tensor of shape (n_tokens, hidden)
        Last hidden states at real tokens.
    temperature, alpha_ce, alpha_mlm, alpha_cos : float
        DistilBERT's training-script defaults.

    Returns
    -------
    dict
        ``loss`` and its terms ``ce``, ``mlm``, ``cos`` (unweighted).
    """
    ce = soft_target_cross_entropy(student_logits, teacher_logits, temperature)
    mlm = masked_lm_loss(student_logits, labels)
    cos = cosine_embedding_loss(student_hidden, teacher_hidden)
    return {
        "loss": alpha_ce * ce + alpha_mlm * mlm + alpha_cos * cos,
        "ce": ce,
        "mlm": mlm,
        "cos": cos,
    }


def rtd_loss(
    disc_logits: torch.Tensor, is_replaced: torch.Tensor, real: torch.Tensor
) -> torch.Tensor:
    """ELECTRA's discriminator loss: mean binary cross-entropy over real tokens.

    Parameters
    ----------
    disc_logits : Tensor of shape (batch, seq_len)
    is_replaced : BoolTensor of shape (batch, seq_len)
    real : BoolTensor of shape (batch, seq_len)
        Tokens that count (not padding).
    """
    return F.binary_cross_entropy_with_logits(disc_logits[real].float(), is_replaced[real].float())


def rtd_summary(disc_logits: torch.Tensor, is_replaced: torch.Tensor) -> dict:
    """How well a discriminator detects replaced tokens, beside the constant baseline.

    Accuracy alone misleads here: with ~15 % replaced tokens, a detector whose posterior
    never crosses 1/2 scores exactly the base rate however much it knows. The loss
    against the best constant predictor (the binary entropy of the replaced fraction) and
    the ROC AUC (0.5 = no information) show what it learned.

    Parameters
    ----------
    disc_logits : Tensor of shape (n_tokens,)
    is_replaced : BoolTensor of shape (n_tokens,)

    Returns
    -------
    dict
        ``rtd_accuracy``, ``rtd_baseline`` (accuracy of always "original"), ``rtd_loss``
        (mean binary cross-entropy, nats), ``rtd_baseline_loss`` (entropy of the replaced
        fraction, nats) and ``rtd_auc``.
    """
    from sklearn.metrics import roc_auc_score

    logits, labels = disc_logits.double().cpu(), is_replaced.cpu()
    frac = labels.double().mean().item()
    entropy = (
        0.0 if frac in (0.0, 1.0) else -(frac * math.log(frac) + (1 - frac) * math.log1p(-frac))
    )
    both = 0 < labels.sum() < len(labels)
    return {
        "rtd_accuracy": ((logits > 0) == labels).double().mean().item(),
        "rtd_baseline": 1.0 - frac,
        "rtd_loss": F.binary_cross_entropy_with_logits(logits, labels.double()).item(),
        "rtd_baseline_loss": entropy,
        "rtd_auc": float(roc_auc_score(labels.numpy(), logits.numpy())) if both else math.nan,
    }
