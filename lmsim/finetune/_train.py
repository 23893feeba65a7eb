"""Training and caching fine-tunes: the training run, the cache folder, loading it back."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from lmsim._cache import cache_dir
from lmsim._io import MARKER, entry_dir, open_entry, verify_entry
from lmsim._runtime import quiet_transformers, resolve_device
from lmsim.encoding import IGNORE_INDEX, encode_inputs, pad_batch
from lmsim.extract import model_inputs
from lmsim.finetune._heads import _new_classifier, _share_body, freeze_layers
from lmsim.finetune._settings import FinetuneSettings, _check_task, _digest, _unpack
from lmsim.models import load_model
from lmsim.training import (
    TrainingRun,
    TrainSettings,
    batch_indices,
    n_params,
    train,
    trained_on,
    weight_hashes,
)

_FACTS = "finetune.json"


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


def _legacy_sizes(path: Path) -> dict | None:
    """Sizes ``finetune.json`` recorded in a folder written before entry markers."""
    facts = path / _FACTS
    if not facts.is_file():
        return None
    return dict(json.loads(facts.read_text())["files"])


def _is_built(path: Path) -> bool:
    """Whether the cache folder ``path`` holds a whole fine-tune (sizes and sha256 checked);
    a damaged one is named, moved aside and trained again."""
    return open_entry(path, "training it again", legacy=_legacy_sizes, stacklevel=5)


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
    with entry_dir(path) as tmp, quiet_transformers(True):
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
            **trained_on(device),
            "weights_sha256": weight_hashes(tmp),
        }
        facts["files"] = {
            str(p.relative_to(tmp)): p.stat().st_size
            for p in sorted(tmp.rglob("*"))
            if p.is_file() and p.name != MARKER
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


def _top(path: Path) -> Path | None:
    """The entry folder of a fine-tune: ``path``, or its parent for one task of a
    multitask run (the parent holds ``finetune.json``); None when neither does."""
    if (path / _FACTS).is_file():
        return path
    if (path / "config.json").is_file() and (path.parent / _FACTS).is_file():
        return path.parent
    return None


def _not_a_finetune(path) -> FileNotFoundError:
    return FileNotFoundError(
        f"{str(path)!r} holds no {_FACTS} (nor does its parent, as for one task of a "
        "multitask run): it is not a fine-tuned model written by lmsim.finetune; train one "
        "with lmsim.finetune.finetune"
    )


def finetune_facts(path) -> dict:
    """The ``finetune.json`` of a fine-tuned model folder (or of its multitask parent)."""
    top = _top(Path(path))
    if top is None:
        raise _not_a_finetune(path)
    return json.loads((top / _FACTS).read_text())


def load_finetuned(path, device: str = "auto"):
    """Load a folder written by :func:`finetune` after checking every file's recorded size
    and sha256.

    The class follows ``config.architectures``: a token classifier for ``kind="token"``,
    a sequence classifier otherwise. Nothing is moved or deleted: a damaged folder is
    named in the error (a cached one is trained again by calling :func:`finetune`).

    Returns
    -------
    model : PreTrainedModel
        In eval mode.
    tokenizer

    Raises
    ------
    FileNotFoundError
        ``path`` is not a folder written by :func:`finetune`.
    ValueError
        A file differs from its record (truncated, overwritten).
    """
    path = Path(path)
    top = _top(path)
    if top is None:
        raise _not_a_finetune(path)
    verify_entry(top, "a fine-tuned model written by lmsim.finetune", legacy=_legacy_sizes)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"{str(path)!r} holds a multitask fine-tune: load one of its tasks, "
            f"{sorted(p.name for p in path.iterdir() if (p / 'config.json').is_file())}"
        )
    config = json.loads((path / "config.json").read_text())
    token = any(a.endswith("ForTokenClassification") for a in config.get("architectures") or [])
    task = "token-classification" if token else "sequence-classification"
    with quiet_transformers(True):
        return load_model(str(path), device=device, dtype="float32", task=task)
