"""Dataless merging of fine-tuned language models: RegMean, Fisher and simple averaging,
and the task-vector merges (task arithmetic, TIES, DARE) users of other merging libraries expect.

RegMean (Jin et al. 2023) merges linear layers by the closed-form solution of a regression
problem: the merged weight is the one whose outputs are closest, in least squares, to each
individual model's outputs on that model's own (private) inputs. Only the Gram matrices
``G_i = X_iᵀX_i`` of the layer inputs are needed, never the data:

    W_M = ((Σ_i G̃_i)⁻¹ Σ_i G̃_i W_iᵀ)ᵀ,    G̃_i = α G_i + (1 − α) diag(G_i)      (Eq. 2, App. A)

with ``W_i`` in the ``nn.Linear`` layout ``(out, in)``. Every other parameter (embeddings,
biases, LayerNorm) is simply averaged.

Layout
    * Array functions (:func:`regmean_linear`, :func:`regularize_gram`,
      :func:`simple_average`, :func:`fisher_average`) take numpy arrays or torch tensors
      and compute in float64 (torch, on the input's device). They return float64 numpy
      arrays when given numpy, float64 tensors when given torch.
    * :class:`RegMeanAccumulator` keeps only ``Σ G̃_i``, ``Σ G̃_i W_iᵀ`` and ``Σ W_i`` per
      layer, so memory does not grow with the number of models.
    * :func:`merge_models` merges any set of Hugging Face models of one architecture
      (BERT, RoBERTa, MPNet, DistilBERT, GPT-2 with its transposed ``Conv1D``, Llama-style
      decoders), one model at a time, and returns a :class:`MergeReport` that names how
      each parameter was merged.
    * :func:`collect_grams` and :func:`collect_fishers` compute the statistics a model owner
      publishes instead of data, for every task kind (texts, text pairs, word lists;
      categorical, multi-label Bernoulli, Gaussian regression and per-word likelihoods); :func:`save_grams` / :func:`load_grams` (and the Fisher
      pair) store them as safetensors, which cannot execute code when loaded.

Design decisions
    * **Grams are means by default.** :func:`collect_grams` returns ``XᵀX / n`` (``n`` the
      number of token positions), as the authors' code does (a running mean of ``xxᵀ``).
      Each model then weighs equally in the merge whatever the number of tokens its Gram
      saw (models fine-tuned on longer texts would otherwise dominate). ``reduction="sum"``
      gives the literal ``X_iᵀX_i`` of Eq. 1, the pooled least-squares solution, which
      weighs each model by its token count. :func:`regmean_linear` uses what it is given.
    * **Grams come from float32 forward passes on every device** (:func:`collect_grams`
      autocasts to bfloat16 or float16 only when ``dtype`` names it) and are summed in
      float64; :func:`collect_fishers` runs the model in its own precision, without
      autocast, and sums the squares in float64.
    * **Padding is excluded by default**; ``paper_compat_padding=True`` averages over all
      positions, padding included, as the released code does.
    * **Singular sums.** When ``Σ G̃_i`` is not numerically positive definite (Cholesky
      fails or its pivot ratio is below ``1e-12``), a :class:`SingularGramWarning` names
      the layer and the solve adds ``λ I`` to every model's Gram, ``λ = ridge ·
      mean(diag(Σ G̃_i)) / K`` (``ridge = 1e-8``, multiplied by 100 until Cholesky
      succeeds): the paper's additive regulariser (App. A, Eq. 4), which pulls the merged
      weight towards the simple average in input directions no model's data spans (never
      towards zero), and leaves spanned directions nearly untouched. Singular sums are
      common at ``alpha = 1``: a head sees one row per text (fewer rows than inputs), and
      the outputs of a LayerNorm with zero bias and uniform gain sum to zero, so the Gram
      of the layer after it has the null vector ``1``; any ``alpha < 1`` with positive
      diagonals makes the sum positive definite.
    * **Heads.** Parameters whose shapes differ between models (task heads with different
      numbers of labels) and parameters matching ``exclude`` are not merged: the merged
      model keeps the first model's values, and the report says so.
    * **Tied weights** (an LM head sharing the token embedding) are merged once, by simple
      averaging, as embeddings are; RegMean is not applied to a tied output layer because
      the same tensor is also the input embedding. The report lists the alias.

Modules
    ``_algebra`` (RegMean's regularisation, solve and accumulator; simple and Fisher
    averages), ``_taskvectors`` (task arithmetic, TIES and DARE on arrays), ``_models``
    (:func:`merge_models`), ``_report`` (:class:`MergeReport`), ``_paramwise`` (the
    parameter-wise methods' combiners: add a new method there), ``_grams`` and ``_fisher``
    (collecting the statistics), ``_files`` (their safetensors files), ``_ensemble`` (the logit-ensemble
    baseline), ``_released`` (the released code's α per task family), ``_exactness``
    (float32 solves against the float64 one, per layer).

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Eq. 1-2, Algorithm 1, App. A (Eq. 4, 8, 9), App. C (Table 8).
Matena & Raffel (2022). Merging Models with Fisher-Weighted Averaging. NeurIPS.
Ilharco et al. (2023). Editing Models with Task Arithmetic. ICLR.
Yadav et al. (2023). TIES-Merging: Resolving Interference When Merging Models. NeurIPS.
Yu et al. (2024). Language Models are Super Mario (DARE). ICML.
"""

from lmsim.merge._algebra import (
    RegMeanAccumulator,
    SingularGramWarning,
    fisher_average,
    regmean_linear,
    regularize_gram,
    simple_average,
)
from lmsim.merge._ensemble import ensemble_logits
from lmsim.merge._exactness import linear_weights, regmean_exactness
from lmsim.merge._files import load_fishers, load_grams, load_metadata, save_fishers, save_grams
from lmsim.merge._fisher import FISHER_LABELS as FISHER_LABELS
from lmsim.merge._fisher import collect_fishers
from lmsim.merge._grams import collect_grams, grams_from_moments
from lmsim.merge._models import METHODS as METHODS
from lmsim.merge._models import check_merge_options, linear_layers, merge_models
from lmsim.merge._released import RELEASED_ALPHA, ReleasedAlpha, released_alpha
from lmsim.merge._report import MergeReport
from lmsim.merge._taskvectors import (
    TRIM_SCOPES,
    dare,
    dare_generator,
    dare_keep_mask,
    task_arithmetic,
    ties_merging,
    trim_threshold,
)

__all__ = [
    "SingularGramWarning",
    "regularize_gram",
    "regmean_linear",
    "simple_average",
    "fisher_average",
    "task_arithmetic",
    "ties_merging",
    "dare",
    "trim_threshold",
    "dare_generator",
    "dare_keep_mask",
    "TRIM_SCOPES",
    "RegMeanAccumulator",
    "MergeReport",
    "linear_layers",
    "merge_models",
    "check_merge_options",
    "grams_from_moments",
    "collect_grams",
    "collect_fishers",
    "save_grams",
    "load_grams",
    "save_fishers",
    "load_fishers",
    "load_metadata",
    "ensemble_logits",
    "regmean_exactness",
    "linear_weights",
    "released_alpha",
    "RELEASED_ALPHA",
    "ReleasedAlpha",
]
