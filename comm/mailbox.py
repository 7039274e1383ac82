"""The mailbox: values that arrived, by ``(var, version, source)``, and the ops that wait.

It sits on a ``Transport`` (docs/protocol.md): ``post`` batches outgoing values per peer until
``flush`` (a step's messages to one peer travel together, DESIGN.md §8); ``wait`` drains the
sockets until the values an op needs are there, handling ``hello``/``done``/``error`` on the
way. Malformed messages are dropped with a log line and never stop the executor.

Thread-safety: one mailbox per executor thread.
"""
from __future__ import annotations

import logging
import sys
import time
from typing import Any, Sequence

from placegroup.comm.framing import FrameError, pack, pack_fetch, unpack
from placegroup.comm.transport import Transport
from placegroup import config
from placegroup.errors import CommTimeout, PeerLost, RemoteError

log = logging.getLogger("placegroup.comm")
DEBUG = config.DEBUG  # >= 2: log every message
EAGER_BYTES = 256 * 1024  # NOTE(eager-flush)
LOST_GRACE = config.get("PLACEGROUP_LOST_GRACE")  # NOTE(peer-lost)


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
        self.start_timeout = config.get("PLACEGROUP_START_TIMEOUT")
        self.describe_peer = lambda peer: peer  # "trainer:1" -> who that is, for errors
        # NOTE(hostile-input): what arrives is checked against the plans' expectations
        self.expected = None            # comm.expect.Expectations once a plan is known; None: take all
        self.held: dict[tuple, Any] = {}  # values no plan expects yet (NOTE(expect-early))
        self.held_bytes = 0
        self.dropped: dict[str, int] = {}   # reason -> how many messages or values were dropped
        self._drop_log: dict[tuple, tuple] = {}  # (peer, reason) -> (last logged, dropped since)

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
        """File one received message (NOTE(hostile-input)): whatever it is, this never raises
        but ``RemoteError`` for a well-formed ``error`` from a peer this executor talks to."""
        ex = self.expected
        if ex is not None and peer not in ex.senders:  # before parsing anything a stranger sent
            # strangers share one log key: random bytes on the port come with a new name each
            self._drop("", "stranger", f"dropped {len(frames)} frame(s) from {_who(peer, True)}: not an "
                                       f"executor this one is linked to")
            return
        try:
            m = unpack(frames)
        except FrameError as e:
            self._drop(peer, "malformed", f"dropped a message from {_who(peer)}: {e}")
            return
        if DEBUG >= 2:
            print(f"[{self.t.me}] <- {peer}: {m.kind} {[(v[0], v[1]) for v in m.vals]}", file=sys.stderr)
        if m.src != peer:
            self._drop(peer, "spoofed", f"dropped a {m.kind} from {_who(peer)} claiming to be {m.src[:80]!r}")
            return
        if m.kind == "values":
            for var, version, value in m.vals:
                self._file_value(peer, var, version, value)
        elif m.kind == "hello":
            if m.digest != self.t.digest:
                self._note(peer, "digest", logging.WARNING, f"{peer} runs another program (digest "
                                                            f"{m.digest[:40]!r}, ours {self.t.digest})")
                self._send(peer, pack("error", self.t.me, -1, msg=(
                    f"{self.t.me} runs another program than {peer}: transpile the same model with "
                    f"the same arguments in every process")))
            if self.t.router is not None:
                self.t.hello_from(peer)
        elif m.kind == "fetch":
            if self.on_fetch is None:
                self._drop(peer, "fetch", f"dropped a fetch from {peer}: nothing here serves fetches")
            else:
                self.on_fetch(peer, [(var, version) for var, version, _ in m.vals])
        elif m.kind == "done":
            self.done[peer] = m.step
            self.t.gone.add(peer)
        elif m.kind == "error":
            raise RemoteError(f"{peer} failed: {m.msg}")

    # NOTE(hostile-input): a message is dropped, with a log line, when its sender is not an
    # executor this one is linked to (any kind: a stranger's `done` must not end a pserver's
    # serving), when it is malformed (framing.unpack), when its header names another sender
    # than its connection, and a value when no plan receives that var from that sender or its
    # dtype or shape is not the declared one. Nothing dropped reaches a kernel; the executor
    # goes on. Log lines are rate-limited per (peer, reason), all strangers counting as one
    # peer: one every LOG_EVERY seconds, with the count of those not logged. docs/protocol.md,
    # "What is dropped".
    LOG_EVERY = config.get("PLACEGROUP_DROP_LOG_EVERY")
    LOG_KEYS = 256  # (peer, reason) log keys kept (without a plan, names are not checked)
    HOLD_BYTES, HOLD_COUNT = 256 << 20, 4096  # NOTE(expect-early)

    def expect(self, table) -> None:
        """Check what arrives against ``table`` (a ``comm.expect.Expectations``) from now on,
        together with the tables given before (one per plan). Values held because no plan
        expected them yet are filed again (NOTE(expect-early)).

        Example:
            >>> mb.expect(dist_plan.expectations(plan, senders={"trainer:0"}))
        """
        if self.expected is None:
            from placegroup.comm.expect import Expectations

            self.expected = Expectations()
        self.expected.update(table)
        held, self.held, self.held_bytes = self.held, {}, 0
        for (var, version, peer), value in held.items():
            self._file_value(peer, var, version, value)

    def _file_value(self, peer: str, var: str, version: int, value: Any) -> None:
        """NOTE(expect-early): expectations are the union of the plans registered so far, and a
        peer may already run a program this executor has not planned yet (it is still in the
        one before): a value no plan expects is held, up to HOLD_BYTES and HOLD_COUNT values,
        and filed when a plan that expects it comes (``expect``); past that it is dropped. A
        wrong dtype or shape for an expected var is dropped at once."""
        why = None if self.expected is None else self.expected.check(peer, var, value)
        if why is None:
            self.values[(var, version, peer)] = value
            return
        reason, detail = why
        nbytes = getattr(value, "nbytes", 0) or getattr(getattr(value, "values", None), "nbytes", 0)
        room = self.held_bytes + nbytes <= self.HOLD_BYTES and len(self.held) < self.HOLD_COUNT
        if reason == "unexpected" and room:
            self.held[(var, version, peer)] = value
            self.held_bytes += nbytes
            self._note(peer, "held", logging.INFO, f"held a value from {peer}: {detail} (yet; it is filed "
                                                   f"when a plan that expects it comes)")
            return
        self._drop(peer, reason, f"dropped a value from {peer}: {detail}")

    def _drop(self, peer: str, reason: str, text: str) -> None:
        """Count a dropped message (or value) under ``reason`` and log ``text``, rate-limited."""
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        self._note(peer, reason, logging.WARNING, text)

    def _note(self, peer: str, reason: str, level: int, text: str) -> None:
        """Log ``text`` unless a line for (peer, reason) went out less than LOG_EVERY s ago."""
        key = (peer, reason)
        if key not in self._drop_log and len(self._drop_log) >= self.LOG_KEYS:
            key = ("*", reason)  # a flood of random identities must not grow this without bound
        now = time.monotonic()
        last, since = self._drop_log.get(key, (None, 0))
        if last is not None and now - last < self.LOG_EVERY:
            self._drop_log[key] = (last, since + 1)
            return
        self._drop_log[key] = (now, 0)
        more = f" [{since} more like it ({reason}) in the last {now - last:.0f}s]" if since else ""
        log.log(level, "%s: %s%s", self.t.me, text[:400], more)

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

    def wait(self, keys: Sequence[tuple], timeout: float | None, describe) -> list:
        """The values for ``keys`` (``(var, version, source)``), draining sockets until all are
        there. A source that said ``done`` before that version is skipped (its slot is None);
        if every key's source is done, ``PeersDone``. The wait lasts while the sources are
        alive (NOTE(peer-lost)): ``PeerLost`` when one is gone or never came; after ``timeout``
        seconds (None: no limit), ``CommTimeout(describe(missing))``."""
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
            deadline = self._wait_more(missing, deadline, timeout, describe)

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
        deadline = None
        while True:
            found = [k for k in self.values if k[0] == var and k[2] == src and k[1] >= min_version]
            if found:
                best = max(found, key=lambda k: k[1])
                value = self.values.pop(best)
                for k in [k for k in self.values if k[0] == var and k[2] == src and k[1] < best[1]]:
                    del self.values[k]  # superseded
                return best[1], value
            deadline = self._wait_more([(var, min_version, src)], deadline, timeout, describe)

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
        (NOTE(each-batching) in executor/serving.py). ``CommTimeout`` as ``wait``."""
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
            deadline = self._wait_more(live, deadline, timeout, describe)

    def _wait_more(self, missing, deadline: float | None, timeout: float | None, describe) -> float:
        """One more round of a wait for ``missing`` (keys): the wait fails as every wait does
        (``CommTimeout`` past ``timeout``, ``PeerLost``), else the sockets are drained for up
        to a second. Returns the deadline (set on the first round)."""
        if deadline is None:
            deadline = _deadline(timeout)
        left = deadline - time.monotonic()
        if left <= 0:
            raise CommTimeout(_timed_out(describe(missing), timeout))
        self._check_lost(missing, describe)
        self.pump(int(min(left, 1.0) * 1000) + 1)
        return deadline

    def check_peers(self, peers: Sequence[str], what: str) -> None:
        """``PeerLost`` if one of ``peers`` (not done) is gone or never came (NOTE(peer-lost));
        ``what``: what this executor was waiting for, for the message."""
        self._check_lost([("", 0, p) for p in peers], lambda missing: what)

    def _check_lost(self, missing, describe) -> None:
        """NOTE(peer-lost): waiting is unbounded while the awaited peers are alive (a slow peer
        is no failure; libzmq's heartbeats keep an idle connection up). A source whose
        connection dropped (its process died, or it fell silent for the peer timeout) and did
        not come back within LOST_GRACE seconds, or that never connected within
        PLACEGROUP_START_TIMEOUT, will send nothing: fail now, naming it and what we wait for."""
        for k in missing:
            src = k[2]
            state, since = self.t.status(src)
            if state == "alive" or src in self.done:
                continue
            if state == "lost" and since > min(LOST_GRACE, self.t.peer_timeout):
                raise PeerLost(f"peer {self.describe_peer(src)} is gone: its connection dropped {since:.1f}s ago "
                               f"and did not come back (its process died, or it was silent for "
                               f"PLACEGROUP_PEER_TIMEOUT={self.t.peer_timeout:g}s); " + describe([k]))
            if state == "refused" and since > LOST_GRACE:  # libzmq retries: one refusal may be a race
                raise PeerLost(f"peer {self.describe_peer(src)} refused this executor's CURVE handshake "
                               f"{since:.1f}s ago: its server key or our client key is not the one it "
                               f"expects (PLACEGROUP_KEYS, docs/security.md); " + describe([k]))
            if state == "never" and since > self.start_timeout:
                raise PeerLost(f"peer {self.describe_peer(src)} never came: no connection in {since:.0f}s "
                               f"(PLACEGROUP_START_TIMEOUT={self.start_timeout:g}s; is it running?); "
                               + describe([k]))

    def _gone_before(self, key: tuple) -> bool:
        last = self.done.get(key[2])
        return last is not None and key[1] > last

    def close(self, linger_ms: int | None = None) -> None:
        self.t.close(linger_ms)


def _who(peer: str, quote: bool = False) -> str:
    """A peer's name for a log line: escaped unless printable (no forged lines), cut short."""
    peer = peer if len(peer) <= 40 else peer[:37] + "..."
    return repr(peer) if quote and peer.isprintable() else peer if peer.isprintable() else ascii(peer)


def _deadline(timeout: float | None) -> float:
    return time.monotonic() + timeout if timeout else float("inf")


def _timed_out(what: str, timeout: float | None) -> str:
    return f"{what}: nothing came in {timeout:g}s although the peer is connected (PLACEGROUP_WAIT_TIMEOUT)"
