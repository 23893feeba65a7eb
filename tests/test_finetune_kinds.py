"""Fine-tuning every task kind: text pairs, multi-label, regression, token classification.

Tiny BERT, RoBERTa and DistilBERT built from configs (saved with ``save_pretrained`` and
loaded through ``from_pretrained``), in-memory tokenizers, inline labelled inputs.
"""

from __future__ import annotations

from lmsim.finetune import FinetuneSettings, _check_task, _digest

# ------------------------------------------------------------------ cache digests
# Computed with the code before task kinds existed (commit 73914cf): the book's cached
# fine-tunes are found by these digests, so they must never change.
PINNED_TEXTS = ["the film was great", "a dull and boring plot", "Ünïcode — text ✓", "ok"]


def test_single_label_digest_of_plain_texts_is_unchanged():
    tasks = {"clf": _check_task("clf", PINNED_TEXTS, [1, 0, 1, 0], ["neg", "pos"])}
    assert _digest(tasks, FinetuneSettings()) == "79f8d720e39cf00a"
    two = {
        "a": _check_task("a", PINNED_TEXTS, [1, 0, 1, 0], ["neg", "pos"]),
        "b": _check_task("b", PINNED_TEXTS[:3], [0, 2, 1], ["x", "y", "z"]),
    }
    settings = FinetuneSettings(base="tiny-bert", n_frozen=1, freeze="top", epochs=2.5)
    assert _digest(two, settings) == "7a469ea6e8372bd6"
