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
draws ``rng.permutation(n)``; :func:`hierarchical_bootstrap`, :func:`cross_fitted_correlation`
and :func:`pipeline_null` document theirs.

The designs behind the intervals (``docs/design.md``, "Evidence designs"; the checklist
``EVIDENCE.md``):

- the independent unit: :func:`hierarchical_bootstrap` (models, then layers; tasks as
  strata, then the examples that enter several pairs, as one unit each);
- a same-text comparison of two runs: :func:`cross_fitted_correlation` (disjoint halves,
  and the split-half reliabilities of the same halves as its real ceiling);
- equivalence: :func:`tost` and :func:`margin_bounds` ("within ±m", "no worse than m",
  "stable"; absolute or relative margins);
- nulls through the page's own pipeline at its own size: :func:`pipeline_null`;
- power: :func:`power_note` (the smallest effect detected with 80 % power and what would
  settle an inconclusive claim, from the variance components);
- families of claims: :func:`holm` and :func:`one_sided_p`.

References
----------
Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, ch. 13 (percentile
intervals), ch. 15 (permutation tests). Spearman (1910), Brown (1910): the Spearman-Brown
prophecy formula. Abramowitz & Stegun (1964), 26.7.3-26.7.4 (Student's t distribution for
integer degrees of freedom). Davison & Hinkley (1997), §3.8 (hierarchical data). Schuirmann
(1987) (two one-sided tests). Holm (1979) (step-down multiple testing). Spearman (1904)
(attenuation).
"""

from lmsim.stats._crossfit import CrossFit, cross_fitted_correlation
from lmsim.stats._equivalence import Equivalence, margin_bounds, tost
from lmsim.stats._estimate import Estimate, Test, exact
from lmsim.stats._floors import chance_floor, shuffled_floor
from lmsim.stats._hierarchical import hierarchical_bootstrap
from lmsim.stats._nulls import Null, pipeline_null
from lmsim.stats._power import (
    Power,
    holm,
    normal_quantile,
    one_sided_p,
    power_note,
    standard_error,
)
from lmsim.stats._reliability import (
    jackknife,
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
    "jackknife",
    "paired_bootstrap",
    "permutation_test",
    "chance_floor",
    "shuffled_floor",
    "split_half_reliability",
    "spearman_brown",
    "seed_summary",
    "t_quantile",
    "with_seed_spread",
    "hierarchical_bootstrap",
    "CrossFit",
    "cross_fitted_correlation",
    "Equivalence",
    "margin_bounds",
    "tost",
    "Null",
    "pipeline_null",
    "Power",
    "power_note",
    "standard_error",
    "normal_quantile",
    "one_sided_p",
    "holm",
]
