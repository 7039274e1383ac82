"""The version policies, as tables: which version an input waits for, which a value is sent
as, which steps end a round (executor/policy.py)."""
import pytest

from placegroup.executor.policy import CARRIED, CONSTANT, SAME, Async, Bounded, Rounds, Sync, policy_for
from placegroup.ir.cluster import ClusterSchema


@pytest.mark.parametrize("policy, when, step, version", [
    (Sync(), SAME, 5, 5), (Sync(), CARRIED, 5, 4), (Sync(), CARRIED, 0, -1), (Sync(), CONSTANT, 5, -1),
    (Async(), SAME, 3, 3), (Async(), CARRIED, 3, 2), (Bounded(2), CARRIED, 7, 6),
    # rounds of 3: steps 0-2 are round 0, 3-5 round 1
    (Rounds(3, Sync()), CARRIED, 3, 0), (Rounds(3, Sync()), CARRIED, 0, -1),
    (Rounds(3, Sync()), SAME, 5, 1), (Rounds(3, Sync()), SAME, 4, None),  # mid-round: nothing new
])
def test_which_version_an_input_waits_for(policy, when, step, version):
    assert policy.wanted(when, step) == version


def test_rounds_tag_what_they_send_with_the_round_and_end_every_m_steps():
    r = Rounds(3, Sync())
    assert [r.wire(s) for s in range(7)] == [0, 0, 0, 1, 1, 1, 2]
    assert [r.round_end(s) for s in range(7)] == [False, False, True, False, False, True, False]
    assert r.wire(-1) == -1 and r.round_end(-1)  # the startup program
    assert all(Sync().round_end(s) for s in range(-1, 5))


def test_bounded_staleness_allows_k_versions_behind_and_zero_is_sync():
    assert Bounded(2).oldest_allowed(10) == 8 and Bounded(0).oldest_allowed(10) == 10
    assert Rounds(2, Bounded(1)).oldest_allowed(4) == 3
    with pytest.raises(ValueError, match="staleness must be >= 0"):
        Bounded(-1)


def test_async_answers_with_the_instance_version_and_waits_for_one():
    assert Async().reply_version(step=9, instance_version=4) == 4 and Sync().reply_version(9, 4) == 9


class _FakeMailbox:
    """What a policy's each-edge hooks read of a mailbox: the instances waiting, by source."""

    def __init__(self, waiting: dict) -> None:
        self.waiting = waiting   # (var, source) -> versions waiting, ascending
        self.flushed: list = []

    def pending(self, var, src):
        vs = self.waiting.get((var, src))
        return (var, vs[0], src) if vs else None

    def waiting_from(self, vars_):
        return {src for (var, src), vs in self.waiting.items() if vs and var in vars_}

    def take_any(self, keys, timeout, describe, any_version=False, hold=0.0):
        for k in keys:
            hit = self.pending(k[0], k[2])
            if hit is not None:
                self.waiting[(k[0], k[2])].pop(0)
                return hit, f"value of {hit}"
        raise AssertionError("the fake has nothing waiting")

    def flush(self, peers=None, but=(), limit=None):
        self.flushed.append((peers, set(but), limit))


class _FakeIO:
    me, xp, timeout = "pserver@a:1", None, None

    def __init__(self, mailbox) -> None:
        self.mailbox = mailbox


class _Plan:
    def __init__(self, *each) -> None:
        self.ops = [type("P", (), {"each": e, "index": i})() for i, e in enumerate(each)]


def test_async_takes_one_instance_per_pass_in_each_trainers_own_order():
    from placegroup.ir.edges import InEdge

    grad = InEdge("Grad", "w@GRAD", "each", ("trainer:0", "trainer:1"), SAME)
    ids = InEdge("Ids", "ids", "each", ("trainer:0", "trainer:1"), SAME)
    policy = Async()
    policy.serving(_Plan(grad, ids))
    # trainer 0 sent its gradient of step 3 and its ids of step 4; trainer 1 only ids of step 2
    mb = _FakeMailbox({("w@GRAD", "trainer:0"): [3], ("ids", "trainer:0"): [4], ("ids", "trainer:1"): [2]})
    io = _FakeIO(mb)
    keys = [("ids", 0, "trainer:0"), ("ids", 0, "trainer:1")]
    # trainer 0's ids wait until its older gradient is applied: it reads its own update
    assert policy.instances(io, keys) == [("ids", 0, "trainer:1")]
    key, _ = policy.next_instance(io, policy.instances(io, keys), 0, None)
    assert key == ("ids", 2, "trainer:1")
    # the answers leave for every trainer but those with instances still waiting here
    assert mb.flushed == [(None, {"trainer:0", "trainer:1"}, 16)]
    assert policy.next_instance(io, keys, 1, None) is None  # one per pass
    policy.answered(io, type("Op", (), {"index": 1})(), "trainer:1")
    assert policy.staleness_seen == {0: 1}
    assert Sync().pass_ready(io, 0) and Sync().instances(io, keys) == keys


@pytest.mark.parametrize("cluster, role, name", [
    (None, "trainer", "sync"),
    (ClusterSchema(trainers=2, pservers=["a:1"]), "trainer", "sync"),
    (ClusterSchema(trainers=2, pservers=["a:1"], staleness=2), "trainer", "bounded(2)"),
    (ClusterSchema(trainers=2, pservers=["a:1"], sync_mode=False), "pserver", "async"),
    (ClusterSchema(trainers=2, pservers=["a:1"], merge_steps=2, staleness=1), "trainer", "rounds(2, bounded(1))"),
    (ClusterSchema(trainers=2, pservers=["a:1"], merge_steps=2), "pserver", "sync"),  # a pserver counts rounds
    # async with staleness: the trainer reads as SSP does and sends every ceil(k/2) steps
    (ClusterSchema(trainers=2, pservers=["a:1"], sync_mode=False, staleness=8), "trainer",
     "bounded(8, sent every 4 steps)"),
    (ClusterSchema(trainers=2, pservers=["a:1"], sync_mode=False, staleness=1), "trainer", "bounded(1)"),
    (ClusterSchema(trainers=2, pservers=["a:1"], sync_mode=False, staleness=8), "pserver", "async"),
])
def test_each_executor_gets_its_mode(cluster, role, name):
    assert policy_for(cluster, role).name == name


def test_an_async_trainer_with_staleness_sends_every_half_bound():
    p = policy_for(ClusterSchema(trainers=2, pservers=["a:1"], sync_mode=False, staleness=8), "trainer")
    assert [s for s in range(12) if p.send_now(s)] == [3, 7, 11]
    assert p.oldest_allowed(20) == 12
    mb = _FakeMailbox({})
    for s in range(4):
        p.end_step(_FakeIO(mb), s)
        Sync().end_step(_FakeIO(mb), s)   # sync leaves it to the next wait
    assert mb.flushed == [(None, set(), None)]  # after step 3 only
