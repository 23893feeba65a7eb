"""The probe's optimiser: seeded Adam on the elastic-net loss, standardisation, prediction."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

PENALTY_SCALINGS = ("sample", "neurox")


def _as_tensor(X, device: torch.device) -> torch.Tensor:
    if isinstance(X, torch.Tensor):
        return X.to(device=device, dtype=torch.float32)
    return torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32)).to(device)


@torch.no_grad()
def _column_stats(X: torch.Tensor, chunk: int = 8192) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 column mean and population std, two passes over row chunks."""
    n = X.shape[0]
    mean = sum(X[s : s + chunk].double().sum(dim=0) for s in range(0, n, chunk)) / n
    sq = sum(((X[s : s + chunk].double() - mean) ** 2).sum(dim=0) for s in range(0, n, chunk))
    return mean, (sq / n).sqrt()


@torch.no_grad()
def _predict(X, W, b, mean, scale, batch_size) -> torch.Tensor:
    out = []
    for s in range(0, X.shape[0], batch_size):
        xb = X[s : s + batch_size]
        if mean is not None:
            xb = (xb - mean) / scale
        out.append((xb @ W.T + b).argmax(dim=1))
    return torch.cat(out).cpu() if out else torch.zeros(0, dtype=torch.long)


def _step_loss(logits, yb, W, l1, l2, batch_size, penalty_scaling):
    """One minibatch's loss under ``penalty_scaling`` (:mod:`lmsim.probe`'s docstring)."""
    penalty = l1 * W.abs().sum() + l2 * torch.linalg.vector_norm(W)
    if penalty_scaling == "neurox":
        return F.cross_entropy(logits, yb) + penalty
    n_b = yb.shape[0]
    return (F.cross_entropy(logits, yb, reduction="sum") + n_b * penalty) / batch_size


def _fit(X, y, n_classes: int, settings: dict, mean, scale):
    """Adam on the elastic-net loss from a seeded ``nn.Linear`` initialisation.

    Parameters
    ----------
    X : Tensor of shape (n, n_neurons)
        float32, on the device the probe trains on.
    y : Tensor of int64, shape (n,)
        Row of the weight matrix of each example's label.
    n_classes : int
    settings : dict
        :attr:`ProbeResult.settings`: ``l1``, ``l2``, ``epochs``, ``batch_size``, ``lr``,
        ``penalty_scaling``, ``shuffle`` and ``seed`` are read.
    mean, scale : Tensor of shape (n_neurons,) or None
        Standardisation applied to every batch.

    Returns
    -------
    W : Tensor of shape (n_classes, n_neurons)
    b : Tensor of shape (n_classes,)
    losses : list of float
        Mean step loss of every epoch.
    """
    l1, l2, lr, scaling = (
        settings["l1"],
        settings["l2"],
        settings["lr"],
        settings["penalty_scaling"],
    )
    epochs, batch_size = settings["epochs"], settings["batch_size"]
    shuffle, seed = settings["shuffle"], settings["seed"]
    device = X.device
    n, d = X.shape
    gen = torch.Generator().manual_seed(int(seed))
    bound = 1.0 / np.sqrt(d)
    # nn.Linear's default initialisation U(-1/sqrt(d), 1/sqrt(d)), drawn from our generator.
    W = ((torch.rand(n_classes, d, generator=gen) * 2 - 1) * bound).to(device).requires_grad_()
    b = ((torch.rand(n_classes, generator=gen) * 2 - 1) * bound).to(device).requires_grad_()
    opt = torch.optim.Adam([W, b], lr=lr)
    losses = []
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen).to(device) if shuffle else None
        total = torch.zeros((), device=device)
        n_steps = 0
        for s in range(0, n, batch_size):
            if order is None:
                xb, yb = X[s : s + batch_size], y[s : s + batch_size]
            else:
                idx = order[s : s + batch_size]
                xb, yb = X.index_select(0, idx), y.index_select(0, idx)
            if mean is not None:
                xb = (xb - mean) / scale
            loss = _step_loss(xb @ W.T + b, yb, W, l1, l2, batch_size, scaling)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach()
            n_steps += 1
        losses.append(float(total) / max(n_steps, 1))
    return W.detach(), b.detach(), losses
