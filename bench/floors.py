"""Floors every bench measures in the same run, so a speed is a ratio, not an absolute figure
that differs between machines.

* ``round_trip(n)``: two processes, a DEALER connected to a ROUTER over tcp on 127.0.0.1; the
  "trainer" sends a msgpack header and a float32 buffer of ``n`` elements (copy=False), the
  "server" subtracts 0.01 x it from its own array and replies with a header and that array.
  Returns round trips per second over ``rounds`` rounds after a warm-up;
  ``round_trip_cost(n)``: seconds and CPU seconds (both processes) per round trip;
  ``tcp_round_trip_cost(n)``: the same exchange over plain TCP sockets, for comparison.
* ``bandwidth(nbytes)``: the same pair moving one buffer of ``nbytes`` each way; bytes/s.
"""
from __future__ import annotations

import multiprocessing as mp
import socket
import struct
import time

import msgpack
import numpy as np
import zmq


def _server(port_q, n: int, rounds: int, warm: int = 0) -> None:
    ctx = zmq.Context()
    s = ctx.socket(zmq.ROUTER)
    port = s.bind_to_random_port("tcp://127.0.0.1")
    port_q.put(port)
    param = np.zeros(n, np.float32)
    cpu0 = 0.0
    for i in range(rounds):
        if i == warm:
            cpu0 = time.process_time()  # this process's CPU, libzmq's IO thread included
        ident, head, buf = s.recv_multipart(copy=False)
        msgpack.unpackb(head.bytes)
        g = np.frombuffer(buf.buffer, np.float32)
        param -= 0.01 * g
        s.send_multipart([ident, msgpack.packb({"var": "w", "version": 0, "shape": [n]}), param], copy=False)
    port_q.put(time.process_time() - cpu0)
    s.close()
    ctx.term()


def _measure(server, n: int, rounds: int, connect, exchange, close) -> tuple[float, float]:
    """Run ``server`` in a process of its own, ``connect(port)`` to it and time ``rounds``
    calls of ``exchange(conn, head, buffer)`` after a warm-up; (seconds, CPU seconds of both
    processes) per round trip."""
    warm = min(200, rounds // 10)
    q = mp.get_context("spawn").Queue()
    p = mp.get_context("spawn").Process(target=server, args=(q, n, rounds, warm))
    p.start()
    conn = connect(q.get(timeout=60))
    g = np.ones(n, np.float32)
    head = {"var": "w@GRAD", "version": 0, "shape": [n]}
    t0 = cpu0 = 0.0
    for i in range(rounds):
        if i == warm:
            t0, cpu0 = time.perf_counter(), time.process_time()
        exchange(conn, msgpack.packb(head), g)
    dt, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    server_cpu = q.get(timeout=60)
    close(conn)
    p.join()
    return dt / (rounds - warm), (cpu + server_cpu) / (rounds - warm)


def _zmq_connect(port: int):
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.connect(f"tcp://127.0.0.1:{port}")
    return ctx, s


def _zmq_exchange(conn, head: bytes, g: np.ndarray) -> None:
    s = conn[1]
    s.send_multipart([head, g], copy=False)
    _, buf = s.recv_multipart(copy=False)
    np.frombuffer(buf.buffer, np.float32)


def _zmq_close(conn) -> None:
    conn[1].close()
    conn[0].term()


def _pair(n: int, rounds: int) -> tuple[float, float]:
    """(seconds, CPU seconds of both processes) per round trip of the floor."""
    return _measure(_server, n, rounds, _zmq_connect, _zmq_exchange, _zmq_close)


def round_trip(n: int = 14, rounds: int = 5000) -> float:
    """Round trips per second of the round-trip floor (module docstring)."""
    return 1.0 / _pair(n, rounds)[0]


def round_trip_cost(n: int = 14, rounds: int = 5000) -> tuple[float, float]:
    """(seconds, CPU seconds) per round trip of the floor: the CPU is both processes', libzmq's
    IO threads included, the share of a core one round trip takes whatever else runs."""
    return _pair(n, rounds)


def _recv_exactly(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("peer closed")
        got += k
    return buf


def _recv_message(sock: socket.socket) -> tuple[bytearray, bytearray]:
    head_len, body_len = struct.unpack("<II", _recv_exactly(sock, 8))
    return _recv_exactly(sock, head_len), _recv_exactly(sock, body_len)


def _send_message(sock: socket.socket, head: bytes, body: np.ndarray) -> None:
    sock.sendall(struct.pack("<II", len(head), body.nbytes) + head + body.tobytes())


def _tcp_server(port_q, n: int, rounds: int, warm: int) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port_q.put(listener.getsockname()[1])
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    param = np.zeros(n, np.float32)
    cpu0 = 0.0
    for i in range(rounds):
        if i == warm:
            cpu0 = time.process_time()
        head, body = _recv_message(conn)
        msgpack.unpackb(bytes(head))
        param -= 0.01 * np.frombuffer(body, np.float32)
        _send_message(conn, msgpack.packb({"var": "w", "version": 0, "shape": [n]}), param)
    port_q.put(time.process_time() - cpu0)
    conn.close()
    listener.close()


def _tcp_connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _tcp_exchange(sock: socket.socket, head: bytes, g: np.ndarray) -> None:
    _send_message(sock, head, g)
    _, body = _recv_message(sock)
    np.frombuffer(body, np.float32)


def tcp_round_trip_cost(n: int = 14, rounds: int = 5000) -> tuple[float, float]:
    """The round-trip floor's exchange over plain TCP sockets, each process's own thread
    reading and writing them (no IO thread): (seconds, CPU seconds of both processes) per
    round trip. Not a floor any target is measured against: what a transport without
    libzmq's IO thread on the path would start from (docs/performance.md)."""
    return _measure(_tcp_server, n, rounds, _tcp_connect, _tcp_exchange, socket.socket.close)


def bandwidth(nbytes: int, rounds: int = 50) -> float:
    """Bytes per second moved one way, from round trips of ``nbytes`` each way."""
    per = _pair(max(1, nbytes // 4), rounds)[0]
    return 2 * nbytes / per


if __name__ == "__main__":
    per, cpu = round_trip_cost()
    print(f"floor round trip (14 floats): {1 / per:,.0f}/s = {1e6 * per:.1f} us, "
          f"{1e6 * cpu:.1f} us of CPU (both processes)")
    per, cpu = tcp_round_trip_cost()
    print(f"the same over plain TCP sockets, no IO thread: {1e6 * per:.1f} us, {1e6 * cpu:.1f} us of CPU")
    for size in (1 << 12, 1 << 20, 1 << 24):
        print(f"floor bandwidth {size:>10,} B: {bandwidth(size) / 1e9:.2f} GB/s")
