"""Shared helpers of the similarity metrics: input checks, covariance blocks, eigenbases.

Every linear metric in :mod:`lmsim.metrics` is written once as a function of the
per-block statistics ``(n, mean, Xcᵀ Xc)`` and the cross co-moment ``Xcᵀ Yc``. The raw
path computes them by an exact float64 two-pass over the samples; the moment path slices
them out of a :class:`~lmsim.moments.Moments`. Both then run the same code, so their
results agree to rounding.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from lmsim.moments import Moments

__all__ = [
    "BlockStats",
    "as_float64",
    "check_pair",
    "constant_mask",
    "eigh_desc",
    "numerical_rank",
    "pair_stats",
    "raw_stats",
]

# Relative tolerance under which a neuron's standard deviation counts as zero: far above
# the rounding noise a constant column picks up in float64 (about 1e-16 of its mean).
CONSTANT_RTOL = 1e-10


@dataclass
class BlockStats:
    """Sufficient statistics of one block of activations.

    Attributes
    ----------
    name : str
        How error messages refer to the block (`"X"`, `"Y"` or a moments block name).
    n : int
        Number of samples.
    mean : Tensor of shape (d,)
        Per-neuron mean.
    comoment : Tensor of shape (d, d)
        Centred co-moment ``Xcᵀ Xc`` (not divided by ``n``).
    """

    name: str
    n: int
    mean: torch.Tensor
    comoment: torch.Tensor

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    @property
    def device(self) -> torch.device:
        return self.mean.device


# Largest and smallest magnitudes whose squares, summed over any realistic number of
# samples, stay inside float64's range (about 1e-308 .. 1e308).
_MAX_ABS, _MIN_ABS = 1e150, 1e-150


def as_float64(x, name: str = "X") -> torch.Tensor:
    """Return ``x`` as a float64 tensor: numpy → CPU, torch → on its own device.

    Real numbers only: complex values (whose imaginary part would be dropped), strings,
    objects and other non-numeric dtypes raise ``TypeError``; integers and booleans are
    converted exactly.
    """
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            raise TypeError(
                f"`{name}` is a complex tensor ({x.dtype}); the metrics take real "
                "activations: pass x.real or x.abs() explicitly"
            )
        return x.detach().to(dtype=torch.float64)
    if isinstance(x, np.ndarray | list | tuple):
        arr = np.asarray(x)
        if np.iscomplexobj(arr):
            raise TypeError(
                f"`{name}` is complex ({arr.dtype}); the metrics take real activations: pass "
                "x.real or np.abs(x) explicitly"
            )
        if arr.dtype.kind not in "biuf":
            raise TypeError(
                f"`{name}` must hold real numbers, got dtype {arr.dtype} (kind "
                f"{arr.dtype.kind!r}); convert it with np.asarray(x, dtype=float)"
            )
        return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64))
    raise TypeError(
        f"`{name}` must be a numpy array or torch tensor of shape (n_samples, n_features), "
        f"got {type(x).__name__}"
    )


def _check_matrix(x: torch.Tensor, name: str) -> None:
    if x.ndim != 2:
        raise ValueError(
            f"`{name}` must be 2-D (n_samples, n_features), got shape {tuple(x.shape)}; "
            "reshape token activations to rows first"
        )
    if x.shape[1] == 0:
        raise ValueError(f"`{name}` has no features (shape {tuple(x.shape)})")
    if not torch.isfinite(x).all():
        n_bad = int((~torch.isfinite(x)).sum())
        raise ValueError(
            f"`{name}` contains {n_bad} non-finite values (NaN or Inf); with fp16 activations "
            "this is usually overflow: extract in bfloat16 or float32 instead"
        )
    scale = float(x.abs().max()) if x.numel() else 0.0
    if scale > _MAX_ABS:
        raise ValueError(
            f"`{name}` has values up to {scale:.3g} in magnitude: their products overflow "
            f"float64 (the statistics would be inf); divide `{name}` by a constant first "
            "(the similarity metrics are scale invariant)"
        )
    if 0 < scale < _MIN_ABS:
        raise ValueError(
            f"`{name}` has values of at most {scale:.3g} in magnitude: their products underflow "
            f"float64 to 0 (every neuron would look constant); multiply `{name}` by a "
            "constant first (the similarity metrics are scale invariant)"
        )


def check_pair(X, Y, min_samples: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate two activation matrices and return them as float64 tensors.

    Parameters
    ----------
    X : array or Tensor of shape (n_samples, d_x)
    Y : array or Tensor of shape (n_samples, d_y)
    min_samples : int, default=2
        Smallest number of rows the metric is defined for.

    Returns
    -------
    X, Y : Tensor (float64)
        On ``X``'s device (``Y`` is moved there).
    """
    x = as_float64(X, "X")
    y = as_float64(Y, "Y").to(x.device)
    _check_matrix(x, "X")
    _check_matrix(y, "Y")
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"`X` and `Y` must have the same n_samples (rows), got {x.shape[0]} and {y.shape[0]}; "
            "pass activations of the same tokens in the same order"
        )
    if x.shape[0] < min_samples:
        raise ValueError(
            f"need at least {min_samples} samples (rows) for this metric, got {x.shape[0]}; "
            "pass more tokens"
        )
    return x, y


def raw_stats(x: torch.Tensor, name: str) -> tuple[BlockStats, torch.Tensor]:
    """Exact two-pass statistics of a validated float64 matrix; also returns ``Xc``."""
    mean = x.mean(dim=0)
    xc = x - mean
    return BlockStats(name, int(x.shape[0]), mean, xc.T @ xc), xc


def pair_stats(
    X, Y, b=None, *, fn: str, min_samples: int = 2
) -> tuple[BlockStats, BlockStats, torch.Tensor]:
    """Statistics of a pair of blocks, from raw activations or from moments.

    ``fn(X, Y)`` with arrays, or ``fn(mom, a, b)`` with a :class:`Moments` and two block
    names: dispatch is on the type of the first argument.

    Returns
    -------
    sx, sy : BlockStats
    cxy : Tensor of shape (d_x, d_y)
        Cross co-moment ``Xcᵀ Yc``.
    """
    if isinstance(X, Moments):
        mom, a = X, Y
        if not isinstance(a, str) or not isinstance(b, str):
            raise TypeError(
                f"`{fn}(mom, a, b)` needs two block names, got a={a!r}, b={b!r}; "
                f"available blocks: {mom.names}"
            )
        mom._check_names([a, b])
        if mom.n < min_samples:
            raise ValueError(
                f"`{fn}` needs at least {min_samples} samples, the moments hold {mom.n}; "
                "accumulate more tokens"
            )
        sx = BlockStats(a, mom.n, mom.mean(a), mom.comoment(a))
        sy = BlockStats(b, mom.n, mom.mean(b), mom.comoment(b))
        return sx, sy, mom.comoment(a, b)
    if isinstance(Y, Moments):
        raise TypeError(f"pass the moments first: `{fn}(mom, a, b)`")
    if b is not None:
        raise TypeError(
            f"`{fn}(X, Y)` got a third positional argument {b!r}; block names are only for "
            f"`{fn}(mom, a, b)`, and options (threshold, paper_compat) are keyword-only"
        )
    x, y = check_pair(X, Y, min_samples=min_samples)
    sx, xc = raw_stats(x, "X")
    sy, yc = raw_stats(y, "Y")
    return sx, sy, xc.T @ yc


def constant_mask(stats: BlockStats) -> torch.Tensor:
    """Boolean mask ``(d,)`` of neurons whose variance is zero up to rounding.

    A neuron is constant when its standard deviation is below ``CONSTANT_RTOL`` times
    ``|mean| + max_std`` of the block (rounding of a constant column with a large
    offset leaves a tiny non-zero variance that must not count as signal).
    """
    var = stats.comoment.diagonal().clamp_min(0) / stats.n
    std = var.sqrt()
    scale = stats.mean.abs() + std.max()
    return (std == 0) | (std <= CONSTANT_RTOL * scale)


def drop_constant(stats: BlockStats, fn: str) -> torch.Tensor:
    """Indices of non-constant neurons; warns when some are dropped, raises if all are."""
    mask = constant_mask(stats)
    n_const = int(mask.sum())
    if n_const == stats.dim:
        raise ValueError(
            f"`{fn}`: all {stats.dim} neurons of block {stats.name!r} are constant over the "
            f"{stats.n} samples (zero variance); its correlations are undefined — check the "
            "extraction (e.g. padding only) or pass more varied samples"
        )
    if n_const:
        warnings.warn(
            f"`{fn}`: dropping {n_const} of {stats.dim} constant (zero-variance) neurons of "
            f"block {stats.name!r}; their correlation with anything is undefined",
            RuntimeWarning,
            stacklevel=3,
        )
    return torch.nonzero(~mask).flatten()


def eigh_desc(c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigendecomposition of a symmetric PSD matrix, eigenvalues descending and clamped ≥ 0.

    Returns
    -------
    evals : Tensor of shape (d,)
    evecs : Tensor of shape (d, d)
        Columns are the eigenvectors (right singular vectors of the data matrix).
    """
    c = 0.5 * (c + c.T)
    evals, evecs = torch.linalg.eigh(c)
    return evals.flip(0).clamp_min(0), evecs.flip(1)


def numerical_rank(evals: torch.Tensor) -> int:
    """Number of eigenvalues (squared singular values) above rounding noise.

    Eigenvalues of ``Xcᵀ Xc`` carry absolute errors of about ``eps · λ_max · d``; anything
    below a hundred times that is a null direction (rank deficiency, ``d > n``).
    """
    if evals.numel() == 0 or float(evals[0]) <= 0:
        return 0
    tol = float(evals[0]) * evals.numel() * torch.finfo(torch.float64).eps * 100
    return int((evals > tol).sum())


def check_nonzero_block(stats: BlockStats, fn: str) -> None:
    """Raise if every neuron of a block is constant (the metric would be 0/0)."""
    if bool(constant_mask(stats).all()):
        raise ValueError(
            f"`{fn}`: block {stats.name!r} has zero variance (all {stats.dim} neurons constant "
            f"over {stats.n} samples), so the similarity is 0/0; check the extraction or pass "
            "more varied samples"
        )
