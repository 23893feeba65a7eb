"""Representational similarity analysis (RSA) of two representations of the same rows.

Each representation gives a representational dissimilarity matrix (RDM) over its
``n`` rows; RSA correlates the two RDMs' ``n (n − 1) / 2`` off-diagonal entries
(Kriegeskorte, Mur & Bandettini, 2008). RSA needs the rows themselves (not a function of
the moments): memory grows as ``n²``; a few thousand rows (words) are fine.

References
----------
Kriegeskorte, Mur & Bandettini (2008), "Representational similarity analysis —
connecting the branches of systems neuroscience", Front. Syst. Neurosci. 2:4 (correlation-
distance RDMs compared by Spearman's ρ).
"""

from __future__ import annotations

import numpy as np
import torch

from lmsim.metrics._linalg import as_float64, check_pair

__all__ = ["rsa"]

RDMS = ("correlation", "euclidean")
COMPARISONS = ("spearman", "pearson")


def _check_options(rdm: str, compare: str) -> None:
    if rdm not in RDMS:
        raise ValueError(f"unknown `rdm` {rdm!r}; choose one of {list(RDMS)}")
    if compare not in COMPARISONS:
        raise ValueError(f"unknown `compare` {compare!r}; choose one of {list(COMPARISONS)}")


def _condensed_rdm(x: torch.Tensor, rdm: str, name: str) -> np.ndarray:
    """Entries ``i < j`` of the RDM, row-major (as ``scipy.spatial.distance.pdist``)."""
    n = x.shape[0]
    if rdm == "correlation":
        z = x - x.mean(dim=1, keepdim=True)
        norms = torch.linalg.vector_norm(z, dim=1)
        if bool((norms == 0).any()):
            flat = int((norms == 0).sum())
            raise ValueError(
                f"`rsa`: {flat} rows of `{name}` are constant across features, so their "
                "correlation distance is undefined; use rdm='euclidean' or drop those rows"
            )
        z = z / norms[:, None]
        full = 1.0 - z @ z.T
    else:
        sq = (x * x).sum(dim=1)
        full = (sq[:, None] + sq[None, :] - 2.0 * (x @ x.T)).clamp_min(0).sqrt()
    rows, cols = np.triu_indices(n, k=1)
    return full.cpu().numpy()[rows, cols]


def prepare_rsa(x, rdm: str = "correlation", compare: str = "spearman", name: str = "X"):
    """Per-block part of RSA: the RDM's entries (or their ranks), centred, unit norm.

    Parameters
    ----------
    x : ndarray or Tensor of shape (n_samples, d)
        Activations (validated by the callers).
    rdm, compare
        As in :func:`rsa`.

    Returns
    -------
    ndarray of shape (n (n − 1) / 2,)
        So that RSA of two blocks is the dot product of their prepared vectors.
    """
    _check_options(rdm, compare)
    x = as_float64(x, name)
    if rdm == "euclidean":
        x = x - x.mean(dim=0)  # distances are translation invariant; centring avoids cancellation
    values = _condensed_rdm(x, rdm, name)
    if compare == "spearman":
        from scipy.stats import rankdata

        values = rankdata(values)
    values = values - values.mean()
    norm = np.linalg.norm(values)
    if not norm > 0:
        raise ValueError(
            f"`rsa`: every dissimilarity of `{name}` is the same (e.g. all rows equal), so "
            "its correlation with another RDM is undefined; pass more varied samples"
        )
    return values / norm


def rsa_pair(vx: np.ndarray, vy: np.ndarray) -> float:
    """RSA of two prepared blocks: the correlation of their (ranked) RDM entries."""
    return float(np.clip(vx @ vy, -1.0, 1.0))


def rsa(X, Y, *, rdm: str = "correlation", compare: str = "spearman") -> float:
    """RSA: correlation between the two representations' dissimilarity matrices.

    Parameters
    ----------
    X : ndarray or Tensor of shape (n_samples, d_x)
    Y : ndarray or Tensor of shape (n_samples, d_y)
        The same rows (words, tokens) in the same order.
    rdm : {"correlation", "euclidean"}, default="correlation"
        Dissimilarity of rows ``i, j``: ``1 − Pearson r(x_i, x_j)`` across features, or the
        Euclidean distance ``‖x_i − x_j‖``.
    compare : {"spearman", "pearson"}, default="spearman"
        Correlation of the two RDMs' entries ``i < j`` (Spearman: average ranks for ties).

    Returns
    -------
    float
        In ``[−1, 1]``; symmetric; 1 for ``X`` with itself. With ``rdm="euclidean"``:
        invariant to translation, isotropic scaling and orthogonal transforms; with
        ``"correlation"``: to scaling and to shifting all features of a row by a constant
        (not to rotations). Spearman is invariant to any increasing map of the
        dissimilarities.

    Raises
    ------
    ValueError
        Mismatched rows, fewer than 3 samples, non-finite values, constant RDMs, constant
        rows (correlation distance) or unknown options.

    Notes
    -----
    Forms ``(n, n)`` matrices: memory grows as ``n_samples²``.

    References
    ----------
    Kriegeskorte et al. (2008).
    """
    _check_options(rdm, compare)
    x, y = check_pair(X, Y, min_samples=3)
    return rsa_pair(prepare_rsa(x, rdm, compare, "X"), prepare_rsa(y, rdm, compare, "Y"))
