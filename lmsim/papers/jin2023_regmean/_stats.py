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

import torch

from lmsim._cache import cache_dir
from lmsim._io import open_entry, write_entry_file
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
        Read on access; shapes and finiteness are checked. The file is a verified cache
        entry (its size and sha256 checked on every read): a damaged one is named, moved
        aside and computed again; statistics holding NaN or Inf are refused, not saved.
    """
    if what not in _STATS:
        raise ValueError(f"`what` must be 'grams' or 'fishers', got {what!r}")
    save, load = _STATS[what]
    folder = Path(root) if root is not None else cache_dir("regmean-stats")
    path = folder / f"{key}.{what}.safetensors"

    def legacy(file: Path) -> dict | None:
        """A file saved before entry markers: lmsim's when its header says so; whole when
        every tensor reads back finite (None: not an lmsim file, never touched)."""
        from lmsim.merge import load_metadata

        try:
            load_metadata(file)  # parses the header
            load(file, lazy=True)  # its kind matches
        except (OSError, ValueError):
            return None
        load(file)  # every tensor: shapes and finiteness (raises ValueError naming it)
        return {}

    if open_entry(path, "computing them again", legacy=legacy, stacklevel=3):
        return load(path, lazy=True)
    stats = compute()
    for name, value in stats.items():
        if not bool(torch.isfinite(torch.as_tensor(value)).all()):
            raise ValueError(
                f"the {what} computed for {key!r} hold NaN or Inf in {name!r}; nothing was "
                "saved (a diverged model or overflowing activations: check the model)"
            )
    # The marker first, then a complete file or none, then its size and sha256.
    write_entry_file(path, lambda tmp: save(tmp, stats, metadata))
    return load(path, lazy=True)
