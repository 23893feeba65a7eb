"""Preference scores (Eq. 3, 4): which tower is primary and each token's score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lmsim.twotower.config import IGNORE_INDEX
from lmsim.twotower.inputs import TowerData, labelled_batches
from lmsim.twotower.training import TrainedTwoTower


def primary_tower(mean_p: Sequence[float]) -> int:
    """Index of the primary tower (Eq. 3): the higher mean probability of the correct token;
    a tie keeps the first."""
    if len(mean_p) != 2:
        raise ValueError(f"`mean_p` must hold the two towers' means, got {list(mean_p)}")
    return 0 if mean_p[0] >= mean_p[1] else 1


@dataclass
class Preference:
    """Preference scores of one run, primary tower first.

    Attributes
    ----------
    scores : ndarray of shape (vocab,)
        ``s_a = log p̄_1a − log p̄_2a`` (Eq. 4); NaN for tokens never predicted.
    counts : ndarray of shape (vocab,)
        Occurrences of each token among the predicted positions.
    p_bar : ndarray of shape (2, vocab)
        Mean probability of the correct token per token (primary, secondary).
    mean_p : ndarray of shape (2,)
        Mean probability of the correct token over all positions (Eq. 3).
    accuracy : ndarray of shape (2,)
        Top-1 accuracy of each tower's head.
    joint_mean_p, joint_accuracy : float
        The same for the phase-1 model (both towers, Eq. 1).
    primary : int
        Which tower of the model (0 or 1) is primary.
    n_positions : int
    """

    scores: np.ndarray
    counts: np.ndarray
    p_bar: np.ndarray
    mean_p: np.ndarray
    accuracy: np.ndarray
    joint_mean_p: float
    joint_accuracy: float
    primary: int
    n_positions: int


@torch.no_grad()
def preference_scores(
    run: TrainedTwoTower,
    chunks: torch.Tensor,
    data: TowerData,
    batch_size: int = 32,
    mask_repeats: int = 1,
    seed: int = 0,
) -> Preference:
    """Per-token preference scores from one streaming pass over ``chunks``.

    Per predicted position the probability of the correct token under each tower's head is
    added, in float64, to its token's sum (and the token's count raised by one).

    Parameters
    ----------
    run : TrainedTwoTower
    chunks : LongTensor of shape (n_chunks, seq_len)
    data : TowerData
        Its tokenizer and special ids (as in training).
    batch_size : int
    mask_repeats : int
        BERT runs: passes with fresh masks (each predicts 15 % of the positions).
    seed : int
        Seed of the BERT masks.

    Returns
    -------
    Preference
    """
    model, heads = run.model, run.heads
    device = model.embedding.device
    vocab = model.embedding.shape[0]
    sums = torch.zeros(3, vocab, dtype=torch.float64, device=device)
    counts = torch.zeros(vocab, dtype=torch.float64, device=device)
    hits = torch.zeros(3, dtype=torch.float64, device=device)
    repeats = mask_repeats if model.config.tower == "bert" else 1
    gen = torch.Generator().manual_seed(seed)
    for _ in range(repeats):
        for inputs, labels in labelled_batches(model.config.tower, chunks, data, batch_size, gen):
            inputs, labels = inputs.to(device), labels.to(device)
            sel = labels != IGNORE_INDEX
            target = labels[sel]
            h1, h2 = (h[sel] for h in model.states(inputs))
            logits = [
                heads[0](h1, model.embedding),
                heads[1](h2, model.embedding),
                model.head(torch.cat([h1, h2], -1), model.embedding),
            ]
            for k, lg in enumerate(logits):
                # log p(target) = logit - logsumexp: no (positions x vocab) softmax in float64
                lg = lg.float()
                log_p = lg.gather(1, target[:, None])[:, 0] - torch.logsumexp(lg, dim=-1)
                sums[k].index_add_(0, target, log_p.double().exp())
                hits[k] += (lg.argmax(-1) == target).sum()
            counts.index_add_(0, target, torch.ones_like(target, dtype=torch.float64))
    n = counts.sum().item()
    if n == 0:
        raise ValueError("`chunks` hold no predicted position; pass more or longer chunks")
    totals = sums.sum(1) / n
    primary = primary_tower(totals[:2].tolist())
    order = [primary, 1 - primary]
    with np.errstate(divide="ignore", invalid="ignore"):
        p_bar = (sums[order] / counts).cpu().numpy()
        scores = np.log(p_bar[0]) - np.log(p_bar[1])
    return Preference(
        scores=scores,
        counts=counts.cpu().numpy(),
        p_bar=p_bar,
        mean_p=totals[order].cpu().numpy(),
        accuracy=(hits[order] / n).cpu().numpy(),
        joint_mean_p=totals[2].item(),
        joint_accuracy=(hits[2] / n).item(),
        primary=primary,
        n_positions=int(n),
    )
