"""DataFeeder: a minibatch of sample tuples -> ``{var name: array}`` for ``exe.run(feed=...)``.

As Fluid 1.x's ``fluid.DataFeeder``: sample ``i`` is a tuple with one element per var of
``feed_list``, in order; element ``k`` of every sample is stacked into the array fed to var
``k``, in that var's dtype and shape, the batch dimension (``-1``) becoming the number of
samples. A label var declared ``shape=[1], dtype="int64"`` accepts ``3`` or ``[3]`` alike.

NOTE(lod-feed): placegroup keeps no LoD. For a var with ``lod_level >= 1`` the samples'
elements may have different lengths; they are concatenated along the first dimension, as
Fluid's LoDTensor lays them out, and the sequence offsets are dropped (no op here reads them).

Example::

    import placegroup as fluid
    x = fluid.layers.data(name="x", shape=[13])
    y = fluid.layers.data(name="y", shape=[1], dtype="int64")
    feeder = fluid.DataFeeder(feed_list=[x, y], place=fluid.CPUPlace())
    feed = feeder.feed([(np.zeros(13), 1), (np.ones(13), [0])])
    # {"x": float32 array (2, 13), "y": int64 array (2, 1)}

Thread-safety: a DataFeeder holds only the vars' names, dtypes and shapes; ``feed`` may be
called from several threads at once.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

from placegroup.errors import ProgramError

__all__ = ["DataFeeder"]


class _Slot:
    """What the feeder needs of one var: name, dtype, shape, lod level."""

    __slots__ = ("name", "dtype", "shape", "lod_level", "inner", "inner_size")

    def __init__(self, var: Any) -> None:
        self.name = var.name
        self.dtype = np.dtype(var.dtype)
        self.shape = tuple(var.shape) if var.shape is not None else None
        self.lod_level = int(getattr(var, "lod_level", 0) or 0)
        # One sample fills the dims after the first; their size is unknown when any is -1.
        self.inner = self.shape[1:] if self.shape else ()
        self.inner_size = math.prod(self.inner) if -1 not in self.inner else None

    def where(self) -> str:
        return f"var {self.name!r} (shape {list(self.shape) if self.shape else None}, {self.dtype.name})"

    def convert(self, elements: list) -> np.ndarray:
        """Stack one element per sample into this var's array."""
        if self.lod_level > 0:
            return self._convert_lod(elements)
        if self.inner_size is None:  # unknown inner dims: stack, then check the rank
            try:
                arr = np.array(elements, dtype=self.dtype)
            except (ValueError, TypeError) as e:
                raise ProgramError(f"DataFeeder: the elements for {self.where()} do not stack "
                                   f"into one {self.dtype.name} array: {e}") from None
            if self.shape is not None and arr.ndim != len(self.shape):
                raise ProgramError(f"DataFeeder: the elements for {self.where()} stack into shape "
                                   f"{list(arr.shape)}, which is not of rank {len(self.shape)}")
            return arr
        for i, e in enumerate(elements):
            n = np.size(e)
            if n != self.inner_size:
                raise ProgramError(
                    f"DataFeeder: sample {i}: the element for {self.where()} has {n} values "
                    f"(shape {list(np.shape(e))}), expected {self.inner_size} (one sample of "
                    f"shape {list(self.inner)})")
        shape = (len(elements),) + tuple(self.inner)
        try:  # the fast path: numpy stacks elements of one shape in C
            arr = np.array(elements, dtype=self.dtype)
        except (ValueError, TypeError):  # mixed forms of one size, e.g. labels 3 and [3]
            arr = None
        if arr is None or arr.size != math.prod(shape):
            rows = []
            for i, e in enumerate(elements):
                try:
                    rows.append(np.asarray(e, dtype=self.dtype).reshape(self.inner))
                except (ValueError, TypeError) as err:
                    raise ProgramError(f"DataFeeder: sample {i}: the element for {self.where()} "
                                       f"is not {self.dtype.name} data: {err}") from None
            arr = np.stack(rows)
        return arr.reshape(shape)

    def _convert_lod(self, elements: list) -> np.ndarray:
        parts = []
        for i, e in enumerate(elements):
            a = np.asarray(e, dtype=self.dtype)
            if self.inner_size is not None:
                if a.size % max(self.inner_size, 1):
                    raise ProgramError(
                        f"DataFeeder: sample {i}: the element for {self.where()} (lod_level "
                        f"{self.lod_level}) has {a.size} values, not a whole number of rows of "
                        f"shape {list(self.inner)}")
                a = a.reshape((-1,) + tuple(self.inner))
            parts.append(a)
        return np.concatenate(parts, axis=0)


class DataFeeder:
    """Turns minibatches of sample tuples into feed dicts.

    Args:
        feed_list: the data vars, as Variables or names, in the order of a sample's elements.
        place: the place the executor runs on (``CPUPlace()``/``CUDAPlace(i)``). ``feed``
            returns host numpy arrays for every place; the executor copies them to the device.
        program: where names in ``feed_list`` are looked up (default: the default main
            program, as it is when the feeder is made).

    Raises:
        ProgramError: when a name in ``feed_list`` is not a var of the program.

    Example::

        feeder = fluid.DataFeeder(feed_list=[x, y], place=fluid.CPUPlace())
        for data in train_reader():
            loss, = exe.run(main, feed=feeder.feed(data), fetch_list=[avg_cost])
    """

    def __init__(self, feed_list: Sequence[Any], place: Any = None, program: Any = None) -> None:
        from placegroup.ir.framework import Variable, default_main_program

        if isinstance(feed_list, (str, Variable)):
            feed_list = [feed_list]
        self.place = place
        block = (program if program is not None else default_main_program()).global_block()
        self._slots = []
        for v in feed_list:
            if isinstance(v, str):
                if not block.has_var(v):
                    data_vars = sorted(n for n, var in block.vars.items() if var.is_data)
                    raise ProgramError(f"DataFeeder: feed_list names {v!r}, which is not a var of "
                                       f"the program; its data vars are {data_vars}")
                v = block.var(v)
            elif not isinstance(v, Variable):
                raise TypeError(f"DataFeeder: feed_list holds {v!r}; expected Variables or var names")
            self._slots.append(_Slot(v))
        self.feed_names = [s.name for s in self._slots]

    def feed(self, iterable: Iterable[Sequence[Any]]) -> dict[str, np.ndarray]:
        """Convert one minibatch.

        Args:
            iterable: the samples (a list from ``placegroup.batch``, or any iterable); sample
                ``i`` is a tuple or list with one element per var of ``feed_list``.

        Returns:
            ``{var name: np.ndarray}`` with each var's dtype, and shape with ``-1`` replaced
            by the number of samples.

        Raises:
            ProgramError: an empty minibatch; a sample with the wrong number of elements; an
                element with the wrong number of values; naming the var and the sample index.
        """
        samples = iterable if isinstance(iterable, list) else list(iterable)
        if not samples:
            raise ProgramError(f"DataFeeder: the minibatch for {self.feed_names} is empty")
        n = len(self._slots)
        columns: list[list] = [[] for _ in range(n)]
        for i, sample in enumerate(samples):
            if not isinstance(sample, (tuple, list)) or len(sample) != n:
                got = (f"{len(sample)} elements" if isinstance(sample, (tuple, list))
                       else f"a {type(sample).__name__}, not a tuple")
                raise ProgramError(f"DataFeeder: sample {i} has {got}, but feed_list has {n} vars "
                                   f"{self.feed_names}: give one element per var, in that order")
            for col, e in zip(columns, sample):
                col.append(e)
        return {s.name: s.convert(col) for s, col in zip(self._slots, columns)}

    def decorate_reader(self, reader, multi_devices: bool = False, num_places: int | None = None,
                        drop_last: bool = True):
        """A reader of feed dicts from a reader of minibatches (single device only).

        Raises:
            NotImplementedError: with ``multi_devices=True`` (no ParallelExecutor here).
        """
        if multi_devices:
            raise NotImplementedError("DataFeeder.decorate_reader: multi_devices is not supported; "
                                      "placegroup runs one device per executor")

        def feed_reader():
            for minibatch in reader():
                yield self.feed(minibatch)

        return feed_reader
