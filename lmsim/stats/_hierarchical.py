"""Bootstrap over nested units: models then layers, sentences then words, tasks then examples."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lmsim.stats._estimate import (
    Estimate,
    _check_count,
    _check_level,
    _finite_draws,
    _percentile_interval,
    _rng,
)
from lmsim.stats._resample import _rows_of


def _unit_names(unit, k: int) -> list[str]:
    names = [s.strip() for s in unit.split(">")] if isinstance(unit, str) else list(unit)
    if len(names) != k or not all(isinstance(s, str) and s.strip() for s in names):
        raise ValueError(
            f"`unit` must name each of the {k} levels, outermost first: a string such as "
            f"'models > layers' or a sequence of {k} names, got {unit!r}"
        )
    return [s.strip() for s in names]


class _Tree:
    """Rows nested by level: ``children[d][node]`` are the level-d+1 nodes of a level-d
    node (level 0 is the root), and the leaves are groups of rows sharing every label."""

    def __init__(self, levels: Sequence[np.ndarray]):
        k, n_rows = len(levels), len(levels[0])
        paths = np.empty((n_rows, k), dtype=np.int64)
        for d, labels in enumerate(levels):
            paths[:, d] = np.unique(labels, return_inverse=True)[1].ravel()
        # a node at depth d is a distinct prefix of length d; number them in sorted order
        order = np.lexsort(paths.T[::-1])
        paths = paths[order]
        self.children: list[list[np.ndarray]] = []
        node_of_row = np.zeros(n_rows, dtype=np.int64)  # the root
        n_nodes = 1
        for d in range(k):
            prefix = paths[:, : d + 1]
            new = np.r_[True, (prefix[1:] != prefix[:-1]).any(1)]
            child_of_row = np.cumsum(new) - 1
            first = np.flatnonzero(new)
            kids = [[] for _ in range(n_nodes)]
            for parent, child in zip(node_of_row[first], child_of_row[first]):
                kids[parent].append(child)
            self.children.append([np.asarray(c, dtype=np.int64) for c in kids])
            node_of_row, n_nodes = child_of_row, len(first)
        # leaves (the last level's nodes) in order: their rows are order[start : start + size]
        self.order = order
        self.size = np.bincount(node_of_row, minlength=n_nodes)
        self.start = np.r_[0, np.cumsum(self.size)[:-1]]
        self.counts = [sum(len(c) for c in level) for level in self.children]

    def draw(self, rng: np.random.Generator | None, resample: Sequence[bool]):
        """Rows of one resample and, per level, the number of the drawn unit of each row."""
        k = len(resample)
        rows, ids = [], []
        next_id = [0] * k

        def visit(node: int, depth: int, path: list[int]) -> None:
            kids = self.children[depth][node]
            if resample[depth]:
                picked = kids[rng.integers(0, len(kids), len(kids))]
            else:
                picked = kids
            if depth + 1 < k:
                for child in picked:
                    next_id[depth] += 1
                    visit(child, depth + 1, [*path, next_id[depth] - 1])
                return
            lengths = self.size[picked]
            begin = np.cumsum(lengths) - lengths
            within = np.arange(lengths.sum()) - np.repeat(begin, lengths)
            rows.append(self.order[np.repeat(self.start[picked], lengths) + within])
            block = np.empty((len(within), k), dtype=np.int64)
            block[:, :depth] = path
            block[:, depth] = next_id[depth] + np.repeat(np.arange(len(picked)), lengths)
            next_id[depth] += len(picked)
            ids.append(block)

        visit(0, 0, [])
        return np.concatenate(rows), np.concatenate(ids)


def hierarchical_bootstrap(
    statistic: Callable[..., float],
    *arrays,
    levels: Sequence,
    unit: str | Sequence[str],
    resample: Sequence[bool] | None = None,
    labels: bool = False,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """Percentile bootstrap over nested units: models, then layers within each model.

    Rows that share an outer unit (the layers of one model, the words of one sentence, the
    pairs one source example enters) are not independent: a flat bootstrap over rows
    treats them as if they were and gives an interval that is far too narrow when the outer
    units differ. Each resample here draws the outer units with replacement, then within
    each drawn unit its inner units with replacement, and so on down the levels (Davison &
    Hinkley 1997, §3.8; Ren et al. 2010). Rows that share every label form one leaf and
    move together: an example that enters several pairs is one unit.

    Parameters
    ----------
    statistic : callable
        ``statistic(*arrays) -> float`` on rows (with ``labels=True``, one more argument:
        see below).
    *arrays : array_like, each of shape (n_rows, ...)
        Resampled together, row by row.
    levels : sequence of array_like, each of shape (n_rows,), or one such array
        One label per row for each level, outermost first (e.g. ``(model, layer)``). An
        inner label is read within its outer unit: layer 3 of model A and layer 3 of
        model B are two units.
    unit : str or sequence of str
        The levels' names, outermost first: ``"model pairs > layer pairs"`` or
        ``("tasks", "source examples")``. Recorded as ``"a > b"``; a level that is not
        resampled is recorded as ``"a (fixed)"``.
    resample : sequence of bool, optional
        Which levels are resampled (all by default). ``(True, False)`` is the cluster
        bootstrap (outer units only, their rows kept whole); ``(False, True)`` a bootstrap
        stratified by the outer level (e.g. by task: each task keeps its examples' number).
    labels : bool
        Pass ``statistic`` a last argument: an int array of shape (n_rows_drawn,
        n_levels), the drawn unit of each row at each level, numbered in draw order (a unit
        drawn twice gets two numbers), for statistics that average within units first.
    n_boot, level, seed
        As in :func:`lmsim.stats.bootstrap`.

    Returns
    -------
    Estimate
        ``estimate`` on all the rows (with ``labels=True``, each unit numbered once);
        ``n`` the units of the outermost resampled level; ``method`` the count at each
        level.

    Notes
    -----
    Draw order (a naive loop reproduces every interval): a resample visits the levels depth
    first. At a resampled level with ``m`` units under the current node it draws
    ``rng.integers(0, m, m)`` and visits the picked units in that order; a fixed level
    visits its units in sorted label order without drawing. Units are numbered in sorted
    label order within their parent. Resampling every level counts the inner variance at
    both levels and errs wide when the inner units are few; the cluster bootstrap is the
    alternative (``resample=(True, False)``).

    References
    ----------
    Davison & Hinkley (1997), *Bootstrap Methods and their Application*, §3.8. Ren, Lai,
    Fan & Gaetan (2010), Nonparametric bootstrapping for hierarchical data. Journal of
    Applied Statistics 37(9), 1487–1498.
    """
    arrays, n_rows = _rows_of(arrays, "hierarchical_bootstrap")
    if (
        isinstance(levels, np.ndarray)
        and levels.ndim == 1
        or (isinstance(levels, (list, tuple)) and len(levels) and np.ndim(levels[0]) == 0)
    ):  # one level: the labels themselves
        levels = [levels]
    levels = [np.asarray(x) for x in levels]
    if not levels or any(x.shape != (n_rows,) for x in levels):
        raise ValueError(
            f"`levels` must be one or more 1-D arrays of one label per row ({n_rows}), got "
            f"shapes {[x.shape for x in levels]}"
        )
    k = len(levels)
    names = _unit_names(unit, k)
    resample = [True] * k if resample is None else [bool(r) for r in resample]
    if len(resample) != k or not any(resample):
        raise ValueError(
            f"`resample` must give one bool per level ({k}) with at least one True, got "
            f"{resample!r}"
        )
    n_boot, rng = _check_count("n_boot", n_boot), _rng(seed)
    _check_level(level)
    tree = _Tree(levels)
    outer = resample.index(True)
    if tree.counts[outer] < 2:
        raise ValueError(
            f"hierarchical_bootstrap needs at least 2 units at its outermost resampled level "
            f"({names[outer]}), got {tree.counts[outer]}"
        )

    def call(rows, ids):
        extra = (ids,) if labels else ()
        return float(statistic(*(a[rows] for a in arrays), *extra))

    estimate = call(*tree.draw(None, [False] * k))  # every row once; draws nothing
    draws = _finite_draws(
        [call(*tree.draw(rng, resample)) for _ in range(n_boot)], "bootstrap resamples"
    )
    low, high = _percentile_interval(draws, level)
    described = " > ".join(n if r else f"{n} (fixed)" for n, r in zip(names, resample))
    counts = ", then ".join(f"{c} {n}" for c, n in zip(tree.counts, names))
    return Estimate(
        estimate,
        low,
        high,
        level,
        described,
        tree.counts[outer],
        f"hierarchical percentile bootstrap ({n_boot} resamples of {described}: {counts})",
        sd=float(draws.std(ddof=1)),
        draws=draws,
    )
