"""The penalty of a converged probe, chosen on dev: :func:`tune_penalty`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from lmsim.probe._train import train_probe


def tune_penalty(
    X_train,
    y_train,
    X_dev,
    y_dev,
    lambdas: Sequence[float],
    *,
    classes=None,
    **probe_kwargs,
) -> tuple[float, pd.DataFrame]:
    """The ``λ = λ1 = λ2`` of the grid with the best dev accuracy (L-BFGS probes).

    The grid is fitted from the largest λ to the smallest, each fit warm-started from the
    previous solution (the regularisation path: a small λ starts near its neighbour's
    optimum, so it needs few iterations). Ties go to the larger λ (the simpler probe).

    Parameters
    ----------
    X_train, y_train, X_dev, y_dev
        As :func:`lmsim.probe.train_probe`.
    lambdas : sequence of float
        The grid (each > 0).
    classes : array-like, optional
    **probe_kwargs
        :func:`lmsim.probe.train_probe` options; ``solver`` is ``"lbfgs"``.

    Returns
    -------
    best : float
    table : DataFrame
        One row per λ (descending): ``lambda``, ``train``, ``dev`` accuracy,
        ``converged`` (any stopping rule fired, the stalled objective included), ``stop``
        (which rule: ``"gradient"``, ``"objective"``, ``"max_iter"``), ``gradient`` (the
        pseudo-gradient's largest entry at the stop), ``iterations``, ``nonzero`` (share of
        non-zero weights).
    """
    lambdas = sorted({float(v) for v in lambdas}, reverse=True)
    if not lambdas or min(lambdas) <= 0:
        raise ValueError(f"`lambdas` must be positive values, got {lambdas!r}")
    probe_kwargs = {k: v for k, v in probe_kwargs.items() if k not in ("l1", "l2", "solver")}
    rows, init = [], None
    for lam in lambdas:
        r = train_probe(
            X_train, y_train, X_dev, y_dev, classes=classes, solver="lbfgs", l1=lam, l2=lam,
            init=init, **probe_kwargs,
        )  # fmt: skip
        init = (r.weights, r.bias)
        rows.append(
            dict(
                **{"lambda": lam},
                train=r.accuracy["train"],
                dev=r.accuracy["dev"],
                converged=r.converged,
                stop=r.stopped_by,
                gradient=r.gradient,
                iterations=r.n_epochs,
                nonzero=float(np.mean(r.weights != 0)),
            )
        )
    table = pd.DataFrame(rows)
    best = float(table["lambda"].iloc[int(np.argmax(table["dev"].to_numpy()))])
    return best, table
