"""Zhang et al. (2022): language model decomposition pages."""

from __future__ import annotations

from collections.abc import Mapping

from lmsim.reproduce._estimates._common import (
    Pass,
    _fetch_data,
    _fetch_models,
    _per,
    _shape,
    moments_pass,
)
from lmsim.reproduce._resources import (
    BASE_RAM,
    Estimate,
    Machine,
)


def lmd_decomposition(params: Mapping, machine: Machine) -> Estimate:
    """Zhang et al. page 01: last-layer mean-pooled moments of each group at each T, train
    and test, shards kept (``return_shards``: ``shard_size`` train, ``test_shard_size`` test)
    and cached unless ``cache_shards`` is false; the appendix corpus too."""
    est = Estimate("", knobs={"gpu": "shard_size", "disk": "cache_shards", "ram": "max_docs"})
    cache = bool(params.get("cache_shards", True))
    shard = {"train": params["shard_size"]}
    shard["test"] = params.get("test_shard_size") or params["shard_size"]
    _fetch_models(est, [m for g in params["groups"].values() for m in g])
    _fetch_data(est, [*params.get("corpora", []), *params.get("appendix_corpora", [])])
    zoo = params.get("zoo_profile", "default")
    pad = params.get("paper_compat_padding", False)
    passes = [("", params["n_train"], params["n_test"], list(params["groups"]))]
    sizes = params.get("appendix_sizes") or [params["n_train"], params["n_test"]]
    for corpus in params.get("appendix_corpora") or []:
        passes.append((f"{corpus}: ", *sizes, list(params.get("appendix_groups") or [])))
    for prefix, n_train, n_test, groups in passes:
        for g in groups:
            models = [(m, _shape(m, zoo), _shape(m, zoo).hidden) for m in params["groups"][g]]
            for T in params["seq_lens"][g]:
                for split, n in (("train", _per(n_train, g)), ("test", _per(n_test, g))):
                    tokens = T if pad else 0.8 * T  # chunks of T reference tokens, re-tokenised
                    p = Pass(
                        models,
                        n,
                        n,
                        tokens,
                        params["batch_size"],
                        shard[split],
                        cache=cache,
                        return_shards=True,
                    )
                    moments_pass(
                        est, p, params, machine, f"{prefix}group {g}, T={T}, {n:,} sequences"
                    )
    docs = params.get("max_docs") or 0
    corpora = params.get("corpora") or []
    text = sum(docs * (3_000 if "wikipedia" in c else 120) for c in corpora)
    est.peak(
        "ram",
        BASE_RAM + 3 * text,
        f"{len(corpora)} corpora x {docs:,} documents as Python text and chunks",
    )
    return est


def lmd_beyond(params: Mapping, machine: Machine) -> Estimate:
    """Zhang et al. page 02: page 01's last-layer moments at one T (a cache hit when 01 ran
    with the same sizes and cached them), then one pass over the layers at each depth: the
    train set in one shard, the test set in ``test_shard_size`` shards, all of them held."""
    est = Estimate("", knobs={"gpu": "depths", "disk": "cache_shards", "ram": "max_docs"})
    cache = bool(params.get("cache_shards", True))
    test_shard = params.get("test_shard_size") or params["shard_size"]
    _fetch_models(est, params["models"])
    _fetch_data(est, params.get("corpora", []))
    zoo = params.get("zoo_profile", "default")
    T = params["seq_len"]
    tokens = T if params.get("paper_compat_padding") else 0.8 * T
    last = [(m, _shape(m, zoo), _shape(m, zoo).hidden) for m in params["models"]]
    depth = [(m, s, len(params["depths"]) * s.hidden) for m, s, _ in last]
    for n, shard, depth_shard in (
        (params["n_train"], params["shard_size"], params["n_train"]),
        (params["n_test"], test_shard, test_shard),
    ):
        moments_pass(
            est,
            Pass(last, n, n, tokens, params["batch_size"], shard, cache, return_shards=True),
            params,
            machine,
            f"last layer, {n:,} sequences",
        )
        moments_pass(
            est,
            Pass(depth, n, n, tokens, params["batch_size"], depth_shard, cache, True),
            params,
            machine,
            f"{len(params['depths'])} depths, {n:,} sequences",
        )
    docs = params.get("max_docs") or 0
    text = sum(docs * (3_000 if "wikipedia" in c else 120) for c in params.get("corpora") or [])
    est.peak("ram", BASE_RAM + 3 * text, "the corpora as Python text and chunks")
    est.notes.append("time: counts the last-layer pass, which page 01's cache may already hold")
    return est
