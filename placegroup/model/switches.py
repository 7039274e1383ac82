"""Fluid 1.8's process-wide switches and guards, for scripts that call them.

* ``in_dygraph_mode()`` is False: placegroup runs static programs only. ``enable_dygraph``
  (``enable_imperative``) raises ``NotImplementedInPlacegroup``; ``disable_dygraph`` does nothing.
* ``memory_optimize`` and ``release_memory`` were deprecated no-ops in Fluid 1.8 already; here
  too, with the same warning.
* ``set_flags({"FLAGS_x": v})`` / ``get_flags(names)``: a flag this runtime reads is set
  (``FLAGS_selected_gpus``); any other is kept, returned by ``get_flags``, and named once in a
  warning, since it changes nothing here.
* ``require_version(min, max=None)`` checks against the Fluid version placegroup follows (1.8.5).
* ``name_scope(prefix)`` and ``device_guard(device)`` are accepted context managers. Fluid uses
  name scopes only to group ops in visualisations; a device guard placing some ops on the CPU
  changes nothing here (an executor runs all its ops on its own place), which a warning says once.

Example::

    with fluid.name_scope("encoder"):
        h = fluid.layers.fc(x, 64)
"""
from __future__ import annotations

import contextlib
import re
import warnings

from placegroup.errors import NotImplementedInPlacegroup

__all__ = ["device_guard", "disable_dygraph", "disable_imperative", "enable_dygraph", "enable_imperative",
           "get_flags", "in_dygraph_mode", "memory_optimize", "name_scope", "release_memory",
           "require_version", "set_flags"]

FLUID_VERSION = "1.8.5"
_flags: dict = {}
_warned: set = set()


def _once(key: str, msg: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(msg, stacklevel=3)


def in_dygraph_mode() -> bool:
    """False: placegroup builds and runs static programs."""
    return False


def enable_dygraph(place=None) -> None:
    """Refused: dynamic-graph (imperative) mode is not part of placegroup."""
    raise NotImplementedInPlacegroup("placegroup does not implement fluid.enable_dygraph: it runs static "
                                     "Programs only (build the model with fluid.layers and run it with an Executor)")


def disable_dygraph() -> None:
    """Nothing to do: placegroup is always in static mode."""


enable_imperative, disable_imperative = enable_dygraph, disable_dygraph


def memory_optimize(input_program=None, skip_opt_set=None, print_log=False, level=0, skip_grads=True) -> None:
    """Deprecated in Fluid 1.8, and a no-op there as here."""
    _once("memory_optimize", "fluid.memory_optimize() is deprecated and does nothing (as in Fluid 1.8)")


def release_memory(input_program=None, skip_opt_set=None) -> None:
    """Deprecated in Fluid 1.8, and a no-op there as here."""
    _once("release_memory", "fluid.release_memory() is deprecated and does nothing (as in Fluid 1.8)")


def set_flags(flags: dict) -> None:
    """Set Fluid's global flags (``{"FLAGS_name": value}``).

    Raises:
        TypeError: ``flags`` is not a dict of ``FLAGS_`` names.
    """
    if not isinstance(flags, dict):
        raise TypeError(f"set_flags: flags must be a dict, got {type(flags).__name__}")
    for name, value in flags.items():
        if not isinstance(name, str) or not name.startswith("FLAGS_"):
            raise TypeError(f"set_flags: {name!r} is not a flag name (FLAGS_...)")
        _flags[name] = value
        if name != "FLAGS_selected_gpus":
            _once(name, f"{name} changes nothing in placegroup; it is kept for get_flags")


def get_flags(flags) -> dict:
    """The values of ``flags`` (a name or a list of names) set by ``set_flags``.

    Raises:
        ValueError: a flag that was never set (placegroup has no defaults for Fluid's flags).
    """
    names = [flags] if isinstance(flags, str) else list(flags)
    missing = [n for n in names if n not in _flags]
    if missing:
        raise ValueError(f"get_flags: {missing} were not set with set_flags; placegroup does not "
                         f"keep Fluid's default flag values")
    return {n: _flags[n] for n in names}


def _version(v: str) -> tuple:
    if not isinstance(v, str) or not re.fullmatch(r"\d+(\.\d+){0,3}", v):
        raise ValueError(f"require_version: {v!r} is not a version like '1.8.0'")
    parts = [int(x) for x in v.split(".")]
    return tuple(parts + [0] * (4 - len(parts)))


def require_version(min_version: str, max_version: str | None = None) -> None:
    """Check that the Fluid version placegroup follows (1.8.5) is in ``[min, max]``.

    Raises:
        ValueError: a malformed version; Exception: the version is outside the range (as Fluid).
    """
    have = _version(FLUID_VERSION)
    lo, hi = _version(min_version), _version(max_version) if max_version is not None else None
    if have < lo or (hi is not None and have > hi):
        raise Exception(f"placegroup follows PaddlePaddle Fluid {FLUID_VERSION}, outside the required "
                        f"range [{min_version}, {max_version or 'any'}]")


@contextlib.contextmanager
def name_scope(prefix: str | None = None):
    """Group the ops built inside under ``prefix``, for people reading the program; it does not
    change names or results.

    Raises:
        TypeError: ``prefix`` is not a str.
    """
    if prefix is not None and not isinstance(prefix, str):
        raise TypeError(f"name_scope: prefix must be a str, got {prefix!r}")
    yield


@contextlib.contextmanager
def device_guard(device: str | None = None):
    """Accepted for ``"cpu"``, ``"gpu"`` and ``"gpu:N"``; every op still runs on the executor's
    place (a warning says so once).

    Raises:
        ValueError: any other device string.
    """
    if device is not None and not re.fullmatch(r"cpu|gpu(:\d+)?", str(device)):
        raise ValueError(f"device_guard: device must be 'cpu', 'gpu' or 'gpu:N', got {device!r}")
    _once("device_guard", "fluid.device_guard changes nothing in placegroup: an executor runs every op "
                          "of its program on its own place")
    yield
