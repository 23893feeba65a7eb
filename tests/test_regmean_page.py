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
    fishers = sorted(p.name for p in stats.glob("*.fishers.safetensors"))
    # Every merged model's own Grams and Fishers (the Gram-batch sweep's are not kept): at
    # 2 seeds, 2 x 2 partitions, 3 sentiment, 2 emotion and 2 NER domains (22), the 3
    # sentiment models with different heads, and the 4 task models of Fig. 4.
    assert len(grams) == 29 and all(p.startswith("regmean-") for p in grams)
    assert len(fishers) == 29  # published too (float32), read back one tensor at a time
    assert not list(stats.glob(".*"))  # no temporary left behind
