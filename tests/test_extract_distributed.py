"""Data-parallel extraction over ``torch.distributed``: two CPU processes on gloo.

Every result of the two ranks is compared with one process running the same models on the
same texts: merged moments bit for bit (each shard sees the same forward passes whichever
rank runs it, and the ranks merge the shards in shard order, as one process does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _helpers import EXTRACTION_SENTENCES as SENTENCES
from _helpers import EXTRACTION_TEXTS as TEXTS
from _helpers import tiny_tokenizer
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel, GPT2Config, GPT2Model

from lmsim import extract as ex
from lmsim.extract import extract_activations, extract_moments
from lmsim.extract import pooling as ex_pooling
from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WORLD = 2


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory) -> dict[str, str]:
    """A tiny BERT and a tiny GPT-2 saved with ``save_pretrained``: name -> folder."""
    root = tmp_path_factory.mktemp("dist_models")
    wp, bl = tiny_tokenizer("wordpiece", TEXTS), tiny_tokenizer("bytelevel", TEXTS)
    torch.manual_seed(0)
    bert = BertModel(
        BertConfig(
            vocab_size=wp.vocab_size,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=64,
        )
    )
    gpt2 = GPT2Model(
        GPT2Config(vocab_size=bl.vocab_size, n_embd=12, n_layer=3, n_head=2, n_positions=64)
    )
    dirs = {}
    for name, model, tok in (("bert", bert, wp), ("gpt2", gpt2, bl)):
        dirs[name] = str(root / name)
        model.save_pretrained(dirs[name])
        tok.save_pretrained(dirs[name])
    return dirs


def _pairs(model_dirs: dict[str, str]) -> dict:
    return {
        name: (AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path))
        for name, path in model_dirs.items()
    }


def _cases(pairs: dict) -> dict:
    """Every distributed code path, on whichever process runs it."""
    kw = dict(device="cpu", progress=False, batch_size=2)
    mom = extract_moments(pairs, TEXTS, shard_size=2, **kw)  # 5 shards, cached
    word = extract_moments(pairs, SENTENCES, pooling="word", shard_size=3, cache=False, **kw)
    merged, parts = extract_moments(
        pairs, TEXTS, shard_size=4, cache=False, return_shards=True, **kw
    )
    acts = extract_activations(pairs, SENTENCES, pooling="word", **kw)
    return {"mean": mom, "word": word, "merged": merged, "parts": parts, "acts": acts}


def _state(mom: Moments) -> tuple:
    return mom.n, mom.names, mom.mean(mom.names).numpy(), mom.comoment(mom.names).numpy()


def _worker(rank: int, init_file: str, model_dirs: dict, out: str, cache: str) -> None:
    os.environ["LMSIM_CACHE"] = cache
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        got = _cases(_pairs(model_dirs))
        states = {k: _state(v) for k, v in got.items() if isinstance(v, Moments)}
        states["parts"] = [_state(p) for p in got["parts"]]
        torch.save({"states": states, "acts": got["acts"]}, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _assert_same(a: tuple, b: tuple) -> None:
    assert a[0] == b[0] and a[1] == b[1]
    np.testing.assert_array_equal(a[2], b[2])  # bit for bit
    np.testing.assert_array_equal(a[3], b[3])


def test_two_gloo_ranks_equal_one_process_bit_for_bit(model_dirs, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    mp.spawn(
        _worker,
        args=(str(tmp_path / "init"), model_dirs, str(tmp_path), str(cache)),
        nprocs=WORLD,
        join=True,
    )
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]
    # One process, nothing cached: its own forward passes and merges.
    monkeypatch.setenv("LMSIM_CACHE", str(tmp_path / "single"))
    single = _cases(_pairs(model_dirs))
    for got in ranks:
        for case in ("mean", "word", "merged"):
            _assert_same(got["states"][case], _state(single[case]))
        assert len(got["states"]["parts"]) == len(single["parts"]) == 3
        for part, ref in zip(got["states"]["parts"], single["parts"]):
            _assert_same(part, _state(ref))
        assert got["acts"].keys() == single["acts"].keys()
        for name, x in single["acts"].items():
            np.testing.assert_array_equal(got["acts"][name], x)
    # The shards the two ranks wrote serve one process: no forward pass, same moments.
    monkeypatch.setenv("LMSIM_CACHE", str(cache))

    def boom(*args, **kwargs):
        raise AssertionError("the model ran although both ranks cached every shard")

    monkeypatch.setattr(ex_pooling, "_hidden_states", boom)
    again = extract_moments(
        _pairs(model_dirs), TEXTS, shard_size=2, batch_size=2, device="cpu", progress=False
    )
    _assert_same(_state(again), _state(single["mean"]))
    (manifest,) = cache.rglob("manifest.json")
    assert len(json.loads(manifest.read_text())["shards"]) == 5


@pytest.mark.slow  # three fresh interpreters: ~15 s idle, 40 s on a loaded 2-core machine
def test_torchrun_launches_the_command_line(model_dirs, tmp_path):
    """``torchrun --nproc_per_node 2 -m lmsim.extract``: the documented launch."""
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    repo = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "LMSIM_CACHE": str(tmp_path / "cache"),
        "PYTHONPATH": str(repo),
        "HF_HUB_OFFLINE": "1",
    }
    args = ["--models", model_dirs["bert"], "--corpus", str(corpus), "--device", "cpu"]
    args += ["--shard-size", "2", "--batch-size", "2", "--no-cache"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    done = subprocess.run(
        [*torchrun, "--nproc_per_node", "2", "-m", "lmsim.extract", *args, "--out", "two.st"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ex.main([*args, "--out", str(tmp_path / "one.st")])
    two, one = Moments.load(tmp_path / "two.st"), Moments.load(tmp_path / "one.st")
    _assert_same(_state(two), _state(one))


def test_ranks_take_the_length_ordered_shards_back_and_forth():
    assert [ex._owner(k, 3) for k in range(8)] == [0, 1, 2, 2, 1, 0, 0, 1]
    assert [ex._owner(k, 1) for k in range(3)] == [0, 0, 0]
