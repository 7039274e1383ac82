"""Expected failures end a process with one line, not a traceback.

A process that dies of one of ``placegroup.errors.EXPECTED`` (a bad environment or bad
arguments, a peer that is gone or never came, an error a peer reported) did nothing wrong
itself: the line that says what happened is all its user needs. ``install()``, which
``import placegroup`` calls, puts a ``sys.excepthook`` in place that prints

    placegroup: PeerLost: peer pserver@127.0.0.1:7164 (pserver, at 127.0.0.1:7164) never came: ...

on stderr for such an exception (the process still exits with status 1) and hands every
other exception to the hook that was there before, unchanged. ``PLACEGROUP_DEBUG=1`` (or
more) brings the full traceback back. This works for ``python train.py``, ``placegroup run``
and every process ``placegroup launch`` starts, since each imports placegroup.

Only exceptions nobody caught reach ``sys.excepthook``: pytest, IPython and a user's own
``try``/``except`` see the exception as it is. An error that wraps an expected one with
``raise ... from`` (an op that waited for a peer inside its kernel) counts as expected too.

Example::

    import placegroup            # installs the hook
    raise placegroup.errors.ConfigError("TRAINING_ROLE='CHEF': expected TRAINER or PSERVER")
    # stderr: placegroup: ConfigError: TRAINING_ROLE='CHEF': expected TRAINER or PSERVER

Thread-safety: ``install`` is meant for import time; the hook runs once, as the process ends.
"""
from __future__ import annotations

import sys

from placegroup import config
from placegroup.errors import EXPECTED


def one_line(exc: BaseException) -> str | None:
    """The line for ``exc``, or None when it is no expected failure (nor wraps one)."""
    cause = exc
    while cause is not None and not isinstance(cause, EXPECTED):
        cause = cause.__cause__
    if cause is None:
        return None
    line = f"placegroup: {type(cause).__name__}: {_flat(cause)}"
    if cause is not exc:  # say where the wrapper caught it: its first line
        line += f" ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    return line


def _flat(exc: BaseException) -> str:
    return "; ".join(s.strip() for s in str(exc).splitlines() if s.strip())


_previous = sys.__excepthook__  # the hook before ours; install() records it


def _hook(kind, exc, tb) -> None:
    line = None if config.DEBUG else one_line(exc)
    if line is None:
        _previous(kind, exc, tb)
    else:
        print(line, file=sys.stderr, flush=True)


def install() -> None:
    """Make ``sys.excepthook`` print expected failures as one line; a second call does nothing."""
    global _previous
    if sys.excepthook is not _hook:
        _previous = sys.excepthook
        sys.excepthook = _hook
