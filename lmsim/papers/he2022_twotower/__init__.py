"""He & Toyoizumi (2022), two-tower LM: the chapter's protocol (``book/he2022_twotower``).

The models, their training and the preference scores are general methods in
:mod:`lmsim.twotower`; this package holds what the chapter's page does with them:
:mod:`~lmsim.papers.he2022_twotower.paper` (the paper's numbers and configurations, the
authors' code's differences), :mod:`~lmsim.papers.he2022_twotower.compare` (correlations
between runs and their permutation null), :mod:`~lmsim.papers.he2022_twotower.reliability`
(split-half reliability, the primary tower's lead, perplexity against the unigram),
:mod:`~lmsim.papers.he2022_twotower.nulls` (global-gap and frequency-matched nulls),
:mod:`~lmsim.papers.he2022_twotower.pos` (parts of speech) and
:mod:`~lmsim.papers.he2022_twotower.page` (the claims of the GPU page's frozen source),
:mod:`~lmsim.papers.he2022_twotower.crossfit` (cross-fitted comparisons of runs scored on
one text) and :mod:`~lmsim.papers.he2022_twotower.checklist` (the claims the CPU page
registers in the checklist form, issue 43).

References
----------
He & Toyoizumi (2022), Spontaneous Emerging Preference in Two-tower Language Model,
Tables 1-4, Figs. 3-6.
"""

from __future__ import annotations

from lmsim.papers.he2022_twotower.checklist import (
    COLLAPSE_RATIO,
    claim_groups,
    collapse_claim,
    collapse_threshold_range,
    crossfit_bars,
    frequency_null,
    group_label,
    head_ratios,
    ica_nulls_table,
    replicates,
    table4_claims,
    tag_source_note,
    tower_type,
    type_pairs,
)
from lmsim.papers.he2022_twotower.checklist import ica_claims as ica_claims_null
from lmsim.papers.he2022_twotower.checklist import pos_claims as pos_claims_by_type
from lmsim.papers.he2022_twotower.checklist import relation_claims as relation_claims_crossfit
from lmsim.papers.he2022_twotower.compare import (
    correlation_matrix,
    pair_table,
    permutation_null,
    relation,
    score_correlation,
    spearman_matrix,
    top_tokens,
)
from lmsim.papers.he2022_twotower.crossfit import (
    Halves,
    chunk_splits,
    crossfit_gap_null,
    crossfit_pair,
    crossfit_runs,
    crossfit_statistic,
    half_scores,
    null_crossfit,
    null_seed,
    reliability_by_frequency,
)
from lmsim.papers.he2022_twotower.nulls import (
    ICA_NULL_METHODS,
    frequency_matched_null,
    frequency_strata,
    global_gap_null,
    ica_null,
    null_correlations,
    structureless_embeddings,
)
from lmsim.papers.he2022_twotower.page import (
    PAPER_TABLE4_RANGES,
    annotate_pairs,
    gaussian_reference,
    heads_vs_unigram,
    ica_claims,
    pair_null_bar,
    pair_relation,
    pos_claims,
    pos_estimate,
    pos_frequency_quantiles,
    relation_claims,
    run_nulls,
    table4_claim,
    token_correlation,
)
from lmsim.papers.he2022_twotower.paper import (
    AUTHORS_CODE_DIFFERENCES,
    PAPER_CONFIGS,
    PAPER_ICA_FACTS,
    PAPER_PAIR_VALUES,
    PAPER_POS_CLAIMS,
    PAPER_RELATIONS,
    PAPER_TABLE2,
    PAPER_TABLE3,
    PAPER_TABLE4,
    PAPER_TABLE4_PAIRS,
    paper_pair_value,
)
from lmsim.papers.he2022_twotower.pos import (
    POS_REFERENCES,
    pos_table,
    relative_pos_test,
    tag_sources,
    token_pos,
)
from lmsim.papers.he2022_twotower.reliability import (
    SplitHalf,
    bootstrap_interval,
    correlation_ceiling,
    perplexity_table,
    perplexity_vs_unigram,
    primary_gap,
    run_table,
    spearman_brown,
    split_half_reliability,
)

__all__ = [
    "COLLAPSE_RATIO",
    "claim_groups",
    "collapse_threshold_range",
    "crossfit_runs",
    "frequency_null",
    "group_label",
    "null_seed",
    "replicates",
    "tower_type",
    "tag_sources",
    "collapse_claim",
    "crossfit_bars",
    "head_ratios",
    "ica_nulls_table",
    "tag_source_note",
    "type_pairs",
    "ica_claims_null",
    "pos_claims_by_type",
    "relation_claims_crossfit",
    "table4_claims",
    "Halves",
    "chunk_splits",
    "crossfit_gap_null",
    "crossfit_pair",
    "crossfit_statistic",
    "half_scores",
    "null_crossfit",
    "reliability_by_frequency",
    "ICA_NULL_METHODS",
    "ica_null",
    "structureless_embeddings",
    "PAPER_PAIR_VALUES",
    "PAPER_TABLE4_PAIRS",
    "paper_pair_value",
    "annotate_pairs",
    "AUTHORS_CODE_DIFFERENCES",
    "bootstrap_interval",
    "correlation_ceiling",
    "correlation_matrix",
    "frequency_matched_null",
    "frequency_strata",
    "gaussian_reference",
    "global_gap_null",
    "heads_vs_unigram",
    "ica_claims",
    "null_correlations",
    "pair_null_bar",
    "pair_relation",
    "pair_table",
    "PAPER_CONFIGS",
    "PAPER_ICA_FACTS",
    "PAPER_POS_CLAIMS",
    "PAPER_RELATIONS",
    "PAPER_TABLE2",
    "PAPER_TABLE3",
    "PAPER_TABLE4",
    "PAPER_TABLE4_RANGES",
    "permutation_null",
    "perplexity_table",
    "perplexity_vs_unigram",
    "pos_claims",
    "pos_estimate",
    "pos_frequency_quantiles",
    "POS_REFERENCES",
    "pos_table",
    "primary_gap",
    "relation",
    "relation_claims",
    "relative_pos_test",
    "run_nulls",
    "run_table",
    "score_correlation",
    "spearman_brown",
    "spearman_matrix",
    "split_half_reliability",
    "SplitHalf",
    "table4_claim",
    "token_correlation",
    "token_pos",
    "top_tokens",
]
