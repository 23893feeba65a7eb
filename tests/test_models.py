"""Model registry: devices, dtypes, tiny models via from_pretrained, offline wheels, hub errors."""

import json
import sys
import types

import pytest
import torch

import lmsim
from lmsim import models
from lmsim.models import (
    OFFLINE_MODELS,
    HubUnreachableError,
    build_tiny_model,
    check_seq_len,
    list_models,
    load_model,
    max_positions,
    model_info,
    resolve_device,
    resolve_dtype,
)

TINY = ["tiny-bert", "tiny-gpt2", "tiny-llama"]
SENTENCES = ["The old cat saw a dog near the river .", "Some clever robot fixed one engine ."]


@pytest.fixture(scope="module")
def lmsim_cache(tmp_path_factory):
    """A fresh lmsim cache for this module, so the build path itself is exercised."""
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("lmsim_cache")
    mp.setenv("LMSIM_CACHE", str(path))
    yield path
    mp.undo()


def _hidden_states(model, tokenizer, texts=SENTENCES):
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    return enc, out


# ---------------------------------------------------------------- devices and dtypes


def test_resolve_device_auto_matches_cuda_availability():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "", "tpu"])
def test_resolve_device_rejects_bad_strings(bad):
    with pytest.raises(ValueError, match="device"):
        resolve_device(bad)


def test_resolve_device_rejects_non_strings():
    with pytest.raises(TypeError, match="device"):
        resolve_device(0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present")
def test_resolve_device_cuda_without_cuda_names_fix():
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda")


@pytest.mark.gpu
def test_resolve_device_and_dtype_on_gpu():
    assert resolve_device("auto").type == "cuda"
    assert resolve_dtype(None, "cuda") == torch.float32  # 16 bits only by name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("float32", torch.float32),
        ("fp32", torch.float32),
        ("bf16", torch.bfloat16),
        ("bfloat16", torch.bfloat16),
        ("fp16", torch.float16),
        ("float16", torch.float16),
        ("torch.float64", torch.float64),
        (torch.float16, torch.float16),
    ],
)
def test_resolve_dtype_names(name, expected):
    assert resolve_dtype(name, "cpu") == expected


def test_resolve_dtype_default_is_float32_on_cpu():
    assert resolve_dtype(None, "cpu") == torch.float32


@pytest.mark.parametrize("bad", ["int8", "float128", torch.int64, 3])
def test_resolve_dtype_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="dtype"):
        resolve_dtype(bad, "cpu")


# ---------------------------------------------------------------- tiny models


@pytest.mark.parametrize("name", TINY)
def test_tiny_model_loads_through_cache_in_eval_mode(lmsim_cache, name):
    model, tokenizer = load_model(name, device="cpu")
    assert (lmsim_cache / "models" / name / "config.json").is_file()
    assert not model.training
    assert next(model.parameters()).dtype == torch.float32
    assert tokenizer.pad_token is not None
    assert tokenizer.padding_side == "right"
    enc, out = _hidden_states(model, tokenizer)
    info = model_info(model)
    assert len(out.hidden_states) == info["n_layers"] + 1 == 3
    n_batch, n_tokens = enc["input_ids"].shape
    assert out.hidden_states[-1].shape == (n_batch, n_tokens, info["hidden_size"])
    assert info["is_causal"] == (name != "tiny-bert")


def test_tiny_bert_tokenizer_has_bert_specials(lmsim_cache):
    _, tokenizer = load_model("tiny-bert", device="cpu")
    ids = tokenizer("the cat")["input_ids"]
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    for token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"):
        assert token in tokenizer.get_vocab()


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama"])
def test_decoder_tokenizers_pad_with_eos(lmsim_cache, name):
    _, tokenizer = load_model(name, device="cpu")
    assert tokenizer.pad_token_id == tokenizer.eos_token_id
    enc = tokenizer(["a", "the old cat"], padding=True)
    # right padding: the short row ends in pads, its mask ends in zeros
    assert enc["attention_mask"][0][-1] == 0 and enc["attention_mask"][0][0] == 1


@pytest.mark.parametrize("name", TINY)
def test_tiny_model_is_deterministic_across_loads(lmsim_cache, name):
    model_a, tok = load_model(name, device="cpu")
    model_b, _ = load_model(name, device="cpu")
    _, out_a = _hidden_states(model_a, tok)
    _, out_b = _hidden_states(model_b, tok)
    torch.testing.assert_close(out_a.last_hidden_state, out_b.last_hidden_state, rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["bert", "gpt2", "llama"])
def test_build_tiny_model_round_trip_and_seed(tmp_path, kind):
    path_a = build_tiny_model(kind, tmp_path / "a", seed=0)
    path_b = build_tiny_model(kind, tmp_path / "b", seed=0)
    path_c = build_tiny_model(kind, tmp_path / "c", seed=1)
    model_a, tok = load_model(str(path_a), device="cpu")
    model_b, _ = load_model(str(path_b), device="cpu")
    model_c, _ = load_model(str(path_c), device="cpu")
    state_a, state_b, state_c = model_a.state_dict(), model_b.state_dict(), model_c.state_dict()
    assert state_a.keys() == state_b.keys()
    for key in state_a:
        torch.testing.assert_close(state_a[key], state_b[key], rtol=0, atol=0)
    weight_keys = [k for k in state_a if k.endswith("weight") and state_a[k].ndim == 2]
    assert any(not torch.equal(state_a[k], state_c[k]) for k in weight_keys)


def test_build_tiny_model_variant_width_and_depth(tmp_path):
    path = build_tiny_model("gpt2", tmp_path / "wide", hidden_size=48, n_layers=3, n_heads=3)
    model, tokenizer = load_model(str(path), device="cpu")
    _, out = _hidden_states(model, tokenizer)
    assert len(out.hidden_states) == 4
    assert out.last_hidden_state.shape[-1] == 48


def test_build_tiny_model_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="kind"):
        build_tiny_model("t5", tmp_path)
    with pytest.raises(ValueError, match="divisible"):
        build_tiny_model("bert", tmp_path, hidden_size=30, n_heads=4)


@pytest.mark.parametrize(
    ("name", "task", "head_size"),
    [("tiny-bert", "masked-lm", "vocab"), ("tiny-gpt2", "causal-lm", "vocab"),
     ("tiny-llama", "causal-lm", "vocab"), ("tiny-bert", "sequence-classification", 2),
     ("tiny-gpt2", "sequence-classification", 2), ("tiny-llama", "sequence-classification", 2)],
)  # fmt: skip
def test_tasks_give_heads(lmsim_cache, name, task, head_size):
    model, tokenizer = load_model(name, device="cpu", task=task)
    enc = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits
    expected = len(tokenizer) if head_size == "vocab" else head_size
    assert logits.shape[-1] == expected


def test_sequence_classification_head_is_seeded(lmsim_cache):
    model_a, tok = load_model("tiny-gpt2", device="cpu", task="sequence-classification")
    model_b, _ = load_model("tiny-gpt2", device="cpu", task="sequence-classification")
    torch.testing.assert_close(model_a.score.weight, model_b.score.weight, rtol=0, atol=0)


def test_dtype_is_applied(lmsim_cache):
    model, _ = load_model("tiny-bert", device="cpu", dtype="bf16")
    assert next(model.parameters()).dtype == torch.bfloat16


def test_max_positions_and_check_seq_len(lmsim_cache):
    model, tokenizer = load_model("tiny-bert", device="cpu")
    assert max_positions(model, tokenizer) == model.config.max_position_embeddings
    assert check_seq_len(16, model, tokenizer) == 16
    limit = max_positions(model, tokenizer)
    with pytest.raises(ValueError, match=f"maximum of {limit} positions of tiny-bert"):
        check_seq_len(limit + 1, model, tokenizer, name="tiny-bert")


def test_max_positions_takes_the_smaller_limit(lmsim_cache):
    model, tokenizer = load_model("tiny-gpt2", device="cpu")
    tokenizer.model_max_length = 10
    assert max_positions(model, tokenizer) == 10
    tokenizer.model_max_length = int(1e30)  # transformers' "unset" sentinel
    assert max_positions(model, tokenizer) == model.config.n_positions


# ---------------------------------------------------------------- cache building


def test_atomic_build_leaves_nothing_when_interrupted(lmsim_cache):
    def failing_build(tmp):
        (tmp / "config.json").write_text("{}")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        models._atomic_build("half-built", failing_build, {"v": 1})
    leftovers = [p.name for p in (lmsim_cache / "models").iterdir() if "half-built" in p.name]
    assert leftovers == []


def test_atomic_build_rebuilds_stale_marker(lmsim_cache):
    calls = []

    def build(tmp):
        calls.append(tmp)
        (tmp / "payload.txt").write_text(str(len(calls)))

    path = models._atomic_build("marker-test", build, {"v": 1})
    assert models._atomic_build("marker-test", build, {"v": 1}) == path
    assert len(calls) == 1
    models._atomic_build("marker-test", build, {"v": 2})
    assert len(calls) == 2
    assert (path / "payload.txt").read_text() == "2"
    stored = json.loads((path / "lmsim_build.json").read_text())
    assert stored == {"marker": {"v": 2}, "sizes": {"payload.txt": 1}}


# ---------------------------------------------------------------- names and errors


def test_list_models_matches_offline_names():
    assert list_models() == list(OFFLINE_MODELS)
    assert {"minilm-l6", "smollm2-135m", "tiny-bert", "tiny-gpt2", "tiny-llama"} <= set(
        list_models()
    )


@pytest.mark.parametrize("name", ["not-a-model", "bert_base", "a/b/c", "/no/such/dir/x"])
def test_unknown_name_lists_offline_names(name):
    with pytest.raises(ValueError, match="unknown model") as err:
        load_model(name, device="cpu")
    for offline in list_models():
        assert offline in str(err.value)


def test_bad_task_is_rejected():
    with pytest.raises(ValueError, match="task"):
        load_model("tiny-bert", device="cpu", task="seq2seq")


def test_directory_without_config_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="config.json"):
        load_model(str(tmp_path), device="cpu")


def test_hub_id_offline_flag_raises_hub_unreachable(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnreachableError) as err:
        load_model("lmsim-tests/not-cached-anywhere", device="cpu")
    assert isinstance(err.value, OSError)
    assert "HF_HUB_OFFLINE" in str(err.value)
    for offline in list_models():
        assert offline in str(err.value)


def test_hub_id_unreachable_host_raises_hub_unreachable(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    # Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(HubUnreachableError, match="cannot be reached") as err:
        load_model("lmsim-tests/not-cached-anywhere", device="cpu")
    assert "127.0.0.1:9" in str(err.value)
    assert "tiny-bert" in str(err.value)


def test_legacy_bare_hub_id_goes_to_the_hub_path(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnreachableError, match="google-bert/bert-base-uncased"):
        load_model("bert-base-uncased", device="cpu")


@pytest.fixture
def fake_hub_cache(monkeypatch, tmp_path):
    """A Hugging Face cache holding ``lmsim-tests/tiny-gpt2`` at one commit, hub offline."""
    import huggingface_hub.constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--lmsim-tests--tiny-gpt2"
    build_tiny_model("gpt2", repo / "snapshots" / commit, seed=5)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return commit


def test_cached_hub_id_loads_offline(fake_hub_cache):
    model, tokenizer = load_model("lmsim-tests/tiny-gpt2", device="cpu")
    _, out = _hidden_states(model, tokenizer)
    assert len(out.hidden_states) == 3
    assert tokenizer.pad_token_id == tokenizer.eos_token_id
    pinned, _ = load_model("lmsim-tests/tiny-gpt2", device="cpu", revision=fake_hub_cache)
    torch.testing.assert_close(pinned.wte.weight, model.wte.weight, rtol=0, atol=0)
    with pytest.raises(HubUnreachableError, match="lmsim-tests/tiny-gpt2"):
        load_model("lmsim-tests/tiny-gpt2", device="cpu", revision="v-not-cached")


def test_revision_only_for_hub_ids():
    with pytest.raises(ValueError, match="revision"):
        load_model("tiny-bert", device="cpu", revision="main")


def test_zoo_names_use_zoo_model_dir(monkeypatch, tmp_path):
    built = build_tiny_model("bert", tmp_path / "zoo-mlm", seed=3)
    requests = []

    def model_dir(name, profile=None, build=False):
        requests.append((name, profile, build))
        return built

    fake_zoo = types.ModuleType("lmsim.zoo")
    fake_zoo.model_dir = model_dir
    monkeypatch.setitem(sys.modules, "lmsim.zoo", fake_zoo)
    monkeypatch.setattr(lmsim, "zoo", fake_zoo, raising=False)
    model, tokenizer = load_model("zoo/mlm-s3", device="cpu")
    assert requests == [("mlm-s3", "default", True)]
    load_model("zoo/mlm-s3", device="cpu", zoo_profile="smoke")
    assert requests[-1] == ("mlm-s3", "smoke", True), "the zoo profile is an explicit argument"
    _, out = _hidden_states(model, tokenizer)
    assert len(out.hidden_states) == 3


# ---------------------------------------------------------------- offline wheels


def _mean_pool(out, mask):
    mask = mask.unsqueeze(-1).to(out.last_hidden_state.dtype)
    return (out.last_hidden_state * mask).sum(1) / mask.sum(1)


def test_minilm_loads_and_embeds_by_meaning():
    model, tokenizer = load_model("minilm-l6", device="cpu")
    info = model_info(model)
    assert info["n_layers"] == 6 and info["hidden_size"] == 384 and not info["is_causal"]
    texts = ["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell."]
    enc, out = _hidden_states(model, tokenizer, texts)
    assert len(out.hidden_states) == 7
    emb = torch.nn.functional.normalize(_mean_pool(out, enc["attention_mask"]), dim=-1)
    assert emb.shape == (3, 384)
    # a trained sentence encoder puts paraphrases closer than unrelated sentences
    assert emb[0] @ emb[1] > emb[0] @ emb[2]


@pytest.mark.slow
def test_smollm2_converts_once_and_predicts_text():
    model, tokenizer = load_model("smollm2-135m", device="cpu")
    assert (models.cache_dir("models") / "smollm2-135m" / "lmsim_build.json").is_file()
    info = model_info(model)
    assert info["n_layers"] == 30 and info["hidden_size"] == 576 and info["is_causal"]
    enc, out = _hidden_states(model, tokenizer)
    assert len(out.hidden_states) == 31
    lm, _ = load_model("smollm2-135m", device="cpu", task="causal-lm")
    # a correctly dequantised model continues obvious prompts; a scrambled one does not
    for prompt, answer in [
        ("The capital of France is", "Paris"),
        ("One, two, three, four,", "five"),
    ]:
        enc = tokenizer([prompt], return_tensors="pt")
        with torch.no_grad():
            logits = lm(**enc).logits[0, -1]
        assert tokenizer.decode(logits.argmax()).strip() == answer


def test_load_random_model_is_the_architecture_with_seeded_fresh_weights():
    from lmsim.models import load_random_model

    trained, _ = load_model("tiny-gpt2")
    a, tok = load_random_model("tiny-gpt2", seed=3)
    b, _ = load_random_model("tiny-gpt2", seed=3)
    c, _ = load_random_model("tiny-gpt2", seed=4)
    assert a.config.to_dict()["n_layer"] == trained.config.n_layer
    assert tok.pad_token_id is not None and not a.training
    wa, wb, wc = (m.state_dict() for m in (a, b, c))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert any(not torch.equal(wa[k], wc[k]) for k in wa)
    with pytest.raises(TypeError, match="`seed` must be an int"):
        load_random_model("tiny-gpt2", seed=1.5)


def test_default_precision_is_float32_on_every_device(monkeypatch):
    """Statistics computed on a GPU match the CPU book's by default: 16-bit forward passes
    (weights or autocast) only when a page or caller names them."""
    from lmsim._runtime import autocast_dtype

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    for device in ("cpu", "cuda", "auto"):
        assert resolve_dtype(None, device) == torch.float32
        assert resolve_dtype("auto", device) == torch.float32
    assert autocast_dtype(torch.device("cuda"), None) is None
    assert autocast_dtype(torch.device("cuda"), "bf16") == torch.bfloat16
