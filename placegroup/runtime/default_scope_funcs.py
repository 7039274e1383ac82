"""Fluid 1.8's ``fluid.default_scope_funcs``: a thread-local stack of scopes, the top one
current, for code that makes and finds vars by name outside an executor's run.

``var(name)`` declares a var in the current scope; ``find_var(name)`` finds it there or in an
enclosing scope (None if none has it); ``enter_local_scope()`` pushes a child of the current
scope and ``leave_local_scope()`` pops it, dropping what it held; ``scoped_function(f)`` runs ``f``
in a fresh local scope.

The scopes are ``LocalScope``s, placegroup ``Scope``s (``fluid.core.Scope``) that know their
parent: values set through ``var(name).get_tensor().set(...)`` are held as in any scope, and
an executor may run in one (``scope_guard``), seeing only its own values, not its parents'.

Example::

    x = var("x"); x.get_tensor().set(np.ones(3, "float32"), fluid.CPUPlace())
    enter_local_scope()
    find_var("x") is not None        # found in the enclosing scope
    leave_local_scope()

Thread-safety: each thread has its own stack, as in Fluid.
"""
from __future__ import annotations

import threading
from typing import Callable

from placegroup.executor.scope import Scope, ScopeVar

__all__ = ["LocalScope", "enter_local_scope", "find_var", "get_cur_scope", "leave_local_scope", "scoped_function",
           "var"]

_stacks = threading.local()


class LocalScope(Scope):
    """A ``Scope`` with a parent: ``find_var`` looks here, then in the parents; ``var`` declares
    a name here, so ``find_var`` finds it before it holds a value (as Fluid's does)."""

    def __init__(self, parent: "LocalScope | None" = None) -> None:
        super().__init__()
        self.parent = parent
        self.kids: list[LocalScope] = []
        self.declared: set[str] = set()

    def var(self, name: str) -> ScopeVar:
        self.declared.add(name)
        return super().var(name)

    def find_var(self, name: str) -> ScopeVar | None:
        scope: LocalScope | None = self
        while scope is not None:
            if name in scope.declared or name in scope.vars:
                return ScopeVar(scope, name)
            scope = scope.parent
        return None

    def new_scope(self) -> "LocalScope":
        """A child scope, kept until ``drop_kids``."""
        kid = LocalScope(self)
        self.kids.append(kid)
        return kid

    def drop_kids(self) -> None:
        """Forget every child scope and what it held."""
        self.kids.clear()


def _stack() -> list[LocalScope]:
    stack = getattr(_stacks, "scopes", None)
    if stack is None:
        stack = _stacks.scopes = []
    if not stack:
        stack.append(LocalScope())
    return stack


def get_cur_scope() -> LocalScope:
    """The current scope of this thread (a new root scope the first time)."""
    return _stack()[-1]


def enter_local_scope() -> None:
    """Make a child of the current scope current."""
    stack = _stack()
    stack.append(stack[-1].new_scope())


def leave_local_scope() -> None:
    """Make the enclosing scope current again, dropping the one left (and its kids).

    Raises:
        IndexError: no local scope was entered.
    """
    stack = _stack()
    if len(stack) < 2:
        raise IndexError("leave_local_scope: no local scope was entered (enter_local_scope first)")
    stack.pop()
    stack[-1].drop_kids()


def var(name: str) -> ScopeVar:
    """Declare ``name`` in the current scope; its ``get_tensor().set(array, place)`` gives it a value."""
    return get_cur_scope().var(name)


def find_var(name: str) -> ScopeVar | None:
    """The var ``name`` of the current scope or an enclosing one; None if none has it."""
    return get_cur_scope().find_var(name)


def scoped_function(func: Callable[[], object]) -> None:
    """Run ``func()`` in a new local scope, left (and dropped) however ``func`` ends."""
    enter_local_scope()
    try:
        func()
    finally:
        leave_local_scope()
