"""Runtime settings every layer of lmsim shares: devices, dtypes, transformers' logging,
and reading a model's configuration.

The lowest module of the package (it imports nothing from lmsim), so that ``models``,
``extract``, ``training`` and ``zoo`` resolve devices and dtypes, quiet transformers and read
configs the same way without importing each other.
"""

from __future__ import annotations

import functools
import platform
from contextlib import contextmanager

import torch

__all__ = [
    "DTYPES",
    "resolve_device",
    "resolve_dtype",
    "autocast_dtype",
    "quiet_transformers",
    "text_config",
    "config_value",
    "architecture",
    "cpu_model",
]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Turn ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"`` or a device into a device.

    Parameters
    ----------
    device : str or torch.device
        ``"auto"`` picks CUDA when available, else CPU.

    Returns
    -------
    torch.device
    """
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        if device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            dev = torch.device(device)
        except RuntimeError as err:
            raise ValueError(
                f"`device` must be 'auto', 'cpu', 'cuda', 'cuda:<index>' or 'mps', got {device!r}"
            ) from err
    else:
        raise TypeError(f"`device` must be a str or torch.device, got {type(device).__name__}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            from lmsim._dryrun import dry_run

            if dry_run():  # the dry run checks a GPU profile's code paths on any machine
                return torch.device("cpu")
            raise ValueError(
                f"`device`={str(dev)!r} but CUDA is not available; use 'auto' or 'cpu'"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"`device`={str(dev)!r} but only {torch.cuda.device_count()} CUDA device(s) exist"
            )
    elif dev.type == "mps" and not (
        getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()
    ):
        raise ValueError("`device`='mps' but MPS is not available; use 'auto' or 'cpu'")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"`device` type {dev.type!r} is not supported; use 'cpu', 'cuda' or 'mps'")
    return dev


DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "float64": torch.float64,
    "fp64": torch.float64,
    "double": torch.float64,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}


def resolve_dtype(
    dtype: str | torch.dtype | None = None, device: str | torch.device = "cpu"
) -> torch.dtype:
    """Turn a dtype name (or None) into a floating torch dtype.

    Parameters
    ----------
    dtype : str, torch.dtype or None
        ``None`` (or ``"auto"``) gives float32 on every device: statistics computed on a
        GPU match the CPU book's unless a 16-bit dtype is asked for by name. Names:
        ``"float32"``/``"fp32"``, ``"bfloat16"``/``"bf16"``, ``"float16"``/``"fp16"``,
        ``"float64"``.
    device : str or torch.device
        The device the model will run on (checked; the default no longer depends on it).

    Returns
    -------
    torch.dtype
    """
    if dtype is None or dtype == "auto":
        resolve_device(device)
        return torch.float32
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise ValueError(f"`dtype` must be a floating dtype, got {dtype}")
        return dtype
    if isinstance(dtype, str):
        key = dtype.lower().removeprefix("torch.")
        if key in DTYPES:
            return DTYPES[key]
    raise ValueError(
        f"`dtype` must be None, a torch float dtype or one of {sorted(DTYPES)}, got {dtype!r}"
    )


@contextmanager
def quiet_transformers(quiet: bool):
    """Silence transformers' load report (expected missing/unused heads of offline models)
    and its "Loading weights" bar (offline models load in milliseconds)."""
    from transformers.utils import logging as hf_logging

    if not quiet:
        yield
        return
    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def autocast_dtype(device: torch.device, dtype) -> torch.dtype | None:
    """Autocast dtype of a forward pass: None means plain float32.

    Parameters
    ----------
    device : torch.device
    dtype : str, torch.dtype or None
        None: float32 on every device (see :func:`resolve_dtype`); bfloat16 or float16
        autocast only when named. float64 is
        refused: forward passes run in float32 or a 16-bit autocast (statistics are
        accumulated in float64 regardless).
    """
    resolved = resolve_dtype(dtype, device)
    if resolved == torch.float32:
        return None
    if resolved not in (torch.bfloat16, torch.float16):
        raise ValueError(f"`dtype` must be float32, bfloat16 or float16, got {dtype!r}")
    return resolved


def text_config(model):
    """The (text) config of a Hugging Face model; multimodal configs give their text part."""
    config = getattr(model, "config", None)
    if config is None:
        raise TypeError(f"{type(model).__name__} has no `.config`: pass a Hugging Face model")
    if hasattr(config, "get_text_config"):
        return config.get_text_config()
    return getattr(config, "text_config", None) or config


def config_value(config, *keys):
    """The first of ``keys`` that ``config`` sets (not None), else None."""
    for key in keys:
        value = getattr(config, key, None)
        if value is not None:
            return value
    return None


def architecture(model) -> dict:
    """What a model's configuration says about its shape: the one config reader of lmsim.

    Returns
    -------
    dict
        ``architecture`` (class name), ``model_type``, ``n_layers``, ``hidden_size``,
        ``n_heads``, ``vocab_size``, ``max_positions`` (None where the config sets none).
    """
    config = text_config(model)
    return {
        "architecture": type(model).__name__,
        "model_type": getattr(config, "model_type", None),
        "n_layers": config_value(config, "num_hidden_layers", "n_layer", "num_layers"),
        "hidden_size": config_value(config, "hidden_size", "n_embd", "d_model", "dim"),
        "n_heads": config_value(config, "num_attention_heads", "n_head", "num_heads"),
        "vocab_size": config_value(config, "vocab_size"),
        "max_positions": config_value(
            config, "max_position_embeddings", "n_positions", "max_seq_len"
        ),
    }


@functools.cache
def cpu_model() -> str:
    """The processor: ``/proc/cpuinfo``'s model name with its vendor, family, model and
    stepping (a virtual machine often shows a generic name such as "AMD EPYC"; MKL chooses
    its kernels by the vendor: docs/reproducibility.md), else the platform's
    processor string, else ``"unknown"``. With torch's CPU capability, what a CPU build of a
    trained model depends on beyond its seed (MKL picks its GEMM kernels by processor)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break  # the first processor's block
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name")
    if not name:
        return platform.processor() or platform.machine() or "unknown"
    ids = [fields["vendor_id"]] if fields.get("vendor_id") else []
    ids += [f"{k} {fields[k]}" for k in ("cpu family", "model", "stepping") if fields.get(k)]
    return f"{name} ({', '.join(ids)})" if ids else name
