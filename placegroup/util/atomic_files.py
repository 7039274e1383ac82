"""Files written so that a crash never leaves half of one: the var files, checkpoints and prog.bin.

Low in the package on purpose: the ops that save and load files use it, and it imports nothing
of placegroup.

Thread-safety: each call writes its own temporary file.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any, Iterable

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
