"""Fine-tuning every task kind: text pairs, multi-label, regression, token classification.

Tiny BERT, RoBERTa and DistilBERT built from configs (saved with ``save_pretrained`` and
loaded through ``from_pretrained``), in-memory tokenizers, inline labelled inputs.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from _kinds import ARCHS, TAGS, TASKS, build_base, pairs_task, token_task
from transformers import AutoTokenizer

from lmsim.encoding import encode_inputs, forward_keys, model_kind, pad_batch
from lmsim.finetune import (
    FinetuneSettings,
    _check_task,
    _digest,
    _loss,
    _targets,
    finetune,
    finetune_facts,
    finetune_multitask,
    head_pattern,
    load_finetuned,
    predict_logits,
    with_head,
)

# ------------------------------------------------------------------ cache digests
# Computed with the code before task kinds existed (commit 73914cf): the book's cached
# fine-tunes are found by these digests, so they must never change.
PINNED_TEXTS = ["the film was great", "a dull and boring plot", "Ünïcode — text ✓", "ok"]


def test_single_label_digest_of_plain_texts_is_pinned():
    """Digests change only with the cache format: format 2 (heads drawn from head_seed
    whatever their shape) replaced format 1's 79f8d720e39cf00a and 7a469ea6e8372bd6."""
    tasks = {"clf": _check_task("clf", PINNED_TEXTS, [1, 0, 1, 0], ["neg", "pos"])}
    assert _digest(tasks, FinetuneSettings()) == "dd05eb5659c8012b"
    two = {
        "a": _check_task("a", PINNED_TEXTS, [1, 0, 1, 0], ["neg", "pos"]),
        "b": _check_task("b", PINNED_TEXTS[:3], [0, 2, 1], ["x", "y", "z"]),
    }
    settings = FinetuneSettings(base="tiny-bert", n_frozen=1, freeze="top", epochs=2.5)
    assert _digest(two, settings) == "515421f0eaff0789"


# ------------------------------------------------------------------ setup
SETTINGS = FinetuneSettings(max_length=24, batch_size=8, epochs=4.0, lr=5e-3, device="cpu")


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    root = tmp_path_factory.mktemp("bases")
    return {arch: build_base(arch, root) for arch in ARCHS}


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch, one_torch_thread):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path_factory.getbasetemp() / "ft-kinds-cache"))


@functools.cache
def _trained(base: str, kind: str):
    """One fine-tune per (base, kind), shared by the tests (cached on disk too)."""
    inputs, labels, names = TASKS[kind]()
    settings = dataclasses.replace(SETTINGS, base=base)
    path = finetune(inputs, labels, names, settings, kind=kind, name=f"k-{kind}")
    return path, inputs, labels, names


# ------------------------------------------------------------------ encoding
def _naive_word_ids(tok, words, prefix):
    """Ids of pre-split words the naive way: each word tokenised alone (after a space for
    byte-level BPE), concatenated between the special tokens of a one-text encoding."""
    pieces = [tok(prefix + w, add_special_tokens=False)["input_ids"] for w in words]
    starts = np.cumsum([0] + [len(p) for p in pieces])[:-1]
    return [i for p in pieces for i in p], starts


@pytest.mark.parametrize("arch", ARCHS)
def test_word_encoding_marks_first_subwords(bases, arch):
    tok = AutoTokenizer.from_pretrained(bases[arch])
    inputs, _, _ = token_task(6, seed=1)
    enc = encode_inputs(tok, inputs, None, "token")
    for words, ids, index in zip(inputs, enc["input_ids"], enc["word_index"]):
        body, starts = _naive_word_ids(tok, words, " " if arch == "roberta" else "")
        assert ids[1:-1] == body  # one special token each side
        assert [i for i, w in enumerate(index) if w >= 0] == [s + 1 for s in starts]
        assert [w for w in index if w >= 0] == list(range(len(words)))
    cut = encode_inputs(tok, inputs, 6, "token")
    assert all(len(x) <= 6 for x in cut["input_ids"])
    kept = [[w for w in index if w >= 0] for index in cut["word_index"]]
    assert all(k == list(range(len(k))) for k in kept)  # a prefix of the words survives
    assert any(len(k) < len(words) for k, words in zip(kept, inputs))


@pytest.mark.parametrize("arch", ARCHS)
def test_pair_encoding_is_the_tokenizers_pair_call(bases, arch):
    tok = AutoTokenizer.from_pretrained(bases[arch])
    inputs, _, _ = pairs_task(5, seed=2)
    enc = encode_inputs(tok, inputs, 12)
    for (a, b), ids in zip(inputs, enc["input_ids"]):
        assert ids == tok(a, b, truncation=True, max_length=12)["input_ids"]
    assert ("token_type_ids" in enc) == (arch == "bert")
    if arch == "bert":
        assert all(set(t) == {0, 1} for t in enc["token_type_ids"])
    batch = pad_batch(enc, [3, 0], tok.pad_token_id)
    lengths = [len(enc["input_ids"][i]) for i in (3, 0)]
    assert batch["attention_mask"].sum(1).tolist() == lengths
    assert (batch["input_ids"][batch["attention_mask"] == 0] == tok.pad_token_id).all()


def test_inputs_errors_name_the_problem(bases):
    tok = AutoTokenizer.from_pretrained(bases["bert"])
    with pytest.raises(ValueError, match="one form"):
        encode_inputs(tok, ["a text", ("a", "pair")], 8)
    with pytest.raises(TypeError, match="kind='token'"):
        encode_inputs(tok, [["three", "word", "list"]], 8)
    with pytest.raises(TypeError, match="list of words"):
        encode_inputs(tok, ["not split"], 8, "token")
    with pytest.raises(ValueError, match="`kind` must be one of"):
        encode_inputs(tok, ["x"], 8, "ner")


def test_encoding_is_torch_free():
    code = "import sys, lmsim.encoding; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_model_kind_follows_the_class_then_problem_type():
    def fake(cls_name, **config):
        return type(cls_name, (), {"config": SimpleNamespace(**config)})()

    assert model_kind(fake("BertForTokenClassification", num_labels=1)) == "token"
    assert model_kind(fake("M", problem_type="multi_label_classification")) == "multi_label"
    assert model_kind(fake("M", problem_type="regression", num_labels=1)) == "regression"
    assert model_kind(fake("M", problem_type=None, num_labels=1)) == "regression"  # HF's rule
    assert model_kind(fake("M", problem_type=None, num_labels=3)) == "single_label"


@pytest.mark.parametrize("arch", ARCHS)
def test_segment_ids_reach_only_models_with_segment_embeddings(bases, arch):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(bases[arch])
    keys = ["input_ids", "attention_mask", "token_type_ids"]
    assert forward_keys(model, keys) == keys[: 3 if arch == "bert" else 2]
    assert forward_keys(model, keys[:2]) == keys[:2]


# ------------------------------------------------------------------ losses
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_losses_match_the_formulas(seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(5, 3, generator=g)
    y = torch.randint(0, 3, (5,), generator=g)
    p = logits.softmax(-1)
    assert _loss("single_label", logits, y) == pytest.approx(
        float(-p[torch.arange(5), y].log().mean()), rel=1e-5
    )
    multi = torch.randint(0, 2, (5, 3), generator=g).float()
    s = logits.sigmoid()
    naive = -(multi * s.log() + (1 - multi) * (1 - s).log()).mean()
    assert _loss("multi_label", logits, multi) == pytest.approx(float(naive), rel=1e-5)
    target = torch.randn(5, generator=g)
    naive = ((logits[:, 0] - target) ** 2).mean()
    assert _loss("regression", logits[:, :1], target) == pytest.approx(float(naive), rel=1e-5)
    tokens = torch.randn(2, 4, 3, generator=g)
    tags = torch.tensor([[-100, 1, 2, -100], [-100, 0, -100, -100]])
    kept = [(0, 1), (0, 2), (1, 1)]
    naive = -np.mean([float(tokens[b, t].log_softmax(-1)[tags[b, t]]) for b, t in kept])
    assert _loss("token", tokens, tags) == pytest.approx(naive, rel=1e-5)


def test_token_targets_sit_on_first_subwords(bases):
    tok = AutoTokenizer.from_pretrained(bases["roberta"])
    inputs, labels, _ = token_task(4, seed=3)
    enc = encode_inputs(tok, inputs, 24, "token")
    batch = pad_batch(enc, [0, 1, 2, 3], tok.pad_token_id)
    target = _targets("token", labels, batch).numpy()
    for b, (index, tags) in enumerate(zip(batch["word_index"], labels)):
        for t, w in enumerate(index):
            assert target[b, t] == (tags[w] if w >= 0 else -100)


# ------------------------------------------------------------------ training per kind
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", list(TASKS))
def test_every_kind_learns_round_trips_and_predicts(bases, arch, kind):
    path, inputs, labels, names = _trained(bases[arch], kind)
    facts = finetune_facts(path)
    assert facts["final_loss"] < facts["first_loss"], facts
    assert facts["tasks"][f"k-{kind}"]["kind"] == kind
    model, tok = load_finetuned(path, "cpu")
    assert model_kind(model) == kind
    assert (type(model).__name__.endswith("ForTokenClassification")) == (kind == "token")
    logits = predict_logits(model, tok, inputs, max_length=62, batch_size=5)
    if kind == "token":
        assert [x.shape for x in logits] == [(len(w), len(names)) for w in inputs]
        assert all(np.isfinite(x).all() and x.dtype == np.float64 for x in logits)
    else:
        assert logits.shape == (len(inputs), len(names)) and logits.dtype == np.float64
        assert np.isfinite(logits).all()
    # A second call with the same inputs reads the cache.
    settings = dataclasses.replace(SETTINGS, base=bases[arch])
    again = finetune(inputs, labels, names, settings, kind=kind, name=f"k-{kind}")
    assert again == path


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_token_logits_are_first_subword_rows_of_a_plain_forward(bases, arch):
    path, inputs, _, _ = _trained(bases[arch], "token")
    model, tok = load_finetuned(path, "cpu")
    got = predict_logits(model, tok, inputs[:6], max_length=24, batch_size=4)
    prefix = " " if arch == "roberta" else ""
    for words, rows in zip(inputs[:6], got):
        body, starts = _naive_word_ids(tok, words, prefix)
        ids = [tok.cls_token_id, *body, tok.sep_token_id]
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids])).logits[0].double().numpy()
        np.testing.assert_allclose(rows, out[np.asarray(starts) + 1], atol=1e-5)
    short = predict_logits(model, tok, inputs[:6], max_length=5)
    for words, rows in zip(inputs[:6], short):
        n_kept = int(np.isfinite(rows[:, 0]).sum())
        assert 0 < n_kept < len(words) and np.isnan(rows[n_kept:]).all()


def test_regression_learns_the_score(bases):
    path, inputs, labels, _ = _trained(bases["bert"], "regression")
    model, tok = load_finetuned(path, "cpu")
    pred = predict_logits(model, tok, inputs, max_length=24)[:, 0]
    assert np.corrcoef(pred, labels)[0, 1] > 0.3


# ------------------------------------------------------------------ digests and checks
def test_kinds_and_forms_have_their_own_digests():
    texts, labels = ["a b", "c d"], [0, 1]
    base = _digest({"t": (texts, labels, ["x", "y"])}, FinetuneSettings())
    pairs = [("a", "b"), ("c", "d")]
    assert _digest({"t": (pairs, labels, ["x", "y"])}, FinetuneSettings()) != base
    assert _digest({"t": (texts, labels, ["x", "y"], "single_label")}, FinetuneSettings()) == base
    multi = _check_task("t", texts, [[0, 1], [1, 1]], ["x", "y"], "multi_label")
    reg = _check_task("t", texts, [0.0, 1.0], ["score"], "regression")
    words = _check_task("t", [["a", "b"], ["c"]], [[0, 1], [1]], ["x", "y"], "token")
    digests = {base, *(_digest({"t": t}, FinetuneSettings()) for t in (multi, reg, words))}
    assert len(digests) == 4


def test_bad_labels_name_the_task_and_the_fix():
    texts = ["a b", "c d"]
    with pytest.raises(
        ValueError,
        match=r"labels\[0\] is \[0, 2\], which holds 2 .*multi-hot list of 2 zeros and ones",
    ):
        _check_task("t", texts, [[0, 2], [1, 1]], ["x", "y"], "multi_label")
    with pytest.raises(ValueError, match="exactly 1"):
        _check_task("t", texts, [0.0, 1.0], ["x", "y"], "regression")
    with pytest.raises(
        ValueError, match=r"labels\[1\] is the non-finite nan; a regression label is a finite float"
    ):
        _check_task("t", texts, [0.0, float("nan")], ["score"], "regression")
    with pytest.raises(ValueError, match="1 tags for 2 words"):
        _check_task("t", [["a", "b"]], [[0]], ["x", "y"], "token")
    with pytest.raises(ValueError, match=r"labels\[0\] is a tag that is 5, outside range\(2\)"):
        _check_task("t", [["a", "b"]], [[0, 5]], ["x", "y"], "token")
    with pytest.raises(ValueError, match="`kind` must be one of"):
        _check_task("t", texts, [0, 1], ["x", "y"], "ner")


# ------------------------------------------------------------------ heads
@pytest.mark.parametrize("arch", ARCHS)
def test_head_pattern_names_the_task_head(bases, arch):
    seq = load_finetuned(_trained(bases[arch], "single_label")[0], "cpu")[0]
    tokm = load_finetuned(_trained(bases[arch], "token")[0], "cpu")[0]
    expected = r"^(pre_classifier|classifier)\." if arch == "distilbert" else r"^classifier\."
    assert head_pattern(seq) == expected
    assert head_pattern(tokm) == r"^classifier\."
    # Naive: the parameters that are not in the base model.
    prefix = seq.base_model_prefix
    for model in (seq, tokm):
        head = {n for n, _ in model.named_parameters() if re.search(head_pattern(model), n)}
        assert head == {n for n, _ in model.named_parameters() if not n.startswith(prefix + ".")}


@pytest.mark.parametrize("arch", ["bert", "distilbert"])
def test_with_head_takes_the_donors_head_and_kind(bases, arch):
    single = load_finetuned(_trained(bases[arch], "single_label")[0], "cpu")[0]
    multi = load_finetuned(_trained(bases[arch], "multi_label")[0], "cpu")[0]
    out = with_head(single, multi)
    assert model_kind(out) == "multi_label" and out.config.num_labels == 3
    for name, p in multi.named_parameters():
        if name.split(".")[0] != multi.base_model_prefix:
            assert torch.equal(out.get_parameter(name), p), name
        else:
            assert torch.equal(out.get_parameter(name), single.get_parameter(name)), name
    tokm = load_finetuned(_trained(bases[arch], "token")[0], "cpu")[0]
    with pytest.raises(ValueError, match="token head"):
        with_head(single, tokm)


def test_multitask_mixes_token_and_sequence_tasks(bases):
    settings = dataclasses.replace(SETTINGS, base=bases["bert"], epochs=1.0)
    tasks = {
        "ner": (*token_task(24), "token"),
        "pairs": pairs_task(24),
        "score": (*TASKS["regression"](24), "regression"),
    }
    paths = finetune_multitask(tasks, settings, name="k-mtl")
    models = {k: load_finetuned(p, "cpu")[0] for k, p in paths.items()}
    assert [model_kind(m) for m in models.values()] == ["token", "single_label", "regression"]
    body = dict(models["pairs"].bert.encoder.named_parameters())
    for name, p in models["ner"].bert.encoder.named_parameters():
        assert torch.equal(p, body[name]), name
    assert models["ner"].config.id2label == dict(enumerate(TAGS))
