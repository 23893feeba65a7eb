"""Controls for the redundancy verdicts: random subsets of the kept size, and "equal accuracy"
decided by an interval over dev words rather than a fixed tolerance.

The thesis keeps the largest τ whose kept neurons score within 0.01 of all neurons on dev.
Two things are missing from that rule (issue 29):

* a control for probe capacity: does the kept set beat a *random* subset with the same
  number of neurons in every layer? :func:`same_size_subset` draws one (seeded);
  :func:`subset_controls` trains the probe on the kept set and on random subsets, over
  several seeds (probe initialisation and shuffling, random draws, and optionally the
  representative draw);
* the sampling error of dev accuracy (a 0.67 accuracy on 1,711 words has a standard error
  of 0.011): :func:`paired_bootstrap` gives a percentile interval of the accuracy
  difference (subset − all neurons) by resampling dev words, or dev sentences with
  ``groups``, the same resample for both probes (paired). A subset has "equal accuracy"
  when that interval's lower end clears ``-margin`` (non-inferiority; with ``relative``
  the margin is a share of all neurons' accuracy, Dalvi et al.'s 1 %); see
  :func:`equal_accuracy`, and :func:`chosen_minus_reference` for the chosen set's test
  difference. :func:`uniform_subset` draws the control that ignores layers;
  :func:`kept_minus_drawn` and :func:`seed_pooled_difference` pool kept-minus-random
  over every τ with an interval over test sentences and seeds (issue 44).

The bootstrap helper is numpy only and self-contained; it computes what ``lmsim.stats``'s
paired resampling does and can be replaced by it.

References
----------
Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, Ch. 13 (percentile
interval); Hewitt & Liang (2019) on probe capacity; Dalvi et al. (2020), Sec. 3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from lmsim.cluster import kept_per_block
from lmsim.probe import train_probe

__all__ = [
    "same_size_subset",
    "uniform_subset",
    "paired_bootstrap",
    "subset_controls",
    "equal_accuracy",
    "seed_pooled_difference",
    "kept_minus_drawn",
    "chosen_minus_reference",
    "best_on_dev",
    "dev_choice_bootstrap",
]

_SPLITS = ("train", "dev", "test")


def same_size_subset(kept, dims: Mapping[str, int], *, seed: int = 0) -> np.ndarray:
    """Random columns with as many neurons in every layer as ``kept``.

    Parameters
    ----------
    kept : array-like of int
        Kept column indices (e.g. one τ's representatives).
    dims : mapping of str to int
        ``{block: width}`` in column order (:func:`lmsim.probe.word_activations`).
    seed : int
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    cols : ndarray of int64, shape (len(kept),)
        Ascending; in every block, a uniform draw without replacement of
        ``kept_per_block(kept, dims)[block]`` of its columns.
    """
    kept = np.unique(np.asarray(kept, dtype=np.int64))
    counts = kept_per_block(kept, dims)
    rng = np.random.default_rng(seed)
    starts = np.concatenate([[0], np.cumsum(list(dims.values()))])
    out = [
        start + rng.choice(int(width), size=counts[block], replace=False)
        for block, width, start in zip(dims, dims.values(), starts[:-1], strict=True)
    ]
    return np.sort(np.concatenate(out)).astype(np.int64)


def uniform_subset(n_columns: int, size: int, *, seed: int = 0) -> np.ndarray:
    """``size`` columns drawn uniformly from all ``n_columns``, whatever their layer.

    The control for the *choice of layers*: :func:`same_size_subset` keeps the kept set's
    count in every layer and so tests only the choice within a layer.

    Returns
    -------
    cols : ndarray of int64, shape (size,)
        Ascending, without replacement (:func:`numpy.random.default_rng` with ``seed``).
    """
    if not 0 < int(size) <= int(n_columns):
        raise ValueError(f"need 0 < `size` <= `n_columns`, got {size} of {n_columns}")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(int(n_columns), size=int(size), replace=False)).astype(np.int64)


def paired_bootstrap(
    correct_a,
    correct_b,
    *,
    groups=None,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, float]:
    """Percentile bootstrap interval of the accuracy difference ``acc(a) − acc(b)``.

    Both probes are scored on the same words, so each resample draws the same units for
    both (paired): the interval reflects which words are in the set, not two independent
    samples. A thin view of :func:`lmsim.stats.paired_bootstrap` (the one bootstrap of
    the library) with the probes' correctness as the rows.

    Parameters
    ----------
    correct_a, correct_b : array-like of bool, shape (n_words,)
        Whether each probe got each word right.
    groups : array-like, shape (n_words,), optional
        The resampling unit of every word (e.g. its sentence: words of a sentence are not
        independent). Resampled accuracy is correct words over words of the drawn units.
        Default: every word is a unit.
    n_boot : int
        Resamples.
    level : float
        Coverage of the interval, in (0, 1).
    seed : int

    Returns
    -------
    dict
        ``diff`` (the observed difference), ``lo``, ``hi`` (percentile interval), ``se``
        (standard deviation of the resampled differences), ``n_units``.
    """
    from lmsim.stats import paired_bootstrap as _paired

    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(
            f"`correct_a` and `correct_b` must be equal-length non-empty 1-D arrays, got "
            f"{a.shape} and {b.shape}"
        )
    if int(n_boot) < 2:
        raise ValueError(f"`n_boot` must be an integer >= 2, got {n_boot!r}")
    if not 0 < level < 1:
        raise ValueError(f"`level` must lie in (0, 1), got {level!r}")
    if groups is not None and np.shape(groups) != a.shape:
        raise ValueError(
            f"`groups` must give one unit per word ({a.size}), got shape {np.shape(groups)}"
        )
    unit = "words" if groups is None else "groups of words"
    est = _paired(
        a.astype(np.float64),
        b.astype(np.float64),
        unit=unit,
        groups=groups,
        n_boot=int(n_boot),
        level=level,
        seed=seed,
    )
    return dict(diff=est.estimate, lo=est.low, hi=est.high, se=est.sd, n_units=int(est.n))


def _probe(X, y, cols, classes, seed, probe_kwargs, warm=None):
    """A probe on ``cols`` (seeded) and its per-word correctness on dev and test.

    ``warm``: a converged probe on all columns; its weights on ``cols`` start L-BFGS.
    """
    init = None if warm is None else (warm.weights[:, cols], warm.bias)
    r = train_probe(
        *[a for k in _SPLITS for a in (X[k][:, cols], y[k])],
        classes=classes,
        seed=seed,
        init=init,
        **probe_kwargs,
    )
    correct = {k: r.predict(X[k][:, cols]) == y[k] for k in ("dev", "test")}
    return r, correct


def _cached_probe(cache, X, y, cols, classes, seed, probe_kwargs):
    """:func:`_probe`, reused from ``cache`` (a dict, or None: no reuse) for equal columns;
    with a cache, the probe on all columns (when there) warm-starts the others."""
    if cache is None:
        return _probe(X, y, cols, classes, seed, probe_kwargs)
    key = np.asarray(cols, dtype=np.int64).tobytes()
    if key not in cache:
        full = cache.get(np.arange(X["train"].shape[1], dtype=np.int64).tobytes())
        warm = None if full is None else full[0]
        cache[key] = _probe(X, y, cols, classes, seed, probe_kwargs, warm=warm)
    return cache[key]


def subset_controls(
    X: Mapping[str, np.ndarray],
    y: Mapping[str, np.ndarray],
    columns: Mapping | Callable[[int], Mapping],
    dims: Mapping[str, int],
    *,
    n_classes: int,
    reference="none",
    seeds: Sequence[int] = (0, 1, 2),
    n_random: int = 1,
    random_for: Sequence | None = None,
    random_seeds: Sequence[int] | None = None,
    uniform: bool = False,
    groups: Mapping[str, np.ndarray] | None = None,
    n_boot: int = 2000,
    level: float = 0.95,
    margin: float = 0.0,
    relative: bool = False,
    cache: dict | None = None,
    **probe_kwargs,
) -> pd.DataFrame:
    """Probes on every kept set and on random subsets of the same size per layer, per seed.

    Parameters
    ----------
    X : dict of str to ndarray (n_words, n_neurons)
        ``"train"``, ``"dev"``, ``"test"`` activations (all neurons, in ``dims`` order).
    y : dict of str to ndarray of int
        Labels ``0 .. n_classes - 1`` of the same splits.
    columns : mapping of key to ndarray of int, or callable ``seed -> mapping``
        Kept neurons per key (e.g. ``{"none": all, 0.1: kept, ...}``); a callable draws
        them per seed (e.g. the representatives with that seed), so the representative draw
        varies with the probe seed.
    dims : mapping of str to int
        ``{block: width}`` of ``X``'s columns, for :func:`same_size_subset`.
    n_classes : int
    reference : key
        The key of all neurons; every other key is compared with it.
    seeds : sequence of int
        One run per seed: probe initialisation and shuffling, the random subsets (seed
        ``1000 * seed + draw``) and, with a callable ``columns``, the kept sets.
    n_random : int
        Random subsets per key and seed.
    random_for : sequence of keys, optional
        Only these keys get random subsets (the kept sets of every key are still probed);
        default: every key but ``reference``.
    random_seeds : sequence of int, optional
        Only these seeds draw random subsets (default: every seed).
    uniform : bool
        Beside every random subset of the same size per layer, a ``"uniform"`` one of the
        same total size drawn from all columns (:func:`uniform_subset`).
    groups : dict of str to ndarray, optional
        ``{"dev": ..., "test": ...}``: the bootstrap unit of every word (its sentence).
    n_boot, level : int, float
        :func:`paired_bootstrap`.
    margin : float
        A subset has equal accuracy on dev when its dev interval's *lower* end is
        ``>= -margin`` (non-inferiority: the interval excludes a loss larger than the
        margin; with the two-sided ``level`` 0.95, a one-sided test at 2.5 %).
    relative : bool
        ``margin`` is a fraction of the reference probe's accuracy on that split (Dalvi et
        al.'s rule: within 1 % of the oracle is ``margin=0.01, relative=True``).
    cache : dict, optional
        ``solver="lbfgs"`` only: probes already trained, ``{columns.tobytes(): (result,
        {"dev": correct, "test": correct})}``, shared between calls with the same options
        (filled here).
    **probe_kwargs
        :func:`lmsim.probe.train_probe` (``epochs``, ``lr``, ``tol``, ``device``, ...).

    Returns
    -------
    DataFrame
        One row per (seed, key, kind): ``kind`` is ``"reference"``, ``"kept"`` or
        ``"random"`` (``draw`` numbers the random subsets); ``n_neurons``, ``train``,
        ``dev``, ``test`` accuracy, ``epochs_run``, ``converged``; against the reference
        probe of the same seed, ``dev_diff``, ``dev_lo``, ``dev_hi``, ``test_diff``,
        ``test_lo``, ``test_hi``, the margins in accuracy points ``dev_margin`` and
        ``test_margin``, ``equal`` (``dev_lo >= -dev_margin``: the interval excludes a
        larger loss), ``equal_point`` (``dev_diff >= -dev_margin``: Dalvi et al.'s rule on
        the point estimate), ``gradient`` (L-BFGS's
        final pseudo-gradient entry), and the per-word correctness ``dev_correct`` and
        ``test_correct`` (object columns of bool arrays, for intervals pooled over keys).
    """
    missing = [k for k in _SPLITS if k not in X or k not in y]
    if missing:
        raise ValueError(f"`X` and `y` need the splits {list(_SPLITS)}; missing {missing}")
    width = sum(int(w) for w in dims.values())
    if X["train"].shape[1] != width:
        raise ValueError(
            f"`dims` describes {width} columns but `X['train']` has {X['train'].shape[1]}"
        )
    if int(n_random) < 0 or not seeds:
        raise ValueError(f"need `n_random` >= 0 and at least one seed, got {n_random}, {seeds}")
    classes = np.arange(int(n_classes))
    groups = groups or {}
    rows = []
    # L-BFGS starts from W = 0: a probe on the same columns is the same for every seed.
    if probe_kwargs.get("solver") != "lbfgs":
        cache = None
    elif cache is None:
        cache = {}
    for seed in seeds:
        cols_by_key = columns(seed) if callable(columns) else columns
        if reference not in cols_by_key:
            raise KeyError(
                f"`reference` {reference!r} is not a key of `columns` {list(cols_by_key)}; "
                "pass the key of all neurons"
            )
        ref, ref_correct = _cached_probe(
            cache, X, y, np.asarray(cols_by_key[reference]), classes, seed, probe_kwargs
        )
        runs = [(reference, "reference", 0, np.asarray(cols_by_key[reference]))]
        for key, cols in cols_by_key.items():
            if key == reference:
                continue
            runs.append((key, "kept", 0, np.asarray(cols, dtype=np.int64)))
            if random_for is not None and key not in set(random_for):
                continue
            if random_seeds is not None and seed not in set(random_seeds):
                continue
            for draw in range(int(n_random)):
                rand = same_size_subset(cols, dims, seed=1000 * int(seed) + draw)
                runs.append((key, "random", draw, rand))
                if uniform:
                    rand = uniform_subset(width, len(cols), seed=1000 * int(seed) + draw + 500)
                    runs.append((key, "uniform", draw, rand))
        for key, kind, draw, cols in runs:
            r, correct = (
                (ref, ref_correct)
                if kind == "reference"
                else _cached_probe(cache, X, y, cols, classes, seed, probe_kwargs)
            )
            row = dict(
                seed=seed,
                key=key,
                kind=kind,
                draw=draw,
                n_neurons=int(np.asarray(cols).size),
                **r.accuracy,
                epochs_run=r.n_epochs,
                converged=r.converged,
                stop=r.stopped_by,
                gradient=r.gradient,
            )
            for split in ("dev", "test"):
                boot = paired_bootstrap(
                    correct[split],
                    ref_correct[split],
                    groups=groups.get(split),
                    n_boot=n_boot,
                    level=level,
                    seed=int(seed),
                )
                row.update({f"{split}_diff": boot["diff"], f"{split}_lo": boot["lo"]})
                row[f"{split}_hi"] = boot["hi"]
                row[f"{split}_margin"] = margin * (ref.accuracy[split] if relative else 1.0)
                row[f"{split}_correct"] = correct[split]
            row["equal"] = bool(row["dev_lo"] >= -row["dev_margin"])
            row["equal_point"] = bool(row["dev_diff"] >= -row["dev_margin"])
            rows.append(row)
    return pd.DataFrame(rows)


def equal_accuracy(table: pd.DataFrame, reference="none", rule: str = "interval") -> pd.DataFrame:
    """Per seed, the last key (in the table's order: the largest τ) whose kept set has equal
    accuracy, with the random subsets' accuracy at the same size.

    Parameters
    ----------
    table : DataFrame
        :func:`subset_controls`' output.
    reference : key
    rule : {"interval", "point"}
        ``"point"``: Dalvi et al.'s rule, the dev accuracy within the margin of the
        reference's (column ``equal_point``); ``"interval"``: the paired dev interval's lower
        end within it (``equal``, non-inferiority: stricter on a small dev set).

    Returns
    -------
    DataFrame
        One row per seed: ``key`` (``reference`` when no kept set is equal), ``n_neurons``,
        ``kept_fraction`` (of the reference's neurons), ``test``, ``test_diff``,
        ``test_lo``, ``test_hi`` and ``test_margin`` (the kept set against the reference on
        test: chosen on dev, scored on test), ``random_test`` and ``uniform_test`` (mean
        over the random draws at that key, NaN where none) and ``kept_minus_random``.
    """
    if rule not in ("interval", "point"):
        raise ValueError(f"`rule` must be 'interval' or 'point', got {rule!r}")
    column = "equal" if rule == "interval" else "equal_point"
    out = []
    for seed, part in table.groupby("seed", sort=False):
        ref = part[part.kind == "reference"].iloc[0]
        kept = part[(part.kind == "kept") & part[column].astype(bool)]
        row = kept.iloc[-1] if len(kept) else ref
        drawn = {}
        for kind in ("random", "uniform"):
            rows = part[(part.kind == kind) & (part.key == row.key)]
            drawn[kind] = float(rows.test.mean()) if len(rows) else float("nan")
        out.append(
            dict(
                seed=seed,
                key=row.key,
                n_neurons=int(row.n_neurons),
                kept_fraction=row.n_neurons / ref.n_neurons,
                test=row.test,
                test_diff=row.test_diff,
                test_lo=row.get("test_lo", float("nan")),
                test_hi=row.get("test_hi", float("nan")),
                test_margin=row.get("test_margin", float("nan")),
                random_test=drawn["random"],
                uniform_test=drawn["uniform"],
                kept_minus_random=row.test - drawn["random"],
            )
        )
    return pd.DataFrame(out)


def seed_pooled_difference(
    per_seed_words, groups, *, n_boot: int = 1000, seed: int = 0, df_rule: str = "satterthwaite"
):
    """Mean of per-word differences over seeds, with an interval over test sentences and
    seeds (:func:`lmsim.stats.with_seed_spread`).

    Parameters
    ----------
    per_seed_words : sequence of ndarray of float, each shape (n_words,)
        One per seed: each word's difference (e.g. kept probe correct minus random probe
        correct, averaged over keys), all on the same test words.
    groups : ndarray, shape (n_words,)
        Each word's sentence (the resampling unit).
    df_rule : {"satterthwaite", "seeds"}
        :func:`lmsim.stats.with_seed_spread`'s degrees of freedom; ``"seeds"`` (``S − 1``)
        where two or three seeds could agree by chance (the random subsets' seeds).

    Returns
    -------
    Estimate
        The seed-averaged mean difference; the interval combines the bootstrap over
        sentences (seeds averaged) with the spread over seeds. With one seed, the
        bootstrap interval alone (unit "test sentences, one seed").
    """
    from lmsim import stats

    diffs = np.asarray(per_seed_words, dtype=np.float64)
    over = stats.bootstrap(
        np.mean, diffs.mean(axis=0), groups=groups, unit="test sentences", n_boot=n_boot,
        seed=seed,
    )  # fmt: skip
    if len(diffs) < 2:
        return over
    return stats.with_seed_spread(over, diffs.mean(axis=1), seeds_unit="seeds", df_rule=df_rule)


def kept_minus_drawn(table: pd.DataFrame, kind: str = "random", keys=None) -> list[np.ndarray]:
    """Per seed with ``kind`` subsets, each test word's kept-minus-drawn correctness averaged
    over ``keys`` (default: every key with such a subset), for :func:`seed_pooled_difference`.

    Parameters
    ----------
    table : DataFrame
        :func:`subset_controls`' rows of one model and task.
    kind : {"random", "uniform"}
    """
    out = []
    for _, part in table.groupby("seed", sort=False):
        drawn = part[part.kind == kind]
        use = [k for k in drawn.key.unique() if keys is None or k in set(keys)]
        if not use:
            continue
        per_key = []
        for key in use:
            kept = part[(part.kind == "kept") & (part.key == key)].test_correct.iloc[0]
            other = np.mean(np.stack(drawn[drawn.key == key].test_correct.to_list()), axis=0)
            per_key.append(kept.astype(float) - other)
        out.append(np.mean(per_key, axis=0))
    return out


def chosen_minus_reference(table: pd.DataFrame, equal: pd.DataFrame) -> list[np.ndarray]:
    """Per seed, each test word's correctness under the dev-chosen kept set (``equal``'s
    ``key``, :func:`equal_accuracy`) minus under the reference probe; seeds ``equal`` has no
    row for are left out (e.g. the seeds where no τ passed on dev)."""
    out = []
    keys = equal.set_index("seed").key
    for seed, part in table.groupby("seed", sort=False):
        if seed not in keys.index:
            continue
        key = keys[seed]
        ref = part[part.kind == "reference"].test_correct.iloc[0].astype(float)
        rows = part[(part.kind == "kept") & (part.key == key)]
        out.append((rows.test_correct.iloc[0].astype(float) if len(rows) else ref) - ref)
    return out


def key_at_share(table: pd.DataFrame, max_share: float):
    """The key (τ) whose kept set is the largest with at most ``max_share`` of the neurons.

    "Downsized by ~80 %" asks what happens at a fixed size, not at a τ: this picks, per
    model, the smallest cut that removes at least ``1 - max_share`` of the neurons (the
    number of clusters does not depend on the seed).

    Parameters
    ----------
    table : DataFrame
        :func:`subset_controls`' rows of one model and task.
    max_share : float
        Largest kept share allowed (0.25: at least 75 % downsizing).

    Returns
    -------
    key or None
        None when every kept set is larger.
    """
    ref = table[table.kind == "reference"].n_neurons.iloc[0]
    kept = table[table.kind == "kept"].drop_duplicates("key")
    small = kept[kept.n_neurons <= max_share * ref]
    return None if small.empty else small.sort_values("n_neurons").key.iloc[-1]


def best_on_dev(table: pd.DataFrame, max_neurons: int, *, kind: str = "kept") -> pd.DataFrame:
    """Per seed, the ``kind`` row with at most ``max_neurons`` neurons and the best *dev*
    accuracy: a set chosen on dev, to be scored on test (never chosen by its test score).

    Parameters
    ----------
    table : DataFrame
        :func:`subset_controls`' rows (``seed``, ``kind``, ``key``, ``n_neurons``, ``dev``,
        ``test``), possibly several tables concatenated (e.g. τ cuts and a cut at exactly
        ``max_neurons`` clusters).
    max_neurons : int
        Largest set allowed.

    Returns
    -------
    DataFrame
        One row per seed with a candidate (the seed as index): the chosen row's columns.
        Ties in dev accuracy go to the smaller set, then to the first row.
    """
    small = table[(table.kind == kind) & (table.n_neurons <= int(max_neurons))]
    if small.empty:
        return small.set_index("seed")
    order = small.assign(_row=np.arange(len(small)))
    order = order.sort_values(
        ["seed", "dev", "n_neurons", "_row"], ascending=[True, False, True, True]
    )
    return order.groupby("seed", sort=False).head(1).drop(columns="_row").set_index("seed")


def _sentence_sums(correct: np.ndarray, groups: np.ndarray, n_units: int) -> np.ndarray:
    return np.bincount(groups, weights=np.asarray(correct, dtype=np.float64), minlength=n_units)


def dev_choice_bootstrap(
    table: pd.DataFrame,
    groups: Mapping[str, np.ndarray],
    *,
    margin: float = 0.01,
    relative: bool = True,
    reference="none",
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict:
    """The dev choice of "equal accuracy" with its sampling error: dev and test sentences
    resampled together, the choice re-made on every resample's dev set.

    :func:`equal_accuracy` (``rule="point"``) picks, per seed, the last key (the largest τ)
    whose dev accuracy is within ``margin`` of the reference's. An interval over the seeds
    alone is zero-width when every seed picks the same τ, though another draw of dev
    sentences could pick another. Here each resample draws dev sentences and test sentences
    (independently, with replacement), recomputes every key's and the reference's dev
    accuracy from the per-word correctness already in ``table`` (no probe is refitted),
    re-applies the rule at every seed, and scores the chosen sets on the resampled test
    sentences. The statistics are means over the seeds; the interval is the percentile
    interval over the resamples.

    Parameters
    ----------
    table : DataFrame
        :func:`subset_controls`' rows of one model and task, with ``dev_correct`` and
        ``test_correct``.
    groups : dict
        ``{"dev": ..., "test": ...}``: each word's sentence (ints ``0 .. n_sentences − 1``).
    margin, relative
        The rule: dev accuracy minus the reference's ``>= -margin`` (times the reference's
        dev accuracy on the same resample when ``relative``).
    reference : key
    n_boot, level, seed
        Resamples, coverage, and the resampling seed. A choice is discrete, so the
        percentile interval can miss the observed value; it is then widened to include it.

    Returns
    -------
    dict
        ``downsizing`` (Estimate: one minus the chosen kept share, seed mean), ``test_diff``
        (Estimate: the chosen set's test accuracy minus the reference's, seed mean),
        ``chosen`` (Series: share of resamples x seeds choosing each key, the reference
        where none passed), ``observed`` (per seed, the observed choice: key, downsizing,
        test_diff).
    """
    from lmsim import stats

    if int(n_boot) < 2 or not 0 < level < 1:
        raise ValueError(f"need `n_boot` >= 2 and `level` in (0, 1), got {n_boot}, {level}")
    g = {k: np.asarray(groups[k], dtype=np.int64) for k in ("dev", "test")}
    n_units = {k: int(g[k].max()) + 1 for k in g}
    words = {k: np.bincount(g[k], minlength=n_units[k]).astype(np.float64) for k in g}
    rng = np.random.default_rng(seed)
    weights = {
        k: np.stack([np.bincount(rng.integers(0, n_units[k], n_units[k]), minlength=n_units[k])
                     for _ in range(int(n_boot))]).astype(np.float64)
        for k in ("dev", "test")
    }  # fmt: skip
    seeds = list(dict.fromkeys(table.seed))
    down = np.zeros((int(n_boot), len(seeds)))
    diff = np.zeros_like(down)
    picks, observed = [], []
    for j, s in enumerate(seeds):
        part = table[table.seed == s]
        ref = part[part.kind == "reference"].iloc[0]
        kept = part[(part.kind == "kept") & (part.key != reference)]
        keys = list(kept.key)
        share = np.concatenate([kept.n_neurons.to_numpy() / ref.n_neurons, [1.0]])
        sums = {
            k: np.stack([_sentence_sums(c, g[k], n_units[k])
                         for c in [*kept[f"{k}_correct"], ref[f"{k}_correct"]]], axis=1)
            for k in ("dev", "test")
        }  # fmt: skip
        acc = {k: np.vstack([sums[k].sum(0) / words[k].sum(),
                             (weights[k] @ sums[k]) / (weights[k] @ words[k])[:, None]])
               for k in ("dev", "test")}  # fmt: skip
        # row 0: the observed sets; rows 1..: the resamples; last column: the reference
        tol = margin * (acc["dev"][:, -1:] if relative else 1.0)
        ok = acc["dev"][:, :-1] - acc["dev"][:, -1:] >= -tol
        last = np.where(ok.any(axis=1), ok.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1), -1)
        col = np.where(last >= 0, last, len(keys))
        rows = np.arange(col.size)
        d = 1.0 - share[col]
        t = acc["test"][rows, col] - acc["test"][:, -1]
        down[:, j], diff[:, j] = d[1:], t[1:]
        observed.append(dict(seed=s, key=keys[col[0]] if col[0] < len(keys) else reference,
                             downsizing=d[0], test_diff=t[0]))  # fmt: skip
        picks += [keys[c] if c < len(keys) else reference for c in col[1:]]
    obs = pd.DataFrame(observed)
    unit = "dev and test sentences (the dev choice re-made per resample; seeds averaged)"
    method = f"percentile bootstrap ({int(n_boot)} resamples of dev and test sentences)"
    out = {}
    for name, draws, value in (
        ("downsizing", down.mean(axis=1), obs.downsizing.mean()),
        ("test_diff", diff.mean(axis=1), obs.test_diff.mean()),
    ):
        lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
        out[name] = stats.Estimate(
            value, min(lo, value), max(hi, value), level, unit, n_units["dev"] + n_units["test"],
            method, sd=float(draws.std(ddof=1)), draws=draws,
        )  # fmt: skip
    out["chosen"] = pd.Series(picks, dtype=object).value_counts(normalize=True, sort=False)
    out["observed"] = obs
    return out
