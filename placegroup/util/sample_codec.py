"""How a sample crosses from a child process to its parent: msgpack, never pickle.

Used by ``paddle.reader.multiprocess_reader`` (placegroup/datafeed/reader_decorators.py) and by the worker
processes of a map-style ``fluid.io.DataLoader`` (placegroup/dataloader/dataloader_iter.py).

NOTE(reader-codec): samples cross as msgpack: ints, floats, str, bytes, bool, None, lists,
dicts, and two extension types, a tuple (so an ``(image, label)`` sample stays a tuple) and a
numpy array of a plain numeric dtype (its dtype, shape and raw bytes). Anything else is
refused by name in the child.

Example::

    unpack(pack((np.arange(3), 1)))  # (array([0, 1, 2]), 1)
"""
from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

__all__ = ["pack", "unpack"]

_EXT_TUPLE, _EXT_ARRAY = 1, 2
_PLAIN = frozenset("bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 "
                   "float64 complex64 complex128".split())


def _encode(obj: Any):
    if isinstance(obj, tuple):
        return msgpack.ExtType(_EXT_TUPLE, pack(list(obj)))
    if isinstance(obj, np.ndarray):
        if obj.dtype.name not in _PLAIN:
            raise TypeError(f"cannot send an array of dtype {obj.dtype} between processes (NOTE(reader-codec))")
        arr = np.ascontiguousarray(obj, dtype=obj.dtype.newbyteorder("<"))
        return msgpack.ExtType(_EXT_ARRAY, msgpack.packb([arr.dtype.str, list(arr.shape), arr.tobytes()]))
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot send a {type(obj).__name__} between processes (samples cross as msgpack: numbers, "
                    f"str, bytes, lists, tuples, dicts and numeric numpy arrays; NOTE(reader-codec))")


def _decode(code: int, data: bytes):
    if code == _EXT_TUPLE:
        return tuple(unpack(data))
    if code == _EXT_ARRAY:
        dtype, shape, raw = msgpack.unpackb(data, raw=False)
        if np.dtype(dtype).name not in _PLAIN:
            raise ValueError(f"refused an array of dtype {dtype} from another process (NOTE(reader-codec))")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).astype(np.dtype(dtype).newbyteorder("="))
    return msgpack.ExtType(code, data)


def pack(sample: Any) -> bytes:
    """``sample`` as bytes (TypeError naming what cannot cross)."""
    return msgpack.packb(sample, default=_encode, use_bin_type=True, strict_types=True)


def unpack(data: bytes) -> Any:
    """The sample ``pack`` made (ValueError for an array of a dtype that may not cross)."""
    return msgpack.unpackb(data, raw=False, ext_hook=_decode, strict_map_key=False)
