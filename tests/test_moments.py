"""The streaming Moments accumulator: merging, persistence, stability, errors."""

import numpy as np
import pytest
import torch
from _helpers import SEEDS

from lmsim.moments import Moments

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def random_acts(seed, n=120, dims=(("a", 4), ("b", 3))):
    rng = np.random.default_rng(seed)
    return {name: rng.normal(size=(n, d)) * rng.uniform(0.5, 3, size=d) for name, d in dims}


def two_pass(acts, a, b):
    xa = acts[a] - acts[a].mean(axis=0)
    xb = acts[b] - acts[b].mean(axis=0)
    return xa.T @ xb


@pytest.mark.parametrize("seed", SEEDS)
def test_merge_equals_concatenation(seed):
    acts = random_acts(seed)
    splits = [slice(0, 1), slice(1, 50), slice(50, 50), slice(50, 120)]
    parts = [Moments.from_arrays({k: v[s] for k, v in acts.items()}) for s in splits[:2]]
    parts.append(Moments({"a": 4, "b": 3}))  # an empty part merges as a no-op
    parts.append(Moments.from_arrays({k: v[splits[3]] for k, v in acts.items()}))
    merged = Moments.merge_all(parts)
    whole = Moments.from_arrays(acts)
    assert merged.n == whole.n == 120
    torch.testing.assert_close(merged.mean(["a", "b"]), whole.mean(["a", "b"]), atol=1e-12, rtol=0)
    torch.testing.assert_close(merged.comoment(["a", "b"]), whole.comoment(["a", "b"]))
    pairwise = parts[0] + parts[1] + parts[3]
    torch.testing.assert_close(pairwise.cov("a", "b"), whole.cov("a", "b"))


@pytest.mark.parametrize("seed", SEEDS)
def test_statistics_match_numpy(seed):
    acts = random_acts(seed)
    mom = Moments.from_arrays(acts)
    stacked = np.hstack([acts["a"], acts["b"]])
    np.testing.assert_allclose(mom.cov(["a", "b"]).numpy(), np.cov(stacked.T), atol=1e-12)
    np.testing.assert_allclose(mom.comoment("a", "b").numpy(), two_pass(acts, "a", "b"), atol=1e-10)
    np.testing.assert_allclose(mom.gram("a", "b").numpy(), acts["a"].T @ acts["b"], atol=1e-10)
    np.testing.assert_allclose(mom.var("b", ddof=0).numpy(), acts["b"].var(axis=0), atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_large_offset_matches_float64_two_pass(seed):
    acts = random_acts(seed, n=400)
    shifted = {k: v + 1e8 for k, v in acts.items()}
    mom = Moments({"a": 4, "b": 3})
    for chunk in np.array_split(np.arange(400), 10):
        mom.update({k: v[chunk] for k, v in shifted.items()})
    reference = two_pass(acts, "a", "b")
    rel = np.abs(mom.comoment("a", "b").numpy() - reference).max() / np.abs(reference).max()
    assert rel < 1e-6
    # Raw sums of squares (the naive one-pass formula) lose everything at this offset.
    x = np.hstack([shifted["a"], shifted["b"]])
    naive = x.T @ x - 400 * np.outer(x.mean(0), x.mean(0))
    assert np.abs(naive[:4, 4:] - reference).max() / np.abs(reference).max() > 1e-3


def test_save_load_roundtrip(tmp_path):
    acts = random_acts(0)
    mom = Moments.from_arrays(acts)
    path = tmp_path / "mom.safetensors"
    mom.save(path)
    loaded = Moments.load(path)
    assert loaded.dims == mom.dims and loaded.n == mom.n
    torch.testing.assert_close(
        loaded.comoment(["a", "b"]), mom.comoment(["a", "b"]), atol=0, rtol=0
    )
    torch.testing.assert_close(loaded.mean("b"), mom.mean("b"), atol=0, rtol=0)


def test_subset_rename_copy():
    acts = random_acts(1)
    mom = Moments.from_arrays(acts)
    sub = mom.subset(["b"])
    torch.testing.assert_close(sub.comoment("b"), mom.comoment("b"))
    renamed = mom.rename({"a": "z"})
    torch.testing.assert_close(renamed.cov("z", "b"), mom.cov("a", "b"))
    copy = mom.copy()
    copy.update({k: v[:5] for k, v in acts.items()})
    assert mom.n == 120 and copy.n == 125


def test_errors():
    acts = random_acts(0)
    mom = Moments({"a": 4, "b": 3})
    with pytest.raises(ValueError, match="empty"):
        Moments({})
    with pytest.raises(KeyError, match="missing"):
        mom.update({"a": acts["a"]})
    with pytest.raises(KeyError, match="unknown"):
        mom.update({**acts, "c": acts["a"]})
    with pytest.raises(ValueError, match="same n_samples"):
        mom.update({"a": acts["a"], "b": acts["b"][:-1]})
    with pytest.raises(ValueError, match="shape"):
        mom.update({"a": acts["a"][:, :3], "b": acts["b"]})
    bad = acts["a"].copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        mom.update({"a": bad, "b": acts["b"]})
    with pytest.raises(ValueError, match="at least"):
        mom.cov("a")
    mom.update(acts)
    with pytest.raises(KeyError, match="available"):
        mom.cov("a", "nope")
    with pytest.raises(ValueError, match="different blocks"):
        mom.merge(Moments({"a": 4}))
    with pytest.raises(ValueError, match="different blocks"):
        mom.merge_(Moments({"a": 4}))
    with pytest.raises(TypeError, match="only merge Moments"):
        mom.merge_(acts)
    with pytest.raises(ValueError, match="nothing to merge"):
        Moments.merge_all([])


def chunked(acts, bounds):
    return [{k: v[lo:hi] for k, v in acts.items()} for lo, hi in zip(bounds[:-1], bounds[1:])]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_chunks", [1, 3, 17])
def test_symmetric_update_matches_two_pass_covariance(seed, n_chunks):
    # In-place rank-(k+1) updates (Eq. M2) equal a naive two-pass float64 covariance of the
    # whole data, for uneven chunkings (one-row and empty chunks included), and the matrix
    # is exactly symmetric however reads and updates interleave.
    dims = (("a", 5), ("b", 8), ("c", 3))
    acts = random_acts(seed, n=300, dims=dims)
    acts = {k: v + 50.0 * (i + 1) for i, (k, v) in enumerate(acts.items())}
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.integers(0, 300, size=n_chunks - 1))
    bounds = [0, 1, 1, *cuts.tolist(), 300] if n_chunks > 1 else [0, 300]
    mom = Moments(dict((k, d) for k, d in dims))
    for k, chunk in enumerate(chunked(acts, sorted(bounds))):
        mom.update(chunk)
        if k % 2:  # a read between updates mirrors the triangle; later updates must not lose it
            mom.comoment("a", "b")
    stacked = np.hstack(list(acts.values()))
    centred = stacked - stacked.mean(axis=0)
    reference = centred.T @ centred
    got = mom.comoment(["a", "b", "c"]).numpy()
    assert np.abs(got - reference).max() / np.abs(reference).max() < 1e-12
    np.testing.assert_array_equal(got, got.T)
    np.testing.assert_allclose(mom.mean(["a", "b", "c"]).numpy(), stacked.mean(0), rtol=1e-14)


@pytest.mark.parametrize("seed", SEEDS)
def test_in_place_merge_matches_chan_formula_with_temporaries(seed):
    # The previous implementation (full-size Chan merge) written out, against merge_all.
    acts = random_acts(seed, n=200, dims=(("a", 6), ("b", 4)))
    bounds = [0, 37, 38, 120, 200]
    parts = [Moments.from_arrays(c) for c in chunked(acts, bounds)]
    n, mean, comoment = 0, None, None
    for part in parts:
        x = np.hstack([part.mean("a").numpy(), part.mean("b").numpy()])
        m_b = part.comoment(["a", "b"]).numpy()
        if n == 0:
            n, mean, comoment = part.n, x, m_b
            continue
        total = n + part.n
        delta = x - mean
        comoment = comoment + m_b + np.outer(delta, delta) * (n * part.n / total)
        mean = mean + delta * (part.n / total)
        n = total
    merged = Moments.merge_all(parts)
    got = merged.comoment(["a", "b"]).numpy()
    assert np.abs(got - comoment).max() / np.abs(comoment).max() < 1e-12
    np.testing.assert_allclose(merged.mean(["a", "b"]).numpy(), mean, rtol=1e-13)
    assert parts[0].n == 37, "merge_all must not modify its inputs"


@pytest.mark.parametrize("seed", SEEDS)
def test_running_in_place_merge_equals_merge_all_bit_for_bit(seed, tmp_path):
    # extract_moments folds shards into the first one with merge_ (no copy, no D x D
    # temporary): its result must be merge_all's, bit for bit, as must merge_all of a
    # generator (consumed lazily) and copies, moves and reloads of the state.
    acts = random_acts(seed, n=200, dims=(("a", 6), ("b", 4)))
    pieces = chunked({k: v + 100.0 for k, v in acts.items()}, [0, 37, 38, 38, 120, 200])
    parts = [Moments.from_arrays(c) if len(c["a"]) else Moments({"a": 6, "b": 4}) for c in pieces]
    reference = Moments.merge_all(parts)
    running = Moments.from_arrays(pieces[0])
    for part in parts[1:]:
        assert running.merge_(part) is running
    lazily = Moments.merge_all(part for part in parts)
    reference.save(tmp_path / "merged.safetensors")
    reloaded = Moments.load(tmp_path / "merged.safetensors")
    for got in (running, lazily, reference.copy(), reference.to("cpu"), reloaded):
        assert got.n == reference.n == 200 and got.dims == reference.dims
        np.testing.assert_array_equal(got.mean(["a", "b"]), reference.mean(["a", "b"]))
        np.testing.assert_array_equal(got.comoment(["a", "b"]), reference.comoment(["a", "b"]))
    assert parts[0].n == 37, "merge_all must not modify its inputs"


@pytest.mark.parametrize("seed", SEEDS)
def test_remove_equals_the_moments_of_the_rest(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(120, 5)) * np.array([1.0, 500.0, 1, 1, 1]) + 40.0
    y = rng.normal(size=(120, 3))
    first = rng.choice(120, 17, replace=False)
    x[first, 1] += 3000.0  # the removed rows carry most of neuron 1's variance
    rest = np.setdiff1d(np.arange(120), first)
    whole = Moments.from_arrays({"x": x, "y": y})
    part = Moments.from_arrays({"x": x[first], "y": y[first]})
    got = whole.remove(part)
    want = Moments.from_arrays({"x": x[rest], "y": y[rest]})
    assert got.n == len(rest)
    torch.testing.assert_close(got.mean(["x", "y"]), want.mean(["x", "y"]), rtol=1e-10, atol=1e-9)
    torch.testing.assert_close(
        got.comoment(["x", "y"]), want.comoment(["x", "y"]), rtol=1e-9, atol=1e-6
    )
    assert whole.n == 120  # inputs untouched
    torch.testing.assert_close(got.merge(part).comoment("x"), whole.comoment("x"))


def test_remove_rejects_other_blocks_and_too_many_samples():
    a = Moments.from_arrays({"x": np.arange(12.0).reshape(6, 2)})
    with pytest.raises(ValueError, match="fewer samples"):
        a.remove(a)
    with pytest.raises(ValueError, match="cannot remove"):
        a.remove(Moments.from_arrays({"z": np.ones((2, 2))}))
    with pytest.raises(TypeError, match="only remove"):
        a.remove(np.ones((2, 2)))
