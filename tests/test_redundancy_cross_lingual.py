"""The cross-lingual page's controls (issue 44, D6-D8): the thesis's kept share matched,
random subsets of that size, the French in-language reference, labels unseen in training."""

import numpy as np
import pytest

from lmsim.cluster import kept_per_block
from lmsim.papers.thesis2022_redundancy.cross_lingual import (
    TABLE_A3_MBERT,
    cross_fitted_probe,
    joint_unit_bootstrap,
    matched_columns,
    seen_labels,
    share_clusters,
    thesis_kept_share,
    thesis_losses,
    unit_halves,
)
from lmsim.papers.thesis2022_redundancy.redundancy import cluster_cuts
from lmsim.papers.thesis2022_redundancy.sweep import transfer_probes
from lmsim.probe import control_labels, train_probe

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_thesis_kept_share_is_table_a3_at_tau_03():
    # mBERT: 12 layers of 768 and the embeddings, the top layer printed as 767 (Table A.3).
    assert sum(TABLE_A3_MBERT["none"]) == 9983 and len(TABLE_A3_MBERT[0.3]) == 13
    assert thesis_kept_share() == pytest.approx(1828 / 9983)
    assert 0.18 < thesis_kept_share() < 0.19
    with pytest.raises(ValueError, match="tau"):
        thesis_kept_share(0.5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matched_columns_draw_subsets_of_the_kept_size(seed):
    dims = {"layer.0": 10, "layer.1": 10, "layer.2": 10}
    kept = np.array([0, 1, 2, 3, 4, 5, 11, 12, 25])
    cols = matched_columns(kept, dims, seed=seed)
    assert cols["kept"].tolist() == kept.tolist()
    per_layer, anywhere = cols["random (per layer)"], cols["random (any layer)"]
    assert per_layer.size == anywhere.size == kept.size
    assert kept_per_block(per_layer, dims) == kept_per_block(kept, dims)
    assert np.unique(anywhere).size == kept.size and anywhere.max() < 30
    again = matched_columns(kept, dims, seed=seed)
    assert all(np.array_equal(cols[k], again[k]) for k in cols)


def test_unit_halves_never_split_a_unit_and_alternate_over_units():
    units = np.array([0, 0, 1, 2, 2, 2, 3, 5, 5])
    halves = unit_halves(units)
    for u in np.unique(units):
        assert np.unique(halves[units == u]).size == 1
    assert halves.tolist() == [0, 0, 1, 0, 0, 0, 1, 0, 0]
    with pytest.raises(ValueError, match="two distinct"):
        unit_halves(np.zeros(4))


def _task(seed, n=300, d=6):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return (rng.standard_normal((n, d)) + np.eye(d)[y] * 2.5).astype(np.float32), y


@pytest.mark.parametrize("seed", [0, 1])
def test_cross_fitted_probe_scores_every_word_with_the_probe_of_the_other_half(seed):
    X, y = _task(seed)
    halves = np.arange(y.size) % 2
    kw = dict(solver="lbfgs", l1=1e-3, l2=1e-3, max_iter=200, device="cpu")
    correct, table = cross_fitted_probe(X, y, halves, n_classes=4, **kw)
    for half in (0, 1):
        train, test = halves != half, halves == half
        r = train_probe(X[train], y[train], classes=np.arange(4), **kw)
        np.testing.assert_array_equal(correct[test], r.predict(X[test]) == y[test])
        row = table[table.half == half].iloc[0]
        assert row.n_train + row.n_test == y.size and row.test == pytest.approx(
            correct[test].mean()
        )
        assert row.stop in {"gradient", "objective", "max_iter", "stalled"}
    assert correct.mean() > 0.8  # the planted signal is learnable from either half


def test_cross_fitted_probe_never_trains_on_the_words_it_scores():
    # Labels that flip between the halves: a probe trained on the scored half would get
    # them right, one trained on the other half gets them all wrong.
    X, y = _task(3)
    halves = (np.arange(y.size) < y.size // 2).astype(int)
    y_flip = np.where(halves == 1, (y + 1) % 3, y)
    correct, _ = cross_fitted_probe(
        X, y_flip, halves, n_classes=3, solver="lbfgs", l1=1e-4, l2=1e-4, device="cpu"
    )
    assert correct.mean() < 0.2


def test_seen_labels_mark_only_labels_of_the_training_set():
    assert seen_labels([0, 3, 1, 4], [0, 1, 1, 2]).tolist() == [True, False, True, False]


def test_transfer_probes_record_the_stopping_rule_and_train_the_control_once():
    parts = {k: _task(i) for i, k in enumerate(("train", "dev", "en", "fr"))}
    X = {k: v[0] for k, v in parts.items()}
    y = {k: v[1] for k, v in parts.items()}
    words = {k: [f"w{int(v[1][i])}{i % 7}" for i in range(len(v[1]))] for k, v in parts.items()}
    kw = dict(solver="lbfgs", l1=1e-3, l2=1e-3, gtol=1e-4, max_iter=300, seed=0, device="cpu")
    table, _ = transfer_probes(X, y, {"none": np.arange(6)}, ["en", "fr"], n_classes=3,
                               words=words, **kw)  # fmt: skip
    assert {"stop", "gradient"} <= set(table.columns)
    assert table.stop.isin(["gradient", "objective", "max_iter", "stalled", "zero"]).all()
    assert (table.gradient[table.stop == "gradient"] <= 1e-4).all()
    ctrl = control_labels(words["train"], y["train"], words["en"], words["fr"], seed=0)
    r = train_probe(X["train"], ctrl[0], classes=np.arange(3), **kw)
    for test, labels in zip(("en", "fr"), ctrl[1:], strict=True):
        row = table[table.test_set == test].iloc[0]
        assert row.control == pytest.approx(np.mean(r.predict(X[test]) == labels))


def test_thesis_losses_are_table_b_differences_and_the_rules_round_up_the_largest():
    pos, dep = thesis_losses("POS"), thesis_losses("DEP")
    assert pos == {"mBERT": 0.24, "distil-mBERT": 1.75, "XLM-R": 1.7}
    assert dep == {"mBERT": 3.84, "distil-mBERT": 1.99, "XLM-R": 6.95}
    # the page's 3- and 7-point rules cover the largest loss of the three models, not mBERT's
    assert max(pos.values()) <= 3 and max(dep, key=dep.get) == "XLM-R" and max(dep.values()) <= 7
    assert dep["mBERT"] < max(dep.values())
    with pytest.raises(ValueError, match="task"):
        thesis_losses("NER")


@pytest.mark.parametrize("seed", [0, 1])
def test_cutting_at_the_thesis_share_keeps_exactly_round_share_times_n(seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((300, 8)) @ rng.standard_normal((8, 90)) + rng.standard_normal(
        (300, 90)
    )
    k = share_clusters(X.shape[1], thesis_kept_share(0.3))
    assert k == round(0.18311 * 90) == 16
    cuts = cluster_cuts(X, [0.3], n_clusters=[k], seed=seed)
    labels, kept = cuts[k]
    assert kept.size == k and np.unique(labels).size == k
    assert np.unique(labels[kept]).size == k  # one representative per cluster
    assert share_clusters(4480, thesis_kept_share(0.3)) == 820
    with pytest.raises(ValueError, match="share"):
        share_clusters(10, 0.0)


def test_joint_unit_bootstrap_draws_the_same_units_in_every_set():
    # two parallel sets: article u has u+1 English rows and 2 French rows
    en_units = np.repeat(np.arange(5), np.arange(1, 6))
    fr_units = np.repeat(np.arange(5), 2)
    en, fr = en_units.astype(float), fr_units.astype(float)

    def stat(en, fr):
        # the same articles on both sides: the mean unit id agrees once weighted per article
        (a,), (b,) = en, fr
        assert set(np.unique(a)) == set(np.unique(b))
        return fr[0].mean() - 0 * a.mean()

    est = joint_unit_bootstrap(
        stat, {"en": [en], "fr": [fr]}, {"en": en_units, "fr": fr_units}, n_boot=200
    )
    assert est.n == 5 and est.estimate == pytest.approx(2.0)
    assert est.low < 2.0 < est.high
    # a statistic constant under paired resampling has a zero-width interval; unpaired would not
    diff = joint_unit_bootstrap(
        lambda en, fr: np.mean(np.unique(en[0])) - np.mean(np.unique(fr[0])),
        {"en": [en], "fr": [fr]},
        {"en": en_units, "fr": fr_units},
        n_boot=200,
    )
    assert diff.low == diff.high == 0.0
    with pytest.raises(ValueError, match="parallel"):
        joint_unit_bootstrap(
            stat, {"en": [en], "fr": [fr[:-2]]}, {"en": en_units, "fr": fr_units[:-2]}
        )
