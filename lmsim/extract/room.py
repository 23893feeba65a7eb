"""Refuse an extraction early when its moments cannot fit where they will be held.

:func:`~lmsim.extract.extract_moments` holds float64 moments of ``D`` joint features
(``8 D (D + 1)`` bytes each): the running merge and one shard, or with ``return_shards``
every shard of this process plus the merge. Before the first forward pass, that lower bound
is compared with the memory free on the device that holds them (the GPU's free memory, or
the host's available RAM); a run that cannot fit stops at once with the figures and the
arguments to change, instead of after hours of forward passes. The resource plan
(``python -m lmsim.reproduce --plan``) makes the same estimate per page.
"""

from __future__ import annotations

from pathlib import Path

import torch

GB = 1e9


def _available_host_bytes() -> float | None:
    """``MemAvailable`` of ``/proc/meminfo`` (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _free_bytes(device: torch.device) -> float | None:
    if device.type == "cuda":
        try:
            return float(torch.cuda.mem_get_info(device)[0])
        except (RuntimeError, AssertionError):
            return None
    if device.type == "cpu":
        return _available_host_bytes()
    return None


def _width(runs) -> int:
    """Joint features of the runs' kept blocks (each block is the model's hidden size)."""
    total = 0
    for run in runs:
        config = getattr(run.model, "config", None)
        hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
        if hidden is None:
            return 0  # a model without a readable width: nothing to check
        total += len(run.layers) * int(hidden)
    return total


def check_room(runs, device: torch.device, n_held: int, return_shards: bool) -> None:
    """Raise ``MemoryError`` when ``n_held`` moments of the runs' joint width cannot fit.

    Parameters
    ----------
    runs : list of _Run
        The prepared models (their kept layers and hidden sizes give ``D``).
    device : torch.device
        Where the moments are accumulated.
    n_held : int
        Moments held at once: this process's shards plus the merge with
        ``return_shards``, else 2 (the running merge and one shard).
    return_shards : bool
        Only for the message: which argument lowers ``n_held``.
    """
    width = _width(runs)
    free = _free_bytes(torch.device(device))
    if not width or free is None:
        return
    one = 8.0 * width * (width + 1)
    need = n_held * one
    if need <= free:
        return
    where = "GPU" if torch.device(device).type == "cuda" else "host RAM"
    change = (
        "a larger shard_size (fewer shards held), or fewer layers or models"
        if return_shards
        else "fewer layers or models (pooled features), or another device"
    )
    raise MemoryError(
        f"extract_moments would hold {n_held} float64 moments of {width:,} joint features "
        f"({one / GB:,.2f} GB each, {need / GB:,.1f} GB) in {where}, where {free / GB:,.1f} GB "
        f"are free: change {change}"
    )
