"""The merging chapter's data: non-i.i.d. partitions, holdouts and domain setups.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 4.1-4.3, App. B (data sets and partitions).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lmsim.data import keyword_domains, load_task, noniid_partitions
from lmsim.tasks import Task, map_task_entity_types


def cap(split: tuple[Sequence, Sequence], n: int | None) -> tuple[list, list]:
    """The first ``n`` examples of an (inputs, labels) split (all when ``n`` is None)."""
    inputs, labels = split
    stop = len(labels) if n is None else int(n)
    return list(inputs[:stop]), list(labels[:stop])


def pool(*splits: tuple[Sequence, Sequence]) -> tuple[list, list]:
    """(inputs, labels) of several splits concatenated in order."""
    return [x for s in splits for x in s[0]], [y for s in splits for y in s[1]]


@dataclass(frozen=True)
class NoniidSplit:
    """Two non-i.i.d. partitions of a training split (see :func:`noniid_split`)."""

    a: tuple[list, list]
    b: tuple[list, list]
    key: str
    key_share_a: float
    key_share_b: float


def noniid_split(task: Task, n_per_partition: int, seed: int = 0) -> NoniidSplit:
    """Two label-skewed partitions of ``task``'s training split (App. B).

    Parameters
    ----------
    task : Task
        A single-label or regression task. Regression labels are binned by rounding (STS-B's
        0-5 similarity becomes six classes) only to choose the partitions.
    n_per_partition : int
        Examples per partition (the paper: 1,000).
    seed : int

    Returns
    -------
    NoniidSplit
        The partitions ``a`` and ``b`` as (inputs, labels) (:func:`lmsim.data.
        noniid_partitions`), the key class's name, and its share of each partition.
    """
    if task.kind not in ("single_label", "regression"):
        raise ValueError(
            f"non-i.i.d. partitions need a single-label or regression task; {task.name!r} is "
            f"{task.kind!r}"
        )
    keys = np.asarray(task.train[1])
    if task.kind == "regression":
        keys = np.rint(keys.astype(float)).astype(int)
    a, b, key = noniid_partitions(keys, n_per_partition, seed=seed)
    name = task.label_names[key] if task.kind == "single_label" else f"score ≈ {key}"
    return NoniidSplit(
        task.subset("train", a),
        task.subset("train", b),
        name,
        float(np.mean(keys[a] == key)),
        float(np.mean(keys[b] == key)),
    )


def holdout_split(task: Task, fraction: float = 0.5, seed: int = 0) -> Task:
    """``task`` with a validation part: its own, else a seeded ``fraction`` of its test part.

    The out-of-domain sets' validation parts order the greedy merge (Fig. 6); the rest of the
    test part scores it, so the order is not chosen on the examples it is scored on.
    """
    if task.validation is not None:
        return task
    n = len(task.test[1])
    if n < 2:
        raise ValueError(f"{task.name!r} has {n} test examples; a holdout split needs at least 2")
    order = np.random.default_rng(seed).permutation(n)
    n_val = min(max(1, int(round(fraction * n))), n - 1)
    val, test = sorted(order[:n_val].tolist()), sorted(order[n_val:].tolist())
    return task.with_parts(validation=task.subset("test", val), test=task.subset("test", test))


def ood_task(task: Task, n_test: int | None, seed: int = 0) -> Task:
    """An out-of-domain set with a validation part disjoint from the test part it is scored on.

    The validation part (which orders the greedy merge, Fig. 6, and picks Table 7's pair) is
    the set's own validation split, else its training split (an out-of-domain set is never
    trained on), else a seeded half of its test split (:func:`holdout_split`); each part is
    capped at ``n_test``. The test part is never a validation example: nothing chosen on the
    validation part is scored on it.
    """
    if task.validation is None and task.train is not None and len(task.train[1]) > 0:
        task = task.with_parts(validation=task.train)
    task = holdout_split(task, seed=seed)
    return task.with_parts(validation=cap(task.validation, n_test), test=cap(task.test, n_test))


@dataclass(frozen=True)
class DomainSetup:
    """Models trained on different domains of one task (Sec. 4.3).

    Attributes
    ----------
    name : str
    domains : dict of str to Task
        In-domain tasks (training and test parts capped), one label space.
    ood : dict of str to Task
        Out-of-domain tasks, each with a validation and a test part.
    type_map : dict of str to str or None
        Entity types of the domains' tags renamed to the OOD sets' (token tasks only).
    ood_whole : dict of str to Task
        The out-of-domain sets as scored: each set's test part, never its validation part
        (:func:`ood_task` takes that from the set's validation or training split, else a
        disjoint half of its test split). Table 3, Table 7 and the greedy merge (Fig. 6) are
        scored on these; what they choose is chosen on ``ood``'s validation parts. (It once
        pooled both halves of a split test set, so choices made on the validation half were
        scored on it too.)
    """

    name: str
    domains: dict[str, Task]
    ood: dict[str, Task]
    type_map: dict[str, str] | None = None
    notes: dict = field(default_factory=dict)
    ood_whole: dict[str, Task] = field(default_factory=dict)

    @property
    def first(self) -> Task:
        return next(iter(self.domains.values()))

    def pooled(self) -> Task:
        """One task holding every domain's training and test examples (the MTL model's)."""
        tasks = list(self.domains.values())
        return dataclasses.replace(
            self.first,
            train=pool(*(t.train for t in tasks)),
            test=pool(*(t.test for t in tasks)),
            validation=None,
            scored_labels=None,
        )


def _keyword_setup(name: str, spec: Mapping, n_train, n_test, n_val, seed) -> DomainSetup:
    """Domains of one set by the words its texts use (the offline profiles)."""
    task = load_task(spec["set"], seed=seed)
    keywords, other = dict(spec["keywords"]), spec.get("other", "other")
    ood_names = list(spec.get("ood", []))
    unknown = sorted(set(ood_names) - {*keywords, other})
    if unknown:
        raise ValueError(
            f"domain setup {name!r}: `ood` names {unknown}, which are not domains "
            f"({[*keywords, other]})"
        )
    domain_of = {
        p: keyword_domains(getattr(task, p)[0], keywords, other) for p in ("train", "test")
    }

    def rows(p, domain):
        return [i for i, d in enumerate(domain_of[p]) if d == domain]

    def part(p, domain, n):
        return cap(task.subset(p, rows(p, domain)), n)

    domains, ood, whole = {}, {}, {}
    for d in [*keywords, other]:
        test = part("test", d, n_test)
        if d in ood_names:  # its training rows are never trained on: they validate
            val = part("train", d, n_test)
            ood[d] = task.with_parts(train=val, validation=val, test=test)
            whole[d] = ood[d]
        else:
            domains[d] = task.with_parts(train=part("train", d, n_train), test=test)
            if n_val is not None:  # the domain's training rows past the trained ones
                held = rows("train", d)[n_train : n_train + n_val]
                domains[d] = domains[d].with_parts(validation=task.subset("train", held))
    return DomainSetup(name, domains, ood, None, {"source": spec["set"]}, whole)


def _named_setup(name: str, spec: Mapping, n_train, n_test, n_val, seed) -> DomainSetup:
    """Domains that are separate labelled sets (the paper's emotion and NER collections)."""
    domains, relabel = {}, spec.get("relabel")
    for d, source in dict(spec["domains"]).items():
        task = load_task(source, seed=seed)
        if relabel:  # the authors' NER setup: train and score on the OOD sets' types only
            task = map_task_entity_types(task, relabel)
        val = None
        if n_val is not None:  # its own validation split, else training rows not trained on
            val = cap(task.validation, n_val) if task.validation is not None else None
            if val is None:  # with every row trained on (n_train None) none is left
                start = len(task.train[1]) if n_train is None else int(n_train)
                val = (task.train[0][start : start + n_val], task.train[1][start : start + n_val])
        domains[d] = task.with_parts(
            train=cap(task.train, n_train), validation=val, test=cap(task.test, n_test)
        )
    ood = {d: ood_task(load_task(source, seed=seed), n_test, seed)
           for d, source in dict(spec.get("ood", {})).items()}  # fmt: skip
    first = next(iter(domains.values()))
    for d, task in domains.items():
        if (task.kind, task.label_names) != (first.kind, first.label_names):
            raise ValueError(
                f"domain setup {name!r}: domain {d!r} is a {task.kind} task over "
                f"{list(task.label_names)[:6]}..., the first domain a {first.kind} task over "
                f"{list(first.label_names)[:6]}...; merged domain models need one label space"
            )
    sources = {"sources": dict(spec["domains"])}
    return DomainSetup(name, domains, ood, spec.get("type_map"), sources, dict(ood))


def with_metric(setup: DomainSetup, metric: str) -> DomainSetup:
    """The setup with every in-domain and out-of-domain set scored by ``metric``.

    Parameters
    ----------
    setup : DomainSetup
    metric : str
        One of :data:`lmsim.tasks.METRICS` that scores the sets' kind (checked by
        :class:`lmsim.tasks.Task`).

    Returns
    -------
    DomainSetup
        The same data, parts and names; only ``metric`` differs.
    """

    def swap(tasks):
        return {k: dataclasses.replace(t, metric=metric) for k, t in tasks.items()}

    return dataclasses.replace(
        setup, domains=swap(setup.domains), ood=swap(setup.ood), ood_whole=swap(setup.ood_whole)
    )


def domain_setup(
    name: str,
    spec: Mapping,
    *,
    n_train: int | None = None,
    n_test: int | None = None,
    n_validation: int | None = None,
    seed: int = 0,
) -> DomainSetup:
    """Build a "different domains of one task" setup from a page parameter.

    Parameters
    ----------
    name : str
        The setup's name (models are named ``f"{name}-{domain}"``).
    spec : dict
        Either ``{"set": <load_task name>, "keywords": {domain: [words]}, "other": str,
        "ood": [domain, ...]}`` — the domains of one set by keyword
        (:func:`lmsim.data.keyword_domains`); an OOD domain's training rows become its
        validation part — or ``{"domains": {domain: <load_task name>}, "ood": {name:
        <load_task name>}, "type_map": {type: type}}`` — separate sets sharing one label
        space; an OOD set's validation part is its validation split, else its training
        split (never trained on), else half of its test split (:func:`ood_task`). ``type_map`` renames the models' entity types into an OOD
        set's when it is scored (the default: models keep every type of their data);
        ``"relabel": {type: type}`` instead renames the domains' own tags before training
        (:func:`lmsim.tasks.map_task_entity_types`; the authors' released code trains the
        OntoNotes models on PER, ORG and LOC only: ``lmsim.tasks.ONTONOTES_TO_CONLL``).
        Either form may add ``"metric": <name>`` (one of :data:`lmsim.tasks.METRICS` for the
        sets' kind) to score every set of the setup by it instead of its own
        (:func:`with_metric`; ``"balanced_accuracy"`` for sentiment sets whose majority class
        holds 60-80 % of the examples).
    n_train, n_test : int or None
        Caps on every domain's training examples and on every test (and OOD validation)
        part; None keeps all.
    n_validation : int, optional
        Give every in-domain task a validation part of (at most) this many examples, on
        which the "best individual" is chosen (:func:`best_on_validation`): the set's own
        validation split where it has one, else its training rows after the first
        ``n_train`` (which then must be given), never trained on. None: no validation part.
    seed : int

    Returns
    -------
    DomainSetup
    """
    if n_validation is not None:
        if not (isinstance(n_validation, int) and n_validation >= 1):
            raise ValueError(f"`n_validation` must be a positive int or None, got {n_validation!r}")
        if n_train is None and "keywords" in spec:
            raise ValueError(
                "`n_validation` takes the validation rows from the training rows past `n_train`; "
                "pass `n_train` so that they are not trained on"
            )
    if "keywords" in spec:
        setup = _keyword_setup(name, spec, n_train, n_test, n_validation, seed)
    elif "domains" in spec:
        setup = _named_setup(name, spec, n_train, n_test, n_validation, seed)
    else:
        raise ValueError(
            f"domain setup {name!r} must have `keywords` (with `set`) or `domains`, got keys "
            f"{sorted(spec)}"
        )
    if spec.get("metric"):
        setup = with_metric(setup, spec["metric"])
    if len(setup.domains) < 2:
        raise ValueError(f"domain setup {name!r} has {len(setup.domains)} in-domain set(s); need 2")
    empty = [d for d, t in setup.domains.items() if not t.train[1] or not t.test[1]]
    if empty:
        raise ValueError(
            f"domain setup {name!r}: domains {empty} have no training or test examples; "
            "choose other keywords or sets"
        )
    if n_validation is not None:
        short = [d for d, t in setup.domains.items() if t.validation is None or not t.validation[1]]
        if short:
            raise ValueError(
                f"domain setup {name!r}: domains {short} have no validation examples (no "
                "validation split, and no training rows past `n_train`); lower `n_train`"
            )
    return setup
