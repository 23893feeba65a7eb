"""Run language models and capture what they compute: hidden states, attentions, linear inputs.

This is the only package of lmsim that touches model internals. Everything else works on
the arrays or :class:`~lmsim.moments.Moments` it returns.

Hidden states
    :func:`extract_moments` and :func:`extract_activations` run any Hugging Face encoder or
    decoder over a list of texts and pool the hidden states of the embedding layer and of
    every transformer layer (as ``output_hidden_states`` numbers them: ``layer.0`` is the
    embedding output, ``layer.L`` the last layer, after the final norm where the model has
    one) into one row per sequence (``pooling="mean"``), per word (``"word"``) or per token
    (``"token"``). Several models see the same texts batch by batch, so their rows align
    and one joint :class:`~lmsim.moments.Moments` holds the blocks ``"{model}/layer.{i}"``
    of all of them. Both functions share one batch iterator (``_pooled_batches``).

Data parallel
    Under ``torch.distributed`` (``torchrun``, ``accelerate launch``; ``python -m
    lmsim.extract`` is a command-line entry) :func:`extract_moments` splits its shards over
    the ranks and merges them exactly, and :func:`extract_activations` its batches.

Attentions
    :func:`extract_attentions` returns per-head attention probabilities converted from
    subwords to words as Wu et al. (2020, Sec. 4) and Clark et al. (2019) do, cached by
    content like the moments (one safetensors file per key, checked against its sha256).

Linear-layer inputs
    :func:`extract_linear_grams` records the inputs of every ``nn.Linear`` (and GPT-2
    ``Conv1D``) with forward pre-hooks, the statistics RegMean merges with, on texts, text
    pairs or word lists encoded as fine-tuning encodes them (:mod:`lmsim.encoding`).

Classifier logits
    :func:`extract_logits` runs a sequence or token classifier over the same encodings
    (word-level logits for token classifiers); :func:`model_inputs` is the one place a
    padded batch becomes the tensors a model takes.

Conventions shared by all extractors
    * Padding is on the right and the attention mask hides it; padded positions never
      enter any statistic (except through the denominator with ``paper_compat_padding``).
    * Special tokens (``[CLS]``, ``[SEP]``, ``<s>``) are *real* tokens: they are in the
      attention mask, so sequence means and token rows include them, as the LMD authors'
      mask-based mean does. Word rows and word attentions exclude them (they belong to no
      word).
    * Sequences longer than ``max_length`` tokens (default: the model's maximum number of
      positions) are truncated; with ``pooling="word"`` a truncation that would drop a
      word raises instead, since rows must stay aligned across models.
    * Models are switched to ``eval()`` mode (dropout off) and run under
      ``torch.inference_mode()``; on CUDA under ``torch.autocast`` (bfloat16 unless
      ``dtype`` says otherwise), on CPU in float32. Pooling and moment updates happen on
      the model's device.

The package, by concern (each submodule imports only those listed before it):
:mod:`~lmsim.extract.hooks` (scoped hooks), :mod:`~lmsim.extract.runs` (models prepared
for a run), :mod:`~lmsim.extract.align` (tokenisation and word alignment),
:mod:`~lmsim.extract.pooling` (batches, forward passes, pooling),
:mod:`~lmsim.extract.hashing` (content hashes and cache keys),
:mod:`~lmsim.extract.shard_cache` (shard files, manifest, claims and locks),
:mod:`~lmsim.extract.distributed` (``torch.distributed``),
:mod:`~lmsim.extract.streaming` (:func:`extract_moments`),
:mod:`~lmsim.extract.activations`, :mod:`~lmsim.extract.attention`,
:mod:`~lmsim.extract.logits`, :mod:`~lmsim.extract.grams` and :mod:`~lmsim.extract.cli`.
"""

# The names ``X as X`` are not in __all__ but imported by tests, benchmarks and the command
# line; a test that replaces one of the private functions patches the submodule that calls it.
from lmsim.blocks import block_name
from lmsim.extract.activations import extract_activations
from lmsim.extract.align import POOLINGS as POOLINGS
from lmsim.extract.align import SUBWORDS as SUBWORDS
from lmsim.extract.align import _word_tokenizer as _word_tokenizer
from lmsim.extract.attention import _run_attentions as _run_attentions
from lmsim.extract.attention import extract_attentions
from lmsim.extract.cli import main as main
from lmsim.extract.distributed import _owner as _owner
from lmsim.extract.grams import extract_linear_grams
from lmsim.extract.hashing import _CACHE_VERSION as _CACHE_VERSION
from lmsim.extract.hashing import _content_hash as _content_hash
from lmsim.extract.hooks import _first_tensor as _first_tensor
from lmsim.extract.hooks import record_outputs, scoped_hooks
from lmsim.extract.logits import extract_logits, model_inputs
from lmsim.extract.pooling import _hidden_states as _hidden_states
from lmsim.extract.shard_cache import _claim_shard as _claim_shard
from lmsim.extract.shard_cache import _load_shard as _load_shard
from lmsim.extract.shard_cache import _save_shard as _save_shard
from lmsim.extract.streaming import _CLAIM_POLL_S as _CLAIM_POLL_S
from lmsim.extract.streaming import _accumulate as _accumulate
from lmsim.extract.streaming import _InOrderMerge as _InOrderMerge
from lmsim.extract.streaming import extract_moments

__all__ = [
    "extract_moments",
    "extract_activations",
    "extract_attentions",
    "extract_linear_grams",
    "extract_logits",
    "model_inputs",
    "scoped_hooks",
    "record_outputs",
    "block_name",
]
