"""Which neuron represents a cluster: selection policies and what each implies for Table 5.1.

Dalvi et al. (2020) keep one neuron per correlation cluster, drawn uniformly at random
(NeuroX ``extract_independent_neurons``: ``np.random.choice`` over the cluster). The 2022
thesis's Table 5.1 keeps *only* embedding neurons at τ = 0.8 in every model. This module
asks which selection policy could produce such a table, given a clustering:

* :func:`select_representatives` — the kept set under a policy: ``"random"`` (uniform
  within the cluster, seeded), ``"first"`` / ``"last"`` (lowest / highest neuron index:
  with layers in depth order, ``"first"`` prefers the embeddings), ``"max_score"`` (the
  neuron of highest score, e.g. variance; ties to the lowest index).
* :func:`expected_kept_per_layer` and :func:`prob_only_layer` — exactly, under the
  uniform random policy: the expected Table 5.1 row (``Σ_c n_{c,l} / n_c``) and the
  probability that every representative lies in one layer (``∏_c n_{c,l} / n_c``).
* :func:`only_layer_bound` — the model-level bound of that probability, ``n_l / n``.
* :func:`rising_counts` — a deterministic policy that keeps the top neuron of every cluster
  under one fixed order (``"first"``, ``"last"``, ``"max_score"``) keeps nested sets under
  nested cuts, so its per-layer counts never rise with τ; a rise in a published table
  rules all such policies out.
* :func:`policy_table` — all of it for a clustering cut at several τ, one row per
  (τ, policy).

References
----------
Dalvi, Sajjad, Durrani & Belinkov (2020), "Analyzing Redundancy in Pretrained Transformer
Models", EMNLP, Sec. 3; "Distillation and redundancy in language models" (master's thesis,
2022), Table 5.1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lmsim.cluster import neuron_blocks, representatives

__all__ = [
    "POLICIES",
    "THESIS_TABLE_51",
    "carry_over_prefix",
    "carry_over_table",
    "carry_over_selection",
    "select_representatives",
    "expected_kept_per_layer",
    "prob_only_layer",
    "only_layer_bound",
    "is_refinement",
    "rising_counts",
    "policy_table",
]

POLICIES = ("random", "first", "last", "max_score")

# The thesis's Table 5.1: kept neurons per layer (0 = embeddings, 768 neurons each) at
# τ = 0.1, 0.2, ..., 0.9, for BERT-base (12 layers) and distilBERT (6 layers).
THESIS_TABLE_51 = {
    "BERT-base": {
        0.1: [600, 536, 553, 568, 552, 553, 552, 500, 530, 528, 512, 534, 534],
        0.2: [454, 355, 289, 305, 332, 366, 326, 332, 504, 117, 0, 0, 0],
        0.3: [359, 368, 362, 356, 146, 0, 0, 0, 0, 0, 0, 0, 0],
        0.4: [344, 364, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        0.5: [559] + [0] * 12,
        0.6: [527] + [0] * 12,
        0.7: [471] + [0] * 12,
        0.8: [271] + [0] * 12,
        0.9: [45] + [0] * 12,
    },
    "distilBERT": {
        0.1: [751, 743, 730, 739, 718, 717, 691],
        0.2: [595, 463, 407, 443, 420, 436, 356],
        0.3: [441, 460, 426, 445, 30, 0, 0],
        0.4: [383, 400, 125, 0, 0, 0, 0],
        0.5: [525, 92, 0, 0, 0, 0, 0],
        0.6: [528, 0, 0, 0, 0, 0, 0],
        0.7: [498, 0, 0, 0, 0, 0, 0],
        0.8: [360, 0, 0, 0, 0, 0, 0],
        0.9: [84, 0, 0, 0, 0, 0, 0],
    },
}


def _labels(labels) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"`labels` must be a non-empty 1-D array, got shape {labels.shape}")
    return labels


def _layers(layer_of, n: int) -> np.ndarray:
    """The layer of every neuron: from ``{block: width}`` or an array of length ``n``."""
    per = neuron_blocks(layer_of) if isinstance(layer_of, Mapping) else np.asarray(layer_of)
    if per.shape != (n,):
        raise ValueError(
            f"`layer_of` describes {per.size} neurons but `labels` has {n}; pass the "
            "{block: width} of the clustered columns in order, or one layer per neuron"
        )
    return per


def select_representatives(
    labels, policy: str = "random", *, seed: int | None = 0, scores=None
) -> np.ndarray:
    """One kept neuron per cluster under a selection policy.

    Parameters
    ----------
    labels : array-like of int, shape (n_neurons,)
        Cluster of every neuron.
    policy : {"random", "first", "last", "max_score"}
        ``"random"``: uniform within the cluster (:func:`lmsim.cluster.representatives`,
        NeuroX's rule, seeded); ``"first"`` / ``"last"``: the lowest / highest index;
        ``"max_score"``: the highest ``scores`` (ties: the lowest index).
    seed : int or None
        ``"random"`` only.
    scores : array-like of float, shape (n_neurons,), optional
        ``"max_score"`` only, e.g. each neuron's variance on the training words.

    Returns
    -------
    kept : ndarray of int64, shape (n_clusters,)
        Ascending.
    """
    labels = _labels(labels)
    if policy not in POLICIES:
        raise ValueError(f"`policy` must be one of {POLICIES}, got {policy!r}")
    if policy == "random":
        return representatives(labels, seed)
    index = np.arange(labels.size)
    if policy == "first":
        key = -index.astype(np.float64)
    elif policy == "last":
        key = index.astype(np.float64)
    else:
        if scores is None:
            raise ValueError("`policy='max_score'` needs `scores`, one per neuron")
        key = np.asarray(scores, dtype=np.float64)
        if key.shape != labels.shape or not np.isfinite(key).all():
            raise ValueError(f"`scores` must be {labels.size} finite values, got shape {key.shape}")
    # Within each cluster, the largest key wins; lexsort's last key is primary, and the
    # index breaks ties toward the lowest neuron.
    order = np.lexsort((index, -key, labels))
    first = np.ones(labels.size, dtype=bool)
    first[1:] = labels[order][1:] != labels[order][:-1]
    return np.sort(order[first]).astype(np.int64)


def _cluster_layer_counts(labels: np.ndarray, layers: np.ndarray):
    """``counts[c, l]``: neurons of layer ``keys[l]`` in cluster ``c``; and the layer keys."""
    _, cluster = np.unique(labels, return_inverse=True)
    keys, layer = np.unique(layers, return_inverse=True)
    counts = np.zeros((cluster.max() + 1, keys.size), dtype=np.int64)
    np.add.at(counts, (cluster, layer), 1)
    return counts, list(keys)


def expected_kept_per_layer(labels, layer_of) -> dict:
    """Expected kept neurons per layer under the uniform random policy: ``Σ_c n_{c,l} / n_c``.

    Parameters
    ----------
    labels : array-like of int, shape (n_neurons,)
    layer_of : mapping of str to int, or array-like of shape (n_neurons,)
        ``{block: width}`` in column order, or the layer of every neuron.

    Returns
    -------
    dict
        ``{layer: expected count}`` (layers of a mapping in its order, else sorted); the
        values sum to the number of clusters.
    """
    labels = _labels(labels)
    layers = _layers(layer_of, labels.size)
    counts, keys = _cluster_layer_counts(labels, layers)
    expected = (counts / counts.sum(axis=1, keepdims=True)).sum(axis=0)
    out = dict(zip(keys, expected.tolist(), strict=True))
    order = list(layer_of) if isinstance(layer_of, Mapping) else keys
    return {k: float(out[k]) for k in order}


def prob_only_layer(labels, layer_of, layer) -> tuple[float, float]:
    """Probability that the uniform random policy keeps only neurons of ``layer``.

    Each cluster's representative is drawn independently and uniformly, so the probability
    is ``∏_c n_{c,layer} / n_c``: 0 when some cluster has no neuron of ``layer``.

    Parameters
    ----------
    labels : array-like of int, shape (n_neurons,)
    layer_of : mapping of str to int, or array-like of shape (n_neurons,)
    layer
        The layer (a block name of the mapping, or a value of the array), e.g.
        ``"bert-base-cased/layer.0"`` for the embeddings.

    Returns
    -------
    prob : float
    log10_prob : float
        ``-inf`` when ``prob`` is 0 (the product underflows long before its logarithm).
    """
    labels = _labels(labels)
    layers = _layers(layer_of, labels.size)
    if not (layers == layer).any():
        raise ValueError(f"no neuron is in layer {layer!r}; layers: {sorted(set(layers.tolist()))}")
    counts, keys = _cluster_layer_counts(labels, layers)
    share = counts[:, keys.index(layer)] / counts.sum(axis=1)
    if (share == 0).any():
        return 0.0, float("-inf")
    log10 = float(np.log10(share).sum())
    return float(10.0**log10), log10


def only_layer_bound(n_layer: int, n_neurons: int) -> float:
    """Upper bound ``n_layer / n_neurons`` on :func:`prob_only_layer` over all clusterings.

    If only neurons of one layer can be kept, every cluster holds ``e_c >= 1`` of them, and
    ``∏_c e_c / n_c <= min_c e_c / n_c <= Σ e_c / Σ n_c = n_layer / n_neurons`` (the
    smallest ratio is at most the ratio of the sums). BERT-base's embeddings: 768 / 9,984 ≈
    0.077 per model, and independent models multiply.
    """
    if not 0 < int(n_layer) <= int(n_neurons):
        raise ValueError(f"need 0 < `n_layer` <= `n_neurons`, got {n_layer} and {n_neurons}")
    return int(n_layer) / int(n_neurons)


def is_refinement(fine, coarse) -> bool:
    """True when every cluster of ``fine`` lies inside one cluster of ``coarse`` (nested cuts)."""
    fine, coarse = _labels(fine), _labels(coarse)
    if fine.shape != coarse.shape:
        raise ValueError(f"`fine` and `coarse` label {fine.size} and {coarse.size} neurons")
    pairs = np.unique(np.stack([fine, coarse]), axis=1)
    return np.unique(pairs[0]).size == pairs.shape[1]


def rising_counts(table: Mapping) -> list[tuple]:
    """Where a kept-per-layer table rises with τ: what rules out every fixed-order policy.

    A policy that keeps the top neuron of each cluster under one fixed order of all neurons
    (``"first"``, ``"last"``, ``"max_score"``) keeps, for a coarser cut, the top neuron of a
    union of finer clusters, which is one of their kept neurons: under nested cuts (one
    average-linkage tree cut at increasing τ) the kept sets are nested and no layer's count
    can rise. A uniform random draw per τ has no such constraint.

    Parameters
    ----------
    table : mapping of float to mapping of layer to int
        ``{τ: {layer: kept}}`` (e.g. the thesis's Table 5.1 column by column, or
        :func:`lmsim.cluster.kept_per_block` per τ).

    Returns
    -------
    list of (layer, τ_low, τ_high, kept_low, kept_high)
        Every consecutive pair of τ (ascending) where a layer keeps more at the higher τ;
        empty when the table is consistent with a fixed-order policy.
    """
    taus = sorted(table)
    out = []
    for lo, hi in zip(taus[:-1], taus[1:], strict=True):
        for layer, n_lo in table[lo].items():
            n_hi = table[hi].get(layer, 0)
            if n_hi > n_lo:
                out.append((layer, lo, hi, int(n_lo), int(n_hi)))
    return out


def policy_table(
    cuts: Mapping[float, np.ndarray],
    layer_of,
    *,
    layer,
    scores: Mapping[str, np.ndarray] | None = None,
    seeds: Sequence[int] = (0, 1, 2),
) -> pd.DataFrame:
    """Kept neurons in ``layer`` under every policy, for a clustering cut at several τ.

    Parameters
    ----------
    cuts : mapping of float to ndarray of int, shape (n_neurons,)
        ``{τ: labels}`` (e.g. :func:`lmsim.cluster.cluster_neurons` with a list of τ).
    layer_of : mapping of str to int, or array-like of shape (n_neurons,)
    layer
        The layer asked about, e.g. the embeddings' block name.
    scores : dict of str to ndarray (n_neurons,), optional
        Named scores for ``"max_score"`` policies (e.g. ``{"variance": var}``); each adds a
        policy ``"max_score:<name>"``.
    seeds : sequence of int
        Draws of the random policy reported (the exact probability is reported too).

    Returns
    -------
    DataFrame
        One row per (τ, policy): ``tau``, ``policy``, ``n_kept``, ``kept_in_layer`` (mean
        over ``seeds`` for ``"random"``), ``only_layer`` (the exact probability for
        ``"random"``, 0 or 1 otherwise), ``log10_only_layer``, ``expected_in_layer``
        (``"random"``: :func:`expected_kept_per_layer`).
    """
    rows = []
    for tau, labels in sorted(cuts.items()):
        labels = _labels(labels)
        layers = _layers(layer_of, labels.size)
        in_layer = layers == layer
        if not in_layer.any():
            raise ValueError(f"no neuron is in layer {layer!r}")
        n_kept = int(np.unique(labels).size)
        prob, log10 = prob_only_layer(labels, layers, layer)
        expected = expected_kept_per_layer(labels, layers)[layer]
        draws = [int(in_layer[select_representatives(labels, seed=s)].sum()) for s in seeds]
        rows.append(
            dict(
                tau=tau,
                policy="random",
                n_kept=n_kept,
                kept_in_layer=float(np.mean(draws)),
                only_layer=prob,
                log10_only_layer=log10,
                expected_in_layer=expected,
            )
        )
        fixed = {"first": None, "last": None}
        fixed |= {f"max_score:{k}": v for k, v in (scores or {}).items()}
        for name, score in fixed.items():
            policy = "max_score" if name.startswith("max_score") else name
            kept = select_representatives(labels, policy, scores=score)
            k = int(in_layer[kept].sum())
            rows.append(
                dict(
                    tau=tau,
                    policy=name,
                    n_kept=n_kept,
                    kept_in_layer=float(k),
                    only_layer=float(k == n_kept),
                    log10_only_layer=0.0 if k == n_kept else float("-inf"),
                    expected_in_layer=float(k),
                )
            )
    return pd.DataFrame(rows)


def carry_over_prefix(table: Mapping, width: int) -> list[dict]:
    """Is a kept-per-layer table what a re-clustering loop with an index carry-over makes?

    In the authors' pipeline (``fdalvi/analyzing-redundancy-in-pretrained-transformer-models``,
    ``experiments/labeling/run_pipeline_all.py``, ``run_neuron_selection``) each τ clusters
    the *previous* τ's reduced matrix (``extract_independent_neurons(X_filtered, ...)``) and
    applies the returned column indices, local to that reduced matrix, to the full matrix
    (``filter_activations_keep_neurons(independent_neurons, X_layer_filtered)``). The kept
    neurons at τ then lie among the first ``N`` columns, ``N`` the previous τ's total: with
    layers of ``width`` columns (embeddings first), layer ``l`` holds at most
    ``clip(N - width·l, 0, width)`` of them, and the last layer with any is at most
    ``(N - 1) // width``.

    Parameters
    ----------
    table : mapping of float to sequence of int
        ``{τ: kept neurons per layer}`` (layer 0 the embeddings), e.g. the thesis's Table
        5.1 column by column; the smallest τ is the first clustering.
    width : int
        Neurons per layer (768 for BERT-base).

    Returns
    -------
    list of dict
        One per consecutive pair of τ: ``tau``, ``prefix`` (N), ``last_layer`` (the last
        layer with a kept neuron), ``predicted_last`` (``(N - 1) // width``) and
        ``within`` (every layer's count within its share of the prefix).
    """
    if int(width) <= 0:
        raise ValueError(f"`width` must be a positive number of neurons per layer, got {width}")
    taus = sorted(table)
    out = []
    for lo, hi in zip(taus[:-1], taus[1:], strict=True):
        prefix = int(sum(table[lo]))
        counts = [int(c) for c in table[hi]]
        room = [max(0, min(int(width), prefix - int(width) * i)) for i in range(len(counts))]
        kept_layers = [i for i, c in enumerate(counts) if c > 0]
        out.append(
            dict(
                tau=hi,
                prefix=prefix,
                last_layer=max(kept_layers) if kept_layers else -1,
                predicted_last=(prefix - 1) // int(width),
                within=all(c <= r for c, r in zip(counts, room, strict=True)),
            )
        )
    return out


def carry_over_table(tables: Mapping[str, Mapping] | None = None, width: int = 768) -> pd.DataFrame:
    """:func:`carry_over_prefix` for every model of a published table, one row per τ-to-τ
    transition, with ``fits`` (every layer within the prefix and the last kept layer exactly
    the predicted one).

    Parameters
    ----------
    tables : mapping of str to mapping of float to sequence of int, optional
        ``{model: {τ: kept per layer}}``; default the thesis's :data:`THESIS_TABLE_51`.
    width : int
        Neurons per layer.

    Returns
    -------
    DataFrame
        ``model``, ``tau``, ``prefix``, ``last_layer``, ``predicted_last``, ``within``,
        ``fits``.
    """
    rows = []
    for model, table in (THESIS_TABLE_51 if tables is None else tables).items():
        rows += [dict(model=model, **c) for c in carry_over_prefix(table, width)]
    out = pd.DataFrame(rows)
    return out.assign(fits=out.within & (out.last_layer == out.predicted_last))


def carry_over_selection(
    X, thresholds: Sequence[float], *, seed: int = 0, first=None, device=None
) -> dict[float, np.ndarray]:
    """The authors' τ loop, simulated: each τ re-clusters the previous τ's reduced matrix and
    applies the returned *local* column indices to the full matrix.

    In ``run_neuron_selection`` (``fdalvi/analyzing-redundancy-in-pretrained-transformer-models``,
    ``experiments/labeling/run_pipeline_all.py``) the first τ clusters all neurons; every
    later τ clusters ``X_filtered``, the full matrix restricted to the previous τ's kept
    columns, and keeps ``filter_activations_keep_neurons(independent_neurons,
    X_layer_filtered)``: indices into the reduced matrix used as columns of the full one.
    The kept set at τ is therefore a subset of ``range(N)``, ``N`` the previous τ's count,
    whatever the correlations of the neurons it names (:func:`carry_over_prefix`).

    Parameters
    ----------
    X : ndarray of shape (n_words, n_neurons)
        Training activations, layers in depth order (embeddings first).
    thresholds : sequence of float
        τ, visited in ascending order (the authors' configuration order).
    seed : int
        :func:`lmsim.cluster.representatives`' draw (NeuroX's uniform pick), the same at
        every τ.
    first : ndarray of int, shape (n_neurons,), optional
        Cluster labels of all neurons at the smallest τ, when already computed (the single
        tree cut at that τ is the same clustering): saves one full clustering.
    device
        :func:`lmsim.cluster.cluster_neurons`' device.

    Returns
    -------
    dict of float to ndarray of int64
        ``{τ: kept columns of the full matrix}``, ascending; at the smallest τ the single cut's
        representatives.
    """
    from lmsim.cluster import cluster_neurons

    taus = sorted(float(t) for t in thresholds)
    if not taus:
        raise ValueError("`thresholds` must hold at least one τ")
    out: dict[float, np.ndarray] = {}
    columns = None
    for tau in taus:
        if columns is None:
            labels = first if first is not None else cluster_neurons(X, tau, device=device)
            labels = _labels(labels)
            if labels.size != X.shape[1]:
                raise ValueError(f"`first` labels {labels.size} neurons, `X` has {X.shape[1]}")
        elif columns.size < 2:  # one neuron left: one cluster (nothing to correlate)
            labels = np.zeros(columns.size, dtype=np.int64)
        else:
            labels = cluster_neurons(X[:, columns], tau, device=device)
        # the carry-over: local indices of the reduced matrix, used as full-matrix columns
        columns = representatives(labels, seed)
        out[tau] = columns
    return out
