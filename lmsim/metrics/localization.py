"""Localization score per layer: localized (neuronsim) minus distributed (svsim) similarity.

References
----------
Wu et al. (2020), Sec. 5.1 ("Higher layers are more localized than lower ones", Fig. 3).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from lmsim.blocks import parse_block

__all__ = [
    "block_means",
    "cross_model_mean",
    "depth_trend",
    "depth_trend_test",
    "layer_table",
    "localization_scores",
    "mean_to_others",
]


def _as_square(matrix, name: str) -> np.ndarray:
    values = np.asarray(matrix, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] != values.shape[1]:
        raise ValueError(
            f"`{name}` must be a square (n_layers, n_layers) matrix over all layers of all "
            f"models, got shape {values.shape}"
        )
    if values.shape[0] < 3:
        raise ValueError(
            f"`{name}` needs at least 3 layers (a mean over other layers, then a z-score "
            f"with ddof=1), got {values.shape[0]}"
        )
    if not np.isfinite(values).all():
        raise ValueError(f"`{name}` contains NaN or Inf similarities")
    return values


def mean_to_others(matrix, direction: str = "from") -> np.ndarray:
    """Each layer's mean similarity to all other layers (the diagonal excluded).

    Parameters
    ----------
    matrix : array of shape (n_layers, n_layers)
        ``matrix[i, j] = sim(layer_i → layer_j)``.
    direction : {"from", "to"}
        ``"from"``: mean over ``j ≠ i`` of ``matrix[i, j]`` (layer i as the source X);
        ``"to"``: mean over ``j ≠ i`` of ``matrix[j, i]`` (the heatmap's column mean).

    Returns
    -------
    ndarray of shape (n_layers,)
    """
    if direction not in ("from", "to"):
        raise ValueError(f"`direction` must be 'from' or 'to', got {direction!r}")
    values = np.asarray(matrix, dtype=np.float64)
    if direction == "to":
        values = values.T
    off_diag = ~np.eye(values.shape[0], dtype=bool)
    return np.where(off_diag, values, 0.0).sum(axis=1) / (values.shape[0] - 1)


def _zscore(values: np.ndarray, name: str) -> np.ndarray:
    std = values.std(ddof=1)
    if not std > 0:
        raise ValueError(
            f"every layer has the same mean {name} similarity, so its z-score is undefined"
        )
    return (values - values.mean()) / std


NORMALIZE = ("none", "all", "per_model")


def _normalized(values: np.ndarray, normalize: str, models: np.ndarray, name: str) -> np.ndarray:
    if normalize == "none":
        return values
    if normalize == "all":
        return _zscore(values, name)
    out = np.empty_like(values)
    for model in dict.fromkeys(models):
        rows = models == model
        if rows.sum() < 2:
            raise ValueError(
                f"`normalize='per_model'` z-scores within each model, but model {model!r} has "
                "one layer; pass at least two layers per model or normalize='all'"
            )
        out[rows] = _zscore(values[rows], f"{name} (model {model!r})")
    return out


def _models_of(labels: Sequence, models) -> np.ndarray:
    if models is not None:
        models = np.asarray(list(models), dtype=object)
        if len(models) != len(labels):
            raise ValueError(f"`models` has {len(models)} entries for {len(labels)} layers")
        return models
    try:
        return np.array([parse_block(label)[0] for label in labels], dtype=object)
    except ValueError as err:
        raise ValueError(
            f"`normalize='per_model'` needs each layer's model: {err}; pass `models=` (one "
            "model name per layer) or block names as `layer_labels`"
        ) from None


def localization_scores(
    neuronsim_matrix,
    svsim_matrix,
    layer_labels: Sequence[str] | None = None,
    direction: str = "to",
    normalize: str | None = None,
    *,
    paper_compat: bool = False,
    models: Sequence[str] | None = None,
) -> pd.Series:
    """Localization score of every layer of every model.

    ``score_L = f(mean_{X≠L} neuronsim[X, L]) − f(mean_{X≠L} svsim[X, L])``: each layer's
    mean similarity *from* the other layers (the heatmap's column mean, the paper's
    "column-wise mean"), localized minus distributed. ``f`` is the normalisation: the
    paper's text subtracts the raw means (``normalize="none"``, the default); the authors'
    analysis notebooks z-score each mean over all layers of all models first, pandas
    ``std`` with ddof=1 (``normalize="all"``, ``paper_compat=True``). Z-scoring across
    models of very different widths makes the score mostly a function of width (wider
    layers have lower neuronsim and higher svsim), so ``normalize="per_model"`` z-scores
    within each model instead. Positive: the layer shares individual neurons with other
    layers more than its overall subspace similarity would predict (localized
    information).

    Parameters
    ----------
    neuronsim_matrix : array or DataFrame of shape (n_layers, n_layers)
        ``neuronsim_matrix[i, j] = neuronsim(layer_i → layer_j)`` over all layers of all
        models; the diagonal is ignored.
    svsim_matrix : array or DataFrame of shape (n_layers, n_layers)
        SVCCA similarity, same layer order (the authors use their own SVCCA:
        ``svcca(..., paper_compat=True)``).
    layer_labels : sequence of str, optional
        One label per layer (e.g. ``"bert/layer.3"``); default the DataFrame index of
        ``neuronsim_matrix``, else ``0..n_layers-1``.
    direction : {"to", "from"}, default="to"
        ``"to"``: mean over the other layers X of ``sim(X → L)``, column L (the paper and
        the authors' code); ``"from"``: mean over X of ``sim(L → X)``, row L (this
        library's form before the authors' notebooks were checked). Identical for the
        symmetric svsim.
    normalize : {"none", "all", "per_model"}, optional
        Default ``"none"``, or ``"all"`` with ``paper_compat=True``.
    paper_compat : bool, default=False
        The authors' analysis notebooks (``analysis-8/14/16``, ``analysis-fine-*``):
        column means, z-scored over all layers (ddof=1). ``direction`` and ``normalize``
        must then be left at ``"to"`` and ``None``/``"all"``.
    models : sequence of str, optional
        The model of each layer, for ``normalize="per_model"``; default parsed from block
        names ``"{model}/layer.{i}"`` in ``layer_labels``.

    Returns
    -------
    pandas.Series of length n_layers
        Indexed by ``layer_labels``.

    References
    ----------
    Wu et al. (2020), Sec. 5.1, Fig. 3; johnmwu/contextual-corr-analysis,
    ``analysis/analysis-8.ipynb`` (the localization cell).
    """
    if direction not in ("from", "to"):
        raise ValueError(f"`direction` must be 'to' or 'from', got {direction!r}")
    if paper_compat:
        if direction != "to" or normalize not in (None, "all"):
            raise ValueError(
                "`paper_compat=True` is the authors' column mean z-scored over all layers; "
                f"got direction={direction!r}, normalize={normalize!r}: leave them at their "
                "defaults or drop paper_compat"
            )
        normalize = "all"
    normalize = "none" if normalize is None else normalize
    if normalize not in NORMALIZE:
        raise ValueError(f"`normalize` must be one of {list(NORMALIZE)}, got {normalize!r}")
    if layer_labels is None and isinstance(neuronsim_matrix, pd.DataFrame):
        layer_labels = list(neuronsim_matrix.index)
    neuron = _as_square(neuronsim_matrix, "neuronsim_matrix")
    sv = _as_square(svsim_matrix, "svsim_matrix")
    if neuron.shape != sv.shape:
        raise ValueError(
            f"`neuronsim_matrix` {neuron.shape} and `svsim_matrix` {sv.shape} must cover the "
            "same layers in the same order"
        )
    if layer_labels is None:
        layer_labels = list(range(neuron.shape[0]))
    if len(layer_labels) != neuron.shape[0]:
        raise ValueError(
            f"`layer_labels` has {len(layer_labels)} labels for {neuron.shape[0]} layers"
        )
    owner = _models_of(layer_labels, models) if normalize == "per_model" else None
    score = _normalized(mean_to_others(neuron, direction), normalize, owner, "neuronsim")
    score = score - _normalized(mean_to_others(sv, direction), normalize, owner, "svsim")
    return pd.Series(score, index=list(layer_labels), name="localization")


def layer_table(names: Sequence[str]) -> pd.DataFrame:
    """Split block names ``"{model}/layer.{i}"`` into model, layer and relative depth.

    Parameters
    ----------
    names : sequence of str
        Block names as :func:`lmsim.extract.extract_moments` writes them (the model part
        may itself contain ``/``, e.g. ``"zoo/mlm-s0/layer.2"``).

    Returns
    -------
    DataFrame indexed by ``names``
        ``model`` (str), ``layer`` (int) and ``depth`` = layer / deepest listed layer of
        that model, in ``[0, 1]`` (0 = embeddings; a model listed with layer 0 only gets 0).
    """
    rows = [parse_block(name) for name in names]
    table = pd.DataFrame(rows, columns=["model", "layer"], index=list(names))
    deepest = table.groupby("model")["layer"].transform("max").clip(lower=1)
    table["depth"] = table["layer"] / deepest
    return table


def layer_matrix(matrix, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """A layer x layer matrix as float64, checked against its block names, and the model of
    each row.

    Parameters
    ----------
    matrix : array of shape (n_layers, n_layers)
    names : sequence of str
        ``"{model}/layer.{i}"`` block names, in the order of the rows.

    Returns
    -------
    values : ndarray of shape (n_layers, n_layers)
    models : ndarray of shape (n_layers,)
        The model name of each row.
    """
    values = np.asarray(matrix, dtype=np.float64)
    if values.shape != (len(names), len(names)):
        raise ValueError(f"`matrix` has shape {values.shape} but there are {len(names)} names")
    return values, layer_table(names)["model"].to_numpy()


def block_means(matrix, names: Sequence[str]) -> pd.DataFrame:
    """Mean similarity of each (model, model) block of an all-layers heatmap.

    Same-model blocks leave out the diagonal (a layer with itself), so the diagonal of the
    result is the mean *within-model* similarity of different layers.

    Parameters
    ----------
    matrix : array of shape (n_layers, n_layers)
        Layer × layer similarities over all layers of all models, in the order of ``names``.
    names : sequence of str
        ``"{model}/layer.{i}"`` block names.

    Returns
    -------
    DataFrame of shape (n_models, n_models)
        Models in order of first appearance; NaN for a one-layer model's own block.
    """
    values, models = layer_matrix(matrix, names)
    order = list(dict.fromkeys(models))
    off_diag = ~np.eye(len(names), dtype=bool)
    out = pd.DataFrame(np.nan, index=order, columns=order)
    for a in order:
        for b in order:
            cells = np.outer(models == a, models == b) & off_diag
            if cells.any():
                out.loc[a, b] = values[cells].mean()
    return out


def cross_model_mean(matrix, names: Sequence[str]) -> pd.Series:
    """Each layer's mean similarity to the layers of the *other* models (its row).

    Parameters
    ----------
    matrix : array of shape (n_layers, n_layers)
    names : sequence of str
        ``"{model}/layer.{i}"`` block names (at least two models).

    Returns
    -------
    pandas.Series indexed by ``names``
    """
    values, models = layer_matrix(matrix, names)
    if len(set(models)) < 2:
        raise ValueError("`names` cover a single model; cross-model means need at least two")
    other = models[:, None] != models[None, :]
    sums = np.where(other, values, 0.0).sum(axis=1)
    return pd.Series(sums / other.sum(axis=1), index=list(names), name="cross_model_mean")


def depth_trend(scores, names: Sequence[str] | None = None) -> pd.DataFrame:
    """Spearman correlation of a per-layer score with layer index, per model.

    Parameters
    ----------
    scores : pandas.Series or array of shape (n_layers,)
        E.g. :func:`localization_scores`; a Series' index supplies ``names``.
    names : sequence of str, optional
        ``"{model}/layer.{i}"`` block names, in the order of ``scores``.

    Returns
    -------
    DataFrame indexed by model
        ``n_layers`` and ``spearman`` (NaN for a model with fewer than 3 layers or a
        constant score: the rank correlation is then undefined or meaningless).

    References
    ----------
    Wu et al. (2020), Sec. 5.1: "the localization score mostly increases with layers".
    """
    if names is None:
        if not isinstance(scores, pd.Series):
            raise ValueError("pass `names` (block names) or `scores` as a Series indexed by them")
        names = list(scores.index)
    values = np.asarray(scores, dtype=np.float64)
    if values.shape != (len(names),):
        raise ValueError(f"`scores` has shape {values.shape} but there are {len(names)} names")
    table = layer_table(names).assign(score=values)
    rows = {}
    for model, group in table.groupby("model", sort=False):
        rho = np.nan
        if len(group) >= 3 and group["score"].nunique() > 1:
            # Spearman = Pearson of the ranks (average ranks for ties).
            rho = float(group["layer"].rank().corr(group["score"].rank()))
        rows[model] = {"n_layers": len(group), "spearman": rho}
    return pd.DataFrame.from_dict(rows, orient="index")


def _spearman_rows(ranks_x: np.ndarray, ranks_y: np.ndarray) -> np.ndarray:
    """Pearson correlation of the ranking ``ranks_x`` (n,) with each row of ``ranks_y``."""
    rx = ranks_x - ranks_x.mean()
    ry = ranks_y - ranks_y.mean(axis=1, keepdims=True)
    denom = np.sqrt((rx**2).sum() * (ry**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ry @ rx) / denom


def depth_trend_test(
    scores,
    names: Sequence[str] | None = None,
    *,
    n_perm: int = 10_000,
    q: float = 0.95,
    alternative: str = "greater",
    seed: int = 0,
) -> dict:
    """Permutation null for the mean per-model Spearman correlation of a score with depth.

    "The localization score mostly increases with layers" (Wu et al. 2020, Sec. 5.1) is a
    statement about every layer of every model. The statistic is the mean over models of
    the Spearman correlation of the score with the layer index (:func:`depth_trend`); its
    null permutes the order of each model's layers independently (scores shuffled within
    model), which keeps every model's set of scores and breaks only their order. A mean of
    0.3 over four models of four layers each arises by chance often (probability about
    0.18), so the value is judged against this null, not against a fixed bar.

    Parameters
    ----------
    scores : pandas.Series or array of shape (n_layers,)
        One score per layer (e.g. :func:`localization_scores`); a Series' index supplies
        ``names``.
    names : sequence of str, optional
        ``"{model}/layer.{i}"`` block names in the order of ``scores``.
    n_perm : int, default=10000
        Permutations.
    q : float, default=0.95
        The quantile of the null reported as the bar (one-sided at 5 %).
    alternative : {"greater", "less", "two-sided"}, default="greater"
        Direction of the p-value.
    seed : int, default=0
        Seed of ``numpy.random.default_rng``. Draw order: for each model with at least 3
        layers, in order of first appearance, ``n_perm`` draws of
        ``rng.permutation(n_layers)``.

    Returns
    -------
    dict
        ``observed`` (mean Spearman over the models with >= 3 layers and a non-constant
        score), ``null_quantile`` (the ``q`` quantile of the null draws), ``null_mean``,
        ``p_value`` (``(1 + #{null at least as extreme}) / (1 + n_perm)``), ``n_models``,
        ``n_layers`` (total), ``per_model`` (the :func:`depth_trend` table) and ``draws``
        (ndarray of shape (n_perm,)).

    References
    ----------
    Wu et al. (2020), Sec. 5.1, Fig. 3. Efron & Tibshirani (1993), ch. 15.
    """
    if alternative not in ("greater", "less", "two-sided"):
        raise ValueError(
            f"`alternative` must be 'greater', 'less' or 'two-sided', got {alternative!r}"
        )
    if not 0 < q < 1:
        raise ValueError(f"`q` must lie in (0, 1), got {q!r}")
    if int(n_perm) < 1:
        raise ValueError(f"`n_perm` must be >= 1, got {n_perm!r}")
    per_model = depth_trend(scores, names)
    if names is None:
        names = list(scores.index)
    table = layer_table(names).assign(score=np.asarray(scores, dtype=np.float64))
    used = [m for m in per_model.index if np.isfinite(per_model.loc[m, "spearman"])]
    if not used:
        raise ValueError(
            "no model has at least 3 layers with a non-constant score: the trend is undefined"
        )
    rng = np.random.default_rng(seed)
    draws = np.zeros(int(n_perm))
    for model in per_model.index:
        if per_model.loc[model, "n_layers"] < 3:
            continue
        rows = table[table["model"] == model]
        ranks = rows["layer"].rank().to_numpy()
        # Permuting the scores permutes their (average) ranks: rank once.
        score_ranks = rows["score"].rank().to_numpy()
        perms = np.stack([score_ranks[rng.permutation(len(rows))] for _ in range(int(n_perm))])
        if model in used:
            draws += _spearman_rows(ranks, perms)
    draws /= len(used)
    observed = float(per_model.loc[used, "spearman"].mean())
    tol = 1e-12 * max(1.0, abs(observed))
    if alternative == "greater":
        extreme = draws >= observed - tol
    elif alternative == "less":
        extreme = draws <= observed + tol
    else:
        extreme = np.abs(draws) >= abs(observed) - tol
    return {
        "observed": observed,
        "null_quantile": float(np.quantile(draws, q)),
        "null_mean": float(draws.mean()),
        "p_value": float((1 + extreme.sum()) / (1 + len(draws))),
        "n_models": len(used),
        "n_layers": int(per_model.loc[used, "n_layers"].sum()),
        "per_model": per_model,
        "draws": draws,
    }
