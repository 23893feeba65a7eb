"""A converged probe: OWL-QN on the elastic-net objective, and λ tuned on dev.

NeuroX (and the thesis) trains the probe with a fixed 10 epochs of Adam, which stops
before the objective does on most of the redundancy chapter's probes (issue 29). This
module minimises the same objective

    J(W, b) = (1/N) Σ_i CE(W x_i + b, y_i) + λ1 Σ|W| + λ2 ‖W‖_F

with full-batch OWL-QN (Andrew & Gao 2007: L-BFGS on the smooth part, steps kept inside
the orthant of the current weights, so the L1 term is handled exactly and weights below
its reach are exactly zero). The data term and its gradient are computed by torch in
float32 and accumulated in float64 (where the float32 line search stalls, the run goes on
in float64). ``‖W‖_F``, not differentiable at ``W = 0`` only, becomes
``sqrt(‖W‖²_F + ε²)`` with ``ε = 1e-6`` (it changes ``J`` by at most ``λ2 ε``); whether
``W = 0`` itself is optimal is checked exactly first (:func:`_zero_solution`).

Stopping rule: the largest absolute entry of the pseudo-gradient (the minimum-norm
subgradient of ``J``: zero exactly at the optimum) at most ``gtol``, or, with ``ftol``,
``J`` falling by less than ``ftol`` (relative) over the last 10 iterations; a probe that
reaches ``max_iter`` iterations first, or whose line search fails, is reported as not
converged, and ``stop_reason`` says which rule fired. The start is ``W = 0, b = 0``: the
problem is convex, so the solution does not depend on a seed (only the neurons given to
it do).

:func:`lmsim.probe.tune_penalty` picks ``λ = λ1 = λ2`` (one value, as NeuroX's 1e-5
each) on dev from a grid, along the regularisation path (warm starts).

References
----------
Andrew & Gao (2007), "Scalable training of L1-regularized log-linear models", ICML
(OWL-QN); Nocedal & Wright (2006), *Numerical Optimization*, Alg. 7.4 (two-loop
recursion); Dalvi et al. (2019) (the objective); FORMULAS §4.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

SOLVERS = ("adam", "lbfgs")
SMOOTHING = 1e-6  # ε of the smoothed ‖W‖_F (module docstring)


def objective_and_gradient(X, y, W, b, l1: float, l2: float, eps: float = SMOOTHING):
    """``J(W, b)`` (with the smoothed Frobenius norm) and the gradient of its smooth part.

    Parameters
    ----------
    X : Tensor of shape (n, d)
        float32 (or float64) features (already standardised when the probe standardises).
    y : Tensor of int64, shape (n,)
        Weight-matrix row of each example's label.
    W : Tensor of shape (k, d)
        Same dtype as ``X``.
    b : Tensor of shape (k,)
    l1, l2 : float
        λ1 and λ2.
    eps : float
        Smoothing ε of ``‖W‖_F``.

    Returns
    -------
    value : float
        ``J`` (float64 accumulation), with ``λ1 Σ|W|``.
    grad_W : Tensor of float64, shape (k, d)
        Gradient of the cross-entropy and the Frobenius term (not of the L1 term).
    grad_b : Tensor of float64, shape (k,)
    """
    n = X.shape[0]
    logits = (X @ W.T + b).double()  # float32 or float64 X (the polish)
    ce = F.cross_entropy(logits, y, reduction="sum") / n
    G = torch.softmax(logits, dim=1)
    G[torch.arange(n, device=G.device), y] -= 1.0
    G /= n
    grad_W = (G.to(X.dtype).T @ X).double()
    W64 = W.double()
    norm = torch.sqrt((W64**2).sum() + eps * eps)
    grad_W += l2 * W64 / norm
    value = float(ce) + l1 * float(W64.abs().sum()) + l2 * float(norm)
    return value, grad_W, G.sum(dim=0)


def pseudo_gradient(x, g, mask, l1: float):
    """OWL-QN's pseudo-gradient of ``f(x) + l1 Σ_{mask} |x|`` (``g``: gradient of ``f``):
    the minimum-norm subgradient; zero at ``x`` iff ``x`` is optimal (Andrew & Gao 2007)."""
    pg = g.clone()
    if l1 <= 0:
        return pg
    xm, gm = x[mask], g[mask]
    out = torch.where(xm > 0, gm + l1, torch.where(xm < 0, gm - l1, torch.zeros_like(gm)))
    at0 = xm == 0
    out = torch.where(at0 & (gm + l1 < 0), gm + l1, out)
    out = torch.where(at0 & (gm - l1 > 0), gm - l1, out)
    pg[mask] = out
    return pg


def _direction(pg, S, Y):
    """``−H pg`` by L-BFGS's two-loop recursion over the pairs ``(s, y)`` (N&W Alg. 7.4)."""
    q = pg.clone()
    alphas = []
    for s, y in zip(reversed(S), reversed(Y), strict=True):
        a = float(s @ q) / float(y @ s)
        alphas.append(a)
        q -= a * y
    if S:
        q *= float(S[-1] @ Y[-1]) / float(Y[-1] @ Y[-1])
    for (s, y), a in zip(zip(S, Y, strict=True), reversed(alphas), strict=True):
        q += (a - float(y @ q) / float(y @ s)) * s
    return -q


def owlqn(
    fg, x0, mask, l1: float, gtol: float, max_iter: int, history: int = 10, on_iter=None,
    ftol: float = 0.0, window: int = 10,
):  # fmt: skip
    """Minimise ``f(x) + l1 Σ_{mask} |x|`` by OWL-QN (Andrew & Gao 2007).

    Parameters
    ----------
    fg : callable
        ``fg(x) -> (f(x) + l1 Σ|x_mask|, ∇f(x))`` (float64 tensors).
    x0 : Tensor of float64, shape (p,)
    mask : Tensor of bool, shape (p,)
        The coordinates under the L1 penalty.
    l1, gtol, max_iter, history
        Penalty, stopping rule ``‖pseudo-gradient‖_∞ <= gtol``, iteration limit, pairs kept.
    on_iter : callable, optional
        ``on_iter(iteration, x, value)`` after every iteration.
    ftol, window : float, int
        Also stop once the objective fell by less than ``ftol`` (relative) over the last
        ``window`` iterations (0: never).

    Returns
    -------
    x : Tensor, value : float, iterations : int, gradient : float (the final
    pseudo-gradient's largest absolute entry), reason : str (``"gradient"``,
    ``"objective"``, ``"max_iter"`` or ``"stalled"``: the line search failed).
    """
    x = x0.clone()
    value, g = fg(x)
    S, Y, values = [], [], [value]
    it, reason = 0, "max_iter"
    while True:
        pg = pseudo_gradient(x, g, mask, l1)
        grad = float(pg.abs().max()) if pg.numel() else 0.0
        if grad <= gtol:
            reason = "gradient"
            break
        if ftol > 0 and it >= window and values[-window - 1] - value < ftol * abs(value):
            reason = "objective"
            break
        if it >= max_iter:
            break
        d = _direction(pg, S, Y)
        d[d * pg >= 0] = 0.0  # keep the direction a descent direction per coordinate
        orthant = torch.where(x != 0, torch.sign(x), -torch.sign(pg))
        step = 1.0 if S else 1.0 / max(float(pg.abs().sum()), 1e-12) * min(pg.numel(), 1e3)
        for _ in range(40):
            xn = x + step * d
            xn[mask & (torch.sign(xn) != orthant)] = 0.0
            vn, gn = fg(xn)
            if vn <= value + 1e-4 * float(pg @ (xn - x)):
                break
            step *= 0.5
        else:
            reason = "stalled"
            break
        s, yv = xn - x, gn - g
        if float(s @ yv) > 1e-12 * float(yv @ yv):
            S.append(s)
            Y.append(yv)
            if len(S) > history:
                S.pop(0)
                Y.pop(0)
        x, value, g = xn, vn, gn
        values.append(value)
        it += 1
        if on_iter is not None:
            on_iter(it, x, value)
    return x, value, it, grad, reason


def _fit_lbfgs(X, y, n_classes: int, settings: dict, mean, scale, on_epoch=None, init=None):
    """OWL-QN on ``J`` until the pseudo-gradient is at most ``gtol`` (module docstring).

    Parameters
    ----------
    X : Tensor of shape (n, d)
        float32, on the device the probe trains on.
    y : Tensor of int64, shape (n,)
    n_classes : int
    settings : dict
        ``l1``, ``l2``, ``gtol``, ``max_iter``, ``ftol`` (default 0: the gradient rule
        only).
    mean, scale : Tensor of shape (d,) or None
        Standardisation, applied once to a copy of ``X`` (``4 n d`` more bytes).
    on_epoch : callable, optional
        ``on_epoch(W, b)`` after every block of 10 iterations (curves).
    init : tuple of Tensor, optional
        ``(W, b)`` to start from (warm start); default zeros.

    Returns
    -------
    W : Tensor of shape (k, d)
    b : Tensor of shape (k,)
    objective : list of float
        ``J`` after every block of 10 iterations, and at the end.
    converged : bool
        Whether the pseudo-gradient rule or the objective rule (``ftol``) held.
    info : dict
        ``iterations`` (run), ``gradient`` (the final pseudo-gradient's largest absolute
        entry) and ``reason`` (:func:`owlqn`'s).
    """
    l1, l2 = float(settings["l1"]), float(settings["l2"])
    gtol, max_iter = float(settings["gtol"]), int(settings["max_iter"])
    device = X.device
    Xs = X if mean is None else (X - mean) / scale
    k, d = int(n_classes), X.shape[1]
    m = k * d
    objective = []
    zero = _zero_solution(Xs, y, k, l1, l2)
    if zero is not None:  # W = 0 meets the optimality conditions exactly
        W, b = torch.zeros(k, d, device=device), zero.to(device)
        objective.append(objective_and_gradient(Xs, y, W, b, l1, l2)[0])
        return W, b, objective, True, {"iterations": 0, "gradient": 0.0, "reason": "zero"}
    if init is None:
        x0 = torch.zeros(m + k, dtype=torch.float64, device=device)
    else:
        x0 = torch.cat([init[0].double().reshape(-1), init[1].double()]).to(device)
    mask = torch.zeros(m + k, dtype=torch.bool, device=device)
    mask[:m] = True
    data = {"X": Xs}

    def unpack(x, dtype=torch.float32):
        return x[:m].reshape(k, d).to(dtype), x[m:].to(dtype)

    def fg(x):
        W, b = unpack(x, data["X"].dtype)
        value, gW, gb = objective_and_gradient(data["X"], y, W, b, l1, l2)
        return value, torch.cat([gW.reshape(-1), gb])

    def on_iter(it, x, value):
        if it % 10 == 0:
            objective.append(value)
            if on_epoch is not None:
                on_epoch(*unpack(x))

    ftol = float(settings.get("ftol", 0.0))
    run = dict(mask=mask, l1=l1, gtol=gtol, on_iter=on_iter, ftol=ftol)
    x, value, nit, grad, reason = owlqn(fg, x0, max_iter=max_iter, **run)
    if reason == "stalled" and nit < max_iter:
        # The float32 line search stalled above gtol: go on in float64 (a copy of X).
        data["X"] = Xs.double()
        x, value, more, grad, reason = owlqn(fg, x, max_iter=max_iter - nit, **run)
        nit += more
        data["X"] = Xs
    W, b = unpack(x)
    objective.append(value)
    if on_epoch is not None:
        on_epoch(W, b)
    info = {"iterations": nit, "gradient": grad, "reason": reason}
    return W, b, objective, reason in ("gradient", "objective"), info


def _zero_solution(X, y, k: int, l1: float, l2: float):
    """The bias of the solution if ``W = 0`` is optimal, else None.

    With ``W = 0`` the optimal bias is the log training prior (classes absent from
    training get a large negative bias); ``W = 0`` is then optimal iff the soft-thresholded
    data gradient ``S(∇_W CE, λ1)`` has Frobenius norm at most ``λ2`` (the subgradient of
    ``λ1 Σ|W| + λ2 ‖W‖_F`` at 0 holds every such vector).
    """
    if l2 <= 0:
        return None
    counts = torch.bincount(y, minlength=k).double()
    prior = counts / counts.sum()
    b = torch.log(torch.clamp(prior, min=1e-30))
    G = prior.expand(y.shape[0], k).clone()
    G[torch.arange(y.shape[0], device=G.device), y] -= 1.0
    grad = (G.to(X.dtype).T @ X).double() / y.shape[0]
    shrunk = torch.clamp(grad.abs() - l1, min=0.0)
    return b.float() if float(torch.linalg.vector_norm(shrunk)) <= l2 else None


def lbfgs_stopping_rule(settings: dict) -> str:
    """The L-BFGS stopping rule, in words."""
    return (
        f"full-batch OWL-QN (L-BFGS for the L1 penalty, history {settings.get('history', 10)}) "
        f"until the largest absolute entry of the pseudo-gradient (the minimum-norm "
        f"subgradient of J) was at most {settings['gtol']:g}"
        + (
            f" or J fell by less than {settings['ftol']:g} (relative) over 10 iterations"
            if settings.get("ftol")
            else ""
        )
        + f", at most {settings['max_iter']} iterations, from W = 0 (or a warm start)"
    )
