"""A checkpoint on disk: the manifest, parts written atomically, which steps are complete.

Layout (docs/checkpoint.md)::

    <dirname>/step-<S>/<tag>/manifest.json   S: global steps done; tag: pserver.0, trainer.1, local
                             0000-<var>      one var file each, docs/prog_bin.md's format

Each executor that holds state writes its own part; step S is *complete* when every part its
manifests name in ``expected`` is there, written by the same run (NOTE(atomic-part)).
``placegroup/io/checkpoint.py`` decides what goes in a part and how to load it back.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import socket
import threading
import time
from typing import Callable, Literal, Optional

import msgpack
import numpy as np
import pydantic

from placegroup.util import var_format as _io
from placegroup.util.atomic_files import fsync_dir
from placegroup.errors import SerializationError

log = logging.getLogger("placegroup.checkpoint")
FORMAT, VERSION, MANIFEST, STEP = "placegroup-checkpoint", 1, "manifest.json", "step-"


class Entry(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    name: str
    of: str                       # the original var
    kind: Literal["rows", "own", "table"]  # rows of the original; own: this executor's alone (model
    # parallel); table: an array of a table keyed by raw ids (placegroup/io/checkpoint_tables.py)
    first: pydantic.NonNegativeInt
    stride: pydantic.PositiveInt
    count: pydantic.NonNegativeInt
    shape: list[pydantic.NonNegativeInt]
    dtype: str
    file: str


class Manifest(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    format: Literal["placegroup-checkpoint"]
    version: int
    step: pydantic.NonNegativeInt
    executor: str
    endpoint: Optional[str]
    expected: list[str]
    digest: str
    resumed_from: Optional[int]
    cluster: dict
    written_at: float
    vars: list[Entry]


# NOTE(atomic-part): a part is complete or absent. Its files are written into a hidden
# ``.<tag>.<owner>.<random>.tmp`` directory beside it, then *sealed*: each file's checksum is
# computed from what was written and every file fsynced, the manifest written last, and the
# directory renamed to ``<tag>``, its parent fsynced. Readers skip names starting with ".", so a
# crash at any moment leaves the previous complete step the newest. A part already there (a
# resumed run saving a step again) is renamed aside first; in between, the step lacks this part,
# so it is incomplete, never a mix.
#
# NOTE(save-cost): the training loop waits only for the write (``write_part``): the raw bytes go
# to the page cache, as ``np.save`` does, with the checksum left blank. Sealing (the checksum is
# read back from the page cache, the fsyncs, the renames, the pruning) costs 3-5 times that on a
# small machine (blake2b runs at a quarter of memcpy's speed, fsync at the disk's), so an
# Executor's scheduled saves seal in a background thread while training goes on
# (``in_background``); the next save, ``wait_sealed`` and the process's end wait for it.
# bench/bench_checkpoint.py measures both against ``np.save`` of the same arrays.
def write_part(step_dir: str, tag: str, entries, values, manifest) -> Callable[[], str]:
    """Write a part's var files into a hidden directory of ``step_dir``; returns ``seal``, which
    makes it the part ``<step_dir>/<tag>`` (NOTE(atomic-part)) and returns that path."""
    os.makedirs(step_dir, exist_ok=True)
    tmp = _hidden(step_dir, tag, "tmp")
    os.mkdir(tmp)
    try:
        for entry, arr in zip(entries, values):
            _write_var(os.path.join(tmp, entry.file), entry.name, arr)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    def seal() -> str:
        final, aside = os.path.join(step_dir, tag), None
        try:
            for entry in entries:
                _seal_var(os.path.join(tmp, entry.file))
            with open(os.path.join(tmp, MANIFEST), "wb") as f:
                f.write(manifest.model_dump_json(indent=1).encode())
                f.flush()
                os.fsync(f.fileno())
            fsync_dir(tmp)
            if os.path.exists(final):
                aside = _hidden(step_dir, tag, "old")
                os.rename(final, aside)
            os.rename(tmp, final)
            fsync_dir(step_dir)
            fsync_dir(os.path.dirname(os.path.abspath(step_dir)))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            if aside is not None and not os.path.exists(final):
                with contextlib.suppress(OSError):
                    os.rename(aside, final)  # the part it was to replace stays
            raise
        if aside is not None:
            _remove(aside)
        return final
    return seal


def _write_var(path: str, name: str, arr) -> None:
    """A var file of one record (docs/prog_bin.md) with its checksum blank (NOTE(save-cost))."""
    if arr.dtype.name not in _io.DTYPES:
        raise SerializationError(f"var {name!r}: cannot save dtype {arr.dtype} (saveable: {sorted(_io.DTYPES)})")
    data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).reshape(-1).view(np.uint8).data
    header = msgpack.packb({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape)})
    with open(path, "wb") as f:
        f.write(_io.FILE_HEAD.pack(_io.VAR_MAGIC, _io.VAR_FORMAT_VERSION, 1))
        f.write(_io.REC_HEAD.pack(len(header), data.nbytes, bytes(16)) + header)
        f.write(data)


def _seal_var(path: str, chunk: int = 1 << 22) -> None:
    """Fill in the checksum of ``_write_var``'s file from its bytes (read back in ``chunk``-byte
    pieces from the page cache), and fsync it."""
    at = _io.FILE_HEAD.size
    with open(path, "r+b", buffering=0) as f:
        size, nbytes, _ = _io.REC_HEAD.unpack_from(f.read(at + _io.REC_HEAD.size), at)
        digest, left = hashlib.blake2b(digest_size=16), size + nbytes
        buf = memoryview(bytearray(max(1, min(chunk, left))))
        while left:
            got = f.readinto(buf[:min(left, len(buf))])
            if not got:
                raise SerializationError(f"{path}: {left} bytes short while sealing it (removed meanwhile?)")
            digest.update(buf[:got])  # without the GIL
            left -= got
        os.pwrite(f.fileno(), _io.REC_HEAD.pack(size, nbytes, digest.digest()), at)
        os.fsync(f.fileno())


_sealing: list = []  # [thread, error or None] of the saves sealing in the background
_sealing_lock = threading.Lock()
SEALED = [0.0]       # seconds this process spent sealing in the background (PLACEGROUP_PROFILE)


def in_background(seal: Callable[[], object]) -> None:
    """Run ``seal`` in a thread that the process's end waits for (NOTE(save-cost)); an error
    is logged, and raised by the next ``wait_sealed``."""
    job: list = [None, None]

    def run() -> None:
        began = time.perf_counter()
        try:
            seal()
            SEALED[0] += time.perf_counter() - began
        except BaseException as e:  # noqa: BLE001 (raised again by wait_sealed)
            log.error("checkpoint: sealing a save failed: %s", e)
            job[1] = e
    job[0] = threading.Thread(target=run, name="placegroup-checkpoint-seal")  # not a daemon
    with _sealing_lock:  # started first: another thread's wait_sealed may join it at once
        job[0].start()
        _sealing.append(job)


def wait_sealed() -> None:
    """Wait until this process's saves are sealed; raises the first error one of them had.
    Safe from several threads (a test's executors in one process): each finished save is taken
    off the list, and its error raised, by exactly one caller."""
    while True:
        with _sealing_lock:
            pending = [job for job in _sealing if job[0] is not threading.current_thread()]
        if not pending:
            return
        job = pending[0]
        job[0].join()
        with _sealing_lock:
            mine = any(j is job for j in _sealing)
            _sealing[:] = [j for j in _sealing if j is not job]
        if mine and job[1] is not None:
            raise job[1]


# NOTE(leftovers): hidden directories are named ``.<tag>.<pid>@<machine>.<random>.tmp|old`` by
# the process that made them (<machine>: this host and pid namespace, hashed). After a save, a
# process removes (1) every hidden directory of its own tag: only it writes under that tag, one
# save at a time, so they are leftovers of an earlier process killed mid-save or of a save that
# failed; (2) any other hidden directory whose maker ran on this machine and is gone; (3) every
# part of each checkpoint older than the ``keep`` newest complete ones, renamed hidden first so
# no reader sees half of it; then such a step's directory. No live peer writes there: a step is
# complete only once every process that saves has finished it, and each saves its steps in order.
# A hidden directory of a live peer, or of one on another machine, is never touched; a peer's
# own next save removes what it left.
def prune(dirname: str, keep: int, tag: str) -> None:
    """Remove checkpoints older than the ``keep`` newest complete ones, and leftovers of saves
    that never finished (NOTE(leftovers))."""
    try:
        saved = sorted(steps(dirname), reverse=True)
        done = [s for s in saved if complete(dirname, s) is not None]
    except SerializationError as e:  # a damaged old step must not stop training
        log.warning("checkpoint: not pruning %s: %s", dirname, e)
        return
    cutoff = done[keep - 1] if len(done) >= keep else -1
    for s in saved:
        step_dir = os.path.join(dirname, f"{STEP}{s}")
        try:
            names = os.listdir(step_dir)
        except FileNotFoundError:  # a peer pruned it meanwhile
            continue
        for name in names:
            path = os.path.join(step_dir, name)
            if name.startswith("."):
                if _abandoned(name, tag):
                    _remove(path)
            elif s < cutoff:
                gone = _hidden(step_dir, tag, "old")
                with contextlib.suppress(FileNotFoundError):  # a peer took it first
                    os.rename(path, gone)
                    _remove(gone)
        if s < cutoff:
            with contextlib.suppress(OSError):  # a live peer's hidden directory may be there
                os.rmdir(step_dir)


_HIDDEN = re.compile(r"\.(.+)\.(\d+)@([0-9a-f]{8})\.[0-9a-f]+\.(?:tmp|old)")


_PIDNS = os.readlink("/proc/self/ns/pid") if os.path.islink("/proc/self/ns/pid") else ""  # containers share a host name
_MACHINE = hashlib.blake2b(f"{socket.gethostname()}/{_PIDNS}".encode(), digest_size=4).hexdigest()


def _hidden(step_dir: str, tag: str, kind: str) -> str:
    """A fresh hidden name in ``step_dir`` made by this process (NOTE(leftovers))."""
    return os.path.join(step_dir, f".{tag}.{os.getpid()}@{_MACHINE}.{secrets.token_hex(4)}.{kind}")


def _abandoned(name: str, tag: str) -> bool:
    """Whether hidden ``name`` is a leftover that executor ``tag`` may remove (NOTE(leftovers))."""
    if name.startswith(f".{tag}."):
        return True
    m = _HIDDEN.fullmatch(name)
    if m is None or m[3] != _MACHINE:
        return False
    try:
        os.kill(int(m[2]), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it lives (as another user)
        pass
    return False


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


# -- finding complete steps ----------------------------------------------------------------------
def steps(dirname: str) -> list[int]:
    if not os.path.isdir(dirname):
        return []
    return [int(n[len(STEP):]) for n in os.listdir(dirname)
            if n.startswith(STEP) and n[len(STEP):].isdigit() and os.path.isdir(os.path.join(dirname, n))]


def _read_manifest(path: str) -> Manifest:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except (FileNotFoundError, NotADirectoryError):
        raise SerializationError(f"{os.path.dirname(path)}: not a checkpoint part: it has no {MANIFEST} "
                                 f"(placed there by hand? remove it)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise SerializationError(f"{path}: not a checkpoint manifest: not JSON ({e})") from None
    if isinstance(data, dict) and data.get("version") not in (None, VERSION):
        raise SerializationError(f"{path}: checkpoint manifest version {data.get('version')}; this "
                                 f"placegroup reads version {VERSION}")
    try:
        return Manifest.model_validate(data)
    except pydantic.ValidationError as e:
        first = e.errors()[0]
        raise SerializationError(f"{path}: malformed checkpoint manifest: {'.'.join(map(str, first['loc']))}: "
                                 f"{first['msg']}") from None


def complete(dirname: str, step: int) -> dict | None:
    """tag -> (part dir, manifest) of step ``step`` if it is complete, else None."""
    step_dir = os.path.join(dirname, f"{STEP}{step}")
    try:
        names = sorted(os.listdir(step_dir))
    except FileNotFoundError:  # pruned meanwhile
        return None
    parts = {}
    for name in names:
        if name.startswith("."):
            continue  # a part being written, or set aside (NOTE(atomic-part))
        path = os.path.join(step_dir, name, MANIFEST)
        try:
            m = _read_manifest(path)
        except SerializationError:
            if not os.path.isdir(os.path.dirname(path)):
                continue  # replaced or pruned since the listing
            raise
        if m.step != step or m.executor != name:
            raise SerializationError(f"{path}: says step {m.step} of {m.executor!r}, but lies in "
                                     f"{STEP}{step}/{name}")
        parts[name] = (os.path.dirname(path), m)
    # parts of one run agree on the program and the step it resumed from (NOTE(atomic-part))
    runs: dict[tuple, set] = {}
    for name, (_, m) in parts.items():
        runs.setdefault((m.digest, m.resumed_from, tuple(m.expected)), set()).add(name)
    done = [key for key, names in runs.items() if set(key[2]) <= names]
    if not done:
        return None
    key = max(done, key=lambda k: max(parts[t][1].written_at for t in k[2]))
    return {t: parts[t] for t in key[2]}


def latest_checkpoint(dirname: str) -> int | None:
    """The newest complete step in ``dirname``, or None when there is none.

    Raises:
        SerializationError: naming the file, for a manifest that is not one.

    Example:
        >>> latest_checkpoint("ckpt")  # doctest: +SKIP
        20
    """
    for step in sorted(steps(dirname), reverse=True):
        if complete(dirname, step) is not None:
            return step
    return None
