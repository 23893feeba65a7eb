"""``torch.distributed``: the process group, each rank's device and its shards."""

from __future__ import annotations

import contextlib
import os

import torch
import torch.distributed as dist

from lmsim._runtime import resolve_device
from lmsim.extract.pooling import _Plan, _plan


def _owner(k: int, world: int) -> int:
    """Rank that computes shard ``k``: ranks take the longest-first shards in turns, back and
    forth (0, 1, ..., W-1, W-1, ..., 0, 0, 1, ...), so their token counts stay even."""
    turn, seat = divmod(k, world)
    return seat if turn % 2 == 0 else world - 1 - seat


def _rank_world(group) -> tuple[int, int]:
    """This process's rank in ``group`` and the group's size; (0, 1) without a group."""
    if group is None:
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def _rank_device(device, group):
    """Under ``torch.distributed``, an unindexed CUDA device means this rank's own GPU
    (``rank % device_count``, the local rank of the usual one-process-per-GPU launch)."""
    resolved = resolve_device(device)
    if group is None or resolved.type != "cuda" or resolved.index is not None:
        return device
    return torch.device("cuda", dist.get_rank() % torch.cuda.device_count())


def _device_scope(device: torch.device):
    """Make ``device`` the current CUDA device for a block: NCCL runs object collectives
    (``all_gather_object``) on the current device, which must be this rank's own."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def _process_group(distributed):
    """The process group extraction is split over, or None for this process alone."""
    if distributed is False:
        return None
    initialised = dist.is_available() and dist.is_initialized()
    if distributed == "auto":
        if not initialised or dist.get_world_size() == 1:
            return None
        return dist.group.WORLD
    if distributed is True:
        if not initialised:
            raise RuntimeError(
                "distributed=True but torch.distributed is not initialised: launch with "
                "`torchrun --nproc_per_node N script.py` and call "
                "torch.distributed.init_process_group() before extracting"
            )
        return dist.group.WORLD
    if isinstance(distributed, dist.ProcessGroup):
        return distributed
    raise TypeError(
        f"`distributed` must be 'auto', True, False or a torch.distributed.ProcessGroup, "
        f"got {distributed!r}"
    )


def _plan_on_rank(models, texts, distributed, device, **options) -> tuple[_Plan, object, int, int]:
    """The run planned on this process's device, with the process group it is split over.

    Parameters
    ----------
    models, texts, device
        As :func:`~lmsim.extract.extract_moments` takes them (``device`` unindexed under
        ``torch.distributed`` means this rank's own GPU).
    distributed : "auto", bool or torch.distributed.ProcessGroup
    **options
        The other keywords of :func:`~lmsim.extract.pooling._plan`.

    Returns
    -------
    plan : _Plan
    group : ProcessGroup or None
        None for this process alone.
    rank, world : int
        This process's rank in ``group`` and its size; 0 and 1 without a group.
    """
    group = _process_group(distributed)
    plan = _plan(models, texts, device=_rank_device(device, group), **options)
    rank, world = _rank_world(group)
    return plan, group, rank, world


class LauncherProcessGroup:
    """The default process group a launcher's environment (``torchrun``, ``accelerate
    launch``: ``RANK`` and ``WORLD_SIZE`` set) asks for, initialised and owned by an entry
    point; the library functions only see the group it makes.

    Parameters
    ----------
    device : str
        The run's device (``"auto"``, ``"cuda"``, ``"cpu"``, ...): NCCL and this rank's GPU
        (``LOCAL_RANK``) when it resolves to CUDA, Gloo otherwise.
    """

    def __init__(self, device: str):
        self.owned = (
            "RANK" in os.environ and "WORLD_SIZE" in os.environ and not dist.is_initialized()
        )
        if self.owned:
            cuda = torch.cuda.is_available() and resolve_device(device).type == "cuda"
            if cuda:
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
            dist.init_process_group(backend="nccl" if cuda else "gloo")

    @property
    def rank(self) -> int:
        """This process's rank (0 without a group)."""
        return dist.get_rank() if dist.is_initialized() else 0

    @property
    def world(self) -> int:
        """The number of processes (1 without a group)."""
        return dist.get_world_size() if dist.is_initialized() else 1

    def close(self) -> None:
        """Destroy the group if this object made it."""
        if self.owned:
            dist.destroy_process_group()
