"""Similarity metrics between representations (Wu et al. 2020 and the CKA family).

Linear metrics accept raw activations ``fn(X, Y)`` — ``X (n_samples, d_x)``,
``Y (n_samples, d_y)``, numpy or torch, computed in float64 on the input's device — or
moments ``fn(mom, a, b)`` with an :class:`lmsim.moments.Moments` and two block names.
Directional measures (``pwcca``, ``neuronsim``, ``mixedsim``) are X → Y.
"""

from lmsim.metrics.attention import (
    attention_head_similarity,
    attnsim,
    distattn_sim,
    distributed_attention_features,
    paper_attention_features,
)
from lmsim.metrics.cca import pwcca, svcca
from lmsim.metrics.cka import debiased_cka, linear_cka, rbf_cka
from lmsim.metrics.localization import localization_scores
from lmsim.metrics.neuron import mixedsim, neuronsim
from lmsim.metrics.pairwise import pairwise_attention, pairwise_matrix, pairwise_matrix_raw
from lmsim.metrics.rsa import rsa
from lmsim.metrics.shape import procrustes

__all__ = [
    "attention_head_similarity",
    "attnsim",
    "debiased_cka",
    "distattn_sim",
    "distributed_attention_features",
    "linear_cka",
    "localization_scores",
    "mixedsim",
    "neuronsim",
    "pairwise_attention",
    "pairwise_matrix",
    "pairwise_matrix_raw",
    "paper_attention_features",
    "procrustes",
    "pwcca",
    "rbf_cka",
    "rsa",
    "svcca",
]
