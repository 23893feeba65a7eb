"""The redundancy chapter's per-model runs: one model's activations at a time, small tables out.

The probing page (2022 thesis, Sec. 3-4) clusters every neuron of a model, probes the kept
neurons at every τ and compares them with all neurons and with random subsets. Holding the
word activations of all ten thesis models at once takes 84 GB (258k words x 81,408 neurons,
float32); :func:`model_redundancy` extracts one model, computes everything the page reports
about it and returns only tables (kept counts, accuracies, intervals), so the page's host
memory is one model's activations. :func:`transfer_probes` does the same for the
cross-lingual page, training each probe once and scoring it on every transfer set.

References
----------
"Distillation and redundancy in language models" (master's thesis, 2022), Sec. 3.2-3.3,
Fig. 5.3-5.4, Table 5.1; Dalvi et al. (2020), Sec. 3; Hewitt & Liang (2019).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lmsim.cluster import reconstruction_r2, representatives
from lmsim.papers.thesis2022_redundancy.redundancy import (
    cluster_cuts,
    layer_subsets,
    scipy_agreement,
)
from lmsim.papers.thesis2022_redundancy.selection import carry_over_selection
from lmsim.papers.thesis2022_redundancy.subset_controls import (
    same_size_subset,
    subset_controls,
    uniform_subset,
)
from lmsim.probe import control_labels, train_probe, tune_penalty, word_activations

__all__ = ["sentence_groups", "model_redundancy", "transfer_probes"]

_SPLITS = ("train", "dev", "test")


def sentence_groups(sentences: Sequence) -> np.ndarray:
    """The sentence index of every word, words in sentence order (the bootstrap unit).

    Returns
    -------
    ndarray of int64, shape (n_words,)
    """
    return np.repeat(np.arange(len(sentences)), [len(s.words) for s in sentences])


def _activations(model, sets, layers, extract_kw) -> tuple[dict, dict]:
    out = {}
    for split, sentences in sets.items():
        out[split], dims = word_activations(
            model, [s.words for s in sentences], layers=layers, **extract_kw
        )
    return out, dims


def model_redundancy(
    model: str,
    sets: Mapping[str, Sequence],
    labels: Mapping[str, tuple[Mapping[str, np.ndarray], list]],
    *,
    thresholds: Sequence[float],
    seeds: Sequence[int] = (0, 1, 2),
    random_for: Sequence[float] | None = None,
    random_seeds: Sequence[int] | None = None,
    uniform: bool = False,
    margin: float = 0.0,
    relative: bool = False,
    n_boot: int = 1000,
    scipy_rows: int = 20_000,
    extract_kw: Mapping | None = None,
    lambdas: Sequence[float] | None = None,
    compare: Mapping | None = None,
    reconstruct: bool = False,
    n_targets: int | None = 2000,
    n_clusters: Sequence[int] = (),
    carry_over: bool = False,
    **probe_kwargs,
) -> dict:
    """Everything the probing page reports about one model, its activations dropped after.

    Parameters
    ----------
    model : str
        A name :func:`lmsim.models.load_model` knows.
    sets : dict of str to list of sentences
        ``"train"``, ``"dev"``, ``"test"`` (:func:`lmsim.papers.thesis2022_redundancy.redundancy.probing_sets`).
    labels : dict of str to (y, names)
        Per task, :func:`lmsim.papers.thesis2022_redundancy.redundancy.label_ids`' output on ``sets``.
    thresholds : sequence of float
        Clustering cuts τ.
    seeds : sequence of int
        Probe seeds; seed ``s`` also draws the representatives of every cluster
        (:func:`lmsim.cluster.representatives` with ``s``).
    random_for : sequence of float, optional
        The τ whose kept sets get a random subset of the same size per layer (default all).
    random_seeds, uniform, margin, relative
        :func:`lmsim.papers.thesis2022_redundancy.subset_controls.subset_controls`: the seeds
        that draw random subsets, a uniform-random subset (any layer) beside each, and the
        "equal accuracy" margin on dev (``relative``: a fraction of all neurons' accuracy).
    n_boot : int
        Resamples of test / dev sentences behind every paired interval.
    scipy_rows : int
        Training words of the check against scipy's dense pipeline
        (:func:`lmsim.papers.thesis2022_redundancy.redundancy.scipy_agreement`).
    extract_kw : dict, optional
        :func:`lmsim.probe.word_activations` options (``subword``, ``batch_size``, ...).
    lambdas : sequence of float, optional
        With ``solver="lbfgs"``: per task, ``λ = λ1 = λ2`` is tuned on dev on all neurons
        from this grid (:func:`lmsim.probe.tune_penalty`) and used for every probe of the
        task; default: ``l1`` and ``l2`` as given.
    compare : dict, optional
        :func:`lmsim.probe.train_probe` options of a second probe on all neurons (e.g. the
        thesis's 10 epochs of Adam), trained per task beside the page's probe, both with
        train / dev / test curves (``solvers`` and ``curves`` in the output). With
        ``lambdas``, the same optimiser is also trained on the page's own objective
        (standardised neurons, the tuned λ: solver ``"adam, same objective"``), so the
        optimiser is compared like with like.
    reconstruct : bool
        The probe-free redundancy curve (:func:`reconstruction_table`): the held-out share of
        all neurons' variance each kept set (first seed) and a random subset of the same
        size (per layer, and from any layer) reconstruct linearly.
    n_targets : int or None
        :func:`lmsim.cluster.reconstruction_r2`'s sample of target neurons.
    n_clusters : sequence of int
        The same tree also cut into exactly this many clusters (e.g. 100: "fewer than 100
        neurons" asked of a model whose smallest τ set is larger); one representative per
        cluster at every seed, probed like the τ sets (``sizes`` in the output).
    carry_over : bool
        Also simulate the authors' τ loop with its index carry-over
        (:func:`lmsim.papers.thesis2022_redundancy.selection.carry_over_selection`, first
        seed; no probes): ``carry_over`` in the output.
    **probe_kwargs
        :func:`lmsim.probe.train_probe` options (``epochs``, ``lr``, ``tol``, ...).

    Returns
    -------
    dict
        ``dims`` ({block: width}); ``cuts`` ({τ: cluster labels of every neuron}); ``kept``
        ({seed: {τ: kept columns}}); ``controls`` (:func:`lmsim.papers.thesis2022_redundancy.subset_controls.subset_controls`
        rows of every task, ``task`` column); ``baseline`` (all neurons at the first seed
        with the control task, per task); ``subsets`` (the thesis's layer subsets against
        all neurons at the first seed, paired intervals over test sentences); ``variance``
        (per neuron, training words); ``scipy`` ({τ: same partition as scipy}); ``penalty``
        (the λ grid's dev accuracies per task, ``chosen`` marks the λ used; empty without
        ``lambdas``); ``solvers`` (with ``compare``: per task and solver, the probe on all
        neurons' accuracies, ``converged``, ``stop``, ``steps``) and ``curves`` (accuracy
        per split after every epoch, or every 10 L-BFGS iterations); ``correct`` (per task,
        the probe on all neurons' per-word correctness on test); ``reconstruction`` (with
        ``reconstruct``, else empty); ``sizes`` (with ``n_clusters``: the
        :func:`subset_controls` rows of the exact-count cuts, keys the counts, ``task``
        column; else empty) and ``size_kept`` ({seed: {count: kept columns}}); ``carry_over``
        ({τ: kept columns} of the simulated loop, empty without ``carry_over``); ``seconds``.
    """
    seeds = [int(s) for s in seeds]
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    X, dims = _activations(model, sets, "all", dict(extract_kw or {}))
    seconds["extract"] = time.perf_counter() - start

    start = time.perf_counter()
    # a count at least the width keeps every neuron: nothing to cut
    counts = [int(k) for k in n_clusters if int(k) < X["train"].shape[1]]
    tree = cluster_cuts(X["train"], thresholds, n_clusters=counts)
    cuts = {t: lab for t, (lab, _) in tree.items() if isinstance(t, float)}
    by_count = {k: tree[k][0] for k in counts}
    seconds["cluster"] = time.perf_counter() - start
    n = X["train"].shape[1]
    kept = {s: {t: representatives(lab, s) for t, lab in cuts.items()} for s in seeds}
    size_kept = {s: {k: representatives(lab, s) for k, lab in by_count.items()} for s in seeds}

    def columns(seed):
        return {"none": np.arange(n)} | kept[int(seed)]

    groups = {k: sentence_groups(sets[k]) for k in ("dev", "test")}
    words = {k: [w for s in sets[k] for w in s.words] for k in _SPLITS}
    controls, baseline, subsets, penalty, solvers, curves, sizes = [], [], [], [], [], [], []
    correct = {}
    for task, (y, names) in labels.items():
        start = time.perf_counter()
        kw, classes = dict(probe_kwargs), np.arange(len(names))
        if lambdas:
            best, grid = tune_penalty(
                X["train"], y["train"], X["dev"], y["dev"], lambdas, classes=classes, **kw
            )
            penalty.append(grid.assign(task=task, chosen=grid["lambda"] == best))
            kw.update(solver="lbfgs", l1=best, l2=best)
        seconds["penalty (λ on dev)"] = seconds.get("penalty (λ on dev)", 0.0)
        seconds["penalty (λ on dev)"] += time.perf_counter() - start
        start = time.perf_counter()
        cache = {} if kw.get("solver") == "lbfgs" else None
        ref, base, correct[task] = _reference(X, y, classes, words, seeds[0], kw, cache)
        baseline.append(base.assign(task=task))
        table = subset_controls(
            X, y, columns, dims, n_classes=len(names), seeds=seeds, random_for=random_for,
            random_seeds=random_seeds, uniform=uniform, margin=margin, relative=relative,
            groups=groups, n_boot=n_boot, cache=cache, **kw,
        )  # fmt: skip
        controls.append(table.assign(task=task))
        if counts:
            table = subset_controls(
                X, y, lambda s: {"none": np.arange(n)} | size_kept[int(s)], dims,
                n_classes=len(names), seeds=seeds, n_random=0, groups=groups, n_boot=n_boot,
                margin=margin, relative=relative, cache=cache, **kw,
            )  # fmt: skip
            sizes.append(table[table.kind == "kept"].assign(task=task))
        _add_time(seconds, "probes (τ, seeds, random subsets)", start)
        start = time.perf_counter()
        table = subset_controls(
            X, y, layer_subsets(dims), dims, n_classes=len(names), reference="all",
            seeds=seeds[:1], n_random=0, groups=groups, n_boot=n_boot, cache=cache, **kw,
        )  # fmt: skip
        subsets.append(table.drop(columns=["dev_correct", "test_correct"]).assign(task=task))
        _add_time(seconds, "probes (layer subsets)", start)
        start = time.perf_counter()
        if compare:
            others = {None: compare}
            if lambdas:  # the same optimiser on the page's objective: like with like
                others["adam, same objective"] = dict(compare) | dict(
                    l1=kw["l1"], l2=kw["l2"], standardize=True
                )
            _solver_rows(ref, task, solvers, curves)
            for name, options in others.items():
                other = train_probe(
                    *[a for k in _SPLITS for a in (X[k], y[k])], classes=classes, curves=True,
                    **options,
                )  # fmt: skip
                _solver_rows(other, task, solvers, curves, name=name)
        _add_time(seconds, "solver comparison", start)
    start = time.perf_counter()
    variance = np.concatenate(
        [
            np.asarray(X["train"][:, j : j + 1024], dtype=np.float64).var(axis=0)
            for j in range(0, n, 1024)
        ]
    )  # column blocks: never a float64 copy of all training activations
    scipy = scipy_agreement(X["train"], thresholds, max_rows=scipy_rows)
    seconds["scipy check"] = time.perf_counter() - start
    start = time.perf_counter()
    carried = {}
    if carry_over:
        low = min(cuts)
        carried = carry_over_selection(X["train"], sorted(cuts), seed=seeds[0], first=cuts[low])
        seconds["carry-over loop (authors' pipeline)"] = time.perf_counter() - start
    start = time.perf_counter()
    recon = (
        reconstruction_table(X["train"], X["test"], kept[seeds[0]], dims, seed=seeds[0],
                             n_targets=n_targets)
        if reconstruct
        else pd.DataFrame()
    )  # fmt: skip
    seconds["reconstruction (probe-free)"] = time.perf_counter() - start
    return dict(
        dims=dims,
        cuts=cuts,
        kept=kept,
        controls=pd.concat(controls, ignore_index=True).assign(model=model),
        baseline=pd.concat(baseline, ignore_index=True).assign(model=model),
        subsets=pd.concat(subsets, ignore_index=True).assign(model=model),
        variance=variance,
        scipy=scipy,
        penalty=pd.concat(penalty, ignore_index=True).assign(model=model)
        if penalty
        else pd.DataFrame(),
        solvers=pd.DataFrame(solvers).assign(model=model),
        curves=pd.DataFrame(curves).assign(model=model),
        correct=correct,
        reconstruction=recon.assign(model=model) if len(recon) else recon,
        sizes=pd.concat(sizes, ignore_index=True).assign(model=model) if sizes else pd.DataFrame(),
        size_kept=size_kept,
        carry_over=carried,
        seconds=seconds,
    )


def reconstruction_table(
    X_fit,
    X_eval,
    kept: Mapping,
    dims: Mapping[str, int],
    *,
    seed: int = 0,
    n_targets: int | None = 2000,
) -> pd.DataFrame:
    """The probe-free redundancy curve: per τ, the held-out R² of all neurons from the kept
    set, from a random subset of the same size per layer and from one drawn from any layer.

    Parameters
    ----------
    X_fit, X_eval : ndarray, shape (n_words, n_neurons)
        Training words (the fit) and held-out words (the R²).
    kept : mapping of float to ndarray of int
        ``{τ: kept columns}`` of one seed.
    dims : mapping of str to int
        ``{block: width}`` of the columns.
    seed : int
        The random subsets' draw (the seeds :func:`subset_controls` uses for draw 0) and the
        target sample's.

    Returns
    -------
    DataFrame
        One row per (τ, kind): ``key``, ``kind`` ("kept", "random", "uniform"),
        ``n_neurons``, ``r2`` (:func:`lmsim.cluster.reconstruction_r2`).
    """
    width = sum(int(w) for w in dims.values())
    subsets, rows = {}, []
    for tau, cols in kept.items():
        subsets[tau, "kept"] = np.asarray(cols)
        subsets[tau, "random"] = same_size_subset(cols, dims, seed=1000 * int(seed))
        subsets[tau, "uniform"] = uniform_subset(width, len(cols), seed=1000 * int(seed) + 500)
    r2 = reconstruction_r2(X_fit, X_eval, subsets, n_targets=n_targets, seed=seed)
    for (tau, kind), value in r2.items():
        rows.append(dict(key=tau, kind=kind, n_neurons=subsets[tau, kind].size, r2=value))
    return pd.DataFrame(rows)


def _add_time(seconds: dict, step: str, start: float) -> None:
    seconds[step] = seconds.get(step, 0.0) + time.perf_counter() - start


def _reference(X, y, classes, words, seed, kw, cache):
    """The probe on all neurons (with curves) and its control task, first seed.

    Returns the probe, the baseline row (``n_neurons``, accuracies, ``majority``,
    ``control``, ``selectivity`` on test) and its per-word correctness on test; the probe
    enters ``cache`` (when given) so the
    controls reuse it.
    """
    n = X["train"].shape[1]
    splits = [a for k in _SPLITS for a in (X[k], y[k])]
    r = train_probe(*splits, classes=classes, curves=True, seed=seed, **kw)
    correct = {k: r.predict(X[k]) == y[k] for k in ("dev", "test")}
    if cache is not None:
        cache[np.arange(n, dtype=np.int64).tobytes()] = (r, correct)
    ctrl = control_labels(words["train"], y["train"], words["dev"], words["test"], seed=seed)
    c = train_probe(
        *[a for k, lab in zip(_SPLITS, ctrl, strict=True) for a in (X[k], lab)],
        classes=classes, seed=seed, **kw,
    )  # fmt: skip
    row = dict(key="none", n_neurons=n, **r.accuracy, majority=r.majority["test"])
    row.update(epochs_run=r.n_epochs, converged=r.converged, control=c.accuracy["test"])
    row.update(stop=r.stopped_by, gradient=r.gradient)
    row["selectivity"] = row["test"] - row["control"]
    return r, pd.DataFrame([row]), correct["test"]


def _solver_rows(r, task, solvers, curves, name=None) -> None:
    """Append a probe's summary row and its per-split accuracy curves."""
    every = 10 if r.settings.get("solver", "adam") == "lbfgs" else 1
    name = name or r.settings.get("solver", "adam")
    solvers.append(
        dict(task=task, solver=name, **r.accuracy, converged=r.converged,
             stop=r.stopped_by,
             steps=r.n_epochs, gradient=r.gradient, rule=r.stopping_rule)
    )  # fmt: skip
    for split, values in r.curves.items():
        steps = [min(every * (i + 1), r.n_epochs) for i in range(len(values))]
        curves += [
            dict(task=task, solver=name, split=split, step=st, accuracy=v)
            for st, v in zip(steps, values, strict=True)
        ]


def transfer_probes(
    X: Mapping[str, np.ndarray],
    y: Mapping[str, np.ndarray],
    columns: Mapping,
    tests: Sequence[str],
    *,
    n_classes: int,
    words: Mapping[str, Sequence[str]] | None = None,
    **probe_kwargs,
) -> tuple[pd.DataFrame, dict]:
    """One probe per column set, trained once on ``"train"``, scored on every test set.

    Parameters
    ----------
    X, y : dict of str to ndarray
        Activations (n_words, n_neurons) and integer labels of ``"train"``, ``"dev"`` and
        every name in ``tests``.
    columns : mapping of key to ndarray of int
        Neurons each probe sees (``"none"``: all).
    tests : sequence of str
        The splits to score on (held-out English and the transfer sets).
    n_classes : int
    words : dict of str to sequence of str, optional
        With it, the probe on the first key also trains a control task (Hewitt & Liang),
        scored on every test set.
    **probe_kwargs
        :func:`lmsim.probe.train_probe` options.

    Returns
    -------
    table : DataFrame
        One row per (key, test set): ``n_neurons``, ``train``, ``dev``, ``test`` accuracy,
        ``majority`` (the training majority class on the test set), ``control`` (first key
        only, else NaN), ``epochs_run``, ``converged``, ``stop`` (which rule stopped the
        probe: ``"gradient"`` (pseudo-gradient at most ``gtol``), ``"objective"`` (a
        stalled objective), ``"max_iter"``, ...; Adam: ``"rule"`` or ``"max epochs"``) and
        ``gradient`` (the pseudo-gradient's largest entry at stop; NaN for Adam).
    correct : dict of (key, test set) to ndarray of bool
        Per-word correctness, for paired intervals over sentences.
    """
    classes = np.arange(int(n_classes))
    majority = np.bincount(y["train"], minlength=n_classes).argmax()
    rows, correct = [], {}
    for i, (key, cols) in enumerate(columns.items()):
        cols = np.asarray(cols, dtype=np.int64)
        r = train_probe(
            X["train"][:, cols], y["train"], X["dev"][:, cols], y["dev"], classes=classes,
            **probe_kwargs,
        )  # fmt: skip
        control = None
        if words is not None and i == 0:
            control = _control_probe(X, y, cols, classes, words, tests, probe_kwargs)
        for test in tests:
            correct[key, test] = r.predict(X[test][:, cols]) == y[test]
            rows.append(
                dict(
                    key=key, test_set=test, n_neurons=cols.size, train=r.accuracy["train"],
                    dev=r.accuracy["dev"], test=float(correct[key, test].mean()),
                    majority=float(np.mean(y[test] == majority)),
                    control=np.nan if control is None else control[test],
                    epochs_run=r.n_epochs, converged=r.converged, stop=r.stopped_by,
                    gradient=np.nan if r.gradient is None else r.gradient,
                )
            )  # fmt: skip
    return pd.DataFrame(rows), correct


def _control_probe(X, y, cols, classes, words, tests, probe_kwargs) -> dict[str, float]:
    """The control task's accuracy on every test set: one probe, trained once on one random
    label per word type of all sets (:func:`lmsim.probe.control_labels`), scored per set."""
    seed = probe_kwargs.get("control_seed", probe_kwargs.get("seed", 0))
    ctrl = control_labels(words["train"], y["train"], *[words[t] for t in tests], seed=seed)
    kw = {k: v for k, v in probe_kwargs.items() if k != "control_seed"}
    r = train_probe(X["train"][:, cols], ctrl[0], classes=classes, **kw)
    return {
        t: float(np.mean(r.predict(X[t][:, cols]) == c))
        for t, c in zip(tests, ctrl[1:], strict=True)
    }
