"""Loading models and tokenizers by name: offline, ``zoo/<name>``, a local folder, the hub."""

from __future__ import annotations

import os
import pickle
import socket
from urllib.parse import urlparse

import torch

from lmsim._dryrun import dry_run
from lmsim._names import did_you_mean
from lmsim._runtime import quiet_transformers, resolve_device, resolve_dtype
from lmsim.models._offline import model_dir
from lmsim.models._registry import (
    _HUB_ID,
    LEGACY_HUB_IDS,
    OFFLINE_MODELS,
    TASKS,
    HubUnreachableError,
    list_models,
)


def _auto_class(task: str):
    import transformers

    classes = {
        "base": transformers.AutoModel,
        "masked-lm": transformers.AutoModelForMaskedLM,
        "causal-lm": transformers.AutoModelForCausalLM,
        "sequence-classification": transformers.AutoModelForSequenceClassification,
        "token-classification": transformers.AutoModelForTokenClassification,
    }
    if task not in classes:
        raise ValueError(f"`task` must be one of {list(TASKS)}, got {task!r}")
    return classes[task]


def _prepare_tokenizer(tokenizer):
    """Right padding; a decoder tokenizer without a pad token gets pad = eos.

    Padding with eos is safe for extraction because pooling and alignment use the
    attention mask, never the pad id.
    """
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    return tokenizer


def _offline_alternatives() -> str:
    return f"offline models: {list_models()} and 'zoo/<name>' (python -m lmsim.zoo build)"


def _is_hub_id(name: str) -> bool:
    return name in LEGACY_HUB_IDS or bool(_HUB_ID.match(name))


def _standin(name: str):
    """The dry run's stand-in folder of a hub id (:mod:`lmsim.models._standins`), else None."""
    if not dry_run() or name in OFFLINE_MODELS or name.startswith("zoo/") or os.path.isdir(name):
        return None
    from lmsim.models._standins import standin_dir

    return standin_dir(name)


def _hub_endpoint() -> tuple[str, int]:
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (443 if url.scheme == "https" else 80)
    return url.hostname or "huggingface.co", port


def _hub_offline_flag() -> bool:
    """HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE, set now or when huggingface_hub was imported."""
    from huggingface_hub import constants

    truthy = {"1", "on", "yes", "true"}
    if getattr(constants, "HF_HUB_OFFLINE", False):
        return True
    return any(
        os.environ.get(var, "").strip().lower() in truthy
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Probe a TCP connection to the hub endpoint; never blocks longer than ``timeout``."""
    host, port = _hub_endpoint()
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _from_pretrained(cls, source, **kwargs):
    """``cls.from_pretrained`` preferring safetensors, falling back for .bin-only repos.

    Pickled weights are read by transformers with ``torch.load(weights_only=True)``; one
    that holds more than tensors (code that would run on loading) raises ``ValueError``
    naming the model, never the unpickler's traceback."""
    try:
        return cls.from_pretrained(source, use_safetensors=True, **kwargs)
    except OSError as err:
        if "safetensors" not in str(err).lower():
            raise
    try:
        return cls.from_pretrained(source, **kwargs)
    except pickle.UnpicklingError:
        raise ValueError(
            f"model {str(source)!r}: its pickled weights (pytorch_model.bin) hold more than "
            "tensors and were refused (torch.load(weights_only=True)), since loading them "
            "could run code; use a copy with model.safetensors, or convert a checkpoint you "
            "trust"
        ) from None


def _check_task_fits(source, task: str, label: str | None = None, **hub_kwargs) -> None:
    """Raise naming the model type and the tasks it has heads for when ``task`` is not one."""
    from transformers import AutoConfig

    with quiet_transformers(True):
        config = AutoConfig.from_pretrained(source, **hub_kwargs)
    fits = [t for t in TASKS if type(config) in _auto_class(t)._model_mapping]
    if task not in fits:
        raise ValueError(
            f"model {label or str(source)!r} is a {config.model_type!r} model, which has no {task!r} "
            f"head in transformers; its tasks are {fits}"
        )


def _check_local_config(folder: str) -> None:
    """A local model folder's ``config.json`` must be a JSON object naming ``model_type``."""
    import json

    path = os.path.join(folder, "config.json")
    if not os.path.isfile(path):
        raise ValueError(f"directory {folder!r} has no config.json; it is not a saved model")
    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    except (UnicodeDecodeError, ValueError) as err:
        raise OSError(f"{path!r} is not a valid JSON file ({err})") from None
    if not isinstance(config, dict) or not config.get("model_type"):
        raise ValueError(
            f"{path!r} names no `model_type`: it is not a Hugging Face model config (an "
            "empty or hand-written file?); save the model with save_pretrained"
        )


def _load_from(
    source, task: str, dtype: torch.dtype, quiet: bool = False, label=None, **hub_kwargs
):
    from transformers import AutoTokenizer

    _check_task_fits(source, task, label, **hub_kwargs)
    tokenizer = AutoTokenizer.from_pretrained(source, **hub_kwargs)
    # Heads absent from a checkpoint (e.g. a classifier) are initialised from a fixed seed,
    # so two loads of the same name give the same model.
    with torch.random.fork_rng(devices=[]), quiet_transformers(quiet):
        torch.manual_seed(0)
        model = _from_pretrained(_auto_class(task), source, dtype=dtype, **hub_kwargs)
    return model, tokenizer


def _load_hub(repo_id: str, task: str, dtype: torch.dtype, revision: str | None):
    kwargs = {"revision": revision, "trust_remote_code": False}
    try:
        return _load_from(repo_id, task, dtype, local_files_only=True, **kwargs)
    except OSError as cached_err:
        if _hub_offline_flag():
            raise HubUnreachableError(
                f"{repo_id!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE/"
                f"TRANSFORMERS_OFFLINE is set; unset it to download, "
                f"or use {_offline_alternatives()}"
            ) from cached_err
    if not _hub_reachable():
        host, port = _hub_endpoint()
        raise HubUnreachableError(
            f"{repo_id!r} is not in the local Hugging Face cache and the hub ({host}:{port}) "
            f"cannot be reached; connect, or use {_offline_alternatives()}"
        )
    return _load_from(repo_id, task, dtype, **kwargs)


def load_model(
    name: str,
    device: str | torch.device = "auto",
    dtype: str | torch.dtype | None = None,
    task: str = "base",
    revision: str | None = None,
    zoo_profile: str = "default",
):
    """Load a model and its tokenizer by name, in eval mode on ``device``.

    Parameters
    ----------
    name : str
        An offline name (:data:`OFFLINE_MODELS`), ``"zoo/<name>"``, a local directory holding
        ``config.json``, or a Hugging Face hub id ``"org/name"`` (a few bare legacy ids such
        as ``"bert-base-uncased"`` are mapped to their ``org/name``).
    device : str or torch.device
        See :func:`resolve_device`.
    dtype : str, torch.dtype or None
        See :func:`resolve_dtype` (None: float32 on every device).
    task : {"base", "masked-lm", "causal-lm", "sequence-classification", "token-classification"}
        Which Auto class: the bare encoder/decoder (``AutoModel``) or one with a head
        (``"token-classification"``: one logit vector per token, for NER).
    revision : str, optional
        Hub revision (branch, tag or commit); hub ids only.
    zoo_profile : str
        Which zoo build ``"zoo/<name>"`` names load (``lmsim.zoo.PROFILES``: ``"smoke"``,
        ``"default"``, ``"gpu"``); ignored for other names.

    Returns
    -------
    model : transformers.PreTrainedModel
    tokenizer : transformers.PreTrainedTokenizerBase
        Right padding; GPT-2/Llama-style tokenizers without a pad token use eos as pad.

    Raises
    ------
    HubUnreachableError
        A hub id that is not cached locally while the hub is offline or unreachable.
    ValueError
        An unknown name, task, device or dtype.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a non-empty str, got {name!r}")
    _auto_class(task)
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    if revision is not None and (name in OFFLINE_MODELS or name.startswith("zoo/")):
        raise ValueError(f"`revision` applies to hub ids only, not to {name!r}")
    standin = _standin(name) if _is_hub_id(name) else None
    if standin is not None:
        model, tokenizer = _load_from(standin, task, torch_dtype, quiet=True, label=name)
    elif name in OFFLINE_MODELS or name.startswith("zoo/"):
        folder = model_dir(name, zoo_profile)
        model, tokenizer = _load_from(folder, task, torch_dtype, quiet=True, label=name)
    elif os.path.isdir(name):
        _check_local_config(name)
        model, tokenizer = _load_from(name, task, torch_dtype)
    elif _is_hub_id(name):
        model, tokenizer = _load_hub(LEGACY_HUB_IDS.get(name, name), task, torch_dtype, revision)
    else:
        raise ValueError(
            f"unknown model {name!r}{did_you_mean(name, list_models())}: use one of the "
            f"offline models {list_models()}, 'zoo/<name>', a local directory with "
            "config.json, or a hub id 'org/name'"
        )
    model = model.to(dev).eval()
    tokenizer = _prepare_tokenizer(tokenizer)
    if getattr(model.config, "pad_token_id", None) is None and tokenizer.pad_token_id is not None:
        # Decoder classification heads pool the last non-pad token and need the pad id.
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def load_random_model(
    name: str,
    seed: int = 0,
    device: str | torch.device = "auto",
    dtype: str | torch.dtype | None = None,
    task: str = "base",
    zoo_profile: str = "default",
):
    """A randomly initialised copy of a model's architecture, with its tokenizer.

    The control of Wu et al. (2020, Fig. 2): the same configuration as ``name`` (layers,
    widths, heads, vocabulary, normalisation) built with ``from_config`` under
    ``torch.manual_seed(seed)``, so the weights are those of the architecture's own
    initialiser, never trained; the tokenizer is the trained model's, so words split into
    the same subwords.

    Parameters
    ----------
    name : str
        Any name :func:`load_model` accepts.
    seed : int
        Seed of the initialisation: the same seed gives the same weights.
    device, dtype, task, zoo_profile
        As in :func:`load_model`.

    Returns
    -------
    model : transformers.PreTrainedModel
        In eval mode on ``device``.
    tokenizer : transformers.PreTrainedTokenizerBase
    """
    from transformers import AutoConfig

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"`seed` must be an int, got {seed!r}")
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    tokenizer = load_tokenizer(name, zoo_profile=zoo_profile)
    standin = _standin(name) if _is_hub_id(name) else None
    if standin is not None:
        config = AutoConfig.from_pretrained(standin)
    elif name in OFFLINE_MODELS or name.startswith("zoo/"):
        config = AutoConfig.from_pretrained(model_dir(name, zoo_profile))
    elif os.path.isdir(name):
        config = AutoConfig.from_pretrained(name)
    else:
        config = AutoConfig.from_pretrained(LEGACY_HUB_IDS.get(name, name))
    with torch.random.fork_rng(devices=[]), quiet_transformers(True):
        torch.manual_seed(seed)
        model = _auto_class(task).from_config(config, dtype=torch_dtype)
    model = model.to(dev).eval()
    if getattr(model.config, "pad_token_id", None) is None and tokenizer.pad_token_id is not None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def load_tokenizer(name: str, revision: str | None = None, zoo_profile: str = "default"):
    """Load only the tokenizer of a model name (see :func:`load_model` for the names)."""
    from transformers import AutoTokenizer

    standin = _standin(name) if _is_hub_id(name) else None
    if standin is not None:
        return _prepare_tokenizer(AutoTokenizer.from_pretrained(standin))
    if name in OFFLINE_MODELS or name.startswith("zoo/"):
        return _prepare_tokenizer(AutoTokenizer.from_pretrained(model_dir(name, zoo_profile)))
    if os.path.isdir(name):
        return _prepare_tokenizer(AutoTokenizer.from_pretrained(name))
    if _is_hub_id(name):
        repo_id = LEGACY_HUB_IDS.get(name, name)
        kwargs = {"revision": revision, "trust_remote_code": False}
        try:
            tok = AutoTokenizer.from_pretrained(repo_id, local_files_only=True, **kwargs)
        except OSError as err:
            if _hub_offline_flag() or not _hub_reachable():
                raise HubUnreachableError(
                    f"tokenizer of {repo_id!r} is not cached and the hub is unreachable or "
                    f"offline; use {_offline_alternatives()}"
                ) from err
            tok = AutoTokenizer.from_pretrained(repo_id, **kwargs)
        return _prepare_tokenizer(tok)
    raise ValueError(
        f"unknown model {name!r}{did_you_mean(name, list_models())}: use one of "
        f"{list_models()} or a hub id 'org/name'"
    )
