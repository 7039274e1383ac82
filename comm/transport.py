"""The ZeroMQ transport: one ROUTER to be reached on, one DEALER per peer we reach; and
``open_transport``, which picks it or the loopback one.

It moves frame lists between named executors (docs/protocol.md, "Sockets" and "Names") and
reports connection events (comm/base.py, ``FrameTransport``); it knows nothing of vars,
versions or message kinds. ``send(peer, frames)`` never blocks on the network (libzmq's own IO
thread writes); ``poll(timeout)`` returns what arrived.

NOTE(no-io-thread): there is no Python IO thread. The op that waits for a value drains the
sockets itself (``Mailbox.wait`` -> ``Session.poll`` -> ``poll``), so a message costs one
wake-up on its way to the op (libzmq's IO thread -> the waiting thread), not two (the other
option, a background IO thread, costs one more per message). Heartbeats need no Python thread
either: libzmq's IO thread sends and answers them (NOTE(heartbeats)).

Thread-safety: a transport belongs to the executor thread that made it.
"""
from __future__ import annotations

import ipaddress
import logging
import socket
import time
from typing import Sequence

import zmq

from placegroup.comm.base import CONNECTED, LOST, REFUSED
from placegroup.comm.loopback import LoopbackNetwork
from placegroup.util.ports import cannot_bind

log = logging.getLogger("placegroup.comm")

ZERO_COPY_BYTES = 64 * 1024  # NOTE(zero-copy)
TCP_RTO_MAX_MS = 44  # Linux >= 6.15: the longest wait between two resends of one TCP segment


def cap_resend_wait(fd: int, peer_timeout: float) -> bool:
    """NOTE(resend-cap): a link cut for ``c`` seconds heals only if traffic flows again before
    ``peer_timeout`` of silence, when libzmq's heartbeats drop the connection. TCP resends a
    lost segment after 0.2, 0.6, 1.4, 3, 6.2, ... s (doubling up to 120 s), so after a cut of 4 s
    the next resend may come at 6.2 s: with the default backoff only cuts shorter than about
    half the timeout heal. Capping the wait between resends at a sixth of the timeout lets any
    cut shorter than about 5/6 of it heal (the kernel, counting its 15 resends at that pace,
    still gives up on a connection only well after the timeout). Set on each TCP connection's
    file descriptor, which libzmq reports; returns False where the kernel has no such option
    (before 6.15) or ``fd`` is gone, and then TCP's own backoff applies."""
    ms = int(min(max(peer_timeout / 6, 0.2), 120.0) * 1000)
    try:
        s = socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM)  # a duplicate: closing it leaves fd
    except OSError:
        return False
    try:
        s.setsockopt(socket.IPPROTO_TCP, TCP_RTO_MAX_MS, ms)
        return True
    except OSError:
        return False
    finally:
        s.close()
LINGER_MS = 2000  # a closed socket gives its last messages this long, then drops them


# NOTE(direct-send): the hot path calls pyzmq's compiled send and recv with plain int flags.
# pyzmq's pure-Python send_multipart type-checks every frame, ORs enum flags per frame and
# goes through a Python send; recv_multipart asks RCVMORE, which makes an enum of the option
# each call. Without them a round trip of two small messages in one thread went from 103 to
# 85 us of CPU (raw pyzmq: 79), and through the mailbox from 194 to 169.
_SEND_FRAME = zmq.backend.Socket.send
_SNDMORE, _NOBLOCK = int(zmq.SNDMORE), int(zmq.NOBLOCK)
_EVENTS, _POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)


def _send(sock, frames: Sequence, sizes: Sequence[int]) -> None:
    """Send one message of ``frames``: a frame of ZERO_COPY_BYTES or more without a copy, the
    rest copied.

    NOTE(zero-copy): pyzmq hands a zero-copy frame's buffer back through its garbage-collector
    thread, a wake-up per frame; below 64 KiB copying costs less CPU, above it the copy costs
    more (128 KiB: 58 us copied, 14 us zero-copy, on the 2-core machine the benchmarks run on).
    A frame sent zero-copy is read after ``send`` returns, so its buffer must not change: the
    executor never writes a value in place that another executor receives (NOTE(sparse-copy) in
    ops/optimizer.py), and collectives copy what they hand on (NOTE(zero-copy-sends) in
    comm/collectives.py)."""
    last = len(frames) - 1
    for i, f in enumerate(frames):
        _SEND_FRAME(sock, f, _SNDMORE if i < last else 0, copy=sizes[i] < ZERO_COPY_BYTES, track=False)


def _recv(sock) -> list:
    """The frames of one message waiting on ``sock`` (``zmq.Again`` if none), uncopied."""
    f = sock.recv(_NOBLOCK, copy=False)
    frames = [f]
    while f.more:  # the frame says so; getsockopt(RCVMORE) makes an enum of its option each call
        f = sock.recv(_NOBLOCK, copy=False)
        frames.append(f)
    return frames


def bind_address(endpoint: str) -> str:
    """Where to bind for ``endpoint``: its IP, or every interface when it is a host name
    (a Kubernetes service name, a Slurm node name), which ZeroMQ cannot bind by name."""
    host, port = endpoint.rsplit(":", 1)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return "127.0.0.1:" + port if host == "localhost" else "*:" + port
    return endpoint


def open_transport(me: str, bind: str | None, connect: dict[str, str], *, digest: str,
                   max_message: int = -1, peer_timeout: float = 60.0, security=None, network=None):
    """The transport of executor ``me``: over ``network`` when it is a ``LoopbackNetwork``
    (several executors in one process), else ZeroMQ over TCP.

    Args:
        me, bind, connect, digest, max_message, security, peer_timeout: as ``ZmqTransport``
            (the loopback transport ignores ``max_message`` and ``security``).
        network: a ``comm.loopback.LoopbackNetwork``, or None.
    Returns:
        A ``comm.base.FrameTransport``.
    Raises:
        TypeError: ``network`` is neither None nor a ``LoopbackNetwork``.
        BindError: the endpoint cannot be bound (in use, not an address of this host).

    Example:
        >>> net = LoopbackNetwork()
        >>> t = open_transport("trainer:0", None, {}, digest="d", network=net)
        >>> t.close()
    """
    if isinstance(network, LoopbackNetwork):
        return network.transport(me, bind, connect, digest=digest, peer_timeout=peer_timeout)
    if network is not None:
        raise TypeError(f"open_transport: network must be a LoopbackNetwork or None, not {type(network).__name__}")
    return ZmqTransport(me, bind, connect, digest, max_message=max_message, security=security,
                        peer_timeout=peer_timeout)


class ZmqTransport:
    """Sockets of one executor (a ``comm.base.FrameTransport``).

    Args:
        me: this executor's name on the wire (``trainer:0``, ``pserver@ip:port``).
        bind: the ``ip:port`` to bind a ROUTER on, or None (a trainer that only connects).
        connect: peer name -> ``ip:port`` for each peer this executor connects to.
        digest: the program digest, kept for the session's ``hello``.
        max_message: the largest message a socket accepts, in bytes (ZMQ_MAXMSGSIZE).
        security: sets up CURVE on each socket (``comm/security.py``), or None: plain TCP.
        peer_timeout: seconds of silence after which libzmq drops a connection (heartbeats).
    """

    def __init__(self, me: str, bind: str | None, connect: dict[str, str], digest: str,
                 max_message: int = -1, security=None, peer_timeout: float = 60.0) -> None:
        self.me = me
        self.digest = digest
        self.max_message = max_message
        self.security = security
        self.peer_timeout = peer_timeout
        self.dials = tuple(connect)
        self.on_event = None
        self.ctx = zmq.Context(io_threads=1)
        if security is not None:
            security.start(self.ctx)
        self.poller = zmq.Poller()
        self.router = None
        self.dealers: dict[str, zmq.Socket] = {}
        self.socket_peer: dict[zmq.Socket, str] = {}
        self.known: set[str] = set()      # ROUTER peers that connected: they can be addressed
        self.pending: dict[str, list] = {}  # frames for ROUTER peers not connected yet
        self.unreachable: set[str] = set()  # ROUTER peers whose connection went for good
        self.address: dict[str, str] = {}  # ROUTER peer -> its IP (for error messages)
        self.fd_peer: dict[int, str] = {}  # ROUTER connection (file descriptor) -> peer
        self.members: set[str] | None = None  # the peers worth tracking (None: any name)
        self.monitors: dict = {}          # monitor socket -> peer (None: the ROUTER's)
        self.down: set[str] = set()       # peers whose connection dropped or was refused
        self.bytes_sent = 0               # payload bytes handed to sockets (bench/ reads them)
        self.bytes_received = 0
        self.idle_s = 0.0                 # seconds blocked in poll with nothing to read
        if bind is not None:
            self.router = self._socket(zmq.ROUTER, server=True)
            self.router.setsockopt(zmq.ROUTER_MANDATORY, 1)
            try:
                self.router.bind(f"tcp://{bind_address(bind)}")
            except zmq.ZMQError as e:  # in the user's terms: where the endpoint came from, who holds it
                self.close(0)
                raise cannot_bind(me, bind, e) from None
            self.poller.register(self.router, zmq.POLLIN)
            self._monitor(self.router, None, zmq.EVENT_DISCONNECTED)
        for peer, ep in connect.items():
            s = self._socket(zmq.DEALER, server=False)
            s.setsockopt(zmq.IDENTITY, me.encode())
            s.connect(f"tcp://{ep}")
            self.dealers[peer] = s
            self.socket_peer[s] = peer
            self.poller.register(s, zmq.POLLIN)
            self._monitor(s, peer, zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED
                          | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL)

    def _monitor(self, s: zmq.Socket, peer: str | None, events: int) -> None:
        mon = s.get_monitor_socket(events)
        self.monitors[mon] = peer
        self.poller.register(mon, zmq.POLLIN)

    def _socket(self, kind: int, server: bool) -> zmq.Socket:
        s = self.ctx.socket(kind)
        s.setsockopt(zmq.LINGER, LINGER_MS)
        if self.max_message > 0:
            s.setsockopt(zmq.MAXMSGSIZE, self.max_message)
        # NOTE(heartbeats): libzmq's IO thread pings every connection and drops one silent for
        # peer_timeout; it answers pings while Python computes, so a slow peer is never lost,
        # and no Python thread is needed. A dropped connection shows in the monitors (_watch).
        ivl = int(min(1.0, self.peer_timeout / 4) * 1000)
        s.setsockopt(zmq.HEARTBEAT_IVL, max(ivl, 10))
        s.setsockopt(zmq.HEARTBEAT_TIMEOUT, int(self.peer_timeout * 1000))
        s.setsockopt(zmq.HEARTBEAT_TTL, int(self.peer_timeout * 1000))
        if not server:  # NOTE(reconnect): libzmq retries a refused dial after 100 ms + up to 100 ms of jitter,
            # so a trainer that dialled just before its pserver bound (all processes started at once) began
            # 100-200 ms late; retry after 10 ms, doubling to 100 ms (then about as often as libzmq's default)
            s.setsockopt(zmq.RECONNECT_IVL, 10)
            s.setsockopt(zmq.RECONNECT_IVL_MAX, 100)
        if self.security is not None:
            self.security.apply(s, server)
        return s

    def send(self, peer: str, frames: Sequence) -> None:
        """Queue ``frames`` for ``peer`` (held back until a ROUTER peer has connected)."""
        sizes = [memoryview(f).nbytes for f in frames]
        self.bytes_sent += sum(sizes)
        s = self.dealers.get(peer)
        if s is not None:
            _send(s, frames, sizes)
        elif peer in self.known:
            try:
                _send(self.router, [peer.encode(), *frames], [0, *sizes])
            except zmq.ZMQError as e:  # EHOSTUNREACH (ROUTER_MANDATORY): the peer left
                # Only informational: a peer that closes right after its `done` (still unread
                # here) is no failure, and a wait that needs a lost peer raises PeerLost naming it.
                log.info("%s: %s is gone (%s); dropping what is sent to it", self.me, peer, e)
                self.known.discard(peer)
                self.unreachable.add(peer)
        elif peer not in self.unreachable:
            self.pending.setdefault(peer, []).append(frames)

    def poll(self, timeout_ms: int) -> list[tuple[str, list]]:
        """Messages that arrived within ``timeout_ms``: ``[(peer, frames)]`` (may be empty)."""
        out = []
        t0 = time.perf_counter()
        ready = self.poller.poll(timeout_ms)
        self.idle_s += time.perf_counter() - t0
        for s, _ in ready:
            if s in self.monitors:
                self._watch(s)
                continue
            while True:
                try:
                    frames = _recv(s)
                except zmq.Again:  # rare: poll said there is one, so the loop below ends it
                    break
                if s is self.router:
                    peer = frames[0].bytes.decode("utf-8", "replace")
                    if peer in self.dealers:
                        continue  # an impostor: that peer talks to us over our own DEALER
                    try:
                        fd = frames[0].get(zmq.SRCFD)
                    except zmq.ZMQError:  # no metadata: random bytes, read as a ZMTP 1.0 peer
                        fd = None
                    if fd is not None and self.fd_peer.get(fd) != peer and (
                            self.members is None or peer in self.members):
                        self._arrived(peer, fd, frames[0].get("Peer-Address"))
                    frames = frames[1:]
                else:
                    peer = self.socket_peer[s]
                self.bytes_received += sum(map(len, frames))
                out.append((peer, frames))
                if not s.getsockopt(_EVENTS) & _POLLIN:  # drained: no zmq.Again raised to say so
                    break
        return out

    def _arrived(self, peer: str, fd: int, address: str) -> None:
        """A (new) connection of ``peer`` to our ROUTER: it can be addressed now."""
        cap_resend_wait(fd, self.peer_timeout)  # NOTE(resend-cap)
        for old in [f for f, p in self.fd_peer.items() if p == peer]:
            del self.fd_peer[old]
        self.fd_peer[fd] = peer
        self.address[peer] = address
        self.known.add(peer)
        self.unreachable.discard(peer)
        for frames in self.pending.pop(peer, []):
            self.send(peer, frames)
        self._report(peer, CONNECTED)

    def _report(self, peer: str, event: str) -> None:
        if self.on_event is not None:
            self.on_event(peer, event)

    def _watch(self, mon) -> None:
        """NOTE(peer-lost): every connection is watched. A connection drops when the peer's
        process dies (at once: the kernel resets it) or when it is silent past peer_timeout
        (NOTE(heartbeats): a stopped process, a dead machine, a cut link). A DEALER names its
        peer; on the ROUTER the event carries the connection's file descriptor, which the
        peer's messages carry too (ZMQ_SRCFD), so the two meet in ``fd_peer``."""
        from zmq.utils.monitor import recv_monitor_message

        while True:
            try:
                event = recv_monitor_message(mon, zmq.NOBLOCK)
            except zmq.Again:
                return
            peer = self.monitors[mon]
            if peer is None:  # the ROUTER's: a connection (a file descriptor) dropped
                peer = self.fd_peer.pop(int(event["value"]), None)
                if peer is None:
                    continue  # a connection that never said who it was (a port scanner, say)
            if event["event"] == zmq.EVENT_CONNECTED:  # a DEALER's TCP connection: its fd
                cap_resend_wait(int(event["value"]), self.peer_timeout)  # NOTE(resend-cap)
                continue
            if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.down.discard(peer)
                self._report(peer, CONNECTED)
                continue
            self.down.add(peer)  # dropped; or it refused our CURVE key (or spoke another protocol)
            self._report(peer, LOST if event["event"] == zmq.EVENT_DISCONNECTED else REFUSED)

    def close(self, linger_ms: int | None = None) -> None:
        """Close the sockets; what is still queued gets ``linger_ms`` (default LINGER_MS) to
        leave, none for a peer whose connection is down. Idempotent."""
        if self.ctx.closed:
            return
        for s in list(self.dealers.values()) + ([self.router] if self.router is not None else []):
            s.disable_monitor()
        if self.security is not None:
            self.security.stop()
        for mon in self.monitors:
            mon.close(0)
        for peer, s in self.dealers.items():  # what waits for a lost peer will never leave
            s.close(0 if peer in self.down else linger_ms)
        if self.router is not None:
            self.router.close(linger_ms)
        self.ctx.term()


Transport = ZmqTransport  # the name the executor and the tests import
