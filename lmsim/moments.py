"""Streaming float64 first and second moments of named blocks of features.

Every linear similarity measure in lmsim (linear CKA, SVCCA, PWCCA, neuronsim, mixedsim,
the LMD ridge fits, RegMean's Gram matrices, neuron correlations) is a function of the
means and (cross-)covariances of activations. :class:`Moments` accumulates them in one
streaming pass, chunk by chunk, on the device the chunks live on, so memory grows with
the total width squared and never with the number of samples.

Numerical stability: each chunk is centred on its own mean and merged with the running
state by the pairwise update of Chan, Golub & LeVeque (1979), so large common offsets
(e.g. a bias of 1e6 on every neuron) do not cancel catastrophically as they would with
raw sums of squares.

Cost: a chunk of ``k`` samples is one symmetric rank-``(k + 1)`` update of the co-moment
in place (Eq. M2 below): ``k`` centred rows plus one row carrying the Chan correction. On
CPU it is BLAS ``dsyrk`` on one triangle (``k D²`` flops, half a GEMM; the other triangle
is mirrored lazily, once, when a statistic is read); on a GPU it is ``addmm_`` into the
existing buffer (cuBLAS exposes no in-place ``syrk`` to torch). Both are float64: the
state is a sum over up to ~10⁹ tokens and float32 would lose the small co-moments of
nearly collinear neurons. No full-size temporary is allocated per chunk or per merge.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from scipy.linalg.blas import dsyrk

from lmsim._threads import thread_policy

__all__ = ["Moments"]


def _as_tensor(x) -> torch.Tensor:
    """A tensor viewing ``x`` where possible (any dtype, device and strides)."""
    if isinstance(x, torch.Tensor):
        return x.detach()
    if isinstance(x, np.ndarray):
        if any(stride < 0 for stride in x.strides):
            x = np.ascontiguousarray(x)
        return torch.from_numpy(x)
    return torch.as_tensor(x)


class Moments:
    """Float64 count, mean and co-moment matrix of the concatenation of named blocks.

    The state is ``n`` (samples seen), ``mean`` of shape ``(D,)`` and the centred
    co-moment ``M = sum_i (x_i - mean)(x_i - mean)^T`` of shape ``(D, D)``, where
    ``D = sum(dims.values())`` and ``x_i`` is the concatenation of one sample's blocks
    in the order of ``dims``. Covariances between any two blocks are slices of ``M``.

    A chunk ``X`` of ``k`` rows with mean ``m_b`` and centred rows ``X_c`` merges into a
    state ``(n_a, m_a, M_a)`` as (Chan, Golub & LeVeque 1979)::

        n = n_a + k,   δ = m_b - m_a,   m = m_a + δ k / n                      (M1)
        M = M_a + [X_c; c δᵀ]ᵀ [X_c; c δᵀ],   c = sqrt(n_a k / n)              (M2)

    i.e. one symmetric rank-``(k + 1)`` update of ``M`` in place.

    Parameters
    ----------
    dims : mapping of str to int
        Block name to width, e.g. ``{"minilm-l6/layer.0": 384, ...}``. The order fixes
        the layout of the joint matrix.
    device : str or torch.device, default="cpu"
        Where the state lives and where chunks are reduced (a GPU keeps activations
        there: they are never copied to the host just to be summed).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> mom = Moments({"a": 3, "b": 2})
    >>> for _ in range(4):
    ...     mom.update({"a": rng.normal(size=(50, 3)), "b": rng.normal(size=(50, 2))})
    >>> mom.n, tuple(mom.cov("a", "b").shape)
    (200, (3, 2))
    """

    def __init__(self, dims: Mapping[str, int], device: str | torch.device = "cpu"):
        if not dims:
            raise ValueError("`dims` must name at least one block, got an empty mapping")
        for name, width in dims.items():
            is_int = isinstance(width, (int, np.integer)) and not isinstance(width, bool)
            if not isinstance(name, str) or not is_int or width <= 0:
                raise ValueError(
                    f"block {name!r} must have a positive integer width, got {width!r}"
                )
        self.dims: dict[str, int] = {name: int(width) for name, width in dims.items()}
        self.device = torch.device(device)
        self._offsets: dict[str, slice] = {}
        start = 0
        for name, width in self.dims.items():
            self._offsets[name] = slice(start, start + width)
            start += width
        self.n = 0
        # Ordinary tensors even when built inside `torch.inference_mode()` (extraction hooks
        # create them there): the in-place updates and merges may run outside it later.
        with torch.inference_mode(False):
            self._mean = torch.zeros(start, dtype=torch.float64, device=self.device)
            self._comoment = torch.zeros(start, start, dtype=torch.float64, device=self.device)

    # The co-moment buffer. On CPU, updates write its upper triangle only (dsyrk); the
    # lower one is mirrored on the first read after an update (`_lower_stale`).
    @property
    def _comoment(self) -> torch.Tensor:
        if self._lower_stale:
            with torch.inference_mode(self._cm.is_inference()):
                _mirror_upper(self._cm)
            self._lower_stale = False
        return self._cm

    @_comoment.setter
    def _comoment(self, value: torch.Tensor) -> None:
        self._cm = value
        self._lower_stale = False

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(
        cls, acts: Mapping[str, np.ndarray | torch.Tensor], device: str | torch.device = "cpu"
    ) -> Moments:
        """Moments of raw activations ``{name: (n_samples, d_name)}`` in one call."""
        acts = {name: _as_array(name, x) for name, x in acts.items()}
        mom = cls({name: _width(name, x) for name, x in acts.items()}, device=device)
        mom.update(acts)
        return mom

    @property
    def names(self) -> list[str]:
        """Block names in layout order."""
        return list(self.dims)

    @property
    def total_dim(self) -> int:
        """Width ``D`` of the joint feature vector."""
        return int(self._mean.shape[0])

    def __repr__(self) -> str:
        blocks = ", ".join(f"{k}: {v}" for k, v in list(self.dims.items())[:4])
        more = f", ... ({len(self.dims)} blocks)" if len(self.dims) > 4 else ""
        return f"Moments(n={self.n}, {{{blocks}{more}}}, device={self.device})"

    # ------------------------------------------------------------------ accumulation
    @thread_policy
    def update(self, acts: Mapping[str, np.ndarray | torch.Tensor]) -> Moments:
        """Add a chunk of samples, one array ``(n_chunk, d_name)`` per block.

        Every block must be present with the same number of rows. Non-finite values
        raise (a silent NaN would poison every statistic derived later).
        """
        missing = [name for name in self.dims if name not in acts]
        if missing:
            raise KeyError(f"chunk is missing blocks {missing}; expected all of {self.names}")
        extra = [name for name in acts if name not in self.dims]
        if extra:
            raise KeyError(f"chunk has unknown blocks {extra}; this accumulator holds {self.names}")
        acts = {name: _as_array(name, acts[name]) for name in self.dims}
        rows = {name: _rows(name, acts[name]) for name in self.dims}
        if len(set(rows.values())) != 1:
            raise ValueError(f"all blocks of a chunk must have the same n_samples, got {rows}")
        parts = {}
        for name, width in self.dims.items():
            x = _as_tensor(acts[name])
            if x.ndim != 2 or x.shape[1] != width:
                raise ValueError(
                    f"block {name!r} must have shape (n_samples, {width}), got {tuple(x.shape)}"
                )
            parts[name] = x
        n_b = next(iter(rows.values()))
        if n_b == 0:
            return self
        # Row n_b carries the Chan correction (Eq. M2), so one rank-(k+1) update does all.
        buf = torch.empty(n_b + 1, self.total_dim, dtype=torch.float64, device=self.device)
        chunk = buf[:n_b]
        for name, x in parts.items():  # one pass per block: cast, move and place at once
            chunk[:, self._offsets[name]].copy_(x)
        del parts
        mean_b = chunk.mean(dim=0)
        # A NaN or Inf anywhere makes its column mean non-finite: one pass less than an
        # element-wise check, which runs only to confirm (a finite column can overflow).
        if not torch.isfinite(mean_b).all() and not torch.isfinite(chunk).all():
            bad = [n for n, sl in self._offsets.items() if not torch.isfinite(chunk[:, sl]).all()]
            raise ValueError(
                f"non-finite activations (NaN or Inf) in blocks {bad}; with fp16 this is usually "
                "overflow: extract in bfloat16 or float32 instead"
            )
        # Squares of centred values beyond ~1e154 overflow float64: the co-moment would turn
        # inf and every neuron look constant or NaN downstream. Name it instead.
        lo, hi = torch.aminmax(chunk)  # no |chunk| temporary
        scale = max(-float(lo), float(hi))
        if scale > _MAX_ABS:
            bad = [n for n, sl in self._offsets.items() if chunk[:, sl].abs().max() > _MAX_ABS]
            raise ValueError(
                f"activations of blocks {bad} reach {scale:.3g} in magnitude: their products "
                "overflow float64 (the co-moment would be inf); divide them by a constant "
                "first (the similarity metrics are scale invariant)"
            )
        chunk.sub_(mean_b)
        n_a = self.n
        n = n_a + n_b
        torch.sub(mean_b, self._mean, out=buf[n_b]).mul_((n_a * n_b / n) ** 0.5)
        self._mean.add_(mean_b - self._mean, alpha=n_b / n)
        self._syrk_(buf)
        self.n = n
        return self

    def _syrk_(self, rows: torch.Tensor) -> None:
        """``M += rowsᵀ rows`` in place, ``rows`` of shape ``(k, D)`` (Eq. M2)."""
        if self.device.type == "cpu":
            # The C-ordered buffer read in Fortran order is Mᵀ: its "lower" triangle is our upper.
            c = self._cm.numpy()
            out = dsyrk(1.0, rows.numpy().T, beta=1.0, c=c.T, trans=0, lower=1, overwrite_c=1)
            if not np.shares_memory(out, c):  # never expected: BLAS copied the buffer
                c[...] = out.T
            self._lower_stale = True
        else:
            self._cm.addmm_(rows.T, rows)

    def _merge_state(self, n_b: int, mean_b: torch.Tensor, comoment_b: torch.Tensor) -> None:
        """Merge another state in place (Eq. M1-M2 with ``X_cᵀ X_c`` given as ``comoment_b``)."""
        n_a = self.n
        n = n_a + n_b
        delta = mean_b - self._mean
        comoment = self._comoment
        comoment.add_(comoment_b)
        if n_a:
            comoment.addr_(delta, delta, alpha=n_a * n_b / n)
        self._mean.add_(delta, alpha=n_b / n)
        self.n = n

    def merge(self, other: Moments) -> Moments:
        """Return the moments of the union of both sample sets (neither is modified).

        Equal to accumulating the concatenated data: the hook for sharding extraction
        across devices or machines (e.g. ``torch.distributed`` all-gather of states).
        """
        return self.copy().merge_(other)

    __add__ = merge

    def merge_(self, other: Moments) -> Moments:
        """Merge ``other`` into this accumulator in place (Eq. M1-M2) and return it.

        No ``D x D`` temporary is allocated (``other`` is read where it lives when it is on
        this device), so a running merge of many parts holds this state and one part.
        """
        if not isinstance(other, Moments):
            raise TypeError(f"can only merge Moments, got {type(other).__name__}")
        if other.dims != self.dims:
            raise ValueError(
                "cannot merge moments of different blocks: "
                f"{self.names} (widths {list(self.dims.values())}) vs "
                f"{other.names} (widths {list(other.dims.values())})"
            )
        if other.n:
            self._merge_state(other.n, other._mean.to(self.device), other._comoment.to(self.device))
        return self

    def remove(self, part: Moments) -> Moments:
        """Moments of this sample set without the samples of ``part`` (the inverse of merge).

        ``part`` must hold a subset of the samples accumulated here (e.g. the sentence-initial
        words, computed again on their own). Solving Eq. M1-M2 for the rest ``r = n - k``::

            m_r = (n m - k m_b) / r,   M_r = M - M_b - (r k / n) (m_b - m_r)(m_b - m_r)ᵀ

        Cancellation costs precision where ``part`` carries most of a feature's variance:
        float64 leaves about ``1e-16 x M_b / M_r`` relative error, and rows of ``part`` that
        differ from the ones accumulated (another batch, other rounding) leave their
        difference in ``M_r``.

        Returns
        -------
        Moments
            A new accumulator of ``self.n - part.n`` samples (neither input is modified).
        """
        if not isinstance(part, Moments):
            raise TypeError(f"can only remove Moments, got {type(part).__name__}")
        if part.dims != self.dims:
            raise ValueError(
                f"cannot remove moments of blocks {part.names} from moments of {self.names}"
            )
        if not 0 <= part.n < self.n:
            raise ValueError(
                f"`part` must hold fewer samples than these moments, got {part.n} of {self.n}"
            )
        n, k = self.n, part.n
        r = n - k
        mean_b = part._mean.to(self.device)
        mean_r = (self._mean * n - mean_b * k) / r
        delta = mean_b - mean_r
        comoment = self._comoment - part._comoment.to(self.device)
        comoment.addr_(delta, delta, alpha=-r * k / n)
        return self._from_state(self.dims, r, mean_r, comoment, self.device)

    @classmethod
    def merge_all(cls, parts: Iterable[Moments]) -> Moments:
        """Merge an iterable of accumulators with identical blocks, in their order.

        The first part is copied and the others merged into the copy one by one (read
        lazily from ``parts``, so a generator of parts need not hold them all).
        """
        parts = iter(parts)
        first = next(parts, None)
        if first is None:
            raise ValueError("`parts` is empty: nothing to merge")
        out = first.copy()
        for part in parts:
            out.merge_(part)
        return out

    @classmethod
    def merge_all_ranks(
        cls,
        parts: Mapping[int, Moments],
        n_parts: int,
        *,
        group=None,
        return_parts: bool = False,
        device: str | torch.device | None = None,
    ) -> Moments | tuple[Moments, list[Moments]]:
        """Merge parts spread over the ranks of a ``torch.distributed`` group, in part order.

        Each rank passes the parts it holds, keyed by their global index; every index in
        ``0 .. n_parts - 1`` must be held by exactly one rank. The owner of part ``k``
        broadcasts its count, mean and co-moment (float64) in turn, ``k = 0, 1, ...``, and
        every rank applies the same Chan merge (Eq. M1-M2) in that order, so the result is
        the same on every rank, bit for bit, and equal bit for bit to
        :meth:`merge_all` of the parts in index order on one process. An all-reduce of raw
        float64 sums would be neither: its summation order depends on the backend and the
        world size, and raw sums of squares cancel catastrophically under large offsets.
        At most one received part is held at a time unless ``return_parts``.

        Parameters
        ----------
        parts : mapping of int to Moments
            This rank's parts (possibly none), with identical blocks on every rank.
        n_parts : int
            Number of parts over all ranks.
        group : torch.distributed.ProcessGroup, optional
            Default: the default process group (initialised, as by ``torchrun``).
        return_parts : bool, default=False
            Also return every part (received ones included), in index order.
        device : str or torch.device, optional
            Where received parts and the result live. Default: the device of this rank's
            parts; for a rank without parts the CPU (gloo) or the current CUDA device
            (NCCL).

        Returns
        -------
        merged : Moments
            The same on every rank.
        parts : list of Moments
            Only with ``return_parts=True``.
        """
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                "Moments.merge_all_ranks needs an initialised torch.distributed process group; "
                "launch with torchrun and call torch.distributed.init_process_group() first"
            )
        mine = {int(k): part for k, part in parts.items()}
        if device is None:
            device = next(iter(mine.values())).device if mine else torch.device("cpu")
            if not mine and dist.get_backend(group) == "nccl":
                device = torch.device("cuda", torch.cuda.current_device())
        device = torch.device(device)
        # Object collectives run on the current CUDA device under NCCL: make it ours.
        scope = torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()
        with scope:
            return cls._merge_ranks(mine, n_parts, group, return_parts, device)

    @classmethod
    def _merge_ranks(cls, mine, n_parts, group, return_parts, device):
        """:meth:`merge_all_ranks` once its arguments are checked and ``device`` is current."""
        import torch.distributed as dist

        local = {k: (part.n, list(part.dims.items())) for k, part in mine.items()}
        gathered: list = [None] * dist.get_world_size(group)
        dist.all_gather_object(gathered, local, group=group)
        owner: dict[int, int] = {}
        for group_rank, held in enumerate(gathered):
            for k in held:
                if k in owner:
                    raise ValueError(f"part {k} is held by ranks {owner[k]} and {group_rank}")
                owner[k] = group_rank
        if sorted(owner) != list(range(n_parts)):
            raise ValueError(
                f"parts held over all ranks are {sorted(owner)}, expected 0..{n_parts - 1}"
            )
        layouts = {repr(entry[1]) for held in gathered for entry in held.values()}
        if len(layouts) != 1:
            raise ValueError(f"ranks hold parts with different blocks: {sorted(layouts)}")
        dims = dict(gathered[owner[0]][0][1])
        width = sum(int(w) for w in dims.values())
        merged: Moments | None = None
        out_parts: list[Moments] = []
        for k in range(n_parts):
            src = owner[k] if group is None else dist.get_global_rank(group, owner[k])
            if k in mine:
                part = mine[k] if mine[k].device == device else mine[k].to(device)
                for tensor in (part._mean, part._comoment):
                    dist.broadcast(tensor.contiguous(), src=src, group=group)
            else:
                mean = torch.empty(width, dtype=torch.float64, device=device)
                comoment = torch.empty(width, width, dtype=torch.float64, device=device)
                for tensor in (mean, comoment):
                    dist.broadcast(tensor, src=src, group=group)
                part = cls._from_state(dims, int(gathered[owner[k]][k][0]), mean, comoment)
            if return_parts:
                out_parts.append(part)
            if merged is None:  # as merge_all: the first part copied, the others merged
                merged = part.copy()
            elif part.n:
                merged._merge_state(part.n, part._mean, part._comoment)
        return (merged, out_parts) if return_parts else merged

    @classmethod
    def _from_state(
        cls,
        dims: Mapping[str, int],
        n: int,
        mean: torch.Tensor,
        comoment: torch.Tensor,
        device: str | torch.device | None = None,
    ) -> Moments:
        """Moments holding the given float64 state (no zero buffers allocated first).

        ``device`` (default: the tensors') only names it, as ``Moments(dims, device)`` would.
        """
        out = cls(dims, device="meta")
        out.device = mean.device if device is None else torch.device(device)
        out.n = int(n)
        out._mean, out._comoment = mean, comoment
        return out

    def copy(self) -> Moments:
        return self._from_state(
            self.dims, self.n, self._mean.clone(), self._comoment.clone(), self.device
        )

    def to(self, device: str | torch.device) -> Moments:
        """Return a copy on another device."""
        device = torch.device(device)
        return self._from_state(
            self.dims, self.n, self._mean.to(device), self._comoment.to(device), device
        )

    def subset(self, names: Sequence[str]) -> Moments:
        """Moments of a subset of blocks, in the given order."""
        self._check_names(names)
        out = Moments({name: self.dims[name] for name in names}, device=self.device)
        index = torch.cat(
            [torch.arange(self._offsets[n].start, self._offsets[n].stop) for n in names]
        ).to(self.device)
        out.n = self.n
        out._mean = self._mean[index].clone()
        out._comoment = self._comoment[index][:, index].clone()
        return out

    def rename(self, mapping: Mapping[str, str]) -> Moments:
        """Return a copy whose blocks are renamed by ``mapping`` (others kept)."""
        out = Moments({mapping.get(k, k): v for k, v in self.dims.items()}, device=self.device)
        out.n, out._mean, out._comoment = self.n, self._mean.clone(), self._comoment.clone()
        return out

    # ------------------------------------------------------------------ statistics
    def _check_names(self, names: Iterable[str]) -> None:
        unknown = [name for name in names if name not in self.dims]
        if unknown:
            raise KeyError(f"unknown blocks {unknown}; available: {self.names}")

    def _index(self, names: str | Sequence[str]) -> slice | torch.Tensor:
        if isinstance(names, str):
            self._check_names([names])
            return self._offsets[names]
        self._check_names(names)
        return torch.cat(
            [torch.arange(self._offsets[n].start, self._offsets[n].stop) for n in names]
        ).to(self.device)

    def mean(self, names: str | Sequence[str]) -> torch.Tensor:
        """Mean of one block, or of several concatenated, shape ``(d,)``."""
        self._require(1)
        return self._mean[self._index(names)]

    def comoment(
        self, a: str | Sequence[str], b: str | Sequence[str] | None = None
    ) -> torch.Tensor:
        """Centred co-moment ``Xcᵀ Yc`` of blocks ``a`` and ``b``, shape ``(d_a, d_b)``."""
        ia = self._index(a)
        ib = ia if b is None else self._index(b)
        return self._comoment[ia][:, ib]

    def cov(
        self, a: str | Sequence[str], b: str | Sequence[str] | None = None, ddof: int = 1
    ) -> torch.Tensor:
        """Covariance ``Xcᵀ Yc / (n - ddof)`` of blocks ``a`` and ``b``, shape ``(d_a, d_b)``.

        ``a`` and ``b`` may each be one name or a list of names (concatenated).
        """
        self._require(ddof + 1)
        return self.comoment(a, b) / (self.n - ddof)

    def gram(self, a: str | Sequence[str], b: str | Sequence[str] | None = None) -> torch.Tensor:
        """Uncentred Gram matrix ``Xᵀ Y = Xcᵀ Yc + n mean_x mean_yᵀ``, shape ``(d_a, d_b)``."""
        self._require(1)
        b_ = a if b is None else b
        return self.comoment(a, b_) + self.n * torch.outer(self.mean(a), self.mean(b_))

    def var(self, name: str | Sequence[str], ddof: int = 1) -> torch.Tensor:
        """Per-feature variance, shape ``(d,)``."""
        self._require(ddof + 1)
        index = self._index(name)
        return self._comoment.diagonal()[index] / (self.n - ddof)

    def _require(self, n_min: int) -> None:
        if self.n < n_min:
            raise ValueError(
                f"need at least {n_min} samples for this statistic, have {self.n}; "
                "accumulate more data (increase the sample count)"
            )

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        """Save to a safetensors file (block layout and count in its metadata)."""
        import json

        from safetensors.torch import save_file

        meta = {"n": str(self.n), "dims": json.dumps(list(self.dims.items()))}
        save_file(
            {"mean": self._mean.cpu().contiguous(), "comoment": self._comoment.cpu().contiguous()},
            str(path),
            metadata=meta,
        )

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> Moments:
        """Load moments saved by :meth:`save`, checking that the file is whole.

        Raises
        ------
        FileNotFoundError
            ``path`` does not exist.
        ValueError
            The file is not a readable safetensors file (truncated, corrupt), or its
            metadata disagree with its tensors (block widths summing to another length
            than ``mean``, a co-moment that is not ``D x D``, a negative or non-integer
            count, non-finite values); the message names the file.
        """
        import json

        from safetensors import safe_open

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no moments file at {path}")
        try:
            with safe_open(str(path), framework="pt") as handle:
                meta = handle.metadata() or {}
                keys = set(handle.keys())
                if not {"mean", "comoment"} <= keys:
                    raise ValueError(f"tensors {sorted(keys)} lack 'mean' and 'comoment'")
                mean = handle.get_tensor("mean")
                comoment = handle.get_tensor("comoment")
        except Exception as err:  # noqa: BLE001 - safetensors raises its own error types
            raise ValueError(
                f"{path} is not a readable moments file ({type(err).__name__}: "
                f"{str(err)[:200]}); delete it or save it again with Moments.save"
            ) from None
        try:
            dims = dict(json.loads(meta["dims"]))
            n = int(meta["n"])
            cls(dims, device="meta")  # the block layout itself is valid
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(
                f"{path}: metadata 'dims'/'n' missing or malformed ({err}); "
                "save it again with Moments.save"
            ) from None
        total = sum(int(width) for width in dims.values())
        problems = []
        if mean.ndim != 1 or mean.shape[0] != total:
            problems.append(
                f"block widths {list(dims.values())} sum to {total} but 'mean' has shape "
                f"{tuple(mean.shape)}"
            )
        if tuple(comoment.shape) != (total, total):
            problems.append(f"'comoment' has shape {tuple(comoment.shape)}, not ({total}, {total})")
        if n < 0:
            problems.append(f"sample count n={n} is negative")
        if not problems and not (torch.isfinite(mean).all() and torch.isfinite(comoment).all()):
            problems.append("'mean' or 'comoment' holds non-finite values")
        if problems:
            raise ValueError(
                f"{path}: metadata and tensors disagree: {'; '.join(problems)}; the file was "
                "edited or written by something else: recompute it"
            )
        device = torch.device(device)
        return cls._from_state(
            dims, n, mean.to(device, torch.float64), comoment.to(device, torch.float64), device
        )


def _mirror_upper(mat: torch.Tensor, block: int = 512) -> None:
    """Copy the upper triangle of a square matrix onto its lower one, in place.

    Goes through row panels so that every temporary is at most ``block × D``.
    """
    size = mat.shape[0]
    for start in range(0, size, block):
        stop = min(start + block, size)
        tile = mat[start:stop, start:stop]
        tile.copy_(tile.triu() + tile.triu(1).T)
        mat[stop:, start:stop].copy_(mat[start:stop, stop:].T)


# As in lmsim.metrics: magnitudes whose squares, summed over any realistic number of samples,
# stay inside float64's range.
_MAX_ABS = 1e150


def _as_array(name: str, x):
    """``x`` itself when it is an array or tensor, else a numpy array of it; a ragged or
    non-numeric list raises naming the block."""
    if isinstance(x, (np.ndarray, torch.Tensor)):
        return x
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (ValueError, TypeError) as err:
        raise ValueError(
            f"block {name!r} must be an array of numbers of shape (n_samples, d), got a "
            f"{type(x).__name__} numpy cannot read as one (ragged rows?): {err}"
        ) from None
    return arr


def _rows(name: str, x) -> int:
    shape = tuple(x.shape)
    if len(shape) != 2:
        raise ValueError(f"block {name!r} must be 2-D (n_samples, d), got shape {shape}")
    return int(shape[0])


def _width(name: str, x) -> int:
    shape = tuple(x.shape)
    if len(shape) != 2:
        raise ValueError(f"block {name!r} must be 2-D (n_samples, d), got shape {shape}")
    return int(shape[1])
