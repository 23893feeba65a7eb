"""The lmsim model zoo: small transformer LMs that lmsim trains itself, offline.

The papers compare families of real checkpoints (teacher and distilled student; masked,
causal and replaced-token objectives; base and fine-tuned; seeds; depths). None can be
downloaded here, so the zoo is the offline stand-in, and a controlled instrument: every
model sees the same Penn Treebank text through the same tokenizer, and only the objective,
the seed, the depth or the distillation changes.

Models (:data:`MODELS`), built in dependency order ``tokenizer -> mlm-s0 -> distil/ft-*``:

======================  ========================================================================
``mlm-s{0,1,2}``        BERT masked LM (15 % of tokens selected; 80 % [MASK], 10 % random, 10 % kept)
``mlm-deep-s0``         the masked LM with ``deep_layers`` layers
``clm-s0``              GPT-2 causal LM, same width, depth and vocabulary
``electra-s{0,1,2}``    ELECTRA replaced-token detection (replacements sampled at
                        ``gen_temperature``); the discriminator is saved
``distil-mlm``          DistilBERT-style student of ``mlm-s0`` (half the layers);
                        ``distil-mlm-s1``/``-s2``: the students of ``mlm-s1``/``mlm-s2``
``ft-bbcnews``          ``mlm-s0`` fine-tuned on BBC News topics (5 classes); ``-s1``/``-s2``
                        from ``mlm-s1``/``mlm-s2``
``ft-finefood``         ``mlm-s0`` fine-tuned on fine-food reviews (great / other); ``-s1``/``-s2``
======================  ========================================================================

The seed sets the initialisation, the data order and the masking. Models that share a
seed (``mlm-s0``, ``mlm-deep-s0``, ``clm-s0``, ``electra-s0``) start from the same random
stream, so e.g. ``mlm-s0`` and ``mlm-deep-s0`` begin with the same embeddings: a controlled
"same start, different objective or depth" comparison; ``mlm-s1``/``mlm-s2`` vary the seed.

Every model is an ordinary Hugging Face directory (``save_pretrained``, safetensors, the
tokenizer, ``zoo.json`` with the training facts, ``training_log.csv``) under
``lmsim._cache.cache_dir("zoo", profile)``, with what intervals are computed from: the
language models' per-chunk validation losses (:func:`validation_chunks`) and the
classifiers' test predictions (:func:`test_predictions`). Masked, RTD and classification
models load with ``AutoModel`` as base encoders (the task head is dropped; a classifier's
head, a :class:`MeanPoolClassifier` layer, is ``classifier.safetensors`` beside it).

The ``default`` profile trains two models at a time in one-thread worker processes
(``jobs=2``), longest dependency chain first; see :func:`build`.

The package, by concern: :mod:`~lmsim.zoo.profiles` (profiles and the model list),
:mod:`~lmsim.zoo.text` (PTB text and the tokenizer), :mod:`~lmsim.zoo.losses` (masking and
losses, pure functions), :mod:`~lmsim.zoo.objectives` (one training run per objective),
:mod:`~lmsim.zoo.builder` (build, cache, staleness), :mod:`~lmsim.zoo.report` (reading a
built zoo), :mod:`~lmsim.zoo.cli`. Training itself is :func:`lmsim.training.train`, the one
training loop of lmsim.

Command line::

    python -m lmsim.zoo build [--profile smoke|default|gpu] [--only NAME ...] [--jobs N]
    python -m lmsim.zoo list [--profile ...]

References
----------
Devlin et al. (2019), BERT, Sec. 3.1 (masking). Radford et al. (2019), GPT-2.
Clark et al. (2020), ELECTRA, Eq. 1-2 (loss ``L_MLM + lambda L_Disc``, lambda = 50).
Sanh et al. (2019), DistilBERT, Sec. 3 (``L_ce`` with temperature, ``L_mlm``, ``L_cos``).
"""

from lmsim.zoo.builder import build, build_model, model_dir, model_facts, stale_settings
from lmsim.zoo.cli import main
from lmsim.zoo.losses import (
    IGNORE_INDEX,
    cosine_embedding_loss,
    distillation_loss,
    mask_tokens,
    masked_lm_loss,
    rtd_loss,
    rtd_summary,
    soft_target_cross_entropy,
    unigram_log_probs,
)
from lmsim.zoo.objectives import MeanPoolClassifier
from lmsim.zoo.profiles import MODELS, PROFILES, ModelSpec, ZooProfile, get_profile
from lmsim.zoo.report import (
    load_classifier,
    plot_training_curves,
    summary,
    test_predictions,
    training_log,
    validation_chunks,
)
from lmsim.zoo.text import (
    SPECIAL_TOKENS,
    load_tokenizer,
    make_chunks,
    tokenizer_dir,
    train_tokenizer,
    wordpiece_vocab,
)

__all__ = [
    "IGNORE_INDEX",
    "SPECIAL_TOKENS",
    "MeanPoolClassifier",
    "ModelSpec",
    "main",
    "make_chunks",
    "model_facts",
    "rtd_loss",
    "unigram_log_probs",
    "MODELS",
    "PROFILES",
    "ZooProfile",
    "build",
    "build_model",
    "cosine_embedding_loss",
    "distillation_loss",
    "get_profile",
    "load_classifier",
    "load_tokenizer",
    "mask_tokens",
    "masked_lm_loss",
    "model_dir",
    "plot_training_curves",
    "rtd_summary",
    "soft_target_cross_entropy",
    "stale_settings",
    "summary",
    "tokenizer_dir",
    "train_tokenizer",
    "wordpiece_vocab",
    "training_log",
    "test_predictions",
    "validation_chunks",
]
