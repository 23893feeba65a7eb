"""Task container and metrics: each metric against a naive loop written from its formula,
plus properties swept over seeds."""

import math

import numpy as np
import pytest

from lmsim import tasks
from lmsim.tasks import (
    ONTONOTES_TO_CONLL,
    Task,
    accuracy,
    balanced_accuracy,
    baseline_score,
    entity_chunks,
    entity_f1,
    map_entity_types,
    matthews_corrcoef,
    multilabel_macro_f1,
    pearson,
    predict,
    score,
)

SEEDS = [0, 1, 2, 3, 4]
TAGS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG")


# ---------------------------------------------------------------- naive references


def naive_mcc(pred, gold):
    """Gorodkin's K-category correlation from the covariance of one-hot indicator matrices."""
    labels = sorted(set(pred) | set(gold))
    X = [[1.0 if p == k else 0.0 for k in labels] for p in pred]
    Y = [[1.0 if g == k else 0.0 for k in labels] for g in gold]
    n, K = len(pred), len(labels)

    def cov(A, B):
        total = 0.0
        for k in range(K):
            ma = sum(A[i][k] for i in range(n)) / n
            mb = sum(B[i][k] for i in range(n)) / n
            total += sum((A[i][k] - ma) * (B[i][k] - mb) for i in range(n))
        return total

    den = math.sqrt(cov(X, X) * cov(Y, Y))
    return 0.0 if den == 0 else cov(X, Y) / den


def naive_binary_mcc(pred, gold):
    tp = sum(p == 1 and g == 1 for p, g in zip(pred, gold))
    tn = sum(p == 0 and g == 0 for p, g in zip(pred, gold))
    fp = sum(p == 1 and g == 0 for p, g in zip(pred, gold))
    fn = sum(p == 0 and g == 1 for p, g in zip(pred, gold))
    den = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return 0.0 if den == 0 else (tp * tn - fp * fn) / den


def naive_pearson(x, y):
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return 0.0 if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


def naive_macro_f1(pred, gold, classes):
    scores = []
    for c in classes:
        tp = sum(p[c] == 1 and g[c] == 1 for p, g in zip(pred, gold))
        fp = sum(p[c] == 1 and g[c] == 0 for p, g in zip(pred, gold))
        fn = sum(p[c] == 0 and g[c] == 1 for p, g in zip(pred, gold))
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        scores.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
    return sum(scores) / len(scores)


def naive_chunks(tags):
    """conlleval's startOfChunk / endOfChunk, transcribed for IOB2 tags."""
    chunks, prev_tag, prev_type, start = [], "O", "", None
    for i, tag in enumerate([*tags, "O"]):
        t, typ = (tag, "") if tag == "O" else (tag[0], tag[2:])
        end = (
            (prev_tag == "B" and t == "B")
            or (prev_tag == "B" and t == "O")
            or (prev_tag == "I" and t == "B")
            or (prev_tag == "I" and t == "O")
            or (prev_tag != "O" and prev_type != typ)
        )
        begin = (
            (prev_tag == "O" and t in "BI" and t != "O")
            or (prev_tag in "BI" and t == "B")
            or (t != "O" and prev_type != typ)
        )
        if end and start is not None:
            chunks.append((start, i, prev_type))
            start = None
        if begin and t != "O":
            start = i
        prev_tag, prev_type = t, typ
    return chunks


def naive_entity_f1(pred, gold, types=None):
    correct = n_pred = n_gold = 0
    for p, g in zip(pred, gold):
        pc = [c for c in naive_chunks(p) if types is None or c[2] in types]
        gc = [c for c in naive_chunks(g) if types is None or c[2] in types]
        n_pred, n_gold = n_pred + len(pc), n_gold + len(gc)
        correct += sum(c in gc for c in pc)
    if correct == 0:
        return 0.0
    p, r = correct / n_pred, correct / n_gold
    return 2 * p * r / (p + r)


def random_tags(rng, n_sentences=30, tags=TAGS):
    return [list(rng.choice(tags, size=rng.integers(0, 12))) for _ in range(n_sentences)]


# ---------------------------------------------------------------- metrics vs naive


@pytest.mark.parametrize("seed", SEEDS)
def test_accuracy_matches_a_loop(seed):
    rng = np.random.default_rng(seed)
    pred, gold = rng.integers(0, 4, 50), rng.integers(0, 4, 50)
    assert accuracy(pred, gold) == sum(p == g for p, g in zip(pred, gold)) / 50


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("k", [2, 3, 5])
def test_balanced_accuracy_matches_a_loop_of_recalls(seed, k):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, k, 60)
    pred = np.where(rng.random(60) < 0.6, gold, rng.integers(0, k, 60))
    recalls = []
    for c in sorted(set(gold.tolist())):
        rows = [i for i in range(60) if gold[i] == c]
        recalls.append(sum(pred[i] == c for i in rows) / len(rows))
    assert balanced_accuracy(pred, gold) == pytest.approx(sum(recalls) / len(recalls), abs=1e-12)
    # A constant predictor scores 1/#classes whatever the shares; with balanced classes
    # balanced accuracy is plain accuracy.
    assert balanced_accuracy(np.full(60, gold[0]), gold) == pytest.approx(1 / len(set(gold)))
    even = np.repeat(np.arange(k), 10)
    guess = rng.integers(0, k, len(even))
    assert balanced_accuracy(guess, even) == pytest.approx(accuracy(guess, even))


def test_balanced_accuracy_task():
    task = make_task("single_label", metric="balanced_accuracy")
    assert "balanced_accuracy" in tasks.METRICS
    assert score(task, np.array([[0.0, 1.0], [1.0, 0.0]])) == pytest.approx(1.0)
    assert baseline_score(task) == pytest.approx(0.5)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("k", [2, 3, 5])
def test_mcc_matches_gorodkin_covariance_form(seed, k):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, k, 60)
    pred = np.where(rng.random(60) < 0.6, gold, rng.integers(0, k, 60))
    assert matthews_corrcoef(pred, gold) == pytest.approx(
        naive_mcc(list(pred), list(gold)), abs=1e-12
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_mcc_equals_the_binary_formula(seed):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 2, 80)
    pred = np.where(rng.random(80) < 0.7, gold, 1 - gold)
    assert matthews_corrcoef(pred, gold) == pytest.approx(naive_binary_mcc(pred, gold), abs=1e-12)


def test_mcc_edge_cases():
    assert matthews_corrcoef([1, 0, 1], [1, 0, 1]) == pytest.approx(1.0)
    assert matthews_corrcoef([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    assert matthews_corrcoef([1, 1, 1], [1, 0, 1]) == 0.0  # constant prediction
    # Class ids need not be contiguous: relabelling leaves MCC unchanged.
    assert matthews_corrcoef([7, 3, 7, 3], [7, 3, 3, 3]) == pytest.approx(
        matthews_corrcoef([1, 0, 1, 0], [1, 0, 0, 0])
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_mcc_is_symmetric_and_invariant_to_relabelling(seed):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 4, 40)
    pred = np.where(rng.random(40) < 0.5, gold, rng.integers(0, 4, 40))
    perm = rng.permutation(4)
    assert matthews_corrcoef(pred, gold) == pytest.approx(matthews_corrcoef(gold, pred))
    assert matthews_corrcoef(perm[pred], perm[gold]) == pytest.approx(matthews_corrcoef(pred, gold))


@pytest.mark.parametrize("seed", SEEDS)
def test_pearson_matches_a_loop_and_is_affine_invariant(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=30), rng.normal(size=30)
    y = y + 0.5 * x
    assert pearson(x, y) == pytest.approx(naive_pearson(list(x), list(y)), abs=1e-12)
    assert pearson(3 * x + 2, y) == pytest.approx(pearson(x, y), abs=1e-12)
    assert pearson(-x, y) == pytest.approx(-pearson(x, y), abs=1e-12)
    assert pearson(x, x) == pytest.approx(1.0)
    assert pearson(np.full(30, 2.5), y) == 0.0


@pytest.mark.parametrize("seed", SEEDS)
def test_macro_f1_matches_per_class_loop(seed):
    rng = np.random.default_rng(seed)
    gold = (rng.random((40, 6)) < 0.3).astype(int)
    pred = np.where(rng.random((40, 6)) < 0.7, gold, 1 - gold)
    pred[:, 5] = gold[:, 5] = 0  # a class nobody uses: F1 0 (sklearn's zero_division)
    for classes in ([0, 1, 2, 3, 4, 5], [1, 3], [5]):
        expected = naive_macro_f1(pred.tolist(), gold.tolist(), classes)
        assert multilabel_macro_f1(pred, gold, classes) == pytest.approx(expected, abs=1e-12)
    assert multilabel_macro_f1(pred, gold) == pytest.approx(
        naive_macro_f1(pred.tolist(), gold.tolist(), range(6))
    )


def test_macro_f1_perfect_and_validated():
    gold = np.array([[1, 0], [0, 1], [1, 1]])
    assert multilabel_macro_f1(gold, gold) == 1.0
    with pytest.raises(ValueError, match="only 0 and 1"):
        multilabel_macro_f1(gold * 2, gold)
    with pytest.raises(ValueError, match="`classes`"):
        multilabel_macro_f1(gold, gold, [2])


def test_entity_chunks_follow_conlleval():
    assert entity_chunks(["B-PER", "I-PER", "O", "B-LOC"]) == [(0, 2, "PER"), (3, 4, "LOC")]
    # I- after O starts a chunk; a type change splits; B- after I- of the same type splits.
    assert entity_chunks(["O", "I-PER", "I-PER", "I-LOC"]) == [(1, 3, "PER"), (3, 4, "LOC")]
    assert entity_chunks(["B-PER", "B-PER", "I-PER"]) == [(0, 1, "PER"), (1, 3, "PER")]
    assert entity_chunks([]) == []
    with pytest.raises(ValueError, match="IOB2"):
        entity_chunks(["X-PER"])


@pytest.mark.parametrize("seed", SEEDS)
def test_entity_chunks_match_conlleval_transcription(seed):
    rng = np.random.default_rng(seed)
    for sentence in random_tags(rng, 50):
        assert entity_chunks(sentence) == naive_chunks(sentence)


@pytest.mark.parametrize("seed", SEEDS)
def test_entity_f1_matches_naive(seed):
    rng = np.random.default_rng(seed)
    gold = random_tags(rng)
    pred = [[t if rng.random() < 0.8 else str(rng.choice(TAGS)) for t in s] for s in gold]
    assert entity_f1(pred, gold) == pytest.approx(naive_entity_f1(pred, gold), abs=1e-12)
    assert entity_f1(pred, gold, ["PER", "LOC"]) == pytest.approx(
        naive_entity_f1(pred, gold, {"PER", "LOC"}), abs=1e-12
    )
    assert entity_f1(gold, gold) == (1.0 if any(naive_chunks(s) for s in gold) else 0.0)
    assert entity_f1(pred, gold) == pytest.approx(entity_f1(gold, pred))  # F1 is symmetric


@pytest.mark.parametrize("seed", SEEDS)
def test_entity_f1_properties(seed):
    rng = np.random.default_rng(seed)
    gold = random_tags(rng)
    pred = [[t if rng.random() < 0.7 else str(rng.choice(TAGS)) for t in s] for s in gold]
    order = rng.permutation(len(gold))
    # Micro F1 sums over sentences: their order does not matter.
    assert entity_f1([pred[i] for i in order], [gold[i] for i in order]) == pytest.approx(
        entity_f1(pred, gold)
    )
    # Renaming every type one-to-one changes nothing; the identity map is the identity.
    rename = {"PER": "P", "LOC": "L", "ORG": "G"}
    assert entity_f1(map_entity_types(pred, rename), map_entity_types(gold, rename)) == (
        pytest.approx(entity_f1(pred, gold))
    )
    assert map_entity_types(gold, {t: t for t in rename}) == gold
    # Scoring one type equals scoring after mapping every other type to "O".
    assert entity_f1(pred, gold, ["LOC"]) == pytest.approx(
        entity_f1(map_entity_types(pred, {"LOC": "LOC"}), map_entity_types(gold, {"LOC": "LOC"}))
    )


def test_entity_f1_needs_exact_boundaries_and_type():
    gold = [["B-PER", "I-PER", "O"]]
    assert entity_f1([["B-PER", "O", "O"]], gold) == 0.0
    assert entity_f1([["B-LOC", "I-LOC", "O"]], gold) == 0.0
    assert entity_f1([["O", "O", "O"]], gold) == 0.0
    # One of two gold entities found, one spurious: P = 1/2, R = 1/2.
    two = [["B-PER", "O", "B-LOC"]]
    assert entity_f1([["B-PER", "B-ORG", "O"]], two) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="same number of sentences"):
        entity_f1([["O"]], [])


def test_map_entity_types():
    tags = ["B-GPE", "I-GPE", "B-PERSON", "B-NORP", "I-NORP", "O", "B-FAC"]
    assert map_entity_types(tags, ONTONOTES_TO_CONLL) == [
        "B-LOC", "I-LOC", "B-PER", "O", "O", "O", "B-LOC",
    ]  # fmt: skip
    assert map_entity_types([tags[:2], []], {"GPE": "LOC"}) == [["B-LOC", "I-LOC"], []]
    assert map_entity_types([], {}) == []


# ---------------------------------------------------------------- Task


def make_task(base="single_label", **kwargs):
    """A small valid task of kind ``base``; ``kwargs`` override its fields."""
    kwargs.setdefault("kind", base)
    defaults = {
        "single_label": dict(
            label_names=("neg", "pos"),
            metric="accuracy",
            train=(["a", "b", "c"], [0, 1, 1]),
            test=(["d", ("e", "f")], [1, 0]),
        ),
        "multi_label": dict(
            label_names=("joy", "anger", "fear"),
            metric="macro_f1",
            train=(["a", "b"], [[1, 0, 0], [1, 1, 0]]),
            test=(["c", "d"], [[0, 1, 0], [1, 0, 0]]),
        ),
        "regression": dict(
            label_names=("score",),
            metric="pearson",
            train=([("a", "b"), ("c", "d")], [1.0, 4.5]),
            test=([("e", "f"), ("g", "h"), ("i", "j")], [0.5, 2.0, 3.0]),
        ),
        "token": dict(
            label_names=TAGS,
            metric="entity_f1",
            train=([["Ann", "ran"], ["to", "Rome"]], [[1, 0], [0, 3]]),
            test=([["Bob", "Lee", "left", "Oslo"]], [[1, 2, 0, 3]]),
        ),
    }[base]
    return Task(name=f"t-{base}", **{**defaults, **kwargs})


@pytest.mark.parametrize("kind", tasks.KINDS)
def test_task_of_every_kind(kind):
    task = make_task(kind)
    assert task.n_labels == len(task.label_names)
    assert task.parts == ("train", "test")
    inputs, labels = task.subset("train", [1, 0])
    assert inputs == [task.train[0][1], task.train[0][0]] and len(labels) == 2
    assert task.subset("test") == (list(task.test[0]), list(task.test[1]))
    smaller = task.with_parts(train=task.subset("train", [0]), validation=task.subset("test"))
    assert len(smaller.train[0]) == 1 and smaller.parts == ("train", "validation", "test")
    assert task.kind in repr(task)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(kind="ranking"), "`kind` must be one of"),
        (dict(metric="bleu"), "`metric` must be one of"),
        (dict(metric="pearson"), "scores \\['regression'\\] tasks"),
        (dict(train=(["a"], [0, 1])), "1 inputs but 2 labels"),
        (dict(train=(["a"], [2])), "int in range\\(2\\)"),
        (dict(train=([["a", "b", "c"]], [0])), "string or a pair"),
        (dict(test=([], [])), "empty test part"),
        (dict(label_names=("a", "a")), "unique"),
        (dict(scored_labels=("neg",)), "`scored_labels` applies"),
    ],
)
def test_task_validation_names_the_problem(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_task("single_label", **kwargs)


def test_task_validation_per_kind():
    with pytest.raises(ValueError, match="multi-hot"):
        make_task("multi_label", train=(["a"], [[1, 0]]))
    with pytest.raises(ValueError, match="subset of"):
        make_task("multi_label", scored_labels=("joy", "love"))
    with pytest.raises(ValueError, match="label_names \\('score',\\)"):
        make_task("regression", label_names=("a",))
    with pytest.raises(ValueError, match="finite"):
        make_task("regression", train=([("a", "b")], [float("nan")]))
    with pytest.raises(ValueError, match="1 tags for 2 words"):
        make_task("token", train=([["a", "b"]], [[0]]))
    with pytest.raises(ValueError, match="IOB2"):
        make_task("token", label_names=("O", "PER"))
    with pytest.raises(ValueError, match="list of words"):
        make_task("token", train=(["a b"], [[0]]))
    assert make_task("token", scored_labels=("PER",)).scored_labels == ("PER",)
    with pytest.raises(ValueError, match="no 'validation' part"):
        make_task().subset("validation")
    with pytest.raises(IndexError, match="outside"):
        make_task().subset("train", [5])
    with pytest.raises(TypeError, match="unknown parts"):
        make_task().with_parts(dev=([], []))


# ---------------------------------------------------------------- score


def test_predict_per_kind():
    logits = np.array([[0.1, 2.0, -1.0], [3.0, -0.5, 0.2]])
    assert predict("single_label", logits).tolist() == [1, 0]
    assert predict("multi_label", logits).tolist() == [[1, 1, 0], [1, 0, 1]]
    assert predict("regression", logits[:, :1]).tolist() == [0.1, 3.0]
    rows = np.array([[0.0, 5.0, 0.0], [np.nan, np.nan, np.nan]])
    assert predict("token", [rows], ["O", "B-X", "I-X"]) == [["B-X", "O"]]


def one_hot_logits(labels, n, rng):
    return np.eye(n)[labels] * 5 + rng.normal(scale=0.1, size=(len(labels), n))


@pytest.mark.parametrize("seed", SEEDS)
def test_score_of_perfect_logits_is_perfect(seed):
    rng = np.random.default_rng(seed)
    single = make_task("single_label")
    assert score(single, one_hot_logits(single.test[1], 2, rng)) == 1.0
    multi = make_task("multi_label", scored_labels=("joy", "anger"))
    perfect = np.where(np.array(multi.test[1]) == 1, 3.0, -3.0)
    assert score(multi, perfect) == 1.0
    # "fear" never occurs in the test part: scored, it counts F1 = 0 (zero_division).
    assert score(make_task("multi_label"), perfect) == pytest.approx(2 / 3)
    reg = make_task("regression")
    assert score(reg, np.array(reg.test[1])[:, None] * 2 + 1) == pytest.approx(1.0)
    tok = make_task("token")
    logits = [one_hot_logits(tags, len(TAGS), rng) for tags in tok.test[1]]
    assert score(tok, logits) == 1.0


def test_score_uses_scored_labels_and_type_map():
    multi = make_task("multi_label", scored_labels=("anger",))
    # Only "anger" is scored: the wrong "joy" prediction does not count.
    logits = np.array([[-1.0, 1.0, -1.0], [-1.0, -1.0, -1.0]])
    assert score(multi, logits) == 1.0
    assert score(make_task("multi_label"), logits) == pytest.approx((0 + 1 + 0) / 3)

    onto = ("O", "B-PERSON", "I-PERSON", "B-GPE", "I-GPE", "B-NORP", "I-NORP")
    conll = make_task("token", scored_labels=("PER", "LOC"))
    # Bob Lee left Oslo: PERSON PERSON O GPE -> PER PER O LOC
    logits = [np.eye(len(onto))[[1, 2, 0, 3]]]
    with pytest.raises(ValueError, match="pass `label_names=`"):
        score(conll, [np.eye(7)[[1, 2, 0, 3]][:, :5]])
    with pytest.raises(ValueError, match="pass `type_map=`"):
        score(conll, logits, label_names=onto)
    assert score(conll, logits, label_names=onto, type_map=ONTONOTES_TO_CONLL) == 1.0
    # NaN rows (truncated words) are "O": Oslo missed, P = 1, R = 1/2.
    cut = logits[0].copy()
    cut[3] = np.nan
    assert score(conll, [cut], label_names=onto, type_map=ONTONOTES_TO_CONLL) == pytest.approx(
        2 / 3
    )


def test_score_with_explicit_labels_and_bad_shapes():
    task = make_task("single_label")
    assert score(task, np.array([[0.0, 1.0]]), labels=[1]) == 1.0
    with pytest.raises(ValueError, match="shape \\(n, 2\\)"):
        score(task, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="2 predictions but 1 gold"):
        score(task, np.zeros((2, 2)), labels=[0])
    with pytest.raises(ValueError, match="token tasks only"):
        score(task, np.zeros((2, 2)), type_map={})


def test_matthews_task():
    task = make_task("single_label", metric="matthews")
    assert score(task, np.array([[0.0, 1.0], [1.0, 0.0]])) == pytest.approx(1.0)


def test_baselines():
    assert baseline_score(make_task("single_label")) == 0.5  # majority "pos"; test [1, 0]
    assert baseline_score(make_task("regression")) == 0.0
    assert baseline_score(make_task("token")) == 0.0
    # multi_label: joy is on in both training examples -> predicted for all; anger 1 of 2.
    multi = make_task("multi_label")
    assert baseline_score(multi) == pytest.approx(
        naive_macro_f1([[1, 0, 0]] * 2, multi.test[1], range(3))
    )
    empty = make_task("single_label", train=([], []))
    with pytest.raises(ValueError, match="no training examples"):
        baseline_score(empty)


def test_map_task_entity_types_relabels_every_part():
    onto = ("O", "B-PERSON", "I-PERSON", "B-GPE", "I-GPE", "B-NORP", "I-NORP", "B-FAC", "I-FAC")
    words = [["Li", "Wei", "of", "Paris"], ["French", "port", "Calais"]]
    tags = [[1, 2, 0, 3], [5, 0, 7]]
    task = Task(
        "onto", "token", onto, "entity_f1", train=(words, tags), test=(words[:1], tags[:1]),
        scored_labels=("PERSON", "NORP"),
    )  # fmt: skip
    mapped = tasks.map_task_entity_types(task, ONTONOTES_TO_CONLL)
    assert mapped.label_names == ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
    decoded = [[mapped.label_names[t] for t in s] for s in mapped.train[1]]
    assert decoded == [["B-PER", "I-PER", "O", "B-LOC"], ["O", "O", "B-LOC"]]
    assert mapped.train[0] == words and mapped.scored_labels == ("PER",)
    assert mapped.info["entity_types_mapped"] == ONTONOTES_TO_CONLL
    with pytest.raises(ValueError, match="token tasks"):
        tasks.map_task_entity_types(make_task(), {})


@pytest.mark.parametrize("seed", SEEDS)
def test_sample_is_seeded_ordered_and_without_replacement(seed):
    n = 40
    task = make_task(train=([f"t{i}" for i in range(n)], [i % 2 for i in range(n)]))
    inputs, labels = task.sample("train", 10, seed=seed)
    positions = [int(x[1:]) for x in inputs]
    assert len(set(positions)) == 10 and positions == sorted(positions)
    assert labels == [p % 2 for p in positions]
    assert task.sample("train", 10, seed=seed) == (inputs, labels)
    assert task.sample("train", 10, seed=seed + 100) != (inputs, labels)
    assert task.sample("train", 99) == task.subset("train") == task.sample("train")
    with pytest.raises(ValueError, match="`n` must be a positive int"):
        task.sample("train", 0)
