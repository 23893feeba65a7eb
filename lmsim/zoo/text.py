"""The zoo's text: PTB lines, the deterministic WordPiece tokenizer, token streams, chunks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lmsim._io import entry_dir, open_entry
from lmsim.zoo.profiles import ZooProfile, _build_hint, _root, get_profile

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


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


def word_counts(lines: Sequence[str]) -> dict[str, int]:
    """Counts of the lower-cased, BERT-pre-tokenised words of ``lines``.

    A literal ``[UNK]`` (PTB's out-of-vocabulary marker, mapped by :func:`_ptb_lines`) is a
    special token, not a word to split, so text is split around it.
    """
    from tokenizers import normalizers, pre_tokenizers

    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    counts: dict[str, int] = {}
    for line in lines:
        for part in line.split("[UNK]"):
            for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(part)):
                counts[word] = counts.get(word, 0) + 1
    return counts


def wordpiece_tokenizer(vocab: dict[str, int], model_max_length: int, bos_eos: bool = True):
    """A lower-casing BERT WordPiece tokenizer over a given vocabulary.

    Parameters
    ----------
    vocab : dict of str to int
        Token -> id, the five :data:`SPECIAL_TOKENS` included (see :func:`wordpiece_vocab`).
    model_max_length : int
    bos_eos : bool
        Also declare ``[CLS]``/``[SEP]`` as the bos/eos tokens (the zoo's causal models share
        the vocabulary); off for a plain BERT tokenizer.

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        ``[CLS] x [SEP]`` (``[CLS] a [SEP] b [SEP]`` for pairs), right padding.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(SPECIAL_TOKENS)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    extra = {"bos_token": "[CLS]", "eos_token": "[SEP]"} if bos_eos else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        model_max_length=model_max_length,
        padding_side="right",
        **extra,
    )


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
    vocab = wordpiece_vocab(word_counts(lines), vocab_size)
    return wordpiece_tokenizer(vocab, model_max_length)


def tokenizer_dir(profile: str | ZooProfile | None = None, build: bool = True) -> Path:
    """Folder of the zoo's shared tokenizer (trained on PTB train on first use)."""
    prof = get_profile(profile)
    path = _root(prof) / "tokenizer"
    if open_entry(path, "building it again", legacy=_legacy_tokenizer):
        return path
    if not build:
        raise FileNotFoundError(f"zoo tokenizer not built at {path}; {_build_hint(prof)}")
    tokenizer = train_tokenizer(
        _ptb_lines("train", prof.max_train_lines), prof.vocab_size, prof.seq_len
    )
    with entry_dir(path) as tmp:
        tokenizer.save_pretrained(tmp)
    return path


def _legacy_tokenizer(path: Path) -> dict | None:
    """A tokenizer folder written before entry markers: whole when its JSON parses."""
    if not (path / "tokenizer.json").is_file():
        return None
    json.loads((path / "tokenizer.json").read_text())
    return {}


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
