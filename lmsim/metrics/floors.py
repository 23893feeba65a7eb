"""Chance floors of the similarity measures, computed the way the measures are: from moments.

A similarity of two representations means something only above what the measure gives
between *unrelated* data of the same shape: ``n`` rows, widths ``d_x`` and ``d_y``
(:func:`lmsim.stats.chance_floor`). That floor depends on nothing but ``n`` and the widths
(isotropic Gaussian data), so :func:`chance_floors` computes it for every measure and every
pair of widths from one set of random draws:

* **Random moments, not random data.** The measures of :data:`~lmsim.metrics.pairwise.
  MOMENT_METRICS` read only a block's co-moment ``Xcᵀ Xc`` and the cross co-moment
  ``Xcᵀ Yc``. For independent isotropic Gaussian blocks these are the blocks of one
  Wishart matrix ``W ~ Wishart_D(n − 1, I)`` (centring removes one degree of freedom),
  drawn directly: ``GᵀG`` for ``G`` of shape ``(n − 1, D)`` when ``n − 1 < D``, else by
  Bartlett's decomposition at ``D³/3`` flops, whatever ``n`` (Anderson, *An Introduction to
  Multivariate Statistical Analysis*, 3rd ed., Thm. 7.2.1).
* **Draws shared across pairs.** ``K`` independent blocks of the widest width give
  ``K (K − 1) / 2`` pairs of independent blocks; each pair is one draw (its two blocks are
  independent, whatever the other pairs hold), so ``K`` per-block preparations (the
  eigendecompositions) serve ``K²/2`` draws, exactly as
  :func:`~lmsim.metrics.pairwise.pairwise_matrix` serves all layer pairs.
* **Draws shared across widths and measures.** A narrower width is the first ``d``
  columns of each block (again isotropic Gaussian and independent across blocks), and
  every measure reads the same draws. A joint draw is at most :data:`MAX_JOINT_WIDTH`
  wide; wide layers take several joint draws of fewer blocks (two at least).
* **Cached by their inputs.** ``(n, widths, measure, options, n_draws, seed, level)`` and
  this module's version are the key of a JSON file under ``$LMSIM_CACHE/floors``; the file
  holds its key and is used only when the stored key equals the requested one (a file
  that does not verify is neither used nor replaced).

The draws of one floor are exchangeable but, sharing blocks, not independent: the mean's
Monte-Carlo error ``se`` is a delete-one-block jackknife (conservative; see
:func:`_monte_carlo_error`), not ``sd / sqrt(n_draws)``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from lmsim._threads import threads
from lmsim.metrics._linalg import BlockStats
from lmsim.metrics.localization import layer_table

__all__ = [
    "FLOOR_VERSION",
    "MAX_JOINT_WIDTH",
    "above_floor",
    "chance_floors",
    "null_comoment",
    "n_null_blocks",
]

#: Bumped whenever the draws or the arithmetic change: older cache entries then miss.
FLOOR_VERSION = 1


def n_null_blocks(n_draws: int) -> int:
    """Fewest independent blocks ``K`` whose ``K (K − 1) / 2`` pairs give ``n_draws`` draws."""
    if n_draws < 1:
        raise ValueError(f"`n_draws` must be at least 1, got {n_draws}")
    return max(2, math.ceil((1 + math.sqrt(1 + 8 * n_draws)) / 2))


def _bartlett(dof: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """``W ~ Wishart_dim(dof, I)`` as ``U Uᵀ`` with ``U`` upper triangular (``dof ≥ dim``).

    Bartlett: ``L Lᵀ`` with ``L`` lower triangular, ``L_ii² ~ χ²(dof − i + 1)``, standard
    normals below the diagonal. Reversing the order of rows and columns turns ``L`` into an
    upper triangular ``U`` and ``W`` into ``P W P``, again Wishart(dof, I); LAPACK's
    ``dlauum`` forms ``U Uᵀ`` at ``dim³/3`` flops.
    """
    from scipy.linalg.lapack import dlauum

    upper = np.triu(rng.standard_normal((dim, dim)), k=1)
    # U_jj = L_{dim-j+1, dim-j+1} (1-based): χ² degrees of freedom dof − dim + j.
    upper[np.diag_indices(dim)] = np.sqrt(rng.chisquare(dof - dim + 1 + np.arange(dim)))
    product, info = dlauum(np.asfortranarray(upper), lower=0)
    if info != 0:  # pragma: no cover - LAPACK argument error
        raise RuntimeError(f"dlauum failed with info={info}")
    return np.triu(product) + np.triu(product, k=1).T


def null_comoment(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Centred co-moment ``Xcᵀ Xc`` of ``n`` rows of isotropic Gaussian data of width ``dim``.

    Parameters
    ----------
    n : int
        Rows (at least 2).
    dim : int
        Width.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (dim, dim)
        A draw of ``Wishart_dim(n − 1, I)``: ``GᵀG`` with ``G`` of shape ``(n − 1, dim)``
        when ``n − 1 < dim`` (rank ``n − 1``, as centred data of ``n`` rows), else by
        Bartlett's decomposition.
    """
    if n < 2:
        raise ValueError(f"`n` must be at least 2 (a co-moment of centred rows), got {n}")
    dof = n - 1
    if dof >= dim:
        return _bartlett(dof, dim, rng)
    from scipy.linalg.blas import dsyrk

    rows = rng.standard_normal((dof, dim))
    product = dsyrk(1.0, rows.T, trans=0, lower=0)  # rows.T is Fortran-ordered: no copy
    return np.triu(product) + np.triu(product, k=1).T


def _key(metric: str, options: Mapping, n: int, widths, n_draws: int, seed: int, level: float):
    return {
        "version": FLOOR_VERSION,
        "metric": metric,
        "options": {k: options[k] for k in sorted(options)},
        "n": int(n),
        "widths": [int(w) for w in widths],
        "n_draws": int(n_draws),
        "seed": int(seed),
        "level": float(level),
        "data": "independent isotropic Gaussian",
    }


def _cache_path(key: Mapping):
    from lmsim._cache import cache_dir

    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:40]
    return cache_dir("floors") / f"{key['metric']}-{digest}.json"


def _read_cached(key: Mapping) -> list | None:
    """The floors stored under ``key``, or None (absent, unreadable, or another key)."""
    try:
        path = _cache_path(key)
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != json.loads(json.dumps(key)):
        return None
    floors = stored.get("floors")
    return floors if isinstance(floors, list) else None


def _write_cached(key: Mapping, floors: list) -> None:
    """Store the floors under ``key``, unless a file is already there.

    A file at the path that did not verify (another key, unreadable) is not lmsim's to
    replace: it is left as it is and the floors are recomputed on every call.
    """
    from lmsim._io import write_json_atomic

    try:
        path = _cache_path(key)
        if path.exists():
            return
        write_json_atomic(path, {"key": key, "floors": floors}, indent=1)
    except OSError:
        pass  # a read-only cache: the floors are still returned


def _monte_carlo_error(draws: np.ndarray, pairs: list) -> float:
    """Standard error of the mean of draws that share blocks: a delete-one-block jackknife.

    Leaving out block ``k`` drops the draws that use it; ``se² = (m − 1)/m Σ_k (θ₋ₖ − θ̄)²``
    over the ``m`` blocks (Efron & Stein, 1981). Conservative: over 40 seeds it measured
    1.2–1.8× the spread of the mean (``sd / sqrt(n_draws)``, which ignores the sharing,
    measured 0.7–1.1×).
    """
    n_blocks = max(max(p) for p in pairs) + 1
    left_out = []
    for k in range(n_blocks):
        keep = np.array([k not in pair for pair in pairs])
        if keep.any():
            left_out.append(draws[keep].mean())
    left_out = np.asarray(left_out)
    m = len(left_out)
    if m < 2:
        return 0.0
    return float(np.sqrt((m - 1) / m * ((left_out - left_out.mean()) ** 2).sum()))


def _summary(draws: np.ndarray, pairs: list, level: float) -> dict:
    """Mean, central range, sd and the Monte-Carlo error of the mean."""
    mean = float(draws.mean())
    alpha = (1 - level) / 2
    low, high = np.quantile(draws, [alpha, 1 - alpha])
    se = _monte_carlo_error(draws, pairs)
    return {
        "mean": mean,
        "low": float(low),
        "high": float(high),
        "level": level,
        "sd": float(draws.std(ddof=1)) if len(draws) > 1 else 0.0,
        "se": se,
        "n_draws": len(draws),
    }


def _prepared_table(metric: str) -> tuple[Callable, Callable, Callable, bool]:
    """``(prepare source, prepare target, pair, needs raw rows)`` of a measure."""
    from lmsim.metrics.pairwise import MOMENT_METRICS, PREPARED_RAW_METRICS

    if metric in MOMENT_METRICS:
        return (*MOMENT_METRICS[metric], False)
    if metric in PREPARED_RAW_METRICS:
        prepare, pair = PREPARED_RAW_METRICS[metric]
        return prepare, prepare, pair, True
    known = sorted(MOMENT_METRICS) + sorted(PREPARED_RAW_METRICS)
    raise ValueError(f"no chance floor for `metric` {metric!r}; choose one of {known}")


#: Widest joint draw (total width ``K · d``): its co-moment takes ``8 D²`` bytes (134 MB).
MAX_JOINT_WIDTH = 4096


def _batches(n_draws: int, width: int) -> list[list[tuple[int, int]]]:
    """Pairs of blocks per joint draw, blocks numbered across draws.

    As many blocks per joint draw as the draws need and :data:`MAX_JOINT_WIDTH` allows
    (at least 2); wide layers then take several joint draws of fewer blocks each.
    """
    per_batch = max(2, min(n_null_blocks(n_draws), MAX_JOINT_WIDTH // width))
    local = list(combinations(range(per_batch), 2))
    batches, left, first = [], n_draws, 0
    while left > 0:
        batch = [(first + i, first + j) for i, j in local[:left]]
        batches.append(batch)
        left -= len(batch)
        first += per_batch
    return batches


def _draw(n: int, n_blocks: int, width: int, raw: bool, rng: np.random.Generator):
    """One joint draw of ``n_blocks`` blocks: ``(co-moment tensor, rows tensor or None)``."""
    if not raw:
        return torch.from_numpy(null_comoment(n, n_blocks * width, rng)), None
    # Measures that need the rows (kernels, dissimilarity matrices) read these; the
    # co-moments of the moment measures are then those of the same rows.
    data = rng.standard_normal((n, n_blocks * width))
    centred = data - data.mean(axis=0)
    # the rows as drawn: RSA's correlation RDM is not translation invariant
    return torch.from_numpy(centred.T @ centred), torch.from_numpy(data)


def _compute(
    todo: Mapping[str, Mapping],
    n: int,
    widths: Sequence[int],
    n_draws: int,
    seed: int,
    level: float,
    progress: bool,
) -> dict[str, list]:
    """Floors of the measures in ``todo`` (name -> options) from one shared set of draws."""
    tables = {metric: _prepared_table(metric) for metric in todo}
    raw = any(table[3] for table in tables.values())
    width = max(widths)
    batches = _batches(n_draws, width)
    pairs = [pair for batch in batches for pair in batch]
    rng = np.random.default_rng(seed)
    zero = torch.zeros(width, dtype=torch.float64)
    draws = {(m, dx, dy): [] for m in todo for dx in widths for dy in widths}
    total = len(todo) * len(widths) ** 2 * len(pairs)
    with tqdm(total=total, desc="chance floors", disable=not progress) as bar:
        for batch in batches:
            first = min(min(pair) for pair in batch)
            n_blocks = max(max(pair) for pair in batch) - first + 1
            with threads():  # the machine's policy (one thread on ≤ 2 cores): a large GEMM
                comoment, rows = _draw(n, n_blocks, width, raw, rng)

            def block(k: int, d: int, needs_rows: bool, comoment=comoment, rows=rows, first=first):
                start = k * width
                if needs_rows:
                    return rows[:, start : start + d]
                diag = comoment[start : start + d, start : start + d]
                return BlockStats(f"null.{first + k}", n, zero[:d], diag)

            with threads(1):
                for metric, options in todo.items():
                    prep_src, prep_tgt, pair_fn, needs_rows = tables[metric]
                    cache: dict = {}
                    for d_x in widths:
                        for d_y in widths:
                            for i, j in batch:
                                i, j = i - first, j - first
                                for key in ((prep_src, i, d_x), (prep_tgt, j, d_y)):
                                    if key not in cache:
                                        prep, k, d = key
                                        cache[key] = prep(block(k, d, needs_rows), **options)
                                bx, by = cache[(prep_src, i, d_x)], cache[(prep_tgt, j, d_y)]
                                if needs_rows:
                                    value = pair_fn(bx, by)
                                else:
                                    ix, iy = i * width, j * width
                                    value = pair_fn(bx, by, comoment[ix : ix + d_x, iy : iy + d_y])
                                draws[(metric, d_x, d_y)].append(value)
                                bar.update()
            del comoment, rows
    out: dict[str, list] = {}
    for metric in todo:
        floors = []
        for d_x in widths:
            for d_y in widths:
                values = np.asarray(draws[(metric, d_x, d_y)], dtype=np.float64)
                if not np.isfinite(values).all():
                    raise ValueError(f"`{metric}` gave non-finite values on random data")
                floors.append({"d_x": d_x, "d_y": d_y, **_summary(values, pairs, level)})
        out[metric] = floors
    return out


def chance_floors(
    metrics: Mapping[str, Mapping] | Sequence[str],
    n: int,
    widths: Sequence[int],
    *,
    n_draws: int = 20,
    seed: int = 0,
    level: float = 0.95,
    progress: bool = False,
    cache: bool = True,
) -> dict[str, list[dict]]:
    """Chance floors of several measures for every pair of widths, from shared draws.

    Parameters
    ----------
    metrics : mapping of str to dict, or sequence of str
        Measure names of :data:`~lmsim.metrics.pairwise.MOMENT_METRICS` or
        :data:`~lmsim.metrics.pairwise.PREPARED_RAW_METRICS`, each with the keyword options
        of its preparation (``{"pwcca": {"paper_compat": True}}``); a list means no options.
    n : int
        Rows of the real data (words, tokens); at least 4.
    widths : sequence of int
        The widths of the blocks compared; floors for every ordered pair ``(d_x, d_y)``.
    n_draws : int, default=20
        Draws (pairs of independent blocks) per pair of widths.
    seed : int, default=0
    level : float, default=0.95
        Coverage of the central range ``[low, high]`` of the draws.
    progress : bool, default=False
        A tqdm bar over the draws.
    cache : bool, default=True
        Read and write ``$LMSIM_CACHE/floors`` (content-keyed, verified on reading).

    Returns
    -------
    dict of str to list of dict
        Per measure, one record per ``(d_x, d_y)`` in the order of ``sorted(set(widths))``
        squared: ``d_x, d_y, mean, low, high, level, sd, se, n_draws`` (``low``/``high`` the
        central ``level`` range of the draws, not an interval of the mean; ``se`` the
        Monte-Carlo error of ``mean``).

    Raises
    ------
    ValueError
        Unknown measure, ``n < 4``, a width below 1, ``n_draws < 2`` or ``level`` outside (0, 1).
    """
    todo = {m: {} for m in metrics} if not isinstance(metrics, Mapping) else dict(metrics)
    n = int(n)
    if n < 4:
        raise ValueError(f"`n` must be at least 4 rows for a chance floor, got {n}")
    widths = sorted({int(w) for w in widths})
    if not widths or widths[0] < 1:
        raise ValueError(f"`widths` must be positive integers, got {widths}")
    if int(n_draws) < 2:
        raise ValueError(f"`n_draws` must be at least 2, got {n_draws}")
    if not 0 < float(level) < 1:
        raise ValueError(f"`level` must be in (0, 1), got {level}")
    for metric in todo:
        _prepared_table(metric)
    out: dict[str, list] = {}
    keys = {m: _key(m, opts, n, widths, n_draws, seed, level) for m, opts in todo.items()}
    if cache:
        for metric, key in keys.items():
            stored = _read_cached(key)
            if stored is not None:
                out[metric] = stored
    missing = {m: todo[m] for m in todo if m not in out}
    if missing:
        computed = _compute(missing, n, widths, int(n_draws), int(seed), float(level), progress)
        for metric, floors in computed.items():
            out[metric] = floors
            if cache:
                _write_cached(keys[metric], floors)
    return {m: out[m] for m in todo}


def _reference_chance_floors(
    metric: str, options: Mapping, n: int, widths: Sequence[int], n_draws: int, seed: int = 0
) -> list[dict]:
    """The floors as ``lmsim similarity`` computed them before: raw data, one measure at a time.

    :func:`lmsim.stats.chance_floor` on ``n_draws`` independent pairs of isotropic Gaussian
    ``X (n, d_x)``, ``Y (n, d_y)`` per pair of widths, the measure run on the raw arrays.
    Kept as the baseline of the tests and of ``benchmarks/bench_floors.py``.
    """
    import functools

    import lmsim.metrics
    from lmsim import stats

    measure = functools.partial(getattr(lmsim.metrics, metric), **options)
    widths = sorted(set(widths))
    floors = []
    for d_x in widths:
        for d_y in widths:
            est = stats.chance_floor(measure, n, d_x, d_y, n_draws=n_draws, seed=seed)
            floors.append(
                {
                    "d_x": d_x,
                    "d_y": d_y,
                    "mean": est.estimate,
                    "low": est.low,
                    "high": est.high,
                    "level": est.level,
                    "sd": est.sd,
                    "se": est.sd / math.sqrt(n_draws),
                    "n_draws": n_draws,
                }
            )
    return floors


def above_floor(matrix, names: Sequence[str], floor, widths: Mapping[str, int] | None = None):
    """A layer × layer matrix minus each cell's chance floor: the value above the floor.

    A measure's floor depends on the widths (and ``n``) of the two layers compared, so it
    differs between model pairs and between measures (mixedsim's is far above svsim's at the
    same shape). Two measures, or two model pairs, are compared on their values above their
    own floors (``EVIDENCE.md`` §5), never on raw values.

    Parameters
    ----------
    matrix : array of shape (n_layers, n_layers)
        ``matrix[i, j]`` the measure from layer ``i`` to layer ``j``.
    names : sequence of str
        ``"{model}/layer.{i}"`` block names, in the order of ``matrix``'s rows.
    floor : float, mapping, list of dict or callable
        The floor of each cell:

        - a float: one floor for every cell;
        - a mapping ``(model_x, model_y) -> float`` (an :class:`lmsim.stats.Estimate` is read
          by its ``estimate``): one floor per ordered model pair (a missing ordered pair
          falls back to its reverse, for symmetric measures);
        - a list of dicts with ``d_x``, ``d_y`` and ``mean`` (one measure's entry of
          :func:`chance_floors`) with ``widths``: the floor of each pair of widths;
        - a callable ``floor(model_x, model_y) -> float``.
    widths : mapping of str to int, optional
        Each model's width; required with a list of floors.

    Returns
    -------
    ndarray of shape (n_layers, n_layers)
        ``matrix[i, j] − floor(model(i), model(j))``; a DataFrame's index and columns are
        kept.

    Raises
    ------
    ValueError
        A wrongly shaped ``matrix``, a model pair without a floor, or a list of floors
        without ``widths``.
    """
    values = np.asarray(matrix, dtype=np.float64)
    if values.shape != (len(names), len(names)):
        raise ValueError(f"`matrix` has shape {values.shape} but there are {len(names)} names")
    owner = layer_table(names)["model"].to_numpy()
    order = list(dict.fromkeys(owner))
    if isinstance(floor, (int, float)):
        lookup = lambda a, b: float(floor)  # noqa: E731
    elif callable(floor):
        lookup = floor
    elif isinstance(floor, Mapping):

        def lookup(a, b):
            value = floor.get((a, b), floor.get((b, a)))
            if value is None:
                raise ValueError(f"`floor` has no entry for the model pair ({a!r}, {b!r})")
            return getattr(value, "estimate", value)

    elif isinstance(floor, Sequence):
        if widths is None:
            raise ValueError("a list of floors by width needs `widths` (each model's width)")
        by_width = {(int(f["d_x"]), int(f["d_y"])): float(f["mean"]) for f in floor}

        def lookup(a, b):
            key = (int(widths[a]), int(widths[b]))
            if key not in by_width:
                raise ValueError(f"`floor` has no entry for widths {key} ({a!r}, {b!r})")
            return by_width[key]

    else:
        raise ValueError(f"`floor` must be a number, mapping, list or callable, got {floor!r}")
    table = {(a, b): float(lookup(a, b)) for a in order for b in order}
    index = {m: k for k, m in enumerate(order)}
    codes = np.array([index[m] for m in owner])
    grid = np.array([[table[a, b] for b in order] for a in order])
    out = values - grid[np.ix_(codes, codes)]
    if hasattr(matrix, "index") and hasattr(matrix, "columns"):
        return pd.DataFrame(out, index=matrix.index, columns=matrix.columns)
    return out
