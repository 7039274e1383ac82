"""The transport interface: what every transport offers the layers above it.

The layers of comm, each wrapping the one below (docs/protocol.md):

    transport   moves frame lists between named peers, reports connection events
                (comm/transport.py: ZeroMQ over TCP; comm/loopback.py: in one process)
    session     the peer lifecycle: hello and its digest check, done, the status of each
                peer, strangers and spoofed or malformed messages (comm/session.py)
    mailbox     values, fetches and errors, and the waits for them (comm/mailbox.py)
    collectives allreduce, allgather, reducescatter over a mailbox (comm/collectives.py)

A transport knows nothing of vars, versions or message kinds: it takes and gives frame lists.
``open_transport`` (comm/transport.py) picks one, so an executor runs unchanged over sockets or
over a ``LoopbackNetwork``.

Example (the session above does this; the frames are ``framing.pack``'s)::

    t = open_transport("trainer:0", None, {"pserver@127.0.0.1:7164": "127.0.0.1:7164"},
                       digest="ab12", peer_timeout=30.0)
    t.on_event = lambda peer, event: print(peer, event)
    t.send("pserver@127.0.0.1:7164", frames)
    for peer, frames in t.poll(100):
        ...
    t.close()
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence, runtime_checkable

CONNECTED, LOST, REFUSED = "connected", "lost", "refused"  # connection events


@runtime_checkable
class FrameTransport(Protocol):
    """The sockets (or their stand-in) of one executor.

    Attributes:
        me: this executor's name on the wire (``trainer:0``, ``pserver@ip:port``).
        digest: the program digest; the transport only keeps it for the session's ``hello``.
        peer_timeout: seconds of silence after which a connection counts as dropped.
        dials: the peers this transport connects to (the session says ``hello`` to each first).
        members: the names whose connections are worth tracking (None: every name); a
            stranger's connection raises no event. The executor sets it after opening.
        on_event: called as ``on_event(peer, event)`` from inside ``poll``, on the owner's
            thread, when a connection comes (``CONNECTED``, also after a reconnect), drops
            (``LOST``: the peer's process died, closed, or was silent past ``peer_timeout``)
            or is refused (``REFUSED``: the peer refused our CURVE key). None: not reported.
        bytes_sent, bytes_received: payload bytes handed over and taken in so far.
        idle_s: seconds spent blocked in ``poll`` with nothing to read (``PLACEGROUP_PROFILE``).

    Thread-safety: a transport belongs to the thread that polls it; only a loopback
    transport's deliveries cross threads, inside the network's lock.
    """

    me: str
    digest: str
    peer_timeout: float
    dials: tuple
    members: set | None
    on_event: Callable[[str, str], None] | None
    bytes_sent: int
    bytes_received: int
    idle_s: float

    def send(self, peer: str, frames: Sequence) -> None:
        """Queue one message (``frames``: header first) for ``peer``; never blocks.

        A message to a peer that is not connected yet waits for it (a DEALER's queue, a
        ROUTER's pending list, the loopback network's waiting list); one to a peer whose
        connection is gone for good is dropped.

        Args:
            peer: the receiver's wire name.
            frames: buffers (bytes, numpy arrays); the caller must not change an array until
                the receiver has it (the ZeroMQ transport sends large ones without a copy).
        """

    def poll(self, timeout_ms: int) -> list:
        """Messages that arrived, waiting up to ``timeout_ms`` (0: not at all) for the first.

        Returns:
            ``[(peer, frames)]``, possibly empty (a wake-up for a connection event alone, or
            the timeout). ``peer`` is the connection's name, not the header's claim.
        """

    def close(self, linger_ms: int | None = None) -> None:
        """Give what is queued ``linger_ms`` to leave (None: the transport's default), then
        release everything. Idempotent."""
