"""Chance floors of similarity measures: unrelated random data, or shuffled rows."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lmsim.stats._estimate import (
    Estimate,
    _check_count,
    _check_level,
    _finite_draws,
    _percentile_interval,
    _rng,
)


def _random_orthogonal(d: int, rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))  # Haar-distributed (Mezzadri, 2007)


def _draw(rng, n: int, d: int, spectrum, rotate: bool) -> np.ndarray:
    x = rng.standard_normal((n, d))
    if spectrum is not None:
        x = x * np.sqrt(spectrum)
    if rotate:
        x = x @ _random_orthogonal(d, rng)
    return x


def _spectrum(name: str, spectrum, d: int):
    if spectrum is None:
        return None
    spectrum = np.asarray(spectrum, dtype=np.float64)
    if spectrum.shape != (d,) or (spectrum < 0).any() or not np.isfinite(spectrum).all():
        raise ValueError(
            f"`{name}` must hold {d} non-negative variances (the covariance's eigenvalues), "
            f"got shape {spectrum.shape}"
        )
    return spectrum


def chance_floor(
    measure_fn: Callable[[np.ndarray, np.ndarray], float],
    n: int,
    d_x: int,
    d_y: int,
    *,
    spectrum_x=None,
    spectrum_y=None,
    rotate: bool = False,
    n_draws: int = 100,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """What a similarity measure gives between *unrelated* random data of a page's shape.

    A similarity of two representations means something only above this floor: with few
    rows per dimension, measures such as SVCCA or mean CCA are large between independent
    noise.

    Parameters
    ----------
    measure_fn : callable
        ``measure_fn(X, Y) -> float`` with X of shape (n, d_x) and Y of shape (n, d_y).
    n, d_x, d_y : int
        Rows (words, tokens) and widths of the page's data.
    spectrum_x, spectrum_y : array_like of shape (d_x,) / (d_y,), optional
        Eigenvalues of the covariance to match (e.g. of the real activations); isotropic
        Gaussian data by default.
    rotate : bool
        Rotate each draw by a random orthogonal matrix (for measures that are not
        rotation invariant, e.g. neuron-level ones, so no axis is privileged).
    n_draws, level, seed
        Independent (X, Y) pairs; coverage of the central interval; randomness.

    Returns
    -------
    Estimate
        ``estimate`` the mean over draws, ``low``/``high`` the central ``level`` range of
        the draws (not an interval of the mean), ``draws`` every value
        (``floor.quantile(0.95)`` for a one-sided comparison).
    """
    n, d_x, d_y = (_check_count(k, v) for k, v in (("n", n), ("d_x", d_x), ("d_y", d_y)))
    n_draws, rng = _check_count("n_draws", n_draws, 2), _rng(seed)
    _check_level(level)
    spectrum_x = _spectrum("spectrum_x", spectrum_x, d_x)
    spectrum_y = _spectrum("spectrum_y", spectrum_y, d_y)
    draws = []
    for _ in range(n_draws):
        x = _draw(rng, n, d_x, spectrum_x, rotate)
        y = _draw(rng, n, d_y, spectrum_y, rotate)
        draws.append(float(measure_fn(x, y)))
    draws = _finite_draws(draws, "random draws")
    low, high = _percentile_interval(draws, level)
    shaped = "given spectra" if spectrum_x is not None or spectrum_y is not None else "isotropic"
    return Estimate(
        float(draws.mean()),
        low,
        high,
        level,
        "random draws",
        n_draws,
        f"chance floor: independent Gaussian data ({shaped}), n={n}, d={d_x} and {d_y}",
        sd=float(draws.std(ddof=1)),
        draws=draws,
    )


def shuffled_floor(
    measure_fn: Callable[[np.ndarray, np.ndarray], float],
    X,
    Y,
    *,
    n_draws: int = 100,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """A similarity measure between the real X and the real Y with its rows shuffled.

    Keeps each side's own distribution (spectrum, outlier dimensions, frequency effects)
    and breaks only the pairing of rows: the floor of "these two representations of the
    same words agree".

    Parameters
    ----------
    measure_fn : callable
        ``measure_fn(X, Y) -> float``.
    X : array_like of shape (n, d_x)
    Y : array_like of shape (n, d_y)
    n_draws, level, seed
        Permutations of Y's rows; coverage; randomness.

    Returns
    -------
    Estimate
        As for :func:`chance_floor`.
    """
    X, Y = np.asarray(X), np.asarray(Y)
    if X.ndim != 2 or Y.ndim != 2 or len(X) != len(Y):
        raise ValueError(f"`X` and `Y` must be 2-D with the same rows, got {X.shape} and {Y.shape}")
    n_draws, rng = _check_count("n_draws", n_draws, 2), _rng(seed)
    _check_level(level)
    draws = _finite_draws(
        [float(measure_fn(X, Y[rng.permutation(len(Y))])) for _ in range(n_draws)],
        "shuffles",
    )
    low, high = _percentile_interval(draws, level)
    return Estimate(
        float(draws.mean()),
        low,
        high,
        level,
        "row shuffles",
        n_draws,
        f"shuffled floor: rows of Y permuted, n={len(X)}",
        sd=float(draws.std(ddof=1)),
        draws=draws,
    )
