"""Data and tokenizers shared by the tests: one generator per kind, seeded, no fixtures.

Fixtures live in ``conftest.py``; this module holds plain functions the test files import
(``from _helpers import ...``), so the data a test sees is fixed by its arguments alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

#: Seeds every seeded test runs on.
SEEDS = [0, 1, 2]


def random_orthogonal(d, seed):
    """A Haar-random orthogonal matrix of shape (d, d), seeded."""
    q, r = np.linalg.qr(np.random.default_rng(seed + 100).normal(size=(d, d)))
    return q * np.sign(np.diag(r))


def random_pair(seed, n=300, d_x=16, d_y=12, n_latent=5, noise=0.2):
    """Two noisy views ``X (n, d_x)``, ``Y (n, d_y)`` of shared latents.

    ``X`` is linear in the latents, ``Y`` linear in their ``tanh``; each gets Gaussian noise
    of scale ``noise``, then per-neuron scales in [0.3, 3] and offsets. The defaults are a
    low effective rank (5 latents in 16 and 12 neurons), so SVCCA truncation matters.
    """
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, n_latent))
    X = latent @ rng.normal(size=(n_latent, d_x)) + noise * rng.normal(size=(n, d_x))
    Y = np.tanh(latent) @ rng.normal(size=(n_latent, d_y)) + noise * rng.normal(size=(n, d_y))
    X = X * rng.uniform(0.3, 3.0, size=d_x) + rng.normal(size=d_x)
    Y = Y * rng.uniform(0.3, 3.0, size=d_y) + rng.normal(size=d_y)
    return X, Y


def random_layers(seed, n=240, widths=(8, 10, 6, 9)):
    """Correlated "layers" ``{"m/layer.i": (n, widths[i])}``: each a noisy nonlinear map of
    the previous one, with per-neuron scales and offsets."""
    rng = np.random.default_rng(seed)
    acts = {}
    prev = rng.normal(size=(n, widths[0]))
    for i, width in enumerate(widths):
        layer = np.tanh(prev @ rng.normal(size=(prev.shape[1], width)) / np.sqrt(prev.shape[1]))
        layer = layer + 0.3 * rng.normal(size=(n, width))
        acts[f"m/layer.{i}"] = layer * rng.uniform(0.5, 2.0, size=width) + rng.normal(size=width)
        prev = layer
    return acts


def random_attention(seed, n_heads=4, lengths=(5, 3, 7, 2), causal=False, sharpness=2.0):
    """Row-stochastic attention per sentence: softmax of random logits (causal: masked).

    ``seed`` is an int or a ``numpy.random.Generator`` (drawn from, so consecutive calls
    with one generator give different attention).
    """
    rng = np.random.default_rng(seed)
    out = []
    for n_words in lengths:
        logits = sharpness * rng.normal(size=(n_heads, n_words, n_words))
        if causal:
            logits = np.where(np.tril(np.ones((n_words, n_words))) > 0, logits, -np.inf)
        weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
        out.append(weights / weights.sum(axis=-1, keepdims=True))
    return out


# ---------------------------------------------------------------------- tiny tokenizers
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
GPT2_SPECIAL = "<|endoftext|>"


def _chunks(word: str, size: int) -> list[str]:
    return [word[i : i + size] for i in range(0, len(word), size)]


def _wordpiece_vocab(words: Iterable[str], piece_len: int) -> dict[str, int]:
    """Specials, every character (word-initial and ``##`` continuation), then each word's
    pieces of ``piece_len`` characters (``"unbelievable"`` → ``unb ##eli ##eva ##ble``);
    each group sorted."""
    words = sorted(set(words))
    chars = sorted({w[0] for w in words})
    cont = sorted({"##" + c for w in words for c in w[1:]})
    pieces = sorted(
        {p if i == 0 else "##" + p for w in words for i, p in enumerate(_chunks(w, piece_len))}
    )
    tokens = dict.fromkeys([*BERT_SPECIALS, *chars, *cont, *pieces])
    return {tok: i for i, tok in enumerate(tokens)}


def _bpe_vocab_and_merges(words: Iterable[str], piece_len: int, alphabet: Sequence[str]):
    """Byte-level alphabet (sorted) and the special, then merges that build each word's
    pieces of ``piece_len`` byte-level characters left to right, in sorted piece order."""
    vocab = dict.fromkeys([*sorted(alphabet), GPT2_SPECIAL])
    merges = []
    pieces = sorted({p for w in set(words) for p in _chunks(w, piece_len) if len(p) > 1})
    for piece in pieces:
        for end in range(2, len(piece) + 1):
            merge = (piece[: end - 1], piece[end - 1])
            if piece[:end] not in vocab:
                vocab[piece[:end]] = None
                merges.append(merge)
    return {tok: i for i, tok in enumerate(vocab)}, merges


def tiny_tokenizer(kind: str, corpus: Sequence[str], piece_len: int = 3):
    """A small deterministic tokenizer whose vocabulary is written out from ``corpus``.

    The vocabulary is built explicitly (sorted characters and fixed-length word pieces),
    never trained: ``tokenizers``' trainers break ties between equally frequent merges in
    hash-map order. Every character of the corpus is in the vocabulary, so unseen words
    still tokenise; words longer than ``piece_len`` split into several tokens.

    Parameters
    ----------
    kind : {"wordpiece", "bytelevel"}
        ``"wordpiece"``: lower-casing BERT WordPiece, ``[CLS] x [SEP]``, with
        ``[PAD] [UNK] [CLS] [SEP] [MASK]``. ``"bytelevel"``: GPT-2's byte-level BPE
        without a prefix space (GPT-2's own setting; used for Llama too), no special
        tokens added, ``<|endoftext|>`` as bos and eos.
    corpus : sequence of str
        Texts whose words (pre-tokenised as the tokenizer does) make the vocabulary.
    piece_len : int, default=3
        Characters per word piece.

    Returns
    -------
    transformers.PreTrainedTokenizerFast
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    if kind == "wordpiece":
        normalizer = normalizers.BertNormalizer(lowercase=True)
        pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        words = [
            w
            for text in corpus
            for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))
        ]
        vocab = _wordpiece_vocab(words, piece_len)
        tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
        tok.normalizer = normalizer
        tok.pre_tokenizer = pre_tokenizer
        tok.decoder = decoders.WordPiece()
        tok.add_special_tokens(BERT_SPECIALS)
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tok,
            unk_token="[UNK]",
            pad_token="[PAD]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
    if kind == "bytelevel":
        pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        words = [w for text in corpus for w, _ in pre_tokenizer.pre_tokenize_str(text)]
        vocab, merges = _bpe_vocab_and_merges(words, piece_len, pre_tokenizers.ByteLevel.alphabet())
        tok = Tokenizer(models.BPE(vocab, merges))
        tok.pre_tokenizer = pre_tokenizer
        tok.decoder = decoders.ByteLevel()
        tok.add_special_tokens([GPT2_SPECIAL])
        return PreTrainedTokenizerFast(
            tokenizer_object=tok, eos_token=GPT2_SPECIAL, bos_token=GPT2_SPECIAL
        )
    raise ValueError(f"unknown tokenizer kind {kind!r}; choose 'wordpiece' or 'bytelevel'")


def tiny_two_tower_settings():
    """Two-tower settings that train in seconds on the generated smoke corpus (tests only)."""
    from lmsim import twotower as tt

    return tt.TwoTowerSettings(
        corpora=("smoke",),
        tokenizer="train:200",
        seq_len=12,
        batch_size=4,
        steps=4,
        head_steps=4,
        eval_every=2,
        checkpoint_every=2,
        n_eval_chunks=4,
        device="cpu",
    )


def tiny_zoo_profile():
    """A zoo profile that trains every model in seconds (tests only)."""
    from lmsim import zoo

    return zoo.ZooProfile(
        name="tiny",
        vocab_size=300,
        hidden=16,
        layers=2,
        deep_layers=4,
        heads=2,
        seq_len=16,
        batch_size=8,
        steps=4,
        lr=3e-3,
        max_train_lines=300,
        max_valid_lines=40,
        max_ft_train=24,
        max_ft_test=24,
        eval_every=2,
        n_eval_chunks=4,
        checkpoint_every=2,
    )


# Texts of uneven lengths (1 to 12 words) shared by the extraction tests.
EXTRACTION_TEXTS = [
    "the cat sat",
    "a dog barked loudly at the unbelievable postman on the mat",
    "green ideas",
    "sea shells by the sea shore sleep furiously",
    "interpretability is hard",
    "uncommon subwords",
    "the quick brown fox jumps over the lazy dog and the cat",
    "networks",
    "the mat",
]
EXTRACTION_SENTENCES = [t.split() for t in EXTRACTION_TEXTS]


def cache_without(tmp_path, monkeypatch, folder: str):
    """Point ``LMSIM_CACHE`` at a fresh cache under ``tmp_path`` that links every folder of
    the shared cache (models, zoo, fine-tunes) except ``folder``, which starts empty.

    Returns
    -------
    Path
        The new cache root.
    """
    import os
    from pathlib import Path

    shared = Path(os.environ.get("LMSIM_CACHE", Path.home() / ".cache" / "lmsim"))
    cache = tmp_path / "cache"
    cache.mkdir()
    for entry in shared.iterdir() if shared.is_dir() else []:
        if entry.name != folder:
            (cache / entry.name).symlink_to(entry)
    monkeypatch.setenv("LMSIM_CACHE", str(cache))
    return cache


def execute_page(tmp_path, monkeypatch, slug: str, name: str, parameters: dict) -> str:
    """Execute ``notebooks/<slug>/<name>.ipynb`` with its smoke values and ``parameters``,
    as the runner does (its folder as working directory, this checkout's lmsim); assert that
    no cell failed and return its text outputs (printed streams and plain-text results)."""
    from pathlib import Path

    import nbformat
    import pytest

    papermill = pytest.importorskip("papermill")
    repo = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("PYTHONPATH", str(repo))  # the kernel imports this checkout's lmsim
    source = repo / "notebooks" / slug / f"{name}.ipynb"
    out = tmp_path / f"{name}.ipynb"
    papermill.execute_notebook(
        str(source),
        str(out),
        parameters=parameters,
        kernel_name="python3",
        cwd=str(source.parent),
        progress_bar=False,
    )
    text = nbformat.read(str(out), as_version=4)
    outputs = [o for cell in text.cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    return "\n".join(str(o.get("data", {}).get("text/plain", o.get("text", ""))) for o in outputs)
