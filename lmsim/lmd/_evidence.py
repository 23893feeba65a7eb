"""Claim estimates from the LMD bootstrap: any statistic of one or more decompositions, with
its percentile interval over resampled shards, over-fitting-corrected when asked.

A claim of the paper is a statistic of the group or pairwise R² of one or more
decompositions (one per sequence length T or corpus): "ρ ≥ 0.7", "ρ rises with T",
"ELECTRA is among the two least dependent models". :func:`bootstrap_estimate` evaluates
such a statistic on the point estimate and on every replicate of
:func:`~lmsim.lmd.bootstrap` (``resample="test"``: the fits stay those on all train data,
the test shards are resampled), replicate ``i`` of every decomposition together, and
returns an :class:`lmsim.stats.Estimate` with the percentile interval. With ``widths`` every
R² is first corrected for the over-fitting of least squares (:func:`~lmsim.lmd.debias_r2`,
Stein's factor for ``n_train`` and the basis width), so a group fitted on a few train
sequences per basis dimension is judged on the estimate of its population R², not on its
biased test R².

A test-only bootstrap holds the fit fixed and is too narrow for a claim about the models
(``EVIDENCE.md`` §1): pass bootstraps made with ``resample="both"`` to resample the train
shards too; each replicate is then corrected at its own effective ``n_train`` for each
basis width (:func:`~lmsim.lmd.resampled_n_train`: the ``n`` at which Stein's factor equals
the over-fitting of a fit on repeated shards; every shard once gives ``n_train``, so the
point estimate is the same statistic).

Beyond the paper (which reports point estimates of one split).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

import numpy as np
import pandas as pd

from lmsim.lmd._bootstrap import BootstrapResult
from lmsim.lmd._overfit import _replicate_n_train, debias_r2
from lmsim.stats import Estimate

__all__ = ["View", "bootstrap_estimate", "lowest_margin", "replicate_views"]

_RESAMPLED = {"test": "test shards", "both": "train and test shards", "train": "train shards"}


class View:
    """The R² of one decomposition (or one bootstrap replicate of it) that a claim reads.

    Attributes
    ----------
    group_r2 : pandas.Series of shape (n_models + 1,)
        Group R² per model and their mean under ``"group ρ"`` (Eq. 9-10).
    pairwise_r2 : pandas.DataFrame of shape (n_models, n_models)
        ``[target, basis]`` = R²(target | basis) (the diagonal as fitted).
    """

    __slots__ = ("group_r2", "pairwise_r2")

    def __init__(self, group_r2: pd.Series, pairwise_r2: pd.DataFrame):
        self.group_r2, self.pairwise_r2 = group_r2, pairwise_r2

    @property
    def group_rho(self) -> float:
        """The group correlation ρ (Eq. 10)."""
        return float(self.group_r2["group ρ"])


def _view(group: np.ndarray, pair: np.ndarray, models, n_group, n_pair, widths) -> View:
    """``n_group[i]``: the effective n_train of model i's group fit; ``n_pair[j]``: of a
    pairwise fit on basis model j (scalars broadcast)."""
    if widths is not None:
        w = np.array([widths[m] for m in models], dtype=np.int64)
        group = debias_r2(group, n_group, w.sum() - w)
        pair = debias_r2(pair, np.broadcast_to(n_pair, w.shape)[None, :], w[None, :])
    series = pd.Series(np.append(group, np.mean(group)), index=[*models, "group ρ"])
    return View(series, pd.DataFrame(pair, index=models, columns=models))


def replicate_views(boot: BootstrapResult, widths: Mapping[str, int] | None = None) -> list[View]:
    """The point estimate's :class:`View` followed by one per bootstrap replicate.

    Parameters
    ----------
    boot : BootstrapResult
        From :func:`~lmsim.lmd.bootstrap`. With ``resample="test"`` every replicate keeps
        the estimate's ``n_train``; with the train shards resampled (``"both"``,
        ``"train"``) each replicate is corrected at its own effective ``n_train`` for each
        basis width (:func:`~lmsim.lmd.resampled_n_train` of
        :attr:`BootstrapResult.train_draws`: a resample that repeats shards fits fewer
        distinct sequences and over-fits more, and the correction follows it; every shard
        once gives ``n_train``, the point estimate's).
    widths : mapping of str to int, optional
        Embedding width of every model; when given, every group R² is corrected with
        Stein's factor for ``n_train`` and its basis width (the other models' widths) and
        every pairwise R²(target | basis) with the basis model's width.

    Returns
    -------
    list of View
        ``1 + n_boot`` views.
    """
    dec = boot.estimate
    if widths is not None:
        missing = [m for m in dec.models if m not in widths]
        if missing:
            raise KeyError(f"`widths` lacks the models {missing}; pass one width per model")
    models, n = list(dec.models), dec.n_train
    out = [_view(dec.group_r2[models].to_numpy(), dec.pairwise_r2.to_numpy(), models, n, n, widths)]
    group = boot.group_r2_samples[models].to_numpy()
    n_models = len(models)
    if widths is not None:
        w = np.array([widths[m] for m in models], dtype=np.int64)
        n_reps = _replicate_n_train(boot, np.concatenate([w.sum() - w, w]))
    else:
        n_reps = np.full((len(group), 2 * n_models), float(n))
    for g, p, n_rep in zip(group, boot.pairwise_r2_samples, n_reps):
        out.append(_view(g, p, models, n_rep[:n_models], n_rep[n_models:], widths))
    return out


def bootstrap_estimate(
    stat: Callable[[Mapping[Hashable, View]], float],
    boots: Mapping[Hashable, BootstrapResult],
    n_units: int,
    widths: Mapping[Hashable, Mapping[str, int]] | None = None,
    unit: str | None = None,
) -> Estimate:
    """A statistic of one or more decompositions with its percentile bootstrap interval.

    Parameters
    ----------
    stat : callable
        ``stat(views) -> float`` with ``views[key]`` a :class:`View` of ``boots[key]``.
    boots : mapping of key to BootstrapResult
        Bootstraps with the same ``n_boot`` and ``level`` (e.g. one per T); replicate ``i``
        of each enters replicate ``i`` of the statistic (independent test sets resampled
        side by side).
    n_units : int
        How many units were resampled (the test shards of the smallest test set; with
        the train shards resampled too, the smaller of the train and test shard counts).
    widths : mapping of key to (mapping of str to int), optional
        Per key, every model's width: correct the R² for over-fitting first
        (:func:`replicate_views`).
    unit : str, optional
        What was resampled, as the claim's record names it; default from the bootstraps'
        ``resample``: ``"test shards"``, ``"train and test shards"`` or ``"train shards"``.

    Returns
    -------
    lmsim.stats.Estimate
        ``estimate`` = the statistic on the point estimates; ``draws`` its replicates.
    """
    if not boots:
        raise ValueError("`boots` must hold at least one BootstrapResult")
    sizes = {len(b.group_rho_samples) for b in boots.values()}
    levels = {b.level for b in boots.values()}
    if len(sizes) != 1 or len(levels) != 1:
        raise ValueError(
            f"every bootstrap needs the same n_boot and level, got {sorted(sizes)} and {sorted(levels)}"
        )
    views = {k: replicate_views(b, None if widths is None else widths[k]) for k, b in boots.items()}
    values = np.array(
        [float(stat({k: v[i] for k, v in views.items()})) for i in range(1 + sizes.pop())]
    )
    draws = values[1:][np.isfinite(values[1:])]
    if not np.isfinite(values[0]) or len(draws) < 2:
        raise ValueError("the statistic is not finite on the estimate or on most replicates")
    level = levels.pop()
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    modes = sorted({b.resample or "test" for b in boots.values()})
    what = " / ".join(_RESAMPLED[m] for m in modes)
    unit = what if unit is None else unit
    corrected = ""
    if widths is not None:
        corrected = ", over-fitting-corrected (Stein)"
        if modes != ["test"]:
            corrected = ", over-fitting-corrected (Stein, each replicate at its effective n_train)"
    return Estimate(
        values[0],
        min(low, high),
        max(low, high),
        level=level,
        unit=unit,
        n=int(n_units),
        method=f"percentile bootstrap ({len(draws)} resamples of the {what}{corrected})",
        sd=float(draws.std(ddof=1)),
        draws=draws,
    )


def lowest_margin(group_r2: pd.Series, model: str, k: int = 2) -> float:
    """How far ``model``'s group R² lies below the ``k``-th lowest of the other models'.

    Positive exactly when ``model`` is among the ``k`` least dependent models of the group
    (strictly below the others' ``k``-th lowest value); ``"group ρ"`` is ignored.

    Parameters
    ----------
    group_r2 : pandas.Series
        Group R² per model (a :attr:`View.group_r2` or :attr:`Decomposition.group_r2`).
    model : str
    k : int, default=2
    """
    others = group_r2.drop(index=[model, "group ρ"], errors="ignore")
    if not 1 <= int(k) <= len(others):
        raise ValueError(f"`k` must lie in [1, {len(others)}] (the other models), got {k!r}")
    return float(np.sort(others.to_numpy())[int(k) - 1] - group_r2[model])
