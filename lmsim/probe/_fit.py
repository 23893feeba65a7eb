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


@torch.no_grad()
def _objective(X, y, W, b, l1, l2, mean, scale, batch_size: int = 8192) -> float:
    """The training objective ``J(W, b)`` on all of ``(X, y)``: mean cross-entropy plus
    ``λ1 Σ|W| + λ2 ‖W‖_F`` (:mod:`lmsim.probe`'s docstring), in float64."""
    total = 0.0
    for s in range(0, X.shape[0], batch_size):
        xb = X[s : s + batch_size]
        if mean is not None:
            xb = (xb - mean) / scale
        logits = xb @ W.T + b
        total += float(F.cross_entropy(logits, y[s : s + batch_size], reduction="sum").double())
    penalty = l1 * float(W.abs().double().sum()) + l2 * float(torch.linalg.vector_norm(W.double()))
    return total / X.shape[0] + penalty


def _converged(objective: list[float], tol: float, patience: int) -> bool:
    """True when each of the last ``patience`` epochs lowered the objective by less than
    ``tol`` relative to the epoch before (a rise counts as no decrease)."""
    if len(objective) <= patience:
        return False
    last = objective[-patience - 1 :]
    return all(
        (before - after) < tol * max(abs(before), 1e-12)
        for before, after in zip(last[:-1], last[1:], strict=True)
    )


def _fit(X, y, n_classes: int, settings: dict, mean, scale, on_epoch=None):
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
        ``penalty_scaling``, ``shuffle`` and ``seed`` are read; ``tol`` and ``patience``
        (optional) turn ``epochs`` into a maximum: training stops after the epoch where
        :func:`_converged` holds for the full training objective.
    mean, scale : Tensor of shape (n_neurons,) or None
        Standardisation applied to every batch.
    on_epoch : callable, optional
        ``on_epoch(W, b)`` after every epoch (e.g. to record accuracy curves); its
        presence also records the objective.

    Returns
    -------
    W : Tensor of shape (n_classes, n_neurons)
    b : Tensor of shape (n_classes,)
    losses : list of float
        Mean step loss of every epoch.
    objective : list of float
        The full training objective ``J`` after every epoch (:func:`_objective`); empty
        unless ``tol`` or ``on_epoch`` is given (it costs one pass over ``X``).
    converged : bool or None
        Whether the stopping rule held (None without ``tol``).
    """
    l1, l2, lr, scaling = (
        settings["l1"],
        settings["l2"],
        settings["lr"],
        settings["penalty_scaling"],
    )
    epochs, batch_size = settings["epochs"], settings["batch_size"]
    shuffle, seed = settings["shuffle"], settings["seed"]
    tol, patience = settings.get("tol"), int(settings.get("patience") or 1)
    record = tol is not None or on_epoch is not None
    device = X.device
    n, d = X.shape
    gen = torch.Generator().manual_seed(int(seed))
    bound = 1.0 / np.sqrt(d)
    # nn.Linear's default initialisation U(-1/sqrt(d), 1/sqrt(d)), drawn from our generator.
    W = ((torch.rand(n_classes, d, generator=gen) * 2 - 1) * bound).to(device).requires_grad_()
    b = ((torch.rand(n_classes, generator=gen) * 2 - 1) * bound).to(device).requires_grad_()
    opt = torch.optim.Adam([W, b], lr=lr)
    losses, objective, converged = [], [], None if tol is None else False
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
        if record:
            objective.append(_objective(X, y, W.detach(), b.detach(), l1, l2, mean, scale))
        if on_epoch is not None:
            on_epoch(W.detach(), b.detach())
        if tol is not None and _converged(objective, tol, patience):
            converged = True
            break
    return W.detach(), b.detach(), losses, objective, converged
