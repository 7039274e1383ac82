"""Files written so that a crash never leaves half of one (NOTE(atomic-write)), and prog.bin:
a Program as a file (its bytes are ``placegroup.ir.serialize``'s format).

Example::

    save_program(main, "ckpt/prog.bin")
    main = load_program("ckpt/prog.bin")     # program.executor comes back too
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any, Iterable

from placegroup.errors import SerializationError
from placegroup.ir.framework import Program

# NOTE(atomic-write): a checkpoint is written next to its final name under a temporary name,
# fsynced, then os.replace'd over the old file, and the directory is fsynced so the rename
# survives a crash. A reader therefore sees the old file or the new one, never half of one.
# With filename=None each var's file is replaced on its own: a crash between two of them
# leaves some vars of the new step and some of the old; pass filename= for one atomic file.
def atomic_write(path: str, chunks: Iterable[Any]) -> None:
    """Write ``chunks`` to ``path`` atomically (NOTE(atomic-write)), keeping an old file's mode."""
    folder = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)  # mkstemp makes 0600 files
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(folder)


def fsync_dir(path: str) -> None:
    """Make a rename into directory ``path`` durable (a no-op where a directory cannot be
    fsynced)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# -- programs -------------------------------------------------------------------------------
def save_program(program, path: str) -> None:
    """Write ``program`` to ``path`` as prog.bin, atomically (parent dirs are created).

    Example:
        >>> save_program(main, "/tmp/prog.bin")  # doctest: +SKIP
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write(path, [program.to_bytes()])


def load_program(path: str):
    """Read a prog.bin written by ``save_program``; ``program.executor`` comes back too.

    Raises:
        OSError: the file cannot be read (e.g. FileNotFoundError).
        SerializationError: ``<path>: <what is wrong>`` for a truncated, corrupted or
            other-schema file.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        return Program.from_bytes(data)
    except SerializationError as e:
        raise SerializationError(f"{path}: {e}") from None
