"""Two-tower models (He & Toyoizumi, 2022): visibility, masking, phase 2, scores, ICA, caching."""

from collections import defaultdict

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


def tiny(tower: str, seed: int = 0) -> tt.TowerConfig:
    return tt.TowerConfig(tower, hidden=8, layers=2, heads=2)


def random_run(tower: str, data, seed: int = 0) -> tt.TrainedTwoTower:
    torch.manual_seed(seed)
    model = tt.TwoTowerLM(tiny(tower), data.vocab_size, SETTINGS.seq_len).eval()
    heads = tt.new_heads(model.config, data.vocab_size, seed).eval()
    return tt.TrainedTwoTower(tower, model, heads, {}, None)


# ------------------------------------------------------------------------------ visibility
@pytest.mark.parametrize("tower", ["elmo", "gpt"])
def test_state_at_a_position_has_no_gradient_from_its_own_input(tower):
    torch.manual_seed(0)
    model = tt.TwoTowerLM(tiny(tower), 30, 10)
    x = torch.randn(2, 10, model.config.embed_dim, requires_grad=True)
    probe = torch.randn(model.config.state_dim)  # a plain sum of LayerNorm outputs is constant
    for t in model.towers:
        for i in range(10):
            (grad,) = torch.autograd.grad((t(x)[-1][:, i] @ probe).sum(), x)
            seen = grad.abs().sum(dim=(0, 2)) > 0
            assert not seen[i], f"{tower}: position {i} sees its own input"
            if tower == "gpt":
                assert not seen[i:].any(), f"gpt: position {i} sees the future"
                assert seen[:i].all()
            else:
                assert seen[torch.arange(10) != i].all(), "elmo sees every other position"


@pytest.mark.parametrize("tower", ["elmo", "gpt"])
def test_changing_a_token_leaves_the_states_predicting_it_unchanged(tower):
    torch.manual_seed(1)
    model = tt.TwoTowerLM(tiny(tower), 30, 10).eval()
    ids = torch.randint(5, 30, (3, 10))
    with torch.no_grad():
        base = model.states(ids)
        for i in range(10):
            other = ids.clone()
            other[:, i] = (other[:, i] + 7) % 25 + 5
            changed = model.states(other)
            for h0, h1 in zip(base, changed):
                torch.testing.assert_close(h0[:, i], h1[:, i], rtol=0, atol=1e-6)
                if i < 9:  # a later position does read token i
                    assert not torch.allclose(h0[:, i + 1], h1[:, i + 1])


def test_bert_masking_statistics(data):
    gen = torch.Generator().manual_seed(0)
    batch = data.train.repeat(4, 1)
    inputs, labels = tt.inputs_and_labels("bert", batch, data, gen)
    selected = labels != tt.IGNORE_INDEX
    special = torch.isin(batch, data.special_ids)
    assert not (selected & special).any(), "special tokens are never selected"
    assert selected.float().sum() / (~special).sum() == pytest.approx(0.15, abs=0.01)
    masked = (inputs[selected] == data.mask_id).float().mean()
    kept = (inputs[selected] == batch[selected]).float().mean()
    assert masked == pytest.approx(0.8, abs=0.035)  # ~3.5 sd of ~1,700 selected positions
    assert kept == pytest.approx(0.1 + 0.1 / data.vocab_size, abs=0.025)
    assert torch.equal(inputs[~selected], batch[~selected]), "unselected tokens are untouched"
    assert torch.equal(labels[selected], batch[selected])


@pytest.mark.parametrize("tower", ["elmo", "gpt"])
def test_left_to_right_towers_predict_every_position_after_cls(tower, data):
    gen = torch.Generator().manual_seed(0)
    inputs, labels = tt.inputs_and_labels(tower, data.train[:3], data, gen)
    assert torch.equal(inputs, data.train[:3])
    assert (labels[:, 0] == tt.IGNORE_INDEX).all() and torch.equal(labels[:, 1:], inputs[:, 1:])


# ------------------------------------------------------------------------------- phase 2
def test_phase2_trains_heads_and_leaves_embedding_and_towers_bit_identical(data, tmp_path):
    torch.manual_seed(0)
    model = tt.TwoTowerLM(tiny("bert"), data.vocab_size, SETTINGS.seq_len)
    model.eval().requires_grad_(False)
    frozen = tt._frozen_state(model)
    heads = tt.new_heads(model.config, data.vocab_size, 0)
    before = [p.detach().clone() for p in heads.parameters()]
    for which in range(2):
        run = tt.phase2_run(model, heads[which], which, data, SETTINGS, 0, torch.device("cpu"))
        out = tt.train(
            run,
            SETTINGS.train_settings(head=True),
            tmp_path / str(which),
            torch.device("cpu"),
            progress=False,
        )
        assert out["finished"]
    assert tt._bit_identical(frozen, model)
    assert any(not torch.equal(a, b) for a, b in zip(before, heads.parameters()))
    with torch.no_grad():
        model.towers[1].layers[0].linear1.weight[0, 0] += 1e-7
    assert not tt._bit_identical(frozen, model), "the check sees a one-ulp change"


# --------------------------------------------------------------------- preference scores
def naive_preference(run, chunks, data, batch_size, seed=0):
    """Eq. 3-4 written out: one position at a time, Python sums."""
    sums = [defaultdict(float), defaultdict(float)]
    counts = defaultdict(int)
    gen = torch.Generator().manual_seed(seed)
    emb = run.model.embedding
    with torch.no_grad():
        for start in range(0, len(chunks), batch_size):
            inputs, labels = tt.inputs_and_labels(
                run.model.config.tower, chunks[start : start + batch_size], data, gen
            )
            states = run.model.states(inputs)
            for b, i in (labels != tt.IGNORE_INDEX).nonzero().tolist():
                a = int(labels[b, i])
                counts[a] += 1
                for k in range(2):
                    p = torch.softmax(run.heads[k](states[k][b, i], emb).double(), -1)[a]
                    sums[k][a] += float(p)
    total = [sum(s.values()) / sum(counts.values()) for s in sums]
    first = 0 if total[0] >= total[1] else 1
    return {
        a: np.log(sums[first][a] / n) - np.log(sums[1 - first][a] / n) for a, n in counts.items()
    }, first


@pytest.mark.parametrize("tower", ["elmo", "bert"])
def test_preference_scores_match_a_naive_loop(tower, data):
    run = random_run(tower, data)
    chunks = data.valid[:10]
    pref = tt.preference_scores(run, chunks, data, batch_size=4)
    expected, first = naive_preference(run, chunks, data, batch_size=4)
    assert pref.primary == first
    assert set(np.flatnonzero(pref.counts)) == set(expected)
    for a, s in expected.items():
        assert pref.scores[a] == pytest.approx(s, abs=1e-6)  # float32 logits
    assert np.isnan(pref.scores[pref.counts == 0]).all()
    assert pref.n_positions == pref.counts.sum()


def test_primary_tower_rule_and_swapped_heads(data):
    assert tt.primary_tower([0.2, 0.1]) == 0
    assert tt.primary_tower([0.1, 0.2]) == 1
    assert tt.primary_tower([0.3, 0.3]) == 0
    with pytest.raises(ValueError, match="two towers"):
        tt.primary_tower([0.1])
    run = random_run("gpt", data, seed=3)
    pref = tt.preference_scores(run, data.valid[:8], data)
    assert pref.mean_p[0] >= pref.mean_p[1]
    run.model.towers = torch.nn.ModuleList([run.model.towers[1], run.model.towers[0]])
    run.heads = torch.nn.ModuleList([run.heads[1], run.heads[0]])
    swapped = tt.preference_scores(run, data.valid[:8], data)
    assert swapped.primary == 1 - pref.primary
    np.testing.assert_allclose(swapped.scores, pref.scores, rtol=1e-6, atol=1e-9)


# ------------------------------------------------------------------ correlations and null
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_permutation_null_sanity(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=2000), rng.normal(size=2000)
    null = chapter.permutation_null(a, b, n_perm=500, seed=seed)
    assert abs(null.mean()) < 0.01
    # the null's sd is 1/sqrt(n): its 99th percentile near 2.33/sqrt(n)
    assert np.percentile(null, 99) == pytest.approx(2.33 / np.sqrt(2000), rel=0.25)
    close = a + 0.5 * rng.normal(size=2000)
    assert chapter.score_correlation(a, close) > 10 * np.percentile(null, 99)
    assert abs(chapter.score_correlation(a, b)) < np.percentile(np.abs(null), 99.9)


def test_correlations_ignore_unscored_tokens_and_rank_against_frequency():
    rng = np.random.default_rng(0)
    a = rng.normal(size=50)
    b = a.copy()
    b[:5] = np.nan
    assert chapter.score_correlation(a, b) == pytest.approx(1.0)
    tokens = chapter.top_tokens(np.arange(50)[::-1] + 1.0, exclude_ids=[0, 1], n=20)
    assert tokens.tolist() == list(range(2, 22))
    mat = chapter.correlation_matrix({"x": a, "y": b}, tokens)
    assert mat.loc["x", "y"] == pytest.approx(1.0)
    rho = chapter.spearman_matrix({"x": np.arange(50.0)}, tokens)
    assert rho.loc["x", "frequency rank"] == pytest.approx(1.0)
    assert np.allclose(np.diag(rho), 1)


def test_token_pos_uses_the_most_frequent_tag(data):
    from lmsim.data import Sentence

    sents = [
        Sentence(["the", "run", "dog"], ["DET", "VERB", "NOUN"], silver=True),
        Sentence(["run", "the"], ["NOUN", "DET"], silver=True),
        Sentence(["run"], ["NOUN"], silver=True),
    ]
    pos = chapter.token_pos(sents, data.tokenizer).set_index("token")
    assert pos.loc["the", "upos"] == "DET" and pos.loc["the", "n"] == 2
    assert pos["silver"].all()
    cased = [Sentence(["The", "run"], ["DET", "VERB"]), Sentence(["the"], ["DET"])]
    lower = chapter.token_pos(cased, data.tokenizer, lowercase=True).set_index("token")
    assert lower.loc["the", "n"] == 2 and not lower["silver"].any()


# ---------------------------------------------------------------------------------- ICA
@pytest.mark.parametrize("seed", [0, 1])
def test_amari_ica_recovers_a_sparse_mixture_up_to_sign_and_permutation(seed):
    rng = np.random.default_rng(seed)
    sources = rng.laplace(size=(4000, 3)) * (rng.random((4000, 3)) < 0.3)
    mixing = rng.normal(size=(3, 5))  # three sources seen through five features
    P, eigvals = tt.pca_whiten(sources @ mixing, d=3)
    assert eigvals[3:].max() < 1e-9 * eigvals[0]
    Y, W, n_iter = tt.amari_ica(P, lr=0.1, n_iter=1500)
    corr = np.abs(np.corrcoef(Y.T, sources.T)[:3, 3:])
    assert sorted(corr.argmax(1)) == [0, 1, 2], "a permutation"
    assert corr.max(1).min() > 0.95
    assert np.linalg.norm(W) == pytest.approx(np.sqrt(3)), "the authors' rescaling"
    assert tt.ica_groups(Y).shape == Y.shape


# -------------------------------------------------------------------- caching and resume
def _weights(path):
    return torch.load(path / "weights.pt", weights_only=True)


def _assert_same(a, b):
    for part in ("model", "heads"):
        assert a[part].keys() == b[part].keys()
        for k in a[part]:
            assert torch.equal(a[part][k], b[part][k]), f"{part}.{k} differs"


def test_resume_after_interruption_gives_identical_weights_and_runs_are_deterministic(
    data, tmp_path, monkeypatch
):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    spec = tt.RunSpec("elmo-s0", tiny("elmo"), seed=0)
    whole = tt.train_two_tower(spec, SETTINGS, "a", progress=False)
    again = tt.train_two_tower(spec, SETTINGS, "c", progress=False)
    _assert_same(_weights(whole), _weights(again))
    partial = tt.train_two_tower(spec, SETTINGS, "b", progress=False, _stop_after=2)
    assert partial.name.endswith(".partial") and not (partial / "phase1.pt").exists()
    tt.train_two_tower(spec, SETTINGS, "b", progress=False, _stop_after=2)
    assert (partial / "phase1.pt").exists(), "phase 1 done, phase 2 interrupted"
    resumed = tt.train_two_tower(spec, SETTINGS, "b", progress=False)
    _assert_same(_weights(whole), _weights(resumed))
    assert not partial.exists(), "the work folder is removed once the run is cached"
    facts = tt.load_two_tower(resumed).facts
    assert facts["frozen_bit_identical"] and facts["steps"] == SETTINGS.steps
    assert tt.train_two_tower(spec, SETTINGS, "b", progress=False) == resumed, "cached"
    assert len(tt.training_log(resumed)) == SETTINGS.steps
    assert set(tt.training_log(resumed, heads=True)["tower"]) == {1, 2}


def test_run_dir_changes_with_what_changes_the_result():
    spec = tt.RunSpec("x", tiny("gpt"))
    base = tt.run_dir(spec, SETTINGS, "p").name
    assert tt.run_dir(tt.RunSpec("x", tiny("gpt"), seed=1), SETTINGS, "p").name != base
    other = tt.TwoTowerSettings(**{**SETTINGS.__dict__, "lr": 2e-3})
    assert tt.run_dir(spec, other, "p").name != base
    threads = tt.TwoTowerSettings(**{**SETTINGS.__dict__, "threads": 2})
    assert tt.run_dir(spec, threads, "p").name == base, "threads schedule, not change, a run"


def test_config_and_spec_validation():
    with pytest.raises(ValueError, match="`tower`"):
        tt.TowerConfig("lstm")
    with pytest.raises(ValueError, match="divisible"):
        tt.TowerConfig("bert", hidden=10, heads=3)
    with pytest.raises(ValueError, match="unknown keys"):
        tt.RunSpec.from_dict({"name": "a", "tower": "gpt", "width": 3})
    spec = tt.RunSpec.from_dict({"name": "a", "tower": "elmo", "hidden": 8, "seed": 2})
    assert spec.seed == 2 and spec.config.state_dim == 16
    assert chapter.PAPER_CONFIGS["bert-large"].layers == 24


def test_pair_table_names_each_pairs_relation():
    specs = [
        tt.RunSpec("g0", tiny("gpt"), 0),
        tt.RunSpec("g1", tiny("gpt"), 1),
        tt.RunSpec("gw", tt.TowerConfig("gpt", hidden=16, layers=2, heads=2)),
        tt.RunSpec("e0", tiny("elmo")),
    ]
    names = [s.name for s in specs]
    corr = chapter.correlation_matrix(
        {n: np.arange(10.0) + i for i, n in enumerate(names)}, np.arange(10)
    )
    table = chapter.pair_table(corr, specs, null_p99=0.5).set_index(["run A", "run B"])
    assert table.loc[("g0", "g1"), "relation"] == "seed"
    assert table.loc[("g0", "gw"), "relation"] == "size"
    assert table.loc[("g1", "e0"), "relation"] == "type"
    assert table["above null p99"].all() and len(table) == 6


@pytest.mark.parametrize(
    "config",
    [
        tt.TowerConfig("gpt", hidden=32, layers=2, heads=4, intermediate=80),
        tt.TowerConfig("bert", hidden=24, layers=3, heads=2),
        tt.TowerConfig("elmo", hidden=40, layers=2, embed=16, lstm_proj=12),
    ],
)
def test_flops_per_token_counts_every_weight_matrix(config):
    """6 FLOPs per matrix weight per token, counted from the built model's parameters."""
    vocab, seq_len = 50, 7
    model = tt.TwoTowerLM(config, vocab, seq_len)
    tower_weights = sum(p.numel() for p in model.towers.parameters() if p.ndim == 2)
    attention = 0 if config.tower == "elmo" else 2 * 12 * config.layers * seq_len * config.hidden
    head_weights = model.head.dense.weight.numel() + model.embedding.numel()
    predicted = 0.15 if config.tower == "bert" else 1.0
    assert tt.two_tower_flops_per_token(config, seq_len) == pytest.approx(
        6 * tower_weights + attention
    )
    assert tt.two_tower_flops_per_token(config, seq_len, vocab) == pytest.approx(
        6 * tower_weights + attention + 6 * predicted * head_weights
    )
