"""lmsim.metrics.pairwise: all-pairs matrices from moments, raw activations and attention.

Every entry is checked against the single-pair metric it stands for; the thread guard is
checked from inside the pair loop, where it acts.
"""

import numpy as np
import pytest
import torch
from _helpers import SEEDS, random_attention, random_layers

from lmsim.metrics import (
    attnsim,
    debiased_cka,
    distattn_sim,
    linear_cka,
    mixedsim,
    neuronsim,
    pairwise_attention,
    pairwise_matrix,
    pairwise_matrix_raw,
    pwcca,
    rbf_cka,
    svcca,
)
from lmsim.metrics import pairwise as pw
from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LINEAR = {
    "linear_cka": linear_cka,
    "svcca": svcca,
    "pwcca": pwcca,
    "neuronsim": neuronsim,
    "mixedsim": mixedsim,
}


def random_blocks(seed):
    """Three layers of a bidirectional model (3 heads) and two of a causal one (2 heads)."""
    rng = np.random.default_rng(seed)
    lengths = (6, 4, 9)
    attn = {f"enc/layer.{i}": random_attention(rng, 3, lengths, False) for i in (1, 2, 3)}
    attn.update({f"dec/layer.{i}": random_attention(rng, 2, lengths, True) for i in (1, 2)})
    causal = {name: name.startswith("dec") for name in attn}
    return attn, causal


def recording(fn, calls):
    """``fn`` that first appends ``(torch thread count, device of tensor arguments)``."""

    def wrapper(*args, **kw):
        devices = {a.device.type for a in args if isinstance(a, torch.Tensor)}
        calls.append((torch.get_num_threads(), devices))
        return fn(*args, **kw)

    return wrapper


# ---------------------------------------------------------------------- pairwise_matrix
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


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_pairwise_matrix_on_torch_moments_device(monkeypatch, device):
    """Moments of torch tensors held on ``device``: every pair is computed there, and the
    matrix equals the one from moments of the numpy arrays."""
    layers = random_layers(2)
    acts = {k: torch.from_numpy(v).to(device) for k, v in layers.items()}
    mom = Moments.from_arrays(acts, device=device)
    assert mom.device.type == device
    assert mom.comoment(list(acts)).device.type == device
    calls = []
    prep_src, prep_tgt, pair = pw.MOMENT_METRICS["svcca"]
    monkeypatch.setitem(pw.MOMENT_METRICS, "svcca", (prep_src, prep_tgt, recording(pair, calls)))
    out = pairwise_matrix(mom, list(acts), metric="svcca", progress=False)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    assert calls and all(devices == {device} for _, devices in calls)
    names = list(layers)
    expected = np.array([[svcca(layers[a], layers[b]) for b in names] for a in names])
    np.testing.assert_allclose(out, expected, atol=1e-9, rtol=0)
    from_numpy = pairwise_matrix(Moments.from_arrays(layers), names, metric="svcca", progress=False)
    np.testing.assert_allclose(out, from_numpy, atol=1e-9, rtol=0)


def test_pairwise_matrix_runs_pairs_on_one_cpu_thread_and_restores_the_count(monkeypatch):
    rng = np.random.default_rng(0)
    mom = Moments.from_arrays({"a": rng.normal(size=(50, 4)), "b": rng.normal(size=(50, 3))})
    calls = []
    prep_src, prep_tgt, pair = pw.MOMENT_METRICS["neuronsim"]
    monkeypatch.setitem(
        pw.MOMENT_METRICS, "neuronsim", (prep_src, prep_tgt, recording(pair, calls))
    )
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        out = pairwise_matrix(mom, ["a", "b"], metric="neuronsim", progress=False)
        assert len(calls) == 4
        assert [threads for threads, _ in calls] == [1] * 4, "pairs ran on more than one thread"
        assert torch.get_num_threads() == 2
        assert np.allclose(np.diag(out), 1.0)

        def failing(*args):
            calls.append((torch.get_num_threads(), set()))
            raise RuntimeError("pair failed")

        monkeypatch.setitem(pw.MOMENT_METRICS, "neuronsim", (prep_src, prep_tgt, failing))
        with pytest.raises(RuntimeError, match="pair failed"):
            pairwise_matrix(mom, ["a", "b"], metric="neuronsim", progress=False)
        assert calls[-1][0] == 1
        assert torch.get_num_threads() == 2  # restored after an error inside the loop
    finally:
        torch.set_num_threads(before)


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
        pairwise_matrix(mom, list(acts), metric="cosine", progress=False)
    with pytest.raises(ValueError, match="extract_activations"):
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


# ---------------------------------------------------------------------- pairwise_attention
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["jensen_shannon", "frobenius", "pearson"])
def test_pairwise_attention_head_kinds_match_attnsim(seed, kind):
    attn, causal = random_blocks(seed)
    names = list(attn)
    out = pairwise_attention(attn, kind=kind, causal=causal, progress=False)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            assert out[i, j] == pytest.approx(attnsim(attn[a], attn[b], kind=kind), abs=1e-12)
    assert np.allclose(np.diag(out), 1.0)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["cka", "svcca", "pwcca"])
def test_pairwise_attention_distributed_kinds_match_distattn_sim(seed, kind):
    attn, causal = random_blocks(seed)
    names = list(attn)
    out = pairwise_attention(attn, kind=kind, causal=causal, progress=False)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            expected = distattn_sim(attn[a], attn[b], kind, causal=(causal[a], causal[b]))
            assert out[i, j] == pytest.approx(expected, abs=1e-10)


def test_pairwise_attention_pwcca_is_directional():
    attn, causal = random_blocks(0)
    out = pairwise_attention(attn, kind="pwcca", causal=causal, progress=False)
    assert not np.allclose(out, out.T)


def test_pairwise_attention_causal_mask_changes_distributed_similarity():
    attn, _ = random_blocks(1)
    full = pairwise_attention(attn, kind="cka", progress=False)
    tril = pairwise_attention(attn, kind="cka", causal=dict.fromkeys(attn, True), progress=False)
    assert not np.allclose(full, tril)


def test_pairwise_attention_bad_input():
    attn, _ = random_blocks(0)
    with pytest.raises(ValueError, match="unknown `kind`"):
        pairwise_attention(attn, kind="cosine")
    with pytest.raises(ValueError, match="empty"):
        pairwise_attention({})
    with pytest.raises(KeyError, match="not in `attn`"):
        pairwise_attention(attn, causal={"nope/layer.1": True})


def test_pairwise_attention_runs_on_one_thread_and_restores_the_count(monkeypatch):
    attn, _ = random_blocks(2)
    calls = []
    monkeypatch.setattr(
        pw, "attention_head_similarity", recording(pw.attention_head_similarity, calls)
    )
    monkeypatch.setattr(pw, "linear_cka", recording(pw.linear_cka, calls))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for kind in ("frobenius", "cka"):
            calls.clear()
            pairwise_attention(attn, kind=kind, progress=False)
            assert len(calls) == 15  # 5 blocks: 15 unordered pairs, the diagonal included
            assert {threads for threads, _ in calls} == {1}, f"{kind} pairs ran on more threads"
            assert torch.get_num_threads() == 2
        calls.clear()
        with pytest.raises(ValueError):
            pairwise_attention({"a/layer.1": [np.full((1, 2, 2), 0.7)]}, progress=False)
        assert [threads for threads, _ in calls] == [1]  # it failed inside the pair loop
        assert torch.get_num_threads() == 2  # restored after the error
    finally:
        torch.set_num_threads(before)


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
