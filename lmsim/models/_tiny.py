"""Tiny random models: seeded 2-layer BERT, DistilBERT, GPT-2 and Llama with in-memory tokenizers."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from lmsim.models._builds import _atomic_build

_TINY_KINDS = ("bert", "distilbert", "gpt2", "llama")
# Bump when the tiny builders change, so stale cached builds are rebuilt.
_TINY_BUILD_VERSION = 2
# BERT's and DistilBERT's config fields for the width, depth, heads and feed-forward width:
# the two encoders take the same values under other names.
_ENCODER_FIELDS = {
    "bert": ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"),
    "distilbert": ("dim", "n_layers", "n_heads", "hidden_dim"),
}


def _tokenizer_corpus() -> list[str]:
    from lmsim.data import generate_smoke_sentences

    return [s.text for s in generate_smoke_sentences(2000, seed=12345)]


def _ascii_alphabet() -> list[str]:
    return [chr(c) for c in range(33, 127)]


def _train_tiny_tokenizer(kind: str, vocab_size: int):
    """A WordPiece (BERT) or byte-level BPE (GPT-2, Llama) tokenizer, built in memory.

    Both are deterministic: the WordPiece vocabulary comes from
    :func:`lmsim.zoo.text.wordpiece_vocab` (word counts, ties broken alphabetically), the
    BPE merges from ``tokenizers``' ``BpeTrainer`` (whose ties are broken by the pair).
    """
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    corpus = _tokenizer_corpus()
    if kind in ("bert", "distilbert"):
        from lmsim.zoo.text import word_counts, wordpiece_tokenizer, wordpiece_vocab

        counts = word_counts(corpus)
        # Every printable ASCII character starts a piece (single characters are never
        # kept as words), so any ASCII word splits into known pieces and [UNK] is rare on
        # real text (PTB). The vocabulary is built deterministically (ties broken
        # alphabetically): tokenizers' WordPieceTrainer breaks ties between equally
        # frequent merges in hash-map order, so each fresh build got another vocabulary.
        for char in _ascii_alphabet():
            counts.setdefault(char, 0)
        return wordpiece_tokenizer(wordpiece_vocab(counts, vocab_size), 128, bos_eos=False)
    specials = ["<|endoftext|>"] if kind == "gpt2" else ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    if kind == "gpt2":
        # GPT-2 adds no special tokens; it has no pad token (load_model sets pad = eos).
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        bos, eos, unk = "<|endoftext|>", "<|endoftext|>", "<|endoftext|>"
    else:
        # Llama prepends <s>; no pad token (load_model sets pad = eos).
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A",
            pair="<s> $A <s> $B:1",
            special_tokens=[("<s>", tok.token_to_id("<s>"))],
        )
        bos, eos, unk = "<s>", "</s>", "<unk>"
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        unk_token=unk,
        model_max_length=128,
        padding_side="right",
    )


def _tiny_config(kind: str, tokenizer, hidden_size: int, n_layers: int, n_heads: int, **cfg):
    from transformers import BertConfig, DistilBertConfig, GPT2Config, LlamaConfig

    vocab_size = len(tokenizer)
    if kind in _ENCODER_FIELDS:
        width, depth, heads, feed_forward = _ENCODER_FIELDS[kind]
        return {"bert": BertConfig, "distilbert": DistilBertConfig}[kind](
            vocab_size=vocab_size,
            **{width: hidden_size, depth: n_layers, heads: n_heads, feed_forward: 4 * hidden_size},
            max_position_embeddings=128,
            pad_token_id=tokenizer.pad_token_id,
            **cfg,
        )
    if kind == "gpt2":
        return GPT2Config(
            vocab_size=vocab_size,
            n_embd=hidden_size,
            n_layer=n_layers,
            n_head=n_heads,
            n_positions=128,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            **cfg,
        )
    cfg.setdefault("num_key_value_heads", max(1, n_heads // 2))
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        max_position_embeddings=128,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
        **cfg,
    )


def build_tiny_model(
    kind: str,
    path: str | os.PathLike,
    seed: int = 0,
    hidden_size: int = 32,
    n_layers: int = 2,
    n_heads: int = 4,
    vocab_size: int = 1000,
    **cfg,
) -> Path:
    """Build a seeded random tiny model and its tokenizer and ``save_pretrained`` them to ``path``.

    Parameters
    ----------
    kind : {"bert", "distilbert", "gpt2", "llama"}
        BERT and DistilBERT (on BERT's WordPiece tokenizer) are saved with their masked-LM head, GPT-2 and Llama with their causal-LM head, so
        every task of :func:`load_model` finds the weights it needs.
    path : str or path-like
        Target directory (created; existing files are overwritten).
    seed : int
        ``torch.manual_seed(seed)`` before initialisation: the same seed gives the same weights.
    hidden_size, n_layers, n_heads : int
        Width, depth and attention heads (``hidden_size`` must be divisible by ``n_heads``).
    vocab_size : int
        Target vocabulary size of the in-memory tokenizer (trained on generated text).
    **cfg
        Extra config fields (e.g. ``num_key_value_heads`` for Llama).

    Returns
    -------
    Path
        ``path``.
    """
    from transformers import (
        BertForMaskedLM,
        DistilBertForMaskedLM,
        GPT2LMHeadModel,
        LlamaForCausalLM,
    )

    if kind not in _TINY_KINDS:
        raise ValueError(f"`kind` must be one of {list(_TINY_KINDS)}, got {kind!r}")
    if hidden_size % n_heads:
        raise ValueError(f"`hidden_size`={hidden_size} must be divisible by `n_heads`={n_heads}")
    tokenizer = _train_tiny_tokenizer(kind, vocab_size)
    config = _tiny_config(kind, tokenizer, hidden_size, n_layers, n_heads, **cfg)
    cls = {
        "bert": BertForMaskedLM,
        "distilbert": DistilBertForMaskedLM,
        "gpt2": GPT2LMHeadModel,
        "llama": LlamaForCausalLM,
    }[kind]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = cls(config).eval()
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _tiny_dir(name: str) -> Path:
    kind = name.removeprefix("tiny-")
    marker = {"kind": kind, "version": _TINY_BUILD_VERSION}
    return _atomic_build(name, lambda tmp: build_tiny_model(kind, tmp), marker)
