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
    "family_means",
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
    values = np.asarray(matrix, dtype=np.float64)
    if values.shape != (len(names), len(names)):
        raise ValueError(f"`matrix` has shape {values.shape} but there are {len(names)} names")
    models = layer_table(names)["model"].to_numpy()
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
    values = np.asarray(matrix, dtype=np.float64)
    if values.shape != (len(names), len(names)):
        raise ValueError(f"`matrix` has shape {values.shape} but there are {len(names)} names")
    models = layer_table(names)["model"].to_numpy()
    if len(set(models)) < 2:
        raise ValueError("`names` cover a single model; cross-model means need at least two")
    other = models[:, None] != models[None, :]
    sums = np.where(other, values, 0.0).sum(axis=1)
    return pd.Series(sums / other.sum(axis=1), index=list(names), name="cross_model_mean")


def family_means(matrix, names: Sequence[str], families: dict[str, str]) -> pd.Series:
    """Mean similarity of layer pairs within a model, within a family and across families.

    Wu et al. (2020, Sec. 5.1) call models of one architecture and objective that differ
    in size (BERT-base and BERT-large, GPT-2 small and medium) a *family*: "models within
    the same family are more similar" compares pairs of *different* models of one family
    with pairs of models from different families.

    Parameters
    ----------
    matrix : array of shape (n_layers, n_layers)
        Layer × layer similarities over all layers of all models, in the order of ``names``.
    names : sequence of str
        ``"{model}/layer.{i}"`` block names.
    families : dict of str to str
        Model -> family name; every model of ``names`` must be listed.

    Returns
    -------
    pandas.Series
        ``"within model"`` (two different layers of one model), ``"within family"`` (layers
        of two different models of one family; NaN when no family has two models) and
        ``"across families"`` (NaN when there is one family).

    Raises
    ------
    ValueError
        A model of ``names`` missing from ``families``, or a wrongly shaped ``matrix``.
    """
    values = np.asarray(matrix, dtype=np.float64)
    if values.shape != (len(names), len(names)):
        raise ValueError(f"`matrix` has shape {values.shape} but there are {len(names)} names")
    models = layer_table(names)["model"].to_numpy()
    missing = sorted(set(models) - set(families))
    if missing:
        raise ValueError(f"`families` has no family for the models {missing}")
    family = np.array([families[m] for m in models])
    same_model = models[:, None] == models[None, :]
    same_family = family[:, None] == family[None, :]
    masks = {
        "within model": same_model & ~np.eye(len(names), dtype=bool),
        "within family": same_family & ~same_model,
        "across families": ~same_family,
    }
    return pd.Series(
        {key: values[mask].mean() if mask.any() else np.nan for key, mask in masks.items()},
        name="mean similarity",
    )


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


def family_cells(
    matrix, names: Sequence[str], families: dict[str, str], models: Sequence[str] | None = None
) -> pd.DataFrame:
    """Every off-diagonal cell of a layer × layer matrix with its relation, for resampling.

    :func:`family_means` gives the means; this gives the cells behind them, so that a
    claim such as "within family > across families" can be judged on a subset of the
    models (e.g. the pretrained ones) with an interval over the pairs of layers.

    Parameters
    ----------
    matrix : array of shape (n_layers, n_layers)
        Layer × layer similarities, in the order of ``names``.
    names : sequence of str
        ``"{model}/layer.{i}"`` block names.
    families : dict of str to str
        Model -> family name, for every model of ``names``.
    models : sequence of str, optional
        Keep only cells whose two layers both belong to these models (default: all).

    Returns
    -------
    DataFrame with one row per ordered pair of different layers
        ``row``, ``col`` (block names), ``value``, ``relation`` (``"within model"``,
        ``"within family"`` or ``"across families"``) and ``models`` (the pair of models,
        ``"a | b"`` with the names sorted, a resampling group).

    Raises
    ------
    ValueError
        A wrongly shaped ``matrix``, a model missing from ``families``, or ``models``
        naming a model that has no layer in ``names``.
    """
    values = np.asarray(matrix, dtype=np.float64)
    if values.shape != (len(names), len(names)):
        raise ValueError(f"`matrix` has shape {values.shape} but there are {len(names)} names")
    owner = layer_table(names)["model"].to_numpy()
    missing = sorted(set(owner) - set(families))
    if missing:
        raise ValueError(f"`families` has no family for the models {missing}")
    keep = set(owner) if models is None else set(models)
    unknown = sorted(keep - set(owner))
    if unknown:
        raise ValueError(f"`models` names {unknown}, which have no layer in `names`")
    rows = []
    for i, a in enumerate(owner):
        for j, b in enumerate(owner):
            if i == j or a not in keep or b not in keep:
                continue
            relation = (
                "within model"
                if a == b
                else "within family"
                if families[a] == families[b]
                else "across families"
            )
            pair = " | ".join(sorted((a, b)))
            rows.append((names[i], names[j], values[i, j], relation, pair))
    return pd.DataFrame(rows, columns=["row", "col", "value", "relation", "models"])


def relation_gap(
    cells: pd.DataFrame,
    first: str,
    second: str,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
):
    """Mean similarity of the ``first`` cells minus the ``second``, with a bootstrap interval.

    A two-sample (stratified) percentile bootstrap: each draw resamples the ``first`` cells
    and then the ``second`` cells with replacement (``rng.integers`` on each, in that
    order), so no draw lacks either group.

    Parameters
    ----------
    cells : DataFrame
        :func:`family_cells` output (columns ``value`` and ``relation``).
    first, second : str
        Relations to compare (``"within family"``, ``"across families"``, ...).
    n_boot, level, seed
        Resamples, coverage of the interval, seed of ``numpy.random.default_rng``.

    Returns
    -------
    lmsim.stats.Estimate or None
        ``unit`` "pairs of layers", ``n`` the number of cells of both groups; None when
        either relation has no cell (e.g. no family has two models).
    """
    from lmsim.stats import Estimate

    a = cells.loc[cells["relation"] == first, "value"].to_numpy(dtype=np.float64)
    b = cells.loc[cells["relation"] == second, "value"].to_numpy(dtype=np.float64)
    if not len(a) or not len(b):
        return None
    if not 0 < level < 1:
        raise ValueError(f"`level` must lie in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    draws = np.empty(int(n_boot))
    for k in range(len(draws)):
        pick_a, pick_b = rng.integers(0, len(a), len(a)), rng.integers(0, len(b), len(b))
        draws[k] = a[pick_a].mean() - b[pick_b].mean()
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(
        float(a.mean() - b.mean()),
        float(low),
        float(high),
        level,
        "pairs of layers",
        len(a) + len(b),
        f"two-sample percentile bootstrap ({n_boot} resamples of the pairs of layers of "
        f"each group: {len(a)} {first}, {len(b)} {second})",
        sd=float(draws.std(ddof=1)),
        draws=draws,
    )
