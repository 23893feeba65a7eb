"""Resampling, intervals, nulls and chance floors for the book's claims (numpy only).

Every function takes its randomness from a seeded :class:`numpy.random.Generator`
(``np.random.default_rng(seed)``), computes in float64 and returns an :class:`Estimate`: a
point estimate on all the data with an interval over a *named* resampling unit (test
examples, sentences, seeds, random draws of unrelated data). :mod:`lmsim.claims` turns an
estimate and a rule (``"> 0"``, ``">= 0.7"``, ``"within [a, b]"``) into a verdict.

What is resampled is the caller's choice and is recorded in ``Estimate.unit``: rows of the
arrays (examples, sentences, shards), or whole groups of rows (``groups=``: the tokens of a
sentence, the occurrences of a word type), or seeds. Similarity measures are passed in as
callables ``measure_fn(X, Y) -> float`` (e.g. :func:`lmsim.metrics.linear_cka`), so this
module imports nothing but numpy.

Draw order (so that a naive loop reproduces every interval): draw ``b`` of
:func:`bootstrap` takes ``rng.integers(0, n_units, n_units)`` and nothing else;
:func:`paired_bootstrap` then draws the seed indices of A and of B in that order (only with
``seeds="resample"``); :func:`permutation_test` draws ``rng.permutation(n_a + n_b)``
(unpaired) or ``rng.random(n) < 0.5`` (paired swaps); :func:`chance_floor` draws X then Y
(``rng.standard_normal``, then the rotation of each when ``rotate``); :func:`shuffled_floor`
draws ``rng.permutation(n)``.

References
----------
Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, ch. 13 (percentile
intervals), ch. 15 (permutation tests). Spearman (1910), Brown (1910): the Spearman-Brown
prophecy formula. Abramowitz & Stegun (1964), 26.7.3-26.7.4 (Student's t distribution for
integer degrees of freedom).
"""

from lmsim.stats._estimate import Estimate, Test, exact
from lmsim.stats._floors import chance_floor, shuffled_floor
from lmsim.stats._reliability import (
    seed_summary,
    spearman_brown,
    split_half_reliability,
    t_quantile,
    with_seed_spread,
)
from lmsim.stats._resample import bootstrap, paired_bootstrap, permutation_test

__all__ = [
    "Estimate",
    "Test",
    "exact",
    "bootstrap",
    "paired_bootstrap",
    "permutation_test",
    "chance_floor",
    "shuffled_floor",
    "split_half_reliability",
    "spearman_brown",
    "seed_summary",
    "t_quantile",
    "with_seed_spread",
]
