"""Same-pipeline nulls: the page's own statistic on structureless inputs of the same shape."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lmsim.stats._estimate import (
    Estimate,
    _check_count,
    _check_level,
    _finite_draws,
    _percentile_interval,
    _rng,
)
from lmsim.stats._floors import _draw
from lmsim.stats._resample import _rows_of

_METHODS = ("shuffle", "gaussian")


@dataclass(frozen=True)
class Null:
    """The distribution of a statistic under a structureless null, and the bar a rule uses.

    Attributes
    ----------
    distribution : Estimate
        ``estimate`` the mean of the null draws, ``low``/``high`` their central ``level``
        range, ``draws`` every value, ``unit`` ``"null draws"``.
    q : float
        The quantile the rule uses (0.95: one-sided at 5 %).
    quantile : float
        That quantile of the draws: the bar (:meth:`rule`).
    """

    distribution: Estimate
    q: float
    quantile: float

    @property
    def mean(self) -> float:
        return self.distribution.estimate

    def rule(self, op: str = ">", digits: int = 4) -> str:
        """The rule ``"> bar"`` (or ``op``) with the null's quantile as the threshold."""
        if op not in (">", ">=", "<", "<="):
            raise ValueError(f"`op` must be '>', '>=', '<' or '<=', got {op!r}")
        return f"{op} {self.quantile:.{digits}f}"

    def above(self, value: float) -> float:
        """``value`` minus the null's mean: the above-floor value to compare between
        things whose floors differ."""
        return float(value) - self.mean

    def format(self, digits: int = 3) -> str:
        return (
            f"mean {self.mean:.{digits}f}, {self.q:.0%} quantile {self.quantile:.{digits}f} "
            f"({self.distribution.n} draws)"
        )

    def to_record(self) -> dict:
        out = {k: v for k, v in self.distribution.to_record().items() if k != "values"}
        return {**out, "q": self.q, "quantile": self.quantile}


def _spectrum_of(x: np.ndarray, weights) -> np.ndarray:
    x = x.reshape(len(x), -1).astype(np.float64)
    if weights is None:
        cov = np.cov(x, rowvar=False) if len(x) > 1 else np.zeros((x.shape[1],) * 2)
    else:
        w = weights / weights.sum()
        centred = x - w @ x
        cov = (centred * w[:, None]).T @ centred
    return np.clip(np.linalg.eigvalsh(np.atleast_2d(cov)), 0, None)


def pipeline_null(
    statistic: Callable[..., float],
    *arrays,
    method: str = "shuffle",
    keep: Sequence[int] = (),
    weights=None,
    rotate: bool = False,
    q: float = 0.95,
    n_draws: int = 100,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Null:
    """Run the page's own statistic on structureless inputs of the same shape and weights.

    A chance floor computed by a large-sample formula, or by a different pipeline, answers
    another question: at a page's n, widths and occurrence weights a similarity or a
    selectivity can sit well above its asymptotic zero. This helper runs ``statistic``
    itself on inputs that keep everything but the structure the claim is about.

    Parameters
    ----------
    statistic : callable
        ``statistic(*arrays) -> float``, exactly as the page computes its estimate.
    *arrays : array_like, each of shape (n_rows, ...)
        The page's inputs.
    method : {"shuffle", "gaussian"}
        ``"shuffle"``: every array after the first (except ``keep``) gets its own random
        permutation of rows; the first stays, so each keeps its own distribution and only
        the pairing of rows is broken (:func:`shuffled_floor` for two arrays).
        ``"gaussian"``: every array not in ``keep`` is replaced by Gaussian data of its
        shape with the eigen-spectrum of its covariance (weighted by ``weights``), randomly
        rotated when ``rotate`` (:func:`chance_floor` for two arrays without weights).
    keep : sequence of int
        Positions of arrays passed through unchanged: weights, token counts, labels of
        sentences.
    weights : array_like of shape (n_rows,), optional
        Occurrence weights of the rows for the Gaussian spectra (pass them in ``arrays``
        and ``keep`` too when the statistic uses them).
    rotate : bool
    q : float
        The quantile the rule uses (recorded, with the mean).
    n_draws, level, seed
        Null draws; coverage of their central range; randomness.

    Returns
    -------
    Null
        ``null.rule(">")`` is the rule string; pass ``null=null`` to a claim so that the
        record carries the mean and the quantile.

    Notes
    -----
    Draw order: for each draw, each array in order (the first skipped under ``"shuffle"``,
    ``keep`` skipped always) draws ``rng.permutation(n_rows)``, or
    ``rng.standard_normal(shape)`` and then its rotation when ``rotate``.
    """
    if method not in _METHODS:
        raise ValueError(f"`method` must be one of {_METHODS}, got {method!r}")
    arrays, n_rows = _rows_of(arrays, "pipeline_null")
    keep = {int(k) for k in keep}
    if not keep <= set(range(len(arrays))):
        raise ValueError(f"`keep` names positions outside the {len(arrays)} arrays: {keep}")
    n_draws, rng = _check_count("n_draws", n_draws, 2), _rng(seed)
    _check_level(level)
    if not 0 < q < 1:
        raise ValueError(f"`q` must be in (0, 1), got {q}")
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (n_rows,) or (weights < 0).any() or not weights.sum() > 0:
            raise ValueError(
                f"`weights` must be {n_rows} non-negative numbers, not all 0, got shape "
                f"{weights.shape}"
            )
    varied = [
        i for i in range(len(arrays)) if i not in keep and not (method == "shuffle" and i == 0)
    ]
    if not varied:
        raise ValueError("nothing is left to randomise: every array is kept")
    spectra = {}
    if method == "gaussian":
        for i in varied:
            spectra[i] = _spectrum_of(np.asarray(arrays[i]), weights)

    def one_draw() -> float:
        made = list(arrays)
        for i in varied:
            if method == "shuffle":
                made[i] = arrays[i][rng.permutation(n_rows)]
            else:
                shape = arrays[i].shape
                width = int(np.prod(shape[1:])) if len(shape) > 1 else 1
                made[i] = _draw(rng, n_rows, width, spectra[i], rotate).reshape(shape)
        return float(statistic(*made))

    draws = _finite_draws([one_draw() for _ in range(n_draws)], "null draws")
    low, high = _percentile_interval(draws, level)
    what = "rows shuffled" if method == "shuffle" else "Gaussian, the same spectra"
    distribution = Estimate(
        float(draws.mean()),
        low,
        high,
        level,
        "null draws",
        len(draws),
        f"same-pipeline null ({what}{', weighted' if weights is not None else ''}; "
        f"{n_draws} draws, n={n_rows})",
        sd=float(draws.std(ddof=1)),
        draws=draws,
    )
    return Null(distribution, float(q), float(np.quantile(draws, q)))
