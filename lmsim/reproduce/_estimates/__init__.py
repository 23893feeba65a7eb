"""Per-page resource estimates: one function per source notebook, from its parameters,
one module per chapter (``_common`` holds what they share).

Each function reads the parameters its notebook declares (defaults, then the profile's
overrides) and returns an :class:`~lmsim.reproduce._resources.Estimate`: the peak of
host RAM and GPU memory over the page's steps, the disk it leaves (extraction cache,
fine-tuned or trained models) and its time on the machine. The steps and what they hold
are the notebooks' own (read from their code; the comments in ``notebooks/runs.yml``
quote the same figures). Corpus statistics the plan cannot read without loading a corpus
are constants in ``_common``, with their source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from lmsim.reproduce._estimates.lmd import lmd_beyond, lmd_decomposition
from lmsim.reproduce._estimates.regmean import regmean_merging
from lmsim.reproduce._estimates.thesis import (
    redundancy_cross_lingual,
    redundancy_probes,
    redundancy_similarity,
)
from lmsim.reproduce._estimates.twotower import twotower_preference
from lmsim.reproduce._estimates.wu import (
    wu_attention,
    wu_controls,
    wu_finetuning,
    wu_representations,
)
from lmsim.reproduce._estimates.zoo import zoo_train
from lmsim.reproduce._resources import (
    BASE_RAM,
    BASE_RAM_CPU,
    Estimate,
    Machine,
    page_parameters,
)

ESTIMATORS: dict[str, Callable[[Mapping, Machine], Estimate]] = {
    "lmsim_zoo/01_train_zoo": zoo_train,
    "zhang2022_lmd/01_decomposition": lmd_decomposition,
    "zhang2022_lmd/02_beyond_the_paper": lmd_beyond,
    "wu2020_similarity/01_representations": wu_representations,
    "wu2020_similarity/02_attention": wu_attention,
    "wu2020_similarity/03_finetuning": wu_finetuning,
    "wu2020_similarity/04_controls": wu_controls,
    "thesis2022_redundancy/01_layer_similarity": redundancy_similarity,
    "thesis2022_redundancy/02_redundancy_probes": redundancy_probes,
    "thesis2022_redundancy/03_cross_lingual": redundancy_cross_lingual,
    "jin2023_regmean/01_merging": regmean_merging,
    "he2022_twotower/01_preference": twotower_preference,
    # The GPU page's frozen source (issue 43): the same parameters as 01's at GPU scale.
    "he2022_twotower/02_preference_gpu": twotower_preference,
}


def plan_resources(runs: Sequence, machine: Machine) -> list[Estimate]:
    """Estimate every planned run (``plan_runs``'s output) on ``machine``.

    Raises
    ------
    KeyError
        A page with no estimator, or a model with no known shape.
    """
    out = []
    for run in runs:
        stem = f"{run.slug}/{run.source.stem}"
        if stem not in ESTIMATORS:
            raise KeyError(
                f"no resource estimator for {stem}: add one to lmsim/reproduce/_estimates/ (a function of its parameters and the machine, listed in ESTIMATORS)"
            )
        out.append(estimate_page(stem, page_parameters(run), machine, run.key))
    return out


def estimate_page(
    stem: str, params: Mapping, machine: Machine, page: str | None = None
) -> Estimate:
    """The estimate of source notebook ``stem`` (``slug/name``) with ``params`` on
    ``machine``, named ``page`` (``stem`` by default). Without a GPU the kernel's base RAM
    is BASE_RAM_CPU (no CUDA context)."""
    estimate = ESTIMATORS[stem](params, machine)
    estimate.page = page or stem
    if machine.gpu_memory_gb <= 0:
        estimate.ram -= BASE_RAM - BASE_RAM_CPU
    return estimate
