"""Errors a user can fix end a process with one line, not a traceback.

A process that dies of a ``placegroup.errors.UserError`` (NOTE(user-errors): a bad feed,
program, file or environment, a Fluid name placegroup lacks, a peer that is gone or never
came, an error a peer reported) needs no stack of placegroup's internals: the line that says
what happened and how to fix it, and where in the user's own code, is all its user needs.
``install()``, which ``import placegroup`` calls first, puts a ``sys.excepthook`` in place
that prints

    placegroup: ProgramError: feed 'x' has shape [2, 12], but ... (train.py:42)

on stderr for such an exception (the process still exits with status 1) and hands every
other exception to the hook that was there before, unchanged. The place in parentheses is
the innermost frame of the traceback in the user's code: not in placegroup, the standard
library or an installed package (none when there is no such frame). ``PLACEGROUP_DEBUG=1``
(or more) brings the full traceback back. This works for ``python train.py``, ``placegroup
run`` and every process ``placegroup launch`` starts, since each imports placegroup.

Only exceptions nobody caught reach ``sys.excepthook``: pytest, IPython and a user's own
``try``/``except`` see the exception as it is. An error raised ``from`` a user error (an op
whose kernel waited for a peer, or met an id out of range) counts as one too: the line names
the wrapper's first line in parentheses.

Example::

    import placegroup            # installs the hook
    raise placegroup.errors.ConfigError("TRAINING_ROLE='CHEF': expected TRAINER or PSERVER")
    # stderr: placegroup: ConfigError: TRAINING_ROLE='CHEF': expected TRAINER or PSERVER (train.py:2)

Thread-safety: ``install`` is meant for import time; the hook runs once, as the process ends.
"""
from __future__ import annotations

import os
import site
import sys
import sysconfig

from placegroup import config
from placegroup.errors import UserError

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # placegroup/util/ -> the root
# where code that is not the user's lives: placegroup (its subpackages sit beside it in a
# checkout, NOTE(layout)), the standard library and installed packages
_NOT_USERS = tuple({os.path.join(os.path.realpath(p), "") for p in (
    *(os.path.join(_ROOT, d) for d in ("placegroup", "executor", "ops", "comm")),
    *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
    *site.getsitepackages(), site.getusersitepackages(), os.path.dirname(os.__file__))})


def one_line(exc: BaseException) -> str | None:
    """The line for ``exc``, or None when it is no user error (nor raised from one)."""
    cause = exc
    while cause is not None and not isinstance(cause, UserError):
        cause = cause.__cause__
    if cause is None:
        return None
    line = f"placegroup: {type(cause).__name__}: {_flat(cause)}"
    if cause is not exc:  # say where the wrapper caught it: its first line
        line += f" ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    where = users_frame(exc.__traceback__)
    return line + (f" ({where})" if where else "")


def users_frame(tb) -> str | None:
    """``file:line`` of the innermost frame of ``tb`` in the user's code, or None."""
    where = None
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        if not path.startswith("<") and not os.path.realpath(path).startswith(_NOT_USERS):
            try:
                rel = os.path.relpath(path)
            except OSError:  # the working directory is gone
                rel = path
            where = f"{path if rel.startswith('..') else rel}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def _flat(exc: BaseException) -> str:
    """A message of several lines as one: a line that ends mid-sentence (``Looked in:``,
    ``downloads it from``) runs on into the next, other lines are joined by ``; ``."""
    out = ""
    for s in (s.strip() for s in str(exc).splitlines()):
        if s:
            joined = not out or out.endswith((":", ",", "e.g.")) or out[-1].isalnum()
            out += ("" if not out else " " if joined else "; ") + s
    return out


_previous = sys.__excepthook__  # the hook before ours; install() records it


def _hook(kind, exc, tb) -> None:
    line = None if config.DEBUG else one_line(exc.with_traceback(tb) if tb is not None else exc)
    if line is None:
        _previous(kind, exc, tb)
    else:
        print(line, file=sys.stderr, flush=True)


def install() -> None:
    """Make ``sys.excepthook`` print user errors as one line; a second call installs nothing.

    Raises:
        ConfigError: ``PLACEGROUP_DEBUG`` does not parse (config.py reads it at import, and
            holds the error for here, where it ends the process in one line).
    """
    global _previous
    if sys.excepthook is not _hook:
        _previous = sys.excepthook
        sys.excepthook = _hook
    if config.DEBUG_ERROR is not None:
        raise config.DEBUG_ERROR
