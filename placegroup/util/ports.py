"""Why a process cannot listen on its endpoint, said in the user's terms (``BindError``).

``cannot_bind`` names the endpoint, the variables it came from (``POD_IP`` and
``PADDLE_INIT_PORT``, or a pserver or trainer list) and, where ``/proc`` shows it to this
user, the process that holds the port. That last part is best effort: what cannot be read is
left out, and it never raises.

Example: ``BindError: pserver@127.0.0.1:7164 cannot listen on 127.0.0.1:7164: the port is in use
(by pid 4242: python3 -m http.server 7164); the endpoint comes from POD_IP=127.0.0.1 and
PADDLE_INIT_PORT=7164: stop that process, or give this one a free port``.
"""
from __future__ import annotations

import errno
import os

from placegroup import config
from placegroup.errors import BindError

_LISTS = ("PADDLE_INIT_PSERVERS", "PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_TRAINER_ENDPOINTS",
          "PADDLE_INIT_TRAINERS")


def cannot_bind(me: str, endpoint: str, err: OSError) -> BindError:
    """The error for executor ``me`` failing to bind ``endpoint`` (``ip:port``) with ``err``."""
    host, port = endpoint.rsplit(":", 1)
    if err.errno == errno.EADDRINUSE:
        why, fix = f"the port is in use{holder(int(port))}", "stop that process, or give this one a free port"
    elif err.errno == errno.EADDRNOTAVAIL:
        why, fix = f"{host} is not an address of this host", "give it one of this host's addresses"
    else:
        why, fix = err.strerror or str(err), "give it an ip:port this host can listen on"
    return BindError(f"{me} cannot listen on {endpoint}: {why}; the endpoint comes from {origin(endpoint)}: {fix}")


def origin(endpoint: str) -> str:
    """Which variables give ``endpoint``, or the transpiler's arguments when none does."""
    pod = config.raw("POD_IP") or config.SETTINGS["POD_IP"].default
    port = endpoint.rsplit(":", 1)[1]
    said = [f"POD_IP={pod} and {var}={port}" for var in ("PADDLE_INIT_PORT", "PADDLE_PORT")
            if f"{pod}:{config.raw(var)}" == endpoint]
    said += [f"{var} (which lists it)" for var in _LISTS
             if endpoint in (s.strip() for s in (config.raw(var) or "").split(","))]
    return " and ".join(said) or "the transpiler's arguments (current_endpoint, or its pservers or trainers list)"


def holder(port: int) -> str:
    """`` (by pid N: its command line)`` for the process listening on TCP ``port``, or ``""``."""
    try:
        inodes = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as f:
                rows = [r.split() for r in f.read().splitlines()[1:]]
            inodes |= {f"socket:[{r[9]}]" for r in rows if r[3] == "0A" and int(r[1].rsplit(":", 1)[1], 16) == port}
        for pid in filter(str.isdigit, os.listdir("/proc") if inodes else ()):
            if any(link in inodes for link in _sockets(pid)):
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = " ".join(f.read().decode(errors="replace").replace("\0", " ").split())
                return f" (by pid {pid}: {cmd[:200]})"
        return " (by a process this user cannot see)" if inodes else ""
    except (OSError, ValueError, IndexError):  # best effort: say no more than is known
        return ""


def _sockets(pid: str):
    """What the open files of process ``pid`` link to (none for a process gone or not ours)."""
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            yield os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return
