"""Two-tower language models and their spontaneous preference (He & Toyoizumi, 2022).

A two-tower LM (Eq. 1) embeds a token sequence once, runs two identically configured
towers side by side on the same word vectors, concatenates their final states and predicts
each token with a softmax tied to the input embedding. Tower types:

``"elmo"``  a forward and a backward LSTM stack whose states are shifted by one position, so
            position ``i`` sees ``x_<i`` and ``x_>i`` but never ``x_i`` (cloze);
``"gpt"``   a causal transformer; position ``i`` is predicted from the state at ``i - 1``;
``"bert"``  a bidirectional transformer on BERT-masked input (15 % selected; 80/10/10),
            predicting the selected positions only.

Phase 2 (Eq. 2) freezes the embedding and both towers and trains one new output head per
tower on that tower's states alone; the frozen weights are checked bit for bit. The
*primary* tower has the higher mean probability of the correct token (Eq. 3) and the
preference score of token ``a`` is ``s_a = log p̄_1a − log p̄_2a`` (Eq. 4), computed in one
streaming pass (:func:`preference_scores`). The analyses: correlation of score vectors
between runs over the most frequent tokens with a permutation null, Spearman against
frequency rank, scores per part of speech, and ICA word groups of the input embeddings
(PCA to ``d``, Amari's natural-gradient ICA as the authors ran it).

Training goes through :func:`lmsim.training.train` (the one training loop of lmsim):
AdamW with β = (0.9, 0.98), weight decay 0.01, lr 1e-3 with linear warm-up and decay;
seeded stateless batches and masks; checkpoints and exact resume. A finished run is cached
atomically under ``lmsim._cache.cache_dir("twotower", profile)/<name>-<digest>``, the
digest covering the architecture, the seed and every setting that changes the result.

Departures from the paper, each forced or stated:

- Eq. 1 multiplies the embedding ``x(t)`` with the concatenated state ``h_i`` directly, which
  needs ``dim h = dim x``; the concatenation is twice the tower width, so each output head is
  BERT's prediction head (dense → GELU → LayerNorm) followed by the tied decoder and a bias
  (the authors' code does the same for the joint head).
- ICA inputs are PCA-*whitened* (``P = X V_d S_d^{-1/2}``); the paper's Eq. 5 writes
  ``V_d √S_d``, the authors' ``ncamath.pca`` whitens (:mod:`~lmsim.twotower.ica`).

The authors' released code (``hezq06/twotower_lm``: ``ttlm/model.py``, ``ttlm/dslearn.py``,
``workspace/TwoTowerLM.py``; ``hezq06/ncautil``: ``ncamath.py``) differs from the paper's text
and from lmsim's defaults; each of its choices is a named option here, off by default:

- :class:`TowerConfig` ``elmo_forward_only`` (their ``flip_seq`` zeroes the backward LSTMs),
  ``input_proj`` (a 2H-wide table read through per-tower ``Linear(2H → H)``, BERT and ELMo),
  ``untied_heads`` (a LayerNorm on the concatenation; phase-2 heads with untied decoders),
  ``dropout`` (theirs 0.1); :meth:`TowerConfig.as_authors` sets them all;
- :func:`preference_scores` ``mean="log"`` (their per-token mean of log-softmax) on the
  chunks passed (their validation split);
- :func:`fit_ica` ``variant="paper"`` (uncentred whitening, ``W`` rescaled to ``‖W‖_F = √d``
  every step, fitted on every evaluated occurrence: ``weights`` = counts);
- phase-2 length is :attr:`TwoTowerSettings.head_steps` (theirs: 30 epochs × 1,000 batches).

Transformer towers are pre-LayerNorm, as the authors' (DeepSpeed ``pre_layer_norm=True``,
GPT-2).

References
----------
He & Toyoizumi (2022), Spontaneous Emerging Preference in Two-tower Language Model,
Eq. 1-7, Tables 1-4, Figs. 3-6. Amari, Cichocki & Yang (1995) (natural-gradient ICA).
Devlin et al. (2019), BERT, Sec. 3.1 (masking).

The package, by concern: :mod:`~lmsim.twotower.config` (tower architecture, runs, settings),
:mod:`~lmsim.twotower.inputs` (chunks and what each tower type reads and predicts),
:mod:`~lmsim.twotower.model` (the model and its FLOPs), :mod:`~lmsim.twotower.training` (both
phases, the run cache, loading), :mod:`~lmsim.twotower.scores` (preference scores),
:mod:`~lmsim.twotower.ica` (PCA and ICA word groups) and :mod:`~lmsim.twotower.cka` (the towers
compared by CKA). The chapter's protocol (the paper's numbers, correlations between runs, their
nulls and reliabilities, parts of speech, the page's claims) is
:mod:`lmsim.papers.he2022_twotower`.
"""

from __future__ import annotations

# `name as name`: not in __all__, but reached as `lmsim.twotower.<name>` by tests and callers.
from lmsim.training import train as train
from lmsim.twotower.cka import tower_cka, tower_states
from lmsim.twotower.config import IGNORE_INDEX as IGNORE_INDEX
from lmsim.twotower.config import TOWER_TYPES, RunSpec, TowerConfig, TwoTowerSettings
from lmsim.twotower.ica import (
    ICA_VARIANTS,
    IcaFit,
    amari_g,
    amari_ica,
    fit_ica,
    group_table,
    ica_groups,
    ica_summary,
    occurrence_rows,
    pca_whiten,
)
from lmsim.twotower.inputs import TowerData, inputs_and_labels, load_data
from lmsim.twotower.model import LSTMTower as LSTMTower
from lmsim.twotower.model import OutputHead, TwoTowerLM, UntiedHead, two_tower_flops_per_token
from lmsim.twotower.model import SharedEmbedding as SharedEmbedding
from lmsim.twotower.model import TransformerTower as TransformerTower
from lmsim.twotower.model import new_heads as new_heads
from lmsim.twotower.scores import (
    SCORE_MEANS,
    Occurrences,
    Preference,
    preference_scores,
    primary_tower,
)
from lmsim.twotower.training import (
    TrainedTwoTower,
    load_two_tower,
    phase1_run,
    phase2_run,
    run_dir,
    train_runs,
    train_two_tower,
    training_log,
)
from lmsim.twotower.training import _bit_identical as _bit_identical
from lmsim.twotower.training import _frozen_state as _frozen_state

__all__ = [
    "TOWER_TYPES",
    "ica_summary",
    "TowerConfig",
    "RunSpec",
    "TwoTowerSettings",
    "TowerData",
    "TwoTowerLM",
    "OutputHead",
    "TrainedTwoTower",
    "Preference",
    "load_data",
    "inputs_and_labels",
    "two_tower_flops_per_token",
    "phase1_run",
    "phase2_run",
    "run_dir",
    "train_two_tower",
    "load_two_tower",
    "train_runs",
    "primary_tower",
    "preference_scores",
    "pca_whiten",
    "amari_g",
    "amari_ica",
    "ica_groups",
    "group_table",
    "tower_states",
    "tower_cka",
    "training_log",
    "UntiedHead",
    "SCORE_MEANS",
    "Occurrences",
    "ICA_VARIANTS",
    "IcaFit",
    "fit_ica",
    "occurrence_rows",
]
