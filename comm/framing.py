"""Framing: messages <-> ZeroMQ frames, as docs/protocol.md describes.

``pack`` makes the frame list of one message (a msgpack header, then each array's raw
buffer, zero-copy); ``unpack`` validates a received frame list and gives a ``Message`` whose
arrays are numpy views of the received frames (no copy). Anything malformed raises
``FrameError`` and nothing else, whatever the bytes (tests/test_hostile.py fuzzes it); the
caller drops it with a log line. What a well-formed message may carry is the receiver's
business (comm/expect.py, docs/protocol.md "What is dropped").

A value's ``var`` is a str, or for a part of a collective call a ``(tag, part)`` pair, which
travels as a ``coll`` entry whose tag is a field of its own (docs/protocol.md, "Collectives").

NOTE(lod-frame): a ``LoDTensor`` travels as a ``lod`` entry: one int64 frame of offsets per
level (top level first), then the data's frame, all zero-copy like a dense array; the entry's
sixth element is the offsets count of each level, so the frame sizes are checked before any
view is made. ``unpack`` refuses offsets that are not a LoD of the data (``check_lod``: not
starting at 0, not monotone, not ending at the level below's sequence count or at the data's
rows); whether the depth is the one the receiving var declares is ``comm/expect.py``'s check.
A LoDTensor without offsets is sent as the dense array it is.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import msgpack
import numpy as np

from placegroup.values import LoDTensor, SelectedRows, check_lod

PROTOCOL_VERSION = 4  # 3: the `lod` entry kind (NOTE(lod-frame)); 4: `wrows` (weighted SelectedRows)
KINDS = ("hello", "values", "done", "error", "fetch")
MAX_HEADER = 64 * 1024
MAX_DIMS = 32  # numpy 1.x's limit (2.x allows 64): a deeper shape is refused, not a numpy error
MAX_LOD_LEVELS = 8  # Fluid's data uses 1 or 2; a header claiming thousands is refused
_NUMERIC = frozenset("biuf")


class FrameError(ValueError):
    """A received message does not follow docs/protocol.md."""


@dataclasses.dataclass
class Message:
    kind: str
    src: str
    step: int
    vals: list = dataclasses.field(default_factory=list)  # [(var or (tag, part), version, array)]
    msg: str = ""
    digest: str = ""


def _buf(a: np.ndarray):
    a = np.ascontiguousarray(a)
    return a if a.ndim else a.reshape(1)  # 0-d arrays expose no buffer on some numpy builds


def pack(kind: str, src: str, step: int, vals: Sequence[tuple] = (), msg: str = "",
         digest: str = "") -> list:
    """Frames of one message. ``vals``: ``(var, version, value)`` with numpy arrays,
    ``SelectedRows`` or ``LoDTensor`` (NOTE(lod-frame)); device arrays must be copied to the
    host first. A ``var`` that is a ``(tag, part)`` pair is a collective's (a dense value)."""
    entries, frames = [], []
    for var, version, value in vals:
        if type(value) is LoDTensor:
            if value.offsets:
                v = np.asarray(value.data)
                entries.append([var, int(version), v.dtype.str, list(v.shape), "lod",
                                [int(o.shape[0]) for o in value.offsets]])
                frames += [_buf(np.asarray(o, dtype=np.int64)) for o in value.offsets]
                frames.append(_buf(v))
                continue
            value = value.data  # no LoD: the dense array it is
        if isinstance(value, SelectedRows):
            v = np.asarray(value.values)
            rows_kind = "rows" if value.weights is None else "wrows"  # NOTE(sighting-weights) in ops/dynamic.py
            entries.append([var, int(version), v.dtype.str, list(v.shape), rows_kind, value.height])
            frames += [_buf(np.asarray(value.rows, dtype=np.int64)), _buf(v)]
            if value.weights is not None:
                frames.append(_buf(np.asarray(value.weights, dtype=np.float32)))
        else:
            v = np.asarray(value)
            if type(var) is tuple:  # (tag, part) of a collective call
                entries.append([var[1], int(version), v.dtype.str, list(v.shape), "coll", var[0]])
            else:
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


def _int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)  # msgpack's true is no count


def _short(x) -> str:
    """``repr(x)`` cut short: a hostile header must not make a 64 KiB log line."""
    r = repr(x)
    return r if len(r) <= 80 else r[:77] + "..."


def _view(frame, dtype: np.dtype, shape: tuple) -> np.ndarray:
    """A numpy view of a zmq.Frame (or of any buffer, for in-process use), checked for size."""
    if hasattr(frame, "buffer"):  # a zmq.Frame: its length is its size in bytes
        buf, size = frame, len(frame)
    else:
        buf = memoryview(frame)
        buf = buf.cast("B") if buf.nbytes else memoryview(b"")  # an empty (0, n) array cannot be cast
        size = buf.nbytes
    n = math.prod(shape)
    if size != n * dtype.itemsize:
        raise FrameError(f"frame of {size} bytes does not hold {dtype}{list(shape)}")
    return np.frombuffer(buf, dtype=dtype, count=n).reshape(shape)


def _dims(shape) -> bool:
    """Whether ``shape`` is a list of at most MAX_DIMS counts (ints >= 0, not booleans)."""
    if type(shape) is not list or len(shape) > MAX_DIMS:
        return False
    for d in shape:
        if type(d) is not int or d < 0:
            return False
    return True


def _lod_counts(counts) -> bool:
    """Whether ``counts`` is a lod entry's level table: 1..MAX_LOD_LEVELS counts >= 1."""
    return (type(counts) is list and 0 < len(counts) <= MAX_LOD_LEVELS
            and all(type(n) is int and n >= 1 for n in counts))


def _lod_value(var, frames, counts: list, dtype: np.dtype, shape: list) -> LoDTensor:
    """The LoDTensor of a ``lod`` entry (NOTE(lod-frame)): views of its offsets frames and its
    data frame, refused unless the offsets are a LoD of the data's rows."""
    if not shape:
        raise FrameError(f"var {_short(var)}: a LoD tensor needs a row dimension")
    offsets = tuple(_view(f, np.dtype(np.int64), (n,)) for f, n in zip(frames, counts))
    why = check_lod(offsets, shape[0])
    if why is not None:
        raise FrameError(f"var {_short(var)}: bad LoD: {why[:200]}")
    return LoDTensor(_view(frames[-1], dtype, tuple(shape)), offsets, check=False)


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
    v = head.get("v")
    if not _int(v) or v != PROTOCOL_VERSION:
        raise FrameError(f"protocol version {_short(v)}, expected {PROTOCOL_VERSION}")
    kind, src, step = head.get("kind"), head.get("src"), head.get("step")
    if kind not in KINDS or not isinstance(src, str) or not _int(step):
        raise FrameError(f"bad kind/src/step: {_short(kind)}, {_short(src)}, {_short(step)}")
    entries = head.get("vals", [])
    if not isinstance(entries, list):
        raise FrameError("vals is not a list")
    out = Message(kind, src, step, msg=str(head.get("msg", "")), digest=str(head.get("digest", "")))
    i = 1
    for e in entries:
        if kind == "fetch":
            if not (isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and _int(e[1])):
                raise FrameError(f"bad fetch entry {_short(e)}")
            out.vals.append((e[0], e[1], None))
            continue
        # type(x) is int, not isinstance: msgpack's true is no count (_int)
        n_e = len(e) if type(e) is list else 0
        rows_entry = n_e == 6 and e[4] in ("rows", "wrows") and type(e[5]) is int and e[5] >= 0
        coll_entry = n_e == 6 and e[4] == "coll" and type(e[5]) is str
        lod_entry = n_e == 6 and e[4] == "lod" and _lod_counts(e[5])
        if not ((n_e == 5 and e[4] == "dense" or rows_entry or coll_entry or lod_entry) and type(e[0]) is str
                and type(e[1]) is int and type(e[2]) is str and type(e[3]) is list):
            raise FrameError(f"bad vals entry {_short(e)}")
        var, version, dts, shape, vkind = e[:5]
        try:  # a numeric dtype.str is short ("<f4"); numpy takes its time over "f4," * 20000
            dtype = _dtype(dts) if len(dts) <= 16 else None
        except (TypeError, ValueError, SyntaxError):  # numpy parses "(2" and friends as it can
            dtype = None
        if dtype is None:
            raise FrameError(f"var {_short(var)}: unknown dtype {_short(dts)}")
        if dtype.kind not in _NUMERIC or not _dims(shape):
            raise FrameError(f"var {_short(var)}: dtype {_short(dts)} / shape {_short(shape)} not allowed")
        need = 2 if vkind == "rows" else 3 if vkind == "wrows" else len(e[5]) + 1 if lod_entry else 1
        if i + need > len(frames):
            raise FrameError(f"var {_short(var)}: missing frames ({len(frames)} frames for {len(entries)} values)")
        if rows_entry:
            if not shape:
                raise FrameError(f"var {_short(var)}: SelectedRows values need a row dimension")
            rows = _view(frames[i], np.dtype(np.int64), (shape[0],))
            # a row id outside the var would index past it in the kernel that scatters the rows
            if rows.size and int(rows.view(np.uint64).max()) >= e[5]:  # a negative id is huge as uint64
                raise FrameError(f"var {_short(var)}: row ids {int(rows.min())}..{int(rows.max())} "
                                 f"outside its height {e[5]}")
            weights = _view(frames[i + 2], np.dtype(np.float32), (shape[0],)) if vkind == "wrows" else None
            value = SelectedRows(rows, _view(frames[i + 1], dtype, tuple(shape)), e[5], weights)
        elif lod_entry:
            value = _lod_value(var, frames[i:i + need], e[5], dtype, shape)
        else:
            value = _view(frames[i], dtype, tuple(shape))
        out.vals.append(((e[5], var) if coll_entry else var, version, value))
        i += need
    if i != len(frames):
        raise FrameError(f"{len(frames) - i} unexpected extra frame(s)")
    return out
