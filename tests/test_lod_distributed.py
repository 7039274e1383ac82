"""LoD across processes (#15, slice 2): LoD tensors on the wire (NOTE(lod-frame) in
comm/framing.py), checked against the receiving var's lod_level (NOTE(lod-expect) in
comm/expect.py), and a bag-of-words classifier with LoD ids, an ``is_sparse`` and an
``is_distributed`` embedding trained 2 trainers + 2 pservers: equal to one process in sync mode.

The cluster runs in one process over the loopback transport (tests/inproc.py's way), each
trainer fed its contiguous half of every batch's sentences as a LoDTensor of its own.
"""
import threading

import numpy as np
import pytest

import placegroup as fluid
from placegroup.comm.loopback import LoopbackNetwork
from placegroup.values import LoDTensor
from tests.conftest import TIME_FACTOR

V, D, C = 40, 6, 3


def _batches(steps: int, batch: int = 8, seed: int = 3) -> list:
    """``steps`` batches of ``(word ids, class)``: 1..6 ids each, one of them a key word of the class."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        samples = []
        for _ in range(batch):
            c = int(rng.integers(0, C))
            words = [int(w) for w in rng.integers(C * 3, V, size=int(rng.integers(0, 6)))]
            words.insert(int(rng.integers(0, len(words) + 1)), 3 * c + int(rng.integers(0, 3)))
            samples.append((words, c))
        out.append(samples)
    return out


def _feed(samples) -> dict:
    ids = np.array([w for s, _ in samples for w in s], "int64").reshape(-1, 1)
    return {"words": LoDTensor.from_lengths(ids, [[len(s) for s, _ in samples]]),
            "label": np.array([[c] for _, c in samples], "int64")}


def build_bow():
    """words (lod_level 1) -> an is_sparse and an is_distributed embedding -> sequence_pool sum
    and average -> fc softmax -> cross entropy, SGD. Returns (main, startup, loss, emb output)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        startup.random_seed = 7
        words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
        label = fluid.layers.data("label", [1], dtype="int64")
        sparse = fluid.layers.embedding(words, size=[V, D], is_sparse=True,
                                        param_attr=fluid.ParamAttr(name="emb_sparse"))
        dist = fluid.layers.embedding(words, size=[V, D], is_sparse=True, is_distributed=True,
                                      param_attr=fluid.ParamAttr(name="emb_dist"))
        h = fluid.layers.concat([fluid.layers.sequence_pool(sparse, "sum"),
                                 fluid.layers.sequence_pool(dist, "average")], axis=1)
        probs = fluid.layers.fc(h, C, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(probs, label))
        fluid.optimizer.SGD(0.5).minimize(loss)
    return main, startup, loss, dist


def run_local(batches) -> list:
    main, startup, loss, _ = build_bow()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return [float(exe.run(main, feed=_feed(b), fetch_list=[loss], scope=scope)[0][0]) for b in batches]


def run_2x2(batches, sync_mode: bool = True, fetch_emb: bool = False) -> dict:
    """2 trainers + 2 pservers over one LoopbackNetwork; trainer t takes the t-th half of every
    batch. Returns trainer id -> ([loss per step], [the lookup's output per step if fetch_emb])."""
    main, startup, loss, emb = build_bow()
    ps = ["127.0.0.1:7300", "127.0.0.1:7301"]
    net = LoopbackNetwork()
    out, errors = {}, []

    def programs(role, i):
        t = fluid.DistributeTranspiler()
        t.transpile(trainer_id=i if role == "trainer" else 0, program=main, startup_program=startup,
                    pservers=",".join(ps), trainers=2, sync_mode=sync_mode)
        ep = ps[i] if role == "pserver" else None
        return t.get_program(ep, role), t.get_startup_program(ep, role)

    def pserver(prog, sprog):
        exe, scope = fluid.Executor(network=net), fluid.Scope()
        exe.run(sprog, scope=scope)
        exe.run(prog, scope=scope)
        exe.close()

    def trainer(k, prog, sprog):
        exe, scope = fluid.Executor(network=net), fluid.Scope()
        exe.run(sprog, scope=scope)
        losses, embs = [], []
        for b in batches:
            half = b[k * len(b) // 2:(k + 1) * len(b) // 2]
            got = exe.run(prog, feed=_feed(half), fetch_list=[loss] + ([emb] if fetch_emb else []),
                          scope=scope, return_numpy=False)
            losses.append(float(np.array(got[0])[0]))
            embs += got[1:]
        out[k] = (losses, embs)
        exe.close()

    def guarded(fn, *a):
        try:
            fn(*a)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)

    jobs = [threading.Thread(target=guarded, args=(pserver, *programs("pserver", i)), daemon=True) for i in range(2)]
    jobs += [threading.Thread(target=guarded, args=(trainer, k, *programs("trainer", k)), daemon=True)
             for k in range(2)]
    for j in jobs:
        j.start()
    for j in jobs:
        j.join(60 * TIME_FACTOR)
    if errors:
        raise errors[0]
    assert not any(j.is_alive() for j in jobs), "the 2x2 cluster did not finish"
    return out


def test_bow_with_lod_ids_2x2_sync_equals_one_process():
    """Sparse and distributed lookups of LoD ids, pooled: the mean of the two trainers' losses
    is the one-process loss at every step (the batch split evenly by examples)."""
    batches = _batches(12)
    local = run_local(batches)
    got = run_2x2(batches)
    mean = (np.array(got[0][0]) + np.array(got[1][0])) / 2
    np.testing.assert_allclose(mean, local, rtol=1e-5)
    assert local[-1] < local[0] * 0.8  # it learns


def test_the_distributed_lookup_keeps_the_ids_lod():
    """The lookup of prefetched rows gives each trainer its own sentences' LoD back."""
    batches = _batches(2)
    got = run_2x2(batches, fetch_emb=True)
    for k in (0, 1):
        for b, e in zip(batches, got[k][1]):
            half = b[k * len(b) // 2:(k + 1) * len(b) // 2]
            assert isinstance(e, LoDTensor)
            assert e.recursive_sequence_lengths() == [[len(s) for s, _ in half]]
            assert np.array(e).shape == (sum(len(s) for s, _ in half), D)


def test_bow_with_lod_ids_trains_in_async_mode():
    batches = _batches(30)
    got = run_2x2(batches, sync_mode=False)
    for k in (0, 1):
        losses = got[k][0]
        assert np.isfinite(losses).all()
        assert np.mean(losses[-5:]) < np.mean(losses[:5])
