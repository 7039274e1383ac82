"""The mailbox: values that arrived, by ``(var, version, source)``, and the ops that wait.

It sits on a ``Transport`` (docs/protocol.md): ``post`` batches outgoing values per peer until
``flush`` (a step's messages to one peer travel together, DESIGN.md §8); ``wait`` drains the
sockets until the values an op needs are there, handling ``hello``/``done``/``error`` on the
way. Malformed messages are dropped with a log line and never stop the executor.

Thread-safety: one mailbox per executor thread.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, Sequence

import numpy as np

from placegroup.comm.framing import FrameError, pack, pack_fetch, unpack
from placegroup.ops.selected_rows import SelectedRows
from placegroup.comm.transport import Transport
from placegroup.errors import CommTimeout, PeerLost, RemoteError

log = logging.getLogger("placegroup.comm")
DEBUG = int(os.environ.get("PLACEGROUP_DEBUG", "0"))  # >= 2: log every message
EAGER_BYTES = 256 * 1024  # NOTE(eager-flush)
LOST_GRACE = float(os.environ.get("PLACEGROUP_LOST_GRACE", "2"))  # NOTE(peer-lost): a restart may reconnect


class PeersDone(Exception):
    """Every source a wait depends on has said ``done``: a pserver stops serving."""


class Mailbox:
    def __init__(self, transport: Transport, step_of=lambda: 0) -> None:
        self.t = transport
        self.values: dict[tuple, Any] = {}
        self.done: dict[str, int] = {}   # peer -> its last step
        self.outbox: dict[str, list] = {}
        self.pending_bytes = 0
        self.step_of = step_of          # the executor's current step, for headers
        # called with (peer, [(var, version)]) when a peer asks for values (kind "fetch")
        self.on_fetch = None

    # -- sending -------------------------------------------------------------------------------
    def post(self, peer: str, var: str, version: int, value: Any) -> None:
        self.outbox.setdefault(peer, []).append((var, version, value))
        # NOTE(eager-flush): small values wait for the next flush so that a step's messages
        # to one peer travel together; a big one leaves now, so that libzmq's IO thread
        # sends it while this thread computes the next op (a gradient while backward goes on).
        self.pending_bytes += getattr(value, "nbytes", 0)
        if self.pending_bytes >= EAGER_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.outbox:
            return
        step = self.step_of()
        for peer, vals in self.outbox.items():
            if DEBUG >= 2:
                print(f"[{self.t.me}] -> {peer}: {[(v[0], v[1]) for v in vals]}", file=sys.stderr)
            self._send(peer, pack("values", self.t.me, step, vals))
        self.outbox.clear()
        self.pending_bytes = 0

    def flush_peer(self, peer: str) -> None:
        """Send what waits for ``peer`` only."""
        vals = self.outbox.pop(peer, None)
        if vals:
            self._send(peer, pack("values", self.t.me, self.step_of(), vals))
            self.pending_bytes = sum(getattr(v[2], "nbytes", 0) for vs in self.outbox.values() for v in vs)

    def _send(self, peer: str, frames) -> None:
        self.t.send(peer, frames)

    def request(self, peer: str, wanted: Sequence[tuple]) -> None:
        """Ask ``peer`` for ``[(var, version)]`` (a ``fetch``); the answer comes as values."""
        self._send(peer, pack_fetch(self.t.me, self.step_of(), wanted))

    def broadcast(self, peers: Sequence[str], kind: str, msg: str = "") -> None:
        """A control message (``done``, ``error``) to each peer, at once."""
        self.flush()
        for peer in peers:
            self._send(peer, pack(kind, self.t.me, self.step_of(), msg=msg))

    # -- receiving -----------------------------------------------------------------------------
    def _file(self, peer: str, frames) -> None:
        try:
            m = unpack(frames)
        except FrameError as e:
            log.warning("%s: dropped a message from %s: %s", self.t.me, peer, e)
            return
        if DEBUG >= 2:
            print(f"[{self.t.me}] <- {peer}: {m.kind} {[(v[0], v[1]) for v in m.vals]}", file=sys.stderr)
        if m.src != peer:
            log.warning("%s: dropped a message from %s claiming to be %s", self.t.me, peer, m.src)
            return
        if m.kind == "values":
            for var, version, value in m.vals:
                self.values[(var, version, peer)] = value
        elif m.kind == "hello":
            if m.digest != self.t.digest:
                log.warning("%s: %s runs another program (digest %s, ours %s)", self.t.me, peer,
                            m.digest, self.t.digest)
                self._send(peer, pack("error", self.t.me, -1, msg=(
                    f"{self.t.me} runs another program than {peer}: transpile the same model with "
                    f"the same arguments in every process")))
            if self.t.router is not None:
                self.t.hello_from(peer)
        elif m.kind == "fetch":
            if self.on_fetch is None:
                log.warning("%s: dropped a fetch from %s: nothing here serves fetches", self.t.me, peer)
            else:
                self.on_fetch(peer, [(var, version) for var, version, _ in m.vals])
        elif m.kind == "done":
            self.done[peer] = m.step
            self.t.gone.add(peer)
        elif m.kind == "error":
            raise RemoteError(f"{peer} failed: {m.msg}")

    def pump(self, timeout_ms: int) -> None:
        for peer, frames in self.t.poll(timeout_ms):
            self._file(peer, frames)

    def pump_once(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for any message; True if one came."""
        before = len(self.values) + len(self.done)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            n = self.t.poll(int(min(deadline - time.monotonic(), 1.0) * 1000) + 1)
            for peer, frames in n:
                self._file(peer, frames)
            if n:
                return True
        return len(self.values) + len(self.done) > before

    def wait(self, keys: Sequence[tuple], timeout: float, describe) -> list:
        """The values for ``keys`` (``(var, version, source)``), draining sockets until all are
        there. A source that said ``done`` before that version is skipped (its slot is None);
        if every key's source is done, ``PeersDone``. After ``timeout`` seconds without them,
        ``CommTimeout(describe(missing))``."""
        self.flush()
        values = self.values
        deadline = None
        while True:
            missing = [k for k in keys if k not in values and not self._gone_before(k)]
            if not missing:
                out = [values.pop(k, None) for k in keys]
                if all(v is None for v in out) and keys:
                    raise PeersDone()
                return out
            if deadline is None:
                deadline = time.monotonic() + timeout
            left = deadline - time.monotonic()
            if left <= 0:
                raise CommTimeout(describe(missing))
            self._check_lost(missing, describe)
            self.pump(int(min(left, 1.0) * 1000) + 1)

    def newest(self, var: str, src: str, min_version: int):
        """``(version, value)`` of the newest value of ``var`` from ``src`` of at least
        ``min_version`` that has arrived (older ones dropped), or None; never waits."""
        self.pump(0)
        found = [k for k in self.values if k[0] == var and k[2] == src and k[1] >= min_version]
        if not found:
            return None
        best = max(found, key=lambda k: k[1])
        value = self.values.pop(best)
        for k in [k for k in self.values if k[0] == var and k[2] == src and k[1] < best[1]]:
            del self.values[k]
        return best[1], value

    def wait_newest(self, var: str, src: str, min_version: int, timeout: float, describe) -> tuple:
        """``(version, value)``: the newest value of ``var`` from ``src`` of at least
        ``min_version`` (waiting for one if none has come); older ones are dropped."""
        self.flush()
        deadline = time.monotonic() + timeout
        while True:
            found = [k for k in self.values if k[0] == var and k[2] == src and k[1] >= min_version]
            if found:
                best = max(found, key=lambda k: k[1])
                value = self.values.pop(best)
                for k in [k for k in self.values if k[0] == var and k[2] == src and k[1] < best[1]]:
                    del self.values[k]  # superseded
                return best[1], value
            left = deadline - time.monotonic()
            if left <= 0:
                raise CommTimeout(describe([(var, min_version, src)]))
            self._check_lost([(var, min_version, src)], describe)
            self.pump(int(min(left, 1.0) * 1000) + 1)

    def oldest(self, var: str, src: str):
        """The key of ``src``'s oldest pending value of ``var``, any version (async mode)."""
        found = [k for k in self.values if k[0] == var and k[2] == src]
        return min(found, key=lambda k: k[1]) if found else None

    def wait_any(self, keys: Sequence[tuple], timeout: float, describe, any_version: bool = False,
                 hold: float = 0.0) -> tuple:
        """``(key, value)`` of the first of ``keys`` to arrive (value None: its source is done,
        ``PeersDone`` when every one is). With ``any_version`` a key's version is ignored and
        each source's oldest value comes first. ``hold`` seconds: first wait that long without
        flushing, so values for a source still to be answered can travel with its answer
        (NOTE(each-batching) in executor/distributed.py). ``CommTimeout`` as ``wait``."""
        held_until = time.monotonic() + hold if hold else None
        if held_until is None:
            self.flush()
        deadline = None
        while True:
            for k in keys:
                hit = self.oldest(k[0], k[2]) if any_version else (k if k in self.values else None)
                if hit is not None:
                    return hit, self.values.pop(hit)
            if any_version:  # a done source has nothing more to come, whatever the version
                live = [k for k in keys if k[2] not in self.done]
            else:
                live = [k for k in keys if not self._gone_before(k)]
            if not live:
                raise PeersDone()
            if len(live) < len(keys):
                return next(k for k in keys if k not in live), None
            if held_until is not None:
                if time.monotonic() < held_until:
                    self.pump(1)
                    continue
                held_until = None
                self.flush()
            if deadline is None:
                deadline = time.monotonic() + timeout
            left = deadline - time.monotonic()
            if left <= 0:
                raise CommTimeout(describe(live))
            self.pump(int(min(left, 1.0) * 1000) + 1)

    def _check_lost(self, missing, describe) -> None:
        """NOTE(peer-lost): a source whose connection dropped more than LOST_GRACE seconds ago
        and has not come back will send nothing more: fail now, naming it."""
        now = time.monotonic()
        for k in missing:
            since = self.t.lost.get(k[2])
            if since is not None and now - since > LOST_GRACE and k[2] not in self.done:
                raise PeerLost(f"peer {k[2]} is gone (its connection dropped {now - since:.1f}s ago and "
                               f"did not come back); " + describe([k]))

    def _gone_before(self, key: tuple) -> bool:
        last = self.done.get(key[2])
        return last is not None and key[1] > last

    def close(self) -> None:
        self.t.close()


def as_host(value: Any) -> Any:
    """A host value for the wire (cupy arrays, and SelectedRows of them, copied to the host)."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, SelectedRows):
        if isinstance(value.values, np.ndarray):
            return value
        return SelectedRows(as_host(value.rows), as_host(value.values), value.height)
    return value.get() if hasattr(value, "get") else value


def to_device(xp, value: Any) -> Any:
    """A received value on the executor's device (``xp`` numpy: as it is)."""
    if xp is np or value is None:
        return value
    if isinstance(value, SelectedRows):
        return SelectedRows(xp.asarray(value.rows), xp.asarray(value.values), value.height)
    return xp.asarray(value)
