"""Reading a built zoo: facts, the summary table, training logs and curves."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd

from lmsim._runtime import quiet_transformers
from lmsim.zoo.builder import (
    _CHUNKS_CSV,
    _HEAD_FILE,
    _LOG_CSV,
    _PREDICTIONS_CSV,
    _ZOO_JSON,
    _is_built,
    model_dir,
)
from lmsim.zoo.objectives import MeanPoolClassifier
from lmsim.zoo.profiles import MODELS, ZooProfile, _check_name, _root, get_profile

_SUMMARY_COLUMNS = [
    "name",
    "objective",
    "architecture",
    "layers",
    "hidden",
    "heads",
    "params",
    "steps",
    "tokens_seen",
    "val_ppl",
    "unigram_ppl",
    "val_ppl_of",
    "rtd_accuracy",
    "rtd_baseline",
    "rtd_loss",
    "rtd_baseline_loss",
    "rtd_auc",
    "test_accuracy",
    "majority_baseline",
    "teacher",
    "base_model",
    "train_seconds",
    "tokens_per_s",
    "mfu",
]


def summary(profile: str | ZooProfile | None = None) -> pd.DataFrame:
    """One row per built model of the profile (unbuilt models are left out).

    Returns
    -------
    pandas.DataFrame
        Columns: name, objective, architecture, layers, hidden, heads, params, steps,
        tokens_seen, val_ppl, unigram_ppl, val_ppl_of, rtd_accuracy, rtd_baseline,
        rtd_loss, rtd_baseline_loss, rtd_auc, test_accuracy, majority_baseline, teacher,
        base_model, train_seconds, tokens_per_s, mfu.
    """
    prof = get_profile(profile)
    rows = []
    for name in MODELS:
        path = _root(prof) / name
        if _is_built(path):
            facts = json.loads((path / _ZOO_JSON).read_text())
            rows.append({col: facts.get(col) for col in _SUMMARY_COLUMNS})
    return pd.DataFrame(rows, columns=_SUMMARY_COLUMNS)


def training_log(name: str, profile: str | ZooProfile | None = None) -> pd.DataFrame:
    """Per-step training log of a built model.

    Returns
    -------
    pandas.DataFrame
        ``step``, ``loss``, ``lr``, ``val_ppl`` (NaN between evaluations; absent for the
        classifiers) and objective-specific terms (``gen_loss``/``rtd_loss`` for ELECTRA,
        ``ce``/``mlm``/``cos`` for distillation).
    """
    return pd.read_csv(model_dir(name, profile, build=False) / _LOG_CSV)


def validation_chunks(name: str, profile: str | ZooProfile | None = None) -> pd.DataFrame:
    """Per validation chunk of a built language model: what its perplexity is summed from.

    Every language model of a profile is scored on the same chunks of PTB valid (masked
    models and the ELECTRA generator at the same masked positions), so the rows of two
    models pair up: an interval over chunks resamples them together.

    Returns
    -------
    pandas.DataFrame
        One row per chunk (``index``): ``tokens`` scored, ``nll`` and ``unigram_nll``
        (summed, nats; ``val_ppl = exp(nll.sum() / tokens.sum())``); for ELECTRA also
        ``rtd_tokens``, ``rtd_replaced`` and ``rtd_bce`` (the discriminator's summed
        cross-entropy over the chunk's real tokens).
    """
    spec = _check_name(name)
    if spec.objective == "finetune":
        raise ValueError(
            f"{name!r} is a classifier: it has test predictions, not validation chunks; "
            "use lmsim.zoo.test_predictions"
        )
    return _read_table(name, profile, _CHUNKS_CSV)


def test_predictions(name: str, profile: str | ZooProfile | None = None) -> pd.DataFrame:
    """The label and the predicted class of every test example of a built classifier.

    Returns
    -------
    pandas.DataFrame
        One row per test example (``index``, the test set's order): ``label``,
        ``prediction``; the majority class of the training labels is ``majority_class`` in
        :func:`~lmsim.zoo.model_facts`.
    """
    if _check_name(name).objective != "finetune":
        raise ValueError(
            f"{name!r} is a language model: it has validation chunks, not test predictions; "
            "use lmsim.zoo.validation_chunks"
        )
    return _read_table(name, profile, _PREDICTIONS_CSV)


def load_classifier(name: str, profile: str | ZooProfile | None = None, device="cpu"):
    """A built classifier with its head, in eval mode (:class:`MeanPoolClassifier`).

    ``model(input_ids, attention_mask)`` returns the logits its test predictions were
    taken from; ``AutoModel`` on the same folder gives the encoder alone.
    """
    from safetensors.torch import load_file
    from transformers import AutoModel

    if _check_name(name).objective != "finetune":
        raise ValueError(f"{name!r} is not a classifier; the zoo's are {_classifiers()}")
    path = model_dir(name, profile, build=False)
    with quiet_transformers(True):
        encoder = AutoModel.from_pretrained(path, add_pooling_layer=False)
    head = load_file(path / _HEAD_FILE)
    model = MeanPoolClassifier(encoder, head["weight"].shape[0])
    model.classifier.load_state_dict(head)
    return model.to(device).eval()


def _classifiers() -> list[str]:
    return [n for n, spec in MODELS.items() if spec.objective == "finetune"]


def _read_table(name, profile, file: str) -> pd.DataFrame:
    path = model_dir(name, profile, build=False) / file
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: zoo model {name!r} was built by an older lmsim; rebuild it "
            f"with `python -m lmsim.zoo build --only {name} --rebuild`"
        )
    return pd.read_csv(path, index_col="index")


def plot_training_curves(
    profile: str | ZooProfile | None = None, names: Sequence[str] | None = None
):
    """Training loss and validation perplexity against step for the built models.

    Returns
    -------
    matplotlib.figure.Figure
        Two stacked panels sharing the step axis and one legend: training loss (top, log
        scale; objectives differ, so compare shapes) and validation perplexity divided by
        the unigram perplexity on the same positions (bottom; the language models only;
        below the dashed line at 1 a model knows more than word frequencies). Each model
        has its own colour, line style and marker.
    """
    import matplotlib.pyplot as plt

    prof = get_profile(profile)
    names = [n for n in (names or MODELS) if _is_built(_root(prof) / n)]
    fig, (ax_loss, ax_ppl) = plt.subplots(2, 1, figsize=(8.5, 8), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # Colour and line style both vary, so models of one objective (the three seeds and the
    # deep masked LM) stay distinguishable where their curves overlap.
    styles = ["-", "--", ":", "-."]
    for k, name in enumerate(names):
        style = {"color": colors[k % len(colors)], "linestyle": styles[k % len(styles)]}
        log = training_log(name, prof)
        smooth = log["loss"].rolling(max(1, len(log) // 50), min_periods=1).mean()
        ax_loss.plot(log["step"], smooth, label=name, linewidth=1.6, **style)
        if "val_ppl" in log and "unigram_ppl" in log:
            val = log.dropna(subset=["val_ppl"])
            ratio = val["val_ppl"] / val["unigram_ppl"]
            ax_ppl.plot(val["step"], ratio, marker="os^Dv<>p"[k % 8], ms=4, **style)
    ax_ppl.axhline(1.0, color="0.3", ls="--", lw=1)
    ax_ppl.annotate(
        "unigram baseline",
        (0.98, 1.0),
        xycoords=("axes fraction", "data"),
        ha="right",
        va="bottom",
        fontsize=8,
        color="0.3",
    )
    ax_loss.set(
        xlabel="step", ylabel="training loss (smoothed)", yscale="log", title="Training loss"
    )
    ax_ppl.set(
        xlabel="step",
        ylabel="validation ppl / unigram ppl",
        title="Validation perplexity relative to unigram",
    )
    ax_ppl.set_ylim(bottom=0)
    ax_loss.legend(loc="upper right", fontsize=8, frameon=False, ncol=2)
    fig.suptitle(f"lmsim zoo, profile {prof.name!r}")
    fig.tight_layout()
    return fig
