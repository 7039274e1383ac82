"""Fluid 1.8's ``fluid.io.BatchSampler``: the index lists of a map-style DataLoader's batches."""
from __future__ import annotations

import numpy as np

from placegroup.dataloader.dataset import Dataset

__all__ = ["BatchSampler"]


class BatchSampler:
    """Yields lists of ``batch_size`` sample indices, over ``range(len(dataset))`` or over
    ``indices``, in order or shuffled; the last list may be shorter unless ``drop_last``.

    Args:
        dataset: a ``fluid.io.Dataset`` (its length gives the indices); or None with ``indices``.
        indices: a list or tuple of indices, when ``dataset`` is None.
        shuffle: shuffle the indices at the start of each pass, in place, with numpy's global
            generator (``np.random.seed`` fixes the order), as Fluid 1.8.
        batch_size: indices per list, a positive int.
        drop_last: drop a last list shorter than ``batch_size``.

    Raises:
        ValueError: neither or both of ``dataset`` and ``indices``, or a ``batch_size`` that is
            not a positive int.
        TypeError: ``dataset`` is no Dataset, ``indices`` no list or tuple, ``shuffle`` or
            ``drop_last`` no bool.

    Example::

        list(BatchSampler(indices=list(range(7)), batch_size=3))  # [[0, 1, 2], [3, 4, 5], [6]]

    Thread-safety: iterate one from one thread at a time (a shuffle reorders ``indices``).
    """

    def __init__(self, dataset=None, indices=None, shuffle: bool = False, batch_size: int = 1,
                 drop_last: bool = False) -> None:
        if dataset is None:
            if indices is None:
                raise ValueError("either dataset or indices should be set")
            if not isinstance(indices, (list, tuple)):
                raise TypeError(f"indices should be a list or tuple, but got {type(indices)}")
            self.indices = indices
        else:
            if not isinstance(dataset, Dataset):
                raise TypeError("dataset should be an instance of paddle.io.Dataset")
            if indices is not None:
                raise ValueError("should not set both dataset and indices")
            self.indices = list(range(len(dataset)))
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer, but got {batch_size}")
        if not isinstance(shuffle, bool):
            raise TypeError(f"shuffle should be a boolean value, but got {type(shuffle)}")
        if not isinstance(drop_last, bool):
            raise TypeError(f"drop_last should be a boolean value, but got {type(drop_last)}")
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last

    def __iter__(self):
        if self.shuffle:
            np.random.shuffle(self.indices)  # in place, as Fluid (a tuple of indices cannot be)
        batch = []
        for idx in self.indices:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.indices) + (0 if self.drop_last else self.batch_size - 1)
        return n // self.batch_size
