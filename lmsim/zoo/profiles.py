"""Zoo profiles (sizes and budgets of one build) and the model list (what each model is)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lmsim._cache import cache_dir
from lmsim.training import TrainSettings


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
        Fine-tuning of the classifiers: every weight, with a linear head on the mean of
        the last hidden states (:class:`~lmsim.zoo.MeanPoolClassifier`).
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
    # Two one-thread processes on a 2-core machine. The classifiers train 5 epochs at
    # 1e-3: at 2 epochs and 5e-4 (the first setting) ft-finefood ended at its majority
    # class on one CPU (0.658) and barely above it on another (0.698); BBC News at 0.43.
    # Measured on ft-*-s0 (mean-pooled head): BBC News 0.84 test accuracy (0.94 at 10
    # epochs and 2e-3), fine food 0.735 (0.747 at 6 epochs and 5e-4, 0.719 at 2e-3); a
    # logistic regression on the same 64 word pieces: 0.93 and 0.76.
    "default": ZooProfile(
        name="default", threads=1, jobs=2, gen_temperature=3.0, ft_epochs=5.0, ft_lr=1e-3
    ),
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


# Seeds 1 and 2 of the ELECTRA, distilled and fine-tuned models give the zoo page's claims
# three seeds each (a student and a classifier of seed k are built from ``mlm-s{k}``); the
# causal and deep models have one seed each.
MODELS: dict[str, ModelSpec] = {
    "mlm-s0": ModelSpec("mlm", seed=0),
    "mlm-s1": ModelSpec("mlm", seed=1),
    "mlm-s2": ModelSpec("mlm", seed=2),
    "mlm-deep-s0": ModelSpec("mlm", seed=0, deep=True),
    "clm-s0": ModelSpec("clm", seed=0),
    "electra-s0": ModelSpec("electra", seed=0),
    "electra-s1": ModelSpec("electra", seed=1),
    "electra-s2": ModelSpec("electra", seed=2),
    "distil-mlm": ModelSpec("distil", seed=0, parent="mlm-s0"),
    "distil-mlm-s1": ModelSpec("distil", seed=1, parent="mlm-s1"),
    "distil-mlm-s2": ModelSpec("distil", seed=2, parent="mlm-s2"),
    "ft-bbcnews": ModelSpec("finetune", seed=0, parent="mlm-s0", task="bbcnews"),
    "ft-bbcnews-s1": ModelSpec("finetune", seed=1, parent="mlm-s1", task="bbcnews"),
    "ft-bbcnews-s2": ModelSpec("finetune", seed=2, parent="mlm-s2", task="bbcnews"),
    "ft-finefood": ModelSpec("finetune", seed=0, parent="mlm-s0", task="finefood"),
    "ft-finefood-s1": ModelSpec("finetune", seed=1, parent="mlm-s1", task="finefood"),
    "ft-finefood-s2": ModelSpec("finetune", seed=2, parent="mlm-s2", task="finefood"),
}


def get_profile(profile: str | ZooProfile | None = None) -> ZooProfile:
    """Resolve a profile name or object (None: ``"default"``).

    The profile is always an explicit argument: notebooks take it as a papermill parameter
    (``zoo_profile``) and pass it on; no environment variable selects it.
    """
    if isinstance(profile, ZooProfile):
        return profile
    if profile is None:
        profile = "default"
    if profile not in PROFILES:
        raise ValueError(
            f"unknown zoo profile {profile!r}; choose one of {sorted(PROFILES)} "
            f"(or pass a ZooProfile)"
        )
    return PROFILES[profile]


def _check_name(name: str) -> ModelSpec:
    if name not in MODELS:
        from lmsim._names import did_you_mean

        raise KeyError(
            f"unknown zoo model {name!r}{did_you_mean(name, MODELS)}; the zoo has {list(MODELS)}"
        )
    return MODELS[name]


def _dependencies(name: str) -> list[str]:
    """``name`` preceded by everything it is built from, parents first."""
    parent = _check_name(name).parent
    return ([*_dependencies(parent)] if parent else []) + [name]


def _children(name: str) -> list[str]:
    """The models built directly from ``name``."""
    return [c for c, spec in MODELS.items() if spec.parent == name]


def _dependents(name: str) -> list[str]:
    """Every model built from ``name``, directly or not."""
    return [d for c in _children(name) for d in [c, *_dependents(c)]]


def _root(prof: ZooProfile) -> Path:
    return cache_dir("zoo", prof.name)


def _build_hint(prof: ZooProfile) -> str:
    return (
        f"build it with `python -m lmsim.zoo build --profile {prof.name}` "
        f"or model_dir(..., build=True)"
    )


def train_settings(prof: ZooProfile, lr: float) -> TrainSettings:
    """The optimisation settings of a profile for a run at learning rate ``lr``."""
    return TrainSettings(
        lr=lr,
        weight_decay=prof.weight_decay,
        warmup_frac=prof.warmup_frac,
        eval_every=prof.eval_every,
        checkpoint_every=prof.checkpoint_every,
        bf16=prof.bf16,
        fused_adamw=prof.fused_adamw,
        compile=prof.compile,
    )
