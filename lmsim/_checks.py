"""The finite-value check of every public entry that takes activations.

Metrics (:mod:`lmsim.metrics`), moments, clustering and probes all refuse NaN and Inf:
a silent NaN poisons every statistic derived from it (a probe trained on NaN reports
chance accuracy with all-NaN weights). :func:`check_finite` is the one message.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["check_finite"]


def check_finite(x, name: str) -> None:
    """Raise ``ValueError`` when ``x`` holds NaN or Inf, naming ``name``, the count and
    the first position.

    Parameters
    ----------
    x : ndarray or Tensor
        Activations (any shape; integer and boolean arrays are always finite).
    name : str
        The argument's name as the caller's signature spells it, e.g. ``"X_train"``.
    """
    if isinstance(x, torch.Tensor):
        if not (x.is_floating_point() or x.is_complex()) or bool(torch.isfinite(x).all()):
            return
        bad = ~torch.isfinite(x)
        n_bad = int(bad.sum())
        first = tuple(int(i) for i in torch.nonzero(bad)[0].tolist())
    else:
        arr = np.asarray(x)
        if arr.dtype.kind not in "fc" or bool(np.isfinite(arr).all()):
            return
        bad = ~np.isfinite(arr)
        n_bad = int(bad.sum())
        first = tuple(int(i) for i in np.argwhere(bad)[0])
    where = f" (first at index {first[0] if len(first) == 1 else first})" if first else ""
    raise ValueError(
        f"`{name}` contains {n_bad} non-finite values (NaN or Inf){where}; drop or fix those "
        "rows (with float16 activations this is usually overflow: extract in bfloat16 or "
        "float32 instead)"
    )
