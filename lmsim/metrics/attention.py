"""Attention-level similarity: head-to-head (attnsim) and distributed (CKA/SVCCA/PWCCA).

Inputs are lists over sentences of one layer's attention, each of shape
``(n_heads, n_words, n_words)`` with rows (queries) that are probability distributions
over keys. Both lists must cover the same sentences with the same number of words (word
level, padding removed). Causal models put zeros above the diagonal.

References
----------
Wu et al. (2020), Sec. 3.4 and App. A.4. Clark et al. (2019), "What Does BERT Look At?"
(Jensen–Shannon distance between heads).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import torch

from lmsim.metrics._linalg import as_float64
from lmsim.metrics.cca import pwcca, pwcca_both, svcca
from lmsim.metrics.cka import linear_cka

__all__ = [
    "attention_head_similarity",
    "attnsim",
    "distattn_sim",
    "distributed_attention_features",
    "paper_attention_features",
]

KINDS = ("frobenius", "pearson", "jensen_shannon")
# Attention rows from fp16/bf16 models sum to 1 only to about 1e-3.
ROW_SUM_ATOL = 1e-3


def _check_attention(A_list, name: str) -> list[torch.Tensor]:
    if isinstance(A_list, np.ndarray | torch.Tensor) or not isinstance(A_list, Sequence):
        raise TypeError(
            f"`{name}` must be a list over sentences of arrays (n_heads, n_words, n_words), "
            f"got {type(A_list).__name__}"
        )
    if len(A_list) == 0:
        raise ValueError(f"`{name}` is empty: pass at least one sentence")
    out = []
    n_heads = None
    for s, a in enumerate(A_list):
        a = as_float64(a, f"{name}[{s}]")
        if a.ndim != 3 or a.shape[1] != a.shape[2] or a.shape[1] == 0:
            raise ValueError(
                f"`{name}[{s}]` must have shape (n_heads, n_words, n_words), got {tuple(a.shape)}"
            )
        if n_heads is None:
            n_heads = a.shape[0]
        elif a.shape[0] != n_heads:
            raise ValueError(
                f"`{name}` mixes head counts: sentence 0 has {n_heads}, sentence {s} has "
                f"{a.shape[0]}; pass one layer's attention"
            )
        if not torch.isfinite(a).all():
            raise ValueError(f"`{name}[{s}]` contains NaN or Inf attention weights")
        if bool((a < 0).any()):
            raise ValueError(f"`{name}[{s}]` has negative weights: pass softmax outputs")
        row_err = float((a.sum(dim=-1) - 1).abs().max())
        if row_err > ROW_SUM_ATOL:
            raise ValueError(
                f"`{name}[{s}]` rows are not probability distributions (a row sums to 1 ± "
                f"{row_err:.2g}); pass post-softmax weights, aggregated to words, with "
                "padding removed"
            )
        out.append(a)
    return out


def _check_two(A_list, B_list) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    a_list = _check_attention(A_list, "A_list")
    b_list = _check_attention(B_list, "B_list")
    if len(a_list) != len(b_list):
        raise ValueError(
            f"`A_list` and `B_list` must cover the same sentences, got {len(a_list)} and "
            f"{len(b_list)} sentences"
        )
    for s, (a, b) in enumerate(zip(a_list, b_list)):
        if a.shape[1] != b.shape[1]:
            raise ValueError(
                f"sentence {s} has {a.shape[1]} words in `A_list` but {b.shape[1]} in "
                "`B_list`; align both models' attention to the same words first"
            )
    device = a_list[0].device
    return a_list, [b.to(device) for b in b_list]


def _frobenius_sum(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, int]:
    dist = torch.cdist(a.flatten(1), b.flatten(1))
    return dist, 1


def _pearson_sum(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    ac = a - a.mean(dim=-1, keepdim=True)
    bc = b - b.mean(dim=-1, keepdim=True)
    norm_a = torch.linalg.vector_norm(ac, dim=-1)
    norm_b = torch.linalg.vector_norm(bc, dim=-1)
    # A row is constant (uniform attention, one-word sentence): its correlation is undefined.
    valid_a = norm_a > 1e-12
    valid_b = norm_b > 1e-12
    inner = torch.einsum("hqk,gqk->hgq", ac, bc)
    denom = norm_a[:, None, :] * norm_b[None, :, :]
    valid = valid_a[:, None, :] & valid_b[None, :, :]
    corr = torch.where(valid, inner / torch.where(valid, denom, 1.0), 0.0)
    return corr.sum(dim=-1), valid.sum(dim=-1)


def _js_sum(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, int]:
    # All head pairs at once, (H, H', q, k): one sentence's rows are short, so the
    # broadcast is small and avoids a Python loop over heads.
    p, q = a[:, None], b[None]
    m = 0.5 * (p + q)
    kl_pm = (torch.xlogy(p, p) - torch.xlogy(p, m)).sum(dim=-1)
    kl_qm = (torch.xlogy(q, q) - torch.xlogy(q, m)).sum(dim=-1)
    return (0.5 * (kl_pm + kl_qm)).sum(dim=-1), a.shape[1]


def attention_head_similarity(A_list_l, B_list_lp, kind: str = "frobenius") -> np.ndarray:
    """Similarity of every head of layer l to every head of layer l'.

    Parameters
    ----------
    A_list_l : list of ndarray or Tensor of shape (n_heads_l, n_words_s, n_words_s)
        Layer l's attention, one entry per sentence ``s``.
    B_list_lp : list of ndarray or Tensor of shape (n_heads_lp, n_words_s, n_words_s)
        Layer l''s attention on the same sentences.
    kind : {"frobenius", "pearson", "jensen_shannon"}
        ``"frobenius"``: ``1 − mean_s ‖A_h(s) − B_h'(s)‖_F`` (mean over sentences).
        ``"pearson"``: mean over all query words of the corpus of the Pearson correlation
        of the two attention rows (rows that are constant in either head, e.g. of
        one-word sentences, are skipped with a warning).
        ``"jensen_shannon"``: ``1 − mean`` over all query words of the Jensen–Shannon
        divergence of the two rows (natural log, so in ``[0, ln 2]``).

    Returns
    -------
    ndarray of shape (n_heads_l, n_heads_lp)

    References
    ----------
    Wu et al. (2020), App. A.4.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown `kind` {kind!r}; choose one of {list(KINDS)}")
    a_list, b_list = _check_two(A_list_l, B_list_lp)
    fn = {"frobenius": _frobenius_sum, "pearson": _pearson_sum, "jensen_shannon": _js_sum}[kind]
    total, count = 0.0, 0
    for a, b in zip(a_list, b_list):
        value, n = fn(a, b)
        total = total + value
        count = count + n
    if kind == "pearson":
        n_rows = sum(a.shape[1] for a in a_list)
        if bool((count == 0).any()):
            raise ValueError(
                "`pearson` attention similarity is undefined: some head pair has only constant "
                "attention rows (uniform attention or one-word sentences); use "
                "kind='jensen_shannon' or pass longer sentences"
            )
        n_skipped = int(n_rows * count.numel() - count.sum())
        if n_skipped:
            warnings.warn(
                f"`pearson`: skipped {n_skipped} (head pair, query) rows whose attention is "
                "constant (correlation undefined)",
                RuntimeWarning,
                stacklevel=2,
            )
        return (total / count).cpu().numpy()
    return (1.0 - total / count).cpu().numpy()


def attnsim(A_list, B_list, kind: str = "frobenius") -> float:
    """attnsim(l → l'): mean over heads h of layer l of the max over heads h' of layer l'.

    Parameters
    ----------
    A_list : list of ndarray or Tensor of shape (n_heads_l, n_words_s, n_words_s)
    B_list : list of ndarray or Tensor of shape (n_heads_lp, n_words_s, n_words_s)
    kind : {"frobenius", "pearson", "jensen_shannon"}
        Head similarity, see :func:`attention_head_similarity`.

    Returns
    -------
    float
        Directional; 1 when compared with itself (for ``pearson``, when every row varies).

    References
    ----------
    Wu et al. (2020), App. A.4.
    """
    sim = attention_head_similarity(A_list, B_list, kind=kind)
    return float(sim.max(axis=1).mean())


def _pair_mask(n_words: int, causal: bool, device) -> torch.Tensor:
    full = torch.ones(n_words, n_words, dtype=torch.bool, device=device)
    return torch.tril(full) if causal else full


def _features(a_list: list[torch.Tensor], causal: bool) -> torch.Tensor:
    rows = [a[:, _pair_mask(a.shape[1], causal, a.device)].T for a in a_list]
    return torch.cat(rows, dim=0)


def distributed_attention_features(A_list, causal: bool = False):
    """Attention as a representation: one sample per (query, key) pair, one feature per head.

    Parameters
    ----------
    A_list : list of ndarray or Tensor of shape (n_heads, n_words_s, n_words_s)
    causal : bool, default=False
        Keep only pairs with ``key ≤ query`` (a causal model attends only to the past; the
        other entries are structural zeros, not measurements).

    Returns
    -------
    ndarray or Tensor of shape (n_pairs, n_heads)
        ``n_pairs = Σ_s n_words_s²`` (or ``Σ_s n_words_s (n_words_s + 1) / 2`` when
        causal), sentences in order, queries row-major. A Tensor (float64, on the input's
        device) when the input holds tensors, else a numpy array.

    References
    ----------
    Wu et al. (2020), Sec. 3.4 (distributed attention similarity).
    """
    feats = _features(_check_attention(A_list, "A_list"), causal)
    return feats if isinstance(A_list[0], torch.Tensor) else feats.cpu().numpy()


def _ar_masked(a: torch.Tensor) -> torch.Tensor:
    # The authors' `load_attentions(..., ar_mask=True)`: keep key ≤ query and renormalise
    # each row (np.tril, then divide by the row sum), for every model alike.
    low = torch.tril(a)
    sums = low.sum(dim=-1, keepdim=True)
    if bool((sums <= 0).any()):
        raise ValueError(
            "`ar_mask=True`: a query row has no weight on keys ≤ query, so it cannot be "
            "renormalised; pass post-softmax attention"
        )
    return low / sums


def paper_attention_features(A_list, ar_mask: bool = True):
    """Attention as a representation the way Wu et al.'s released code builds it.

    Each sentence's ``(n_heads, n_words, n_words)`` attention becomes ``n_words²`` rows
    (queries row-major, every key) of ``n_heads`` features, sentences concatenated. With
    ``ar_mask`` (the ``--ar_mask`` flag of their last attention run, whose files cover
    BERT, GPT-2, XLNet and RoBERTa), every model's attention is first cut to keys ≤ query
    and each row renormalised to sum to 1, bidirectional models included. Their
    ``ReprCorr`` then keeps the rows where every head of the *first* model of the run is
    non-zero (see :func:`distattn_sim`); this function returns all rows.

    Parameters
    ----------
    A_list : list of ndarray or Tensor of shape (n_heads, n_words_s, n_words_s)
    ar_mask : bool, default=True

    Returns
    -------
    Tensor of shape (Σ_s n_words_s², n_heads)
        float64, on the input's device.

    References
    ----------
    Wu et al. (2020), Sec. 3.5; johnmwu/contextual-corr-analysis,
    ``attention_corr_methods.py`` (``load_attentions``, ``ReprCorr``) and
    ``slurm/mk_attn_results6-helper.sh`` (``--ar_mask``).
    """
    a_list = _check_attention(A_list, "A_list")
    if ar_mask:
        a_list = [_ar_masked(a) for a in a_list]
    return torch.cat([a.flatten(1).T for a in a_list], dim=0)


def nonzero_rows(features: torch.Tensor) -> torch.Tensor:
    """Boolean mask of the rows in which every head is non-zero (the authors' ``unmask_ix``).

    Parameters
    ----------
    features : Tensor of shape (n_pairs, n_heads)

    Returns
    -------
    Tensor of shape (n_pairs,), bool
    """
    return (features != 0).all(dim=1)


def distattn_sim(
    A_list,
    B_list,
    metric: str = "cka",
    causal: bool | tuple[bool, bool] = False,
    *,
    paper_compat: bool = False,
    ar_mask: bool = True,
) -> float:
    """Distributed attention similarity: CKA / SVCCA / PWCCA of head features over pairs.

    Parameters
    ----------
    A_list : list of ndarray or Tensor of shape (n_heads_l, n_words_s, n_words_s)
    B_list : list of ndarray or Tensor of shape (n_heads_lp, n_words_s, n_words_s)
    metric : {"cka", "svcca", "pwcca"}
        Linear CKA, SVCCA, or PWCCA (directional A → B).
    causal : bool or (bool, bool), default=False
        Whether the model of ``A_list`` (and of ``B_list``) is causal. If either is, only
        the (query, key ≤ query) pairs, valid for both, are used. Textbook form only.
    paper_compat : bool, default=False
        The authors' ``AttnCCA`` / ``AttnLinCKA``: features from
        :func:`paper_attention_features` (``ar_mask``), the rows where every head of
        ``A_list`` is non-zero (their mask comes from the first model of the run: pass it
        as ``A_list``; with ``ar_mask`` every model gives the same mask, keys ≤ query), and
        the paper-compatible SVCCA / PWCCA (z-scored heads, their truncation,
        ``svcca(..., paper_compat=True)``). Their CKA only centres: it equals linear CKA.
    ar_mask : bool, default=True
        With ``paper_compat``: cut every model's attention to keys ≤ query and renormalise
        (their final attention run); ``False`` is their earlier run on raw attention.

    Returns
    -------
    float

    References
    ----------
    Wu et al. (2020), Sec. 3.5; johnmwu/contextual-corr-analysis,
    ``attention_corr_methods.py`` (``AttnCCA``, ``AttnLinCKA``).
    """
    fns = {"cka": linear_cka, "svcca": svcca, "pwcca": pwcca}
    if metric not in fns:
        raise ValueError(f"unknown `metric` {metric!r}; choose one of {sorted(fns)}")
    causal_any = any(causal) if isinstance(causal, tuple | list) else bool(causal)
    a_list, b_list = _check_two(A_list, B_list)
    if not paper_compat:
        return fns[metric](_features(a_list, causal_any), _features(b_list, causal_any))
    if causal_any:
        raise ValueError(
            "`causal` selects the textbook mask; with `paper_compat=True` the authors' "
            "`ar_mask` decides which pairs count: drop `causal`"
        )
    fa = paper_attention_features(a_list, ar_mask)
    fb = paper_attention_features(b_list, ar_mask)
    return paper_distattn_pair(fa, fb, nonzero_rows(fa), metric)


def paper_distattn_pair(fa, fb, keep, metric: str) -> float | tuple[float, float]:
    """The authors' distributed attention measure of two feature matrices on masked rows.

    Parameters
    ----------
    fa, fb : Tensor of shape (n_pairs, n_heads_a), (n_pairs, n_heads_b)
        From :func:`paper_attention_features`.
    keep : Tensor of shape (n_pairs,), bool
        Rows to use (:func:`nonzero_rows` of the run's first model).
    metric : {"cka", "svcca", "pwcca", "pwcca_both"}
        ``"pwcca_both"`` returns ``(pwsim(a → b), pwsim(b → a))`` from one decomposition.

    Returns
    -------
    float or (float, float)
    """
    fa, fb = fa[keep], fb[keep]
    if metric == "cka":
        return linear_cka(fa, fb)
    if metric == "svcca":
        return svcca(fa, fb, paper_compat=True)
    if metric == "pwcca":
        return pwcca(fa, fb, paper_compat=True)
    if metric == "pwcca_both":
        return pwcca_both(fa, fb, paper_compat=True)
    raise ValueError(
        f"unknown `metric` {metric!r}; choose one of ['cka', 'svcca', 'pwcca', 'pwcca_both']"
    )
