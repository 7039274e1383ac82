"""Layers that append the file ops: ``load`` (Fluid 1.8's ``fluid.layers.io.load``), ``save``,
``save_combine`` and ``load_combine`` (``fluid.layers.tensor``'s). placegroup/layers/io.py and
tensor.py bind them, as Fluid's modules do; the ops are in ops/file_io.py and
ops/file_io_combine.py, and their files are placegroup var files (the ones
``fluid.io.save_vars`` writes, docs/prog_bin.md), read and written when the program runs.

NOTE(file-layers-1.8): Fluid 1.8.5's own ``save``, ``save_combine`` and ``load_combine``
layers cannot append their ops (they name the input slot ``input`` and pass the attrs as
``args``: an AssertionError "Input X not found", or a failing op), and its ``load`` appends a
load op without its output. These append what those layers mean to: the ops with X / Out and
the attrs ``file_path`` and ``overwrite`` (``load_as_fp16``).

Example::

    import placegroup as fluid
    w = fluid.layers.create_parameter([4, 3], "float32", name="w")
    fluid.layers.tensor.save(w, "/tmp/w.pgvars")           # run the program to write the file
    v = fluid.layers.create_tensor("float32")
    fluid.layers.load(v, "/tmp/w.pgvars")                  # running this program reads it into v
"""
from __future__ import annotations

import os

from placegroup.ir.framework import Variable
from placegroup.model.layer_helper import LayerHelper
from placegroup.ops import file_io, file_io_combine  # noqa: F401  (registers the ops, NOTE(file-io-ops))

__all__ = ["load", "save", "save_combine", "load_combine"]


def _vars(layer: str, what: str, v) -> list:
    items = [v] if isinstance(v, Variable) else list(v) if isinstance(v, (list, tuple)) else None
    if not items or not all(isinstance(x, Variable) for x in items):
        raise TypeError(f"{layer}: {what} must be a Variable or a non-empty list of Variables, got {v!r}")
    return items


def _path(layer: str, file_path) -> str:
    if not isinstance(file_path, (str, os.PathLike)) or not str(file_path):
        raise ValueError(f"{layer}: file_path must be a non-empty path, got {file_path!r}")
    return os.fspath(file_path)


def load(out, file_path, load_as_fp16=None):
    """Append a ``load`` op: running the program reads the one var in ``file_path`` (as a
    ``save`` op or ``fluid.io.save_vars`` with ``filename=None`` wrote it) into ``out``.

    Args:
        out: the Variable to fill.
        file_path: the file.
        load_as_fp16: convert the value to float16.

    Returns:
        None, as Fluid's.

    Raises:
        TypeError: ``out`` is not a Variable.
        ValueError: an empty ``file_path``.

    Example::

        t = fluid.layers.create_tensor(dtype="float32")
        fluid.layers.load(t, "./tmp_tensor.bin")
    """
    (out,) = _vars("load", "out", out)
    attrs = {"file_path": _path("load", file_path)}
    if load_as_fp16 is not None:
        attrs["load_as_fp16"] = bool(load_as_fp16)
    LayerHelper("load").append_op("load", {}, {"Out": [out]}, attrs)


def save(x, file_path, overwrite: bool = True):
    """Append a ``save`` op: running the program writes ``x``'s value to ``file_path``, a file
    ``load`` (and ``fluid.io.load_vars`` for a var named as the file) reads.

    Args:
        x: the Variable to save.
        file_path: the file; its directory is made.
        overwrite: False: fail at run time when the file exists.

    Raises:
        TypeError: ``x`` is not a Variable.
        ValueError: an empty ``file_path``.

    Example::

        fluid.layers.tensor.save(w, "./w")
    """
    (x,) = _vars("save", "x", x)
    LayerHelper("save").append_op("save", {"X": [x]}, {},
                                  {"file_path": _path("save", file_path), "overwrite": bool(overwrite)})


def save_combine(x, file_path, overwrite: bool = True):
    """Append a ``save_combine`` op: running the program writes every var of ``x`` into the one
    file ``file_path``, named after its var, in order: the file ``fluid.io.save_vars(...,
    filename=...)`` writes for the same vars.

    Args:
        x: a list of Variables.
        file_path: the file; its directory is made.
        overwrite: False: fail at run time when the file exists.

    Raises:
        TypeError: ``x`` is not a list of Variables.
        ValueError: an empty ``file_path``.

    Example::

        fluid.layers.tensor.save_combine([w, b], file_path="./params")
    """
    xs = _vars("save_combine", "x", x)
    LayerHelper("save_combine").append_op(
        "save_combine", {"X": xs}, {}, {"file_path": _path("save_combine", file_path), "overwrite": bool(overwrite),
                                        "_var_names": [v.name for v in xs]})


def load_combine(out, file_path):
    """Append a ``load_combine`` op: running the program fills the vars of ``out``, in order,
    from the records of ``file_path`` (which must hold exactly that many).

    Args:
        out: a list of Variables.
        file_path: the file.

    Raises:
        TypeError: ``out`` is not a list of Variables.
        ValueError: an empty ``file_path``.

    Example::

        fluid.layers.tensor.load_combine([w, b], file_path="./params")
    """
    outs = _vars("load_combine", "out", out)
    LayerHelper("load_combine").append_op("load_combine", {}, {"Out": outs},
                                          {"file_path": _path("load_combine", file_path),
                                           "_var_names": [v.name for v in outs]})
