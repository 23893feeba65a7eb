"""The Wu et al. (2020) chapter's family claims judged with models as the unit.

"Models within the same family are more similar" and "a model's own layers are more alike
than layers across families" are claims about *models*. Pooling every pair of layers
(:func:`~lmsim.papers.wu2020_similarity.relation_gap`) gives an interval over hundreds of
cells that come from two or three pairs of models, and a pooled "holds" can hide a pair
that points the other way (``EVIDENCE.md`` §1 and §4). Here each claim is judged

- per group: each within-family **model pair** (or each **model**), its own gap with an
  interval over its layers (the layers of each model drawn with replacement: rows and
  columns of a block move together, a cell is not a unit);
- pooled: the mean of the groups' gaps, each group weighing the same, with a hierarchical
  bootstrap (groups with replacement, then layers), ``n`` the number of groups.

The groups' :class:`lmsim.stats.Estimate` go to :meth:`lmsim.claims.Claims.report` as
``groups=`` beside the pooled one, so a group on the wrong side makes the verdict
"heterogeneous".

Block means
-----------
For models ``A`` and ``B`` with layer sets ``L_A`` and ``L_B``, ``M[A, B]`` is the mean of
``matrix[i, j]`` over ``i ∈ L_A``, ``j ∈ L_B``, ``i ≠ j``; ``S(A, B) = (M[A, B] + M[B, A]) / 2``
(directional measures count both directions) and ``W(A) = M[A, A]`` (different layers of
``A``). With ``X(A)`` the set of models of a family other than ``A``'s:

- within family > across families, pair ``(A, B)`` of one family:
  ``S(A, B) − mean{S(A, C), S(B, C) : C ∈ X(A)}``;
- within model > across families, model ``A``: ``W(A) − mean{S(A, C) : C ∈ X(A)}``;
- measure contrast, across-family pair ``(A, B)`` (:func:`measure_contrast`):
  ``S₁(A, B) − S₂(A, B)`` of two measures (e.g. both minus their chance floors,
  :func:`lmsim.metrics.floors.above_floor`).

References
----------
Wu et al. (2020), Sec. 5.1-5.2 (within-family similarity, Figs. 1-2). Davison & Hinkley
(1997), §3.8 (hierarchical bootstrap).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lmsim.metrics.localization import layer_matrix
from lmsim.stats import Estimate

__all__ = [
    "Contrast",
    "family_contrasts",
    "measure_contrast",
    "percentile_scale",
    "split_half_agreement",
]

WITHIN_FAMILY = "within family > across families"
WITHIN_MODEL = "within model > across families"


@dataclass(frozen=True)
class Contrast:
    """A family claim per group and pooled.

    Attributes
    ----------
    claim : str
        ``"within family > across families"``, ``"within model > across families"`` or
        the measure contrast's name.
    pooled : Estimate or None
        Mean of the groups' gaps (equal weights), interval from a hierarchical bootstrap
        over groups then layers; ``n`` the number of groups. None without groups.
    groups : dict of str to Estimate
        Per model pair (``"A | B"``) or per model: its gap with an interval over its
        layers; ``n`` the layers of its models.
    table : pandas.DataFrame
        One row per group: ``first`` and ``second`` (the two means compared), ``gap``,
        ``lower``, ``upper``, ``n_layers``.
    """

    claim: str
    pooled: Estimate | None
    groups: dict
    table: pd.DataFrame
    unit: str | None = None

    def claim_kwargs(self) -> dict:
        """``estimate``, ``groups`` and ``pooled`` for :meth:`lmsim.claims.Claims.report`
        (no ``groups`` with fewer than two groups: the one group is the claim)."""
        if self.pooled is None:
            raise ValueError(f"{self.claim!r} has no group to judge")
        if len(self.groups) < 2:
            return {"estimate": self.pooled}
        unit = self.unit or ("model pairs" if " | " in next(iter(self.groups)) else "models")
        return {"estimate": self.pooled, "groups": dict(self.groups), "pooled": unit}


def _layers_by_model(models: np.ndarray) -> dict[str, np.ndarray]:
    return {m: np.flatnonzero(models == m) for m in dict.fromkeys(models)}


def _block_means(values: np.ndarray, rows: Mapping[str, np.ndarray]) -> dict:
    """``M[A, B]`` for every ordered pair of models on (resampled) layer indices ``rows``;
    cells pairing a layer with itself are left out (they are not a similarity of two)."""
    out = {}
    for a, ia in rows.items():
        for b, ib in rows.items():
            cells = values[np.ix_(ia, ib)]
            if a == b:
                keep = ia[:, None] != ib[None, :]
                out[a, b] = float(cells[keep].mean()) if keep.any() else np.nan
            else:
                out[a, b] = float(cells.mean())
    return out


def _sym(block: Mapping, a: str, b: str) -> float:
    return (block[a, b] + block[b, a]) / 2


def _draw_layers(rng: np.random.Generator, rows: Mapping[str, np.ndarray]) -> dict:
    return {m: idx[rng.integers(0, len(idx), len(idx))] for m, idx in rows.items()}


def _bootstrap(
    values: Sequence[np.ndarray],
    models: np.ndarray,
    groups: Mapping[str, Callable],
    used: Sequence[str],
    claim: str,
    pooled_unit: str,
    n_boot: int,
    level: float,
    seed: int,
) -> Contrast:
    """Point estimates and the two-level bootstrap shared by every contrast.

    Draw order: per replicate, the layers of each model of ``used`` in that order
    (``rng.integers(0, n_m, n_m)``), then the groups (``rng.integers(0, G, G)``).
    """
    if not 0 < level < 1:
        raise ValueError(f"`level` must lie in (0, 1), got {level!r}")
    if int(n_boot) < 2:
        raise ValueError(f"`n_boot` must be >= 2, got {n_boot!r}")
    rows_all = _layers_by_model(models)
    rows = {m: rows_all[m] for m in used}
    names = list(groups)
    if not names:
        return Contrast(claim, None, {}, pd.DataFrame(
            columns=["first", "second", "gap", "lower", "upper", "n_layers"]))  # fmt: skip
    point_blocks = [_block_means(v, rows) for v in values]
    point = {g: groups[g](point_blocks) for g in names}
    rng = np.random.default_rng(seed)
    draws = np.empty((int(n_boot), len(names)))
    pooled_draws = np.empty(int(n_boot))
    for k in range(int(n_boot)):
        drawn = _draw_layers(rng, rows)
        blocks = [_block_means(v, drawn) for v in values]
        draws[k] = [groups[g](blocks)[2] for g in names]
        pooled_draws[k] = draws[k, rng.integers(0, len(names), len(names))].mean()
    alpha = (1 - level) / 2
    out, table = {}, []
    for j, g in enumerate(names):
        first, second, gap, n_layers = point[g]
        d = draws[:, j][np.isfinite(draws[:, j])]
        low, high = np.quantile(d, [alpha, 1 - alpha])
        out[g] = Estimate(
            gap, min(low, high), max(low, high), level, "layers", n_layers,
            f"percentile bootstrap ({len(d)} resamples of each model's layers)",
            sd=float(d.std(ddof=1)), draws=d,
        )  # fmt: skip
        table.append({"group": g, "first": first, "second": second, "gap": gap,
                      "lower": out[g].low, "upper": out[g].high, "n_layers": n_layers})  # fmt: skip
    gaps = np.array([point[g][2] for g in names])
    finite = pooled_draws[np.isfinite(pooled_draws)]
    low, high = np.quantile(finite, [alpha, 1 - alpha])
    pooled = Estimate(
        float(gaps.mean()), min(low, high), max(low, high), level, f"{pooled_unit} > layers",
        len(names),
        f"hierarchical percentile bootstrap ({len(finite)} resamples: {len(names)} "
        f"{pooled_unit} with replacement, then each model's layers), equal weight per group",
        sd=float(finite.std(ddof=1)), draws=finite,
    )  # fmt: skip
    return Contrast(claim, pooled, out, pd.DataFrame(table).set_index("group"))


def _check_families(models: np.ndarray, families: Mapping[str, str], keep) -> list[str]:
    owner = list(dict.fromkeys(models))
    missing = sorted(set(owner) - set(families))
    if missing:
        raise ValueError(f"`families` has no family for the models {missing}")
    if keep is None:
        return owner
    unknown = sorted(set(keep) - set(owner))
    if unknown:
        raise ValueError(f"`models` names {unknown}, which have no layer in `names`")
    return [m for m in owner if m in set(keep)]


def family_contrasts(
    matrix,
    names: Sequence[str],
    families: Mapping[str, str],
    models: Sequence[str] | None = None,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Contrast]:
    """ "Within family > across families" and "within model > across families", per model
    pair and per model, with pooled estimates that models, not layer cells, weigh.

    Parameters
    ----------
    matrix : array of shape (n_layers, n_layers)
        Layer × layer similarities over all layers of all models, in the order of
        ``names`` (directional measures: ``matrix[i, j] = sim(i → j)``).
    names : sequence of str
        ``"{model}/layer.{i}"`` block names.
    families : mapping of str to str
        Model -> family, for every model of ``names``.
    models : sequence of str, optional
        Judge on these models only (e.g. the pretrained ones); default all.
    n_boot, level, seed
        Bootstrap resamples, coverage, seed of ``numpy.random.default_rng`` (one generator
        for both claims: the within-family claim draws first).

    Returns
    -------
    dict of str to Contrast
        ``"within family > across families"``: one group per pair of different models of
        one family (none when no family has two models, or there is one family);
        ``"within model > across families"``: one group per model with at least two layers
        and a model of another family. Each group's gap is positive when the claim holds
        for it.

    References
    ----------
    Wu et al. (2020), Sec. 5.1-5.2.
    """
    values, owner = layer_matrix(matrix, names)
    used = _check_families(owner, families, models)
    fam = {m: families[m] for m in used}
    rows = _layers_by_model(owner)
    others = {a: [c for c in used if fam[c] != fam[a]] for a in used}

    pair_groups = {}
    for i, a in enumerate(used):
        for b in used[i + 1 :]:
            if fam[a] != fam[b] or not others[a]:
                continue

            def within_family(blocks, a=a, b=b):
                block = blocks[0]
                across = [_sym(block, x, c) for x in (a, b) for c in others[a]]
                first, second = _sym(block, a, b), float(np.mean(across))
                return first, second, first - second, len(rows[a]) + len(rows[b])

            pair_groups[f"{a} | {b}"] = within_family

    model_groups = {}
    for a in used:
        if len(rows[a]) < 2 or not others[a]:
            continue

        def within_model(blocks, a=a):
            block = blocks[0]
            first = block[a, a]
            second = float(np.mean([_sym(block, a, c) for c in others[a]]))
            return first, second, first - second, len(rows[a])

        model_groups[a] = within_model

    common = dict(n_boot=n_boot, level=level)
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, 2**32, 2)
    return {
        WITHIN_FAMILY: _bootstrap(
            [values], owner, pair_groups, used, WITHIN_FAMILY, "model pairs", seed=int(seeds[0]),
            **common,
        ),
        WITHIN_MODEL: _bootstrap(
            [values], owner, model_groups, used, WITHIN_MODEL, "models", seed=int(seeds[1]),
            **common,
        ),
    }  # fmt: skip


def measure_contrast(
    first,
    second,
    names: Sequence[str],
    families: Mapping[str, str],
    models: Sequence[str] | None = None,
    *,
    relation: str = "across families",
    name: str = "first measure > second measure",
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Contrast:
    """One measure against another, per model pair, on the same resampled layers.

    "mixedsim is the highest across families" compares measures whose chance floors
    differ: pass each measure *minus its per-pair floor*
    (:func:`lmsim.metrics.floors.above_floor`) so the margin is not the floors' difference.

    Parameters
    ----------
    first, second : array of shape (n_layers, n_layers)
        The two measures' layer × layer matrices over the same ``names``.
    names : sequence of str
        ``"{model}/layer.{i}"`` block names.
    families : mapping of str to str
        Model -> family.
    models : sequence of str, optional
        Judge on these models only.
    relation : {"across families", "within family", "all"}, default="across families"
        Which model pairs are the groups.
    name : str
        The claim's name, kept in :attr:`Contrast.claim`.
    n_boot, level, seed
        As in :func:`family_contrasts`.

    Returns
    -------
    Contrast
        One group per model pair (``"A | B"``): ``S₁(A, B) − S₂(A, B)``.
    """
    if relation not in ("across families", "within family", "all"):
        raise ValueError(
            f"`relation` must be 'across families', 'within family' or 'all', got {relation!r}"
        )
    v1, owner = layer_matrix(first, names)
    v2, _ = layer_matrix(second, names)
    used = _check_families(owner, families, models)
    rows = _layers_by_model(owner)
    groups = {}
    for i, a in enumerate(used):
        for b in used[i + 1 :]:
            same = families[a] == families[b]
            if (relation == "across families" and same) or (
                relation == "within family" and not same
            ):
                continue

            def gap(blocks, a=a, b=b):
                x, y = _sym(blocks[0], a, b), _sym(blocks[1], a, b)
                return x, y, x - y, len(rows[a]) + len(rows[b])

            groups[f"{a} | {b}"] = gap
    return _bootstrap([v1, v2], owner, groups, used, name, "model pairs", n_boot, level, seed)


def percentile_scale(matrix, names: Sequence[str], models: Sequence[str] | None = None):
    """Each cell as its percentile among the off-diagonal cells of ``models``' layers.

    Two measures with different ranges (Jensen–Shannon similarity lies in ``[1 − ln 2, 1]``,
    CKA in ``[0, 1]`` with its own floor) cannot be compared on raw values: "JS is higher
    across families than CKA" would then hold by the scales alone. On this scale a measure's
    cross-family cells are high when they rank high *among that measure's own values*, so
    "higher across families under JS" means JS puts the cross-family pairs of layers closer
    to its within-model pairs than CKA does.

    Parameters
    ----------
    matrix : array of shape (n_layers, n_layers)
    names : sequence of str
        ``"{model}/layer.{i}"`` block names, in the order of the rows.
    models : sequence of str, optional
        Rank among these models' layers only (other rows and columns are NaN); default all.

    Returns
    -------
    ndarray of shape (n_layers, n_layers)
        Average-rank percentiles in ``(0, 1]`` (ties share their mean rank); NaN on the
        diagonal and outside ``models``.
    """
    values, owner = layer_matrix(matrix, names)
    keep = np.ones(len(owner), bool) if models is None else np.isin(owner, list(models))
    mask = keep[:, None] & keep[None, :] & ~np.eye(len(owner), dtype=bool)
    out = np.full(values.shape, np.nan)
    out[mask] = pd.Series(values[mask]).rank(method="average").to_numpy() / mask.sum()
    return out


def _cross_r(a: np.ndarray, b: np.ndarray, idx: np.ndarray, owner: np.ndarray) -> float:
    """Pearson r of two matrices over the cells of ``idx`` x ``idx`` pairing two models."""
    cells = owner[idx][:, None] != owner[idx][None, :]
    x, y = a[np.ix_(idx, idx)][cells], b[np.ix_(idx, idx)][cells]
    return float(np.corrcoef(x, y)[0, 1])


def split_half_agreement(
    reference: Mapping[str, tuple],
    other: Mapping[str, tuple],
    names: Sequence[str],
    models: Sequence[str] | None = None,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Contrast:
    """Agreement of two corpora's heatmaps against the reference corpus's split-half
    agreement, per measure, on the cells that pair two different models.

    "The heatmaps on a second corpus are highly similar" (Wu et al. 2020, App. B) cannot
    fail when judged by a correlation over all cells: the within-model blocks (near 1 on
    the diagonal, high around it) make any two heatmaps of the same models correlate. Here
    only cells of two different models count, and the yardstick is the reference corpus
    against itself: with ``A₁, A₂`` a measure on two disjoint halves of the reference corpus
    and ``B₁, B₂`` on two halves of the other (same sizes),

    ``gap = (r(A₁, B₂) + r(A₂, B₁)) / 2 − r(A₁, A₂)``

    (``r`` Pearson's over the cross-model cells): 0 when the other corpus agrees with the
    reference as well as the reference's two halves agree with each other, negative when
    changing the corpus changes the heatmap more than changing the sentences.

    Parameters
    ----------
    reference, other : mapping of str to (matrix, matrix)
        Per measure, its layer × layer matrices on the two halves of each corpus.
    names : sequence of str
        ``"{model}/layer.{i}"`` block names of the matrices (at least two models).
    models : sequence of str, optional
        Judge on these models' layers only; default all.
    n_boot, level, seed
        Bootstrap resamples (each model's layers with replacement, rows and columns of the
        matrices together), coverage, seed of ``numpy.random.default_rng``.

    Returns
    -------
    Contrast
        One group per measure (``first`` the cross-corpus r, ``second`` the split-half r,
        ``gap``, its interval over layers); ``pooled`` the mean gap over measures on the
        same resampled layers (``unit`` "measures": the groups are not independent).

    References
    ----------
    Wu et al. (2020), App. B, Fig. 9 vs Fig. 8.
    """
    if set(reference) != set(other) or not reference:
        raise ValueError("`reference` and `other` must name the same measures (at least one)")
    if not 0 < level < 1:
        raise ValueError(f"`level` must lie in (0, 1), got {level!r}")
    if int(n_boot) < 2:
        raise ValueError(f"`n_boot` must be >= 2, got {n_boot!r}")
    mats = {m: [layer_matrix(x, names)[0] for x in (*reference[m], *other[m])] for m in reference}
    owner = layer_matrix(mats[next(iter(mats))][0], names)[1]
    used = list(dict.fromkeys(owner)) if models is None else [m for m in dict.fromkeys(owner)
                                                              if m in set(models)]  # fmt: skip
    if len(used) < 2:
        raise ValueError(f"the split-half agreement needs two models' layers, got {used}")
    rows = {m: np.flatnonzero(owner == m) for m in used}

    def gaps(idx):
        out = {}
        for m, (a1, a2, b1, b2) in mats.items():
            cross = (_cross_r(a1, b2, idx, owner) + _cross_r(a2, b1, idx, owner)) / 2
            out[m] = (cross, _cross_r(a1, a2, idx, owner))
        return out

    point = gaps(np.concatenate(list(rows.values())))
    rng = np.random.default_rng(seed)
    draws = np.array([
        [c - s for c, s in gaps(np.concatenate(list(_draw_layers(rng, rows).values()))).values()]
        for _ in range(int(n_boot))
    ])  # fmt: skip
    alpha = (1 - level) / 2
    n_layers = sum(len(r) for r in rows.values())

    def estimate(value, d, unit, method):
        d = d[np.isfinite(d)]
        low, high = np.quantile(d, [alpha, 1 - alpha])
        return Estimate(value, float(low), float(high), level, unit, n_layers, method,
                        sd=float(d.std(ddof=1)), draws=d)  # fmt: skip

    method = f"percentile bootstrap ({int(n_boot)} resamples of each model's layers)"
    groups, table = {}, []
    for j, (m, (cross, split)) in enumerate(point.items()):
        groups[m] = estimate(cross - split, draws[:, j], "layers", method)
        table.append({"group": m, "first": cross, "second": split, "gap": cross - split,
                      "lower": groups[m].low, "upper": groups[m].high, "n_layers": n_layers})  # fmt: skip
    pooled = estimate(
        float(np.mean([g.estimate for g in groups.values()])), draws.mean(axis=1),
        "layers", method + ", mean over measures",
    )  # fmt: skip
    return Contrast(
        "second corpus agrees as well as split halves", pooled, groups,
        pd.DataFrame(table).set_index("group"), unit="measures",
    )  # fmt: skip
