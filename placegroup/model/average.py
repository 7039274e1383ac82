"""``fluid.average``: Fluid 1.8's ``WeightedAverage``, the running weighted mean scripts of that
era print per pass (deprecated there in favour of ``fluid.metrics.Accuracy``; kept as it was).

Example::

    avg = fluid.average.WeightedAverage()
    avg.add(value=0.5, weight=32)
    avg.add(value=0.75, weight=32)
    avg.eval()   # 0.625
"""
from __future__ import annotations

import warnings

import numpy as np

__all__ = ["WeightedAverage"]


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) or (
        isinstance(x, np.ndarray) and x.shape == (1,))


class WeightedAverage:
    """``sum(value * weight) / sum(weight)`` over ``add`` calls since the last ``reset``."""

    def __init__(self) -> None:
        warnings.warn("WeightedAverage is deprecated (as in Fluid 1.8); fluid.metrics.Accuracy does the same",
                      DeprecationWarning, stacklevel=2)
        self.reset()

    def reset(self) -> None:
        self.numerator = None
        self.denominator = None

    def add(self, value, weight) -> None:
        """Add ``value`` (a number or a numpy array) with ``weight`` (a number).

        Raises:
            ValueError: a value or weight of another type.
        """
        if not (_is_number(value) or isinstance(value, np.ndarray)):
            raise ValueError(f"WeightedAverage.add: value must be a number or a numpy array, got {value!r}")
        if not _is_number(weight):
            raise ValueError(f"WeightedAverage.add: weight must be a number, got {weight!r}")
        if self.numerator is None:
            self.numerator, self.denominator = value * weight, weight
        else:
            self.numerator = self.numerator + value * weight
            self.denominator = self.denominator + weight

    def eval(self):
        """The weighted mean. Raises ValueError when nothing was added."""
        if self.numerator is None:
            raise ValueError("WeightedAverage.eval: there is no data to be averaged (add some first)")
        return self.numerator / self.denominator
