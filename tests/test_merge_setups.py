"""The merging chapter's setups: partitions, domains, holdouts, Tables 2-3 and cached stats."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import torch

from lmsim.data import keyword_domains, noniid_partitions
from lmsim.merge import SingularGramWarning
from lmsim.papers.jin2023_regmean import (
    DomainSetup,
    alpha_one_check,
    best_on_validation,
    cap,
    domain_setup,
    domain_tables,
    greedy_order,
    holdout_split,
    mean_logits,
    noniid_split,
    ood_task,
    pairwise_alpha_sweep,
    pool,
    published_stats,
    relative_change,
    validation_scores,
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
    import lmsim.papers.jin2023_regmean._setups as ms

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
    ms.load_task = lambda name, seed=0: task
    try:
        scored = domain_setup("s", {**spec, "metric": "balanced_accuracy"}, n_train=30, n_test=10)
    finally:
        ms.load_task = original
    for part in ("domains", "ood", "ood_whole"):
        for d, t in getattr(scored, part).items():
            assert t.metric == "balanced_accuracy"
            assert (t.train, t.test, t.validation) == (
                getattr(setup, part)[d].train, getattr(setup, part)[d].test,
                getattr(setup, part)[d].validation,
            )  # fmt: skip
    assert scored.pooled().metric == "balanced_accuracy"


def test_domain_setup_errors_name_the_problem():
    with pytest.raises(ValueError, match="`keywords`.*or `domains`"):
        domain_setup("x", {"sets": {}})
    import lmsim.papers.jin2023_regmean._setups as ms

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


# ====================================================================== selection on validation
class _PartScorer:
    """Scores from a table keyed by (model id, task id, part); counts which parts were read."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.table, self.parts = {}, []

    def value(self, model, task, part="test"):
        return self.table.setdefault((id(model), id(task), part), float(self.rng.uniform()))

    def score(self, model, task, part="test", type_map=None, *, name=None):
        self.parts.append(part)
        return self.value(model, task, part)

    def ensemble(self, named, task, part="test", type_map=None):
        return float(np.mean([self.value(m, task, part) for m in named.values()]))


def _with_validation(task, n=10):
    return task.with_parts(validation=(task.train[0][:n], task.train[1][:n]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_selection_uses_validation_parts_only(seed):
    tasks = [_with_validation(_task(seed=i, name=f"t{i}")) for i in range(3)]
    named = {f"m{i}": object() for i in range(4)}
    scorer = _PartScorer(seed)
    scores = validation_scores(scorer, named, tasks)
    assert set(scorer.parts) == {"validation"}
    for n, m in named.items():
        assert scores[n] == pytest.approx(
            np.mean([scorer.value(m, t, "validation") for t in tasks])
        )
    order = greedy_order(scorer, named, tasks)
    assert order == sorted(named, key=lambda n: -scores[n])
    assert best_on_validation(scorer, named, tasks) == order[0]
    # Ties keep the given order.
    flat = _PartScorer(seed)
    flat.value = lambda model, task, part="test": 0.5
    assert greedy_order(flat, named, tasks) == list(named)
    assert best_on_validation(flat, named, tasks) == "m0"
    with pytest.raises(ValueError, match="validation parts.*n_validation"):
        validation_scores(scorer, named, [_task()])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_domain_tables_on_validation_and_whole_ood_sets(seed):
    domains = {d: _with_validation(_task(seed=i, name=d)) for i, d in enumerate("xyz")}
    ood = {"p": holdout_split(_task(seed=10, name="p"), seed=seed)}
    whole = {"p": ood["p"].with_parts(test=pool(ood["p"].validation, ood["p"].test))}
    setup = DomainSetup("s", domains, ood, ood_whole=whole)
    models = {d: object() for d in domains}
    merged = {"Simple": object(), "RegMean": object()}
    scorer = _PartScorer(seed)
    t2, t3 = domain_tables(
        setup, models, merged, object(), scorer, best_on="validation", ood_part="whole"
    )
    val = [
        np.mean([scorer.value(models[m], t, "validation") for t in domains.values()])
        for m in domains
    ]
    best = list(domains)[int(np.argmax(val))]
    test_mean = np.mean([scorer.value(models[best], t) for t in domains.values()])
    assert t2["Best f1..N"] == pytest.approx(test_mean)
    # Table 3: the same individual, on the whole OOD set (not its test half).
    assert t3["p"]["Best f1..N"] == pytest.approx(scorer.value(models[best], whole["p"]))
    assert t3["p"]["RegMean"] == pytest.approx(scorer.value(merged["RegMean"], whole["p"]))
    assert (id(merged["RegMean"]), id(ood["p"]), "test") not in scorer.table
    with pytest.raises(ValueError, match="`best_on` must be"):
        domain_tables(setup, models, merged, object(), scorer, best_on="oracle")
    with pytest.raises(ValueError, match="`ood_part` must be"):
        domain_tables(setup, models, merged, object(), scorer, ood_part="half")


def test_keyword_setup_validation_rows_follow_the_trained_rows(monkeypatch):
    import lmsim.papers.jin2023_regmean._setups as ms

    task = _task(n_train=300, n_test=80)
    monkeypatch.setattr(ms, "load_task", lambda name, seed=0: task)
    keywords = {"drinks": ["coffee", "tea"], "pets": ["dog", "cat"]}
    spec = {"set": "smoke", "keywords": keywords, "other": "pantry", "ood": ["pets"]}
    setup = domain_setup("s", spec, n_train=5, n_test=10, n_validation=8)
    train_of = keyword_domains(task.train[0], keywords, "pantry")
    for d, t in setup.domains.items():
        rows = [i for i, x in enumerate(train_of) if x == d]
        assert t.train == (
            [task.train[0][i] for i in rows[:5]],
            [task.train[1][i] for i in rows[:5]],
        )
        assert t.validation == (
            [task.train[0][i] for i in rows[5:13]],
            [task.train[1][i] for i in rows[5:13]],
        )
    assert setup.ood_whole["pets"] is setup.ood["pets"]  # its validation is training rows
    with pytest.raises(ValueError, match="pass `n_train`"):
        domain_setup("s", spec, n_test=10, n_validation=12)
    with pytest.raises(ValueError, match="no validation examples"):
        domain_setup("s", spec, n_train=1000, n_test=10, n_validation=12)
    with pytest.raises(ValueError, match="`n_validation` must be a positive int"):
        domain_setup("s", spec, n_train=30, n_validation=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_ood_task_validation_and_scored_parts_are_disjoint(seed):
    base = _task(seed=seed, n_train=30, n_test=40)
    texts = [f"text {i}" for i in range(40)]  # unique texts: disjoint by value means by row
    test_only = dataclasses.replace(base, train=([], []), test=(texts, base.test[1]))
    half = ood_task(test_only, n_test=None, seed=seed)  # no train split: a half of the test
    assert sorted(half.validation[0] + half.test[0]) == sorted(texts)
    assert not set(half.validation[0]) & set(half.test[0])
    trained = ood_task(dataclasses.replace(base, test=(texts, base.test[1])), n_test=25)
    assert trained.validation == cap(base.train, 25)  # the unused training split validates
    assert trained.test == cap((texts, base.test[1]), 25)  # the whole (capped) test part
    assert not set(trained.validation[0]) & set(trained.test[0])
    own = _with_validation(base, n=10)
    assert ood_task(own, n_test=5).validation == cap(own.validation, 5)


def test_named_setup_validation_and_whole_ood_sets(monkeypatch):
    import lmsim.papers.jin2023_regmean._setups as ms

    own = _with_validation(_task(seed=1, name="own"), n=20)
    plain = _task(seed=2, name="plain")
    heldout = _task(seed=3, n_test=30, name="heldout")
    sets = {"own": own, "plain": plain, "heldout": heldout}
    monkeypatch.setattr(ms, "load_task", lambda name, seed=0: sets[name])
    spec = {"domains": {"a": "own", "b": "plain"}, "ood": {"h": "heldout", "o": "own"}}
    setup = domain_setup("s", spec, n_train=50, n_test=12, n_validation=8)
    assert setup.domains["a"].validation == cap(own.validation, 8)  # its own split
    assert setup.domains["b"].validation == (plain.train[0][50:58], plain.train[1][50:58])
    h = setup.ood["h"]  # no validation split: its (never trained on) training split validates
    assert h.validation == cap(heldout.train, 12) and h.test == cap(heldout.test, 12)
    assert setup.ood_whole["h"] is h  # scored on the test part only
    assert setup.ood_whole["o"] is setup.ood["o"]  # a set with a validation split: its test part
    plain_only = {"domains": {"a": "plain", "b": "plain"}}
    with pytest.raises(ValueError, match="no validation examples"):
        domain_setup("s", plain_only, n_test=12, n_validation=8)


# ====================================================================== α sweep
def test_pairwise_alpha_sweep_and_the_alpha_one_check():
    effect = {0.1: 0.60, 0.5: 0.62, 0.9: 0.61, 1.0: 0.30}
    merged = []

    def merge(names, alpha):
        merged.append((tuple(names), alpha))
        warnings.warn("the pooler's Gram sum is singular", SingularGramWarning, stacklevel=2)
        return (tuple(names), alpha)

    def score(model, name):
        (pair, alpha) = model
        return effect[alpha] + 0.01 * pair.index(name) + 0.001 * len(name)

    pairs = [("a", "b"), ("a", "cc"), ("b", "cc")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a pair's singular Grams are expected: not repeated
        sweep = pairwise_alpha_sweep(pairs, sorted(effect), merge, score)
    assert len(merged) == len(pairs) * len(effect) and len(sweep) == 2 * len(merged)
    assert list(sweep.columns) == ["pair", "alpha", "model", "score"]
    row = sweep[(sweep["pair"] == "a+cc") & (sweep["alpha"] == 0.5) & (sweep["model"] == "cc")]
    assert float(row["score"].iloc[0]) == pytest.approx(0.62 + 0.01 + 0.002)
    check = alpha_one_check(sweep)
    assert check["alpha"] == 0.5
    assert check["drop"] == pytest.approx(0.30 - 0.62)
    assert len(check["differences"]) == 6
    np.testing.assert_allclose(check["differences"], 0.30 - 0.62)
    with pytest.raises(ValueError, match="no α = 1"):
        alpha_one_check(sweep[sweep["alpha"] < 1])
    with pytest.raises(ValueError, match="no α in"):
        alpha_one_check(sweep[sweep["alpha"] == 1.0])
