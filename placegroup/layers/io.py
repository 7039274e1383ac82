"""Data layers: where fed values enter the program, from ``exe.run(feed=...)`` or from a reader.

``data`` declares a var that ``exe.run`` is fed; ``py_reader`` (or
``create_py_reader_by_data``) makes a reader whose background thread feeds the vars
``read_file`` returns (placegroup/datafeed/data_loader.py has the machinery and a full example).
"""
from __future__ import annotations

from placegroup.errors import ProgramError
from placegroup.datafeed.data_loader import PyReaderVar, QueueReader, Slot, queue_name
from placegroup.ir.unique_name import generate as unique_name  # Fluid's layers.io binds it so
from placegroup.ir.framework import Variable, default_main_program
from placegroup.layers.file_ops import load
from placegroup.datafeed.reader_registry import ReaderSpec, add_reader, readers_of

__all__ = ["create_py_reader_by_data", "data", "double_buffer", "monkey_patch_reader_methods", "py_reader", "read_file"]
__all__ += ["load"]  # placegroup/layers/file_ops.py


def data(name: str, shape, append_batch_size: bool = True, dtype: str = "float32", lod_level: int = 0,
         type=None, stop_gradient: bool = True):
    """A var fed by ``exe.run(feed={name: array})`` (Fluid 1.8's signature and argument order).

    With ``append_batch_size`` (the default) the batch dimension is prepended:
    ``data("x", shape=[13])`` has shape ``[-1, 13]``; a shape that already has a ``None`` or
    negative dim is taken as it is, as in Fluid.
    """
    dims = [-1 if d is None else int(d) for d in shape]
    if append_batch_size and all(d >= 0 for d in dims):
        dims = [-1] + dims
    return default_main_program().global_block().create_var(
        name, shape=dims, dtype=dtype, is_data=True, stop_gradient=stop_gradient, lod_level=lod_level)


def _reader(slots: list, capacity, name: str | None) -> PyReaderVar:
    reader_name = f"{name}_reader" if name else unique_name("create_py_reader")
    return PyReaderVar(QueueReader(reader_name, queue_name(name), slots, capacity))


def py_reader(capacity: int, shapes, dtypes, lod_levels=None, name: str | None = None,
              use_double_buffer: bool = True) -> PyReaderVar:
    """A reader fed from Python on a background thread, as Fluid 1.x's ``py_reader``.

    Args:
        capacity: how many batches its queue holds; the thread blocks while it is full.
        shapes: one shape per var, the batch dimension included (``(-1, 784)``).
        dtypes: one dtype per var (``"float32"``, ``"int64"``, ...).
        lod_levels: one lod level per var (default 0; see NOTE(lod-feed) in data_feeder.py).
        name: names the reader ``<name>_reader`` and its queue ``<name>_queue``; give two
            readers used in one process different names (Fluid's advice, too).
        use_double_buffer: accepted; the queue already prefetches (NOTE(double-buffer)).

    Returns:
        A ``PyReaderVar``: pass it to ``read_file``; give it data with
        ``decorate_paddle_reader`` / ``decorate_sample_list_generator`` (lists of samples) or
        ``decorate_tensor_provider`` / ``decorate_batch_generator`` (one array per var);
        ``start()`` before each pass and ``reset()`` after ``exe.run`` raised
        ``fluid.core.EOFException``.

    Raises:
        ValueError: shapes, dtypes and lod_levels of different lengths, or a bad capacity.

    Example::

        reader = fluid.layers.py_reader(capacity=64, shapes=[(-1, 784), (-1, 1)],
                                        dtypes=["float32", "int64"])
        reader.decorate_paddle_reader(fluid.batch(mnist_train, batch_size=32))
        img, label = fluid.layers.read_file(reader)

    Thread-safety: build and start from one thread; ``exe.run`` may read from another.
    """
    shapes, dtypes = list(shapes), list(dtypes)
    lod_levels = [0] * len(shapes) if lod_levels is None else list(lod_levels)
    if not shapes or len(dtypes) != len(shapes) or len(lod_levels) != len(shapes):
        raise ValueError(f"py_reader: give one shape, dtype and lod level per var; got {len(shapes)} shapes "
                         f"{shapes}, {len(dtypes)} dtypes {dtypes}, {len(lod_levels)} lod levels")
    slots = [Slot(str(i), s, d, lod) for i, (s, d, lod) in enumerate(zip(shapes, dtypes, lod_levels))]
    return _reader(slots, capacity, name)


def create_py_reader_by_data(capacity: int, feed_list, name: str | None = None,
                             use_double_buffer: bool = True) -> PyReaderVar:
    """``py_reader`` with the shapes, dtypes and lod levels of the vars in ``feed_list``.

    ``read_file`` still returns new vars, as in Fluid; ``feed_list`` only describes them.

    Example::

        image = fluid.layers.data(name="image", shape=[784])
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        reader = fluid.layers.create_py_reader_by_data(capacity=64, feed_list=[image, label])
        img, lbl = fluid.layers.read_file(reader)
    """
    if not isinstance(feed_list, (list, tuple)) or not all(isinstance(v, Variable) for v in feed_list):
        raise TypeError(f"create_py_reader_by_data: feed_list must be a list of Variables, got {feed_list!r}")
    return _reader([Slot.of(v, read_op=True) for v in feed_list], capacity, name)


def monkey_patch_reader_methods(reader: PyReaderVar) -> PyReaderVar:
    """Give ``reader`` Fluid's reader-var methods, as Fluid's ``py_reader`` does to its var:
    a ``reset()`` that ends the pass of the reader's queue (Fluid's resets the reader it finds
    in the global scope), and ``stop_gradient = persistable = True``.

    Returns:
        ``reader`` itself.

    Raises:
        TypeError: ``reader`` is not a reader from ``py_reader``/``create_py_reader_by_data``.

    Example::

        reader = fluid.layers.io.monkey_patch_reader_methods(reader)
        reader.reset()
    """
    if not isinstance(reader, PyReaderVar):
        raise TypeError(f"monkey_patch_reader_methods: expected a reader from fluid.layers.py_reader, got {reader!r}")

    def reset() -> None:
        reader._live.reset()

    reader.reset = reset
    reader.stop_gradient = True
    reader.persistable = True
    return reader


def double_buffer(reader: PyReaderVar, place=None, name: str | None = None) -> PyReaderVar:
    """Fluid's double-buffered reader; here ``reader`` itself (NOTE(double-buffer))."""
    if not isinstance(reader, PyReaderVar):
        raise TypeError(f"double_buffer: expected a reader from py_reader, got {reader!r}")
    return reader


def read_file(reader: PyReaderVar):
    """The vars ``reader`` fills at every ``exe.run``: one per declared shape (a single var
    when there is one), named ``read_file_<n>.tmp_<i>``.

    The current main program records the reader (``Program.extra["readers"]``,
    placegroup/datafeed/reader_registry.py), so the program, its clones and the programs the
    DistributeTranspiler makes from it read from it; a distributed trainer that starts its
    reader is fed by it, a pserver never reads.

    Raises:
        TypeError: ``reader`` is not a py_reader.
        ProgramError: the program already reads from this reader.
    """
    if not isinstance(reader, PyReaderVar):
        raise TypeError(f"read_file: expected a reader from fluid.layers.py_reader, got {reader!r}")
    program, live = default_main_program(), reader._live
    if any(spec.queue == live.queue_name for spec in readers_of(program)):
        raise ProgramError(f"read_file: this program already reads from reader {live.name!r}; call "
                           f"read_file once per reader")
    block, prefix = program.global_block(), unique_name("read_file")
    outs = [block.create_var(unique_name(f"{prefix}.tmp"), shape=s.shape, dtype=s.dtype, is_data=True,
                             stop_gradient=True, lod_level=s.lod_level) for s in live.slots]
    add_reader(program, ReaderSpec(live.name, live.queue_name, tuple(v.name for v in outs), live.capacity))
    for slot, var in zip(live.slots, outs):  # errors about a batch name the var it fills
        slot.name = var.name
    return outs[0] if len(outs) == 1 else outs
