"""comm.collectives: results against numpy, bitwise the same on every rank, calls kept apart by
tag and step, and the errors of a group that disagrees; the whole table over the loopback
transport (one thread per rank) for 1 to 4 ranks, and over real processes on 127.0.0.1 for 3."""
import multiprocessing as mp
import re
import threading

import numpy as np
import pytest

from placegroup.comm.collectives import DIRECT_BYTES, CollectiveError, RingCommunicator
from placegroup.errors import CommTimeout
from placegroup.tools.launch import free_ports
from tests.conftest import TIME_FACTOR

F32, F64, I64 = np.float32, np.float64, np.int64


def _table(k: int) -> list:
    """``(kind, arg, dtype, shape_of(rank))``: every call the workers make, in order."""
    cases = []
    for op in ("sum", "max"):
        for dt in (F32, F64, I64):
            for shape in [(), (0,), (3,), (10, 100), (300, 1000)]:  # tiny, 1000, 300k elements
                cases.append(("allreduce", op, dt, lambda r, s=shape: s))
    cases.append(("allreduce", "max", F32, lambda r: (20_000,)))  # ring path, with NaNs below
    cases.append(("allreduce", "max", F64, lambda r: (7,)))       # direct path, with NaNs
    for dt in (F32, I64):
        cases += [("allgather", 0, dt, lambda r: (r + 1, 5)),
                  ("allgather", 0, dt, lambda r: (2000 + 37 * r, 40)),   # every part rings
                  ("allgather", 0, F64, lambda r: (70 + 10 * r, 100)),   # parts on both sides of 64 KiB
                  ("allgather", 1, dt, lambda r: (6, r + 2)),
                  ("allgather", -1, dt, lambda r: (300, 100 + 50 * r))]
    cases += [("reducescatter", 0, F32, lambda r: (3 * k, 4)),
              ("reducescatter", 0, I64, lambda r: (7, 5)),
              ("reducescatter", 0, F32, lambda r: (1000 * k, 64)),
              ("reducescatter", 0, F64, lambda r: (4099, 33)),
              ("reducescatter", 1, F64, lambda r: (50, 2001)),
              ("reducescatter", 0, F32, lambda r: (2, 20_000))]  # large, with empty parts for k > 2
    cases += [("allreduce", "sum", F64, lambda r: (5,))] * 40   # many calls back to back
    return cases


def _input(n: int, case, rank: int, k: int) -> np.ndarray:
    kind, arg, dt, shape_of = case
    rng = np.random.default_rng([n, rank, k])
    x = rng.standard_normal(shape_of(rank)) * 100
    if kind == "allreduce" and arg == "max" and x.size and n >= 30 and rank == k // 2:
        x.reshape(-1)[::3] = np.nan
    return np.asarray(x).astype(dt)


def _expected(case, xs: list, rank: int, k: int) -> np.ndarray:
    kind, arg, _, _ = case
    if kind == "allgather":
        return np.concatenate(xs, axis=arg)
    acc = xs[0].copy()
    for x in xs[1:]:
        acc = np.maximum(acc, x) if arg == "max" else acc + x
    return np.array_split(acc, k, axis=arg)[rank] if kind == "reducescatter" else acc


def _worker(rank: int, k: int, ports: list | None, q, network=None) -> None:
    """Rank ``rank`` of ``k`` runs the table and the bad calls, over real sockets (``ports``)
    or ``network`` (a LoopbackNetwork), and puts ``(rank, results, errors)`` on ``q``."""
    from placegroup.comm import collectives
    from placegroup.comm.mailbox import Mailbox
    from placegroup.comm.transport import open_transport

    collectives.SEGMENT_BYTES = 128 * 1024  # several segments per ring chunk at these sizes
    names = [f"trainer:{r}" for r in range(k)]
    eps = {n: f"127.0.0.1:{p}" for n, p in zip(names, ports or [0] * k)}
    me = names[rank]
    mb = Mailbox(open_transport(me, eps[me], {n: e for n, e in eps.items() if n > me}, digest="t",
                                network=network))
    comm = RingCommunicator(mb, names, me, timeout=20 * TIME_FACTOR)
    out = []
    try:
        for n, case in enumerate(_table(k)):
            kind, arg = case[:2]
            x = _input(n, case, rank, k)
            keep = x.copy()
            tag, step = f"op{n % 3}", n  # tags repeat: the step keeps the calls apart
            y = (comm.allreduce(x, arg, tag, step) if kind == "allreduce" else
                 getattr(comm, kind)(x, arg, tag, step))
            assert np.array_equal(x, keep, equal_nan=True), "the input changed"
            out.append(y.copy())
            x.fill(0)  # the caller owns x and y again: changing them must not reach the peers
            y.fill(0)
        errors = []
        if k > 1:  # rank 1 disagrees, once on the direct path and once on the ring path
            for n, big in enumerate([(4,), (100_000,)]):
                x = np.zeros(big if rank == 1 else (3,), F32)
                try:
                    comm.allreduce(x, "sum", f"bad{n}", 0)
                except CollectiveError as e:
                    errors.append(str(e))
            if rank != k - 1:  # the last rank never calls
                comm.timeout = 0.5
                try:
                    comm.allgather(np.ones((2, 2)), 0, "lonely", 9)
                except CommTimeout as e:
                    errors.append(str(e))
        q.put((rank, out, errors))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which fails the test
        q.put((rank, None, [f"{type(e).__name__}: {e}"]))
    finally:
        mb.close()


@pytest.mark.parametrize("k, real", [(1, False), (2, False), (3, False), (4, False), (3, True)],
                         ids=["1-loopback", "2-loopback", "3-loopback", "4-loopback", "3-processes"])
def test_collectives_match_numpy_on_every_rank(k, real, monkeypatch):
    if real:  # what only sockets prove: zero-copy sends, real framing on the wire
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        ports = free_ports(k)
        procs = [ctx.Process(target=_worker, args=(r, k, ports, q), daemon=True) for r in range(k)]
    else:
        import queue

        from placegroup.comm import collectives
        from placegroup.comm.loopback import LoopbackNetwork

        monkeypatch.setattr(collectives, "SEGMENT_BYTES", collectives.SEGMENT_BYTES)  # _worker sets it
        q, net = queue.Queue(), LoopbackNetwork()
        procs = [threading.Thread(target=_worker, args=(r, k, None, q, net), daemon=True) for r in range(k)]
    for p in procs:
        p.start()
    got = {}
    for _ in range(k):
        rank, out, errors = q.get(timeout=60 * TIME_FACTOR)
        assert out is not None, errors[0]
        got[rank] = (out, errors)
    for p in procs:
        p.join(10 * TIME_FACTOR)
    table = _table(k)
    for n, case in enumerate(table):
        xs = [_input(n, case, r, k) for r in range(k)]
        for r in range(k):
            y, want = got[r][0][n], _expected(case, xs, r, k)
            assert y.dtype == want.dtype and y.shape == want.shape, (n, case[:2], y.dtype, y.shape)
            if case[0] == "allreduce" and case[1] == "max" or want.dtype.kind == "i":
                np.testing.assert_array_equal(y, want, err_msg=f"call {n} {case[:2]}")
            else:
                np.testing.assert_allclose(y, want, rtol=1e-5 if want.dtype == F32 else 1e-12,
                                           atol=1e-3, err_msg=f"call {n} {case[:2]}")
            if case[0] == "allreduce":  # NOTE(bitwise): the same bits on every rank
                assert y.tobytes() == got[0][0][n].tobytes(), f"call {n}: rank {r} differs from rank 0"
        if case[1] == "max" and n >= 30 and k > 1:
            assert np.isnan(got[0][0][n].reshape(-1)[::3]).all()
    if k == 1:
        return
    for r in range(k):
        errors = got[r][1]
        assert len(errors) == (2 if r == k - 1 else 3), errors
        for n, e in enumerate(errors[:2]):  # every rank raises the same clear error
            assert e == got[0][1][n]
            assert f"allreduce 'bad{n}'" in e and "rank 1: float32[" in e and "[3]" in e, e
        if r != k - 1:
            assert re.search(rf"allgather 'lonely' at step 9 .*rank {r} of {k}.*waiting for rank \d", errors[2])


def test_one_member_and_bad_arguments_need_no_messages():
    comm = RingCommunicator(None, ["trainer:0"], "trainer:0", timeout=1.0)
    x = np.arange(6, dtype=F32).reshape(2, 3)
    for y in (comm.allreduce(x, "max", "t", 0), comm.allgather(x, 1, "t", 0), comm.reducescatter(x, 0, "t", 0)):
        np.testing.assert_array_equal(y, x)
        assert y is not x and y.dtype == F32
    with pytest.raises(CollectiveError, match=r"allreduce 't': op 'min'"):
        comm.allreduce(x, "min", "t", 0)
    with pytest.raises(CollectiveError, match=r"allgather 't': axis 2 is out of range .* \[2, 3\]"):
        comm.allgather(x, 2, "t", 0)
    with pytest.raises(CollectiveError, match="allgather 'g': axis 0 .* shape \\[\\]"):
        comm.allgather(np.float32(1), 0, "g", 0)
    with pytest.raises(CollectiveError, match="must be one of"):
        RingCommunicator(None, ["trainer:0"], "trainer:1", timeout=1.0)


class _SilentMailbox:
    """A mailbox whose peers never answer: ``wait`` times out at once."""

    def post(self, *a):
        pass

    def flush(self):
        pass

    def wait(self, keys, timeout, describe):
        raise CommTimeout(describe(keys))


def test_timeout_names_the_executor_context_and_the_collective():
    comm = RingCommunicator(_SilentMailbox(), ["trainer:0", "trainer:1"], "trainer:1", 5.0,
                            describe=lambda missing: f"op #3 `c_allreduce_sum` waited for {missing[0][0]!r}")
    with pytest.raises(CommTimeout, match=r"op #3 `c_allreduce_sum` waited for 'op3@h0' \[allreduce 'op3' at "
                                          r"step 7 on trainer:1 \(rank 1 of 2\), waiting for rank 0 \(trainer:0\)\]"):
        comm.allreduce(np.ones(DIRECT_BYTES), "sum", "op3", 7)


def test_small_collective_sends_are_copied_by_the_transport():
    """A collective sends a caller's array below DIRECT_BYTES as it is (NOTE(zero-copy-sends)):
    the transport must copy such a frame, so the caller may change the array afterwards."""
    from placegroup.comm.collectives import DIRECT_BYTES
    from placegroup.comm.transport import ZERO_COPY_BYTES

    assert DIRECT_BYTES <= ZERO_COPY_BYTES
