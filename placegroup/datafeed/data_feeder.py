"""DataFeeder: a minibatch of sample tuples -> ``{var name: array}`` for ``exe.run(feed=...)``.

As Fluid 1.x's ``fluid.DataFeeder``: sample ``i`` is a tuple with one element per var of
``feed_list``, in order; element ``k`` of every sample is stacked into the array fed to var
``k``, in that var's dtype and shape, the batch dimension (``-1``) becoming the number of
samples. A label var declared ``shape=[1], dtype="int64"`` accepts ``3`` or ``[3]`` alike (one
form per batch: numpy does not stack ``3`` with ``[3]``, nor does Fluid).

NOTE(feeder-shape): as Fluid 1.8's ``DataToLoDTensorConverter``, the elements are stacked with
``np.array(elements, dtype)``; when the stack's rank differs from the declared rank it is reshaped
to the declared shape (``[N, 10]`` for ``[-1, 10, 1]``; a refusal when its values do not fill
that), and when the ranks agree it is taken as it is, in any shape: samples padded to ``[2, 1]``
for a ``[-1, 10, 1]`` var give ``[N, 2, 1]``, which the ops then see, as in Fluid. A declared
shape with more than one -1 is no reshape target; the stack is taken as it is. Elements of
different shapes do not stack and are refused, naming the first two shapes. What ``exe.run``
then checks is NOTE(feed-shape) in executor/feed.py (a ``fluid.data`` var checks the shape).

NOTE(feeder-lod): for a var with ``lod_level >= 1`` each sample's element is a sequence (a list
of steps; with ``lod_level=2`` a list of such sequences, and so on), as Fluid's
``DataToLoDTensorConverter`` reads it: a sequence's length is ``len()`` of its list, the steps
of all samples are stacked in order into the data, shaped as the var declares (``[-1, 1]`` ids
give data ``[steps, 1]``; the steps' stack follows NOTE(feeder-shape)), and ``feed`` returns a
``LoDTensor`` with the sequences' offsets. Each innermost sequence becomes one numpy array (a
sample's words in one ``np.asarray``), so the Python work is per sequence, not per step. An
element nested less deeply than the lod_level is an error naming the sample, the var and the
depth found; steps whose stack does not have one row per step (scalar steps reshaped to
``[-1, 2]``) are refused, as Fluid refuses that LoD.

Example::

    import placegroup as fluid
    x = fluid.layers.data(name="x", shape=[13])
    y = fluid.layers.data(name="y", shape=[1], dtype="int64")
    feeder = fluid.DataFeeder(feed_list=[x, y], place=fluid.CPUPlace())
    feed = feeder.feed([(np.zeros(13), 1), (np.ones(13), [0])])
    # {"x": float32 array (2, 13), "y": int64 array (2, 1)}
    words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    fluid.DataFeeder([words], fluid.CPUPlace()).feed([([1, 2, 3],), ([4],)])["words"]
    # LoDTensor(int64[4, 1], recursive_sequence_lengths=[[3, 1]])

Thread-safety: a DataFeeder holds only the vars' names, dtypes and shapes; ``feed`` may be
called from several threads at once.
"""
from __future__ import annotations

import math
import types
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from placegroup.datafeed import dtype_checks
from placegroup.errors import ProgramError
from placegroup.values import LoDTensor, lengths_to_offsets

__all__ = ["DataFeeder"]

# Fluid 1.8 defines its layers' argument checks here (placegroup/datafeed/dtype_checks.py)
check_type, check_dtype = dtype_checks.check_type, dtype_checks.check_dtype
check_variable_and_dtype, convert_dtype = dtype_checks.check_variable_and_dtype, dtype_checks.convert_dtype


class _Slot:
    """What the feeder needs of one var: name, dtype, shape, lod level."""

    __slots__ = ("name", "dtype", "shape", "lod_level", "inner", "inner_size")

    def __init__(self, var: Any) -> None:
        self.name = var.name
        self.dtype = np.dtype(var.dtype)
        self.shape = tuple(var.shape) if var.shape is not None else None
        self.lod_level = int(getattr(var, "lod_level", 0) or 0)
        # One sample fills the dims after the batch dim; their size is unknown when any is -1.
        self.inner = self.shape[1:] if self.shape else ()
        batched = bool(self.shape) and self.shape[0] == -1 and -1 not in self.inner
        self.inner_size = math.prod(self.inner) if batched else None

    def where(self) -> str:
        return f"var {self.name!r} (shape {list(self.shape) if self.shape else None}, {self.dtype.name})"

    def convert(self, elements: list) -> np.ndarray:
        """Stack one element per sample into this var's array (NOTE(feeder-shape))."""
        if self.lod_level > 0:
            return self._convert_lod(elements)
        try:  # numpy stacks elements of one shape in C
            arr = np.array(elements, dtype=self.dtype)
        except (ValueError, TypeError) as e:
            raise ProgramError(self._not_one_array(elements, "the samples' elements", e)) from None
        return self._shaped(arr, "the samples")

    def _shaped(self, arr: np.ndarray, what: str, lengths: list | None = None) -> np.ndarray:
        """NOTE(feeder-shape): ``arr`` in the declared shape when its rank differs from it."""
        if self.shape is None or arr.ndim == len(self.shape) or self.shape.count(-1) > 1:
            return arr
        try:
            return arr.reshape(self.shape)
        except ValueError:
            pass
        unit = "step" if lengths is not None else "sample"
        need = f": each {unit} needs {self.inner_size} values" if self.inner_size else ""
        raise ProgramError(f"DataFeeder: {what} for {self.where()} stack into shape {list(arr.shape)}, of "
                           f"rank {arr.ndim}, which is reshaped to the declared rank as Fluid 1.8's DataFeeder "
                           f"does, but its {arr.size} values do not fill {list(self.shape)}{need} "
                           f"(a stack of the declared rank is taken in any shape)")

    def _not_one_array(self, items: list, what: str, err: Exception, noun: str = "sample") -> str:
        shapes = []
        for i, e in enumerate(items):
            sh = list(np.shape(e)) if not isinstance(e, (str, bytes)) else "text"
            if not shapes or shapes[-1][1] != sh:
                shapes.append((i, sh))
        if len(shapes) > 1:
            (i, a), (j, b) = shapes[0], shapes[1]
            return (f"DataFeeder: {what} for {self.where()} do not stack into one array: {noun} {i}'s "
                    f"shape is {a} and {noun} {j}'s {b}; give every {noun} the same shape (pad them): "
                    f"Fluid 1.8 stacks them with np.array too")
        return f"DataFeeder: {what} for {self.where()} are not {self.dtype.name} data: {err}"

    def _convert_lod(self, elements: list) -> LoDTensor:
        """NOTE(feeder-lod): the elements as sequences of ``lod_level`` levels."""
        lengths: list[list[int]] = [[] for _ in range(self.lod_level)]
        parts: list[np.ndarray] = []
        for i, e in enumerate(elements):
            self._walk(e, 0, lengths, parts, i)
        full = [p for p in parts if len(p)] or parts[:1]
        try:
            data = np.concatenate(full, axis=0) if full else np.zeros((0,) + tuple(
                max(d, 0) for d in self.inner), dtype=self.dtype)
        except ValueError as e:
            raise ProgramError(self._not_one_array(
                [p[0] for p in full], "the steps of the sequences", e, "sequence")) from None
        data = self._shaped(data, "the steps of the sequences", lengths)
        steps = sum(lengths[-1])
        if data.shape[:1] != (steps,):
            raise ProgramError(f"DataFeeder: the sequences for {self.where()} have {steps} steps in all "
                               f"(lengths {lengths[-1]}), but their steps stack into shape {list(data.shape)}, "
                               f"{data.shape[0] if data.ndim else 1} rows: give each step "
                               f"{self.inner_size if self.inner_size else 'the same number of'} values")
        return LoDTensor(data, [lengths_to_offsets(level) for level in lengths], check=False)

    def _walk(self, e: Any, level: int, lengths: list, parts: list, i: int) -> None:
        """Sequence ``e`` of LoD level ``level`` of sample ``i``: its length, and its steps
        into ``parts`` at the last level."""
        if not hasattr(e, "__len__") or isinstance(e, (str, bytes)) or getattr(e, "ndim", 1) == 0:
            raise ProgramError(
                f"DataFeeder: sample {i}: the element for {self.where()} is nested {level} "
                f"level{'s' if level != 1 else ''} deep ({type(e).__name__} {e!r:.40} where a sequence was "
                f"expected), but the var's lod_level {self.lod_level} wants {self.lod_level} level"
                f"{'s' if self.lod_level > 1 else ''} of lists, then the steps")
        if level < self.lod_level - 1:
            lengths[level].append(len(e))
            for sub in e:
                self._walk(sub, level + 1, lengths, parts, i)
            return
        try:
            a = np.asarray(e, dtype=self.dtype)
        except (ValueError, TypeError) as err:
            raise ProgramError(f"DataFeeder: sample {i}: a sequence for {self.where()} is not "
                               f"{self.dtype.name} steps of one shape: {err}") from None
        lengths[level].append(a.shape[0])
        parts.append(a)

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

    def feed(self, iterable: Iterable[Sequence[Any]]) -> dict[str, Any]:
        """Convert one minibatch.

        Args:
            iterable: the samples (a list from ``placegroup.batch``, or any iterable); sample
                ``i`` is a tuple or list with one element per var of ``feed_list``.

        Returns:
            ``{var name: np.ndarray}`` with each var's dtype, and the shape NOTE(feeder-shape)
            gives (the declared one, ``-1`` replaced by the number of samples, when the
            samples have the declared shape); a ``LoDTensor`` for a var with ``lod_level >= 1``
            (NOTE(feeder-lod)).

        Raises:
            ProgramError: an empty minibatch; a sample with the wrong number of elements;
                elements that do not stack into one array, or whose stack does not reshape to
                the declared shape (NOTE(feeder-shape)); an element nested less deeply than its
                var's lod_level; naming the var (and the sample, where one is at fault).
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


class DataToLoDTensorConverter:
    """Fluid 1.8's one-var converter: ``feed`` one sample's element at a time, then ``done``
    gives the batch as a ``LoDTensor`` and starts a new one.

    ``feed`` keeps what Fluid keeps: ``data``, the steps (for ``lod_level`` 0, the elements
    themselves), and ``lod``, the sequence lengths per level. ``done`` stacks ``data`` by
    NOTE(feeder-shape), the rule ``DataFeeder`` follows (a stack of another rank than ``shape``
    is reshaped to it; a shape with more than one unknown dim is none), and gives the lengths as
    the tensor's LoD.

    Args:
        place: the place of the tensors (kept; the data stays on the host, as ``DataFeeder``'s).
        lod_level: how many levels of lists a sample's element has around its steps.
        shape: the var's declared shape (-1 or None: unknown).
        dtype: the var's dtype (a name Fluid knows, ``convert_dtype``).

    Raises:
        ValueError: an unknown dtype.

    Example::

        c = DataToLoDTensorConverter(fluid.CPUPlace(), 1, [-1, 2], "float32")
        c.feed([[1, 2], [3, 4]]); c.feed([[5, 6]])
        t = c.done()     # float32 [3, 2], recursive_sequence_lengths [[2, 1]]

    Thread-safety: a converter holds one batch in the making; use it from one thread.
    """

    def __init__(self, place: Any, lod_level: int, shape: Sequence[int | None], dtype: Any) -> None:
        self.place = place
        self.lod_level = int(lod_level)
        dims = [-1 if d is None else int(d) for d in shape]
        self.shape = dims if sum(d < 0 for d in dims) <= 1 else None
        self.dtype = convert_dtype(dtype)
        self._slot = _Slot(types.SimpleNamespace(name="of a DataToLoDTensorConverter", dtype=self.dtype,
                                                 shape=self.shape, lod_level=self.lod_level))
        self._reset()

    def _reset(self) -> None:
        self.data: list = []
        self.lod: list[list[int]] = [[] for _ in range(self.lod_level)]

    def feed(self, data: Any) -> None:
        """Add one sample's element: its steps to ``data``, its sequences' lengths to ``lod``."""
        self._feed(data, 0)

    def _feed(self, data: Any, level: int) -> None:
        if level == self.lod_level:
            self.data.append(data)
            return
        self.lod[level].append(len(data))
        for sub in data:
            self._feed(sub, level + 1)

    def done(self) -> LoDTensor:
        """The batch fed so far as a LoDTensor (its LoD from ``lod``); then an empty batch.

        Raises:
            ProgramError: the steps do not stack into one array of the dtype, or their stack
                does not reshape to ``shape`` (NOTE(feeder-shape)), naming both shapes.
        """
        try:
            arr = np.array(self.data, dtype=self.dtype)
        except (ValueError, TypeError) as e:
            raise ProgramError(self._slot._not_one_array(self.data, "the steps", e)) from None
        arr = self._slot._shaped(arr, "the steps", self.lod[-1] if self.lod_level else None)
        offsets = [lengths_to_offsets(level) for level in self.lod]
        self._reset()
        return LoDTensor(arr, offsets)


class BatchedTensorProvider:
    """Fluid 1.8's batcher over a sample generator: calling it yields, per batch of
    ``batch_size`` samples, one ``LoDTensor`` per var of ``feed_list``.

    Args:
        feed_list: the data vars (lod_level 0), in the order of a sample's elements.
        place: the place of the tensors (kept, as ``DataToLoDTensorConverter``'s).
        batch_size: samples per batch.
        generator: a callable returning an iterator of samples (tuples, one element per var).
        drop_last: drop a last batch of fewer than ``batch_size`` samples.

    Raises:
        ValueError: a var with ``lod_level`` > 0 (Fluid asserts the same).

    Example::

        provider = BatchedTensorProvider([x, y], fluid.CPUPlace(), 32, sample_reader, drop_last=True)
        for x_t, y_t in provider():
            exe.run(feed={"x": x_t, "y": y_t}, fetch_list=[loss])

    Thread-safety: one iteration at a time.
    """

    def __init__(self, feed_list: Sequence[Any], place: Any, batch_size: int, generator: Callable[[], Iterable],
                 drop_last: bool) -> None:
        self.place = place
        self.batch_size = batch_size
        self.generator = generator
        self.drop_last = drop_last
        self.converters = []
        for var in feed_list:
            if var.lod_level != 0:
                raise ValueError(f"BatchedTensorProvider: var {var.name!r} has lod_level {var.lod_level}; "
                                 f"it batches lod_level 0 vars only (lod_level must be 0)")
            self.converters.append(DataToLoDTensorConverter(place, 0, var.shape, var.dtype))

    def _done(self) -> list[LoDTensor]:
        return [c.done() for c in self.converters]

    def __call__(self) -> Iterator[list[LoDTensor]]:
        n = 0
        for sample in self.generator():
            for element, c in zip(sample, self.converters):
                c.data.append(element)
            n += 1
            if n == self.batch_size:
                n = 0
                yield self._done()
        if n and not self.drop_last:
            yield self._done()
        else:
            for c in self.converters:
                c._reset()
