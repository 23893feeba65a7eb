"""Encoders and task heads: frozen layers, fresh heads, shared bodies, transplanted heads."""

from __future__ import annotations

import copy
import re

import torch
from torch import nn

from lmsim._runtime import quiet_transformers
from lmsim.encoding import PROBLEM_TYPES, model_kind
from lmsim.finetune._settings import FinetuneSettings
from lmsim.models import load_model

# Index of a transformer block in a parameter name: BERT/RoBERTa `encoder.layer.3.`,
# DistilBERT `transformer.layer.3.`, GPT-2 `h.3.`, Llama `layers.3.`.
_BLOCK = re.compile(r"(?:^|\.)(?:layer|layers|h|block)\.(\d+)\.")
_EMBEDDINGS = re.compile(r"(?:^|\.)(?:embeddings|wte|wpe|embed_tokens)\.")


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
    # Every pretrained tensor of the body; the head stays as drawn from `head_seed`, also
    # when the loaded model's own (untrained) head has its shape.
    fresh = out.state_dict()
    head = re.compile(head_pattern(out))
    state = {
        k: v
        for k, v in model.state_dict().items()
        if k in fresh and v.shape == fresh[k].shape and not head.match(k)
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
