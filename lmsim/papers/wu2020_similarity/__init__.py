"""Wu et al. (2020), similarity analysis of contextual word representation models: the
chapter's protocol (``book/wu2020_similarity``).

The measures are general methods (:mod:`lmsim.metrics`, layer × layer matrices from
:func:`lmsim.extract.pairwise_by_model_pairs`); this package holds the chapter's family
comparisons (:mod:`~lmsim.papers.wu2020_similarity.families`) and the family claims judged
per model pair and per model (:mod:`~lmsim.papers.wu2020_similarity.contrasts`).

References
----------
Wu et al. (2020), Similarity Analysis of Contextual Word Representation Models, ACL;
the authors' code ``johnmwu/contextual-corr-analysis``.
"""

from __future__ import annotations

from lmsim.papers.wu2020_similarity.contrasts import (
    Contrast,
    family_contrasts,
    measure_contrast,
    percentile_scale,
    split_half_agreement,
)
from lmsim.papers.wu2020_similarity.families import (
    family_cells,
    family_means,
    relation_gap,
)
from lmsim.papers.wu2020_similarity.finetuning import (
    bottom_minus_top,
    depth_spearman,
    diagonal_cka,
    diagonal_js,
    diagonal_js_sums,
    localization_shift,
    seed_groups,
    sentence_js_sums,
    sentence_rows,
)

__all__ = [
    "Contrast",
    "family_contrasts",
    "measure_contrast",
    "percentile_scale",
    "split_half_agreement",
    "bottom_minus_top",
    "depth_spearman",
    "diagonal_cka",
    "diagonal_js",
    "diagonal_js_sums",
    "localization_shift",
    "sentence_js_sums",
    "seed_groups",
    "sentence_rows",
    "family_cells",
    "family_means",
    "relation_gap",
]
