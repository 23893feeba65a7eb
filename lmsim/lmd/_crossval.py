"""A model-free check of the over-fitting correction: cross-validated ridge R² (beyond the paper).

Stein's correction (:func:`~lmsim.lmd.debias_r2`) estimates the population R² of the best
linear map, ``R²_∞``, under a Gaussian model of the basis. Without that model one fact
remains: *any* predictor fitted on train data scores, in expectation, no higher on new data
than the population map does, so the test R² of a well-tuned ridge fit is a lower bound on
``R²_∞`` that assumes nothing about the embeddings' distribution. With few train sequences
per basis dimension the ridge, tuned by K-fold cross-validation over shards of sequences,
recovers much of what least squares loses to over-fitting:

- raw least-squares test R² ≤ tuned-ridge test R² ≤ ``R²_∞`` (in expectation);
- a Stein-corrected value *below* the tuned ridge's R² means the correction is too weak;
  one far above it is not convicted by the bound but rests on the Gaussian model alone.

Every fit is that of :func:`~lmsim.lmd.decompose` (Eq. 6-9, ``regulariser="code"``: the
ridge ``s`` added to the (N − 1)-normalised basis covariance), computed from merged moments:
fold ``k``'s train moments are the merge of every other fold's shards (no pass over the
data). The ridge grid is relative: ``s = max(α · v̄, λ)`` with ``v̄`` the mean variance per
dimension of the fold's train embeddings (all models stacked) and ``λ`` the base ridge, so
``α = 0`` is the unregularised fit of the released code.

References
----------
Zhang (2022), Eq. 6-10. Hoerl & Kennard (1970), ridge regression; Stone (1974),
cross-validatory choice; Breiman & Freedman (1983), JASA 78 (the out-of-sample error of
least squares that Stein's factor models).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lmsim._threads import thread_policy
from lmsim.lmd._bootstrap import _ShardPool
from lmsim.lmd._decompose import _decompose_problem
from lmsim.lmd._problem import _as_moments, _check_ridge, _Problem, _resolve_models, _Stats
from lmsim.moments import Moments

__all__ = ["CrossValR2", "DEFAULT_ALPHAS", "crossval_r2"]

#: Relative ridges ``α`` of the default grid (``s = α`` × the mean variance per dimension).
DEFAULT_ALPHAS = (0.0, 1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0)


@dataclass
class CrossValR2:
    """Result of :func:`crossval_r2`.

    Attributes
    ----------
    scores : pandas.DataFrame of shape (n_models + 1, n_alphas)
        Mean over folds of each model's held-out group R² (Eq. 9) per relative ridge
        ``α`` (columns); the ``"group ρ"`` row averages the models (Eq. 10).
    folds : pandas.DataFrame
        Long format: ``fold``, ``alpha``, ``ridge`` (the absolute ``s``), ``n_train``,
        ``n_test``, ``model``, ``r2``.
    selected : pandas.DataFrame
        One row per model plus ``"group ρ"``: ``alpha`` (the grid value with the highest
        cross-validated R², chosen per model: each target is its own regression),
        ``cv_r2``, ``cv_r2_unregularised`` (``α = 0``), ``test_r2`` (refitted on every
        shard with the selected ``α`` and scored on ``test``; NaN without ``test``),
        ``n_train``. The group row averages the models' columns (``alpha`` NaN).
    n_folds : int
    """

    scores: pd.DataFrame
    folds: pd.DataFrame
    selected: pd.DataFrame
    n_folds: int


def _fold_moments(data, n_folds: int) -> tuple[list, str]:
    """``n_folds`` groups of shards: round-robin over a list of Moments, contiguous blocks of
    rows of a dict of arrays."""
    if isinstance(data, Mapping):
        arrays = {k: np.asarray(v) for k, v in data.items()}
        n = {len(v) for v in arrays.values()}
        if len(n) != 1:
            raise ValueError(f"the arrays of `data` must have the same n_samples, got {sorted(n)}")
        n = n.pop()
        if n < 2 * n_folds:
            raise ValueError(f"`data` holds {n} rows: too few for {n_folds} folds")
        bounds = np.linspace(0, n, n_folds + 1).round().astype(int)
        folds = [
            [Moments.from_arrays({k: v[a:b] for k, v in arrays.items()})]
            for a, b in zip(bounds[:-1], bounds[1:])
        ]
        return folds, "rows"
    if isinstance(data, Moments) or not isinstance(data, Sequence):
        raise ValueError(
            "`data` must be a list of Moments (shards) or a dict of (n_samples, d) arrays"
        )
    if len(data) < n_folds:
        raise ValueError(f"`data` holds {len(data)} shards: fewer than n_folds={n_folds}")
    return [list(data[k::n_folds]) for k in range(n_folds)], "shards"


@thread_policy
def crossval_r2(
    data,
    n_folds: int = 5,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    *,
    test=None,
    ridge: float = 1e-6,
    models=None,
    device=None,
) -> CrossValR2:
    """K-fold cross-validated ridge R² of every leave-one-out fit, and the tuned ridge's test R².

    Parameters
    ----------
    data : list of Moments or dict of str to array of shape (n_samples, d_block)
        The train data: per-shard moments (``extract_moments(..., return_shards=True)``;
        fold ``k`` holds shards ``k, k + K, k + 2K, ...``) or raw embeddings, one array per
        model (fold ``k`` holds the ``k``-th contiguous block of rows: shuffle first if the
        rows are ordered).
    n_folds : int, default=5
        ``K`` (at least 2).
    alphas : sequence of float, default=DEFAULT_ALPHAS
        Relative ridges ``α >= 0``: ``s = max(α · v̄, ridge)``.
    test : Moments, list of Moments or dict of arrays, optional
        A test set disjoint from ``data``: each model is refitted on all of ``data`` with
        its selected ``α`` and scored here (the ridge chosen on ``data``, scored on
        ``test``).
    ridge : float, default=1e-6
        The base ridge λ (the paper's), the smallest ``s`` used.
    models, device
        As in :func:`~lmsim.lmd.decompose`.

    Returns
    -------
    CrossValR2

    References
    ----------
    Zhang (2022), Eq. 6-10; Stone (1974).
    """
    ridge = _check_ridge(ridge, "code")
    n_folds = int(n_folds)
    if n_folds < 2:
        raise ValueError(f"`n_folds` must be >= 2, got {n_folds!r}")
    alphas = [float(a) for a in alphas]
    if not alphas or any(not np.isfinite(a) or a < 0 for a in alphas):
        raise ValueError(f"`alphas` must be finite numbers >= 0, got {alphas!r}")
    if len(set(alphas)) != len(alphas):
        raise ValueError(f"`alphas` has repeated values: {alphas!r}")
    folds, kind = _fold_moments(data, n_folds)
    first = _as_moments(folds[0][0], "data[0]", None)
    model_map = _resolve_models(models, first)
    blocks = list(model_map.values())
    device = torch.device(device) if device is not None else first.device
    shards = [s for fold in folds for s in fold]
    owner = np.concatenate([np.full(len(fold), k) for k, fold in enumerate(folds)])
    pool = _ShardPool(shards, "data", blocks, device, min_shards=1)
    if len(pool) != len(shards):
        raise ValueError("`data` holds empty shards: drop them before cross-validating")
    slices, start = {}, 0
    for label, block in model_map.items():
        slices[label] = slice(start, start + first.dims[block])
        start += first.dims[block]

    def fit(train: _Stats, held: _Stats, s: float):
        prob = _Problem.from_stats(train, held, slices, device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # small folds are expected
            return _decompose_problem(prob, s, "code", False, False, False)

    def shift(stats: _Stats, alpha: float) -> float:
        scale = float(stats.comoment.diagonal().mean()) / max(stats.n - 1, 1)
        return max(alpha * scale, ridge)

    rows = []
    for k in range(n_folds):
        train = pool.merge((owner != k).astype(int))
        held = pool.merge((owner == k).astype(int))
        for alpha in alphas:
            s = shift(train, alpha)
            dec = fit(train, held, s)
            for label in dec.models:
                rows.append(
                    {"fold": k, "alpha": alpha, "ridge": s, "n_train": train.n, "n_test": held.n,
                     "model": label, "r2": float(dec.group_r2[label])}
                )  # fmt: skip
    long = pd.DataFrame(rows)
    scores = long.pivot_table(index="model", columns="alpha", values="r2", aggfunc="mean")
    scores = scores.reindex(index=list(model_map), columns=alphas)
    scores.loc["group ρ"] = scores.mean(axis=0)
    best = {m: float(scores.loc[m].idxmax()) for m in model_map}

    everything = pool.merge(np.ones(len(pool), int))
    test_r2 = dict.fromkeys(model_map, np.nan)
    if test is not None:
        test_list = list(test) if isinstance(test, (list, tuple)) else [test]
        test_pool = _ShardPool(test_list, "test", blocks, device, min_shards=1)
        test_stats = test_pool.merge(np.ones(len(test_pool), int))
        for alpha in sorted(set(best.values())):
            dec = fit(everything, test_stats, shift(everything, alpha))
            for m, a in best.items():
                if a == alpha:
                    test_r2[m] = float(dec.group_r2[m])
    selected = pd.DataFrame(
        {
            "alpha": pd.Series(best),
            "cv_r2": pd.Series({m: scores.loc[m, best[m]] for m in model_map}),
            "cv_r2_unregularised": scores.loc[list(model_map), 0.0] if 0.0 in alphas else np.nan,
            "test_r2": pd.Series(test_r2),
            "n_train": float(everything.n),
        }
    )
    group = selected.mean(axis=0)
    group["alpha"] = np.nan
    selected.loc["group ρ"] = group
    scores.columns.name = "alpha"
    long.attrs["folds"] = kind
    return CrossValR2(scores=scores, folds=long, selected=selected, n_folds=n_folds)
