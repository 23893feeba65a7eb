"""Merging statistics for every task kind: Grams of pairs and word lists, Fishers of each
likelihood, ensembles, and RegMean on DistilBERT sequence and token classifiers.

Each statistic is checked against a naive per-example computation written from its
formula (explicit label enumeration for the expected Fishers); tiny random models built
from configs and saved with ``save_pretrained``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from _kinds import ANIMALS, TAGS, build_base, multilabel_task, pairs_task, token_task
from transformers import (
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
)

from lmsim.finetune import head_pattern, predict_logits
from lmsim.merge import collect_fishers, collect_grams, ensemble_logits, merge_models

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    root = tmp_path_factory.mktemp("bases")
    return {
        (arch, seed): build_base(arch, root, seed)
        for arch in ("bert", "roberta", "distilbert")
        for seed in range(3)
    }


def _classifier(path, kind: str, n_labels: int, seed: int = 0):
    """A classifier of ``kind`` on the base at ``path``, its head drawn from ``seed``."""
    torch.manual_seed(seed)
    if kind == "token":
        model = AutoModelForTokenClassification.from_pretrained(path, num_labels=n_labels)
    else:
        problem = {"multi_label": "multi_label_classification", "regression": "regression"}
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=n_labels, problem_type=problem.get(kind)
        )
    return model.eval(), AutoTokenizer.from_pretrained(path)


def _ids(tok, x, arch):
    """Naive token ids of one input: the tokenizer's own call, or each word alone (after a
    space for byte-level BPE) between the special tokens, with first-sub-word positions."""
    if isinstance(x, tuple):
        enc = tok(*x)
        return {k: torch.tensor([v]) for k, v in enc.items() if k != "attention_mask"}, None
    if isinstance(x, str):
        return {"input_ids": torch.tensor([tok(x)["input_ids"]])}, None
    prefix = " " if arch == "roberta" else ""
    pieces = [tok(prefix + w, add_special_tokens=False)["input_ids"] for w in x]
    ids = [tok.cls_token_id, *[i for p in pieces for i in p], tok.sep_token_id]
    starts = 1 + np.cumsum([0] + [len(p) for p in pieces])[:-1]
    return {"input_ids": torch.tensor([ids])}, torch.as_tensor(starts)


def _forward(model, tok, x, arch):
    inputs, starts = _ids(tok, x, arch)
    if "token_type_ids" in inputs and model.config.model_type != "bert":
        inputs.pop("token_type_ids")
    return model(**inputs).logits, starts


# ------------------------------------------------------------------ Grams
@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert"])
@pytest.mark.parametrize("kind", ["pairs", "token"])
def test_grams_of_pairs_and_words_equal_a_naive_hook(bases, arch, kind):
    model, tok = _classifier(bases[arch, 0], "token" if kind == "token" else "single_label", 4)
    inputs = pairs_task(7, seed=1)[0] if kind == "pairs" else token_task(7, seed=1)[0]
    got = collect_grams(model, tok, inputs, reduction="sum", batch_size=3, progress=False)
    names = [n for n in got if n.endswith(("layer.0.attention.self.query", "q_lin", "classifier"))]
    assert names
    rows = {n: [] for n in names}
    hooks = [
        model.get_submodule(n).register_forward_pre_hook(
            lambda _, a, n=n: rows[n].append(a[0].reshape(-1, a[0].shape[-1]))
        )
        for n in names
    ]
    try:
        with torch.no_grad():
            for x in inputs:
                _forward(model, tok, x, arch)
    finally:
        for h in hooks:
            h.remove()
    for n in names:
        X = torch.cat(rows[n]).double()
        torch.testing.assert_close(got[n], X.T @ X, atol=1e-5, rtol=1e-5, msg=n)
    mean = collect_grams(model, tok, inputs, batch_size=3, progress=False)
    n_rows = sum(r.shape[0] for r in rows[names[0]])
    torch.testing.assert_close(mean[names[0]] * n_rows, got[names[0]])


def test_bert_pairs_carry_segment_ids(bases):
    model, tok = _classifier(bases["bert", 0], "single_label", 2)
    inputs = pairs_task(4, seed=2)[0]
    name = "bert.encoder.layer.0.attention.self.query"
    with_types = collect_grams(model, tok, inputs, reduction="sum", progress=False)[name]
    rows = []
    hook = model.get_submodule(name).register_forward_pre_hook(lambda _, a: rows.append(a[0][0]))
    try:
        with torch.no_grad():
            for a, b in inputs:
                model(input_ids=torch.tensor([tok(a, b)["input_ids"]]))  # segment ids all 0
    finally:
        hook.remove()
    X = torch.cat(rows).double()
    assert not torch.allclose(with_types, X.T @ X, atol=1e-4)


# ------------------------------------------------------------------ Fishers
def _naive_fisher(model, tok, inputs, arch, log_lik_terms):
    """Mean over inputs of Σ_terms weight · (∇ log-likelihood)², one backward per term."""
    params = dict(model.named_parameters())
    total = {n: torch.zeros_like(p, dtype=torch.float64) for n, p in params.items()}
    for i, x in enumerate(inputs):
        logits, starts = _forward(model, tok, x, arch)
        for value, weight in log_lik_terms(i, logits, starts):
            grads = torch.autograd.grad(value, list(params.values()), retain_graph=True)
            for n, g in zip(params, grads):
                total[n] += weight * g.double() ** 2
    return {n: t / len(inputs) for n, t in total.items()}


def _close(got, ref, names=None):
    for n in names or ref:
        torch.testing.assert_close(got[n].double(), ref[n], rtol=1e-4, atol=1e-10, msg=n)


@pytest.mark.parametrize("arch", ["bert", "distilbert"])
def test_multilabel_fishers_match_bernoulli_likelihoods(bases, arch):
    model, tok = _classifier(bases[arch, 0], "multi_label", 3)
    inputs, labels, _ = multilabel_task(4, seed=3)

    def log_lik(f, y):
        s = torch.sigmoid(f)
        y = torch.as_tensor(y, dtype=torch.float32)
        return (y * s.log() + (1 - y) * (1 - s).log()).sum()

    emp = collect_fishers(model, tok, inputs, labels, mode="empirical", progress=False)
    _close(
        emp,
        _naive_fisher(model, tok, inputs, arch, lambda i, f, _: [(log_lik(f[0], labels[i]), 1.0)]),
    )

    def every_vector(i, f, _):  # the exact expectation over all 2^L label vectors
        out = []
        for y in itertools.product([0, 1], repeat=len(ANIMALS)):
            value = log_lik(f[0], y)
            out.append((value, float(value.detach().exp())))
        return out

    exp = collect_fishers(model, tok, inputs, mode="expected", progress=False)
    _close(exp, _naive_fisher(model, tok, inputs, arch, every_vector))
    a = collect_fishers(model, tok, inputs, mode="sample", seed=1, progress=False)
    b = collect_fishers(model, tok, inputs, mode="sample", seed=1, progress=False)
    assert all(torch.equal(a[n], b[n]) for n in a)


def test_regression_fishers_match_the_gaussian_likelihood(bases):
    model, tok = _classifier(bases["bert", 0], "regression", 1)
    inputs = multilabel_task(4, seed=4)[0]
    labels = [0.5, -1.0, 2.0, 0.0]
    emp = collect_fishers(model, tok, inputs, labels, mode="empirical", progress=False)
    ref = _naive_fisher(
        model, tok, inputs, "bert", lambda i, f, _: [(-0.5 * (labels[i] - f[0, 0]) ** 2, 1.0)]
    )
    _close(emp, ref)
    # E_y[((y − f) ∇f)²] = Var(y) (∇f)² = (∇f)² for y ~ N(f, 1).
    exp = collect_fishers(model, tok, inputs, mode="expected", progress=False)
    _close(exp, _naive_fisher(model, tok, inputs, "bert", lambda i, f, _: [(f[0, 0], 1.0)]))


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_token_fishers_sum_word_log_likelihoods(bases, arch):
    model, tok = _classifier(bases[arch, 0], "token", len(TAGS))
    inputs, labels, _ = token_task(4, seed=5)

    def gold(i, logits, starts):
        lp = logits[0, starts].log_softmax(-1)
        return [(lp[torch.arange(len(starts)), torch.tensor(labels[i])].sum(), 1.0)]

    emp = collect_fishers(model, tok, inputs, labels, mode="empirical", progress=False)
    _close(emp, _naive_fisher(model, tok, inputs, arch, gold))
    short = [w[:3] for w in inputs]  # 4^3 joint taggings per sentence, enumerated

    def every_tagging(i, logits, starts):
        lp = logits[0, starts].log_softmax(-1)
        out = []
        for ys in itertools.product(range(len(TAGS)), repeat=len(starts)):
            value = lp[torch.arange(len(starts)), torch.tensor(ys)].sum()
            out.append((value, float(value.detach().exp())))
        return out

    exp = collect_fishers(model, tok, short, mode="expected", progress=False)
    names = ["classifier.bias", "classifier.weight", next(n for n, _ in model.named_parameters())]
    _close(exp, _naive_fisher(model, tok, short, arch, every_tagging), names)


def test_sample_fishers_average_to_the_expected_fisher(bases):
    """The sampled Fisher is an unbiased estimate: its mean over seeds nears the exact one."""
    model, tok = _classifier(bases["bert", 0], "token", len(TAGS))
    inputs = [w[:3] for w in token_task(3, seed=6)[0]]
    exp = collect_fishers(model, tok, inputs, mode="expected", progress=False)["classifier.bias"]
    samples = [
        collect_fishers(model, tok, inputs, mode="sample", seed=s, progress=False)[
            "classifier.bias"
        ]
        for s in range(150)
    ]
    mean = torch.stack(samples).mean(0)
    assert float((mean - exp).abs().sum() / exp.abs().sum()) < 0.15


def test_fisher_kind_must_match_the_model(bases):
    model, tok = _classifier(bases["bert", 0], "single_label", 2)
    with pytest.raises(ValueError, match="kind.*token.*ForTokenClassification"):
        collect_fishers(model, tok, [["a", "b"]], kind="token", progress=False)


# ------------------------------------------------------------------ ensembles
@pytest.mark.parametrize("kind", ["multi_label", "token"])
def test_ensemble_is_the_mean_of_each_models_logits(bases, kind):
    n_labels = len(TAGS) if kind == "token" else len(ANIMALS)
    models = [_classifier(bases["bert", s], kind, n_labels, s)[0] for s in range(3)]
    tok = AutoTokenizer.from_pretrained(bases["bert", 0])
    inputs = token_task(5, seed=7)[0] if kind == "token" else multilabel_task(5, seed=7)[0]
    got = ensemble_logits(models, tok, inputs, batch_size=2, max_length=10)
    each = [predict_logits(m, tok, inputs, max_length=10) for m in models]
    if kind == "token":
        assert isinstance(got, list) and len(got) == len(inputs)
        for i, rows in enumerate(got):
            np.testing.assert_allclose(rows, np.mean([e[i] for e in each], axis=0), atol=1e-6)
        assert any(np.isnan(rows).any() for rows in got)  # max_length cut some words
    else:
        np.testing.assert_allclose(got, np.mean(each, axis=0), atol=1e-6)


# ------------------------------------------------------------------ DistilBERT merges
def _naive_regmean(Ws, Gs, alpha):
    Gt = [alpha * G + (1 - alpha) * np.diag(np.diag(G)) for G in Gs]
    return np.linalg.solve(sum(Gt), sum(G @ W.T for G, W in zip(Gt, Ws))).T


@pytest.mark.parametrize("kind", ["single_label", "token"])
def test_distilbert_merges_follow_the_recipe(bases, kind):
    n_labels = len(TAGS) if kind == "token" else 2
    models = [_classifier(bases["distilbert", s], kind, n_labels, s)[0] for s in range(3)]
    tok = AutoTokenizer.from_pretrained(bases["distilbert", 0])
    data = token_task(12, seed=8)[0] if kind == "token" else pairs_task(12, seed=8)[0]
    grams = [collect_grams(m, tok, data[i::3], progress=False) for i, m in enumerate(models)]
    pattern = head_pattern(models[0])
    merged, report = merge_models(models, grams, alpha=0.9, exclude=pattern)
    report.check_complete(merged)
    head = {n for n, _ in merged.named_parameters() if not n.startswith("distilbert.")}
    assert set(report.names("kept")) == head
    for name, (how, _) in report.entries.items():
        got = merged.get_parameter(name).detach().double().numpy()
        ps = [m.get_parameter(name).detach().double().numpy() for m in models]
        if how == "regmean":
            module = name.removesuffix(".weight")
            ref = _naive_regmean(ps, [g[module].numpy() for g in grams], 0.9)
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5, err_msg=name)
        elif how == "simple":
            np.testing.assert_allclose(got, np.mean(ps, axis=0), atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(got, ps[0])
    assert report.counts()["regmean"] == 12  # 6 linear layers in each of 2 blocks
