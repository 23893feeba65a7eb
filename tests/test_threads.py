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
