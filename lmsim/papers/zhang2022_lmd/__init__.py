"""Zhang (2022), language model decomposition: the chapter's protocol (``book/zhang2022_lmd``).

LMD itself (fits, bootstrap, over-fitting correction) is a general method in
:mod:`lmsim.lmd`; this package holds the paper's published tables
(:mod:`~lmsim.papers.zhang2022_lmd.paper`) and the authors' released result tables with ours
beside them (:mod:`~lmsim.papers.zhang2022_lmd.authors`).

References
----------
Zhang (2022), Language Model Decomposition: Quantifying the Dependency and Correlation of
Language Models, Tables 2-3, Figs. 2-10; the authors' code ``haozhg/lmd``.
"""

from __future__ import annotations

from lmsim.papers.zhang2022_lmd.authors import (
    AUTHORS_GROUP_R2,
    AUTHORS_MODELS,
    AUTHORS_PAIRWISE_R2,
    AUTHORS_RUNS,
    authors_group_r2,
    authors_group_size_curve,
    authors_mean_pairwise_r2,
    authors_pairwise_r2,
    group_beside_authors,
    pairwise_beside_authors,
)
from lmsim.papers.zhang2022_lmd.paper import (
    PAPER_CHECKPOINTS,
    PAPER_GROUP_RHO,
    PAPER_MULTILINGUAL,
    PAPER_OTHER_OBJECTIVES,
    PAPER_SEQ_LENS,
    PAPER_TABLE2,
    PAPER_TABLE3,
    paper_group_table,
    paper_ranks,
    paper_seq_lens_where_lowest,
)

__all__ = [
    "AUTHORS_GROUP_R2",
    "authors_group_r2",
    "authors_group_size_curve",
    "authors_mean_pairwise_r2",
    "AUTHORS_MODELS",
    "AUTHORS_PAIRWISE_R2",
    "authors_pairwise_r2",
    "AUTHORS_RUNS",
    "group_beside_authors",
    "pairwise_beside_authors",
    "PAPER_CHECKPOINTS",
    "PAPER_GROUP_RHO",
    "paper_group_table",
    "PAPER_MULTILINGUAL",
    "PAPER_OTHER_OBJECTIVES",
    "paper_ranks",
    "PAPER_SEQ_LENS",
    "paper_seq_lens_where_lowest",
    "PAPER_TABLE2",
    "PAPER_TABLE3",
]
