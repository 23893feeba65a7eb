"""The Wu et al. (2020) chapter's family comparisons: mean similarity within a model, within a
family and across families, read off layer x layer matrices.

References
----------
Wu et al. (2020), Sec. 5 (models of one family are more alike than models across families).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from lmsim.metrics.localization import layer_matrix, layer_table

__all__ = ["family_cells", "family_means", "relation_gap"]


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
    values, models = layer_matrix(matrix, names)
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
