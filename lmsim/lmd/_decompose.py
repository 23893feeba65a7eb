"""The decomposition: group and pairwise R² of a group of models (Eq. 9-11), and single fits."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from lmsim.lmd._fit import _fit_and_score, _warn_underdetermined
from lmsim.lmd._loo import _loo_fits, _loo_scores
from lmsim.lmd._problem import _as_moments, _check_ridge, _Problem, _resolve_models


@dataclass
class Decomposition:
    """Result of :func:`decompose`: R² of every leave-one-out and pairwise fit.

    Attributes
    ----------
    models : list of str
        Model labels, in the order of every table.
    group_r2 : pandas.Series of shape (n_models,)
        Test R² of each model regressed on all the others, ``R²(u_i, {u_-i})`` (Eq. 9).
    group_rho : float
        Group correlation, the mean of ``group_r2`` (Eq. 10).
    pairwise_r2 : pandas.DataFrame of shape (n_models, n_models)
        Entry ``[target, basis]`` is the test ``R²(target | basis)``; the diagonal is the
        R² of a model on itself (1 up to the ridge). Asymmetric.
    pairwise_rho : pandas.DataFrame of shape (n_models, n_models)
        Symmetric pairwise correlation ``(R²(u, v) + R²(v, u)) / 2`` (Eq. 11).
    train_group_r2, train_group_rho, train_pairwise_r2, train_pairwise_rho
        The same on the train set (in-sample fit).
    ridge, regulariser, n_train, n_test
        The settings and sample counts that produced the result.
    weights : dict or None
        With ``return_weights=True``: ``{(target, basis tuple): (W, b)}`` with ``W`` of
        shape ``(d_target, d_basis)`` and ``b`` of shape ``(d_target,)`` (numpy float64).
    """

    models: list[str]
    group_r2: pd.Series
    group_rho: float
    pairwise_r2: pd.DataFrame
    pairwise_rho: pd.DataFrame
    train_group_r2: pd.Series
    train_group_rho: float
    train_pairwise_r2: pd.DataFrame
    train_pairwise_rho: pd.DataFrame
    ridge: float
    regulariser: str
    n_train: int
    n_test: int
    weights: dict | None = field(default=None, repr=False)

    def table(self, split: str = "test") -> pd.Series:
        """Group R² per model plus the group correlation, the layout of Table 2.

        Parameters
        ----------
        split : {"test", "train"}
        """
        if split not in ("test", "train"):
            raise ValueError(f"`split` must be 'test' or 'train', got {split!r}")
        r2s = self.group_r2 if split == "test" else self.train_group_r2
        rho = self.group_rho if split == "test" else self.train_group_rho
        return pd.concat([r2s, pd.Series({"group ρ": rho})])


def _decompose_problem(
    prob: _Problem,
    ridge: float,
    regulariser: str,
    return_weights: bool,
    pairwise: bool,
    progress: bool,
    fit_cache: dict | None = None,
) -> Decomposition:
    labels = prob.labels
    n_models = len(labels)
    if n_models < 2:
        raise ValueError(f"LMD needs at least 2 models, got {labels}")
    weights: dict | None = {} if return_weights else None

    def keep(target_list, basis, weights_t, bias_t, widths):
        if weights is None:
            return
        start = 0
        for target, width in zip(target_list, widths):
            stop = start + width
            weights[(target, tuple(basis))] = (
                weights_t[start:stop].cpu().numpy(),
                bias_t[start:stop].cpu().numpy(),
            )
            start = stop

    group_train, group_test = {}, {}
    total = prob.train.comoment.shape[0]
    for target in labels:
        width = prob.slices[target].stop - prob.slices[target].start
        if prob.train.n <= total - width:
            _warn_underdetermined(
                prob.train.n, total - width, [m for m in labels if m != target], ridge
            )
    key = ("leave-one-out", tuple(labels))
    if fit_cache is not None and key in fit_cache:
        loo = fit_cache[key]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # warned above, once per target
            loo = _loo_fits(prob, ridge, regulariser)
        if fit_cache is not None:
            fit_cache[key] = loo
    ddof = 1 if regulariser == "code" else 0
    for target in tqdm(labels, desc="LMD leave-one-out fits", disable=not progress):
        basis = [m for m in labels if m != target]
        if loo is not None:
            w_full, b_t, shift = loo[target]
            tr, te = _loo_scores(prob, target, w_full, b_t, shift, ddof)
            group_train[target], group_test[target] = tr, te
            if weights is not None:
                keep([target], basis, w_full[:, prob.index(basis)], b_t, [len(b_t)])
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            warnings.filterwarnings("always", message=".*minimum-norm", category=UserWarning)
            tr, te, w_t, b_t, widths = _fit_and_score(
                prob, [target], basis, ridge, regulariser, fit_cache
            )
        group_train[target], group_test[target] = tr[0], te[0]
        keep([target], basis, w_t, b_t, widths)

    pair_train = np.full((n_models, n_models), np.nan)
    pair_test = np.full((n_models, n_models), np.nan)
    if pairwise:
        for j, basis in enumerate(tqdm(labels, desc="LMD pairwise fits", disable=not progress)):
            # One factorisation of the basis covariance serves every target at once.
            tr, te, w_t, b_t, widths = _fit_and_score(
                prob, labels, [basis], ridge, regulariser, fit_cache
            )
            pair_train[:, j], pair_test[:, j] = tr, te
            keep(labels, [basis], w_t, b_t, widths)

    def frame(values):
        return pd.DataFrame(
            values, index=pd.Index(labels, name="target"), columns=pd.Index(labels, name="basis")
        )

    def rho(values):
        return frame((values + values.T) / 2)

    group_test_s = pd.Series(group_test, name="R² test")
    group_train_s = pd.Series(group_train, name="R² train")
    return Decomposition(
        models=list(labels),
        group_r2=group_test_s,
        group_rho=float(group_test_s.mean()),
        pairwise_r2=frame(pair_test),
        pairwise_rho=rho(pair_test),
        train_group_r2=group_train_s,
        train_group_rho=float(group_train_s.mean()),
        train_pairwise_r2=frame(pair_train),
        train_pairwise_rho=rho(pair_train),
        ridge=ridge,
        regulariser=regulariser,
        n_train=prob.train.n,
        n_test=prob.test.n,
        weights=weights,
    )


def decompose(
    train,
    test,
    ridge: float = 1e-6,
    regulariser: str = "code",
    models=None,
    device=None,
    return_weights: bool = False,
    pairwise: bool = True,
    progress: bool = False,
) -> Decomposition:
    """All leave-one-out and pairwise LMD fits of a group of models, from moments.

    Parameters
    ----------
    train, test : Moments or dict of str to array of shape (n_samples, d_block)
        Moments of the stacked sequence embeddings, one block per model (widths may
        differ). Raw arrays are converted with :meth:`Moments.from_arrays`. W and b are
        fitted on ``train``; R² is reported on ``test`` (and on ``train``).
    ridge : float, default=1e-6
        λ of Eq. 6 (the paper's value).
    regulariser : {"code", "paper"}, default="code"
        ``"code"``: λ added to the (N-1)-normalised covariance, as the released code
        does (a fixed ridge; see the module docstring for why it is the default).
        ``"paper"``: the smallest eigenvalue of the population covariance is floored at
        λ by a data-dependent shift, as the paper's text describes.
    models : list of str or dict of str to str, optional
        Model label -> block name. Default: every block; blocks named
        ``"{model}/layer.{i}"`` with one layer per model are labelled ``{model}``.
    device : str or torch.device, optional
        Where to solve; default the device of ``train`` (a GPU when extraction ran there).
    return_weights : bool, default=False
        Also return every ``(W, b)`` (memory: one ``d × (n-1) d`` matrix per model).
    pairwise : bool, default=True
        Also fit the ``n²`` single-basis regressions (cheap next to the leave-one-out fits).
    progress : bool, default=False
        Show tqdm progress bars over the fits.

    Returns
    -------
    Decomposition

    Warns
    -----
    UserWarning
        When ``n_train`` is not larger than a basis dimension (the fit is then set by the
        ridge); with ``ridge=0`` this is a ``ValueError``.

    References
    ----------
    Zhang (2022), Eq. 6-11.
    """
    ridge = _check_ridge(ridge, regulariser)
    train_m = _as_moments(train, "train", device)
    test_m = _as_moments(test, "test", device if device is not None else train_m.device)
    prob = _Problem(train_m, test_m, _resolve_models(models, train_m), device)
    prob.warn_small_variance(ridge)
    return _decompose_problem(prob, ridge, regulariser, return_weights, pairwise, progress)


def r2(
    train,
    test,
    target: str,
    basis: str | Sequence[str],
    ridge: float = 1e-6,
    regulariser: str = "code",
    models=None,
    device=None,
    split: str = "test",
) -> float:
    """R² of one target model regressed on a set of basis models (Eq. 9).

    Parameters
    ----------
    train, test : Moments or dict of arrays
        As in :func:`decompose`.
    target : str
        Model label (or block name).
    basis : str or list of str
        One or several model labels; the target itself is allowed.
    split : {"test", "train"}, default="test"
        Which set the R² is reported on.

    Returns
    -------
    float
    """
    if split not in ("test", "train"):
        raise ValueError(f"`split` must be 'test' or 'train', got {split!r}")
    ridge = _check_ridge(ridge, regulariser)
    basis = [basis] if isinstance(basis, str) else list(basis)
    if not basis:
        raise ValueError("`basis` is empty: name at least one basis model")
    train_m = _as_moments(train, "train", device)
    test_m = _as_moments(test, "test", device if device is not None else train_m.device)
    model_map = _resolve_models(models, train_m)
    unknown = [m for m in [target, *basis] if m not in model_map]
    if unknown:
        raise KeyError(f"unknown models {unknown}; available: {list(model_map)}")
    used = {m: model_map[m] for m in dict.fromkeys([target, *basis])}
    prob = _Problem(train_m, test_m, used, device)
    tr, te, *_ = _fit_and_score(prob, [target], basis, ridge, regulariser)
    return tr[0] if split == "train" else te[0]


def r2_vs_basis_size(
    train,
    test,
    target: str,
    order: Sequence[str] | None = None,
    ridge: float = 1e-6,
    regulariser: str = "code",
    models=None,
    device=None,
) -> pd.DataFrame:
    """R² of ``target`` as basis models are added one at a time.

    The basis after step ``k`` is the first ``k`` models of ``order``. On the train set
    the R² can only rise (up to the tiny ridge): a larger basis nests the smaller one.

    Parameters
    ----------
    order : list of str, optional
        Basis models in the order they are added; default the other models as listed.

    Returns
    -------
    pandas.DataFrame
        One row per basis size with columns ``n_basis``, ``added``, ``train_r2``,
        ``test_r2``.
    """
    ridge = _check_ridge(ridge, regulariser)
    train_m = _as_moments(train, "train", device)
    test_m = _as_moments(test, "test", device if device is not None else train_m.device)
    model_map = _resolve_models(models, train_m)
    if target not in model_map:
        raise KeyError(f"unknown target {target!r}; available: {list(model_map)}")
    order = [m for m in model_map if m != target] if order is None else list(order)
    unknown = [m for m in order if m not in model_map]
    if unknown or not order:
        raise ValueError(
            f"`order` must list known basis models, got {order}; available: {list(model_map)}"
        )
    used = {m: model_map[m] for m in dict.fromkeys([target, *order])}
    prob = _Problem(train_m, test_m, used, device)
    rows = []
    for k in range(1, len(order) + 1):
        tr, te, *_ = _fit_and_score(prob, [target], order[:k], ridge, regulariser)
        rows.append({"n_basis": k, "added": order[k - 1], "train_r2": tr[0], "test_r2": te[0]})
    return pd.DataFrame(rows)
