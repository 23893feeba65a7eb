"""Tasks of every kind and their metrics: what a fine-tuned or merged model is scored on.

A :class:`Task` holds the inputs and labels of its parts (train, optional validation, test),
its kind and its metric. The kinds (``KINDS``) fix how labels and logits look:

``single_label``
    An ``int`` in ``range(n_labels)`` per example; logits ``(n, n_labels)``; argmax.
``multi_label``
    A multi-hot sequence of ``n_labels`` 0/1 per example; logits ``(n, n_labels)``; a label
    is predicted when its logit is > 0 (probability > 0.5).
``regression``
    A float per example, ``label_names == ("score",)``; logits ``(n, 1)``.
``token``
    Inputs are word lists, labels one int per word indexing IOB2 tags (``"O"``,
    ``"B-PER"``, ``"I-PER"``, ...); logits a list of ``(n_words_i, n_labels)`` arrays, one
    per example, NaN rows for words cut off by truncation (predicted ``"O"``).

Inputs of sequence kinds are strings or pairs ``(str, str)``. Metrics (``METRICS``) are the
paper's (Jin et al. 2023, App. B): accuracy, Matthews correlation (CoLA), Pearson
correlation (STS-B), macro-F1 over the annotated emotions, and CoNLL entity F1 (NER);
besides them balanced accuracy (the mean recall over classes: a constant predictor scores
1/#classes whatever the class shares), for sets whose majority class dominates.
Pure numpy: nothing here touches models, disk or the hub.

:func:`check_labels` and :func:`check_label_names` are the one validator of labels and
label names for every kind (a :class:`Task`'s parts, :func:`lmsim.finetune.finetune`).

The package, by concern: ``_task`` (:class:`Task`, the kinds and how a part is checked),
``_metrics`` (the metrics on predictions and gold labels, entity chunks),
``_entity_types`` (renaming entity types, :data:`ONTONOTES_TO_CONLL`), ``_scoring``
(:func:`predict`, :func:`score`, :func:`score_predictions`, :func:`baseline_score`).
"""

from lmsim.tasks._entity_types import ONTONOTES_TO_CONLL, map_entity_types, map_task_entity_types
from lmsim.tasks._metrics import (
    accuracy,
    balanced_accuracy,
    entity_chunks,
    entity_f1,
    matthews_corrcoef,
    multilabel_macro_f1,
    pearson,
)
from lmsim.tasks._scoring import baseline_score, predict, score, score_predictions
from lmsim.tasks._task import KINDS, METRICS, PARTS, Task, check_label_names, check_labels

__all__ = [
    "KINDS",
    "METRICS",
    "PARTS",
    "ONTONOTES_TO_CONLL",
    "Task",
    "check_labels",
    "check_label_names",
    "accuracy",
    "balanced_accuracy",
    "matthews_corrcoef",
    "pearson",
    "multilabel_macro_f1",
    "entity_chunks",
    "entity_f1",
    "map_entity_types",
    "map_task_entity_types",
    "predict",
    "score",
    "score_predictions",
    "baseline_score",
]
