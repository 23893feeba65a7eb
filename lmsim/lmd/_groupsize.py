"""Group size: ρ against the number of basis models, and the pairwise level (beyond the paper).

A group correlation depends on how many models the group holds: each model's R² is a fit on
every *other* model (Eq. 9-10), and a wider basis explains more (the train R² can only
rise). A 3-model group and the paper's 12-model group are therefore not the same quantity;
only the pairwise R² (one basis model, Eq. 11) is comparable whatever the group
(``EVIDENCE.md`` §3). :func:`rho_vs_group_size` measures the effect: the group ρ of
sub-groups of every size ``k`` (``k − 1`` basis models per fit), from one set of moments;
at ``k = 2`` it is the pairwise ρ of Eq. 11, at ``k = n`` the group ρ of
:func:`~lmsim.lmd.decompose`. :func:`mean_pairwise_r2` is the pairwise level's summary.

References
----------
Zhang (2022), Eq. 9-11.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd

from lmsim._threads import thread_policy
from lmsim.lmd._fit import _fit_and_score
from lmsim.lmd._overfit import debias_r2
from lmsim.lmd._problem import _as_moments, _check_ridge, _Problem, _resolve_models

__all__ = ["mean_pairwise_r2", "rho_vs_group_size"]


def mean_pairwise_r2(table, models: Sequence[str] | None = None) -> float:
    """Mean of the off-diagonal pairwise R²(target | basis) of a table.

    Parameters
    ----------
    table : pandas.DataFrame or array of shape (n_models, n_models)
        ``[target, basis]`` pairwise R² (:attr:`Decomposition.pairwise_r2`,
        :attr:`View.pairwise_r2`, the authors' tables); the diagonal and NaN are ignored.
    models : sequence of str, optional
        Average over these models only (rows and columns of a DataFrame).

    Returns
    -------
    float
        The mean over ordered pairs of different models (equal to the mean of the
        symmetric pairwise ρ of Eq. 11 over unordered pairs).
    """
    if isinstance(table, pd.DataFrame):
        if models is not None:
            missing = [m for m in models if m not in table.index or m not in table.columns]
            if missing:
                raise KeyError(f"`models` {missing} are not in the table")
            table = table.loc[list(models), list(models)]
        values = table.to_numpy(dtype=np.float64)
    else:
        if models is not None:
            raise ValueError("`models` needs a DataFrame with model labels")
        values = np.asarray(table, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] != values.shape[1] or values.shape[0] < 2:
        raise ValueError(f"`table` must be square with at least 2 models, got {values.shape}")
    cells = values[~np.eye(len(values), dtype=bool)]
    cells = cells[np.isfinite(cells)]
    if not len(cells):
        raise ValueError("`table` has no finite off-diagonal cell")
    return float(cells.mean())


@thread_policy
def rho_vs_group_size(
    train,
    test,
    sizes: Sequence[int] | None = None,
    max_subsets: int = 50,
    *,
    seed: int = 0,
    ridge: float = 1e-6,
    regulariser: str = "code",
    models=None,
    device=None,
) -> pd.DataFrame:
    """Group correlation ρ of sub-groups of every size: ρ against the number of basis models.

    For a sub-group ``G`` of ``k`` models, ``ρ(G) = (1/k) Σ_{i∈G} R²(u_i, {u_j : j ∈ G, j ≠ i})``
    (Eq. 10 on ``G``): every fit has ``k − 1`` basis models. All sub-groups of a size are
    used when there are at most ``max_subsets``, else ``max_subsets`` distinct ones drawn
    at random; every fit is made once (a fit shared by two sub-groups is reused).

    Parameters
    ----------
    train, test : Moments or dict of str to array of shape (n_samples, d_block)
        As in :func:`~lmsim.lmd.decompose`.
    sizes : sequence of int, optional
        Sub-group sizes ``k`` in ``[2, n_models]``; default all of them.
    max_subsets : int, default=50
        Sub-groups per size at most.
    seed : int, default=0
        Seed of ``numpy.random.default_rng`` for the sub-groups drawn (sizes in increasing
        order; per size, ``rng.choice(n_combinations, max_subsets, replace=False)`` over
        the combinations in lexicographic order).
    ridge, regulariser, models, device
        As in :func:`~lmsim.lmd.decompose`.

    Returns
    -------
    pandas.DataFrame
        One row per sub-group: ``group_size`` (``k``), ``n_basis_models`` (``k − 1``),
        ``models`` (labels joined by ``" + "``), ``rho`` (test), ``train_rho``,
        ``n_basis`` (mean basis width in dimensions), ``n_train`` and ``corrected_rho``
        (each member's R² corrected with Stein's factor for its basis width,
        :func:`~lmsim.lmd.debias_r2`, then averaged). ``df.groupby("group_size")["rho"]
        .agg(["mean", "min", "max"])`` is the curve.

    References
    ----------
    Zhang (2022), Eq. 9-11.
    """
    ridge = _check_ridge(ridge, regulariser)
    if int(max_subsets) < 1:
        raise ValueError(f"`max_subsets` must be >= 1, got {max_subsets!r}")
    train_m = _as_moments(train, "train", device)
    test_m = _as_moments(test, "test", device if device is not None else train_m.device)
    model_map = _resolve_models(models, train_m)
    labels = list(model_map)
    n = len(labels)
    if n < 2:
        raise ValueError(f"a group needs at least 2 models, got {labels}")
    sizes = list(range(2, n + 1)) if sizes is None else sorted({int(k) for k in sizes})
    if not sizes or sizes[0] < 2 or sizes[-1] > n:
        raise ValueError(f"`sizes` must lie in [2, {n}] (the number of models), got {sizes}")
    prob = _Problem(train_m, test_m, model_map, device)
    width = {m: prob.slices[m].stop - prob.slices[m].start for m in labels}
    rng = np.random.default_rng(seed)
    cache: dict = {}

    def fit(target: str, basis: tuple[str, ...]):
        key = (target, basis)
        if key not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # small n is the caller's design
                tr, te, *_ = _fit_and_score(prob, [target], list(basis), ridge, regulariser)
            cache[key] = (tr[0], te[0])
        return cache[key]

    rows = []
    for k in sizes:
        total = math.comb(n, k)
        if total <= int(max_subsets):
            subsets = list(combinations(labels, k))
        else:
            picks = set(rng.choice(total, int(max_subsets), replace=False).tolist())
            subsets = [c for i, c in enumerate(combinations(labels, k)) if i in picks]
        for subset in subsets:
            train_r2, test_r2, corrected, basis_dims = [], [], [], []
            for target in subset:
                basis = tuple(m for m in subset if m != target)
                tr, te = fit(target, basis)
                p = sum(width[m] for m in basis)
                train_r2.append(tr)
                test_r2.append(te)
                basis_dims.append(p)
                corrected.append(debias_r2(te, prob.train.n, p))
            rows.append(
                {
                    "group_size": k,
                    "n_basis_models": k - 1,
                    "models": " + ".join(subset),
                    "rho": float(np.mean(test_r2)),
                    "train_rho": float(np.mean(train_r2)),
                    "n_basis": float(np.mean(basis_dims)),
                    "n_train": prob.train.n,
                    "corrected_rho": float(np.mean(corrected)),
                }
            )
    return pd.DataFrame(rows)
