"""The RegMean page in its paper profile's modes, on tiny models (the hub is not reachable)."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest


def test_regmean_page_runs_distilbert_with_published_stats(tmp_path, monkeypatch):
    """The page with its smoke setups (every task kind) on a DistilBERT base, the task models on
    their whole training splits and the Grams published to the cache, as the paper profile's
    DistilBERT page runs: every cell runs, and each merged model's Grams lie in the cache as
    safetensors."""
    papermill = pytest.importorskip("papermill")
    repo = Path(__file__).resolve().parents[1]
    shared = Path(os.environ.get("LMSIM_CACHE", Path.home() / ".cache" / "lmsim"))
    cache = tmp_path / "cache"  # the shared models and fine-tunes, an empty stats cache
    cache.mkdir()
    for folder in shared.iterdir() if shared.is_dir() else []:
        if folder.name != "regmean-stats":
            (cache / folder.name).symlink_to(folder)
    monkeypatch.setenv("LMSIM_CACHE", str(cache))
    monkeypatch.setenv("PYTHONPATH", str(repo))  # the kernel imports this checkout's lmsim
    source = repo / "notebooks" / "jin2023_regmean" / "01_merging.ipynb"
    out = tmp_path / "page.ipynb"
    papermill.execute_notebook(
        str(source),
        str(out),
        parameters={"base": "tiny-distilbert", "cache_stats": True, "full_task_data": True},
        kernel_name="python3",
        cwd=str(source.parent),
        progress_bar=False,
    )
    page = nbformat.read(str(out), as_version=4)
    outputs = [o for cell in page.cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    stats = cache / "regmean-stats"
    grams = sorted(p.name for p in stats.glob("*.grams.safetensors"))
    # Every non-MTL model's own Grams (the Gram-batch sweep's are not kept): 2 x 2 partitions
    # and their 2 joints, 3 + 1 sentiment, 2 + 1 emotion, 2 + 1 NER and 1 regression task.
    assert len(grams) == 17 and all(p.startswith("regmean-") for p in grams)
    assert not list(stats.glob("*.fishers.safetensors"))  # Fishers stay in memory (float32)
    assert not list(stats.glob(".*partial"))
