"""Fine-tuned classifiers for the merging chapter, through lmsim's one training loop.

:func:`finetune` fine-tunes a copy of a pretrained encoder (any name :func:`lmsim.models.
load_model` knows: ``minilm-l6``, ``tiny-bert``, a hub id) with a fresh classification head on
labelled texts; :func:`finetune_multitask` trains one shared encoder with one head per task
on the joint data, the multi-task-learning (MTL) upper bound of Jin et al. (2023). Both run
:func:`lmsim.training.train` (AdamW, warm-up and linear decay, seeded stateless batches,
checkpoints and exact resume) and cache the result like the zoo:

- the folder is named by a digest of everything that determines the weights (base model,
  settings, texts, labels, label names), so a changed input trains a new model and an
  unchanged one is read back;
- it is written with :class:`lmsim._io.atomic_dir` (``save_pretrained``, the tokenizer and a
  ``finetune.json`` recording every file's size), so it appears only complete;
- :func:`load_finetuned` checks the recorded sizes and moves a damaged folder aside (it is
  then trained again);
- an interrupted run resumes from the training loop's checkpoint in ``.<folder>.partial``.

Task kinds (:data:`lmsim.encoding.KINDS`). ``kind="single_label"`` (the default),
``"multi_label"`` and ``"regression"`` fine-tune a sequence classifier on texts or text pairs
(``problem_type`` set for the last two), ``"token"`` a token classifier on word lists with
one label per word on its first sub-word; one loss function is keyed by the kind
(:func:`_loss`) and every input goes through :func:`lmsim.encoding.encode_inputs`. A
single-label task on plain texts keeps the digest (and weights) it had before kinds existed.

Frozen layers. ``n_frozen`` with ``freeze="bottom"`` (the default) freezes the embeddings
and the lowest ``n_frozen`` transformer layers (gradients flow only through the layers
above), which makes a step cheaper on a CPU. The frozen weights stay the pretrained ones in
every fine-tuned copy, so every merge leaves them unchanged (merging identical weights
returns them). ``freeze="top"`` freezes the highest ``n_frozen`` transformer layers instead
(the embeddings, the lower layers, the pooler, the final norm and the head train): Wu et
al.'s (2020) Table 1 compares the two.

Head initialisation. Every model of one call draws its head from ``head_seed`` (the paper's
"same head initialisation"); ``seed`` orders the batches and draws the dropout masks.

The package, by concern: ``_settings`` (:class:`FinetuneSettings`, checking a task's
inputs and labels, the cache digest), ``_heads`` (frozen layers, fresh and transplanted task
heads), ``_train`` (the training run, the cache folder, :func:`finetune`,
:func:`finetune_multitask`, :func:`load_finetuned`), ``_evaluate`` (logits, accuracy and :func:`accuracy_gap` over
seeds).

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 4.1 (MTL, individual models), App. B (training details).
"""

from lmsim.finetune._evaluate import accuracy, accuracy_gap, majority_baseline, predict_logits
from lmsim.finetune._heads import freeze_layers, freeze_lower_layers, head_pattern, with_head
from lmsim.finetune._settings import FinetuneSettings
from lmsim.finetune._settings import _check_task as _check_task
from lmsim.finetune._settings import _digest as _digest
from lmsim.finetune._train import _loss as _loss
from lmsim.finetune._train import _targets as _targets
from lmsim.finetune._train import finetune, finetune_facts, finetune_multitask, load_finetuned

__all__ = [
    "FinetuneSettings",
    "finetune",
    "finetune_multitask",
    "load_finetuned",
    "finetune_facts",
    "freeze_layers",
    "freeze_lower_layers",
    "predict_logits",
    "head_pattern",
    "accuracy",
    "accuracy_gap",
    "majority_baseline",
    "with_head",
]
