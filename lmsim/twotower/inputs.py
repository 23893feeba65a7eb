"""Tokenised chunks of a corpus and what each tower type reads and predicts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lmsim.twotower.config import IGNORE_INDEX, TwoTowerSettings


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


# A Hugging Face corpus has no validation split (Wikipedia, BookCorpus: `train` only): every
# HELD_OUT-th line of its train split is the validation part, the other lines are train.
HELD_OUT = 100


def _lines(corpora: Sequence[str], split: str, max_lines: int | None) -> list[str]:
    """The lines of ``corpora``'s ``split`` ("train" or "valid"), at most ``max_lines``.

    An ``"hf:..."`` corpus is read from its ``train`` split and cut in two disjoint parts
    (:data:`HELD_OUT`): the hub's English Wikipedia and BookCorpus have no other split.
    """
    from lmsim.data import load_corpus

    lines: list[str] = []
    for name in corpora:
        if name.startswith("hf:"):
            held_out = split != "train"
            text = [
                line
                for index, line in enumerate(load_corpus(name, split="train"))
                if (index % HELD_OUT == 0) == held_out
            ]
        else:
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


def labelled_batches(
    tower: str, chunks: torch.Tensor, data: TowerData, batch_size: int, generator: torch.Generator
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """:func:`inputs_and_labels` of ``chunks`` in consecutive batches, in order.

    Parameters
    ----------
    tower : {"elmo", "gpt", "bert"}
    chunks : LongTensor of shape (n_chunks, seq_len)
    data : TowerData
    batch_size : int
    generator : torch.Generator
        The BERT masks' generator, drawn from batch after batch.

    Yields
    ------
    inputs, labels : LongTensor of shape (<= batch_size, seq_len)
    """
    for start in range(0, len(chunks), batch_size):
        yield inputs_and_labels(tower, chunks[start : start + batch_size], data, generator)
