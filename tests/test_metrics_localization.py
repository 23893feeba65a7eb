"""lmsim.metrics.localization: localization scores and the layer-table block summaries."""

import numpy as np
import pandas as pd
import pytest
from _helpers import SEEDS

from lmsim.metrics import localization_scores
from lmsim.metrics.localization import (
    block_means,
    cross_model_mean,
    family_means,
    layer_table,
    mean_to_others,
)


# ----------------------------------------------------------------------- localization scores
def naive_localization(neuron, sv):
    n = neuron.shape[0]
    mean_n = np.array([np.mean([neuron[i, j] for j in range(n) if j != i]) for i in range(n)])
    mean_s = np.array([np.mean([sv[i, j] for j in range(n) if j != i]) for i in range(n)])
    z_n = (mean_n - mean_n.mean()) / mean_n.std(ddof=1)
    z_s = (mean_s - mean_s.mean()) / mean_s.std(ddof=1)
    return z_n - z_s


@pytest.mark.parametrize("seed", SEEDS)
def test_localization_matches_naive(seed):
    rng = np.random.default_rng(seed)
    neuron = rng.uniform(size=(7, 7))
    sv = rng.uniform(size=(7, 7))
    labels = [f"m{i // 4}/layer.{i % 4}" for i in range(7)]
    scores = localization_scores(neuron, sv, labels)
    assert list(scores.index) == labels
    np.testing.assert_allclose(scores.to_numpy(), naive_localization(neuron, sv), atol=1e-12)
    # Diagonal entries (self-similarity) do not count.
    neuron_diag = neuron.copy()
    np.fill_diagonal(neuron_diag, 100.0)
    np.testing.assert_allclose(localization_scores(neuron_diag, sv, labels), scores, atol=1e-12)
    # Scores are z-score differences: they sum to zero.
    assert scores.sum() == pytest.approx(0.0, abs=1e-10)


def test_localization_direction_and_dataframe_labels():
    rng = np.random.default_rng(4)
    neuron = rng.uniform(size=(5, 5))
    sv = rng.uniform(size=(5, 5))
    sv = (sv + sv.T) / 2
    frame = pd.DataFrame(neuron, index=list("abcde"), columns=list("abcde"))
    from_scores = localization_scores(frame, sv)
    assert list(from_scores.index) == list("abcde")
    to_scores = localization_scores(neuron, sv, list("abcde"), direction="to")
    np.testing.assert_allclose(to_scores, naive_localization(neuron.T, sv), atol=1e-12)
    np.testing.assert_allclose(mean_to_others(neuron, "to"), mean_to_others(neuron.T), atol=0)


def test_localization_bad_input():
    sv = np.eye(4)
    with pytest.raises(ValueError, match="square"):
        localization_scores(np.ones((4, 3)), sv, list("abcd"))
    with pytest.raises(ValueError, match="labels"):
        localization_scores(np.random.default_rng(0).uniform(size=(4, 4)), sv, list("abc"))
    with pytest.raises(ValueError, match="same mean"):
        localization_scores(np.ones((4, 4)), sv, list("abcd"))
    with pytest.raises(ValueError, match="same layers"):
        localization_scores(np.ones((5, 5)), sv)


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
