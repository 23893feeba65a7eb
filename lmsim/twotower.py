"""Two-tower language models and their spontaneous preference (He & Toyoizumi, 2022).

A two-tower LM (Eq. 1) embeds a token sequence once, runs two identically configured
towers side by side on the same word vectors, concatenates their final states and predicts
each token with a softmax tied to the input embedding. Tower types:

``"elmo"``  a forward and a backward LSTM stack whose states are shifted by one position, so
            position ``i`` sees ``x_<i`` and ``x_>i`` but never ``x_i`` (cloze);
``"gpt"``   a causal transformer; position ``i`` is predicted from the state at ``i - 1``;
``"bert"``  a bidirectional transformer on BERT-masked input (15 % selected; 80/10/10),
            predicting the selected positions only.

Phase 2 (Eq. 2) freezes the embedding and both towers and trains one new output head per
tower on that tower's states alone; the frozen weights are checked bit for bit. The
*primary* tower has the higher mean probability of the correct token (Eq. 3) and the
preference score of token ``a`` is ``s_a = log p̄_1a − log p̄_2a`` (Eq. 4), computed in one
streaming pass (:func:`preference_scores`). The analyses: correlation of score vectors
between runs over the most frequent tokens with a permutation null, Spearman against
frequency rank, scores per part of speech, and ICA word groups of the input embedding
table (PCA to ``d``, Amari's natural-gradient ICA with the paper's ``g``).

Training goes through :func:`lmsim.training.train` (the one training loop of lmsim):
AdamW with β = (0.9, 0.98), weight decay 0.01, lr 1e-3 with linear warm-up and decay;
seeded stateless batches and masks; checkpoints and exact resume. A finished run is cached
atomically under ``lmsim._cache.cache_dir("twotower", profile)/<name>-<digest>``, the
digest covering the architecture, the seed and every setting that changes the result.

Departures from the paper, each forced or stated:

- Eq. 1 multiplies the embedding ``x(t)`` with the concatenated state ``h_i`` directly, which
  needs ``dim h = dim x``; the concatenation is twice the tower width, so each output head is
  BERT's prediction head (dense → GELU → LayerNorm) followed by the tied decoder and a bias.
- Transformer towers are pre-LayerNorm (a final LayerNorm closes each stack): stable at the
  paper's lr 1e-3 without the DeepSpeed kernels' tuning.
- ICA inputs are PCA-*whitened* (``P = Xc V_d S_d^{-1/2}``); the paper's Eq. 5 writes
  ``V_d √S_d``. The natural-gradient fixed point does not depend on how the inputs are scaled
  (``W`` absorbs it), and whitened inputs converge in far fewer of the paper's lr 0.01 steps.

References
----------
He & Toyoizumi (2022), Spontaneous Emerging Preference in Two-tower Language Model,
Eq. 1-7, Tables 1-4, Figs. 3-6. Amari, Cichocki & Yang (1995) (natural-gradient ICA).
Devlin et al. (2019), BERT, Sec. 3.1 (masking).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from lmsim._cache import cache_dir
from lmsim._io import atomic_dir, write_atomic
from lmsim._runtime import resolve_device
from lmsim.blocks import block_name
from lmsim.training import (
    TrainingRun,
    TrainSettings,
    batch_indices,
    maybe_compile,
    mfu,
    n_params,
    step_generator,
    train,
)

__all__ = [
    "TOWER_TYPES",
    "PAPER_CONFIGS",
    "PAPER_POS_CLAIMS",
    "PAPER_TABLE2",
    "PAPER_RELATIONS",
    "relation",
    "pair_table",
    "PAPER_TABLE3",
    "PAPER_TABLE4",
    "PAPER_ICA_FACTS",
    "ica_summary",
    "TowerConfig",
    "RunSpec",
    "TwoTowerSettings",
    "TowerData",
    "TwoTowerLM",
    "OutputHead",
    "TrainedTwoTower",
    "Preference",
    "load_data",
    "inputs_and_labels",
    "two_tower_flops_per_token",
    "phase1_run",
    "phase2_run",
    "run_dir",
    "train_two_tower",
    "load_two_tower",
    "train_runs",
    "primary_tower",
    "preference_scores",
    "top_tokens",
    "score_correlation",
    "permutation_null",
    "correlation_matrix",
    "spearman_matrix",
    "token_pos",
    "pos_table",
    "pca_whiten",
    "amari_g",
    "amari_ica",
    "ica_groups",
    "group_table",
    "tower_states",
    "tower_cka",
    "training_log",
]

TOWER_TYPES = ("elmo", "gpt", "bert")
IGNORE_INDEX = -100
_WEIGHTS = "weights.pt"
_FACTS = "run.json"
_LOG_CSV = "training_log.csv"
_HEAD_LOG_CSV = "head_log.csv"
_PHASE1 = "phase1.pt"


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TowerConfig:
    """Architecture of one tower (both towers of a model share it).

    Attributes
    ----------
    tower : {"elmo", "gpt", "bert"}
    hidden : int
        Transformer width, or LSTM cells per direction.
    layers : int
        Transformer layers, or LSTM layers per direction.
    heads : int
        Attention heads (transformers).
    intermediate : int or None
        Feed-forward width (None: ``4 * hidden``).
    embed : int or None
        Word-vector size; transformers need ``hidden`` (None). ELMo may differ.
    lstm_proj : int
        LSTM projection size (0: none); ELMo projects its 4,096 cells to 512.
    dropout : float
    """

    tower: str
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    intermediate: int | None = None
    embed: int | None = None
    lstm_proj: int = 0
    dropout: float = 0.0

    def __post_init__(self):
        if self.tower not in TOWER_TYPES:
            raise ValueError(f"`tower` must be one of {TOWER_TYPES}, got {self.tower!r}")
        for name in ("hidden", "layers", "heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if self.tower != "elmo":
            if self.hidden % self.heads:
                raise ValueError(
                    f"`hidden`={self.hidden} must be divisible by `heads`={self.heads}"
                )
            if self.embed not in (None, self.hidden):
                raise ValueError(
                    f"transformer towers read the word vectors directly: `embed` must be None "
                    f"or `hidden`={self.hidden}, got {self.embed}"
                )

    @property
    def embed_dim(self) -> int:
        """Size of the shared word vectors."""
        return self.embed or self.hidden

    @property
    def state_dim(self) -> int:
        """Size of one tower's state (ELMo: forward and backward concatenated)."""
        if self.tower == "elmo":
            return 2 * (self.lstm_proj or self.hidden)
        return self.hidden

    @property
    def ffn_dim(self) -> int:
        return self.intermediate or 4 * self.hidden


# The paper's Table 1. ELMo's projection to 512 is ELMo's own (Peters et al., 2018); the
# paper gives only "hidden 4096, 2 layers".
PAPER_CONFIGS: dict[str, TowerConfig] = {
    "elmo": TowerConfig("elmo", hidden=4096, layers=2, embed=512, lstm_proj=512),
    "gpt": TowerConfig("gpt", hidden=768, layers=12, heads=12, intermediate=3072),
    "bert-base": TowerConfig("bert", hidden=384, layers=12, heads=12, intermediate=1024),
    "bert-large": TowerConfig("bert", hidden=512, layers=24, heads=16, intermediate=2048),
}

# Sec. 5.2: VERB, ADP, ADV, AUX preferred by the primary tower, PROPN by the secondary.
PAPER_POS_CLAIMS: dict[str, str] = {
    "VERB": "primary",
    "ADP": "primary",
    "ADV": "primary",
    "AUX": "primary",
    "PROPN": "secondary",
}


_PAPER_CASES = ["ELMo", "GPT", "Bert-base", "Bert-large-run1", "Bert-large-run2"]
# Table 2: Pearson correlation of score vectors over the 5,000 most frequent tokens.
PAPER_TABLE2 = pd.DataFrame(
    [
        [1.0, 0.91, 0.27, 0.57, 0.61],
        [0.91, 1.0, 0.26, 0.57, 0.63],
        [0.27, 0.26, 1.0, 0.72, 0.62],
        [0.57, 0.57, 0.72, 1.0, 0.94],
        [0.61, 0.63, 0.62, 0.94, 1.0],
    ],
    index=_PAPER_CASES,
    columns=_PAPER_CASES,
)
# Table 2 by relation: two Bert-large seeds; Bert-base against Bert-large; across types.
PAPER_RELATIONS: dict[str, tuple[float, float]] = {
    "seed": (0.94, 0.94),
    "size": (0.62, 0.72),
    "type": (0.26, 0.91),
}
# Table 4: Spearman correlation among score vectors and the frequency rank (top 5,000).
PAPER_TABLE4 = pd.DataFrame(
    [
        [1.0, 0.93, 0.56, 0.16],
        [0.93, 1.0, 0.65, 0.22],
        [0.56, 0.65, 1.0, 0.18],
        [0.16, 0.22, 0.18, 1.0],
    ],
    index=["ELMo", "GPT", "Bert-large", "frequency rank"],
    columns=["ELMo", "GPT", "Bert-large", "frequency rank"],
)
# Table 3 (selected rows): typical words of an ICA group, its mean score and rank per model.
PAPER_TABLE3 = pd.DataFrame(
    [
        ("which, who, what, where, when", 2.16, 1, 0.79, 6, 0.81, 5),
        ("but, only, than, however, because", 2.16, 2, 0.98, 2, 1.11, 2),
        ("is, was, were, be, been", 1.77, 4, 1.16, 1, 1.12, 1),
        ("can, may, would, could, will", 1.46, 5, 0.94, 3, 0.85, 5),
        ("one, two, three, each, another", 1.28, 7, 0.41, 10, 0.48, 7),
        ("##s, ##ed, ##ly, ##ing, ##ism", 0.65, 13, -1.16, 21, -1.78, 21),
        ("john, christian, william, david, charles", 0.30, 21, -0.99, 21, -0.85, 19),
        ("war, people, government, military, president", 0.02, 18, -0.58, 19, -0.62, 18),
        ("metal, air, ice, iron, stone", -0.28, 20, -0.57, 18, -0.47, 17),
        ("world, states, american, british, french", -0.69, 21, -1.05, 20, -1.37, 20),
    ],
    columns=[
        "words",
        "Bert-large score",
        "Bert-large rank",
        "ELMo score",
        "ELMo rank",
        "GPT score",
        "GPT rank",
    ],
)
# Sec. 5.3 and Fig. 6: the ICA sources of the paper's Bert-large embedding (d = 128).
PAPER_ICA_FACTS = {
    "fraction of values in [-1, 1]": 0.80,
    "fraction of words in no group": 0.13,
    "fraction of words in exactly one group": 0.45,
    "mean groups per word": 1.45,
}


@dataclass(frozen=True)
class RunSpec:
    """One two-tower model to train: a name, its architecture and its seed."""

    name: str
    config: TowerConfig
    seed: int = 0

    @classmethod
    def from_dict(cls, spec: Mapping) -> RunSpec:
        """``{"name": "bert-s0", "tower": "bert", "hidden": 64, ..., "seed": 0}``."""
        spec = dict(spec)
        if "name" not in spec or "tower" not in spec:
            raise ValueError(f"a run needs a `name` and a `tower`, got {spec!r}")
        name, seed = spec.pop("name"), spec.pop("seed", 0)
        known = {f.name for f in dataclasses.fields(TowerConfig)}
        unknown = set(spec) - known
        if unknown:
            raise ValueError(f"run {name!r}: unknown keys {sorted(unknown)}; use {sorted(known)}")
        return cls(name, TowerConfig(**spec), int(seed))


@dataclass(frozen=True)
class TwoTowerSettings:
    """Data and optimisation of a run (both phases).

    Attributes
    ----------
    corpora : tuple of str
        :func:`lmsim.data.load_corpus` names, concatenated (``"ptb"``, ``"smoke"``,
        ``"hf:..."``).
    tokenizer : str
        ``"zoo:<profile>"`` (the zoo's WordPiece tokenizer), ``"train:<vocab_size>"`` (the
        zoo's deterministic WordPiece trained on these corpora), or a model name or hub id
        (``"bert-base-uncased"``: BERT's WordPiece vocabulary).
    seq_len : int
        Tokens per chunk, ``[CLS]`` included; also the transformers' positions.
    batch_size, steps, lr, warmup_frac, weight_decay : ...
        Phase 1 (Adam β = (0.9, 0.98), the paper's settings by default).
    head_steps, head_lr : int, float
        Phase 2: each tower's new head.
    max_train_lines, max_valid_lines : int or None
    eval_every, n_eval_chunks, checkpoint_every : int
    device : str
    threads : int or None
        CPU threads while training (restored afterwards); not part of the cache key. Runs
        with the same thread count are bit-identical; another count can change the last
        bits of CPU reductions.
    bf16, fused_adamw, compile : bool
        CUDA-only speed-ups.
    """

    corpora: tuple[str, ...] = ("ptb",)
    tokenizer: str = "zoo:default"
    seq_len: int = 64
    batch_size: int = 16
    steps: int = 1000
    lr: float = 1e-3
    warmup_frac: float = 0.06
    weight_decay: float = 0.01
    head_steps: int = 300
    head_lr: float = 1e-3
    max_train_lines: int | None = None
    max_valid_lines: int | None = None
    eval_every: int = 250
    n_eval_chunks: int = 32
    checkpoint_every: int = 250
    device: str = "auto"
    threads: int | None = None
    bf16: bool = False
    fused_adamw: bool = False
    compile: bool = False

    def __post_init__(self):
        if isinstance(self.corpora, str):
            object.__setattr__(self, "corpora", (self.corpora,))
        object.__setattr__(self, "corpora", tuple(self.corpora))
        if self.seq_len < 4:
            raise ValueError(f"`seq_len` must be >= 4, got {self.seq_len}")
        for name in ("batch_size", "steps", "head_steps", "eval_every", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1, got {getattr(self, name)}")

    def train_settings(self, head: bool = False) -> TrainSettings:
        """The :class:`~lmsim.training.TrainSettings` of phase 1 (or 2, ``head=True``)."""
        return TrainSettings(
            lr=self.head_lr if head else self.lr,
            weight_decay=self.weight_decay,
            warmup_frac=self.warmup_frac,
            betas=(0.9, 0.98),
            eval_every=self.eval_every,
            checkpoint_every=self.checkpoint_every,
            bf16=self.bf16,
            fused_adamw=self.fused_adamw,
            compile=self.compile,
        )


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------


@dataclass
class TowerData:
    """Tokenised chunks of a corpus.

    Attributes
    ----------
    tokenizer : transformers tokenizer
    train, valid : LongTensor of shape (n_chunks, seq_len)
        ``[CLS]`` + ``seq_len - 1`` consecutive tokens (lines end with ``[SEP]``).
    counts : Tensor of shape (vocab,)
        Token counts of the train stream (float64).
    special_ids : LongTensor
        Never masked nor scored: ``[PAD] [CLS] [SEP] [MASK]``.
    """

    tokenizer: object
    train: torch.Tensor
    valid: torch.Tensor
    counts: torch.Tensor
    special_ids: torch.Tensor

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    @property
    def mask_id(self) -> int:
        return int(self.tokenizer.mask_token_id)


_DATA: dict[tuple, TowerData] = {}


def _lines(corpora: Sequence[str], split: str, max_lines: int | None) -> list[str]:
    from lmsim.data import load_corpus

    lines: list[str] = []
    for name in corpora:
        text = load_corpus(name, split=split, max_docs=max_lines)
        # PTB writes unknown words as `<unk>`: one [UNK] token, as in the zoo.
        lines += [line.replace("<unk>", "[UNK]") for line in text]
    return lines[:max_lines] if max_lines else lines


def _tokenizer(spec: str, train_lines: list[str], seq_len: int):
    if spec.startswith("zoo:"):
        from lmsim.zoo import load_tokenizer

        return load_tokenizer(spec.split(":", 1)[1])
    if spec.startswith("train:"):
        from lmsim.zoo import train_tokenizer

        return train_tokenizer(train_lines, int(spec.split(":", 1)[1]), seq_len)
    from lmsim.models import load_tokenizer

    return load_tokenizer(spec)


def _stream(tokenizer, lines: Sequence[str]) -> np.ndarray:
    enc = tokenizer.backend_tokenizer.encode_batch(list(lines), add_special_tokens=False)
    sep = tokenizer.sep_token_id
    return np.asarray([t for e in enc for t in (*e.ids, sep)], dtype=np.int64)


def load_data(settings: TwoTowerSettings) -> TowerData:
    """Tokenise the settings' corpora into chunks (kept in memory while the process lives).

    Returns
    -------
    TowerData
    """
    from lmsim.zoo import make_chunks

    key = (
        settings.corpora,
        settings.tokenizer,
        settings.seq_len,
        settings.max_train_lines,
        settings.max_valid_lines,
    )
    if key not in _DATA:
        train_lines = _lines(settings.corpora, "train", settings.max_train_lines)
        valid_lines = _lines(settings.corpora, "valid", settings.max_valid_lines)
        tok = _tokenizer(settings.tokenizer, train_lines, settings.seq_len)
        missing = [
            t for t in ("cls", "sep", "pad", "mask") if getattr(tok, f"{t}_token_id") is None
        ]
        if missing:
            raise ValueError(
                f"tokenizer {settings.tokenizer!r} lacks the {missing} token(s); use a BERT-style "
                "WordPiece tokenizer (e.g. 'zoo:default' or 'bert-base-uncased')"
            )
        train_stream = _stream(tok, train_lines)
        specials = [tok.pad_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id]
        _DATA.clear()  # one corpus at a time: paper-scale chunks are large
        _DATA[key] = TowerData(
            tokenizer=tok,
            train=make_chunks(train_stream, settings.seq_len, tok.cls_token_id),
            valid=make_chunks(_stream(tok, valid_lines), settings.seq_len, tok.cls_token_id),
            counts=torch.bincount(torch.as_tensor(train_stream), minlength=len(tok)).double(),
            special_ids=torch.tensor(sorted(set(specials))),
        )
    return _DATA[key]


def inputs_and_labels(
    tower: str, batch: torch.Tensor, data: TowerData, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """What a tower type reads and predicts for a batch of chunks.

    ELMo and GPT read the chunk as is and predict every position after ``[CLS]``; BERT reads
    the BERT-masked chunk and predicts the selected positions.

    Returns
    -------
    inputs, labels : LongTensor of shape (batch, seq_len)
        ``labels`` is ``-100`` where nothing is predicted.
    """
    if tower == "bert":
        from lmsim.zoo import mask_tokens

        return mask_tokens(batch, data.special_ids, data.mask_id, data.vocab_size, generator)
    labels = batch.clone()
    labels[:, 0] = IGNORE_INDEX
    labels[batch == data.tokenizer.pad_token_id] = IGNORE_INDEX
    return batch, labels


# --------------------------------------------------------------------------------------
# The model (Eq. 1, 2)
# --------------------------------------------------------------------------------------


class SharedEmbedding(nn.Module):
    """Word vectors shared by both towers (and by the tied softmax), plus learned positions
    and a LayerNorm for transformer towers."""

    def __init__(self, vocab_size: int, dim: int, seq_len: int, positions: bool, dropout: float):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, dim)
        self.positions = nn.Embedding(seq_len, dim) if positions else None
        self.norm = nn.LayerNorm(dim) if positions else nn.Identity()
        self.drop = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(ids)
        if self.positions is not None:
            x = x + self.positions(torch.arange(ids.shape[1], device=ids.device))
        return self.drop(self.norm(x))


class LSTMTower(nn.Module):
    """ELMo-style tower: forward and backward LSTM stacks, shifted by one position.

    The state at ``i`` is the forward state at ``i - 1`` (it has read ``x_1..x_{i-1}``) beside
    the backward state at ``i + 1`` (``x_{i+1}..x_n``); zeros where no context exists.
    """

    def __init__(self, config: TowerConfig):
        super().__init__()
        out = config.lstm_proj or config.hidden

        def stack():
            sizes = [config.embed_dim] + [out] * (config.layers - 1)
            return nn.ModuleList(
                nn.LSTM(n, config.hidden, batch_first=True, proj_size=config.lstm_proj)
                for n in sizes
            )

        self.fwd, self.bwd = stack(), stack()
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        f, b = x, x.flip(1)
        states = []
        for lstm_f, lstm_b in zip(self.fwd, self.bwd):
            f, b = self.drop(lstm_f(f)[0]), self.drop(lstm_b(b)[0])
            shifted_f = F.pad(f[:, :-1], (0, 0, 1, 0))
            shifted_b = F.pad(b.flip(1)[:, 1:], (0, 0, 0, 1))
            states.append(torch.cat([shifted_f, shifted_b], dim=-1))
        return states


class TransformerTower(nn.Module):
    """Pre-LayerNorm transformer stack; causal (GPT, states shifted right by one) or not."""

    def __init__(self, config: TowerConfig, causal: bool):
        super().__init__()
        self.causal = causal
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                config.hidden,
                config.heads,
                config.ffn_dim,
                config.dropout,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            for _ in range(config.layers)
        )
        self.norm = nn.LayerNorm(config.hidden)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        mask = None
        if self.causal:
            mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device)
        states, h = [], x
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=self.causal)
            states.append(h)
        states[-1] = self.norm(states[-1])
        if self.causal:  # the state that has read x_1..x_{i-1} predicts position i
            states = [F.pad(s[:, :-1], (0, 0, 1, 0)) for s in states]
        return states


class OutputHead(nn.Module):
    """BERT's prediction head on a state, decoded with the (tied) word-vector table.

    ``logits = LayerNorm(GELU(W h + c)) Eᵀ + b``; ``E`` is passed at call time so the head
    owns no copy of the embedding (phase 2 trains heads while ``E`` stays frozen).
    """

    def __init__(self, in_dim: int, embed_dim: int, vocab_size: int):
        super().__init__()
        self.dense = nn.Linear(in_dim, embed_dim)
        self.norm = nn.LayerNorm(embed_dim)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, h: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(F.gelu(self.dense(h))), embedding, self.bias)


class TwoTowerLM(nn.Module):
    """Shared embedding → two identical towers → concatenated states → tied softmax (Eq. 1).

    Parameters
    ----------
    config : TowerConfig
    vocab_size, seq_len : int
    """

    def __init__(self, config: TowerConfig, vocab_size: int, seq_len: int):
        super().__init__()
        self.config = config
        transformer = config.tower != "elmo"
        self.embed = SharedEmbedding(
            vocab_size, config.embed_dim, seq_len, transformer, config.dropout
        )
        self.towers = nn.ModuleList(_new_tower(config) for _ in range(2))
        self.head = OutputHead(2 * config.state_dim, config.embed_dim, vocab_size)
        self.apply(_init_weights)

    @property
    def embedding(self) -> torch.Tensor:
        """The word-vector table ``E`` of shape (vocab, embed), tied to every output head."""
        return self.embed.tokens.weight

    def states(self, ids: torch.Tensor, all_layers: bool = False) -> list:
        """Each tower's states aligned with the positions they predict.

        Returns
        -------
        list of 2 Tensors of shape (batch, seq_len, state_dim)
            (``all_layers``: 2 lists of one such tensor per layer, the last one last.)
        """
        x = self.embed(ids)
        out = [tower(x) for tower in self.towers]
        return out if all_layers else [layers[-1] for layers in out]

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Logits of shape (n_predicted, vocab) at the positions where ``labels != -100``."""
        sel = labels != IGNORE_INDEX
        h1, h2 = self.states(ids)
        return self.head(torch.cat([h1[sel], h2[sel]], dim=-1), self.embedding)


def _new_tower(config: TowerConfig) -> nn.Module:
    if config.tower == "elmo":
        return LSTMTower(config)
    return TransformerTower(config, causal=config.tower == "gpt")


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)


def new_heads(config: TowerConfig, vocab_size: int, seed: int) -> nn.ModuleList:
    """Phase 2's two fresh heads, one per tower (seeded apart from phase 1)."""
    torch.manual_seed(seed + 10_000)
    heads = nn.ModuleList(
        OutputHead(config.state_dim, config.embed_dim, vocab_size) for _ in range(2)
    )
    heads.apply(_init_weights)
    return heads


def two_tower_flops_per_token(
    config: TowerConfig, seq_len: int, vocab_size: int | None = None
) -> float:
    """Training FLOPs per input token of both towers and, with ``vocab_size``, the head.

    Every weight matrix costs 6 FLOPs per parameter per token (forward 2, backward 4;
    Chowdhery et al. 2022, App. B):

    * a transformer tower: ``L (4 d² + 2 d f)`` matrix weights (``f`` = ``ffn_dim``) plus
      attention ``12 L T d``;
    * an ELMo tower: per direction and layer ``4 h (n_in + out)`` LSTM weights (+ ``h · out``
      for the projection);
    * the output head of Eq. 1 (``vocab_size`` given): the dense map ``2 s → e`` and the
      tied decoder ``e → V`` at the predicted positions only: 15 % of them for the BERT
      tower (its masking rate), all of them for the ELMo and GPT towers.

    Embedding look-ups, norms and biases are left out. Without ``vocab_size`` the head is
    left out and MFU is a lower bound.
    """
    if config.tower == "elmo":
        out = config.lstm_proj or config.hidden
        per_dir = 0
        for layer in range(config.layers):
            n_in = config.embed_dim if layer == 0 else out
            per_dir += 4 * config.hidden * (n_in + out) + (
                config.hidden * out if config.lstm_proj else 0
            )
        towers = 2 * 2 * 6.0 * per_dir
    else:
        d, n_layers = config.hidden, config.layers
        weights = n_layers * (4 * d * d + 2 * d * config.ffn_dim)
        towers = 2 * (6.0 * weights + 12.0 * n_layers * seq_len * d)
    if vocab_size is None:
        return towers
    predicted = 0.15 if config.tower == "bert" else 1.0
    head = 2 * config.state_dim * config.embed_dim + config.embed_dim * vocab_size
    return towers + 6.0 * predicted * head


# --------------------------------------------------------------------------------------
# Training runs (phase 1 and phase 2) through the one training loop
# --------------------------------------------------------------------------------------


def _batch(data: TowerData, settings: TwoTowerSettings, seed: int, step: int, device):
    idx = batch_indices(len(data.train), settings.batch_size, step, seed)
    return data.train[torch.as_tensor(idx)].to(device)


def _eval_generator() -> torch.Generator:
    # The same masked positions for every run: comparable validation numbers.
    return torch.Generator().manual_seed(12345)


@torch.no_grad()
def _val_ppl(predict, tower: str, data: TowerData, settings: TwoTowerSettings, device) -> dict:
    """Validation perplexity of ``predict(inputs, labels) -> list of logits``, with the
    unigram's on the same positions."""
    from lmsim.zoo import unigram_log_probs

    # Left-to-right towers predict [SEP] (line ends); BERT never selects a special token.
    never = [
        i for i in data.special_ids.tolist() if tower == "bert" or i != data.tokenizer.sep_token_id
    ]
    log_uni = unigram_log_probs(data.counts, never)
    gen = _eval_generator()
    chunks = data.valid[: settings.n_eval_chunks]
    nll, nll_uni, n = None, 0.0, 0
    for start in range(0, len(chunks), settings.batch_size):
        inputs, labels = inputs_and_labels(
            tower, chunks[start : start + settings.batch_size], data, gen
        )
        targets = labels[labels != IGNORE_INDEX]
        logits = predict(inputs.to(device), labels.to(device))
        losses = [
            F.cross_entropy(lg.float(), targets.to(device), reduction="sum").item() for lg in logits
        ]
        nll = losses if nll is None else [a + b for a, b in zip(nll, losses)]
        nll_uni += -log_uni[targets].sum().item()
        n += len(targets)
    return {"val_ppl": [math.exp(x / n) for x in nll], "unigram_ppl": math.exp(nll_uni / n)}


def phase1_run(
    model: TwoTowerLM, data: TowerData, settings: TwoTowerSettings, seed: int, device
) -> TrainingRun:
    """The :class:`~lmsim.training.TrainingRun` of Eq. 1: both towers and the joint head."""
    tower = model.config.tower

    def loss_fn(step):
        batch = _batch(data, settings, seed, step, device)
        inputs, labels = inputs_and_labels(tower, batch, data, step_generator(seed, step))
        logits = model(inputs, labels)
        loss = F.cross_entropy(logits.float(), labels[labels != IGNORE_INDEX])
        return loss, batch.numel(), {}

    def eval_fn():
        out = _val_ppl(lambda x, y: [model(x, y)], tower, data, settings, device)
        return {"val_ppl": out["val_ppl"][0], "unigram_ppl": out["unigram_ppl"]}

    flops = two_tower_flops_per_token(model.config, settings.seq_len, data.vocab_size)
    return TrainingRun({"model": model}, loss_fn, eval_fn, settings.steps, flops)


def phase2_run(
    model: TwoTowerLM,
    head: OutputHead,
    which: int,
    data: TowerData,
    settings: TwoTowerSettings,
    seed: int,
    device,
) -> TrainingRun:
    """The :class:`~lmsim.training.TrainingRun` of Eq. 2 for tower ``which`` (0 or 1).

    Only ``head`` trains; it reads tower ``which``'s states, computed without gradients from
    the frozen model. Both towers' runs see the same batches and masks.
    """
    tower = model.config.tower

    def states(inputs, labels):
        with torch.no_grad():
            x = model.embed(inputs)
            return model.towers[which](x)[-1][labels != IGNORE_INDEX]

    def loss_fn(step):
        batch = _batch(data, settings, seed + 1, step, device)
        inputs, labels = inputs_and_labels(tower, batch, data, step_generator(seed, step, 1))
        logits = head(states(inputs, labels), model.embedding)
        loss = F.cross_entropy(logits.float(), labels[labels != IGNORE_INDEX])
        return loss, batch.numel(), {}

    def eval_fn():
        out = _val_ppl(
            lambda x, y: [head(states(x, y), model.embedding)], tower, data, settings, device
        )
        return {"val_ppl": out["val_ppl"][0], "unigram_ppl": out["unigram_ppl"]}

    return TrainingRun({"head": head}, loss_fn, eval_fn, settings.head_steps, 0.0)


def _digest(spec: RunSpec, settings: TwoTowerSettings) -> str:
    what = {
        "config": dataclasses.asdict(spec.config),
        "seed": spec.seed,
        "settings": {k: v for k, v in dataclasses.asdict(settings).items() if k != "threads"},
    }
    return hashlib.sha1(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_dir(spec: RunSpec, settings: TwoTowerSettings, profile: str) -> Path:
    """Cache folder of a run: ``cache_dir("twotower", profile)/<name>-<digest>``."""
    return cache_dir("twotower", profile) / f"{spec.name}-{_digest(spec, settings)}"


def _frozen_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {
        k: v.detach().clone() for k, v in model.state_dict().items() if not k.startswith("head.")
    }


def _bit_identical(before: Mapping[str, torch.Tensor], model: nn.Module) -> bool:
    after = _frozen_state(model)
    return set(before) == set(after) and all(torch.equal(before[k], after[k]) for k in before)


def train_two_tower(
    spec: RunSpec,
    settings: TwoTowerSettings,
    profile: str,
    progress: bool = True,
    _stop_after: int | None = None,
) -> Path:
    """Train (or find in the cache, or resume) one two-tower run: phase 1, then phase 2.

    Parameters
    ----------
    spec : RunSpec
    settings : TwoTowerSettings
    profile : str
        Cache folder name (``"smoke"``, ``"default"``, ``"paper"``).
    progress : bool
        tqdm bars with loss and tokens/s.

    Returns
    -------
    Path
        The finished run folder (``weights.pt``, ``run.json``, the training logs); while
        ``_stop_after`` interrupts it on purpose (tests), the partial work folder.

    Raises
    ------
    RuntimeError
        Phase 2 changed a frozen weight (it must not).
    """
    path = run_dir(spec, settings, profile)
    if (path / _FACTS).exists():
        return path
    work = path.with_name(f".{path.name}.partial")
    work.mkdir(parents=True, exist_ok=True)
    device = resolve_device(settings.device)
    threads = torch.get_num_threads()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    try:
        done = _train(spec, settings, device, work, progress, _stop_after)
    finally:
        torch.set_num_threads(threads)
    if done is None:
        return work
    model, heads, facts, logs = done
    with atomic_dir(path) as tmp:
        payload = {"model": model.state_dict(), "heads": heads.state_dict()}
        torch.save(payload, tmp / _WEIGHTS)
        pd.DataFrame(logs[0]).to_csv(tmp / _LOG_CSV, index=False)
        pd.DataFrame(logs[1]).to_csv(tmp / _HEAD_LOG_CSV, index=False)
        (tmp / _FACTS).write_text(json.dumps(facts, indent=2, default=str))
    shutil.rmtree(work, ignore_errors=True)
    return path


def _train(spec, settings, device, work: Path, progress, stop_after):
    data = load_data(settings)
    torch.manual_seed(spec.seed)
    model = TwoTowerLM(spec.config, data.vocab_size, settings.seq_len).to(device)
    run = phase1_run(model, data, settings, spec.seed, device)
    done_path = work / _PHASE1
    if done_path.exists():
        saved = torch.load(done_path, map_location=device, weights_only=True)
        model.load_state_dict(saved["model"])
        trained = saved["trained"]
    else:
        for tower in model.towers:
            maybe_compile(tower, settings.train_settings(), device)
        trained = train(
            run, settings.train_settings(), work / "phase1", device, spec.name, progress, stop_after
        )
        if not trained["finished"]:
            return None
        state = {"model": model.state_dict(), "trained": trained}
        write_atomic(done_path, lambda tmp: torch.save(state, tmp))
    model.eval().requires_grad_(False)
    frozen = _frozen_state(model)
    heads = new_heads(spec.config, data.vocab_size, spec.seed).to(device)
    head_results = []
    for which in range(2):
        head_run = phase2_run(model, heads[which], which, data, settings, spec.seed, device)
        result = train(
            head_run,
            settings.train_settings(head=True),
            work / f"phase2-tower{which + 1}",
            device,
            f"{spec.name} head {which + 1}",
            progress,
            stop_after,
        )
        if not result["finished"]:
            return None
        head_results.append(result)
    if not _bit_identical(frozen, model):
        raise RuntimeError(
            f"{spec.name}: phase 2 changed a frozen weight of the embedding or towers"
        )
    tokens_per_s = trained["tokens"] / max(trained["train_seconds"], 1e-9)
    last = [r["log"][-1] for r in head_results]
    facts = {
        "name": spec.name,
        "config": dataclasses.asdict(spec.config),
        "seed": spec.seed,
        "settings": dataclasses.asdict(settings),
        "vocab_size": data.vocab_size,
        "params": n_params([model]),
        "steps": trained["step"],
        "tokens_seen": trained["tokens"],
        "train_seconds": round(trained["train_seconds"], 3),
        "tokens_per_s": round(tokens_per_s, 1),
        "mfu": mfu(tokens_per_s, run.flops_per_token, device),
        "val_ppl": trained["log"][-1].get("val_ppl"),
        "unigram_ppl": trained["log"][-1].get("unigram_ppl"),
        "head_steps": settings.head_steps,
        "head_seconds": round(sum(r["train_seconds"] for r in head_results), 3),
        "head_val_ppl": [row.get("val_ppl") for row in last],
        "frozen_bit_identical": True,
        "device": str(device),
        "torch": torch.__version__,
    }
    head_log = [{**row, "tower": k + 1} for k, r in enumerate(head_results) for row in r["log"]]
    return model, heads, facts, (trained["log"], head_log)


@dataclass
class TrainedTwoTower:
    """A finished run: the model (eval mode), its two phase-2 heads, facts and logs."""

    name: str
    model: TwoTowerLM
    heads: nn.ModuleList
    facts: dict
    path: Path


def load_two_tower(path: str | Path, device: str | torch.device = "cpu") -> TrainedTwoTower:
    """Load a run folder written by :func:`train_two_tower`."""
    path = Path(path)
    if not (path / _FACTS).is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a finished two-tower run (no {_FACTS})")
    facts = json.loads((path / _FACTS).read_text())
    device = resolve_device(device)
    config = TowerConfig(**facts["config"])
    model = TwoTowerLM(config, facts["vocab_size"], facts["settings"]["seq_len"])
    heads = new_heads(config, facts["vocab_size"], facts["seed"])
    state = torch.load(path / _WEIGHTS, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    heads.load_state_dict(state["heads"])
    return TrainedTwoTower(
        facts["name"], model.to(device).eval(), heads.to(device).eval(), facts, path
    )


def train_runs(
    runs: Sequence[RunSpec | Mapping],
    settings: TwoTowerSettings,
    profile: str,
    progress: bool = True,
    jobs: int = 1,
) -> dict[str, Path]:
    """Train (or find) several runs; ``{name: run folder}``.

    Parameters
    ----------
    runs : sequence of RunSpec or dict (:meth:`RunSpec.from_dict`)
    settings : TwoTowerSettings
    profile : str
    progress : bool
    jobs : int
        Runs trained at once on the CPU, each in its own one-thread process (1: one after
        the other in this process, on ``settings.threads``). Ignored on CUDA.
    """
    specs = [r if isinstance(r, RunSpec) else RunSpec.from_dict(r) for r in runs]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"run names must be unique, got {names}")
    todo = [s for s in specs if not (run_dir(s, settings, profile) / _FACTS).exists()]
    if jobs > 1 and len(todo) > 1 and resolve_device(settings.device).type == "cpu":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        one_thread = dataclasses.replace(settings, threads=1)
        context = multiprocessing.get_context("spawn")  # no fork of a threaded torch
        # Longest first (left-to-right towers predict every position, BERT 15 %), so the
        # last job does not run alone at the end.
        todo.sort(
            key=lambda s: (
                s.config.tower == "bert",
                -two_tower_flops_per_token(s.config, settings.seq_len),
            )
        )
        with ProcessPoolExecutor(min(jobs, len(todo)), mp_context=context) as pool:
            futures = [pool.submit(train_two_tower, s, one_thread, profile, False) for s in todo]
            for future in futures:
                future.result()
    return {s.name: train_two_tower(s, settings, profile, progress) for s in specs}


def training_log(path: str | Path, heads: bool = False) -> pd.DataFrame:
    """The per-step log of a finished run (phase 1, or phase 2 with ``heads=True``)."""
    return pd.read_csv(Path(path) / (_HEAD_LOG_CSV if heads else _LOG_CSV))


# --------------------------------------------------------------------------------------
# Preference scores (Eq. 3, 4)
# --------------------------------------------------------------------------------------


def primary_tower(mean_p: Sequence[float]) -> int:
    """Index of the primary tower (Eq. 3): the higher mean probability of the correct token;
    a tie keeps the first."""
    if len(mean_p) != 2:
        raise ValueError(f"`mean_p` must hold the two towers' means, got {list(mean_p)}")
    return 0 if mean_p[0] >= mean_p[1] else 1


@dataclass
class Preference:
    """Preference scores of one run, primary tower first.

    Attributes
    ----------
    scores : ndarray of shape (vocab,)
        ``s_a = log p̄_1a − log p̄_2a`` (Eq. 4); NaN for tokens never predicted.
    counts : ndarray of shape (vocab,)
        Occurrences of each token among the predicted positions.
    p_bar : ndarray of shape (2, vocab)
        Mean probability of the correct token per token (primary, secondary).
    mean_p : ndarray of shape (2,)
        Mean probability of the correct token over all positions (Eq. 3).
    accuracy : ndarray of shape (2,)
        Top-1 accuracy of each tower's head.
    joint_mean_p, joint_accuracy : float
        The same for the phase-1 model (both towers, Eq. 1).
    primary : int
        Which tower of the model (0 or 1) is primary.
    n_positions : int
    """

    scores: np.ndarray
    counts: np.ndarray
    p_bar: np.ndarray
    mean_p: np.ndarray
    accuracy: np.ndarray
    joint_mean_p: float
    joint_accuracy: float
    primary: int
    n_positions: int


@torch.no_grad()
def preference_scores(
    run: TrainedTwoTower,
    chunks: torch.Tensor,
    data: TowerData,
    batch_size: int = 32,
    mask_repeats: int = 1,
    seed: int = 0,
) -> Preference:
    """Per-token preference scores from one streaming pass over ``chunks``.

    Per predicted position the probability of the correct token under each tower's head is
    added, in float64, to its token's sum (and the token's count raised by one).

    Parameters
    ----------
    run : TrainedTwoTower
    chunks : LongTensor of shape (n_chunks, seq_len)
    data : TowerData
        Its tokenizer and special ids (as in training).
    batch_size : int
    mask_repeats : int
        BERT runs: passes with fresh masks (each predicts 15 % of the positions).
    seed : int
        Seed of the BERT masks.

    Returns
    -------
    Preference
    """
    model, heads = run.model, run.heads
    device = model.embedding.device
    vocab = model.embedding.shape[0]
    sums = torch.zeros(3, vocab, dtype=torch.float64, device=device)
    counts = torch.zeros(vocab, dtype=torch.float64, device=device)
    hits = torch.zeros(3, dtype=torch.float64, device=device)
    repeats = mask_repeats if model.config.tower == "bert" else 1
    gen = torch.Generator().manual_seed(seed)
    for _ in range(repeats):
        for start in range(0, len(chunks), batch_size):
            inputs, labels = inputs_and_labels(
                model.config.tower, chunks[start : start + batch_size], data, gen
            )
            inputs, labels = inputs.to(device), labels.to(device)
            sel = labels != IGNORE_INDEX
            target = labels[sel]
            h1, h2 = (h[sel] for h in model.states(inputs))
            logits = [
                heads[0](h1, model.embedding),
                heads[1](h2, model.embedding),
                model.head(torch.cat([h1, h2], -1), model.embedding),
            ]
            for k, lg in enumerate(logits):
                # log p(target) = logit - logsumexp: no (positions x vocab) softmax in float64
                lg = lg.float()
                log_p = lg.gather(1, target[:, None])[:, 0] - torch.logsumexp(lg, dim=-1)
                sums[k].index_add_(0, target, log_p.double().exp())
                hits[k] += (lg.argmax(-1) == target).sum()
            counts.index_add_(0, target, torch.ones_like(target, dtype=torch.float64))
    n = counts.sum().item()
    if n == 0:
        raise ValueError("`chunks` hold no predicted position; pass more or longer chunks")
    totals = sums.sum(1) / n
    primary = primary_tower(totals[:2].tolist())
    order = [primary, 1 - primary]
    with np.errstate(divide="ignore", invalid="ignore"):
        p_bar = (sums[order] / counts).cpu().numpy()
        scores = np.log(p_bar[0]) - np.log(p_bar[1])
    return Preference(
        scores=scores,
        counts=counts.cpu().numpy(),
        p_bar=p_bar,
        mean_p=totals[order].cpu().numpy(),
        accuracy=(hits[order] / n).cpu().numpy(),
        joint_mean_p=totals[2].item(),
        joint_accuracy=(hits[2] / n).item(),
        primary=primary,
        n_positions=int(n),
    )


# --------------------------------------------------------------------------------------
# Comparing runs (Table 2, Table 4)
# --------------------------------------------------------------------------------------


def top_tokens(counts, exclude_ids: Sequence[int], n: int) -> np.ndarray:
    """Ids of the ``n`` most frequent tokens, most frequent first (ties: lower id first).

    Parameters
    ----------
    counts : array of shape (vocab,)
    exclude_ids : sequence of int
        Ids never returned (special tokens).
    n : int
    """
    counts = np.asarray(counts, dtype=np.float64).copy()
    counts[list(exclude_ids)] = -1
    order = np.lexsort((np.arange(len(counts)), -counts))
    order = order[counts[order] > 0]
    return order[:n]


def _finite_pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"score vectors differ in shape: {a.shape} and {b.shape}")
    ok = np.isfinite(a) & np.isfinite(b)
    return a[ok], b[ok]


def score_correlation(a, b) -> float:
    """Pearson correlation of two score vectors over the entries finite in both."""
    a, b = _finite_pair(a, b)
    if len(a) < 3:
        raise ValueError(f"need at least 3 tokens scored by both runs, got {len(a)}")
    return float(np.corrcoef(a, b)[0, 1])


def permutation_null(a, b, n_perm: int = 1000, seed: int = 0) -> np.ndarray:
    """Correlations of ``a`` with random permutations of ``b``: the null of no shared
    pattern (the tokens' scores are exchangeable).

    Returns
    -------
    ndarray of shape (n_perm,)
    """
    a, b = _finite_pair(a, b)
    rng = np.random.default_rng(seed)
    za = (a - a.mean()) / a.std()
    zb = (b - b.mean()) / b.std()
    perms = np.stack([rng.permutation(len(b)) for _ in range(n_perm)])
    return (zb[perms] @ za) / len(a)


def correlation_matrix(scores: Mapping[str, np.ndarray], tokens: np.ndarray) -> pd.DataFrame:
    """Pairwise Pearson correlation of runs' scores over ``tokens`` (Table 2)."""
    names = list(scores)
    mat = [[score_correlation(scores[a][tokens], scores[b][tokens]) for b in names] for a in names]
    return pd.DataFrame(mat, index=names, columns=names)


def relation(a: RunSpec, b: RunSpec) -> str:
    """How two runs differ: ``"seed"`` (same architecture), ``"size"`` (same tower type) or
    ``"type"`` (different tower types)."""
    if a.config.tower != b.config.tower:
        return "type"
    return "seed" if a.config == b.config else "size"


def pair_table(
    corr: pd.DataFrame, specs: Sequence[RunSpec], null_p99: float | None = None
) -> pd.DataFrame:
    """Every pair of runs with its relation, our correlation and the paper's range for that
    relation (:data:`PAPER_RELATIONS`, from Table 2).

    Returns
    -------
    DataFrame, one row per pair
        ``run A``, ``run B``, ``relation``, ``ours r``, ``paper r (min)``, ``paper r (max)``
        and, with ``null_p99``, ``above null p99``.
    """
    by_name = {s.name: s for s in specs}
    rows = []
    for i, a in enumerate(corr.index):
        for b in corr.index[i + 1 :]:
            rel = relation(by_name[a], by_name[b])
            lo, hi = PAPER_RELATIONS[rel]
            rows.append(
                {
                    "run A": a,
                    "run B": b,
                    "relation": rel,
                    "ours r": corr.loc[a, b],
                    "paper r (min)": lo,
                    "paper r (max)": hi,
                }
            )
    table = pd.DataFrame(rows)
    if null_p99 is not None:
        table["above null p99"] = table["ours r"] > null_p99
    return table


def spearman_matrix(scores: Mapping[str, np.ndarray], tokens: np.ndarray) -> pd.DataFrame:
    """Pairwise Spearman correlation of runs' scores and the frequency rank (Table 4).

    ``tokens`` must be ordered by descending frequency (:func:`top_tokens`); the frequency
    rank is the position in it.
    """
    from scipy.stats import spearmanr

    columns = {name: s[tokens] for name, s in scores.items()}
    columns["frequency rank"] = np.arange(1, len(tokens) + 1, dtype=np.float64)
    names = list(columns)
    mat = np.eye(len(names))
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            x, y = _finite_pair(columns[a], columns[names[j]])
            mat[i, j] = mat[j, i] = spearmanr(x, y).statistic
    return pd.DataFrame(mat, index=names, columns=names)


# --------------------------------------------------------------------------------------
# Parts of speech (Fig. 4)
# --------------------------------------------------------------------------------------


def token_pos(sentences: Sequence, tokenizer) -> pd.DataFrame:
    """Each token's most frequent UPOS tag in tagged sentences.

    Every word is split into the tokenizer's pieces and each piece counts the word's tag.

    Parameters
    ----------
    sentences : sequence of lmsim.data.Sentence
        With ``upos``; PTB's ``<unk>`` is skipped.
    tokenizer : transformers tokenizer

    Returns
    -------
    DataFrame indexed by token id
        ``token``, ``upos`` (most frequent; ties alphabetical), ``n`` (tagged occurrences),
        ``share`` (fraction of them with that tag), ``silver`` (tags from a tagger).
    """
    if not sentences or sentences[0].upos is None:
        raise ValueError("`sentences` must be non-empty and carry UPOS tags")
    pieces: dict[str, list[int]] = {}
    tags: dict[int, Counter] = {}
    for sent in sentences:
        for word, tag in zip(sent.words, sent.upos):
            if word == "<unk>":
                continue
            if word not in pieces:
                enc = tokenizer.backend_tokenizer.encode(word, add_special_tokens=False)
                pieces[word] = enc.ids
            for tid in pieces[word]:
                tags.setdefault(tid, Counter())[tag] += 1
    silver = any(getattr(s, "silver", False) for s in sentences)
    rows = {}
    for tid, counter in tags.items():
        n = sum(counter.values())
        best = max(sorted(counter), key=counter.__getitem__)
        rows[tid] = (tokenizer.convert_ids_to_tokens(tid), best, n, counter[best] / n, silver)
    return pd.DataFrame.from_dict(
        rows, orient="index", columns=["token", "upos", "n", "share", "silver"]
    ).sort_index()


def pos_table(
    scores: Mapping[str, np.ndarray], pos: pd.DataFrame, tokens: np.ndarray, tags: Sequence[str]
) -> pd.DataFrame:
    """Score distribution per tag and run over ``tokens`` (Fig. 4), and the paper's claims.

    A tag is *preferred by the primary tower* when its median score is above 0 and by the
    secondary when below.

    Returns
    -------
    DataFrame with one row per (run, tag)
        ``n_tokens``, ``median``, ``mean``, ``frac_positive``, ``preferred``,
        ``paper`` (the paper's claim, if any) and ``holds``.
    """
    rows = []
    tagged = pos.reindex(tokens)
    for name, s in scores.items():
        for tag in tags:
            ids = tagged.index[tagged["upos"] == tag]
            vals = s[ids]
            vals = vals[np.isfinite(vals)]
            med = float(np.median(vals)) if len(vals) else math.nan
            preferred = "primary" if med > 0 else "secondary" if med < 0 else "none"
            claim = PAPER_POS_CLAIMS.get(tag)
            rows.append(
                {
                    "run": name,
                    "tag": tag,
                    "n_tokens": len(vals),
                    "median": med,
                    "mean": float(vals.mean()) if len(vals) else math.nan,
                    "frac_positive": float((vals > 0).mean()) if len(vals) else math.nan,
                    "preferred": preferred if len(vals) else "n/a",
                    "paper": claim or "spread",
                    "holds": (preferred == claim) if claim and len(vals) else None,
                }
            )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# ICA word groups (Eq. 5-7, Fig. 5-6, Table 3)
# --------------------------------------------------------------------------------------


def pca_whiten(X, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Centre ``X`` and project it on its top ``d`` principal axes, with unit variance.

    ``P = Xc V_d S_d^{-1/2}`` with ``S_d``, ``V_d`` the top eigenpairs of ``XcᵀXc / n`` (the
    paper's Eq. 5 writes ``√S_d``; see the module notes).

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    d : int

    Returns
    -------
    P : ndarray of shape (n_samples, d)
    eigvals : ndarray of shape (n_features,)
        All eigenvalues, descending (for the explained variance).
    """
    X = np.asarray(X, dtype=np.float64)
    if not 1 <= d <= min(X.shape):
        raise ValueError(f"`d` must lie in [1, {min(X.shape)}] for X of shape {X.shape}, got {d}")
    Xc = X - X.mean(0)
    eigvals, eigvecs = np.linalg.eigh(Xc.T @ Xc / len(Xc))
    order = np.argsort(eigvals)[::-1]
    eigvals, eigvecs = eigvals[order], eigvecs[:, order]
    return Xc @ eigvecs[:, :d] / np.sqrt(np.maximum(eigvals[:d], 1e-12)), eigvals


def amari_g(y: np.ndarray) -> np.ndarray:
    """The paper's nonlinearity (Eq. 7): ``g(y) = sgn(y) (1 − exp(−√(2|y|))) / 2``."""
    return np.sign(y) * (1.0 - np.exp(-np.sqrt(2.0 * np.abs(y)))) / 2.0


def amari_ica(
    P, lr: float = 0.01, n_iter: int = 5000, tol: float = 1e-7
) -> tuple[np.ndarray, np.ndarray, int]:
    """Amari's natural-gradient ICA (Eq. 6): ``W ← W + lr (I − g(Y)Yᵀ/n) W``, ``Y = W P``.

    ``W₀ = I``; full-batch updates until the largest change of ``W`` is below ``tol``.

    Parameters
    ----------
    P : array of shape (n_samples, d)
        (Whitened) inputs, one row per sample.
    lr, n_iter, tol : float, int, float

    Returns
    -------
    Y : ndarray of shape (n_samples, d)
        The sources, one column per component.
    W : ndarray of shape (d, d)
    n_iter_run : int
    """
    P = np.asarray(P, dtype=np.float64).T
    d, n = P.shape
    W = np.eye(d)
    identity = np.eye(d)
    n_run, change = 0, math.inf
    while n_run < n_iter and change >= tol:
        Y = W @ P
        step = lr * (identity - amari_g(Y) @ Y.T / n) @ W
        W = W + step
        change = np.abs(step).max()
        n_run += 1
    return (W @ P).T, W, n_run


def ica_groups(Y: np.ndarray, threshold: float = 2.5) -> np.ndarray:
    """Membership of each sample in each component's group: ``|Y_j| > threshold``.

    Returns
    -------
    ndarray of bool, shape (n_samples, d)
    """
    return np.abs(np.asarray(Y)) > threshold


def ica_summary(Y: np.ndarray, threshold: float = 2.5) -> dict:
    """The paper's Sec. 5.3 / Fig. 6 facts of ICA sources ``Y`` (rows = words)."""
    per_word = ica_groups(Y, threshold).sum(1)
    return {
        "fraction of values in [-1, 1]": float((np.abs(Y) <= 1).mean()),
        "fraction of words in no group": float((per_word == 0).mean()),
        "fraction of words in exactly one group": float((per_word == 1).mean()),
        "mean groups per word": float(per_word.mean()),
    }


def group_table(
    Y: np.ndarray,
    tokens: np.ndarray,
    tokenizer,
    scores: Mapping[str, np.ndarray],
    threshold: float = 2.5,
    n_words: int = 5,
) -> pd.DataFrame:
    """Mean preference score and rank of each ICA word group (Table 3).

    Parameters
    ----------
    Y : ndarray of shape (n_tokens, d)
        ICA sources of the embedding rows of ``tokens`` (most frequent first).
    tokens : ndarray of shape (n_tokens,)
    tokenizer : transformers tokenizer
    scores : dict of run name to ndarray of shape (vocab,)
    threshold : float
    n_words : int
        Most frequent words shown per group.

    Returns
    -------
    DataFrame, one row per non-empty group, sorted by the first run's rank
        ``component``, ``size``, ``words``, and per run ``<run> score``, ``<run> rank``.
    """
    member = ica_groups(Y, threshold)
    rows = []
    for j in range(member.shape[1]):
        ids = tokens[member[:, j]]
        if len(ids) == 0:
            continue
        row = {
            "component": j,
            "size": len(ids),
            "words": ", ".join(tokenizer.convert_ids_to_tokens(ids[:n_words].tolist())),
        }
        for name, s in scores.items():
            row[f"{name} score"] = (
                float(np.nanmean(s[ids])) if np.isfinite(s[ids]).any() else math.nan
            )
        rows.append(row)
    table = pd.DataFrame(rows)
    for name in scores:
        table[f"{name} rank"] = table[f"{name} score"].rank(ascending=False, method="min")
    if len(table):
        table = table.sort_values(f"{next(iter(scores))} rank").reset_index(drop=True)
    return table


# --------------------------------------------------------------------------------------
# Beyond the paper: the towers compared (CKA)
# --------------------------------------------------------------------------------------


@torch.no_grad()
def tower_states(
    run: TrainedTwoTower,
    chunks: torch.Tensor,
    data: TowerData,
    primary: int = 0,
    batch_size: int = 32,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Every layer's states of both towers at the predicted positions, primary tower first.

    Returns
    -------
    dict of block name to ndarray of shape (n_positions, state_dim)
        ``"primary/layer.{i}"`` and ``"secondary/layer.{i}"``, ``i = 1..layers``
        (:func:`lmsim.blocks.block_name`); ``primary`` is :attr:`Preference.primary`.
    """
    if primary not in (0, 1):
        raise ValueError(f"`primary` must be 0 or 1, got {primary!r}")
    model = run.model
    device = model.embedding.device
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, list] = {}
    for start in range(0, len(chunks), batch_size):
        inputs, labels = inputs_and_labels(
            model.config.tower, chunks[start : start + batch_size], data, gen
        )
        sel = (labels != IGNORE_INDEX).to(device)
        towers = model.states(inputs.to(device), all_layers=True)
        for role, which in (("primary", primary), ("secondary", 1 - primary)):
            for i, h in enumerate(towers[which], start=1):
                out.setdefault(block_name(role, i), []).append(h[sel].double().cpu().numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


def tower_cka(
    states_a: Mapping[str, np.ndarray], states_b: Mapping[str, np.ndarray] | None = None
) -> pd.DataFrame:
    """Linear CKA between towers per layer: within one run, or across two runs.

    Parameters
    ----------
    states_a : dict from :func:`tower_states`
    states_b : dict, optional
        A second run's states on the same chunks (same predicted positions).

    Returns
    -------
    DataFrame indexed by layer
        Within a run: ``primary vs secondary``. Across runs: ``primary vs primary``,
        ``secondary vs secondary``, ``primary vs secondary``, ``secondary vs primary``.
    """
    from lmsim.metrics import linear_cka

    layers = sorted({int(k.rsplit(".", 1)[1]) for k in states_a})
    rows = {}
    for i in layers:
        p, s = states_a[block_name("primary", i)], states_a[block_name("secondary", i)]
        if states_b is None:
            rows[i] = {"primary vs secondary": linear_cka(p, s)}
            continue
        p2 = states_b.get(block_name("primary", i))
        s2 = states_b.get(block_name("secondary", i))
        if p2 is None:
            continue
        rows[i] = {
            "primary vs primary": linear_cka(p, p2),
            "secondary vs secondary": linear_cka(s, s2),
            "primary vs secondary": linear_cka(p, s2),
            "secondary vs primary": linear_cka(s, p2),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("layer")
