"""Beyond the paper: the towers compared layer by layer (linear CKA)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch

from lmsim.blocks import block_name
from lmsim.twotower.config import IGNORE_INDEX
from lmsim.twotower.inputs import TowerData, labelled_batches
from lmsim.twotower.training import TrainedTwoTower


@torch.no_grad()
def tower_states(
    run: TrainedTwoTower,
    chunks: torch.Tensor,
    data: TowerData,
    primary: int = 0,
    batch_size: int = 32,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Every layer's states of both towers at the predicted positions, primary tower first.

    Returns
    -------
    dict of block name to ndarray of shape (n_positions, state_dim)
        ``"primary/layer.{i}"`` and ``"secondary/layer.{i}"``, ``i = 1..layers``
        (:func:`lmsim.blocks.block_name`); ``primary`` is :attr:`Preference.primary`.
    """
    if primary not in (0, 1):
        raise ValueError(f"`primary` must be 0 or 1, got {primary!r}")
    model = run.model
    device = model.embedding.device
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, list] = {}
    for inputs, labels in labelled_batches(model.config.tower, chunks, data, batch_size, gen):
        sel = (labels != IGNORE_INDEX).to(device)
        towers = model.states(inputs.to(device), all_layers=True)
        for role, which in (("primary", primary), ("secondary", 1 - primary)):
            for i, h in enumerate(towers[which], start=1):
                out.setdefault(block_name(role, i), []).append(h[sel].double().cpu().numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


def tower_cka(
    states_a: Mapping[str, np.ndarray], states_b: Mapping[str, np.ndarray] | None = None
) -> pd.DataFrame:
    """Linear CKA between towers per layer: within one run, or across two runs.

    Parameters
    ----------
    states_a : dict from :func:`tower_states`
    states_b : dict, optional
        A second run's states on the same chunks (same predicted positions).

    Returns
    -------
    DataFrame indexed by layer
        Within a run: ``primary vs secondary``. Across runs: ``primary vs primary``,
        ``secondary vs secondary``, ``primary vs secondary``, ``secondary vs primary``.
    """
    from lmsim.metrics import linear_cka

    layers = sorted({int(k.rsplit(".", 1)[1]) for k in states_a})
    rows = {}
    for i in layers:
        p, s = states_a[block_name("primary", i)], states_a[block_name("secondary", i)]
        if states_b is None:
            rows[i] = {"primary vs secondary": linear_cka(p, s)}
            continue
        p2 = states_b.get(block_name("primary", i))
        s2 = states_b.get(block_name("secondary", i))
        if p2 is None:
            continue
        rows[i] = {
            "primary vs primary": linear_cka(p, p2),
            "secondary vs secondary": linear_cka(s, s2),
            "primary vs secondary": linear_cka(p, s2),
            "secondary vs primary": linear_cka(s, p2),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("layer")
