"""Fine-tuning through the one training loop: caching, resume, multitask heads, helpers.

Tiny random BERTs (``tiny-bert``) on the generated smoke classification sets; a private
cache per test module.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lmsim.data import keyword_domains, load_classification, noniid_partitions
from lmsim.finetune import (
    FinetuneSettings,
    accuracy,
    accuracy_gap,
    finetune,
    finetune_facts,
    finetune_multitask,
    freeze_layers,
    freeze_lower_layers,
    load_finetuned,
    majority_baseline,
    predict_logits,
    with_head,
)
from lmsim.models import load_model

SEEDS = [0, 1, 2]
SETTINGS = FinetuneSettings(
    base="tiny-bert", max_length=12, batch_size=8, epochs=4.0, lr=1e-2, device="cpu"
)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch, one_torch_thread):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path_factory.getbasetemp() / "ft-cache"))


def _smoke(name="smoke", n=40):
    d = load_classification(name)
    return d["train_texts"][:n], d["train_labels"][:n], d["label_names"]


# ------------------------------------------------------------------ data helpers
@pytest.mark.parametrize("seed", SEEDS)
def test_noniid_partitions_follow_the_recipe(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, size=2000)
    a, b, key = noniid_partitions(labels, 300, key_fraction=0.8, seed=seed)
    assert len(a) == len(b) == 300 and not set(a) & set(b)
    share_a = np.mean(labels[a] == key)
    share_b = np.mean(labels[b] == key)
    # Before sub-sampling A holds 80 % of the key class and B 20 %, in equal-size halves.
    n_key = np.sum(labels == key)
    assert share_a == pytest.approx(0.8 * n_key / 1000, abs=0.08)
    assert share_b == pytest.approx(0.2 * n_key / 1000, abs=0.06)
    assert share_a > 2 * share_b


def test_noniid_partitions_naive_counts_before_subsampling():
    labels = np.repeat([0, 1, 2, 3], 100)
    # All rows requested: the partitions are exactly the recipe's two halves.
    a, b, key = noniid_partitions(labels, 200, seed=3)
    assert np.sum(labels[a] == key) == 80 and np.sum(labels[b] == key) == 20
    with pytest.raises(ValueError, match="at most 200"):
        noniid_partitions(labels, 201, seed=3)
    with pytest.raises(ValueError, match="key_fraction"):
        noniid_partitions(labels, 10, key_fraction=0.4)


def test_keyword_domains_first_group_wins_whole_words():
    texts = ["Great COFFEE, and tea", "my dog loves it", "teapot", "dog food with coffee"]
    out = keyword_domains(texts, {"drinks": ["coffee", "tea"], "pets": ["dog"]})
    assert out == ["drinks", "pets", "other", "drinks"]
    with pytest.raises(ValueError, match="rename"):
        keyword_domains(texts, {"other": ["x"]})


def test_smoke_adverb_is_a_second_task_on_smoke_text():
    d = load_classification("smoke-adverb")
    assert d["label_names"] == ["manner", "time"]
    assert 0.3 < np.mean(d["train_labels"]) < 0.7
    for text, label in zip(d["train_texts"], d["train_labels"]):
        assert (text.split()[-2] in {"again", "yesterday", "often", "today"}) == bool(label)


# ------------------------------------------------------------------ evaluation helpers
def test_accuracy_and_majority_baseline_against_naive():
    logits = np.array([[0.1, 0.9], [2.0, -1.0], [0.0, 0.5]])
    assert accuracy(logits, [1, 0, 0]) == pytest.approx(2 / 3)
    assert majority_baseline([1, 1, 0], [1, 0, 0, 0]) == 0.25
    with pytest.raises(ValueError, match="one row per label"):
        accuracy(logits, [1, 0])


def test_freeze_lower_layers_names():
    model, _ = load_model("tiny-bert", device="cpu", task="sequence-classification")
    frozen = freeze_lower_layers(model, 1)
    assert any("embeddings" in n for n in frozen)
    assert any(".layer.0." in n for n in frozen) and not any(".layer.1." in n for n in frozen)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert "classifier.weight" in trainable and any(".layer.1." in n for n in trainable)
    with pytest.raises(ValueError, match="leave at least one"):
        freeze_lower_layers(model, 2)


def _tiny_decoders():
    """A tiny Llama and a tiny GPT-2 sequence classifier (3 blocks each), from configs."""
    from transformers import (
        GPT2Config,
        GPT2ForSequenceClassification,
        LlamaConfig,
        LlamaForSequenceClassification,
    )

    torch.manual_seed(0)
    llama = LlamaForSequenceClassification(
        LlamaConfig(
            vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=2, num_key_value_heads=2, pad_token_id=0,
        )
    )  # fmt: skip
    gpt2 = GPT2ForSequenceClassification(
        GPT2Config(vocab_size=50, n_embd=16, n_layer=3, n_head=2, n_positions=32, pad_token_id=0)
    )
    return {"llama": llama, "gpt2": gpt2}


def _naive_frozen(model, blocks, embeddings):
    """Names a freeze must hit, from each model family's own naming (not the regex)."""
    out = []
    for name, _ in model.named_parameters():
        parts = name.split(".")
        idx = [int(parts[i + 1]) for i, p in enumerate(parts[:-1]) if p in ("layer", "layers", "h")]
        emb = any(p in ("embeddings", "embed_tokens", "wte", "wpe") for p in parts)
        if (idx and idx[0] in blocks) or (embeddings and emb):
            out.append(name)
    return sorted(out)


@pytest.mark.parametrize("kind", ["bert", "llama", "gpt2"])
@pytest.mark.parametrize("where", ["bottom", "top"])
def test_freeze_layers_bottom_and_top(kind, where):
    if kind == "bert":
        model, _ = load_model("tiny-bert", device="cpu", task="sequence-classification")
    else:
        model = _tiny_decoders()[kind]
    n_blocks = model.config.num_hidden_layers
    frozen = sorted(freeze_layers(model, 1, where))
    blocks = {0} if where == "bottom" else {n_blocks - 1}
    assert frozen == _naive_frozen(model, blocks, embeddings=where == "bottom")
    grads = {n: p.requires_grad for n, p in model.named_parameters()}
    assert not any(grads[n] for n in frozen)
    assert all(v for n, v in grads.items() if n not in frozen)
    # The head always trains; the top freeze leaves the embeddings trainable.
    head = [n for n in grads if n.startswith(("classifier.", "score."))]
    assert head and all(grads[n] for n in head)
    if where == "top":
        assert any(("embed" in n or "wte" in n) and grads[n] for n in grads)
    with pytest.raises(ValueError, match="leave at least one"):
        freeze_layers(model, n_blocks, where)
    with pytest.raises(ValueError, match="'bottom' or 'top'"):
        freeze_layers(model, 1, "middle")


def test_freeze_setting_enters_the_digest():
    from lmsim.finetune import _digest

    tasks = {"t": (["a b", "c d"], [0, 1], ["x", "y"])}
    base = FinetuneSettings(base="tiny-bert")
    none = _digest(tasks, base)
    bottom = _digest(tasks, FinetuneSettings(base="tiny-bert", n_frozen=1))
    top = _digest(tasks, FinetuneSettings(base="tiny-bert", n_frozen=1, freeze="top"))
    top2 = _digest(tasks, FinetuneSettings(base="tiny-bert", n_frozen=2, freeze="top"))
    assert len({none, bottom, top, top2}) == 4
    # n_frozen=0 is "none" however it is spelt; "bottom" keeps the pre-`freeze` digest.
    assert _digest(tasks, FinetuneSettings(base="tiny-bert", freeze="top")) == none
    assert "freeze" not in FinetuneSettings(n_frozen=1).key()
    with pytest.raises(ValueError, match="freeze='none'"):
        FinetuneSettings(n_frozen=1, freeze="none")
    with pytest.raises(ValueError, match="`freeze` must be one of"):
        FinetuneSettings(freeze="middle")


def test_seed_enters_the_digest_and_seed_zero_keeps_it():
    from lmsim.finetune import _digest

    tasks = {"t": (["a b", "c d"], [0, 1], ["x", "y"])}
    digests = {
        s: _digest(tasks, FinetuneSettings(base="tiny-bert", seed=s, head_seed=s)) for s in range(3)
    }
    assert len(set(digests.values())) == 3  # one cache folder per fine-tuning seed
    assert digests[0] == _digest(tasks, FinetuneSettings(base="tiny-bert"))  # seed 0 as before


def test_accuracy_gap_over_seeds_matches_a_naive_t_interval():
    rng = np.random.default_rng(0)
    a = rng.random((3, 200)) < 0.8
    b = rng.random((3, 200)) < 0.7
    gap = accuracy_gap(a, b)
    diffs = [a[s].mean() - b[s].mean() for s in range(3)]
    mean, sd = np.mean(diffs), np.std(diffs, ddof=1)
    half = 4.302652729911275 * sd / np.sqrt(3)  # t(0.975, 2 degrees of freedom)
    assert gap.estimate == pytest.approx(mean)
    assert (gap.low, gap.high) == pytest.approx((mean - half, mean + half))
    assert gap.values == pytest.approx(tuple(diffs))
    assert gap.unit == "fine-tuning seeds" and gap.n == 3
    one = accuracy_gap(a[0], b[0], n_boot=200)  # one seed: paired over the test examples
    assert one.unit == "test examples"
    assert one.estimate == pytest.approx(a[0].mean() - b[0].mean())
    assert one.low <= one.estimate <= one.high
    worst = accuracy_gap(a, b, seeds="min", n_boot=200)  # the seed with the smallest gap
    assert worst.unit == "test examples" and worst.estimate == pytest.approx(min(diffs))
    with pytest.raises(ValueError, match="n_seeds, n_test"):
        accuracy_gap(a, b[:2])
    with pytest.raises(ValueError, match="'summary' or 'min'"):
        accuracy_gap(a, b, seeds="max")


# ------------------------------------------------------------------ training and caching
def test_finetune_learns_caches_and_reads_back():
    texts, labels, names = _smoke()
    path = finetune(texts, labels, names, SETTINGS, name="t-smoke")
    facts = finetune_facts(path)
    assert facts["steps"] == 20 and facts["settings"]["base"] == "tiny-bert"
    assert facts["final_loss"] < facts["first_loss"]
    assert finetune(texts, labels, names, SETTINGS, name="t-smoke") == path  # cached
    model, tok = load_finetuned(path, "cpu")
    assert model.config.id2label == dict(enumerate(names))
    logits = predict_logits(model, tok, texts, max_length=12)
    assert logits.shape == (len(texts), 2) and np.isfinite(logits).all()
    # Another label order is another model.
    flipped = finetune(texts, [1 - y for y in labels], names, SETTINGS, name="t-smoke")
    assert flipped != path


def test_finetune_is_deterministic_and_frozen_layers_stay_pretrained():
    texts, labels, names = _smoke()
    settings = FinetuneSettings(**{**SETTINGS.__dict__, "n_frozen": 1, "epochs": 1.0})
    path = finetune(texts, labels, names, settings, name="t-frozen")
    model, _ = load_finetuned(path, "cpu")
    base, _ = load_model("tiny-bert", device="cpu", task="sequence-classification")
    got = dict(model.named_parameters())
    for name, p in base.named_parameters():
        if "embeddings" in name or ".layer.0." in name:
            assert torch.equal(got[name], p), name
    assert not torch.equal(got["bert.encoder.layer.1.output.dense.weight"],
                           dict(base.named_parameters())["bert.encoder.layer.1.output.dense.weight"])  # fmt: skip


def test_top_frozen_layers_stay_pretrained_and_the_rest_trains():
    texts, labels, names = _smoke()
    settings = FinetuneSettings(
        **{**SETTINGS.__dict__, "n_frozen": 1, "freeze": "top", "epochs": 1.0}
    )
    path = finetune(texts, labels, names, settings, name="t-top")
    assert finetune_facts(path)["settings"]["freeze"] == "top"
    model, _ = load_finetuned(path, "cpu")
    base = dict(
        load_model("tiny-bert", device="cpu", task="sequence-classification")[0].named_parameters()
    )
    for name, p in model.named_parameters():
        if ".layer.1." in name:
            assert torch.equal(p, base[name]), name
    for name in [
        "bert.encoder.layer.0.output.dense.weight",
        "bert.embeddings.word_embeddings.weight",
    ]:
        assert not torch.equal(dict(model.named_parameters())[name], base[name]), name


def test_same_head_seed_gives_the_same_head_init():
    texts, labels, names = _smoke()
    tiny = FinetuneSettings(**{**SETTINGS.__dict__, "epochs": 0.01, "lr": 1e-9})
    a = load_finetuned(finetune(texts, labels, names, tiny, name="t-a"), "cpu")[0]
    b = load_finetuned(finetune(texts[:20], labels[:20], names, tiny, name="t-b"), "cpu")[0]
    assert torch.allclose(a.classifier.weight, b.classifier.weight, atol=1e-6)


def test_resume_gives_the_same_weights(tmp_path, monkeypatch):
    texts, labels, names = _smoke()
    settings = FinetuneSettings(**{**SETTINGS.__dict__, "checkpoint_every": 4})
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "straight"))
    straight = load_finetuned(finetune(texts, labels, names, settings, name="t-r"), "cpu")[0]
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "resumed"))
    assert finetune(texts, labels, names, settings, name="t-r", _stop_after=4) is None
    assert list((tmp_path / "resumed" / "finetune").glob(".t-r-*.partial/checkpoint.pt"))
    resumed = load_finetuned(finetune(texts, labels, names, settings, name="t-r"), "cpu")[0]
    for (n, p), q in zip(straight.named_parameters(), resumed.parameters()):
        assert torch.equal(p, q), n


def test_damaged_folder_is_moved_aside_and_retrained():
    texts, labels, names = _smoke()
    path = finetune(texts, labels, names, SETTINGS, name="t-damage")
    with open(path / "model.safetensors", "ab") as handle:
        handle.write(b"x")
    with pytest.warns(UserWarning, match="corrupt cache entry"):
        again = finetune(texts, labels, names, SETTINGS, name="t-damage")
    assert again == path and json.loads((path / "finetune.json").read_text())["steps"] == 20
    assert path.with_name(path.name + ".corrupt").is_dir()


def test_multitask_shares_the_encoder_and_keeps_one_head_per_task():
    a, b = _smoke("smoke"), _smoke("smoke-adverb")
    three = (b[0], b[1], ["x", "y", "z"])
    paths = finetune_multitask({"animal": a, "adverb": three}, SETTINGS, name="t-mtl")
    m1, tok = load_finetuned(paths["animal"], "cpu")
    m2, _ = load_finetuned(paths["adverb"], "cpu")
    assert m1.config.num_labels == 2 and m2.config.num_labels == 3
    p2 = dict(m2.named_parameters())
    for name, p in m1.named_parameters():
        if not name.startswith("classifier"):
            assert torch.equal(p, p2[name]), name
    assert finetune_facts(paths["adverb"])["tasks"]["adverb"]["n_train"] == 40
    head = with_head(m1, m2)
    assert head.config.num_labels == 3
    assert torch.equal(head.classifier.weight, m2.classifier.weight)
    assert predict_logits(head, tok, a[0][:3], max_length=12).shape == (3, 3)
    with pytest.raises(ValueError, match="at least two tasks"):
        finetune_multitask({"animal": a}, SETTINGS)


def test_bad_inputs_name_the_problem():
    texts, labels, names = _smoke()
    with pytest.raises(ValueError, match="outside range"):
        finetune(texts, [5] * len(texts), names, SETTINGS)
    with pytest.raises(ValueError, match="one entry each"):
        finetune(texts, labels[:-1], names, SETTINGS)
    with pytest.raises(ValueError, match="`name`"):
        finetune(texts, labels, names, SETTINGS, name="a/b")
    with pytest.raises(ValueError, match="epochs"):
        FinetuneSettings(epochs=0)


def test_hf_classification_reads_train_and_validation(monkeypatch):
    datasets = pytest.importorskip("datasets")

    def fake_load(path, config=None):
        assert (path, config) == ("glue", "sst2")
        features = datasets.Features(
            {"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=["n", "p"])}
        )
        split = {"sentence": ["good", "bad"], "label": [1, 0]}
        return datasets.DatasetDict(
            {
                "train": datasets.Dataset.from_dict(split, features=features),
                "validation": datasets.Dataset.from_dict(split, features=features),
            }
        )

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    d = load_classification("hf:glue:sst2")
    assert d["label_names"] == ["n", "p"] and d["test_texts"] == ["good", "bad"]
    assert d["train_labels"] == [1, 0]
    with pytest.raises(ValueError, match="hf:<dataset>"):
        load_classification("hf:")


@pytest.mark.parametrize("labels", [["neg", "pos"], ["a", "b", "c"]])
def test_head_is_drawn_from_head_seed_whatever_its_shape(labels):
    """A 2-label head has the shape of the loaded model's own untrained head: it must still
    come from ``head_seed`` (the "DH" variant and per-seed heads), the body from the base."""
    from lmsim.finetune._heads import _new_classifier

    settings = FinetuneSettings(base="tiny-bert")
    a, _ = _new_classifier(settings, labels, 0, "cpu", "single_label")
    b, _ = _new_classifier(settings, labels, 1000, "cpu", "single_label")
    again, _ = _new_classifier(settings, labels, 0, "cpu", "single_label")
    assert not torch.equal(a.classifier.weight, b.classifier.weight)
    assert torch.equal(a.classifier.weight, again.classifier.weight)
    body = [k for k in a.state_dict() if not k.startswith("classifier.")]
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in body)
