"""Readers that feed a program from a background thread: Fluid 1.x's ``py_reader``,
``fluid.io.DataLoader.from_generator`` and ``fluid.io.PyReader``.

A reader runs its data source (a Python generator) on a thread of its own, converts each
batch to the declared dtypes, checks shapes where Fluid does (NOTE(reader-shape)) and puts it
in a bounded queue of ``capacity`` batches; the thread blocks while the queue is full, so
reading the next batches overlaps the steps that use the last ones.

Two ways to use one:

* **non-iterable** (``py_reader``; ``DataLoader``/``PyReader`` with ``iterable=False``): the
  program records which vars the reader fills (``ReaderSpec`` in ``Program.extra``,
  placegroup/datafeed/reader_registry.py). After ``start()``, each ``exe.run(main)`` without a feed for
  them takes the next batch; at the end of the data ``exe.run`` raises
  ``fluid.core.EOFException``; ``reset()`` ends the pass and ``start()`` begins the next::

      reader = fluid.layers.py_reader(capacity=4, shapes=[(-1, 13), (-1, 1)],
                                      dtypes=["float32", "float32"])
      x, y = fluid.layers.read_file(reader)
      ...  # the network over x and y, the optimizer
      reader.decorate_paddle_reader(fluid.batch(fluid.dataset.uci_housing.train(), 20))
      for pass_id in range(2):
          reader.start()
          try:
              while True:
                  loss, = exe.run(main, fetch_list=[avg_cost])
          except fluid.core.EOFException:
              reader.reset()

* **iterable** (the default of ``DataLoader``/``PyReader``): the program is untouched and
  ``for data in loader():`` yields what ``exe.run(main, feed=data)`` takes: a list with one
  feed dict per place (``return_list=True``: one list of arrays per place).

The data source is one of three kinds, as in Fluid: a *batch generator* yields one array (or
nested list) per var; a *sample list generator* yields lists of samples (``fluid.batch``'s
output), turned into arrays by a ``DataFeeder``; a *sample generator* yields single samples,
grouped ``batch_size`` at a time.

A var with ``lod_level`` > 0 (``py_reader(..., lod_levels=[1, 0])``, a ``lod_level=1`` data var
in a DataLoader's ``feed_list``) takes a LoDTensor or nested lists (one list per sequence) and
is fed as a LoDTensor (NOTE(reader-lod)).

NOTE(reader-shape): as in Fluid 1.8.5 (its cases are tests/cases/feed_shapes.py), a reader
checks a var's shape only where Fluid's does: a ``fluid.data`` var (``need_check_feed``) filled
by a loader started with ``start()``, or by ``create_py_reader_by_data``, must get the same rank
and each dim equal unless declared -1 (Fluid's read op); an iterable loader's batches go through
``exe.run``, which checks a ``fluid.data`` var (NOTE(feed-shape) in executor/feed.py); a
``fluid.layers.data`` var and ``py_reader``'s vars take a batch of any shape, which the ops then
see. The sample generators stack samples as ``DataFeeder`` does (NOTE(feeder-shape)).

NOTE(double-buffer): Fluid's ``use_double_buffer`` adds a second reader that prefetches the
next batch to the device. Here the queue already holds the next batches on the host and the
executor copies each to its device when it runs, so ``use_double_buffer`` and
``fluid.layers.double_buffer`` change nothing.

Thread-safety: ``start``, ``reset`` and the ``decorate_*``/``set_*`` methods are for one thread;
``exe.run`` may read the queue from another.
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from placegroup.datafeed.data_feeder import DataFeeder
from placegroup.dataloader import dataloader_iter
from placegroup.dataloader.batch_sampler import BatchSampler
from placegroup.dataloader.dataset import Dataset
from placegroup.errors import PlacegroupError, ProgramError
from placegroup.ir.framework import Program, Variable
from placegroup.datafeed.loader_base import DataLoaderBase, DatasetLoader
from placegroup.ir.unique_name import UniqueNameGenerator
from placegroup.datafeed.reader_decorators import batch as batch_samples
from placegroup.datafeed.reader_registry import EOFException, ReaderSpec, add_reader, register
from placegroup.values import LoDTensor

__all__ = ["DataLoader", "GeneratorLoader", "PyReader", "PyReaderVar", "QueueReader"]

_names = UniqueNameGenerator()  # queue names; unique_name.guard() does not reset it (NOTE(reader-key))
_EOF = object()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error, self.delivered = error, False


class BlockingQueue:
    """The bounded queue between a reader's thread and ``exe.run`` (Fluid's
    LoDTensorBlockingQueue): ``put`` blocks while it holds ``capacity`` batches."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: collections.deque = collections.deque()
        self._cv = threading.Condition()
        self._closed = False
        self._end: Any = None  # _EOF or a _Failure once the source is done

    def size(self) -> int:
        return len(self._items)

    def capacity(self) -> int:
        return self._capacity

    def is_closed(self) -> bool:
        return self._closed

    def put(self, item: Any) -> bool:
        """Add a batch, waiting for room; False when the queue was closed meanwhile."""
        with self._cv:
            while len(self._items) >= self._capacity and not self._closed:
                self._cv.wait()
            if self._closed:
                return False
            self._items.append(item)
            self._cv.notify_all()
            return True

    def end(self, how: Any) -> None:
        """No more batches: ``_EOF``, or a ``_Failure`` to raise after the queued ones."""
        with self._cv:
            self._end = self._end or how
            self._cv.notify_all()

    def get(self) -> Any:
        """The next batch, waiting for one; ``_EOF`` or the ``_Failure`` at the end."""
        with self._cv:
            while not self._items and self._end is None and not self._closed:
                self._cv.wait()
            if self._items:
                self._cv.notify_all()
                return self._items.popleft()
            return self._end or _EOF

    def close(self) -> None:
        """Drop what is queued and wake both sides; a blocked ``put`` returns False."""
        with self._cv:
            self._closed = True
            self._items.clear()
            self._cv.notify_all()


class Slot:
    """One var a reader fills: its name, dtype, declared shape and lod level."""

    def __init__(self, name: str, shape: Sequence[int], dtype: Any, lod_level: int = 0,
                 checked: bool = False) -> None:
        self.name, self.shape, self.lod_level = name, tuple(int(d) for d in shape), int(lod_level or 0)
        self.dtype = np.dtype(dtype)
        self.checked = checked  # NOTE(reader-shape): the read op checks this var's shape

    @classmethod
    def of(cls, var: Variable, read_op: bool = False) -> "Slot":
        """The slot of data var ``var``; ``read_op``: filled by a non-iterable reader, whose read
        op checks a ``fluid.data`` var's shape (NOTE(reader-shape))."""
        if var.shape is None:
            raise ProgramError(f"var {var.name!r} has no shape; a reader can only fill vars of known rank")
        return cls(var.name, var.shape, var.dtype, var.lod_level,
                   checked=read_op and bool(var.attrs.get("need_check_feed")))

    def convert(self, what: str, index: int, item: Any):
        """``item`` as an array of this var's dtype, in the shape it has (NOTE(reader-shape));
        for a slot with a lod level, a ``LoDTensor`` of that depth (NOTE(reader-lod))."""
        if self.lod_level:
            return self._sequences(what, index, item)
        if hasattr(item, "__cuda_array_interface__"):
            arr = item
        else:
            try:
                arr = np.asarray(item)
            except ValueError as e:  # ragged nested lists
                raise ProgramError(f"{what}: batch {index}: the data for var {self.name!r} is not one "
                                   f"array ({e}); nested lists must have equal lengths") from None
        if arr.dtype != self.dtype:
            if arr.dtype == object or not np.can_cast(arr.dtype, self.dtype, "same_kind"):
                raise ProgramError(f"{what}: batch {index}: var {self.name!r} is declared {self.dtype.name}, "
                                   f"the data is {arr.dtype.name}, which does not convert without loss")
            arr = arr.astype(self.dtype)
        if self.checked and (len(arr.shape) != len(self.shape) or any(
                d not in (-1, a) for d, a in zip(self.shape, arr.shape))):
            raise ProgramError(f"{what}: batch {index}: var {self.name!r} gets shape {list(arr.shape)}, but it "
                               f"is declared {list(self.shape)} by fluid.data, and a reader started with "
                               f"start() checks that shape as Fluid 1.8's read op does: the same rank, each "
                               f"dim equal unless declared -1 (an iterable loader's batches are checked by "
                               f"exe.run instead; a fluid.layers.data var takes any shape)")
        return arr

    def _sequences(self, what: str, index: int, item: Any) -> LoDTensor:
        """NOTE(reader-lod): a slot of lod level L takes a ``LoDTensor`` with L levels (what a
        DataFeeder makes of a sample list) or nested lists L deep whose leaves are the rows
        (``[[3, 1, 4], [1, 5]]`` for two sentences of ids, lod level 1), and gives the
        LoDTensor the executor feeds (NOTE(lod-feed) in executor/executor.py). Rows of a
        ``[-1, 1]`` slot may be scalars, as Fluid's DataFeeder takes them."""
        if type(item) is LoDTensor:
            if item.lod_level != self.lod_level:
                raise ProgramError(f"{what}: batch {index}: var {self.name!r} is declared lod_level="
                                   f"{self.lod_level}, the LoDTensor has {item.lod_level} level(s) "
                                   f"(recursive sequence lengths {item.recursive_sequence_lengths()})")
            data, lengths = item._held(), item.recursive_sequence_lengths()
        elif isinstance(item, (list, tuple)):
            lengths = [[] for _ in range(self.lod_level)]
            rows = []
            for seq in item:  # the batch: its sequences, each lod_level lists deep
                rows += _flatten(seq, self.lod_level, lengths, what, index, self.name)
            try:
                data = np.asarray(rows) if rows else np.zeros((0,) + tuple(max(d, 0) for d in self.shape[1:]))
            except ValueError as e:  # rows of different lengths, or lists deeper than lod_level
                raise ProgramError(f"{what}: batch {index}: the rows of var {self.name!r} (lod_level="
                                   f"{self.lod_level}) are not one array ({e})") from None
            if data.ndim == len(self.shape) - 1 and self.shape[-1:] == (1,):
                data = data.reshape(data.shape + (1,))  # scalar rows of a [-1, 1] slot
        else:
            raise ProgramError(f"{what}: batch {index}: var {self.name!r} is declared lod_level={self.lod_level} "
                               f"(a batch of sequences), but it got {type(item).__name__}: give a LoDTensor "
                               f"(fluid.create_lod_tensor) or lists of lists, one list per sequence")
        arr = Slot(self.name, self.shape, self.dtype, checked=self.checked).convert(what, index, data)
        try:
            return LoDTensor.from_lengths(arr, lengths)
        except ValueError as e:
            raise ProgramError(f"{what}: batch {index}: var {self.name!r}: {e}") from None


def _flatten(item, depth: int, lengths: list, what: str, index: int, name: str) -> list:
    """The rows of one sequence, nested lists ``depth`` deep, appending each level's lengths."""
    level = len(lengths) - depth
    if not isinstance(item, (list, tuple, np.ndarray)):
        raise ProgramError(f"{what}: batch {index}: var {name!r} is declared lod_level={len(lengths)}, but "
                           f"the data is only {level} list(s) deep below the batch (found {item!r})")
    lengths[level].append(len(item))
    if depth == 1:
        return list(item)
    rows = []
    for sub in item:
        rows += _flatten(sub, depth - 1, lengths, what, index, name)
    return rows


class QueueReader:
    """A data source, the thread that runs it and the queue it fills: the live half of a
    reader, registered under its queue name (placegroup/datafeed/reader_registry.py).

    Args:
        name: the reader's name in messages (``create_py_reader_0``).
        queue: the queue's name, the registry key (NOTE(reader-key)).
        slots: the vars it fills, in batch order.
        capacity: how many batches the queue holds.
    """

    def __init__(self, name: str, queue: str, slots: list[Slot], capacity: Any) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity <= 0:
            raise ValueError(f"{name}: capacity must be a positive int (batches in the queue), got {capacity!r}")
        self.name, self.queue_name, self.slots, self.capacity = name, queue, slots, int(capacity)
        self.what = f"reader {name!r}"
        self.source: Callable[[], Iterator] | None = None
        self.queue: BlockingQueue | None = None
        self.thread: threading.Thread | None = None
        register(queue, self)

    # -- the data source ------------------------------------------------------------------------
    def set_batch_generator(self, generator: Callable[[], Iterator]) -> None:
        """Each item of ``generator()`` is one batch: one array (or nested list) per var."""
        if not callable(generator):
            raise TypeError(f"{self.what}: the data source must be a callable returning an iterator, "
                            f"got {generator!r}")
        self.source = generator

    def set_sample_list_generator(self, generator: Callable[[], Iterator], feed_vars: list) -> None:
        """Each item of ``generator()`` is a list of samples, converted by a DataFeeder over
        ``feed_vars`` (Variables in batch order)."""
        feeder = DataFeeder(feed_list=feed_vars)

        def batches():
            for samples in generator():
                d = feeder.feed(samples)
                yield [d[n] for n in feeder.feed_names]

        self.set_batch_generator(batches)

    def data_vars(self) -> list:
        """Stand-in data vars with this reader's shapes, for a DataFeeder (as Fluid makes them)."""
        block = Program().global_block()
        return [block.create_var(str(i), shape=s.shape, dtype=s.dtype, is_data=True, lod_level=s.lod_level)
                for i, s in enumerate(self.slots)]

    # -- a pass ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the thread that fills the queue.

        Raises:
            PlacegroupError: no data source yet, or started and not reset since.
        """
        if self.source is None:
            raise PlacegroupError(f"{self.what} has no data source: set one first (decorate_batch_generator, "
                                  f"decorate_sample_list_generator, set_batch_generator, ...)")
        if self.thread is not None:
            raise PlacegroupError(f"{self.what} is already started: call reset() when the pass ends "
                                  f"(exe.run raised EOFException), then start()")
        self.queue = BlockingQueue(self.capacity)
        self.thread = threading.Thread(target=self._produce, args=(self.queue, self.source),
                                       name=f"placegroup-{self.name}", daemon=True)
        self.thread.start()

    def reset(self) -> None:
        """End the pass: close the queue, wait for the thread to finish (it stops before its
        next batch; a source blocked inside its own generator holds this until it yields), and
        allow ``start()`` again. Safe to call when not started."""
        if self.queue is not None:
            self.queue.close()
        if self.thread is not None:
            self.thread.join()
        self.queue = self.thread = None

    def _produce(self, queue: BlockingQueue, source: Callable[[], Iterator]) -> None:
        index = 0
        try:
            for batch in source():
                if not queue.put(self._convert(index, batch)):
                    return  # reset
                index += 1
            queue.end(_EOF)
        except BaseException as e:  # noqa: BLE001 - handed to exe.run, which raises it
            if not isinstance(e, ProgramError):
                e.add_note(f"(raised by the data source of {self.what} at batch {index}, on its thread)")
            queue.end(_Failure(e))

    def _convert(self, index: int, batch: Any) -> list:
        n = len(self.slots)
        if not isinstance(batch, (list, tuple)) or len(batch) != n:
            got = f"{len(batch)} items" if isinstance(batch, (list, tuple)) else f"a {type(batch).__name__}"
            raise ProgramError(f"{self.what}: batch {index} is {got}; expected a list or tuple of {n} "
                               f"arrays, one per var {[s.name for s in self.slots]}")
        return [s.convert(self.what, index, item) for s, item in zip(self.slots, batch)]

    def next_batch(self) -> list:
        """The next batch, one array per slot (what ``exe.run`` takes).

        Raises:
            EOFException: the source is exhausted (until ``reset``).
            PlacegroupError: not started; or the source failed before.
            Exception: the error the data source raised, or a ProgramError naming a bad batch.
        """
        if self.queue is None:
            raise PlacegroupError(f"{self.what} is not started: call its start() before exe.run, and "
                                  f"reset() after each pass")
        got = self.queue.get()
        if got is _EOF:
            raise EOFException(f"{self.what} has no more data: call reset(), then start() for the next pass")
        if isinstance(got, _Failure):
            if got.delivered:
                raise PlacegroupError(f"{self.what} stopped when its data source failed (raised before); "
                                      f"call reset() and start()")
            got.delivered = True
            raise got.error
        return got


def queue_name(name: str | None) -> str:
    """The queue name of a reader made with ``name`` (NOTE(reader-key))."""
    return f"{name}_queue" if name else _names("lod_tensor_blocking_queue")


class PyReaderVar:
    """What ``fluid.layers.py_reader`` returns: pass it to ``read_file``; feed it with one of
    the ``decorate_*`` methods; ``start()`` and ``reset()`` each pass (module docstring).

    Attributes:
        name: the reader's name (``create_py_reader_0``, or ``<name>_reader``).
        queue: the current pass's ``BlockingQueue`` (None when not started).
    """

    def __init__(self, live: QueueReader) -> None:
        self._live = live
        self.name = live.name
        self.persistable, self.stop_gradient = True, True

    @property
    def queue(self) -> BlockingQueue | None:
        return self._live.queue

    @property
    def thread(self) -> threading.Thread | None:
        return self._live.thread

    def decorate_tensor_provider(self, reader: Callable[[], Iterator]) -> None:
        """``reader()`` yields batches: one array per declared shape."""
        self._live.set_batch_generator(reader)

    decorate_batch_generator = decorate_tensor_provider

    def decorate_paddle_reader(self, reader: Callable[[], Iterator]) -> None:
        """``reader()`` yields lists of samples (``fluid.batch(...)``), one element per shape."""
        self._live.set_sample_list_generator(reader, self._live.data_vars())

    decorate_sample_list_generator = decorate_paddle_reader

    def start(self) -> None:
        self._live.start()

    def reset(self) -> None:
        self._live.reset()

    def __repr__(self) -> str:
        return f"PyReaderVar({self.name}: {[list(s.shape) for s in self._live.slots]})"


def _places(places: Any) -> list:
    return list(places) if isinstance(places, (list, tuple)) else [places]


class GeneratorLoader(DataLoaderBase):
    """What ``DataLoader.from_generator`` returns (see there)."""

    def __init__(self, feed_list=None, capacity=None, use_double_buffer: bool = True, iterable: bool = True,
                 return_list: bool = False, use_multiprocess: bool = False, drop_last: bool = True) -> None:
        super().__init__()
        if not capacity:
            raise ValueError("DataLoader: give capacity, the number of batches its queue holds")
        if not feed_list:
            raise ValueError("DataLoader: feed_list must be given: the data vars each batch fills")
        if not all(isinstance(v, Variable) for v in feed_list):
            raise TypeError(f"DataLoader: feed_list must hold Variables (fluid.layers.data), got {feed_list!r}")
        self._feed_list = list(feed_list)
        self._iterable, self._return_list, self._drop_last = bool(iterable), bool(return_list), bool(drop_last)
        self._places: list | None = None
        n = _names("create_py_reader")
        slots = [Slot.of(v, read_op=not self._iterable) for v in self._feed_list]
        self._live = QueueReader(n, queue_name(None), slots, capacity)
        if not self._iterable:  # the program records what the reader fills
            add_reader(self._feed_list[0].block.program, ReaderSpec(
                n, self._live.queue_name, tuple(v.name for v in self._feed_list), self._live.capacity, self._drop_last))

    @property
    def iterable(self) -> bool:
        return self._iterable

    @property
    def queue(self) -> BlockingQueue | None:
        return self._live.queue

    def set_sample_generator(self, reader, batch_size: int, drop_last: bool = True, places=None):
        """``reader()`` yields single samples, grouped ``batch_size`` at a time (the last short
        group dropped unless ``drop_last=False``). Returns self."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"set_sample_generator: batch_size must be a positive int, got {batch_size!r}")
        return self.set_sample_list_generator(batch_samples(reader, batch_size, drop_last), places)

    def set_sample_list_generator(self, reader, places=None):
        """``reader()`` yields lists of samples (``fluid.batch``'s output). Returns self."""
        self._live.set_sample_list_generator(reader, self._feed_list)
        self._set_places(places)
        return self

    def set_batch_generator(self, reader, places=None):
        """``reader()`` yields batches: one array per var of ``feed_list``. Returns self."""
        self._live.set_batch_generator(reader)
        self._set_places(places)
        return self

    def _set_places(self, places) -> None:
        if self._iterable:
            if places is None:
                raise ValueError("an iterable DataLoader needs places (e.g. fluid.cpu_places()): it yields "
                                 "one feed per place")
            self._places = _places(places)

    # -- non-iterable ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start a pass (``iterable=False`` only)."""
        self._not_iterable("start")
        self._live.start()

    def reset(self) -> None:
        """End a pass (``iterable=False`` only)."""
        self._not_iterable("reset")
        self._live.reset()

    def _not_iterable(self, what: str) -> None:
        if self._iterable:
            raise PlacegroupError(f"{what}() is for a DataLoader made with iterable=False; iterate this one: "
                                  f"for data in loader(): exe.run(main, feed=data)")

    # -- iterable ----------------------------------------------------------------------------------
    def __call__(self):
        return self

    def __iter__(self):
        if not self._iterable:
            raise PlacegroupError("this DataLoader was made with iterable=False: call start(), run until "
                                  "EOFException, then reset()")
        self._live.reset()
        self._live.start()
        return self

    def __next__(self) -> list:
        """One feed per place: a dict var name -> array (``return_list``: a list of arrays).
        The last batches that do not fill every place are dropped unless ``drop_last=False``."""
        group = []
        try:
            while len(group) < len(self._places or [None]):
                group.append(self._live.next_batch())
        except EOFException:
            if self._drop_last or not group:
                self._live.reset()
                raise StopIteration from None
        if self._return_list:
            return [list(b) for b in group]
        names = [s.name for s in self._live.slots]
        return [dict(zip(names, b)) for b in group]

    next = __next__


class DataLoader:
    """``fluid.io.DataLoader``: batches of a map-style ``Dataset``; and its factories of
    loaders fed by a Python generator (``from_generator``) or a ``fluid.DatasetFactory``
    dataset (``from_dataset``).

    ``DataLoader(dataset, ...)`` reads ``dataset[i]`` for each index list of a
    ``BatchSampler``, collates the samples (``default_collate_fn``: stacks each field) on a
    background thread, or in ``num_workers`` worker processes (NOTE(loader-workers) in
    placegroup/dataloader/dataloader_iter.py), and yields, per step, one feed per place: a dict
    var name -> array, or with ``return_list`` a list of arrays. The last step is dropped when
    there are fewer batches than places.

    Args:
        dataset: a ``fluid.io.Dataset``.
        feed_list: the data vars each batch fills, in the order of a batch's fields (needed
            unless ``return_list``; placegroup's programs are static).
        places: the places (``fluid.cpu_places()``): one feed per place each step.
        return_list: yield lists of arrays, not dicts. With ``num_workers > 0`` and one place,
            a step is that one list (not a list of one list), as in Fluid 1.8.
        batch_sampler: a ``BatchSampler``; or leave it None and give ``batch_size``,
            ``shuffle`` and ``drop_last`` for one.
        batch_size, shuffle, drop_last: the default BatchSampler's (1, False, False).
        collate_fn: makes a batch (a list of arrays, one per field) of a list of samples.
        num_workers: worker processes (0: read on the loader's thread).
        use_buffer_reader, use_shared_memory: accepted; the queue prefetches anyway, and
            batches cross from workers as msgpack.
        timeout: accepted (a non-negative number); workers are checked every few seconds.
        worker_init_fn: called with the worker id at the start of each worker process.

    Raises:
        TypeError: ``dataset`` is no Dataset, ``batch_sampler`` no BatchSampler.
        ValueError: no ``feed_list`` without ``return_list``, no ``places``, a negative
            ``num_workers`` or ``timeout``, ``batch_size``/``shuffle``/``drop_last`` given with a
            ``batch_sampler``, or a ``batch_size`` that is not positive.

    Example::

        loader = fluid.io.DataLoader(MyDataset(), feed_list=[image, label], places=fluid.cpu_places(),
                                     batch_size=32, shuffle=True, num_workers=2)
        for data in loader():
            exe.run(main, feed=data, fetch_list=[loss])
    """

    def __init__(self, dataset, feed_list=None, places=None, return_list: bool = False, batch_sampler=None,
                 batch_size: int = 1, shuffle: bool = False, drop_last: bool = False, collate_fn=None,
                 num_workers: int = 0, use_buffer_reader: bool = True, use_shared_memory: bool = True,
                 timeout=0, worker_init_fn=None) -> None:
        if not isinstance(dataset, Dataset):
            raise TypeError("dataset should be subclass instance of paddle.io.Dataset")
        if not return_list and feed_list is None:
            raise ValueError("feed_list should be set when return_list=False")
        if places is None:
            raise ValueError("places cannot be None")
        if num_workers < 0:
            raise ValueError("num_workers should be a non-negative value")
        if timeout < 0:
            raise ValueError("timeout should be a non-negative value")
        if batch_sampler is not None:
            if not isinstance(batch_sampler, BatchSampler):
                raise TypeError("batch_sampler should be None or subclass instance of paddle.io.BatchSampler")
            if batch_size != 1 or shuffle or drop_last:
                raise ValueError("batch_size/shuffle/drop_last should not be set when batch_sampler is given")
        elif batch_size is None or batch_size <= 0:
            raise ValueError("batch_size should be a positive value when batch_sampler is not given")
        else:
            batch_sampler = BatchSampler(dataset=dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last)
        self.dataset, self.feed_list, self.places = dataset, feed_list, _places(places)
        self.return_list, self.batch_sampler, self.collate_fn = return_list, batch_sampler, collate_fn
        self.num_workers, self.use_buffer_reader, self.timeout = num_workers, use_buffer_reader, timeout
        self.use_shared_memory = use_shared_memory and num_workers > 0
        self.worker_init_fn = worker_init_fn
        self._loader = None
        if feed_list is not None:  # its queue holds two steps' batches, as Fluid's
            capacity = 2 * max(num_workers, len(self.places))
            self._loader = GeneratorLoader(feed_list, capacity, iterable=True, return_list=return_list)
            self._loader.set_batch_generator(self._source, self.places)

    def _source(self):
        if self.num_workers:
            return dataloader_iter.multi_process_batches(self.dataset, self.batch_sampler, self.collate_fn,
                                                         self.num_workers, self.worker_init_fn)
        return dataloader_iter.single_process_batches(self.dataset, self.batch_sampler, self.collate_fn)

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self):
        unwrap = self.return_list and self.num_workers > 0 and len(self.places) == 1
        steps = iter(self._loader) if self._loader is not None else self._unnamed()
        return (step[0] for step in steps) if unwrap else steps

    def __call__(self):
        return self.__iter__()

    def _unnamed(self):
        """The steps without a feed_list (``return_list``): the collated arrays as they are."""
        group = []
        for batch in self._source():
            group.append([DataLoaderBase._check_input_array(field) for field in batch])
            if len(group) == len(self.places):
                yield group
                group = []

    @staticmethod
    def from_generator(feed_list=None, capacity=None, use_double_buffer: bool = True, iterable: bool = True,
                       return_list: bool = False, use_multiprocess: bool = False,
                       drop_last: bool = True) -> GeneratorLoader:
        """A loader whose background thread fills a queue of ``capacity`` batches.

        Args:
            feed_list: the data vars (``fluid.layers.data``) each batch fills, in order.
            capacity: how many batches the queue holds (the thread blocks when it is full).
            use_double_buffer: accepted; the queue already prefetches (NOTE(double-buffer)).
            iterable: True: ``for data in loader():`` yields feeds for ``exe.run(feed=data)``;
                False: the program reads the loader itself after ``start()`` (``reset()``
                after ``fluid.core.EOFException``), like ``py_reader``.
            return_list: iterable mode yields one list of arrays per place, not a dict.
            use_multiprocess: for Fluid's dygraph mode; no effect here, as in Fluid's static mode.
            drop_last: at the end of the data, drop the batches too few to give every place one
                (False: use them, on as many places as there are batches, NOTE(data-parallel) in
                placegroup/model/data_parallel.py).

        Returns:
            A ``GeneratorLoader``; give it data with ``set_sample_generator``,
            ``set_sample_list_generator`` or ``set_batch_generator`` (``places`` is required
            when iterable).

        Raises:
            ValueError: no capacity or no feed_list.

        Example::

            loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=8)
            loader.set_sample_list_generator(fluid.batch(train_reader, 32), fluid.cpu_places())
            for data in loader():
                exe.run(main, feed=data, fetch_list=[loss])
        """
        return GeneratorLoader(feed_list, capacity, use_double_buffer, iterable, return_list, use_multiprocess,
                               drop_last)

    @staticmethod
    def from_dataset(dataset, places, drop_last: bool = True) -> DatasetLoader:
        """A loader over a ``fluid.DatasetFactory`` dataset: per step, one feed per place
        (``DatasetLoader`` in placegroup/datafeed/loader_base.py).

        Example::

            loader = fluid.io.DataLoader.from_dataset(dataset, fluid.cpu_places())
            for data in loader():
                exe.run(main, feed=data, fetch_list=[loss])
        """
        return DatasetLoader(dataset, places, drop_last)


class PyReader(GeneratorLoader):
    """``fluid.io.PyReader(feed_list, capacity, use_double_buffer=True, iterable=True,
    return_list=False)``: ``DataLoader.from_generator`` under Fluid 1.5's names.

    Example::

        reader = fluid.io.PyReader(feed_list=[x, y], capacity=4, iterable=False)
        reader.decorate_sample_list_generator(fluid.batch(samples, batch_size=8))
        reader.start()  # ... exe.run(main) until fluid.core.EOFException, then reader.reset()
    """

    def decorate_sample_generator(self, sample_generator, batch_size: int, drop_last: bool = True, places=None):
        return self.set_sample_generator(sample_generator, batch_size, drop_last, places)

    def decorate_sample_list_generator(self, reader, places=None):
        return self.set_sample_list_generator(reader, places)

    def decorate_batch_generator(self, reader, places=None):
        return self.set_batch_generator(reader, places)
