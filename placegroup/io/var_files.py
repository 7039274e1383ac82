"""Saving and loading var values: Fluid 1.x's ``fluid.io`` save/load functions.

The files are documented in ``docs/prog_bin.md`` and never pickled (programs, prog.bin, are
written by files.py):

* var values: ``save_persistables`` / ``save_params`` / ``save_vars`` write the values that the
  executor's scope holds, one file per var named after it in ``dirname`` (``filename=None``)
  or all in one file ``dirname/filename``; each value is a small msgpack header (name, dtype,
  shape) and the raw little-endian bytes, under one blake2b checksum.

Example::

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    ...train...
    fluid.io.save_program(main, "ckpt/prog.bin")
    fluid.io.save_persistables(exe, "ckpt", main)
    # later, perhaps in another process:
    main = fluid.io.load_program("ckpt/prog.bin")
    fluid.io.load_persistables(exe, "ckpt", main)

Every write is atomic (NOTE(atomic-write)). Loading checks every file before it sets any
value, so a failed load leaves the scope as it was.

Thread-safety: saving reads the scope while no executor writes it; call these between steps.
"""
from __future__ import annotations

import hashlib
import math
import os
import struct
from typing import Any, Callable, Iterable, Sequence

import msgpack
import numpy as np
import pydantic

from placegroup.errors import SerializationError
from placegroup.executor.scope import Scope, global_scope, to_numpy
from placegroup.ir.cluster import Cluster
from placegroup.io.files import atomic_write
from placegroup.ir.framework import default_main_program

__all__ = ["is_parameter", "is_persistable", "load_params", "load_persistables", "load_vars", "index_vars",
           "save_params", "save_persistables", "save_vars"]

VAR_MAGIC = b"PGVARS"
VAR_FORMAT_VERSION = 1
_FILE_HEAD = struct.Struct("<6sHI")  # magic, format version, number of records
_REC_HEAD = struct.Struct("<IQ16s")  # header length, data length, blake2b-128(header + data)
# Plain numeric dtypes only: nothing whose bytes could mean an object.
DTYPES = frozenset(["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                    "uint64", "float16", "float32", "float64"])


class _VarHeader(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    name: str
    dtype: str
    shape: list[pydantic.NonNegativeInt]


# -- var files ------------------------------------------------------------------------------
def _records(items: Sequence[tuple[str, np.ndarray]]) -> list:
    chunks: list = [_FILE_HEAD.pack(VAR_MAGIC, VAR_FORMAT_VERSION, len(items))]
    for name, arr in items:
        if arr.dtype.name not in DTYPES:
            raise SerializationError(f"var {name!r}: cannot save dtype {arr.dtype} (saveable: "
                                     f"{sorted(DTYPES)})")
        little = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        data = little.reshape(-1).view(np.uint8).data  # no copy of big tables
        header = msgpack.packb({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape)})
        digest = hashlib.blake2b(header, digest_size=16)
        digest.update(data)
        chunks += [_REC_HEAD.pack(len(header), data.nbytes, digest.digest()), header, data]
    return chunks


def _header(raw) -> _VarHeader | None:
    try:
        return _VarHeader.model_validate(msgpack.unpackb(raw, raw=False))
    except (ValueError, TypeError, msgpack.UnpackException, pydantic.ValidationError):
        return None


def _parse(data: bytes, path: str) -> dict[str, np.ndarray]:
    """name -> array for every record of a var file; errors name the file and the var."""
    view = memoryview(data)
    if len(view) < _FILE_HEAD.size:
        raise SerializationError(f"{path}: truncated: {len(view)} bytes, shorter than the "
                                 f"{_FILE_HEAD.size}-byte header")
    magic, version, count = _FILE_HEAD.unpack_from(view)
    if magic != VAR_MAGIC:
        raise SerializationError(f"{path}: not a placegroup var file: magic is {magic!r}, "
                                 f"expected {VAR_MAGIC!r}")
    if version != VAR_FORMAT_VERSION:
        raise SerializationError(f"{path}: var file format version {version}; this placegroup "
                                 f"reads version {VAR_FORMAT_VERSION}")
    out: dict[str, np.ndarray] = {}
    pos = _FILE_HEAD.size
    for i in range(count):
        where = f"{path}: record {i + 1} of {count}"
        if len(view) - pos < _REC_HEAD.size:
            raise SerializationError(f"{where}: truncated: the file ends inside its head")
        hlen, dlen, digest = _REC_HEAD.unpack_from(view, pos)
        pos += _REC_HEAD.size
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


def _read(path: str, name: str | None = None) -> dict[str, np.ndarray]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        what = f"var {name!r}: " if name is not None else ""
        raise SerializationError(f"{what}no file {path!r}: nothing was saved there (saved vars "
                                 f"need the same dirname and filename)") from None
    return _parse(data, path)


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
        head = f.read(_FILE_HEAD.size)
        if len(head) < _FILE_HEAD.size:
            raise SerializationError(f"{path}: truncated: {size} bytes, shorter than the "
                                     f"{_FILE_HEAD.size}-byte header")
        magic, version, count = _FILE_HEAD.unpack(head)
        if magic != VAR_MAGIC or version != VAR_FORMAT_VERSION:
            raise SerializationError(f"{path}: not a placegroup var file of format version "
                                     f"{VAR_FORMAT_VERSION} (magic {magic!r}, version {version})")
        out: dict = {}
        for i in range(count):
            where = f"{path}: record {i + 1} of {count}"
            rec = f.read(_REC_HEAD.size)
            if len(rec) < _REC_HEAD.size:
                raise SerializationError(f"{where}: truncated: the file ends inside its head")
            hlen, dlen, digest = _REC_HEAD.unpack(rec)
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


def _file_of(dirname: str, name: str) -> str:
    # A var's own file is named after it, as in Fluid; a name that is not a plain file name
    # would escape dirname or make subdirectories.
    bad = name in ("", ".", "..") or any(c in name for c in ("/", "\\", "\0"))
    if bad:
        raise SerializationError(f"var {name!r} cannot be its own file name; save with "
                                 f"filename=... to put all vars in one file")
    return os.path.join(dirname, name)


# -- Fluid's save/load API ------------------------------------------------------------------
def is_persistable(var) -> bool:
    """Fluid's predicate: vars that live across steps (params, optimizer state, counters)."""
    return bool(var.persistable)


def is_parameter(var) -> bool:
    """Fluid's predicate: parameters only."""
    return bool(var.is_parameter)


def _program(main_program):

    return main_program if main_program is not None else default_main_program()


def _select(program, vars, predicate) -> list:
    """The vars to save or load, once each, in program order."""
    if vars is not None:
        block = program.global_block()
        chosen = [block.var(v) if isinstance(v, str) else v for v in vars]
    else:
        chosen = [v for v in program.list_vars() if predicate is None or predicate(v)]
        if program.executor is not None and program.cluster is not None:
            # a program made for one executor (get_program): only what that executor holds,
            # so each pserver saves and loads its own blocks and shards

            cluster = Cluster.from_program(program)
            me = cluster.find(program.executor)
            chosen = [v for v in chosen if me in cluster.matching(v.place)]
    seen: dict[str, Any] = {}
    for v in chosen:
        seen.setdefault(v.name, v)
    return list(seen.values())


def _scope(executor, scope: Scope | None) -> Scope:
    if scope is None:
        own = getattr(executor, "scope", None)  # a distributed executor may own its scope
        scope = own if isinstance(own, Scope) else global_scope()
    if scope.settle is not None:  # a trainer's parameters still on their way (NOTE(end-of-step))
        scope.settle()
    return scope


def save_vars(executor, dirname: str, main_program=None, vars: Sequence | None = None,
              predicate: Callable | None = None, filename: str | None = None, *,
              scope: Scope | None = None) -> list[str]:
    """Save the values of some vars of ``main_program`` that the scope holds.

    Args:
        executor: the Executor whose scope holds the values (``global_scope()`` unless it has
            its own ``scope``).
        dirname: the directory, created if missing.
        main_program: the program (default: ``default_main_program()``).
        vars: Variables (or names) to save; when None, every var with ``predicate(var)``
            (every var when ``predicate`` is None too, as in Fluid).
        filename: None for one file per var (named after it), else one file for all.
        scope: overrides the executor's scope.

    Returns:
        The names saved, in program order. A selected var the scope holds no value for is
        skipped (in a distributed run a process holds only its part).

    Raises:
        SerializationError: a value that is not a plain numeric array, or a var name that
            cannot be a file name (with ``filename=None``).

    Example:
        >>> save_vars(exe, "ckpt", main, predicate=is_parameter)  # doctest: +SKIP
        ['fc_0.w_0', 'fc_0.b_0']
    """
    values = _scope(executor, scope).vars
    items = []
    for v in _select(_program(main_program), vars, predicate):
        if v.name not in values:
            continue
        arr = to_numpy(values[v.name])
        if not isinstance(arr, np.ndarray):
            raise SerializationError(f"var {v.name!r}: cannot save a {type(arr).__name__} value")
        items.append((v.name, arr))
    os.makedirs(dirname, exist_ok=True)
    if filename is not None:
        atomic_write(os.path.join(dirname, filename), _records(items))
    else:
        for name, arr in items:
            atomic_write(_file_of(dirname, name), _records([(name, arr)]))
    return [name for name, _ in items]


def _check(var, arr: np.ndarray, path: str) -> None:
    if arr.dtype.name != var.dtype:
        raise SerializationError(f"var {var.name!r} in {path!r} is {arr.dtype.name}, but the "
                                 f"program declares {var.dtype}")
    if var.shape is not None and (len(var.shape) != arr.ndim or any(
            d != -1 and d != a for d, a in zip(var.shape, arr.shape))):
        raise SerializationError(f"var {var.name!r} in {path!r} has shape {list(arr.shape)}, but "
                                 f"the program declares {list(var.shape)} (-1 is any size)")


def load_vars(executor, dirname: str, main_program=None, vars: Sequence | None = None,
              predicate: Callable | None = None, filename: str | None = None, *,
              scope: Scope | None = None) -> list[str]:
    """Load values saved by ``save_vars`` (same ``dirname`` and ``filename``) into the scope.

    Args: as ``save_vars``. Values go to the executor's place (its GPU for ``CUDAPlace``).

    Returns:
        The names loaded, in program order.

    Raises:
        SerializationError: naming the var and the file, for a var that no file holds, a
            dtype or shape that differs from the program's declaration, or a truncated,
            corrupted or foreign file. Nothing is set unless every var checks out.

    Example:
        >>> load_vars(exe, "ckpt", main, predicate=is_persistable)  # doctest: +SKIP
    """
    chosen = _select(_program(main_program), vars, predicate)
    loaded: dict[str, np.ndarray] = {}
    if filename is not None:
        path = os.path.join(dirname, filename)
        saved = _read(path)
        for v in chosen:
            if v.name not in saved:
                raise SerializationError(f"var {v.name!r} is not in {path!r}, which holds "
                                         f"{sorted(saved)}")
            _check(v, saved[v.name], path)
            loaded[v.name] = saved[v.name]
    else:
        for v in chosen:
            path = _file_of(dirname, v.name)
            saved = _read(path, v.name)
            if v.name not in saved:
                raise SerializationError(f"{path!r} holds {sorted(saved)}, not var {v.name!r}")
            _check(v, saved[v.name], path)
            loaded[v.name] = saved[v.name]
    target = _scope(executor, scope)
    place = getattr(executor, "place", None)
    for name, arr in loaded.items():
        target.var(name).get_tensor().set(arr, place)
    return list(loaded)


def save_params(executor, dirname: str, main_program=None, filename: str | None = None, *,
                scope: Scope | None = None) -> list[str]:
    """``save_vars`` of the parameters (``is_parameter``); see ``save_vars``."""
    return save_vars(executor, dirname, main_program, None, is_parameter, filename, scope=scope)


def load_params(executor, dirname: str, main_program=None, filename: str | None = None, *,
                scope: Scope | None = None) -> list[str]:
    """``load_vars`` of the parameters (``is_parameter``); see ``load_vars``."""
    return load_vars(executor, dirname, main_program, None, is_parameter, filename, scope=scope)


def save_persistables(executor, dirname: str, main_program=None, filename: str | None = None, *,
                      scope: Scope | None = None) -> list[str]:
    """``save_vars`` of every persistable var: parameters, optimizer state, lr, counters.

    Saving these after a step and loading them before the next resumes training exactly.
    """
    return save_vars(executor, dirname, main_program, None, is_persistable, filename, scope=scope)


def load_persistables(executor, dirname: str, main_program=None, filename: str | None = None, *,
                      scope: Scope | None = None) -> list[str]:
    """``load_vars`` of every persistable var; see ``save_persistables``."""
    return load_vars(executor, dirname, main_program, None, is_persistable, filename, scope=scope)


