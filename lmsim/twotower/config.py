"""What a two-tower run is: the tower architecture, the run (name, seed) and the settings
of both training phases."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from lmsim.training import TrainSettings

TOWER_TYPES = ("elmo", "gpt", "bert")
IGNORE_INDEX = -100


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
        On the embedding output and inside every layer (the authors: 0.1).
    input_proj : bool
        The authors' input path (``ttlm/model.py``, ``TwoTowerDsBert`` and ``TwoTowerELMo``:
        ``pt_emb``, ``emb1``, ``emb2``): one ``embed``-wide shared table, a LayerNorm (ELMo
        too), and a per-tower ``Linear(embed → width)``. Transformers then need ``embed`` =
        ``2 * hidden`` (the default when ``embed`` is None); an ELMo tower reads
        ``embed // 2`` and maps each direction's last LSTM output back to ``embed // 2``
        (``h2o_f1``, ``h2o_b1``), so its state is ``embed`` wide. False: both towers read the
        table directly (lmsim's default).
    untied_heads : bool
        The authors' heads (``ttlm/model.py``, every class): a LayerNorm on the concatenated
        states before the joint head (``layer_norm_final``); phase-2 heads read their tower's
        half of that (frozen) LayerNorm's output, then ``Linear(state, width)``, GELU,
        LayerNorm and an untied ``Linear(width, vocab)`` (``dense_act1``,
        ``layer_norm_trans1``, ``outnet1``). False: every head is decoded with the tied,
        frozen embedding (Eq. 2 as written).
    elmo_forward_only : bool
        ELMo as the authors' code runs: ``TwoTowerELMo.flip_seq`` multiplies the backward
        LSTM's output by the *diagonal* of an anti-identity (``einsum("bwl,ww->bwl")``),
        which is zero for their even window of 128, so each tower's backward half is zero
        and its "ELMo" is a forward LSTM LM. Here the backward half of the state is zeros
        and no backward LSTM is built.
    """

    tower: str
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    intermediate: int | None = None
    embed: int | None = None
    lstm_proj: int = 0
    dropout: float = 0.0
    input_proj: bool = False
    untied_heads: bool = False
    elmo_forward_only: bool = False

    def __post_init__(self):
        if self.tower not in TOWER_TYPES:
            raise ValueError(f"`tower` must be one of {TOWER_TYPES}, got {self.tower!r}")
        for name in ("hidden", "layers", "heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"`dropout` must lie in [0, 1), got {self.dropout}")
        if self.elmo_forward_only and self.tower != "elmo":
            raise ValueError(f"`elmo_forward_only` applies to ELMo towers, not {self.tower!r}")
        if self.tower != "elmo":
            if self.hidden % self.heads:
                raise ValueError(
                    f"`hidden`={self.hidden} must be divisible by `heads`={self.heads}"
                )
            wide = 2 * self.hidden if self.input_proj else self.hidden
            if self.embed not in (None, wide):
                raise ValueError(
                    f"transformer towers read {'2 * ' if self.input_proj else ''}`hidden`-wide "
                    f"word vectors: `embed` must be None or {wide}, got {self.embed}"
                )
        elif self.input_proj and self.embed_dim % 2:
            raise ValueError(
                f"an ELMo tower with `input_proj` reads `embed // 2`: `embed` must be even, "
                f"got {self.embed_dim}"
            )

    @property
    def embed_dim(self) -> int:
        """Size of the shared word vectors."""
        if self.embed:
            return self.embed
        return 2 * self.hidden if self.input_proj and self.tower != "elmo" else self.hidden

    @property
    def width(self) -> int:
        """What one tower reads: ``hidden`` (transformers), ``embed // 2`` (ELMo with
        ``input_proj``) or the word vectors (ELMo)."""
        if self.tower != "elmo":
            return self.hidden
        return self.embed_dim // 2 if self.input_proj else self.embed_dim

    @property
    def lstm_out(self) -> int:
        """Size of one LSTM layer's output per direction."""
        return self.lstm_proj or self.hidden

    @property
    def state_dim(self) -> int:
        """Size of one tower's state (ELMo: forward and backward concatenated)."""
        if self.tower == "elmo":
            return 2 * (self.width if self.input_proj else self.lstm_out)
        return self.hidden

    def key(self) -> dict:
        """The fields that decide a run: every field, less the later options at their
        defaults (so runs cached before those options keep their keys)."""
        return {
            k: v
            for k, v in dataclasses.asdict(self).items()
            if not (k in _OPTION_DEFAULTS and v == _OPTION_DEFAULTS[k])
        }

    def as_authors(self, dropout: float = 0.1) -> TowerConfig:
        """This architecture with every choice of the authors' code: untied heads, dropout
        0.1, input projections for BERT and ELMo (their GPT towers read GPT-2's shared
        H-wide table), and the forward-only ELMo their code runs. A BERT tower's ``embed``
        becomes ``2 * hidden``."""
        return dataclasses.replace(
            self,
            input_proj=self.tower != "gpt",
            untied_heads=True,
            dropout=dropout,
            elmo_forward_only=self.tower == "elmo",
            embed=None if self.tower == "bert" else self.embed,
        )

    @property
    def ffn_dim(self) -> int:
        return self.intermediate or 4 * self.hidden


# Options added after runs were cached: left out of a run's cache key at these values, so
# the runs cached before them keep their keys.
_OPTION_DEFAULTS = {"input_proj": False, "untied_heads": False, "elmo_forward_only": False}


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
        ``"hf:..."``; a hub corpus's validation part is every 100th line of its train
        split, :data:`lmsim.twotower.inputs.HELD_OUT`).
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
        _check_tokenizer_spec(self.tokenizer)

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


def _check_tokenizer_spec(spec) -> None:
    """``"zoo:<profile>"``, ``"train:<vocab_size>"`` (an int >= 100) or a model name."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"`tokenizer` must be a non-empty str, got {spec!r}")
    if spec.startswith("train:"):
        size = spec.split(":", 1)[1]
        if not size.isdigit() or int(size) < 100:
            raise ValueError(
                f"`tokenizer` {spec!r}: after 'train:' give the vocabulary size as an integer "
                "of at least 100, e.g. 'train:8000'"
            )
    elif spec.startswith("zoo:") and not spec.split(":", 1)[1]:
        raise ValueError(f"`tokenizer` {spec!r}: name the zoo profile, e.g. 'zoo:default'")
