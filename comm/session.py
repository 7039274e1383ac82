"""The session: the life of each peer, between a transport and the mailbox.

It owns everything about *who* is there (docs/protocol.md, "Message kinds" and "What is
dropped"): it says ``hello`` (with the program digest) first on every connection its transport
dials and answers a ``hello`` with another digest with an ``error``; it records ``done``
(``done``: peer -> its last step) and sends nothing more to a peer that said it; it follows
the transport's connection events to tell each peer's status (``alive``, ``lost``,
``refused``, ``never``) and raises ``PeerLost`` for a peer that will send nothing more; and it
drops what a stranger sends, what ``unpack`` refuses and what claims another sender. The
mailbox above sees only ``values``, ``fetch`` and ``error`` messages.

NOTE(session-cost): on the way in, a message costs ``unpack`` (which the mailbox would call
anyway) and a few comparisons; no thread, no copy. Connection events come from inside the
transport's ``poll``, on the caller's thread, so the status needs no lock.

Example::

    s = Session(open_transport("trainer:0", None, pservers, digest=d, peer_timeout=30))
    s.send("pserver@127.0.0.1:7164", pack("values", "trainer:0", 0, [("w@GRAD", 0, g)]))
    for peer, m in s.poll(100):   # values, fetch and error messages
        ...
    s.say_done(["pserver@127.0.0.1:7164"], step=9)
    s.close()

Thread-safety: a session belongs to the executor thread that polls it.
"""
from __future__ import annotations

import logging
import sys
import time
from typing import Callable, Sequence

from placegroup import config
from placegroup.comm.base import CONNECTED, LOST, REFUSED
from placegroup.comm.drops import DropLog, who
from placegroup.comm.framing import FrameError, Message, pack, pack_fetch, unpack
from placegroup.errors import PeerLost

DEBUG = config.DEBUG  # >= 2: log every message
log = logging.getLogger("placegroup.comm")
LOST_GRACE = config.get("PLACEGROUP_LOST_GRACE")  # NOTE(peer-lost)


class Session:
    """The peer lifecycle of one executor over ``transport``.

    Args:
        transport: a ``comm.base.FrameTransport``; the session takes its ``on_event`` and
            says ``hello`` at once to every peer it dials.
        describe_peer: ``describe_peer(name) -> str`` for error messages (role, endpoint).
        start_timeout: seconds a peer may take to connect before it ``never`` came (default
            PLACEGROUP_START_TIMEOUT).

    Attributes:
        done: peer -> the last step it ran, for each peer that said ``done``.
        senders: the names that may send anything (None: every name; ``admit`` sets it).
        notice_every: seconds between two log lines while a wait is for a peer that has not
            connected yet (0: none): a newcomer sees who is missing instead of silence.
        drops: the ``DropLog`` shared with the mailbox.
    """

    def __init__(self, transport, describe_peer: Callable[[str], str] | None = None,
                 start_timeout: float | None = None) -> None:
        self.t = transport
        self.me = transport.me
        self.done: dict[str, int] = {}
        self.senders: set[str] | None = None
        self.start_timeout = start_timeout if start_timeout is not None else config.get("PLACEGROUP_START_TIMEOUT")
        self.notice_every = config.get("PLACEGROUP_WAIT_NOTICE_EVERY")
        self._notice_at = self.notice_every or float("inf")  # seconds since start of the next one
        self.describe_peer: Callable[[str], str] = describe_peer or (lambda peer: peer)
        self.drops = DropLog(self.me)
        self.came: set[str] = set()        # peers we have had a connection with
        self.lost: dict[str, float] = {}   # peer -> when its connection dropped (NOTE(peer-lost))
        self.refused: dict[str, float] = {}  # peer -> when it refused our CURVE handshake
        self.started = time.monotonic()
        transport.on_event = self._event
        hello = pack("hello", self.me, -1, digest=transport.digest)
        for peer in transport.dials:  # the first message on each connection
            transport.send(peer, hello)

    # -- out -------------------------------------------------------------------------------------
    def send(self, peer: str, frames: Sequence) -> None:
        """Hand one message to the transport, unless ``peer`` said ``done`` (it reads no more)."""
        if peer not in self.done:
            self.t.send(peer, frames)

    def say_done(self, peers: Sequence[str], step: int) -> None:
        """Tell each of ``peers`` that this executor ran its last step, ``step``."""
        frames = pack("done", self.me, step)
        for peer in peers:
            self.send(peer, frames)

    def say_error(self, peers: Sequence[str], step: int, msg: str) -> None:
        """Tell each of ``peers`` that this executor failed at ``step``, and why."""
        frames = pack("error", self.me, step, msg=msg)
        for peer in peers:
            self.send(peer, frames)

    def ask(self, peer: str, step: int, wanted: Sequence[tuple]) -> None:
        """Ask ``peer`` for ``[(var, version)]`` (a ``fetch``); the answer comes as values."""
        self.send(peer, pack_fetch(self.me, step, wanted))

    def close(self, linger_ms: int | None = None) -> None:
        """Close the transport; queued messages get ``linger_ms`` to leave."""
        self.t.close(linger_ms)

    # -- in --------------------------------------------------------------------------------------
    def admit(self, senders: set[str]) -> None:
        """From now on take messages only from ``senders`` (the set is shared, not copied)."""
        self.senders = senders

    def poll(self, timeout_ms: int) -> list[tuple[str, Message]]:
        """The ``values``, ``fetch`` and ``error`` messages that arrived within ``timeout_ms``,
        as ``[(peer, Message)]``; everything else is handled or dropped here."""
        out = []
        for peer, frames in self.t.poll(timeout_ms):
            m = self.receive(peer, frames)
            if m is not None:
                out.append((peer, m))
        return out

    def receive(self, peer: str, frames) -> Message | None:
        """One message from ``peer``: a ``Message`` for the mailbox, or None when it was a
        ``hello`` or ``done`` (handled) or was dropped (NOTE(hostile-input)). Never raises."""
        if self.senders is not None and peer not in self.senders:  # before parsing a stranger's bytes
            self.drops.drop("", "stranger", f"dropped {len(frames)} frame(s) from {who(peer, True)}: not an "
                                            f"executor this one is linked to")
            return None
        try:
            m = unpack(frames)
        except FrameError as e:
            self.drops.drop(peer, "malformed", f"dropped a message from {who(peer)}: {e}")
            return None
        if DEBUG >= 2:
            print(f"[{self.me}] <- {peer}: {m.kind} {[(v[0], v[1]) for v in m.vals]}", file=sys.stderr)
        if m.src != peer:
            self.drops.drop(peer, "spoofed", f"dropped a {m.kind} from {who(peer)} claiming to be {m.src[:80]!r}")
            return None
        if m.kind == "hello":
            if m.digest != self.t.digest:
                self.drops.note(peer, "digest", logging.WARNING, f"{peer} runs another program (digest "
                                                                 f"{m.digest[:40]!r}, ours {self.t.digest})")
                self.send(peer, pack("error", self.me, -1, msg=(
                    f"{self.me} runs another program than {peer}: transpile the same model with "
                    f"the same arguments in every process")))
            return None
        if m.kind == "done":
            self.done[peer] = m.step
            return None
        return m

    # -- status ----------------------------------------------------------------------------------
    def _event(self, peer: str, event: str) -> None:
        if event == CONNECTED:  # the peer is there (again)
            self.came.add(peer)
            self.lost.pop(peer, None)
            self.refused.pop(peer, None)
        elif event == LOST:
            self.lost.setdefault(peer, time.monotonic())
        elif event == REFUSED:
            self.refused.setdefault(peer, time.monotonic())

    def status(self, peer: str) -> tuple[str, float]:
        """``("alive", 0)``, ``("lost", seconds since its connection dropped)``,
        ``("refused", seconds since it refused our handshake)`` (docs/security.md) or
        ``("never", seconds since this session started)`` for a peer that never connected."""
        now = time.monotonic()
        if peer in self.refused:
            return "refused", now - self.refused[peer]
        if peer in self.lost:
            return "lost", now - self.lost[peer]
        if peer not in self.came:
            return "never", now - self.started
        return "alive", 0.0

    def check(self, keys: Sequence[tuple], describe: Callable) -> None:
        """NOTE(peer-lost): waiting is unbounded while the awaited peers are alive (a slow peer
        is no failure; the transport's heartbeats keep an idle connection up). A source whose
        connection dropped (its process died, or it fell silent for the peer timeout) and did
        not come back within LOST_GRACE seconds, or that never connected within
        ``start_timeout``, will send nothing: fail now, naming it and what we wait for.

        Args:
            keys: ``(var, version, source)`` of what is awaited; a source that said ``done``
                is no failure (the waiter decides what its absence means).
            describe: ``describe([key]) -> str``: what was being waited for.
        Raises:
            PeerLost: naming the peer (``describe_peer``), why, and ``describe([key])``.
        """
        peer_timeout = self.t.peer_timeout
        for k in keys:
            src = k[2]
            state, since = self.status(src)
            if state == "alive" or src in self.done:
                continue
            if state == "lost" and since > min(LOST_GRACE, peer_timeout):
                raise PeerLost(f"peer {self.describe_peer(src)} is gone: its connection dropped {since:.1f}s ago "
                               f"and did not come back (its process died, or it was silent for "
                               f"PLACEGROUP_PEER_TIMEOUT={peer_timeout:g}s); " + describe([k]))
            if state == "refused" and since > LOST_GRACE:  # libzmq retries: one refusal may be a race
                raise PeerLost(f"peer {self.describe_peer(src)} refused this executor's CURVE handshake "
                               f"{since:.1f}s ago: its server key or our client key is not the one it "
                               f"expects (PLACEGROUP_KEYS, docs/security.md); " + describe([k]))
            if state == "never":
                if since > self.start_timeout:
                    raise PeerLost(f"peer {self.describe_peer(src)} never came: no connection in {since:.0f}s "
                                   f"(PLACEGROUP_START_TIMEOUT={self.start_timeout:g}s; is it running?); "
                                   + describe([k]))
                if since >= self._notice_at:
                    self._notice_never(keys, since)

    def _notice_never(self, keys: Sequence[tuple], since: float) -> None:
        """One log line naming the sources of ``keys`` that have not connected yet and the time
        left before ``start_timeout``. Only a wait that already found a peer missing gets here
        (``check`` runs between the polls of a wait), so a running job pays nothing."""
        self._notice_at = since + self.notice_every
        peers = sorted({k[2] for k in keys if k[2] not in self.done and self.status(k[2])[0] == "never"})
        log.warning("%s: still waiting for %s, not connected in %.0fs; giving up in %.0fs "
                    "(PLACEGROUP_START_TIMEOUT=%gs)", self.me, ", ".join(map(self.describe_peer, peers)),
                    since, max(self.start_timeout - since, 0), self.start_timeout)
