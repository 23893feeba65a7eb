"""The merging chapter's experimental setups (Jin et al. 2023, Sec. 4 and App. B).

The RegMean page runs three setups on whatever data its profile names, and this module
turns the page's parameters into the labelled sets each setup trains and scores on:

- **non-i.i.d. partitions** of one task (:func:`noniid_split`): two partitions of a task's
  training split skewed towards a random key class, plus their pooled ("joint") data;
- **different domains of one task** (:func:`domain_setup`): in-domain :class:`lmsim.tasks.Task`
  s sharing one label space, and out-of-domain ones with a validation part (the greedy
  merge's order) and a test part. A setup is either named sets (the paper: five emotion
  collections, six OntoNotes genres) or the keyword domains of one set (offline profiles);
- **different tasks**: each task's own model, merged pairwise with the heads left out.

:class:`Scorer` scores models on those tasks with each task's metric, caching the logits
of named (individual) models, and ensembles them by the mean of their logits.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 4.1-4.3, App. B (data sets and partitions).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from lmsim._cache import cache_dir
from lmsim._io import open_entry, write_entry_file
from lmsim.data import keyword_domains, load_task, noniid_partitions
from lmsim.finetune import predict_logits
from lmsim.merge import load_fishers, load_grams, save_fishers, save_grams
from lmsim.tasks import Task, map_task_entity_types, score

__all__ = [
    "DomainSetup",
    "NoniidSplit",
    "Scorer",
    "as_texts",
    "cap",
    "domain_tables",
    "domain_setup",
    "holdout_split",
    "mean_logits",
    "noniid_split",
    "pool",
    "published_stats",
    "relative_change",
]


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
    """

    name: str
    domains: dict[str, Task]
    ood: dict[str, Task]
    type_map: dict[str, str] | None = None
    notes: dict = field(default_factory=dict)

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


def _keyword_setup(name: str, spec: Mapping, n_train, n_test, seed) -> DomainSetup:
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

    def part(p, domain, n):
        return cap(task.subset(p, [i for i, d in enumerate(domain_of[p]) if d == domain]), n)

    domains, ood = {}, {}
    for d in [*keywords, other]:
        test = part("test", d, n_test)
        if d in ood_names:  # its training rows are never trained on: they validate
            val = part("train", d, n_test)
            ood[d] = task.with_parts(train=val, validation=val, test=test)
        else:
            domains[d] = task.with_parts(train=part("train", d, n_train), test=test)
    return DomainSetup(name, domains, ood, None, {"source": spec["set"]})


def _named_setup(name: str, spec: Mapping, n_train, n_test, seed) -> DomainSetup:
    """Domains that are separate labelled sets (the paper's emotion and NER collections)."""
    domains, relabel = {}, spec.get("relabel")
    for d, source in dict(spec["domains"]).items():
        task = load_task(source, seed=seed)
        if relabel:  # the authors' NER setup: train and score on the OOD sets' types only
            task = map_task_entity_types(task, relabel)
        domains[d] = task.with_parts(train=cap(task.train, n_train), test=cap(task.test, n_test))
    ood = {}
    for d, source in dict(spec.get("ood", {})).items():
        task = holdout_split(load_task(source, seed=seed), seed=seed)
        ood[d] = task.with_parts(
            validation=cap(task.validation, n_test), test=cap(task.test, n_test)
        )
    first = next(iter(domains.values()))
    for d, task in domains.items():
        if (task.kind, task.label_names) != (first.kind, first.label_names):
            raise ValueError(
                f"domain setup {name!r}: domain {d!r} is a {task.kind} task over "
                f"{list(task.label_names)[:6]}..., the first domain a {first.kind} task over "
                f"{list(first.label_names)[:6]}...; merged domain models need one label space"
            )
    return DomainSetup(name, domains, ood, spec.get("type_map"), {"sources": dict(spec["domains"])})


def domain_setup(
    name: str,
    spec: Mapping,
    *,
    n_train: int | None = None,
    n_test: int | None = None,
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
        space; an OOD set without a validation part gives half of its test part to one
        (:func:`holdout_split`). ``type_map`` renames the models' entity types into an OOD
        set's when it is scored (the default: models keep every type of their data);
        ``"relabel": {type: type}`` instead renames the domains' own tags before training
        (:func:`lmsim.tasks.map_task_entity_types`; the authors' released code trains the
        OntoNotes models on PER, ORG and LOC only: ``lmsim.tasks.ONTONOTES_TO_CONLL``).
    n_train, n_test : int or None
        Caps on every domain's training examples and on every test (and OOD validation)
        part; None keeps all.
    seed : int

    Returns
    -------
    DomainSetup
    """
    if "keywords" in spec:
        setup = _keyword_setup(name, spec, n_train, n_test, seed)
    elif "domains" in spec:
        setup = _named_setup(name, spec, n_train, n_test, seed)
    else:
        raise ValueError(
            f"domain setup {name!r} must have `keywords` (with `set`) or `domains`, got keys "
            f"{sorted(spec)}"
        )
    if len(setup.domains) < 2:
        raise ValueError(f"domain setup {name!r} has {len(setup.domains)} in-domain set(s); need 2")
    empty = [d for d, t in setup.domains.items() if not t.train[1] or not t.test[1]]
    if empty:
        raise ValueError(
            f"domain setup {name!r}: domains {empty} have no training or test examples; "
            "choose other keywords or sets"
        )
    return setup


def relative_change(merged: float, own: float) -> float:
    """``100 (M(f_M) − M(f_i)) / |M(f_i)|`` in percent (Fig. 3 and 4; negative: a drop)."""
    return float("nan") if own == 0 else 100.0 * (merged - own) / abs(own)


def mean_logits(logits: Sequence) -> np.ndarray | list[np.ndarray]:
    """Mean of several models' logits: arrays (n, L), or per-example lists for token tasks."""
    if isinstance(logits[0], np.ndarray):
        return np.mean(np.stack(logits), axis=0)
    return [np.mean(np.stack(rows), axis=0) for rows in zip(*logits)]


class Scorer:
    """Scores models on tasks, caching the logits of named models.

    Parameters
    ----------
    tokenizer
        Shared by every model (copies of one base model).
    max_length, batch_size : int
        As in :func:`lmsim.finetune.predict_logits`.
    """

    def __init__(self, tokenizer, max_length: int, batch_size: int = 64):
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self._cache: dict[tuple[str, int, str], tuple[Task, object]] = {}

    def logits(self, model, task: Task, part: str = "test"):
        """Logits of ``model`` on ``task``'s ``part`` (not cached)."""
        inputs = getattr(task, part)[0]
        return predict_logits(
            model,
            self.tokenizer,
            inputs,
            max_length=self.max_length,
            batch_size=self.batch_size,
            kind=task.kind,
        )

    def named_logits(self, name: str, model, task: Task, part: str = "test"):
        """Logits of the model called ``name`` (cached by name, task and part)."""
        # Keyed by the task object (tasks of one source share a name), which the cache holds
        # beside the logits so that its id cannot be reused by another task.
        key = (name, id(task), part)
        if key not in self._cache:
            self._cache[key] = (task, self.logits(model, task, part))
        return self._cache[key][1]

    def score(self, model, task: Task, part: str = "test", type_map=None, *, name=None) -> float:
        """``task.metric`` of ``model`` on ``part`` (logits cached when ``name`` is given).

        A token model's tags are decoded with its own label names (``config.id2label``), so an
        out-of-domain set with other tags is scored after ``type_map`` renames the types.
        """
        logits = (
            self.named_logits(name, model, task, part) if name else self.logits(model, task, part)
        )
        return score(task, logits, part, type_map=type_map, label_names=_tags(model, task))

    def ensemble(self, named: Mapping, task: Task, part: str = "test", type_map=None) -> float:
        """Score of the mean of the named models' logits (the ensemble baseline, Sec. 4.1)."""
        logits = [self.named_logits(n, m, task, part) for n, m in named.items()]
        tags = _tags(next(iter(named.values())), task)
        return score(task, mean_logits(logits), part, type_map=type_map, label_names=tags)


def _tags(model, task: Task) -> list[str] | None:
    """A token model's label names in output order (None for other tasks)."""
    if task.kind != "token":
        return None
    id2label = model.config.id2label
    return [id2label[i] for i in range(len(id2label))]


def as_texts(inputs: Sequence) -> list[str]:
    """Plain texts of any task's inputs: pairs and word lists joined by spaces (for CKA)."""
    return [x if isinstance(x, str) else " ".join(map(str, x)) for x in inputs]


def domain_tables(
    setup: DomainSetup,
    individuals: Mapping[str, object],
    merged: Mapping[str, object],
    mtl,
    scorer: Scorer,
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Tables 2 and 3: all domain models merged, in-domain and out-of-domain.

    Parameters
    ----------
    setup : DomainSetup
    individuals : dict of domain to model
        Each domain's own model, in ``setup.domains`` order (named ``f"{setup.name}-{domain}"``
        in the logits cache).
    merged : dict of str to model
        The merged models by method label ("Simple", "Fisher", "RegMean").
    mtl : model
        One model trained on every domain's data.
    scorer : Scorer

    Returns
    -------
    in_domain : dict of str to float
        Mean score over the in-domain test sets: "Avg. f1..N" and "Best f1..N" (each
        individual scored on every domain), "Ensemble", each merge, "Domain-specific" (each
        domain's model on its own domain) and "MTL" (Table 2's rows).
    ood : dict of OOD set to dict of str to float
        The same rows on each out-of-domain test set, less "Domain-specific" (Table 3).
    """
    named = {f"{setup.name}-{d}": m for d, m in individuals.items()}

    def on(task: Task, type_map=None) -> dict:
        each = [scorer.score(m, task, type_map=type_map, name=n) for n, m in named.items()]
        row = {
            "each": np.asarray(each),
            "Ensemble": scorer.ensemble(named, task, type_map=type_map),
        }
        row.update({label: scorer.score(m, task, type_map=type_map) for label, m in merged.items()})
        row["MTL"] = scorer.score(mtl, task, type_map=type_map, name=f"{setup.name}-joint")
        return row

    def summary(rows: list[dict]) -> dict[str, float]:
        each = np.mean([r["each"] for r in rows], axis=0)  # each individual, over the sets
        out = {"Avg. f1..N": float(each.mean()), "Best f1..N": float(each.max())}
        for key in ("Ensemble", *merged):
            out[key] = float(np.mean([r[key] for r in rows]))
        return out

    per_domain = [on(task) for task in setup.domains.values()]
    table2 = summary(per_domain)
    table2["Domain-specific"] = float(np.mean([r["each"][i] for i, r in enumerate(per_domain)]))
    table2["MTL"] = float(np.mean([r["MTL"] for r in per_domain]))
    table3 = {}
    for o, task in setup.ood.items():
        row = on(task, setup.type_map)
        table3[o] = {**summary([row]), "MTL": float(row["MTL"])}
    return table2, table3


_STATS = {"grams": (save_grams, load_grams), "fishers": (save_fishers, load_fishers)}


def published_stats(
    what: str,
    key: str,
    compute: Callable[[], Mapping],
    metadata: Mapping | None = None,
    *,
    root: str | os.PathLike | None = None,
) -> Mapping:
    """A model's Grams or Fishers as its owner would publish them: saved once, read lazily.

    The statistics are computed on the first call and written as safetensors (no code runs
    when they are read) under ``root`` (default: the lmsim cache's ``regmean-stats/``), named
    by ``key``; every later call reads them back. They come back as a lazy mapping that reads
    one tensor at a time, so merging many base-size models holds one layer's statistics in
    memory, not every model's (:func:`lmsim.merge.load_grams`).

    Parameters
    ----------
    what : {"grams", "fishers"}
    key : str
        Names the file; it must determine the statistics (e.g. the fine-tuned model's
        content-keyed folder name plus the number of batches, the length and the seed).
    compute : callable
        Returns the statistics (``{name: tensor}``) when they are not saved yet.
    metadata : dict, optional
        Saved beside them (:func:`lmsim.merge.load_metadata`).
    root : path, optional

    Returns
    -------
    Mapping of str to Tensor
        Read on access; shapes and finiteness are checked.
    """
    if what not in _STATS:
        raise ValueError(f"`what` must be 'grams' or 'fishers', got {what!r}")
    save, load = _STATS[what]
    folder = Path(root) if root is not None else cache_dir("regmean-stats")
    path = folder / f"{key}.{what}.safetensors"

    def legacy(file: Path) -> dict | None:
        """A file saved before entry markers: lmsim's when its header says so; whole when
        every tensor reads back finite (None: not an lmsim file, never touched)."""
        from lmsim.merge import load_metadata

        try:
            load_metadata(file)  # parses the header
            load(file, lazy=True)  # its kind matches
        except (OSError, ValueError):
            return None
        load(file)  # every tensor: shapes and finiteness (raises ValueError naming it)
        return {}

    if open_entry(path, "computing them again", legacy=legacy, stacklevel=3):
        return load(path, lazy=True)
    stats = compute()
    for name, value in stats.items():
        t = torch.as_tensor(value)
        if not bool(torch.isfinite(t).all()):
            raise ValueError(
                f"the {what} computed for {key!r} hold NaN or Inf in {name!r}; nothing was "
                "saved (a diverged model or overflowing activations: check the model)"
            )
    # The marker first, then a complete file or none, then its size and sha256.
    write_entry_file(path, lambda tmp: save(tmp, stats, metadata))
    return load(path, lazy=True)
