"""The lmsim model zoo: small transformer LMs that lmsim trains itself, offline.

The papers compare families of real checkpoints (teacher and distilled student; masked,
causal and replaced-token objectives; base and fine-tuned; seeds; depths). None can be
downloaded here, so the zoo is the offline stand-in, and a controlled instrument: every
model sees the same Penn Treebank text through the same tokenizer, and only the objective,
the seed, the depth or the distillation changes.

Models (:data:`MODELS`), built in dependency order ``tokenizer -> mlm-s0 -> distil/ft-*``:

================  =========================================================================
``mlm-s{0,1,2}``  BERT masked LM (15 % of tokens selected; 80 % [MASK], 10 % random, 10 % kept)
``mlm-deep-s0``   the masked LM with ``deep_layers`` layers
``clm-s0``        GPT-2 causal LM, same width, depth and vocabulary
``electra-s0``    ELECTRA replaced-token detection (replacements sampled at ``gen_temperature``);
                  the discriminator is saved
``distil-mlm``    DistilBERT-style student of ``mlm-s0`` (half the layers)
``ft-bbcnews``    ``mlm-s0`` fine-tuned on BBC News topics (5 classes)
``ft-finefood``   ``mlm-s0`` fine-tuned on fine-food reviews (great / other)
================  =========================================================================

The seed sets the initialisation, the data order and the masking. Models that share a
seed (``mlm-s0``, ``mlm-deep-s0``, ``clm-s0``, ``electra-s0``) start from the same random
stream, so e.g. ``mlm-s0`` and ``mlm-deep-s0`` begin with the same embeddings: a controlled
"same start, different objective or depth" comparison; ``mlm-s1``/``mlm-s2`` vary the seed.

Every model is an ordinary Hugging Face directory (``save_pretrained``, safetensors, the
tokenizer, ``zoo.json`` with the training facts, ``training_log.csv``) under
``lmsim._cache.cache_dir("zoo", profile)``. Masked, RTD and classification models load with
``AutoModel`` as base encoders (the task head is dropped).

The ``default`` profile trains two models at a time in one-thread worker processes
(``jobs=2``), longest dependency chain first; see :func:`build`.

Command line::

    python -m lmsim.zoo build [--profile smoke|default|gpu] [--only NAME ...] [--jobs N]
    python -m lmsim.zoo list [--profile ...]

References
----------
Devlin et al. (2019), BERT, Sec. 3.1 (masking). Radford et al. (2019), GPT-2.
Clark et al. (2020), ELECTRA, Eq. 1-2 (loss ``L_MLM + lambda L_Disc``, lambda = 50).
Sanh et al. (2019), DistilBERT, Sec. 3 (``L_ce`` with temperature, ``L_mlm``, ``L_cos``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from lmsim._cache import cache_dir
from lmsim.models import _quiet_transformers

__all__ = [
    "MODELS",
    "PROFILES",
    "ZooProfile",
    "build",
    "build_model",
    "cosine_embedding_loss",
    "distillation_loss",
    "get_profile",
    "load_tokenizer",
    "mask_tokens",
    "masked_lm_loss",
    "model_dir",
    "plot_training_curves",
    "rtd_summary",
    "soft_target_cross_entropy",
    "stale_settings",
    "summary",
    "tokenizer_dir",
    "train_tokenizer",
    "wordpiece_vocab",
    "training_log",
]

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
IGNORE_INDEX = -100
_ZOO_JSON = "zoo.json"
_LOG_CSV = "training_log.csv"
_CHECKPOINT = "checkpoint.pt"
# Dense bf16 tensor-core peaks (FLOP/s) for the MFU estimate; unknown devices get no MFU.
_PEAK_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12}


# --------------------------------------------------------------------------------------
# Profiles and the model registry
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZooProfile:
    """Sizes and budgets of one zoo build.

    Every model of a profile shares ``hidden``, ``heads``, ``seq_len`` and the tokenizer;
    the language-model objectives all train for ``steps`` steps of ``batch_size``
    sequences, so they see the same number of tokens.

    Attributes
    ----------
    name : str
        Folder under ``cache_dir("zoo")``.
    vocab_size : int
        WordPiece vocabulary trained on the PTB train split.
    hidden, layers, deep_layers, heads : int
        Width, depth of the standard models, depth of ``mlm-deep-s0``, attention heads.
    seq_len : int
        Tokens per training sequence, ``[CLS]`` included; also the models'
        ``max_position_embeddings`` (so no untrained position is ever exposed).
    batch_size, steps, lr, warmup_frac, weight_decay, dropout : ...
        Optimisation of the language-model objectives (AdamW, linear warm-up and decay).
    ft_epochs, ft_lr, ft_batch_size : ...
        Fine-tuning of the classifiers.
    max_train_lines, max_valid_lines : int or None
        Truncate PTB train / valid (None: all of it).
    max_ft_train, max_ft_test : int or None
        Truncate the classification sets (None: all of them).
    eval_every, n_eval_chunks : int
        Validation perplexity logged every ``eval_every`` steps on ``n_eval_chunks`` chunks.
    checkpoint_every : int
        Steps between resumable checkpoints (model, optimizer, scheduler, RNG, step).
    gen_hidden_ratio : float
        ELECTRA generator width relative to the discriminator (paper: 1/4 to 1/2).
    rtd_weight : float
        ELECTRA's lambda (paper: 50).
    gen_temperature : float
        Replacements are sampled from ``softmax(generator logits / gen_temperature)``:
        the ``temperature`` of ELECTRA's pre-training code (default 1). Above 1 the
        generator proposes rarer, less plausible tokens, an easier task for the
        discriminator. The default zoo needs it: at temperature 1 its 16-wide generator
        reaches unigram quality within ~20 steps, and the 64-wide discriminator never beats
        the constant predictor in 1,500 steps (validation RTD loss 0.408 against 0.408,
        ROC AUC 0.515); at 3 it learns (0.306 against 0.418, AUC 0.853).
        ``benchmarks/study_electra_temperature.py`` reproduces both; measured in this
        repository, not in the paper.
    distil_temperature, distil_alpha_ce, distil_alpha_mlm, distil_alpha_cos : float
        DistilBERT's temperature and loss weights (its training script: 2, 5, 2, 1).
    distil_ce_positions : {"all", "masked"}
        Where the soft-target loss is taken: every real token (DistilBERT's default) or
        only the masked ones (cheaper).
    device : str
        ``"auto"`` (CUDA if available), ``"cpu"``, ``"cuda"``.
    threads : int or None
        CPU threads while this profile trains (restored afterwards); None leaves torch's
        setting. Toy models gain nothing from intra-op threads, and on a busy machine each
        parallel region waits for a descheduled thread.
    jobs : int
        Models :func:`build` trains at once on the CPU, one process each (1 on CUDA).
    bf16, fused_adamw, compile : bool
        CUDA-only speed-ups; on CPU they are switched off and the same code runs.
    """

    name: str
    vocab_size: int = 8000
    hidden: int = 64
    layers: int = 4
    deep_layers: int = 8
    heads: int = 4
    seq_len: int = 64
    batch_size: int = 16
    steps: int = 1500
    lr: float = 3e-3
    warmup_frac: float = 0.06
    weight_decay: float = 0.01
    dropout: float = 0.0
    ft_epochs: float = 2.0
    ft_lr: float = 5e-4
    ft_batch_size: int = 32
    max_train_lines: int | None = None
    max_valid_lines: int | None = None
    max_ft_train: int | None = None
    max_ft_test: int | None = None
    eval_every: int = 250
    n_eval_chunks: int = 64
    checkpoint_every: int = 250
    gen_hidden_ratio: float = 0.25
    rtd_weight: float = 50.0
    gen_temperature: float = 1.0
    distil_temperature: float = 2.0
    distil_alpha_ce: float = 5.0
    distil_alpha_mlm: float = 2.0
    distil_alpha_cos: float = 1.0
    distil_ce_positions: str = "masked"
    device: str = "auto"
    threads: int | None = None
    jobs: int = 1
    bf16: bool = False
    fused_adamw: bool = False
    compile: bool = False

    def __post_init__(self):
        for field in ("vocab_size", "hidden", "layers", "deep_layers", "heads", "batch_size"):
            if getattr(self, field) < 1:
                raise ValueError(f"`{field}` must be >= 1, got {getattr(self, field)}")
        if self.hidden % self.heads:
            raise ValueError(f"`hidden`={self.hidden} must be divisible by `heads`={self.heads}")
        if self.seq_len < 4:
            raise ValueError(f"`seq_len` must be >= 4, got {self.seq_len}")
        if self.steps < 1 or self.checkpoint_every < 1 or self.eval_every < 1:
            raise ValueError("`steps`, `eval_every` and `checkpoint_every` must be >= 1")
        if self.distil_ce_positions not in ("all", "masked"):
            raise ValueError(
                f"`distil_ce_positions` must be 'all' or 'masked', got {self.distil_ce_positions!r}"
            )


PROFILES: dict[str, ZooProfile] = {
    "smoke": ZooProfile(
        name="smoke",
        vocab_size=1000,
        hidden=32,
        layers=2,
        deep_layers=4,
        heads=2,
        # 64 positions, like the default zoo: the chapters' smoke runs feed whole sentences.
        seq_len=64,
        batch_size=16,
        steps=30,
        lr=3e-3,
        max_train_lines=3000,
        max_valid_lines=300,
        max_ft_train=128,
        max_ft_test=128,
        eval_every=10,
        n_eval_chunks=16,
        checkpoint_every=10,
        threads=1,
    ),
    # Two one-thread processes on a 2-core laptop: 11 min 15 s wall for 20.8 min of summed
    # model training clocks (idle machine, `python -m lmsim.zoo build --profile default`).
    "default": ZooProfile(name="default", threads=1, jobs=2, gen_temperature=3.0),
    "gpu": ZooProfile(
        name="gpu",
        vocab_size=8000,
        hidden=512,
        layers=6,
        deep_layers=12,
        heads=8,
        seq_len=128,
        batch_size=128,
        steps=20000,
        lr=5e-4,
        dropout=0.1,
        ft_epochs=3.0,
        ft_lr=5e-5,
        eval_every=1000,
        n_eval_chunks=256,
        checkpoint_every=1000,
        bf16=True,
        fused_adamw=True,
        compile=True,
        distil_ce_positions="all",
    ),
}


@dataclass(frozen=True)
class ModelSpec:
    """What one zoo model is: objective, seed, depth and what it is built from."""

    objective: str  # "mlm" | "clm" | "electra" | "distil" | "finetune"
    seed: int = 0
    deep: bool = False
    parent: str | None = None  # teacher (distil) or pretrained base (finetune)
    task: str | None = None  # classification set (finetune)


MODELS: dict[str, ModelSpec] = {
    "mlm-s0": ModelSpec("mlm", seed=0),
    "mlm-s1": ModelSpec("mlm", seed=1),
    "mlm-s2": ModelSpec("mlm", seed=2),
    "mlm-deep-s0": ModelSpec("mlm", seed=0, deep=True),
    "clm-s0": ModelSpec("clm", seed=0),
    "electra-s0": ModelSpec("electra", seed=0),
    "distil-mlm": ModelSpec("distil", seed=0, parent="mlm-s0"),
    "ft-bbcnews": ModelSpec("finetune", seed=0, parent="mlm-s0", task="bbcnews"),
    "ft-finefood": ModelSpec("finetune", seed=0, parent="mlm-s0", task="finefood"),
}


def get_profile(profile: str | ZooProfile | None = None) -> ZooProfile:
    """Resolve a profile name (None: ``$LMSIM_ZOO_PROFILE``, else ``"default"``)."""
    if isinstance(profile, ZooProfile):
        return profile
    if profile is None:
        profile = os.environ.get("LMSIM_ZOO_PROFILE", "default")
    if profile not in PROFILES:
        raise ValueError(
            f"unknown zoo profile {profile!r}; choose one of {sorted(PROFILES)} "
            f"(or pass a ZooProfile)"
        )
    return PROFILES[profile]


def _check_name(name: str) -> ModelSpec:
    if name not in MODELS:
        raise KeyError(f"unknown zoo model {name!r}; the zoo has {list(MODELS)}")
    return MODELS[name]


def _dependencies(name: str) -> list[str]:
    """``name`` preceded by everything it is built from, parents first."""
    parent = _check_name(name).parent
    return ([*_dependencies(parent)] if parent else []) + [name]


def _resolve_device(profile: ZooProfile) -> torch.device:
    from lmsim.models import resolve_device

    return resolve_device(profile.device)


# --------------------------------------------------------------------------------------
# Data: PTB text, the tokenizer, token streams and chunks
# --------------------------------------------------------------------------------------


def _ptb_lines(split: str, max_lines: int | None) -> list[str]:
    from lmsim.data import load_corpus

    # PTB writes out-of-vocabulary words as the literal `<unk>`; map it onto the
    # tokenizer's [UNK] so it is one token (and a word that can be masked and predicted).
    lines = load_corpus("ptb", split=split, max_docs=max_lines)
    return [line.replace("<unk>", "[UNK]") for line in lines]


def wordpiece_vocab(
    words: dict[str, int], vocab_size: int, subword_frac: float = 0.1
) -> dict[str, int]:
    """A deterministic WordPiece vocabulary from word counts.

    Special tokens, then every character (word-initial and ``##`` continuation), then
    the most frequent ``##`` suffixes of 2-5 characters of the words that do not make it
    (``subword_frac`` of the budget), then whole words by frequency; ties break
    alphabetically. (``tokenizers``' ``WordPieceTrainer`` breaks ties between equally
    frequent merges in hash-map order, so two trainings on the same text can differ.)

    Parameters
    ----------
    words : dict of str to int
        Pre-tokenised, normalised word counts.
    vocab_size : int
    subword_frac : float

    Returns
    -------
    dict of str to int
        Token -> id, specials first (``[PAD]`` = 0).
    """
    chars = sorted({c for w in words for c in w[:1]})
    cont = sorted({"##" + c for w in words for c in w[1:]})
    vocab = [*SPECIAL_TOKENS, *chars, *cont]
    budget = vocab_size - len(vocab)
    if budget < 0:
        raise ValueError(
            f"`vocab_size`={vocab_size} is smaller than the {len(vocab)} special tokens and "
            f"characters of the corpus; use at least {len(vocab)}"
        )
    ranked = sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))
    n_words = budget - int(subword_frac * budget)
    kept = [w for w, _ in ranked if len(w) > 1][:n_words]
    kept_set = set(kept)
    suffixes: dict[str, int] = {}
    for w, n in ranked:
        if w not in kept_set:
            for k in range(2, min(5, len(w) - 1) + 1):
                suffixes["##" + w[-k:]] = suffixes.get("##" + w[-k:], 0) + n
    pieces = sorted(suffixes.items(), key=lambda kv: (-kv[1], kv[0]))
    pieces = [p for p, _ in pieces[: budget - len(kept)]]
    # leftover budget (small corpora) goes to further words
    extra = [w for w, _ in ranked if len(w) > 1 and w not in kept_set]
    extra = extra[: budget - len(kept) - len(pieces)]
    return {tok: i for i, tok in enumerate(dict.fromkeys([*vocab, *kept, *pieces, *extra]))}


def train_tokenizer(lines: Sequence[str], vocab_size: int, model_max_length: int):
    """Build the zoo's lower-casing WordPiece tokenizer from ``lines``, deterministically.

    Parameters
    ----------
    lines : sequence of str
    vocab_size : int
        Vocabulary size, the five special tokens included (see :func:`wordpiece_vocab`).
    model_max_length : int

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        ``[CLS] x [SEP]`` (``[CLS] a [SEP] b [SEP]`` for pairs); ``[CLS]``/``[SEP]`` are also
        the bos/eos tokens, so causal models share the vocabulary.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    counts: dict[str, int] = {}
    for line in lines:
        for part in line.split("[UNK]"):  # [UNK] is a special token, not a word to split
            for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(part)):
                counts[word] = counts.get(word, 0) + 1
    vocab = wordpiece_vocab(counts, vocab_size)
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(SPECIAL_TOKENS)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        bos_token="[CLS]",
        eos_token="[SEP]",
        model_max_length=model_max_length,
        padding_side="right",
    )


def tokenizer_dir(profile: str | ZooProfile | None = None, build: bool = True) -> Path:
    """Folder of the zoo's shared tokenizer (trained on PTB train on first use)."""
    prof = get_profile(profile)
    path = _root(prof) / "tokenizer"
    if (path / "tokenizer.json").exists():
        return path
    if not build:
        raise FileNotFoundError(f"zoo tokenizer not built at {path}; {_build_hint(prof)}")
    tokenizer = train_tokenizer(
        _ptb_lines("train", prof.max_train_lines), prof.vocab_size, prof.seq_len
    )
    with _atomic_dir(path) as tmp:
        tokenizer.save_pretrained(tmp)
    return path


def load_tokenizer(profile: str | ZooProfile | None = None):
    """The zoo's shared ``PreTrainedTokenizerFast`` (built on demand)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir(profile))


def _token_stream(tokenizer, lines: Sequence[str]) -> np.ndarray:
    """Token ids of ``lines`` concatenated, each line followed by ``[SEP]``."""
    # The Rust tokenizer directly: no special tokens, no truncation (nor its warning).
    ids = [
        e.ids
        for e in tokenizer.backend_tokenizer.encode_batch(list(lines), add_special_tokens=False)
    ]
    sep = tokenizer.sep_token_id
    return np.fromiter(
        (t for line in ids for t in (*line, sep)),
        dtype=np.int64,
        count=sum(len(x) + 1 for x in ids),
    )


def make_chunks(stream: np.ndarray, seq_len: int, cls_id: int) -> torch.Tensor:
    """Cut a token stream into ``[CLS]`` + ``seq_len - 1`` consecutive tokens.

    Parameters
    ----------
    stream : ndarray of shape (n_tokens,)
    seq_len : int
    cls_id : int

    Returns
    -------
    Tensor of shape (n_tokens // (seq_len - 1), seq_len)
        The trailing remainder is dropped.
    """
    body = seq_len - 1
    n_chunks = len(stream) // body
    if n_chunks < 1:
        raise ValueError(
            f"the corpus has {len(stream)} tokens, fewer than one chunk of `seq_len`-1={body}; "
            f"use more lines or a smaller seq_len"
        )
    chunks = torch.as_tensor(stream[: n_chunks * body].reshape(n_chunks, body))
    return torch.cat([torch.full((n_chunks, 1), cls_id, dtype=torch.long), chunks], dim=1)


@dataclass
class _LMData:
    tokenizer: object
    train: torch.Tensor  # (n_train_chunks, seq_len)
    valid: torch.Tensor  # (n_valid_chunks, seq_len)
    counts: torch.Tensor  # (vocab,) token counts of the train stream
    special_ids: torch.Tensor  # ids never masked: [PAD] [CLS] [SEP] [MASK]


_LM_DATA: dict[tuple[Path, ZooProfile], _LMData] = {}


def _lm_data(prof: ZooProfile) -> _LMData:
    """Tokenised PTB chunks of a profile, kept in memory while the process lives."""
    key = (_root(prof), prof)
    if key not in _LM_DATA:
        _LM_DATA.clear()  # one profile at a time: the train chunks are tens of MB
        _LM_DATA[key] = _make_lm_data(prof)
    return _LM_DATA[key]


def _make_lm_data(prof: ZooProfile) -> _LMData:
    tokenizer = load_tokenizer(prof)
    train_stream = _token_stream(tokenizer, _ptb_lines("train", prof.max_train_lines))
    valid_stream = _token_stream(tokenizer, _ptb_lines("valid", prof.max_valid_lines))
    counts = torch.bincount(torch.as_tensor(train_stream), minlength=len(tokenizer)).double()
    # PTB's [UNK] is an ordinary word of the corpus, so it stays maskable.
    special = [tokenizer.convert_tokens_to_ids(t) for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]")]
    return _LMData(
        tokenizer=tokenizer,
        train=make_chunks(train_stream, prof.seq_len, tokenizer.cls_token_id),
        valid=make_chunks(valid_stream, prof.seq_len, tokenizer.cls_token_id),
        counts=counts,
        special_ids=torch.tensor(special),
    )


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


def _step_generator(seed: int, step: int, stream: int = 0) -> torch.Generator:
    """A CPU generator that depends only on (seed, step, stream): resumable masking."""
    return torch.Generator().manual_seed(
        int(np.random.default_rng([seed, step, stream]).integers(2**62))
    )


def mask_tokens(
    input_ids: torch.Tensor,
    special_ids: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    generator: torch.Generator,
    mask_prob: float = 0.15,
    replace_mask: float = 0.8,
    replace_random: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: select ``mask_prob`` of the tokens; 80 % [MASK], 10 % random, 10 % kept.

    Parameters
    ----------
    input_ids : LongTensor of shape (batch, seq_len)
    special_ids : LongTensor of shape (n_special,)
        Ids never selected ([PAD], [CLS], [SEP], [MASK]).
    mask_id : int
    vocab_size : int
        Random replacements are drawn uniformly from the non-special ids below it.
    generator : torch.Generator
        CPU generator; the same generator state gives the same masking.
    mask_prob, replace_mask, replace_random : float

    Returns
    -------
    inputs : LongTensor of shape (batch, seq_len)
        The corrupted input.
    labels : LongTensor of shape (batch, seq_len)
        The original id at selected positions, ``-100`` elsewhere.

    References
    ----------
    Devlin et al. (2019), BERT, Sec. 3.1 "Task #1: Masked LM".
    """
    if not 0 < mask_prob <= 1 or replace_mask + replace_random > 1:
        raise ValueError(
            f"need 0 < mask_prob <= 1 and replace_mask + replace_random <= 1, got "
            f"{mask_prob}, {replace_mask}, {replace_random}"
        )
    ids = input_ids.cpu()
    eligible = ~torch.isin(ids, special_ids.cpu())
    if not eligible.any():
        raise ValueError("`input_ids` holds only special tokens: nothing to mask")
    selected = (torch.rand(ids.shape, generator=generator) < mask_prob) & eligible
    if not selected.any():  # a tiny batch may draw no position; keep the loss defined
        selected.view(-1)[eligible.view(-1).nonzero()[0]] = True
    labels = torch.where(selected, ids, torch.full_like(ids, IGNORE_INDEX))
    action = torch.rand(ids.shape, generator=generator)
    to_mask = selected & (action < replace_mask)
    to_random = selected & (action >= replace_mask) & (action < replace_mask + replace_random)
    allowed = torch.arange(vocab_size)
    allowed = allowed[~torch.isin(allowed, special_ids.cpu())]
    random_ids = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
    inputs = torch.where(to_mask, torch.full_like(ids, mask_id), ids)
    inputs = torch.where(to_random, random_ids, inputs)
    return inputs.to(input_ids.device), labels.to(input_ids.device)


def unigram_log_probs(counts: torch.Tensor, exclude_ids: Sequence[int] = ()) -> torch.Tensor:
    """Add-one smoothed unigram log-probabilities from training counts.

    Parameters
    ----------
    counts : Tensor of shape (vocab,)
    exclude_ids : sequence of int
        Ids that get probability 0 (log -inf); the rest is renormalised.

    Returns
    -------
    Tensor of shape (vocab,), float64
    """
    smoothed = counts.double() + 1.0
    smoothed[list(exclude_ids)] = 0.0
    return (smoothed / smoothed.sum()).log()


# --------------------------------------------------------------------------------------
# Losses (pure functions)
# --------------------------------------------------------------------------------------


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over positions whose label is not ``-100``.

    Parameters
    ----------
    logits : Tensor of shape (..., vocab)
    labels : LongTensor of shape (...)
    """
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE_INDEX
    )


def soft_target_cross_entropy(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 2.0
) -> torch.Tensor:
    """DistilBERT's ``L_ce``: ``-T^2 mean_i sum_v p_t(v|i; T) log p_s(v|i; T)``.

    ``p(.; T) = softmax(logits / T)``. The ``T^2`` factor keeps the gradient scale of the
    soft targets independent of ``T`` (Hinton et al., 2015).

    Parameters
    ----------
    student_logits, teacher_logits : Tensor of shape (n_positions, vocab)
    temperature : float

    Returns
    -------
    Tensor, scalar

    Notes
    -----
    DistilBERT's code uses ``KLDivLoss(reduction="batchmean")``, which differs from this
    cross-entropy by the teacher's entropy, a constant with the same gradient.

    References
    ----------
    Sanh et al. (2019), DistilBERT, Sec. 3; Hinton et al. (2015), Sec. 2.
    """
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"student and teacher logits must have the same shape, got "
            f"{tuple(student_logits.shape)} and {tuple(teacher_logits.shape)}"
        )
    if temperature <= 0:
        raise ValueError(f"`temperature` must be > 0, got {temperature}")
    log_p_student = F.log_softmax(student_logits.float() / temperature, dim=-1)
    p_teacher = F.softmax(teacher_logits.float() / temperature, dim=-1)
    return -(p_teacher * log_p_student).sum(-1).mean() * temperature**2


def cosine_embedding_loss(
    student_hidden: torch.Tensor, teacher_hidden: torch.Tensor
) -> torch.Tensor:
    """DistilBERT's ``L_cos``: ``mean_i (1 - cos(h_s,i, h_t,i))``.

    Parameters
    ----------
    student_hidden, teacher_hidden : Tensor of shape (n_positions, hidden)
        Last hidden states at real (non-padding) tokens.
    """
    return (
        1.0 - F.cosine_similarity(student_hidden.float(), teacher_hidden.float(), dim=-1)
    ).mean()


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    labels: torch.Tensor,
    student_hidden: torch.Tensor,
    teacher_hidden: torch.Tensor,
    temperature: float = 2.0,
    alpha_ce: float = 5.0,
    alpha_mlm: float = 2.0,
    alpha_cos: float = 1.0,
) -> dict[str, torch.Tensor]:
    """DistilBERT's loss ``alpha_ce L_ce + alpha_mlm L_mlm + alpha_cos L_cos``.

    Parameters
    ----------
    student_logits, teacher_logits : Tensor of shape (n_positions, vocab)
        At the positions where the soft-target loss is taken.
    labels : LongTensor of shape (n_positions,)
        MLM labels at those positions (``-100`` where not masked).
    student_hidden, teacher_hidden : Tensor of shape (n_tokens, hidden)
        Last hidden states at real tokens.
    temperature, alpha_ce, alpha_mlm, alpha_cos : float
        DistilBERT's training-script defaults.

    Returns
    -------
    dict
        ``loss`` and its terms ``ce``, ``mlm``, ``cos`` (unweighted).
    """
    ce = soft_target_cross_entropy(student_logits, teacher_logits, temperature)
    mlm = masked_lm_loss(student_logits, labels)
    cos = cosine_embedding_loss(student_hidden, teacher_hidden)
    return {
        "loss": alpha_ce * ce + alpha_mlm * mlm + alpha_cos * cos,
        "ce": ce,
        "mlm": mlm,
        "cos": cos,
    }


def rtd_loss(
    disc_logits: torch.Tensor, is_replaced: torch.Tensor, real: torch.Tensor
) -> torch.Tensor:
    """ELECTRA's discriminator loss: mean binary cross-entropy over real tokens.

    Parameters
    ----------
    disc_logits : Tensor of shape (batch, seq_len)
    is_replaced : BoolTensor of shape (batch, seq_len)
    real : BoolTensor of shape (batch, seq_len)
        Tokens that count (not padding).
    """
    return F.binary_cross_entropy_with_logits(disc_logits[real].float(), is_replaced[real].float())


# --------------------------------------------------------------------------------------
# Model construction
# --------------------------------------------------------------------------------------


def _bert_config(prof: ZooProfile, vocab_size: int, n_layers: int, **extra):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=prof.hidden,
        num_hidden_layers=n_layers,
        num_attention_heads=prof.heads,
        intermediate_size=4 * prof.hidden,
        max_position_embeddings=prof.seq_len,
        hidden_dropout_prob=prof.dropout,
        attention_probs_dropout_prob=prof.dropout,
        pad_token_id=0,
        **extra,
    )


def _new_model(name: str, prof: ZooProfile, tokenizer) -> nn.Module:
    spec = MODELS[name]
    vocab = len(tokenizer)
    torch.manual_seed(spec.seed)
    if spec.objective == "mlm":
        from transformers import BertForMaskedLM

        n_layers = prof.deep_layers if spec.deep else prof.layers
        return BertForMaskedLM(_bert_config(prof, vocab, n_layers))
    if spec.objective == "clm":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(
            vocab_size=vocab,
            n_embd=prof.hidden,
            n_layer=prof.layers,
            n_head=prof.heads,
            n_positions=prof.seq_len,
            resid_pdrop=prof.dropout,
            embd_pdrop=prof.dropout,
            attn_pdrop=prof.dropout,
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        return GPT2LMHeadModel(config)
    raise ValueError(f"{name!r} is not built by _new_model")  # pragma: no cover


def _electra_pair(prof: ZooProfile, tokenizer, seed: int):
    """Discriminator and generator sharing the token/position embeddings (ELECTRA Sec. 3.2)."""
    from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

    vocab = len(tokenizer)
    torch.manual_seed(seed)
    common = dict(
        vocab_size=vocab,
        embedding_size=prof.hidden,
        max_position_embeddings=prof.seq_len,
        hidden_dropout_prob=prof.dropout,
        attention_probs_dropout_prob=prof.dropout,
        num_hidden_layers=prof.layers,
        pad_token_id=0,
    )
    disc = ElectraForPreTraining(
        ElectraConfig(
            hidden_size=prof.hidden,
            num_attention_heads=prof.heads,
            intermediate_size=4 * prof.hidden,
            **common,
        )
    )
    gen_heads = max(1, round(prof.heads * prof.gen_hidden_ratio))
    gen_hidden = max(gen_heads, round(prof.hidden * prof.gen_hidden_ratio / gen_heads) * gen_heads)
    gen = ElectraForMaskedLM(
        ElectraConfig(
            hidden_size=gen_hidden,
            num_attention_heads=gen_heads,
            intermediate_size=4 * gen_hidden,
            **common,
        )
    )
    gen.electra.embeddings = disc.electra.embeddings
    gen.generator_lm_head.weight = disc.electra.embeddings.word_embeddings.weight
    return disc, gen


def _distil_student(teacher, prof: ZooProfile):
    """Half the teacher's layers, initialised from its layers 0, 2, 4, ... (DistilBERT Sec. 3)."""
    from transformers import BertForMaskedLM

    config = teacher.config.__class__.from_dict(teacher.config.to_dict())
    keep = list(range(0, teacher.config.num_hidden_layers, 2))
    config.num_hidden_layers = len(keep)
    config.hidden_dropout_prob = prof.dropout
    config.attention_probs_dropout_prob = prof.dropout
    student = BertForMaskedLM(config)
    state = {}
    for key, value in teacher.state_dict().items():
        if ".encoder.layer." in key:
            prefix, rest = key.split(".encoder.layer.", 1)
            index, tail = rest.split(".", 1)
            if int(index) not in keep:
                continue
            key = f"{prefix}.encoder.layer.{keep.index(int(index))}.{tail}"
        state[key] = value
    student.load_state_dict(state, strict=False)
    student.tie_weights()
    return student, keep


def _n_params(modules: Sequence[nn.Module]) -> int:
    seen = {id(p): p.numel() for m in modules for p in m.parameters()}
    return int(sum(seen.values()))


def _flops_per_token(n_layers: int, hidden: int, seq_len: int) -> float:
    """Training FLOPs per token, ``6 N + 12 L T d`` with N the non-embedding parameters.

    The vocabulary projection is left out (it runs on a fraction of the positions for the
    masked objectives), so MFU is a lower bound. Chowdhery et al. (2022), App. B.
    """
    n_non_embedding = 12 * n_layers * hidden**2
    return 6.0 * n_non_embedding + 12.0 * n_layers * seq_len * hidden


def _mfu(tokens_per_s: float, flops_per_token: float, device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    gpu = torch.cuda.get_device_name(device)
    peak = next((v for k, v in _PEAK_FLOPS.items() if k in gpu), None)
    return None if peak is None else tokens_per_s * flops_per_token / peak


# --------------------------------------------------------------------------------------
# The resumable training loop
# --------------------------------------------------------------------------------------


@dataclass
class _Run:
    """One training run: what the generic loop needs to know."""

    modules: dict[str, nn.Module]
    loss_fn: Callable[[int], tuple[torch.Tensor, int, dict]]  # step -> loss, n_tokens, extras
    eval_fn: Callable[[], dict] | None
    total_steps: int
    lr: float
    flops_per_token: float


def _optimizer(modules: Sequence[nn.Module], prof: ZooProfile, lr: float, device):
    params = {id(p): p for m in modules for p in m.parameters() if p.requires_grad}
    decay = [p for p in params.values() if p.ndim >= 2]
    no_decay = [p for p in params.values() if p.ndim < 2]
    groups = [
        {"params": decay, "weight_decay": prof.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    fused = prof.fused_adamw and device.type == "cuda"
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98), eps=1e-6, fused=fused or None)


def _schedule(optimizer, total_steps: int, warmup_frac: float):
    warmup = max(1, int(round(warmup_frac * total_steps)))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _atomic_save(obj, path: Path) -> None:
    # The folder may have been removed by a concurrent build that finished first.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _rng_state(device: torch.device) -> dict:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def _train(
    run: _Run,
    prof: ZooProfile,
    work: Path,
    device: torch.device,
    desc: str,
    progress: bool,
    stop_after: int | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> dict:
    """Run (or resume) ``run`` to ``total_steps``; checkpoints under ``work``.

    Returns a dict with ``log`` (list of rows), ``train_seconds``, ``tokens``, ``steps``
    and ``finished`` (False when stopped early by ``stop_after``, a testing hook that
    simulates an interruption right after a checkpoint). ``on_step(step, total_steps)``
    is called after every step (a parallel build's progress report).
    """
    modules = list(run.modules.values())
    optimizer = _optimizer(modules, prof, run.lr, device)
    scheduler = _schedule(optimizer, run.total_steps, prof.warmup_frac)
    ckpt_path = work / _CHECKPOINT
    state = {"step": 0, "log": [], "train_seconds": 0.0, "tokens": 0}
    if ckpt_path.exists():
        ckpt = torch.load(ckpt_path, map_location=device, weights_only=False)
        for key, module in run.modules.items():
            module.load_state_dict(ckpt["modules"][key])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        _set_rng_state(ckpt["rng"], device)
        state = {k: ckpt[k] for k in state}
    for module in modules:
        module.train()
    use_bf16 = prof.bf16 and device.type == "cuda"
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
                f"{desc}: loss is {loss.item()} at step {step}; lower the profile's `lr`"
            )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
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
            state["step"] % prof.eval_every == 0 or state["step"] == run.total_steps
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
        if state["step"] % prof.checkpoint_every == 0 and state["step"] < run.total_steps:
            _atomic_save(
                {
                    "modules": {k: m.state_dict() for k, m in run.modules.items()},
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "rng": _rng_state(device),
                    **state,
                },
                ckpt_path,
            )
            if stop_after is not None and state["step"] >= stop_after:
                bar.close()
                return {**state, "finished": False}
    bar.close()
    for module in modules:
        module.eval()
    return {**state, "finished": True}


# --------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------


def _eval_generator(seed: int = 12345) -> torch.Generator:
    # The same masked positions for every model of a profile: comparable perplexities.
    return torch.Generator().manual_seed(seed)


@torch.no_grad()
def _masked_ppl(
    predict: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    chunks: torch.Tensor,
    data: _LMData,
    batch_size: int,
    device,
) -> dict:
    """Perplexity of masked tokens and of the unigram distribution on the same positions.

    ``predict(inputs, labels)`` returns logits of shape (n_masked, vocab) at ``labels != -100``.
    """
    log_uni = unigram_log_probs(data.counts, data.special_ids.tolist())
    gen = _eval_generator()
    nll, nll_uni, n = 0.0, 0.0, 0
    for start in range(0, len(chunks), batch_size):
        batch = chunks[start : start + batch_size]
        inputs, labels = mask_tokens(
            batch, data.special_ids, data.tokenizer.mask_token_id, len(data.tokenizer), gen
        )
        targets = labels[labels != IGNORE_INDEX]
        logits = predict(inputs.to(device), labels.to(device)).float()
        nll += F.cross_entropy(logits, targets.to(device), reduction="sum").item()
        nll_uni += -log_uni[targets].sum().item()
        n += len(targets)
    return {"val_ppl": math.exp(nll / n), "unigram_ppl": math.exp(nll_uni / n), "n_val_tokens": n}


@torch.no_grad()
def _causal_ppl(model, chunks: torch.Tensor, data: _LMData, batch_size: int, device) -> dict:
    """Next-token perplexity over every position after ``[CLS]``, and the unigram's."""
    log_uni = unigram_log_probs(data.counts, [data.tokenizer.pad_token_id])
    nll, nll_uni, n = 0.0, 0.0, 0
    for start in range(0, len(chunks), batch_size):
        batch = chunks[start : start + batch_size]
        logits = model(input_ids=batch.to(device)).logits[:, :-1].float()
        targets = batch[:, 1:]
        nll += F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1).to(device), reduction="sum"
        ).item()
        nll_uni += -log_uni[targets].sum().item()
        n += targets.numel()
    return {"val_ppl": math.exp(nll / n), "unigram_ppl": math.exp(nll_uni / n), "n_val_tokens": n}


# --------------------------------------------------------------------------------------
# One run per objective
# --------------------------------------------------------------------------------------


def _mlm_logits(model, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """BertForMaskedLM logits at the masked positions only (the vocabulary head is costly)."""
    hidden = model.bert(input_ids=inputs, attention_mask=inputs.ne(0).long()).last_hidden_state
    return model.cls(hidden[labels != IGNORE_INDEX])


def _lm_batch(data: _LMData, prof: ZooProfile, seed: int, step: int, device):
    idx = batch_indices(len(data.train), prof.batch_size, step, seed)
    return data.train[torch.as_tensor(idx)].to(device)


def _mlm_run(model, data: _LMData, prof: ZooProfile, seed: int, device) -> _Run:
    def loss_fn(step):
        batch = _lm_batch(data, prof, seed, step, device)
        inputs, labels = mask_tokens(
            batch,
            data.special_ids,
            data.tokenizer.mask_token_id,
            len(data.tokenizer),
            _step_generator(seed, step),
        )
        loss = F.cross_entropy(
            _mlm_logits(model, inputs, labels).float(), labels[labels != IGNORE_INDEX]
        )
        return loss, batch.numel(), {}

    def eval_fn():
        out = _masked_ppl(
            lambda x, y: _mlm_logits(model, x, y),
            data.valid[: prof.n_eval_chunks],
            data,
            prof.batch_size,
            device,
        )
        return {"val_ppl": out["val_ppl"], "unigram_ppl": out["unigram_ppl"]}

    n_layers = model.config.num_hidden_layers
    return _Run(
        {"model": model},
        loss_fn,
        eval_fn,
        prof.steps,
        prof.lr,
        _flops_per_token(n_layers, prof.hidden, prof.seq_len),
    )


def _clm_run(model, data: _LMData, prof: ZooProfile, seed: int, device) -> _Run:
    def loss_fn(step):
        batch = _lm_batch(data, prof, seed, step, device)
        logits = model(input_ids=batch).logits[:, :-1]
        return masked_lm_loss(logits, batch[:, 1:]), batch.numel(), {}

    def eval_fn():
        out = _causal_ppl(model, data.valid[: prof.n_eval_chunks], data, prof.batch_size, device)
        return {"val_ppl": out["val_ppl"], "unigram_ppl": out["unigram_ppl"]}

    return _Run(
        {"model": model},
        loss_fn,
        eval_fn,
        prof.steps,
        prof.lr,
        _flops_per_token(prof.layers, prof.hidden, prof.seq_len),
    )


def _electra_forward(
    disc, gen, batch, data: _LMData, generator: torch.Generator, temperature: float = 1.0
) -> dict:
    """One ELECTRA pass: generator MLM on a masked batch, discriminator on its samples.

    Replacements are drawn from ``softmax(logits / temperature)`` of the generator.
    """
    inputs, labels = mask_tokens(
        batch, data.special_ids, data.tokenizer.mask_token_id, len(data.tokenizer), generator
    )
    selected = labels != IGNORE_INDEX
    attention = batch.ne(data.tokenizer.pad_token_id).long()
    gen_hidden = gen.electra(input_ids=inputs, attention_mask=attention).last_hidden_state
    gen_logits = gen.generator_lm_head(gen.generator_predictions(gen_hidden[selected]))
    gen_loss = F.cross_entropy(gen_logits.float(), labels[selected])
    with torch.no_grad():
        # Sample replacements from the generator (not its argmax), on the CPU generator so
        # the sample is a function of the seed and step.
        probs = F.softmax(gen_logits.detach().float() / temperature, dim=-1).cpu()
        sampled = torch.multinomial(probs, 1, generator=generator).squeeze(1).to(batch.device)
    corrupted = batch.clone()
    corrupted[selected] = sampled
    is_replaced = corrupted.ne(batch)
    disc_logits = disc(input_ids=corrupted, attention_mask=attention).logits
    real = ~torch.isin(batch, data.special_ids.to(batch.device))
    return {
        "gen_loss": gen_loss,
        "gen_logits": gen_logits,
        "targets": labels[selected],
        "rtd_loss": rtd_loss(disc_logits, is_replaced, real),
        "is_replaced": is_replaced[real],
        "disc_logits": disc_logits[real].detach(),
    }


def _electra_run(disc, gen, data: _LMData, prof: ZooProfile, seed: int, device) -> _Run:
    def loss_fn(step):
        batch = _lm_batch(data, prof, seed, step, device)
        out = _electra_forward(
            disc, gen, batch, data, _step_generator(seed, step), prof.gen_temperature
        )
        loss = out["gen_loss"] + prof.rtd_weight * out["rtd_loss"]
        return (
            loss,
            batch.numel(),
            {"gen_loss": out["gen_loss"].item(), "rtd_loss": out["rtd_loss"].item()},
        )

    def eval_fn():
        return _electra_eval(disc, gen, data.valid[: prof.n_eval_chunks], data, prof, device)

    gen_layers = gen.config.num_hidden_layers
    flops = _flops_per_token(prof.layers, prof.hidden, prof.seq_len) + _flops_per_token(
        gen_layers, gen.config.hidden_size, prof.seq_len
    )
    return _Run({"disc": disc, "gen": gen}, loss_fn, eval_fn, prof.steps, prof.lr, flops)


def rtd_summary(disc_logits: torch.Tensor, is_replaced: torch.Tensor) -> dict:
    """How well a discriminator detects replaced tokens, beside the constant baseline.

    Accuracy alone misleads here: with ~15 % replaced tokens, a detector whose posterior
    never crosses 1/2 scores exactly the base rate however much it knows. The loss
    against the best constant predictor (the binary entropy of the replaced fraction) and
    the ROC AUC (0.5 = no information) show what it learned.

    Parameters
    ----------
    disc_logits : Tensor of shape (n_tokens,)
    is_replaced : BoolTensor of shape (n_tokens,)

    Returns
    -------
    dict
        ``rtd_accuracy``, ``rtd_baseline`` (accuracy of always "original"), ``rtd_loss``
        (mean binary cross-entropy, nats), ``rtd_baseline_loss`` (entropy of the replaced
        fraction, nats) and ``rtd_auc``.
    """
    from sklearn.metrics import roc_auc_score

    logits, labels = disc_logits.double().cpu(), is_replaced.cpu()
    frac = labels.double().mean().item()
    entropy = (
        0.0 if frac in (0.0, 1.0) else -(frac * math.log(frac) + (1 - frac) * math.log1p(-frac))
    )
    both = 0 < labels.sum() < len(labels)
    return {
        "rtd_accuracy": ((logits > 0) == labels).double().mean().item(),
        "rtd_baseline": 1.0 - frac,
        "rtd_loss": F.binary_cross_entropy_with_logits(logits, labels.double()).item(),
        "rtd_baseline_loss": entropy,
        "rtd_auc": float(roc_auc_score(labels.numpy(), logits.numpy())) if both else math.nan,
    }


@torch.no_grad()
def _electra_eval(disc, gen, chunks, data: _LMData, prof: ZooProfile, device) -> dict:
    gen_rng = _eval_generator()
    log_uni = unigram_log_probs(data.counts, data.special_ids.tolist())
    nll = nll_uni = 0.0
    n = 0
    logits, labels = [], []
    for start in range(0, len(chunks), prof.batch_size):
        batch = chunks[start : start + prof.batch_size].to(device)
        out = _electra_forward(disc, gen, batch, data, gen_rng, prof.gen_temperature)
        nll += F.cross_entropy(out["gen_logits"].float(), out["targets"], reduction="sum").item()
        nll_uni += -log_uni[out["targets"].cpu()].sum().item()
        n += len(out["targets"])
        logits.append(out["disc_logits"])
        labels.append(out["is_replaced"])
    return {
        "val_ppl": math.exp(nll / n),
        "unigram_ppl": math.exp(nll_uni / n),
        **rtd_summary(torch.cat(logits), torch.cat(labels)),
    }


def _distil_run(student, teacher, data: _LMData, prof: ZooProfile, seed: int, device) -> _Run:
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)

    def loss_fn(step):
        batch = _lm_batch(data, prof, seed, step, device)
        inputs, labels = mask_tokens(
            batch,
            data.special_ids,
            data.tokenizer.mask_token_id,
            len(data.tokenizer),
            _step_generator(seed, step),
        )
        attention = batch.ne(data.tokenizer.pad_token_id)
        positions = labels != IGNORE_INDEX if prof.distil_ce_positions == "masked" else attention
        s_hidden = student.bert(input_ids=inputs, attention_mask=attention.long()).last_hidden_state
        with torch.no_grad():
            t_hidden = teacher.bert(
                input_ids=inputs, attention_mask=attention.long()
            ).last_hidden_state
            t_logits = teacher.cls(t_hidden[positions])
        terms = distillation_loss(
            student.cls(s_hidden[positions]),
            t_logits,
            labels[positions],
            s_hidden[attention],
            t_hidden[attention],
            temperature=prof.distil_temperature,
            alpha_ce=prof.distil_alpha_ce,
            alpha_mlm=prof.distil_alpha_mlm,
            alpha_cos=prof.distil_alpha_cos,
        )
        extras = {k: v.item() for k, v in terms.items() if k != "loss"}
        return terms["loss"], batch.numel(), extras

    def eval_fn():
        out = _masked_ppl(
            lambda x, y: _mlm_logits(student, x, y),
            data.valid[: prof.n_eval_chunks],
            data,
            prof.batch_size,
            device,
        )
        return {"val_ppl": out["val_ppl"], "unigram_ppl": out["unigram_ppl"]}

    n_layers = student.config.num_hidden_layers
    # The teacher's forward pass costs a third of its training FLOPs.
    flops = (
        _flops_per_token(n_layers, prof.hidden, prof.seq_len)
        + _flops_per_token(teacher.config.num_hidden_layers, prof.hidden, prof.seq_len) / 3
    )
    return _Run({"model": student}, loss_fn, eval_fn, prof.steps, prof.lr, flops)


def _classification_data(task: str, tokenizer, prof: ZooProfile) -> dict:
    from lmsim.data import load_classification

    sets = load_classification(task, seed=0)
    out = {"label_names": list(sets["label_names"])}
    for part, cap in (("train", prof.max_ft_train), ("test", prof.max_ft_test)):
        texts = list(sets[f"{part}_texts"])[:cap]
        labels = list(sets[f"{part}_labels"])[:cap]
        enc = tokenizer(texts, truncation=True, max_length=prof.seq_len)["input_ids"]
        out[part] = (enc, torch.tensor(labels, dtype=torch.long))
    return out


def _pad(seqs: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    width = max(len(s) for s in seqs)
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


def _finetune_run(model, cls_data: dict, tokenizer, prof: ZooProfile, seed: int, device) -> _Run:
    enc, labels = cls_data["train"]
    pad_id = tokenizer.pad_token_id
    total = max(1, math.ceil(prof.ft_epochs * len(enc) / prof.ft_batch_size))

    def loss_fn(step):
        idx = batch_indices(len(enc), min(prof.ft_batch_size, len(enc)), step, seed)
        ids = _pad([enc[i] for i in idx], pad_id).to(device)
        logits = model(input_ids=ids, attention_mask=ids.ne(pad_id).long()).logits
        return (
            F.cross_entropy(logits.float(), labels[idx].to(device)),
            int(ids.ne(pad_id).sum()),
            {},
        )

    return _Run(
        {"model": model},
        loss_fn,
        None,
        total,
        prof.ft_lr,
        _flops_per_token(prof.layers, prof.hidden, prof.seq_len),
    )


@torch.no_grad()
def _classification_accuracy(
    model, enc, labels, pad_id: int, device, batch_size: int = 64
) -> float:
    correct = 0
    for start in range(0, len(enc), batch_size):
        ids = _pad(enc[start : start + batch_size], pad_id).to(device)
        pred = model(input_ids=ids, attention_mask=ids.ne(pad_id).long()).logits.argmax(-1)
        correct += int((pred.cpu() == labels[start : start + batch_size]).sum())
    return correct / len(enc)


# --------------------------------------------------------------------------------------
# Building, caching, loading
# --------------------------------------------------------------------------------------


def _root(prof: ZooProfile) -> Path:
    return cache_dir("zoo", prof.name)


def _build_hint(prof: ZooProfile) -> str:
    return (
        f"build it with `python -m lmsim.zoo build --profile {prof.name}` "
        f"or model_dir(..., build=True)"
    )


class _atomic_dir:
    """Write a folder under a temporary name, rename it into place on success."""

    def __init__(self, path: Path):
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")

    def __enter__(self) -> Path:
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir(parents=True)
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return False
        if self.path.exists():  # built concurrently by another process: keep theirs
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            os.replace(self.tmp, self.path)
        return False


def _is_built(path: Path) -> bool:
    return (path / _ZOO_JSON).exists()


# Settings that change how a build runs, not what it trains. (Thread counts could change
# the last bits of CPU reductions; the default zoo built with 1 and with 2 threads gave
# bit-identical safetensors here.)
_SCHEDULING_SETTINGS = ("jobs", "threads")


def stale_settings(name: str, profile: str | ZooProfile | None = None) -> dict:
    """Profile settings a cached model was built with that differ from the profile's now.

    Returns
    -------
    dict
        Setting -> ``(built with, profile now)``; empty when the model is current (or
        not built). ``jobs`` and ``threads`` are ignored: they schedule the work.
    """
    prof = get_profile(profile)
    _check_name(name)
    path = _root(prof) / name
    if not _is_built(path):
        return {}
    built = json.loads((path / _ZOO_JSON).read_text()).get("profile_settings", {})
    now = dataclasses.asdict(prof)
    return {
        key: (built.get(key, "<missing>"), value)
        for key, value in now.items()
        if key not in _SCHEDULING_SETTINGS and built.get(key, "<missing>") != value
    }


def _warn_if_stale(name: str, prof: ZooProfile) -> None:
    diff = stale_settings(name, prof)
    if diff:
        shown = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in diff.items())
        warnings.warn(
            f"zoo model {name!r} (profile {prof.name!r}) was built with other settings "
            f"({shown}); rebuild it with `python -m lmsim.zoo build --profile {prof.name} "
            f"--only {name} --rebuild`",
            stacklevel=3,
        )


def _children(name: str) -> list[str]:
    """The models built directly from ``name``."""
    return [c for c, spec in MODELS.items() if spec.parent == name]


def _dependents(name: str) -> list[str]:
    """Every model built from ``name``, directly or not."""
    return [d for c in _children(name) for d in [c, *_dependents(c)]]


def model_dir(name: str, profile: str | ZooProfile | None = None, build: bool = True) -> Path:
    """Folder of zoo model ``name``, built (with what it depends on) if missing.

    Parameters
    ----------
    name : str
        A key of :data:`MODELS`, e.g. ``"mlm-s0"``.
    profile : str or ZooProfile, optional
        None: ``$LMSIM_ZOO_PROFILE``, else ``"default"``.
    build : bool
        Train the model when it is not cached; otherwise raise ``FileNotFoundError``.

    Returns
    -------
    Path
        A Hugging Face model directory (config, safetensors, tokenizer, ``zoo.json``).
    """
    _check_name(name)
    prof = get_profile(profile)
    path = _root(prof) / name
    if _is_built(path):
        _warn_if_stale(name, prof)
        return path
    if not build:
        raise FileNotFoundError(
            f"zoo model {name!r} (profile {prof.name!r}) is not built; {_build_hint(prof)}"
        )
    return build_model(name, prof)


def build_model(
    name: str,
    profile: str | ZooProfile | None = None,
    progress: bool = True,
    _stop_after: int | None = None,
    _on_step: Callable[[int, int], None] | None = None,
) -> Path:
    """Train zoo model ``name`` (and its parents) unless cached; resume from a checkpoint.

    Parameters
    ----------
    name : str
    profile : str or ZooProfile, optional
    progress : bool
        tqdm bars with loss and tokens/s.

    Returns
    -------
    Path
        The finished model directory.
    """
    spec = _check_name(name)
    prof = get_profile(profile)
    path = _root(prof) / name
    if _is_built(path):
        return path
    if spec.parent is not None:
        build_model(spec.parent, prof, progress=progress)
    device = _resolve_device(prof)
    work = _root(prof) / f".{name}.partial"
    work.mkdir(parents=True, exist_ok=True)
    builder = _finetune_build if spec.objective == "finetune" else _lm_build
    threads_before = torch.get_num_threads()
    if prof.threads:
        torch.set_num_threads(prof.threads)
    try:
        result = builder(name, spec, prof, device, work, progress, _stop_after, _on_step)
    finally:
        torch.set_num_threads(threads_before)
    if result is None:  # interrupted on purpose (tests)
        return work
    model, tokenizer, facts, log = result
    with _atomic_dir(path) as tmp, _quiet_transformers(True):
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        pd.DataFrame(log).to_csv(tmp / _LOG_CSV, index=False)
        (tmp / _ZOO_JSON).write_text(json.dumps(facts, indent=2, default=str))
    shutil.rmtree(work, ignore_errors=True)
    return path


def _common_facts(name, spec, prof, device, trained: dict, run: _Run, modules) -> dict:
    tokens_per_s = trained["tokens"] / max(trained["train_seconds"], 1e-9)
    return {
        "name": name,
        "objective": spec.objective,
        "seed": spec.seed,
        "profile": prof.name,
        "steps": trained["step"],
        "batch_size": prof.batch_size,
        "seq_len": prof.seq_len,
        "tokens_seen": trained["tokens"],
        "params": _n_params(modules),
        "train_seconds": round(trained["train_seconds"], 3),
        "tokens_per_s": round(tokens_per_s, 1),
        "mfu": _mfu(tokens_per_s, run.flops_per_token, device),
        "device": str(device),
        "torch": torch.__version__,
        "profile_settings": dataclasses.asdict(prof),
    }


def _lm_build(name, spec, prof, device, work, progress, stop_after, on_step):
    data = _lm_data(prof)
    tokenizer = data.tokenizer
    facts: dict = {}
    if spec.objective in ("mlm", "clm"):
        model = _new_model(name, prof, tokenizer).to(device)
        maybe_compile = model.bert if spec.objective == "mlm" else model.transformer
        run = (_mlm_run if spec.objective == "mlm" else _clm_run)(
            model, data, prof, spec.seed, device
        )
        saved, modules = model, [model]
    elif spec.objective == "electra":
        disc, gen = _electra_pair(prof, tokenizer, spec.seed)
        disc, gen = disc.to(device), gen.to(device)
        maybe_compile = disc.electra
        run = _electra_run(disc, gen, data, prof, spec.seed, device)
        saved, modules = disc, [disc]
        facts["generator"] = {
            "hidden": gen.config.hidden_size,
            "heads": gen.config.num_attention_heads,
            "params": _n_params([gen]),
        }
    elif spec.objective == "distil":
        from transformers import BertForMaskedLM

        with _quiet_transformers(True):
            teacher = BertForMaskedLM.from_pretrained(_root(prof) / spec.parent).to(device)
        torch.manual_seed(spec.seed)
        student, kept = _distil_student(teacher, prof)
        student = student.to(device)
        maybe_compile = student.bert
        run = _distil_run(student, teacher, data, prof, spec.seed, device)
        saved, modules = student, [student]
        facts.update(teacher=spec.parent, teacher_layers_kept=kept)
    else:  # pragma: no cover
        raise ValueError(spec.objective)
    if prof.compile and device.type == "cuda":
        maybe_compile.compile()
    trained = _train(run, prof, work, device, name, progress, stop_after, on_step)
    if not trained["finished"]:
        return None
    facts.update(_common_facts(name, spec, prof, device, trained, run, modules))
    if spec.objective == "electra":
        final = _electra_eval(disc, gen, data.valid, data, prof, device)
        facts.update(final, val_ppl_of="generator (masked tokens)")
    elif spec.objective == "clm":
        final = _causal_ppl(saved, data.valid, data, prof.batch_size, device)
        facts.update(final, val_ppl_of="next token")
    else:
        final = _masked_ppl(
            lambda x, y: _mlm_logits(saved, x, y), data.valid, data, prof.batch_size, device
        )
        facts.update(final, val_ppl_of="masked tokens")
    facts.update(_architecture(saved))
    return saved, tokenizer, facts, trained["log"]


def _finetune_build(name, spec, prof, device, work, progress, stop_after, on_step):
    from transformers import AutoTokenizer, BertForSequenceClassification

    base = _root(prof) / spec.parent
    tokenizer = AutoTokenizer.from_pretrained(base)
    cls_data = _classification_data(spec.task, tokenizer, prof)
    label_names = cls_data["label_names"]
    torch.manual_seed(spec.seed)
    # Quiet: transformers reports the MLM head as unused and the classifier as new, as meant.
    with _quiet_transformers(True):
        model = BertForSequenceClassification.from_pretrained(
            base,
            num_labels=len(label_names),
            id2label=dict(enumerate(label_names)),
            label2id={n: i for i, n in enumerate(label_names)},
        ).to(device)
    if prof.compile and device.type == "cuda":
        model.bert.compile()
    run = _finetune_run(model, cls_data, tokenizer, prof, spec.seed, device)
    trained = _train(run, prof, work, device, name, progress, stop_after, on_step)
    if not trained["finished"]:
        return None
    enc, labels = cls_data["test"]
    train_labels = cls_data["train"][1]
    majority = int(torch.bincount(train_labels).argmax())
    facts = {"base_model": spec.parent, "task": spec.task, "label_names": label_names}
    facts.update(_common_facts(name, spec, prof, device, trained, run, [model]))
    facts.update(
        batch_size=prof.ft_batch_size,
        n_train=len(train_labels),
        n_test=len(labels),
        test_accuracy=_classification_accuracy(model, enc, labels, tokenizer.pad_token_id, device),
        majority_baseline=float((labels == majority).double().mean()),
    )
    facts.update(_architecture(model))
    return model, tokenizer, facts, trained["log"]


def _architecture(model) -> dict:
    config = model.config
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None)
    return {
        "architecture": type(model).__name__,
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "vocab_size": config.vocab_size,
    }


def build(
    names: Sequence[str] | None = None,
    profile: str | ZooProfile | None = None,
    progress: bool = True,
    jobs: int | None = None,
    rebuild: bool = False,
) -> dict[str, Path]:
    """Build the zoo (or ``names`` and what they depend on); finished models are skipped.

    Parameters
    ----------
    names : sequence of str, optional
        Models to build (default: all of :data:`MODELS`); their parents are built first.
    profile : str or ZooProfile, optional
    progress : bool
        A bar over models: with ``jobs=1`` plus a per-step bar with loss, tokens/s and
        validation perplexity; with ``jobs > 1`` the running models' steps in its postfix
        and a line per finished model.
    jobs : int, optional
        Models trained at once, each in its own process with ``profile.threads`` threads
        (default: the profile's ``jobs``; always 1 on CUDA). The tiny CPU models scale
        poorly with intra-op threads, so one-thread processes keep the cores busy: the
        default zoo took 11 min 15 s wall for 20.8 min of summed training clocks on an
        idle 2-core machine. A model's weights do not
        depend on ``jobs``: each model is a function of its seed, data and profile.
    rebuild : bool
        Delete ``names`` (and every model built from them) first and train them again,
        e.g. after the profile's settings changed (:func:`stale_settings`).

    Returns
    -------
    dict
        Model name -> model directory.
    """
    prof = get_profile(profile)
    names = list(MODELS) if names is None else list(names)
    for name in names:
        _check_name(name)
    jobs = prof.jobs if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"`jobs` must be >= 1, got {jobs}")
    if rebuild:
        names = list(dict.fromkeys(d for n in names for d in [n, *_dependents(n)]))
        for name in names:
            shutil.rmtree(_root(prof) / name, ignore_errors=True)
            shutil.rmtree(_root(prof) / f".{name}.partial", ignore_errors=True)
    todo = list(dict.fromkeys(dep for name in names for dep in _dependencies(name)))
    for name in todo:
        _warn_if_stale(name, prof)
    missing = [name for name in todo if not _is_built(_root(prof) / name)]
    if jobs == 1 or len(missing) < 2 or _resolve_device(prof).type == "cuda":
        bar = tqdm(todo, desc=f"zoo[{prof.name}]", disable=not progress)
        for name in bar:
            bar.set_postfix(model=name)
            build_model(name, prof, progress=progress)
    else:
        _build_parallel(missing, prof, jobs, progress)
    return {name: _root(prof) / name for name in todo}


def _critical_path_cost(name: str, prof: ZooProfile) -> float:
    """Rough cost of ``name`` plus the longest chain built from it, in units of one
    standard masked LM (scheduling priority)."""
    spec = MODELS[name]
    own = {"finetune": 0.1, "distil": 1.2}.get(spec.objective, 1.0)
    if spec.deep:
        own *= prof.deep_layers / prof.layers
    return own + max((_critical_path_cost(c, prof) for c in _children(name)), default=0.0)


class _StepReport:
    """Picklable ``on_step`` for a worker: writes (step, total) of one model to a shared dict."""

    def __init__(self, shared, name: str):
        self.shared, self.name = shared, name

    def __call__(self, step: int, total: int) -> None:
        if step == total or step % 10 == 0:
            self.shared[self.name] = (step, total)


def _build_in_worker(name: str, prof: ZooProfile, shared) -> Path:
    return build_model(name, prof, progress=False, _on_step=_StepReport(shared, name))


def _build_parallel(missing: list[str], prof: ZooProfile, jobs: int, progress: bool) -> None:
    """Train ``missing`` models ``jobs`` at a time, parents before children, longest first.

    The bar counts finished models; its postfix shows each running model's step.
    """
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    tokenizer_dir(prof)  # once, before the workers: they all read it
    waiting = sorted(missing, key=lambda n: -_critical_path_cost(n, prof))
    running: dict = {}
    bar = tqdm(total=len(missing), desc=f"zoo[{prof.name}] x{jobs}", disable=not progress)
    context = multiprocessing.get_context("spawn")  # no fork of a threaded torch
    with context.Manager() as manager, ProcessPoolExecutor(jobs, mp_context=context) as pool:
        steps = manager.dict()
        while waiting or running:
            unfinished = set(waiting) | set(running.values())
            for name in [n for n in waiting if MODELS[n].parent not in unfinished]:
                if len(running) < jobs:
                    waiting.remove(name)
                    running[pool.submit(_build_in_worker, name, prof, steps)] = name
            done, _ = wait(running, timeout=2.0, return_when=FIRST_COMPLETED)
            bar.set_postfix_str(
                ", ".join(
                    f"{n} {steps[n][0]}/{steps[n][1]}" if n in steps else f"{n} starting"
                    for n in running.values()
                )
            )
            for future in done:
                name = running.pop(future)
                future.result()  # re-raise a worker's error here
                facts = model_facts(name, prof)
                bar.write(
                    f"{name}: {facts['train_seconds']:.0f} s, "
                    + (
                        f"val ppl {facts['val_ppl']:.1f} (unigram {facts['unigram_ppl']:.1f})"
                        if "val_ppl" in facts
                        else f"test accuracy {facts['test_accuracy']:.3f}"
                    )
                )
                bar.update(1)
    bar.close()


# --------------------------------------------------------------------------------------
# Reading the zoo
# --------------------------------------------------------------------------------------


def model_facts(name: str, profile: str | ZooProfile | None = None) -> dict:
    """The ``zoo.json`` of a built model."""
    path = model_dir(name, profile, build=False)
    return json.loads((path / _ZOO_JSON).read_text())


_SUMMARY_COLUMNS = [
    "name",
    "objective",
    "architecture",
    "layers",
    "hidden",
    "heads",
    "params",
    "steps",
    "tokens_seen",
    "val_ppl",
    "unigram_ppl",
    "val_ppl_of",
    "rtd_accuracy",
    "rtd_baseline",
    "rtd_loss",
    "rtd_baseline_loss",
    "rtd_auc",
    "test_accuracy",
    "majority_baseline",
    "teacher",
    "base_model",
    "train_seconds",
    "tokens_per_s",
    "mfu",
]


def summary(profile: str | ZooProfile | None = None) -> pd.DataFrame:
    """One row per built model of the profile (unbuilt models are left out).

    Returns
    -------
    pandas.DataFrame
        Columns: name, objective, architecture, layers, hidden, heads, params, steps,
        tokens_seen, val_ppl, unigram_ppl, val_ppl_of, rtd_accuracy, rtd_baseline,
        rtd_loss, rtd_baseline_loss, rtd_auc, test_accuracy, majority_baseline, teacher,
        base_model, train_seconds, tokens_per_s, mfu.
    """
    prof = get_profile(profile)
    rows = []
    for name in MODELS:
        path = _root(prof) / name
        if _is_built(path):
            facts = json.loads((path / _ZOO_JSON).read_text())
            rows.append({col: facts.get(col) for col in _SUMMARY_COLUMNS})
    return pd.DataFrame(rows, columns=_SUMMARY_COLUMNS)


def training_log(name: str, profile: str | ZooProfile | None = None) -> pd.DataFrame:
    """Per-step training log of a built model.

    Returns
    -------
    pandas.DataFrame
        ``step``, ``loss``, ``lr``, ``val_ppl`` (NaN between evaluations; absent for the
        classifiers) and objective-specific terms (``gen_loss``/``rtd_loss`` for ELECTRA,
        ``ce``/``mlm``/``cos`` for distillation).
    """
    return pd.read_csv(model_dir(name, profile, build=False) / _LOG_CSV)


def plot_training_curves(
    profile: str | ZooProfile | None = None, names: Sequence[str] | None = None
):
    """Training loss and validation perplexity against step for the built models.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels sharing one legend: training loss (left, log scale; objectives
        differ, so compare shapes) and validation perplexity divided by the unigram
        perplexity on the same positions (right; the language models only; below the
        dashed line at 1 a model knows more than word frequencies).
    """
    import matplotlib.pyplot as plt

    prof = get_profile(profile)
    names = [n for n in (names or MODELS) if _is_built(_root(prof) / n)]
    fig, (ax_loss, ax_ppl) = plt.subplots(1, 2, figsize=(12, 4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, name in enumerate(names):
        color = colors[k % len(colors)]
        log = training_log(name, prof)
        smooth = log["loss"].rolling(max(1, len(log) // 50), min_periods=1).mean()
        ax_loss.plot(log["step"], smooth, color=color, label=name)
        if "val_ppl" in log and "unigram_ppl" in log:
            val = log.dropna(subset=["val_ppl"])
            ratio = val["val_ppl"] / val["unigram_ppl"]
            ax_ppl.plot(val["step"], ratio, color=color, marker="o", ms=3)
    ax_ppl.axhline(1.0, color="0.3", ls="--", lw=1)
    ax_ppl.annotate(
        "unigram baseline",
        (0.98, 1.0),
        xycoords=("axes fraction", "data"),
        ha="right",
        va="bottom",
        fontsize=8,
        color="0.3",
    )
    ax_loss.set(
        xlabel="step", ylabel="training loss (smoothed)", yscale="log", title="Training loss"
    )
    ax_ppl.set(
        xlabel="step",
        ylabel="validation ppl / unigram ppl",
        title="Validation perplexity relative to unigram",
    )
    ax_ppl.set_ylim(bottom=0)
    fig.legend(loc="center right", fontsize=8, frameon=False)
    fig.suptitle(f"lmsim zoo, profile {prof.name!r}")
    fig.tight_layout(rect=(0, 0, 0.86, 1))
    return fig


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmsim.zoo", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="train the zoo (finished models are skipped)")
    p_build.add_argument("--profile", default=None, choices=sorted(PROFILES))
    p_build.add_argument("--only", nargs="+", metavar="NAME", choices=list(MODELS))
    p_build.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads per model (default: the profile's `threads`)",
    )
    p_build.add_argument(
        "--rebuild",
        action="store_true",
        help="train the named models (and what was built from them) again",
    )
    p_build.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="models trained at once on the CPU, one process each (default: the profile's)",
    )
    p_list = sub.add_parser("list", help="print the table of built models")
    p_list.add_argument("--profile", default=None, choices=sorted(PROFILES))
    args = parser.parse_args(argv)
    prof = get_profile(args.profile)
    if args.command == "build":
        if args.threads:
            prof = dataclasses.replace(prof, threads=args.threads)
        started = time.perf_counter()
        paths = build(args.only, prof, jobs=args.jobs, rebuild=args.rebuild)
        seconds = time.perf_counter() - started
        print(f"built {len(paths)} models in {seconds:.1f} s under {_root(prof)}")
    table = summary(prof)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        shown = table.drop(columns=["architecture", "val_ppl_of", "mfu"]).set_index("name")
        print(
            shown.to_string(float_format=lambda v: f"{v:.3g}") if len(table) else "no models built"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
