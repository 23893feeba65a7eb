"""The redundancy chapter's per-model runs against the library calls they stand for."""

import numpy as np
import pytest

from lmsim.papers.thesis2022_redundancy.redundancy import LabelledSentence
from lmsim.papers.thesis2022_redundancy.sweep import sentence_groups, transfer_probes
from lmsim.probe import train_probe

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_sentence_groups_number_the_words_of_each_sentence():
    sents = [LabelledSentence(words=w) for w in (["a", "b"], ["c"], ["d", "e", "f"])]
    assert sentence_groups(sents).tolist() == [0, 0, 1, 2, 2, 2]


def _task(seed, n=240, d=8):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = rng.standard_normal((n, d)) + np.eye(d)[y] * 2.0
    return X.astype(np.float32), y


@pytest.mark.parametrize("seed", [0, 1])
def test_transfer_probes_score_one_trained_probe_on_every_set(seed):
    parts = {k: _task(seed + i) for i, k in enumerate(("train", "dev", "en", "fr"))}
    X = {k: v[0] for k, v in parts.items()}
    y = {k: v[1] for k, v in parts.items()}
    columns = {"none": np.arange(8), 0.5: np.array([0, 1, 2])}
    kw = dict(epochs=3, lr=1e-2, seed=seed, device="cpu")
    table, correct = transfer_probes(X, y, columns, ["en", "fr"], n_classes=3, **kw)
    assert len(table) == 4 and set(correct) == {(k, t) for k in columns for t in ("en", "fr")}
    for key, cols in columns.items():
        r = train_probe(
            X["train"][:, cols], y["train"], X["dev"][:, cols], y["dev"], classes=np.arange(3), **kw
        )
        for test in ("en", "fr"):
            expect = r.predict(X[test][:, cols]) == y[test]
            np.testing.assert_array_equal(correct[key, test], expect)
            row = table[(table.key == key) & (table.test_set == test)].iloc[0]
            assert row.test == pytest.approx(expect.mean())
            assert row.majority == pytest.approx(
                np.mean(y[test] == np.bincount(y["train"]).argmax())
            )
    assert table.control.isna().all()


def test_model_redundancy_equals_the_library_calls_it_stands_for():
    from lmsim.cluster import representatives
    from lmsim.papers.thesis2022_redundancy.redundancy import cluster_cuts, label_ids, probing_sets
    from lmsim.papers.thesis2022_redundancy.sweep import model_redundancy
    from lmsim.probe import word_activations

    sets = probing_sets("smoke", 30, 10, 10)
    labels = {"POS": label_ids(sets, "upos")}
    kw = dict(device="cpu", zoo_profile="smoke")
    run = model_redundancy(
        "zoo/mlm-s0", sets, labels, thresholds=[0.5, 0.9], seeds=[0, 1], random_for=[0.9],
        n_boot=20, extract_kw=kw, epochs=2, device="cpu", reconstruct=True, n_targets=None,
        n_clusters=[10, 10**6], carry_over=True,
    )  # fmt: skip
    X, dims = word_activations("zoo/mlm-s0", [s.words for s in sets["train"]], **kw)
    assert run["dims"] == dims
    # the tree cut at exactly 10 clusters (a count above the width is dropped), probed per seed
    (lab,) = cluster_cuts(X, [0.5], n_clusters=[10])[10][:1]
    assert np.unique(lab).size == 10 and set(run["size_kept"][1]) == {10}
    np.testing.assert_array_equal(run["size_kept"][1][10], representatives(lab, 1))
    assert list(run["sizes"].n_neurons) == [10, 10] and set(run["sizes"].kind) == {"kept"}
    from lmsim.papers.thesis2022_redundancy.selection import carry_over_selection

    carried = carry_over_selection(X, [0.5, 0.9], seed=0)
    assert all(np.array_equal(run["carry_over"][t], carried[t]) for t in (0.5, 0.9))
    np.testing.assert_allclose(run["variance"], X.astype(np.float64).var(axis=0), rtol=1e-10)
    for t, (lab, _) in cluster_cuts(X, [0.5, 0.9]).items():
        np.testing.assert_array_equal(run["cuts"][t], lab)
        for s in (0, 1):
            np.testing.assert_array_equal(run["kept"][s][t], representatives(lab, s))
    c = run["controls"]
    # per seed: all neurons, two kept sets, one random subset (at τ = 0.9 only)
    assert len(c) == 2 * 4 and list(c[c.kind == "random"].key) == [0.9, 0.9]
    assert all(run["scipy"].values()) and len(run["baseline"]) == 1
    assert set(run["subsets"].kind) == {"reference", "kept"}
    from lmsim.cluster import reconstruction_r2
    from lmsim.papers.thesis2022_redundancy.subset_controls import same_size_subset

    rec = run["reconstruction"].set_index(["key", "kind"]).r2
    X_test, _ = word_activations("zoo/mlm-s0", [s.words for s in sets["test"]], **kw)
    cols = {"kept": run["kept"][0][0.9], "random": same_size_subset(run["kept"][0][0.9], dims)}
    want = reconstruction_r2(X, X_test, cols, n_targets=None)
    assert rec[0.9, "kept"] == pytest.approx(want["kept"], rel=1e-9)
    assert rec[0.9, "random"] == pytest.approx(want["random"], rel=1e-9)
    assert set(rec.index.get_level_values("kind")) == {"kept", "random", "uniform"}


def test_model_redundancy_tunes_the_penalty_and_reuses_converged_probes():
    from lmsim.papers.thesis2022_redundancy.redundancy import label_ids, probing_sets
    from lmsim.papers.thesis2022_redundancy.sweep import model_redundancy
    from lmsim.probe import train_probe

    sets = probing_sets("smoke", 30, 10, 10)
    labels = {"POS": label_ids(sets, "upos")}
    kw = dict(device="cpu", zoo_profile="smoke")
    run = model_redundancy(
        "zoo/mlm-s0", sets, labels, thresholds=[0.5, 0.9], seeds=[0, 1], random_for=[0.9],
        n_boot=20, extract_kw=kw, lambdas=[1e-2, 1e-3], solver="lbfgs", max_iter=200,
        compare=dict(epochs=2, device="cpu"), device="cpu",
    )  # fmt: skip
    p = run["penalty"]
    assert list(p["lambda"]) == [1e-2, 1e-3] and p.chosen.sum() == 1
    c = run["controls"]
    ref = c[c.kind == "reference"]
    # the converged reference does not depend on the seed: trained once, reused
    assert ref.test.nunique() == 1 and ref.stop.notna().all()
    assert set(run["solvers"].solver) == {"lbfgs", "adam", "adam, same objective"}
    assert set(run["curves"].split) == {"train", "dev", "test"}
    b = run["baseline"].iloc[0]
    assert b.test == ref.test.iloc[0] and b.selectivity == b.test - b.control
    lam = float(p["lambda"][p.chosen].iloc[0])
    sub = run["subsets"]
    assert sub[sub.kind == "reference"].test.iloc[0] == ref.test.iloc[0]
    assert lam in (1e-2, 1e-3) and callable(train_probe)
