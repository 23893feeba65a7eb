"""All-pairs similarity matrices between many layers, from moments or raw activations.

:func:`pairwise_matrix` prepares each block once (Frobenius norm, eigendecomposition /
whitening, per-neuron scale), caches it, and reuses it for every pair, so ``B`` blocks
cost ``B`` eigendecompositions instead of ``2 B²``; each pair then needs only its cross
co-moment slice of the joint matrix held by the :class:`~lmsim.moments.Moments`. The
per-pair arithmetic is the very function the single-pair metrics call, so
``pairwise_matrix(mom, a, b, m)[i, j] == m(mom, a[i], b[j])`` to rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial

import numpy as np
import torch
from tqdm.auto import tqdm

from lmsim._threads import threads
from lmsim.metrics._linalg import BlockStats
from lmsim.metrics.attention import (
    attention_head_similarity,
    distributed_attention_features,
    nonzero_rows,
    paper_attention_features,
    paper_distattn_pair,
)
from lmsim.metrics.cca import (
    prepare_pwcca,
    prepare_svcca,
    pwcca,
    pwcca_both,
    pwcca_pair,
    pwcca_pair_both,
    svcca,
    svcca_pair,
)
from lmsim.metrics.cka import (
    debiased_cka,
    debiased_cka_matrix,
    debiased_cka_prepared_pair,
    linear_cka,
    linear_cka_pair,
    prepare_debiased_cka,
    prepare_linear_cka,
    prepare_rbf_cka,
    rbf_cka,
    rbf_cka_prepared_pair,
)
from lmsim.metrics.neuron import (
    mixedsim,
    mixedsim_pair,
    neuronsim,
    neuronsim_pair,
    prepare_mixedsim,
    prepare_neuronsim,
)
from lmsim.metrics.rsa import prepare_rsa, rsa, rsa_pair
from lmsim.metrics.shape import prepare_procrustes, procrustes, procrustes_pair
from lmsim.moments import Moments

__all__ = [
    "MOMENT_METRICS",
    "RAW_METRICS",
    "pairwise_attention",
    "pairwise_matrix",
    "pairwise_matrix_raw",
]


@contextmanager
def _one_cpu_thread(device) -> Iterator[None]:
    """Run an all-pairs loop on one CPU thread (no-op on GPUs): :func:`lmsim.threads` (1).

    Each pair is a few small LAPACK calls (an SVD of at most width × width); on a shared
    CPU, OpenMP threads spin-wait far longer than such calls take (an SVD of a 576 × 576
    matrix measured 40× slower on two busy threads than on one).
    """
    if torch.device(device).type != "cpu":
        yield
        return
    with threads(1):
        yield


#: Metrics that are functions of the moments: name → (prepare source, prepare target, pair).
MOMENT_METRICS: dict[str, tuple[Callable, Callable, Callable]] = {
    "linear_cka": (prepare_linear_cka, prepare_linear_cka, linear_cka_pair),
    "svcca": (prepare_svcca, prepare_svcca, svcca_pair),
    "pwcca": (prepare_pwcca, prepare_pwcca, pwcca_pair),
    "neuronsim": (prepare_neuronsim, prepare_neuronsim, neuronsim_pair),
    "mixedsim": (
        partial(prepare_neuronsim, fn="mixedsim"),
        prepare_mixedsim,
        mixedsim_pair,
    ),
    "procrustes": (prepare_procrustes, prepare_procrustes, procrustes_pair),
}

#: Every metric callable as ``fn(X, Y, **kw)`` on raw activations.
RAW_METRICS: dict[str, Callable] = {
    "linear_cka": linear_cka,
    "debiased_cka": debiased_cka,
    "rbf_cka": rbf_cka,
    "svcca": svcca,
    "pwcca": pwcca,
    "neuronsim": neuronsim,
    "mixedsim": mixedsim,
    "procrustes": procrustes,
    "rsa": rsa,
}

#: Metrics of raw activations written as a per-block preparation and a pair step:
#: name → (prepare(centred X, **options), pair(prepared a, prepared b)).
PREPARED_RAW_METRICS: dict[str, tuple[Callable, Callable]] = {
    "debiased_cka": (prepare_debiased_cka, debiased_cka_prepared_pair),
    "rbf_cka": (prepare_rbf_cka, rbf_cka_prepared_pair),
    "rsa": (prepare_rsa, rsa_pair),
}

#: Metrics with ``m(X, Y) == m(Y, X)``: each unordered pair is computed once.
SYMMETRIC = frozenset({"linear_cka", "svcca", "procrustes", "debiased_cka", "rbf_cka", "rsa"})

#: Directional metrics whose two directions share one decomposition: name → function
#: ``(prepared a, prepared b, Xcᵀ Yc) -> (m(a, b), m(b, a))``. PWCCA needs one SVD per
#: unordered pair (its CCA is symmetric; only the projection weights are one-sided).
BOTH_DIRECTIONS: dict[str, Callable] = {"pwcca": pwcca_pair_both}

_OPTIONS = {
    "svcca": {"threshold", "paper_compat"},
    "pwcca": {"paper_compat"},
    "rsa": {"rdm", "compare"},
}


def _check_metric(metric: str, table: Mapping, kw: Mapping) -> None:
    if metric not in table:
        raise ValueError(f"unknown `metric` {metric!r}; choose one of {sorted(table)}")
    allowed = _OPTIONS.get(metric, set()) | ({"sigma"} if metric == "rbf_cka" else set())
    unknown = sorted(set(kw) - allowed)
    if unknown:
        raise TypeError(
            f"metric {metric!r} takes no option(s) {unknown}; its options are {sorted(allowed)}"
        )


def pairwise_matrix(
    mom: Moments,
    names_a: Sequence[str],
    names_b: Sequence[str] | None = None,
    metric: str = "linear_cka",
    progress: bool = True,
    **kw,
) -> np.ndarray:
    """Similarity of every block in ``names_a`` (X, source) to every block in ``names_b``.

    Parameters
    ----------
    mom : Moments
        Joint moments holding all the blocks; computation runs on ``mom.device``.
    names_a : sequence of str
        Row blocks (the X side of directional metrics).
    names_b : sequence of str, optional
        Column blocks (the Y side); default ``names_a``.
    metric : {"linear_cka", "svcca", "pwcca", "neuronsim", "mixedsim"}
        A linear metric of :mod:`lmsim.metrics`.
    progress : bool, default=True
        Show a tqdm progress bar over the pairs.
    **kw
        Options of the metric (``threshold``, ``paper_compat`` for svcca;
        ``paper_compat`` for pwcca).

    Returns
    -------
    ndarray of shape (len(names_a), len(names_b))
        ``out[i, j] = metric(mom, names_a[i], names_b[j])``.

    Raises
    ------
    KeyError
        Unknown block names (the message lists the available ones).
    ValueError
        Unknown metric or fewer than 2 samples in ``mom``.
    """
    if not isinstance(mom, Moments):
        raise TypeError(
            f"`mom` must be an lmsim.moments.Moments, got {type(mom).__name__}; "
            "for raw activations use `pairwise_matrix_raw`"
        )
    if metric in PREPARED_RAW_METRICS:
        raise ValueError(
            f"`{metric}` needs more than the means and co-moments a Moments holds (per-sample "
            "norms for the unbiased HSIC, distances for RBF and RSA): extract raw activations "
            "(lmsim.extract.extract_activations) and call pairwise_matrix_raw(acts, "
            f"metric={metric!r}), or stream them into lmsim.metrics.cka.DebiasedCKAStats"
        )
    _check_metric(metric, MOMENT_METRICS, kw)
    names_a = [names_a] if isinstance(names_a, str) else list(names_a)
    names_b = (
        names_a if names_b is None else ([names_b] if isinstance(names_b, str) else list(names_b))
    )
    mom._check_names(names_a + names_b)
    if mom.n < 2:
        raise ValueError(f"`{metric}` needs at least 2 samples, the moments hold {mom.n}")
    prep_src, prep_tgt, pair = MOMENT_METRICS[metric]
    cache: dict[tuple[int, str], object] = {}

    def prepared(prep: Callable, name: str):
        key = (id(prep), name)
        if key not in cache:
            stats = BlockStats(name, mom.n, mom.mean(name), mom.comoment(name))
            cache[key] = prep(stats, **kw)
        return cache[key]

    out = np.empty((len(names_a), len(names_b)), dtype=np.float64)
    pairs = [(i, j) for i in range(len(names_a)) for j in range(len(names_b))]
    done: dict[tuple[str, str], float] = {}
    wanted = {(names_a[i], names_b[j]) for i, j in pairs}
    both = BOTH_DIRECTIONS.get(metric)
    with _one_cpu_thread(mom.device):
        for i, j in tqdm(pairs, desc=f"{metric} pairs", disable=not progress, leave=False):
            a, b = names_a[i], names_b[j]
            if (a, b) in done:
                out[i, j] = done[(a, b)]
                continue
            if metric in SYMMETRIC and (b, a) in done:
                out[i, j] = done[(b, a)]
                continue
            if both is not None and prep_src is prep_tgt and a != b and (b, a) in wanted:
                done[(a, b)], done[(b, a)] = both(
                    prepared(prep_src, a), prepared(prep_tgt, b), mom.comoment(a, b)
                )
            else:
                done[(a, b)] = pair(
                    prepared(prep_src, a), prepared(prep_tgt, b), mom.comoment(a, b)
                )
            out[i, j] = done[(a, b)]
    return out


def pairwise_matrix_raw(
    acts: Mapping[str, object],
    names_a: Sequence[str] | None = None,
    names_b: Sequence[str] | None = None,
    metric: str = "debiased_cka",
    progress: bool = True,
    **kw,
) -> np.ndarray:
    """Similarity matrix from raw activations, for metrics that need the samples.

    Parameters
    ----------
    acts : mapping of str to array or Tensor of shape (n_samples, d_name)
        Activations of the same samples per block.
    names_a, names_b : sequence of str, optional
        Row and column blocks; default all of ``acts`` (``names_b`` defaults to
        ``names_a``).
    metric : str, default="debiased_cka"
        Any of ``RAW_METRICS`` (``debiased_cka``, ``rbf_cka``, ``rsa`` and the linear
        ones). Those of ``PREPARED_RAW_METRICS`` prepare each block once (its kernel, RDM
        or HSIC terms) and then take one cheap step per unordered pair.
    progress : bool, default=True
        Show a tqdm progress bar over the pairs.
    **kw
        Options passed to the metric (``sigma`` for ``rbf_cka``; ``rdm``, ``compare`` for
        ``rsa``).

    Returns
    -------
    ndarray of shape (len(names_a), len(names_b))

    Notes
    -----
    ``debiased_cka`` over one set of blocks (``names_b`` left out) runs all pairs from one
    pass (:func:`lmsim.metrics.cka.debiased_cka_matrix`): the same values, one Gram of all
    blocks instead of one product per pair.
    """
    _check_metric(metric, RAW_METRICS, kw)
    square = names_b is None
    names_a = list(acts) if names_a is None else list(names_a)
    names_b = names_a if names_b is None else list(names_b)
    unknown = [n for n in names_a + names_b if n not in acts]
    if unknown:
        raise KeyError(f"unknown blocks {sorted(set(unknown))}; available: {list(acts)}")
    if metric == "debiased_cka" and square and len(set(names_a)) == len(names_a):
        return debiased_cka_matrix(acts, names_a)
    out = np.empty((len(names_a), len(names_b)), dtype=np.float64)
    pairs = [(i, j) for i in range(len(names_a)) for j in range(len(names_b))]
    if metric in PREPARED_RAW_METRICS:
        return _pairwise_prepared_raw(acts, names_a, names_b, metric, progress, out, kw)
    fn = RAW_METRICS[metric]
    for i, j in tqdm(pairs, desc=f"{metric} pairs", disable=not progress, leave=False):
        out[i, j] = fn(acts[names_a[i]], acts[names_b[j]], **kw)
    return out


def _pairwise_prepared_raw(acts, names_a, names_b, metric, progress, out, kw) -> np.ndarray:
    """Each block prepared once (kernel, RDM, HSIC terms), then one cheap step per pair."""
    n_rows = {int(np.shape(acts[name])[0]) for name in set(names_a) | set(names_b)}
    if len(n_rows) > 1:
        raise ValueError(f"all blocks must have the same n_samples, got {sorted(n_rows)}")
    prepare, pair = PREPARED_RAW_METRICS[metric]
    cache: dict[str, object] = {}

    def prepared(name: str):
        if name not in cache:
            cache[name] = prepare(acts[name], name=name, **kw)
        return cache[name]

    done: dict[tuple[str, str], float] = {}
    pairs = [(i, j) for i in range(len(names_a)) for j in range(len(names_b))]
    with _one_cpu_thread("cpu"):
        for i, j in tqdm(pairs, desc=f"{metric} pairs", disable=not progress, leave=False):
            a, b = names_a[i], names_b[j]
            if (b, a) in done:  # every prepared raw metric is symmetric
                out[i, j] = done[(b, a)]
                continue
            done[(a, b)] = out[i, j] = pair(prepared(a), prepared(b))
    return out


#: Attention measures of :func:`pairwise_attention`: head-level (attnsim) and distributed.
HEAD_KINDS = ("jensen_shannon", "frobenius", "pearson")
DISTRIBUTED_KINDS = ("cka", "svcca", "pwcca")


def pairwise_attention(
    attn: Mapping[str, Sequence],
    kind: str = "jensen_shannon",
    causal: Mapping[str, bool] | None = None,
    progress: bool = True,
    *,
    paper_compat: bool = False,
    ar_mask: bool = True,
) -> np.ndarray:
    """Attention similarity of every layer to every layer (Wu et al. 2020, Fig. 4 and 10).

    Head-level kinds compute the head × head similarity once per unordered pair of layers
    and read both directions of ``attnsim`` from it (the head similarities are symmetric);
    distributed kinds build each layer's (query, key) × head features once per mask.
    ``out[i, j]`` equals ``attnsim(attn[a_i], attn[a_j], kind)`` or
    ``distattn_sim(attn[a_i], attn[a_j], kind, causal=(causal[a_i], causal[a_j]))``.

    Parameters
    ----------
    attn : mapping of str to list of array of shape (n_heads, n_words_s, n_words_s)
        Block name (e.g. ``"bert/layer.3"``) to that layer's word-level attention, one
        array per sentence, the same sentences for every block.
    kind : {"jensen_shannon", "frobenius", "pearson", "cka", "svcca", "pwcca"}
        Head-level similarity for ``attnsim``, or the metric of the distributed attention
        similarity.
    causal : mapping of str to bool, optional
        Whether each block comes from a causal model (distributed kinds then use only the
        ``key ≤ query`` pairs for any pair involving it). Default: no block is causal.
    progress : bool, default=True
        Show a tqdm bar over the pairs.
    paper_compat : bool, default=False
        Distributed kinds as the authors' ``AttnCCA`` / ``AttnLinCKA`` computed them (see
        :func:`lmsim.metrics.distattn_sim`): every block's features from
        :func:`~lmsim.metrics.attention.paper_attention_features`, the rows where every head
        of the *first* block of ``attn`` is non-zero kept for all blocks (their mask is
        computed once, from the first model loaded), paper-compatible SVCCA / PWCCA.
        ``causal`` must then be left out. Head-level kinds are unaffected.
    ar_mask : bool, default=True
        With ``paper_compat``: cut every model's attention to keys ≤ query and renormalise
        (their final run, ``--ar_mask``).

    Returns
    -------
    ndarray of shape (n_blocks, n_blocks)
        Rows are the source layer ``l``, columns ``l'``, in the order of ``attn``.
    """
    kinds = HEAD_KINDS + DISTRIBUTED_KINDS
    if kind not in kinds:
        raise ValueError(f"unknown `kind` {kind!r}; choose one of {list(kinds)}")
    names = list(attn)
    if not names:
        raise ValueError("`attn` is empty; pass {block name: list of attention arrays}")
    causal = dict(causal or {})
    unknown = sorted(set(causal) - set(names))
    if unknown:
        raise KeyError(f"`causal` names blocks {unknown} that are not in `attn`")
    paper = paper_compat and kind in DISTRIBUTED_KINDS
    if paper and any(causal.values()):
        raise ValueError(
            "`causal` selects the textbook mask; with `paper_compat=True` the authors' "
            "`ar_mask` decides which pairs count: leave `causal` out"
        )
    # Per-sentence attention matrices are tiny: one thread (see _one_cpu_thread).
    with _one_cpu_thread("cpu"):
        if paper:
            return _pairwise_attention_paper(attn, names, kind, ar_mask, progress)
        return _pairwise_attention(attn, names, kind, causal, progress)


def _pairwise_attention_paper(attn, names, kind, ar_mask, progress) -> np.ndarray:
    n = len(names)
    out = np.empty((n, n), dtype=np.float64)
    feats = {name: paper_attention_features(attn[name], ar_mask) for name in names}
    keep = nonzero_rows(feats[names[0]])
    pairs = [(i, j) for i in range(n) for j in range(i, n)]
    for i, j in tqdm(pairs, desc=f"{kind} attention pairs", disable=not progress, leave=False):
        fa, fb = feats[names[i]], feats[names[j]]
        if kind == "pwcca" and i != j:
            out[i, j], out[j, i] = paper_distattn_pair(fa, fb, keep, "pwcca_both")
        else:
            out[i, j] = out[j, i] = paper_distattn_pair(fa, fb, keep, kind)
    return out


def _pairwise_attention(attn, names, kind, causal, progress) -> np.ndarray:
    n = len(names)
    out = np.empty((n, n), dtype=np.float64)
    pairs = [(i, j) for i in range(n) for j in range(i, n)]
    bar = tqdm(pairs, desc=f"{kind} attention pairs", disable=not progress, leave=False)
    if kind in HEAD_KINDS:
        for i, j in bar:
            sim = attention_head_similarity(attn[names[i]], attn[names[j]], kind=kind)
            out[i, j] = sim.max(axis=1).mean()
            out[j, i] = sim.max(axis=0).mean()
        return out
    fn = {"cka": linear_cka, "svcca": svcca, "pwcca": pwcca}[kind]
    feats: dict[tuple[str, bool], object] = {}

    def features(name: str, tril: bool):
        if (name, tril) not in feats:
            feats[(name, tril)] = distributed_attention_features(attn[name], causal=tril)
        return feats[(name, tril)]

    for i, j in bar:
        tril = causal.get(names[i], False) or causal.get(names[j], False)
        fa, fb = features(names[i], tril), features(names[j], tril)
        if kind == "pwcca" and i != j:
            out[i, j], out[j, i] = pwcca_both(fa, fb)
        else:
            out[i, j] = out[j, i] = fn(fa, fb)
    return out
