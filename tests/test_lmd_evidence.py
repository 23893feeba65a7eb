"""lmsim.lmd claim estimates: statistics of bootstrapped decompositions with intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _helpers import SEEDS
from test_lmd_overfit import gaussian_group, shards

from lmsim.lmd import (
    bootstrap,
    bootstrap_estimate,
    debias_r2,
    lowest_margin,
    replicate_views,
)
from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _boot(seed, widths=(12, 8, 16), n_boot=30):
    train, test, _ = gaussian_group(seed, 400, 400, widths=widths)
    return bootstrap(
        [Moments.from_arrays(train)],
        shards(test, 10),
        n_boot=n_boot,
        seed=seed,
        resample="test",
        progress=False,
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_the_group_rho_statistic_is_the_bootstraps_own_interval(seed):
    boot = _boot(seed)
    est = bootstrap_estimate(lambda v: v["a"].group_rho, {"a": boot}, n_units=10)
    assert est.estimate == pytest.approx(boot.estimate.group_rho)
    assert (est.low, est.high) == pytest.approx(boot.group_rho_ci())
    assert est.unit == "test shards" and est.n == 10 and len(est.draws) == 30


@pytest.mark.parametrize("seed", SEEDS)
def test_corrected_views_match_stein_cell_by_cell(seed):
    boot = _boot(seed)
    widths = dict(zip(boot.estimate.models, (12, 8, 16)))
    views = replicate_views(boot, widths)
    assert len(views) == 31
    n = boot.estimate.n_train
    for i, view in enumerate(views):
        group = boot.estimate.group_r2 if i == 0 else boot.group_r2_samples.iloc[i - 1]
        pair = boot.estimate.pairwise_r2.to_numpy() if i == 0 else boot.pairwise_r2_samples[i - 1]
        for j, m in enumerate(boot.estimate.models):
            basis = sum(widths.values()) - widths[m]
            assert view.group_r2[m] == pytest.approx(debias_r2(group[m], n, basis))
            for k, b in enumerate(boot.estimate.models):
                want = debias_r2(pair[j, k], n, widths[b])
                assert view.pairwise_r2.loc[m, b] == pytest.approx(want)
        assert view.group_rho == pytest.approx(view.group_r2.drop("group ρ").mean())


def test_replicates_of_two_bootstraps_are_paired_by_index():
    a, b = _boot(0), _boot(1)
    est = bootstrap_estimate(lambda v: v["a"].group_rho - v["b"].group_rho, {"a": a, "b": b}, 10)
    want = a.group_rho_samples - b.group_rho_samples
    np.testing.assert_allclose(np.sort(est.draws), np.sort(want))
    with pytest.raises(ValueError, match="same n_boot"):
        bootstrap_estimate(lambda v: 0.0, {"a": a, "c": _boot(2, n_boot=10)}, 10)


def test_lowest_margin_against_ranks():
    rng = np.random.default_rng(0)
    for _ in range(50):
        r2 = pd.Series(rng.uniform(size=6), index=list("abcdef"))
        r2["group ρ"] = r2.mean()
        for k in (1, 2, 3):
            among = r2.drop("group ρ").rank()["c"] <= k
            assert (lowest_margin(r2, "c", k) > 0) == among
    with pytest.raises(ValueError, match="`k`"):
        lowest_margin(r2, "c", 6)
