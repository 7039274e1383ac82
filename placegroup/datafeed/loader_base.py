"""What Fluid 1.8's ``fluid.reader`` loaders share, and the loader over a Dataset:
``DataLoaderBase``, ``DatasetLoader`` (``DataLoader.from_dataset``) and
``keep_data_loader_order``.

``GeneratorLoader`` (placegroup/datafeed/data_loader.py) and ``DatasetLoader`` derive from
``DataLoaderBase``: calling a loader gives the loader, and iterating it gives, per step, one
feed per place, a dict var name -> value that ``exe.run(feed=...)`` takes.

Thread-safety: a loader is iterated from one thread.
"""
from __future__ import annotations

import logging

import numpy as np

from placegroup.datafeed.dataset_factory import DatasetBase

__all__ = ["DataLoaderBase", "DatasetLoader", "keep_data_loader_order"]

_keep_order = [True]


def keep_data_loader_order(*args):
    """Get (no argument) or set (one bool) whether a loader feeding several places keeps its
    batches in order, as Fluid 1.8's global switch (True by default).

    placegroup's loaders always hand the places their batches in the source's order (one
    queue, read in order), so the switch is kept and read back but orders nothing differently.

    Raises:
        TypeError: more than one argument, or one that is not a bool.

    Example::

        fluid.reader.keep_data_loader_order(False)
        fluid.reader.keep_data_loader_order()  # False
    """
    if not args:
        return _keep_order[0]
    if len(args) != 1 or not isinstance(args[0], bool):
        raise TypeError(f"keep_data_loader_order takes one bool (or nothing, to read it), got {args!r}")
    _keep_order[0] = args[0]
    return None


class DataLoaderBase:
    """The base class of Fluid's loaders: ``loader()`` is the loader; subclasses define
    ``__iter__`` and ``__next__``."""

    def __init__(self) -> None:
        self._places = None

    def __call__(self):
        return self

    def next(self):
        """The next step's feeds (Python 2's iterator name, as Fluid keeps it)."""
        return self.__next__()

    def __iter__(self):
        raise NotImplementedError()

    def __next__(self):
        raise NotImplementedError()

    @classmethod
    def _check_input_array(cls, item) -> np.ndarray:
        """``item`` as one numpy array.

        Raises:
            TypeError: nested lists of different lengths (Fluid's message and advice).
        """
        try:
            arr = np.asarray(item)
        except ValueError:
            arr = np.empty(0, dtype=object)
        if arr.dtype == object:
            raise TypeError("\n\tFaild to convert input data to a regular ndarray :\n\t* Usually this means the input "
                            "data contains nested lists with different lengths. \n\t* Check the reader function passed "
                            "to 'decorate_batch_generator' to locate the data causes this issue.\n\t* Please consider "
                            "using 'fluid.create_lod_tensor' to convert it to a LoD-Tensor.")
        return arr


def _instances(feed: dict) -> int:
    """How many instances a dataset's feed dict holds (sequences for a LoDTensor)."""
    first = next(iter(feed.values()), None)
    if first is None:
        return 0
    lengths = first.recursive_sequence_lengths() if hasattr(first, "recursive_sequence_lengths") else None
    return len(lengths[0]) if lengths else len(first)


class DatasetLoader(DataLoaderBase):
    """What ``fluid.io.DataLoader.from_dataset(dataset, places, drop_last)`` returns: each step,
    one feed dict per place from the dataset's batches (docs/datasets.md), in order.

    As Fluid, it sets the dataset's thread count to the number of places (warning when it was
    set to another), and the dataset needs at least that many files. placegroup's dataset reads
    its files with one reader in order (NOTE(dataset-threads) in placegroup/datafeed/dataset_factory.py).

    Args:
        dataset: a ``QueueDataset``, ``InMemoryDataset`` (loaded) or ``FileInstantDataset``.
        places: a place or a list of places, one feed per place each step.
        drop_last: drop batches of fewer than the dataset's ``batch_size`` instances, and a last
            step with too few batches for every place (False: keep both).

    Raises:
        TypeError: ``dataset`` is not one of ``fluid.DatasetFactory``'s datasets.
        ValueError: fewer files than places.

    Example::

        loader = fluid.io.DataLoader.from_dataset(dataset, fluid.cpu_places())
        for data in loader():
            exe.run(main, feed=data, fetch_list=[loss])
    """

    def __init__(self, dataset, places, drop_last: bool) -> None:
        super().__init__()
        if not isinstance(dataset, DatasetBase):
            raise TypeError(f"dataset must be type of DatasetBase (fluid.DatasetFactory().create_dataset(...)), got "
                            f"{type(dataset).__name__}")
        self._places = list(places) if isinstance(places, (list, tuple)) else [places]
        threads = len(self._places)
        if len(dataset.filelist) < threads:
            raise ValueError(f"Filelist number of dataset {len(dataset.filelist)} must be not less than place number "
                             f"{threads}")
        if dataset.thread_num != 0 and dataset.thread_num != threads:
            logging.warning("thread_num %s which is set in Dataset is ignored", dataset.thread_num)
        dataset.set_thread(threads)
        self._dataset, self._drop_last = dataset, bool(drop_last)
        self._batches = None

    def __iter__(self):
        self._batches = iter(self._dataset.batches())
        return self

    def __next__(self) -> list:
        if self._batches is None:
            raise TypeError("iterate the loader (for data in loader(): ...) before calling next on it")
        group = []
        for feed in self._batches:
            if self._drop_last and _instances(feed) < self._dataset.batch_size:
                continue
            group.append(feed)
            if len(group) == len(self._places):
                return group
        if group and not self._drop_last:
            return group
        raise StopIteration
