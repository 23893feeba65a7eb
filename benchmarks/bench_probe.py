"""Elastic-net probe on ~10k neurons: lmsim vs NeuroX's training loop vs scikit-learn saga.

Synthetic word activations: ``--n-train`` + ``--n-test`` words in sentences of ~20 words,
``--neurons`` features (default 9,984 = 13 × 768, BERT-base with embeddings), 17 classes
(UPOS-sized) whose means differ along a 64-dimensional subspace, plus correlated noise.
All sides use the thesis's settings (λ1 = λ2 = 1e-5, 10 epochs, lr 1e-3) and are timed on
training plus scoring the test split:

* lmsim: :func:`lmsim.probe.train_probe` (batch 128, shuffled, on ``--device``);
* neurox: NeuroX's ``_train_probe`` / ``evaluate_probe`` re-implemented from their
  definitions: ``nn.Linear`` (global-seeded init) on ``--device``, unshuffled batches of
  128 sliced on the host and copied to the device per step (as NeuroX's ``.cuda()`` per
  batch), ``loss.item()`` every step, evaluation in batches of 32 with a Python loop over
  predictions;
* neurox_per_sentence: the same loop with one sentence per step (the per-sentence,
  unbatched regime of NeuroX's sentence-at-a-time pipeline);
* sklearn: ``LogisticRegression(penalty="elasticnet", solver="saga", l1_ratio=0.5)`` with
  ``C = 0.5 / (N λ1)``, so its L1 term equals λ1 Σ|W| on the mean loss (its L2 is the
  squared norm, not the norm: close, not identical), ``--saga-iter`` epochs.

Test accuracies are reported side by side; lmsim and the NeuroX loop are checked to agree
within 2 points.

Distance to the limit (``_common.py``): nominal FLOPs of a side are
``4 · N · D · C`` per training epoch (forward ``2 N D C`` and the weight gradient
``2 N D C`` of a linear layer, ``N`` = ``--n-train`` words, ``D`` neurons, ``C`` = 17
classes; the input gradient, which would make it the usual ``6 N D C``, is not computed
because the activations do not require grad) times the epochs (10; ``n_iter`` for saga,
whose per-sample gradient and update are the same ``4 D C`` per word), plus
``2 · N_test · D · C`` for scoring. Penalties and Adam updates (``O(D C)`` per step) are
not counted. The torch sides run in float32 and are compared with the float32 GEMM limit
(``torch.mm``, on CUDA the device's); saga runs in its input's dtype (float32 here) on the
CPU. lmsim and the two NeuroX loops alternate, best of ``--repeats``; saga, an order of
magnitude slower, runs once (``"repeats": 1`` and why in the JSON).

Usage::

    python benchmarks/bench_probe.py                                   # full size
    python benchmarks/bench_probe.py --n-train 4000 --n-test 1000 --neurons 1024   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from _common import (
    add_common_args,
    alternate,
    fraction,
    machine_limits,
    record,
    remeasure,
    write_result,
)
from torch import nn

import lmsim
from lmsim._runtime import resolve_device
from lmsim.probe import train_probe

L1 = L2 = 1e-5
EPOCHS, BATCH, LR = 10, 128, 1e-3
N_CLASSES, RANK, SENT_LEN = 17, 64, 20


def synthetic(n: int, d: int, seed: int):
    """Float32 activations ``(n, d)``, labels with a skewed (POS-like) distribution."""
    rng = np.random.default_rng([seed, 0])
    basis = (rng.standard_normal((RANK, d)) / np.sqrt(RANK)).astype(np.float32)
    centres = rng.standard_normal((N_CLASSES, RANK)).astype(np.float32) * 0.35
    prior = rng.dirichlet(np.full(N_CLASSES, 0.7))
    rng = np.random.default_rng([seed, 1])
    y = rng.choice(N_CLASSES, size=n, p=prior)
    latent = centres[y] + rng.standard_normal((n, RANK), dtype=np.float32)
    X = latent @ basis
    X += 0.5 * rng.standard_normal((n, d), dtype=np.float32)
    return X.astype(np.float32, copy=False), y.astype(np.int64)


# --------------------------------------------------------------------------- NeuroX, naively
def _batches(X, y, size):
    start = 0
    while start < X.shape[0]:
        yield X[start : start + size], y[start : start + size]
        start += size


def _sentences(X, y, length):
    yield from _batches(X, y, length)


def neurox_train(X, y, seed, per_sentence=False, epochs=EPOCHS, device="cpu"):
    torch.manual_seed(seed)
    probe = nn.Linear(X.shape[1], int(y.max()) + 1).to(device)
    optimizer = torch.optim.Adam(probe.parameters(), lr=LR)
    criterion = nn.CrossEntropyLoss()
    X_t, y_t = torch.from_numpy(X), torch.from_numpy(y)
    for _ in range(epochs):
        avg_loss = 0.0
        gen = _sentences(X_t, y_t, SENT_LEN) if per_sentence else _batches(X_t, y_t, BATCH)
        for inputs, labels in gen:
            inputs, labels = inputs.float().to(device), labels.to(device)
            optimizer.zero_grad()
            outputs = probe(inputs)
            weights = list(probe.parameters())[0]
            loss = (
                criterion(outputs, labels)
                + L1 * torch.abs(weights).sum()
                + L2 * torch.sqrt(torch.pow(weights, 2).sum())
            )
            loss.backward()
            optimizer.step()
            avg_loss += loss.item()
    return probe


def neurox_evaluate(probe, X, y):
    y_pred = []
    device = probe.weight.device
    with torch.no_grad():
        for inputs, _labels in _batches(torch.from_numpy(X), torch.from_numpy(y), 32):
            _, predicted = torch.max(probe(inputs.to(device)).data, 1)
            for p in predicted.cpu().numpy():
                y_pred.append(p)
    return float(np.mean(np.array(y_pred) == y))


def flops(n_train: int, n_test: int, d: int, epochs: int) -> float:
    """Nominal FLOPs: ``4 N D C`` per epoch (forward + weight gradient) + ``2 N_test D C``."""
    return 4.0 * n_train * d * N_CLASSES * epochs + 2.0 * n_test * d * N_CLASSES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-train", type=int, default=20000)
    parser.add_argument("--n-test", type=int, default=5000)
    parser.add_argument("--neurons", type=int, default=9984)
    parser.add_argument(
        "--device", default="auto", help="torch sides' device (auto: CUDA if present)"
    )
    parser.add_argument("--saga-iter", type=int, default=30)
    parser.add_argument("--skip", nargs="*", default=[], help="sides to skip")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "probe.json"))
    add_common_args(parser)
    args = parser.parse_args()
    threads = lmsim.default_threads() if args.threads is None else args.threads
    device = resolve_device(args.device)
    load_before = os.getloadavg()
    limits = machine_limits(threads, device=str(device))

    X, y = synthetic(args.n_train + args.n_test, args.neurons, args.seed)
    Xtr, ytr, Xte, yte = X[: args.n_train], y[: args.n_train], X[args.n_train :], y[args.n_train :]
    majority = float(np.mean(yte == np.bincount(ytr).argmax()))
    work = flops(args.n_train, args.n_test, args.neurons, EPOCHS)

    def lmsim_side():
        result = train_probe(Xtr, ytr, X_test=Xte, y_test=yte, seed=args.seed, device=device)
        return result.test_acc

    def neurox_side(per_sentence):
        probe = neurox_train(Xtr, ytr, args.seed, per_sentence=per_sentence, device=device)
        return neurox_evaluate(probe, Xte, yte)

    contenders = {"lmsim": lmsim_side}
    for name, per_sentence in (("neurox", False), ("neurox_per_sentence", True)):
        if name not in args.skip:
            contenders[name] = lambda per_sentence=per_sentence: neurox_side(per_sentence)
    sides = {}
    with lmsim.threads(threads):
        # Warm every code path (thread pools, allocator, lazy imports) on a small slice.
        train_probe(Xtr[:512], ytr[:512], epochs=1, device=device)
        neurox_evaluate(
            neurox_train(Xtr[:512], ytr[:512], 0, epochs=1, device=device), Xte[:64], yte[:64]
        )
        runs = alternate(contenders, args.repeats)
        for name, run in runs.items():
            sides[name] = {
                "seconds": run["best_s"],
                "times_s": run["times_s"],
                "repeats": args.repeats,
                "test_acc": run["result"],
                "device": str(device),
            }
        if "sklearn" not in args.skip:
            sides["sklearn"] = sklearn_side(args, Xtr, ytr, Xte, yte)
    limits = remeasure(limits, threads)
    for name, side in sides.items():
        if name == "sklearn":
            nominal = flops(args.n_train, args.n_test, args.neurons, side["n_iter"])
            side.update(fraction(nominal, side["seconds"], limits, side["precision"]))
        else:
            side.update(fraction(work, side["seconds"], limits, "float32", device))
        print(name, {k: v for k, v in side.items() if k != "times_s"}, flush=True)

    if "neurox" in sides:
        gap = abs(sides["lmsim"]["test_acc"] - sides["neurox"]["test_acc"])
        assert gap <= 0.02, f"lmsim and the NeuroX loop disagree by {gap:.3f} accuracy"
    result = {
        "benchmark": "elastic-net probe: lmsim vs NeuroX loop vs sklearn saga",
        "n_train": args.n_train,
        "n_test": args.n_test,
        "n_neurons": args.neurons,
        "n_classes": N_CLASSES,
        "settings": {"l1": L1, "l2": L2, "epochs": EPOCHS, "batch_size": BATCH, "lr": LR},
        "flops_are": "4 N D C per epoch (forward + weight gradient of the linear layer) "
        "+ 2 N_test D C (scoring); penalties and optimiser updates not counted",
        "precision": "float32",
        "majority_test_acc": majority,
        "sides": sides,
        "speedup_vs": {
            k: v["seconds"] / sides["lmsim"]["seconds"] for k, v in sides.items() if k != "lmsim"
        },
        **record(threads, limits, load_before),
        "cuda": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    write_result(args.out, result)
    print(json.dumps(result["speedup_vs"]))


def sklearn_side(args, Xtr, ytr, Xte, yte) -> dict:
    """One timed saga fit + score on the CPU (too slow to alternate)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    C = 0.5 / (args.n_train * L1)
    clf = LogisticRegression(
        penalty="elasticnet", solver="saga", l1_ratio=0.5, C=C, max_iter=args.saga_iter,
        tol=1e-4, random_state=args.seed,
    )  # fmt: skip
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        clf.fit(Xtr, ytr)
    acc = float(clf.score(Xte, yte))
    return {
        "seconds": time.perf_counter() - t0,
        "repeats": 1,
        "why": "saga takes an order of magnitude longer than the torch sides: one run",
        "test_acc": acc,
        "device": "cpu",
        "precision": "float32" if clf.coef_.dtype == np.float32 else "float64",
        "C": C,
        "n_iter": int(np.max(clf.n_iter_)),
        "converged": not any(issubclass(w.category, ConvergenceWarning) for w in caught),
    }


if __name__ == "__main__":
    main()
