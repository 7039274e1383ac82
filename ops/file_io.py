"""Ops that write a var to a file and read it back, as Fluid 1.8's ``save`` and ``load`` ops
(what ``fluid.incubate.fleet.utils.utils.append_save_op`` / ``append_load_op`` append).

The file is a placegroup var file (docs/prog_bin.md, ``placegroup.io.var_files``) holding one
record, named after the file; ``load`` reads the one record whatever its name, as Fluid's
reads the one tensor a ``save`` wrote. Nothing is pickled. A value with a LoD keeps only its
data, as the var files do.

NOTE(file-io-ops): these kernels touch the file system, which kernels otherwise never do; the
codec they use is the var files' own (placegroup/io/var_format.py, which imports nothing of the
executor), so the files are the ones ``fluid.io.load_vars`` reads. Like every op family they
are registered in every process by ``placegroup.ops``'s ``__init__``.
"""
from __future__ import annotations

import math
import os

import numpy as np

from placegroup.util.atomic_files import atomic_write
from placegroup.util.var_format import parse, records
from placegroup.ops.registry import Meta, Slot, register
from placegroup.values import as_host, to_device

SAVE_OP, LOAD_OP = "save", "load"  # the op types, for those that append them
_SAVE_ATTRS = {"file_path": "", "overwrite": True, "save_as_fp16": False}
_LOAD_ATTRS = {"file_path": "", "load_as_fp16": False, "seek": -1, "shape": []}


def _need_path(op: str, a) -> str:
    path = a["file_path"]
    if not path:
        raise ValueError(f"{op}: attr file_path is empty: give the file to {'write' if op == 'save' else 'read'}")
    return path


@register(SAVE_OP, ins=(Slot("X", no_grad=True),), outs=(), attrs=_SAVE_ATTRS, infer=lambda ins, a: {})
def save(xp, ins, a, ctx):
    """Write X to ``file_path`` (float16 with ``save_as_fp16``), atomically; parent
    directories are made.

    Raises:
        FileExistsError: the file exists and ``overwrite`` is false (Fluid's message).
    """
    path = _need_path("save", a)
    if os.path.exists(path) and not a["overwrite"]:
        raise FileExistsError(f"{path} exists!, cannot save to it when overwrite=false")
    x = np.asarray(getattr(as_host(ins["X"]), "data", as_host(ins["X"])))
    if a["save_as_fp16"]:
        x = x.astype(np.float16)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write(path, records([(os.path.basename(path), x)]))
    return {}


def _load_infer(ins, a):
    shape = [int(d) for d in a["shape"]]
    return {"Out": Meta(tuple(shape), "float16")} if shape and a["load_as_fp16"] else {}


@register(LOAD_OP, ins=(), outs=("Out",), attrs=_LOAD_ATTRS, infer=_load_infer, lod="drop")
def load(xp, ins, a, ctx):
    """Out = the value in ``file_path`` (float16 with ``load_as_fp16``); with ``seek`` >= 0,
    the ``prod(shape)`` elements from element ``seek`` on, as ``shape``.

    Raises:
        SerializationError: no such file, a damaged one, or not one value.
        ValueError: ``seek``/``shape`` outside the value.
    """
    path = _need_path("load", a)
    with open(path, "rb") as f:
        values = parse(f.read(), path)
    if len(values) != 1:
        raise ValueError(f"load: {path} holds {len(values)} values ({sorted(values)}); the load op reads a "
                         f"file that a save op wrote (one value)")
    out = next(iter(values.values()))
    if a["seek"] >= 0:
        shape = [int(d) for d in a["shape"]]
        n = math.prod(shape)
        flat = out.reshape(-1)
        if not shape or a["seek"] + n > flat.size:
            raise ValueError(f"load: seek={a['seek']}, shape={shape} is outside the {flat.size} elements of {path}")
        out = flat[a["seek"]:a["seek"] + n].reshape(shape)
    if a["load_as_fp16"]:
        out = out.astype(np.float16)
    return {"Out": to_device(xp, np.ascontiguousarray(out))}
