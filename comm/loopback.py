"""The loopback transport: several executors in one process, each on its own thread.

``LoopbackNetwork`` stands in for the sockets between executors: ``net.transport(me, bind,
connect, digest=...)`` returns a ``comm.base.FrameTransport`` that moves real framed messages
(``framing.pack``'s frames) to the other transports of the same network, so the session,
mailbox and collectives above run exactly as over ZeroMQ and tests need no ports or processes.

NOTE(loopback-promises): where the layers above can see it, it behaves as the ZeroMQ transport:
  - two executors are connected when one dials the other (``connect``), as a DEALER and a
    ROUTER are; a message between executors that are not is dropped, as it never arrives there;
  - a message to a peer that has not started yet waits for it (a DEALER's queue, a ROUTER's
    pending list) and arrives, in order, when it starts; one to a peer that closed is dropped;
  - frames are copied on ``send`` (into writable buffers, as received ZeroMQ frames are), so a
    sender changing its array later cannot change what the receiver got;
  - when both ends of a connection run, each gets ``CONNECTED``; when one closes, the other
    gets ``LOST`` (whether it said ``done`` before is the session's business, as when a
    process exits); a peer that never starts raises no event: the session says ``never``;
  - ``poll`` blocks on a condition variable until a message or event comes, or the timeout.
It has no heartbeats (a thread cannot stop as a process can), no CURVE and no size limit.

Example::

    net = LoopbackNetwork()
    ps = net.transport("pserver@127.0.0.1:1", "127.0.0.1:1", {}, digest="d")
    tr = net.transport("trainer:0", None, {"pserver@127.0.0.1:1": "127.0.0.1:1"}, digest="d")
    tr.send("pserver@127.0.0.1:1", frames)
    ps.poll(1000)  # -> [("trainer:0", frames)]

Thread-safety: a network may be shared by any threads; each transport is polled by the one
thread that owns it. Deliveries happen under the network's lock.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Sequence

from placegroup.comm.base import CONNECTED, LOST


class LoopbackNetwork:
    """The executors of one process, by name; make their transports with ``transport``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.nodes: dict[str, LoopbackTransport] = {}  # running transports by name
        self.waiting: dict[str, list] = {}  # a name not started yet -> [(sender, frames)]
        self.ended: set[str] = set()        # names that closed (messages to them are dropped)

    def transport(self, me: str, bind: str | None, connect: dict[str, str], *, digest: str,
                  peer_timeout: float = 60.0, **ignored) -> "LoopbackTransport":
        """Start executor ``me``'s transport (the arguments of ``ZmqTransport``; ``max_message``
        and ``security`` are ignored).

        Raises:
            ValueError: a transport named ``me`` runs on this network already.
        """
        t = LoopbackTransport(self, me, bind, connect, digest, peer_timeout)
        with self.lock:
            if me in self.nodes:
                raise ValueError(f"{me!r} already runs on this LoopbackNetwork")
            self.nodes[me] = t
            self.ended.discard(me)
            for name, other in self.nodes.items():
                if other is not t and _linked(t, other):
                    other._put(me, None, CONNECTED)
                    t._put(name, None, CONNECTED)
            for src, frames in self.waiting.pop(me, []):
                if _linked(self.nodes[src], t):
                    t._put(src, frames, None)
        return t

    def _deliver(self, src: "LoopbackTransport", peer: str, frames: list) -> None:
        with self.lock:
            if src.closed or peer in self.ended:
                return
            dst = self.nodes.get(peer)
            if dst is None:
                self.waiting.setdefault(peer, []).append((src.me, frames))
            elif _linked(src, dst):
                dst._put(src.me, frames, None)

    def _leave(self, t: "LoopbackTransport") -> None:
        with self.lock:
            if t.closed:
                return
            t.closed = True
            del self.nodes[t.me]
            self.ended.add(t.me)
            for other in self.nodes.values():
                if _linked(t, other):
                    other._put(t.me, None, LOST)
            for name, msgs in self.waiting.items():  # what it sent a peer not started yet is lost
                self.waiting[name] = [m for m in msgs if m[0] != t.me]
            t.cond.notify_all()


def _linked(a: "LoopbackTransport", b: "LoopbackTransport") -> bool:
    return b.me in a.dials or a.me in b.dials


class LoopbackTransport:
    """One executor's end of a ``LoopbackNetwork`` (a ``comm.base.FrameTransport``)."""

    def __init__(self, net: LoopbackNetwork, me: str, bind: str | None, connect: dict[str, str],
                 digest: str, peer_timeout: float) -> None:
        self.net = net
        self.me = me
        self.digest = digest
        self.peer_timeout = peer_timeout
        self.dials = tuple(connect)
        self.members: set[str] | None = None  # whose connection events are reported (None: all)
        self.on_event = None
        self.address: dict[str, str] = {}
        self.closed = False
        self.cond = threading.Condition(net.lock)
        self.inbox: deque = deque()  # (peer, frames, None) or (peer, None, event)
        self.bytes_sent = 0
        self.bytes_received = 0
        self.idle_s = 0.0  # seconds blocked in poll with nothing to read

    def _put(self, peer: str, frames: list | None, event: str | None) -> None:
        """Called with the network's lock held."""
        self.inbox.append((peer, frames, event))
        self.cond.notify()

    def send(self, peer: str, frames: Sequence) -> None:
        """Copy ``frames`` and deliver them to ``peer`` (or keep them until it starts)."""
        copied = [bytes(frames[0])] + [bytearray(f) for f in frames[1:]]
        self.bytes_sent += sum(map(len, copied))
        self.net._deliver(self, peer, copied)

    def poll(self, timeout_ms: int) -> list[tuple[str, list]]:
        """What arrived, waiting up to ``timeout_ms`` for the first message or event."""
        with self.cond:
            if not self.inbox and timeout_ms > 0 and not self.closed:
                t0 = time.perf_counter()
                self.cond.wait(timeout_ms / 1000)
                self.idle_s += time.perf_counter() - t0
            items, self.inbox = self.inbox, deque()
        out = []
        for peer, frames, event in items:
            if event is None:
                self.bytes_received += sum(map(len, frames))
                out.append((peer, frames))
            elif self.on_event is not None and (self.members is None or peer in self.members):
                self.on_event(peer, event)
        return out

    def close(self, linger_ms: int | None = None) -> None:
        """Leave the network: linked peers get ``LOST``; messages already delivered stay
        delivered. Idempotent."""
        self.net._leave(self)
