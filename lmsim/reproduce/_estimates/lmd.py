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
    and test, shards kept (``return_shards``) and cached; the appendix corpus too."""
    est = Estimate("", knobs={"gpu": "shard_size", "disk": "shard_size", "ram": "max_docs"})
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
                for n in (_per(n_train, g), _per(n_test, g)):
                    tokens = T if pad else 0.8 * T  # chunks of T reference tokens, re-tokenised
                    p = Pass(
                        models,
                        n,
                        n,
                        tokens,
                        params["batch_size"],
                        params["shard_size"],
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
    with the same sizes), then one pass over the layers at each depth, one shard each."""
    est = Estimate("", knobs={"gpu": "depths", "disk": "shard_size", "ram": "max_docs"})
    _fetch_models(est, params["models"])
    _fetch_data(est, params.get("corpora", []))
    zoo = params.get("zoo_profile", "default")
    T = params["seq_len"]
    tokens = T if params.get("paper_compat_padding") else 0.8 * T
    last = [(m, _shape(m, zoo), _shape(m, zoo).hidden) for m in params["models"]]
    depth = [(m, s, len(params["depths"]) * s.hidden) for m, s, _ in last]
    for n in (params["n_train"], params["n_test"]):
        moments_pass(
            est,
            Pass(
                last, n, n, tokens, params["batch_size"], params["shard_size"], return_shards=True
            ),
            params,
            machine,
            f"last layer, {n:,} sequences",
        )
        moments_pass(
            est,
            Pass(depth, n, n, tokens, params["batch_size"], n),
            params,
            machine,
            f"{len(params['depths'])} depths, {n:,} sequences",
        )
    docs = params.get("max_docs") or 0
    text = sum(docs * (3_000 if "wikipedia" in c else 120) for c in params.get("corpora") or [])
    est.peak("ram", BASE_RAM + 3 * text, "the corpora as Python text and chunks")
    est.notes.append("time: counts the last-layer pass, which page 01's cache may already hold")
    return est
