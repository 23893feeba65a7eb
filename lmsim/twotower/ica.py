"""ICA word groups of the embedding table (Eq. 5-7, Figs. 5-6, Table 3)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd


def pca_whiten(X, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Centre ``X`` and project it on its top ``d`` principal axes, with unit variance.

    ``P = Xc V_d S_d^{-1/2}`` with ``S_d``, ``V_d`` the top eigenpairs of ``XcᵀXc / n`` (the
    paper's Eq. 5 writes ``√S_d``; see the notes of :mod:`lmsim.twotower`).

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    d : int

    Returns
    -------
    P : ndarray of shape (n_samples, d)
    eigvals : ndarray of shape (n_features,)
        All eigenvalues, descending (for the explained variance).
    """
    X = np.asarray(X, dtype=np.float64)
    if not 1 <= d <= min(X.shape):
        raise ValueError(f"`d` must lie in [1, {min(X.shape)}] for X of shape {X.shape}, got {d}")
    Xc = X - X.mean(0)
    eigvals, eigvecs = np.linalg.eigh(Xc.T @ Xc / len(Xc))
    order = np.argsort(eigvals)[::-1]
    eigvals, eigvecs = eigvals[order], eigvecs[:, order]
    return Xc @ eigvecs[:, :d] / np.sqrt(np.maximum(eigvals[:d], 1e-12)), eigvals


def amari_g(y: np.ndarray) -> np.ndarray:
    """The paper's nonlinearity (Eq. 7): ``g(y) = sgn(y) (1 − exp(−√(2|y|))) / 2``."""
    return np.sign(y) * (1.0 - np.exp(-np.sqrt(2.0 * np.abs(y)))) / 2.0


def amari_ica(
    P, lr: float = 0.01, n_iter: int = 5000, tol: float = 1e-7
) -> tuple[np.ndarray, np.ndarray, int]:
    """Amari's natural-gradient ICA (Eq. 6): ``W ← W + lr (I − g(Y)Yᵀ/n) W``, ``Y = W P``.

    ``W₀ = I``; full-batch updates until the largest change of ``W`` is below ``tol``.

    Parameters
    ----------
    P : array of shape (n_samples, d)
        (Whitened) inputs, one row per sample.
    lr, n_iter, tol : float, int, float

    Returns
    -------
    Y : ndarray of shape (n_samples, d)
        The sources, one column per component.
    W : ndarray of shape (d, d)
    n_iter_run : int
    """
    P = np.asarray(P, dtype=np.float64).T
    d, n = P.shape
    W = np.eye(d)
    identity = np.eye(d)
    n_run, change = 0, math.inf
    while n_run < n_iter and change >= tol:
        Y = W @ P
        step = lr * (identity - amari_g(Y) @ Y.T / n) @ W
        W = W + step
        change = np.abs(step).max()
        n_run += 1
    return (W @ P).T, W, n_run


def ica_groups(Y: np.ndarray, threshold: float = 2.5) -> np.ndarray:
    """Membership of each sample in each component's group: ``|Y_j| > threshold``.

    Returns
    -------
    ndarray of bool, shape (n_samples, d)
    """
    return np.abs(np.asarray(Y)) > threshold


def ica_summary(Y: np.ndarray, threshold: float = 2.5) -> dict:
    """The paper's Sec. 5.3 / Fig. 6 facts of ICA sources ``Y`` (rows = words)."""
    per_word = ica_groups(Y, threshold).sum(1)
    return {
        "fraction of values in [-1, 1]": float((np.abs(Y) <= 1).mean()),
        "fraction of words in no group": float((per_word == 0).mean()),
        "fraction of words in exactly one group": float((per_word == 1).mean()),
        "mean groups per word": float(per_word.mean()),
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
