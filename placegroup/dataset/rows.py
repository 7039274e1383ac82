"""The reader both data sets make: each row of a float32 matrix as ``(features, [target])``."""
from __future__ import annotations

from typing import Callable

import numpy as np


def row_reader(load: Callable[[], tuple], which: int) -> Callable:
    """A zero-argument reader over ``load()[which]``, a matrix whose last column is the target.

    ``load`` is called by each pass (the data sets cache it), so making the reader costs nothing.
    """
    def reader():
        rows: np.ndarray = load()[which]
        for row in rows:  # copies, so a caller that edits a sample cannot corrupt the cache
            yield row[:-1].copy(), row[-1:].copy()

    return reader
