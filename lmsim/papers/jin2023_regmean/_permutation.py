"""Do fine-tuned copies of one pretrained model need permutation matching? (App. D)

Jin et al. (2023, App. D, Figs. 7-8) ask whether the units of two models fine-tuned from
the same pretrained weights are permuted against each other, as permutation-matching
merges (OTFusion, Git Re-Basin) assume. Two views of the feed-forward layers:

- **weights** (Fig. 7): ``M_ij = ‖W_A[i] − W_B[j]‖₂`` between unit ``i``'s weight vector in
  model A and unit ``j``'s in B (rows of the ``nn.Linear`` weight). Without permutations the
  diagonal is the smallest entry of its row;
- **activations** (Fig. 8): ``C = Z_Aᵀ Z_B`` of the units' activations ``Z = gelu(W x)`` over
  the same tokens; without permutations the diagonal is the largest of its row.

:func:`diagonal_match` turns either matrix into one indicator per unit (its best partner is
itself), whose mean is the share of units a matching would leave in place.

References
----------
Jin, Ren, Preotiuc-Pietro & Cheng (2023). Dataless Knowledge Fusion by Merging Weights of
Language Models. ICLR. App. D, Figs. 7-8.
Singh & Jaggi (2020). Model Fusion via Optimal Transport. NeurIPS.
Ainsworth, Hayase & Srinivasa (2023). Git Re-Basin. ICLR.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def weight_distances(w_a, w_b) -> np.ndarray:
    """``M_ij = ‖w_a[i] − w_b[j]‖₂`` (Fig. 7's ground metric).

    Parameters
    ----------
    w_a, w_b : array_like of shape (n_units, d_in)
        One layer's weights in the ``nn.Linear`` layout (a row per output unit).

    Returns
    -------
    ndarray of shape (n_units, n_units), float64
    """
    a, b = np.asarray(w_a, dtype=np.float64), np.asarray(w_b, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"weights must be two 2-d arrays of one shape, got {a.shape}, {b.shape}")
    sq = (a**2).sum(1)[:, None] + (b**2).sum(1)[None, :] - 2 * a @ b.T
    return np.sqrt(np.maximum(sq, 0.0))


def activation_similarity(z_a, z_b, *, normalize: bool = False) -> np.ndarray:
    """``C = Z_Aᵀ Z_B`` (Fig. 8's similarity), activations of the same tokens in two models.

    Parameters
    ----------
    z_a, z_b : array_like of shape (n_tokens, n_units)
    normalize : bool, default=False
        Divide by the column norms: ``C_ij = z_a[:, i] · z_b[:, j] / (‖z_a[:, i]‖ ‖z_b[:, j]‖)``
        (cosine similarity of the units' activation vectors). Unnormalised, a few units with
        large activations dominate every row (column stripes), so a row's largest entry says
        more about unit ``j``'s scale than about its likeness to unit ``i``. A unit that is
        never active (a zero column) gets similarity 0.

    Returns
    -------
    ndarray of shape (n_units, n_units), float64
    """
    a, b = np.asarray(z_a, dtype=np.float64), np.asarray(z_b, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(
            f"activations must be two 2-d arrays of one shape, got {a.shape}, {b.shape}"
        )
    c = a.T @ b
    if normalize:
        na, nb = np.linalg.norm(a, axis=0), np.linalg.norm(b, axis=0)
        scale = np.outer(na, nb)
        c = np.divide(c, scale, out=np.zeros_like(c), where=scale > 0)
    return c


def diagonal_match(matrix, closer: str = "smaller") -> np.ndarray:
    """Per unit ``i``: is ``matrix[i, i]`` the best entry of row ``i``? (0/1, ties count).

    Parameters
    ----------
    matrix : array_like of shape (n, n)
    closer : {"smaller", "larger"}
        ``"smaller"`` for distances (Fig. 7), ``"larger"`` for similarities (Fig. 8).

    Returns
    -------
    ndarray of shape (n,), float64
        Its mean is the share of units whose nearest partner is the same unit.
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"`matrix` must be square, got shape {m.shape}")
    if closer not in ("smaller", "larger"):
        raise ValueError(f"`closer` must be 'smaller' or 'larger', got {closer!r}")
    diag = np.diag(m)
    best = m.min(axis=1) if closer == "smaller" else m.max(axis=1)
    return (diag == best).astype(np.float64)


@torch.no_grad()
def unit_activations(
    model,
    tokenizer,
    texts: Sequence[str],
    layer: str,
    *,
    max_length: int,
    batch_size: int = 32,
) -> np.ndarray:
    """``gelu(W x + b)`` of the linear ``layer``'s units over every real token of ``texts``.

    Parameters
    ----------
    model : nn.Module
    tokenizer
    texts : sequence of str
    layer : str
        A linear module's name (e.g. ``"bert.encoder.layer.3.intermediate.dense"``).
    max_length, batch_size : int

    Returns
    -------
    ndarray of shape (n_tokens, n_units), float64
        Padding positions left out.
    """
    module = dict(model.named_modules())[layer]
    captured = []
    handle = module.register_forward_hook(lambda m, i, out: captured.append(out.detach()))
    device = next(model.parameters()).device
    rows = []
    try:
        model.eval()
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                list(texts[start : start + batch_size]),
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            ).to(device)
            captured.clear()
            model(**batch)
            keep = batch["attention_mask"].bool()
            rows.append(torch.nn.functional.gelu(captured[0].float())[keep].double().cpu())
    finally:
        handle.remove()
    return torch.cat(rows).numpy()
