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


SCORE_MEANS = ("probability", "log")


@dataclass
class Occurrences:
    """Every scored position of a preference pass (``preference_scores(record=True)``).

    Attributes
    ----------
    token : ndarray of int64, shape (n_positions,)
        The correct token.
    chunk : ndarray of int64, shape (n_positions,)
        Index of its chunk among the scored chunks (the unit of clustered resampling; BERT's
        mask repeats keep their chunk's index).
    log_p : ndarray of float64, shape (3, n_positions)
        Log-probability of the correct token under the primary head, the secondary head and
        the joint (phase-1) head.
    vocab_size : int
    """

    token: np.ndarray
    chunk: np.ndarray
    log_p: np.ndarray
    vocab_size: int

    def __len__(self) -> int:
        return len(self.token)

    def subset(self, keep: np.ndarray) -> Occurrences:
        """The positions where ``keep`` (bool, shape (n_positions,)) holds."""
        return Occurrences(self.token[keep], self.chunk[keep], self.log_p[:, keep], self.vocab_size)

    def scores(
        self, mean: str = "probability", log_p: np.ndarray | None = None, orient: bool = False
    ) -> np.ndarray:
        """Preference scores of these positions (Eq. 4), NaN for tokens never scored.

        Parameters
        ----------
        mean : {"probability", "log"}
            ``log p̄_1a − log p̄_2a`` with ``p̄`` the mean probability (Eq. 4), or the mean
            log-probabilities' difference (the authors' code, ``perplexity_per_label``).
        log_p : ndarray of shape (2, n_positions), optional
            Replaces the two heads' log-probabilities (a null's draws).
        orient : bool
            Flip the sign when, under ``mean``, the second head leads over these positions
            (Eq. 3 under that mean: the pass ordered the heads by its own ``mean``).

        Returns
        -------
        ndarray of shape (vocab_size,)
        """
        log_p = self.log_p[:2] if log_p is None else log_p
        out = _scores(self.token, log_p, self.vocab_size, mean)
        if orient and self.lead(mean, log_p) < 0:
            out = -out
        return out

    def lead(self, mean: str = "probability", log_p: np.ndarray | None = None) -> float:
        """The first head's lead over all positions: the difference of the mean
        probabilities (Eq. 3) or of the mean log-probabilities (``mean="log"``)."""
        log_p = self.log_p[:2] if log_p is None else log_p
        values = np.exp(log_p) if mean == "probability" else log_p
        return float(values[0].mean() - values[1].mean())


def _scores(token: np.ndarray, log_p: np.ndarray, vocab: int, mean: str) -> np.ndarray:
    if mean not in SCORE_MEANS:
        raise ValueError(f"`mean` must be one of {SCORE_MEANS}, got {mean!r}")
    counts = np.bincount(token, minlength=vocab).astype(np.float64)
    values = np.exp(log_p) if mean == "probability" else log_p
    sums = [np.bincount(token, weights=v, minlength=vocab) for v in values]
    with np.errstate(divide="ignore", invalid="ignore"):
        bars = [sm / counts for sm in sums]
        if mean == "probability":
            return np.log(bars[0]) - np.log(bars[1])
        return bars[0] - bars[1]


@dataclass
class Preference:
    """Preference scores of one run, primary tower first.

    Attributes
    ----------
    scores : ndarray of shape (vocab,)
        ``s_a = log p̄_1a − log p̄_2a`` (Eq. 4), or with ``mean="log"`` the difference of the
        mean log-probabilities (the authors' code); NaN for tokens never predicted.
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
    log_p_bar : ndarray of shape (2, vocab)
        Mean log-probability of the correct token per token (primary, secondary).
    mean_log_p : ndarray of shape (2,)
        Mean log-probability over all positions (minus each head's cross-entropy).
    joint_mean_log_p : float
    mean : {"probability", "log"}
        Which mean ``scores`` and ``primary`` use.
    occurrences : Occurrences or None
        Every scored position (``record=True``).
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
    log_p_bar: np.ndarray | None = None
    mean_log_p: np.ndarray | None = None
    joint_mean_log_p: float = float("nan")
    mean: str = "probability"
    occurrences: Occurrences | None = None


@torch.no_grad()
def preference_scores(
    run: TrainedTwoTower,
    chunks: torch.Tensor,
    data: TowerData,
    batch_size: int = 32,
    mask_repeats: int = 1,
    seed: int = 0,
    mean: str = "probability",
    record: bool = False,
) -> Preference:
    """Per-token preference scores from one streaming pass over ``chunks``.

    Per predicted position the probability and the log-probability of the correct token
    under each tower's head are added, in float64, to its token's sums (and the token's
    count raised by one).

    Parameters
    ----------
    run : TrainedTwoTower
    chunks : LongTensor of shape (n_chunks, seq_len)
        The text scored: the paper's Eq. 4 reads its corpus; the authors' code scores the
        validation split (``data.valid``).
    data : TowerData
        Its tokenizer and special ids (as in training).
    batch_size : int
    mask_repeats : int
        BERT runs: passes with fresh masks (each predicts 15 % of the positions).
    seed : int
        Seed of the BERT masks.
    mean : {"probability", "log"}
        ``"probability"``: Eq. 3-4 (mean probabilities; the primary has the higher mean
        probability). ``"log"``: the authors' ``eval_mem`` (``perplexity_per_label``): each
        token's mean log-softmax per head, and the primary has the higher mean
        log-probability (the lower validation loss).
    record : bool
        Keep every position's token, chunk and log-probabilities
        (:attr:`Preference.occurrences`: 32 bytes a position) for split halves, nulls and
        intervals.

    Returns
    -------
    Preference
    """
    if mean not in SCORE_MEANS:
        raise ValueError(f"`mean` must be one of {SCORE_MEANS}, got {mean!r}")
    model, heads = run.model, run.heads
    device = model.embedding.device
    vocab = model.embedding.shape[0]
    sums = torch.zeros(2, 3, vocab, dtype=torch.float64, device=device)  # p, log p
    counts = torch.zeros(vocab, dtype=torch.float64, device=device)
    hits = torch.zeros(3, dtype=torch.float64, device=device)
    repeats = mask_repeats if model.config.tower == "bert" else 1
    gen = torch.Generator().manual_seed(seed)
    kept: list[tuple] = []
    for _ in range(repeats):
        start = 0
        for inputs, labels in labelled_batches(model.config.tower, chunks, data, batch_size, gen):
            inputs, labels = inputs.to(device), labels.to(device)
            sel = labels != IGNORE_INDEX
            target = labels[sel]
            h1, h2 = (h[sel] for h in model.states(inputs))
            logits = [
                *model.head_logits(heads, h1, h2),
                model.head(torch.cat([h1, h2], -1), model.embedding),
            ]
            log_ps = []
            for k, lg in enumerate(logits):
                # log p(target) = logit - logsumexp: no (positions x vocab) softmax in float64
                lg = lg.float()
                log_p = (lg.gather(1, target[:, None])[:, 0] - torch.logsumexp(lg, dim=-1)).double()
                sums[0, k].index_add_(0, target, log_p.exp())
                sums[1, k].index_add_(0, target, log_p)
                hits[k] += (lg.argmax(-1) == target).sum()
                log_ps.append(log_p)
            counts.index_add_(0, target, torch.ones_like(target, dtype=torch.float64))
            if record:
                chunk = start + sel.nonzero()[:, 0]
                kept.append((target.cpu(), chunk.cpu(), torch.stack(log_ps).cpu()))
            start += len(inputs)
    n = counts.sum().item()
    if n == 0:
        raise ValueError("`chunks` hold no predicted position; pass more or longer chunks")
    totals = sums.sum(2) / n  # (2, 3): mean p and mean log p per head
    primary = primary_tower(totals[0 if mean == "probability" else 1, :2].tolist())
    order = [primary, 1 - primary]
    with np.errstate(divide="ignore", invalid="ignore"):
        p_bar = (sums[0][order] / counts).cpu().numpy()
        log_p_bar = (sums[1][order] / counts).cpu().numpy()
        if mean == "probability":
            scores = np.log(p_bar[0]) - np.log(p_bar[1])
        else:
            scores = log_p_bar[0] - log_p_bar[1]
    occurrences = None
    if record:
        token, chunk, log_p = (torch.cat(parts, dim=-1).numpy() for parts in zip(*kept))
        occurrences = Occurrences(token, chunk, log_p[[primary, 1 - primary, 2]], vocab)
    return Preference(
        scores=scores,
        counts=counts.cpu().numpy(),
        p_bar=p_bar,
        mean_p=totals[0, order].cpu().numpy(),
        accuracy=(hits[order] / n).cpu().numpy(),
        joint_mean_p=totals[0, 2].item(),
        joint_accuracy=(hits[2] / n).item(),
        primary=primary,
        n_positions=int(n),
        log_p_bar=log_p_bar,
        mean_log_p=totals[1, order].cpu().numpy(),
        joint_mean_log_p=totals[1, 2].item(),
        mean=mean,
        occurrences=occurrences,
    )
