"""Chance floors in the moment form (lmsim.metrics.floors) against the raw-data reference."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from lmsim.metrics import floors as floors_mod
from lmsim.metrics.floors import (
    _reference_chance_floors,
    chance_floors,
    n_null_blocks,
    null_comoment,
)
from lmsim.metrics.pairwise import MOMENT_METRICS, PREPARED_RAW_METRICS

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize(("n", "dim"), [(30, 6), (6, 12)])  # Bartlett (n − 1 ≥ d), direct
def test_null_comoment_has_the_wishart_moments(n, dim):
    """E W = (n − 1) I; Var W_ij = n − 1 off the diagonal, 2 (n − 1) on it (Wishart(n − 1, I))."""
    rng = np.random.default_rng(0)
    draws = np.stack([null_comoment(n, dim, rng) for _ in range(4000)])
    dof = n - 1
    assert np.allclose(draws, np.swapaxes(draws, 1, 2))
    mean, var = draws.mean(axis=0), draws.var(axis=0)
    se_mean = np.sqrt(np.where(np.eye(dim, dtype=bool), 2 * dof, dof) / len(draws))
    assert np.abs(mean - dof * np.eye(dim)).max() < 5 * se_mean.max()
    off = ~np.eye(dim, dtype=bool)
    assert var[off].mean() == pytest.approx(dof, rel=0.05)
    assert np.diag(var).mean() == pytest.approx(2 * dof, rel=0.06)
    # rank n − 1 at most, as centred data of n rows
    assert np.linalg.matrix_rank(draws[0]) == min(dof, dim)


def test_bartlett_matches_direct_sampling_in_distribution():
    """Eigenvalue means of both samplers agree (same Wishart) within Monte-Carlo error."""
    rng = np.random.default_rng(1)
    n, dim, reps = 12, 5, 3000
    bart = np.stack(
        [np.linalg.eigvalsh(floors_mod._bartlett(n - 1, dim, rng)) for _ in range(reps)]
    )
    direct = []
    for _ in range(reps):
        g = rng.standard_normal((n - 1, dim))
        direct.append(np.linalg.eigvalsh(g.T @ g))
    direct = np.stack(direct)
    se = np.sqrt(bart.var(axis=0) / reps + direct.var(axis=0) / reps)
    assert np.all(np.abs(bart.mean(axis=0) - direct.mean(axis=0)) < 4.5 * se)


@pytest.mark.parametrize("n_draws", [1, 2, 3, 20, 21, 22])
def test_enough_blocks_for_the_draws(n_draws):
    k = n_null_blocks(n_draws)
    assert k * (k - 1) // 2 >= n_draws > (k - 1) * (k - 2) // 2 or k == 2


MEASURES = {
    "linear_cka": {},
    "svcca": {},
    "pwcca": {},
    "neuronsim": {},
    "mixedsim": {},
    "svcca_paper": {"paper_compat": True},
    "procrustes": {},
    "rsa": {},
    "rsa_euclidean": {"rdm": "euclidean"},
    "rbf_cka": {},
    "debiased_cka": {},
}


@pytest.mark.parametrize("measure", sorted(MEASURES))
def test_floor_equals_the_raw_data_reference_within_monte_carlo_error(measure, cache):
    """The moment-form floor (shared draws) and the old one (raw Gaussian data per draw)
    estimate the same mean: they differ by less than 4.5 combined Monte-Carlo errors, and
    their spreads (sd of the draws) agree."""
    metric = measure.split("_paper")[0].split("_euclidean")[0]
    options = MEASURES[measure]
    n, widths = 40, [6, 15]
    new = chance_floors({metric: options}, n, widths, n_draws=190, seed=3, cache=False)[metric]
    old = _reference_chance_floors(metric, options, n, widths, n_draws=200, seed=4)
    for a, b in zip(new, old, strict=True):
        assert (a["d_x"], a["d_y"]) == (b["d_x"], b["d_y"])
        err = math.hypot(a["se"], b["se"])
        assert abs(a["mean"] - b["mean"]) < 4.5 * err, (a, b)
        assert 0.7 < a["sd"] / b["sd"] < 1.4, (a, b)
        assert a["low"] <= a["mean"] <= a["high"]


def test_jackknife_error_matches_the_spread_over_seeds(cache):
    """``se`` (delete-one-block jackknife) covers the spread of the mean over seeds: at
    least as large (conservative), and not more than about twice."""
    means, ses = [], []
    for seed in range(30):
        (floor,) = chance_floors(["svcca"], 30, [8], n_draws=20, seed=seed, cache=False)["svcca"]
        means.append(floor["mean"])
        ses.append(floor["se"])
    spread = np.std(means, ddof=1)
    assert 0.9 < np.mean(ses) / spread < 2.3


def test_measures_computed_together_equal_each_alone(cache):
    together = chance_floors(["svcca", "neuronsim"], 50, [8, 12], n_draws=6, cache=False)
    for metric in ("svcca", "neuronsim"):
        alone = chance_floors([metric], 50, [8, 12], n_draws=6, cache=False)[metric]
        assert alone == together[metric]


def test_floors_are_cached_by_their_inputs_and_checked_on_reading(cache, monkeypatch):
    first = chance_floors({"pwcca": {}}, 30, [4, 9], n_draws=5)
    (path,) = (cache / "floors").glob("pwcca-*.json")

    def no_compute(*args, **kwargs):
        raise AssertionError("recomputed a cached floor")

    with monkeypatch.context() as patch:
        patch.setattr(floors_mod, "_compute", no_compute)
        assert chance_floors({"pwcca": {}}, 30, [9, 4, 9], n_draws=5) == {"pwcca": first["pwcca"]}
        with pytest.raises(AssertionError, match="recomputed"):  # other inputs: another entry
            chance_floors({"pwcca": {}}, 31, [4, 9], n_draws=5)
        with pytest.raises(AssertionError, match="recomputed"):
            chance_floors({"pwcca": {"paper_compat": True}}, 30, [4, 9], n_draws=5)
    # A file whose stored key is not the requested one (edited, or a hash collision) is
    # not used, and not replaced (it did not verify as lmsim's): the floors are recomputed.
    stored = json.loads(path.read_text())
    stored["key"]["n"] = 31
    stored["floors"][0]["mean"] = 123.0
    tampered = json.dumps(stored)
    path.write_text(tampered)
    assert chance_floors({"pwcca": {}}, 30, [4, 9], n_draws=5) == first
    assert path.read_text() == tampered
    path.write_text("{not json")
    assert chance_floors({"pwcca": {}}, 30, [4, 9], n_draws=5) == first
    assert path.read_text() == "{not json"
    path.unlink()
    assert chance_floors({"pwcca": {}}, 30, [4, 9], n_draws=5) == first
    assert json.loads(path.read_text())["floors"] == first["pwcca"]


def test_a_read_only_cache_still_returns_the_floors(cache, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError("read-only")

    monkeypatch.setattr("lmsim._io.write_json_atomic", refuse)
    out = chance_floors(["linear_cka"], 20, [3], n_draws=3)
    assert out["linear_cka"][0]["n_draws"] == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metrics": ["nope"]}, "no chance floor for `metric` 'nope'"),
        ({"n": 3}, "`n` must be at least 4"),
        ({"widths": [0, 4]}, "`widths` must be positive"),
        ({"n_draws": 1}, "`n_draws` must be at least 2"),
        ({"level": 1.0}, "`level` must be in"),
    ],
)
def test_bad_arguments_name_the_problem(kwargs, message):
    args = {"metrics": ["svcca"], "n": 20, "widths": [4], "n_draws": 3} | kwargs
    with pytest.raises(ValueError, match=message):
        chance_floors(**args, cache=False)


def test_every_measure_has_a_floor():
    assert set(MOMENT_METRICS) | set(PREPARED_RAW_METRICS) == set(
        chance_floors(
            sorted(set(MOMENT_METRICS) | set(PREPARED_RAW_METRICS)),
            24,
            [3],
            n_draws=2,
            cache=False,
        )
    )


def test_wide_layers_take_several_joint_draws_of_the_same_floor(cache, monkeypatch):
    """Capping the joint width splits the draws over several joint draws: the blocks are
    still independent, so the floor estimates the same mean within its error."""
    full = chance_floors(["svcca", "rsa"], 40, [6, 12], n_draws=30, cache=False)
    monkeypatch.setattr(floors_mod, "MAX_JOINT_WIDTH", 30)  # 2 blocks of 12 per joint draw
    assert [len(b) for b in floors_mod._batches(30, 12)] == [1] * 30
    split = chance_floors(["svcca", "rsa"], 40, [6, 12], n_draws=30, cache=False)
    for metric in ("svcca", "rsa"):
        for a, b in zip(full[metric], split[metric], strict=True):
            assert a["n_draws"] == b["n_draws"] == 30
            assert abs(a["mean"] - b["mean"]) < 4.5 * math.hypot(a["se"], b["se"])


def test_batches_number_blocks_across_joint_draws():
    monkey = floors_mod.MAX_JOINT_WIDTH
    assert floors_mod._batches(20, monkey) == [[(0, 1)]] + [
        [(2 * k, 2 * k + 1)] for k in range(1, 20)
    ]
    (batch,) = floors_mod._batches(20, 8)
    assert len(batch) == 20 and max(max(p) for p in batch) == 6
