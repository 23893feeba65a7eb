"""Elastic-net probe: learns what is there, nothing more than the control task where nothing is."""

import numpy as np
import pytest
import torch

from lmsim.probe import (
    _step_loss,
    control_labels,
    get_top_neurons,
    neuron_ordering,
    train_probe,
    word_activations,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
CPU = dict(device="cpu")


def gaussian_task(seed, n=1500, d=30, k=4, sep=4.0, noise=1.0):
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((k, d)) * sep / np.sqrt(d)
    y = rng.integers(0, k, size=n)
    X = means[y] + noise * rng.standard_normal((n, d))
    return X.astype(np.float32), y


def word_task(seed, n=2400, n_types=400, d=20, k=3, signal=True):
    """Tokens of ``n_types`` word types; each type has one label. Features carry the label
    (``signal``) plus noise, and nothing about the type's identity."""
    rng = np.random.default_rng(seed)
    type_label = rng.integers(0, k, size=n_types)
    types = rng.integers(0, n_types, size=n)
    y = type_label[types]
    words = [f"w{t}" for t in types]
    means = rng.standard_normal((k, d)) * 3 / np.sqrt(d)
    X = rng.standard_normal((n, d)) + (means[y] if signal else 0)
    return X.astype(np.float32), y, words


def split(arrays, n_train):
    return [a[:n_train] for a in arrays], [a[n_train:] for a in arrays]


@pytest.mark.parametrize("seed", [0, 1])
def test_learns_separable_task(seed):
    X, y = gaussian_task(seed, sep=12.0, noise=0.3)
    r = train_probe(X[:1000], y[:1000], X_test=X[1000:], y_test=y[1000:], seed=seed, **CPU)
    assert r.train_acc >= 0.99 and r.test_acc >= 0.99
    assert r.weights.shape == (4, 30) and r.bias.shape == (4,)
    assert r.dev_acc is None
    np.testing.assert_array_equal(r.predict(X[1000:]) == y[1000:], True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beats_majority_and_control_with_signal(seed):
    X, y, words = word_task(seed)
    (Xtr, ytr), (Xte, yte) = split([X, y], 1800)
    r = train_probe(
        Xtr,
        ytr,
        X_test=Xte,
        y_test=yte,
        words_train=words[:1800],
        words_test=words[1800:],
        seed=seed,
        **CPU,
    )
    assert r.test_acc > r.majority["test"] + 0.2
    assert r.test_acc > r.control_accuracy["test"] + 0.2
    assert r.selectivity["test"] == pytest.approx(r.test_acc - r.control_accuracy["test"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_selectivity_near_zero_on_noise(seed):
    X, y, words = word_task(seed, signal=False)
    (Xtr, ytr), (Xte, yte) = split([X, y], 1800)
    r = train_probe(
        Xtr,
        ytr,
        X_test=Xte,
        y_test=yte,
        words_train=words[:1800],
        words_test=words[1800:],
        seed=seed,
        **CPU,
    )
    assert abs(r.selectivity["test"]) < 0.06
    assert abs(r.test_acc - r.majority["test"]) < 0.06


def test_majority_and_per_class_accuracy():
    X, y = gaussian_task(0)
    y = np.where(y == 3, 2, y) * 10  # labels 0, 10, 20: not 0..k-1, unbalanced
    r = train_probe(X[:1000], y[:1000], X[1000:1200], y[1000:1200], X[1200:], y[1200:], **CPU)
    assert r.classes.tolist() == [0, 10, 20]
    values, counts = np.unique(y[:1000], return_counts=True)
    assert r.majority_class == values[np.argmax(counts)] == 20
    for name, sl in (
        ("train", slice(0, 1000)),
        ("dev", slice(1000, 1200)),
        ("test", slice(1200, None)),
    ):
        ys = y[sl]
        assert r.majority[name] == pytest.approx(np.mean(ys == 20))
        pred = r.predict(X[sl])
        assert r.accuracy[name] == pytest.approx(np.mean(pred == ys))
        for label, acc in r.per_class_accuracy[name].items():
            assert acc == pytest.approx(np.mean(pred[ys == label] == label))
        weighted = sum(acc * np.sum(ys == c) for c, acc in r.per_class_accuracy[name].items())
        assert weighted / ys.size == pytest.approx(r.accuracy[name])


def test_deterministic_with_seed():
    X, y = gaussian_task(3)
    a = train_probe(X, y, seed=7, **CPU)
    b = train_probe(X, y, seed=7, **CPU)
    c = train_probe(X, y, seed=8, **CPU)
    np.testing.assert_array_equal(a.weights, b.weights)
    np.testing.assert_array_equal(a.bias, b.bias)
    assert a.losses == b.losses
    assert not np.array_equal(a.weights, c.weights)


@pytest.mark.parametrize("n_b", [128, 37])
def test_step_loss_matches_naive_formula(n_b):
    gen = torch.Generator().manual_seed(n_b)
    W = torch.randn(5, 40, generator=gen, dtype=torch.float64)
    logits = torch.randn(n_b, 5, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 5, (n_b,), generator=gen)
    l1, l2, bs = 1e-2, 3e-2, 128
    ce = [-torch.log_softmax(logits[i], 0)[y[i]].item() for i in range(n_b)]
    penalty = l1 * np.abs(W.numpy()).sum() + l2 * np.sqrt((W.numpy() ** 2).sum())
    neurox = np.mean(ce) + penalty  # NeuroX: full penalty on every batch's mean loss
    sample = sum(c + penalty for c in ce) / bs  # each sample carries the penalty once
    assert _step_loss(logits, y, W, l1, l2, bs, "neurox").item() == pytest.approx(neurox, rel=1e-12)
    assert _step_loss(logits, y, W, l1, l2, bs, "sample").item() == pytest.approx(sample, rel=1e-12)
    # identical on a full batch, scaled by |b| / batch_size on a partial one
    assert sample == pytest.approx(neurox * n_b / bs, rel=1e-12)


def test_penalty_scalings_coincide_on_full_batches_only():
    X, y = gaussian_task(4, n=1024)
    kw = dict(l1=1e-3, l2=1e-3, epochs=3, **CPU)
    full = [train_probe(X, y, penalty_scaling=s, **kw) for s in ("sample", "neurox")]
    np.testing.assert_array_equal(full[0].weights, full[1].weights)
    part = [train_probe(X[:1000], y[:1000], penalty_scaling=s, **kw) for s in ("sample", "neurox")]
    assert not np.array_equal(part[0].weights, part[1].weights)
    # both minimise the same objective: the solutions stay close
    np.testing.assert_allclose(part[0].weights, part[1].weights, atol=5e-3)


def test_penalty_shrinks_weights():
    X, y = gaussian_task(5)
    weak = train_probe(X, y, l1=0.0, l2=0.0, epochs=5, **CPU)
    strong = train_probe(X, y, l1=1e-1, l2=1e-1, epochs=5, **CPU)
    assert np.abs(strong.weights).sum() < 0.7 * np.abs(weak.weights).sum()


def test_standardize_invariant_to_feature_scale():
    X, y = gaussian_task(6)
    scale = np.geomspace(0.01, 100, X.shape[1]).astype(np.float32)
    a = train_probe(X, y, standardize=True, **CPU)
    b = train_probe(X * scale, y, standardize=True, **CPU)
    np.testing.assert_allclose(a.weights, b.weights, atol=1e-4)
    assert a.train_acc == pytest.approx(b.train_acc, abs=2e-3)
    # on the raw scale, weights of a feature multiplied by s are divided by s
    np.testing.assert_allclose(b.raw_weights * scale, a.raw_weights, rtol=1e-3, atol=1e-3)


def naive_top_neurons(W, percentage):
    """NeuroX's get_top_neurons, written as a loop from its definition."""
    W = np.abs(W)
    per_class = {}
    for c in range(W.shape[0]):
        order = sorted(range(W.shape[1]), key=lambda j: (-W[c, j], j))
        total, acc, chosen = W[c].sum(), 0.0, []
        for j in order:
            chosen.append(j)
            acc += W[c, j]
            if acc >= total * percentage:
                break
        per_class[c] = chosen
    return sorted(set().union(*per_class.values())), per_class


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("percentage", [0.0, 0.05, 0.3, 0.9, 1.0])
def test_get_top_neurons_matches_naive(seed, percentage):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((5, 50)) * rng.exponential(size=50)
    overall, per_class = get_top_neurons(W, percentage)
    ref_overall, ref_per_class = naive_top_neurons(W, percentage)
    assert overall.tolist() == ref_overall
    for c in range(5):
        assert per_class[c].tolist() == ref_per_class[c]
    mass = np.abs(W)
    for c in range(5):
        kept = mass[c, per_class[c]].sum()
        assert kept >= percentage * mass[c].sum() - 1e-12
        assert (
            kept - mass[c, per_class[c][-1]] < percentage * mass[c].sum() or len(per_class[c]) == 1
        )


def test_neuron_ordering_covers_and_grows():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((3, 40))
    order, cutoffs = neuron_ordering(W, search_stride=20)
    assert sorted(order.tolist()) == list(range(40))
    assert cutoffs == sorted(cutoffs) and cutoffs[-1] == 40
    assert set(order[: cutoffs[5]].tolist()) == set(get_top_neurons(W, 5 / 20)[0].tolist())


def test_control_labels_per_type_and_seeded():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in rng.integers(0, 300, size=5000)]
    y = rng.choice([0, 1, 2], p=[0.6, 0.3, 0.1], size=5000)
    test_words = ["w1", "w2", "unseen", "w1"]
    ctrl, ctrl_test = control_labels(words, y, test_words, seed=3)
    by_type = {}
    for w, c in zip(words + test_words, np.concatenate([ctrl, ctrl_test])):
        assert by_type.setdefault(w, c) == c
    assert ctrl_test[0] == ctrl_test[3]
    # type labels follow the empirical label distribution
    type_labels = np.array(list(by_type.values()))
    np.testing.assert_allclose(
        np.bincount(type_labels, minlength=3) / type_labels.size, [0.6, 0.3, 0.1], atol=0.08
    )
    again, _ = control_labels(words, y, test_words, seed=3)
    np.testing.assert_array_equal(again, ctrl)
    other, _ = control_labels(words, y, test_words, seed=4)
    assert not np.array_equal(other, ctrl)


def test_validation_messages():
    X, y = gaussian_task(0, n=50)
    with pytest.raises(ValueError, match="penalty_scaling"):
        train_probe(X, y, penalty_scaling="epoch", **CPU)
    with pytest.raises(ValueError, match="X_test"):
        train_probe(X, y, X_test=X, **CPU)
    with pytest.raises(ValueError, match="neurons"):
        train_probe(X, y, X_dev=X[:, :5], y_dev=y, **CPU)
    with pytest.raises(ValueError, match="missing"):
        train_probe(X, y, X_dev=X, y_dev=y, words_train=["a"] * 50, **CPU)
    with pytest.raises(ValueError, match="percentage"):
        get_top_neurons(np.ones((2, 3)), 1.5)


@pytest.mark.gpu
def test_gpu_matches_cpu_accuracy():
    X, y = gaussian_task(1)
    cpu = train_probe(X[:1000], y[:1000], X_test=X[1000:], y_test=y[1000:], **CPU)
    gpu = train_probe(X[:1000], y[:1000], X_test=X[1000:], y_test=y[1000:], device="cuda")
    assert gpu.settings["device"].startswith("cuda")
    assert gpu.test_acc == pytest.approx(cpu.test_acc, abs=0.02)
    np.testing.assert_allclose(gpu.weights, cpu.weights, atol=1e-3)


# --------------------------------------------------------------------------- word activations
@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import (
        AutoModel,
        AutoTokenizer,
        BertConfig,
        BertModel,
        PreTrainedTokenizerFast,
    )

    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "the",
        "jury",
        "said",
        "it",
        "rain",
        "##ed",
        ".",
    ]
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=32,
    )
    path = tmp_path_factory.mktemp("bert")
    BertModel(config).save_pretrained(path)
    fast.save_pretrained(path)
    return AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def test_word_activations_last_subword(tiny_bert, monkeypatch, tmp_path):
    from lmsim.extract import extract_activations

    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    sentences = [
        [("The", "at"), ("jury", "nn"), ("rained", "vbd")],
        [("It", "pps"), ("said", "vbd"), (".", ".")],
    ]
    X, dims = word_activations(tiny_bert, sentences, device="cpu")
    assert X.shape == (6, 24) and X.dtype == np.float32
    assert dims == {"model/layer.0": 8, "model/layer.1": 8, "model/layer.2": 8}
    words = [[w for w, _ in s] for s in sentences]
    acts = extract_activations(
        {"model": tiny_bert}, words, pooling="word", subword="last", device="cpu", progress=False
    )
    np.testing.assert_array_equal(
        X, np.concatenate([acts[f"model/layer.{i}"] for i in range(3)], 1)
    )
    # "rained" = rain ##ed: its row is the hidden state of "##ed" (the last subword)
    model, tok = tiny_bert
    ids = tok(words[0], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        states = model(**ids, output_hidden_states=True).hidden_states
    np.testing.assert_allclose(X[2, 16:], states[2][0, 4].numpy(), atol=1e-5)
    X1, dims1 = word_activations({"bert": tiny_bert}, words, layers=[1], device="cpu")
    assert dims1 == {"bert/layer.1": 8}
    np.testing.assert_array_equal(X1, X[:, 8:16])


def test_explicit_classes_order_and_unseen_class():
    X, y = gaussian_task(2, k=3, sep=8.0)
    r = train_probe(X, y, classes=[2, 0, 1, 7], **CPU)
    assert r.classes.tolist() == [2, 0, 1, 7] and r.weights.shape[0] == 4
    default = train_probe(X, y, **CPU)
    assert default.train_acc > 0.98 and r.train_acc > 0.98
    assert np.isin(r.predict(X), [0, 1, 2]).mean() > 0.99  # the unseen class is never learnt
    with pytest.raises(ValueError, match="not in `classes`"):
        train_probe(X, y, classes=[0, 1], **CPU)


def test_word_activations_forwards_zoo_profile(monkeypatch):
    """`zoo/<name>` must load the requested zoo build, not the default one."""
    import lmsim.extract

    seen = {}

    def fake_extract(models, texts, **kwargs):
        seen.update(kwargs)
        return {"zoo/mlm-s0/layer.0": np.zeros((2, 3), np.float32)}

    monkeypatch.setattr(lmsim.extract, "extract_activations", fake_extract)
    X, dims = word_activations("zoo/mlm-s0", [["a", "b"]], zoo_profile="smoke", device="cpu")
    assert seen["zoo_profile"] == "smoke" and X.shape == (2, 3)
    word_activations("zoo/mlm-s0", [["a", "b"]], device="cpu")
    assert seen["zoo_profile"] == "default"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lexical_baseline_matches_a_naive_lookup(seed):
    from collections import Counter

    from lmsim.probe import lexical_baseline

    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(30)]
    words_train = list(rng.choice(vocab[:25], 400))
    words_test = list(rng.choice(vocab, 150))  # w25 ... w29 are unseen in training
    y_train, y_test = rng.integers(0, 4, 400), rng.integers(0, 4, 150)
    overall = Counter(y_train.tolist()).most_common()
    fallback = min(k for k, c in overall if c == overall[0][1])
    correct = 0
    for w, y in zip(words_test, y_test):
        labels = Counter(int(t) for t, v in zip(y_train, words_train) if v == w)
        if labels:
            top = max(labels.values())
            guess = min(k for k, c in labels.items() if c == top)
        else:
            guess = fallback
        correct += guess == y
    assert lexical_baseline(words_train, y_train, words_test, y_test) == pytest.approx(
        correct / len(y_test)
    )
    with pytest.raises(ValueError, match="must pair up"):
        lexical_baseline(words_train[:-1], y_train, words_test, y_test)


# ---------------------------------------------------------------- convergence
def test_objective_matches_naive_formula():
    from lmsim.probe._fit import _objective

    X, y = gaussian_task(0, n=300, d=6, k=3)
    rng = np.random.default_rng(1)
    W, b = rng.standard_normal((3, 6)), rng.standard_normal(3)
    logits = X.astype(np.float64) @ W.T + b
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    naive = (
        -logp[np.arange(y.size), y].mean() + 1e-2 * np.abs(W).sum() + 1e-3 * np.sqrt((W**2).sum())
    )
    t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    got = _objective(t(X), torch.as_tensor(y), t(W), t(b), 1e-2, 1e-3, None, None, batch_size=64)
    assert got == pytest.approx(naive, rel=1e-5)


def test_converged_rule_matches_its_definition():
    from lmsim.probe._fit import _converged

    assert not _converged([1.0], 0.1, 1)
    assert _converged([1.0, 0.95], 0.1, 1) and not _converged([1.0, 0.85], 0.1, 1)
    assert _converged([1.0, 1.2], 0.1, 1)  # a rise is no decrease
    assert not _converged([1.0, 0.95, 0.5], 0.1, 2) and _converged([1.0, 0.99, 0.98], 0.1, 2)
    assert not _converged([1.0, 0.99], 0.1, 2)  # needs patience + 1 values


def test_recording_curves_does_not_change_training():
    (Xtr, ytr), (Xte, yte) = split(gaussian_task(0, n=600), 400)
    kw = dict(epochs=4, seed=0, lr=1e-2, **CPU)
    plain = train_probe(Xtr, ytr, Xte, yte, **kw)
    seen = train_probe(Xtr, ytr, Xte, yte, curves=True, **kw)
    np.testing.assert_array_equal(plain.weights, seen.weights)
    assert plain.objective == [] and plain.curves is None and plain.converged is None
    assert len(seen.objective) == len(seen.curves["train"]) == len(seen.curves["dev"]) == 4
    assert seen.curves["train"][-1] == seen.accuracy["train"]
    assert seen.curves["dev"][-1] == seen.accuracy["dev"]
    assert "fixed 4 epochs" in plain.stopping_rule


@pytest.mark.parametrize("seed", [0, 1])
def test_tol_stops_near_the_optimum_of_a_long_run(seed):
    (Xtr, ytr), (Xte, yte) = split(gaussian_task(seed, n=800, d=10), 600)
    kw = dict(seed=seed, lr=1e-2, batch_size=64, **CPU)
    short = train_probe(Xtr, ytr, Xte, yte, epochs=2, curves=True, **kw)
    conv = train_probe(Xtr, ytr, Xte, yte, epochs=300, tol=1e-3, patience=2, **kw)
    long = train_probe(Xtr, ytr, Xte, yte, epochs=300, curves=True, **kw)
    assert conv.converged and conv.n_epochs < 300 and long.n_epochs == 300
    best = min(long.objective)
    # Two epochs leave the objective far above the optimum; the stopping rule does not.
    assert short.objective[-1] - best > 5 * (conv.objective[-1] - best)
    assert conv.objective[-1] - best < 0.02 * best + 0.01
    assert "until the full training objective" in conv.stopping_rule
    with pytest.raises(ValueError, match="`tol`"):
        train_probe(Xtr, ytr, tol=-1.0, **CPU)
    with pytest.raises(ValueError, match="`patience`"):
        train_probe(Xtr, ytr, tol=1e-3, patience=0, **CPU)
