"""Fields set by assignment: the base of the objects a Fluid script configures one field at a time.

``BuildStrategy`` and ``ExecutionStrategy`` (compiler.py), ``DistributeTranspilerConfig``
(transpiler/config.py) and fleet's runtime configs are set as Fluid 1.8's are::

    config = fluid.DistributeTranspilerConfig()
    config.slice_var_up = False

Each declares its fields in a table (``_FIELDS``, one ``Field`` a line: type, default, and what
the field does here); ``Fields``, the base class, checks every assignment against it:

* a value of the wrong type is a ``TypeError`` naming the field and what it takes;
* an int below the field's least value, or a str not among its choices, a ``ValueError``;
* a refused value (one placegroup cannot honour, whose being ignored would change the numbers)
  is a ``ConfigError`` saying what to do instead;
* an inert field (one that changes no number here) set to another value than its default is
  named once per process in a ``StrategyNotice`` warning saying why, never silently ignored;
* a name that is no field: an ``AttributeError`` for Fluid's pybind objects (``BuildStrategy``,
  ``ExecutionStrategy``), as in Fluid; the plain-Python configs keep it, as Fluid's do, and say
  so once, naming the closest field (``_OPEN``).

Nothing here imports the rest of placegroup but its errors, so the compiler, the transpiler
and fleet all build on it.

Thread-safety: configs are built and set in one thread; the once-per-process notices are
best-effort across threads.
"""
from __future__ import annotations

import dataclasses
import difflib
import enum
import warnings
from typing import Any, ClassVar, Mapping

import numpy as np

from placegroup.errors import ConfigError

__all__ = ["Field", "Fields", "StrategyNotice", "notice"]


class StrategyNotice(UserWarning):
    """A strategy or config field that changes nothing in placegroup was set, or a name that is
    no field was kept (once per field and process)."""


_noticed: set[str] = set()


def notice(key: str, message: str, stacklevel: int = 3) -> None:
    """Warn ``message`` with a StrategyNotice, the first time ``key`` comes up in this process."""
    if key not in _noticed:
        _noticed.add(key)
        warnings.warn(f"{message} (shown once per process)", StrategyNotice, stacklevel=stacklevel)


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a config.

    Attributes:
        kind: bool, int, str, dict, an Enum, or "bools" (None/True/False), "strs" (a list of
            str), "set" (a set of str), "optstr" (None or a str), "class" (None or a class or
            other callable), "any".
        default: its value in Fluid 1.8.5.
        inert: why a value changes nothing here ("": acted on, or checked where it is used).
        refused: value -> why placegroup cannot honour it and what to do instead.
        least: the smallest int allowed.
        choices: the strs allowed (empty: any).
    """

    kind: Any
    default: Any
    inert: str = ""
    refused: Mapping[Any, str] = dataclasses.field(default_factory=dict)
    least: int | None = None
    choices: tuple = ()


_EXPECTS = {bool: "True or False", int: "an int", str: "a str", dict: "a dict", "bools": "None, False or True",
            "strs": "a list of str", "set": "a set of str", "optstr": "None or a str",
            "class": "None or a class (such as fluid.transpiler.RoundRobin)"}


def _fresh(value: Any) -> Any:
    """A default as a value of its own (so that two configs never share a list, set or dict)."""
    if isinstance(value, (set, frozenset)):
        return set(value)
    return type(value)(value) if isinstance(value, (list, dict)) else value


def _coerce(owner: str, name: str, kind: Any, value: Any) -> Any:
    """``value`` as ``kind`` takes it; a TypeError naming the field and what it takes if it is not."""
    if kind is bool or kind == "bools":
        if isinstance(value, (bool, np.bool_)) or (kind == "bools" and value is None):
            return None if value is None else bool(value)
    elif kind is int:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
    elif kind is str or kind == "optstr":
        if isinstance(value, str) or (kind == "optstr" and value is None):
            return value
    elif kind in ("strs", "set"):
        if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
            return set(value) if kind == "set" else list(value)
    elif kind == "class":
        if value is None or isinstance(value, type) or (callable(value) and not isinstance(value, (str, bytes))):
            return value
    elif kind == "any":
        return value
    elif kind is dict:
        if isinstance(value, dict):
            return value
    elif isinstance(value, kind):
        return value
    expects = _EXPECTS.get(kind) or " or ".join(f"{kind.__qualname__}.{m.name}" for m in kind)
    raise TypeError(f"{owner}.{name} must be {expects}, got {value!r} ({type(value).__name__})")


def _shown(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if isinstance(value, type):
        return value.__qualname__
    return repr(value)


class Fields:
    """A config whose fields are set by assignment, checked against ``_FIELDS`` (module docstring).

    Args:
        **values: fields to set, as if assigned one by one (placegroup's shorthand; a name
            that is no field is a TypeError here, since no Fluid script passes one).

    Example::

        class Knobs(Fields):
            _FIELDS = {"depth": Field(int, 1, least=1), "colour": Field(str, "", "nothing is drawn")}

        k = Knobs(depth=2); k.colour = "red"   # a StrategyNotice: changes nothing
    """

    _FIELDS: ClassVar[dict[str, Field]] = {}
    _OPEN: ClassVar[bool] = False  # keep a name that is no field (with a notice), as a plain Python class does

    def __init__(self, **values: Any) -> None:
        object.__setattr__(self, "_values", {n: _fresh(f.default) for n, f in self._FIELDS.items()})
        object.__setattr__(self, "_extra", {})
        for name, value in values.items():
            if name not in self._FIELDS:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {name!r}"
                                f"{self._hint(name)}")
            setattr(self, name, value)

    def __getattr__(self, name: str) -> Any:  # only for names that are not class attributes
        d = self.__dict__
        if "_values" in d and name in d["_values"]:
            return d["_values"][name]
        if "_extra" in d and name in d["_extra"]:
            return d["_extra"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'{self._hint(name)}")

    def __setattr__(self, name: str, value: Any) -> None:
        owner = type(self).__name__
        field = self._FIELDS.get(name)
        if field is None:
            if not self._OPEN:
                raise AttributeError(f"'{owner}' object has no attribute '{name}'{self._hint(name)}")
            self._extra[name] = value
            notice(f"{owner}.{name}", f"{owner}.{name} is not a field of Fluid 1.8's {owner}, so nothing "
                   f"reads it (it is kept, as Fluid keeps it){self._hint(name)}")
            return
        value = _coerce(owner, name, field.kind, value)
        if field.least is not None and value < field.least:
            raise ValueError(f"{owner}.{name} must be at least {field.least}, got {value}")
        if field.choices and value not in field.choices:
            raise ValueError(f"{owner}.{name} must be one of {', '.join(map(repr, field.choices))}, got {value!r}")
        if field.refused and value in field.refused and value != self._values[name]:
            raise ConfigError(f"{owner}.{name} = {_shown(value)}: {field.refused[value]}")
        self._check(name, value)
        self._values[name] = value
        if field.inert and value != field.default:
            notice(f"{owner}.{name}", f"{owner}.{name} = {_shown(value)} changes nothing in placegroup: "
                   f"{field.inert}")

    def _check(self, name: str, value: Any) -> None:
        """A subclass's rules between fields, run before ``name`` takes ``value``."""

    def _assign(self, **values: Any) -> None:
        """Set fields as placegroup's own code does (fleet's strategies set Fluid's values): types
        are checked; no notice, no refusal, no rule between fields."""
        owner = type(self).__name__
        for name, value in values.items():
            self._values[name] = _coerce(owner, name, self._FIELDS[name].kind, value)

    def _copy(self, **values: Any) -> "Fields":
        """A copy with ``values`` set as ``_assign`` sets them."""
        new = object.__new__(type(self))
        object.__setattr__(new, "_values", {n: _fresh(v) for n, v in self._values.items()})
        object.__setattr__(new, "_extra", dict(self._extra))
        new._assign(**values)
        return new

    def __copy__(self) -> "Fields":
        return self._copy()

    def _hint(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self._FIELDS), n=1)
        return f"; did you mean {close[0]!r}?" if close else ""

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._FIELDS) | set(self.__dict__.get("_extra", ())))

    def __repr__(self) -> str:
        changed = {n: v for n, v in self._values.items() if v != self._FIELDS[n].default}
        changed.update(self._extra)
        return f"{type(self).__name__}({', '.join(f'{n}={_shown(v)}' for n, v in changed.items())})"
