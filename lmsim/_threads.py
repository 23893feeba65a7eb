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

Examples
--------
>>> import lmsim
>>> with lmsim.threads(1) as n:
...     pass  # every BLAS call and torch op here runs on one thread
>>> n
1
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["default_threads", "threads", "thread_info"]

ENV_VAR = "LMSIM_THREADS"


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
    from threadpoolctl import threadpool_limits

    count = default_threads() if n is None else _check(n)
    before = torch.get_num_threads()
    with threadpool_limits(limits=count):
        torch.set_num_threads(count)
        try:
            yield count
        finally:
            torch.set_num_threads(before)


def thread_info() -> dict:
    """Thread settings in force now, for benchmark records.

    Returns
    -------
    dict
        ``torch_threads``, ``pools`` (one ``"internal_api:file": num_threads`` entry per
        pool threadpoolctl finds), ``usable_cores`` and ``load_average``
        (``os.getloadavg()``, 1, 5 and 15 minutes).
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
    }
