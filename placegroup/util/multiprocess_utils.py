"""Fluid 1.8's ``fluid.multiprocess_utils``: ``CleanupFuncRegistrar``, which runs a function once
when the interpreter exits or when one of the given signals arrives.

Fluid registers its shared-memory cleanup this way for its multi-process DataLoader; placegroup's
readers use threads and need none, so nothing is registered at import here.

Example::

    CleanupFuncRegistrar.register(lambda: shutil.rmtree(tmp), signals=[signal.SIGTERM])

Thread-safety: ``register`` installs signal handlers, which Python allows only from the main
thread; call it there.
"""
from __future__ import annotations

import atexit
import signal
import sys
from typing import Callable, Iterable

__all__ = ["CleanupFuncRegistrar"]


class CleanupFuncRegistrar:
    """Runs registered functions once each: at interpreter exit, or at a registered signal.

    A signal that had a handler of its own keeps it as an exit function (run at exit), as
    Fluid does; after the cleanup, SIGINT raises ``KeyboardInterrupt`` and any other signal
    exits with the signal's number.
    """

    _executed_func_set: set = set()
    _registered_func_set: set = set()

    @classmethod
    def register(cls, function: Callable[[], None], signals: Iterable[int] = ()) -> None:
        """Run ``function`` at exit, or at the first of ``signals``, once.

        Args:
            function: a hashable callable taking no arguments.
            signals: signal numbers (``signal.SIGTERM``, ...) that run it too, then end the process.

        Raises:
            TypeError: ``function`` is not callable or not hashable.
            ValueError: from ``signal.signal`` when called outside the main thread.
        """
        if not callable(function):
            raise TypeError(f"{function} is not callable object.")
        hash(function)  # a set holds it

        def run_once() -> None:
            if function not in cls._executed_func_set:
                try:
                    function()
                finally:
                    cls._executed_func_set.add(function)

        def on_signal(signum=None, frame=None) -> None:
            run_once()
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            sys.exit(signum)

        for sig in set(signals):
            old = signal.signal(sig, on_signal)
            if old in (signal.SIG_DFL, signal.SIG_IGN, None):
                continue
            if sig == signal.SIGINT and old is signal.default_int_handler:
                continue
            if old not in cls._registered_func_set:  # the old handler still runs, at exit
                # (Fluid calls it with no arguments there, which a signal handler does not take)
                atexit.register(old, sig, None)
                cls._registered_func_set.add(old)
        if function not in cls._registered_func_set:
            atexit.register(run_once)
            cls._registered_func_set.add(function)
