"""The released RegMean code's settings, as paper-compatible options.

The paper's text regularises every Gram with α = 0.9 (0.1 for T5; Sec. 3.3, App. C). The
authors' released code (``bloomberg/dataless-model-merging``) sets the off-diagonal scale per
experiment in its configs, ``merger.regmean_reduce_nondiag``: ``FedAvgMerger.reduce_non_diag``
(``src/model_merge/avg_merger.py``) multiplies the off-diagonal entries by that value and keeps
the diagonal, so it *is* α; the default ``-1.0`` (``src/configs/defaults.yaml``) skips the
scaling, i.e. α = 1. :data:`RELEASED_ALPHA` lists what each family of configs sets.

The released code's other choices are options elsewhere in :mod:`lmsim.merge`:

* its head merge for emotion classification (a masked simple average of the head weight,
  even under RegMean): ``merge_models(head_rows=...)``;
* its Fisher (``local_trainer.compute_fisher``, ``fisher_variant: "hard"``; ``emp_fisher:
  true`` in the NER configs): ``collect_fishers(mode="hard")`` / ``"hard_empirical"``;
* its Grams over every position of batches padded to their longest text:
  ``collect_grams(paper_compat_padding=True)``.

References
----------
Jin et al. (2023), Sec. 3.3 and App. C; the released configs named in :data:`RELEASED_ALPHA`.
"""

from __future__ import annotations

from typing import NamedTuple


class ReleasedAlpha(NamedTuple):
    """One family of the released configs and the α (``regmean_reduce_nondiag``) they set."""

    model: str
    family: str
    alpha: float
    configs: tuple[str, ...]


_CONFIGS = "src/configs/exps/"
RELEASED_ALPHA = (
    ReleasedAlpha(
        "distilbert-base",
        "glue",
        1.0,
        (
            _CONFIGS + "distilbert/subset/distilbert-niid-1k-regmean-whead.yaml",
            _CONFIGS + "distilbert/distilbert-regmean.yaml",
        ),
    ),
    ReleasedAlpha(
        "roberta-base",
        "glue",
        1.0,
        (
            _CONFIGS + "roberta-base/subset/rb-1k-regmean-whead.yaml",
            _CONFIGS + "roberta-base/glue/roberta-base-regmean.yaml",
        ),
    ),
    ReleasedAlpha(
        "roberta-base",
        "emotion",
        0.1,
        (
            _CONFIGS + "roberta-base/roberta-base-emotion-regmean.yaml",
            _CONFIGS + "roberta-base/ood/roberta-base-emotion-regmean-ood.yaml",
        ),
    ),
    ReleasedAlpha(
        "roberta-base",
        "ner",
        0.1,
        (
            _CONFIGS + "roberta-base/ner/roberta-base-ner-regmean.yaml",
            _CONFIGS + "roberta-base/ner/ood/roberta-base-ner-regmean.yaml",
        ),
    ),
    ReleasedAlpha(
        "deberta-large",
        "emotion",
        0.1,
        (
            _CONFIGS + "deberta/deberta-large-emotion-regmean.yaml",
            _CONFIGS + "deberta/ood/deberta-large-emotion-regmean-ood.yaml",
        ),
    ),
    ReleasedAlpha(
        "deberta-large", "ner", 0.9, (_CONFIGS + "deberta/ner/ood/deberta-ner-regmean.yaml",)
    ),
    ReleasedAlpha(
        "t5-base",
        "emotion",
        0.1,
        (
            _CONFIGS + "t5/t5-base-emotion-regmean.yaml",
            _CONFIGS + "t5/ood/t5-base-emotion-regmean-ood.yaml",
        ),
    ),
)
"""What the released configs set, per base model and task family.

``"glue"`` covers the non-i.i.d. partitions (Table 1) and the different-task merges (Fig. 4);
``"emotion"`` and ``"ner"`` the different-domain merges (Fig. 3, Tables 2-3, Fig. 6).
"""


def released_alpha(family: str, model: str = "roberta-base") -> float:
    """The α the released configs use for a task family and base model.

    Parameters
    ----------
    family : {"glue", "emotion", "ner"}
    model : str, default="roberta-base"
        One of the released base models: ``"distilbert-base"``, ``"roberta-base"``,
        ``"deberta-large"``, ``"t5-base"``.

    Returns
    -------
    float
        ``merge_models(alpha=...)`` for the released setting (1.0 where the configs do not
        scale the Grams).

    Examples
    --------
    >>> released_alpha("glue"), released_alpha("emotion"), released_alpha("ner", "deberta-large")
    (1.0, 0.1, 0.9)
    """
    for row in RELEASED_ALPHA:
        if (row.family, row.model) == (family, model):
            return row.alpha
    known = sorted({(r.family, r.model) for r in RELEASED_ALPHA})
    raise KeyError(
        f"the released configs set no α for family {family!r} and model {model!r}; known "
        f"(family, model) pairs: {known}"
    )
