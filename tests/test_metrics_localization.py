"""lmsim.metrics.localization: localization scores and the layer-table block summaries."""

import numpy as np
import pandas as pd
import pytest
from _helpers import SEEDS

from lmsim.metrics import localization_scores
from lmsim.metrics.localization import (
    block_means,
    cross_model_mean,
    depth_trend,
    layer_table,
    mean_to_others,
)
from lmsim.papers.wu2020_similarity import family_cells, family_means, relation_gap


# ----------------------------------------------------------------------- localization scores
def naive_localization(neuron, sv, z=True):
    """Row means (sim(i → others)), z-scored over all layers: the loop of the formula."""
    n = neuron.shape[0]
    mean_n = np.array([np.mean([neuron[i, j] for j in range(n) if j != i]) for i in range(n)])
    mean_s = np.array([np.mean([sv[i, j] for j in range(n) if j != i]) for i in range(n)])
    if not z:
        return mean_n - mean_s
    z_n = (mean_n - mean_n.mean()) / mean_n.std(ddof=1)
    z_s = (mean_s - mean_s.mean()) / mean_s.std(ddof=1)
    return z_n - z_s


def authors_localization(neuron, sv, labels):
    """Wu et al.'s analysis notebooks (analysis-8.ipynb), rewritten as a loop.

    Their results store ``similarities[X][Y] = sim(X → Y)`` for X ≠ Y only (no diagonal);
    a DataFrame built from that dict has one *column* per X and one row per Y, the rows
    are reindexed to the column order, ``mean(axis=1)`` averages each row Y over the
    columns X (NaN diagonal skipped), and the series is z-scored with pandas' std.
    """

    def as_dict(matrix):
        return {
            x: {y: matrix[i, j] for j, y in enumerate(labels) if j != i}
            for i, x in enumerate(labels)
        }

    def series(matrix):
        frame = pd.DataFrame(as_dict(matrix))
        frame = frame.reindex(frame.columns)
        out = frame.mean(axis=1)
        return (out - out.mean()) / out.std()

    return series(neuron) - series(sv)


@pytest.mark.parametrize("seed", SEEDS)
def test_localization_paper_compat_matches_the_authors_notebook(seed):
    rng = np.random.default_rng(seed)
    labels = [f"m{i // 4}/layer.{i % 4}" for i in range(9)]
    neuron = rng.uniform(size=(9, 9))  # directional: not symmetric
    sv = rng.uniform(size=(9, 9))
    sv = (sv + sv.T) / 2
    got = localization_scores(neuron, sv, labels, paper_compat=True)
    want = authors_localization(neuron, sv, labels)
    np.testing.assert_allclose(got.to_numpy(), want.loc[labels].to_numpy(), atol=1e-12)
    # The authors' mean runs over the *source* layers X of sim(X → L): the column, not the
    # row, so a directional neuronsim gives a different score from the row convention.
    row = localization_scores(neuron, sv, labels, direction="from", normalize="all")
    assert np.abs(row.to_numpy() - got.to_numpy()).max() > 1e-3
    np.testing.assert_allclose(row, naive_localization(neuron, sv), atol=1e-12)
    np.testing.assert_allclose(got, naive_localization(neuron.T, sv), atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_localization_default_is_the_papers_raw_column_mean_difference(seed):
    rng = np.random.default_rng(seed)
    neuron = rng.uniform(size=(7, 7))
    sv = rng.uniform(size=(7, 7))
    labels = [f"m{i // 4}/layer.{i % 4}" for i in range(7)]
    scores = localization_scores(neuron, sv, labels)
    assert list(scores.index) == labels
    np.testing.assert_allclose(scores, naive_localization(neuron.T, sv.T, z=False), atol=1e-12)
    # Diagonal entries (self-similarity) do not count.
    neuron_diag = neuron.copy()
    np.fill_diagonal(neuron_diag, 100.0)
    np.testing.assert_allclose(localization_scores(neuron_diag, sv, labels), scores, atol=1e-12)
    # Z-scored scores are differences of z-scores: they sum to zero.
    z = localization_scores(neuron, sv, labels, normalize="all")
    assert z.sum() == pytest.approx(0.0, abs=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_localization_per_model_zscores_within_each_model(seed):
    rng = np.random.default_rng(seed)
    labels = [f"{m}/layer.{i}" for m, n in [("a", 3), ("zoo/b", 4), ("c", 2)] for i in range(n)]
    n = len(labels)
    neuron = rng.uniform(size=(n, n))
    sv = rng.uniform(size=(n, n))
    got = localization_scores(neuron, sv, labels, normalize="per_model")
    raw = pd.Series(naive_localization(neuron.T, sv.T, z=False), index=labels)
    mean_n = pd.Series([np.mean(np.delete(neuron[:, i], i)) for i in range(n)], index=labels)
    mean_s = pd.Series([np.mean(np.delete(sv[:, i], i)) for i in range(n)], index=labels)
    for model in ("a", "zoo/b", "c"):
        rows = [label for label in labels if label.rpartition("/layer.")[0] == model]
        z_n = (mean_n[rows] - mean_n[rows].mean()) / mean_n[rows].std(ddof=1)
        z_s = (mean_s[rows] - mean_s[rows].mean()) / mean_s[rows].std(ddof=1)
        np.testing.assert_allclose(got[rows], z_n - z_s, atol=1e-12)
        assert got[rows].sum() == pytest.approx(0.0, abs=1e-10)
    assert np.allclose(raw, mean_n - mean_s)
    # A model-wide offset of one model's means (e.g. its width) cancels per model, not
    # across models.
    shifted = neuron.copy()
    shifted[:, :3] += 0.3  # every layer of model "a" looks 0.3 more neuron-similar
    per_model = localization_scores(shifted, sv, labels, normalize="per_model")
    np.testing.assert_allclose(per_model, got, atol=1e-12)
    across = localization_scores(shifted, sv, labels, normalize="all")
    assert across[:3].mean() > localization_scores(neuron, sv, labels, normalize="all")[:3].mean()
    # Explicit models= give the same answer for labels that are not block names.
    plain = localization_scores(
        neuron, sv, list(range(n)), normalize="per_model", models=[lab[:-8] for lab in labels]
    )
    np.testing.assert_allclose(plain.to_numpy(), got.to_numpy(), atol=1e-12)


def test_localization_direction_and_dataframe_labels():
    rng = np.random.default_rng(4)
    neuron = rng.uniform(size=(5, 5))
    sv = rng.uniform(size=(5, 5))
    sv = (sv + sv.T) / 2
    frame = pd.DataFrame(neuron, index=list("abcde"), columns=list("abcde"))
    to_scores = localization_scores(frame, sv, normalize="all")
    assert list(to_scores.index) == list("abcde")
    np.testing.assert_allclose(to_scores, naive_localization(neuron.T, sv), atol=1e-12)
    from_scores = localization_scores(neuron, sv, list("abcde"), "from", "all")
    np.testing.assert_allclose(from_scores, naive_localization(neuron, sv), atol=1e-12)
    np.testing.assert_allclose(mean_to_others(neuron, "to"), mean_to_others(neuron.T), atol=0)


def test_localization_bad_input():
    sv = np.eye(4)
    with pytest.raises(ValueError, match="square"):
        localization_scores(np.ones((4, 3)), sv, list("abcd"))
    with pytest.raises(ValueError, match="labels"):
        localization_scores(np.random.default_rng(0).uniform(size=(4, 4)), sv, list("abc"))
    with pytest.raises(ValueError, match="same mean"):
        localization_scores(np.ones((4, 4)), sv, list("abcd"), normalize="all")
    with pytest.raises(ValueError, match="same layers"):
        localization_scores(np.ones((5, 5)), sv)
    rand = np.random.default_rng(1).uniform(size=(4, 4))
    with pytest.raises(ValueError, match="paper_compat"):
        localization_scores(rand, sv, list("abcd"), direction="from", paper_compat=True)
    with pytest.raises(ValueError, match="paper_compat"):
        localization_scores(rand, sv, list("abcd"), normalize="per_model", paper_compat=True)
    with pytest.raises(ValueError, match="normalize"):
        localization_scores(rand, sv, list("abcd"), normalize="width")
    with pytest.raises(ValueError, match="models="):
        localization_scores(rand, sv, list("abcd"), normalize="per_model")
    with pytest.raises(ValueError, match="one layer"):
        localization_scores(
            rand, sv, ["a/layer.0", "a/layer.1", "a/layer.2", "b/layer.0"], normalize="per_model"
        )


def test_depth_trend_is_spearman_per_model():
    names = [f"{m}/layer.{i}" for m, n in [("up", 5), ("down", 4), ("one", 2)] for i in range(n)]
    scores = pd.Series([0.1, 0.5, 0.3, 0.9, 1.2, 4.0, 3.0, 2.0, 1.0, 0.0, 1.0], index=names)
    trend = depth_trend(scores)
    assert list(trend.index) == ["up", "down", "one"]
    # up: ranks of scores (1, 3, 2, 4, 5) against (1..5): 1 − 6·Σd²/(n(n²−1)) = 1 − 12/120.
    assert trend.loc["up", "spearman"] == pytest.approx(0.9)
    assert trend.loc["down", "spearman"] == pytest.approx(-1.0)
    assert np.isnan(trend.loc["one", "spearman"]) and trend.loc["one", "n_layers"] == 2
    with pytest.raises(ValueError, match="names"):
        depth_trend(scores.to_numpy())


# ----------------------------------------------------------------------- layer table
NAMES = ["zoo/mlm-s0/layer.0", "zoo/mlm-s0/layer.2", "zoo/mlm-s0/layer.4"] + [
    f"gpt/layer.{i}" for i in range(3)
]


def test_layer_table_parses_models_with_slashes_and_relative_depth():
    table = layer_table(NAMES)
    assert list(table["model"]) == ["zoo/mlm-s0"] * 3 + ["gpt"] * 3
    assert list(table["layer"]) == [0, 2, 4, 0, 1, 2]
    assert np.allclose(table["depth"], [0, 0.5, 1, 0, 0.5, 1])
    with pytest.raises(ValueError, match="not of the form"):
        layer_table(["bert/embeddings"])


@pytest.mark.parametrize("seed", SEEDS)
def test_block_means_and_cross_model_mean_match_loops(seed):
    rng = np.random.default_rng(seed)
    matrix = rng.uniform(size=(6, 6))
    models = list(layer_table(NAMES)["model"])
    means = block_means(matrix, NAMES)
    for a in ("zoo/mlm-s0", "gpt"):
        for b in ("zoo/mlm-s0", "gpt"):
            cells = [
                matrix[i, j]
                for i in range(6)
                for j in range(6)
                if models[i] == a and models[j] == b and i != j
            ]
            assert means.loc[a, b] == pytest.approx(np.mean(cells))
    cross = cross_model_mean(matrix, NAMES)
    for i in range(6):
        others = [matrix[i, j] for j in range(6) if models[j] != models[i]]
        assert cross.iloc[i] == pytest.approx(np.mean(others))


def test_block_summaries_reject_bad_shapes():
    with pytest.raises(ValueError, match="shape"):
        block_means(np.zeros((3, 3)), NAMES)
    with pytest.raises(ValueError, match="single model"):
        cross_model_mean(np.zeros((2, 2)), ["a/layer.0", "a/layer.1"])


# ----------------------------------------------------------------------- family means
def naive_family_means(matrix, names, families):
    models = [name.rpartition("/layer.")[0] for name in names]
    groups = {"within model": [], "within family": [], "across families": []}
    for i, a in enumerate(models):
        for j, b in enumerate(models):
            if i == j:
                continue
            if a == b:
                groups["within model"].append(matrix[i, j])
            elif families[a] == families[b]:
                groups["within family"].append(matrix[i, j])
            else:
                groups["across families"].append(matrix[i, j])
    return {k: np.mean(v) if v else np.nan for k, v in groups.items()}


@pytest.mark.parametrize("seed", SEEDS)
def test_family_means_match_naive(seed):
    rng = np.random.default_rng(seed)
    names = [f"{m}/layer.{i}" for m, n in [("a", 3), ("b", 2), ("zoo/c", 4)] for i in range(n)]
    matrix = rng.uniform(size=(len(names), len(names)))
    families = {"a": "enc", "b": "enc", "zoo/c": "dec"}
    got = family_means(matrix, names, families)
    want = naive_family_means(matrix, names, families)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-12)


def test_family_means_nan_without_a_two_model_family_and_names_missing_models():
    names = ["a/layer.0", "a/layer.1", "b/layer.0", "b/layer.1"]
    got = family_means(np.eye(4), names, {"a": "x", "b": "y"})
    assert np.isnan(got["within family"]) and got["across families"] == 0.0
    with pytest.raises(ValueError, match="no family for the models \\['b'\\]"):
        family_means(np.eye(4), names, {"a": "x"})


@pytest.mark.parametrize("seed", SEEDS)
def test_family_cells_group_means_match_family_means(seed):
    rng = np.random.default_rng(seed)
    names = [f"{m}/layer.{i}" for m, n in [("a", 3), ("b", 2), ("zoo/c", 4)] for i in range(n)]
    matrix = rng.uniform(size=(len(names), len(names)))
    families = {"a": "enc", "b": "enc", "zoo/c": "dec"}
    cells = family_cells(matrix, names, families)
    assert len(cells) == len(names) * (len(names) - 1)
    want = naive_family_means(matrix, names, families)
    for key, value in cells.groupby("relation")["value"].mean().items():
        assert value == pytest.approx(want[key], abs=1e-12)
    # a subset of models keeps only their cells, and each cell is the matrix entry
    sub = family_cells(matrix, names, families, models=["a", "b"])
    assert set(sub.relation) == {"within model", "within family"} and len(sub) == 5 * 4
    i, j = names.index(sub.row.iloc[0]), names.index(sub.col.iloc[0])
    assert sub.value.iloc[0] == matrix[i, j] and set(sub.models) == {"a | a", "a | b", "b | b"}


def test_family_cells_rejects_unknown_models():
    names = ["a/layer.0", "a/layer.1", "b/layer.0"]
    with pytest.raises(ValueError, match="no layer in `names`"):
        family_cells(np.eye(3), names, {"a": "x", "b": "y"}, models=["c"])
    with pytest.raises(ValueError, match="no family for the models"):
        family_cells(np.eye(3), names, {"a": "x"})


def test_relation_gap_is_the_difference_of_means_with_a_bootstrap_over_cells():
    rng = np.random.default_rng(0)
    names = [f"{m}/layer.{i}" for m in ("a", "b", "c") for i in range(3)]
    matrix = rng.uniform(size=(9, 9))
    cells = family_cells(matrix, names, {"a": "x", "b": "x", "c": "y"})
    got = relation_gap(cells, "within family", "across families", n_boot=200)
    within = cells.value[cells.relation == "within family"].mean()
    across = cells.value[cells.relation == "across families"].mean()
    assert got.estimate == pytest.approx(within - across, abs=1e-12)
    assert got.low <= got.estimate <= got.high and got.n == len(cells) - 18
    assert got.unit == "pairs of layers"
    # a naive loop over the same draws (first group, then second) gives the same interval
    a = cells.value[cells.relation == "within family"].to_numpy()
    b = cells.value[cells.relation == "across families"].to_numpy()
    draws, draw = [], np.random.default_rng(0)
    for _ in range(200):
        pick_a = a[draw.integers(0, len(a), len(a))]
        pick_b = b[draw.integers(0, len(b), len(b))]
        draws.append(pick_a.mean() - pick_b.mean())
    assert (got.low, got.high) == pytest.approx(tuple(np.quantile(draws, [0.025, 0.975])))
    assert (
        relation_gap(cells[cells.relation != "within family"], "within family", "within model")
        is None
    )
