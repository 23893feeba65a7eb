"""The resource plan (``python -m lmsim.reproduce --plan``): shapes, machines, every page
planned, the infeasible pages named, and the extraction formula against a measured run."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmsim import reproduce
from lmsim.reproduce._estimates import ESTIMATORS, plan_resources
from lmsim.reproduce._resources import (
    GB,
    SHAPES,
    Estimate,
    Machine,
    load_machine,
    model_shape,
    moments_bytes,
    problems,
)

ROOT = Path(__file__).resolve().parents[1]


def _runs(profile: str):
    manifest = reproduce.load_manifest(ROOT / "notebooks" / "runs.yml")
    return reproduce.plan_runs(manifest, profile, ROOT)


# ------------------------------------------------------------------ shapes
def _count(config_cls, model_cls, **kw):
    with torch.device("meta"):
        model = model_cls(config_cls(**kw))
    return sum(p.numel() for p in model.parameters()), model


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("bert-base-uncased", ("BertConfig", "BertModel", {})),
        (
            "bert-large-cased",
            (
                "BertConfig",
                "BertModel",
                dict(
                    vocab_size=28996,
                    hidden_size=1024,
                    num_hidden_layers=24,
                    num_attention_heads=16,
                    intermediate_size=4096,
                ),
            ),
        ),  # fmt: skip
        ("gpt2", ("GPT2Config", "GPT2Model", {})),
        ("distilbert-base-uncased", ("DistilBertConfig", "DistilBertModel", {})),
        (
            "roberta-base",
            (
                "RobertaConfig",
                "RobertaModel",
                dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1),
            ),
        ),  # fmt: skip
    ],
)
def test_table_parameter_counts_match_configuration_built_models(name, build):
    import transformers

    config_cls, model_cls, kw = build
    n, model = _count(getattr(transformers, config_cls), getattr(transformers, model_cls), **kw)
    shape = SHAPES[name]
    assert shape.params == pytest.approx(n, rel=0.01)
    # the 2N FLOPs' N: every weight matrix of the layers (biases, norms, BERT's pooler aside)
    layer_weights = sum(
        m.weight.numel()
        for name, m in model.named_modules()
        if (isinstance(m, torch.nn.Linear) or type(m).__name__ == "Conv1D") and "pooler" not in name
    )
    assert shape.forward_params == pytest.approx(layer_weights, rel=1e-9)


def test_local_config_is_read_and_unknown_models_are_named(tmp_path):
    from transformers import BertConfig

    BertConfig(hidden_size=48, num_hidden_layers=3, intermediate_size=100).save_pretrained(tmp_path)
    shape = model_shape(str(tmp_path))
    assert (shape.hidden, shape.layers, shape.ffn) == (48, 3, 100)
    with pytest.raises(KeyError, match="SHAPES"):
        model_shape("someone/unknown-model")


def test_thesis_joint_moments_are_the_issues_figures():
    # issue 31: one joint float64 co-moment over 81,408 features, 53 GB
    models = ["bert-base-cased", "distilbert-base-cased", "bert-base-multilingual-cased", "distilbert-base-multilingual-cased", "roberta-base", "distilroberta-base", "gpt2", "distilgpt2", "xlnet-base-cased", "xlm-roberta-base"]  # fmt: skip
    width = sum(SHAPES[m].state_width for m in models)
    assert width == 81_408
    assert moments_bytes(width) / GB == pytest.approx(53.0, abs=0.1)


# ------------------------------------------------------------------ machines
def test_machine_from_pairs_and_file(tmp_path):
    machine = load_machine("ram_gb=64, gpu_memory_gb=40")
    assert (machine.ram_gb, machine.gpu_memory_gb, machine.disk_gb) == (64, 40, 64)
    path = tmp_path / "m.yml"
    path.write_text("name: laptop\nram_gb: 16\ngpu_memory_gb: 0\n")
    machine = load_machine(str(path))
    assert machine.name == "laptop" and machine.gpu_memory_gb == 0
    assert load_machine(None) == Machine()


@pytest.mark.parametrize(
    ("spec", "match"),
    [("ram=64", "unknown key 'ram'"), ("ram_gb=lots", "not a number"), ("64", "key=value")],
)
def test_bad_machines_are_named(spec, match):
    with pytest.raises(ValueError, match=match):
        load_machine(spec)


# ------------------------------------------------------------------ plans
def test_every_page_of_every_profile_has_an_estimate():
    for profile in reproduce.PROFILES:
        runs = _runs(profile)
        estimates = plan_resources(runs, Machine())
        assert [e.page for e in estimates] == [r.key for r in runs]
        for est in estimates:
            assert est.ram > 0 and est.seconds >= 0 and est.disk >= 0, est.page
    stems = {f"{r.slug}/{r.source.stem}" for r in _runs("paper")}
    assert stems <= set(ESTIMATORS)


def test_smoke_plan_fits_and_exits_zero(capsys):
    assert reproduce.main(["--root", str(ROOT), "--profile", "smoke", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "| zhang2022_lmd/01_decomposition |" in out and "NO:" not in out


def test_paper_plan_names_the_page_and_the_parameter(capsys):
    small = ["--machine", "gpu_memory_gb=4", "--only", "thesis2022_redundancy"]
    assert reproduce.main(["--root", str(ROOT), "--profile", "paper", "--plan", *small]) == 1
    err = capsys.readouterr().err
    assert "thesis2022_redundancy/01_layer_similarity: gpu" in err
    assert "change `pairs`" in err


def test_thesis_paper_plan_fits_the_default_machine(capsys):
    # issue 29: one pass per teacher-student pair (not one joint co-moment of 81,408
    # features) and one model's activations at a time on the probing page.
    args = ["--root", str(ROOT), "--profile", "paper", "--plan", "--only", "thesis2022_redundancy"]
    assert reproduce.main(args) == 0
    estimates = {e.page: e for e in plan_resources(_runs("paper"), Machine())}
    page01 = estimates["thesis2022_redundancy/01_layer_similarity"]
    assert page01.gpu < 10 * GB and page01.disk_cache == 0
    assert estimates["thesis2022_redundancy/02_redundancy_probes"].ram < 32 * GB


def test_redundancy_probe_plan_counts_the_probes_the_page_trains():
    """Page 02 with OWL-QN trains each set of neurons once: the λ grid, all neurons and its
    control task, a kept set per τ and seed, random subsets at `random_for` and
    `random_seeds` (two kinds with `uniform`), the layer subsets (issue 44)."""
    from lmsim.reproduce._estimates.thesis import kept_share, probe_widths

    base = dict(thresholds=[0.1, 0.3, 0.5, 0.7, 0.9], seeds=[0, 1, 2], lambdas=[1e-3, 1e-4])
    every = dict(base, random_for=base["thresholds"], random_seeds=[0, 1], uniform=True)
    three = dict(every, random_for=[0.1, 0.5, 0.9])
    assert len(probe_widths(every, 100, 12)) == 4 + 15 + 20 + 1
    assert len(probe_widths(three, 100, 12)) == 4 + 15 + 12 + 1
    assert len(probe_widths(dict(three, uniform=False, random_seeds=None), 100, 12)) == 29
    assert sum(probe_widths(three, 100, 12)) < sum(probe_widths(every, 100, 12))
    assert kept_share(0.1) > kept_share(0.5) > kept_share(0.9) > 0
    assert kept_share(0.05) == kept_share(0.1)


def test_paper_plan_fits_a_machine_large_enough(capsys):
    big = "ram_gb=1e6,gpu_memory_gb=1e6,disk_gb=1e7"
    assert (
        reproduce.main(["--profile", "paper", "--plan", "--machine", big, "--root", str(ROOT)]) == 0
    )
    assert problems(plan_resources(_runs("paper"), load_machine(big)), load_machine(big)) == []


def test_a_cpu_machine_moves_device_memory_to_ram():
    runs = [r for r in _runs("paper") if r.key == "wu2020_similarity/01_representations"]
    gpu = plan_resources(runs, Machine())[0]
    cpu = plan_resources(runs, Machine(gpu_memory_gb=0))[0]
    assert cpu.gpu == 0 and cpu.ram > gpu.gpu > gpu.ram


def test_wu_table1_estimate_counts_every_fine_tuning_seed():
    run = next(r for r in _runs("default") if r.key == "wu2020_similarity/03_finetuning")
    seeds = list(run.parameters["ft_seeds"])
    assert len(seeds) >= 3  # Table 1 is judged over seeds in the default profile
    one = dataclasses.replace(run, parameters={**run.parameters, "ft_seeds": seeds[:1]})
    many, single = plan_resources([run, one], Machine())
    assert many.seconds > single.seconds


# ------------------------------------------------------------------ against a measured run
MEASURE = r"""
import json, os, resource, sys
import psutil, torch
from transformers import BertConfig, BertModel
from lmsim.data import load_corpus
from lmsim.extract import extract_moments
from lmsim.models import load_tokenizer
from lmsim.reproduce._estimates._common import Pass, moments_pass
from lmsim.reproduce._resources import Estimate, Machine, Shape

hidden, layers, n_texts, shard = 160, 12, 200, 80
tok = load_tokenizer("minilm-l6")
models = {}
for i in range(2):
    torch.manual_seed(i)
    config = BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=4 * hidden)
    models[f"m{i}"] = (BertModel(config).eval(), tok)
texts = load_corpus("ptb", split="valid", max_docs=n_texts)
before = psutil.Process().memory_info().rss


def high_water_mark():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM"))


# The peak of the extraction alone: ru_maxrss is the process's lifetime peak, which the
# imports and the models' construction may already have set above what extraction needs.
try:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # resets VmHWM to the current RSS
    peak_of = high_water_mark
except OSError:
    peak_of = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
extract_moments(models, texts, layers="all", device="cpu", dtype="float32", batch_size=32,
                shard_size=shard, progress=False)
peak = peak_of()
cache = sum(os.path.getsize(os.path.join(d, f))
            for d, _, fs in os.walk(os.environ["LMSIM_CACHE"]) for f in fs)
shape = Shape(hidden, layers, len(tok), sum(p.numel() for p in models["m0"][0].parameters()), 2)
est = Estimate("measured")
p = Pass([(n, shape, shape.state_width) for n in models], n_texts, n_texts, 30, 32, shard)
moments_pass(est, p, {"device": "cpu", "dtype": "float32"}, Machine(gpu_memory_gb=0), "x")
print(json.dumps({"measured": peak - before, "planned": est.ram - 1.5e9,
                  "cache": cache, "planned_cache": est.disk_cache}))
"""


def test_extraction_estimate_within_1_5x_of_a_measured_run(tmp_path):
    """The moments pass's RAM above the kernel (models, a forward pass, the merge and one
    shard) against the peak RSS of a CPU extraction in its own process, and its cache bytes
    against the files written."""
    env = {**os.environ, "LMSIM_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert 1 / 1.5 <= got["planned"] / got["measured"] <= 1.5, got
    assert got["planned_cache"] == pytest.approx(got["cache"], rel=0.01)


@pytest.mark.parametrize("dtype", [None, "auto", "float32", "bf16", "bfloat16"])
@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_planned_precision_is_what_extraction_resolves(monkeypatch, dtype, device):
    """The plan's forward precision follows lmsim._runtime.resolve_dtype (which decides the
    models' dtype and the autocast of extraction and Grams): a change of its CUDA default
    must reach the plan's times."""
    from lmsim._runtime import resolve_dtype
    from lmsim.reproduce._estimates._common import _dtype

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    expected = str(resolve_dtype(dtype, device)).removeprefix("torch.")
    assert _dtype(dtype, device) == expected


def test_regmean_gram_bytes_are_those_collect_grams_returns():
    from transformers import BertConfig, BertForSequenceClassification

    from lmsim.data import load_corpus
    from lmsim.merge import collect_grams
    from lmsim.models import load_tokenizer
    from lmsim.reproduce._estimates.regmean import _grams_bytes
    from lmsim.reproduce._resources import Shape

    tok = load_tokenizer("minilm-l6")
    config = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=96,
    )
    model = BertForSequenceClassification(config).eval()
    texts = load_corpus("ptb", split="valid", max_docs=8)
    grams = collect_grams(model, tok, texts, device="cpu", progress=False)
    got = sum(g.numel() * g.element_size() for g in grams.values())
    assert _grams_bytes(Shape(32, 2, len(tok), 0.0, 2, 96)) == got


# ------------------------------------------------------------------ issue 31: LMD's plan
def _lmd(dtype=None, appendix=True):
    run = next(r for r in _runs("paper") if r.key == "zhang2022_lmd/01_decomposition")
    params = dict(run.parameters)
    if dtype:
        params["dtype"] = dtype
    if not appendix:
        params["appendix_corpora"] = []
    return plan_resources([dataclasses.replace(run, parameters=params)], Machine())[0]


def test_lmd_paper_time_is_one_pass_per_model_and_split():
    """24.2 h before: float32 forwards at bf16's measured 0.30 of the limit. One pass per
    model, T and split (no re-extraction per pair, seed or bootstrap): float32 at 0.8 of
    its limit ~9 h; in bf16 under 2 h; in bf16 without Appendix B's corpus under 1.5 h."""
    assert Machine().flops_per_s("float32") == pytest.approx(0.8 * 52e12)
    assert Machine().flops_per_s("bfloat16") == pytest.approx(0.3 * 795e12)
    assert Machine().flops_per_s("float32", training=True) == pytest.approx(0.6 * 52e12)
    assert Machine().flops_per_s("bfloat16", training=True) == pytest.approx(0.15 * 795e12)
    assert 8 * 3600 < _lmd().seconds < 10 * 3600
    assert _lmd("bfloat16").seconds < 2 * 3600
    assert _lmd("bfloat16", appendix=False).seconds < 1.5 * 3600


def test_tokenisations_are_planned_in_host_ram_and_time():
    """All texts' tokenisations for every model (the old path) would not fit the LMD page's
    host; a shard at a time (return_shards) they do, and their time overlaps the GPU's."""
    from lmsim.reproduce._estimates._common import Pass, moments_pass

    shape = SHAPES["bert-base-uncased"]
    models = [(f"m{i}", shape, shape.hidden) for i in range(12)]
    params = {"device": "cuda", "dtype": "float32"}
    whole, shards = Estimate(""), Estimate("")
    moments_pass(whole, Pass(models, 512_000, 512_000, 512, 256, 12_800), params, Machine(), "x")
    p = Pass(models, 512_000, 512_000, 512, 256, 12_800, cache=False, return_shards=True)
    moments_pass(shards, p, params, Machine(), "x")
    assert whole.ram > 128 * GB > 32 * GB > shards.ram
    host = 12 * Machine().tokenise_seconds(512_000, 512)
    assert whole.seconds == pytest.approx(shards.seconds + host)
