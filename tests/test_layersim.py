"""lmsim.extract.layer_pairs: the out-of-core (one pass per pair of models) similarity matrices."""

import numpy as np
import pytest
from _helpers import cache_without, execute_page

from lmsim.data import load_corpus
from lmsim.extract import extract_activations, extract_moments
from lmsim.extract.layer_pairs import moments_without_first_words, pairwise_by_model_pairs
from lmsim.metrics import pairwise_matrix
from lmsim.models import load_model
from lmsim.moments import Moments

# Wu et al.'s five measures (paper-compatible SVCCA / PWCCA, as their figures) and the
# textbook forms page 01 adds.
METRICS = {
    "neuronsim": ("neuronsim", {}),
    "mixedsim": ("mixedsim", {}),
    "svsim": ("svcca", {"paper_compat": True}),
    "pwsim": ("pwcca", {"paper_compat": True}),
    "ckasim": ("linear_cka", {}),
    "svsim (textbook)": ("svcca", {"paper_compat": False}),
    "pwsim (textbook)": ("pwcca", {"paper_compat": False}),
}


@pytest.mark.parametrize("given", ["names", "loaded"])
def test_pair_passes_equal_one_joint_pass(given):
    sentences = [line.split() for line in load_corpus("smoke", "valid")][:12]
    models = ["tiny-bert", "tiny-gpt2", "tiny-llama"]
    kw = {"pooling": "word", "batch_size": 8, "device": "cpu", "cache": False}
    # Page 04 passes its loaded models (reused by every pair), page 01 names.
    chosen = models if given == "names" else {m: load_model(m, device="cpu") for m in models}
    names, sims = pairwise_by_model_pairs(
        chosen, sentences, METRICS, layers={"tiny-llama": [0, 2]}, **kw
    )
    mom = extract_moments(
        models,
        sentences,
        layers={m: [0, 2] if m == "tiny-llama" else "all" for m in models},
        progress=False,
        **kw,
    )
    assert names == mom.names
    for label, (metric, options) in METRICS.items():
        joint = pairwise_matrix(mom, names, metric=metric, progress=False, **options)
        np.testing.assert_allclose(sims[label], joint, atol=1e-8, err_msg=label)


def test_pair_passes_reject_empty_and_duplicate_models():
    with pytest.raises(ValueError, match="empty"):
        pairwise_by_model_pairs([], [["a"]], METRICS)
    with pytest.raises(ValueError, match="duplicate"):
        pairwise_by_model_pairs(["tiny-bert", "tiny-bert"], [["a"]], METRICS)
    with pytest.raises(TypeError, match="wrap it"):
        pairwise_by_model_pairs("tiny-bert", [["a"]], METRICS)


@pytest.mark.slow
def test_controls_page_runs_pair_by_pair(tmp_path, monkeypatch):
    """Page 04 with its smoke values in the paper profile's modes (Gram matrices for Fig. 2,
    one extraction per pair of models for Fig. 9, no pair cache): its sanity claim compares
    Fig. 2's ckasim through Gram matrices with the pairs' moment-based ckasim."""
    shown = execute_page(
        tmp_path,
        monkeypatch,
        "wu2020_similarity",
        "04_controls",
        {"gram": True, "model_pairs": True, "cache_pairs": False},
    )
    assert "first-corpus ckasim" in shown and "pair by pair" in shown


@pytest.mark.slow
def test_representations_page_runs_pair_by_pair_without_a_cache(tmp_path, monkeypatch):
    """Page 01 with its smoke values in the paper profile's mode (one extraction per pair of
    models, the pairs' moments not cached): no shard of any pair is written."""
    cache = cache_without(tmp_path, monkeypatch, "acts")  # the shared models, no moments
    shown = execute_page(
        tmp_path,
        monkeypatch,
        "wu2020_similarity",
        "01_representations",
        {"model_pairs": True, "cache_pairs": False},
    )
    assert "one pass per pair of models" in shown and "skipped with model_pairs" in shown
    assert not list(cache.rglob("acts/*/shard_*.safetensors"))


def test_chosen_pairs_equal_the_joint_pass_where_computed(monkeypatch):
    """The thesis's page: each model's own blocks and its teacher x student block only."""
    sentences = [line.split() for line in load_corpus("smoke", "valid")][:10]
    models = ["tiny-bert", "tiny-gpt2", "tiny-llama"]
    kw = {"pooling": "word", "batch_size": 8, "device": "cpu", "cache": False}
    metrics = {"cka": ("linear_cka", {})}
    calls = []

    def counting(chosen, *a, **k):
        calls.append(tuple(chosen))
        return extract_moments(chosen, *a, **k)

    monkeypatch.setattr("lmsim.extract.layer_pairs.extract_moments", counting)
    names, sims = pairwise_by_model_pairs(
        models, sentences, metrics, pairs=[["tiny-bert", "tiny-llama"]], **kw
    )
    assert calls == [("tiny-bert", "tiny-llama"), ("tiny-gpt2",)]  # never all models jointly
    mom = extract_moments(models, sentences, progress=False, **kw)
    assert names == mom.names
    joint = pairwise_matrix(mom, names, metric="linear_cka", progress=False)
    owner = np.array([n.rsplit("/", 1)[0] for n in names])
    linked = {("tiny-bert", "tiny-llama"), ("tiny-llama", "tiny-bert")}
    computed = (owner[:, None] == owner[None, :]) | np.array(
        [[(a, b) in linked for b in owner] for a in owner]
    )
    np.testing.assert_allclose(sims["cka"][computed], joint[computed], atol=1e-8)
    assert np.isnan(sims["cka"][~computed]).all() and (~computed).any()
    with pytest.raises(ValueError, match="two different names"):
        pairwise_by_model_pairs(models, sentences, metrics, pairs=[["tiny-bert", "nope"]])


def _naive_avgcorr(block, cols):
    """avgcorr_i over the drawn columns cols (with repeats), j != i, by a loop."""
    out = []
    for i in range(len(block)):
        vals = [block[i, j] for j in cols if j != i]
        out.append(np.mean(vals) if vals else np.nan)
    return np.array(out)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_avgcorr_bootstrap_equals_a_naive_loop(seed):
    from lmsim.metrics.layersim import avgcorr_bootstrap
    from lmsim.metrics.localization import mean_to_others

    rng = np.random.default_rng(seed)
    a, b = rng.random((5, 5)), rng.random((4, 4))

    def stat(av):
        return av[1][0] - av[0][0]

    est = avgcorr_bootstrap([a, b], stat, n_boot=50, seed=seed)
    assert est.estimate == pytest.approx(mean_to_others(b)[0] - mean_to_others(a)[0])
    ref = np.random.default_rng(seed)
    draws = []
    for _ in range(50):
        ca, cb = ref.integers(0, 5, 5), ref.integers(0, 4, 4)
        value = _naive_avgcorr(b, cb)[0] - _naive_avgcorr(a, ca)[0]
        if np.isfinite(value):
            draws.append(value)
    np.testing.assert_allclose(est.draws, draws, atol=1e-12)
    assert est.unit == "layers averaged over" and est.n == 9


def test_avgcorr_bootstrap_checks_blocks():
    from lmsim.metrics.layersim import avgcorr_bootstrap

    with pytest.raises(ValueError, match="square"):
        avgcorr_bootstrap([np.ones((2, 3))], lambda av: av[0][0])


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-llama", "tiny-bert"])
def test_moments_without_first_words_equal_the_other_words_of_a_causal_model(model):
    sentences = [line.split() for line in load_corpus("smoke", "valid")][:10]
    kw = {"pooling": "word", "batch_size": 4, "device": "cpu"}
    acts = extract_activations([model], sentences, progress=False, **kw)
    starts = np.cumsum([0] + [len(s) for s in sentences[:-1]])
    rest = {k: np.delete(v, starts, axis=0) for k, v in acts.items()}
    want = Moments.from_arrays(rest)
    mom = extract_moments([model], sentences, progress=False, cache=False, **kw)
    got = moments_without_first_words(mom, model, sentences, **kw)
    assert got.n == want.n == mom.n - len(sentences)
    gap = max(
        (got.comoment(n) - want.comoment(n)).abs().max() / want.comoment(n).abs().max()
        for n in mom.names
    )
    if model == "tiny-bert":  # bidirectional: the first word alone is another vector
        assert gap > 1e-3
    else:
        assert gap < 1e-5
    with pytest.raises(ValueError, match="one model"):
        two = extract_moments(
            [model, "tiny-gpt2" if model != "tiny-gpt2" else "tiny-llama"],
            sentences[:3],
            progress=False,
            cache=False,
            **kw,
        )
        moments_without_first_words(two, model, sentences[:3], **kw)


def test_on_moments_sees_every_pass_with_its_own_blocks():
    sentences = [line.split() for line in load_corpus("smoke", "valid")][:6]
    seen = []
    pairwise_by_model_pairs(
        ["tiny-bert", "tiny-gpt2", "tiny-llama"],
        sentences,
        {"cka": ("linear_cka", {})},
        pairs=[["tiny-bert", "tiny-gpt2"]],
        on_moments=lambda mom: seen.append(sorted({n.split("/")[0] for n in mom.names})),
        pooling="word",
        device="cpu",
        cache=False,
    )
    assert seen == [["tiny-bert", "tiny-gpt2"], ["tiny-llama"]]


def _word_rows(seed, n_sentences=40, n_layers=4):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 9, size=n_sentences)
    n = int(lengths.sum())
    base = rng.normal(size=(n, 6)) + 5
    acts = {
        f"m/layer.{i}": (
            base @ rng.normal(size=(6, 5 + i)) + rng.normal(size=(n, 5 + i)) * (i + 1) * 0.5 + 3 * i
        ).astype(np.float32)
        for i in range(n_layers)
    }
    return acts, lengths


def _naive_cka(acts, rows):
    from lmsim.metrics.cka import linear_cka

    names = list(acts)
    return np.array([[linear_cka(acts[a][rows], acts[b][rows]) for b in names] for a in names])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cka_matrix_jackknife_replicates_equal_cka_without_each_block(seed):
    """Replicate g is linear CKA on the words outside block g of sentences, with and
    without each sentence's first word; the full matrix on all kept words."""
    from lmsim.metrics.layersim import cka_matrix_jackknife, sentence_starts

    acts, lengths = _word_rows(seed)
    n_blocks = 5
    out = cka_matrix_jackknife(acts, lengths, n_blocks=n_blocks, first_word=("keep", "drop"))
    n = int(lengths.sum())
    sentence = np.repeat(np.arange(len(lengths)), lengths)
    block = np.zeros(len(lengths), dtype=int)
    for g, part in enumerate(np.array_split(np.arange(len(lengths)), n_blocks)):
        block[part] = g
    for variant, (matrix, replicates) in out.items():
        keep = np.ones(n, dtype=bool)
        if variant == "drop":
            keep[sentence_starts(lengths)] = False
        assert matrix == pytest.approx(_naive_cka(acts, keep), abs=1e-6)
        assert replicates.shape == (n_blocks, 4, 4)
        for g in range(n_blocks):
            rows = keep & (block[sentence] != g)
            assert replicates[g] == pytest.approx(_naive_cka(acts, rows), abs=1e-6)


def test_cka_matrix_jackknife_drop_differs_from_keep_when_first_words_differ():
    """The first-word option really removes rows: a first word far from the rest changes CKA."""
    from lmsim.metrics.layersim import cka_matrix_jackknife, sentence_starts

    acts, lengths = _word_rows(0)
    starts = sentence_starts(lengths)
    acts = {k: v.copy() for k, v in acts.items()}
    acts["m/layer.0"][starts, 0] += 100.0
    out = cka_matrix_jackknife(acts, lengths, n_blocks=4, first_word=("keep", "drop"))
    assert abs(out["keep"][0][0, 1] - out["drop"][0][0, 1]) > 0.05


def test_cka_matrix_jackknife_validates():
    from lmsim.metrics.layersim import cka_matrix_jackknife, sentence_starts

    acts, lengths = _word_rows(0)
    with pytest.raises(ValueError, match="rows each"):
        cka_matrix_jackknife(acts, lengths[:-1])
    with pytest.raises(ValueError, match="n_blocks"):
        cka_matrix_jackknife(acts, lengths, n_blocks=1)
    with pytest.raises(ValueError, match="first_word"):
        cka_matrix_jackknife(acts, lengths, first_word=("middle",))
    with pytest.raises(ValueError, match="lengths"):
        sentence_starts([3, 0, 2])
    assert sentence_starts([3, 1, 2]).tolist() == [0, 3, 4]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jackknife_of_the_mean_is_the_classical_t_interval(seed):
    """Delete-one jackknife se of a mean equals sd / sqrt(n) (Efron & Tibshirani, Eq. 11.5)."""
    from lmsim import stats

    x = np.random.default_rng(seed).normal(size=30)
    est = stats.jackknife(np.mean, x, [np.delete(x, i) for i in range(30)], unit="rows")
    ref = stats.seed_summary(x, unit="rows")
    assert est.estimate == pytest.approx(x.mean())
    assert (est.low, est.high) == pytest.approx((ref.low, ref.high), abs=1e-10)
    assert est.df == 29 and est.n == 30
    with pytest.raises(ValueError, match="at least 2"):
        stats.jackknife(np.mean, x, [x], unit="rows")
