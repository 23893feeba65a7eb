"""Task arithmetic, TIES and DARE, and the released RegMean code's masked head merge.

The array functions are checked against naive implementations written from the papers'
formulas (explicit loops over entries and models) over seeds; ``merge_models`` against the
array functions, parameter by parameter, on tiny models built from configs and saved with
``save_pretrained``. Where mergekit or FusionBench is importable, the merges are also checked
against their implementations (the tests skip otherwise: neither is a dependency of lmsim).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from _kinds import build_base
from torch import nn
from transformers import AutoModelForSequenceClassification

from lmsim.merge import (
    METHODS,
    collect_grams,
    dare,
    dare_generator,
    dare_keep_mask,
    merge_models,
    simple_average,
    task_arithmetic,
    ties_merging,
    trim_threshold,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SEEDS = [0, 1, 2]


def _vectors(seed, k=3, shape=(7, 5)):
    """A base and ``k`` fine-tuned copies of one parameter (numpy, float64)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=shape)
    return [base + rng.normal(scale=0.1, size=shape) for _ in range(k)], base


# ====================================================================== naive references
def naive_trim(tau: np.ndarray, density: float, scope: str) -> np.ndarray:
    """Keep the ``max(1, ⌊density·n⌋)`` (parameter) or ``⌊density·n⌋ + 1`` (model) largest
    magnitudes, by sorting."""
    flat = np.abs(tau).ravel()
    k = int(density * flat.size)
    if k >= flat.size:
        return tau.copy()
    keep = k + 1 if scope == "model" else max(1, k)
    top = np.argsort(-flat, kind="stable")[:keep]
    mask = np.zeros(flat.size, bool)
    mask[top] = True
    return np.where(mask.reshape(tau.shape), tau, 0.0)


def naive_ties(params, base, density, scaling, scope="parameter"):
    """TIES entry by entry: trim, elect the sign of the sum, mean over the agreeing models."""
    trimmed = [naive_trim(p - base, density, scope) for p in params]
    out = np.array(base, dtype=float, copy=True)
    for idx in np.ndindex(base.shape):
        values = [t[idx] for t in trimmed]
        total = sum(values)
        sign = int(total > 0) - int(total < 0)
        agree = [v for v in values if v != 0 and np.sign(v) == sign]
        out[idx] += scaling * (sum(agree) / len(agree) if agree and sign else 0.0)
    return out


# ====================================================================== array functions
@pytest.mark.parametrize("scaling", [1.0, 0.4])
@pytest.mark.parametrize("seed", SEEDS)
def test_task_arithmetic_adds_scaled_task_vectors(seed, scaling):
    params, base = _vectors(seed)
    expected = base + scaling * sum(p - base for p in params)
    np.testing.assert_allclose(task_arithmetic(params, base, scaling), expected, atol=1e-14)


@pytest.mark.parametrize("seed", SEEDS)
def test_task_arithmetic_with_one_over_k_is_the_simple_average(seed):
    params, base = _vectors(seed, k=4)
    np.testing.assert_allclose(
        task_arithmetic(params, base, 1 / 4), simple_average(params), atol=1e-14
    )
    np.testing.assert_array_equal(task_arithmetic(params, base, 0.0), base)


@pytest.mark.parametrize("scope", ["parameter", "model"])
@pytest.mark.parametrize("density", [0.05, 0.2, 0.5, 0.99, 1.0])
@pytest.mark.parametrize("seed", SEEDS)
def test_trim_threshold_keeps_the_documented_count(seed, density, scope):
    tau = torch.from_numpy(np.random.default_rng(seed).normal(size=97))
    kept = int((tau.abs() >= trim_threshold(tau.abs(), density, scope)).sum())
    np.testing.assert_array_equal(np.count_nonzero(naive_trim(tau.numpy(), density, scope)), kept)
    k = int(density * 97)
    assert kept == (97 if k >= 97 else (k + 1 if scope == "model" else max(1, k)))


@pytest.mark.parametrize("density", [0.1, 0.3, 1.0])
@pytest.mark.parametrize("seed", SEEDS)
def test_ties_matches_naive(seed, density):
    params, base = _vectors(seed, k=4)
    got = ties_merging(params, base, density=density, scaling=0.8)
    np.testing.assert_allclose(got, naive_ties(params, base, density, 0.8), atol=1e-14)


def test_ties_of_agreeing_models_is_their_mean_and_of_identical_models_the_model():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(4, 4))
    step = np.abs(rng.normal(size=(4, 4)))  # every task vector positive: signs agree
    params = [base + c * step for c in (1.0, 2.0, 3.0)]
    np.testing.assert_allclose(ties_merging(params, base, density=1.0), base + 2 * step)
    np.testing.assert_allclose(ties_merging([params[0]] * 3, base, density=1.0), params[0])


@pytest.mark.parametrize("seed", SEEDS)
def test_dare_matches_its_formula_with_the_documented_masks(seed):
    params, base = _vectors(seed)
    p, lam = 0.6, 0.7
    masks = [
        dare_keep_mask(base.shape, p, dare_generator(seed, i, "w")).numpy()
        for i in range(len(params))
    ]
    expected = base + lam * sum(m * (q - base) / (1 - p) for m, q in zip(masks, params))
    got = dare(params, base, drop_rate=p, scaling=lam, seed=seed, name="w")
    np.testing.assert_allclose(got, expected, atol=1e-14)
    assert 0 < np.mean(masks) < 1  # some entries dropped, some kept


def test_dare_is_unbiased_and_drops_the_right_fraction():
    params, base = _vectors(0, k=2, shape=(30, 20))
    p = 0.7
    draws = np.stack([dare(params, base, p, seed=s) for s in range(300)])
    target = task_arithmetic(params, base)
    # Each entry is a mean of 300 draws of a sum of two rescaled Bernoulli terms.
    var = sum((q - base) ** 2 for q in params) * p / (1 - p)
    z = (draws.mean(0) - target) / np.sqrt(var / 300)
    assert np.abs(z).max() < 5.0
    assert abs(np.mean(z)) < 0.1
    keep = np.mean(
        [dare_keep_mask((100, 100), p, dare_generator(s, 0, "x")).numpy() for s in range(5)]
    )
    assert keep == pytest.approx(1 - p, abs=0.01)


def test_dare_seeds_and_the_zero_rate():
    params, base = _vectors(1)
    np.testing.assert_allclose(dare(params, base, 0.0), task_arithmetic(params, base), atol=1e-14)
    np.testing.assert_array_equal(dare(params, base, 0.5, seed=3), dare(params, base, 0.5, seed=3))
    assert not np.allclose(dare(params, base, 0.5, seed=3), dare(params, base, 0.5, seed=4))
    # A mask depends on the model index and the parameter's name, not on visiting order.
    a = dare_keep_mask((50,), 0.5, dare_generator(0, 1, "a.weight"))
    assert torch.equal(a, dare_keep_mask((50,), 0.5, dare_generator(0, 1, "a.weight")))
    assert not torch.equal(a, dare_keep_mask((50,), 0.5, dare_generator(0, 2, "a.weight")))
    assert not torch.equal(a, dare_keep_mask((50,), 0.5, dare_generator(0, 1, "b.weight")))


def test_torch_in_torch_out_and_errors_name_the_argument():
    params, base = _vectors(0)
    out = ties_merging([torch.from_numpy(p) for p in params], torch.from_numpy(base))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    with pytest.raises(ValueError, match="`density` must be in"):
        ties_merging(params, base, density=0.0)
    with pytest.raises(ValueError, match="`drop_rate` must be in"):
        dare(params, base, drop_rate=1.0)
    with pytest.raises(ValueError, match="`scaling` must be a finite"):
        task_arithmetic(params, base, scaling=float("nan"))
    with pytest.raises(ValueError, match="one shape"):
        task_arithmetic(params, base[:3])
    with pytest.raises(ValueError, match="`params` is empty"):
        task_arithmetic([], base)
    with pytest.raises(ValueError, match="`trim` must be one of"):
        trim_threshold(torch.ones(3), 0.5, "layer")


# ====================================================================== whole models
@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """A tiny RoBERTa base with a seeded 4-label head and three "fine-tuned" copies of it."""
    path = build_base("roberta", tmp_path_factory.mktemp("methods"), seed=0)

    def load():
        torch.manual_seed(5)  # the head every copy started from
        return AutoModelForSequenceClassification.from_pretrained(path, num_labels=4).eval()

    base = load()
    models = []
    for i in range(3):
        m = load()
        gen = torch.Generator().manual_seed(100 + i)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=gen))
        models.append(m)
    from transformers import AutoTokenizer

    return base, models, AutoTokenizer.from_pretrained(path)


def _named(model):
    return {k: v.detach().double() for k, v in model.named_parameters()}


@pytest.mark.parametrize(
    ("method", "array", "kw"),
    [
        ("task_arithmetic", task_arithmetic, {"scaling": 0.6}),
        ("ties", ties_merging, {"scaling": 0.9, "density": 0.3}),
        ("dare", dare, {"scaling": 0.5, "drop_rate": 0.4, "seed": 7}),
    ],
)
def test_merge_models_equals_the_array_functions(family, method, array, kw):
    base, models, _ = family
    merged, report = merge_models(models, method=method, base=base, trim="parameter", **kw)
    assert method in METHODS
    assert {h for h, _ in report.entries.values()} == {method}
    got, b = _named(merged), _named(base)
    for name, value in got.items():
        args = [[_named(m)[name] for m in models], b[name]]
        if method == "ties":
            ref = array(*args, density=kw["density"], scaling=kw["scaling"])
        elif method == "dare":
            ref = array(*args, kw["drop_rate"], kw["scaling"], seed=kw["seed"], name=name)
        else:
            ref = array(*args, kw["scaling"])
        torch.testing.assert_close(value, ref.float().double(), rtol=0, atol=1e-7, msg=name)


def test_ties_model_scope_takes_one_threshold_over_each_model(family):
    base, models, _ = family
    merged, _ = merge_models(models, method="ties", base=base, density=0.2, trim="model")
    b = {k: v.numpy() for k, v in _named(base).items()}
    names = list(b)
    # Naive: flatten each whole task vector, trim it once, then TIES entry by entry.
    flat = [np.concatenate([(_named(m)[n].numpy() - b[n]).ravel() for n in names]) for m in models]
    trimmed = [naive_trim(t, 0.2, "model") for t in flat]
    zeros = np.zeros_like(flat[0])
    expected = naive_ties([t for t in trimmed], zeros, density=1.0, scaling=1.0)
    offsets = np.cumsum([0] + [b[n].size for n in names])
    got = _named(merged)
    for j, n in enumerate(names):
        ref = b[n] + expected[offsets[j] : offsets[j + 1]].reshape(b[n].shape)
        np.testing.assert_allclose(got[n].numpy(), ref.astype(np.float32), atol=1e-7, err_msg=n)


def test_task_vector_methods_need_a_matching_base(family):
    base, models, _ = family
    with pytest.raises(ValueError, match="needs `base`"):
        merge_models(models, method="ties")
    partial = {k: v for k, v in base.named_parameters() if not k.startswith("classifier")}
    with pytest.raises(KeyError, match="no parameter 'classifier"):
        merge_models(models, method="task_arithmetic", base=partial)
    merged, report = merge_models(
        models, method="task_arithmetic", base=partial, exclude=r"^classifier\."
    )
    assert report.entries["classifier.dense.weight"][0] == "kept"
    wrong = dict(partial, **{"roberta.embeddings.word_embeddings.weight": torch.zeros(3, 3)})
    with pytest.raises(ValueError, match="has shape"):
        merge_models(models, method="dare", base=wrong, exclude=r"^classifier\.")
    with pytest.raises(ValueError, match="`density` must be in"):
        merge_models(models, method="ties", base=base, density=2.0)
    with pytest.raises(ValueError, match="`trim` must be one of"):
        merge_models(models, method="ties", base=base, trim="layer")
    with pytest.raises(TypeError, match="`base` must be"):
        merge_models(models, method="ties", base=3)


# ====================================================================== masked head
@pytest.mark.parametrize("method", ["simple", "regmean"])
def test_head_rows_average_each_label_over_its_models(family, method):
    base, models, tok = family
    rows = [[0, 1], [1, 2], [1]]  # label 3: no model; label 0: model 0 only
    texts = ["alice went to paris", "bob saw a dog today", "the cat and the bird"]
    grams = [collect_grams(m, tok, texts, progress=False, device="cpu") for m in models]
    merged, report = merge_models(
        models, grams=grams if method == "regmean" else None, method=method, head_rows=rows
    )
    name = "classifier.out_proj.weight"
    assert report.entries[name][0] == "masked"
    w = [m.get_parameter(name).detach().double() for m in models]
    expected = torch.stack([w[0][0], (w[0][1] + w[1][1] + w[2][1]) / 3, w[1][2], 0 * w[0][3]])
    torch.testing.assert_close(merged.get_parameter(name).double(), expected.float().double())
    # The head's bias follows the method (simple averaging under both, as in the released code).
    bias = torch.stack([m.get_parameter("classifier.out_proj.bias").detach() for m in models])
    torch.testing.assert_close(merged.get_parameter("classifier.out_proj.bias"), bias.mean(0))


def test_head_rows_errors(family):
    base, models, _ = family
    with pytest.raises(ValueError, match="one list of label ids per model"):
        merge_models(models, method="simple", head_rows=[[0], [1]])
    with pytest.raises(ValueError, match="must match exactly one parameter"):
        merge_models(models, method="simple", head_rows=[[0]] * 3, head_weight="weight")
    with pytest.raises(ValueError, match="has rows"):
        merge_models(models, method="simple", head_rows=[[0], [9], [1]])
    with pytest.raises(ValueError, match="excluded from the merge"):
        merge_models(models, method="simple", head_rows=[[0]] * 3, exclude="classifier")


# ====================================================================== other libraries
def _mergekit():
    try:
        from mergekit.merge_methods import registry
        from mergekit.merge_methods.base import TensorGroup
    except ImportError:
        pytest.skip("mergekit is not installed (pip install --no-deps mergekit to cross-check)")
    return registry, TensorGroup


@pytest.mark.parametrize("seed", SEEDS)
def test_ties_and_task_arithmetic_agree_with_mergekit(seed):
    registry, TensorGroup = _mergekit()
    params, base = _vectors(seed, k=4, shape=(9, 6))
    tensors = [torch.from_numpy(x) for x in [base, *params]]
    group = TensorGroup.from_tensors(tensors, base_index=0)
    ids = [e.id for e in group.non_base]

    def run(name, density, scaling, normalize):
        return registry.get(name).merge_group(
            group,
            int8_mask=False,
            normalize=normalize,
            rescale=False,
            weight=dict.fromkeys(ids, 1.0),
            density=dict.fromkeys(ids, density),
            **{"lambda": scaling},
        )

    ties = torch.from_numpy(ties_merging(params, base, density=0.3, scaling=0.8))
    torch.testing.assert_close(run("ties", 0.3, 0.8, True), ties, rtol=0, atol=1e-14)
    ta = torch.from_numpy(task_arithmetic(params, base, 0.6))
    torch.testing.assert_close(run("task_arithmetic", 1.0, 0.6, False), ta, rtol=0, atol=1e-14)


def _fusion_bench_ties(monkeypatch):
    """FusionBench's TIES utilities. Its package ``__init__`` imports lightning and hydra;
    the utilities need only torch and one type alias, so without those the file is loaded
    on its own with that alias stubbed."""
    spec = importlib.util.find_spec("fusion_bench")
    if spec is None:
        pytest.skip("fusion_bench is not installed (pip install --no-deps fusion-bench)")
    try:
        from fusion_bench.method.ties_merging import ties_merging_utils

        return ties_merging_utils
    except ImportError:
        pass
    path = Path(spec.submodule_search_locations[0]) / "method/ties_merging/ties_merging_utils.py"
    stub = types.ModuleType("fusion_bench.utils.type")
    stub.StateDictType = dict
    for name in ("fusion_bench", "fusion_bench.utils"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "fusion_bench.utils.type", stub)
    file_spec = importlib.util.spec_from_file_location("_fusion_bench_ties", path)
    module = importlib.util.module_from_spec(file_spec)
    file_spec.loader.exec_module(module)
    return module


def test_ties_model_scope_agrees_with_fusion_bench(family, monkeypatch, capsys):
    fb = _fusion_bench_ties(monkeypatch)
    base, models, _ = family
    b = _named(base)
    names = sorted(b)
    flat = torch.stack(
        [torch.cat([(_named(m)[n] - b[n]).reshape(-1) for n in names]) for m in models]
    )
    merged_tv = fb.ties_merging(flat, reset_thresh=0.2, merge_func="mean")
    merged, _ = merge_models(models, method="ties", base=base, density=0.2, trim="model")
    got = torch.cat([(_named(merged)[n] - b[n]).reshape(-1) for n in names])
    torch.testing.assert_close(got, merged_tv.float().double(), rtol=0, atol=1e-7)


# ====================================================================== released Fishers
def _naive_batch_fisher(model, tok, texts, loss_of, batch_size):
    """Mean over batches (padded to their longest text by the tokenizer) of the squared
    gradient of the batch's loss: the released ``compute_fisher``, written out."""
    totals = {n: torch.zeros_like(p, dtype=torch.float64) for n, p in model.named_parameters()}
    starts = range(0, len(texts), batch_size)
    for s in starts:
        enc = tok(texts[s : s + batch_size], padding=True, return_tensors="pt")
        model.zero_grad()
        loss_of(model(**enc).logits, slice(s, s + batch_size)).backward()
        for n, p in model.named_parameters():
            totals[n] += p.grad.double() ** 2
    model.zero_grad()
    return {n: t / len(starts) for n, t in totals.items()}


FISHER_TEXTS = [
    "alice went to paris today",
    "bob saw a dog",
    "the cat and the bird went to rome with carol",
    "a good dog",
    "then bob went to oslo",
]


def _hard(logits, _):
    log_probs = torch.log_softmax(logits, -1)
    return nn.functional.nll_loss(log_probs, logits.argmax(-1))


@pytest.mark.parametrize(
    ("problem", "mode", "labels", "loss_of"),
    [
        ("single_label_classification", "hard", None, _hard),
        # The released code's "hard" Fisher takes a softmax over multi-label logits too.
        ("multi_label_classification", "hard", None, _hard),
        (
            "single_label_classification",
            "hard_empirical",
            [0, 2, 1, 1, 0],
            lambda f, rows: nn.functional.cross_entropy(f, torch.tensor([0, 2, 1, 1, 0])[rows]),
        ),
        (
            "multi_label_classification",
            "hard_empirical",
            [[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 0, 0]],
            lambda f, rows: nn.functional.binary_cross_entropy_with_logits(
                f,
                torch.tensor(
                    [[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 0, 0]], dtype=torch.float32
                )[rows],
            ),
        ),
        (
            "regression",
            "hard",
            [0.5, 1.0, -0.3, 2.0, 0.1],
            lambda f, rows: nn.functional.mse_loss(
                f[:, 0], torch.tensor([0.5, 1.0, -0.3, 2.0, 0.1])[rows]
            ),
        ),
    ],
)
def test_released_fishers_square_batch_gradients(family, problem, mode, labels, loss_of):
    from lmsim.merge import collect_fishers

    _, models, tok = family
    path = models[0].config._name_or_path
    n_labels = 1 if problem == "regression" else 3
    torch.manual_seed(1)
    model = AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=n_labels, problem_type=problem
    ).eval()
    got = collect_fishers(model, tok, FISHER_TEXTS, labels, mode=mode, batch_size=2, progress=False)
    ref = _naive_batch_fisher(model, tok, FISHER_TEXTS, loss_of, batch_size=2)
    for name in ("classifier.out_proj.bias", "roberta.encoder.layer.1.output.dense.weight"):
        torch.testing.assert_close(got[name].double(), ref[name], rtol=1e-4, atol=1e-10)
    emb = "roberta.embeddings.word_embeddings.weight"  # sparse rows, squared after summing
    torch.testing.assert_close(got[emb].double(), ref[emb], rtol=1e-4, atol=1e-10)


def test_released_fisher_differs_from_the_per_example_fisher(family):
    from lmsim.merge import collect_fishers

    _, models, tok = family
    hard = collect_fishers(models[0], tok, FISHER_TEXTS, mode="hard", batch_size=1, progress=False)
    # With batches of one, the squared batch gradient is the per-example one: argmax labels.
    argmax = [int(models[0](**tok(t, return_tensors="pt")).logits.argmax()) for t in FISHER_TEXTS]
    emp = collect_fishers(models[0], tok, FISHER_TEXTS, argmax, mode="empirical", progress=False)
    name = "classifier.out_proj.weight"
    torch.testing.assert_close(hard[name], emp[name], rtol=1e-4, atol=1e-10)
    batched = collect_fishers(
        models[0], tok, FISHER_TEXTS, mode="hard", batch_size=4, progress=False
    )
    assert not torch.allclose(batched[name], hard[name], rtol=1e-3)
    with pytest.raises(ValueError, match="needs `labels`"):
        collect_fishers(models[0], tok, FISHER_TEXTS, mode="hard_empirical", progress=False)
    with pytest.raises(ValueError, match="`batch_size` must be a positive int"):
        collect_fishers(models[0], tok, FISHER_TEXTS, mode="hard", batch_size=0, progress=False)


@pytest.mark.parametrize(
    ("mode", "tags"), [("hard", None), ("hard_empirical", [[1, 0, 2], [0, 0], [3, 1, 0, 2]])]
)
def test_released_token_fisher_averages_nll_over_the_batch_words(tmp_path, mode, tags):
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from lmsim.merge import collect_fishers

    path = build_base("bert", tmp_path, seed=0)
    torch.manual_seed(2)
    model = AutoModelForTokenClassification.from_pretrained(path, num_labels=4).eval()
    tok = AutoTokenizer.from_pretrained(path)
    words = [["alice", "went", "paris"], ["bob", "smith"], ["the", "dog", "saw", "carol"]]
    got = collect_fishers(model, tok, words, tags, mode=mode, batch_size=3, progress=False)
    # Naive: one batch; each sentence alone (padding changes no real token's output), the
    # word's first sub-word picked by hand, the NLL averaged over the batch's words.
    nll = []
    for i, ws in enumerate(words):
        pieces = [tok(w, add_special_tokens=False)["input_ids"] for w in ws]
        ids = [tok.cls_token_id, *[t for p in pieces for t in p], tok.sep_token_id]
        starts = 1 + np.cumsum([0] + [len(p) for p in pieces])[:-1]
        log_probs = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, starts], -1)
        ys = log_probs.argmax(-1) if tags is None else torch.tensor(tags[i])
        nll.append(-log_probs[torch.arange(len(ws)), ys])
    model.zero_grad()
    torch.cat(nll).mean().backward()
    for name in ("classifier.bias", "bert.encoder.layer.0.attention.self.query.weight"):
        ref = model.get_parameter(name).grad.double() ** 2
        torch.testing.assert_close(got[name].double(), ref, rtol=1e-4, atol=1e-10)
