"""Linear metrics from moments: agreement with raw activations, on CPU and CUDA.

The all-pairs helpers themselves are tested in ``test_metrics_pairwise.py``.
"""

import numpy as np
import pytest
import torch
from _helpers import SEEDS, random_layers

from lmsim.metrics import (
    debiased_cka,
    linear_cka,
    mixedsim,
    neuronsim,
    pairwise_matrix,
    pwcca,
    svcca,
)
from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")


LINEAR = {
    "linear_cka": linear_cka,
    "svcca": svcca,
    "pwcca": pwcca,
    "neuronsim": neuronsim,
    "mixedsim": mixedsim,
}


def chunked_moments(acts, n_chunks=4, offset=0.0):
    mom = Moments({name: x.shape[1] for name, x in acts.items()})
    n = next(iter(acts.values())).shape[0]
    for chunk in np.array_split(np.arange(n), n_chunks):
        mom.update({name: x[chunk] + offset for name, x in acts.items()})
    return mom


OPTIONS = [
    ("linear_cka", {}),
    ("svcca", {}),
    ("svcca", {"paper_compat": True}),
    ("svcca", {"threshold": 0.9}),
    ("pwcca", {}),
    ("pwcca", {"paper_compat": True}),
    ("neuronsim", {}),
    ("mixedsim", {}),
]


@pytest.mark.parametrize(("metric", "kw"), OPTIONS)
@pytest.mark.parametrize("seed", SEEDS)
def test_moments_agree_with_raw_for_every_pair(metric, kw, seed):
    acts = random_layers(seed)
    mom = Moments.merge_all(
        [
            chunked_moments({k: v[:100] for k, v in acts.items()}, 3),
            chunked_moments({k: v[100:] for k, v in acts.items()}, 2),
        ]
    )
    names = list(acts)
    fn = LINEAR[metric]
    expected = np.array([[fn(acts[a], acts[b], **kw) for b in names] for a in names])
    from_moments = np.array([[fn(mom, a, b, **kw) for b in names] for a in names])
    np.testing.assert_allclose(from_moments, expected, atol=1e-8, rtol=0)
    all_pairs = pairwise_matrix(mom, names, metric=metric, progress=False, **kw)
    np.testing.assert_allclose(all_pairs, expected, atol=1e-8, rtol=0)


@pytest.mark.parametrize(("metric", "kw"), OPTIONS)
def test_moments_with_large_offset_match_two_pass(metric, kw):
    acts = random_layers(7)
    mom = chunked_moments(acts, n_chunks=6, offset=1e6)
    names = list(acts)
    fn = LINEAR[metric]
    expected = np.array([[fn(acts[a], acts[b], **kw) for b in names] for a in names])
    got = pairwise_matrix(mom, names, metric=metric, progress=False, **kw)
    np.testing.assert_allclose(got, expected, atol=1e-8, rtol=0)


@pytest.mark.gpu
def test_cuda_inputs_and_moments_match_cpu():
    acts = random_layers(4)
    names = list(acts)
    cuda = {k: torch.from_numpy(v).cuda() for k, v in acts.items()}
    mom_gpu = Moments.from_arrays(cuda, device="cuda")
    mom_cpu = Moments.from_arrays(acts)
    for metric, kw in OPTIONS:
        np.testing.assert_allclose(
            pairwise_matrix(mom_gpu, names, metric=metric, progress=False, **kw),
            pairwise_matrix(mom_cpu, names, metric=metric, progress=False, **kw),
            atol=1e-9,
        )
        fn = LINEAR[metric]
        a, b = names[0], names[1]
        assert fn(cuda[a], cuda[b], **kw) == pytest.approx(fn(acts[a], acts[b], **kw), abs=1e-9)
    assert debiased_cka(cuda[names[0]], cuda[names[1]]) == pytest.approx(
        debiased_cka(acts[names[0]], acts[names[1]]), abs=1e-9
    )
