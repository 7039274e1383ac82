"""Fluid 1.8's ``fluid.annotations``: the ``deprecated`` decorator of its old layer API.

Example::

    @deprecated(since="0.15.0", instead="ParallelExecutor")
    def get_devices():
        \"\"\"The devices.\"\"\"

    get_devices()   # prints "API get_devices is deprecated since 0.15.0. Please use
                    # ParallelExecutor instead." to stderr, then runs it

Thread-safety: the decorator keeps no state.
"""
from __future__ import annotations

import functools
import sys
from typing import Callable

__all__ = ["deprecated"]


def deprecated(since: str, instead: str, extra_message: str = "") -> Callable[[Callable], Callable]:
    """Mark a function deprecated: each call first prints the notice to stderr, as Fluid does
    (a print, not a ``warnings`` warning), and the notice is appended to its docstring.

    Args:
        since: the version that deprecated it.
        instead: what to use instead.
        extra_message: a further line for the notice.

    Returns:
        The decorator.
    """
    def decorator(func: Callable) -> Callable:
        msg = f"API {func.__name__} is deprecated since {since}. Please use {instead} instead."
        if extra_message:
            msg += "\n" + extra_message

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            print(msg, file=sys.stderr)
            return func(*args, **kwargs)

        # Fluid fails here on a function without a docstring; the notice alone is its doc then
        wrapper.__doc__ = (wrapper.__doc__ or "") + "\n    " + msg
        return wrapper

    return decorator
