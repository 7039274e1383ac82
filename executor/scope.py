"""Scope: where an executor keeps the values of vars, by name (Fluid's ``Scope``).

``global_scope().find_var(name).get_tensor()`` gives a ``Tensor`` view whose ``set(array,
place)`` writes the value and ``numpy.array(tensor)`` reads it, as in Fluid; ``lod()`` /
``set_lod()`` (and the recursive sequence lengths) read and set the LoD of a sequence var's
value, a ``LoDTensor`` (placegroup/values.py).

Thread-safety: a scope belongs to one executor; reading it from another thread while that
executor runs gives whichever value was last written.
"""
from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from placegroup.values import LoDTensor, is_selected_rows


def to_numpy(value: Any) -> np.ndarray:
    """A host numpy array for a numpy or cupy array (SelectedRows keep their own type; a
    LoDTensor gives its data: the caller decides about its LoD)."""
    if isinstance(value, np.ndarray):
        return value
    if is_selected_rows(value):
        return value.to_host()
    if isinstance(value, LoDTensor):
        return to_numpy(value._held())
    get = getattr(value, "get", None)  # cupy.ndarray.get() copies to the host
    if get is not None and not isinstance(value, dict):
        return get()
    return np.asarray(value)


class Tensor:
    """A view of one var's value in a scope."""

    def __init__(self, scope: "Scope", name: str) -> None:
        self._scope = scope
        self._name = name

    def _value(self):
        hook = self._scope.get_hook
        if hook is not None:
            hook(self._name)
        try:
            return self._scope.vars[self._name]
        except KeyError:
            raise ValueError(f"var {self._name!r} has no value in this scope yet "
                             f"(run the startup program, or feed it)") from None

    def set(self, array: Any, place: Any = None) -> None:
        """Write ``array`` as the value (on ``place``'s device; CPU when None). A LoDTensor
        brings its LoD; an array keeps the LoD the var held if it still fits the rows (Fluid
        keeps it regardless), so ``set`` then ``set_lod`` works as in Fluid."""
        guard = self._scope.set_guard
        if guard is not None:
            guard(self._name)
        lod = array.offsets if isinstance(array, LoDTensor) else None
        if lod is not None:
            array = array._held()
        arr = np.asarray(array) if not hasattr(array, "__cuda_array_interface__") else array
        if place is not None and getattr(place, "device", "cpu") == "gpu":
            arr = place.array_module().asarray(arr)
        if lod is None:
            old = self._scope.vars.get(self._name)
            if isinstance(old, LoDTensor) and old.offsets and arr.ndim and arr.shape[0] == old.offsets[-1][-1]:
                lod = old.offsets
        self._scope.vars[self._name] = LoDTensor(arr, lod, check=False) if lod else arr

    def shape(self) -> list[int]:
        value = self._value()
        return list((value._held() if isinstance(value, LoDTensor) else value).shape)

    def _dtype(self):
        value = self._value()
        return (value._held() if isinstance(value, LoDTensor) else value).dtype

    # -- the LoD of a sequence var's value (Fluid's LoDTensor methods) ---------------------------
    def lod(self) -> list:
        """The offset-based LoD of the value (``[]``: none)."""
        value = self._value()
        return value.lod() if isinstance(value, LoDTensor) else []

    def recursive_sequence_lengths(self) -> list:
        value = self._value()
        return value.recursive_sequence_lengths() if isinstance(value, LoDTensor) else []

    def set_lod(self, lod) -> None:
        """Give the value the offset-based LoD ``lod`` (``[]``: none).

        Raises:
            ValueError: the LoD does not fit the value's rows (naming what is wrong).
        """
        self._relod(lambda t: t.set_lod(lod))

    def set_recursive_sequence_lengths(self, lengths) -> None:
        """Give the value the LoD of ``lengths`` (``[[2, 3]]``); ValueError when it does not fit."""
        self._relod(lambda t: t.set_recursive_sequence_lengths(lengths))

    def has_valid_recursive_sequence_lengths(self) -> bool:
        value = self._value()
        return value.has_valid_recursive_sequence_lengths() if isinstance(value, LoDTensor) else True

    def _relod(self, setter) -> None:
        guard = self._scope.set_guard
        if guard is not None:
            guard(self._name)
        value = self._value()
        t = LoDTensor(value._held() if isinstance(value, LoDTensor) else value)
        setter(t)  # a new value: one the executor holds may be shared (NOTE(lod-offsets))
        self._scope.vars[self._name] = t if t.offsets else t.data

    def __array__(self, dtype=None, copy=None):
        # a copy: an op may update the var in place later (NOTE(sparse-copy), ops/optimizer.py)
        a = to_numpy(self._value())
        return a.astype(dtype) if dtype is not None else (a if copy is False else a.copy())

    def __repr__(self) -> str:
        lod = self.recursive_sequence_lengths()
        return f"Tensor({self._name}: {np.asarray(self)!r}{f', recursive_sequence_lengths={lod}' if lod else ''})"


class ScopeVar:
    def __init__(self, scope: "Scope", name: str) -> None:
        self._scope = scope
        self.name = name

    def get_tensor(self) -> Tensor:
        return Tensor(self._scope, self.name)

    def get_selected_rows(self) -> Tensor:
        return Tensor(self._scope, self.name)


class Scope:
    """Name -> value. ``vars`` is the executor's fast path; users go through ``find_var``."""

    def __init__(self) -> None:
        self.vars: dict[str, Any] = {}
        # Set by a distributed executor so that ``Tensor.set`` on a var held elsewhere raises
        # PlacementError naming the holder: a process writes only what it holds.
        self.set_guard = None
        # Set by a distributed executor: called with a var's name before its value is handed
        # out, so that a parameter still on its way from a pserver is taken first.
        self.get_hook = None
        self.settle = None  # and this one takes every such value (before a local program runs)
        # Set by a trainer's executor: names -> {name: value} of the vars it does not hold whose
        # values the pservers do, asked of them at the trainer's last step (NOTE(save-gather)).
        self.held_elsewhere = None

    def find_var(self, name: str) -> ScopeVar | None:
        """The var ``name`` if it has a value here, else None (as in Fluid)."""
        if self.get_hook is not None:
            self.get_hook(name)
        return ScopeVar(self, name) if name in self.vars else None

    def var(self, name: str) -> ScopeVar:
        """The var ``name``, created empty if missing (set it with ``get_tensor().set``)."""
        return ScopeVar(self, name)

    def drop(self, name: str) -> None:
        self.vars.pop(name, None)

    def local_var_names(self) -> list[str]:
        return sorted(self.vars)


_global_scope = Scope()


def global_scope() -> Scope:
    return _global_scope


@contextlib.contextmanager
def scope_guard(scope: Scope):
    """Inside the block, ``global_scope()`` is ``scope``."""
    global _global_scope
    old, _global_scope = _global_scope, scope
    try:
        yield
    finally:
        _global_scope = old
