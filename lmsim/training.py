"""The one training loop of lmsim: every model lmsim trains goes through :func:`train`.

The zoo's language models and classifiers use it today; the two-tower models and the
fine-tuned models of the merging chapter are meant to use it too. A caller describes *what*
to train as a :class:`TrainingRun` (its modules, a ``loss_fn(step)`` and an optional
``eval_fn()``) and *how* as :class:`TrainSettings`; :func:`train` owns the rest:

- AdamW with decoupled weight decay on matrices only, linear warm-up then linear decay,
  gradient clipping;
- seeded, stateless batching (:func:`batch_indices`, :func:`step_generator`), so a run is a
  function of its seed and step, and a resumed run sees the same batches and masks;
- checkpoints every ``checkpoint_every`` steps with the optimizer, scheduler and RNG state,
  written atomically and read with ``torch.load(weights_only=True)`` (tensors and plain
  containers only: a crafted pickle in the cache cannot run code); an unreadable checkpoint
  is named in a warning, moved aside, and the run starts over;
- a progress bar with loss, tokens/s and validation metrics; the per-step training log;
- bf16 autocast, fused AdamW and ``torch.compile`` switches that apply on CUDA only (the
  same code runs on CPU), and model FLOP utilisation on known GPUs.

Nothing here imports from the rest of lmsim except the low helper modules.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from lmsim._io import write_atomic
from lmsim._runtime import cpu_model
from lmsim._threads import thread_policy

__all__ = [
    "PEAK_FLOPS",
    "TrainSettings",
    "TrainingRun",
    "train",
    "batch_indices",
    "step_generator",
    "flops_per_token",
    "mfu",
    "n_params",
    "maybe_compile",
    "CHECKPOINT",
    "trained_on",
    "weight_hashes",
]

CHECKPOINT = "checkpoint.pt"
# Dense bf16 tensor-core peaks (FLOP/s) for the MFU estimate; unknown devices get no MFU.
PEAK_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12}


@dataclass(frozen=True)
class TrainSettings:
    """How to optimise: the knobs :func:`train` reads.

    Attributes
    ----------
    lr : float
        Peak learning rate.
    weight_decay : float
        AdamW's decoupled decay, applied to parameters with ``ndim >= 2`` only.
    warmup_frac : float
        Fraction of the steps spent warming up linearly; then linear decay to 0.
    betas, eps : tuple of float, float
        AdamW's (0.9, 0.98) and 1e-6 (RoBERTa's settings).
    clip_norm : float
        Global gradient-norm clipping.
    eval_every, checkpoint_every : int
        Steps between ``eval_fn`` calls (also run at the last step) and between checkpoints.
    bf16, fused_adamw, compile : bool
        CUDA-only speed-ups (bf16 autocast, fused AdamW, ``torch.compile`` via
        :func:`maybe_compile`); ignored on CPU, where the same code runs in float32.
    """

    lr: float
    weight_decay: float = 0.01
    warmup_frac: float = 0.06
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-6
    clip_norm: float = 1.0
    eval_every: int = 250
    checkpoint_every: int = 250
    bf16: bool = False
    fused_adamw: bool = False
    compile: bool = False

    def __post_init__(self):
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"`lr` must be a positive finite float, got {self.lr!r}")
        if not 0 <= self.warmup_frac < 1:
            raise ValueError(f"`warmup_frac` must lie in [0, 1), got {self.warmup_frac!r}")
        if self.eval_every < 1 or self.checkpoint_every < 1:
            raise ValueError("`eval_every` and `checkpoint_every` must be >= 1")


@dataclass
class TrainingRun:
    """What to train.

    Attributes
    ----------
    modules : dict of str to nn.Module
        Everything with trainable parameters (shared parameters are optimised once) and
        whose state a checkpoint keeps, by a stable key.
    loss_fn : callable
        ``loss_fn(step) -> (loss, n_tokens, extras)``: the scalar loss of batch ``step``, the
        number of tokens it holds (for tokens/s) and a dict of floats for the log.
    eval_fn : callable or None
        ``eval_fn() -> dict`` of validation metrics, called in eval mode without grad
        bookkeeping by the caller's choice.
    total_steps : int
    flops_per_token : float
        Training FLOPs per token (for MFU); 0 when unknown.
    """

    modules: dict[str, nn.Module]
    loss_fn: Callable[[int], tuple[torch.Tensor, int, dict]]
    eval_fn: Callable[[], dict] | None
    total_steps: int
    flops_per_token: float = 0.0


# --------------------------------------------------------------------------------------
# Seeded, stateless batching
# --------------------------------------------------------------------------------------


def batch_indices(n_items: int, batch_size: int, step: int, seed: int) -> np.ndarray:
    """Indices of the examples in batch ``step``: a seeded permutation per epoch.

    Stateless (a pure function of ``step``), so a resumed run sees the same batches.

    Parameters
    ----------
    n_items, batch_size, step, seed : int

    Returns
    -------
    ndarray of shape (batch_size,)
    """
    positions = step * batch_size + np.arange(batch_size)
    epochs, within = np.divmod(positions, n_items)
    out = np.empty(batch_size, dtype=np.int64)
    for epoch in np.unique(epochs):
        perm = np.random.default_rng([seed, int(epoch)]).permutation(n_items)
        sel = epochs == epoch
        out[sel] = perm[within[sel]]
    return out


def step_generator(seed: int, step: int, stream: int = 0) -> torch.Generator:
    """A CPU generator that depends only on (seed, step, stream): resumable masking."""
    return torch.Generator().manual_seed(
        int(np.random.default_rng([seed, step, stream]).integers(2**62))
    )


# --------------------------------------------------------------------------------------
# What a trained model's weights depend on beyond its seed
# --------------------------------------------------------------------------------------


def trained_on(device: torch.device | str = "cpu") -> dict:
    """The machine a model is trained on, for its build record: the processor's model
    name, the CPU capability torch dispatches to, torch's intra-op threads and version.

    Trained weights are bit-identical on one machine; another processor can give other
    weights (MKL chooses its GEMM kernels by processor, oneDNN its GELU by instruction
    set: docs/reproducibility.md), so each build records where it ran beside its weights'
    hashes (:func:`weight_hashes`)."""
    device = torch.device(device)
    facts = {
        "cpu_model": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    if device.type == "cuda":
        facts["gpu"] = torch.cuda.get_device_name(device)
    return facts


def weight_hashes(folder: Path, patterns: Sequence[str] = ("*.safetensors", "*.pt")) -> dict:
    """``{file: sha256}`` of the weight files under ``folder`` (relative paths, sorted):
    the fingerprint of a trained model, compared across machines."""
    folder = Path(folder)
    found = sorted({p for pattern in patterns for p in folder.rglob(pattern) if p.is_file()})
    out = {}
    for path in found:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        out[path.relative_to(folder).as_posix()] = digest.hexdigest()
    return out


# --------------------------------------------------------------------------------------
# Cost accounting
# --------------------------------------------------------------------------------------


def n_params(modules: Sequence[nn.Module]) -> int:
    """Parameters of ``modules``, shared ones counted once."""
    seen = {id(p): p.numel() for m in modules for p in m.parameters()}
    return int(sum(seen.values()))


def flops_per_token(n_layers: int, hidden: int, seq_len: int) -> float:
    """Training FLOPs per token of a transformer, ``6 N + 12 L T d``, N = 12 L d².

    The vocabulary projection is left out (it runs on a fraction of the positions for the
    masked objectives), so MFU is a lower bound. Chowdhery et al. (2022), App. B.
    """
    n_non_embedding = 12 * n_layers * hidden**2
    return 6.0 * n_non_embedding + 12.0 * n_layers * seq_len * hidden


def mfu(tokens_per_s: float, flops_per_token: float, device: torch.device) -> float | None:
    """Model FLOP utilisation against :data:`PEAK_FLOPS`; None off CUDA or on unknown GPUs."""
    if device.type != "cuda":
        return None
    gpu = torch.cuda.get_device_name(device)
    peak = next((v for k, v in PEAK_FLOPS.items() if k in gpu), None)
    return None if peak is None else tokens_per_s * flops_per_token / peak


def maybe_compile(module: nn.Module, settings: TrainSettings, device: torch.device) -> None:
    """``module.compile()`` in place when ``settings.compile`` and ``device`` is CUDA."""
    if settings.compile and device.type == "cuda":
        module.compile()


# --------------------------------------------------------------------------------------
# Optimiser, schedule, checkpoints
# --------------------------------------------------------------------------------------


def _optimizer(modules: Sequence[nn.Module], settings: TrainSettings, device: torch.device):
    params = {id(p): p for m in modules for p in m.parameters() if p.requires_grad}
    decay = [p for p in params.values() if p.ndim >= 2]
    no_decay = [p for p in params.values() if p.ndim < 2]
    groups = [
        {"params": decay, "weight_decay": settings.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    fused = settings.fused_adamw and device.type == "cuda"
    return torch.optim.AdamW(
        groups, lr=settings.lr, betas=settings.betas, eps=settings.eps, fused=fused or None
    )


def _schedule(optimizer, total_steps: int, warmup_frac: float):
    warmup = max(1, int(round(warmup_frac * total_steps)))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _rng_state(device: torch.device) -> dict:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def _read_checkpoint(path: Path, device: torch.device) -> dict | None:
    """The checkpoint at ``path``, or None (after a warning, the file moved aside) when it
    cannot be read safely: truncated, corrupt, or holding anything but tensors and plain
    containers (``weights_only=True`` refuses pickled code)."""
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
        if not isinstance(ckpt, dict) or not {"modules", "optimizer", "step"} <= set(ckpt):
            raise ValueError("not a lmsim training checkpoint")
        return ckpt
    except Exception as err:  # noqa: BLE001 - any unreadable file is treated the same way
        aside = path.with_name(path.name + f".unreadable{os.getpid()}")
        os.replace(path, aside)
        warnings.warn(
            f"cannot resume from {path} ({type(err).__name__}: {str(err)[:200]}); moved it to "
            f"{aside.name} and training starts over",
            stacklevel=4,  # _read_checkpoint, train, its @thread_policy wrapper, the caller
        )
        return None


def _save_checkpoint(path: Path, run: TrainingRun, optimizer, scheduler, state, device) -> None:
    payload = {
        "modules": {k: m.state_dict() for k, m in run.modules.items()},
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": _rng_state(device),
        **state,
    }
    write_atomic(path, lambda tmp: torch.save(payload, tmp))


# --------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------


@thread_policy
def train(
    run: TrainingRun,
    settings: TrainSettings,
    work: Path,
    device: torch.device,
    desc: str = "train",
    progress: bool = True,
    stop_after: int | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> dict:
    """Run (or resume) ``run`` to ``run.total_steps``, checkpointing under ``work``.

    Parameters
    ----------
    run : TrainingRun
    settings : TrainSettings
    work : Path
        Folder of the checkpoint (``checkpoint.pt``); a checkpoint found there is resumed,
        which gives the same weights as an uninterrupted run.
    device : torch.device
    desc : str
        Label of the progress bar and of error messages.
    progress : bool
        A tqdm bar (to the terminal) with loss, tokens/s and the last validation result.
    stop_after : int, optional
        Testing hook: return right after the first checkpoint at or beyond this step, as if
        interrupted.
    on_step : callable, optional
        ``on_step(step, total_steps)`` after every step (a parallel build's report).

    Returns
    -------
    dict
        ``log`` (one dict per step: ``step``, ``loss``, ``lr``, the extras and any
        validation metrics), ``train_seconds``, ``tokens``, ``step`` and ``finished``.

    Raises
    ------
    FloatingPointError
        A non-finite loss (the message names the step and suggests a lower ``lr``).
    """
    modules = list(run.modules.values())
    optimizer = _optimizer(modules, settings, device)
    scheduler = _schedule(optimizer, run.total_steps, settings.warmup_frac)
    work = Path(work)
    ckpt_path = work / CHECKPOINT
    state = {"step": 0, "log": [], "train_seconds": 0.0, "tokens": 0}
    ckpt = _read_checkpoint(ckpt_path, device) if ckpt_path.exists() else None
    if ckpt is not None:
        for key, module in run.modules.items():
            module.load_state_dict(ckpt["modules"][key])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        _set_rng_state(ckpt["rng"], device)
        state = {k: ckpt[k] for k in state}
    for module in modules:
        module.train()
    use_bf16 = settings.bf16 and device.type == "cuda"
    params = [p for g in optimizer.param_groups for p in g["params"]]
    bar = tqdm(
        total=run.total_steps, initial=state["step"], desc=desc, disable=not progress, leave=False
    )
    window_tokens, window_start, last_val = 0, time.perf_counter(), ""
    while state["step"] < run.total_steps:
        step = state["step"]
        started = time.perf_counter()
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16):
            loss, n_tokens, extras = run.loss_fn(step)
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"{desc}: loss is {loss.item()} at step {step}; lower the learning rate `lr`"
            )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, settings.clip_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        state["train_seconds"] += time.perf_counter() - started
        state["tokens"] += n_tokens
        state["step"] = step + 1
        row = {"step": step + 1, "loss": loss.item(), "lr": scheduler.get_last_lr()[0]}
        row.update({k: float(v) for k, v in extras.items()})
        window_tokens += n_tokens
        if run.eval_fn is not None and (
            state["step"] % settings.eval_every == 0 or state["step"] == run.total_steps
        ):
            for module in modules:
                module.eval()
            row.update(run.eval_fn())
            for module in modules:
                module.train()
        state["log"].append(row)
        elapsed = time.perf_counter() - window_start
        bar.update(1)
        postfix = {
            "loss": f"{row['loss']:.3f}",
            "tok_s": f"{window_tokens / max(elapsed, 1e-9):.0f}",
        }
        if "val_ppl" in row:
            last_val = f"{row['val_ppl']:.0f} (unigram {row.get('unigram_ppl', math.nan):.0f})"
        if last_val:
            postfix["val_ppl"] = last_val
        bar.set_postfix(postfix)
        if on_step is not None:
            on_step(state["step"], run.total_steps)
        if state["step"] % settings.checkpoint_every == 0 and state["step"] < run.total_steps:
            _save_checkpoint(ckpt_path, run, optimizer, scheduler, state, device)
            if stop_after is not None and state["step"] >= stop_after:
                bar.close()
                return {**state, "finished": False}
    bar.close()
    for module in modules:
        module.eval()
    return {**state, "finished": True}
