"""The RegMean page's evidence helpers: paired intervals over test examples and seeds, the
merge lab (seeds, statistics, λ on validation), App. D's permutation diagnostics, claims."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lmsim.claims import Claims
from lmsim.papers.jin2023_regmean import (
    PAPER_CLAIMS,
    Fixed,
    MergeLab,
    Scorer,
    activation_similarity,
    constant_run,
    diagonal_match,
    finetune_runs,
    learning_checks,
    learning_failures,
    majority_floors,
    majority_run,
    paired_difference,
    report_claims,
    seed_name,
    seed_notes,
    settings_for,
    side_scores,
    unit_activations,
    unit_run,
    weight_distances,
)
from lmsim.stats import Estimate, paired_bootstrap, with_seed_spread
from lmsim.tasks import Task, baseline_score, score_predictions

SEEDS = [0, 1, 2]


METRICS = {"single_label": "accuracy", "matthews": "matthews", "regression": "pearson",
           "multi_label": "macro_f1", "token": "entity_f1"}  # fmt: skip


def _task(kind, n=30, seed=0, name="t"):
    rng = np.random.default_rng(seed)
    words = ["coffee", "tea", "dog", "cat", "candy", "bread"]
    texts = [" ".join(rng.choice(words, 3)) for _ in range(n)]
    metric = METRICS[kind]
    if kind in ("single_label", "matthews"):
        kind, labels, names = (
            "single_label",
            [int(x) for x in rng.integers(0, 3, n)],
            ("a", "b", "c"),
        )
    elif kind == "regression":
        labels, names = [float(x) for x in rng.uniform(0, 5, n)], ("score",)
    elif kind == "multi_label":
        labels, names = (
            [[int(v) for v in row] for row in rng.integers(0, 2, (n, 3))],
            ("x", "y", "z"),
        )
    else:
        texts = [[str(w) for w in rng.choice(words, 4)] for _ in range(n)]
        names = ("O", "B-PER", "I-PER", "B-LOC")
        labels = [[int(v) for v in rng.choice([0, 0, 1, 2, 3], 4)] for _ in range(n)]
    return Task(name=name, kind=kind, label_names=names, metric=metric, train=(texts, labels),
                test=(texts, labels))  # fmt: skip


def _predictions(task, rng):
    n = len(task.test[1])
    if task.kind == "single_label":
        return rng.integers(0, task.n_labels, n)
    if task.kind == "regression":
        return rng.uniform(0, 5, n)
    if task.kind == "multi_label":
        return rng.integers(0, 2, (n, task.n_labels))
    return [list(rng.choice(task.label_names, len(x))) for x in task.test[0]]


@pytest.mark.parametrize("kind", list(METRICS))
@pytest.mark.parametrize("seed", SEEDS)
def test_side_scores_are_each_tasks_metric_averaged_over_tasks(kind, seed):
    rng = np.random.default_rng(seed)
    tasks = [_task(kind, seed=seed + i, name=f"t{i}") for i in range(2)]
    runs = [Fixed({id(t): _predictions(t, rng) for t in tasks}) for _ in range(3)]
    got = side_scores(None, runs, tasks)
    expected = [np.mean([score_predictions(t, r.by_task[id(t)]) for t in tasks]) for r in runs]
    np.testing.assert_allclose(got, expected, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_paired_difference_is_a_paired_bootstrap_of_the_seed_means(seed):
    """Accuracy on two tasks: the library's interval equals a naive paired bootstrap of
    the per-example correctness (rows pooled over tasks, both sides resampled together)."""
    rng = np.random.default_rng(seed)
    tasks = [_task("single_label", n=25, seed=seed + i, name=f"t{i}") for i in range(2)]
    a = [Fixed({id(t): _predictions(t, rng) for t in tasks}) for _ in range(3)]
    b = [Fixed({id(t): _predictions(t, rng) for t in tasks}) for _ in range(2)]
    got = paired_difference(None, a, b, tasks, n_boot=300, seed=seed)
    gold = np.concatenate([np.asarray(t.test[1]) for t in tasks])
    task_of = np.concatenate([np.full(len(t.test[1]), i) for i, t in enumerate(tasks)])

    def correct(run):
        return np.concatenate([run.by_task[id(t)] for t in tasks]) == gold

    def stat(rows):  # rows: (n, 2) correctness and task index; mean over tasks of accuracy
        return np.mean([rows[rows[:, 1] == i, 0].mean() for i in range(len(tasks))])

    ra = np.stack([np.column_stack([correct(r), task_of]) for r in a])
    rb = np.stack([np.column_stack([correct(r), task_of]) for r in b])
    naive = paired_bootstrap(ra, rb, stat, seeds="mean", n_boot=300, seed=seed)
    assert isinstance(got, Estimate)
    assert got.estimate == pytest.approx(naive.estimate, abs=1e-12)
    assert (got.low, got.high) == pytest.approx((naive.low, naive.high), abs=1e-12)
    assert got.n == sum(len(t.test[1]) for t in tasks)
    assert "seeds (3 vs 2" in got.unit


@pytest.mark.parametrize("seed", SEEDS)
def test_paired_difference_resamples_a_repeated_tasks_examples_together(seed):
    """A domain in two pairs (the same task object twice, Fig. 3): each draw of one of its
    examples takes both copies, as a naive bootstrap over (task, example) groups does; the
    distinct task's examples stay their own units."""
    rng = np.random.default_rng(seed)
    shared, other = (_task("single_label", n=20, seed=seed + i, name=f"t{i}") for i in range(2))
    tasks = [shared, other, shared]
    a = [Fixed([_predictions(t, rng) for t in tasks]) for _ in range(2)]
    b = [Fixed([_predictions(t, rng) for t in tasks]) for _ in range(2)]
    got = paired_difference(None, a, b, tasks, n_boot=300, seed=seed)
    gold = np.concatenate([np.asarray(t.test[1]) for t in tasks])
    slot = np.repeat(np.arange(3), 20)

    def rows(run):
        return np.column_stack([np.concatenate(run.by_task) == gold, slot])

    def stat(r):  # mean over the three slots of each slot's accuracy
        return np.mean([r[r[:, 1] == i, 0].mean() for i in range(3)])

    example = np.tile(np.arange(20), 3)
    groups = np.where(slot == 1, 1000 + example, example)  # slots 0 and 2: one example
    naive = paired_bootstrap(np.stack([rows(r) for r in a]), np.stack([rows(r) for r in b]),
                             stat, groups=groups, seeds="mean", n_boot=300, seed=seed)  # fmt: skip
    assert got.estimate == pytest.approx(naive.estimate, abs=1e-12)
    assert (got.low, got.high) == pytest.approx((naive.low, naive.high), abs=1e-12)
    assert got.n == 40  # distinct examples, not 60 rows
    assert "repeats grouped" in got.unit
    distinct = paired_difference(None, a, b, [shared, other, _copy(shared)], n_boot=300, seed=seed)
    assert distinct.n == 60 and "grouped" not in distinct.unit


def _copy(task):
    return Task(name=task.name, kind=task.kind, label_names=task.label_names,
                metric=task.metric, train=task.train, test=task.test)  # fmt: skip


@pytest.mark.parametrize("seed", SEEDS)
def test_paired_difference_over_seeds_widens_by_the_per_seed_differences(seed):
    """With n_seeds, runs are grouped seed by seed (A: two runs per seed, a floor; B: one
    merge per seed, or one shared baseline); the per-seed differences are computed naively
    from each run's score, and the interval is with_seed_spread of the examples' bootstrap."""
    rng = np.random.default_rng(seed)
    tasks = [_task("single_label", n=25, seed=seed + i, name=f"t{i}") for i in range(2)]
    a = [Fixed({id(t): _predictions(t, rng) for t in tasks}) for _ in range(6)]
    b = [Fixed({id(t): _predictions(t, rng) for t in tasks}) for _ in range(3)]
    over = paired_difference(None, a, b, tasks, n_boot=200, seed=seed)
    got = paired_difference(None, a, b, tasks, n_boot=200, seed=seed, n_seeds=3)
    score = side_scores(None, [*a, *b], tasks)
    per_seed = [np.mean(score[2 * k : 2 * k + 2]) - score[6 + k] for k in range(3)]
    assert got.values == pytest.approx(per_seed, abs=1e-12)
    assert got.estimate == pytest.approx(over.estimate, abs=1e-12)
    expected = with_seed_spread(over, per_seed)
    assert (got.low, got.high) == pytest.approx((expected.low, expected.high), abs=1e-12)
    assert got.low <= over.low and got.high >= over.high
    assert got.unit == "test examples and 3 fine-tuning seeds"
    shared = paired_difference(None, a, b[:1], tasks, n_boot=200, seed=seed, n_seeds=3)
    assert shared.values == pytest.approx([np.mean(score[2 * k : 2 * k + 2]) - score[6]
                                           for k in range(3)], abs=1e-12)  # fmt: skip
    with pytest.raises(ValueError, match="side B has 2 runs"):
        paired_difference(None, a, b[:2], tasks, n_boot=20, n_seeds=3)
    with pytest.raises(ValueError, match="at least 2"):
        paired_difference(None, a, b, tasks, n_boot=20, n_seeds=1)


def test_seed_notes_say_how_many_seeds_each_interval_varies_over():
    tasks = [_task("single_label", n=25, seed=0, name="t0")]
    rng = np.random.default_rng(0)
    runs = [Fixed({id(t): _predictions(t, rng) for t in tasks}) for _ in range(4)]
    est = {
        "fig3_vs_simple:s": paired_difference(
            None, runs[:2], runs[2:], tasks, n_boot=20, n_seeds=2
        ),
        "fig4_vs_simple": paired_difference(None, runs[:1], runs[2:3], tasks, n_boot=20),
    }
    notes = seed_notes(est)
    per_seed = ", ".join(f"{v:+.3f}" for v in est["fig3_vs_simple:s"].values)
    assert notes["fig3_vs_simple:s"].startswith(f"2 seeds, per seed {per_seed}; the interval")
    assert notes["fig4_vs_simple"].startswith("first seed only")


def test_identical_sides_differ_by_exactly_zero_and_constant_run_is_the_baseline():
    tasks = [_task("single_label", seed=3, name="t0"), _task("multi_label", seed=4, name="t1")]
    const = constant_run(tasks)
    for t in tasks:
        assert side_scores(None, [const], [t])[0] == pytest.approx(baseline_score(t))
    d = paired_difference(None, [const], [const], tasks, n_boot=50)
    assert (d.estimate, d.low, d.high) == (0.0, 0.0, 0.0)


def test_unit_run_assembles_one_run_from_pieces_in_order():
    t = _task("single_label", seed=5)
    rng = np.random.default_rng(0)
    p1, p2 = (Fixed({id(t): _predictions(t, rng)}) for _ in range(2))
    run = unit_run(None, [(p1, t), (p2, t)])
    assert side_scores(None, [run], [t, t])[0] == pytest.approx(
        np.mean([score_predictions(t, p.by_task[id(t)]) for p in (p1, p2)])
    )


def test_weight_distances_and_activation_similarity_match_naive_loops():
    rng = np.random.default_rng(0)
    wa, wb = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    naive = np.array([[np.linalg.norm(wa[i] - wb[j]) for j in range(6)] for i in range(6)])
    np.testing.assert_allclose(weight_distances(wa, wb), naive, atol=1e-12)
    za, zb = rng.normal(size=(9, 6)), rng.normal(size=(9, 6))
    naive_c = np.array([[za[:, i] @ zb[:, j] for j in range(6)] for i in range(6)])
    np.testing.assert_allclose(activation_similarity(za, zb), naive_c, atol=1e-12)
    za[:, 2] = 0.0  # a unit never active: similarity 0, not NaN
    cosine = np.array([[za[:, i] @ zb[:, j] / (np.linalg.norm(za[:, i]) * np.linalg.norm(zb[:, j]))
                        if np.linalg.norm(za[:, i]) else 0.0 for j in range(6)] for i in range(6)])  # fmt: skip
    np.testing.assert_allclose(activation_similarity(za, zb, normalize=True), cosine, atol=1e-12)
    # Scaling one unit of B by 100 moves every row's raw maximum to it, not the cosine's.
    big = zb.copy()
    big[:, 0] *= 100
    np.testing.assert_allclose(activation_similarity(za, big, normalize=True), cosine, atol=1e-12)


def test_diagonal_match_finds_identity_and_a_permutation():
    rng = np.random.default_rng(1)
    w = rng.normal(size=(8, 5))
    close = w + 1e-3 * rng.normal(size=w.shape)
    assert diagonal_match(weight_distances(w, close)).mean() == 1.0
    perm = np.roll(np.arange(8), 1)  # no fixed point
    assert diagonal_match(weight_distances(w, close[perm])).mean() == 0.0
    assert diagonal_match(np.eye(3) * 2 + 1, "larger").tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="closer"):
        diagonal_match(np.eye(2), "nearest")


def test_unit_activations_are_gelu_of_the_layer_over_real_tokens():
    from lmsim.models import load_model

    model, tok = load_model("tiny-bert", device="cpu", task="sequence-classification")
    layer = next(n for n, m in model.named_modules() if n.endswith("intermediate.dense"))
    texts = ["the cat sat", "a dog ran far away today"]
    got = unit_activations(model, tok, texts, layer, max_length=16, batch_size=2)
    rows = []
    module = dict(model.named_modules())[layer]
    for text in texts:  # one text at a time: no padding at all
        out = []
        h = module.register_forward_hook(lambda m, i, o, out=out: out.append(o))
        with torch.no_grad():
            model(**tok([text], return_tensors="pt", truncation=True, max_length=16))
        h.remove()
        rows.append(torch.nn.functional.gelu(out[0][0]).double().numpy())
    np.testing.assert_allclose(got, np.concatenate(rows), atol=1e-5)


def test_settings_for_and_seed_names():
    from lmsim.finetune import FinetuneSettings

    s = FinetuneSettings(base="tiny-bert", lr=0.1, epochs=1.0)
    by = {"lr": {"sentiment": 0.2, "sentiment-joint": 0.3}, "epochs": {"emotion": 5.0}}
    assert settings_for(s, "sentiment-joint", by).lr == 0.3
    assert settings_for(s, "sentiment-a", by).lr == 0.2
    assert settings_for(s, "emotion-a", by).epochs == 5.0 and settings_for(s, "x", by) == s
    assert seed_name("m", 0) == "m" and seed_name("m", 2) == "m@s2"


def test_finetune_runs_lab_merges_and_choice_on_validation(tmp_path, monkeypatch):
    """Seeded models train at every seed, the others once; a DH head seed replaces the
    run's; the lab's merges equal merge_models on the same statistics; the choice on
    validation returns the candidate with the best validation score."""
    from lmsim.finetune import FinetuneSettings, load_finetuned
    from lmsim.merge import merge_models

    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    t = _task("single_label", n=24, seed=0)
    t = t.with_parts(validation=t.test)
    train = {"s-a": t.train, "s-b": t.train, "s-joint": t.train, "s-b-dh": t.train}
    home = dict.fromkeys(train, t)
    settings = FinetuneSettings(base="tiny-bert", max_length=8, epochs=1.0, lr=0.01)
    runs = finetune_runs(
        train, home, settings, [0, 1], {}, seeded=lambda n: not n.endswith(("-joint", "-dh")),
        head_seeds={"s-b-dh": 7},
    )  # fmt: skip
    assert sorted(runs) == ["s-a", "s-a@s1", "s-b", "s-b-dh", "s-b@s1", "s-joint"]
    assert runs["s-b-dh"][1].head_seed == 7 and runs["s-a@s1"][1].seed == 1
    models = {n: load_finetuned(p, "cpu")[0] for n, (p, _) in runs.items()}
    tok = load_finetuned(runs["s-a"][0], "cpu")[1]
    lab = MergeLab(tok, {n: train[n.split("@")[0]][0] for n in models}, dict.fromkeys(models,
                   "single_label"), batch_size=8, max_length=8, n_gram_batches=2, n_fisher=6)  # fmt: skip
    for n, (_, cfg) in runs.items():
        lab.add(n, models[n], start=(cfg, t.label_names, t.kind))
    pair = ["s-a", "s-b"]
    merged = lab.merge(pair, "regmean")
    ref = merge_models([models[n] for n in pair], grams=[lab.grams(n) for n in pair], alpha=0.9)[0]
    for p, q in zip(merged.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q)
    assert lab.grams("s-a") is lab.grams("s-a")  # collected once
    scorer = Scorer(tok, 8)
    calls = []

    def validate(model):
        calls.append(model)
        return [0.2, 0.9, 0.5][len(calls) - 1]

    _, chosen = lab.choose_on_validation(pair, "task_arithmetic", {"scaling": [0.1, 0.5, 1]},
                                         validate)  # fmt: skip
    assert chosen == {"scaling": 0.5, "validation": 0.9} and len(calls) == 3
    # The λ grid rescales one merge per other setting; each candidate equals a direct merge.
    for method, extra in (("task_arithmetic", {}), ("ties", {"density": [0.2, 0.5]})):
        seen = []
        lab.choose_on_validation(pair, method, {"scaling": [0.3, 1.0], **extra},
                                 lambda m, seen=seen: seen.append(m) or 0.0)  # fmt: skip
        combos = [(lam, d) for lam in (0.3, 1.0) for d in extra.get("density", [None])]
        for model, (lam, d) in zip(seen, combos):
            kw = {"scaling": lam} | ({"density": d} if d is not None else {})
            direct = lab.merge(pair, method, **kw)
            for p, q in zip(model.parameters(), direct.parameters()):
                torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)
    assert side_scores(scorer, [("s-a", models["s-a"])], [t])[0] == pytest.approx(
        scorer.score(models["s-a"], t, name="s-a")
    )


def test_report_claims_records_every_estimate_with_its_rule():
    claims = Claims("demo", "01_page")
    est = {
        "table2_vs_simple:sentiment": Estimate(0.05, 0.01, 0.09, unit="test examples", n=10),
        "fig5_stable": Estimate(0.0, -0.01, 0.03, unit="test examples", n=10),
    }
    report_claims(claims, est, {"fig5_stable": "3 seeds"})
    by_claim = {c.claim: c for c in claims.records}
    text = PAPER_CLAIMS["table2_vs_simple"].text.format(setup="sentiment")
    assert by_claim[text].verdict == "holds" and by_claim[text].rule == "> 0"
    stable = by_claim[PAPER_CLAIMS["fig5_stable"].text]
    assert stable.verdict == "inconclusive" and "3 seeds" in stable.note
    assert sum(c.verdict == "not run" for c in claims.records) == 2
    report_claims(claims := Claims("demo", "01_page"), {}, paper_profile=True)
    assert sum(c.verdict == "not run" for c in claims.records) == 1
    with pytest.raises(KeyError):
        report_claims(Claims("d", "p"), {"no_such_claim": est["fig5_stable"]})


@pytest.mark.parametrize("seed", SEEDS)
def test_majority_floors_and_run_match_naive_counts(seed):
    rng = np.random.default_rng(seed)
    labels = [int(x) for x in (rng.random(40) < 0.7)]
    texts = [f"w{i}" for i in range(40)]
    task = Task(name="s", kind="single_label", label_names=("neg", "pos"), metric="accuracy",
                train=(texts[:5], [0] * 5), test=(texts, labels))  # fmt: skip
    bal = Task(name="s", kind="single_label", label_names=("neg", "pos"),
               metric="balanced_accuracy", train=(texts[:5], [0] * 5), test=(texts, labels))  # fmt: skip
    table = majority_floors({"acc": task, "bal": bal})
    top = max(set(labels), key=labels.count)
    share = 100 * labels.count(top) / len(labels)
    assert table.loc["acc", "majority class"] == ("neg", "pos")[top]
    assert table.loc["acc", "majority share"] == pytest.approx(share)
    assert table.loc["acc", "floor"] == pytest.approx(share)  # accuracy: the share itself
    assert table.loc["bal", "floor"] == pytest.approx(50.0)  # one class of two recalled
    # The floor's run predicts the test majority (not the training one, here all "neg").
    assert list(majority_run([task]).by_task[id(task)]) == [top] * 40


def test_learning_checks_per_seed_and_pooled_against_the_domains_floor():
    rng = np.random.default_rng(0)
    labels = [int(x) for x in (rng.random(60) < 0.75)]
    texts = [f"w{i}" for i in range(60)]
    task = Task(name="d", kind="single_label", label_names=("neg", "pos"),
                metric="balanced_accuracy", train=(texts, labels), test=(texts, labels))  # fmt: skip
    gold = np.asarray(labels)
    good = [Fixed({id(task): np.where(rng.random(60) < 0.9, gold, 1 - gold)}) for _ in range(3)]
    majority = [Fixed({id(task): np.ones(60, dtype=int)}) for _ in range(3)]
    checks = learning_checks(None, {"good": good, "flat": majority}, {"good": task, "flat": task},
                             n_boot=200)  # fmt: skip
    for run, est in zip(good, checks["good"]["per_seed"]):
        naive = score_predictions(task, run.by_task[id(task)]) - 0.5
        assert est.estimate == pytest.approx(naive)
    assert checks["good"]["pooled"].estimate == pytest.approx(
        np.mean([e.estimate for e in checks["good"]["per_seed"]])
    )
    assert checks["flat"]["pooled"].estimate == 0.0
    failing = learning_failures(checks)
    assert len(failing) == 1 and failing[0].startswith("flat: +0.000")


def test_report_claims_roles_prerequisites_and_untestable_setups():
    claims = Claims("demo", "01_page")
    good = Estimate(0.05, 0.01, 0.09, unit="test examples", n=10)
    est = {
        "individuals_learn:sentiment/drugs": Estimate(0.0, -0.02, 0.02, unit="test examples", n=9),
        "table2_vs_simple:sentiment": good,
        "beyond_ta:sentiment": good,
        "fig5_stable": good,
        "table1_vs_simple": good,
        "fig7_weights:sentiment": Estimate(0.95, 0.93, 0.97, unit="units", n=10),
    }
    groups = {"individuals_learn:sentiment/drugs": {"seed 0": good, "seed 1": est["fig5_stable"]}}
    report_claims(claims, est, {"fig5_stable": "first seed only; x"}, groups=groups,
                  untestable={"sentiment": "drugs: +0.000"}, focus_setup="sentiment")  # fmt: skip
    by = {c.claim: c for c in claims.records}
    learn = by[PAPER_CLAIMS["individuals_learn"].text.format(setup="sentiment/drugs")]
    assert learn.role == "method" and learn.verdict != "holds"
    t2 = by[PAPER_CLAIMS["table2_vs_simple"].text.format(setup="sentiment")]
    assert t2.verdict == "not testable here" and "drugs: +0.000" in t2.note and t2.role == "paper"
    assert by[PAPER_CLAIMS["beyond_ta"].text.format(setup="sentiment")].role == "beyond"
    stable = by[PAPER_CLAIMS["fig5_stable"].text + " (first seed only)"]
    assert stable.verdict == "not testable here"  # the focus setup's
    assert by[PAPER_CLAIMS["table1_vs_simple"].text].verdict == "holds"  # not a domain claim
    fig7 = by[PAPER_CLAIMS["fig7_weights"].text.format(setup="sentiment")]
    assert fig7.verdict == "holds"  # App. D needs models that moved, not models that learn
    assert all(c.role for c in claims.records)


def test_input_lengths_count_words_tokens_and_the_share_cut():
    from lmsim.papers.jin2023_regmean import input_lengths

    def tokenizer(text, truncation=False, verbose=True):  # a token per character, [CLS], [SEP]
        assert not truncation and not verbose
        return {"input_ids": [0] * (len(text) + 2)}

    texts = ["ab cd", "abcdefgh", "a b c d e f"]
    task = Task(name="t", kind="single_label", label_names=("x", "y"), metric="accuracy",
                train=(texts, [0, 1, 0]), test=(texts[:1], [0]))  # fmt: skip
    row = input_lengths(tokenizer, {"t": task}, max_length=9).loc["t"]
    assert row["median words"] == 2 and row["median tokens"] == 10  # 7, 10, 13 tokens
    assert row["cut (%)"] == pytest.approx(200 / 3)  # 10 and 13 > 9
