"""What to fine-tune: :class:`FinetuneSettings`, checked task data, and the cache digest."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass

from lmsim.encoding import check_kind, input_form
from lmsim.tasks import check_label_names, check_labels

# Bump when training changes what a digest's weights are. 2 (2026-11-26): a head of the
# base model's own shape (2 labels, DistilBERT's pre_classifier) was copied from the loaded
# model instead of drawn from `head_seed`, so seeds and the "DH" variant shared it.
_FORMAT = 2
_FREEZE = ("none", "bottom", "top")


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
def _check_task(name: str, inputs, labels, label_names, kind: str = "single_label") -> tuple:
    """``(inputs, labels, label_names, kind)`` checked and normalised for one task
    (labels and label names by :func:`lmsim.tasks.check_labels` and
    :func:`lmsim.tasks.check_label_names`, as every task kind is checked)."""
    check_kind(kind)
    if isinstance(labels, (str, bytes)):
        raise TypeError(f"task {name!r}: `labels` must be a list, got a single string")
    inputs, labels = list(inputs), list(labels)
    if not inputs:
        raise ValueError(f"task {name!r}: `texts` is empty; pass the training inputs")
    if len(inputs) != len(labels):
        raise ValueError(
            f"task {name!r}: `texts` and `labels` must have one entry each, got {len(inputs)} "
            f"and {len(labels)}"
        )
    input_form(inputs, kind)
    where = f"task {name!r}: `label_names`"
    label_names = list(check_label_names(label_names, kind, where=where))
    labels = check_labels(labels, kind, len(label_names), inputs, where=f"task {name!r}: labels")
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
