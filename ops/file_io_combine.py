"""``save_combine`` and ``load_combine``: several vars in one file, as Fluid 1.8's ops of those
names (``fluid.layers.tensor.save_combine`` / ``load_combine`` append them).

The file is a placegroup var file (docs/prog_bin.md), the one ``fluid.io.save_vars(...,
filename=...)`` writes: one record per var, in the order of X, each named after its var (the
layer puts the names in the attr ``_var_names``, since a kernel sees values, not names), so
``fluid.io.load_vars(..., filename=...)`` reads what save_combine wrote and load_combine reads
what save_vars wrote. load_combine fills Out[i] with the file's i-th record, as Fluid reads
the tensors one after another, and the file must hold exactly as many records as Out has
vars (Fluid refuses to load part of a file; the layer gives the Out names in ``_var_names`` too,
for that check). A value with a LoD keeps only its data, as the
var files do. ``save_as_fp16`` / ``load_as_fp16`` convert to float16. Fluid's in-memory
variants (``save_to_memory``, ``model_from_memory``) are not supported: a clear error.

NOTE(file-io-ops) in ops/file_io.py says why these kernels touch files.
"""
from __future__ import annotations

import os

import numpy as np

from placegroup.util.atomic_files import atomic_write
from placegroup.util.var_format import read, records
from placegroup.ops.file_io import _need_path
from placegroup.ops.registry import Slot, register
from placegroup.values import as_host, to_device

_SAVE_ATTRS = {"file_path": "", "overwrite": True, "save_as_fp16": False, "save_to_memory": False, "_var_names": []}
_LOAD_ATTRS = {"file_path": "", "load_as_fp16": False, "model_from_memory": False, "_var_names": []}


@register("save_combine", ins=(Slot("X", duplicable=True, no_grad=True),), outs=(Slot("Y", dispensable=True),),
          attrs=_SAVE_ATTRS, infer=lambda ins, a: {})
def save_combine(xp, ins, a, ctx):
    """Write every X into ``file_path``, one record each, atomically; parent directories are
    made.

    Raises:
        FileExistsError: the file exists and ``overwrite`` is false (Fluid's message).
        ValueError: ``save_to_memory``, or ``_var_names`` not one name per X.
    """
    if a["save_to_memory"]:
        raise ValueError("save_combine: save_to_memory is not supported in placegroup; save to a file_path")
    path = _need_path("save", a)
    xs = ins["X"]
    names = list(a["_var_names"]) or [f"X{i}" for i in range(len(xs))]
    if len(names) != len(xs):
        raise ValueError(f"save_combine: _var_names gives {len(names)} names for {len(xs)} vars")
    if os.path.exists(path) and not a["overwrite"]:
        raise FileExistsError(f"{path} exists!, cannot save_combine to it when overwrite=false")
    items = []
    for name, x in zip(names, xs):
        v = np.asarray(getattr(as_host(x), "data", as_host(x)))
        items.append((name, v.astype(np.float16) if a["save_as_fp16"] else v))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write(path, records(items))
    return {}


@register("load_combine", ins=(), outs=(Slot("Out", duplicable=True),), attrs=_LOAD_ATTRS, infer=lambda ins, a: {},
          lod="drop")
def load_combine(xp, ins, a, ctx):
    """Out[i] = the i-th record of ``file_path`` (float16 with ``load_as_fp16``).

    Raises:
        SerializationError: no such file, or a damaged or foreign one.
        ValueError: the file holds another number of records than Out has vars, or
            ``model_from_memory``.
    """
    if a["model_from_memory"]:
        raise ValueError("load_combine: model_from_memory is not supported in placegroup; load from a file_path")
    path = _need_path("load", a)
    values = list(read(path).values())  # in the file's order
    names = list(a["_var_names"])
    if names and len(values) != len(names):
        raise ValueError(f"load_combine: {path} holds {len(values)} vars, but Out has {len(names)} ({names}); "
                         f"load_combine loads a whole file, in its order (use load for one var)")
    return {"Out": [to_device(xp, np.ascontiguousarray(v.astype(np.float16) if a["load_as_fp16"] else v))
                    for v in values]}
