"""Fine-tuned classifiers for the merging chapter, through lmsim's one training loop.

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

Task kinds (:data:`lmsim.encoding.KINDS`). ``kind="single_label"`` (the default),
``"multi_label"`` and ``"regression"`` fine-tune a sequence classifier on texts or text pairs
(``problem_type`` set for the last two), ``"token"`` a token classifier on word lists with
one label per word on its first sub-word; one loss function is keyed by the kind
(:func:`_loss`) and every input goes through :func:`lmsim.encoding.encode_inputs`. A
single-label task on plain texts keeps the digest (and weights) it had before kinds existed.

Frozen layers. ``n_frozen`` with ``freeze="bottom"`` (the default) freezes the embeddings
and the lowest ``n_frozen`` transformer layers (gradients flow only through the layers
above), which makes a step cheaper on a CPU. The frozen weights stay the pretrained ones in
every fine-tuned copy, so every merge leaves them unchanged (merging identical weights
returns them). ``freeze="top"`` freezes the highest ``n_frozen`` transformer layers instead
(the embeddings, the lower layers, the pooler, the final norm and the head train): Wu et
al.'s (2020) Table 1 compares the two.

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
from lmsim.encoding import (
    IGNORE_INDEX,
    PROBLEM_TYPES,
    check_kind,
    encode_inputs,
    input_form,
    model_kind,
    pad_batch,
)
from lmsim.extract import extract_logits, model_inputs
from lmsim.models import load_model
from lmsim.training import TrainingRun, TrainSettings, batch_indices, n_params, train

__all__ = [
    "FinetuneSettings",
    "finetune",
    "finetune_multitask",
    "load_finetuned",
    "finetune_facts",
    "freeze_layers",
    "freeze_lower_layers",
    "predict_logits",
    "head_pattern",
    "accuracy",
    "majority_baseline",
    "with_head",
]

_FACTS = "finetune.json"
_FORMAT = 1  # bump when training changes what a digest's weights are
_FREEZE = ("none", "bottom", "top")
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
        Transformer layers frozen for the whole run (at the end ``freeze`` names); 0 trains
        all.
    freeze : {"bottom", "top", "none"}
        ``"bottom"``: the embeddings and the lowest ``n_frozen`` layers; ``"top"``: the
        highest ``n_frozen`` layers (everything else trains, the pooler and head included);
        ``"none"`` requires ``n_frozen=0``. With ``n_frozen=0`` every choice trains all (and
        has one cache digest).
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
    freeze: str = "bottom"
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
        if self.freeze not in _FREEZE:
            raise ValueError(f"`freeze` must be one of {_FREEZE}, got {self.freeze!r}")
        if self.freeze == "none" and self.n_frozen:
            raise ValueError(
                f"`freeze='none'` with `n_frozen`={self.n_frozen}: pass freeze='bottom' or "
                "'top' to freeze layers, or n_frozen=0"
            )

    def key(self) -> dict:
        """The settings that determine the weights (not ``device``).

        ``freeze`` enters only when it is ``"top"`` with layers to freeze: ``"bottom"`` is
        what ``n_frozen`` meant before the field existed, and with ``n_frozen=0`` every
        choice trains the same model; so models cached before keep their digests.
        """
        out = dataclasses.asdict(self)
        out.pop("device")
        out.pop("checkpoint_every")
        if not (out["freeze"] == "top" and out["n_frozen"] > 0):
            out.pop("freeze")
        return out


# ====================================================================== data
def _check_labels(name: str, kind: str, inputs: list, labels, n_labels: int) -> list:
    """Labels in the kind's JSON-able form; raises naming the task and the bad entries."""
    if kind == "single_label":
        labels = [int(y) for y in labels]
        bad = sorted({y for y in labels if not 0 <= y < n_labels})
    elif kind == "regression":
        labels = [float(y) for y in labels]
        bad = [y for y in labels if not math.isfinite(y)]
    elif kind == "multi_label":
        labels = [[int(v) for v in y] for y in labels]
        bad = [y for y in labels if len(y) != n_labels or not set(y) <= {0, 1}]
    else:
        labels = [[int(v) for v in y] for y in labels]
        bad = [y for y in labels if not all(0 <= v < n_labels for v in y)]
        lengths = [i for i, (x, y) in enumerate(zip(inputs, labels)) if len(x) != len(y)]
        if lengths:
            raise ValueError(
                f"task {name!r}: inputs[{lengths[0]}] has {len(inputs[lengths[0]])} words but "
                f"{len(labels[lengths[0]])} labels; token labels are one per word"
            )
    if bad:
        wanted = {
            "single_label": f"ints in range({n_labels}) indexing `label_names`",
            "regression": "finite floats",
            "multi_label": f"multi-hot 0/1 vectors of length {n_labels}",
            "token": f"per word ints in range({n_labels}) indexing `label_names`",
        }[kind]
        raise ValueError(f"task {name!r}: labels {bad[:5]} are outside range; labels are {wanted}")
    return labels


def _check_task(name: str, inputs, labels, label_names, kind: str = "single_label") -> tuple:
    """``(inputs, labels, label_names, kind)`` checked and normalised for one task."""
    check_kind(kind)
    inputs, labels, label_names = list(inputs), list(labels), [str(n) for n in label_names]
    if not inputs:
        raise ValueError(f"task {name!r}: `texts` is empty; pass the training inputs")
    if len(inputs) != len(labels):
        raise ValueError(
            f"task {name!r}: `texts` and `labels` must have one entry each, got {len(inputs)} "
            f"and {len(labels)}"
        )
    input_form(inputs, kind)
    least = {"regression": 1, "multi_label": 1}.get(kind, 2)
    if len(label_names) < least or (kind == "regression" and len(label_names) != 1):
        wanted = "exactly 1 (e.g. ['score'])" if kind == "regression" else f"at least {least}"
        raise ValueError(f"task {name!r}: {kind} needs {wanted} label names, got {label_names}")
    labels = _check_labels(name, kind, inputs, labels, len(label_names))
    return inputs, labels, label_names, kind


def _unpack(task) -> tuple:
    """``(inputs, labels, label_names, kind)`` of a 3- or 4-tuple (kind single_label)."""
    if len(task) not in (3, 4):
        raise ValueError(
            f"a task must be (inputs, labels, label_names[, kind]), got {len(task)} items"
        )
    return (*task, "single_label")[:4]


def _digest(tasks: dict, settings: FinetuneSettings) -> str:
    """Cache key of a fine-tune: settings, then per task its labels and hashed inputs.

    Single-label tasks on plain texts hash exactly as before task kinds existed (the
    book's cached models keep their folders); any other kind or input form adds
    ``{"kind", "form"}`` to the task's header and hashes each pair or word list as JSON.
    """
    h = hashlib.sha256()
    h.update(json.dumps({"format": _FORMAT, "settings": settings.key()}, sort_keys=True).encode())
    for name, task in tasks.items():
        inputs, labels, label_names, kind = _unpack(task)
        form = input_form(inputs, kind)
        head = [name, label_names, labels]
        if kind != "single_label" or form != "text":
            head.append({"kind": kind, "form": form})
        h.update(json.dumps(head).encode())
        for x in inputs:
            data = x if form == "text" else json.dumps(list(x), ensure_ascii=False)
            h.update(hashlib.sha256(data.encode()).digest())
    return h.hexdigest()[:16]


# ====================================================================== models
def freeze_layers(model: nn.Module, n_frozen: int, where: str = "bottom") -> list[str]:
    """Freeze the lowest or highest ``n_frozen`` transformer blocks, in place.

    Parameters
    ----------
    model : nn.Module
        A Hugging Face model (BERT, RoBERTa, DistilBERT, MPNet, GPT-2 and Llama names).
    n_frozen : int
        0 freezes nothing; at least one block must stay trainable.
    where : {"bottom", "top"}
        ``"bottom"`` freezes the embeddings too (no gradient then reaches below the first
        trainable block, which is what saves back-propagation); ``"top"`` freezes only the
        blocks (embeddings, pooler, final norm and head train).

    Returns
    -------
    list of str
        The frozen parameter names.

    References
    ----------
    Wu et al. (2020), App. D and Table 1 ("freezing top/bottom 4/6 layers").
    """
    if where not in ("bottom", "top"):
        raise ValueError(f"`where` must be 'bottom' or 'top', got {where!r}")
    if n_frozen <= 0:
        return []
    blocks = sorted(
        {int(m.group(1)) for n, _ in model.named_parameters() if (m := _BLOCK.search(n))}
    )
    if n_frozen >= len(blocks):
        raise ValueError(
            f"`n_frozen`={n_frozen} freezes every one of the {len(blocks)} transformer layers; "
            "leave at least one to train"
        )
    chosen = set(blocks[:n_frozen] if where == "bottom" else blocks[-n_frozen:])
    frozen = []
    for name, p in model.named_parameters():
        block = _BLOCK.search(name)
        in_block = block is not None and int(block.group(1)) in chosen
        if in_block or (where == "bottom" and _EMBEDDINGS.search(name)):
            p.requires_grad_(False)
            frozen.append(name)
    return frozen


def freeze_lower_layers(model: nn.Module, n_frozen: int) -> list[str]:
    """Freeze the embeddings and the lowest ``n_frozen`` blocks: :func:`freeze_layers`."""
    return freeze_layers(model, n_frozen, "bottom")


def _new_classifier(
    settings: FinetuneSettings, label_names: list[str], head_seed: int, device, kind: str
):
    """The base model with a fresh head for ``label_names``, drawn from ``head_seed``.

    Sequence kinds get ``AutoModelForSequenceClassification`` (``problem_type`` set for
    multi-label and regression; single-label leaves it unset, as before kinds existed),
    ``"token"`` gets ``AutoModelForTokenClassification``.
    """
    task = "token-classification" if kind == "token" else "sequence-classification"
    torch.manual_seed(head_seed)
    # The base has no head for this task: transformers' "newly initialized" report is
    # expected (the head is drawn below), so it stays out of the executed pages.
    with quiet_transformers(True):
        model, tokenizer = load_model(
            settings.base,
            device="cpu",
            dtype="float32",
            task=task,
            zoo_profile=settings.zoo_profile,
        )
    config = copy.deepcopy(model.config)
    config.num_labels = len(label_names)
    config.id2label = dict(enumerate(label_names))
    config.label2id = {n: i for i, n in enumerate(label_names)}
    if kind in ("multi_label", "regression"):
        config.problem_type = PROBLEM_TYPES[kind]
    torch.manual_seed(head_seed)
    out = type(model)(config)
    # Every pretrained tensor of the right shape; a head of another size stays as drawn.
    fresh = out.state_dict()
    state = {
        k: v for k, v in model.state_dict().items() if k in fresh and v.shape == fresh[k].shape
    }
    out.load_state_dict(state, strict=False)
    return out.to(device), tokenizer


def _share_body(models: list[nn.Module], kinds: list[str]) -> nn.Module:
    """Make every model use one encoder (heads stay separate); return the donor model.

    The donor is the first sequence classifier when there is one: its body carries the
    pooler that sequence heads read (BERT's token classifiers are built without one).
    """
    donor = next((m for m, k in zip(models, kinds) if k != "token"), models[0])
    prefix = donor.base_model_prefix
    for model in models:
        if model is not donor:
            setattr(model, prefix, getattr(donor, prefix))
    return donor


def _targets(kind: str, labels: list, batch: dict) -> torch.Tensor:
    """The loss's target tensor for one task's batch (labels of its rows, in order)."""
    if kind == "single_label":
        return torch.tensor(labels, dtype=torch.long)
    if kind in ("multi_label", "regression"):
        return torch.tensor(labels, dtype=torch.float32)
    word = batch["word_index"]  # (B, T), -1 off first sub-words
    out = np.full(word.shape, IGNORE_INDEX, dtype=np.int64)
    for b, y in enumerate(labels):
        pos = np.flatnonzero(word[b] >= 0)
        out[b, pos] = np.asarray(y, dtype=np.int64)[word[b, pos]]
    return torch.from_numpy(out)


def _loss(kind: str, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean loss of one task's batch: cross-entropy (single-label), binary cross-entropy
    with logits (multi-label), squared error (regression), per-token cross-entropy over the
    labelled first sub-words (token; other positions carry ``IGNORE_INDEX``)."""
    logits = logits.float()
    if kind == "single_label":
        return F.cross_entropy(logits, target)
    if kind == "multi_label":
        return F.binary_cross_entropy_with_logits(logits, target)
    if kind == "regression":
        return F.mse_loss(logits[:, 0], target)
    flat, target = logits.reshape(-1, logits.shape[-1]), target.reshape(-1)
    if not bool((target != IGNORE_INDEX).any()):  # every word truncated away: no signal
        return flat.sum() * 0.0
    return F.cross_entropy(flat, target, ignore_index=IGNORE_INDEX)


def _run(models, encoded, labels, task_of, kinds, settings: FinetuneSettings, pad_id, device):
    """A :class:`TrainingRun` over the pooled examples of every task (one head per task).

    ``encoded[t]`` and ``labels[t]`` hold task ``t``'s encodings and labels; ``task_of``
    gives each pooled example's ``(task, index within the task)``.
    """
    n = len(task_of)
    batch = min(settings.batch_size, n)
    total = max(1, math.ceil(settings.epochs * n / settings.batch_size))
    task_t = torch.tensor([t for t, _ in task_of], dtype=torch.long)

    def loss_fn(step):
        idx = torch.as_tensor(batch_indices(n, batch, step, settings.seed))
        loss, n_tokens = 0.0, 0
        for t, model in enumerate(models):
            sel = idx[task_t[idx] == t]
            if len(sel) == 0:
                continue
            rows = [task_of[int(i)][1] for i in sel]
            inputs = pad_batch(encoded[t], rows, pad_id)
            logits = model(**model_inputs(model, inputs, device)).logits
            target = _targets(kinds[t], [labels[t][r] for r in rows], inputs).to(device)
            # Weighted by the task's share of the batch: the mean loss over the batch.
            loss = loss + _loss(kinds[t], logits, target) * (len(sel) / len(idx))
            n_tokens += int(inputs["attention_mask"].sum())
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
    tasks = {k: _check_task(k, *_unpack(v)) for k, v in tasks.items()}
    root = cache_dir("finetune")
    path = root / f"{name}-{_digest(tasks, settings)}"
    if _is_built(path):
        return path
    device = resolve_device(settings.device)
    models, tokenizer = [], None
    kinds = [v[3] for v in tasks.values()]
    for _, _, label_names, kind in tasks.values():
        model, tokenizer = _new_classifier(settings, label_names, settings.head_seed, device, kind)
        models.append(model)
    donor = _share_body(models, kinds)
    frozen = freeze_layers(
        donor, settings.n_frozen, "top" if settings.freeze == "top" else "bottom"
    )
    encoded = [encode_inputs(tokenizer, v[0], settings.max_length, v[3]) for v in tasks.values()]
    labels = [v[1] for v in tasks.values()]
    task_of = [(t, i) for t, v in enumerate(tasks.values()) for i in range(len(v[0]))]
    torch.manual_seed(settings.seed)  # dropout masks (the checkpoint keeps the RNG state)
    run = _run(models, encoded, labels, task_of, kinds, settings, tokenizer.pad_token_id, device)
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
            "tasks": {
                k: {"n_train": len(v[0]), "label_names": v[2], "kind": v[3]}
                for k, v in tasks.items()
            },
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
    inputs: Sequence,
    labels: Sequence,
    label_names: Sequence[str],
    settings: FinetuneSettings | None = None,
    *,
    kind: str = "single_label",
    name: str = "classifier",
    progress: bool = False,
    _stop_after: int | None = None,
) -> Path:
    """Fine-tune ``settings.base`` with a task head on labelled inputs (cached).

    Parameters
    ----------
    inputs : sequence, length n
        Texts or ``(str, str)`` pairs (sequence kinds), or lists of words (``"token"``).
    labels : sequence, length n
        Per ``kind``: an int indexing ``label_names`` (``"single_label"``); a multi-hot 0/1
        vector of length ``len(label_names)`` (``"multi_label"``); a float
        (``"regression"``, ``label_names`` of length 1, e.g. ``["score"]``); a list of ints,
        one per word (``"token"``, e.g. IOB2 tags).
    label_names : sequence of str
    settings : FinetuneSettings, optional
    kind : {"single_label", "multi_label", "regression", "token"}
        The task kind: the head (sequence or token classifier, ``problem_type``) and the
        loss (cross-entropy, binary cross-entropy with logits, squared error, per-word
        cross-entropy on first sub-words).
    name : str
        Readable prefix of the cache folder (the digest follows it).
    progress : bool
        The training loop's progress bar.

    Returns
    -------
    Path
        A Hugging Face model folder (config, safetensors, tokenizer, ``finetune.json``);
        load it with :func:`load_finetuned`.

    References
    ----------
    Jin et al. (2023), Sec. 4.1 and App. B (GLUE, emotion and NER fine-tuning).
    """
    settings = settings or FinetuneSettings()
    task = (inputs, labels, label_names, kind)
    return _build({name: task}, settings, name, progress, _stop_after)


def finetune_multitask(
    tasks: Mapping[str, tuple],
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
    tasks : dict of str to (inputs, labels, label_names) or (inputs, labels, label_names, kind)
        As :func:`finetune`'s arguments; ``kind`` defaults to ``"single_label"``. Token and
        sequence tasks can share one encoder.
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

    The class follows ``config.architectures``: a token classifier for ``kind="token"``,
    a sequence classifier otherwise.

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
    config = json.loads((path / "config.json").read_text())
    token = any(a.endswith("ForTokenClassification") for a in config.get("architectures") or [])
    task = "token-classification" if token else "sequence-classification"
    with quiet_transformers(True):
        return load_model(str(path), device=device, dtype="float32", task=task)


# ====================================================================== evaluation
def predict_logits(
    model: nn.Module,
    tokenizer,
    inputs: Sequence,
    *,
    max_length: int = 64,
    batch_size: int = 64,
    kind: str | None = None,
):
    """Logits of a fine-tuned classifier, float64.

    Parameters
    ----------
    model : nn.Module
        A sequence or token classifier (:func:`load_finetuned`).
    tokenizer : tokenizer
    inputs : sequence, length n
        Texts or ``(str, str)`` pairs; lists of words for a token classifier.
    max_length : int
        Truncation, as in training.
    batch_size : int
    kind : str, optional
        Default: the model's (its class, then ``config.problem_type``).

    Returns
    -------
    ndarray of shape (n, n_labels) for sequence kinds (regression: (n, 1)); for ``"token"``
    a list of n arrays of shape (n_words_i, n_labels), the first sub-word's logits per word,
    NaN rows for words cut off by truncation.
    """
    return extract_logits(
        model, tokenizer, inputs, kind=kind, max_length=max_length, batch_size=batch_size
    )


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


def head_pattern(model: nn.Module) -> str:
    """Regex of a model's task-head parameters: everything outside its base model.

    DistilBERT sequence classifiers give ``^(pre_classifier|classifier)\\.``; BERT, RoBERTa
    and MPNet classifiers (sequence or token) ``^classifier\\.``; GPT-2 and Llama
    ``^score\\.``. Top-level module names in the order of ``named_parameters``.
    """
    prefix = getattr(model, "base_model_prefix", "")
    if not prefix or not isinstance(getattr(model, prefix, None), nn.Module):
        raise ValueError(
            f"{type(model).__name__} has no base model attribute {prefix!r}: pass the head's "
            "regex as `pattern`"
        )
    names: list[str] = []
    for name, _ in model.named_parameters():
        top = name.split(".")[0]
        if top != prefix and top not in names:
            names.append(top)
    if not names:
        raise ValueError(f"{type(model).__name__} has no parameters outside {prefix!r}: no head")
    return f"^{names[0]}\\." if len(names) == 1 else f"^({'|'.join(names)})\\."


def with_head(model: nn.Module, donor: nn.Module, pattern: str | None = None) -> nn.Module:
    """A copy of ``model`` carrying ``donor``'s task head (parameters matching ``pattern``).

    For models merged without their heads (different tasks have heads of different
    shapes): the merged encoder with each task's own head. ``pattern`` defaults to
    :func:`head_pattern` of ``donor``; the copy takes the donor's label names and
    ``problem_type`` too, so its kind is the donor's.
    """
    if (model_kind(model) == "token") != (model_kind(donor) == "token"):
        raise ValueError(
            f"`model` is a {type(model).__name__} and `donor` a {type(donor).__name__}: a "
            "token head needs a token classifier's body class, a sequence head a sequence one"
        )
    pattern = head_pattern(donor) if pattern is None else pattern
    regex = re.compile(pattern)
    head = {k: v for k, v in donor.state_dict().items() if regex.search(k)}
    if not head:
        raise ValueError(f"no parameter of `donor` matches {pattern!r}; pass the head's pattern")
    out = copy.deepcopy(model)
    resize = out.config.num_labels != donor.config.num_labels
    for attr in ("num_labels", "id2label", "label2id", "problem_type"):
        setattr(out.config, attr, getattr(donor.config, attr))
    if resize:
        # Build the head module at the donor's size before loading its values.
        for name, module in donor.named_children():
            if any(k.startswith(name + ".") for k in head):
                setattr(out, name, copy.deepcopy(module))
    else:
        out.load_state_dict(head, strict=False)
    return out
