"""Reading a built zoo: facts, the summary table, training logs and curves."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd

from lmsim.zoo.builder import _LOG_CSV, _ZOO_JSON, _is_built, model_dir
from lmsim.zoo.profiles import MODELS, ZooProfile, _root, get_profile

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
