"""Numeric gradients for the tests: float64 central differences, element by element."""
from __future__ import annotations

import numpy as np


def central_differences(f, base: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """The gradient of the scalar function ``f`` at ``base``: (f(x + eps) - f(x - eps)) / 2eps,
    one element of ``base`` at a time."""
    numeric = np.zeros_like(base, dtype=np.float64)
    for k in np.ndindex(base.shape):
        up, down = base.copy(), base.copy()
        up[k] += eps
        down[k] -= eps
        numeric[k] = (f(up) - f(down)) / (2 * eps)
    return numeric
