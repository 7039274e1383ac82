"""Reading var files that Fluid 1.x saved (``fluid.io.save_persistables``, ``save_params``,
``save_vars``, ``save_inference_model``), so a model trained or initialised on Paddle loads here.

Fluid writes each var as its LoDTensor stream, one file a var or, with ``filename=``, the
vars one after the other in the order of their sorted names. A LoDTensor stream is:

* ``uint32`` version (0); ``uint64`` LoD levels, each an ``uint64`` byte count and that many
  bytes of ``size_t`` offsets;
* the tensor: ``uint32`` version (0), ``int32`` length of a protobuf ``TensorDesc`` (field 1:
  the data type, an enum; field 2: the dims, int64s), the desc, and the raw little-endian
  data.

Only plain numeric tensors are read (no SelectedRows, no strings); the LoD of a saved
parameter is dropped. Each error names the file and the var.

Thread-safety: pure functions over bytes.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from placegroup.errors import SerializationError

# Fluid's VarType.Type values of the numeric tensor types
_DTYPES = {0: "bool", 1: "int16", 2: "int32", 3: "int64", 4: "float16", 5: "float32", 6: "float64",
           20: "uint8", 21: "int8"}


def looks_like_fluid(data: bytes) -> bool:
    """Whether ``data`` starts as a Fluid LoDTensor stream (version 0 then a LoD level count)."""
    return len(data) >= 12 and data[:4] == b"\0\0\0\0" and struct.unpack_from("<Q", data, 4)[0] < 16


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("the tensor description ends inside a number")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _desc(buf: bytes) -> tuple[int, list[int]]:
    """(data type, dims) of a serialized ``TensorDesc``."""
    dtype, dims, pos = None, [], 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            v, pos = _varint(buf, pos)
            if field == 1:
                dtype = v
            elif field == 2:
                dims.append(_signed(v))
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if field == 2:  # packed dims
                end = pos + n
                while pos < end:
                    v, pos = _varint(buf, pos)
                    dims.append(_signed(v))
            else:
                pos += n
        else:
            raise ValueError(f"field {field} has wire type {wire}, which a TensorDesc does not use")
    if dtype is None:
        raise ValueError("the tensor description has no data type")
    return dtype, dims


def _one(view: memoryview, pos: int, where: str) -> tuple[np.ndarray, int]:
    """The tensor of the LoDTensor stream at ``pos``, and where the next one starts."""
    try:
        version, levels = struct.unpack_from("<IQ", view, pos)
        pos += 12
        if version != 0:
            raise ValueError(f"LoDTensor version {version}, not 0")
        for _ in range(levels):
            (size,), pos = struct.unpack_from("<Q", view, pos), pos + 8
            pos += size
        version, desc_len = struct.unpack_from("<Ii", view, pos)
        pos += 8
        if version != 0:
            raise ValueError(f"tensor version {version}, not 0")
        dtype_id, dims = _desc(bytes(view[pos:pos + desc_len]))
        pos += desc_len
    except (struct.error, ValueError) as e:
        raise SerializationError(f"{where}: not a Fluid tensor file, or truncated ({e})") from None
    if dtype_id not in _DTYPES:
        raise SerializationError(f"{where}: Fluid data type {dtype_id} is not a numeric tensor type placegroup reads")
    dtype = np.dtype(_DTYPES[dtype_id])
    nbytes = math.prod(dims) * dtype.itemsize
    if any(d < 0 for d in dims) or pos + nbytes > len(view):
        raise SerializationError(f"{where}: truncated: {dtype.name}{dims} needs {nbytes} bytes, the file has "
                                 f"{len(view) - pos} left")
    flat = np.frombuffer(view[pos:pos + nbytes], dtype=dtype.newbyteorder("<"))
    return flat.reshape(dims).astype(dtype), pos + nbytes


class FluidVars(dict):
    """name -> array read from a file Fluid wrote. Fluid's load ops take a saved tensor in the
    shape it has, whatever the program declares (its auc state is saved as [T+2] and declared
    [1, T+1]), so a loader checks no shape for these (placegroup/io/var_files.py)."""


def parse_fluid(data: bytes, path: str, names: list[str]) -> FluidVars:
    """name -> array for the tensors of a Fluid var file, which holds ``names`` in order (one
    name for a file a var; the sorted names for a file saved with ``filename=``).

    Raises:
        SerializationError: a truncated or foreign file, another count of tensors than names.
    """
    view, pos, out = memoryview(data), 0, FluidVars()
    for name in names:
        if pos >= len(view):
            raise SerializationError(f"{path}: holds {len(out)} tensors, fewer than the {len(names)} vars "
                                     f"asked for (from {name!r} on)")
        out[name], pos = _one(view, pos, f"{path} (var {name!r})")
    if pos != len(view):
        raise SerializationError(f"{path}: {len(view) - pos} bytes after the {len(names)} tensors of "
                                 f"{sorted(names)}: it holds more vars than that")
    return out
