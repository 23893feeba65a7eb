"""Fine-tuned sequence classifiers for the merging chapter, through lmsim's one training loop.

:func:`finetune` fine-tunes a copy of a pretrained encoder (any name :func:`lmsim.models.
load_model` knows: ``minilm-l6``, ``tiny-bert``, a hub id) with a fresh classification head on
labelled texts; :func:`finetune_multitask` trains one shared encoder with one head per task
on the joint data, the multi-task-learning (MTL) upper bound of Jin et al. (2023). Both run
:func:`lmsim.training.train` (AdamW, warm-up and linear decay, seeded stateless batches,
checkpoints and exact resume) and cache the result like the zoo:

- the folder is named by a digest of everything that determines the weights (base model,
  settings, texts, labels, label names), so a changed input trains a new model and an
  unchanged one is read back;
- it is written with :class:`lmsim._io.atomic_dir` (``save_pretrained``, the tokenizer and a
  ``finetune.json`` recording every file's size), so it appears only complete;
- :func:`load_finetuned` checks the recorded sizes and moves a damaged folder aside (it is
  then trained again);
- an interrupted run resumes from the training loop's checkpoint in ``.<folder>.partial``.

Frozen lower layers. ``n_frozen`` freezes the embeddings and the lowest ``n_frozen``
transformer layers (gradients flow only through the layers above), which makes a step
cheaper on a CPU. The frozen weights stay the pretrained ones in every fine-tuned copy, so
every merge leaves them unchanged (merging identical weights returns them).

Head initialisation. Every model of one call draws its head from ``head_seed`` (the paper's
"same head initialisation"); ``seed`` orders the batches and draws the dropout masks.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 4.1 (MTL, individual models), App. B (training details).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lmsim._cache import cache_dir
from lmsim._io import atomic_dir, move_aside
from lmsim._runtime import quiet_transformers, resolve_device
from lmsim.models import load_model
from lmsim.training import TrainingRun, TrainSettings, batch_indices, n_params, train

__all__ = [
    "FinetuneSettings",
    "finetune",
    "finetune_multitask",
    "load_finetuned",
    "finetune_facts",
    "freeze_lower_layers",
    "predict_logits",
    "accuracy",
    "majority_baseline",
    "with_head",
]

_FACTS = "finetune.json"
_FORMAT = 1  # bump when training changes what a digest's weights are
# Index of a transformer block in a parameter name: BERT/RoBERTa `encoder.layer.3.`,
# DistilBERT `transformer.layer.3.`, GPT-2 `h.3.`, Llama `layers.3.`.
_BLOCK = re.compile(r"(?:^|\.)(?:layer|layers|h|block)\.(\d+)\.")
_EMBEDDINGS = re.compile(r"(?:^|\.)(?:embeddings|wte|wpe|embed_tokens)\.")


@dataclass(frozen=True)
class FinetuneSettings:
    """What and how to fine-tune.

    Attributes
    ----------
    base : str
        Pretrained model name (:func:`lmsim.models.load_model`).
    max_length : int
        Texts are truncated to this many tokens (special tokens included).
    batch_size : int
        Examples per step (the paper: 16).
    epochs : float
        Passes over the training examples; the number of steps is
        ``ceil(epochs * n_examples / batch_size)``.
    lr : float
        Peak learning rate (6 % warm-up, then linear decay, as in the paper).
    n_frozen : int
        Embeddings and the lowest ``n_frozen`` transformer layers are frozen; 0 trains all.
    seed : int
        Batch order and dropout.
    head_seed : int
        Initialisation of the classification heads (equal across models: "same head init").
    weight_decay : float
    checkpoint_every : int
        Steps between resumable checkpoints.
    device : str
        ``"auto"``, ``"cpu"`` or ``"cuda"``; not part of the cache key.
    zoo_profile : str
        Which zoo build ``zoo/*`` base names load.
    """

    base: str = "minilm-l6"
    max_length: int = 64
    batch_size: int = 16
    epochs: float = 1.0
    lr: float = 1e-4
    n_frozen: int = 0
    seed: int = 0
    head_seed: int = 0
    weight_decay: float = 0.01
    checkpoint_every: int = 50
    device: str = "auto"
    zoo_profile: str = "default"

    def __post_init__(self):
        if self.max_length < 2 or self.batch_size < 1:
            raise ValueError(
                f"`max_length` must be >= 2 and `batch_size` >= 1, got {self.max_length} "
                f"and {self.batch_size}"
            )
        if not (self.epochs > 0 and math.isfinite(self.epochs)):
            raise ValueError(f"`epochs` must be a positive number, got {self.epochs!r}")
        if self.n_frozen < 0:
            raise ValueError(f"`n_frozen` must be >= 0, got {self.n_frozen}")

    def key(self) -> dict:
        """The settings that determine the weights (not ``device``)."""
        out = dataclasses.asdict(self)
        out.pop("device")
        out.pop("checkpoint_every")
        return out


# ====================================================================== data
def _check_task(name: str, texts, labels, label_names) -> tuple[list[str], list[int], list[str]]:
    texts, labels, label_names = list(texts), [int(y) for y in labels], list(label_names)
    if not texts:
        raise ValueError(f"task {name!r}: `texts` is empty; pass the training texts")
    if len(texts) != len(labels):
        raise ValueError(
            f"task {name!r}: `texts` and `labels` must have one entry each, got {len(texts)} "
            f"and {len(labels)}"
        )
    if len(label_names) < 2:
        raise ValueError(f"task {name!r}: needs at least 2 label names, got {label_names}")
    bad = sorted({y for y in labels if not 0 <= y < len(label_names)})
    if bad:
        raise ValueError(
            f"task {name!r}: labels {bad[:5]} are outside range({len(label_names)}); labels "
            "index `label_names`"
        )
    return texts, labels, [str(n) for n in label_names]


def _digest(tasks: dict, settings: FinetuneSettings) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"format": _FORMAT, "settings": settings.key()}, sort_keys=True).encode())
    for name, (texts, labels, label_names) in tasks.items():
        h.update(json.dumps([name, label_names, labels]).encode())
        for text in texts:
            h.update(hashlib.sha256(text.encode()).digest())
    return h.hexdigest()[:16]


# ====================================================================== models
def freeze_lower_layers(model: nn.Module, n_frozen: int) -> list[str]:
    """Freeze the embeddings and the lowest ``n_frozen`` transformer blocks, in place.

    Parameters
    ----------
    model : nn.Module
        A Hugging Face model (BERT, RoBERTa, DistilBERT, MPNet, GPT-2 and Llama names).
    n_frozen : int
        0 freezes nothing.

    Returns
    -------
    list of str
        The frozen parameter names.
    """
    if n_frozen <= 0:
        return []
    frozen = []
    for name, p in model.named_parameters():
        block = _BLOCK.search(name)
        if _EMBEDDINGS.search(name) or (block is not None and int(block.group(1)) < n_frozen):
            p.requires_grad_(False)
            frozen.append(name)
    n_blocks = {int(m.group(1)) for n, _ in model.named_parameters() if (m := _BLOCK.search(n))}
    if n_frozen >= len(n_blocks):
        raise ValueError(
            f"`n_frozen`={n_frozen} freezes every one of the {len(n_blocks)} transformer layers; "
            "leave at least one to train"
        )
    return frozen


def _new_classifier(settings: FinetuneSettings, label_names: list[str], head_seed: int, device):
    """The base model with a fresh head for ``label_names``, drawn from ``head_seed``."""
    torch.manual_seed(head_seed)
    model, tokenizer = load_model(
        settings.base,
        device="cpu",
        dtype="float32",
        task="sequence-classification",
        zoo_profile=settings.zoo_profile,
    )
    config = copy.deepcopy(model.config)
    config.num_labels = len(label_names)
    config.id2label = dict(enumerate(label_names))
    config.label2id = {n: i for i, n in enumerate(label_names)}
    torch.manual_seed(head_seed)
    out = type(model)(config)
    # Every pretrained tensor of the right shape; a head of another size stays as drawn.
    fresh = out.state_dict()
    state = {
        k: v for k, v in model.state_dict().items() if k in fresh and v.shape == fresh[k].shape
    }
    out.load_state_dict(state, strict=False)
    return out.to(device), tokenizer


def _share_body(models: list[nn.Module]) -> None:
    """Make every model use the first one's encoder (heads stay separate)."""
    prefix = models[0].base_model_prefix
    for model in models[1:]:
        setattr(model, prefix, getattr(models[0], prefix))


def _encode(tokenizer, texts: list[str], max_length: int) -> list[list[int]]:
    return tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]


def _pad(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def _run(models, encoded, labels, task_of, settings: FinetuneSettings, pad_id: int, device):
    """A :class:`TrainingRun` over the pooled examples of every task (one head per task)."""
    n = len(encoded)
    batch = min(settings.batch_size, n)
    total = max(1, math.ceil(settings.epochs * n / settings.batch_size))
    labels_t = torch.tensor(labels, dtype=torch.long)
    task_t = torch.tensor(task_of, dtype=torch.long)

    def loss_fn(step):
        idx = torch.as_tensor(batch_indices(n, batch, step, settings.seed))
        loss, n_tokens = 0.0, 0
        for t, model in enumerate(models):
            sel = idx[task_t[idx] == t]
            if len(sel) == 0:
                continue
            ids, mask = _pad([encoded[i] for i in sel], pad_id)
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            # Weighted by the task's share of the batch: the mean loss over the batch.
            loss = loss + F.cross_entropy(logits.float(), labels_t[sel].to(device)) * (
                len(sel) / len(idx)
            )
            n_tokens += int(mask.sum())
        return loss, n_tokens, {}

    modules = {f"task{t}": model for t, model in enumerate(models)}
    return TrainingRun(modules, loss_fn, None, total)


def _is_built(path: Path) -> bool:
    if not path.exists():
        return False
    try:
        facts = json.loads((path / _FACTS).read_text())
        for file, size in facts["files"].items():
            if not (path / file).is_file():
                raise FileNotFoundError(f"{path / file} is missing")
            if (path / file).stat().st_size != size:
                raise ValueError(f"{path / file} has another size than the {size} bytes written")
    except (OSError, ValueError, KeyError, TypeError) as err:
        move_aside(path, str(err), "training it again", stacklevel=5)
        return False
    return True


def _build(
    tasks: dict, settings: FinetuneSettings, name: str, progress: bool, stop_after=None
) -> Path | None:
    """Train (or read back) one shared encoder with a head per task; return its folder."""
    if not re.fullmatch(r"[\w.-]+", name):
        raise ValueError(f"`name` must be letters, digits, '.', '-' or '_', got {name!r}")
    tasks = {k: _check_task(k, *v) for k, v in tasks.items()}
    root = cache_dir("finetune")
    path = root / f"{name}-{_digest(tasks, settings)}"
    if _is_built(path):
        return path
    device = resolve_device(settings.device)
    models, tokenizer = [], None
    for label_names in (v[2] for v in tasks.values()):
        model, tokenizer = _new_classifier(settings, label_names, settings.head_seed, device)
        models.append(model)
    _share_body(models)
    frozen = freeze_lower_layers(models[0], settings.n_frozen)
    encoded, labels, task_of = [], [], []
    for t, (texts, task_labels, _) in enumerate(tasks.values()):
        encoded += _encode(tokenizer, texts, settings.max_length)
        labels += task_labels
        task_of += [t] * len(texts)
    torch.manual_seed(settings.seed)  # dropout masks (the checkpoint keeps the RNG state)
    run = _run(models, encoded, labels, task_of, settings, tokenizer.pad_token_id, device)
    train_settings = TrainSettings(
        lr=settings.lr,
        weight_decay=settings.weight_decay,
        checkpoint_every=settings.checkpoint_every,
        eval_every=max(1, run.total_steps),
    )
    work = root / f".{path.name}.partial"
    started = time.perf_counter()
    trained = train(run, train_settings, work, device, name, progress, stop_after)
    if not trained["finished"]:  # interrupted on purpose (tests): the checkpoint stays
        return None
    with atomic_dir(path) as tmp, quiet_transformers(True):
        for task, model in zip(tasks, models):
            folder = tmp / task if len(tasks) > 1 else tmp
            model.save_pretrained(folder, safe_serialization=True)
            tokenizer.save_pretrained(folder)
        log = trained["log"]
        facts = {
            "name": name,
            "tasks": {k: {"n_train": len(v[0]), "label_names": v[2]} for k, v in tasks.items()},
            "settings": dataclasses.asdict(settings),
            "steps": trained["step"],
            "train_seconds": round(trained["train_seconds"], 2),
            "wall_seconds": round(time.perf_counter() - started, 2),
            "tokens": trained["tokens"],
            "final_loss": float(np.mean([r["loss"] for r in log[-10:]])),
            "first_loss": float(np.mean([r["loss"] for r in log[:10]])),
            "params": n_params(models),
            "trainable_params": sum(p.numel() for p in models[0].parameters() if p.requires_grad),
            "n_frozen_tensors": len(frozen),
            "device": str(device),
            "torch": torch.__version__,
        }
        facts["files"] = {
            str(p.relative_to(tmp)): p.stat().st_size for p in sorted(tmp.rglob("*")) if p.is_file()
        }
        (tmp / _FACTS).write_text(json.dumps(facts, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return path


def finetune(
    texts: Sequence[str],
    labels: Sequence[int],
    label_names: Sequence[str],
    settings: FinetuneSettings | None = None,
    *,
    name: str = "classifier",
    progress: bool = False,
    _stop_after: int | None = None,
) -> Path:
    """Fine-tune ``settings.base`` with a classification head on labelled texts (cached).

    Parameters
    ----------
    texts : sequence of str, length n
    labels : sequence of int, length n
        Indices into ``label_names``.
    label_names : sequence of str
    settings : FinetuneSettings, optional
    name : str
        Readable prefix of the cache folder (the digest follows it).
    progress : bool
        The training loop's progress bar.

    Returns
    -------
    Path
        A Hugging Face model folder (config, safetensors, tokenizer, ``finetune.json``);
        load it with :func:`load_finetuned`.
    """
    settings = settings or FinetuneSettings()
    return _build({name: (texts, labels, label_names)}, settings, name, progress, _stop_after)


def finetune_multitask(
    tasks: Mapping[str, tuple[Sequence[str], Sequence[int], Sequence[str]]],
    settings: FinetuneSettings | None = None,
    *,
    name: str = "mtl",
    progress: bool = False,
) -> dict[str, Path]:
    """Multi-task learning: one encoder, one head per task, trained on the joint data.

    Each batch is drawn from the pooled examples of all tasks (tasks appear in proportion
    to their size); every example's loss goes through its task's head. Tasks with the same
    label set can simply be pooled into one :func:`finetune` call instead (one head).

    Parameters
    ----------
    tasks : dict of str to (texts, labels, label_names)
    settings : FinetuneSettings, optional
        ``epochs`` counts passes over the pooled examples.
    name : str
    progress : bool

    Returns
    -------
    dict of str to Path
        Per task, a model folder holding the shared encoder and that task's head.

    References
    ----------
    Jin et al. (2023), Sec. 4.1 ("Multi-task learning (MTL)").
    """
    if len(tasks) < 2:
        raise ValueError(f"`tasks` needs at least two tasks, got {list(tasks)}; use finetune")
    settings = settings or FinetuneSettings()
    path = _build(dict(tasks), settings, name, progress)
    return {task: path / task for task in tasks}


def finetune_facts(path) -> dict:
    """The ``finetune.json`` of a fine-tuned model folder (or of its multitask parent)."""
    path = Path(path)
    facts = path / _FACTS if (path / _FACTS).is_file() else path.parent / _FACTS
    return json.loads(facts.read_text())


def load_finetuned(path, device: str = "auto"):
    """Load a folder written by :func:`finetune` after checking its recorded file sizes.

    Returns
    -------
    model : PreTrainedModel
        In eval mode.
    tokenizer
    """
    path = Path(path)
    top = path if (path / _FACTS).is_file() else path.parent
    if not _is_built(top):
        raise FileNotFoundError(
            f"no fine-tuned model at {str(path)!r} (or it was damaged and moved aside); "
            "train it with lmsim.finetune.finetune"
        )
    with quiet_transformers(True):
        return load_model(str(path), device=device, dtype="float32", task="sequence-classification")


# ====================================================================== evaluation
@torch.inference_mode()
def predict_logits(
    model: nn.Module,
    tokenizer,
    texts: Sequence[str],
    *,
    max_length: int = 64,
    batch_size: int = 64,
) -> np.ndarray:
    """Logits of a sequence classifier, shape (n_texts, n_labels), float64."""
    texts = list(texts)
    if not texts:
        raise ValueError("`texts` is empty: pass the texts to classify")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    rows = []
    try:
        for start in range(0, len(texts), batch_size):
            ids, mask = _pad(
                _encode(tokenizer, texts[start : start + batch_size], max_length),
                tokenizer.pad_token_id,
            )
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            rows.append(out.double().cpu())
    finally:
        model.train(was_training)
    return torch.cat(rows).numpy()


def accuracy(logits, labels) -> float:
    """Share of rows whose argmax is the label."""
    logits, labels = np.asarray(logits), np.asarray(labels)
    if logits.ndim != 2 or len(logits) != len(labels):
        raise ValueError(
            f"`logits` must be (n, n_labels) with one row per label, got {logits.shape} and "
            f"{labels.shape}"
        )
    return float((logits.argmax(1) == labels).mean())


def majority_baseline(train_labels, test_labels) -> float:
    """Test accuracy of always predicting the most frequent training label."""
    train_labels = np.asarray(train_labels)
    majority = np.bincount(train_labels).argmax()
    return float((np.asarray(test_labels) == majority).mean())


def with_head(model: nn.Module, donor: nn.Module, pattern: str = r"^classifier\.") -> nn.Module:
    """A copy of ``model`` carrying ``donor``'s task head (parameters matching ``pattern``).

    For models merged without their heads (different tasks have heads of different
    shapes): the merged encoder with each task's own head.
    """
    regex = re.compile(pattern)
    head = {k: v for k, v in donor.state_dict().items() if regex.search(k)}
    if not head:
        raise ValueError(f"no parameter of `donor` matches {pattern!r}; pass the head's pattern")
    out = copy.deepcopy(model)
    if out.config.num_labels != donor.config.num_labels:
        # Build the head module at the donor's size before loading its values.
        for attr in ("num_labels", "id2label", "label2id"):
            setattr(out.config, attr, getattr(donor.config, attr))
        for name, module in donor.named_children():
            if any(k.startswith(name + ".") for k in head):
                setattr(out, name, copy.deepcopy(module))
    else:
        out.load_state_dict(head, strict=False)
    return out
