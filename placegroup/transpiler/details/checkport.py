"""``fluid.transpiler.details.checkport``: wait until TCP endpoints accept connections.

placegroup's executors wait for their peers themselves (up to ``PLACEGROUP_START_TIMEOUT``,
saying whom they wait for), so the transpilers do not call this; it is here for scripts that
wait for a server of their own before they go on, as Fluid's do.
"""
from __future__ import annotations

import socket
import sys
import time
from contextlib import closing
from typing import Sequence

from placegroup.errors import CommTimeout, ConfigError
from placegroup.ir.place_group import Node

__all__ = ["wait_server_ready"]


def _address(ep: str) -> tuple[str, int]:
    try:
        node = Node.parse(ep)
    except ValueError as e:
        raise ConfigError(f"wait_server_ready: {ep!r} is not ip:port ({e})") from None
    return node.ip, node.port


def _accepts(address: tuple[str, int]) -> bool:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(2)
        return sock.connect_ex(address) == 0


def wait_server_ready(endpoints: Sequence[str], *, timeout: float | None = None, interval: float = 3.0) -> None:
    """Return once every endpoint accepts a TCP connection, trying all of them every
    ``interval`` seconds and saying on stderr which are not ready yet (as Fluid does).

    Args:
        endpoints: ``["ip:port", ...]`` (a list, not one comma-separated string).
        timeout: seconds to wait at most; None waits as long as it takes, as in Fluid.
        interval: seconds between two rounds of tries (Fluid's 3).

    Raises:
        TypeError: ``endpoints`` is a string.
        ConfigError: an endpoint is not ``ip:port``.
        CommTimeout: ``timeout`` passed with endpoints still not accepting (it names them).

    Example::

        wait_server_ready(["127.0.0.1:7164", "127.0.0.1:7165"], timeout=60)

    Thread-safety: safe; each try uses a socket of its own.
    """
    if isinstance(endpoints, (str, bytes)):
        raise TypeError(f"wait_server_ready takes a list of endpoints, got the string {endpoints!r}; "
                        f"split it: {str(endpoints).split(',')!r}")
    addresses = [(ep, _address(ep)) for ep in endpoints]
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        not_ready = [ep for ep, address in addresses if not _accepts(address)]
        if not not_ready:
            return
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise CommTimeout(f"wait_server_ready: {not_ready} did not accept a connection in {timeout:g}s")
        sys.stderr.write(f"server not ready, wait {interval:g} sec to retry...\n"
                         f"not ready endpoints:{not_ready}\n")
        sys.stderr.flush()
        time.sleep(interval if left is None else min(interval, left))
