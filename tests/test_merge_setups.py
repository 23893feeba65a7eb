"""The merging chapter's setups: partitions, domains, holdouts, Tables 2-3 and cached stats."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lmsim.data import keyword_domains, noniid_partitions
from lmsim.merge_setups import (
    DomainSetup,
    cap,
    domain_setup,
    domain_tables,
    holdout_split,
    mean_logits,
    noniid_split,
    pool,
    published_stats,
    relative_change,
)
from lmsim.tasks import Task


def _task(n_train=120, n_test=40, n_labels=3, seed=0, kind="single_label", name="toy"):
    rng = np.random.default_rng(seed)
    words = ["coffee", "tea", "dog", "cat", "candy", "bread", "rice", "soup"]
    texts = lambda n: [" ".join(rng.choice(words, 4)) for _ in range(n)]  # noqa: E731
    if kind == "regression":
        labels = lambda n: [float(x) for x in rng.uniform(0, 5, n)]  # noqa: E731
        names = ("score",)
        metric = "pearson"
    else:
        labels = lambda n: [int(x) for x in rng.integers(0, n_labels, n)]  # noqa: E731
        names = tuple(f"c{i}" for i in range(n_labels))
        metric = "accuracy"
    return Task(
        name=name,
        kind=kind,
        label_names=names,
        metric=metric,
        train=(texts(n_train), labels(n_train)),
        test=(texts(n_test), labels(n_test)),
    )


def test_cap_and_pool():
    split = (["a", "b", "c"], [0, 1, 0])
    assert cap(split, 2) == (["a", "b"], [0, 1])
    assert cap(split, None) == (["a", "b", "c"], [0, 1, 0])
    assert pool(split, cap(split, 1)) == (["a", "b", "c", "a"], [0, 1, 0, 0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noniid_split_equals_the_partitions_and_reports_the_key_share(seed):
    task = _task(n_train=400, seed=seed)
    split = noniid_split(task, 100, seed=seed)
    a, b, key = noniid_partitions(task.train[1], 100, seed=seed)
    assert split.a == ([task.train[0][i] for i in a], [task.train[1][i] for i in a])
    assert split.b == ([task.train[0][i] for i in b], [task.train[1][i] for i in b])
    assert split.key == task.label_names[key]
    assert split.key_share_a == pytest.approx(np.mean(np.asarray(split.a[1]) == key))
    assert split.key_share_a > split.key_share_b


def test_noniid_split_bins_regression_scores_and_refuses_token_tasks():
    task = _task(n_train=400, kind="regression")
    split = noniid_split(task, 50, seed=0)
    assert split.key.startswith("score ≈ ")
    assert all(isinstance(y, float) for y in split.a[1])
    key = int(split.key.split("≈ ")[1])
    assert split.key_share_a == pytest.approx(np.mean(np.rint(split.a[1]) == key))
    words = Task(
        name="ner",
        kind="token",
        label_names=("O", "B-X"),
        metric="entity_f1",
        train=([["a", "b"]] * 4, [[0, 1]] * 4),
        test=([["a"]], [[0]]),
    )
    with pytest.raises(ValueError, match="single-label or regression"):
        noniid_split(words, 1)


@pytest.mark.parametrize("seed", [0, 1])
def test_holdout_split_is_a_disjoint_seeded_cover_of_the_test_part(seed):
    task = _task(n_test=41, seed=seed)
    out = holdout_split(task, seed=seed)
    assert len(out.validation[1]) + len(out.test[1]) == 41
    assert abs(len(out.validation[1]) - len(out.test[1])) <= 1
    pairs = list(zip(*task.test))
    assert sorted(map(str, zip(*out.validation))) + sorted(map(str, zip(*out.test))) != []
    assert sorted(map(str, pairs)) == sorted(
        map(str, list(zip(*out.validation)) + list(zip(*out.test)))
    )
    assert holdout_split(task, seed=seed).validation == out.validation  # deterministic
    assert holdout_split(out) is out  # a validation part is kept


def test_keyword_setup_matches_the_rows_of_each_domain_in_order():
    task = _task(n_train=200, n_test=80)
    keywords = {"drinks": ["coffee", "tea"], "pets": ["dog", "cat"]}
    spec = {"set": "smoke", "keywords": keywords, "other": "pantry", "ood": ["pets"]}
    import lmsim.merge_setups._setups as ms

    original = ms.load_task
    ms.load_task = lambda name, seed=0: task
    try:
        setup = domain_setup("sentiment", spec, n_train=30, n_test=10)
    finally:
        ms.load_task = original
    assert list(setup.domains) == ["drinks", "pantry"] and list(setup.ood) == ["pets"]
    train_of = keyword_domains(task.train[0], keywords, "pantry")
    test_of = keyword_domains(task.test[0], keywords, "pantry")
    for d, t in setup.domains.items():
        rows = [i for i, x in enumerate(train_of) if x == d][:30]
        assert t.train == ([task.train[0][i] for i in rows], [task.train[1][i] for i in rows])
        rows = [i for i, x in enumerate(test_of) if x == d][:10]
        assert t.test == ([task.test[0][i] for i in rows], [task.test[1][i] for i in rows])
    pets = setup.ood["pets"]
    rows = [i for i, x in enumerate(train_of) if x == "pets"][:10]
    assert pets.validation == ([task.train[0][i] for i in rows], [task.train[1][i] for i in rows])
    pooled = setup.pooled()
    assert pooled.train == pool(*(t.train for t in setup.domains.values()))


def test_domain_setup_errors_name_the_problem():
    with pytest.raises(ValueError, match="`keywords`.*or `domains`"):
        domain_setup("x", {"sets": {}})
    import lmsim.merge_setups._setups as ms

    original = ms.load_task
    ms.load_task = lambda name, seed=0: _task()
    try:
        with pytest.raises(ValueError, match="not domains"):
            domain_setup("x", {"set": "s", "keywords": {"a": ["tea"]}, "ood": ["b"]})
    finally:
        ms.load_task = original


def test_relative_change_and_mean_logits():
    assert relative_change(0.45, 0.5) == pytest.approx(-10.0)
    assert relative_change(-0.2, -0.4) == pytest.approx(50.0)
    assert np.isnan(relative_change(0.3, 0.0))
    a, b = np.ones((2, 3)), np.zeros((2, 3))
    np.testing.assert_allclose(mean_logits([a, b]), np.full((2, 3), 0.5))
    tok = mean_logits(
        [[np.ones((2, 3)), np.ones((1, 3))], [np.zeros((2, 3)), np.full((1, 3), 3.0)]]
    )
    np.testing.assert_allclose(tok[0], np.full((2, 3), 0.5))
    np.testing.assert_allclose(tok[1], np.full((1, 3), 2.0))


class _TableScorer:
    """Scores from a table: (model id, task id) -> value; ensembles the mean of members + 1."""

    def __init__(self, value):
        self.value = value

    def score(self, model, task, part="test", type_map=None, *, name=None):
        return self.value(model, task)

    def ensemble(self, named, task, part="test", type_map=None):
        return np.mean([self.value(m, task) for m in named.values()]) + 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_domain_tables_equal_a_naive_computation(seed):
    rng = np.random.default_rng(seed)
    domains = {d: _task(seed=i, name=d) for i, d in enumerate(["x", "y", "z"])}
    ood = {o: _task(seed=10 + i, name=o) for i, o in enumerate(["p", "q"])}
    setup = DomainSetup("s", domains, ood)
    models = {d: object() for d in domains}
    merged = {"Simple": object(), "Fisher": object(), "RegMean": object()}
    mtl = object()
    table = {}

    def value(model, task):
        key = (id(model), id(task))
        return table.setdefault(key, float(rng.uniform()))

    t2, t3 = domain_tables(setup, models, merged, mtl, _TableScorer(value))
    each_in = [np.mean([value(models[m], domains[d]) for d in domains]) for m in domains]
    assert t2["Avg. f1..N"] == pytest.approx(np.mean(each_in))
    assert t2["Best f1..N"] == pytest.approx(np.max(each_in))
    ens = np.mean([np.mean([value(models[m], domains[d]) for m in domains]) + 1 for d in domains])
    assert t2["Ensemble"] == pytest.approx(ens)
    for label, m in merged.items():
        assert t2[label] == pytest.approx(np.mean([value(m, t) for t in domains.values()]))
    assert t2["Domain-specific"] == pytest.approx(
        np.mean([value(models[d], domains[d]) for d in domains])
    )
    assert t2["MTL"] == pytest.approx(np.mean([value(mtl, t) for t in domains.values()]))
    assert list(t2) == [
        "Avg. f1..N",
        "Best f1..N",
        "Ensemble",
        "Simple",
        "Fisher",
        "RegMean",
        "Domain-specific",
        "MTL",
    ]
    for o, task in ood.items():
        each = [value(models[m], task) for m in domains]
        assert t3[o]["Avg. f1..N"] == pytest.approx(np.mean(each))
        assert t3[o]["Best f1..N"] == pytest.approx(np.max(each))
        assert t3[o]["RegMean"] == pytest.approx(value(merged["RegMean"], task))
        assert t3[o]["MTL"] == pytest.approx(value(mtl, task))
        assert "Domain-specific" not in t3[o]


def test_published_stats_compute_once_read_lazily_and_recover_from_corruption(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"layer.a": torch.eye(3, dtype=torch.float64) * 2, "layer.b": torch.ones(2, 2)}

    first = published_stats("grams", "m-1", compute, {"model": "m"}, root=tmp_path)
    again = published_stats("grams", "m-1", compute, root=tmp_path)
    assert len(calls) == 1
    torch.testing.assert_close(again["layer.a"], torch.eye(3, dtype=torch.float64) * 2)
    assert set(first) == {"layer.a", "layer.b"}
    assert not list(tmp_path.glob(".*"))
    path = tmp_path / "m-1.grams.safetensors"
    path.write_bytes(b"not a safetensors file")
    with pytest.warns(UserWarning, match="corrupt|computing them again"):
        out = published_stats("grams", "m-1", compute, root=tmp_path)
    assert len(calls) == 2 and set(out) == {"layer.a", "layer.b"}
    assert (tmp_path / "m-1.grams.safetensors.corrupt").exists()
    fishers = published_stats("fishers", "m-1", lambda: {"w": torch.rand(4)}, root=tmp_path)
    assert fishers["w"].shape == (4,)
    with pytest.raises(ValueError, match="'grams' or 'fishers'"):
        published_stats("moments", "m-1", compute, root=tmp_path)


def test_published_stats_failed_compute_leaves_no_file(tmp_path):
    def boom():
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):
        published_stats("grams", "m-2", boom, root=tmp_path)
    assert not list(tmp_path.iterdir())


def test_task_kinds_are_one_list():
    from lmsim.encoding import KINDS as encoding_kinds
    from lmsim.tasks import KINDS as task_kinds

    assert tuple(encoding_kinds) == tuple(task_kinds)


def test_named_setup_relabels_ner_domains_to_the_ood_types():
    from lmsim.tasks import ONTONOTES_TO_CONLL

    spec = {
        "domains": {"a": "smoke-ner#a", "b": "smoke-ner#b"},
        "ood": {"conll": "smoke-ner#conll"},
        "relabel": ONTONOTES_TO_CONLL,
    }
    setup = domain_setup("ner", spec, n_train=20, n_test=10)
    names = setup.domains["a"].label_names
    assert (
        names
        == setup.domains["b"].label_names
        == ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
    )
    plain = domain_setup("ner", {**spec, "relabel": None}, n_train=20, n_test=10)
    assert "B-PERSON" in plain.domains["a"].label_names
    assert setup.domains["a"].train[0] == plain.domains["a"].train[0]  # same sentences
    conll = setup.ood["conll"]
    assert len(conll.validation[1]) == 10 and len(conll.test[1]) == 10
