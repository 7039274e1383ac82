"""UCI Boston housing, as Paddle 1.x's ``paddle.dataset.uci_housing`` gives it.

506 houses, 13 features and the median price (in $1000s). ``train()`` gives the first 80%
of the rows (404), ``test()`` the rest (102), each sample ``(features float32[13],
[price] float32[1])``.

NOTE(uci-normalization): exactly Paddle 1.x's ``load_data``: the whole file is read as float64,
each feature column ``i`` becomes ``(x - avg_i) / (max_i - min_i)`` with the average, maximum
and minimum taken over *all* rows (train and test together), the price is left as it is, and
the first ``int(rows * 0.8)`` rows are the training set, in file order (no shuffling). The
values are cast to float32 only when a sample is yielded (Paddle yielded float64; placegroup's
data layers are float32).

The file is read from a local path only; placegroup never downloads anything. It is looked up
in this order:

1. ``$PLACEGROUP_DATA_HOME/uci_housing/housing.data``
2. ``~/.cache/paddle/dataset/uci_housing/housing.data`` (where Paddle 1.x downloaded it)

Example::

    import placegroup as paddle
    for features, price in paddle.dataset.uci_housing.train()():
        ...  # features.shape == (13,), price.shape == (1,)

Thread-safety: the parsed file is cached in a module-level dict; readers only read it.
"""
from __future__ import annotations

import os

import numpy as np

from placegroup import config
from placegroup.dataset.rows import row_reader

__all__ = ["feature_names", "data_file", "train", "test", "predict_reader", "SOURCE_URL"]

# Paddle 1.x's list, including its odd last name for the target column (the price).
feature_names = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX",
                 "PTRATIO", "B", "LSTAT", "convert"]

SOURCE_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/housing/housing.data"
# What Paddle 1.8 downloads (the same file, from Paddle's mirror).
URL = "http://paddlemodels.bj.bcebos.com/uci_housing/housing.data"
MD5 = "d4accdce7a25600298819f8e28e8d593"
_FEATURE_NUM = 14
_RATIO = 0.8
_FILE = os.path.join("uci_housing", "housing.data")

# (path, mtime_ns, size) -> (train rows, test rows), so a replaced file is re-read.
_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def _candidates() -> list[tuple[str, str]]:
    """(path, where it comes from) in lookup order."""
    out = []
    home = config.get("PLACEGROUP_DATA_HOME")
    if home:
        out.append((os.path.join(home, _FILE), "$PLACEGROUP_DATA_HOME"))
    out.append((os.path.join(os.path.expanduser("~"), ".cache", "paddle", "dataset", _FILE),
                "Paddle's dataset cache"))
    return out


def data_file() -> str:
    """The path of the housing file that ``train()``/``test()`` will read.

    Raises:
        FileNotFoundError: saying where it looked, where to put the file and where to get it.
    """
    cands = _candidates()
    for path, _ in cands:
        if os.path.isfile(path):
            return path
    looked = "\n".join(f"  - {p}  ({why})" for p, why in cands)
    if not config.is_set("PLACEGROUP_DATA_HOME"):
        looked += "\n  - $PLACEGROUP_DATA_HOME/uci_housing/housing.data  (not set)"
    raise FileNotFoundError(
        f"uci_housing: the UCI housing data file was not found. Looked in:\n{looked}\n"
        f"placegroup never downloads data. Get housing.data (506 rows of 14 whitespace-separated "
        f"numbers) from {SOURCE_URL} (Paddle 1.8 downloads it from {URL}, "
        f"md5 {MD5}) and put it at one of the paths above, e.g.\n"
        f"  mkdir -p $PLACEGROUP_DATA_HOME/uci_housing && "
        f"cp housing.data $PLACEGROUP_DATA_HOME/uci_housing/")


def _load(path: str) -> tuple[np.ndarray, np.ndarray]:
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    with open(path) as f:
        text = f.read()
    try:
        flat = np.array(text.split(), dtype=np.float64)
    except ValueError as e:
        raise ValueError(f"uci_housing: {path} is not a file of whitespace-separated numbers: "
                         f"{e}") from None
    if flat.size == 0 or flat.size % _FEATURE_NUM:
        raise ValueError(f"uci_housing: {path} holds {flat.size} numbers, which is not a whole "
                         f"number of rows of {_FEATURE_NUM} (13 features and the price); is it "
                         f"housing.data from {SOURCE_URL}?")
    data = flat.reshape(-1, _FEATURE_NUM)
    # See NOTE(uci-normalization): statistics over the whole file, Paddle's formula.
    maximums, minimums = data.max(axis=0), data.min(axis=0)
    avgs = data.sum(axis=0) / data.shape[0]
    feats = data[:, :-1]
    span = maximums[:-1] - minimums[:-1]
    if np.any(span == 0):
        const = [feature_names[i] for i in np.flatnonzero(span == 0)]
        raise ValueError(f"uci_housing: {path}: features {const} are constant, so (max - min) is 0")
    data[:, :-1] = (feats - avgs[:-1]) / span
    offset = int(data.shape[0] * _RATIO)
    split = (data[:offset].astype(np.float32), data[offset:].astype(np.float32))
    _CACHE.clear()  # keep one file's worth
    _CACHE[key] = split
    return split


def _reader(which: int):
    path = data_file()  # fail where the reader is made, naming the paths
    return row_reader(lambda: _load(path), which)


def train():
    """A reader over the training rows (the first 80% of the file).

    Returns:
        A zero-argument reader yielding ``(features float32[13], [price] float32[1])``.

    Raises:
        FileNotFoundError: when the file is in none of the places listed in the module doc.
    """
    return _reader(0)


def test():
    """A reader over the test rows (the last 20% of the file).

    Returns:
        A zero-argument reader yielding ``(features float32[13], [price] float32[1])``.

    Raises:
        FileNotFoundError: when the file is in none of the places listed in the module doc.
    """
    return _reader(1)


def predict_reader():
    """Paddle's one-sample tuple for inference: ``(features of the first test row,)``.

    Raises:
        FileNotFoundError: when the file is in none of the places listed in the module doc.
    """
    return (next(_reader(1)())[0],)
