"""scikit-learn's diabetes set, with the reader interface of ``uci_housing``.

442 patients, 10 baseline features (age, sex, bmi, bp and six blood serum measurements) and a
measure of disease progression one year later (Efron et al., 2004, "Least Angle Regression").
The data ship inside the ``scikit-learn`` package (``sklearn.datasets.load_diabetes``), so
nothing is downloaded; scikit-learn is in placegroup's ``examples`` and ``test`` extras.

NOTE(diabetes-normalization): the raw (unscaled) values are loaded and, over all 442 rows
(train and test together, as ``uci_housing`` does):

* each feature column becomes ``(x - mean) / std`` (population std), so every feature has
  mean 0 and variance 1. scikit-learn's own scaled copy divides by ``std * sqrt(442)``
  instead, which makes plain SGD crawl;
* the target is standardized the same way, ``(y - mean) / std`` with ``mean`` ≈ 152.1 and
  ``std`` ≈ 77.0 (``target_stats()`` returns both), so a model that predicts the mean has a
  mean squared error of exactly 1 and a least-squares fit about 0.48 on the training rows.
  Multiply a prediction by ``std`` and add ``mean`` to get back the original units.

The split is deterministic: the first ``int(442 * 0.8) = 353`` rows, in scikit-learn's order,
are ``train()``, the remaining 89 are ``test()``.

Example::

    import placegroup as paddle
    for features, target in paddle.dataset.diabetes.train()():
        ...  # features.shape == (10,), target.shape == (1,), both float32

Thread-safety: the normalized arrays are computed once and cached; readers only read them.
"""
from __future__ import annotations

import functools

import numpy as np

from placegroup.dataset.rows import row_reader

__all__ = ["feature_names", "target_stats", "train", "test"]

feature_names = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]

_RATIO = 0.8


@functools.lru_cache(maxsize=1)
def _load() -> tuple[np.ndarray, np.ndarray, float, float]:
    try:
        from sklearn.datasets import load_diabetes
    except ImportError as e:
        raise ImportError("placegroup.dataset.diabetes needs scikit-learn, which bundles the data: "
                          "pip install 'placegroup[examples]' (or scikit-learn)") from e
    raw = load_diabetes(scaled=False)
    x = np.asarray(raw.data, dtype=np.float64)
    y = np.asarray(raw.target, dtype=np.float64)
    # See NOTE(diabetes-normalization).
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    y_mean, y_std = float(y.mean()), float(y.std())
    y = (y - y_mean) / y_std
    data = np.concatenate([x, y[:, None]], axis=1).astype(np.float32)
    offset = int(data.shape[0] * _RATIO)
    return data[:offset], data[offset:], y_mean, y_std


def target_stats() -> tuple[float, float]:
    """``(mean, std)`` of the raw target over all rows: ``raw = standardized * std + mean``."""
    _, _, mean, std = _load()
    return mean, std


def _reader(which: int):
    return row_reader(_load, which)


def train():
    """A reader over the 353 training rows.

    Returns:
        A zero-argument reader yielding ``(features float32[10], [target] float32[1])``.

    Raises:
        ImportError: (when the reader is called) if scikit-learn is not installed.
    """
    return _reader(0)


def test():
    """A reader over the 89 test rows.

    Returns:
        A zero-argument reader yielding ``(features float32[10], [target] float32[1])``.
    """
    return _reader(1)
