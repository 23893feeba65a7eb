"""ICA word groups (Eq. 5-7, Figs. 5-6, Table 3), as the authors ran them and as lmsim does.

The paper's text leaves the ICA incomplete; the authors' ``ncautil/ncamath.py``
(``hezq06/ncautil``) settles it:

- ``pca(data, D)``: ``U, S, V = svd(data dataᵀ / N)``, ``P = diag(1/√S_D) V_D data``: the
  inputs are *whitened* (Eq. 5 writes ``√S_d``) and *not centred* (the second-moment matrix,
  not the covariance);
- ``ica_torch(data, LR=1e-2, step=1e4)``: Amari's update ``W ← W + lr (I − g(Y)Yᵀ/N) W``
  from ``W₀ = I``, then ``W ← W / (‖W‖_F / ‖I‖_F)``: ``W`` is rescaled to ``‖W‖_F = √d`` after
  every step, for a fixed number of steps;
- ``g(y) = sign(y) (1 − exp(−√2·|y|)) / 2`` (√2·|y|; the paper's Eq. 7 reads ``√(2|y|)``);
- the data are the input embeddings of every evaluated token occurrence
  (``ttlm/model.py``, ``eval_mem``: ``input_emb[labels != 0]``), so frequent tokens weigh in
  proportion to their counts. Here a row per distinct token with its count as ``weights`` is
  the same computation (every sum over occurrences is a weighted sum over rows).

Without the rescaling, the bounded ``g`` (``|g| < 1/2``) has its fixed point at
``E[g(y) y] = 1``, which drives every source to a standard deviation near 3 whatever the
data: the ``|y| > 2.5`` groups then hold most words. With it, whitened inputs give sources
near unit scale, and the threshold means 2.5 standard deviations.

Two variants (:func:`fit_ica`): ``"paper"`` is the authors' code; ``"lmsim"`` centres before
whitening and rescales each source to unit (weighted) standard deviation after the same
update, so that every component's threshold is exactly 2.5 of its standard deviations
(the rescaled natural gradient fixes ``E[g(y_j) y_j]`` to one value for all components, not
their variances).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

ICA_VARIANTS = ("paper", "lmsim")


def _weights(weights, n: int) -> np.ndarray:
    if weights is None:
        return np.full(n, 1.0 / n)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
        raise ValueError(
            f"`weights` must be {n} finite non-negative numbers with a positive sum (one per "
            f"row of X), got shape {w.shape}"
        )
    return w / w.sum()


def pca_whiten(X, d: int, centre: bool = True, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Project ``X`` on its top ``d`` principal axes, with unit variance (Eq. 5, whitened).

    ``P = X̃ V_d S_d^{-1/2}`` with ``S_d``, ``V_d`` the top eigenpairs of ``X̃ᵀ diag(w) X̃``
    (``w`` the normalised weights), ``X̃`` = ``X`` centred (``centre=True``) or as is (the
    authors' ``ncamath.pca``: the second-moment matrix). Each axis's sign makes its largest
    loading positive (any sign is a valid PCA; the ICA's groups do not depend on it).

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    d : int
    centre : bool
        Remove the (weighted) mean first. False: the authors' code.
    weights : array of shape (n_samples,), optional
        Each row's weight, e.g. a token's number of occurrences (the authors fit every
        occurrence); None: equal weights.

    Returns
    -------
    P : ndarray of shape (n_samples, d)
    eigvals : ndarray of shape (n_features,)
        All eigenvalues, descending (for the explained variance).
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or not 1 <= d <= min(X.shape):
        raise ValueError(f"`d` must lie in [1, {min(X.shape)}] for X of shape {X.shape}, got {d}")
    w = _weights(weights, len(X))
    Xc = X - w @ X if centre else X
    eigvals, eigvecs = np.linalg.eigh((Xc * w[:, None]).T @ Xc)
    order = np.argsort(eigvals)[::-1]
    eigvals, eigvecs = eigvals[order], eigvecs[:, order]
    axes = eigvecs[:, :d]
    axes = axes * np.sign(axes[np.abs(axes).argmax(0), np.arange(d)])
    return Xc @ axes / np.sqrt(np.maximum(eigvals[:d], 1e-12)), eigvals


def amari_g(y: np.ndarray) -> np.ndarray:
    """The nonlinearity of the authors' code: ``g(y) = sign(y) (1 − exp(−√2·|y|)) / 2``.

    ``ncamath.ica`` / ``ica_torch`` ("nonlinear function for Laplace distribution"); the
    paper's Eq. 7 prints ``√(2|y|)`` with an unbalanced bracket.
    """
    return np.sign(y) * (1.0 - np.exp(-math.sqrt(2.0) * np.abs(y))) / 2.0


def amari_ica(
    P,
    lr: float = 0.01,
    n_iter: int = 10_000,
    tol: float = 0.0,
    weights=None,
    renormalise: bool = True,
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray, int]:
    """Amari's natural-gradient ICA (Eq. 6) as the authors' ``ncamath.ica_torch`` runs it.

    ``Y = W Pᵀ``; ``W ← W + lr (I − g(Y) diag(w) Yᵀ) W`` (``w`` the normalised weights;
    equal weights give ``g(Y)Yᵀ/n``); then, with ``renormalise``, ``W ← √d W / ‖W‖_F``.
    ``W₀ = I``; full-batch steps in float64 until ``n_iter`` or until the largest change of
    ``W`` in a step is below ``tol`` (the authors: a fixed 10,000 steps, ``tol=0``).

    Parameters
    ----------
    P : array of shape (n_samples, d)
        Whitened inputs (:func:`pca_whiten`), one row per sample.
    lr : float
    n_iter : int
    tol : float
    weights : array of shape (n_samples,), optional
    renormalise : bool
        Rescale ``W`` to ``‖W‖_F = √d`` after every step (the authors' code). False gives the
        plain update of the paper's text, whose sources settle near standard deviation 3.
    device : str
        Where the float64 iterations run (``"cuda"`` for the paper's 10,000 steps at
        ``d = 128``).

    Returns
    -------
    Y : ndarray of shape (n_samples, d)
        The sources, one column per component.
    W : ndarray of shape (d, d)
    n_iter_run : int
    """
    Y, W, n_run, _ = _amari(P, lr, n_iter, tol, weights, renormalise, device)
    return Y, W, n_run


def _amari(P, lr, n_iter, tol, weights, renormalise, device):
    """:func:`amari_ica`'s loop; also returns the largest change of ``W`` in the last step."""
    import torch

    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2:
        raise ValueError(f"`P` must be 2-D (n_samples, d), got shape {P.shape}")
    w = torch.as_tensor(_weights(weights, len(P)), device=device)
    data = torch.as_tensor(P.T.copy(), device=device)
    d = data.shape[0]
    W = torch.eye(d, dtype=torch.float64, device=device)
    identity = torch.eye(d, dtype=torch.float64, device=device)
    n_run, change = 0, math.inf
    root2 = math.sqrt(2.0)
    while n_run < n_iter and change >= tol:
        Y = W @ data
        g = torch.sign(Y) * (1.0 - torch.exp(-root2 * Y.abs())) / 2.0  # amari_g
        W_next = W + lr * (identity - (g * w) @ Y.T) @ W
        if renormalise:
            W_next *= math.sqrt(d) / torch.linalg.norm(W_next)
        n_run += 1
        if tol > 0 or n_run == n_iter:  # a device sync: only when asked, and at the end
            change = (W_next - W).abs().max().item()
        W = W_next
    return (W @ data).T.cpu().numpy(), W.cpu().numpy(), n_run, change


@dataclass
class IcaFit:
    """Result of :func:`fit_ica`.

    Attributes
    ----------
    Y : ndarray of shape (n_samples, d)
        Sources, one row per input row.
    W : ndarray of shape (d, d)
        Unmixing matrix of the whitened inputs (``Y = P Wᵀ``, before any rescaling).
    scale : ndarray of shape (d,)
        What each source was divided by (ones for ``"paper"``).
    eigvals : ndarray of shape (n_features,)
        PCA eigenvalues, descending.
    n_iter : int
    variant : str
    last_change : float
        Largest change of an entry of ``W`` in the last step (how far from converged).
    """

    Y: np.ndarray
    W: np.ndarray
    scale: np.ndarray
    eigvals: np.ndarray
    n_iter: int
    variant: str
    last_change: float = math.nan

    @property
    def explained(self) -> float:
        """Share of the second moment (or variance) the ``d`` kept axes hold."""
        return float(self.eigvals[: self.Y.shape[1]].sum() / self.eigvals.sum())


def fit_ica(
    X,
    d: int,
    weights=None,
    variant: str = "paper",
    lr: float = 0.01,
    n_iter: int = 10_000,
    tol: float = 0.0,
    device: str = "cpu",
) -> IcaFit:
    """PCA whitening to ``d`` dimensions, then Amari's ICA: the paper's word components.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        Word vectors, one row per distinct token (with ``weights``) or per occurrence.
    d : int
        PCA dimension (the paper: 128).
    weights : array of shape (n_samples,), optional
        Occurrences of each row's token among the evaluated positions (the authors fit every
        occurrence); None: each row once.
    variant : {"paper", "lmsim"}
        ``"paper"``: the authors' ``pca`` + ``ica_torch`` (no centring; ``W`` rescaled to
        ``‖W‖_F = √d`` every step). ``"lmsim"``: centred whitening, the same update, then
        each source divided by its (weighted) standard deviation.
    lr, n_iter, tol : float, int, float
        :func:`amari_ica`'s (the authors: 0.01, 10,000 steps, no early stop).
    device : str
        Where the ICA iterations run.

    Returns
    -------
    IcaFit
    """
    if variant not in ICA_VARIANTS:
        raise ValueError(f"`variant` must be one of {ICA_VARIANTS}, got {variant!r}")
    P, eigvals = pca_whiten(X, d, centre=variant == "lmsim", weights=weights)
    Y, W, n_run, change = _amari(P, lr, n_iter, tol, weights, True, device)
    scale = np.ones(d)
    if variant == "lmsim":
        w = _weights(weights, len(Y))
        scale = np.sqrt(w @ (Y - w @ Y) ** 2)
        Y = Y / np.maximum(scale, 1e-12)
    return IcaFit(Y, W, scale, eigvals, n_run, variant, change)


def occurrence_rows(embedding, counts, exclude_ids=()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ICA's inputs as the authors built them, one row per distinct token.

    The authors stack the input embedding of every evaluated token occurrence
    (``ttlm/model.py`` ``eval_mem``: ``input_emb[labels != 0]``); the same rows, once per
    token, with the token's count as its weight give the same PCA and ICA
    (:func:`fit_ica` ``weights``).

    Parameters
    ----------
    embedding : array of shape (vocab, embed)
        The input word-vector table (``TwoTowerLM.embedding``).
    counts : array of shape (vocab,)
        Occurrences of each token among the evaluated positions
        (:attr:`~lmsim.twotower.scores.Preference.counts`, or a count of the scored text).
    exclude_ids : sequence of int
        Tokens left out (the authors keep every token but padding).

    Returns
    -------
    tokens : ndarray of int, shape (n_tokens,)
        The tokens that occur, most frequent first (ties: lower id first).
    X : ndarray of shape (n_tokens, embed)
    weights : ndarray of shape (n_tokens,)
    """
    E = np.asarray(embedding, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64).copy()
    if counts.shape != (len(E),):
        raise ValueError(
            f"`counts` must hold one count per row of `embedding` ({len(E)}), got {counts.shape}"
        )
    counts[list(exclude_ids)] = 0
    order = np.lexsort((np.arange(len(counts)), -counts))
    tokens = order[counts[order] > 0]
    return tokens, E[tokens], counts[tokens]


def ica_groups(Y: np.ndarray, threshold: float = 2.5) -> np.ndarray:
    """Membership of each sample in each component's group: ``|Y_j| > threshold``.

    Returns
    -------
    ndarray of bool, shape (n_samples, d)
    """
    return np.abs(np.asarray(Y)) > threshold


def ica_summary(Y: np.ndarray, threshold: float = 2.5, weights=None) -> dict:
    """The paper's Sec. 5.3 / Fig. 6 facts of ICA sources ``Y``.

    Parameters
    ----------
    Y : array of shape (n_samples, d)
    threshold : float
    weights : array of shape (n_samples,), optional
        Occurrences per row: the facts over token occurrences; None: over rows (words).
    """
    Y = np.asarray(Y)
    w = _weights(weights, len(Y))
    per_word = ica_groups(Y, threshold).sum(1)
    return {
        "fraction of values in [-1, 1]": float(w @ (np.abs(Y) <= 1).mean(1)),
        "fraction of words in no group": float(w @ (per_word == 0)),
        "fraction of words in exactly one group": float(w @ (per_word == 1)),
        "mean groups per word": float(w @ per_word),
        "source standard deviation (median over components)": float(
            np.median(np.sqrt(w @ (Y - w @ Y) ** 2))
        ),
    }


def group_table(
    Y: np.ndarray,
    tokens: np.ndarray,
    tokenizer,
    scores: Mapping[str, np.ndarray],
    threshold: float = 2.5,
    n_words: int = 5,
) -> pd.DataFrame:
    """Mean preference score and rank of each ICA word group (Table 3).

    Parameters
    ----------
    Y : ndarray of shape (n_tokens, d)
        ICA sources of the embedding rows of ``tokens`` (most frequent first).
    tokens : ndarray of shape (n_tokens,)
    tokenizer : transformers tokenizer
    scores : dict of run name to ndarray of shape (vocab,)
    threshold : float
    n_words : int
        Most frequent words shown per group.

    Returns
    -------
    DataFrame, one row per non-empty group, sorted by the first run's rank
        ``component``, ``size``, ``words``, and per run ``<run> score``, ``<run> rank``.
    """
    member = ica_groups(Y, threshold)
    rows = []
    for j in range(member.shape[1]):
        ids = tokens[member[:, j]]
        if len(ids) == 0:
            continue
        row = {
            "component": j,
            "size": len(ids),
            "words": ", ".join(tokenizer.convert_ids_to_tokens(ids[:n_words].tolist())),
        }
        for name, s in scores.items():
            row[f"{name} score"] = (
                float(np.nanmean(s[ids])) if np.isfinite(s[ids]).any() else math.nan
            )
        rows.append(row)
    table = pd.DataFrame(rows)
    for name in scores:
        table[f"{name} rank"] = table[f"{name} score"].rank(ascending=False, method="min")
    if len(table):
        table = table.sort_values(f"{next(iter(scores))} rank").reset_index(drop=True)
    return table
