"""Grams and Fishers as a model owner would publish them: saved once, read lazily.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 3.2 (the statistics shared instead of data).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from lmsim._cache import cache_dir
from lmsim._io import move_aside, write_atomic
from lmsim.merge import load_fishers, load_grams, save_fishers, save_grams

_STATS = {"grams": (save_grams, load_grams), "fishers": (save_fishers, load_fishers)}


def published_stats(
    what: str,
    key: str,
    compute: Callable[[], Mapping],
    metadata: Mapping | None = None,
    *,
    root: str | os.PathLike | None = None,
) -> Mapping:
    """A model's Grams or Fishers as its owner would publish them: saved once, read lazily.

    The statistics are computed on the first call and written as safetensors (no code runs
    when they are read) under ``root`` (default: the lmsim cache's ``regmean-stats/``), named
    by ``key``; every later call reads them back. They come back as a lazy mapping that reads
    one tensor at a time, so merging many base-size models holds one layer's statistics in
    memory, not every model's (:func:`lmsim.merge.load_grams`).

    Parameters
    ----------
    what : {"grams", "fishers"}
    key : str
        Names the file; it must determine the statistics (e.g. the fine-tuned model's
        content-keyed folder name plus the number of batches, the length and the seed).
    compute : callable
        Returns the statistics (``{name: tensor}``) when they are not saved yet.
    metadata : dict, optional
        Saved beside them (:func:`lmsim.merge.load_metadata`).
    root : path, optional

    Returns
    -------
    Mapping of str to Tensor
        Read on access; shapes and finiteness are checked.
    """
    if what not in _STATS:
        raise ValueError(f"`what` must be 'grams' or 'fishers', got {what!r}")
    save, load = _STATS[what]
    folder = Path(root) if root is not None else cache_dir("regmean-stats")
    path = folder / f"{key}.{what}.safetensors"
    if path.is_file():
        from safetensors import SafetensorError

        try:
            return load(path, lazy=True)
        except (OSError, ValueError, SafetensorError) as err:
            move_aside(path, str(err), "computing them again", stacklevel=2)
    stats = compute()
    write_atomic(path, lambda tmp: save(tmp, stats, metadata))  # a complete file or none
    return load(path, lazy=True)
