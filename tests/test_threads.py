"""The one thread setting: torch and every BLAS/OpenMP pool, restored on exit."""

import pytest
import torch
from threadpoolctl import threadpool_info

import lmsim
from lmsim import _threads


def pool_threads():
    return {pool["filepath"]: pool["num_threads"] for pool in threadpool_info()}


def test_threads_sets_torch_and_blas_pools_and_restores_them():
    torch_before, pools_before = torch.get_num_threads(), pool_threads()
    with lmsim.threads(1) as n:
        assert n == 1
        assert torch.get_num_threads() == 1
        assert set(pool_threads().values()) == {1}
        info = lmsim.thread_info()
        assert info["torch_threads"] == 1 and set(info["pools"].values()) == {1}
        assert len(info["load_average"]) == 3
    assert torch.get_num_threads() == torch_before
    assert pool_threads() == pools_before


def test_threads_restores_after_an_exception():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="boom"), lmsim.threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_default_threads_env_and_small_machines(monkeypatch):
    monkeypatch.setenv("LMSIM_THREADS", "3")
    assert lmsim.default_threads() == 3
    monkeypatch.delenv("LMSIM_THREADS")
    monkeypatch.setattr(_threads, "_usable_cores", lambda: 2)
    assert lmsim.default_threads() == 1
    monkeypatch.setattr(_threads, "_usable_cores", lambda: 16)
    assert lmsim.default_threads() == 16


@pytest.mark.parametrize("bad", [0, -1, 1.5, "x"])
def test_threads_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="positive integer"), lmsim.threads(bad):
        pass


# ------------------------------------------------------------------ the thread policy
ENTRY_POINTS = [
    ("lmsim.extract", "extract_moments"),
    ("lmsim.extract", "extract_activations"),
    ("lmsim.extract", "extract_attentions"),
    ("lmsim.extract", "extract_linear_grams"),
    ("lmsim.extract", "extract_logits"),
    ("lmsim.moments", "Moments.update"),
    ("lmsim.merge", "collect_grams"),
    ("lmsim.merge", "collect_fishers"),
    ("lmsim.merge", "merge_models"),
    ("lmsim.probe", "train_probe"),
    ("lmsim.cluster", "cluster_neurons"),
    ("lmsim.training", "train"),
]


@pytest.fixture
def no_choice(monkeypatch):
    """A process where nobody chose threads: no variables, torch at its starting count,
    and a 2-core machine (so the policy's count, 1, differs from torch's, 2)."""
    for var in ("LMSIM_THREADS", *_threads.TORCH_ENV_VARS):
        monkeypatch.delenv(var, raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(_threads, "_physical_cores", lambda: 2)
    monkeypatch.setattr(_threads, "_usable_cores", lambda: 2)
    yield
    torch.set_num_threads(before)


@_threads.thread_policy
def seen():
    """What a decorated entry point sees: torch's count, the pools' counts, the choice."""
    return torch.get_num_threads(), set(pool_threads().values()), _threads.caller_choice()


def test_policy_applies_the_default_when_nobody_chose(no_choice):
    pools_before = pool_threads()
    assert _threads.caller_choice() is None
    assert seen() == (1, {1}, "lmsim.threads")
    assert torch.get_num_threads() == 2 and pool_threads() == pools_before


def test_policy_explicit_block_wins_over_everything(no_choice, monkeypatch):
    monkeypatch.setenv("LMSIM_THREADS", "1")
    with lmsim.threads(2):
        assert seen()[:2] == (2, {2})


def test_policy_env_var_sets_the_count(no_choice, monkeypatch):
    monkeypatch.setenv("LMSIM_THREADS", "2")
    torch.set_num_threads(1)  # the variable wins over torch's own setting
    assert _threads.caller_choice() == "$LMSIM_THREADS"
    assert seen()[:2] == (2, {2})
    assert torch.get_num_threads() == 1


def test_policy_leaves_a_user_torch_setting(no_choice):
    torch.set_num_threads(1)  # also sets torch's OpenMP pool; the BLAS pools keep theirs
    pools_before = pool_threads()
    assert _threads.caller_choice() == "torch.set_num_threads"
    count, pools, _ = seen()
    assert count == 1 and pools == set(pools_before.values())


@pytest.mark.parametrize("var", ["OMP_NUM_THREADS", "MKL_NUM_THREADS"])
def test_policy_leaves_torch_environment_settings(no_choice, monkeypatch, var):
    monkeypatch.setenv(var, "2")
    assert _threads.caller_choice() == f"${var}"
    assert seen()[0] == 2


def test_policy_nested_entry_points_keep_the_outer_setting(no_choice):
    @_threads.thread_policy
    def outer():
        torch.set_num_threads(2)  # the outer call's own work changed it: inner keeps it
        return seen()

    assert outer()[0] == 2


def test_policy_restores_after_an_exception(no_choice):
    @_threads.thread_policy
    def fails():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fails()
    assert torch.get_num_threads() == 2 and _threads.caller_choice() is None


def test_moments_update_runs_under_the_policy(no_choice, monkeypatch):
    import numpy as np

    from lmsim import moments

    counts = []
    real = moments.dsyrk

    def spy(*args, **kwargs):
        counts.append((torch.get_num_threads(), set(pool_threads().values())))
        return real(*args, **kwargs)

    monkeypatch.setattr(moments, "dsyrk", spy)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 5))
    mom = moments.Moments({"a": 5}).update({"a": X[:20]}).update({"a": X[20:]})
    assert counts and set(map(str, counts)) == {str((1, {1}))}
    np.testing.assert_allclose(mom.cov("a").numpy(), np.cov(X.T), atol=1e-12)


@pytest.mark.parametrize(("module", "name"), ENTRY_POINTS)
def test_every_heavy_entry_point_is_wrapped(module, name):
    import importlib
    import inspect

    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    assert getattr(obj, "thread_policy", False) is True, f"{module}.{name} lacks @thread_policy"
    assert not inspect.isgeneratorfunction(obj.__wrapped__)


def test_every_public_extract_function_is_wrapped():
    import inspect

    import lmsim.extract as extract

    names = [n for n in extract.__all__ if n.startswith("extract_")]
    assert len(names) >= 5
    for name in names:
        fn = getattr(extract, name)
        assert inspect.isfunction(fn) and getattr(fn, "thread_policy", False), name
