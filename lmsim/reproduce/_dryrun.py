"""``--dry-run``: every page of a profile, with stand-in models and data at tiny sizes.

The runner sets :data:`lmsim._dryrun.DRY_RUN_ENV` (and the hub's offline switches) for the
kernels it starts, so :mod:`lmsim.models` and :mod:`lmsim.data` build offline stand-ins of
every hub model and dataset, and overrides each page's size parameters with the tiny values
of :func:`dry_run_parameters`; every other parameter is the profile's. Pages go to
``_build/dry-run/<slug>/<name>.ipynb``, never to ``book/``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmsim._dryrun import DEPTH_SCALE, DRY_RUN_ENV
from lmsim.reproduce._parameters import declared_parameters
from lmsim.reproduce._plan import NotebookRun

# Hub and dataset switches: nothing may be downloaded during a dry run.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _scaled_run(run: Mapping[str, Any]) -> dict:
    """A two-tower run at tiny sizes: widths / 32, depth / 6 (at least 2 layers)."""
    out = dict(run)
    for key in ("hidden", "intermediate", "embed", "lstm_proj"):
        if key in out:
            out[key] = max(8, int(out[key]) // 32)
    if "layers" in out:
        out["layers"] = max(2, int(out["layers"]) // 6)
    if "heads" in out:  # heads must divide the width
        out["heads"] = next(
            h for h in range(min(int(out["heads"]), 4), 0, -1) if out["hidden"] % h == 0
        )
    return out


def _ends(values: list) -> list:
    """The smallest and largest of a list (a sweep's two ends)."""
    return sorted({min(values), max(values)})


# Size parameters and their dry-run values (a value or a function of the profile's value).
# Everything not named here (models, corpora, padding, pairs, devices, ...) is the profile's.
TINY: dict[str, Any] = {
    # corpora and sentences
    "n_sentences": 24,
    "n_attn_sentences": 12,
    "n_pos_sentences": 50,
    "max_docs": 1000,
    # more train chunks than a stand-in's width (32); LMD's own sizes: TINY_BY_CHAPTER
    "n_train": lambda v: {k: 48 for k in v} if isinstance(v, dict) else 32,
    "n_test": lambda v: {k: 16 for k in v} if isinstance(v, dict) else (16 if v else 0),
    "n_dev": 12,
    "n_transfer": 16,
    "seq_lens": lambda v: {k: _ends(ts) for k, ts in v.items()},
    "appendix_sizes": [48, 16],
    "shard_size": 8,  # at least two test shards for the shard bootstrap
    "test_shard_size": 8,  # LMD's test shards (the bootstrap's units): four of the 32
    "batch_size": 8,
    # training
    "zoo_profile": "smoke",  # the zoo's `gpu` build trains 20,000 steps of a 512-wide model
    "runs": lambda v: [_scaled_run(r) for r in v],
    "seq_len": lambda v: min(int(v), 16),
    "steps": 6,
    "head_steps": 4,
    "epochs": lambda v: 1.0 if isinstance(v, float) else 1,
    "epochs_by_model": lambda v: {k: 1.0 for k in v},
    "ft_frozen": lambda v: sorted({max(1, int(k) // DEPTH_SCALE) for k in v}),  # layer counts
    "n_ft_train": 32,
    "n_ft_test": 16,
    "ft_max_length": 32,
    "ft_epochs": 1.0,
    "max_length": 32,
    "n_partition": 16,
    "n_gram_batches": 3,
    "gram_batches_sweep": [1, 2],
    "n_fisher": 8,
    "n_cka": 16,
    "threads": lambda v: 1 if v else v,
    # analyses
    "top_n": 60,
    "ica_dim": 8,
    "ica_iters": 100,
    "n_cka_chunks": 10,
}


# Resampling counts, set wherever a page declares them (the profile's value or the page's
# own default): the intervals of a dry run mean nothing, their code paths are what is run.
RESAMPLES: dict[str, int] = {
    "n_boot": 10,
    "n_boot_attn": 10,
    "n_floor_draws": 3,
    "n_perm": 20,
    "n_null_draws": 5,
    "n_splits": 4,
}


# A chapter's own dry-run sizes, over TINY's. LMD: more train chunks than the widest basis
# of stand-ins (11 x 32 = 352 of the paper's 12 models), so the ridge-free fits and their
# Stein-corrected R² are finite, and a corpus long enough for them at T = 512.
TINY_BY_CHAPTER: dict[str, dict[str, Any]] = {
    "zhang2022_lmd": {
        "n_train": lambda v: {k: 480 for k in v} if isinstance(v, dict) else 480,
        "n_test": lambda v: {k: 32 for k in v} if isinstance(v, dict) else (32 if v else 0),
        "appendix_sizes": [448, 32],  # one stand-in corpus holds 510 chunks of 512 tokens
        "max_docs": 4000,
    },
}


def dry_run_parameters(
    parameters: Mapping[str, Any], declared: Sequence[str] = (), slug: str | None = None
) -> dict[str, Any]:
    """``parameters`` (a page's profile values) with every size of :data:`TINY` (and of the
    chapter ``slug``'s :data:`TINY_BY_CHAPTER`) scaled down, and every resampling count of
    :data:`RESAMPLES` the page ``declared`` set."""
    sizes = {**TINY, **TINY_BY_CHAPTER.get(slug or "", {})}
    out = dict(parameters)
    for key, value in parameters.items():
        if key in sizes:
            tiny = sizes[key]
            out[key] = tiny(value) if callable(tiny) else tiny
    out.update({key: n for key, n in RESAMPLES.items() if key in declared})
    return out


def dry_run_runs(runs: list[NotebookRun], root: Path, output_dir: Path | None) -> list[NotebookRun]:
    """The runs of a dry run: tiny sizes, pages under ``_build/dry-run`` (or ``output_dir``)."""
    out_root = Path(output_dir) if output_dir is not None else Path(root) / "_build" / "dry-run"
    return [
        dataclasses.replace(
            run,
            output=out_root / run.slug / f"{run.name}.ipynb",
            parameters=dry_run_parameters(
                run.parameters, declared_parameters(run.source), run.slug
            ),
        )
        for run in runs
    ]


def enter_dry_run() -> None:
    """Set the dry-run and offline switches in this process (the kernels inherit them)."""
    os.environ[DRY_RUN_ENV] = "1"
    os.environ.update(OFFLINE_ENV)
