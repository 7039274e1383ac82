"""CPU collectives over the ZeroMQ transport against raw pyzmq, measured in one run.

K = 2 and 4 processes on 127.0.0.1 (one Transport + Mailbox each, as executors have) run
``RingCommunicator.allreduce(sum)`` of 1, 16 and 64 MB of float32. Printed per size: the time
per call (the slowest rank's mean), the bus bandwidth ``2(K-1)/K * bytes / time`` (what each
rank's links carry per second; a perfect ring reaches the link bandwidth), the bytes all ranks
send per second together (K x bus: what loopback TCP must carry when the ranks share few cores,
where it is bound by the CPU), and the raw pyzmq bandwidth of the same size between two
processes (``floors.bandwidth``), so the table reads as "how close to the wire".

    python bench/bench_collectives.py [--sizes-mb 1,16,64] [--ranks 2,4]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from floors import bandwidth  # noqa: E402

from placegroup.tools.launch import free_ports  # noqa: E402

MB = 1 << 20


def _calls(nbytes: int) -> int:
    """Timed calls per size: about 1 GB moved per rank, at least 3."""
    return max(3, min(30, (1 << 30) // (2 * nbytes)))


def _rank(rank: int, k: int, ports: list, sizes: list, q) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy as np

    from placegroup.comm.collectives import RingCommunicator
    from placegroup.comm.mailbox import Mailbox
    from placegroup.comm.transport import Transport

    names = [f"trainer:{r}" for r in range(k)]
    eps = {n: f"127.0.0.1:{p}" for n, p in zip(names, ports)}
    me = names[rank]
    mb = Mailbox(Transport(me, bind=eps[me], connect={n: e for n, e in eps.items() if n > me}, digest="b"))
    comm = RingCommunicator(mb, names, me, timeout=120)
    out, step = {}, 0
    for nbytes in sizes:
        x = np.ones(nbytes // 4, np.float32) * (rank + 1)
        for _ in range(2):  # warm-up: connections, page faults
            y = comm.allreduce(x, "sum", "warm", step)
            step += 1
        assert y[0] == k * (k + 1) / 2
        n = _calls(nbytes)
        t0 = time.perf_counter()
        for _ in range(n):
            comm.allreduce(x, "sum", "ar", step)
            step += 1
        out[nbytes] = (time.perf_counter() - t0) / n
    q.put((rank, out))
    mb.close()


def collective_times(k: int, sizes: list) -> dict:
    """Seconds per allreduce of each size in ``sizes`` (bytes) over ``k`` processes."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ports = free_ports(k)
    procs = [ctx.Process(target=_rank, args=(r, k, ports, sizes, q), daemon=True) for r in range(k)]
    for p in procs:
        p.start()
    per_rank = [q.get(timeout=300)[1] for _ in range(k)]
    for p in procs:
        p.join(30)
    return {s: max(r[s] for r in per_rank) for s in sizes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-mb", default="1,16,64")
    ap.add_argument("--ranks", default="2,4")
    a = ap.parse_args()
    sizes = [int(s) * MB for s in a.sizes_mb.split(",")]
    load = os.getloadavg()[0]
    raw = {s: bandwidth(s, rounds=max(10, _calls(s))) for s in sizes}
    rows = []
    for k in [int(r) for r in a.ranks.split(",")]:
        for s, t in collective_times(k, sizes).items():
            bus = 2 * (k - 1) / k * s / t
            rows.append((k, s, t, bus, raw[s]))
    print("allreduce(sum) of float32 over RingCommunicator (ZeroMQ, 127.0.0.1), one process per rank")
    print(f"{'K':>2} {'size':>7} {'ms/call':>9} {'bus GB/s':>9} {'all ranks GB/s':>15} {'raw pyzmq GB/s':>15} "
          f"{'bus/raw':>8}")
    for k, s, t, bus, r in rows:
        print(f"{k:>2} {s // MB:>4} MB {1e3 * t:>9.2f} {bus / 1e9:>9.2f} {k * bus / 1e9:>15.2f} {r / 1e9:>15.2f} "
              f"{bus / r:>8.0%}")
    print(f"(bus bandwidth = 2(K-1)/K x bytes / time; raw = one buffer of that size each way between two "
          f"processes; load average {load:.1f} on {os.cpu_count()} cores when started)")


if __name__ == "__main__":
    main()
