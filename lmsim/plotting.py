"""One plotting style for the book: labelled heatmaps with colour bars, grids, bar charts.

Every figure in the chapters goes through these helpers so that axes are labelled, colour
scales are shared where they should be compared, and fonts are readable in the rendered
book.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lmsim.blocks import is_layer_block, model_spans

__all__ = [
    "use_style",
    "heatmap",
    "grid_heatmaps",
    "bars",
    "layer_heatmap",
    "panel_grid",
    "human_count",
    "show_table",
]

_RC = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "figure.titlesize": 13,
}


def use_style() -> None:
    """Apply the book's style: seaborn ``whitegrid`` in the ``paper`` context, readable fonts.

    Call once at the top of a notebook; calling again is harmless.
    """
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.2, rc=_RC)


def _as_matrix(
    matrix: Any, row_labels: Sequence | None, col_labels: Sequence | None
) -> tuple[np.ndarray, list[str], list[str]]:
    if isinstance(matrix, pd.DataFrame):
        rows = list(matrix.index) if row_labels is None else list(row_labels)
        cols = list(matrix.columns) if col_labels is None else list(col_labels)
        values = matrix.to_numpy(dtype=float)
    else:
        if hasattr(matrix, "detach"):  # a torch tensor, possibly on a GPU
            matrix = matrix.detach().cpu().numpy()
        values = np.asarray(matrix, dtype=float)
        if values.ndim != 2:
            raise ValueError(
                f"`matrix` must be 2-D (n_rows, n_cols), got shape {values.shape}; "
                "reshape it or pass a DataFrame"
            )
        rows = list(range(values.shape[0])) if row_labels is None else list(row_labels)
        cols = list(range(values.shape[1])) if col_labels is None else list(col_labels)
    if values.ndim != 2:
        raise ValueError(f"`matrix` must be 2-D, got shape {values.shape}")
    if len(rows) != values.shape[0]:
        raise ValueError(
            f"`row_labels` has {len(rows)} labels but `matrix` has {values.shape[0]} rows"
        )
    if len(cols) != values.shape[1]:
        raise ValueError(
            f"`col_labels` has {len(cols)} labels but `matrix` has {values.shape[1]} columns"
        )
    return values, [str(r) for r in rows], [str(c) for c in cols]


def heatmap(
    matrix: Any,
    row_labels: Sequence | None = None,
    col_labels: Sequence | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    cmap: str = "viridis",
    annot: bool | None = None,
    fmt: str = ".2f",
    cbar_label: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    cbar: bool = True,
) -> Axes:
    """Draw a labelled heatmap with a colour bar.

    Parameters
    ----------
    matrix : ndarray, tensor or DataFrame of shape (n_rows, n_cols)
        Values to show; a DataFrame's index and columns become the labels. NaN cells are
        left blank.
    row_labels, col_labels : sequence, optional
        Tick labels (default: the DataFrame's index/columns, else ``0..n-1``).
    ax : Axes, optional
        Where to draw; a new figure is made when omitted.
    title : str, optional
    vmin, vmax : float, optional
        Colour scale limits; give the same limits to heatmaps that are compared.
    cmap : str, default="viridis"
    annot : bool, optional
        Write the values in the cells; by default only when the matrix has at most
        12 × 12 cells.
    fmt : str, default=".2f"
        Format of the annotations.
    cbar_label : str, optional
        Label of the colour bar (e.g. ``"linear CKA"``).
    xlabel, ylabel : str, optional
        Axis labels (default: the DataFrame's column/index names when set).
    cbar : bool, default=True
        Draw the colour bar.

    Returns
    -------
    Axes
    """
    values, rows, cols = _as_matrix(matrix, row_labels, col_labels)
    if ax is None:
        width = min(3.0 + 0.45 * len(cols), 14.0)
        height = min(2.5 + 0.4 * len(rows), 12.0)
        _, ax = plt.subplots(figsize=(width, height))
    if annot is None:
        annot = values.shape[0] <= 12 and values.shape[1] <= 12
    sns.heatmap(
        values,
        ax=ax,
        vmin=vmin,
        vmax=vmax,
        cmap=cmap,
        annot=annot,
        fmt=fmt,
        mask=np.isnan(values),
        xticklabels=cols,
        yticklabels=rows,
        cbar=cbar,
        cbar_kws={"label": cbar_label} if cbar and cbar_label else None,
        square=False,
        annot_kws={"fontsize": 8},
    )
    if isinstance(matrix, pd.DataFrame):
        xlabel = xlabel if xlabel is not None else matrix.columns.name
        ylabel = ylabel if ylabel is not None else matrix.index.name
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=90 if max(map(len, cols), default=0) > 3 else 0)
    ax.tick_params(axis="y", labelrotation=0)
    return ax


def grid_heatmaps(
    matrices: Mapping[tuple[str, str], Any],
    row_order: Sequence[str] | None = None,
    col_order: Sequence[str] | None = None,
    vmin: float | None = 0.0,
    vmax: float | None = 1.0,
    cmap: str = "viridis",
    cbar_label: str | None = None,
    panel_size: float = 2.2,
    suptitle: str | None = None,
    xlabel: str = "layer",
    ylabel: str = "layer",
) -> Figure:
    """A models × models grid of heatmaps sharing one colour scale (Wu et al., 2020, Fig. 1).

    Parameters
    ----------
    matrices : mapping of (str, str) to array of shape (n_layers_row, n_layers_col)
        ``matrices[(row_model, col_model)]`` is e.g. the layer × layer similarity of the
        two models (rows: ``row_model``'s layers). Missing pairs leave an empty panel.
    row_order, col_order : sequence of str, optional
        Model order down and across (default: first appearance in ``matrices``).
    vmin, vmax : float or None, default=0.0, 1.0
        The shared colour scale (default 0–1, the range of CKA and correlations); ``None``
        takes the minimum / maximum over all panels.
    cmap : str, default="viridis"
    cbar_label : str, optional
        Label of the one shared colour bar.
    panel_size : float, default=2.2
        Inches per panel.
    suptitle : str, optional
    xlabel, ylabel : str, default="layer"
        Prefixes of the outer axis labels, followed by the model name.

    Returns
    -------
    Figure
    """
    if not matrices:
        raise ValueError("`matrices` is empty; pass {(row_model, col_model): matrix, ...}")
    for key in matrices:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(
                f"keys of `matrices` must be (row_model, col_model) pairs, got {key!r}"
            )
    rows = list(row_order) if row_order is not None else list(dict.fromkeys(k[0] for k in matrices))
    cols = list(col_order) if col_order is not None else list(dict.fromkeys(k[1] for k in matrices))
    panels = {key: _as_matrix(value, None, None)[0] for key, value in matrices.items()}
    if vmin is None:
        vmin = float(min(np.nanmin(values) for values in panels.values()))
    if vmax is None:
        vmax = float(max(np.nanmax(values) for values in panels.values()))
    fig, axes = plt.subplots(
        len(rows),
        len(cols),
        figsize=(panel_size * len(cols) + 1.2, panel_size * len(rows) + 0.6),
        squeeze=False,
        constrained_layout=True,
    )
    for i, row_model in enumerate(rows):
        for j, col_model in enumerate(cols):
            ax = axes[i, j]
            values = panels.get((row_model, col_model))
            if values is None:
                ax.set_axis_off()
                continue
            ax.imshow(values, vmin=vmin, vmax=vmax, cmap=cmap, origin="lower", aspect="auto")
            ax.grid(False)
            ax.tick_params(labelsize=7)
            if i == len(rows) - 1:
                ax.set_xlabel(f"{xlabel}\n{col_model}", fontsize=8)
            if j == 0:
                ax.set_ylabel(f"{row_model}\n{ylabel}", fontsize=8)
    mappable = plt.cm.ScalarMappable(
        norm=plt.Normalize(vmin=vmin, vmax=vmax),
        cmap=cmap,
    )
    colorbar = fig.colorbar(mappable, ax=axes, shrink=0.8)
    if cbar_label:
        colorbar.set_label(cbar_label)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def bars(
    df: pd.DataFrame,
    x: str,
    y: str,
    hue: str | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    ylim: tuple[float, float] | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    rotate: bool | None = None,
    errorbar: Any = None,
) -> Axes:
    """Grouped bar chart of a tidy DataFrame (one row per bar, or per sample with errors).

    Parameters
    ----------
    df : DataFrame
        Tidy data with columns ``x``, ``y`` (and ``hue``).
    x, y : str
        Column names of the categories and the values.
    hue : str, optional
        Column that splits each category into coloured bars (with a legend).
    ax : Axes, optional
    title : str, optional
    ylim : (float, float), optional
    xlabel, ylabel : str, optional
        Axis labels (default: the column names).
    rotate : bool, optional
        Rotate the category labels (default: when any is longer than 6 characters).
    errorbar : optional
        Passed to :func:`seaborn.barplot` (``None``: no error bars; ``"sd"``, ``"ci"``).

    Returns
    -------
    Axes
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"`df` must be a pandas DataFrame, got {type(df).__name__}")
    missing = [column for column in (x, y, hue) if column is not None and column not in df]
    if missing:
        raise ValueError(f"columns {missing} are not in `df`; it has {list(df.columns)}")
    if ax is None:
        n_groups = df[x].nunique()
        _, ax = plt.subplots(figsize=(min(3.0 + 0.6 * n_groups, 14.0), 3.6))
    sns.barplot(data=df, x=x, y=y, hue=hue, ax=ax, errorbar=errorbar)
    ax.set_xlabel(xlabel if xlabel is not None else x)
    ax.set_ylabel(ylabel if ylabel is not None else y)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title)
    if rotate is None:
        rotate = any(len(str(value)) > 6 for value in df[x].unique())
    if rotate:
        ax.tick_params(axis="x", labelrotation=45)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    if hue is not None and ax.get_legend() is not None:
        ax.legend(title=hue, frameon=False, fontsize=8)
    return ax


def _layer_ticks(names: Sequence[str], max_per_model: int = 6) -> tuple[list[int], list[str]]:
    """Tick positions and labels: every k-th layer of each model (its first and last kept)."""
    positions, labels = [], []
    for _model, start, stop in model_spans(names):
        n = stop - start
        step = max(1, -(-n // max_per_model))
        keep = sorted({*range(0, n, step), n - 1})
        for k in keep:
            name = str(names[start + k])
            positions.append(start + k)
            labels.append(name.rpartition("/layer.")[2] if is_layer_block(name) else name)
    return positions, labels


def layer_heatmap(
    matrix: Any,
    names: Sequence[str],
    col_names: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    vmin: float | None = 0.0,
    vmax: float | None = 1.0,
    cmap: str = "viridis",
    cbar_label: str | None = None,
    xlabel: str = "target layer",
    ylabel: str = "source layer",
) -> Axes:
    """Layer × layer heatmap over all layers of all models, model boundaries marked.

    The layout of Wu et al. (2020), Fig. 1: each model's layers are consecutive (layer 0,
    the embeddings, first), white lines separate the models, ticks give layer numbers (every
    k-th, so at most six per model) and each model's name labels its block outside the axes.

    Parameters
    ----------
    matrix : ndarray, tensor or DataFrame of shape (n_rows, n_cols)
        ``matrix[i, j] = sim(names[i] → col_names[j])``.
    names : sequence of str
        Row blocks ``"{model}/layer.{i}"``, grouped by model.
    col_names : sequence of str, optional
        Column blocks (default: ``names``).
    ax : Axes, optional
    title : str, optional
    vmin, vmax : float or None, default=0.0, 1.0
        Colour scale (None: the data's range).
    cmap : str, default="viridis"
    cbar_label : str, optional
    xlabel, ylabel : str
        Axis titles (the models' names are written beside the layer ticks).

    Returns
    -------
    Axes
    """
    col_names = list(names) if col_names is None else list(col_names)
    values, _, _ = _as_matrix(matrix, list(names), col_names)
    if ax is None:
        side = min(4.5 + 0.09 * len(col_names), 11.0)
        _, ax = plt.subplots(figsize=(side + 1.6, min(4.5 + 0.09 * len(names), 11.0)))
    image = ax.imshow(values, vmin=vmin, vmax=vmax, cmap=cmap, interpolation="nearest")
    ax.grid(False)
    for axis, axis_names in (("y", list(names)), ("x", col_names)):
        spans = model_spans(axis_names)
        line = ax.axhline if axis == "y" else ax.axvline
        for _, start, _ in spans[1:]:
            line(start - 0.5, color="white", linewidth=1.2)
        positions, labels = _layer_ticks(axis_names)
        for model, start, stop in spans:
            centre = (start + stop - 1) / 2
            if axis == "y":
                ax.annotate(
                    model,
                    (0, centre),
                    xycoords=("axes fraction", "data"),
                    xytext=(-22, 0),
                    textcoords="offset points",
                    ha="right",
                    va="center",
                    fontsize=8,
                )
            else:
                ax.annotate(
                    model,
                    (centre, 0),
                    xycoords=("data", "axes fraction"),
                    xytext=(0, -22),
                    textcoords="offset points",
                    ha="right",
                    va="top",
                    rotation=35,
                    fontsize=8,
                )
        if axis == "y":
            ax.set_yticks(positions, labels, fontsize=7)
        else:
            # Vertical: a thinned model's "10 20 30" would run together in a narrow block.
            ax.set_xticks(positions, labels, fontsize=7, rotation=90)
    ax.set_xlabel(xlabel, labelpad=4)
    ax.xaxis.set_label_position("top")
    # Clear of the model names written left of the ticks (8 pt text, ~4.6 pt a character).
    longest = max(len(str(model)) for model, _, _ in model_spans(list(names)))
    ax.set_ylabel(ylabel, labelpad=14 + 4.6 * longest)
    colorbar = ax.figure.colorbar(image, ax=ax, shrink=0.85)
    if cbar_label:
        colorbar.set_label(cbar_label)
    if title:
        ax.set_title(title, pad=18)
    return ax


def panel_grid(n_panels: int, ncols: int = 1, panel_size: tuple[float, float] = (8.0, 6.5)):
    """A figure of ``n_panels`` axes, ``ncols`` across, sized to the book's text width.

    Wide rows of heatmaps shrink to unreadable tick labels in the book (a 3-panel row of
    21 inches renders at a third of its size); stack panels instead.

    Returns
    -------
    fig : Figure
    axes : list of Axes
        ``n_panels`` axes in reading order (unused grid cells are hidden).
    """
    if n_panels < 1:
        raise ValueError(f"`n_panels` must be >= 1, got {n_panels}")
    ncols = max(1, min(ncols, n_panels))
    nrows = -(-n_panels // ncols)
    fig, grid = plt.subplots(
        nrows,
        ncols,
        figsize=(panel_size[0] * ncols, panel_size[1] * nrows),
        squeeze=False,
        constrained_layout=True,
    )
    axes = list(grid.ravel())
    for ax in axes[n_panels:]:
        ax.set_axis_off()
    return fig, axes[:n_panels]


def human_count(n: float) -> str:
    """``110_000_000 -> "110 M"``, ``2_500 -> "2.5 k"``; NaN/None -> "—"."""
    if n is None or (isinstance(n, float) and np.isnan(n)):
        return "—"
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.3g}" if isinstance(n, float) else str(n)


def show_table(frame: pd.DataFrame, digits: int = 3, index: bool | None = None):
    """A table for the book: rounded, "—" for missing values, no stray 0..n-1 index.

    Parameters
    ----------
    frame : DataFrame
    digits : int
        Decimals of float columns.
    index : bool, optional
        Show the index (default: unless it is a plain ``RangeIndex``).

    Returns
    -------
    pandas.io.formats.style.Styler
    """
    if index is None:
        index = not isinstance(frame.index, pd.RangeIndex)
    styler = frame.style.format(precision=digits, na_rep="—", thousands=",")
    styler = styler.set_table_attributes('class="lmsim-table"')
    return styler if index else styler.hide(axis="index")
