"""Fluid 1.8's ``fluid.wrapped_decorator``: decorators that keep the wrapped function's signature.

``wrap_decorator(d)`` turns a decorator ``d`` into one whose result looks like the function it
wraps (name, docstring, ``inspect.signature``), so documentation tools and argument checks see
the real parameters; ``signature_safe_contextmanager`` is ``contextlib.contextmanager`` made so.

Example::

    @signature_safe_contextmanager
    def guard(prefix: str = "x"):
        yield prefix

    inspect.signature(guard)        # (prefix: str = 'x')
    with guard("y") as p: ...

Thread-safety: the decorators keep no state.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable

__all__ = ["signature_safe_contextmanager", "wrap_decorator"]


def wrap_decorator(decorator_func: Callable[[Callable], Callable]) -> Callable[[Callable], Callable]:
    """A decorator that applies ``decorator_func`` and keeps the wrapped function's signature.

    Args:
        decorator_func: a decorator (a function of a function returning a callable).

    Returns:
        A decorator: ``wrap_decorator(d)(f)`` calls ``d(f)`` with each call's arguments, and has
        ``f``'s name, docstring and signature (``inspect.signature`` follows ``__wrapped__``).

    Example::

        traced = wrap_decorator(lambda f: lambda *a, **k: (print(f.__name__), f(*a, **k))[1])
    """
    def __impl__(func: Callable) -> Callable:
        wrapped = decorator_func(func)

        @functools.wraps(func)
        def call(*args, **kwargs):
            return wrapped(*args, **kwargs)

        return call

    return __impl__


signature_safe_contextmanager = wrap_decorator(contextlib.contextmanager)
