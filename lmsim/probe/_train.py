"""Training and scoring a probe: :func:`train_probe` and its :class:`ProbeResult`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from lmsim._checks import check_finite
from lmsim._threads import thread_policy
from lmsim.probe._baselines import control_labels
from lmsim.probe._fit import PENALTY_SCALINGS, _as_tensor, _column_stats, _fit, _predict
from lmsim.probe._lbfgs import SOLVERS, _fit_lbfgs, lbfgs_stopping_rule
from lmsim.probe._rankings import get_top_neurons

SPLITS = ("train", "dev", "test")


@dataclass
class ProbeResult:
    """A trained probe and its scores.

    Attributes
    ----------
    weights : ndarray of shape (n_classes, n_neurons)
        float32; on the standardised scale when ``standardize=True`` (see
        :attr:`raw_weights`).
    bias : ndarray of shape (n_classes,)
    classes : ndarray of shape (n_classes,)
        Label value of each row of ``weights``.
    accuracy, majority : dict of str to float
        Accuracy and majority-class baseline on each split given (``"train"``, ``"dev"``,
        ``"test"``).
    per_class_accuracy : dict of str to dict
        Split → {label: accuracy on the words of that label} (labels present in the split).
    control_accuracy, selectivity : dict of str to float, or None
        With a control task: its accuracy and ``accuracy − control_accuracy`` per split.
    losses : list of float
        Mean step loss of every epoch (a running mean while the weights move).
    objective : list of float
        The full training objective ``J(W, b)`` after every epoch; recorded with ``tol``
        or ``curves`` (empty otherwise).
    curves : dict of str to list of float, or None
        With ``curves=True``: accuracy on every split given after every epoch.
    converged : bool or None
        With ``tol``: whether the stopping rule held before ``epochs`` ran out (False
        means the probe may be under-converged); None without ``tol``. With
        ``solver="lbfgs"``: whether its stopping rule held within ``max_iter``.
    iterations, gradient, stop_reason : int, float, str or None
        ``solver="lbfgs"`` only: iterations run, the final pseudo-gradient's largest
        entry, and which rule stopped it (``"gradient"``, ``"objective"``, ``"zero"``:
        ``W = 0`` is optimal, ``"max_iter"``, ``"stalled"``).
    mean, scale : ndarray of shape (n_neurons,) or None
        Standardisation fitted on the training split.
    settings : dict
        Hyperparameters used.
    """

    weights: np.ndarray
    bias: np.ndarray
    classes: np.ndarray
    accuracy: dict[str, float]
    majority: dict[str, float]
    per_class_accuracy: dict[str, dict]
    losses: list[float]
    settings: dict
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None
    control_accuracy: dict[str, float] | None = None
    selectivity: dict[str, float] | None = None
    majority_class: object = None
    control: ProbeResult | None = field(default=None, repr=False)
    objective: list[float] = field(default_factory=list)
    curves: dict[str, list[float]] | None = None
    converged: bool | None = None
    iterations: int | None = None
    gradient: float | None = None
    stop_reason: str | None = None

    @property
    def n_epochs(self) -> int:
        """Epochs actually run (fewer than ``settings["epochs"]`` when ``tol`` stopped it);
        with ``solver="lbfgs"`` the L-BFGS iterations."""
        return self.iterations if self.iterations is not None else len(self.losses)

    @property
    def stopped_by(self) -> str:
        """Which rule stopped the probe: L-BFGS's ``stop_reason``, or for Adam ``"rule"``
        (its convergence rule) or ``"max epochs"``."""
        return self.stop_reason or ("rule" if self.converged else "max epochs")

    @property
    def stopping_rule(self) -> str:
        """The solver's stopping rule, in words."""
        st = self.settings
        if st.get("solver") == "lbfgs":
            return lbfgs_stopping_rule(st)
        if st.get("tol") is None:
            return (
                f"a fixed {st['epochs']} epochs of Adam (lr {st['lr']:g}, batch {st['batch_size']})"
            )
        return (
            f"Adam (lr {st['lr']:g}, batch {st['batch_size']}) until the full training objective "
            f"fell by less than {st['tol']:g} (relative) in each of {st['patience']} "
            f"consecutive epochs, at most {st['epochs']} epochs"
        )

    @property
    def train_acc(self) -> float:
        return self.accuracy["train"]

    @property
    def dev_acc(self) -> float | None:
        return self.accuracy.get("dev")

    @property
    def test_acc(self) -> float | None:
        return self.accuracy.get("test")

    @property
    def raw_weights(self) -> np.ndarray:
        """Weights on the original feature scale (``weights / scale``)."""
        return self.weights if self.scale is None else self.weights / self.scale

    def top_neurons(self, percentage: float):
        """:func:`get_top_neurons` on this probe's weights, classes keyed by label."""
        overall, per_class = get_top_neurons(self.weights, percentage)
        return overall, {self.classes[c].item(): v for c, v in per_class.items()}

    def predict(self, X, batch_size: int = 8192) -> np.ndarray:
        """Predicted labels for rows of ``X (n, n_neurons)`` (computed on the CPU)."""
        X = _checked_tensor(X, "X", torch.device("cpu"))
        W = torch.from_numpy(self.weights)
        b = torch.from_numpy(self.bias)
        pred = _predict(
            X,
            W,
            b,
            None if self.mean is None else torch.from_numpy(self.mean),
            None if self.scale is None else torch.from_numpy(self.scale),
            batch_size,
        )
        return self.classes[pred.numpy()]


@thread_policy
def train_probe(
    X_train,
    y_train,
    X_dev=None,
    y_dev=None,
    X_test=None,
    y_test=None,
    *,
    words_train: Sequence[str] | None = None,
    words_dev: Sequence[str] | None = None,
    words_test: Sequence[str] | None = None,
    l1: float = 1e-5,
    l2: float = 1e-5,
    epochs: int = 10,
    batch_size: int = 128,
    lr: float = 1e-3,
    tol: float | None = None,
    patience: int = 2,
    curves: bool = False,
    solver: str = "adam",
    gtol: float = 1e-4,
    ftol: float = 0.0,
    max_iter: int = 500,
    init=None,
    penalty_scaling: str = "sample",
    shuffle: bool = True,
    standardize: bool = False,
    classes=None,
    seed: int = 0,
    control_seed: int | None = None,
    device="auto",
) -> ProbeResult:
    """Train an elastic-net logistic-regression probe and score it on every split given.

    Parameters
    ----------
    X_train : ndarray or Tensor of shape (n_train, n_neurons)
        Word activations (any float dtype; trained in float32). Moved to ``device`` whole
        (``4 · n_train · n_neurons`` bytes there).
    y_train : array-like of int, shape (n_train,)
        Labels (any integers; mapped to rows of the weight matrix via ``classes``).
    X_dev, y_dev, X_test, y_test : optional
        Held-out splits, scored but never trained on.
    words_train, words_dev, words_test : sequence of str, optional
        Words of each row. With ``words_train`` a control task is trained and scored too
        (:func:`control_labels`); the held-out splits need their words then.
    l1, l2 : float
        λ1 on ``Σ|W|`` and λ2 on ``‖W‖_F`` (FORMULAS §4: 1e-5 each).
    epochs, batch_size, lr : int, int, float
        Adam with torch defaults otherwise (FORMULAS §4: 10, 128, 1e-3). With ``tol``,
        ``epochs`` is the maximum.
    tol : float, optional
        Convergence criterion: stop after the epoch where the full training objective
        ``J`` (computed after every epoch on all training rows) has fallen by less than
        ``tol`` relative to the epoch before in each of the last ``patience`` epochs (a
        rise counts). Default: run exactly ``epochs`` (NeuroX). ``result.converged`` says
        whether the rule held, ``result.stopping_rule`` states it.
    patience : int, default=2
        Consecutive small-decrease epochs ``tol`` needs (Adam's minibatch noise makes one
        epoch's change a poor signal).
    curves : bool, default=False
        Record the accuracy on every split given after every epoch (``result.curves``) and
        the objective (one more pass over every split per epoch; with L-BFGS after every
        block of 10 iterations).
    solver : {"adam", "lbfgs"}, default="adam"
        ``"adam"``: NeuroX's minibatch Adam (``epochs``, ``batch_size``, ``lr``, ``tol``).
        ``"lbfgs"``: full-batch L-BFGS to first-order optimality (:mod:`lmsim.probe._lbfgs`:
        the smoothed objective, the stopping rule ``‖∇J_ε‖_∞ <= gtol``), from ``W = 0`` so
        ``seed`` does not matter; ``epochs``, ``batch_size``, ``lr``, ``tol`` are ignored.
    gtol, ftol, max_iter : float, float, int
        L-BFGS's stopping rule (the pseudo-gradient's largest entry at most ``gtol``, or
        with ``ftol > 0`` the objective falling by less than ``ftol``, relative, over 10
        iterations) and its iteration limit.
    init : tuple of ndarray, optional
        L-BFGS only: ``(W, b)`` to start from (on the standardised scale with
        ``standardize``), e.g. the solution at a neighbouring λ.
    penalty_scaling : {"sample", "neurox"}
        How the penalty enters each step (:mod:`lmsim.probe`'s docstring).
    shuffle : bool, default=True
        Reshuffle the rows every epoch (seeded); ``False`` iterates in order, as NeuroX.
    standardize : bool, default=False
        Z-score every neuron with the training mean and standard deviation (constant
        neurons get scale 1) before the probe, so weight masses compare neurons of
        different scales; the weights are then on the standardised scale.
    classes : array-like, optional
        All label values (e.g. the 17 UPOS ids) in weight-row order. Default: the sorted
        union of the labels of all splits given.
    seed : int
        Seeds initialisation and shuffling (one ``torch.Generator``).
    control_seed : int, optional
        Seed of the control labels (default: ``seed``).
    device : str or torch.device, default="auto"
        ``lmsim.models.resolve_device``: CUDA when present, else CPU.

    Returns
    -------
    ProbeResult

    References
    ----------
    FORMULAS §4; Dalvi et al. (2019); Hewitt & Liang (2019).
    """
    from lmsim.models import resolve_device

    _check_options(penalty_scaling, epochs, batch_size, l1, l2)
    if solver not in SOLVERS:
        raise ValueError(f"`solver` must be one of {SOLVERS}, got {solver!r}")
    if solver == "lbfgs" and not (gtol > 0 and int(max_iter) >= 1):
        raise ValueError(f"need `gtol` > 0 and `max_iter` >= 1, got {gtol!r}, {max_iter!r}")
    if tol is not None and not (np.isfinite(tol) and tol >= 0):
        raise ValueError(f"`tol` must be a finite relative decrease >= 0 or None, got {tol!r}")
    if int(patience) < 1:
        raise ValueError(f"`patience` must be a positive integer, got {patience!r}")
    dev = resolve_device(device)
    data = _check_splits(
        {"train": (X_train, y_train), "dev": (X_dev, y_dev), "test": (X_test, y_test)}
    )
    classes = _check_classes(classes, data)
    Xt = {name: _checked_tensor(X, f"X_{name}", dev) for name, (X, _) in data.items()}
    mean, scale = _standardization(Xt["train"]) if standardize else (None, None)
    settings = dict(
        l1=l1,
        l2=l2,
        epochs=int(epochs),
        batch_size=int(batch_size),
        lr=lr,
        penalty_scaling=penalty_scaling,
        shuffle=shuffle,
        standardize=standardize,
        seed=seed,
        device=str(dev),
    )
    if solver == "lbfgs":
        settings.update(solver="lbfgs", gtol=float(gtol), ftol=float(ftol), max_iter=int(max_iter))
        settings.update(warm_start=init is not None)
    elif tol is not None:
        settings.update(tol=float(tol), patience=int(patience))
    if curves:
        settings.update(curves=True)
    labels = {name: y for name, (_, y) in data.items()}
    if init is not None:
        init = tuple(torch.as_tensor(np.asarray(a, dtype=np.float32)) for a in init)
    result = _train_and_score(Xt, labels, classes, settings, mean, scale, init=init)
    if words_train is not None:
        words = {"train": words_train, "dev": words_dev, "test": words_test}
        control_seed = seed if control_seed is None else control_seed
        control = _control_labels(words, labels, control_seed)
        _add_control(result, _train_and_score(Xt, control, classes, settings, mean, scale))
    return result


# ------------------------------------------------------------------- train_probe's steps
def _checked_tensor(X, name: str, device) -> torch.Tensor:
    """``X`` as the float32 tensor the probe uses; NaN, Inf or values beyond float32's range
    raise naming ``name`` (a NaN would train all-NaN weights at chance accuracy)."""
    check_finite(X, name)
    with np.errstate(over="ignore"):
        out = _as_tensor(X, device)
    if not bool(torch.isfinite(out).all()):
        raise ValueError(
            f"`{name}` has values beyond float32's range (3.4e38), in which the probe trains; "
            f"divide `{name}` by a constant first"
        )
    return out


def _check_options(penalty_scaling: str, epochs, batch_size, l1: float, l2: float) -> None:
    """Raise on a penalty scaling, step count or penalty :func:`train_probe` cannot use."""
    if penalty_scaling not in PENALTY_SCALINGS:
        raise ValueError(
            f"`penalty_scaling` must be one of {PENALTY_SCALINGS}, got {penalty_scaling!r}"
        )
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        if int(value) < 1:
            raise ValueError(f"`{name}` must be a positive integer, got {value!r}")
    if l1 < 0 or l2 < 0:
        raise ValueError(f"`l1` and `l2` must be >= 0, got {l1!r} and {l2!r}")


def _check_splits(splits: dict) -> dict[str, tuple]:
    """The splits given, as ``{name: (X, y)}`` with ``y`` an array; raise on bad shapes.

    ``X`` stays an ndarray or Tensor (other array-likes become float32 arrays).
    """
    data = {}
    for name, (X, y) in splits.items():
        if (X is None) != (y is None):
            raise ValueError(f"give both `X_{name}` and `y_{name}` or neither")
        if X is None:
            continue
        if not isinstance(X, (np.ndarray, torch.Tensor)):
            X = np.asarray(X, dtype=np.float32)
        y = np.asarray(y)
        if X.ndim != 2 or X.shape[0] != y.shape[0] or y.ndim != 1:
            raise ValueError(
                f"`X_{name}` must be (n, n_neurons) and `y_{name}` (n,), got "
                f"{tuple(X.shape)} and {y.shape}"
            )
        if name != "train" and X.shape[1] != data["train"][0].shape[1]:
            raise ValueError(
                f"`X_{name}` has {X.shape[1]} neurons but `X_train` has {data['train'][0].shape[1]}"
            )
        data[name] = (X, y)
    if data["train"][0].shape[0] == 0:
        raise ValueError("`X_train` has no rows")
    return data


def _check_classes(classes, data: dict[str, tuple]) -> np.ndarray:
    """The label values in weight-row order (default: every label given, sorted)."""
    if classes is None:
        classes = np.unique(np.concatenate([y for _, y in data.values()]))
    classes = np.asarray(classes)
    if np.unique(classes).size != classes.size:
        raise ValueError("`classes` has duplicate labels")
    for name, (_, y) in data.items():
        unknown = np.setdiff1d(np.unique(y), classes)
        if unknown.size:
            raise ValueError(f"`y_{name}` has labels {unknown[:5].tolist()} not in `classes`")
    return classes


def _standardization(X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 column mean and scale of ``X`` (the standard deviation; 1 where it is 0)."""
    mean, std = _column_stats(X)
    scale = torch.where(std > 0, std, torch.ones_like(std)).float()
    return mean.float(), scale


def _class_index(classes: np.ndarray, y: np.ndarray, device) -> torch.Tensor:
    """Row of the weight matrix of every label in ``y`` (int64, on ``device``)."""
    sorter = np.argsort(classes, kind="stable")
    pos = sorter[np.searchsorted(classes, y, sorter=sorter)]
    return torch.as_tensor(pos, dtype=torch.long, device=device)


def _train_and_score(Xt, labels, classes, settings, mean, scale, init=None) -> ProbeResult:
    """Fit a probe to ``labels["train"]`` and score it on every split of ``labels``."""
    y_train = _class_index(classes, labels["train"], Xt["train"].device)
    curves = {name: [] for name in labels} if settings.get("curves") else None

    def on_epoch(W, b):
        for name, y in labels.items():
            pred = classes[_predict(Xt[name], W, b, mean, scale, 8192).numpy()]
            curves[name].append(float((pred == y).mean()) if y.size else float("nan"))

    info = {}
    if settings.get("solver") == "lbfgs":
        W, b, objective, converged, info = _fit_lbfgs(
            Xt["train"], y_train, len(classes), settings, mean, scale,
            on_epoch=on_epoch if curves is not None else None, init=init,
        )  # fmt: skip
        losses = list(objective)
    else:
        W, b, losses, objective, converged = _fit(
            Xt["train"], y_train, len(classes), settings, mean, scale,
            on_epoch=on_epoch if curves is not None else None,
        )  # fmt: skip
    values, counts = np.unique(labels["train"], return_counts=True)
    majority_class = values[np.argmax(counts)]
    acc, majority, per_class = {}, {}, {}
    for name, y in labels.items():
        pred = classes[_predict(Xt[name], W, b, mean, scale, 8192).numpy()]
        correct = pred == y
        acc[name] = float(correct.mean()) if y.size else float("nan")
        majority[name] = float((y == majority_class).mean()) if y.size else float("nan")
        per_class[name] = {
            v.item(): float(correct[y == v].mean()) for v in np.unique(y) if (y == v).any()
        }
    return ProbeResult(
        weights=W.cpu().numpy(),
        bias=b.cpu().numpy(),
        classes=classes,
        accuracy=acc,
        majority=majority,
        per_class_accuracy=per_class,
        losses=losses,
        settings=settings,
        mean=None if mean is None else mean.cpu().numpy(),
        scale=None if scale is None else scale.cpu().numpy(),
        majority_class=majority_class.item(),
        objective=objective,
        curves=curves,
        converged=converged,
        iterations=info.get("iterations"),
        gradient=info.get("gradient"),
        stop_reason=info.get("reason"),
    )


def _control_labels(words: dict, labels: dict[str, np.ndarray], seed: int) -> dict:
    """Control-task labels of every split in ``labels`` (:func:`control_labels`)."""
    missing = [k for k in labels if words[k] is None]
    if missing:
        raise ValueError(f"a control task needs the words of every split; missing {missing}")
    for k in labels:
        if len(words[k]) != labels[k].shape[0]:
            raise ValueError(
                f"`words_{k}` has {len(words[k])} words but `y_{k}` {labels[k].shape[0]}"
            )
    names = list(labels)
    ctrl = control_labels(
        words["train"], labels["train"], *[words[k] for k in names[1:]], seed=seed
    )
    return dict(zip(names, ctrl, strict=True))


def _add_control(result: ProbeResult, control: ProbeResult) -> None:
    """Attach the control probe to ``result``, with its accuracy and the selectivity."""
    result.control = control
    result.control_accuracy = dict(control.accuracy)
    result.selectivity = {k: result.accuracy[k] - control.accuracy[k] for k in result.accuracy}
