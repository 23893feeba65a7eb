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
of named (individual) models, and ensembles them by the mean of their logits. Every "best"
is chosen on validation parts (:func:`best_on_validation`, :func:`greedy_order`;
``domain_tables(best_on="validation")``), never on the examples a table reports.
:func:`pairwise_alpha_sweep` and :func:`alpha_one_check` sweep RegMean's α on model pairs
(Fig. 5a).

Modules: ``_setups`` (partitions, holdouts, domain setups), ``_scoring`` (the scorer,
selection on validation, Tables 2-3), ``_sweeps`` (the α sweep), ``_stats`` (published
Grams and Fishers).

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 4.1-4.3, App. B (data sets and partitions).
"""

from lmsim.merge_setups._scoring import (
    Scorer,
    as_texts,
    best_on_validation,
    domain_tables,
    greedy_order,
    mean_logits,
    relative_change,
    validation_scores,
)
from lmsim.merge_setups._setups import (
    DomainSetup,
    NoniidSplit,
    cap,
    domain_setup,
    holdout_split,
    noniid_split,
    pool,
)
from lmsim.merge_setups._stats import published_stats
from lmsim.merge_setups._sweeps import alpha_one_check, pairwise_alpha_sweep

__all__ = [
    "alpha_one_check",
    "best_on_validation",
    "greedy_order",
    "pairwise_alpha_sweep",
    "validation_scores",
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
