"""A small collective group over a key-value store: what ``GeneralRoleMaker`` barriers,
all-reduces and all-gathers through (Fluid 1.8 does it with gloo over an HDFS path or an HTTP
key-value server that trainer 0 runs).

Three stores, one interface (``set``, ``get``, ``delete`` of bytes by key):

* ``DirStore``: a directory every process sees (a local path, NFS); each key is a file,
  written under a temporary name and renamed, so a reader never sees half of one;
* ``HadoopStore``: an ``hdfs:``/``afs:`` path, through ``hadoop fs`` (``-put`` then ``-mv``,
  ``-cat``, ``-rm``), with the job's ``fs.default.name`` and ``hadoop.job.ugi``;
* ``HTTPStore``: a key-value HTTP server (``KVServer``) that trainer 0 runs on a daemon thread
  for the life of its process, the others ``PUT`` and ``GET``.

NOTE(store-rounds): a ``StoreGroup`` call is one *round*: member ``rank`` writes its payload
under ``<scope>/<round>/<rank>`` and polls until every member's key of that round is there.
Every member makes the same calls in the same order (as with gloo or MPI), so round numbers
agree. When round r is complete, every member has written it and therefore finished reading
round r-1, so each member then deletes its own key of round r-1: the store holds at most two
rounds. Keys of an earlier job under the same path would be taken for this job's: give each
job its own path, or its own ``SYS_JOB_ID`` (the key prefix), as Fluid's gloo store asks.

NOTE(store-owner-leaves): the HTTP store lives in trainer 0's process, which may end right after
its last round while the others still read that round's keys. So a group made with
``track_done`` also keeps ``<scope>/done/<rank>`` = the last round the member completed, and
the owner, before it stops the server (``GeneralRoleMaker._finalize``, or at the end of its
process), waits until every member has completed its own last round (``wait_done``).

What crosses the store is msgpack of numbers, strings and lists of them; nothing is pickled.

Thread-safety: a group is used by one thread; the HTTP server serves on its own thread.
"""
from __future__ import annotations

import http.server
import os
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import msgpack
import numpy as np

from placegroup.errors import CollectiveError, CommTimeout

__all__ = ["DirStore", "HadoopStore", "HTTPStore", "KVServer", "StoreGroup"]


class DirStore:
    """Keys as files under ``root`` (created), which every member of the group must see."""

    poll = 0.005

    def __init__(self, root: str) -> None:
        self.root = root
        os.makedirs(root, exist_ok=True)

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/"))

    def set(self, key: str, value: bytes) -> None:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp.", dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as f:
            f.write(value)
        os.replace(tmp, path)

    def get(self, key: str) -> bytes | None:
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def delete(self, key: str) -> None:
        """Remove ``key``, and its directory once that is empty (a finished round's)."""
        path = self._path(key)
        try:
            os.unlink(path)
            os.rmdir(os.path.dirname(path))
        except OSError:  # gone already, or the directory still holds others' keys
            pass


class HadoopStore:
    """Keys as files under an HDFS/AFS ``root``, through ``hadoop fs`` (``hadoop``: the binary,
    ``$HADOOP_HOME/bin/hadoop`` or ``hadoop`` on the PATH as the caller decides)."""

    poll = 1.0

    def __init__(self, root: str, fs_name: str = "", ugi: str = "", hadoop: str = "hadoop") -> None:
        self.root = root.rstrip("/")
        self._cmd = [hadoop, "fs"] + [f"-D{k}={v}" for k, v in (("fs.default.name", fs_name),
                                                                  ("hadoop.job.ugi", ugi)) if v]

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(self._cmd + list(args), capture_output=True)

    def set(self, key: str, value: bytes) -> None:
        path = f"{self.root}/{key}"
        self._run("-mkdir", "-p", path.rsplit("/", 1)[0])
        with tempfile.NamedTemporaryFile() as f:
            f.write(value)
            f.flush()
            for args in (("-put", "-f", f.name, path + ".tmp"), ("-mv", path + ".tmp", path)):
                done = self._run(*args)
                if done.returncode:
                    raise CollectiveError(f"hadoop fs {' '.join(args)} failed ({done.returncode}): "
                                          f"{done.stderr.decode(errors='replace').strip()}")

    def get(self, key: str) -> bytes | None:
        done = self._run("-cat", f"{self.root}/{key}")
        return done.stdout if done.returncode == 0 else None

    def delete(self, key: str) -> None:
        self._run("-rm", f"{self.root}/{key}")


class _KVHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        with self.server.lock:
            value = self.server.kv.get(self.path)
        self._reply(404 if value is None else 200, value or b"")

    def do_PUT(self) -> None:  # noqa: N802
        value = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:
            self.server.kv[self.path] = value
        self._reply(200, b"")

    def do_DELETE(self) -> None:  # noqa: N802
        with self.server.lock:
            self.server.kv.pop(self.path, None)
        self._reply(200, b"")

    def _reply(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # quiet: one line per request is noise
        pass


class KVServer:
    """The key-value HTTP server of ``HTTPStore``, serving on a daemon thread from ``start()``
    until ``stop()`` or the end of the process.

    Args:
        port: the port to listen on (all interfaces, as Fluid's).
    """

    def __init__(self, port: int) -> None:
        self._server = http.server.ThreadingHTTPServer(("", port), _KVHandler)
        self._server.daemon_threads = True
        self._server.kv, self._server.lock = {}, threading.Lock()
        self._thread = threading.Thread(target=self._server.serve_forever, name="kv-server", daemon=True)

    def start(self) -> "KVServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class HTTPStore:
    """Keys on the ``KVServer`` at ``ip:port``; a ``set`` waits up to ``connect_timeout``
    seconds for the server (trainer 0) to come up."""

    poll = 0.01
    connect_timeout = 60.0

    def __init__(self, ip: str, port: int) -> None:
        self._base = f"http://{ip}:{port}/"

    def _call(self, method: str, key: str, body: bytes | None = None) -> bytes | None:
        req = urllib.request.Request(self._base + key, data=body, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise
        except (urllib.error.URLError, ConnectionError):
            return None  # the server (trainer 0) is not up yet: a key not there yet

    def set(self, key: str, value: bytes) -> None:
        deadline = time.monotonic() + self.connect_timeout
        while True:  # trainer 0 may not serve yet
            try:
                urllib.request.urlopen(urllib.request.Request(self._base + key, data=value, method="PUT"),
                                       timeout=10).close()
                return
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise CommTimeout(f"no key-value server at {self._base} for {self.connect_timeout:g}s "
                                      f"(trainer 0 runs it: GeneralRoleMaker(http_ip_port=...))")
                time.sleep(0.1)

    def get(self, key: str) -> bytes | None:
        return self._call("GET", key)

    def delete(self, key: str) -> None:
        self._call("DELETE", key)


_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}


class StoreGroup:
    """``size`` members, this one ``rank``, exchanging small values through ``store``
    (NOTE(store-rounds)).

    Args:
        store: a ``DirStore``, ``HadoopStore`` or ``HTTPStore``.
        scope: the group's key prefix (e.g. ``"<job>/trainer"``).
        rank, size: this member's index and the group's size.
        init_timeout, run_timeout: seconds to wait for every member at ``init`` and at a call.

    Raises:
        CommTimeout: (from any call) a member's key did not come in time, naming them.

    Example::

        g = StoreGroup(DirStore("/shared/job1"), "trainer", rank=0, size=2).init()
        g.all_reduce([1.0, 2.0], "sum")   # the members' lists, summed elementwise
    """

    def __init__(self, store, scope: str, rank: int, size: int, init_timeout: float = 3600,
                 run_timeout: float = 9999999, track_done: bool = False) -> None:
        self.store, self.scope, self.rank, self.size = store, scope.strip("/"), rank, size
        self.init_timeout, self.run_timeout, self.track_done = init_timeout, run_timeout, track_done
        self._round = 0

    def _exchange(self, payload: bytes, timeout: float, what: str) -> list[bytes]:
        r = self._round
        self._round += 1
        self.store.set(f"{self.scope}/{r}/{self.rank}", payload)
        got: dict[int, bytes] = {}
        deadline = time.monotonic() + timeout
        while len(got) < self.size:
            for i in range(self.size):
                if i not in got:
                    value = self.store.get(f"{self.scope}/{r}/{i}")
                    if value is not None:
                        got[i] = value
            if len(got) < self.size:
                if time.monotonic() > deadline:
                    missing = [i for i in range(self.size) if i not in got]
                    raise CommTimeout(f"{what} of group {self.scope!r} (rank {self.rank} of {self.size}, "
                                      f"round {r}): no word from ranks {missing} in {timeout:g}s")
                time.sleep(self.store.poll)
        if r > 0:  # NOTE(store-rounds): everyone has read round r-1
            self.store.delete(f"{self.scope}/{r - 1}/{self.rank}")
        if self.track_done:  # NOTE(store-owner-leaves)
            self.store.set(f"{self.scope}/done/{self.rank}", str(r).encode())
        return [got[i] for i in range(self.size)]

    def wait_done(self, timeout: float) -> list[int]:
        """Wait until every member has completed this member's last round (NOTE(store-owner-
        leaves)), at most ``timeout`` seconds; the members still behind then (by rank)."""
        last, deadline = self._round - 1, time.monotonic() + timeout
        behind = list(range(self.size))
        while behind and last >= 0:
            behind = [i for i in behind if int(self.store.get(f"{self.scope}/done/{i}") or -1) < last]
            if behind and time.monotonic() > deadline:
                break
            time.sleep(self.store.poll if behind else 0)
        return behind if last >= 0 else []

    def init(self) -> "StoreGroup":
        """Wait until every member has joined (``init_timeout``)."""
        self._exchange(b"", self.init_timeout, "rendezvous")
        return self

    def barrier(self) -> None:
        self._exchange(b"", self.run_timeout, "barrier")

    def all_gather(self, value) -> list:
        """Every member's ``value`` (a number, str, or list of them), in rank order."""
        if isinstance(value, np.ndarray):
            value = value.tolist()
        elif isinstance(value, np.generic):
            value = value.item()
        return [msgpack.unpackb(b) for b in self._exchange(msgpack.packb(value), self.run_timeout, "all_gather")]

    def all_reduce(self, values, mode: str = "sum") -> list:
        """The members' ``values`` (numbers of equal length) reduced elementwise by ``mode``
        (``"sum"``, ``"max"`` or ``"min"``)."""
        if mode not in _REDUCE:
            raise ValueError(f"unknown mode: {mode} (expected 'sum', 'max' or 'min')")
        mine = np.asarray(values).tolist()
        parts = [np.asarray(p) for p in self.all_gather(mine)]
        if len({p.shape for p in parts}) != 1:
            raise CollectiveError(f"all_reduce of group {self.scope!r}: the members gave values of shapes "
                                  f"{[p.shape for p in parts]}")
        return _REDUCE[mode](np.stack(parts), axis=0).tolist()
