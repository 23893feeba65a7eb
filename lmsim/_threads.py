"""One setting for CPU threads: BLAS / LAPACK / OpenMP pools and torch's intra-op pool.

lmsim's CPU work is float64 BLAS and LAPACK calls made by three libraries with separate
thread pools: NumPy's and SciPy's OpenBLAS (``dsyrk`` for the moments, ``dpotrf`` /
``dpotri`` for LMD) and torch (matrix products, eigendecompositions, SVDs).
:func:`threads` sets all of them at once and restores them on exit.

Why a default below "all cores": on a small shared machine, OpenMP threads spin-wait for
cores that other jobs hold. Measured on a 2-core machine under load: LMD 1.4× slower and
OpenBLAS Cholesky 5.5× slower on two threads than on one; an SVD of a 576 × 576 matrix
40× slower. So the default is 1 thread on machines with at most 2 usable cores, and every
usable core otherwise; ``LMSIM_THREADS`` overrides it.

The heavy public entry points (``extract_*``, ``Moments.update``, ``collect_grams``,
``collect_fishers``, ``merge_models``, ``train_probe``, ``cluster_neurons``,
``training.train``) are decorated with :func:`thread_policy`: they run inside
``threads()`` unless the caller chose threads (see :func:`caller_choice`).

Examples
--------
>>> import lmsim
>>> with lmsim.threads(1) as n:
...     pass  # every BLAS call and torch op here runs on one thread
>>> n
1
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

__all__ = ["default_threads", "threads", "thread_info", "thread_policy", "caller_choice"]

ENV_VAR = "LMSIM_THREADS"
# Environment variables torch (and OpenMP / MKL) read for their own thread count.
TORCH_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")

# How many `threads(...)` blocks enclose the current call (per thread and task).
_DEPTH: ContextVar[int] = ContextVar("lmsim_threads_depth", default=0)
_CONTROLLER: list = [None, -1]  # threadpoolctl controller, len(sys.modules) when made

F = TypeVar("F", bound=Callable)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def default_threads() -> int:
    """Thread count used when :func:`threads` gets ``None``.

    ``$LMSIM_THREADS`` if set; else 1 on machines with at most 2 usable cores (shared
    laptops and CI runners, where a second spinning thread costs more than it gives) and
    the number of usable cores otherwise.
    """
    value = os.environ.get(ENV_VAR)
    if value:
        return _check(value, f"${ENV_VAR}")
    cores = _usable_cores()
    return 1 if cores <= 2 else cores


def _check(n, name: str = "n") -> int:
    try:
        count = int(n)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a positive integer, got {n!r}") from None
    if count < 1 or count != float(n):
        raise ValueError(f"`{name}` must be a positive integer, got {n!r}")
    return count


def _controller():
    """A threadpoolctl controller, made again when modules were imported since the last.

    Making one scans every loaded shared library (≈ 4 ms); limiting through a made one
    takes ≈ 10 µs, which keeps :func:`thread_policy` cheap on per-chunk calls such as
    ``Moments.update``. A BLAS library loads with the Python module that links it, so a
    new module is the signal to look again.
    """
    from threadpoolctl import ThreadpoolController

    if _CONTROLLER[0] is None or _CONTROLLER[1] != len(sys.modules):
        _CONTROLLER[1] = len(sys.modules)
        _CONTROLLER[0] = ThreadpoolController()
    return _CONTROLLER[0]


@contextmanager
def threads(n: int | None = None) -> Iterator[int]:
    """Limit BLAS/LAPACK/OpenMP pools (threadpoolctl) and torch to ``n`` threads.

    Parameters
    ----------
    n : int, optional
        Number of threads; default :func:`default_threads`.

    Yields
    ------
    int
        The thread count in force inside the block.

    Notes
    -----
    Both torch's intra-op count and every pool threadpoolctl finds are restored on exit,
    also after an exception. Limits apply to the calling process (GPU kernels are not
    affected).
    """
    import torch

    count = default_threads() if n is None else _check(n)
    before = torch.get_num_threads()
    token = _DEPTH.set(_DEPTH.get() + 1)
    try:
        with _controller().limit(limits=count):
            torch.set_num_threads(count)
            try:
                yield count
            finally:
                torch.set_num_threads(before)
    finally:
        _DEPTH.reset(token)


@functools.cache
def _physical_cores() -> int:
    """Physical cores, the count torch starts its intra-op pool with (cpuinfo's cores);
    read once per process (≈ 0.3 ms)."""
    try:
        import psutil

        count = psutil.cpu_count(logical=False)
        if count:
            return int(count)
    except ImportError:
        pass
    try:
        with open("/proc/cpuinfo") as fh:
            pairs, physical = set(), "0"
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "physical id":
                    physical = value.strip()
                elif key == "core id":
                    pairs.add((physical, value.strip()))
        if pairs:
            return len(pairs)
    except OSError:
        pass
    return os.cpu_count() or 1


def caller_choice() -> str | None:
    """Whether the caller chose CPU threads, and how; None means lmsim's policy applies.

    Checked in this order:

    1. ``"lmsim.threads"``: the call runs inside an explicit :func:`threads` block (or
       inside another entry point that applied the policy); nothing is changed.
    2. ``"$LMSIM_THREADS"``: the variable is set; the policy applies its count.
    3. ``"$OMP_NUM_THREADS"`` / ``"$MKL_NUM_THREADS"``: torch's own count was set through
       its environment; nothing is changed.
    4. ``"torch.set_num_threads"``: torch's intra-op count differs from the count torch
       starts with (its physical cores); nothing is changed.

    Returns
    -------
    str or None

    Notes
    -----
    A ``torch.set_num_threads(n)`` whose ``n`` equals torch's starting count cannot be told
    from the default and is not seen as a choice.
    """
    if _DEPTH.get() > 0:
        return "lmsim.threads"
    if os.environ.get(ENV_VAR):
        return f"${ENV_VAR}"
    for var in TORCH_ENV_VARS:
        if os.environ.get(var):
            return f"${var}"
    if "torch" in sys.modules:
        import torch

        if torch.get_num_threads() != _physical_cores():
            return "torch.set_num_threads"
    return None


def thread_policy(fn: F) -> F:
    """Run ``fn`` under lmsim's thread policy unless the caller chose threads.

    The decorator of every heavy public entry point. With no choice by the caller
    (:func:`caller_choice` is None), ``fn`` runs inside ``threads()`` (the
    :func:`default_threads` count); with ``$LMSIM_THREADS`` set, inside ``threads()`` at
    that count; inside an explicit ``threads(...)`` block, or with torch's count set by
    the user, it runs as called. Entry points called from another run as called (the
    outer one set the threads), so nesting costs one lookup.

    Parameters
    ----------
    fn : callable
        A function or method; not a generator (the setting would end before it runs).

    Returns
    -------
    callable
        ``fn`` wrapped; ``wrapper.__wrapped__`` is ``fn`` and ``wrapper.thread_policy``
        is True.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        choice = caller_choice()
        if choice is None or choice == f"${ENV_VAR}":
            with threads():
                return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    wrapper.thread_policy = True
    return wrapper  # type: ignore[return-value]


@contextmanager
def _as_chosen() -> Iterator[None]:
    """Run the block as if the caller had chosen threads, changing none (benchmarks: the
    behaviour before the policy)."""
    token = _DEPTH.set(_DEPTH.get() + 1)
    try:
        yield
    finally:
        _DEPTH.reset(token)


def thread_info() -> dict:
    """Thread settings in force now, for benchmark records.

    Returns
    -------
    dict
        ``torch_threads``, ``pools`` (one ``"internal_api:file": num_threads`` entry per
        pool threadpoolctl finds), ``usable_cores``, ``load_average``
        (``os.getloadavg()``, 1, 5 and 15 minutes) and ``caller_choice`` (see
        :func:`caller_choice`: None when the thread policy applies).
    """
    import torch
    from threadpoolctl import threadpool_info

    pools = {
        f"{pool['internal_api']}:{os.path.basename(pool['filepath'])}": pool["num_threads"]
        for pool in threadpool_info()
    }
    return {
        "torch_threads": torch.get_num_threads(),
        "pools": pools,
        "usable_cores": _usable_cores(),
        "load_average": list(os.getloadavg()),
        "caller_choice": caller_choice(),
    }
