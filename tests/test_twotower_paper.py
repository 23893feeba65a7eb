"""Two-tower models as the authors' code runs them (hezq06/twotower_lm, hezq06/ncautil), and
the evidence helpers: ICA, the paper-compatible options, scores, reliability and nulls."""

import dataclasses
import hashlib
import json
import math

import numpy as np
import pytest
import torch
from _helpers import tiny_two_tower_settings

from lmsim import twotower as tt
from lmsim.papers import he2022_twotower as chapter

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SETTINGS = tiny_two_tower_settings()


@pytest.fixture(scope="module")
def data():
    return tt.load_data(SETTINGS)


def tiny(tower: str, **options) -> tt.TowerConfig:
    return tt.TowerConfig(tower, hidden=8, layers=2, heads=2, **options)


def random_run(config: tt.TowerConfig, data, seed: int = 0) -> tt.TrainedTwoTower:
    torch.manual_seed(seed)
    model = tt.TwoTowerLM(config, data.vocab_size, SETTINGS.seq_len).eval()
    heads = tt.new_heads(config, data.vocab_size, seed).eval()
    return tt.TrainedTwoTower(config.tower, model, heads, {}, None)


# ------------------------------------------------------------------------------------ ICA
def laplace_mixture(seed: int, n: int = 5000, k: int = 6, features: int = 10):
    """Unit-variance Laplace sources seen through a random mixing."""
    rng = np.random.default_rng(seed)
    sources = rng.laplace(scale=1 / math.sqrt(2), size=(n, k))
    return sources, sources @ rng.normal(size=(k, features))


def matched_corr(Y, sources):
    k = Y.shape[1]
    corr = np.abs(np.corrcoef(Y.T, sources.T)[:k, k:])
    return corr, corr.argmax(1)


@pytest.mark.parametrize("variant", tt.ICA_VARIANTS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ica_recovers_a_sparse_mixtures_groups_at_unit_scale(seed, variant):
    sources, X = laplace_mixture(seed)
    # lr 0.1 instead of the authors' 0.01: the same fixed point in a tenth of the steps.
    fit = tt.fit_ica(X, 6, variant=variant, lr=0.1, n_iter=2000)
    assert fit.n_iter == 2000 and fit.last_change < 1e-6, "converged"
    assert tt.fit_ica(X, 6, variant=variant, lr=0.1, n_iter=20).last_change > 1e-4
    corr, match = matched_corr(fit.Y, sources)
    assert sorted(match) == list(range(6)), "a permutation of the sources"
    assert corr.max(1).min() > 0.98, "unmixed"
    true_rate = tt.ica_groups(sources).sum(1).mean()  # 6 exp(-2.5 sqrt 2) = 0.175 expected
    assert 6 * math.exp(-2.5 * math.sqrt(2)) == pytest.approx(true_rate, abs=0.03)
    assert tt.ica_groups(fit.Y).sum(1).mean() == pytest.approx(true_rate, abs=0.02)
    sd = fit.Y.std(0)
    assert np.all(np.abs(sd - 1) < (1e-9 if variant == "lmsim" else 0.05)), sd
    summary = tt.ica_summary(fit.Y)
    assert summary["mean groups per word"] == pytest.approx(true_rate, abs=0.02)


def test_plain_natural_gradient_drives_sources_to_standard_deviation_three():
    """Why the authors rescale W: without it the bounded g settles where E[g(y) y] = 1."""
    sources, X = laplace_mixture(0)
    P, _ = tt.pca_whiten(X, 6)
    Y, _, _ = tt.amari_ica(P, lr=0.1, n_iter=2000, renormalise=False)
    assert np.all(np.abs(Y.std(0) - 3) < 0.2), Y.std(0)
    np.testing.assert_allclose((tt.amari_g(Y) * Y).mean(0), 1, atol=1e-3)
    assert tt.ica_groups(Y).sum(1).mean() > 1.5, "most samples land in a group: no sparsity"
    assert tt.ica_groups(sources).sum(1).mean() < 0.25


def authors_pca_ica(X, D, lr, steps):
    """hezq06/ncautil `ncamath.pca` then `ncamath.ica_torch`, transcribed (data: (mdim, N))."""
    data = np.asarray(X, dtype=np.float64).T
    N = data.shape[1]
    U, S, V = np.linalg.svd(data.dot(data.T) / N)
    data = np.diag(1 / np.sqrt(S[0:D])).dot(V[0:D, :]).dot(data)
    data = torch.from_numpy(data)
    W = torch.eye(D, dtype=torch.float64)
    EYE = torch.eye(D, dtype=torch.float64)

    def g(x):
        return torch.sign(x) * (1 - torch.exp(-np.sqrt(2) * torch.abs(x))) / 2

    for _ in range(int(steps)):
        Xh = torch.matmul(W, data)
        DW_R = torch.matmul(g(Xh), (torch.t(Xh) / N))
        DW = torch.matmul(EYE - DW_R, W)
        W2 = W + lr * DW
        W2 = W2 / (torch.norm(W2) / torch.norm(EYE))
        W = W2
    return torch.matmul(W, data).numpy().T


@pytest.mark.parametrize("seed", [0, 1])
def test_paper_variant_is_the_authors_pca_and_ica_torch(seed):
    sources, X = laplace_mixture(seed, n=1500)
    X = X + 0.7  # a mean: the authors' whitening does not remove it
    theirs = authors_pca_ica(X, 5, lr=0.01, steps=300)
    fit = tt.fit_ica(X, 5, variant="paper", lr=0.01, n_iter=300)
    assert fit.n_iter == 300
    signs = np.sign((fit.Y * theirs).sum(0))  # PCA axes have no canonical sign
    np.testing.assert_allclose(fit.Y, theirs * signs, atol=1e-9)
    centred = tt.fit_ica(X, 5, variant="lmsim", lr=0.01, n_iter=300)
    assert not np.allclose(np.abs(centred.Y), np.abs(fit.Y), atol=1e-3), "lmsim centres"


@pytest.mark.parametrize("variant", tt.ICA_VARIANTS)
def test_weights_are_repeated_rows(variant):
    """Fitting distinct tokens weighted by their counts = fitting every occurrence."""
    rng = np.random.default_rng(3)
    X = rng.laplace(size=(60, 8)) @ rng.normal(size=(8, 8)) + 0.3
    counts = rng.integers(1, 6, size=60)
    repeated = np.repeat(X, counts, axis=0)
    a = tt.fit_ica(X, 4, weights=counts, variant=variant, lr=0.05, n_iter=200)
    b = tt.fit_ica(repeated, 4, variant=variant, lr=0.05, n_iter=200)
    np.testing.assert_allclose(np.repeat(a.Y, counts, axis=0), b.Y, atol=1e-9)
    np.testing.assert_allclose(a.eigvals, b.eigvals, rtol=1e-9, atol=1e-12)
    sa, sb = tt.ica_summary(a.Y, 1.0, weights=counts), tt.ica_summary(b.Y, 1.0)
    assert sa == pytest.approx(sb, abs=1e-12)


def test_occurrence_rows_weigh_each_token_by_its_occurrences():
    E = np.arange(12.0).reshape(6, 2)
    counts = np.array([5, 0, 2, 7, 2, 1])
    tokens, X, w = tt.occurrence_rows(E, counts, exclude_ids=[5])
    assert tokens.tolist() == [3, 0, 2, 4], "most frequent first; unseen and excluded dropped"
    np.testing.assert_array_equal(X, E[[3, 0, 2, 4]])
    np.testing.assert_array_equal(w, [7, 5, 2, 2])
    occurrences = np.repeat(E[tokens], w.astype(int), axis=0)
    a = tt.fit_ica(X, 2, weights=w, n_iter=50)
    b = tt.fit_ica(occurrences, 2, n_iter=50)
    np.testing.assert_allclose(np.repeat(a.Y, w.astype(int), axis=0), b.Y, atol=1e-9)
    with pytest.raises(ValueError, match="`counts`"):
        tt.occurrence_rows(E, counts[:3])


def test_amari_g_is_the_authors_nonlinearity():
    y = np.array([-8.0, -0.5, 0.0, 0.5, 8.0])
    # ncamath.ica_torch: torch.sign(x) * (1 - torch.exp(-np.sqrt(2) * torch.abs(x))) / 2
    expected = np.sign(y) * (1 - np.exp(-np.sqrt(2) * np.abs(y))) / 2
    np.testing.assert_allclose(tt.amari_g(y), expected)
    grid = np.linspace(-10, 10, 101)
    assert np.all(np.abs(tt.amari_g(grid)) < 0.5), "bounded"
    np.testing.assert_allclose(tt.amari_g(-grid), -tt.amari_g(grid))


def test_ica_rejects_bad_arguments():
    X = np.random.default_rng(0).normal(size=(20, 4))
    with pytest.raises(ValueError, match="`variant`"):
        tt.fit_ica(X, 2, variant="textbook")
    with pytest.raises(ValueError, match="`weights`"):
        tt.fit_ica(X, 2, weights=np.ones(19))
    with pytest.raises(ValueError, match="`d`"):
        tt.pca_whiten(X, 5)


# ---------------------------------------------------------------- the authors' options
def test_the_authors_flip_seq_zeroes_even_windows():
    """ttlm/model.py `TwoTowerELMo.flip_seq`, as written: the diagonal of the anti-identity."""

    def flip_seq(tensor, window):
        flipt = torch.flip(torch.eye(window), [0])
        return torch.einsum("bwl,ww->bwl", tensor, flipt)

    t = torch.randn(3, 8, 5)
    assert torch.count_nonzero(flip_seq(t, 8)) == 0, "window 128 (even): all zeros"
    odd = flip_seq(torch.randn(3, 7, 5), 7)
    assert torch.count_nonzero(odd[:, [0, 1, 2, 4, 5, 6]]) == 0, "odd: the middle row only"


def test_forward_only_elmo_has_a_zero_backward_half_and_no_backward_lstm(data):
    for proj in (False, True):
        config = tiny("elmo", elmo_forward_only=True, input_proj=proj, embed=8)
        model = tt.TwoTowerLM(config, data.vocab_size, SETTINGS.seq_len).eval()
        assert not any(".bwd." in k or "h2o_b" in k for k in model.state_dict())
        half = config.state_dim // 2
        with torch.no_grad():
            for layers in model.states(data.valid[:3], all_layers=True):
                for h in layers:
                    assert h.shape[-1] == 2 * (h.shape[-1] // 2)
                    assert torch.count_nonzero(h[..., h.shape[-1] // 2 :]) == 0
                    assert torch.count_nonzero(h[:, 1:, : h.shape[-1] // 2]) > 0
                assert layers[-1].shape[-1] == 2 * half
    with pytest.raises(ValueError, match="elmo_forward_only"):
        tt.TowerConfig("gpt", elmo_forward_only=True)


@pytest.mark.parametrize("tower", ["elmo", "gpt"])
def test_forward_only_elmo_and_options_keep_positions_blind_to_their_own_token(tower):
    config = tt.TowerConfig(
        tower,
        hidden=8,
        layers=2,
        heads=2,
        input_proj=True,
        untied_heads=True,
        elmo_forward_only=tower == "elmo",
    )
    torch.manual_seed(0)
    model = tt.TwoTowerLM(config, 30, 10).eval()
    ids = torch.randint(5, 30, (2, 10))
    with torch.no_grad():
        base = model.states(ids)
        for i in range(10):
            other = ids.clone()
            other[:, i] = (other[:, i] + 7) % 25 + 5
            for h0, h1 in zip(base, model.states(other)):
                torch.testing.assert_close(h0[:, : i + 1], h1[:, : i + 1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("tower", ["bert", "gpt", "elmo"])
def test_input_projection_shapes(tower, data):
    config = tiny(tower, input_proj=True, embed=16 if tower == "elmo" else None)
    assert config.embed_dim == 16, "a 2H-wide shared table"
    model = tt.TwoTowerLM(config, data.vocab_size, SETTINGS.seq_len)
    for t in model.towers:
        assert tuple(t.proj.weight.shape) == (config.width, 16), "Linear(2H -> H) per tower"
    assert model.towers[0].proj is not model.towers[1].proj
    assert isinstance(model.embed.norm, torch.nn.LayerNorm), "the authors norm ELMo's input too"
    states = model.states(data.valid[:2])
    assert all(h.shape == (2, SETTINGS.seq_len, config.state_dim) for h in states)
    if tower == "elmo":
        assert config.state_dim == 16, "h2o maps each direction back to embed // 2"
    with pytest.raises(ValueError, match="`embed`"):
        tt.TowerConfig("bert", hidden=8, heads=2, input_proj=True, embed=8)


@pytest.mark.parametrize("tower", ["bert", "elmo"])
def test_untied_heads_read_their_half_of_the_joint_layernorm(tower, data):
    config = tiny(tower, untied_heads=True, input_proj=True)
    run = random_run(config, data)
    model, heads = run.model, run.heads
    assert all(isinstance(h, tt.UntiedHead) for h in heads)
    assert tuple(heads[0].decoder.weight.shape) == (data.vocab_size, config.width)
    assert heads[0].decoder.weight.data_ptr() != model.embedding.data_ptr(), "untied"
    with torch.no_grad():
        torch.nn.init.normal_(model.head.in_norm.weight)  # a LayerNorm that is not the identity
        torch.nn.init.normal_(model.head.in_norm.bias)
        h1, h2 = model.states(data.valid[:2])
        g1, g2 = model.head_inputs(h1, h2)
        ln = model.head.in_norm
        both = torch.nn.functional.layer_norm(
            torch.cat([h1, h2], -1), ln.normalized_shape, ln.weight, ln.bias, ln.eps
        )
        s = config.state_dim
        torch.testing.assert_close(g1, both[..., :s])
        torch.testing.assert_close(g2, both[..., s:])
        logits = model.head_logits(heads, h1, h2)
        assert logits[0].shape == (2, SETTINGS.seq_len, data.vocab_size)
        torch.testing.assert_close(logits[1], heads[1](both[..., s:]))


def test_default_models_keep_their_state_dict_keys_and_cache_keys():
    """The options are off by default: no new parameters, no change of a cached run's key."""
    for tower in tt.TOWER_TYPES:
        config = tiny(tower)
        keys = tt.TwoTowerLM(config, 20, 8).state_dict()
        parts = {part for k in keys for part in k.split(".")}
        assert not parts & {"proj", "in_norm", "h2o_f", "h2o_b", "decoder"}, sorted(keys)
        spec = tt.RunSpec("x", config)
        old_payload = {
            "config": {
                k: v
                for k, v in dataclasses.asdict(config).items()
                if k not in ("input_proj", "untied_heads", "elmo_forward_only")
            },
            "seed": 0,
            "settings": {k: v for k, v in dataclasses.asdict(SETTINGS).items() if k != "threads"},
        }
        old = hashlib.sha1(
            json.dumps(old_payload, sort_keys=True, default=str).encode()
        ).hexdigest()[:10]
        assert tt.run_dir(spec, SETTINGS, "p").name == f"x-{old}"


@pytest.mark.parametrize(
    "option",
    [
        {"input_proj": True},
        {"untied_heads": True},
        {"elmo_forward_only": True},
        {"dropout": 0.1},
    ],
)
def test_each_option_changes_the_cache_key(option):
    base = tt.run_dir(tt.RunSpec("x", tiny("elmo")), SETTINGS, "p").name
    assert tt.run_dir(tt.RunSpec("x", tiny("elmo", **option)), SETTINGS, "p").name != base


def test_as_authors_sets_every_option_and_dropout_is_active_in_training_only(data):
    config = tiny("elmo").as_authors()
    assert config.input_proj and config.untied_heads and config.elmo_forward_only
    assert config.dropout == 0.1
    gpt, bert = tiny("gpt").as_authors(), tt.TowerConfig("bert", hidden=8, embed=8).as_authors()
    assert gpt.untied_heads and not gpt.elmo_forward_only and not gpt.input_proj, "GPT-2's wte"
    assert bert.input_proj and bert.embed_dim == 16
    model = tt.TwoTowerLM(config, data.vocab_size, SETTINGS.seq_len)
    ids = data.valid[:2]
    model.train()
    assert not torch.equal(model.states(ids)[0], model.states(ids)[0])
    model.eval()
    assert torch.equal(model.states(ids)[0], model.states(ids)[0])
    with pytest.raises(ValueError, match="`dropout`"):
        tt.TowerConfig("gpt", dropout=1.0)


@pytest.mark.parametrize(
    "config",
    [
        tt.TowerConfig("bert", hidden=24, layers=2, heads=2, input_proj=True),
        tt.TowerConfig("elmo", hidden=40, layers=2, embed=16, input_proj=True),
        tt.TowerConfig("elmo", hidden=40, layers=3, embed=16, lstm_proj=12, elmo_forward_only=True),
        tt.TowerConfig("elmo", hidden=20, layers=2, embed=16).as_authors(),
    ],
)
def test_flops_count_the_options_weights(config):
    vocab, seq_len = 50, 7
    model = tt.TwoTowerLM(config, vocab, seq_len)
    tower_weights = sum(p.numel() for p in model.towers.parameters() if p.ndim == 2)
    attention = 0 if config.tower == "elmo" else 2 * 12 * config.layers * seq_len * config.hidden
    assert tt.two_tower_flops_per_token(config, seq_len) == pytest.approx(
        6 * tower_weights + attention
    )


def test_training_with_the_authors_options_freezes_and_reloads(data, tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    for tower in ("elmo", "bert"):
        config = tiny(tower, embed=16 if tower == "elmo" else None).as_authors()
        path = tt.train_two_tower(tt.RunSpec(tower, config), SETTINGS, "a", progress=False)
        run = tt.load_two_tower(path)
        assert run.facts["frozen_bit_identical"] and run.model.config == config
        assert all(isinstance(h, tt.UntiedHead) for h in run.heads)
        pref = tt.preference_scores(run, data.valid[:6], data, batch_size=4, mean="log")
        assert np.isfinite(pref.scores[pref.counts > 0]).all()


# ----------------------------------------------------------------------------- scores
def naive_scores(run, chunks, data, batch_size, mean):
    """Eq. 3-4 (or the authors' mean log-softmax) one position at a time."""
    model, heads = run.model, run.heads
    per_token = [{}, {}]
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for start in range(0, len(chunks), batch_size):
            inputs, labels = tt.inputs_and_labels(
                model.config.tower, chunks[start : start + batch_size], data, gen
            )
            h1, h2 = model.states(inputs)
            for b, i in (labels != tt.IGNORE_INDEX).nonzero().tolist():
                a = int(labels[b, i])
                logits = model.head_logits(heads, h1[b, i], h2[b, i])
                for k in range(2):
                    log_p = float(torch.log_softmax(logits[k].double(), -1)[a])
                    per_token[k].setdefault(a, []).append(log_p)
    if mean == "probability":

        def f(v):
            return np.log(np.mean(np.exp(v)))

        total = [np.mean(np.exp(sum(per_token[k].values(), []))) for k in range(2)]
    else:
        f = np.mean
        total = [np.mean(sum(per_token[k].values(), [])) for k in range(2)]
    first = 0 if total[0] >= total[1] else 1
    return {a: f(per_token[first][a]) - f(per_token[1 - first][a]) for a in per_token[0]}, first


@pytest.mark.parametrize("mean", tt.SCORE_MEANS)
@pytest.mark.parametrize("tower", ["gpt", "bert"])
def test_scores_match_a_naive_loop_for_each_mean(tower, mean, data):
    config = tiny(tower, untied_heads=True) if tower == "bert" else tiny(tower)
    run = random_run(config, data, seed=2)
    chunks = data.valid[:8]
    pref = tt.preference_scores(run, chunks, data, batch_size=4, mean=mean, record=True)
    expected, first = naive_scores(run, chunks, data, 4, mean)
    assert pref.primary == first and pref.mean == mean
    for a, s in expected.items():
        assert pref.scores[a] == pytest.approx(s, abs=1e-5)
    occ = pref.occurrences
    assert len(occ) == pref.n_positions
    np.testing.assert_allclose(occ.scores(mean), pref.scores, atol=1e-9, equal_nan=True)
    assert occ.chunk.min() >= 0 and occ.chunk.max() < len(chunks)
    np.testing.assert_allclose(occ.log_p[:2].mean(1), pref.mean_log_p, atol=1e-9)
    np.testing.assert_allclose(np.exp(occ.log_p[:2]).mean(1), pref.mean_p, atol=1e-9)


def test_run_table_gathers_each_runs_evidence(data):
    from lmsim.zoo import unigram_log_probs

    log_uni = unigram_log_probs(data.counts, data.special_ids.tolist()).numpy()
    prefs = {
        name: tt.preference_scores(
            random_run(tiny(tower), data, seed=k), data.valid[:12], data, record=True
        )
        for k, (name, tower) in enumerate([("g", "gpt"), ("e", "elmo")])
    }
    tokens = chapter.top_tokens(prefs["g"].counts, data.special_ids.tolist(), 15)
    table = chapter.run_table(prefs, tokens, log_uni, n_splits=4, n_boot=50)
    assert list(table.index) == ["g", "e"]
    assert table.loc["g", "primary"] == prefs["g"].primary + 1
    occ = prefs["e"].occurrences
    assert table.loc["e", "secondary / unigram"] == pytest.approx(
        math.exp(-occ.log_p[1].mean()) / math.exp(-log_uni[occ.token].mean())
    )
    assert (table["gap low"] <= table["gap"]).all() and (table["gap"] <= table["gap high"]).all()
    prefs["g"].occurrences = None
    with pytest.raises(ValueError, match="record=True"):
        chapter.run_table(prefs, tokens, log_uni)


def test_scores_under_the_other_mean_are_oriented_by_that_mean():
    token = np.array([0, 0, 1, 1])
    # head 1 has the higher mean probability, head 2 the higher mean log-probability
    log_p1 = np.log([0.9, 0.01, 0.5, 0.01])
    log_p2 = np.log([0.2, 0.2, 0.2, 0.2])
    occ = tt.Occurrences(token, np.arange(4), np.stack([log_p1, log_p2, log_p2]), 2)
    assert occ.lead("probability") > 0 > occ.lead("log")
    raw, oriented = occ.scores("log"), occ.scores("log", orient=True)
    np.testing.assert_allclose(oriented, -raw)
    np.testing.assert_allclose(occ.scores("probability", orient=True), occ.scores("probability"))
    expected = [np.log(0.9 * 0.01) / 2 - np.log(0.2), np.log(0.5 * 0.01) / 2 - np.log(0.2)]
    np.testing.assert_allclose(raw, expected)


def test_occurrences_of_bert_repeats_keep_their_chunk(data):
    run = random_run(tiny("bert"), data)
    chunks = data.valid[:5]
    pref = tt.preference_scores(run, chunks, data, batch_size=2, mask_repeats=3, record=True)
    occ = pref.occurrences
    assert len(occ) == pref.n_positions
    for c in np.unique(occ.chunk):
        tokens = chunks[c].tolist()
        assert set(occ.token[occ.chunk == c].tolist()) <= set(tokens)
    with pytest.raises(ValueError, match="`mean`"):
        tt.preference_scores(run, chunks, data, mean="geometric")


# ------------------------------------------------------------------------ reliability
def synthetic_occurrences(seed, n_tokens=200, per_token=40, effect_sd=0.3, noise_sd=1.0, gap=0.0):
    """Per token a true preference t_a; log p_1 - log p_2 = t_a + gap + noise per position."""
    rng = np.random.default_rng(seed)
    token = np.repeat(np.arange(n_tokens), per_token)
    rng.shuffle(token)
    effect = rng.normal(0, effect_sd, n_tokens)
    base = rng.normal(-3, 0.5, len(token))
    noise = rng.normal(0, noise_sd, len(token))
    log_p1 = base + (effect[token] + gap + noise) / 2
    log_p2 = base - (effect[token] + gap + noise) / 2
    chunk = np.arange(len(token)) // 10
    log_p = np.stack([log_p1, log_p2, base])
    return tt.Occurrences(token, chunk, log_p, n_tokens), effect


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_half_reliability_matches_the_analytic_value(seed):
    occ, _ = synthetic_occurrences(seed)
    rel = chapter.split_half_reliability(
        occ, np.arange(200), unit="occurrence", mean="log", seed=seed
    )
    expected = 0.3**2 / (0.3**2 + 1.0**2 / 40)  # var(true) / (var(true) + var(mean noise))
    assert rel.reliability == pytest.approx(expected, abs=0.06)
    assert rel.n_tokens == 200 and len(rel.r_half) == 20
    assert rel.spread[0] <= rel.reliability <= rel.spread[1] + 1e-12
    by_chunk = chapter.split_half_reliability(occ, np.arange(200), unit="chunk", mean="log")
    assert by_chunk.reliability == pytest.approx(expected, abs=0.06)
    none, _ = synthetic_occurrences(seed, effect_sd=0.0)
    null = chapter.split_half_reliability(none, np.arange(200), mean="log", seed=seed)
    assert abs(null.reliability) < 0.25


def test_spearman_brown_and_the_correlation_ceiling():
    assert chapter.spearman_brown(0.5) == pytest.approx(2 / 3)
    assert chapter.spearman_brown(1.0) == 1.0
    assert chapter.correlation_ceiling(0.64, 0.81) == pytest.approx(0.72)
    assert math.isnan(chapter.correlation_ceiling(-0.1, 0.8))


def test_primary_gap_interval():
    occ, _ = synthetic_occurrences(0, gap=0.0)
    tie = chapter.primary_gap(occ, mean="log", n_boot=400)
    assert tie["low"] < 0 < tie["high"] and not tie["settled"]
    lead, _ = synthetic_occurrences(0, gap=0.3)
    gap = chapter.primary_gap(lead, mean="log", n_boot=400)
    assert gap["settled"] and gap["low"] < 0.3 < gap["high"]
    assert gap["estimate"] == pytest.approx((lead.log_p[0] - lead.log_p[1]).mean())
    assert gap["n_chunks"] == len(np.unique(lead.chunk))


def test_perplexity_against_the_unigram():
    occ, _ = synthetic_occurrences(1, n_tokens=20, per_token=10)
    log_uni = np.log(np.full(20, 1 / 20))
    out = chapter.perplexity_vs_unigram(occ, log_uni)
    assert out["unigram"] == pytest.approx(20)
    assert out["primary"] == pytest.approx(math.exp(-occ.log_p[0].mean()))
    assert out["joint / unigram"] == pytest.approx(out["joint"] / 20)
    table = chapter.perplexity_table(
        {"a": {"val_ppl": 50.0, "unigram_ppl": 100.0, "head_val_ppl": [60.0, 80.0]}}
    )
    assert table.loc["a", "ppl / unigram"] == 0.5 and table.loc["a", "head 2 / unigram"] == 0.8


@pytest.mark.parametrize("seed", [0, 1])
def test_bootstrap_interval_of_a_mean(seed):
    x = np.random.default_rng(seed).normal(2.0, 1.0, 400)
    low, high = chapter.bootstrap_interval(np.mean, [x], n_boot=2000, seed=seed)
    half = 1.96 / math.sqrt(400)
    assert low == pytest.approx(x.mean() - half, abs=0.25 * half)
    assert high == pytest.approx(x.mean() + half, abs=0.25 * half)
    with pytest.raises(ValueError, match="`level`"):
        chapter.bootstrap_interval(np.mean, [x], level=1.5)


# ------------------------------------------------------------------------------ nulls
def gap_world(seed, planted=0.0):
    """The secondary is the primary degraded by a token-independent, difficulty-dependent
    map; ``planted`` adds a real preference for the first 20 tokens."""
    rng = np.random.default_rng(seed)
    n_tokens, per_token = 100, 60
    token = np.repeat(np.arange(n_tokens), per_token)
    difficulty = rng.normal(-3, 1, n_tokens)
    log_p1 = difficulty[token] + rng.normal(0, 0.7, len(token))
    log_p2 = 1.3 * log_p1 + rng.normal(0, 0.5, len(token))  # worse where p1 is already low
    log_p2[token < 20] -= planted
    occ = tt.Occurrences(
        token, np.arange(len(token)) // 12, np.stack([log_p1, log_p2, log_p1]), n_tokens
    )
    return occ


@pytest.mark.parametrize("seed", [0, 1])
def test_global_gap_null_explains_a_pure_gap_and_not_a_planted_preference(seed):
    occ = gap_world(seed)
    null = chapter.global_gap_null(occ, n_draws=200, n_bins=30, seed=seed)
    assert null.shape == (200, 100)
    observed = occ.scores()
    low, high = np.percentile(null, [0.5, 99.5], axis=0)
    inside = (observed >= low) & (observed <= high)
    assert inside.mean() > 0.9, "a global gap is what the null draws"
    assert np.corrcoef(observed, null.mean(0))[0, 1] > 0.8, "difficulty shapes s under a gap"
    planted = gap_world(seed, planted=0.8)
    null = chapter.global_gap_null(planted, n_draws=200, n_bins=30, seed=seed)
    high = np.percentile(null, 99.5, axis=0)
    assert (planted.scores()[:20] > high[:20]).mean() > 0.9
    again = chapter.global_gap_null(planted, n_draws=200, n_bins=30, seed=seed)
    np.testing.assert_array_equal(null, again)


def test_two_pure_gap_runs_correlate_as_their_nulls_do():
    """Two runs on the same tokens, each with only a global gap: their scores correlate
    through token difficulty, and the paired null draws reproduce that correlation."""
    runs = []
    for seed in (5, 6):
        rng = np.random.default_rng(seed)
        token = np.repeat(np.arange(100), 60)
        difficulty = np.random.default_rng(0).normal(-3, 1, 100)  # the text's, shared
        log_p1 = difficulty[token] + rng.normal(0, 0.7, len(token))
        log_p2 = 1.3 * log_p1 + rng.normal(0, 0.5, len(token))
        log_p = np.stack([log_p1, log_p2, log_p1])
        runs.append(tt.Occurrences(token, np.arange(len(token)) // 12, log_p, 100))
    observed = chapter.score_correlation(runs[0].scores(), runs[1].scores())
    assert observed > 0.5, "a shared difficulty makes pure-gap scores correlate"
    nulls = [chapter.global_gap_null(o, n_draws=100, n_bins=30, seed=k) for k, o in enumerate(runs)]
    r_null = chapter.null_correlations(*nulls, np.arange(100))
    assert r_null.shape == (100,)
    assert np.percentile(r_null, 0.5) < observed < np.percentile(r_null, 99.5)
    with pytest.raises(ValueError, match="one shape"):
        chapter.null_correlations(nulls[0], nulls[1][:5], np.arange(100))


def test_frequency_strata_and_matched_null():
    rng = np.random.default_rng(0)
    counts = np.exp(rng.uniform(0, 8, 500)).round() + 1
    strata = chapter.frequency_strata(counts, n_bins=5)
    assert strata.min() == 0 and strata.max() == 4
    assert np.all(np.diff(strata[np.argsort(counts)]) >= 0), "monotone in frequency"
    # the group is over-represented among frequent tokens
    members = rng.random(500) < 0.3 * np.log(counts) / np.log(counts).max()
    same = chapter.frequency_matched_null(
        strata.astype(float), strata, members, stat=np.sum, n_draws=50
    )
    assert np.all(same == strata[members].sum()), "each draw matches the group's strata"
    values = np.log(counts) + rng.normal(0, 0.1, 500)  # scores that track frequency only
    strata = chapter.frequency_strata(counts, n_bins=20)
    null = chapter.frequency_matched_null(values, strata, members, n_draws=500)
    assert np.median(values[members]) > np.median(values), "frequency alone lifts the group"
    assert np.percentile(null, 1) < np.median(values[members]) < np.percentile(null, 99)
    values[members] += 1.0
    null = chapter.frequency_matched_null(values, strata, members, n_draws=500)
    assert np.median(values[members]) > null.max()
    with pytest.raises(ValueError, match="`counts`"):
        chapter.frequency_strata([0, 1, 2])


def test_stratified_permutation_keeps_each_stratum():
    rng = np.random.default_rng(0)
    strata = np.repeat(np.arange(5), 40)
    a = strata + rng.normal(0, 0.5, 200)
    b = strata.astype(float)  # constant within strata: no permutation within them moves it
    null = chapter.permutation_null(a, b, n_perm=50, strata=strata)
    assert np.allclose(null, chapter.score_correlation(a, b))
    free = chapter.permutation_null(a, b, n_perm=200)
    assert np.abs(free).max() < 0.5 < chapter.score_correlation(a, b)


# --------------------------------------------------------------------------- relative POS
def test_relative_pos_test_sees_through_a_global_lead():
    import pandas as pd

    rng = np.random.default_rng(0)
    tags = np.array(["VERB"] * 60 + ["PROPN"] * 60 + ["NOUN"] * 80)
    pos = pd.DataFrame({"upos": tags}, index=np.arange(200))
    s = 1.0 + rng.normal(0, 0.2, 200)  # the primary's lead lifts every token
    s[tags == "VERB"] += 0.5
    s[tags == "PROPN"] -= 0.5
    scores = {"run": s}
    tokens = np.arange(200)
    old = chapter.pos_table(scores, pos, tokens, ["VERB", "PROPN", "NOUN"]).set_index("tag")
    assert (old["preferred"] == "primary").all(), "the median rule sees only the lead"
    rel = chapter.relative_pos_test(scores, pos, tokens, ["VERB", "PROPN", "NOUN"], n_boot=300)
    rel = rel.set_index("tag")
    assert rel.loc["VERB", "leans"] == "primary" and rel.loc["VERB", "holds"]
    assert rel.loc["PROPN", "leans"] == "secondary" and rel.loc["PROPN", "holds"]
    assert rel.loc["NOUN", "holds"] is None
    assert rel.loc["VERB", "low"] < rel.loc["VERB", "estimate"] < rel.loc["VERB", "high"]
    vs = chapter.relative_pos_test(
        scores, pos, tokens, ["VERB", "PROPN"], reference="PROPN", n_boot=300
    )
    assert list(vs["tag"]) == ["VERB"] and vs["estimate"].iloc[0] == pytest.approx(1.0, abs=0.15)
    calls = []

    def fake(stat, samples, n_boot, level, seed):
        calls.append(len(samples))
        return -1.0, 1.0

    out = chapter.relative_pos_test(scores, pos, tokens, ["VERB"], bootstrap=fake)
    assert calls == [2] and out["leans"].iloc[0] == "inconclusive"


def test_the_differences_table_names_options_that_exist():
    import re

    fields = {f.name for f in dataclasses.fields(tt.TowerConfig)}
    fields |= {f.name for f in dataclasses.fields(tt.TwoTowerSettings)}
    table = chapter.AUTHORS_CODE_DIFFERENCES
    assert table["aspect"].is_unique
    named = set()
    for option in table["option"]:
        named |= set(re.findall(r"(\w+)=", option))
    assert named and named <= fields | {"mean", "variant", "weights"}, named - fields
    assert "elmo_forward_only" in named and "untied_heads" in named and "input_proj" in named
