"""The var file: how placegroup writes var values to disk (docs/prog_bin.md), and reads them back.

A file is a small head (magic, format version, record count) and then one record per var: a
msgpack header (name, dtype, shape) and the raw little-endian bytes, under one blake2b-128
checksum. Only plain numeric dtypes are written, never an object, and nothing is pickled. Every
read checks every record before it returns any, and an error names the file and the var.

This module knows files only: the ``save``/``load`` ops (placegroup.ops) and fluid.io's save and
load functions (var_files.py, over the executor's scope) share it.

Thread-safety: pure functions over bytes and files.
"""
from __future__ import annotations

import hashlib
import math
import os
import struct
from typing import Sequence

import msgpack
import numpy as np
import pydantic

from placegroup.errors import SerializationError
from placegroup.util.fluid_tensor_file import looks_like_fluid, parse_fluid

VAR_MAGIC = b"PGVARS"
VAR_FORMAT_VERSION = 1
FILE_HEAD = struct.Struct("<6sHI")  # magic, format version, number of records
REC_HEAD = struct.Struct("<IQ16s")  # header length, data length, blake2b-128(header + data)
# Plain numeric dtypes only: nothing whose bytes could mean an object.
DTYPES = frozenset(["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                    "uint64", "float16", "float32", "float64"])


class _VarHeader(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    name: str
    dtype: str
    shape: list[pydantic.NonNegativeInt]


def records(items: Sequence[tuple[str, np.ndarray]]) -> list:
    chunks: list = [FILE_HEAD.pack(VAR_MAGIC, VAR_FORMAT_VERSION, len(items))]
    for name, arr in items:
        if arr.dtype.name not in DTYPES:
            raise SerializationError(f"var {name!r}: cannot save dtype {arr.dtype} (saveable: "
                                     f"{sorted(DTYPES)})")
        little = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        data = little.reshape(-1).view(np.uint8).data  # no copy of big tables
        header = msgpack.packb({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape)})
        digest = hashlib.blake2b(header, digest_size=16)
        digest.update(data)
        chunks += [REC_HEAD.pack(len(header), data.nbytes, digest.digest()), header, data]
    return chunks


def _header(raw) -> _VarHeader | None:
    try:
        return _VarHeader.model_validate(msgpack.unpackb(raw, raw=False))
    except (ValueError, TypeError, msgpack.UnpackException, pydantic.ValidationError):
        return None


def parse(data: bytes, path: str) -> dict[str, np.ndarray]:
    """name -> array for every record of a var file; errors name the file and the var."""
    view = memoryview(data)
    if len(view) < FILE_HEAD.size:
        raise SerializationError(f"{path}: truncated: {len(view)} bytes, shorter than the "
                                 f"{FILE_HEAD.size}-byte header")
    magic, version, count = FILE_HEAD.unpack_from(view)
    if magic != VAR_MAGIC:
        raise SerializationError(f"{path}: not a placegroup var file: magic is {magic!r}, "
                                 f"expected {VAR_MAGIC!r}")
    if version != VAR_FORMAT_VERSION:
        raise SerializationError(f"{path}: var file format version {version}; this placegroup "
                                 f"reads version {VAR_FORMAT_VERSION}")
    out: dict[str, np.ndarray] = {}
    pos = FILE_HEAD.size
    for i in range(count):
        where = f"{path}: record {i + 1} of {count}"
        if len(view) - pos < REC_HEAD.size:
            raise SerializationError(f"{where}: truncated: the file ends inside its head")
        hlen, dlen, digest = REC_HEAD.unpack_from(view, pos)
        pos += REC_HEAD.size
        header, body = view[pos:pos + hlen], view[pos + hlen:pos + hlen + dlen]
        meta = _header(header)
        if meta is not None:  # name the var below; the checksum then vouches for the header
            where += f" (var {meta.name!r})"
        if len(header) + len(body) < hlen + dlen:
            raise SerializationError(f"{where}: truncated: needs {hlen + dlen} bytes, the file "
                                     f"has {len(view) - pos} left")
        pos += hlen + dlen
        check = hashlib.blake2b(header, digest_size=16)
        check.update(body)
        if check.digest() != digest:
            raise SerializationError(f"{where}: checksum mismatch: the file was modified or "
                                     f"corrupted after it was written")
        if meta is None or meta.dtype not in DTYPES:
            raise SerializationError(f"{where}: malformed header (need name, a dtype of "
                                     f"{sorted(DTYPES)} and a shape)")
        dtype = np.dtype(meta.dtype)
        if dlen != math.prod(meta.shape) * dtype.itemsize:
            raise SerializationError(f"{where}: {dlen} data bytes do not make "
                                     f"{meta.dtype}{meta.shape}")
        if meta.name in out:
            raise SerializationError(f"{where}: var {meta.name!r} appears twice")
        flat = np.frombuffer(body, dtype=dtype.newbyteorder("<"))
        out[meta.name] = flat.reshape(meta.shape).astype(dtype)  # a native, writable copy
    if pos != len(view):
        raise SerializationError(f"{path}: {len(view) - pos} stray bytes after the last of "
                                 f"{count} records")
    return out


def read(path: str, name: str | None = None, names: list[str] | None = None) -> dict[str, np.ndarray]:
    """name -> array of a var file: placegroup's, or one Fluid 1.x saved (``name``: the var a
    file of one var holds; ``names``: the vars of a file of several, in the order Fluid
    wrote them), placegroup/util/fluid_tensor_file.py."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        what = f"var {name!r}: " if name is not None else ""
        raise SerializationError(f"{what}no file {path!r}: nothing was saved there (saved vars "
                                 f"need the same dirname and filename)") from None
    if not data.startswith(VAR_MAGIC) and looks_like_fluid(data) and (names or name):
        return parse_fluid(data, path, names or [name])
    return parse(data, path)


def index_vars(path: str, chunk: int = 1 << 22) -> dict[str, tuple[int, np.dtype, list[int]]]:
    """name -> (offset of its data in the file, little-endian dtype, shape) for each record of a
    var file, every record checked as ``load_vars`` checks it, its checksum computed over
    ``chunk``-byte reads: no var is ever held in memory, so a caller can then read only the
    rows it needs of a table larger than memory (placegroup/io/checkpoint.py).

    Raises:
        SerializationError: naming the file (and the var) for a missing, truncated, corrupted
            or foreign file.
    """
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise SerializationError(f"no file {path!r}: the checkpoint's manifest names it") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(FILE_HEAD.size)
        if len(head) < FILE_HEAD.size:
            raise SerializationError(f"{path}: truncated: {size} bytes, shorter than the "
                                     f"{FILE_HEAD.size}-byte header")
        magic, version, count = FILE_HEAD.unpack(head)
        if magic != VAR_MAGIC or version != VAR_FORMAT_VERSION:
            raise SerializationError(f"{path}: not a placegroup var file of format version "
                                     f"{VAR_FORMAT_VERSION} (magic {magic!r}, version {version})")
        out: dict = {}
        for i in range(count):
            where = f"{path}: record {i + 1} of {count}"
            rec = f.read(REC_HEAD.size)
            if len(rec) < REC_HEAD.size:
                raise SerializationError(f"{where}: truncated: the file ends inside its head")
            hlen, dlen, digest = REC_HEAD.unpack(rec)
            header = f.read(hlen) if hlen <= size else b""
            meta = _header(header)
            where += f" (var {meta.name!r})" if meta is not None else ""
            offset = f.tell()
            if len(header) < hlen or offset + dlen > size:
                raise SerializationError(f"{where}: truncated: needs {hlen + dlen} bytes")
            check = hashlib.blake2b(header, digest_size=16)
            for _ in range(0, dlen, chunk):
                check.update(f.read(min(chunk, offset + dlen - f.tell())))
            if check.digest() != digest:
                raise SerializationError(f"{where}: checksum mismatch: the file was modified or "
                                         f"corrupted after it was written")
            if meta is None or meta.dtype not in DTYPES or meta.name in out or \
                    dlen != math.prod(meta.shape) * np.dtype(meta.dtype).itemsize:
                raise SerializationError(f"{where}: malformed header (a name once, a dtype of "
                                         f"{sorted(DTYPES)}, a shape its bytes fill)")
            out[meta.name] = (offset, np.dtype(meta.dtype).newbyteorder("<"), meta.shape)
        if f.tell() != size:
            raise SerializationError(f"{path}: {size - f.tell()} stray bytes after the last of {count} records")
    return out


def file_of(dirname: str, name: str) -> str:
    """The file of var ``name`` saved on its own under ``dirname``: named after the var, as in
    Fluid, where a ``/`` in the name makes subdirectories (Fluid's ``GRUCell`` layers name their
    parameters ``GRUCell/BasicGRUUnit_0.w_0``); the caller makes them.

    Raises:
        SerializationError: a name that would leave ``dirname`` or is no file name (empty parts,
            ``.``, ``..``, a backslash or a NUL).
    """
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts) or any(c in name for c in ("\\", "\0")):
        raise SerializationError(f"var {name!r} cannot be its own file name; save with "
                                 f"filename=... to put all vars in one file")
    return os.path.join(dirname, *parts)
