"""The RegMean page's merges per setup, kept as runs (predictions) for paired comparisons.

Each function merges the models of one seed (or one head-initialisation variant) of a
setup, scores every merge once and returns :class:`~lmsim.papers.jin2023_regmean.Fixed` runs, so that
base-size merged models need not stay in memory; :func:`difference_table` then compares the
runs of several seeds with paired intervals.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 4.2-4.4 (Figs. 3, 5, 6; Tables 2, 3, 6-8).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lmsim.merge import SingularGramWarning
from lmsim.papers.jin2023_regmean._compare import (
    ensemble_run,
    paired_difference,
    side_scores,
    snapshot,
    unit_run,
)
from lmsim.papers.jin2023_regmean._scoring import best_on_validation, greedy_order
from lmsim.papers.jin2023_regmean._setups import DomainSetup


def validation_score(scorer, tasks, type_map=None) -> Callable[[object], float]:
    """``f(model)``: the model's mean score over the validation parts of ``tasks``."""
    tasks = list(tasks)
    return lambda model: float(
        np.mean([scorer.score(model, t, "validation", type_map) for t in tasks])
    )


def merge_tuned(lab, scorer, names, method: str, tasks, grids: Mapping[str, Mapping], **kw):
    """``lab.merge(names, method)``; a method with a grid (task arithmetic's, TIES's λ) takes
    the candidate best on the validation parts of ``tasks`` (the in-domain sets merged)."""
    if method not in grids:
        return lab.merge(names, method, **kw)
    validate = validation_score(scorer, tasks)
    return lab.choose_on_validation(names, method, grids[method], validate, **kw)[0]


def pairwise_runs(
    lab,
    scorer,
    setup: DomainSetup,
    name_of: Callable[[str], str],
    methods: Mapping[str, str],
    grids: Mapping[str, Mapping] | None = None,
    extra: Mapping[str, Mapping] | None = None,
) -> dict:
    """Every pair of a setup's domain models merged (Fig. 3), as runs over (pair, domain).

    Parameters
    ----------
    lab : MergeLab
    scorer : Scorer
    setup : DomainSetup
    name_of : callable
        Domain -> the name of its model in ``lab`` (one seed or variant).
    methods : dict of str to str
        Page label -> ``merge_models`` method.
    grids : dict of method to dict, optional
        Hyper-parameter candidates per method, chosen on the pair's validation parts.
    extra : dict of str to dict, optional
        Page label -> fixed ``merge_models`` keywords, merged with that label's method
        (e.g. ``{"TIES": {"density": 0.2}}``).

    Returns
    -------
    dict
        ``units``: the (i, j, domain) units in order; ``tasks``: each unit's in-domain task;
        ``runs``: ``"own"`` (each unit's own domain model) and each method label -> run;
        ``pairs``: label -> {(i, j): the merge's predictions, in-domain and on
        ``setup.ood_whole``}.
    """
    grids, extra = dict(grids or {}), dict(extra or {})
    pairs = list(itertools.combinations(setup.domains, 2))
    units = [(i, j, d) for i, j in pairs for d in (i, j)]
    tasks = [setup.domains[d] for _, _, d in units]
    own = unit_run(scorer, [((name_of(d), lab.models[name_of(d)]), t) for (*_, d), t in
                            zip(units, tasks)])  # fmt: skip
    merged, snaps = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularGramWarning)
        for label, method in methods.items():
            snaps[label] = {}
            for i, j in pairs:
                both = [setup.domains[i], setup.domains[j]]
                model = merge_tuned(
                    lab, scorer, [name_of(i), name_of(j)], method, both, grids,
                    **extra.get(label, {}),
                )  # fmt: skip
                snaps[label][i, j] = snapshot(
                    scorer, model, both, setup.ood_whole.values(), setup.type_map
                )
            merged[label] = unit_run(
                scorer, [(snaps[label][i, j], t) for (i, j, _), t in zip(units, tasks)]
            )
    return {"units": units, "tasks": tasks, "runs": {"own": own} | merged, "pairs": snaps}


def all_domain_runs(
    lab,
    scorer,
    setup: DomainSetup,
    name_of: Callable[[str], str],
    methods: Mapping[str, str],
    grids: Mapping[str, Mapping] | None = None,
    extra: Mapping[str, Mapping] | None = None,
) -> dict[str, object]:
    """All domain models of one seed merged (Tables 2-3) with the individual floors, as runs.

    Returns
    -------
    dict of str to run
        ``"each:<domain>"`` (each individual), ``"Best f1..N"`` (the individual best on the
        in-domain validation parts), ``"Ensemble"``, one per method label, and
        ``"Domain-specific"`` (each domain's model on its own domain); every run scored on
        the in-domain test parts and the out-of-domain sets' whole test parts.
    """
    grids, extra = dict(grids or {}), dict(extra or {})
    names = {d: name_of(d) for d in setup.domains}
    named = {n: lab.models[n] for n in names.values()}
    domains, ood = list(setup.domains.values()), list(setup.ood_whole.values())
    out = {f"each:{d}": (n, lab.models[n]) for d, n in names.items()}
    best = best_on_validation(scorer, named, domains)
    out["Best f1..N"] = (best, named[best])
    out["Ensemble"] = ensemble_run(scorer, named, domains)
    ensemble_ood = ensemble_run(scorer, named, ood, type_map=setup.type_map)
    out["Ensemble"].by_task |= ensemble_ood.by_task
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularGramWarning)
        for label, method in methods.items():
            model = merge_tuned(
                lab, scorer, list(names.values()), method, domains, grids, **extra.get(label, {})
            )
            out[label] = snapshot(scorer, model, domains, ood, setup.type_map)
    out["Domain-specific"] = unit_run(
        scorer, [((names[d], named[names[d]]), t) for d, t in setup.domains.items()]
    )
    return out


def difference_table(
    scorer,
    sides: Mapping[str, Sequence],
    reference: str,
    tasks: Sequence,
    *,
    type_map=None,
    n_boot: int = 1000,
    seed: int = 0,
    n_seeds: int | None = None,
    scale: float = 100.0,
):
    """Each side's score and its paired difference from ``reference`` with the interval.

    Parameters
    ----------
    scorer : Scorer
    sides : dict of str to list of runs
        Label -> runs (one per seed, or the individuals of a floor).
    reference : str
        The label every other side is compared with.
    tasks : sequence of Task
    type_map : dict, optional
    n_boot, seed, n_seeds
        As in :func:`paired_difference` (``n_seeds``: intervals over test examples and seeds).
    scale : float
        Multiplies every number (100: percentage points).

    Returns
    -------
    pandas.DataFrame
        Indexed by label: ``score`` (mean over the runs), ``minus <reference>`` and its
        ``low`` / ``high`` interval ends (empty for the reference row).
    """
    import pandas as pd

    rows = {}
    for label, runs in sides.items():
        row = {"score": scale * side_scores(scorer, runs, tasks, type_map=type_map).mean()}
        if label != reference:
            d = paired_difference(
                scorer, runs, sides[reference], tasks, type_map=type_map, n_boot=n_boot,
                seed=seed, n_seeds=n_seeds,
            )  # fmt: skip
            row |= {f"minus {reference}": scale * d.estimate}
            row |= {"low": scale * d.low, "high": scale * d.high}
        rows[label] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def greedy_runs(lab, scorer, setup: DomainSetup, name_of: Callable[[str], str]) -> dict:
    """Greedy incremental RegMean merging of one seed's domain models (Fig. 6).

    The models are ordered by their mean score on the out-of-domain validation parts
    (:func:`greedy_order`); the first ``k`` merged for every ``k``; the subset size is the
    one whose merge scores best on the same validation parts. Nothing is chosen on the
    out-of-domain test parts the runs are scored on.

    Returns
    -------
    dict
        ``order`` (model names), ``validation`` (the k-merges' validation scores),
        ``k`` (the chosen size; 1 is the best individual, no merge), ``k_merge`` (the size
        chosen among the merges proper, k >= 2), ``runs`` (k -> predictions on
        ``setup.ood_whole``),
        ``best`` (the best individual's run, the first in order).
    """
    named = {name_of(d): lab.models[name_of(d)] for d in setup.domains}
    ood_val, ood = list(setup.ood.values()), list(setup.ood_whole.values())
    order = greedy_order(scorer, named, ood_val, setup.type_map)
    validation, runs = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularGramWarning)
        for k in range(1, len(order) + 1):
            model = named[order[0]] if k == 1 else lab.merge(order[:k], "regmean")
            validation[k] = validation_score(scorer, ood_val, setup.type_map)(model)
            runs[k] = snapshot(scorer, model, (), ood, setup.type_map)
    k = max(validation, key=lambda n: (validation[n], -n))
    merges = {n: v for n, v in validation.items() if n >= 2}
    k_merge = max(merges, key=lambda n: (merges[n], -n))
    return {
        "order": order, "validation": validation, "k": k, "k_merge": k_merge, "runs": runs,
        "best": runs[1],
    }  # fmt: skip


def own_vs_others(lab, scorer, setup: DomainSetup, name_of: Callable[[str], str]):
    """Runs over (domain, other domain) units: each domain's own model and another's.

    Returns
    -------
    own, other : Fixed
        ``own`` scores domain ``d``'s model on ``d`` in every unit ``(d, e)``; ``other``
        scores ``e``'s model on ``d``.
    tasks : list of Task
        Each unit's domain (``d``).
    """
    units = [(d, e) for d in setup.domains for e in setup.domains if e != d]
    tasks = [setup.domains[d] for d, _ in units]

    def run(pick):
        pieces = [((name_of(pick(d, e)), lab.models[name_of(pick(d, e))]), t)
                  for (d, e), t in zip(units, tasks)]  # fmt: skip
        return unit_run(scorer, pieces)

    return run(lambda d, e: d), run(lambda d, e: e), tasks


def table7_runs(scorer, setup: DomainSetup, named: Mapping[str, object], pairs: Mapping):
    """Table 7 of one seed: OOD scores of every pairwise RegMean merge and the top pair.

    Parameters
    ----------
    scorer : Scorer
    setup : DomainSetup
    named : dict of domain to (name, model)
        Each domain's model.
    pairs : dict of (i, j) to Fixed
        The pairwise RegMean merges' predictions (:func:`pairwise_runs`'s ``pairs``).

    Returns
    -------
    dict
        ``matrix`` (domain x domain OOD test scores: individuals on the diagonal, pair
        merges above it), ``top`` (the pair of the two individuals best on the OOD
        validation parts), ``top_run`` and ``other_runs`` (the other pairs' runs).
    """
    import pandas as pd

    ood_val, ood = list(setup.ood.values()), list(setup.ood_whole.values())
    validation = {
        d: validation_score(scorer, ood_val, setup.type_map)(model) for d, (_, model) in
        named.items()
    }  # fmt: skip
    ranked = sorted(validation, key=lambda d: -validation[d])
    top = tuple(d for d in setup.domains if d in ranked[:2])
    domains = list(setup.domains)
    matrix = pd.DataFrame(np.nan, index=domains, columns=domains)
    for d, run in named.items():
        matrix.loc[d, d] = side_scores(scorer, [run], ood, type_map=setup.type_map)[0]
    for (i, j), run in pairs.items():
        matrix.loc[i, j] = side_scores(scorer, [run], ood, type_map=setup.type_map)[0]
    others = [run for key, run in pairs.items() if key != top]
    return {"matrix": matrix, "top": top, "top_run": pairs[top], "other_runs": others}
