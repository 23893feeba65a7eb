"""Linear probes on word-level activations: elastic-net logistic regression, as in NeuroX.

:func:`train_probe` trains a multinomial logistic regression ``softmax(W x + b)`` on
activations ``X (n_words, n_neurons)`` with Adam, minimising

    J(W, b) = (1/N) Σ_i CE(W x_i + b, y_i) + λ1 Σ|W| + λ2 ‖W‖_F

(FORMULAS §4: λ1 = λ2 = 1e-5, Adam lr 1e-3, 10 epochs, batch 128; the penalty is on the
weights, not the bias, and ``‖W‖_F`` is the Frobenius norm itself, not its square, as in
NeuroX's ``l2_penalty``). It runs on the GPU when one is present (``device="auto"``) and on
the CPU otherwise, in float32, seeded by one :class:`torch.Generator` (initialisation and
shuffling), so a CPU run is bit-for-bit reproducible.

Penalty scaling (``penalty_scaling``)
    NeuroX adds the full penalty ``λ1 Σ|W| + λ2 ‖W‖_F`` to the *mean* cross-entropy of every
    minibatch. This is sometimes read as "the regularisation grows with the number of
    batches per epoch"; it does not: every step's gradient is an unbiased estimate of
    ``∇J`` with the *mean* cross-entropy, so the optimum and the relative strength of the
    penalty do not depend on the batch count or on N (only the number of steps does).
    Its one inconsistency is the last, partial batch of each epoch: ``|b| < batch_size``
    samples get a full step, so their cross-entropy is over-weighted and the epoch's
    penalty is counted ``ceil(N / batch_size)`` instead of ``N / batch_size`` times.

    * ``"sample"`` (default): each sample carries its share of the penalty, the step loss
      is ``(1 / batch_size) Σ_{i∈b} [CE_i + λ1 Σ|W| + λ2 ‖W‖_F]``; summed over an epoch
      the gradients are exactly ``(N / batch_size) ∇J``, partial batch included. On full
      batches it is identical to NeuroX.
    * ``"neurox"``: step loss ``mean_{i∈b} CE_i + λ1 Σ|W| + λ2 ‖W‖_F`` on every batch.

    So the two coincide bit for bit when ``batch_size`` divides N and otherwise differ
    only through the last batch of each epoch (tested). NeuroX also never shuffles
    (``shuffle=False`` reproduces that) and trains under fp16 autocast on GPUs (not here).

Baselines
    The majority-class baseline (most frequent training label) is always reported. With
    ``words_*`` given, a control task (Hewitt & Liang 2019) is trained with identical
    settings: every word *type* gets a label drawn once, with a seed, from the empirical
    training label distribution (:func:`control_labels`), and ``selectivity = accuracy −
    control accuracy`` per split.

Neuron rankings
    :func:`get_top_neurons` follows NeuroX: per class, neurons sorted by ``|W[c]|``
    descending are taken until their cumulative mass reaches ``percentage`` of the class's
    total (the neuron that crosses it included); the result is the union over classes.

References
----------
Dalvi et al. (2019), "What Is One Grain of Sand in the Desert?", AAAI (probe, elastic net,
weight-mass ranking); Hewitt & Liang (2019), "Designing and Interpreting Probes with
Control Tasks", EMNLP; Dalvi et al. (2020), EMNLP (the redundancy protocol).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "ProbeResult",
    "train_probe",
    "control_labels",
    "lexical_baseline",
    "get_top_neurons",
    "neuron_ordering",
    "word_activations",
    "PENALTY_SCALINGS",
]

PENALTY_SCALINGS = ("sample", "neurox")
SPLITS = ("train", "dev", "test")


# --------------------------------------------------------------------------- rankings
def get_top_neurons(weights, percentage: float) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Neurons holding ``percentage`` of each class's absolute weight mass (NeuroX semantics).

    Parameters
    ----------
    weights : array-like of shape (n_classes, n_neurons)
        Probe weights (signed; absolute values are used).
    percentage : float
        In [0, 1]; 0 keeps one neuron per class (the largest), 1 keeps every neuron up to
        the one completing the mass.

    Returns
    -------
    overall : ndarray of int64
        Union over classes, ascending (NeuroX returns it in set order).
    per_class : dict of int to ndarray of int64
        Class index → its top neurons, largest weight first.

    References
    ----------
    Dalvi et al. (2019), Sec. 3.2; NeuroX ``linear_probe.get_top_neurons``.
    """
    W = np.abs(np.asarray(weights, dtype=np.float64))
    if W.ndim != 2:
        raise ValueError(f"`weights` must have shape (n_classes, n_neurons), got {W.shape}")
    if not 0.0 <= percentage <= 1.0:
        raise ValueError(f"`percentage` must lie in [0, 1], got {percentage!r}")
    per_class = {}
    for c in range(W.shape[0]):
        # Stable sort of the negated weights: ties keep the lower neuron index first.
        order = np.argsort(-W[c], kind="stable")
        cum = np.cumsum(W[c, order])
        reached = np.flatnonzero(cum >= cum[-1] * percentage)
        n_keep = W.shape[1] if reached.size == 0 else int(reached[0]) + 1
        per_class[c] = order[:n_keep].astype(np.int64)
    overall = np.unique(np.concatenate(list(per_class.values()))).astype(np.int64)
    return overall, per_class


def neuron_ordering(weights, search_stride: int = 100) -> tuple[np.ndarray, list[int]]:
    """Global neuron ordering by weight mass (NeuroX ``get_neuron_ordering``).

    Top neurons at masses ``0, 1/stride, ..., 1`` are appended in turn (neurons new at a
    step in ascending index order); ``cutoffs[k]`` is the length after step ``k``.
    Neurons never selected (zero weights) are not in the ordering, as in NeuroX.
    """
    seen: set[int] = set()
    ordering: list[int] = []
    cutoffs = []
    for p in range(search_stride + 1):
        top, _ = get_top_neurons(weights, p / search_stride)
        new = sorted(set(top.tolist()) - seen)
        ordering += new
        seen.update(new)
        cutoffs.append(len(ordering))
    return np.asarray(ordering, dtype=np.int64), cutoffs


# --------------------------------------------------------------------------- control task
def control_labels(
    words_train: Sequence[str],
    y_train,
    *other_words: Sequence[str],
    seed: int = 0,
    lowercase: bool = False,
) -> tuple[np.ndarray, ...]:
    """Control-task labels (Hewitt & Liang 2019): one random label per word type.

    Every distinct word type of all splits gets a label drawn independently from the
    empirical distribution of ``y_train`` (over tokens), with
    ``np.random.default_rng(seed)``; every token then gets its type's label.

    Parameters
    ----------
    words_train : sequence of str, length n_train
        The word of every training row.
    y_train : array-like of int, shape (n_train,)
        Real labels (only their distribution is used).
    *other_words : sequence of str
        Words of further splits (dev, test) labelled with the same type → label map.
    seed : int
    lowercase : bool
        Fold case before grouping tokens into types.

    Returns
    -------
    tuple of ndarray of int64
        Control labels for ``words_train``, then for each of ``other_words``.
    """
    y_train = np.asarray(y_train)
    if len(words_train) != y_train.shape[0]:
        raise ValueError(
            f"`words_train` and `y_train` must have the same length, got "
            f"{len(words_train)} and {y_train.shape[0]}"
        )
    splits = [list(words_train), *[list(w) for w in other_words]]
    if lowercase:
        splits = [[w.lower() for w in s] for s in splits]
    values, counts = np.unique(y_train, return_counts=True)
    types = sorted(set().union(*[set(s) for s in splits]))
    rng = np.random.default_rng(seed)
    drawn = rng.choice(values, size=len(types), p=counts / counts.sum())
    label_of = dict(zip(types, drawn.tolist(), strict=True))
    return tuple(np.array([label_of[w] for w in s], dtype=np.int64) for s in splits)


def lexical_baseline(
    words_train: Sequence[str], y_train, words_test: Sequence[str], y_test
) -> float:
    """Accuracy of labelling each word with its type's most frequent training label.

    The ceiling of what word identity alone gives: a test word whose type never occurs in
    training gets the most frequent training label overall (ties: the smallest label).
    A probe below this baseline uses its features no better than a lookup table of word
    types, which is also what the control task of :func:`control_labels` rewards.

    Parameters
    ----------
    words_train, words_test : sequence of str
        The word of every row.
    y_train, y_test : array-like of int
        Labels of the same rows.

    Returns
    -------
    float
        Accuracy on the test rows.
    """
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    if len(words_train) != y_train.shape[0] or len(words_test) != y_test.shape[0]:
        raise ValueError(
            "`words_train`/`y_train` and `words_test`/`y_test` must pair up, got lengths "
            f"{len(words_train)}/{y_train.shape[0]} and {len(words_test)}/{y_test.shape[0]}"
        )
    if y_test.shape[0] == 0 or y_train.shape[0] == 0:
        raise ValueError("`y_train` and `y_test` must not be empty")
    counts: dict[str, dict[int, int]] = {}
    for w, label in zip(words_train, y_train.tolist(), strict=True):
        row = counts.setdefault(w, {})
        row[label] = row.get(label, 0) + 1
    values, totals = np.unique(y_train, return_counts=True)
    fallback = int(values[np.argmax(totals)])
    best = {w: min(row, key=lambda k: (-row[k], k)) for w, row in counts.items()}
    pred = np.array([best.get(w, fallback) for w in words_test])
    return float(np.mean(pred == y_test))


# --------------------------------------------------------------------------- result
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
        Mean step loss of every epoch.
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
        W = torch.from_numpy(self.weights)
        b = torch.from_numpy(self.bias)
        pred = _predict(
            _as_tensor(X, torch.device("cpu")),
            W,
            b,
            None if self.mean is None else torch.from_numpy(self.mean),
            None if self.scale is None else torch.from_numpy(self.scale),
            batch_size,
        )
        return self.classes[pred.numpy()]


# --------------------------------------------------------------------------- training
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
    """One minibatch's loss under ``penalty_scaling`` (module docstring)."""
    penalty = l1 * W.abs().sum() + l2 * torch.linalg.vector_norm(W)
    if penalty_scaling == "neurox":
        return F.cross_entropy(logits, yb) + penalty
    n_b = yb.shape[0]
    return (F.cross_entropy(logits, yb, reduction="sum") + n_b * penalty) / batch_size


def _fit(X, y, n_classes, *, l1, l2, epochs, batch_size, lr, scaling, shuffle, seed, mean, scale):
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
        Adam with torch defaults otherwise (FORMULAS §4: 10, 128, 1e-3).
    penalty_scaling : {"sample", "neurox"}
        How the penalty enters each step (module docstring).
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

    if penalty_scaling not in PENALTY_SCALINGS:
        raise ValueError(
            f"`penalty_scaling` must be one of {PENALTY_SCALINGS}, got {penalty_scaling!r}"
        )
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        if int(value) < 1:
            raise ValueError(f"`{name}` must be a positive integer, got {value!r}")
    if l1 < 0 or l2 < 0:
        raise ValueError(f"`l1` and `l2` must be >= 0, got {l1!r} and {l2!r}")
    dev = resolve_device(device)
    splits = {"train": (X_train, y_train), "dev": (X_dev, y_dev), "test": (X_test, y_test)}
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
    if classes is None:
        classes = np.unique(np.concatenate([y for _, y in data.values()]))
    classes = np.asarray(classes)
    if np.unique(classes).size != classes.size:
        raise ValueError("`classes` has duplicate labels")
    sorter = np.argsort(classes, kind="stable")
    for name, (_, y) in data.items():
        unknown = np.setdiff1d(np.unique(y), classes)
        if unknown.size:
            raise ValueError(f"`y_{name}` has labels {unknown[:5].tolist()} not in `classes`")

    def class_index(y: np.ndarray) -> torch.Tensor:
        pos = sorter[np.searchsorted(classes, y, sorter=sorter)]
        return torch.as_tensor(pos, dtype=torch.long, device=dev)

    Xt = {name: _as_tensor(X, dev) for name, (X, _) in data.items()}
    mean = scale = None
    if standardize:
        mean, std = _column_stats(Xt["train"])
        scale = torch.where(std > 0, std, torch.ones_like(std)).float()
        mean = mean.float()
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

    def run(labels: dict[str, np.ndarray]) -> ProbeResult:
        yt = {k: class_index(y) for k, y in labels.items()}
        W, b, losses = _fit(
            Xt["train"],
            yt["train"],
            len(classes),
            l1=l1,
            l2=l2,
            epochs=int(epochs),
            batch_size=int(batch_size),
            lr=lr,
            scaling=penalty_scaling,
            shuffle=shuffle,
            seed=seed,
            mean=mean,
            scale=scale,
        )
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
        )

    result = run({name: y for name, (_, y) in data.items()})
    if words_train is not None:
        words = {"train": words_train, "dev": words_dev, "test": words_test}
        missing = [k for k in data if words[k] is None]
        if missing:
            raise ValueError(f"a control task needs the words of every split; missing {missing}")
        for k in data:
            if len(words[k]) != data[k][1].shape[0]:
                raise ValueError(
                    f"`words_{k}` has {len(words[k])} words but `y_{k}` {data[k][1].shape[0]}"
                )
        names = list(data)
        ctrl = control_labels(
            words["train"],
            data["train"][1],
            *[words[k] for k in names[1:]],
            seed=seed if control_seed is None else control_seed,
        )
        control = run(dict(zip(names, ctrl, strict=True)))
        result.control = control
        result.control_accuracy = dict(control.accuracy)
        result.selectivity = {k: result.accuracy[k] - control.accuracy[k] for k in names}
    return result


# --------------------------------------------------------------------------- activations
def word_activations(
    model,
    sentences: Sequence[Sequence],
    layers="all",
    *,
    subword: str = "last",
    batch_size: int = 32,
    max_length: int | None = None,
    device="auto",
    dtype=None,
    lowercase: bool = False,
    progress: bool = False,
    zoo_profile: str = "default",
) -> tuple[np.ndarray, dict[str, int]]:
    """One activation row per word, all requested layers concatenated (probe input).

    A thin wrapper over :func:`lmsim.extract.extract_activations` with ``pooling="word"``:
    a word's vector is its last subword's (``subword="last"``, as NeuroX) for encoders and
    causal models alike; special tokens belong to no word.

    Parameters
    ----------
    model : str, (model, tokenizer) pair, or mapping of one name to such a pair
        A name :func:`lmsim.models.load_model` knows, or a loaded Hugging Face model with
        its fast tokenizer (block names then start with ``"model"`` or the mapping's key).
    sentences : sequence of sequence of str or of (word, tag)
        Pre-split sentences; ``(word, tag)`` pairs (:func:`lmsim.brown.read_brown`) are
        reduced to their words.
    layers : "all", int or sequence of int
        Hidden-state layers (0 = embeddings), as in ``extract_activations``.
    subword : {"last", "first", "mean"}
    batch_size, max_length, device, dtype, lowercase, progress
        Passed to ``extract_activations``.
    zoo_profile : str, default="default"
        Which zoo build ``"zoo/<name>"`` names load (``lmsim.zoo.PROFILES``); without it a
        smoke run would silently load (or build) the default zoo.

    Returns
    -------
    X : ndarray of float32, shape (n_words, n_neurons)
        Rows: the words of ``sentences[0]``, then ``sentences[1]``, ...
    dims : dict of str to int
        ``{"{model}/layer.{i}": width}`` in column order (for
        :func:`lmsim.cluster.kept_per_block` and layer subsets).
    """
    from lmsim.extract import extract_activations

    if isinstance(model, str):
        models = [model]
    elif isinstance(model, Mapping):
        if len(model) != 1:
            raise ValueError(f"`model` must name one model, got {len(model)}")
        models = dict(model)
    elif isinstance(model, (tuple, list)) and len(model) == 2:
        models = {"model": tuple(model)}
    else:
        raise TypeError(
            "`model` must be a model name, a (model, tokenizer) pair or {name: (model, tokenizer)}"
        )
    texts = [
        [w[0] if isinstance(w, (tuple, list)) else w for w in sentence] for sentence in sentences
    ]
    acts = extract_activations(
        models,
        texts,
        layers=layers,
        pooling="word",
        subword=subword,
        max_length=max_length,
        batch_size=batch_size,
        device=device,
        dtype=dtype,
        lowercase=lowercase,
        progress=progress,
        zoo_profile=zoo_profile,
    )

    def layer_index(name: str) -> int:
        return int(name.rsplit(".", 1)[1])

    names = sorted(acts, key=layer_index)
    dims = {name: int(acts[name].shape[1]) for name in names}
    X = np.concatenate([acts.pop(name) for name in names], axis=1)
    return X, dims
