"""lmsim.plotting: labelled heatmaps with colour bars, model grids, bars (Agg backend)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from lmsim import plotting  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _colorbar_axes(fig):
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


def _tick_texts(labels):
    return [label.get_text() for label in labels]


@pytest.mark.parametrize("seed", [0, 1])
def test_heatmap_ndarray_has_labels_colorbar_and_values(seed):
    rng = np.random.default_rng(seed)
    matrix = rng.uniform(size=(3, 4))
    ax = plotting.heatmap(
        matrix,
        row_labels=["a", "b", "c"],
        col_labels=["w", "x", "y", "z"],
        title="CKA",
        cbar_label="linear CKA",
        vmin=0,
        vmax=1,
    )
    assert _tick_texts(ax.get_yticklabels()) == ["a", "b", "c"]
    assert _tick_texts(ax.get_xticklabels()) == ["w", "x", "y", "z"]
    assert ax.get_title() == "CKA"
    (cbar_ax,) = _colorbar_axes(ax.figure)
    assert cbar_ax.get_ylabel() == "linear CKA"
    mesh = ax.collections[0]
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(3, 4), matrix)
    assert mesh.norm.vmin == 0 and mesh.norm.vmax == 1
    # small matrices are annotated, one text per cell, in the requested format
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == sorted(f"{v:.2f}" for v in matrix.ravel())


def test_heatmap_dataframe_uses_index_columns_and_names():
    df = pd.DataFrame(
        np.eye(2),
        index=pd.Index(["m1", "m2"], name="target"),
        columns=pd.Index(["b1", "b2"], name="basis"),
    )
    ax = plotting.heatmap(df, annot=False)
    assert _tick_texts(ax.get_yticklabels()) == ["m1", "m2"]
    assert _tick_texts(ax.get_xticklabels()) == ["b1", "b2"]
    assert ax.get_xlabel() == "basis" and ax.get_ylabel() == "target"
    assert len(ax.texts) == 0


def test_heatmap_accepts_torch_and_masks_nan():
    matrix = torch.tensor([[1.0, float("nan")], [0.5, 0.25]], dtype=torch.float64)
    ax = plotting.heatmap(matrix, cbar=False)
    assert _colorbar_axes(ax.figure) == []
    data = ax.collections[0].get_array()
    assert np.ma.count_masked(data) == 1
    assert len(ax.texts) == 3  # the NaN cell is blank


def test_heatmap_large_matrix_not_annotated_by_default():
    ax = plotting.heatmap(np.zeros((13, 13)))
    assert len(ax.texts) == 0


def test_heatmap_draws_on_given_axes():
    fig, (left, right) = plt.subplots(1, 2)
    returned = plotting.heatmap(np.ones((2, 2)), ax=right, cbar=False)
    assert returned is right
    assert not left.collections


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"matrix": np.zeros(3)}, "must be 2-D"),
        ({"matrix": np.zeros((2, 2)), "row_labels": ["a"]}, "`row_labels` has 1 labels"),
        ({"matrix": np.zeros((2, 3)), "col_labels": ["a", "b"]}, "`col_labels` has 2 labels"),
    ],
)
def test_heatmap_bad_input_names_problem(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plotting.heatmap(**kwargs)


def test_grid_heatmaps_layout_shared_scale_and_missing_pair():
    rng = np.random.default_rng(0)
    models = ["a", "b"]
    matrices = {
        (row, col): rng.uniform(size=(3 if row == "a" else 4, 3 if col == "a" else 4))
        for row in models
        for col in models
        if (row, col) != ("b", "a")
    }
    fig = plotting.grid_heatmaps(matrices, cbar_label="CKA", suptitle="layers")
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 4
    (cbar_ax,) = _colorbar_axes(fig)
    assert cbar_ax.get_ylabel() == "CKA"
    images = {id(ax): ax.images for ax in panels}
    empty = [ax for ax in panels if not images[id(ax)]]
    assert len(empty) == 1 and not empty[0].axison  # the missing (b, a) panel
    for ax in panels:
        for image in ax.images:
            assert image.norm.vmin == 0.0 and image.norm.vmax == 1.0
    # panel (row b, col b) shows the 4 x 4 matrix unchanged
    shown = [np.asarray(ax.images[0].get_array()) for ax in panels if ax.images]
    assert any(arr.shape == (4, 4) and np.allclose(arr, matrices[("b", "b")]) for arr in shown)
    assert fig._suptitle.get_text() == "layers"


def test_grid_heatmaps_scale_from_data_when_none():
    matrices = {("a", "a"): np.array([[2.0, 3.0], [4.0, 5.0]]), ("a", "b"): np.array([[-1.0]])}
    fig = plotting.grid_heatmaps(matrices, vmin=None, vmax=None)
    norms = {(ax.images[0].norm.vmin, ax.images[0].norm.vmax) for ax in fig.axes if ax.images}
    assert norms == {(-1.0, 5.0)}


def test_grid_heatmaps_order_and_errors():
    matrices = {("x", "y"): np.eye(2), ("y", "x"): np.eye(2)}
    fig = plotting.grid_heatmaps(matrices, row_order=["y", "x"], col_order=["x", "y"])
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert "y" in panels[0].get_ylabel()  # first row is model y
    with pytest.raises(ValueError, match="`matrices` is empty"):
        plotting.grid_heatmaps({})
    with pytest.raises(ValueError, match="pairs"):
        plotting.grid_heatmaps({"a": np.eye(2)})


def test_layer_heatmap_marks_model_boundaries():
    names = ["zoo/mlm-s0/layer.0", "zoo/mlm-s0/layer.2", "zoo/mlm-s0/layer.4"] + [
        f"gpt/layer.{i}" for i in range(3)
    ]
    matrix = np.random.default_rng(0).uniform(size=(6, 6))
    ax = plotting.layer_heatmap(matrix, names, title="t", cbar_label="sim")
    # ticks give the layer numbers; each model's name labels its block (once per axis)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "2", "4", "0", "1", "2"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "2", "4", "0", "1", "2"]
    assert [a.get_text() for a in ax.texts] == ["zoo/mlm-s0", "gpt"] * 2
    assert ax.get_xlabel() == "target layer" and ax.get_ylabel() == "source layer"
    assert len(ax.lines) == 2  # one horizontal and one vertical boundary
    assert ax.get_title() == "t"
    plt.close("all")
    with pytest.raises(ValueError, match="rows"):
        plotting.layer_heatmap(matrix[:5], names)


def test_bars_one_bar_per_row_with_hue_legend():
    df = pd.DataFrame(
        {
            "task": ["POS", "POS", "DEP", "DEP"],
            "model": ["bert", "distil", "bert", "distil"],
            "accuracy": [0.9, 0.85, 0.8, 0.7],
        }
    )
    ax = plotting.bars(df, x="task", y="accuracy", hue="model", ylim=(0, 1), title="probe")
    heights = sorted(round(p.get_height(), 6) for p in ax.patches if p.get_height() > 0)
    assert heights == sorted(df["accuracy"])
    assert ax.get_ylabel() == "accuracy" and ax.get_xlabel() == "task"
    assert ax.get_ylim() == (0, 1)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["bert", "distil"]


def test_bars_bad_input():
    with pytest.raises(ValueError, match="columns \\['nope'\\] are not in `df`"):
        plotting.bars(pd.DataFrame({"a": [1], "b": [2]}), x="a", y="nope")
    with pytest.raises(ValueError, match="must be a pandas DataFrame"):
        plotting.bars({"a": [1]}, x="a", y="a")


def test_use_style_sets_whitegrid_and_fonts():
    plt.rcdefaults()
    assert not plt.rcParams["axes.grid"]
    plotting.use_style()
    assert plt.rcParams["axes.grid"]
    assert plt.rcParams["axes.labelsize"] >= 10
    plt.rcdefaults()


def test_layer_ticks_thin_out_long_models_and_keep_first_and_last():
    names = [f"big/layer.{i}" for i in range(31)] + ["small/layer.0", "small/layer.1"]
    positions, labels = plotting._layer_ticks(names, max_per_model=6)
    big = [lab for pos, lab in zip(positions, labels) if pos < 31]
    assert big[0] == "0" and big[-1] == "30" and len(big) <= 7
    assert labels[-2:] == ["0", "1"] and positions[-2:] == [31, 32]


def test_panel_grid_stacks_and_hides_unused_cells():
    fig, axes = plotting.panel_grid(3, ncols=2, panel_size=(4, 3))
    assert len(axes) == 3 and len(fig.axes) == 4 and not fig.axes[3].axison
    assert tuple(fig.get_size_inches()) == (8, 6)
    plt.close(fig)
    with pytest.raises(ValueError, match="n_panels"):
        plotting.panel_grid(0)


@pytest.mark.parametrize(
    "n, text", [(110_000_000, "110 M"), (2_500, "2.5 k"), (12, "12"), (float("nan"), "—")]
)
def test_human_count(n, text):
    assert plotting.human_count(n) == text


def test_show_table_dashes_missing_and_hides_range_index():
    frame = pd.DataFrame({"a": [1.23456, np.nan]})
    html = plotting.show_table(frame, digits=2).to_html()
    assert "1.23" in html and "—" in html and "nan" not in html.lower()
    assert ">0</th>" not in html, "a RangeIndex is not shown"
    named = plotting.show_table(frame.set_axis(["x", "y"])).to_html()
    assert ">x</th>" in named
