"""Framing: messages <-> ZeroMQ frames, as docs/protocol.md describes.

``pack`` makes the frame list of one message (a msgpack header, then each array's raw
buffer, zero-copy); ``unpack`` validates a received frame list and gives a ``Message`` whose
arrays are numpy views of the received frames (no copy). Anything malformed raises
``FrameError``; the caller drops it with a log line.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import msgpack
import numpy as np

from placegroup.ops.selected_rows import SelectedRows

PROTOCOL_VERSION = 1
KINDS = ("hello", "values", "done", "error", "fetch")
MAX_HEADER = 64 * 1024
_NUMERIC = frozenset("biuf")


class FrameError(ValueError):
    """A received message does not follow docs/protocol.md."""


@dataclasses.dataclass
class Message:
    kind: str
    src: str
    step: int
    vals: list = dataclasses.field(default_factory=list)  # [(var, version, array)]
    msg: str = ""
    digest: str = ""


def _buf(a: np.ndarray):
    a = np.ascontiguousarray(a)
    return a if a.ndim else a.reshape(1)  # 0-d arrays expose no buffer on some numpy builds


def pack(kind: str, src: str, step: int, vals: Sequence[tuple] = (), msg: str = "",
         digest: str = "") -> list:
    """Frames of one message. ``vals``: ``(var, version, value)`` with numpy arrays or
    ``SelectedRows``; device arrays must be copied to the host first."""
    entries, frames = [], []
    for var, version, value in vals:
        if isinstance(value, SelectedRows):
            v = np.asarray(value.values)
            entries.append([var, int(version), v.dtype.str, list(v.shape), "rows", value.height])
            frames += [_buf(np.asarray(value.rows, dtype=np.int64)), _buf(v)]
        else:
            v = np.asarray(value)
            entries.append([var, int(version), v.dtype.str, list(v.shape), "dense"])
            frames.append(_buf(v))
    head: dict[str, Any] = {"v": PROTOCOL_VERSION, "kind": kind, "src": src, "step": int(step)}
    if entries:
        head["vals"] = entries
    if msg:
        head["msg"] = msg
    if digest:
        head["digest"] = digest
    return [msgpack.packb(head, use_bin_type=True)] + frames


def pack_fetch(src: str, step: int, wanted: Sequence[tuple]) -> list:
    """A ``fetch`` message asking for ``[(var, version)]``."""
    head = {"v": PROTOCOL_VERSION, "kind": "fetch", "src": src, "step": int(step),
            "vals": [[var, int(version)] for var, version in wanted]}
    return [msgpack.packb(head, use_bin_type=True)]


_DTYPES: dict = {}  # dtype.str -> np.dtype (parsing a dtype string costs more than the rest)


def _dtype(dts: str) -> np.dtype:
    d = _DTYPES.get(dts)
    if d is None:
        d = np.dtype(dts)
        if len(_DTYPES) < 64:
            _DTYPES[dts] = d
    return d


def _view(frame, dtype: np.dtype, shape: tuple) -> np.ndarray:
    """A numpy view of a zmq.Frame (or of any buffer, for in-process use), checked for size."""
    buf = memoryview(frame.buffer if hasattr(frame, "buffer") else frame).cast("B")
    n = math.prod(shape)
    if buf.nbytes != n * dtype.itemsize:
        raise FrameError(f"frame of {buf.nbytes} bytes does not hold {dtype}{list(shape)}")
    return np.frombuffer(buf, dtype=dtype, count=n).reshape(shape)


def unpack(frames: Sequence) -> Message:
    """Validate and decode one message (frames as received, header first).

    Raises:
        FrameError: naming what is wrong.
    """
    if not frames:
        raise FrameError("empty message")
    raw = frames[0].bytes if hasattr(frames[0], "bytes") else bytes(frames[0])
    if len(raw) > MAX_HEADER:
        raise FrameError(f"header of {len(raw)} bytes exceeds {MAX_HEADER}")
    try:
        head = msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException) as e:
        raise FrameError(f"header is not msgpack: {e}") from None
    if not isinstance(head, dict):
        raise FrameError("header is not a map")
    if head.get("v") != PROTOCOL_VERSION:
        raise FrameError(f"protocol version {head.get('v')!r}, expected {PROTOCOL_VERSION}")
    kind, src, step = head.get("kind"), head.get("src"), head.get("step")
    if kind not in KINDS or not isinstance(src, str) or not isinstance(step, int):
        raise FrameError(f"bad kind/src/step: {kind!r}, {src!r}, {step!r}")
    entries = head.get("vals", [])
    if not isinstance(entries, list):
        raise FrameError("vals is not a list")
    out = Message(kind, src, step, msg=str(head.get("msg", "")), digest=str(head.get("digest", "")))
    i = 1
    for e in entries:
        if kind == "fetch":
            if not (isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], int)):
                raise FrameError(f"bad fetch entry {e!r}")
            out.vals.append((e[0], e[1], None))
            continue
        rows_entry = isinstance(e, list) and len(e) == 6 and e[4] == "rows" and isinstance(e[5], int) and e[5] >= 0
        if not (isinstance(e, list) and (len(e) == 5 and e[4] == "dense" or rows_entry) and isinstance(e[0], str)
                and isinstance(e[1], int) and isinstance(e[2], str) and isinstance(e[3], list)):
            raise FrameError(f"bad vals entry {e!r}")
        var, version, dts, shape, vkind = e[:5]
        try:
            dtype = _dtype(dts)
        except TypeError:
            raise FrameError(f"var {var!r}: unknown dtype {dts!r}") from None
        if dtype.kind not in _NUMERIC or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise FrameError(f"var {var!r}: dtype {dts!r} / shape {shape!r} not allowed")
        need = 2 if vkind == "rows" else 1
        if i + need > len(frames):
            raise FrameError(f"var {var!r}: missing frames ({len(frames)} frames for {len(entries)} values)")
        if vkind == "rows":
            if not shape:
                raise FrameError(f"var {var!r}: SelectedRows values need a row dimension")
            rows = _view(frames[i], np.dtype(np.int64), (shape[0],))
            value = SelectedRows(rows, _view(frames[i + 1], dtype, tuple(shape)), e[5])
        else:
            value = _view(frames[i], dtype, tuple(shape))
        out.vals.append((var, version, value))
        i += need
    if i != len(frames):
        raise FrameError(f"{len(frames) - i} unexpected extra frame(s)")
    return out
