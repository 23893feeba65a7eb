"""Random same-size subsets and the dev-interval rule for "equal accuracy"."""

import numpy as np
import pandas as pd
import pytest

from lmsim.cluster import kept_per_block
from lmsim.papers.thesis2022_redundancy.subset_controls import (
    best_on_dev,
    chosen_minus_reference,
    dev_choice_bootstrap,
    equal_accuracy,
    kept_minus_drawn,
    key_at_share,
    paired_bootstrap,
    same_size_subset,
    seed_pooled_difference,
    subset_controls,
    uniform_subset,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
DIMS = {f"m/layer.{i}": 6 for i in range(3)}  # embeddings + 2 layers, 6 neurons each


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_size_subset_keeps_the_per_layer_counts(seed):
    kept = np.array([0, 1, 2, 7, 15, 16])
    a = same_size_subset(kept, DIMS, seed=seed)
    assert kept_per_block(a, DIMS) == kept_per_block(kept, DIMS)
    assert np.unique(a).size == a.size and (np.diff(a) > 0).all()
    np.testing.assert_array_equal(a, same_size_subset(kept, DIMS, seed=seed))


def test_same_size_subset_is_uniform_within_a_layer():
    hits = np.zeros(18)
    for seed in range(3000):
        hits[same_size_subset([0, 6, 7], DIMS, seed=seed)] += 1
    # Layer 0: 1 of 6 columns (p = 1/6); layer 1: 2 of 6 (p = 1/3); layer 2: none.
    np.testing.assert_allclose(hits[:6] / 3000, 1 / 6, atol=0.03)
    np.testing.assert_allclose(hits[6:12] / 3000, 1 / 3, atol=0.04)
    assert hits[12:].sum() == 0


def test_paired_bootstrap_se_matches_the_analytic_se():
    rng = np.random.default_rng(0)
    a = rng.random(4000) < 0.7
    b = np.where(rng.random(4000) < 0.8, a, ~a)  # paired: mostly the same words right
    boot = paired_bootstrap(a, b, n_boot=3000, seed=1)
    d = a.astype(float) - b
    analytic = d.std(ddof=1) / np.sqrt(d.size)  # the se of a mean of paired differences
    assert boot["diff"] == pytest.approx(a.mean() - b.mean())
    assert boot["se"] == pytest.approx(analytic, rel=0.1)
    assert boot["lo"] < boot["diff"] < boot["hi"]
    assert boot["hi"] - boot["lo"] == pytest.approx(2 * 1.96 * analytic, rel=0.15)
    assert paired_bootstrap(a, b, n_boot=3000, seed=1) == boot


def test_grouped_bootstrap_of_copies_equals_the_word_bootstrap():
    """A sentence of k identical copies of one word carries one word's information: the
    sentence bootstrap of the copies equals the word bootstrap of the originals."""
    rng = np.random.default_rng(2)
    a, b = rng.random(300) < 0.6, rng.random(300) < 0.5
    k = 4
    copies = paired_bootstrap(
        np.repeat(a, k), np.repeat(b, k), groups=np.repeat(np.arange(300), k), seed=3
    )
    words = paired_bootstrap(a, b, seed=3)
    for key in ("diff", "lo", "hi", "se"):
        assert copies[key] == pytest.approx(words[key], abs=1e-12), key
    # Ignoring the grouping would treat the copies as independent: 2x too narrow.
    naive = paired_bootstrap(np.repeat(a, k), np.repeat(b, k), seed=3)
    assert naive["se"] < 0.6 * words["se"]
    with pytest.raises(ValueError, match="one unit per word"):
        paired_bootstrap(a, b, groups=np.arange(5))
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap(a, b, level=1.5)


def toy_task(seed=0):
    """Labels carried by neurons 6 and 7 (layer 1); everything else is noise."""
    rng = np.random.default_rng(seed)
    sizes = {"train": 900, "dev": 300, "test": 300}
    y = {k: rng.integers(0, 3, n) for k, n in sizes.items()}
    X = {}
    for k, v in y.items():
        x = rng.standard_normal((v.size, 18)).astype(np.float32)
        x[:, 6] += 3 * (v == 1)
        x[:, 7] += 3 * (v == 2)
        X[k] = x
    return X, y


def test_subset_controls_rows_and_the_capacity_control():
    X, y = toy_task()
    informative = np.array([0, 6, 7, 12])  # one neuron per layer, but layer 1's carry labels
    columns = {"none": np.arange(18), 0.5: informative, 0.9: np.array([0, 12])}
    groups = {k: np.arange(300) // 5 for k in ("dev", "test")}  # "sentences" of 5 words
    table = subset_controls(
        X, y, columns, DIMS, n_classes=3, seeds=(0, 1), n_random=2, groups=groups,
        n_boot=300, device="cpu", epochs=15, lr=1e-2, margin=0.1, relative=True,
    )  # fmt: skip
    assert len(table) == 2 * (1 + 2 * 3)
    assert set(table.kind) == {"reference", "kept", "random"}
    ref = table[table.kind == "reference"]
    assert (ref.dev_diff == 0).all() and ref.equal.all()
    kept = table[(table.kind == "kept") & (table.key == 0.5)]
    rand = table[(table.kind == "random") & (table.key == 0.5)]
    assert (rand.n_neurons == 4).all()
    # The kept set holds the informative neurons, a random 1-per-layer subset rarely does.
    assert kept.test.min() > rand.test.mean() + 0.1
    assert kept.equal.all()
    noise = table[(table.kind == "kept") & (table.key == 0.9)]
    assert not noise.equal.any() and (noise.dev_hi < 0).all()
    # equal accuracy is non-inferiority at the relative margin: the lower end clears it
    assert (table.equal == (table.dev_lo >= -table.dev_margin)).all()
    ref_dev = table[table.kind == "reference"].set_index("seed").dev
    assert np.allclose(table.dev_margin, 0.1 * ref_dev[table.seed].to_numpy())
    assert (table.dev_lo <= table.dev_diff + 1e-12).all()
    assert (table.dev_diff <= table.dev_hi + 1e-12).all()
    summary = equal_accuracy(table)
    assert list(summary.key) == [0.5, 0.5]
    # Dalvi's point rule is the point estimate within the margin: never stricter
    assert (table.equal_point == (table.dev_diff >= -table.dev_margin)).all()
    assert (table.equal_point | ~table.equal).all()
    point = equal_accuracy(table, rule="point")
    assert list(point.key) == [0.5, 0.5]
    with pytest.raises(ValueError, match="'interval' or 'point'"):
        equal_accuracy(table, rule="dev")
    # the largest kept set with at most a share of the neurons: 4 / 18 = 0.22, 2 / 18 = 0.11
    assert key_at_share(table, 0.25) == 0.5 and key_at_share(table, 0.2) == 0.9
    assert key_at_share(table, 0.1) is None
    assert (summary.kept_fraction == 4 / 18).all() and (summary.kept_minus_random > 0.1).all()
    assert (summary.test_lo <= summary.test_diff).all() and summary.uniform_test.isna().all()


def test_uniform_control_and_the_pooled_kept_minus_random():
    X, y = toy_task(3)
    columns = {"none": np.arange(18), 0.5: np.array([0, 6, 7, 12]), 0.9: np.array([0, 12])}
    groups = {k: np.arange(300) // 5 for k in ("dev", "test")}
    table = subset_controls(
        X, y, columns, DIMS, n_classes=3, seeds=(0, 1, 2), random_seeds=(0, 1), uniform=True,
        groups=groups, n_boot=100, device="cpu", epochs=5, lr=1e-2,
    )  # fmt: skip
    uni = table[table.kind == "uniform"]
    assert sorted(set(uni.seed)) == [0, 1] and set(uni.key) == {0.5, 0.9}
    assert (uni.n_neurons.to_numpy() == [4, 2, 4, 2]).all()
    gaps = kept_minus_drawn(table, "random")
    assert len(gaps) == 2 and gaps[0].shape == (300,)
    part = table[table.seed == 0]
    by_key = [
        part[(part.kind == "kept") & (part.key == k)].test.iloc[0]
        - part[(part.kind == "random") & (part.key == k)].test.iloc[0]
        for k in (0.5, 0.9)
    ]
    assert np.isclose(gaps[0].mean(), np.mean(by_key))  # pooled over τ: the mean of the gaps
    est = seed_pooled_difference(gaps, groups["test"], n_boot=100)
    assert est.low <= est.estimate <= est.high and "seeds" in est.unit
    assert np.isclose(est.estimate, np.mean([g.mean() for g in gaps]))
    chosen = chosen_minus_reference(table, equal_accuracy(table))
    assert len(chosen) == 3
    some = chosen_minus_reference(table, equal_accuracy(table).iloc[[0, 2]])
    assert len(some) == 2 and np.array_equal(some[1], chosen[2])


def test_uniform_subset_draws_from_every_layer():
    cols = uniform_subset(18, 6, seed=1)
    assert len(set(cols)) == 6 and cols.max() < 18 and (np.diff(cols) > 0).all()
    with pytest.raises(ValueError):
        uniform_subset(5, 6)


def test_subset_controls_draws_kept_sets_per_seed_and_checks_inputs():
    X, y = toy_task(1)
    seen = []

    def columns(seed):
        seen.append(seed)
        return {"none": np.arange(18), "k": np.array([seed, 6, 7])}

    table = subset_controls(
        X, y, columns, DIMS, n_classes=3, seeds=(0, 3), n_random=0, n_boot=50,
        device="cpu", epochs=2,
    )  # fmt: skip
    assert seen == [0, 3] and set(table.kind) == {"reference", "kept"}
    with pytest.raises(KeyError, match="`reference`"):
        subset_controls(X, y, {"k": [1]}, DIMS, n_classes=3, n_boot=50, device="cpu", epochs=1)
    with pytest.raises(ValueError, match="`dims` describes"):
        subset_controls(X, y, columns, {"a": 3}, n_classes=3, device="cpu")


def test_random_for_draws_random_subsets_only_at_the_keys_given():
    X, y = toy_task(2)
    columns = {"none": np.arange(18), 0.5: np.array([0, 6, 7, 12]), 0.9: np.array([0, 12])}
    table = subset_controls(
        X, y, columns, DIMS, n_classes=3, seeds=(0,), n_random=2, random_for=[0.9],
        n_boot=50, device="cpu", epochs=2,
    )  # fmt: skip
    rand = table[table.kind == "random"]
    assert list(rand.key) == [0.9, 0.9]
    assert set(table[table.kind == "kept"].key) == {0.5, 0.9}


def _fake_table(seed, n_dev=12, n_test=15, keys=(0.1, 0.5, 0.9), sizes=(40, 12, 3)):
    """subset_controls-like rows: per-word correctness of a reference and kept sets."""
    rng = np.random.default_rng(seed)
    groups = {k: np.sort(rng.integers(0, n, 4 * n)) for k, n in (("dev", n_dev), ("test", n_test))}
    for k, n in (("dev", n_dev), ("test", n_test)):  # every sentence has a word
        groups[k][:n] = np.arange(n)
        groups[k] = np.sort(groups[k])
    rows = []
    for s in (0, 1, 2):
        p = {"none": 0.9} | dict(zip(keys, (0.89, 0.86, 0.6), strict=True))
        for key, n in (("none", 50), *zip(keys, sizes, strict=True)):
            c = {k: rng.random(groups[k].size) < p[key] + rng.normal(0, 0.02) for k in groups}
            rows.append(
                dict(seed=s, key=key, kind="reference" if key == "none" else "kept",
                     n_neurons=n, dev=c["dev"].mean(), test=c["test"].mean(),
                     dev_correct=c["dev"], test_correct=c["test"])
            )  # fmt: skip
    return pd.DataFrame(rows), groups


def _naive_choice(table, groups, margin, n_boot, seed):
    """Loop over resamples: rebuild the resampled words, re-make the dev choice per seed."""
    rng = np.random.default_rng(seed)
    n = {k: groups[k].max() + 1 for k in groups}
    picks = {k: [rng.integers(0, n[k], n[k]) for _ in range(n_boot)] for k in ("dev", "test")}
    down, diff = [], []
    for b in range(n_boot):
        d, t = [], []
        for _, part in table.groupby("seed", sort=False):

            def acc(row, split, b=b):
                words = np.concatenate(
                    [np.flatnonzero(groups[split] == u) for u in picks[split][b]]
                )
                return row[f"{split}_correct"][words].mean()

            ref = part[part.kind == "reference"].iloc[0]
            chosen = ref
            for _, row in part[part.kind == "kept"].iterrows():
                if acc(row, "dev") - acc(ref, "dev") >= -margin * acc(ref, "dev"):
                    chosen = row
            d.append(1 - chosen.n_neurons / ref.n_neurons)
            t.append(acc(chosen, "test") - acc(ref, "test"))
        down.append(np.mean(d))
        diff.append(np.mean(t))
    return np.array(down), np.array(diff)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dev_choice_bootstrap_matches_a_naive_loop(seed):
    table, groups = _fake_table(seed)
    got = dev_choice_bootstrap(table, groups, margin=0.02, n_boot=40, seed=seed)
    down, diff = _naive_choice(table, groups, 0.02, 40, seed)
    np.testing.assert_allclose(got["downsizing"].draws, down, atol=1e-12)
    np.testing.assert_allclose(got["test_diff"].draws, diff, atol=1e-12)
    # the observed choice is equal_accuracy's point rule
    table = table.assign(dev_margin=0.02 * table.groupby("seed").dev.transform("first"))
    table["dev_diff"] = table.dev - table.groupby("seed").dev.transform("first")
    table["equal_point"] = table.dev_diff >= -table.dev_margin
    table["test_diff"] = table.test - table.groupby("seed").test.transform("first")
    e = equal_accuracy(table, rule="point")
    assert list(got["observed"].key) == list(e.key)
    assert got["downsizing"].estimate == pytest.approx(1 - e.kept_fraction.mean())
    assert got["test_diff"].estimate == pytest.approx(e.test_diff.mean())
    assert got["downsizing"].low <= got["downsizing"].estimate <= got["downsizing"].high
    assert got["chosen"].sum() == pytest.approx(1.0)


def test_dev_choice_bootstrap_is_not_zero_width_when_seeds_agree():
    """A τ at the margin's edge: every seed picks it, but dev resamples do not."""
    table, groups = _fake_table(0)
    got = dev_choice_bootstrap(table, groups, margin=0.03, n_boot=200)
    assert got["downsizing"].high - got["downsizing"].low > 0
    assert len(got["chosen"]) >= 2


def test_best_on_dev_chooses_by_dev_not_test():
    table = pd.DataFrame(
        dict(seed=[0, 0, 0, 1, 1], kind=["kept", "kept", "kept", "kept", "reference"],
             key=[0.7, 0.9, 100, 0.9, "none"], n_neurons=[150, 30, 100, 30, 500],
             dev=[0.9, 0.8, 0.85, 0.7, 0.95], test=[0.9, 0.95, 0.7, 0.6, 0.99])
    )  # fmt: skip
    best = best_on_dev(table, 100)
    assert list(best.index) == [0, 1]
    assert best.loc[0, "key"] == 100 and best.loc[0, "test"] == 0.7  # not the 0.95 on test
    assert best.loc[1, "key"] == 0.9
    assert best_on_dev(table, 10).empty
