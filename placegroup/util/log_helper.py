"""Fluid 1.8's ``fluid.log_helper``: a named logger with its own handler.

Example::

    logger = get_logger(__name__, logging.INFO, fmt="%(asctime)s-%(levelname)s: %(message)s")
    logger.info("saved")

Thread-safety: as ``logging``'s; configure loggers from one thread.
"""
from __future__ import annotations

import logging

__all__ = ["get_logger"]


def get_logger(name: str, level: int, fmt: str | None = None) -> logging.Logger:
    """The logger ``name`` at ``level``, writing to stderr with ``fmt``, without touching the
    root logger's configuration (``logging.basicConfig`` stays the script's to call).

    As in Fluid, the logger does not propagate to the root logger (a message would print
    twice). Unlike Fluid, which adds a handler at every call (so a second call prints each
    message twice), a second call for the same name replaces the handler an earlier call added.

    Args:
        name: the logger's name.
        level: its level (``logging.INFO``, ...).
        fmt: a ``logging.Formatter`` format; None: logging's default.

    Returns:
        The ``logging.Logger``.
    """
    logger = logging.getLogger(name)
    logger.setLevel(level)
    for old in [h for h in logger.handlers if getattr(h, "_placegroup_get_logger", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler()
    handler._placegroup_get_logger = True
    if fmt:
        handler.setFormatter(logging.Formatter(fmt=fmt))
    logger.addHandler(handler)
    logger.propagate = False
    return logger
