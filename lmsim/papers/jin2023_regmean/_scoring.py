"""Scoring the merging chapter's models: the logits cache, ensembles, selection on
validation and Tables 2-3.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 4.1-4.3, App. B (data sets and partitions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lmsim.finetune import predict_logits
from lmsim.papers.jin2023_regmean._setups import DomainSetup
from lmsim.tasks import Task, score


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


def validation_scores(
    scorer: Scorer, named: Mapping[str, object], tasks: Sequence[Task], type_map=None
) -> dict[str, float]:
    """Each named model's mean score over the validation parts of ``tasks``.

    Parameters
    ----------
    scorer : Scorer
    named : dict of str to model
        Models by name (their logits are cached under it).
    tasks : sequence of Task
        Each with a validation part (in-domain sets from ``domain_setup(n_validation=...)``,
        or out-of-domain sets).
    type_map : dict, optional
        As in :meth:`Scorer.score`.

    Returns
    -------
    dict of str to float, in the order of ``named``
    """
    tasks = list(tasks)
    missing = [t.name for t in tasks if t.validation is None or not t.validation[1]]
    if not tasks or missing:
        raise ValueError(
            f"selection on validation needs tasks with validation parts; {missing or 'none'} "
            "have none (build the setup with domain_setup(..., n_validation=...))"
        )
    return {
        n: float(np.mean([scorer.score(m, t, "validation", type_map, name=n) for t in tasks]))
        for n, m in named.items()
    }


def best_on_validation(
    scorer: Scorer, named: Mapping[str, object], tasks: Sequence[Task], type_map=None
) -> str:
    """The name of the model with the best mean validation score ("Best f1..N", Sec. 4.1:
    "as determined by using the validation set"); the first listed wins a tie."""
    scores = validation_scores(scorer, named, tasks, type_map)
    return max(scores, key=lambda n: (scores[n], -list(scores).index(n)))


def greedy_order(
    scorer: Scorer, named: Mapping[str, object], tasks: Sequence[Task], type_map=None
) -> list[str]:
    """Model names by decreasing mean validation score: the order of the greedy merge (Sec.
    4.3, Fig. 6: "their OOD performance on the validation sets"); ties keep ``named``'s order.

    ``greedy_order(...)[0]`` is :func:`best_on_validation`, the dashed line of Fig. 6.
    """
    scores = validation_scores(scorer, named, tasks, type_map)
    return sorted(scores, key=lambda n: -scores[n])  # sorted is stable: ties in given order


def domain_tables(
    setup: DomainSetup,
    individuals: Mapping[str, object],
    merged: Mapping[str, object],
    mtl,
    scorer: Scorer,
    *,
    best_on: str = "test",
    ood_part: str = "test",
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
    best_on : {"test", "validation"}, default="test"
        How "Best f1..N" is chosen. ``"validation"``: the individual with the best mean
        score over the in-domain validation parts (:func:`best_on_validation`; the paper's
        rule), the same model in both tables. ``"test"``: the best on the very sets the
        table reports (per out-of-domain set in Table 3), an oracle kept for comparison.
    ood_part : {"test", "whole"}, default="test"
        Table 3 on each OOD set's test part, or on ``setup.ood_whole`` (the part scored
        everywhere else: the same test part, never a validation example, since
        :func:`~lmsim.papers.jin2023_regmean.ood_task` draws the validation part apart).

    Returns
    -------
    in_domain : dict of str to float
        Mean score over the in-domain test sets: "Avg. f1..N" and "Best f1..N", "Ensemble",
        each merge, "Domain-specific" (each domain's model on its own domain) and "MTL"
        (Table 2's rows).
    ood : dict of OOD set to dict of str to float
        The same rows on each out-of-domain set, less "Domain-specific" (Table 3).
    """
    if best_on not in ("test", "validation"):
        raise ValueError(f"`best_on` must be 'test' or 'validation', got {best_on!r}")
    if ood_part not in ("test", "whole"):
        raise ValueError(f"`ood_part` must be 'test' or 'whole', got {ood_part!r}")
    named = {f"{setup.name}-{d}": m for d, m in individuals.items()}
    best = None
    if best_on == "validation":
        best = list(named).index(best_on_validation(scorer, named, setup.domains.values()))

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
        chosen = each.max() if best is None else each[best]
        out = {"Avg. f1..N": float(each.mean()), "Best f1..N": float(chosen)}
        for key in ("Ensemble", *merged):
            out[key] = float(np.mean([r[key] for r in rows]))
        return out

    per_domain = [on(task) for task in setup.domains.values()]
    table2 = summary(per_domain)
    table2["Domain-specific"] = float(np.mean([r["each"][i] for i, r in enumerate(per_domain)]))
    table2["MTL"] = float(np.mean([r["MTL"] for r in per_domain]))
    table3 = {}
    for o, task in setup.ood.items():
        if ood_part == "whole":
            task = setup.ood_whole.get(o, task)
        row = on(task, setup.type_map)
        table3[o] = {**summary([row]), "MTL": float(row["MTL"])}
    return table2, table3


def input_lengths(tokenizer, tasks: Mapping[str, Task], max_length: int, part: str = "train"):
    """How much of each set's inputs the models see: median words and tokens, share cut.

    Parameters
    ----------
    tokenizer
        The models' tokenizer (special tokens counted, as the models see them).
    tasks : dict of str to Task
        Sequence tasks (a text or a text pair per example) by name.
    max_length : int
        The page's cut (inputs are truncated to it).
    part : str

    Returns
    -------
    DataFrame indexed by set
        ``examples``, ``median words``, ``median tokens`` (untruncated) and ``cut (%)``:
        the share of inputs longer than ``max_length`` tokens.
    """
    import pandas as pd

    rows = {}
    for name, task in tasks.items():
        inputs = list(task.subset(part)[0])
        texts = [x if isinstance(x, str) else " ".join(x) for x in inputs]
        tokens = np.array(
            [len(tokenizer(t, truncation=False, verbose=False)["input_ids"]) for t in texts]
        )  # untruncated on purpose: no "longer than the maximum" warning
        rows[name] = {
            "examples": len(texts),
            "median words": float(np.median([len(t.split()) for t in texts])),
            "median tokens": float(np.median(tokens)),
            "cut (%)": 100 * float(np.mean(tokens > max_length)),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("set")
