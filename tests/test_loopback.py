"""The loopback transport (comm/loopback.py): executors on threads of one process exchange real
framed messages, and the session and mailbox above it behave as over ZeroMQ: hello and its
digest check, done, lost and never-came peers, hostile input, and the ring
collectives, equal to numpy bit for bit. No sockets, no processes."""
import queue
import random
import threading
import time

import numpy as np
import pytest

from placegroup.comm.base import CONNECTED, LOST, FrameTransport
from placegroup.comm.collectives import DIRECT_BYTES, RingCommunicator
from placegroup.comm.expect import Expectations
from placegroup.comm.framing import pack, unpack
from placegroup.comm.loopback import LoopbackNetwork
from placegroup.comm.mailbox import Mailbox, PeersDone
from placegroup.comm.transport import Transport, ZmqTransport, open_transport
from placegroup.errors import PeerLost, RemoteError
from tests.conftest import TIME_FACTOR
from tests.test_hostile import _hostile

F4 = np.float32
EP = "127.0.0.1:1"
PS = f"pserver@{EP}"
T = 10 * TIME_FACTOR


def _mailbox(net, name, digest="d", peer_timeout=5.0, **handlers) -> Mailbox:
    """A pserver (binds EP) or a trainer (connects to it), as the executor links them;
    ``handlers``: the mailbox's (``describe_peer``, ``start_timeout``, ``supersede``)."""
    bind, connect = (EP, {}) if name == PS else (None, {PS: EP})
    return Mailbox(open_transport(name, bind, connect, digest=digest, peer_timeout=peer_timeout,
                                  network=net), **handlers)


def _say_done(mb, peers) -> None:
    """What a trainer's link does at close: what it posted leaves, then ``done``."""
    mb.flush()
    mb.session.say_done(peers, mb.step_of())


def _describe(missing) -> str:
    return f"waiting for {missing[0][0]!r} from {missing[0][2]}"


def _threads(*fns) -> list:
    """Run each of ``fns`` on its own thread; their results, or the first error raised."""
    out, errors = [None] * len(fns), []

    def run(i, fn):
        try:
            out[i] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below, on the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, fn), daemon=True) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
        time.sleep(0.02)  # later ones start after earlier ones sent: their messages waited
    for t in threads:
        t.join(T)
    if errors:
        raise errors[0]
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    return out


# -- the transport's own promises --------------------------------------------------------------
def test_both_transports_offer_the_one_interface():
    net = LoopbackNetwork()
    zmq_t = Transport("trainer:0", None, {}, "d")
    loop = open_transport("trainer:0", None, {}, digest="d", network=net)
    try:
        assert Transport is ZmqTransport and isinstance(zmq_t, FrameTransport) and isinstance(loop, FrameTransport)
        with pytest.raises(TypeError, match="LoopbackNetwork or None, not dict"):
            open_transport("trainer:1", None, {}, digest="d", network={})
        with pytest.raises(ValueError, match="'trainer:0' already runs"):
            net.transport("trainer:0", None, {}, digest="d")
    finally:
        zmq_t.close()
        loop.close()
        loop.close()  # idempotent
        zmq_t.close()


def test_messages_wait_for_a_peer_that_has_not_started_and_are_copied():
    net = LoopbackNetwork()
    tr = net.transport("trainer:0", None, {PS: EP}, digest="d")
    events = []
    tr.on_event = lambda peer, ev: events.append((peer, ev))
    x = np.arange(4, dtype=F4)
    tr.send(PS, pack("values", "trainer:0", 0, [("a", 0, x)]))
    tr.send(PS, pack("values", "trainer:0", 0, [("b", 0, x)]))
    x[:] = -1  # the sender changes its array: what was sent does not change
    ps = net.transport(PS, EP, {}, digest="d")
    got = ps.poll(0)
    assert [unpack(f).vals[0][0] for _, f in got] == ["a", "b"] and {p for p, _ in got} == {"trainer:0"}
    np.testing.assert_array_equal(unpack(got[0][1]).vals[0][2], np.arange(4, dtype=F4))
    assert unpack(got[0][1]).vals[0][2].flags.writeable  # as a received ZeroMQ frame is
    assert tr.poll(0) == [] and events == [(PS, CONNECTED)]
    stranger = net.transport("trainer:5", None, {}, digest="d")
    stranger.send(PS, pack("done", "trainer:5", 0))  # no connection between them: never arrives
    assert ps.poll(0) == []
    ps.close()
    tr.poll(0)
    assert events[-1] == (PS, LOST)
    tr.send(PS, pack("done", "trainer:0", 0))  # to a closed peer: dropped
    assert net.waiting == {}


def test_poll_sleeps_until_a_message_comes():
    net = LoopbackNetwork()
    ps = net.transport(PS, EP, {}, digest="d")
    tr = net.transport("trainer:0", None, {PS: EP}, digest="d")
    ps.poll(0)  # the connection event
    t0 = time.monotonic()
    assert ps.poll(100) == [] and time.monotonic() - t0 >= 0.09
    threading.Timer(0.1, lambda: tr.send(PS, pack("done", "trainer:0", 0))).start()
    t0 = time.monotonic()
    got = ps.poll(int(T * 1000))
    assert got and time.monotonic() - t0 < 2 * TIME_FACTOR  # woken by the send, not the timeout


# -- the session and the mailbox over it -------------------------------------------------------
def test_values_between_executors_on_threads_and_done():
    net = LoopbackNetwork()
    trainers = ["trainer:0", "trainer:1"]

    def trainer(i):
        mb = _mailbox(net, trainers[i])
        g = np.full(3, i + 1.0, F4)
        mb.post(PS, "g", 0, g)
        mb.flush()  # it has left: the pserver may not have it yet, but it is on its way
        w, = mb.wait([("w", 0, PS)], T, _describe)
        _say_done(mb, [PS])  # step_of() is 0: its last step
        mb.close()
        return w

    def pserver():
        mb = _mailbox(net, PS)
        g0, g1 = mb.wait([("g", 0, t) for t in trainers], T, _describe)
        for t in trainers:
            mb.post(t, "w", 0, g0 + g1)
        mb.flush()
        with pytest.raises(PeersDone):  # both said done after step 0: no step 1 comes
            mb.wait([("g", 1, t) for t in trainers], T, _describe)
        assert mb.done == {"trainer:0": 0, "trainer:1": 0} and mb.dropped == {}
        mb.close()

    w0, w1, _ = _threads(lambda: trainer(0), lambda: trainer(1), pserver)  # the pserver starts last
    np.testing.assert_array_equal(w0, np.full(3, 3.0, F4))
    np.testing.assert_array_equal(w1, w0)


def test_answers_to_instances_that_came_together_leave_together_newest_only():
    """NOTE(reply-batching): an async pserver (the Async policy over a real mailbox) that finds
    several instances waiting answers them in one message; of a var its mailbox supersedes
    only the newest answer goes."""
    from placegroup.executor.policy import Async
    from placegroup.ir.edges import InEdge

    net = LoopbackNetwork()
    got = {}

    def trainer():
        mb = _mailbox(net, "trainer:0")
        mb.stats(timed=True)  # count messages (as PLACEGROUP_PROFILE does)
        for step in range(3):
            mb.post(PS, "g", step, np.full(2, step, F4))
        mb.flush()  # three gradients in one message
        got["w"] = mb.newest("w", PS, 2, wait=True, timeout=T, describe=_describe)
        got["b"] = [mb.wait([("b", v, PS)], T, _describe)[0] for v in range(3)]
        got["received"] = mb.stats().received_msgs
        _say_done(mb, [PS])
        mb.close()

    def pserver():
        policy = Async(newest_replies=True)
        mb = _mailbox(net, PS, supersede={"w"})
        mb.stats(timed=True)
        io = type("IO", (), {"mailbox": mb, "timeout": T, "me": PS})()
        policy.serving(type("Plan", (), {"ops": [type("Op", (), {"each": InEdge("G", "g", "each", ("trainer:0",),
                                                                              "same")})()]})())
        keys = [("g", 0, "trainer:0")]
        assert policy.pass_ready(io, 0)  # all three are here now: one message
        for step in range(3):
            key, _ = policy.next_instance(io, keys, 0, _describe)
            # not sent while another instance of the trainer waits: its answer goes with them
            assert key[1] == step and (step == 0 or sum(map(len, mb.outbox.values())) > 0)
            mb.post("trainer:0", "w", step, np.full(2, 10 + step, F4))
            mb.post("trainer:0", "b", step, np.full(1, step, F4))
        assert sum(map(len, mb.outbox.values())) == 4  # w of step 2 only, b of every step
        assert not policy.pass_ready(io, 3)  # it leaves; the trainer says done
        assert mb.stats().sent_msgs == 1
        mb.close()

    _threads(trainer, pserver)
    assert got["w"][0] == 2 and got["w"][1][0] == 12
    assert [float(b[0]) for b in got["b"]] == [0.0, 1.0, 2.0] and got["received"] == 1


def test_another_program_is_answered_with_an_error():
    net = LoopbackNetwork()
    ps = _mailbox(net, PS, digest="ours")
    tr = _mailbox(net, "trainer:0", digest="theirs")
    ps.newest("w", "trainer:0", 0)  # the hello comes, and is answered
    with pytest.raises(RemoteError, match=f"{PS} failed: {PS} runs another program than trainer:0: "
                                          f"transpile the same model"):
        tr.wait([("w", 0, PS)], T, _describe)


def test_a_peer_that_closes_without_done_is_lost_after_the_grace():
    net = LoopbackNetwork()
    ps = _mailbox(net, PS, peer_timeout=0.3, describe_peer=lambda name: f"{name} (trainer 0)")
    tr = _mailbox(net, "trainer:0")
    tr.close()  # as a process that dies
    t0 = time.monotonic()
    with pytest.raises(PeerLost, match=r"peer trainer:0 \(trainer 0\) is gone: its connection dropped "
                                       r".* waiting for 'g' from trainer:0"):
        ps.wait([("g", 0, "trainer:0")], T, _describe)
    assert 0.3 <= time.monotonic() - t0 < 3 * TIME_FACTOR


def test_a_peer_that_said_done_and_closed_is_no_failure():
    net = LoopbackNetwork()
    ps = _mailbox(net, PS, peer_timeout=0.1)
    tr = _mailbox(net, "trainer:0")
    _say_done(tr, [PS])
    tr.close()
    time.sleep(0.2)
    with pytest.raises(PeersDone):
        ps.wait([("g", 1, "trainer:0")], T, _describe)
    ps.session.check([("g", 1, "trainer:0")], lambda missing: "nothing")


def test_a_peer_that_never_comes_is_named_after_the_start_timeout():
    net = LoopbackNetwork()
    ps = _mailbox(net, PS, start_timeout=0.3)
    _mailbox(net, "trainer:0")
    with pytest.raises(PeerLost, match=r"peer trainer:1 never came: no connection in \d+s "
                                       r"\(PLACEGROUP_START_TIMEOUT=0.3s; is it running\?\); waiting for"):
        ps.wait([("g", 0, "trainer:0"), ("g", 0, "trainer:1")], T, _describe)
    assert ps.session.status("trainer:0")[0] == "alive"


def test_hostile_input_is_dropped_as_on_zeromq():
    """A stranger's messages (random bytes, well-formed values, done, error, hello), and a
    linked trainer's malformed, spoofed and mistyped ones, are dropped and counted; the good
    value still arrives (docs/protocol.md, "What is dropped")."""
    net = LoopbackNetwork()
    ps = _mailbox(net, PS)
    table = Expectations({"trainer:0", "trainer:1"})
    table.allow("fc_0.w_0@GRAD", "trainer:0", F4, (13, 1))
    ps.expect(table)
    tr = _mailbox(net, "trainer:0")
    rogue = net.transport("rogue", None, {PS: EP}, digest="d")
    strangers = _hostile(random.Random(7), "rogue", impostor=False)
    for frames in strangers:
        rogue.send(PS, frames)
    raw = tr.session.t
    for frames in _hostile(random.Random(7), "trainer:0", impostor=True)[1:]:  # no error, no done
        raw.send(PS, frames)
    raw.send(PS, [b"\xc1 not msgpack"])
    raw.send(PS, pack("done", "trainer:1", 0))  # spoofed
    tr.post(PS, "fc_0.w_0@GRAD", 0, np.ones((13, 1), F4))
    tr.flush()
    got, = ps.wait([("fc_0.w_0@GRAD", 0, "trainer:0")], T, _describe)
    np.testing.assert_array_equal(got, np.ones((13, 1), F4))
    assert ps.dropped == {"stranger": len(strangers), "malformed": 2, "shape": 1, "dtype": 1, "spoofed": 1}
    assert list(ps.held) == [("no_such_var", 3, "trainer:0")] and ps.done == {}


# -- collectives -------------------------------------------------------------------------------
def _ring(k: int, calls) -> dict:
    """``calls(comm, rank) -> list`` on each of ``k`` ranks over one loopback network."""
    net, q = LoopbackNetwork(), queue.Queue()
    names = [f"trainer:{r}" for r in range(k)]

    def rank(r):
        me = names[r]
        mb = Mailbox(open_transport(me, f"127.0.0.1:{r + 1}", {n: "x" for n in names if n > me},
                                    digest="d", network=net))
        try:
            q.put((r, calls(RingCommunicator(mb, names, me, timeout=T), r)))
        finally:
            mb.close()

    _threads(*[lambda r=r: rank(r) for r in range(k)])
    return dict(q.get() for _ in range(k))


@pytest.mark.parametrize("k", [2, 3])
def test_ring_collectives_over_loopback_equal_numpy_bit_for_bit(k):
    """Small (direct) and large (ring) arrays. Whole numbers as floats sum exactly in any order,
    so numpy's sum in rank order is the bits every rank must get."""
    big = DIRECT_BYTES // 4 * 3 + 5  # float32 elements: the ring path, chunks of unequal size

    def inputs(r):
        rng = np.random.default_rng([k, r])
        whole = lambda shape, dt: rng.integers(-1000, 1000, shape).astype(dt)  # noqa: E731
        x = whole(big, F4)
        x[r::7] = np.nan if r == 1 else x[r::7]
        return [("allreduce", "sum", whole((5, 3), np.float64)), ("allreduce", "sum", whole(big, F4)),
                ("allreduce", "sum", whole(big // 2, np.int64)), ("allreduce", "max", x),
                ("allgather", 0, whole((r + 1, 4), F4)), ("allgather", 1, whole((3, big // 3 + r), F4)),
                ("reducescatter", 0, whole((7, 2), np.float64)), ("reducescatter", 0, whole((big // 8, 8), F4))]

    def calls(comm, r):
        return [getattr(comm, kind)(x, arg, f"op{n}", 4) for n, (kind, arg, x) in enumerate(inputs(r))]

    got = _ring(k, calls)
    xs = [inputs(r) for r in range(k)]
    for n, (kind, arg, _) in enumerate(xs[0]):
        parts = [xs[r][n][2] for r in range(k)]
        if kind == "allgather":
            want = np.concatenate(parts, axis=arg)
        else:
            want = parts[0]
            for p in parts[1:]:
                want = np.maximum(want, p) if arg == "max" else want + p
        for r in range(k):
            w = np.array_split(want, k, axis=arg)[r] if kind == "reducescatter" else want
            assert got[r][n].dtype == w.dtype and got[r][n].shape == w.shape, (n, kind)
            assert got[r][n].tobytes() == w.tobytes(), f"call {n} ({kind} {arg}) on rank {r}"
