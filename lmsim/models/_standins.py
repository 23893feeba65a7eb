"""Dry-run stand-ins of hub models: the same architecture class at tiny sizes, built offline.

Under ``$LMSIM_DRY_RUN`` (:mod:`lmsim._dryrun`), :func:`lmsim.models.load_model` and kin
load a hub id from :func:`standin_dir`: a folder holding a seeded random model built from a
``transformers`` configuration of the hub model's class (``RobertaConfig`` for
``roberta-base``, ``XLNetConfig`` for ``xlnet-base-cased``, ...) at tiny widths, and an
offline tokenizer of the same kind: WordPiece with ``[CLS] x [SEP]`` for the BERT family,
byte-level BPE for GPT-2 and RoBERTa, a SentencePiece-style (Metaspace) BPE for XLNet,
ALBERT and XLM-R, each with the hub tokenizer's special tokens and template (XLNet's
``x <sep> <cls>``; OpenAI GPT's lone ``<unk>``, no pad nor eos), lower-casing where the hub
one does. Position limits are the hub models' (512, 514, 1024, 4098; XLNet none), so
truncation follows the same path as the real run.
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import torch

from lmsim._dryrun import DEPTH_SCALE
from lmsim._runtime import quiet_transformers
from lmsim.models._builds import _atomic_build

# Bump when the builders change, so stale cached stand-ins are rebuilt.
_STANDIN_VERSION = 1


@dataclass(frozen=True)
class StandIn:
    """How one hub architecture is stood in for.

    ``model_type``: the transformers ``model_type`` (its configuration class);
    ``tokenizer``: the tokenizer kind (a key of :data:`_TOKENIZERS`); ``max_positions``:
    the hub model's position limit (None: unbounded); ``config``: extra config fields.
    """

    model_type: str
    tokenizer: str
    max_positions: int | None
    config: dict = field(default_factory=dict)


# Name patterns, first match wins: the last part of the hub id, lower-cased.
_PATTERNS: tuple[tuple[str, StandIn], ...] = (
    ("xlm-roberta", StandIn("xlm-roberta", "xlmr", 514)),
    ("longformer", StandIn("longformer", "roberta", 4098, {"attention_window": 16})),
    ("deberta-v[23]", StandIn("deberta-v2", "deberta", 512)),
    ("deberta", StandIn("deberta", "deberta", 512)),
    ("roberta", StandIn("roberta", "roberta", 514)),  # distilroberta too
    ("xlnet", StandIn("xlnet", "xlnet", None)),
    ("albert", StandIn("albert", "albert", 512)),
    ("electra", StandIn("electra", "wordpiece", 512)),
    ("openai-gpt", StandIn("openai-gpt", "openai-gpt", 512)),
    ("gpt2", StandIn("gpt2", "gpt2", 1024)),  # distilgpt2 too
    ("distilbert", StandIn("distilbert", "wordpiece", 512)),
    ("bert", StandIn("bert", "wordpiece", 512)),
)

# Tiny sizes: (layers, width). The depth is the hub model's divided by DEPTH_SCALE (BERT-large
# 24 -> 8, base 12 -> 4, DistilBERT 6 -> 2), so a layer index of a page (frozen layers) is
# scaled by it too (lmsim.reproduce._dryrun); the width is 32 (48 for large and medium).
_BASE, _LARGE, _DISTIL = (12 // DEPTH_SCALE, 32), (24 // DEPTH_SCALE, 48), (6 // DEPTH_SCALE, 32)
_HEADS = 4

# Tokenizer kinds: special tokens (the hub's names), template, lower-casing, model.
_TOKENIZERS = {
    "wordpiece": {
        "model": "wordpiece",
        "specials": {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]"}
        | {"mask": "[MASK]"},
        "single": "[CLS] $A [SEP]",
        "pair": "[CLS] $A [SEP] $B:1 [SEP]:1",
    },
    "roberta": {
        "model": "bytebpe",
        "specials": {"bos": "<s>", "pad": "<pad>", "eos": "</s>", "unk": "<unk>"}
        | {"cls": "<s>", "sep": "</s>", "mask": "<mask>"},
        "single": "<s> $A </s>",
        "pair": "<s> $A </s> </s> $B:1 </s>:1",
    },
    "deberta": {
        "model": "bytebpe",
        "specials": {"pad": "[PAD]", "cls": "[CLS]", "sep": "[SEP]", "unk": "[UNK]"}
        | {"mask": "[MASK]", "bos": "[CLS]", "eos": "[SEP]"},
        "single": "[CLS] $A [SEP]",
        "pair": "[CLS] $A [SEP] $B:1 [SEP]:1",
    },
    "gpt2": {
        "model": "bytebpe",
        "specials": {"bos": "<|endoftext|>", "eos": "<|endoftext|>", "unk": "<|endoftext|>"},
        "single": None,
        "pair": None,
    },
    "openai-gpt": {  # the hub tokenizer has only <unk>: no bos, eos nor pad
        "model": "bpe-suffix",
        "lowercase": True,
        "specials": {"unk": "<unk>"},
        "single": None,
        "pair": None,
    },
    "xlnet": {
        "model": "metaspace",
        "specials": {"bos": "<s>", "eos": "</s>", "unk": "<unk>", "sep": "<sep>"}
        | {"pad": "<pad>", "cls": "<cls>", "mask": "<mask>"},
        "single": "$A <sep> <cls>",
        "pair": "$A <sep> $B:1 <sep>:1 <cls>:2",
    },
    "albert": {
        "model": "metaspace",
        "lowercase": True,
        "specials": {"pad": "<pad>", "unk": "<unk>", "cls": "[CLS]", "sep": "[SEP]"}
        | {"mask": "[MASK]", "bos": "[CLS]", "eos": "[SEP]"},
        "single": "[CLS] $A [SEP]",
        "pair": "[CLS] $A [SEP] $B:1 [SEP]:1",
    },
    "xlmr": {
        "model": "metaspace",
        "specials": {"bos": "<s>", "pad": "<pad>", "eos": "</s>", "unk": "<unk>"}
        | {"cls": "<s>", "sep": "</s>", "mask": "<mask>"},
        "single": "<s> $A </s>",
        "pair": "<s> $A </s> </s> $B:1 </s>:1",
    },
}
_VOCAB = 600


def standin_spec(name: str) -> StandIn:
    """The stand-in of hub id ``name`` (``"roberta-base"``, ``"FacebookAI/xlm-roberta-base"``).

    Raises
    ------
    ValueError
        No architecture pattern matches: the message names the known ones.
    """
    last = name.split("/")[-1].lower()
    for pattern, spec in _PATTERNS:
        if re.search(pattern, last):
            return spec
    raise ValueError(
        f"the dry run has no stand-in for {name!r}: its name matches none of "
        f"{[p for p, _ in _PATTERNS]} (add one to lmsim.models._standins._PATTERNS)"
    )


def _sizes(name: str) -> tuple[int, int]:
    last = name.split("/")[-1].lower()
    if "large" in last or "medium" in last:
        return _LARGE
    if last.startswith("distil"):
        return _DISTIL
    return _BASE


def _lowercase(name: str, kind: str) -> bool:
    last = name.split("/")[-1].lower()
    return bool(_TOKENIZERS[kind].get("lowercase")) or "uncased" in last


@functools.lru_cache(maxsize=32)
def _build_tokenizer(kind: str, lowercase: bool, max_length: int | None):
    """An offline tokenizer of ``kind`` trained in memory on generated sentences (one per
    kind, casing and length: stand-ins of one family share it, as fine-tuned copies share
    their base's; treat it as read-only)."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    from lmsim.models._tiny import _tokenizer_corpus

    info = _TOKENIZERS[kind]
    specials = list(dict.fromkeys(info["specials"].values()))
    corpus = _tokenizer_corpus()
    model = info["model"]
    if model == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token=info["specials"]["unk"]))
        tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(
            vocab_size=_VOCAB, special_tokens=specials, show_progress=False
        )
    elif model == "bytebpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=_VOCAB,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    elif model == "bpe-suffix":
        tok = Tokenizer(models.BPE(unk_token=info["specials"]["unk"], end_of_word_suffix="</w>"))
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.BPEDecoder(suffix="</w>")
        trainer = trainers.BpeTrainer(
            vocab_size=_VOCAB,
            special_tokens=specials,
            end_of_word_suffix="</w>",
            show_progress=False,
        )
    else:  # metaspace: SentencePiece-style word starts
        tok = Tokenizer(models.BPE(unk_token=info["specials"]["unk"]))
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        trainer = trainers.BpeTrainer(
            vocab_size=_VOCAB, special_tokens=specials, show_progress=False
        )
    if lowercase and model != "wordpiece":
        tok.normalizer = normalizers.Lowercase()
    tok.train_from_iterator(corpus, trainer)
    if info["single"] is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=info["single"],
            pair=info["pair"],
            special_tokens=[(t, tok.token_to_id(t)) for t in specials],
        )
    elif model == "bytebpe":
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        **{f"{role}_token": token for role, token in info["specials"].items()},
        model_max_length=max_length or 1_000_000,
        padding_side="right",
    )


def standin_config(name: str, tokenizer=None):
    """The tiny ``transformers`` configuration standing in for hub id ``name``.

    Its class is the hub model's (``AutoConfig.for_model(model_type)``); widths and depths
    are tiny (:data:`_BASE`, :data:`_LARGE`, :data:`_DISTIL`); the vocabulary and the
    special-token ids are ``tokenizer``'s (the stand-in tokenizer when None).
    """
    from transformers import AutoConfig

    spec = standin_spec(name)
    if tokenizer is None:
        tokenizer = _build_tokenizer(spec.tokenizer, _lowercase(name, spec.tokenizer), None)
    layers, width = _sizes(name)
    ids = {
        f"{role}_token_id": getattr(tokenizer, f"{role}_token_id")
        for role in ("pad", "bos", "eos")
        if getattr(tokenizer, f"{role}_token", None) is not None
    }
    vocab = len(tokenizer)
    positions = spec.max_positions
    mt = spec.model_type
    if mt in ("gpt2", "openai-gpt"):
        fields = {"n_embd": width, "n_layer": layers, "n_head": _HEADS, "n_positions": positions}
    elif mt == "xlnet":
        fields = {"d_model": width, "n_layer": layers, "n_head": _HEADS, "d_inner": 4 * width}
    elif mt == "distilbert":
        fields = {"dim": width, "n_layers": layers, "n_heads": _HEADS, "hidden_dim": 4 * width}
        fields["max_position_embeddings"] = positions
    else:  # BERT-style field names
        fields = {"hidden_size": width, "num_hidden_layers": layers}
        fields |= {"num_attention_heads": _HEADS, "intermediate_size": 4 * width}
        fields["max_position_embeddings"] = positions
    if spec.model_type in ("albert", "electra"):
        fields["embedding_size"] = width // 2
    if spec.model_type == "deberta":  # deberta-base: relative attention, no absolute positions
        fields |= {"relative_attention": True, "pos_att_type": ["c2p", "p2c"]}
        fields |= {"position_biased_input": False, "type_vocab_size": 0}
    if spec.model_type == "longformer":
        fields["attention_window"] = [spec.config["attention_window"]] * layers
    return AutoConfig.for_model(spec.model_type, vocab_size=vocab, **fields, **ids)


def _head_class(config):
    """The class saved: with the pre-training head where transformers has one, so every task
    of :func:`lmsim.models.load_model` finds its weights."""
    import transformers

    for auto in (transformers.AutoModelForMaskedLM, transformers.AutoModelForCausalLM):
        if type(config) in auto._model_mapping:
            return auto
    return transformers.AutoModel


def build_standin(name: str, path: str | Path) -> Path:
    """Write the stand-in of hub id ``name`` (random weights seeded by the name, and its
    tokenizer) to ``path`` with ``save_pretrained``; return ``path``."""
    spec = standin_spec(name)
    tokenizer = _build_tokenizer(
        spec.tokenizer, _lowercase(name, spec.tokenizer), spec.max_positions
    )
    config = standin_config(name, tokenizer)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    with torch.random.fork_rng(devices=[]), quiet_transformers(True):
        torch.manual_seed(zlib.crc32(name.encode()))
        model = _head_class(config).from_config(config).eval()
        model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def standin_dir(name: str) -> Path:
    """The cached folder of hub id ``name``'s stand-in (built on first use)."""
    spec = standin_spec(name)
    marker = {"standin": name, "model_type": spec.model_type, "version": _STANDIN_VERSION}
    folder = "dry-run--" + re.sub(r"[^\w.-]", "--", name)
    return _atomic_build(folder, lambda tmp: build_standin(name, tmp), marker)
