"""The dry run: every hub model and hub dataset replaced by a tiny offline stand-in.

``python -m lmsim.reproduce --profile paper --dry-run`` sets ``$LMSIM_DRY_RUN`` for the
notebook kernels it starts. While it is set,

- :func:`lmsim.models.load_model`, :func:`~lmsim.models.load_tokenizer` and
  :func:`~lmsim.models.load_random_model` build a hub id as a configuration-built model of
  the same architecture class at tiny sizes, with an offline tokenizer of the same kind
  (:mod:`lmsim.models._standins`);
- the Hugging Face dataset loaders of :mod:`lmsim.data` read generated sets with the real
  schema (:mod:`lmsim.data._standin_sets`);
- ``device="cuda"`` falls back to the CPU when no GPU is present;
- the lmsim cache is ``$LMSIM_CACHE/dry-run``, so no stand-in ever mixes with real models,
  extractions or fine-tunes.

Nothing is downloaded: the paper pages' code paths run end to end with meaningless numbers.
The lowest layer of lmsim: this module imports nothing from the package.
"""

from __future__ import annotations

import os

__all__ = ["DRY_RUN_ENV", "DEPTH_SCALE", "dry_run", "DRY_RUN_NOTE"]

DRY_RUN_ENV = "LMSIM_DRY_RUN"
# A stand-in has the hub model's depth divided by this (BERT-base 12 -> 4 layers); a page's
# layer counts (frozen layers) are scaled alike.
DEPTH_SCALE = 3

DRY_RUN_NOTE = (
    "DRY RUN: every Hugging Face model is a tiny random stand-in of its architecture class, "
    "every hub dataset a small generated set with its schema, and the sizes are scaled down "
    "(python -m lmsim.reproduce --dry-run). This checks that the profile's code paths run; "
    "its numbers and verdicts mean nothing."
)


def dry_run() -> bool:
    """True while ``$LMSIM_DRY_RUN`` is set to anything but ``""``, ``0``, ``false``, ``no``."""
    value = os.environ.get(DRY_RUN_ENV, "").strip().lower()
    return value not in ("", "0", "false", "no", "off")
