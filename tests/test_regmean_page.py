"""The RegMean page in its paper profile's modes, on tiny models (the hub is not reachable)."""

from __future__ import annotations

from _helpers import cache_without, execute_page


def test_regmean_page_runs_distilbert_with_published_stats(tmp_path, monkeypatch):
    """The page with its smoke setups (every task kind) on a DistilBERT base, the task models on
    their whole training splits and the Grams published to the cache, as the paper profile's
    DistilBERT page runs: every cell runs, and each merged model's Grams lie in the cache as
    safetensors."""
    cache = cache_without(tmp_path, monkeypatch, "regmean-stats")  # shared models, no stats
    execute_page(
        tmp_path,
        monkeypatch,
        "jin2023_regmean",
        "01_merging",
        {"base": "tiny-distilbert", "cache_stats": True, "full_task_data": True},
    )
    stats = cache / "regmean-stats"
    grams = sorted(p.name for p in stats.glob("*.grams.safetensors"))
    # Every non-MTL model's own Grams (the Gram-batch sweep's are not kept): 2 x 2 partitions
    # and their 2 joints, 3 + 1 sentiment, 2 + 1 emotion, 2 + 1 NER and 1 regression task.
    assert len(grams) == 17 and all(p.startswith("regmean-") for p in grams)
    assert not list(stats.glob("*.fishers.safetensors"))  # Fishers stay in memory (float32)
    assert not list(stats.glob(".*"))  # no temporary left behind
