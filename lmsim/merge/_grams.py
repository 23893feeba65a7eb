"""Gram collection: RegMean's statistics of every linear layer's inputs.

References
----------
Jin et al. (2023), Sec. 3.2 (inner product matrices of linear layer inputs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from lmsim._threads import thread_policy


def grams_from_moments(moms: Mapping, reduction: str = "mean") -> dict[str, torch.Tensor]:
    """RegMean Grams from :func:`lmsim.extract.extract_linear_grams` moments.

    Parameters
    ----------
    moms : dict of str to Moments
        Module name to a Moments with block ``"input"``.
    reduction : {"mean", "sum"}, default="mean"
        ``XᵀX / n`` (the authors' running mean; each model weighs equally in a merge) or
        ``XᵀX`` (Eq. 1 literally; models weigh by their number of token positions).

    Returns
    -------
    dict of str to Tensor of shape (d_in, d_in), float64, on the moments' device
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"`reduction` must be 'mean' or 'sum', got {reduction!r}")
    out = {}
    for name, mom in moms.items():
        g = mom.gram("input")
        out[name] = g / mom.n if reduction == "mean" else g
    return out


def gram_dtype(dtype=None):
    """The forward precision of :func:`collect_grams`: float32 unless a dtype is named.

    :func:`lmsim.extract.extract_linear_grams` (like every extraction) autocasts to bfloat16
    on CUDA when ``dtype`` is None; RegMean's Grams feed an exact float64 solve, so they are
    collected in float32 on every device and a 16-bit autocast runs only when asked for.

    Parameters
    ----------
    dtype : str, torch.dtype or None

    Returns
    -------
    str or torch.dtype
        ``"float32"`` for None, else ``dtype`` unchanged.
    """
    return "float32" if dtype is None or dtype == "auto" else dtype


@thread_policy
def collect_grams(
    model: nn.Module,
    tokenizer,
    texts: Sequence,
    *,
    kind: str | None = None,
    reduction: str = "mean",
    paper_compat_padding: bool = False,
    batch_size: int = 16,
    max_length: int | None = None,
    device="auto",
    dtype=None,
    progress: bool = True,
) -> dict[str, torch.Tensor]:
    """Grams of every linear layer's inputs, in one forward pass over ``texts``.

    Parameters
    ----------
    model : nn.Module
        A Hugging Face model; its task head's input is recorded too.
    tokenizer : tokenizer
    texts : list of str, of (str, str) pairs, or of word lists
        The model's own training inputs (a few hundred batches suffice, paper Table 6),
        encoded as fine-tuning encodes them (:func:`lmsim.encoding.encode_inputs`).
    kind : str, optional
        ``"token"`` reads word lists (the default for a token classifier).
    reduction : {"mean", "sum"}, default="mean"
        See :func:`grams_from_moments`.
    paper_compat_padding : bool, default=False
        False: real tokens only. True: every position, padding included, of batches of
        ``batch_size`` texts in the given order, each padded to its longest text, as the
        released code collects them (``local_trainer.compute_grams`` over its padded train
        batches; 16 texts a batch in its configs).
    dtype : str or torch.dtype, optional
        Precision of the forward pass. None: float32 on every device, so that the float64
        RegMean solve runs on Grams of float32 activations (the sums are float64 either
        way). ``"bfloat16"`` or ``"float16"`` asks for an autocast explicitly (faster on GPUs,
        Grams accurate to about 3 significant digits).
    batch_size, max_length, device, progress
        As in :func:`lmsim.extract.extract_linear_grams`.

    Returns
    -------
    grams : dict of str to Tensor of shape (d_in, d_in), float64 on the CPU
        Keyed by module name (``model.named_modules()``), as :func:`merge_models` wants.

    References
    ----------
    Jin et al. (2023), Sec. 3.2 (inner product matrices of linear layer inputs).
    """
    from lmsim.extract import extract_linear_grams

    moms = extract_linear_grams(
        model,
        tokenizer,
        texts,
        kind=kind,
        batch_size=batch_size,
        max_length=max_length,
        device=device,
        dtype=gram_dtype(dtype),
        paper_compat_padding=paper_compat_padding,
        progress=progress,
    )
    return {k: v.cpu() for k, v in grams_from_moments(moms, reduction).items()}
