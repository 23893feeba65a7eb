"""The RegMean paper profile's parameters against the loaders (fake hub sets, real schemas).

The paper profile cannot run here (no hub, no GPU); this checks that every data set it names
loads through :func:`lmsim.data.load_task` with the columns the hub serves, that its setups
build (one label space per domain setup, OOD validation and test halves, NER relabelled to
the OOD sets' types), and that its names agree with each other, for both of its pages.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_data_tasks import (
    CONLL_TAGS,
    ONTO_TAGS,
    ClassLabel,
    FakeDataset,
    Sequence,
    Value,
    glue_dataset,
    install_fake_datasets,
    onto_splits,
    unified_row,
)

from lmsim import data
from lmsim.data import load_task
from lmsim.papers.jin2023_regmean import domain_setup, noniid_split

REPO = Path(__file__).resolve().parents[1]
GENRES = ("bc", "bn", "mz", "nw", "tc", "wb")


def paper_pages() -> dict[str, dict]:
    manifest = yaml.safe_load((REPO / "notebooks" / "runs.yml").read_text())
    chapter = next(c for c in manifest["chapters"] if c["slug"] == "jin2023_regmean")
    return {e["name"]: e["paper"] for e in chapter["notebooks"]}


def _ontonotes() -> dict:
    per, gpe, org = (ONTO_TAGS.index(t) for t in ("B-PERSON", "B-GPE", "B-ORG"))
    rows = {split: [] for split in ("train", "validation", "test")}
    for g, genre in enumerate(GENRES):
        for split in rows:
            for i in range(3):
                doc = f"{genre}/src/0{g}/{genre}_{split}_{i}"
                sentences = [(["Ann", "met", "Bob", "in", "Oslo"], [per, 0, per, 0, gpe])]
                sentences.append((["Acme", "grew"], [org, 0]))
                rows[split].append((doc, sentences))
    return onto_splits(rows, list_style=False)


def _token_set(tag_feature) -> dict:
    sentence = (["Ann", "joined", "Acme", "in", "Oslo"], [1, 0, 3, 0, 5])
    features = {"tokens": Sequence(Value("string")), "ner_tags": Sequence(tag_feature)}
    return {
        split: FakeDataset({"tokens": [sentence[0]] * 6, "ner_tags": [sentence[1]] * 6}, features)
        for split in ("train", "validation", "test")
    }


def _ttc() -> dict:
    # tner/ttc: `tags` without a ClassLabel, B-LOC 0, B-ORG 1, B-PER 2, ..., O 6
    features = {"tokens": Sequence(Value("string")), "tags": Sequence(Value("int32"))}
    tweet = (["Ann", "at", "Acme"], [2, 6, 1])
    return {
        split: FakeDataset({"tokens": [tweet[0]] * 6, "tags": [tweet[1]] * 6}, features)
        for split in ("train", "validation", "test")
    }


def _unified(path: Path, sources) -> None:
    rows = []
    for source in sources:
        for i in range(40):
            emotion = data.EMOTIONS[i % 6]
            values = {e: (1 if e == emotion else 0) for e in data.EMOTIONS[:7]}
            rows.append(unified_row(len(rows), source, values, split=None))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """Fake hub sets for every name the paper profile uses; the working directory is a
    notebook folder two levels below a root holding data/unified-dataset.jsonl."""
    rng = np.random.default_rng(0)
    sets = {("glue", t): glue_dataset(t, rng) for t in data.GLUE_TASKS}
    sets[("conll2012_ontonotesv5", "english_v4")] = _ontonotes()
    sets[("conll2003", None)] = _token_set(ClassLabel(CONLL_TAGS))
    sets[("tner/ttc", None)] = _ttc()
    install_fake_datasets(monkeypatch, sets)
    folder = tmp_path / "notebooks" / "jin2023_regmean"
    folder.mkdir(parents=True)
    sources = [*data.EMOTION_SOURCES_IN_DOMAIN, *data.EMOTION_SOURCES_OOD]
    _unified(tmp_path / "data" / "unified-dataset.jsonl", sources)
    monkeypatch.chdir(folder)


@pytest.mark.parametrize("page", ["01_merging", "02_merging_distilbert"])
def test_paper_profile_names_load_and_agree(hub, page):
    params = paper_pages()[page]
    assert params["base"] == {"01_merging": "roberta-base"}.get(page, "distilbert-base-uncased")
    assert sorted(params["noniid_tasks"]) == sorted(data.GLUE_TASKS)
    names = {*params["noniid_tasks"], *params["domain_setups"], *params["extra_tasks"]}
    assert set(params["task_merges"]) <= names and len(params["task_merges"]) == 8
    assert params["focus_setup"] in params["domain_setups"]
    metrics = {}
    for t, spec in params["noniid_tasks"].items():
        task = load_task(spec, seed=0)
        split = noniid_split(task, 2, seed=0)
        assert len(split.a[1]) == len(split.b[1]) == 2
        metrics[t] = task.metric
    assert metrics["cola"] == "matthews" and metrics["stsb"] == "pearson"
    assert {metrics[t] for t in ("sst2", "mrpc", "mnli", "qnli", "qqp", "rte")} == {"accuracy"}
    setups = {  # as the page builds them: every in-domain set with a validation part
        s: domain_setup(
            s, spec, n_train=params["n_domain_train"] or None, n_test=None,
            n_validation=params["n_validation"], seed=0,
        )
        for s, spec in params["domain_setups"].items()
    }  # fmt: skip
    assert all(t.validation[1] for s in setups.values() for t in s.domains.values())
    emotion, ner = setups["emotion"], setups["ner"]
    assert len(emotion.domains) == 5 and len(emotion.ood) == 5
    assert {t.kind for t in emotion.domains.values()} == {"multi_label"}
    assert {t.label_names for t in emotion.domains.values()} == {tuple(data.EMOTIONS)}
    for task in emotion.ood.values():
        assert task.validation[1] and task.test[1]
        assert set(task.scored_labels) <= {"anger", "disgust", "fear", "joy", "sadness", "surprise"}
    assert list(ner.domains) == list(GENRES) and list(ner.ood) == ["conll", "twitter"]
    tags = {t.label_names for t in ner.domains.values()}
    assert tags == {("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")}
    bc = ner.domains["bc"]
    assert [bc.label_names[i] for i in bc.train[1][0]] == ["B-PER", "O", "B-PER", "O", "B-LOC"]
    assert all(t.validation[1] and t.test[1] for t in ner.ood.values())
