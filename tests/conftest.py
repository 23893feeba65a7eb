"""Shared pytest setup: ``--runslow`` for ``@pytest.mark.slow``, ``gpu`` skipped without CUDA."""

import pytest
import torch

# CI runs on small shared machines; tests never rely on more threads.
torch.set_num_threads(2)


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run slow tests")


def pytest_collection_modifyitems(config, items):
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    run_slow = config.getoption("--runslow")
    has_cuda = torch.cuda.is_available()
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Run a module on one torch thread, then restore the count.

    Tiny matrices and tiny models gain nothing from threads, and on a loaded shared
    machine OpenMP synchronisation made two threads ~20x slower than one.
    """
    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n_threads)
