"""He & Toyoizumi (2022), two-tower LM: the chapter's protocol (``book/he2022_twotower``).

The models, their training and the preference scores are general methods in
:mod:`lmsim.twotower`; this package holds what the chapter's page does with them:
:mod:`~lmsim.papers.he2022_twotower.paper` (the paper's numbers and configurations, the
authors' code's differences), :mod:`~lmsim.papers.he2022_twotower.compare` (correlations
between runs and their permutation null), :mod:`~lmsim.papers.he2022_twotower.reliability`
(split-half reliability, the primary tower's lead, perplexity against the unigram),
:mod:`~lmsim.papers.he2022_twotower.nulls` (global-gap and frequency-matched nulls),
:mod:`~lmsim.papers.he2022_twotower.pos` (parts of speech) and
:mod:`~lmsim.papers.he2022_twotower.page` (the claims the page registers).

References
----------
He & Toyoizumi (2022), Spontaneous Emerging Preference in Two-tower Language Model,
Tables 1-4, Figs. 3-6.
"""

from __future__ import annotations

from lmsim.papers.he2022_twotower.compare import (
    correlation_matrix,
    pair_table,
    permutation_null,
    relation,
    score_correlation,
    spearman_matrix,
    top_tokens,
)
from lmsim.papers.he2022_twotower.nulls import (
    frequency_matched_null,
    frequency_strata,
    global_gap_null,
    null_correlations,
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
    PAPER_POS_CLAIMS,
    PAPER_RELATIONS,
    PAPER_TABLE2,
    PAPER_TABLE3,
    PAPER_TABLE4,
)
from lmsim.papers.he2022_twotower.pos import (
    POS_REFERENCES,
    pos_table,
    relative_pos_test,
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
