"""Tests of lmsim.zoo: masking, losses, resumable deterministic training, the built zoo."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _helpers import tiny_zoo_profile

from lmsim import training, zoo
from lmsim.zoo import objectives, text

TINY = tiny_zoo_profile()


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models gain nothing from intra-op threads, and on a loaded machine every
    parallel region waits for a descheduled thread (~20 ms per op)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_zoo(tmp_path_factory):
    """The whole zoo at the tiny profile, built once into a temporary cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LMSIM_CACHE", str(tmp_path_factory.mktemp("cache")))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setitem(zoo.PROFILES, "tiny", TINY)
        paths = zoo.build(profile="tiny", progress=False)
        yield paths


@pytest.fixture(scope="module")
def smoke_data():
    """An in-memory _LMData from the generated smoke corpus (no PTB, no disk)."""
    from lmsim.data import load_corpus

    tokenizer = zoo.train_tokenizer(load_corpus("smoke", "train"), 200, TINY.seq_len)
    train = text._token_stream(tokenizer, load_corpus("smoke", "train"))
    valid = text._token_stream(tokenizer, load_corpus("smoke", "valid"))
    special = [tokenizer.convert_tokens_to_ids(t) for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]")]
    return text._LMData(
        tokenizer=tokenizer,
        train=zoo.make_chunks(train, TINY.seq_len, tokenizer.cls_token_id),
        valid=zoo.make_chunks(valid, TINY.seq_len, tokenizer.cls_token_id),
        counts=torch.bincount(torch.as_tensor(train), minlength=len(tokenizer)).double(),
        special_ids=torch.tensor(special),
    )


# ----------------------------------------------------------------------------- masking


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mask_tokens_rates_and_split(seed):
    special = torch.tensor([0, 2, 3, 4])
    ids = torch.randint(5, 1000, (400, 256), generator=torch.Generator().manual_seed(seed))
    ids[:, 0] = 2  # [CLS]
    ids[:, -1] = 0  # padding
    gen = torch.Generator().manual_seed(seed)
    inputs, labels = zoo.mask_tokens(ids, special, mask_id=4, vocab_size=1000, generator=gen)
    selected = labels != zoo.IGNORE_INDEX
    eligible = ~torch.isin(ids, special)
    n = int(selected.sum())
    assert not (selected & ~eligible).any(), "special tokens must never be selected"
    assert n / int(eligible.sum()) == pytest.approx(0.15, abs=0.005)
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(inputs[~selected], ids[~selected])
    as_mask = (inputs == 4) & selected
    kept = (inputs == ids) & selected
    rand = selected & ~as_mask & ~kept
    assert as_mask.sum().item() / n == pytest.approx(0.8, abs=0.01)
    # a random replacement may draw the original id (p = 1/995): counted as kept
    assert rand.sum().item() / n == pytest.approx(0.1, abs=0.01)
    assert kept.sum().item() / n == pytest.approx(0.1, abs=0.01)
    assert not torch.isin(inputs[rand], special).any()


def test_mask_tokens_same_generator_state_same_mask():
    ids = torch.randint(5, 100, (8, 32))
    special = torch.tensor([0, 2, 3, 4])
    a = zoo.mask_tokens(ids, special, 4, 100, torch.Generator().manual_seed(7))
    b = zoo.mask_tokens(ids, special, 4, 100, torch.Generator().manual_seed(7))
    c = zoo.mask_tokens(ids, special, 4, 100, torch.Generator().manual_seed(8))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


def test_mask_tokens_rejects_all_special():
    with pytest.raises(ValueError, match="only special tokens"):
        zoo.mask_tokens(
            torch.zeros(2, 4, dtype=torch.long), torch.tensor([0]), 4, 10, torch.Generator()
        )


def test_batch_indices_each_epoch_is_a_permutation():
    n, bs = 10, 4
    seen = np.concatenate([training.batch_indices(n, bs, s, seed=3) for s in range(5)])  # 2 epochs
    assert sorted(seen[:10]) == list(range(10))
    assert sorted(seen[10:20]) == list(range(10))
    assert np.array_equal(training.batch_indices(n, bs, 3, seed=3), seen[12:16])
    assert not np.array_equal(
        training.batch_indices(n, bs, 0, 3), training.batch_indices(n, bs, 0, 4)
    )


def test_make_chunks_layout():
    stream = np.arange(10, 33)
    chunks = zoo.make_chunks(stream, seq_len=5, cls_id=2)
    assert chunks.shape == (5, 5)
    assert (chunks[:, 0] == 2).all()
    assert chunks[1, 1:].tolist() == [14, 15, 16, 17]
    with pytest.raises(ValueError, match="seq_len"):
        zoo.make_chunks(np.arange(3), seq_len=8, cls_id=2)


def test_unigram_log_probs_normalised_and_excludes():
    counts = torch.tensor([5.0, 0.0, 3.0, 1.0])
    logp = zoo.unigram_log_probs(counts, exclude_ids=[0])
    assert logp[0] == -math.inf
    assert logp.exp().sum().item() == pytest.approx(1.0)
    assert logp[2].exp().item() == pytest.approx(4 / 7)


# ----------------------------------------------------------------------------- losses


def _naive_soft_ce(s, t, temperature):
    total = 0.0
    for row_s, row_t in zip(s.tolist(), t.tolist()):
        zs = [v / temperature for v in row_s]
        zt = [v / temperature for v in row_t]
        log_norm_s = math.log(sum(math.exp(v) for v in zs))
        norm_t = sum(math.exp(v) for v in zt)
        total += -sum(math.exp(b) / norm_t * (a - log_norm_s) for a, b in zip(zs, zt))
    return total / len(s) * temperature**2


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("temperature", [1.0, 2.0, 4.0])
def test_soft_target_cross_entropy_matches_hand_computation(seed, temperature):
    gen = torch.Generator().manual_seed(seed)
    s, t = torch.randn(5, 7, generator=gen), torch.randn(5, 7, generator=gen) * 3
    got = zoo.soft_target_cross_entropy(s, t, temperature).item()
    assert got == pytest.approx(_naive_soft_ce(s, t, temperature), rel=1e-5)


def test_soft_target_cross_entropy_temperature_scaling():
    # With identical logits the loss is T^2 times the entropy of softmax(logits / T).
    logits = torch.tensor([[2.0, 0.0, -1.0, 0.5]])
    for temperature in (1.0, 2.0, 3.0):
        p = F.softmax(logits / temperature, dim=-1)
        entropy = -(p * p.log()).sum().item()
        got = zoo.soft_target_cross_entropy(logits, logits, temperature).item()
        assert got == pytest.approx(temperature**2 * entropy, rel=1e-6)
    # and its gradient equals T (p_s - p_t) / n: the T^2 factor keeps the scale as T grows
    s = torch.tensor([[1.0, -1.0, 0.0]], requires_grad=True)
    t = torch.tensor([[0.0, 2.0, 1.0]])
    zoo.soft_target_cross_entropy(s, t, 2.0).backward()
    expected = 2.0 * (F.softmax(s.detach() / 2, -1) - F.softmax(t / 2, -1))
    assert torch.allclose(s.grad, expected, atol=1e-6)


def test_soft_target_cross_entropy_validates():
    with pytest.raises(ValueError, match="same shape"):
        zoo.soft_target_cross_entropy(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="temperature"):
        zoo.soft_target_cross_entropy(torch.zeros(2, 3), torch.zeros(2, 3), 0.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_cosine_embedding_loss_matches_hand_computation(seed):
    gen = torch.Generator().manual_seed(seed)
    a, b = torch.randn(6, 4, generator=gen), torch.randn(6, 4, generator=gen)
    expected = np.mean(
        [
            1 - np.dot(x, y) / np.linalg.norm(x) / np.linalg.norm(y)
            for x, y in zip(a.numpy(), b.numpy())
        ]
    )
    assert zoo.cosine_embedding_loss(a, b).item() == pytest.approx(expected, rel=1e-5)
    assert zoo.cosine_embedding_loss(a, 3 * a).item() == pytest.approx(0.0, abs=1e-6)


def test_masked_lm_loss_ignores_unlabelled_positions():
    logits = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([[1, -100, 4], [-100, -100, 0]])
    logp = F.log_softmax(logits, -1)
    expected = -(logp[0, 0, 1] + logp[0, 2, 4] + logp[1, 2, 0]) / 3
    assert zoo.masked_lm_loss(logits, labels).item() == pytest.approx(expected.item(), rel=1e-6)


def test_distillation_loss_is_the_weighted_sum_of_its_terms():
    gen = torch.Generator().manual_seed(0)
    s, t = torch.randn(6, 9, generator=gen), torch.randn(6, 9, generator=gen)
    labels = torch.tensor([3, -100, 1, -100, -100, 8])
    hs, ht = torch.randn(10, 4, generator=gen), torch.randn(10, 4, generator=gen)
    out = zoo.distillation_loss(s, t, labels, hs, ht, 2.0, 5.0, 2.0, 1.0)
    assert out["ce"].item() == pytest.approx(_naive_soft_ce(s, t, 2.0), rel=1e-5)
    assert out["mlm"].item() == pytest.approx(zoo.masked_lm_loss(s, labels).item())
    assert out["cos"].item() == pytest.approx(zoo.cosine_embedding_loss(hs, ht).item())
    expected = 5 * out["ce"] + 2 * out["mlm"] + 1 * out["cos"]
    assert out["loss"].item() == pytest.approx(expected.item(), rel=1e-6)


# ----------------------------------------------------------------------------- objectives


def _repeat_first_batch(run, n_steps=8, lr=1e-2):
    params = {id(p): p for m in run.modules.values() for p in m.parameters()}  # ELECTRA shares
    opt = torch.optim.Adam(list(params.values()), lr=lr)
    losses = []
    for _ in range(n_steps):
        loss, n_tokens, _ = run.loss_fn(0)  # step 0: the same batch and masking each time
        assert n_tokens > 0
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    return losses


@pytest.mark.parametrize("objective", ["mlm", "clm", "electra", "distil"])
def test_objective_loss_finite_and_decreases_on_a_repeated_batch(objective, smoke_data):
    cpu = torch.device("cpu")
    prof = dataclasses.replace(TINY, distil_ce_positions="all")
    if objective in ("mlm", "clm"):
        model = objectives._new_model(f"{objective}-s0", prof, smoke_data.tokenizer)
        make = objectives._mlm_run if objective == "mlm" else objectives._clm_run
        run = make(model, smoke_data, prof, 0, cpu)
    elif objective == "electra":
        disc, gen = objectives._electra_pair(prof, smoke_data.tokenizer, 0)
        run = objectives._electra_run(disc, gen, smoke_data, prof, 0, cpu)
    else:
        teacher = objectives._new_model("mlm-deep-s0", prof, smoke_data.tokenizer)
        student, kept = objectives._distil_student(teacher, prof)
        assert kept == [0, 2]
        run = objectives._distil_run(student, teacher, smoke_data, prof, 0, cpu)
    losses = _repeat_first_batch(run)
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0]


def test_distil_student_copies_alternate_teacher_layers(smoke_data):
    teacher = objectives._new_model("mlm-deep-s0", TINY, smoke_data.tokenizer)
    student, kept = objectives._distil_student(teacher, TINY)
    assert student.config.num_hidden_layers == TINY.deep_layers // 2
    for i, j in enumerate(kept):
        for a, b in zip(
            student.bert.encoder.layer[i].parameters(), teacher.bert.encoder.layer[j].parameters()
        ):
            assert torch.equal(a, b)
    assert torch.equal(
        student.bert.embeddings.word_embeddings.weight,
        teacher.bert.embeddings.word_embeddings.weight,
    )


def test_electra_generator_shares_embeddings(smoke_data):
    disc, gen = objectives._electra_pair(TINY, smoke_data.tokenizer, 0)
    assert gen.electra.embeddings is disc.electra.embeddings
    assert gen.generator_lm_head.weight is disc.electra.embeddings.word_embeddings.weight
    assert gen.config.hidden_size < disc.config.hidden_size


def test_electra_rtd_labels_mark_exactly_the_replaced_tokens(smoke_data):
    """The discriminator reads the corrupted sequence; a label is 1 where the sampled token
    differs from the original, 0 elsewhere (masked positions where the generator drew the
    original token included); the loss and accuracy count real tokens only."""
    disc, gen = objectives._electra_pair(TINY, smoke_data.tokenizer, 0)
    batch = smoke_data.train[:8]
    seen = {}
    forward = disc.forward

    def spy(*args, **kwargs):
        seen["input_ids"] = kwargs["input_ids"].clone()
        return forward(*args, **kwargs)

    disc.forward = spy
    rng = training.step_generator(0, 0)
    _, labels = zoo.mask_tokens(
        batch,
        smoke_data.special_ids,
        smoke_data.tokenizer.mask_token_id,
        len(smoke_data.tokenizer),
        training.step_generator(0, 0),
    )
    with torch.no_grad():
        out = objectives._electra_forward(disc, gen, batch, smoke_data, rng)
    corrupted = seen["input_ids"]
    selected = labels != zoo.IGNORE_INDEX
    assert torch.equal(corrupted[~selected], batch[~selected])  # only masked positions change
    real = ~torch.isin(batch, smoke_data.special_ids)
    expected = (corrupted != batch) & selected
    assert torch.equal(out["is_replaced"], expected[real])
    assert 0 < int(out["is_replaced"].sum()) < int(selected.sum()) + 1
    assert out["disc_logits"].numel() == int(real.sum())


def test_electra_low_temperature_samples_the_generator_argmax(smoke_data):
    disc, gen = objectives._electra_pair(TINY, smoke_data.tokenizer, 0)
    with torch.no_grad():
        out = objectives._electra_forward(
            disc, gen, smoke_data.train[:8], smoke_data, training.step_generator(0, 0), 1e-6
        )
        replaced = out["gen_logits"].argmax(-1)
    # Every masked position either keeps its token (argmax == original) or is replaced by
    # the argmax: the number of replaced tokens is the number of argmax misses.
    assert int(out["is_replaced"].sum()) == int((replaced != out["targets"]).sum())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rtd_summary_against_naive(seed):
    from sklearn.metrics import log_loss, roc_auc_score

    rng = np.random.default_rng(seed)
    labels = rng.random(500) < 0.15
    logits = rng.normal(size=500) + 2.0 * labels - 1.5
    got = zoo.rtd_summary(torch.tensor(logits), torch.tensor(labels))
    prob = 1 / (1 + np.exp(-logits))
    frac = labels.mean()
    assert got["rtd_accuracy"] == pytest.approx(np.mean((prob > 0.5) == labels))
    assert got["rtd_baseline"] == pytest.approx(1 - frac)
    assert got["rtd_loss"] == pytest.approx(log_loss(labels, prob))
    assert got["rtd_baseline_loss"] == pytest.approx(log_loss(labels, np.full(500, frac)))
    assert got["rtd_auc"] == pytest.approx(roc_auc_score(labels, logits))


def test_rtd_summary_constant_detector_is_the_baseline():
    labels = torch.tensor([True] * 15 + [False] * 85)
    constant = torch.full((100,), math.log(0.15 / 0.85))
    got = zoo.rtd_summary(constant, labels)
    assert got["rtd_accuracy"] == pytest.approx(got["rtd_baseline"])
    assert got["rtd_loss"] == pytest.approx(got["rtd_baseline_loss"])
    assert got["rtd_auc"] == pytest.approx(0.5)
    perfect = zoo.rtd_summary(torch.where(labels, 5.0, -5.0), labels)
    assert perfect["rtd_accuracy"] == 1.0 and perfect["rtd_auc"] == 1.0
    assert perfect["rtd_loss"] < 0.01 < got["rtd_loss"]


# ----------------------------------------------------------------------------- training runs


def _weights(path):
    from safetensors.torch import load_file

    return load_file(path / "model.safetensors")


def test_resume_after_interruption_equals_uninterrupted_run(tmp_path, monkeypatch):
    prof = dataclasses.replace(TINY, name="resume", steps=6, dropout=0.1, checkpoint_every=2)
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "a"))
    work = zoo.build_model("mlm-s0", prof, progress=False, _stop_after=2)
    assert (work / "checkpoint.pt").exists()
    assert not (tmp_path / "a" / "zoo" / "resume" / "mlm-s0").exists()
    resumed = zoo.build_model("mlm-s0", prof, progress=False)
    assert not work.exists(), "the partial folder is removed once the model is saved"
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "b"))
    straight = zoo.build_model("mlm-s0", prof, progress=False)
    wa, wb = _weights(resumed), _weights(straight)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key
    log_a = json.loads((resumed / "zoo.json").read_text())
    assert log_a["steps"] == 6
    assert len(zoo.training_log("mlm-s0", prof)) == 6


def test_same_seed_same_weights_different_seed_different(tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    again = zoo.build_model("mlm-s0", TINY, progress=False)
    w0, w0_again, w1 = _weights(tiny_zoo["mlm-s0"]), _weights(again), _weights(tiny_zoo["mlm-s1"])
    assert all(torch.equal(w0[k], w0_again[k]) for k in w0)
    assert any(not torch.equal(w0[k], w1[k]) for k in w0)


def test_parallel_build_gives_the_same_weights(tiny_zoo, tmp_path, monkeypatch):
    """Two worker processes, parents before children: same models as the serial build."""
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    prof = dataclasses.replace(TINY, threads=1)
    paths = zoo.build(["clm-s0", "distil-mlm"], prof, progress=False, jobs=2)
    assert set(paths) == {"mlm-s0", "clm-s0", "distil-mlm"}
    for name, path in paths.items():
        got, want = _weights(path), _weights(tiny_zoo[name])
        assert all(torch.equal(got[k], want[k]) for k in want), name


def test_stale_settings_warn_and_rebuild(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    zoo.build(["distil-mlm"], TINY, progress=False)
    assert zoo.stale_settings("mlm-s0", dataclasses.replace(TINY, jobs=2, threads=2)) == {}
    changed = dataclasses.replace(TINY, lr=1e-3)
    assert zoo.stale_settings("mlm-s0", changed) == {"lr": (TINY.lr, 1e-3)}
    longer = dataclasses.replace(TINY, ft_epochs=7.0)
    assert zoo.stale_settings("mlm-s0", longer) == {}, "a language model ignores ft settings"
    assert zoo.stale_settings("distil-mlm", longer) == {}
    with pytest.warns(UserWarning, match=r"lr: 0.003 -> 0.001.*--only mlm-s0 --rebuild"):
        zoo.model_dir("mlm-s0", changed)
    before = (tmp_path / "zoo" / "tiny" / "distil-mlm" / "zoo.json").stat().st_mtime_ns
    zoo.build(["mlm-s0"], changed, progress=False, rebuild=True)
    assert zoo.stale_settings("mlm-s0", changed) == {}
    rebuilt = tmp_path / "zoo" / "tiny" / "distil-mlm" / "zoo.json"
    assert rebuilt.stat().st_mtime_ns != before, "what was built from mlm-s0 is rebuilt too"
    assert zoo.stale_settings("distil-mlm", changed) == {}


def test_a_build_by_an_older_lmsim_is_trained_again(tmp_path, monkeypatch):
    """A verified build that lacks today's records (an older lmsim wrote no
    validation_chunks.csv) is not used: it is named in a warning and trained again, the same
    weights back (same seed, same machine) and the records with them."""
    import json

    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    path = zoo.build(["mlm-s0"], TINY, progress=False)["mlm-s0"]
    weights = (path / "model.safetensors").read_bytes()
    (path / "validation_chunks.csv").unlink()
    marker = path / "lmsim_entry.json"
    record = json.loads(marker.read_text())
    del record["files"]["validation_chunks.csv"]  # as an older build recorded it
    marker.write_text(json.dumps(record))
    with pytest.warns(UserWarning, match=r"built by an older lmsim .*validation_chunks\.csv"):
        again = zoo.model_dir("mlm-s0", TINY)
    assert (again / "validation_chunks.csv").is_file()
    assert (again / "model.safetensors").read_bytes() == weights
    assert not list(path.parent.glob("mlm-s0.corrupt*")), "outdated is not corrupt"


def test_build_rejects_bad_jobs(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="jobs"):
        zoo.build(["mlm-s0"], TINY, progress=False, jobs=0)


def test_tiny_zoo_metadata(tiny_zoo):
    assert set(tiny_zoo) == set(zoo.MODELS)
    table = zoo.summary("tiny").set_index("name")
    assert list(table.index) == list(zoo.MODELS)
    assert table.loc["mlm-deep-s0", "layers"] == 2 * table.loc["mlm-s0", "layers"]
    assert table.loc["distil-mlm", "layers"] == table.loc["mlm-s0", "layers"] // 2
    assert table.loc["distil-mlm", "teacher"] == "mlm-s0"
    assert table.loc["ft-bbcnews", "base_model"] == "mlm-s0"
    for name in ("mlm-s0", "clm-s0", "electra-s0", "distil-mlm"):
        assert table.loc[name, "val_ppl"] > 1 and table.loc[name, "unigram_ppl"] > 1
        log = zoo.training_log(name, "tiny")
        assert log["step"].tolist() == list(range(1, TINY.steps + 1))
        assert log["val_ppl"].notna().sum() == TINY.steps // TINY.eval_every
    assert 0 <= table.loc["electra-s0", "rtd_accuracy"] <= 1
    for name in ("ft-bbcnews", "ft-finefood"):
        assert 0 <= table.loc[name, "test_accuracy"] <= 1
        assert 0 < table.loc[name, "majority_baseline"] < 1
    facts = zoo.model_facts("ft-bbcnews", "tiny")
    assert len(facts["label_names"]) == 5 and facts["mfu"] is None


def test_build_records_the_weights_hash_and_the_machine(tiny_zoo):
    """Each build keeps its weights' sha256 and the processor it ran on: two machines'
    builds of one model are told apart by them (docs/reproducibility.md)."""
    import hashlib

    from lmsim._runtime import cpu_model

    for name in ("mlm-s0", "ft-bbcnews"):
        facts = zoo.model_facts(name, "tiny")
        weights = tiny_zoo[name] / "model.safetensors"
        assert facts["weights_sha256"]["model.safetensors"] == (
            hashlib.sha256(weights.read_bytes()).hexdigest()
        )
        assert facts["cpu_model"] == cpu_model() and facts["cpu_capability"]
    assert "classifier.safetensors" in zoo.model_facts("ft-bbcnews", "tiny")["weights_sha256"]


def test_validation_chunks_add_up_to_the_recorded_perplexities(tiny_zoo):
    chunks = {n: zoo.validation_chunks(n, "tiny") for n in ("mlm-s0", "mlm-s1", "distil-mlm")}
    chunks["clm-s0"] = zoo.validation_chunks("clm-s0", "tiny")
    chunks["electra-s0"] = zoo.validation_chunks("electra-s0", "tiny")
    assert len({len(c) for c in chunks.values()}) == 1, "every model scores the same chunks"
    for name, c in chunks.items():
        facts = zoo.model_facts(name, "tiny")
        assert math.exp(c["nll"].sum() / c["tokens"].sum()) == pytest.approx(
            facts["val_ppl"], rel=1e-12
        )
        assert math.exp(c["unigram_nll"].sum() / c["tokens"].sum()) == pytest.approx(
            facts["unigram_ppl"], rel=1e-12
        )
        assert facts["n_val_chunks"] == len(c)
        assert facts.get("n_val_tokens", c["tokens"].sum()) == c["tokens"].sum()
    # the masked models are scored at the same masked positions: same counts per chunk
    assert chunks["mlm-s0"]["tokens"].equals(chunks["mlm-s1"]["tokens"])
    assert chunks["mlm-s0"]["tokens"].equals(chunks["distil-mlm"]["tokens"])
    rtd = chunks["electra-s0"]
    facts = zoo.model_facts("electra-s0", "tiny")
    assert rtd["rtd_bce"].sum() / rtd["rtd_tokens"].sum() == pytest.approx(
        facts["rtd_loss"], rel=1e-9
    )
    assert 1 - rtd["rtd_replaced"].sum() / rtd["rtd_tokens"].sum() == pytest.approx(
        facts["rtd_baseline"], rel=1e-12
    )
    with pytest.raises(ValueError, match="test_predictions"):
        zoo.validation_chunks("ft-bbcnews", "tiny")


def test_classifier_predictions_head_and_rebuild_are_exact(tiny_zoo, tmp_path, monkeypatch):
    table = zoo.test_predictions("ft-finefood", "tiny")
    facts = zoo.model_facts("ft-finefood", "tiny")
    assert len(table) == facts["n_test"]
    assert (table["prediction"] == table["label"]).mean() == pytest.approx(facts["test_accuracy"])
    assert (table["label"] == facts["majority_class"]).mean() == pytest.approx(
        facts["majority_baseline"]
    )
    assert facts["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert facts["threads"] >= 1 and facts["base_model"] == "mlm-s0"
    assert zoo.model_facts("ft-finefood-s1", "tiny")["base_model"] == "mlm-s1"
    assert zoo.model_facts("distil-mlm-s2", "tiny")["teacher"] == "mlm-s2"
    with pytest.raises(ValueError, match="validation_chunks"):
        zoo.test_predictions("mlm-s0", "tiny")
    # the saved head gives back the recorded predictions
    model = zoo.load_classifier("ft-finefood", "tiny")
    tokenizer = zoo.load_tokenizer(TINY)
    cls = objectives._classification_data("finefood", tokenizer, TINY)
    enc, _ = cls["test"]
    again = objectives._classification_predictions(model, enc, tokenizer.pad_token_id, "cpu")
    assert again.tolist() == table["prediction"].tolist()
    # a rebuild on this machine is bit-identical: encoder, head and predictions
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    path = zoo.build(["ft-finefood"], TINY, progress=False)["ft-finefood"]
    for file in ("model.safetensors", "classifier.safetensors"):
        got, want = _weights_file(path / file), _weights_file(tiny_zoo["ft-finefood"] / file)
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    assert zoo.test_predictions("ft-finefood", TINY).equals(table)


def _weights_file(path):
    from safetensors.torch import load_file

    return load_file(path)


@pytest.mark.parametrize(
    "name, architecture",
    [
        ("mlm-s0", "BertModel"),
        ("clm-s0", "GPT2Model"),
        ("electra-s0", "ElectraModel"),
        ("distil-mlm", "BertModel"),
        ("ft-finefood", "BertModel"),
    ],
)
def test_zoo_models_load_as_base_encoders(tiny_zoo, name, architecture):
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(tiny_zoo[name])
    tokenizer = AutoTokenizer.from_pretrained(tiny_zoo[name])
    assert type(model).__name__ == architecture
    batch = tokenizer(["the company said it will"], return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    assert len(out.hidden_states) == model.config.num_hidden_layers + 1
    assert out.hidden_states[-1].shape == (1, batch["input_ids"].shape[1], TINY.hidden)


def test_round_trip_through_load_model(tiny_zoo, monkeypatch):
    from lmsim.models import load_model

    # the fixture's environment is gone here: point the zoo at the same cache again
    monkeypatch.setenv("LMSIM_CACHE", str(tiny_zoo["mlm-s0"].parents[2]))
    monkeypatch.setitem(zoo.PROFILES, "tiny", TINY)
    model, tokenizer = load_model("zoo/mlm-s0", device="cpu", zoo_profile="tiny")
    assert model.config.num_hidden_layers == TINY.layers
    assert tokenizer.mask_token == "[MASK]"
    assert zoo.model_dir("mlm-s0", "tiny") == tiny_zoo["mlm-s0"]


def test_gpu_profile_code_path_runs_on_cpu(tmp_path, monkeypatch):
    # The gpu profile's bf16 / fused AdamW / compile switch off without CUDA; same code runs.
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    sizes = {
        k: getattr(TINY, k) for k in ("vocab_size", "hidden", "layers", "deep_layers", "heads")
    }
    prof = dataclasses.replace(
        zoo.PROFILES["gpu"],
        name="gpu-tiny",
        **sizes,
        seq_len=16,
        batch_size=4,
        steps=2,
        eval_every=2,
        checkpoint_every=2,
        n_eval_chunks=2,
        max_train_lines=200,
        max_valid_lines=20,
        device="cpu",
    )
    assert prof.bf16 and prof.compile and prof.fused_adamw and prof.distil_ce_positions == "all"
    path = zoo.build_model("distil-mlm", prof, progress=False)
    facts = json.loads((path / "zoo.json").read_text())
    assert facts["device"] == "cpu" and facts["tokens_per_s"] > 0


def test_cli_list(tiny_zoo, monkeypatch, capsys):
    monkeypatch.setenv("LMSIM_CACHE", str(tiny_zoo["mlm-s0"].parents[2]))
    monkeypatch.setitem(zoo.PROFILES, "tiny", TINY)
    assert zoo.main(["list", "--profile", "tiny"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in zoo.MODELS)


def test_cli_build_skips_finished_models(tiny_zoo, monkeypatch, capsys):
    monkeypatch.setenv("LMSIM_CACHE", str(tiny_zoo["mlm-s0"].parents[2]))
    monkeypatch.setitem(zoo.PROFILES, "tiny", TINY)
    before = (tiny_zoo["distil-mlm"] / "model.safetensors").stat().st_mtime_ns
    assert zoo.main(["build", "--profile", "tiny", "--only", "distil-mlm"]) == 0
    assert "built 2 models" in capsys.readouterr().out  # the student and its teacher
    assert (tiny_zoo["distil-mlm"] / "model.safetensors").stat().st_mtime_ns == before


def test_plot_training_curves(tiny_zoo, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.setenv("LMSIM_CACHE", str(tiny_zoo["mlm-s0"].parents[2]))
    fig = zoo.plot_training_curves(TINY)
    assert len(fig.axes) == 2 and len(fig.axes[0].lines) == len(zoo.MODELS)
    lm_names = [n for n, spec in zoo.MODELS.items() if spec.objective != "finetune"]
    ratio_lines = fig.axes[1].lines[: len(lm_names)]
    assert len(fig.axes[1].lines) == len(lm_names) + 1  # + the baseline at 1
    for name, line in zip(lm_names, ratio_lines, strict=True):
        val = zoo.training_log(name, TINY).dropna(subset=["val_ppl"])
        np.testing.assert_allclose(line.get_ydata(), val["val_ppl"] / val["unigram_ppl"])
    assert list(fig.axes[1].lines[-1].get_ydata()) == [1.0, 1.0]
    looks = {(line.get_color(), line.get_linestyle()) for line in fig.axes[0].lines}
    assert len(looks) == len(zoo.MODELS), "every model's curve looks different"


# ----------------------------------------------------------------------------- errors


def test_errors_name_the_problem(tmp_path, monkeypatch):
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path))
    with pytest.raises(KeyError, match="mlm-s0"):
        zoo.model_dir("bert-huge", TINY)
    with pytest.raises(ValueError, match="unknown zoo profile"):
        zoo.get_profile("huge")
    with pytest.raises(FileNotFoundError, match="python -m lmsim.zoo build"):
        zoo.model_dir("mlm-s0", TINY, build=False)
    with pytest.raises(ValueError, match="divisible"):
        zoo.ZooProfile(name="bad", hidden=10, heads=4)
    with pytest.raises(ValueError, match="distil_ce_positions"):
        zoo.ZooProfile(name="bad", distil_ce_positions="some")
    # The profile is an argument: no environment variable selects it.
    monkeypatch.setenv("LMSIM_ZOO_PROFILE", "smoke")
    assert zoo.get_profile().name == "default"
