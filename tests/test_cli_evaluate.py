"""``lmsim evaluate``: a merged model scored per task with each task's head (FusionBench)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from _helpers import tiny_tokenizer

from lmsim.cli import main

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TASKS = ("smoke", "smoke-adverb")


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Tiny BERT classifiers built from a config (2, 2 and 3 labels), one tokenizer."""
    from transformers import BertConfig, BertForSequenceClassification

    from lmsim.data import load_task

    root = tmp_path_factory.mktemp("evaluate")
    corpus = [
        x for spec in TASKS for part in ("train", "test") for x in load_task(spec).subset(part)[0]
    ]
    tok = tiny_tokenizer("wordpiece", corpus)
    paths = {}
    for seed, n_labels in ((0, 2), (1, 2), (2, 3)):
        config = BertConfig(
            vocab_size=tok.vocab_size,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=64,
            num_labels=n_labels,
        )
        torch.manual_seed(seed)
        path = root / f"clf{seed}"
        BertForSequenceClassification(config).save_pretrained(path)
        tok.save_pretrained(path)
        paths[seed] = path
    config = root / "merge.yml"
    config.write_text(
        "merge_method: simple\nmodels:\n"
        f"  - model: {paths[0]}\n  - model: {paths[1]}\n"
        'parameters:\n  exclude: ["^classifier\\\\."]\n'
    )
    return {"root": root, "clf": paths, "config": config}


def test_merged_model_is_scored_with_each_tasks_head(capsys, models):
    from lmsim.data import load_task
    from lmsim.finetune import predict_logits, with_head
    from lmsim.models import load_model
    from lmsim.tasks import baseline_score, score

    root, clf = models["root"], models["clf"]
    merged_dir = root / "merged"
    status, _, err = run(capsys, "merge", models["config"], "--out", merged_dir, "--quiet")
    assert status == 0, err
    out = root / "eval"
    status, stdout, err = run(
        capsys,
        "evaluate",
        merged_dir,
        "--task",
        f"smoke={clf[0]}",
        "--task",
        f"smoke-adverb={clf[1]}",
        "--max-length",
        "32",
        "--device",
        "cpu",
        "--out",
        out,
        "--json",
        "--quiet",
    )
    assert status == 0, err
    summary = json.loads(stdout)
    table = pd.read_csv(out / "scores.csv")
    assert list(table["task"]) == list(TASKS)
    merged, tok = load_model(str(merged_dir), task="sequence-classification", device="cpu")
    for row, spec, head in zip(summary["tasks"], TASKS, (clf[0], clf[1]), strict=True):
        task = load_task(spec)
        inputs = task.subset("test")[0]
        donor, _ = load_model(str(head), task="sequence-classification", device="cpu")
        with_its_head = with_head(merged, donor)
        want = score(task, predict_logits(with_its_head, tok, inputs, max_length=32), "test")
        alone = score(task, predict_logits(donor, tok, inputs, max_length=32), "test")
        assert row["merged"] == pytest.approx(want, abs=1e-12)
        assert row["individual"] == pytest.approx(alone, abs=1e-12)
        assert row["baseline"] == pytest.approx(baseline_score(task, "test"))
        assert row["n_examples"] == len(inputs)
    assert summary["average"]["merged"] == pytest.approx(table["merged"].mean())
    assert summary["average"]["individual"] == pytest.approx(table["individual"].mean())
    assert json.loads((out / "summary.json").read_text())["tasks"] == summary["tasks"]


def test_own_head_and_wrong_heads(capsys, models):
    from lmsim.data import load_task
    from lmsim.finetune import predict_logits
    from lmsim.models import load_model
    from lmsim.tasks import score

    root, clf = models["root"], models["clf"]
    out = root / "own"
    status, stdout, err = run(
        capsys, "evaluate", clf[0], "--task", "smoke", "--out", out, "--json", "--quiet"
    )
    assert status == 0, err
    (row,) = json.loads(stdout)["tasks"]
    model, tok = load_model(str(clf[0]), task="sequence-classification", device="cpu")
    task = load_task("smoke")
    want = score(task, predict_logits(model, tok, task.subset("test")[0], max_length=128), "test")
    assert row["merged"] == pytest.approx(want, abs=1e-12) and row["individual"] is None

    bad = root / "bad"
    status, _, err = run(capsys, "evaluate", clf[0], "--task", f"smoke={clf[2]}", "--out", bad)
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert "has 3 output labels but task 'smoke' has 2" in err
    assert not bad.exists()  # checked before the output folder is made
    status, _, err = run(capsys, "evaluate", clf[0], "--task", "smoke=", "--out", out)
    assert status == 2 and "write SPEC or SPEC=MODEL" in err
    status, _, err = run(
        capsys, "evaluate", clf[0], "--task", "smoke", "--task", "smoke", "--out", out
    )
    assert status == 2 and "given twice" in err
