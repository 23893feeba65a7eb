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

:class:`MergeLab` holds the page's fine-tuned models (one per model and seed,
:func:`finetune_runs`) with their Grams and Fishers and merges them by any method, task
arithmetic and TIES included, their hyper-parameters chosen on validation
(:meth:`MergeLab.choose_on_validation`). :func:`paired_difference` gives every "merge A beats
B" statement a paired interval over the test examples with the fine-tuning seeds averaged,
and :func:`report_claims` records the paper's statements from those estimates.
:func:`weight_distances`, :func:`activation_similarity` and :func:`diagonal_match` are App.
D's permutation diagnostics (Figs. 7-8).

Modules: ``_setups`` (partitions, holdouts, domain setups), ``_scoring`` (the scorer,
selection on validation, Tables 2-3), ``_sweeps`` (the α sweep), ``_stats`` (published
Grams and Fishers), ``_lab`` (fine-tunes, statistics and merges of the page's models),
``_compare`` (paired intervals), ``_claims`` (the paper's statements), ``_permutation``
(App. D), ``_precision`` (float64 RegMean against the released code's float32
``torch.inverse`` path, :func:`precision_table`).

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 4.1-4.3, App. B (data sets and partitions).
"""

from lmsim.papers.jin2023_regmean._claims import (
    NOT_DOMAIN_CLAIMS,
    NOT_RUN,
    PAPER_CLAIMS,
    PREREQUISITES,
    PaperClaim,
    identity_checks,
    learning_failures,
    report_claims,
    seed_notes,
)
from lmsim.papers.jin2023_regmean._compare import (
    Fixed,
    constant_run,
    ensemble_run,
    learning_checks,
    majority_floors,
    majority_run,
    paired_difference,
    run_predictions,
    side_scores,
    snapshot,
    unit_run,
)
from lmsim.papers.jin2023_regmean._experiments import (
    all_domain_runs,
    difference_table,
    greedy_runs,
    merge_tuned,
    own_vs_others,
    pairwise_runs,
    table7_runs,
    validation_score,
)
from lmsim.papers.jin2023_regmean._lab import (
    BEYOND_METHODS,
    PAPER_METHODS,
    MergeLab,
    finetune_runs,
    gram_megabytes,
    initial_model,
    seed_name,
    settings_for,
)
from lmsim.papers.jin2023_regmean._permutation import (
    activation_similarity,
    diagonal_match,
    unit_activations,
    weight_distances,
)
from lmsim.papers.jin2023_regmean._precision import (
    inverse_float32_regmean,
    precision_table,
    relative_difference,
)
from lmsim.papers.jin2023_regmean._scoring import (
    Scorer,
    as_texts,
    best_on_validation,
    domain_tables,
    greedy_order,
    input_lengths,
    mean_logits,
    relative_change,
    validation_scores,
)
from lmsim.papers.jin2023_regmean._setups import (
    DomainSetup,
    NoniidSplit,
    cap,
    domain_setup,
    holdout_split,
    noniid_split,
    ood_task,
    pool,
    with_metric,
)
from lmsim.papers.jin2023_regmean._stats import published_stats
from lmsim.papers.jin2023_regmean._sweeps import alpha_one_check, pairwise_alpha_sweep

__all__ = [
    "activation_similarity",
    "all_domain_runs",
    "alpha_one_check",
    "as_texts",
    "best_on_validation",
    "BEYOND_METHODS",
    "cap",
    "constant_run",
    "diagonal_match",
    "difference_table",
    "domain_setup",
    "domain_tables",
    "DomainSetup",
    "ensemble_run",
    "finetune_runs",
    "Fixed",
    "gram_megabytes",
    "greedy_order",
    "greedy_runs",
    "holdout_split",
    "ood_task",
    "identity_checks",
    "initial_model",
    "inverse_float32_regmean",
    "mean_logits",
    "merge_tuned",
    "MergeLab",
    "noniid_split",
    "NoniidSplit",
    "NOT_RUN",
    "own_vs_others",
    "paired_difference",
    "pairwise_alpha_sweep",
    "pairwise_runs",
    "PAPER_CLAIMS",
    "PAPER_METHODS",
    "PaperClaim",
    "pool",
    "precision_table",
    "published_stats",
    "relative_change",
    "relative_difference",
    "report_claims",
    "run_predictions",
    "Scorer",
    "seed_name",
    "seed_notes",
    "settings_for",
    "side_scores",
    "snapshot",
    "table7_runs",
    "unit_activations",
    "unit_run",
    "validation_score",
    "validation_scores",
    "weight_distances",
    "input_lengths",
    "PREREQUISITES",
    "NOT_DOMAIN_CLAIMS",
    "with_metric",
    "majority_run",
    "majority_floors",
    "learning_failures",
    "learning_checks",
]
