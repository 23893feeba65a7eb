"""Percentile bootstrap of the decomposition over shards of moments (beyond the paper)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from lmsim.lmd._decompose import Decomposition, _decompose_problem
from lmsim.lmd._problem import _as_moments, _check_ridge, _Problem, _resolve_models, _Stats
from lmsim.moments import Moments


@dataclass
class BootstrapResult:
    """Percentile bootstrap over shards of :func:`decompose`'s statistics.

    Attributes
    ----------
    estimate : Decomposition
        The point estimate on all shards merged.
    group_r2_samples : pandas.DataFrame of shape (n_boot, n_models)
    group_rho_samples : ndarray of shape (n_boot,)
    pairwise_r2_samples : ndarray of shape (n_boot, n_models, n_models)
    level : float
        Coverage of the intervals, e.g. 0.95.
    resample : {"both", "train", "test"} or None
        Which shards were resampled (None: not recorded).
    n_train_samples : ndarray of shape (n_boot,) or None
        Each replicate's effective number of train samples, Kish's
        ``(Σ_k c_k n_k)² / Σ_k c_k² n_k`` for shard ``k`` of ``n_k`` samples drawn ``c_k``
        times: a shard drawn twice enters the fit with weight 2, and least squares on
        weighted rows has the estimation variance of ``n_eff`` distinct rows (about
        ``n / 2`` for a multinomial draw of as many shards as there are). Equal to
        ``n_train`` when the train shards are not resampled. Descriptive only: near
        ``n_train ≈ p`` it over-states how much a replicate over-fits (a row drawn twice
        does not cost as much as losing a row), so the over-fitting correction of a
        replicate uses :func:`~lmsim.lmd.resampled_n_train` on :attr:`train_draws`.
    train_draws : ndarray of shape (n_boot, n_shards) or None
        How many times each train shard was drawn in each replicate (all ones when the
        train shards are not resampled).
    train_shard_sizes : ndarray of shape (n_shards,) or None
        Samples per train shard, in the order of :attr:`train_draws`.
    """

    estimate: Decomposition
    group_r2_samples: pd.DataFrame
    group_rho_samples: np.ndarray
    pairwise_r2_samples: np.ndarray
    level: float
    resample: str | None = None
    n_train_samples: np.ndarray | None = None
    train_draws: np.ndarray | None = None
    train_shard_sizes: np.ndarray | None = None

    @property
    def _quantiles(self) -> tuple[float, float]:
        alpha = (1 - self.level) / 2
        return alpha, 1 - alpha

    def group_r2_ci(self) -> pd.DataFrame:
        """Columns ``estimate``, ``lower``, ``upper``, one row per model."""
        lo, hi = np.quantile(self.group_r2_samples.to_numpy(), self._quantiles, axis=0)
        return pd.DataFrame(
            {"estimate": self.estimate.group_r2, "lower": lo, "upper": hi},
            index=self.estimate.group_r2.index,
        )

    def group_rho_ci(self) -> tuple[float, float]:
        """``(lower, upper)`` of the group correlation."""
        lo, hi = np.quantile(self.group_rho_samples, self._quantiles)
        return float(lo), float(hi)

    def pairwise_r2_ci(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``(lower, upper)`` tables shaped like ``estimate.pairwise_r2``."""
        return self._pair_ci(self.pairwise_r2_samples, self.estimate.pairwise_r2)

    def pairwise_rho_ci(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``(lower, upper)`` tables of the symmetric pairwise correlation."""
        samples = (self.pairwise_r2_samples + self.pairwise_r2_samples.transpose(0, 2, 1)) / 2
        return self._pair_ci(samples, self.estimate.pairwise_rho)

    def _pair_ci(self, samples, like: pd.DataFrame):
        lo, hi = np.quantile(samples, self._quantiles, axis=0)
        return (
            pd.DataFrame(lo, index=like.index, columns=like.columns),
            pd.DataFrame(hi, index=like.index, columns=like.columns),
        )


class _ShardPool:
    """Counts ``(S,)``, means ``(S, D)`` and co-moments of ``S`` shards, ready to resample."""

    # Stack the co-moments (one tensordot per replicate) when they fit in this many bytes.
    stack_limit_bytes = 1 << 30

    def __init__(self, shards, name: str, blocks: list[str], device, min_shards: int = 2):
        if isinstance(shards, (Moments, Mapping)) or len(shards) < min_shards:
            raise ValueError(
                f"`{name}` must be a list of at least {min_shards} shards (Moments) to resample"
            )
        moms = [_as_moments(shard, f"{name}[{k}]", None) for k, shard in enumerate(shards)]
        for k, mom in enumerate(moms):
            missing = [b for b in blocks if b not in mom.dims]
            if missing:
                raise KeyError(f"`{name}[{k}]` lacks blocks {missing}")
        moms = [mom for mom in moms if mom.n > 0]
        if len(moms) < min_shards:
            raise ValueError(
                f"`{name}` holds fewer than {min_shards} non-empty shards: nothing to resample"
            )
        self.counts = torch.tensor([m.n for m in moms], dtype=torch.float64, device=device)
        self.means = torch.stack([m.mean(blocks).to(device) for m in moms])
        # All blocks in their order: the shard's own co-moment, not a gathered copy (a
        # pool of paper-size shards would otherwise hold every co-moment twice).
        whole = [list(m.names) == list(blocks) for m in moms]
        comoments = [
            (m._comoment if w else m.comoment(blocks)).to(device) for m, w in zip(moms, whole)
        ]
        dim = self.means.shape[1]
        if len(moms) * dim * dim * 8 <= self.stack_limit_bytes:
            self.comoments: torch.Tensor | list[torch.Tensor] = torch.stack(comoments)
        else:
            self.comoments = comoments

    def __len__(self) -> int:
        return len(self.counts)

    def effective_n(self, draws: np.ndarray) -> float:
        """Kish's effective sample size of the union of ``draws[k]`` copies of shard ``k``:
        ``(Σ c_k n_k)² / Σ c_k² n_k``."""
        counts = self.counts.cpu().numpy()
        draws = np.asarray(draws, dtype=np.float64)
        return float((draws @ counts) ** 2 / ((draws**2) @ counts))

    def merge(self, draws: np.ndarray) -> _Stats:
        """Moments of the union of ``draws[k]`` copies of shard ``k`` (Chan et al. merge).

        ``M = Σ c_k M_k + Σ c_k n_k (μ_k - μ)(μ_k - μ)ᵀ``, centred on the pooled mean so
        large offsets do not cancel.
        """
        draws_t = torch.as_tensor(np.asarray(draws), dtype=torch.float64, device=self.means.device)
        weights = draws_t * self.counts
        n = float(weights.sum())
        mean = weights @ self.means / n
        deltas = self.means - mean
        comoment = (deltas.T * weights) @ deltas
        if isinstance(self.comoments, torch.Tensor):
            comoment += torch.tensordot(draws_t, self.comoments, dims=1)
        else:
            for draw, part in zip(draws, self.comoments):
                if draw:
                    comoment.add_(part, alpha=float(draw))
        return _Stats(int(round(n)), mean, comoment)


def _draw(rng: np.random.Generator, n_shards: int) -> np.ndarray:
    """How many times each of ``n_shards`` shards is drawn in one bootstrap resample."""
    return rng.multinomial(n_shards, np.full(n_shards, 1 / n_shards))


def bootstrap(
    train_shards: Sequence,
    test_shards: Sequence,
    n_boot: int = 200,
    seed: int = 0,
    level: float = 0.95,
    ridge: float = 1e-6,
    regulariser: str = "code",
    models=None,
    device=None,
    progress: bool = True,
    resample: str = "both",
) -> BootstrapResult:
    """Percentile confidence intervals for every group R², pairwise R² and ρ.

    Each replicate draws as many shards as there are, with replacement, merges their
    moments (weighted sums: no pass over the data) and reruns :func:`decompose`. Shards
    should be exchangeable (equal-sized random batches), and there should be enough of
    them (say >= 10) for the resampling to mean much. Beyond the paper, which reports
    point estimates only.

    What is resampled decides what the interval covers:

    - ``"test"``: the fit stays the one on all train data; the interval covers the
      sampling noise of the test score only. Cheap (no refit) and centred on the estimate.
    - ``"train"`` / ``"both"``: the fit is redone on resampled train data, so the interval
      also covers the variability of W. Caveat: a resample repeats shards, so it holds
      only about 63 % distinct samples; when ``n_train`` is only a few times the basis
      width the refitted models overfit more than the original one and the test R² of the
      replicates sit *below* the estimate (the percentile interval may then exclude it).
      Trust the raw intervals only when ``n_train`` is much larger than every basis
      width; the over-fitting-corrected ones (:func:`~lmsim.lmd.replicate_views`,
      :func:`~lmsim.lmd.bootstrap_estimate` with ``widths``) correct each replicate at
      its effective ``n_train`` for each basis width (:func:`~lmsim.lmd.resampled_n_train`
      of :attr:`BootstrapResult.train_draws`).

    Parameters
    ----------
    train_shards, test_shards : list of Moments
        Per-shard moments with the same blocks (``extract_moments(...,
        return_shards=True)``).
    n_boot : int, default=200
        Number of bootstrap replicates.
    seed : int, default=0
    level : float, default=0.95
        Coverage of the percentile intervals.
    ridge, regulariser, models, device
        As in :func:`decompose`.
    progress : bool, default=True
        Show a tqdm bar over the replicates.
    resample : {"both", "train", "test"}, default="both"
        Which shards are resampled (the others are used whole in every replicate).

    Returns
    -------
    BootstrapResult
    """
    ridge = _check_ridge(ridge, regulariser)
    if resample not in ("both", "train", "test"):
        raise ValueError(f"`resample` must be 'both', 'train' or 'test', got {resample!r}")
    if int(n_boot) < 2:
        raise ValueError(f"`n_boot` must be >= 2, got {n_boot!r}")
    if not 0 < level < 1:
        raise ValueError(f"`level` must lie in (0, 1), got {level!r}")
    if isinstance(train_shards, (Moments, Mapping)) or not len(train_shards):
        raise ValueError("`train_shards` must be a non-empty list of Moments")
    first = _as_moments(train_shards[0], "train_shards[0]", None)
    model_map = _resolve_models(models, first)
    blocks = list(model_map.values())
    device = torch.device(device) if device is not None else first.device
    resample_train, resample_test = resample in ("both", "train"), resample in ("both", "test")
    train_pool = _ShardPool(train_shards, "train_shards", blocks, device, 1 + resample_train)
    test_pool = _ShardPool(test_shards, "test_shards", blocks, device, 1 + resample_test)
    # With the train set fixed every replicate has the same fits: solve them once.
    fit_cache = None if resample_train else {}
    slices, start = {}, 0
    for label, block in model_map.items():
        slices[label] = slice(start, start + first.dims[block])
        start += first.dims[block]

    def run(train_counts, test_counts, quiet=True):
        prob = _Problem.from_stats(
            train_pool.merge(train_counts),
            test_pool.merge(test_counts),
            slices,
            device,
        )
        with warnings.catch_warnings():
            if quiet:  # the point estimate already warned once
                warnings.simplefilter("ignore", UserWarning)
            return _decompose_problem(prob, ridge, regulariser, False, True, False, fit_cache)

    estimate = run(np.ones(len(train_pool), int), np.ones(len(test_pool), int), quiet=False)
    rng = np.random.default_rng(seed)
    group, rho, pair, n_eff, train_draws = [], [], [], [], []
    for _ in tqdm(range(int(n_boot)), desc="LMD bootstrap", disable=not progress):
        train_counts = _draw(rng, len(train_pool)) if resample_train else np.ones(len(train_pool))
        test_counts = _draw(rng, len(test_pool)) if resample_test else np.ones(len(test_pool))
        n_eff.append(train_pool.effective_n(train_counts))
        train_draws.append(np.asarray(train_counts, dtype=np.int64))
        dec = run(train_counts, test_counts)
        group.append(dec.group_r2.to_numpy())
        rho.append(dec.group_rho)
        pair.append(dec.pairwise_r2.to_numpy())
    return BootstrapResult(
        estimate=estimate,
        group_r2_samples=pd.DataFrame(group, columns=estimate.group_r2.index),
        group_rho_samples=np.asarray(rho),
        pairwise_r2_samples=np.stack(pair),
        level=float(level),
        resample=resample,
        n_train_samples=np.asarray(n_eff),
        train_draws=np.stack(train_draws),
        train_shard_sizes=train_pool.counts.cpu().numpy().astype(np.int64),
    )
