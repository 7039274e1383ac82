"""prog.bin: a Program as a file (its bytes are ``placegroup.ir.serialize``'s format), written
so that a crash never leaves half of one (NOTE(atomic-write) in placegroup/util/atomic_files.py).

Example::

    save_program(main, "ckpt/prog.bin")
    main = load_program("ckpt/prog.bin")     # program.executor comes back too
"""
from __future__ import annotations

import os

from placegroup.util.atomic_files import atomic_write
from placegroup.errors import SerializationError
from placegroup.ir.framework import Program

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
