"""Linear metrics from moments: agreement with raw activations and the all-pairs helpers."""

import numpy as np
import pytest
import torch

from lmsim.metrics import (
    debiased_cka,
    linear_cka,
    mixedsim,
    neuronsim,
    pairwise_matrix,
    pairwise_matrix_raw,
    pwcca,
    rbf_cka,
    svcca,
)
from lmsim.moments import Moments

SEEDS = [0, 1, 2]
pytestmark = pytest.mark.usefixtures("one_torch_thread")


LINEAR = {
    "linear_cka": linear_cka,
    "svcca": svcca,
    "pwcca": pwcca,
    "neuronsim": neuronsim,
    "mixedsim": mixedsim,
}


def random_layers(seed, n=240, widths=(8, 10, 6, 9)):
    """Correlated "layers": each one a noisy nonlinear map of the previous one."""
    rng = np.random.default_rng(seed)
    acts = {}
    prev = rng.normal(size=(n, widths[0]))
    for i, width in enumerate(widths):
        layer = np.tanh(prev @ rng.normal(size=(prev.shape[1], width)) / np.sqrt(prev.shape[1]))
        layer = layer + 0.3 * rng.normal(size=(n, width))
        acts[f"m/layer.{i}"] = layer * rng.uniform(0.5, 2.0, size=width) + rng.normal(size=width)
        prev = layer
    return acts


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


def test_pairwise_rectangular_and_directional():
    acts = random_layers(1)
    mom = Moments.from_arrays(acts)
    rows, cols = ["m/layer.0", "m/layer.2"], ["m/layer.1", "m/layer.2", "m/layer.3"]
    for metric in ("pwcca", "neuronsim", "mixedsim"):
        out = pairwise_matrix(mom, rows, cols, metric=metric, progress=False)
        assert out.shape == (2, 3)
        assert out[0, 0] == pytest.approx(LINEAR[metric](acts[rows[0]], acts[cols[0]]), abs=1e-10)
        square = pairwise_matrix(mom, list(acts), metric=metric, progress=False)
        assert not np.allclose(square, square.T, atol=1e-4)
        np.testing.assert_allclose(np.diag(square), 1.0, atol=1e-10)
    sym = pairwise_matrix(mom, list(acts), metric="linear_cka", progress=False)
    np.testing.assert_allclose(sym, sym.T, atol=1e-12)


@pytest.mark.parametrize("paper_compat", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_pwcca_one_svd_per_unordered_pair_equals_per_ordered_pair(seed, paper_compat, monkeypatch):
    # The all-pairs matrix reads both directions from one CCA per unordered pair; it must
    # equal one pwcca_pair (one SVD) per ordered pair, and do half the SVDs.
    from lmsim.metrics import cca, pairwise

    acts = random_layers(seed, widths=(8, 10, 6, 9, 7))
    mom = Moments.from_arrays(acts)
    names = list(acts)
    stats = {n: pairwise.BlockStats(n, mom.n, mom.mean(n), mom.comoment(n)) for n in names}
    prep = {n: cca.prepare_pwcca(stats[n], paper_compat=paper_compat) for n in names}
    expected = np.array(
        [[cca.pwcca_pair(prep[a], prep[b], mom.comoment(a, b)) for b in names] for a in names]
    )
    n_svd = 0
    svd = torch.linalg.svd

    def counting_svd(*args, **kw):
        nonlocal n_svd
        n_svd += 1
        return svd(*args, **kw)

    monkeypatch.setattr(torch.linalg, "svd", counting_svd)
    got = pairwise_matrix(mom, names, metric="pwcca", progress=False, paper_compat=paper_compat)
    np.testing.assert_allclose(got, expected, atol=1e-10, rtol=0)
    assert n_svd == len(names) * (len(names) + 1) // 2
    rows, cols = names[:3], names[1:]
    rect = pairwise_matrix(
        mom, rows, cols, metric="pwcca", progress=False, paper_compat=paper_compat
    )
    np.testing.assert_allclose(rect, expected[:3, 1:], atol=1e-10, rtol=0)


def test_pairwise_matrix_on_torch_moments_device():
    acts = {k: torch.from_numpy(v) for k, v in random_layers(2).items()}
    mom = Moments.from_arrays(acts, device="cpu")
    out = pairwise_matrix(mom, list(acts), metric="svcca", progress=False)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64


@pytest.mark.parametrize("metric", ["debiased_cka", "rbf_cka", "linear_cka", "neuronsim"])
def test_pairwise_matrix_raw(metric):
    acts = random_layers(3, n=60)
    names = list(acts)
    fn = {"debiased_cka": debiased_cka, "rbf_cka": rbf_cka}.get(metric) or LINEAR[metric]
    out = pairwise_matrix_raw(acts, metric=metric, progress=False)
    expected = np.array([[fn(acts[a], acts[b]) for b in names] for a in names])
    np.testing.assert_allclose(out, expected, atol=1e-12)
    sub = pairwise_matrix_raw(acts, names[:1], names[2:], metric=metric, progress=False)
    np.testing.assert_allclose(sub, expected[:1, 2:], atol=1e-12)


def test_pairwise_raw_passes_options():
    acts = random_layers(3, n=50)
    out = pairwise_matrix_raw(acts, metric="rbf_cka", sigma=1.5, progress=False)
    assert out[0, 1] == pytest.approx(rbf_cka(acts["m/layer.0"], acts["m/layer.1"], sigma=1.5))


def test_pairwise_errors():
    acts = random_layers(0, n=30)
    mom = Moments.from_arrays(acts)
    with pytest.raises(KeyError, match="available"):
        pairwise_matrix(mom, ["m/layer.0", "m/layer.9"], progress=False)
    with pytest.raises(ValueError, match="unknown `metric`"):
        pairwise_matrix(mom, list(acts), metric="rbf_cka", progress=False)
    with pytest.raises(TypeError, match="no option"):
        pairwise_matrix(mom, list(acts), metric="neuronsim", paper_compat=True, progress=False)
    with pytest.raises(TypeError, match="pairwise_matrix_raw"):
        pairwise_matrix(acts, list(acts), progress=False)
    with pytest.raises(KeyError, match="available"):
        pairwise_matrix_raw(acts, ["nope"], progress=False)
    with pytest.raises(ValueError, match="unknown `metric`"):
        pairwise_matrix_raw(acts, metric="cosine", progress=False)
    one = Moments.from_arrays({k: v[:1] for k, v in acts.items()})
    with pytest.raises(ValueError, match="at least 2"):
        pairwise_matrix(one, list(acts), progress=False)


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
