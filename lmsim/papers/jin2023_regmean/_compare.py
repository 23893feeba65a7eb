"""Paired intervals for "merge A beats merge B" on the merging chapter's test examples.

Two models scored on the same test examples differ by much less sampling noise than two
separate intervals suggest, so every comparison of the RegMean page resamples the test
examples once for both sides (:func:`lmsim.stats.paired_bootstrap`), with each side's
fine-tuning seeds averaged. A side is a list of runs (one per seed, or the individual
models of a floor), each run a model or fixed predictions (a constant predictor).

The statistic is each task's own metric (accuracy, Matthews correlation, Pearson
correlation, macro-F1, entity F1) recomputed on the resampled examples by
:func:`lmsim.tasks.score_predictions`, then averaged over the tasks of the comparison (the
in-domain sets of a setup, its out-of-domain sets), as the tables average them.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 4 (the tables and figures compared here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from lmsim.papers.jin2023_regmean._scoring import mean_logits
from lmsim.stats import Estimate, paired_bootstrap, with_seed_spread
from lmsim.tasks import Task, map_entity_types, predict, score_predictions

SEEDS_UNIT = "fine-tuning seeds"  # what paired_difference(n_seeds=...) varies besides examples


class Fixed:
    """Fixed predictions of a run, per task (e.g. a constant predictor).

    Parameters
    ----------
    by_task : dict of int to predictions, or list of predictions
        ``id(task)`` (tasks of one source share a name) -> predictions of the task's ``part`` as :func:`lmsim.tasks.predict`
        returns them; or one entry per task of the comparison, in its order (a comparison
        may list one task several times: a domain in each of its pairs).
    """

    def __init__(self, by_task):
        self.by_task = list(by_task) if isinstance(by_task, (list, tuple)) else dict(by_task)


def constant_run(tasks: Sequence[Task], part: str = "test", train_of=None) -> Fixed:
    """The constant predictor's run (the chance floor of Tables 1-3).

    Parameters
    ----------
    tasks : sequence of Task
    part : str
    train_of : callable, optional
        ``train_of(task)`` -> the training labels the constant is learnt from; default the
        task's own training labels (an out-of-domain set without any: pass its setup's).

    Returns
    -------
    Fixed
        Single-label: the majority class; multi-label: each label's majority value;
        regression: the training mean; token: every word ``"O"``.
    """
    out = {}
    for task in tasks:
        train = list(task.train[1] if train_of is None else train_of(task))
        n = len(task.subset(part)[1])
        if task.kind == "single_label":
            majority = int(np.bincount(np.asarray(train), minlength=task.n_labels).argmax())
            out[id(task)] = np.full(n, majority)
        elif task.kind == "multi_label":
            share = np.asarray(train, dtype=float).mean(axis=0)
            out[id(task)] = np.tile((share > 0.5).astype(np.int64), (n, 1))
        elif task.kind == "regression":
            out[id(task)] = np.full(n, float(np.mean(np.asarray(train, dtype=float))))
        else:
            out[id(task)] = [["O"] * len(x) for x in task.subset(part)[0]]
    return Fixed(out)


def run_predictions(scorer, run, task: Task, part: str = "test", type_map=None, index=None):
    """Predictions of one run on ``task``'s ``part``.

    Parameters
    ----------
    scorer : lmsim.papers.jin2023_regmean.Scorer
    run : model, (name, model) or Fixed
        A named model's logits come from the scorer's cache.
    task : Task
    part : str
    type_map : dict, optional
        Token tasks: the model's entity types renamed into the task's (Table 3's OOD sets).
    index : int, optional
        The task's position in its comparison (for a :class:`Fixed` given as a list).

    Returns
    -------
    predictions as :func:`lmsim.tasks.score_predictions` reads them
    """
    if isinstance(run, Fixed):
        return run.by_task[index] if isinstance(run.by_task, list) else run.by_task[id(task)]
    name, model = run if isinstance(run, tuple) else (None, run)
    logits = (
        scorer.named_logits(name, model, task, part) if name else scorer.logits(model, task, part)
    )
    if task.kind != "token":
        return predict(task.kind, np.asarray(logits))
    id2label = model.config.id2label
    tags = predict("token", logits, [id2label[i] for i in range(len(id2label))])
    return map_entity_types(tags, type_map) if type_map is not None else tags


def snapshot(
    scorer,
    model,
    tasks: Sequence[Task] = (),
    ood: Sequence[Task] = (),
    type_map=None,
    part: str = "test",
) -> Fixed:
    """A model's predictions on ``tasks`` and (with ``type_map``) on ``ood``, kept as a run.

    Merged models are scored once and dropped (a base-size model each); their predictions
    take part in every later comparison.
    """
    out = {id(t): run_predictions(scorer, model, t, part) for t in tasks}
    out |= {id(t): run_predictions(scorer, model, t, part, type_map) for t in ood}
    return Fixed(out)


def _take(predictions, idx: np.ndarray):
    if isinstance(predictions, np.ndarray):
        return predictions[idx]
    return [predictions[i] for i in idx]


class _Table:
    """Every run's predictions on every task, and the metric of a set of resampled rows."""

    def __init__(self, tasks: Sequence[Task], part: str, runs: list[list]):
        self.tasks, self.part = list(tasks), part
        self.gold = [t.subset(part)[1] for t in self.tasks]
        self.runs = runs  # runs[slot][task index] -> predictions

    def rows(self, slot: int) -> np.ndarray:
        """(n_examples, 3) int rows: task index, example index, run slot."""
        parts = [
            np.column_stack([np.full(len(g), t), np.arange(len(g)), np.full(len(g), slot)])
            for t, g in enumerate(self.gold)
        ]
        return np.concatenate(parts).astype(np.int64)

    def statistic(self, rows: np.ndarray) -> float:
        """Mean over the tasks of each task's metric on its resampled examples."""
        slot = int(rows[0, 2])
        values = []
        for t, task in enumerate(self.tasks):
            idx = rows[rows[:, 0] == t, 1]
            if len(idx) == 0:
                continue
            pred = _take(self.runs[slot][t], idx)
            gold = [self.gold[t][i] for i in idx]
            values.append(score_predictions(task, pred, self.part, labels=gold))
        return float(np.mean(values))


def example_groups(tasks: Sequence[Task], part: str = "test") -> np.ndarray | None:
    """(n_rows,) a resampling group per row of a comparison: one per distinct test example.

    A comparison may list one task several times (a domain in each of its pairs, Figs. 3-5,
    Table 8); its examples are then scored twice, and resampling the two copies independently
    understates the standard error by up to √2. Rows of the same task object and example
    index share a label. None when every task appears once (each row its own unit).

    Returns
    -------
    ndarray of int64, shape (n_rows,), or None
        Rows in :class:`_Table`'s order (tasks in order, examples in order): the label is the
        first position of the row's task in ``tasks`` times the largest task size, plus the
        example index.
    """
    tasks = list(tasks)
    first = {}
    for i, t in enumerate(tasks):
        first.setdefault(id(t), i)
    if len(first) == len(tasks):
        return None
    sizes = [len(t.subset(part)[1]) for t in tasks]
    width = max(sizes, default=0) + 1
    return np.concatenate(
        [first[id(t)] * width + np.arange(n, dtype=np.int64) for t, n in zip(tasks, sizes)]
    )


def _predictions(scorer, runs, tasks, part, type_map) -> list[list]:
    return [
        [run_predictions(scorer, r, t, part, type_map, i) for i, t in enumerate(tasks)]
        for r in runs
    ]


def side_scores(scorer, runs: Sequence, tasks: Sequence[Task], part="test", type_map=None):
    """Each run's mean metric over ``tasks`` (the numbers the tables show), as an array."""
    tasks = list(tasks)
    table = _Table(tasks, part, _predictions(scorer, runs, tasks, part, type_map))
    return np.array([table.statistic(table.rows(s)) for s in range(len(runs))])


def ensemble_run(
    scorer, named: Mapping[str, object], tasks: Sequence[Task], part="test", type_map=None
) -> Fixed:
    """The logit ensemble of the named models (their mean logits' predictions), per task."""
    model = next(iter(named.values()))
    out = {}
    for task in tasks:
        logits = mean_logits([scorer.named_logits(n, m, task, part) for n, m in named.items()])
        if task.kind != "token":
            out[id(task)] = predict(task.kind, np.asarray(logits))
            continue
        id2label = model.config.id2label
        tags = predict("token", logits, [id2label[i] for i in range(len(id2label))])
        out[id(task)] = map_entity_types(tags, type_map) if type_map is not None else tags
    return Fixed(out)


def unit_run(scorer, pieces: Sequence[tuple], part="test", type_map=None) -> Fixed:
    """One run assembled from other runs, one per unit: ``[(run, task), ...]``.

    Fig. 3's side "RegMean" scores each pair's merge on each of the pair's domains: the
    comparison's tasks are the pieces' tasks, in order.
    """
    return Fixed([run_predictions(scorer, r, t, part, type_map) for r, t in pieces])


def paired_difference(
    scorer,
    a: Sequence,
    b: Sequence,
    tasks: Sequence[Task],
    *,
    part: str = "test",
    type_map=None,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    n_seeds: int | None = None,
) -> Estimate:
    """Paired interval of ``score(A) − score(B)`` over the test examples of ``tasks``.

    Parameters
    ----------
    scorer : lmsim.papers.jin2023_regmean.Scorer
    a, b : sequence of runs
        Each side's runs (a model, ``(name, model)`` or :class:`Fixed`): one per fine-tuning
        seed (a merge per seed), or the individual models a floor averages. A side's score
        is the mean over its runs.
    tasks : sequence of Task
        Scored on ``part``; the score is the mean over the tasks of each task's metric. A
        task listed several times (the same object) has its examples resampled together:
        one draw of an example takes its every copy (:func:`example_groups`).
    part : str
    type_map : dict, optional
        As in :func:`run_predictions`.
    n_boot, level, seed
        As in :func:`lmsim.stats.paired_bootstrap`.
    n_seeds : int, optional
        The runs come from this many fine-tuning seeds, seed by seed: each side holds one
        run (a fixed baseline shared by every seed) or ``k * n_seeds`` runs, the k runs of
        the first seed first. The interval then also carries the spread over seeds
        (:func:`lmsim.stats.with_seed_spread` of the per-seed differences); without it, the
        seeds are fixed and only the test examples vary.

    Returns
    -------
    Estimate
        The difference, its percentile interval over the pooled test examples (resampled
        once for both sides), ``unit`` naming the examples and both sides' run counts;
        ``values``: each A run's difference against B's mean. With ``n_seeds``: the
        interval over test examples and seeds, ``values`` the per-seed differences.
    """
    tasks = list(tasks)
    if not a or not b:
        raise ValueError("each side needs at least one run")
    table = _Table(tasks, part, _predictions(scorer, [*a, *b], tasks, part, type_map))
    rows_a = np.stack([table.rows(s) for s in range(len(a))])
    rows_b = np.stack([table.rows(len(a) + s) for s in range(len(b))])
    groups = example_groups(tasks, part)
    unit = "test examples" if groups is None else "test examples (repeats grouped)"
    over_examples = paired_bootstrap(
        rows_a,
        rows_b,
        table.statistic,
        unit=unit,
        groups=groups,
        seeds="mean",
        n_boot=n_boot,
        level=level,
        seed=seed,
    )
    if n_seeds is None:
        return over_examples
    scores_a = [table.statistic(r) for r in rows_a]
    scores_b = [table.statistic(r) for r in rows_b]
    per_seed = _by_seed(scores_a, n_seeds, "A") - _by_seed(scores_b, n_seeds, "B")
    over_examples = replace(over_examples, unit=unit)
    return with_seed_spread(over_examples, per_seed, seeds_unit=SEEDS_UNIT)


def _by_seed(scores: Sequence[float], n_seeds: int, side: str) -> np.ndarray:
    """(n_seeds,) mean score of each seed's runs (runs seed by seed; one run: shared)."""
    if n_seeds < 2:
        raise ValueError(f"`n_seeds` must be at least 2 (leave it out for one seed), got {n_seeds}")
    if len(scores) == 1:
        return np.full(n_seeds, scores[0], dtype=np.float64)
    if len(scores) % n_seeds:
        raise ValueError(
            f"side {side} has {len(scores)} runs, not one (a shared baseline) nor a multiple of "
            f"n_seeds={n_seeds}: pass each seed's runs together, seed by seed"
        )
    return np.asarray(scores, dtype=np.float64).reshape(n_seeds, -1).mean(axis=1)


def majority_run(tasks: Sequence[Task], part: str = "test") -> Fixed:
    """Each set's own majority floor: its most frequent ``part`` class, predicted for all.

    The strictest constant a table can be held to (the majority of the examples it scores,
    not of some training pool): a model below it on a set has learnt nothing the set's label
    shares do not give. Single-label tasks only.
    """
    return constant_run(tasks, part, train_of=lambda t: t.subset(part)[1])


def majority_floors(tasks: Mapping[str, Task], part: str = "test") -> pd.DataFrame:
    """Per set: its metric, the majority floor under it, and raw accuracy's majority share.

    Parameters
    ----------
    tasks : dict of str to Task
        Single-label sets by name (a setup's domains and out-of-domain sets).
    part : str

    Returns
    -------
    DataFrame indexed by set
        ``examples``, ``majority class``, ``majority share`` (the always-majority accuracy,
        in points), ``metric`` and ``floor`` (the always-majority predictor's score under
        the set's metric, in points: 50 for balanced accuracy on two classes).
    """
    rows = {}
    for name, task in tasks.items():
        if task.kind != "single_label":
            raise ValueError(f"majority floors are for single-label sets; {name!r} is {task.kind}")
        gold = np.asarray(task.subset(part)[1])
        counts = np.bincount(gold, minlength=task.n_labels)
        majority = int(counts.argmax())
        rows[name] = {
            "examples": len(gold),
            "majority class": task.label_names[majority],
            "majority share": 100 * counts[majority] / len(gold),
            "metric": task.metric,
            "floor": 100 * score_predictions(task, np.full(len(gold), majority), part),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("set")


def learning_checks(
    scorer,
    runs_by_domain: Mapping[str, Sequence],
    tasks: Mapping[str, Task],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, dict]:
    """Does each domain's own model beat that domain's majority floor, per seed and pooled?

    Parameters
    ----------
    scorer : lmsim.papers.jin2023_regmean.Scorer
    runs_by_domain : dict of str to sequence of runs
        Domain -> its own model's runs, one per fine-tuning seed (``(name, model)``).
    tasks : dict of str to Task
        Domain -> its in-domain task (scored on its test part).
    n_boot, seed
        As in :func:`paired_difference`.

    Returns
    -------
    dict of domain -> dict
        ``pooled``: the paired difference (model minus the domain's majority floor, see
        :func:`majority_run`) over test examples and, with two or more seeds, the seeds;
        ``per_seed``: one paired interval (test examples) per seed.
    """
    out = {}
    for d, runs in runs_by_domain.items():
        task = tasks[d]
        floor = [majority_run([task])]
        per_seed = [
            paired_difference(scorer, [r], floor, [task], n_boot=n_boot, seed=seed) for r in runs
        ]
        pooled = (
            paired_difference(
                scorer, list(runs), floor, [task], n_boot=n_boot, seed=seed, n_seeds=len(runs)
            )
            if len(runs) > 1
            else per_seed[0]
        )
        out[d] = {"pooled": pooled, "per_seed": per_seed}
    return out
