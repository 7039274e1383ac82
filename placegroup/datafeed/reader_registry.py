"""What a program says about its readers, and where the executor finds their next batch.

A program fed by a reader (``fluid.layers.py_reader`` + ``read_file``, a non-iterable
``fluid.io.DataLoader`` or ``PyReader``) records it in ``Program.extra["readers"]``: one
``ReaderSpec`` per reader, plain data that prints, serializes and survives ``clone`` and the
transpiler's copies like the rest of the program. The live half, the bounded queue its
background thread fills (placegroup/datafeed/data_loader.py), stays in this process: it registers
here under the spec's ``queue`` key, and ``reader_feed`` is all the executor calls.

NOTE(reader-key): the key is the queue's name, ``<name>_queue`` for a named reader and
``lod_tensor_blocking_queue_<n>`` otherwise, counted by a generator of its own that
``unique_name.guard()`` does not reset (as Fluid 1.8's DataLoader counts its names). Two
processes that run one script make the same keys, so their programs print alike and their
digests agree; two programs built in one process never share a queue. A second reader made
with the same ``name`` replaces the first, as a second queue var of one name does in Fluid.

This module sits below the executor and the io package, which both import it.

Thread-safety: ``register`` and ``lookup`` may be called from any thread.
"""
from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Any, Callable, Protocol

import numpy as np

from placegroup.errors import ProgramError

__all__ = ["EOFException", "LiveReader", "ReaderSpec", "add_reader", "lookup", "reader_feed", "readers_of", "register"]

EXTRA_KEY = "readers"  # the key of Program.extra


class EOFException(Exception):
    """``exe.run`` found a started reader at the end of its data: the pass is over.

    Catch it as ``fluid.core.EOFException``, then call the reader's ``reset()`` (and
    ``start()`` for the next pass), as in Fluid 1.x.
    """


class LiveReader(Protocol):
    """What the executor asks of a started reader (placegroup/datafeed/data_loader.py)."""

    def next_batch(self) -> list:
        """The next batch, one array per fed var in the spec's order; raises EOFException."""


@dataclasses.dataclass(frozen=True)
class ReaderSpec:
    """One reader of a program: ``Program.extra["readers"]`` holds these as plain dicts.

    Attributes:
        name: the reader's name in Fluid's terms (``create_py_reader_0``), for messages.
        queue: the key its live queue is registered under (NOTE(reader-key)).
        feeds: the vars each batch fills, in the order of a batch's arrays.
        capacity: how many batches the queue holds.
        drop_last: at the end of the data, drop a group of batches too short for every place
            (False: run it; ``DataLoader.from_generator(drop_last=...)``).
    """

    name: str
    queue: str
    feeds: tuple
    capacity: int
    drop_last: bool = True

    def to_plain(self) -> dict:
        return {"name": self.name, "queue": self.queue, "feeds": list(self.feeds), "capacity": self.capacity,
                "drop_last": self.drop_last}

    @classmethod
    def from_plain(cls, d: Any) -> "ReaderSpec":
        """Raises ProgramError naming the field that is missing or of the wrong type."""
        ok = (isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("queue"), str)
              and isinstance(d.get("feeds"), list) and all(isinstance(f, str) for f in d["feeds"])
              and isinstance(d.get("capacity"), int) and isinstance(d.get("drop_last", True), bool))
        if not ok:
            raise ProgramError(f"Program.extra[{EXTRA_KEY!r}] holds {d!r}; expected "
                               "{name: str, queue: str, feeds: [str], capacity: int, drop_last: bool}")
        return cls(d["name"], d["queue"], tuple(d["feeds"]), d["capacity"], d.get("drop_last", True))


def readers_of(program) -> list[ReaderSpec]:
    """The readers ``program`` records (none for most programs)."""
    return [ReaderSpec.from_plain(d) for d in program.extra.get(EXTRA_KEY) or ()]


def add_reader(program, spec: ReaderSpec) -> None:
    """Record ``spec`` in ``program``.

    Raises:
        ProgramError: the program already reads from this queue, or another reader fills
            one of its vars.
    """
    for other in readers_of(program):
        if other.queue == spec.queue:
            raise ProgramError(f"reader {spec.name!r} already feeds {list(other.feeds)} in this program; "
                               f"read_file may be called once per reader and program")
        shared = sorted(set(other.feeds) & set(spec.feeds))
        if shared:
            raise ProgramError(f"reader {spec.name!r} would fill {shared}, which reader {other.name!r} "
                               f"already fills")
    program.extra[EXTRA_KEY] = [*program.extra.get(EXTRA_KEY, ()), spec.to_plain()]
    program._bump()


_live: "weakref.WeakValueDictionary[str, LiveReader]" = weakref.WeakValueDictionary()
_lock = threading.Lock()


def register(queue: str, reader: LiveReader) -> None:
    """Make ``reader`` the live reader of key ``queue`` in this process (held weakly: a
    reader nobody holds any more is gone)."""
    with _lock:
        _live[queue] = reader


def lookup(queue: str) -> LiveReader | None:
    with _lock:
        return _live.get(queue)


def reader_feed(program, feed: dict | None, remote: Callable[[str], bool] | None = None) -> dict | None:
    """``feed`` with the next batch of each of ``program``'s readers added.

    A reader is skipped when ``feed`` already gives every var it fills (an inference run of
    the program, say) or, on an executor of a distributed job, when ``remote(var)`` says its
    vars are held by another executor (a pserver reads no data).

    Raises:
        EOFException: a reader is at the end of its data.
        ProgramError: ``feed`` gives some of a reader's vars but not all; the reader was made
            in another process (a program loaded from a file) or is gone.
        PlacegroupError: the reader was not started (raised by the reader).
    """
    got = reader_batches(program, feed, remote)
    return {**(feed or {}), **got[0]} if got else feed


def reader_batches(program, feed: dict | None, remote: Callable[[str], bool] | None = None,
                   places: int = 1) -> list[dict]:
    """The next batch of each of ``program``'s readers for each of ``places`` places: one dict
    per place, var -> array (none when no reader is to be read, ``reader_feed`` says when).
    At the end of the data a reader gives fewer batches than places unless it drops them
    (``drop_last``); every place then gets as many as the reader with fewest gave.

    Raises:
        as ``reader_feed``.
    """
    specs = readers_of(program) if program.extra else ()
    if not specs:
        return []
    given_names = set(feed or ())
    out: list[dict] | None = None
    for spec in specs:
        given = [n for n in spec.feeds if n in given_names]
        if len(given) == len(spec.feeds) or (remote is not None and all(remote(n) for n in spec.feeds)):
            continue
        if given:
            raise ProgramError(f"feed gives {given} but not {[n for n in spec.feeds if n not in given_names]}; "
                               f"reader {spec.name!r} fills them together: feed all or none")
        live = lookup(spec.queue)
        if live is None:
            raise ProgramError(f"the program reads {list(spec.feeds)} from reader {spec.name!r} (queue "
                               f"{spec.queue!r}), which does not live in this process: build the program "
                               f"here, with its py_reader or DataLoader, or feed those vars")
        got = []
        try:
            while len(got) < places:
                got.append(live.next_batch())
        except EOFException:
            if spec.drop_last or not got:
                raise
        out = [{} for _ in got] if out is None else out[:len(got)]
        for d, arrays in zip(out, got):
            d.update(zip(spec.feeds, arrays))
    return out or []
