"""The converged probe (L-BFGS-B) against naive references: sklearn and the optimality
conditions of the elastic-net objective computed in numpy."""

import numpy as np
import pytest

from lmsim.probe import train_probe, tune_penalty


def _data(n=600, d=12, k=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    W = rng.normal(size=(k, d))
    y = (X @ W.T + 2 * rng.gumbel(size=(n, k))).argmax(1)
    return X, y


def _naive_gradient(X, y, W, b):
    """Gradient of the mean cross-entropy in float64, written out."""
    X = X.astype(np.float64)
    z = X @ W.T + b
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    return p.T @ X / len(y), p.mean(0)


def test_lbfgs_matches_sklearn_with_the_equivalent_squared_penalty():
    """λ2 ‖W‖_F has the optimum of (α / 2) ‖W‖²_F with α = λ2 / ‖W*‖_F (same stationarity
    condition); sklearn minimises C Σ CE + ½ ‖W‖², i.e. α = 1 / (C n)."""
    sklearn = pytest.importorskip("sklearn.linear_model")
    X, y = _data()
    lam = 0.01
    r = train_probe(X, y, solver="lbfgs", l1=0.0, l2=lam, gtol=1e-5, max_iter=2000)
    assert r.converged
    alpha = lam / np.linalg.norm(r.weights.astype(np.float64))
    ref = sklearn.LogisticRegression(C=1 / (alpha * len(y)), tol=1e-10, max_iter=5000)
    ref.fit(X.astype(np.float64), y)
    np.testing.assert_allclose(r.weights, ref.coef_, atol=2e-3 * np.abs(ref.coef_).max())
    logits = X @ r.weights.T + r.bias
    ours = np.exp(logits - logits.max(1, keepdims=True))
    ours /= ours.sum(1, keepdims=True)
    np.testing.assert_allclose(ours, ref.predict_proba(X.astype(np.float64)), atol=2e-3)


@pytest.mark.parametrize("lam", [1e-3, 3e-2])
def test_lbfgs_solution_meets_the_elastic_net_optimality_conditions(lam):
    """Subgradient conditions of J: for w ≠ 0, g + λ1 sign(w) + λ2 w / ‖W‖ = 0; for w = 0,
    |g| <= λ1 (here ‖W‖ > 0); and the bias gradient is 0."""
    X, y = _data(seed=1)
    gtol = 1e-5
    r = train_probe(X, y, solver="lbfgs", l1=lam, l2=lam, gtol=gtol, max_iter=3000)
    assert r.converged and r.gradient <= gtol
    W = r.weights.astype(np.float64)
    gW, gb = _naive_gradient(X, y, W, r.bias.astype(np.float64))
    gW = gW + lam * W / np.linalg.norm(W)
    nz = W != 0
    assert nz.any() and (~nz).any()  # the L1 term zeroes some weights, not all
    np.testing.assert_allclose(gW[nz] + lam * np.sign(W[nz]), 0, atol=3e-5)
    assert np.all(np.abs(gW[~nz]) <= lam + 3e-5)
    np.testing.assert_allclose(gb, 0, atol=3e-5)


def test_lbfgs_needs_no_seed_and_reports_non_convergence():
    X, y = _data(seed=2)
    a = train_probe(X, y, solver="lbfgs", seed=0, l1=1e-3, l2=1e-3)
    b = train_probe(X, y, solver="lbfgs", seed=7, l1=1e-3, l2=1e-3)
    np.testing.assert_array_equal(a.weights, b.weights)
    short = train_probe(X, y, solver="lbfgs", l1=1e-3, l2=1e-3, gtol=1e-9, max_iter=3)
    assert short.converged is False and short.n_epochs <= 3
    assert "pseudo-gradient" in a.stopping_rule and "0.0001" in a.stopping_rule
    assert short.stopped_by == short.stop_reason == "max_iter"
    from dataclasses import replace

    adam = replace(short, stop_reason=None)  # Adam records no reason: its rule or the epochs
    assert replace(adam, converged=True).stopped_by == "rule"
    assert adam.stopped_by == "max epochs"
    with pytest.raises(ValueError, match="solver"):
        train_probe(X, y, solver="sgd")


def test_lbfgs_curves_and_warm_start():
    X, y = _data(seed=3)
    r = train_probe(
        X[:400], y[:400], X[400:], y[400:], solver="lbfgs", curves=True, l1=1e-3, l2=1e-3
    )
    assert len(r.curves["train"]) == len(r.curves["dev"]) == len(r.objective) >= 1
    assert r.curves["train"][-1] == r.accuracy["train"]
    warm = train_probe(X[:400], y[:400], solver="lbfgs", l1=1e-3, l2=1e-3, init=(r.weights, r.bias))
    assert warm.converged and warm.n_epochs <= 2


def test_tune_penalty_picks_the_best_dev_accuracy():
    X, y = _data(n=800, d=40, seed=4)
    best, table = tune_penalty(X[:300], y[:300], X[300:], y[300:], [1e-1, 1e-3, 1e-2])
    assert list(table["lambda"]) == [1e-1, 1e-2, 1e-3]
    assert table.converged.all()
    assert best == table["lambda"][table.dev.idxmax()]
    with pytest.raises(ValueError, match="positive"):
        tune_penalty(X, y, X, y, [0.0])
