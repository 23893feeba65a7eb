"""Resource plans: each page's peak host RAM, GPU memory, disk and time, before it runs.

``python -m lmsim.reproduce --profile paper --plan`` estimates, for every selected page,
what it needs from its parameters (the notebook's declared defaults, then the profile's
overrides from ``notebooks/runs.yml``) and the shapes of its models, without loading a
model or reading a corpus. The formulas live in ``_estimates.py`` (one function per source
notebook); this module holds what they share:

* :class:`Machine`: the declared machine (default one H100 80 GB, 128 GB RAM, 64 GB disk)
  and the throughput the times assume;
* :data:`SHAPES` and :func:`model_shape`: the paper checkpoints' shapes (hidden size,
  layers, vocabulary, parameters), since their configurations cannot be downloaded here;
  local folders with a ``config.json`` are read; ``zoo/<name>`` from the zoo's profiles;
* the building blocks: bytes of float64 moments, of a model, of a forward pass's
  activations, of AdamW training; FLOPs of a forward pass;
* :class:`Estimate`, :func:`problems` and :func:`plan_table` (``_estimates.plan_resources``
  runs the per-page functions).

Every estimate is a peak: the largest of a page's steps, not their sum (except disk,
which adds what the page leaves behind: cache and outputs).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

GB = 1e9

# Host RAM of a kernel that imported torch, transformers and lmsim, before any data: on a
# machine without a GPU 0.6 GB (peak RSS 0.59-0.65 GB over the smoke pages, whose data and
# models are tiny: benchmarks/results/plan_smoke.json); CUDA's context adds ~0.9 GB of
# host memory. Every page's RAM peak counts BASE_RAM once; `estimate_page` lowers it to
# BASE_RAM_CPU on a machine without a GPU.
BASE_RAM = 1.5 * GB
BASE_RAM_CPU = 0.6 * GB
# GPU memory CUDA's context and allocator hold before any tensor (H100, torch 2.x).
BASE_GPU = 0.6 * GB
# Host bytes a token costs once tokenised for one model and aligned (``_Encoded``: ids as
# a Python list, rows, positions and weights as arrays; texts included): 63-69 B measured
# with tracemalloc (1,000 and 3,000 texts of T = 512, MiniLM's WordPiece, mean pooling).
ENCODED_BYTES_PER_TOKEN = 65.0
# What a batch tokenisation holds besides, while it runs for one model (the tokenizer's
# encodings and BatchEncoding lists): RSS grew by 250-390 B a token in the same runs.
TOKENIZER_BYTES_PER_TOKEN = 300.0


@dataclass(frozen=True)
class Machine:
    """The machine a plan is checked against.

    Attributes
    ----------
    name : str
    gpu_memory_gb, ram_gb, disk_gb : float
        Capacities (``gpu_memory_gb = 0``: no GPU; pages then plan their GPU work on the
        CPU's RAM).
    gpu_fp32_tflops, gpu_bf16_tflops, gpu_fp64_tflops : float
        Dense GEMM limits: the H100 80GB HBM3 measured by ``benchmarks/bench_gpu.py``
        (``torch.mm``, TF32 off: 52, 795, 56 TFLOP/s; ``benchmarks/results/gpu.json``).
    forward_efficiency : float
        Fraction of the precision's limit a 16-bit forward pass reaches: 0.30, the bare
        BERT-base forward measured at T = 128 (29.8 % of the bf16 peak; ``gpu.json``).
    forward_efficiency_fp32 : float
        The same for a float32 forward (TF32 off): 0.8, *derived, not measured*: of the
        bf16 forward's 0.59 µs a token, 0.22 µs are GEMMs at the measured bf16 limit and
        ~0.37 µs the rest (memory-bound layers, launches); in float32 the GEMMs take
        3.35 µs at the measured 52 TFLOP/s and the rest ~0.74 µs (twice the bytes), so
        GEMM FLOPs / time ≈ 0.8 of the float32 limit. Applying bf16's 0.30 to float32
        (as plans did before) made float32 extraction 2.7x slower than it can be.
    train_efficiency : float
        The same for 16-bit training steps: 0.15, the two-tower runs measured at 8.7-20.6 %
        MFU (``twotower_gpu.json``; small towers, bound by kernel launches).
    train_efficiency_fp32 : float
        float32 training steps (TF32 off): 0.6, *derived, not measured*: a 768 x 12
        tower trained in bf16 took 6.0 ns a token (20.4 % MFU, ``twotower_gpu.json``), of
        which 1.5 ns GEMMs at the measured bf16 limit and 4.5 ns the rest; in float32 the
        GEMMs take 23 ns at 52 TFLOP/s and the rest ~9 ns (twice the bytes): 0.72 of the
        float32 limit, rounded down. bf16's 0.15 was applied to float32 fine-tunes before.
    cpu_gflops : float
        float64 GEMM of the host for CPU-side statistics (16 cores: ~600 GFLOP/s).
    tokenise_us_per_text, tokenise_us_per_token : float
        Host time to tokenise a text for one model and align its rows (``_encode``):
        43.5 µs a text + 0.175 µs a token, fitted to the two measured ``plan_seconds`` of
        ``gpu_extraction_deferred_sync.json`` (8,192 texts of T = 128: 0.54 s; 2,048 of
        T = 512: 0.27 s; the H100 machine's 16-core host).
    """

    name: str = "1x H100 80GB, 128 GB RAM, 64 GB disk"
    gpu_memory_gb: float = 80.0
    ram_gb: float = 128.0
    disk_gb: float = 64.0
    gpu_fp32_tflops: float = 52.0
    gpu_bf16_tflops: float = 795.0
    gpu_fp64_tflops: float = 56.0
    forward_efficiency: float = 0.30
    forward_efficiency_fp32: float = 0.8
    train_efficiency: float = 0.15
    train_efficiency_fp32: float = 0.6
    cpu_gflops: float = 600.0
    tokenise_us_per_text: float = 43.5
    tokenise_us_per_token: float = 0.175

    def flops_per_s(self, dtype: str, training: bool = False) -> float:
        """Sustained FLOP/s of model work in ``dtype`` ("float32", "bfloat16", "float64")."""
        peak = {
            "float32": self.gpu_fp32_tflops,
            "bfloat16": self.gpu_bf16_tflops,
            "float16": self.gpu_bf16_tflops,
            "float64": self.gpu_fp64_tflops,
        }[dtype]
        if self.gpu_memory_gb <= 0:  # no GPU: the host's float64 GEMM rate for everything
            return self.cpu_gflops * 1e9 * (0.5 if training else 1.0)
        if training:
            eff = self.train_efficiency_fp32 if dtype == "float32" else self.train_efficiency
        elif dtype == "float32":
            eff = self.forward_efficiency_fp32
        else:
            eff = self.forward_efficiency
        return peak * 1e12 * eff

    def tokenise_seconds(self, n_texts: float, tokens_per_text: float) -> float:
        """Host seconds to tokenise ``n_texts`` texts for one model."""
        per = self.tokenise_us_per_text + self.tokenise_us_per_token * tokens_per_text
        return n_texts * per * 1e-6

    def statistics_flops_per_s(self) -> float:
        """float64 co-moment updates (``syrk`` / ``addmm_``): 90 % of the fp64 GEMM limit on
        a GPU (measured 92 %, ``gpu.json``), the host's rate otherwise."""
        if self.gpu_memory_gb <= 0:
            return self.cpu_gflops * 1e9
        return 0.9 * self.gpu_fp64_tflops * 1e12


# Capacities that may be 0 (no GPU; no per-text tokenising cost); every other is > 0.
_MAY_BE_ZERO = ("gpu_memory_gb", "tokenise_us_per_text", "tokenise_us_per_token")


def load_machine(spec: str | None) -> Machine:
    """A :class:`Machine` from ``--machine``: a YAML/JSON file or ``key=value,key=value``.

    Keys are :class:`Machine`'s attributes (``ram_gb=64,disk_gb=500,gpu_memory_gb=40``);
    those not given keep the default machine's values. ``"this"``: this machine
    (:func:`detect_machine`).
    """
    if not spec:
        return Machine()
    if spec == "this":  # what the runner checks pages against when no --machine is given
        return detect_machine()
    path = Path(spec)
    if path.is_file():
        import yaml

        values = yaml.safe_load(path.read_text()) or {}
        if not isinstance(values, Mapping):
            raise ValueError(f"--machine {spec!r}: the file must hold a mapping of key: value")
    else:
        values = {}
        for item in spec.split(","):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(
                    f"--machine {spec!r}: expected a YAML/JSON file or key=value pairs "
                    "separated by commas, e.g. ram_gb=64,gpu_memory_gb=40"
                )
            values[key.strip()] = value.strip()
    known = {f.name: f.type for f in fields(Machine)}
    out = {}
    for key, value in values.items():
        if key not in known:
            raise ValueError(f"--machine: unknown key {key!r}; known: {sorted(known)}")
        if key == "name":
            out[key] = str(value)
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"--machine: {key}={value!r} is not a number") from None
        least = 0.0 if key in _MAY_BE_ZERO else None
        if not math.isfinite(number) or (number < 0 if least is not None else number <= 0):
            need = ">= 0" if least is not None else "> 0"
            raise ValueError(f"--machine: {key}={value!r} must be a finite number {need}")
        out[key] = number
    if "name" not in out:
        out["name"] = "declared: " + ", ".join(f"{k}={v:g}" for k, v in out.items())
    return replace(Machine(), **out)


def _cpu_gflops() -> float:
    """float64 GEMM GFLOP/s of this host at lmsim's default threads (one 1024² product,
    best of three; ~0.1 s)."""
    import time

    import numpy as np

    from lmsim._threads import default_threads, threads

    a = np.random.default_rng(0).standard_normal((1024, 1024))
    best = float("inf")
    with threads(default_threads()):
        for _ in range(3):
            start = time.perf_counter()
            a @ a
            best = min(best, time.perf_counter() - start)
    return 2 * 1024**3 / best / 1e9


def detect_machine(cache: str | Path | None = None, measure_gemm: bool = False) -> Machine:
    """The machine this process runs on, as a :class:`Machine`: its GPU's memory (0 without
    CUDA), its physical RAM, and as disk the space free where the lmsim cache lives (what a
    run may still add; entries already there are not counted again by the runner).

    ``measure_gemm``: also measure the host's float64 GEMM rate (``cpu_gflops``, used for
    work planned on the CPU); the default machine's figures are kept otherwise.
    """
    import os
    import shutil

    from lmsim._cache import cache_root

    gpu = 0.0
    try:
        import torch

        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_properties(0).total_memory / GB
    except ImportError:
        pass
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GB
    folder = Path(cache) if cache else cache_root()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    disk = shutil.disk_usage(folder).free / GB
    values: dict[str, Any] = {"gpu_memory_gb": gpu, "ram_gb": ram, "disk_gb": disk}
    if measure_gemm:
        values["cpu_gflops"] = _cpu_gflops()
    where = f"{gpu:.0f} GB GPU" if gpu else "no GPU"
    values["name"] = f"this machine ({where}, {ram:.0f} GB RAM, {disk:.0f} GB free disk)"
    return replace(Machine(), **values)


# ------------------------------------------------------------------------------ shapes
@dataclass(frozen=True)
class Shape:
    """What the plan needs of a model: widths, depth, vocabulary and parameter count."""

    hidden: int
    layers: int
    vocab: int
    params: float  # all parameters (the published count)
    heads: int = 12
    intermediate: int | None = None  # 4 x hidden when None
    max_positions: int = 512

    @property
    def ffn(self) -> int:
        return self.intermediate or 4 * self.hidden

    @property
    def layer_params(self) -> float:
        """Parameters one token's forward multiplies by, per layer (attention + FFN)."""
        return 4 * self.hidden**2 + 2 * self.hidden * self.ffn

    @property
    def forward_params(self) -> float:
        """``N`` of the ``2 N`` FLOPs per token (Kaplan et al. 2020): every layer's weights
        (ALBERT shares one layer's weights but runs it ``layers`` times)."""
        return self.layers * self.layer_params

    @property
    def state_width(self) -> int:
        """Features of all hidden states (embedding output + every layer)."""
        return (self.layers + 1) * self.hidden


def _s(hidden, layers, vocab, params_m, heads=12, intermediate=None, max_positions=512):
    return Shape(hidden, layers, vocab, params_m * 1e6, heads, intermediate, max_positions)


# The paper checkpoints (their config.json on the hub; parameter counts as the model cards
# or `sum(p.numel())` give them). Hub configurations cannot be downloaded here.
SHAPES: dict[str, Shape] = {
    "bert-base-uncased": _s(768, 12, 30522, 109.5),
    "bert-base-cased": _s(768, 12, 28996, 108.3),
    "bert-large-cased": _s(1024, 24, 28996, 333.6, 16),
    "bert-base-multilingual-cased": _s(768, 12, 119547, 177.9),
    "distilbert-base-uncased": _s(768, 6, 30522, 66.4),
    "distilbert-base-cased": _s(768, 6, 28996, 65.2),
    "distilbert-base-multilingual-cased": _s(768, 6, 119547, 134.7),
    "roberta-base": _s(768, 12, 50265, 124.6, max_positions=514),
    "distilroberta-base": _s(768, 6, 50265, 82.1, max_positions=514),
    "xlm-roberta-base": _s(768, 12, 250002, 278.0, max_positions=514),
    "gpt2": _s(768, 12, 50257, 124.4, max_positions=1024),
    "distilgpt2": _s(768, 6, 50257, 81.9, max_positions=1024),
    "gpt2-medium": _s(1024, 24, 50257, 354.8, 16, max_positions=1024),
    "openai-community/openai-gpt": _s(768, 12, 40478, 116.5),
    "xlnet-base-cased": _s(768, 12, 32000, 116.7, max_positions=4096),
    "xlnet/xlnet-large-cased": _s(1024, 24, 32000, 360.3, 16, max_positions=4096),
    "allenai/longformer-base-4096": _s(768, 12, 50265, 148.7, max_positions=4098),
    "microsoft/deberta-base": _s(768, 12, 50265, 138.6),
    "google/electra-base-discriminator": _s(768, 12, 30522, 108.9),
    "albert-base-v2": _s(768, 12, 30000, 11.7),
}
# lmsim's offline models (their wheels' config.json; read here without converting them).
OFFLINE_SHAPES = {
    "minilm-l6": _s(384, 6, 30522, 22.7, intermediate=1536),
    "all-mpnet-base-v2": _s(768, 12, 30527, 109.5, max_positions=514),
    "smollm2-135m": _s(576, 30, 49152, 134.5, 9, 1536, 8192),
    "gemma-3-270m": _s(640, 18, 262144, 268.1, 4, 2048, 32768),
    # lmsim.models._tiny defaults: width 32, 2 layers, ~1,000-piece vocabularies
    **{
        f"tiny-{k}": _s(32, 2, 1000, 0.1, 2, None, 128)
        for k in ("bert", "distilbert", "gpt2", "llama")
    },
}
SHAPES.update(OFFLINE_SHAPES)
# Aliases: legacy bare ids and org-qualified ids of the same checkpoints.
for _alias, _name in {
    "openai-community/gpt2": "gpt2",
    "openai-community/gpt2-medium": "gpt2-medium",
    "distilbert/distilgpt2": "distilgpt2",
    "openai-gpt": "openai-community/openai-gpt",
    "xlnet-large-cased": "xlnet/xlnet-large-cased",
    "FacebookAI/roberta-base": "roberta-base",
    "FacebookAI/xlm-roberta-base": "xlm-roberta-base",
    "google-bert/bert-base-uncased": "bert-base-uncased",
    "google-bert/bert-base-cased": "bert-base-cased",
}.items():
    SHAPES[_alias] = SHAPES[_name]
# Fine-tuned copies keep their base's shape.
for _task in ("MNLI", "QNLI", "QQP", "SST-2"):
    SHAPES[f"textattack/bert-base-uncased-{_task}"] = SHAPES["bert-base-uncased"]


def _config_shape(path: Path) -> Shape:
    config = json.loads((path / "config.json").read_text())

    def pick(*keys, default=None):
        for key in keys:
            if config.get(key) is not None:
                return config[key]
        return default

    hidden = int(pick("hidden_size", "n_embd", "d_model", "dim"))
    layers = int(pick("num_hidden_layers", "n_layer", "num_layers", "n_layers"))
    vocab = int(pick("vocab_size", default=0))
    ffn = pick("intermediate_size", "n_inner", "hidden_dim", "d_inner")
    shape = Shape(hidden, layers, vocab, 0.0, int(pick("num_attention_heads", "n_head", default=1)))
    shape = replace(shape, intermediate=int(ffn) if ffn else None)
    return replace(shape, params=shape.forward_params + vocab * hidden)


def model_shape(name: str) -> Shape:
    """The :class:`Shape` of a model name: the paper table, a local folder, or the zoo.

    Raises
    ------
    KeyError
        A name in none of them: its message says how to plan it.
    """
    if name in SHAPES:
        return SHAPES[name]
    path = Path(name)
    if (path / "config.json").is_file():
        return _config_shape(path)
    if name.startswith("zoo/"):
        raise KeyError(f"zoo model {name!r}: plan it with zoo_shape(profile)")
    raise KeyError(
        f"no shape for model {name!r}: add its hidden size, layers, vocabulary and parameter "
        "count to lmsim.reproduce._resources.SHAPES, or pass a local folder with config.json"
    )


def zoo_shape(profile: str, deep: bool = False) -> Shape:
    """Shape of a zoo model of ``profile`` (lmsim.zoo.PROFILES; widths only, no build)."""
    from lmsim.zoo import PROFILES

    prof = PROFILES[profile]
    layers = prof.deep_layers if deep else prof.layers
    shape = Shape(prof.hidden, layers, prof.vocab_size, 0.0, prof.heads, None, prof.seq_len)
    return replace(shape, params=shape.forward_params + prof.vocab_size * prof.hidden)


# ------------------------------------------------------------------------------ blocks
def moments_bytes(width: float) -> float:
    """A float64 :class:`~lmsim.moments.Moments` of ``width`` joint features: the
    ``width²`` co-moment plus the mean."""
    return 8.0 * width * (width + 1)


def model_bytes(shape: Shape, dtype: str = "float32") -> float:
    return shape.params * (2 if dtype in ("bfloat16", "float16") else 4)


def forward_bytes(shape: Shape, batch: int, T: int, all_states: bool = True) -> float:
    """Activations in flight during one forward pass under ``inference_mode``, float32:
    the hidden states kept (all ``layers + 1`` or one), plus one layer's working set
    (attention scores ``heads T²`` and the FFN's ``ffn`` activations, per sequence)."""
    states = (shape.layers + 1 if all_states else 2) * shape.hidden
    work = shape.heads * T + shape.ffn + 4 * shape.hidden
    return 4.0 * batch * T * (states + work)


def training_bytes(shape: Shape, batch: int, T: int, mixed: bool) -> float:
    """AdamW training: weights, gradients and two moments in float32 (16 bytes a
    parameter), plus stored activations (Korthikanti et al. 2022, Eq. 1: ``T b d (34 +
    5 a T / d)`` bytes per layer in 16-bit; doubled in float32)."""
    per_layer = T * batch * shape.hidden * (34 + 5 * shape.heads * T / shape.hidden)
    return 16.0 * shape.params + per_layer * shape.layers * (1 if mixed else 2)


def forward_flops(shape: Shape, tokens: float, T: int) -> float:
    """``2 N`` per token plus attention's ``4 layers T d`` (scores and values)."""
    return tokens * (2.0 * shape.forward_params + 4.0 * shape.layers * T * shape.hidden)


def train_flops(shape: Shape, tokens: float, T: int) -> float:
    """Forward and backward: three forwards' FLOPs."""
    return 3.0 * forward_flops(shape, tokens, T)


# ------------------------------------------------------------------------------ plans
@dataclass
class Estimate:
    """One page's plan: peaks of host RAM and GPU memory, disk left behind, time.

    ``knobs`` names, for each resource, the parameter that lowers it most; ``notes`` say
    what dominates each figure, so a reader can check it against the page.
    """

    page: str
    ram: float = 0.0
    gpu: float = 0.0
    disk_cache: float = 0.0
    disk_output: float = 0.0
    seconds: float = 0.0
    knobs: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    downloads: dict[str, float] = field(default_factory=dict)
    scratch: tuple[str, ...] = ()
    released: float = 0.0

    def scratch_entries(self, patterns: Sequence[str], size: float) -> None:
        """Cache entries only this page reads (globs below the lmsim cache, e.g.
        ``"finetune/regmean-*"``), ``size`` bytes of its disk: when the whole run would
        not fit the disk otherwise, the runner releases the ones the page created once it
        has finished and a later page follows (``lmsim.reproduce._budget``)."""
        self.scratch = tuple(patterns)
        self.released = min(size, self.disk_cache + self.disk_output)

    def peak(self, resource: str, value: float, why: str) -> None:
        """Raise ``resource`` (ram / gpu) to ``value`` if larger; keep why when it is."""
        if value > getattr(self, resource):
            setattr(self, resource, value)
            self.notes = [n for n in self.notes if not n.startswith(f"{resource}: ")]
            self.notes.append(f"{resource}: {why}")

    def download(self, name: str, size: float) -> None:
        """A hub checkpoint or dataset the page fetches (the hub cache, shared by pages)."""
        self.downloads[name] = max(size, self.downloads.get(name, 0.0))

    @property
    def disk(self) -> float:
        """Cache, outputs and this page's downloads."""
        return self.disk_cache + self.disk_output + sum(self.downloads.values())


def disk_timeline(estimates: Sequence[Estimate], release: bool = False) -> list[float]:
    """Disk in use while each page runs, pages in the order given: the hub downloads of
    this page and every earlier one (each once), what earlier pages left behind and this
    page's cache and outputs. With ``release``, an earlier page's scratch entries
    (:meth:`Estimate.scratch_entries`) are gone: the runner released them after it."""
    downloads: dict[str, float] = {}
    kept, out = 0.0, []
    for est in estimates:
        for name, size in est.downloads.items():
            downloads[name] = max(size, downloads.get(name, 0.0))
        out.append(sum(downloads.values()) + kept + est.disk_cache + est.disk_output)
        kept += est.disk_cache + est.disk_output - (est.released if release else 0.0)
    return out


def total_disk(estimates: Sequence[Estimate], release: bool = False) -> float:
    """Peak disk of all pages run in order: with nothing released, caches and outputs add
    up and downloads count once; with ``release``, see :func:`disk_timeline`."""
    return max(disk_timeline(estimates, release), default=0.0)


def needs_release(estimates: Sequence[Estimate], machine: Machine) -> bool:
    """Whether the run must release scratch entries to fit ``machine``'s disk: what every
    page keeps does not fit, and some page before the last has scratch to release."""
    can = any(est.released > 0 for est in estimates[:-1])
    return can and total_disk(estimates) > machine.disk_gb * GB


def declared_values(source: str | Path) -> dict[str, Any]:
    """The values a notebook's ``parameters`` cell assigns (literals only, as papermill
    requires), read with :mod:`ast` without running the cell."""
    import ast

    cells = json.loads(Path(source).read_text())["cells"]
    values: dict[str, Any] = {}
    for cell in cells:
        if "parameters" not in cell.get("metadata", {}).get("tags", []):
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for node in ast.parse(text).body:
            target = node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
                try:
                    values[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return values


def page_parameters(run) -> dict[str, Any]:
    """A planned run's full parameters: the notebook's declared defaults, then the run's."""
    return {**declared_values(run.source), **run.parameters}


def _release(estimates: Sequence[Estimate], machine: Machine, release: bool | None) -> bool:
    return needs_release(estimates, machine) if release is None else release


def _change(knob: str | None) -> str:
    """The hint of a line that does not fit: the parameter to change, or where to find one."""
    if knob:
        return f"change `{knob}`"
    return "lower the page's size parameters (python -m lmsim.reproduce --list shows them)"


def page_problems(est: Estimate, machine: Machine, in_use: float | None = None) -> list[str]:
    """What does not fit of one page: a line per resource, naming the parameter to change.

    ``in_use``: disk in use while the page runs (:func:`disk_timeline`), checked in place
    of the page's own disk when given.
    """
    limits = {
        "ram": machine.ram_gb * GB,
        "gpu": machine.gpu_memory_gb * GB,
        "disk": machine.disk_gb * GB,
    }
    lines = []
    for resource, limit in limits.items():
        if resource == "gpu" and machine.gpu_memory_gb <= 0:
            continue
        value = getattr(est, resource)
        hint = _change(est.knobs.get(resource))
        if value > limit:
            lines.append(
                f"{est.page}: {resource} {value / GB:,.1f} GB > {limit / GB:,.1f} GB on "
                f"{machine.name}; {hint}"
            )
        elif resource == "disk" and in_use is not None and in_use > limit:
            lines.append(
                f"{est.page}: disk {in_use / GB:,.1f} GB in use while it runs (with what the "
                f"pages before it keep and the downloads) > {limit / GB:,.1f} GB on "
                f"{machine.name}; {hint}, or run it alone (--only)"
            )
    return lines


def problems(
    estimates: Sequence[Estimate], machine: Machine, release: bool | None = None
) -> list[str]:
    """What does not fit: one line per page and resource, naming the parameter to change.

    Disk is also checked over all pages run in order (caches stay between pages; with
    ``release``, or when ``None`` and :func:`needs_release`, each page's scratch entries
    are released after it: :func:`disk_timeline`).
    """
    release = _release(estimates, machine, release)
    lines = []
    for est in estimates:
        lines += page_problems(est, machine)
    peak = total_disk(estimates, release)
    if len(estimates) > 1 and peak > machine.disk_gb * GB:
        timeline = disk_timeline(estimates, release)
        worst = estimates[timeline.index(peak)]
        lines.append(
            f"all pages: disk {peak / GB:,.0f} GB > {machine.disk_gb:,.0f} GB while "
            f"{worst.page} runs (caches stay{'; scratch released' if release else ''}); "
            f"{_change(worst.knobs.get('disk'))}"
        )
    return lines


def _size(value: float) -> str:
    gb = value / GB
    if gb == 0:
        return "0"
    return f"{gb:,.1f}" if gb < 10 else f"{gb:,.0f}"


def _time(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:,.1f} h"


def plan_table(
    estimates: Sequence[Estimate], machine: Machine, notes: bool = True, release: bool | None = None
) -> str:
    """The plan as a Markdown table (GB; time), with a total row and each page's notes.

    The disk column is the page's own (cache + outputs + downloads); ``in use`` is the disk
    in use while it runs when the pages run in order (:func:`disk_timeline`, scratch
    released as ``release`` or :func:`needs_release` says).
    """
    release = _release(estimates, machine, release)
    timeline = disk_timeline(estimates, release)
    limits = (machine.ram_gb, machine.gpu_memory_gb, machine.disk_gb)
    lines = [
        f"Resource plan on {machine.name}",
        "",
        "| page | RAM (GB) | GPU (GB) | disk: cache + outputs + downloads (GB) | disk in use "
        "(GB) | time | fits |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    not_fitting: dict[str, None] = {}  # resources some page exceeds, in order
    n_over = 0
    for index, (est, in_use) in enumerate(zip(estimates, timeline)):
        over = [
            name
            for name, value, limit in zip(
                ("RAM", "GPU", "disk"), (est.ram, est.gpu, max(est.disk, in_use)), limits
            )
            if value > limit * GB and not (name == "GPU" and limit <= 0)
        ]
        not_fitting.update(dict.fromkeys(over))
        n_over += bool(over)
        last = index == len(estimates) - 1
        freed = (
            f" (then {_size(est.released)} released)"
            if release and est.released and not last
            else ""
        )
        lines.append(
            f"| {est.page} | {_size(est.ram)} | {_size(est.gpu)} | "
            f"{_size(est.disk_cache)} + {_size(est.disk_output)} + "
            f"{_size(sum(est.downloads.values()))} | {_size(in_use)}{freed} | "
            f"{_time(est.seconds)} | {'yes' if not over else 'NO: ' + ', '.join(over)} |"
        )
    peak, kept = max(timeline, default=0.0), total_disk(estimates)
    how = (
        f"peak, scratch released; {_size(kept)} if all kept"
        if release and kept != peak
        else "peak, all kept"
    )
    if peak > machine.disk_gb * GB:
        not_fitting["disk"] = None
    # The total fits only when every page does and the disk in use never exceeds the disk.
    verdict = "yes"
    if not_fitting:
        pages = f"{n_over} of {len(estimates)} pages; " if n_over else ""
        verdict = f"NO: {pages}{', '.join(not_fitting)}"
    lines.append(
        f"| total | max {_size(max((e.ram for e in estimates), default=0))} | max "
        f"{_size(max((e.gpu for e in estimates), default=0))} | {_size(kept)} (downloads "
        f"once) | {_size(peak)} ({how}) | {_time(sum(e.seconds for e in estimates))} | "
        f"{verdict} |"
    )
    if notes:
        lines.append("")
        for est in estimates:
            lines.append(f"{est.page}:")
            lines.extend(f"  - {note}" for note in est.notes)
            if est.scratch:
                fate = "kept (nothing released)"
                if release:
                    fate = "kept (the last page)" if est is estimates[-1] else "released after it"
                lines.append(
                    f"  - disk: scratch {', '.join(est.scratch)} ({_size(est.released)} GB), {fate}"
                )
    return "\n".join(lines)


def ceil_div(a: float, b: float) -> int:
    return int(math.ceil(a / b)) if b > 0 else 0
