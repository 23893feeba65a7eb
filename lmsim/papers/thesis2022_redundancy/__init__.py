"""The 2022 thesis on distillation and redundancy: the chapter's protocol
(``book/thesis2022_redundancy``).

Probes, clustering and the corpora are general methods (:mod:`lmsim.probe`,
:mod:`lmsim.cluster`, :mod:`lmsim.data`); this package holds what the chapter does with them:
:mod:`~lmsim.papers.thesis2022_redundancy.redundancy` (probing sets, layer subsets, cluster
cuts, the probe sweep), :mod:`~lmsim.papers.thesis2022_redundancy.sweep` (one model's
redundancy sweep and the cross-lingual transfer probes),
:mod:`~lmsim.papers.thesis2022_redundancy.subset_controls` (kept neurons against random
subsets; equal accuracy), :mod:`~lmsim.papers.thesis2022_redundancy.cross_lingual` (the
cross-lingual page's controls: the thesis's kept share matched, a French in-language
reference, labels unseen in training) and :mod:`~lmsim.papers.thesis2022_redundancy.selection` (how the
representatives are picked, NeuroX's policy against others).

References
----------
"Distillation and redundancy in language models" (master's thesis, 2022), Ch. 3-5;
Dalvi et al. (2020), "Analyzing Redundancy in Pretrained Transformer Models", EMNLP;
``fdalvi/NeuroX``, ``fdalvi/analyzing-redundancy-in-pretrained-transformer-models``.
"""

from __future__ import annotations

from lmsim.papers.thesis2022_redundancy.cross_lingual import (
    MODEL_FACTS,
    TABLE_A3_MBERT,
    TABLE_B_EN_FR,
    cross_fitted_probe,
    joint_unit_bootstrap,
    matched_columns,
    seen_labels,
    share_clusters,
    thesis_kept_share,
    thesis_losses,
    unit_halves,
)
from lmsim.papers.thesis2022_redundancy.redundancy import (
    SUBSETS,
    THESIS_BERT_PER_LAYER,
    UDHR_PIPELINES,
    LabelledSentence,
    aligned_transfer_sets,
    cluster_cuts,
    depth_of_counts,
    depth_of_kept,
    fitting_sentences,
    label_ids,
    layer_subsets,
    parallel_articles,
    parallel_transfer_sets,
    probe_sweep,
    probing_sets,
    scipy_agreement,
    transfer_set,
)
from lmsim.papers.thesis2022_redundancy.selection import (
    POLICIES,
    THESIS_TABLE_51,
    carry_over_prefix,
    carry_over_selection,
    carry_over_table,
    expected_kept_per_layer,
    is_refinement,
    only_layer_bound,
    policy_table,
    prob_only_layer,
    rising_counts,
    select_representatives,
)
from lmsim.papers.thesis2022_redundancy.subset_controls import (
    best_on_dev,
    chosen_minus_reference,
    dev_choice_bootstrap,
    equal_accuracy,
    kept_minus_drawn,
    key_at_share,
    paired_bootstrap,
    same_size_subset,
    seed_pooled_difference,
    subset_controls,
    uniform_subset,
)
from lmsim.papers.thesis2022_redundancy.sweep import (
    model_redundancy,
    sentence_groups,
    transfer_probes,
)

__all__ = [
    "aligned_transfer_sets",
    "cross_fitted_probe",
    "joint_unit_bootstrap",
    "MODEL_FACTS",
    "matched_columns",
    "seen_labels",
    "share_clusters",
    "TABLE_A3_MBERT",
    "TABLE_B_EN_FR",
    "thesis_kept_share",
    "thesis_losses",
    "unit_halves",
    "best_on_dev",
    "chosen_minus_reference",
    "dev_choice_bootstrap",
    "kept_minus_drawn",
    "seed_pooled_difference",
    "uniform_subset",
    "cluster_cuts",
    "depth_of_counts",
    "depth_of_kept",
    "key_at_share",
    "THESIS_BERT_PER_LAYER",
    "equal_accuracy",
    "expected_kept_per_layer",
    "fitting_sentences",
    "is_refinement",
    "label_ids",
    "LabelledSentence",
    "layer_subsets",
    "parallel_articles",
    "parallel_transfer_sets",
    "model_redundancy",
    "only_layer_bound",
    "paired_bootstrap",
    "POLICIES",
    "carry_over_prefix",
    "carry_over_selection",
    "carry_over_table",
    "THESIS_TABLE_51",
    "policy_table",
    "prob_only_layer",
    "probe_sweep",
    "probing_sets",
    "rising_counts",
    "same_size_subset",
    "scipy_agreement",
    "select_representatives",
    "sentence_groups",
    "subset_controls",
    "SUBSETS",
    "transfer_probes",
    "transfer_set",
    "UDHR_PIPELINES",
]
