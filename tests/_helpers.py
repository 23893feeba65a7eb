"""Small helpers shared by the metric tests."""

import numpy as np


def random_orthogonal(d, seed):
    """A Haar-random orthogonal matrix of shape (d, d), seeded."""
    q, r = np.linalg.qr(np.random.default_rng(seed + 100).normal(size=(d, d)))
    return q * np.sign(np.diag(r))
