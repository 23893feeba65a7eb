"""One tokenisation path for every task kind: texts, text pairs and pre-split words.

Fine-tuning (:mod:`lmsim.finetune`), merging statistics (:mod:`lmsim.merge`) and linear
inputs (:func:`lmsim.extract.extract_linear_grams`) all encode their inputs with
:func:`encode_inputs` and batch them with :func:`pad_batch`, so a model sees the same token
ids whether it is trained, scored, or has its Grams and Fishers collected. No torch here:
ids are Python lists, batches numpy arrays.

Task kinds (:data:`KINDS`)
    * ``"single_label"``, ``"multi_label"``, ``"regression"``: sequence kinds; each input is
      a ``str`` or a pair ``(str, str)`` (a tuple or a 2-list, GLUE's sentence pairs).
    * ``"token"``: each input a sentence as a list of words; labels are per word and sit on
      the word's first sub-word (:func:`encode_inputs` returns ``word_index``).

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. Sec. 4.1 and App. B (GLUE, emotion and NER tasks).
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Sequence

import numpy as np

__all__ = [
    "KINDS",
    "SEQUENCE_KINDS",
    "check_kind",
    "input_form",
    "encode_inputs",
    "pad_batch",
    "model_kind",
    "resolve_kind",
    "forward_keys",
    "word_tokenizer",
]

KINDS = ("single_label", "multi_label", "regression", "token")
SEQUENCE_KINDS = ("single_label", "multi_label", "regression")
# Hugging Face `problem_type` of each sequence kind (token heads have none).
PROBLEM_TYPES = {
    "single_label": "single_label_classification",
    "multi_label": "multi_label_classification",
    "regression": "regression",
}
IGNORE_INDEX = -100  # the label of positions no loss sees (torch's cross-entropy default)


def check_kind(kind: str) -> str:
    """Return ``kind`` if it is one of :data:`KINDS`, else raise naming the choices."""
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {list(KINDS)}, got {kind!r}")
    return kind


def _is_pair(x) -> bool:
    return isinstance(x, (tuple, list)) and len(x) == 2 and all(isinstance(s, str) for s in x)


def input_form(inputs: Sequence, kind: str | None = None) -> str:
    """``"text"``, ``"pair"`` or ``"words"``: what every input of ``inputs`` is.

    Parameters
    ----------
    inputs : sequence, length n
        Strings, ``(str, str)`` pairs, or (``kind="token"``) lists of words.
    kind : str, optional
        ``"token"`` reads the inputs as word lists; any other kind (or None) as texts or
        pairs, so a 2-word list is a pair unless ``kind="token"``.

    Raises
    ------
    ValueError, TypeError
        Empty inputs, a mix of forms, or inputs that are none of them.
    """
    if isinstance(inputs, (str, bytes)):
        raise TypeError("`inputs` must be a list of inputs, got a single string; wrap it: [text]")
    if kind is not None:
        check_kind(kind)
    if len(inputs) == 0:
        raise ValueError("`inputs` is empty: pass at least one input")
    if kind == "token":
        for i, words in enumerate(inputs):
            if isinstance(words, str) or not isinstance(words, Sequence):
                raise TypeError(
                    f"kind='token' needs each input as a list of words; inputs[{i}] is "
                    f"{type(words).__name__}: split it first (e.g. text.split())"
                )
            if not words or not all(isinstance(w, str) for w in words):
                raise ValueError(f"inputs[{i}] must be a non-empty list of str words")
        return "words"
    first = "pair" if _is_pair(inputs[0]) else "text"
    for i, x in enumerate(inputs):
        form = "pair" if _is_pair(x) else "text" if isinstance(x, str) else None
        if form is None:
            raise TypeError(
                f"inputs[{i}] is {type(x).__name__}: sequence kinds take a str or a (str, str) "
                "pair; lists of words need kind='token'"
            )
        if form != first:
            raise ValueError(
                f"inputs[0] is a {first} but inputs[{i}] a {form}: give one task's inputs in "
                "one form (all texts or all pairs)"
            )
    return first


def word_tokenizer(tokenizer):
    """A tokenizer that treats each pre-split word as if preceded by a space.

    Byte-level BPE (RoBERTa, GPT-2, Llama 3, SmolLM) marks a word start with a leading
    space (``Ġ``); without ``add_prefix_space`` every pre-split word would be tokenised as a
    word-internal piece, unlike in running text (transformers 5 does not complain). Returns
    a modified copy when needed (the caller's tokenizer is never changed). Metaspace
    tokenizers (SentencePiece) and WordPiece already handle pre-split words.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TypeError(
            f"pre-split words need a fast (Rust-backed) tokenizer for word_ids(); got "
            f"{type(tokenizer).__name__}: load it with use_fast=True"
        )
    pre = backend.pre_tokenizer
    if pre is None:
        return tokenizer
    state = json.loads(pre.__getstate__())
    if state.get("type") == "ByteLevel":
        paths = [None] if not state.get("add_prefix_space") else []
    elif state.get("type") == "Sequence":
        paths = [
            i
            for i, sub in enumerate(state.get("pretokenizers", []))
            if sub.get("type") == "ByteLevel" and not sub.get("add_prefix_space")
        ]
    else:
        paths = []
    if not paths:
        return tokenizer
    tokenizer = copy.deepcopy(tokenizer)
    pre = tokenizer.backend_tokenizer.pre_tokenizer
    for i in paths:
        (pre if i is None else pre[i]).add_prefix_space = True
    if hasattr(tokenizer, "add_prefix_space"):
        tokenizer.add_prefix_space = True
    return tokenizer


def _first_subwords(word_ids: list) -> list[int]:
    """Per token position, the word it starts (its first sub-word), else -1."""
    out, prev = [], None
    for w in word_ids:
        out.append(w if w is not None and w != prev else -1)
        prev = w
    return out


def encode_inputs(
    tokenizer, inputs: Sequence, max_length: int | None, kind: str | None = None
) -> dict:
    """Token ids of texts, text pairs or word lists, truncated to ``max_length``.

    Parameters
    ----------
    tokenizer : transformers tokenizer
        Fast tokenizer; for word lists a byte-level BPE one is used with
        ``add_prefix_space=True`` (:func:`word_tokenizer`, a copy).
    inputs : sequence, length n
        See :func:`input_form`.
    max_length : int or None
        Maximum tokens per input, special tokens included; None does not truncate. Pairs
        are truncated longest-first (``truncation=True``).
    kind : str, optional
        A task kind (:data:`KINDS`); ``"token"`` reads word lists.

    Returns
    -------
    dict
        ``"form"``: ``"text"``, ``"pair"`` or ``"words"``; ``"input_ids"``: list of n lists of
        int; for pairs ``"token_type_ids"`` (when the tokenizer makes them: BERT's segment
        ids; RoBERTa's and DistilBERT's tokenizers make none); for words ``"word_index"``:
        per input, per token position the index of the word it starts, else -1 (first
        sub-word labelling; words cut off by truncation appear nowhere).
    """
    form = input_form(inputs, kind)
    kwargs = {"truncation": max_length is not None}
    if max_length is not None:
        kwargs["max_length"] = int(max_length)
    if form == "text":
        # The call fine-tuning always made: cached models' token ids stay the same.
        enc = tokenizer(list(inputs), **kwargs)
    elif form == "pair":
        enc = tokenizer([a for a, _ in inputs], [b for _, b in inputs], **kwargs)
    else:
        enc = word_tokenizer(tokenizer)(
            [list(w) for w in inputs], is_split_into_words=True, **kwargs
        )
    out = {"form": form, "input_ids": [list(x) for x in enc["input_ids"]]}
    if form == "pair" and "token_type_ids" in enc:
        out["token_type_ids"] = [list(x) for x in enc["token_type_ids"]]
    if form == "words":
        out["word_index"] = [_first_subwords(enc.word_ids(i)) for i in range(len(inputs))]
    return out


def pad_batch(
    encoded: dict, rows: Sequence[int], pad_id: int, pad_to: int | None = None
) -> dict[str, np.ndarray]:
    """Right-padded int64 arrays of the inputs ``rows`` of an :func:`encode_inputs` result.

    Parameters
    ----------
    encoded : dict
        From :func:`encode_inputs`.
    rows : sequence of int, length B
        Which inputs, in batch order.
    pad_id : int
        Id written at padded positions (masked out).
    pad_to : int, optional
        Width; default the longest selected input.

    Returns
    -------
    dict of str to ndarray of shape (B, T), int64
        ``input_ids``, ``attention_mask`` (1 at real tokens), and where ``encoded`` has
        them ``token_type_ids`` (0 at padding) and ``word_index`` (-1 at padding).
    """
    seqs = [encoded["input_ids"][i] for i in rows]
    width = max(len(s) for s in seqs) if pad_to is None else int(pad_to)
    out = {
        "input_ids": np.full((len(seqs), width), pad_id, dtype=np.int64),
        "attention_mask": np.zeros((len(seqs), width), dtype=np.int64),
    }
    fills = {"token_type_ids": 0, "word_index": -1}
    for key, fill in fills.items():
        if key in encoded:
            out[key] = np.full((len(seqs), width), fill, dtype=np.int64)
    for b, i in enumerate(rows):
        n = len(encoded["input_ids"][i])
        out["input_ids"][b, :n] = encoded["input_ids"][i]
        out["attention_mask"][b, :n] = 1
        for key in fills:
            if key in encoded:
                out[key][b, :n] = encoded[key][i]
    return out


def model_kind(model) -> str:
    """The task kind of a Hugging Face classifier: its class, then ``config.problem_type``.

    ``...ForTokenClassification`` is ``"token"``; otherwise ``problem_type``
    (``multi_label_classification``, ``regression``), and when it is unset Hugging Face's own
    rule: one label is regression, more are single-label classification.
    """
    if type(model).__name__.endswith("ForTokenClassification"):
        return "token"
    config = model.config
    problem = getattr(config, "problem_type", None)
    if problem == "multi_label_classification":
        return "multi_label"
    if problem == "regression" or (problem is None and getattr(config, "num_labels", 2) == 1):
        return "regression"
    return "single_label"


def resolve_kind(model, kind: str | None = None) -> str:
    """``kind``, or the model's own (:func:`model_kind`) when None; raises when a token kind
    meets a sequence classifier or the reverse."""
    own = model_kind(model)
    kind = own if kind is None else check_kind(kind)
    if (kind == "token") != (own == "token"):
        raise ValueError(
            f"`kind`={kind!r} but the model is a {type(model).__name__}; token kinds need a "
            "...ForTokenClassification model and sequence kinds a sequence classifier"
        )
    return kind


def forward_keys(model, keys) -> list[str]:
    """Which of ``keys`` (``input_ids``, ``attention_mask``, ``token_type_ids``) to pass.

    ``token_type_ids`` only where ``model.forward`` takes them and the model has segment
    embeddings (``type_vocab_size`` >= 2): DistilBERT has no such argument, and RoBERTa's
    single segment row would be indexed out of range by a BERT-style tokenizer's 1s.
    """
    out = [k for k in ("input_ids", "attention_mask") if k in keys]
    if "token_type_ids" in keys:
        accepts = "token_type_ids" in inspect.signature(model.forward).parameters
        if accepts and getattr(model.config, "type_vocab_size", 2) >= 2:
            out.append("token_type_ids")
    return out
