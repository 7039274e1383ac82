"""The mailbox: values that arrived, by ``(var, version, source)``, and the ops that wait.

It sits on a ``Session`` (comm/session.py), which sits on a transport (comm/base.py). Its
whole surface is the data path, in the manner of ps-lite's ``Van``: a few calls, and no mode
(which version to wait for, when to answer, is the executor's version policy's):

==============  ==================================================================================
``post``        queue one value for a peer; it leaves at the next ``flush`` or wait
``flush``       send what waits, one ``values`` message per peer (all, some, or all but some)
``wait``        the values for ``(var, version, source)`` keys, draining the transport
``newest``      the newest value of a var from a source (waiting for one if asked)
``take_any``    the first of several keys to arrive (of any version, if asked)
``await_any``   wait until some source has any value of some var, or every source is done
``pending``     a source's oldest waiting value of a var; ``waiting_from``: who has one
``expect``      what may arrive (comm/expect.py); ``stats``: what the messages cost; ``close``
==============  ==================================================================================

The session below says ``hello``, records ``done``, tells whether a peer is alive, drops
strangers' and malformed messages, and sends the control messages (``ask``, ``say_done``,
``say_error``); the mailbox takes ``values`` (checked against the plans' expectations),
``fetch`` (to its ``on_fetch`` handler) and ``error``. Nothing it drops stops the executor.

Example::

    mb = Mailbox(open_transport("trainer:0", None, pservers, digest=d), lambda: step)
    mb.post(ps0, "w@GRAD", 3, grad)      # it leaves at the next flush or wait
    w, = mb.wait([("w", 3, ps0)], 60, describe)

Thread-safety: one mailbox per executor thread.
"""
from __future__ import annotations

import bisect
import logging
import sys
import time
from typing import Any, Callable, Sequence

from placegroup import config
from placegroup.comm.framing import pack
from placegroup.comm.session import Session
from placegroup.errors import CommTimeout, RemoteError

DEBUG = config.DEBUG  # >= 2: log every message
EAGER_BYTES = 256 * 1024  # NOTE(eager-flush)


class PeersDone(Exception):
    """Every source a wait depends on has said ``done``: a pserver stops serving."""


def _keys(missing) -> str:
    return f"waiting for {missing}"


class Mailbox:
    """The values one executor sends and receives, over ``transport``.

    Args:
        transport: a ``comm.base.FrameTransport`` (``comm.transport.open_transport``); the
            mailbox makes its ``Session``, which says ``hello`` at once.
        step_of: the executor's current step, for message headers.
        on_fetch: ``on_fetch(peer, [(var, version)])`` when a peer asks for values (None: a
            fetch is dropped).
        describe_peer, start_timeout: the session's (``Session.check``).
        supersede: vars of which a value posted for a peer replaces an older one still
            waiting to leave for it (receivers that read only the newest version,
            NOTE(reply-batching) in executor/policy.py).

    Attributes:
        session: the ``Session``: control messages and peer checks.
        done: the session's ``peer -> last step`` of the peers that said ``done``.
        dropped: reason -> how many messages or values were dropped (docs/protocol.md).
    """

    def __init__(self, transport, step_of: Callable[[], int] = lambda: 0, on_fetch: Callable | None = None,
                 describe_peer: Callable[[str], str] | None = None, start_timeout: float | None = None,
                 supersede: frozenset | set = frozenset()) -> None:
        self.session = Session(transport, describe_peer, start_timeout)
        self.me = transport.me
        self.values: dict[tuple, Any] = {}
        self._versions: dict[tuple, list] = {}  # (var, source) -> the versions in values, ascending
        self.done = self.session.done
        self.drops = self.session.drops
        self.dropped = self.drops.counts
        self.outbox: dict[str, list] = {}
        self.pending_bytes = 0
        self.supersede = frozenset(supersede)
        self.step_of = step_of
        self.on_fetch = on_fetch
        # NOTE(hostile-input): what arrives is checked against the plans' expectations
        self.expected = None            # comm.expect.Expectations once a plan is known; None: take all
        self.held: dict[tuple, Any] = {}  # values no plan expects yet (NOTE(expect-early))
        self.held_bytes = 0
        self._stats = MessageStats(transport)

    # -- sending -------------------------------------------------------------------------------
    def post(self, peer: str, var, version: int, value: Any) -> None:
        """Queue one value for ``peer``; it leaves at the next flush (or at once, past
        EAGER_BYTES).

        Args:
            peer: the receiver's wire name.
            var: the var's name, or ``(tag, part)`` for a part of a collective call.
            version: the version the receiver files it under (the producing step; -1: startup).
            value: a host numpy array or SelectedRows. Until the receiver has it, the caller
                must not change it (large arrays leave without a copy).
        """
        box = self.outbox.setdefault(peer, [])
        if var in self.supersede:  # NOTE(reply-batching): an older one still here is superseded
            for i, (v, ver, _) in enumerate(box):
                if v == var and ver < version:
                    del box[i]
                    break
        box.append((var, version, value))
        # NOTE(eager-flush): small values wait for the next flush so that a step's messages
        # to one peer travel together; a big one leaves now, so that libzmq's IO thread
        # sends it while this thread computes the next op (a gradient while backward goes on).
        self.pending_bytes += getattr(value, "nbytes", 0)
        if self.pending_bytes >= EAGER_BYTES:
            self.flush()

    def flush(self, peers=None, but=(), limit: int | None = None) -> None:
        """Send what waits in the outbox, one ``values`` message per peer: for every peer, or
        for ``peers``, or for every peer but those in ``but``; everything when at least
        ``limit`` values wait."""
        if not self.outbox:
            return
        step = self.step_of()
        if peers is None and (not but or (limit is not None and sum(map(len, self.outbox.values())) >= limit)):
            for peer, vals in self.outbox.items():
                self._out(peer, vals, step)
            self.outbox.clear()
            self.pending_bytes = 0
            return
        for peer in [p for p in self.outbox if p not in but] if peers is None else peers:
            vals = self.outbox.pop(peer, None)
            if vals:
                self._out(peer, vals, step)
        self.pending_bytes = sum(getattr(v[2], "nbytes", 0) for vs in self.outbox.values() for v in vs)

    def _out(self, peer: str, vals: list, step: int) -> None:
        if DEBUG >= 2:
            print(f"[{self.me}] -> {peer}: {[(v[0], v[1]) for v in vals]}", file=sys.stderr)
        st = self._stats
        if st.timed:
            t0 = time.thread_time()
            self.session.send(peer, pack("values", self.me, step, vals))
            st.send_s += time.thread_time() - t0
            st.sent_msgs += 1
        else:
            self.session.send(peer, pack("values", self.me, step, vals))

    def stats(self, timed: bool | None = None) -> "MessageStats":
        """What the messages cost (``MessageStats``); ``timed`` turns counting on or off
        (PLACEGROUP_PROFILE and ``fluid.profiler`` turn it on)."""
        if timed is not None:
            self._stats.timed = timed
        return self._stats

    # -- receiving -----------------------------------------------------------------------------
    def _file(self, peer: str, frames) -> None:
        """File one received message (NOTE(hostile-input)): whatever it is, this never raises
        but ``RemoteError`` for a well-formed ``error`` from a peer this executor talks to."""
        m = self.session.receive(peer, frames)
        if m is not None:
            self._take(peer, m)

    def _take(self, peer: str, m) -> None:
        """A ``values``, ``fetch`` or ``error`` message the session let through."""
        if m.kind == "values":
            for var, version, value in m.vals:
                self._file_value(peer, var, version, value)
        elif m.kind == "fetch":
            if self.on_fetch is None:
                self.drops.drop(peer, "fetch", f"dropped a fetch from {peer}: nothing here serves fetches")
            else:
                self.on_fetch(peer, [(var, version) for var, version, _ in m.vals])
        elif m.kind == "error":
            raise RemoteError(f"{peer} failed: {m.msg}")

    # NOTE(hostile-input): a message is dropped, with a log line, when its sender is not an
    # executor this one is linked to (any kind: a stranger's `done` must not end a pserver's
    # serving), when it is malformed (framing.unpack), when its header names another sender
    # than its connection (these three in the session), and a value when no plan receives that
    # var from that sender or its dtype or shape is not the declared one. Nothing dropped
    # reaches a kernel; the executor goes on. Log lines are rate-limited (comm/drops.py).
    # docs/protocol.md, "What is dropped".
    HOLD_BYTES, HOLD_COUNT = 256 << 20, 4096  # NOTE(expect-early)

    def expect(self, table) -> None:
        """Check what arrives against ``table`` (a ``comm.expect.Expectations``) from now on,
        together with the tables given before (one per plan): the session takes messages
        only from its senders. Values held because no plan expected them yet are filed again
        (NOTE(expect-early)).

        Example:
            >>> table = Expectations({"trainer:0"})  # the executor builds one per plan
            >>> table.allow("w@GRAD", "trainer:0", "float32", (13, 1))
            >>> mb.expect(table)
        """
        if self.expected is None:
            from placegroup.comm.expect import Expectations

            self.expected = Expectations()
        self.expected.update(table)
        self.session.admit(self.expected.senders)
        held, self.held, self.held_bytes = self.held, {}, 0
        for (var, version, peer), value in held.items():
            self._file_value(peer, var, version, value)

    def _file_value(self, peer: str, var, version: int, value: Any) -> None:
        """NOTE(expect-early): expectations are the union of the plans registered so far, and a
        peer may already run a program this executor has not planned yet (it is still in the
        one before): a value no plan expects is held, up to HOLD_BYTES and HOLD_COUNT values,
        and filed when a plan that expects it comes (``expect``); past that it is dropped. A
        wrong dtype or shape for an expected var is dropped at once."""
        why = None if self.expected is None else self.expected.check(peer, var, value)
        if why is None:
            self._put((var, version, peer), value)
            return
        reason, detail = why
        inner = getattr(value, "values", None) if hasattr(value, "height") else getattr(value, "data", None)
        nbytes = getattr(value, "nbytes", 0) or getattr(inner, "nbytes", 0)  # SelectedRows, LoDTensor
        room = self.held_bytes + nbytes <= self.HOLD_BYTES and len(self.held) < self.HOLD_COUNT
        if reason == "unexpected" and room:
            self.held[(var, version, peer)] = value
            self.held_bytes += nbytes
            self.drops.note(peer, "held", logging.INFO, f"held a value from {peer}: {detail} (yet; it is "
                                                         f"filed when a plan that expects it comes)")
            return
        self.drops.drop(peer, reason, f"dropped a value from {peer}: {detail}")

    def _put(self, key: tuple, value: Any) -> None:
        """File ``value`` under ``(var, version, source)``, indexed by (var, source)."""
        if key not in self.values:
            versions = self._versions.setdefault((key[0], key[2]), [])
            if versions and versions[-1] > key[1]:
                bisect.insort(versions, key[1])
            else:
                versions.append(key[1])
        self.values[key] = value

    def _pop(self, key: tuple) -> Any:
        """Take the value filed under ``key`` (None if there is none)."""
        if key not in self.values:
            return None
        versions = self._versions[(key[0], key[2])]
        versions.remove(key[1])
        if not versions:
            del self._versions[(key[0], key[2])]
        return self.values.pop(key)

    def _pump(self, timeout_ms: int) -> int:
        """Take what arrives within ``timeout_ms``; returns how many messages came."""
        st = self._stats
        t0 = time.thread_time() if st.timed else 0.0  # CPU time: blocking in poll costs none
        got = self.session.poll(timeout_ms)
        for peer, m in got:
            self._take(peer, m)
        if got and st.timed:
            st.received_msgs += len(got)
            st.receive_s += time.thread_time() - t0
        return len(got)

    def wait(self, keys, timeout: float | None = None, describe: Callable = _keys) -> list:
        """The values for ``keys`` (``(var, version, source)``), draining the transport until
        all are there.

        A source that said ``done`` before that version is skipped (its slot is None); if
        every key's source is done, ``PeersDone``. The wait lasts while the sources are alive
        (NOTE(peer-lost)): ``PeerLost`` when one is gone or never came; after ``timeout``
        seconds (None: no limit), ``CommTimeout(describe(missing))``.

        Example:
            >>> w, b = mb.wait([("w", 3, ps0), ("b", 3, ps1)], 60, lambda missing: f"op #4 {missing}")
        """
        self.flush()
        values = self.values
        deadline = None
        while True:
            missing = [k for k in keys if k not in values and not self._gone_before(k)]
            if not missing:
                out = [self._pop(k) for k in keys]
                if all(v is None for v in out) and keys:
                    raise PeersDone()
                return out
            deadline = self._wait_more(missing, deadline, timeout, describe)

    def newest(self, var: str, src: str, min_version: int, wait: bool = False, timeout: float | None = None,
               describe: Callable = _keys):
        """``(version, value)`` of the newest value of ``var`` from ``src`` of at least
        ``min_version`` that has arrived (older ones are dropped: superseded), or None. With
        ``wait``, waits for one if none has come (``CommTimeout`` and ``PeerLost`` as ``wait``)."""
        if not wait:
            self._pump(0)
            return self._newest(var, src, min_version)
        self.flush()
        deadline = None
        while (hit := self._newest(var, src, min_version)) is None:
            deadline = self._wait_more([(var, min_version, src)], deadline, timeout, describe)
        return hit

    def _newest(self, var: str, src: str, min_version: int):
        versions = self._versions.get((var, src))
        if not versions or versions[-1] < min_version:
            return None
        best = versions[-1]
        for v in versions[:-1]:  # superseded
            self._pop((var, v, src))
        return best, self._pop((var, best, src))

    def pending(self, var: str, src: str):
        """The key of ``src``'s oldest waiting value of ``var``, any version, or None."""
        versions = self._versions.get((var, src))
        return (var, versions[0], src) if versions else None

    def waiting_from(self, vars_: set) -> set:
        """The sources with a value of one of ``vars_`` waiting here."""
        return {src for var, src in self._versions if var in vars_}

    def take_any(self, keys: Sequence[tuple], timeout: float | None, describe, any_version: bool = False,
                 hold: float = 0.0) -> tuple:
        """``(key, value)`` of the first of ``keys`` to arrive (value None: its source is done,
        ``PeersDone`` when every one is). With ``any_version`` a key's version is ignored and
        each source's oldest value comes first. ``hold`` seconds: first wait that long without
        flushing, so values for a source still to be answered can travel with its answer
        (NOTE(each-batching) in the executor). ``CommTimeout`` as ``wait``."""
        held_until = time.monotonic() + hold if hold else None
        deadline = None
        while True:
            for k in keys:
                hit = self.pending(k[0], k[2]) if any_version else (k if k in self.values else None)
                if hit is not None:
                    return hit, self._pop(hit)
            if held_until is None:
                self.flush()
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
                    self._pump(1)
                    continue
                held_until = None
                self.flush()
            deadline = self._wait_more(live, deadline, timeout, describe)

    def await_any(self, pairs: Sequence[tuple], what: str) -> bool:
        """Wait, with no time limit but while the sources are alive (NOTE(peer-lost)), until a
        value of any version of one of ``pairs`` (``(var, source)``) is here: True; False once
        every source has said done instead. ``what``: what is waited for, for ``PeerLost``."""
        sources = sorted({src for _, src in pairs})
        deadline = None
        while not any(self._versions.get(p) for p in pairs):
            if all(src in self.done for src in sources):
                return False
            self.flush()
            deadline = self._wait_more([("", 0, src) for src in sources if src not in self.done],
                                       deadline, None, lambda missing: what)
        return True

    def _wait_more(self, missing, deadline: float | None, timeout: float | None, describe) -> float:
        """One more round of a wait for ``missing`` (keys): the wait fails as every wait does
        (``CommTimeout`` past ``timeout``, ``PeerLost``), else the transport is drained for up
        to a second. Returns the deadline (set on the first round)."""
        if deadline is None:
            deadline = _deadline(timeout)
        left = deadline - time.monotonic()
        if left <= 0:
            raise CommTimeout(_timed_out(describe(missing), timeout))
        self.session.check(missing, describe)
        self._pump(int(min(left, 1.0) * 1000) + 1)
        return deadline

    def _gone_before(self, key: tuple) -> bool:
        last = self.done.get(key[2])
        return last is not None and key[1] > last

    def close(self, linger_ms: int | None = None) -> None:
        """Close the session and its transport; queued messages get ``linger_ms`` to leave."""
        self.session.close(linger_ms)


def _deadline(timeout: float | None) -> float:
    return time.monotonic() + timeout if timeout else float("inf")


def _timed_out(what: str, timeout: float | None) -> str:
    return f"{what}: nothing came in {timeout:g}s although the peer is connected (PLACEGROUP_WAIT_TIMEOUT)"


class MessageStats:
    """What one mailbox's messages cost, counted while ``timed``: values messages sent and this
    thread's CPU seconds to pack and send them, messages received and its CPU seconds to
    receive, check and file them; and the transport's bytes and idle time."""

    def __init__(self, transport) -> None:
        self.timed = False
        self.sent_msgs, self.send_s, self.received_msgs, self.receive_s = 0, 0.0, 0, 0.0
        self._t = transport

    bytes_sent = property(lambda self: self._t.bytes_sent)
    bytes_received = property(lambda self: self._t.bytes_received)
    idle_s = property(lambda self: self._t.idle_s)
