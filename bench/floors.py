"""Floors every bench measures in the same run, so a speed is a ratio, not an absolute figure
that differs between machines.

* ``round_trip(n)``: two processes, a DEALER connected to a ROUTER over tcp on 127.0.0.1; the
  "trainer" sends a msgpack header and a float32 buffer of ``n`` elements (copy=False), the
  "server" subtracts 0.01 x it from its own array and replies with a header and that array.
  Returns round trips per second over ``rounds`` rounds after a warm-up.
* ``bandwidth(nbytes)``: the same pair moving one buffer of ``nbytes`` each way; bytes/s.
"""
from __future__ import annotations

import multiprocessing as mp
import time

import msgpack
import numpy as np
import zmq


def _server(port_q, n: int, rounds: int) -> None:
    ctx = zmq.Context()
    s = ctx.socket(zmq.ROUTER)
    port = s.bind_to_random_port("tcp://127.0.0.1")
    port_q.put(port)
    param = np.zeros(n, np.float32)
    for _ in range(rounds):
        ident, head, buf = s.recv_multipart(copy=False)
        msgpack.unpackb(head.bytes)
        g = np.frombuffer(buf.buffer, np.float32)
        param -= 0.01 * g
        s.send_multipart([ident, msgpack.packb({"var": "w", "version": 0, "shape": [n]}), param], copy=False)
    s.close()
    ctx.term()


def _pair(n: int, rounds: int) -> float:
    q = mp.get_context("spawn").Queue()
    p = mp.get_context("spawn").Process(target=_server, args=(q, n, rounds))
    p.start()
    port = q.get(timeout=60)
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.connect(f"tcp://127.0.0.1:{port}")
    g = np.ones(n, np.float32)
    head = {"var": "w@GRAD", "version": 0, "shape": [n]}
    warm = min(200, rounds // 10)
    t0 = 0.0
    for i in range(rounds):
        if i == warm:
            t0 = time.perf_counter()
        s.send_multipart([msgpack.packb(head), g], copy=False)
        _, buf = s.recv_multipart(copy=False)
        np.frombuffer(buf.buffer, np.float32)
    dt = time.perf_counter() - t0
    s.close()
    ctx.term()
    p.join()
    return dt / (rounds - warm)


def round_trip(n: int = 14, rounds: int = 5000) -> float:
    """Round trips per second of the round-trip floor (module docstring)."""
    return 1.0 / _pair(n, rounds)


def bandwidth(nbytes: int, rounds: int = 50) -> float:
    """Bytes per second moved one way, from round trips of ``nbytes`` each way."""
    per = _pair(max(1, nbytes // 4), rounds)
    return 2 * nbytes / per


if __name__ == "__main__":
    rt = round_trip()
    print(f"floor round trip (14 floats): {rt:,.0f}/s = {1e6 / rt:.1f} us")
    for size in (1 << 12, 1 << 20, 1 << 24):
        print(f"floor bandwidth {size:>10,} B: {bandwidth(size) / 1e9:.2f} GB/s")
