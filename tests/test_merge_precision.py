"""float64 RegMean against the released code's float32 torch.inverse path (_precision)."""

from __future__ import annotations

import numpy as np
import pytest

from lmsim.papers.jin2023_regmean import (
    inverse_float32_regmean,
    precision_table,
    relative_difference,
)


def _gram(rng, n, d, rank=None):
    """A Gram of random inputs; with ``rank``, of nearly rank-``rank`` inputs (ill-conditioned)."""
    x = rng.normal(size=(n, d))
    if rank is not None:
        x = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d)) + 1e-3 * x
    return x.T @ x / n


def _naive(weights, grams, alpha):
    """Eq. 1-2 by numpy's float64 inverse (the formula, no solver tricks)."""
    scaled = [alpha * g + (1 - alpha) * np.diag(np.diag(g)) for g in grams]
    return (np.linalg.inv(sum(scaled)) @ sum(g @ w.T for g, w in zip(scaled, weights))).T


@pytest.mark.parametrize("alpha", [0.5, 0.9, 1.0])
def test_float32_path_is_the_formula_on_well_conditioned_grams(alpha):
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=(5, 8)) for _ in range(3)]
    grams = [_gram(rng, 200, 8) for _ in range(3)]
    out = inverse_float32_regmean(weights, grams, alpha).numpy()
    assert out.shape == (5, 8)
    assert relative_difference(out, _naive(weights, grams, alpha)) < 1e-5


def test_table_rows_and_ill_conditioning_costs_float32():
    rng = np.random.default_rng(1)
    d = 32
    weights = [{"good": rng.normal(size=(4, d)), "bad": rng.normal(size=(4, d))} for _ in range(2)]
    grams = [{"good": _gram(rng, 500, d), "bad": _gram(rng, 500, d, rank=4)} for _ in range(2)]
    rows = precision_table(weights, grams, (0.9, 1.0))
    assert [(r["alpha"], r["layer"]) for r in rows] == [
        (0.9, "good"),
        (0.9, "bad"),
        (1.0, "good"),
        (1.0, "bad"),
    ]
    by = {(r["alpha"], r["layer"]): r for r in rows}
    assert by[1.0, "good"]["relative difference"] < 1e-5
    # alpha = 0.9 regularises the sum (its diagonal dominates): float32 stays close;
    # alpha = 1 leaves it near-singular (condition ~4e7): float32's inverse is far off.
    assert by[0.9, "bad"]["condition number"] < 1e4
    assert by[0.9, "bad"]["relative difference"] < 1e-3
    assert by[1.0, "bad"]["condition number"] > 1e7
    assert by[1.0, "bad"]["relative difference"] > 0.1


def test_relative_difference_is_relative_to_the_reference():
    assert relative_difference([3.0, 4.0], [0.0, 5.0]) == pytest.approx(np.sqrt(10) / 5)
