"""The executor's rules in one process: version policies (sync, bounded staleness, async,
merge_steps rounds), edge rules (broadcast, gather, each, collective, fetch) and the
equivalence contract, over the loopback transport (tests/inproc.py).

Distributed sync training with N trainers and M pservers, trainer t fed the t-th contiguous
1/N of every batch, gives the parameters one process gives on the whole batch, and the mean
of the trainers' losses is its loss, to rtol 1e-5. The same runs over real processes and
sockets are in tests/test_distributed.py.
"""
import numpy as np
import pytest

from tests.dist import train_sparse
from tests.dist.train_model import build, data
from tests.inproc import run_cluster, run_local

TOL = dict(rtol=1e-5, atol=1e-6)


def model(name: str, optimizer: str):
    return lambda: build(name, optimizer)


def check_equivalent(run, ref, sharded=()):
    """Mean loss and every parameter of every trainer against one process (``sharded``:
    column shards, put together first)."""
    n = len(run.losses)
    np.testing.assert_allclose(np.mean([run.losses[k] for k in range(n)], axis=0), ref.losses[0], **TOL)
    for name, want in ref.params[0].items():
        if name in sharded:
            whole = np.concatenate([run.params[k][name] for k in range(n)], axis=-1)
            np.testing.assert_allclose(whole, want, err_msg=name, **TOL)
            assert run.params[0][name].shape[-1] == want.shape[-1] // n  # each holds its shard only
            continue
        for k in range(n):
            np.testing.assert_allclose(run.params[k][name], want, err_msg=name, **TOL)


@pytest.mark.parametrize("name, optimizer, trainers, pservers, steps", [
    ("linear", "sgd", 2, 2, 8),
    ("wide", "sgd", 2, 3, 6),        # parameter slicing: fc_1.w_0 in 2 blocks over 3 pservers
    ("wide", "momentum", 2, 2, 12),  # with piecewise_decay on the pservers
    ("wide", "adam", 2, 2, 12),
    ("linear", "sgd", 3, 1, 4),
])
def test_sync_equals_one_process(name, optimizer, trainers, pservers, steps):
    batches = data(name, steps, 30)
    check_equivalent(run_cluster(model(name, optimizer), trainers, pservers, batches),
                     run_local(model(name, optimizer), batches))


@pytest.mark.parametrize("optimizer, trainers", [("sgd", 2), ("adam", 2), ("sgd", 3)])
def test_collective_data_parallel_equals_one_process(optimizer, trainers):
    """No pservers: gradients all-reduced among the trainers (the collective rule)."""
    batches = data("wide", 5, 30)
    check_equivalent(run_cluster(model("wide", optimizer), trainers, 0, batches),
                     run_local(model("wide", optimizer), batches))


@pytest.mark.parametrize("trainers, pservers, optimizer, fused", [
    (2, 0, "sgd", False), (2, 0, "adam", True), (4, 0, "momentum", False), (2, 2, "adam", True),
    (2, 2, "momentum", True)])
def test_model_parallel_fc_equals_one_process(trainers, pservers, optimizer, fused):
    """The last fc column-sliced over the trainers, with the whole logits gathered (unfused) or
    never made (fused), with or without pservers for the rest."""
    batches = data("mp", 5, 24)
    run = run_cluster(model("mp", optimizer), trainers, pservers, batches, endpoints=True,
                      **({} if fused else {"config": _unfused()}))
    check_equivalent(run, run_local(model("mp", optimizer), batches), sharded=("fc_1.w_0", "fc_1.b_0"))


def _unfused():
    import placegroup as fluid

    return fluid.DistributeTranspilerConfig(mp_fused=False)


def test_a_trainer_fetches_a_pserver_held_var_of_its_step():
    """The fetch rule: the merged gradient a pserver holds, as one process computes it."""
    batches = data("linear", 5, 20)
    run = run_cluster(model("linear", "sgd"), 2, 2, batches, fetch=("fc_0.b_0@GRAD@MERGED",))
    ref = run_local(model("linear", "sgd"), batches, fetch=("fc_0.b_0@GRAD",))
    for k in range(2):
        np.testing.assert_allclose(np.array([f[0] for f in run.fetched[k]]),
                                   np.array([f[0] for f in ref.fetched[0]]), **TOL)


def test_a_trainer_that_runs_out_of_data_does_not_block_the_others():
    run = run_cluster(model("linear", "sgd"), 2, 2, data("linear", 8, 20), steps={1: 3})
    assert len(run.losses[0]) == 8 and len(run.losses[1]) == 3


def test_async_with_one_trainer_is_the_one_process_run():
    """Async: each gradient applied alone as it arrives (the each rule); one trainer is exact."""
    batches = data("wide", 6, 20)
    check_equivalent(run_cluster(model("wide", "momentum"), 1, 2, batches, sync_mode=False),
                     run_local(model("wide", "momentum"), batches))


def test_async_two_trainers_train_without_waiting_for_each_other():
    run = run_cluster(model("linear", "sgd"), 2, 2, data("linear", 40, 20), sync_mode=False, steps={1: 10})
    first = np.array(run.losses[0])
    assert len(first) == 40 and len(run.losses[1]) == 10
    assert first[-10:].mean() < 0.9 * first[:10].mean()  # it trains
    assert sum(sum(s.values()) for s in run.pserver_staleness.values()) > 0  # each pserver counted its updates


@pytest.mark.parametrize("k", [1, 3])
def test_async_with_staleness_reads_parameters_at_most_k_updates_old(k):
    """Async with staleness k (NOTE(async-staleness)): a trainer does not wait for the answer
    to its last update; each read is at most k of its own updates behind, and it still trains."""
    batches = data("linear", 60, 20)
    run = run_cluster(model("linear", "sgd"), 2, 2, batches, sync_mode=False, staleness=k)
    for t in (0, 1):
        seen = run.staleness_seen[t]
        assert max(seen) <= k and sum(seen.values()) == 2 * 60, seen  # two parameters, every step
        losses = np.array(run.losses[t])
        assert np.isfinite(losses).all() and losses[-10:].mean() < 0.8 * losses[:10].mean()


def test_async_with_staleness_zero_is_async():
    batches = data("wide", 6, 20)
    check_equivalent(run_cluster(model("wide", "momentum"), 1, 2, batches, sync_mode=False, staleness=0),
                     run_local(model("wide", "momentum"), batches))


@pytest.mark.parametrize("merge", [1, 2])
def test_bounded_staleness_keeps_a_fast_trainer_within_k(merge):
    """SSP(k=2): with trainer 1 slowed down, trainer 0 reads parameters up to 2 versions (rounds)
    old, never more; it reads them once per round."""
    run = run_cluster(model("linear", "sgd"), 2, 2, data("linear", 30, 20), staleness=2, slow={1: 0.02},
                      merge_steps=merge)
    seen = run.staleness_seen[0]
    assert max(seen) <= 2 and max(seen) > 0, seen
    assert sum(seen.values()) == 2 * 30 // merge  # two loop-carried parameters


def test_staleness_zero_is_sync_to_the_bit():
    batches = data("linear", 6, 20)
    a = run_cluster(model("linear", "sgd"), 2, 2, batches)
    b = run_cluster(model("linear", "sgd"), 2, 2, batches, staleness=0)
    assert a.losses == b.losses


def _check_merged(trainers, pservers, m, name, optimizer, sharded=(), **kw):
    """``trainers`` x ``m`` steps of ``batch / trainers`` examples each equal one process taking
    one step on the ``m * batch`` examples together."""
    batches = data(name, 4 * m, 24)
    run = run_cluster(model(name, optimizer), trainers, pservers, batches, merge_steps=m,
                      endpoints=name == "mp", **kw)
    merged = [tuple(np.concatenate([b[i] for b in batches[r * m:(r + 1) * m]]) for i in range(2))
              for r in range(4)]
    ref = run_local(model(name, optimizer), merged)
    for pname, want in ref.params[0].items():
        got = ([np.concatenate([run.params[k][pname] for k in range(trainers)], axis=-1)] if pname in sharded
               else [run.params[k][pname] for k in range(trainers)])
        for g in got:
            np.testing.assert_allclose(g, want, err_msg=pname, **TOL)


@pytest.mark.parametrize("trainers, pservers, optimizer", [
    (2, 2, "sgd"), (2, 2, "adam"), (2, 0, "sgd"), (2, 0, "adam"), (1, 0, "momentum"), (2, 3, "momentum")])
def test_merge_steps_equals_one_step_on_the_merged_batch(trainers, pservers, optimizer):
    """merge_steps as ops (accumulate + round-end), with pservers and without."""
    _check_merged(trainers, pservers, 2 if pservers else 3, "wide", optimizer)


@pytest.mark.parametrize("pservers", [0, 2])
def test_merge_steps_with_model_parallel_shards(pservers):
    _check_merged(2, pservers, 2, "mp", "adam", sharded=("fc_1.w_0", "fc_1.b_0"))


def test_merge_steps_in_async_mode_with_one_trainer():
    """Async: each round's mean is one update, applied as it arrives; the schedule counts them."""
    _check_merged(1, 2, 2, "wide", "momentum", sync_mode=False)


def sparse(optimizer: str, vocab: int = 1000, lazy: bool = False, distributed: bool = True):
    def make():
        cost = train_sparse.build(vocab, 8, optimizer, lazy, distributed)
        block = cost.block
        return [block.var("ids"), block.var("label")], cost
    return make


@pytest.mark.parametrize("optimizer, pservers, vocab, lazy, trainers, kw", [
    ("sgd", 2, 1000, False, 2, {}), ("momentum", 2, 1000, False, 2, {}), ("adagrad", 2, 1000, False, 2, {}),
    ("adam", 2, 1000, False, 2, {}), ("adam", 3, 301, True, 2, {}),
    ("adagrad", 2, 1000, False, 1, {"sync_mode": False})])
def test_sparse_table_on_pservers_equals_one_process(optimizer, pservers, vocab, lazy, trainers, kw):
    """A distributed table: rows prefetched by id from their shards (each edges), SelectedRows
    gradients; the table, put back together from the pservers' shards, equals one process's;
    it never exists on a trainer."""
    batches = train_sparse.batches(vocab, 8, 32)
    run = run_cluster(sparse(optimizer, vocab, lazy), trainers, pservers, batches, **kw)
    ref = run_local(sparse(optimizer, vocab, lazy), batches)
    np.testing.assert_allclose(np.mean([run.losses[k] for k in range(trainers)], axis=0), ref.losses[0], **TOL)
    for k in range(trainers):
        assert "emb" not in run.params[k]
        for name in ("fc_0.w_0", "fc_0.b_0"):
            np.testing.assert_allclose(run.params[k][name], ref.params[0][name], err_msg=name, **TOL)
    table = np.zeros_like(ref.params[0]["emb"])
    for k in range(pservers):
        table[k::pservers] = run.pserver_params[k][f"emb.shard{k}"]
    np.testing.assert_allclose(table, ref.params[0]["emb"], **TOL)


@pytest.mark.parametrize("optimizer, pservers", [("momentum", 2), ("adam", 2), ("adam", 1)])
def test_a_sparse_table_sliced_into_blocks_when_not_distributed(optimizer, pservers):
    """embedding(is_sparse=True) alone: an ordinary sliced parameter, its gradient SelectedRows.
    Only lookups read it, so the trainers prefetch the rows they look up from its blocks rather
    than pull it whole (NOTE(block-prefetch)): the trainers hold no copy, and the blocks, put
    back together from the pservers, equal one process's table. One pserver holds it whole, as
    one block."""
    batches = train_sparse.batches(3000, 8, 32)
    run = run_cluster(sparse(optimizer, 3000, distributed=False), 2, pservers, batches, fetch=("emb",))
    ref = run_local(sparse(optimizer, 3000, distributed=False), batches, fetch=("emb",))
    np.testing.assert_allclose(np.mean([run.losses[k] for k in range(2)], axis=0), ref.losses[0], **TOL)
    for k in range(2):
        assert "emb" not in run.params[k]
        for step in (0, 7):  # fetched, the table is asked of the pservers (NOTE(save-gather))
            np.testing.assert_allclose(run.fetched[k][step][0], ref.fetched[0][step][0], err_msg=f"emb at {step}", **TOL)
        for name in ("fc_0.w_0", "fc_0.b_0"):
            np.testing.assert_allclose(run.params[k][name], ref.params[0][name], err_msg=name, **TOL)
    held = {n: v for params in run.pserver_params.values() for n, v in params.items() if n.startswith("emb")
            and n.rsplit(".", 1)[-1] in ("emb", "block0", "block1")}
    names = ["emb.block0", "emb.block1"] if pservers > 1 else ["emb"]
    assert sorted(held) == names
    np.testing.assert_allclose(np.concatenate([held[n] for n in names]), ref.params[0]["emb"], **TOL)


def test_a_trainer_saves_the_table_it_prefetches_rows_of(tmp_path):
    """NOTE(save-gather): Fluid's CTR scripts save on trainer 0 after training
    (``save_persistables(exe, dir, fluid.default_main_program())``, or an inference model of the
    trainer program). The trainer holds no copy of a table it prefetches rows of, so it asks the
    pservers for its blocks: the saved table is the trained one, and the inference model serves
    it in one process."""
    import placegroup as fluid

    batches = train_sparse.batches(3000, 8, 32)
    saved = {}

    def after(k, exe, prog, scope, main):
        if k == 0:
            with fluid.scope_guard(scope):
                saved["names"] = fluid.io.save_persistables(exe, str(tmp_path / "persist"), main)
                block = prog.global_block()
                fluid.io.save_inference_model(str(tmp_path / "infer"), ["ids"], [block.var("fc_0.tmp_1")],
                                              exe, prog)

    run_cluster(sparse("adam", 3000, distributed=False), 2, 2, batches, after=after)
    ref = run_local(sparse("adam", 3000, distributed=False), batches)
    assert "emb" in saved["names"]
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        main = fluid.Program()
        emb = main.global_block().create_parameter("emb", [3000, 8], "float32")
        fluid.io.load_vars(exe, str(tmp_path / "persist"), main, vars=[emb])
        np.testing.assert_allclose(np.array(fluid.global_scope().find_var("emb").get_tensor()),
                                   ref.params[0]["emb"], **TOL)
    with fluid.scope_guard(fluid.Scope()):
        program, _, targets = fluid.io.load_inference_model(str(tmp_path / "infer"), exe)
        assert {op.type for op in program.global_block().ops} & {"split_ids", "shard_lookup"} == set()
        ids = np.arange(0, 3000, 97).reshape(-1, 1).astype(np.int64)
        out, = exe.run(program, feed={"ids": ids}, fetch_list=targets)
        want = ref.params[0]["emb"][ids.ravel()] @ ref.params[0]["fc_0.w_0"] + ref.params[0]["fc_0.b_0"]
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


_MODES = [({}, 2), ({"sync_mode": False}, 2), ({"merge_steps": 2}, 2), ({"staleness": 1}, 2),
          ({"sync_mode": False, "staleness": 4}, 2), ({}, 0)]


@pytest.mark.parametrize("kw, pservers", _MODES,
                         ids=["sync", "async", "merge_steps", "bounded", "async-bounded", "allreduce"])
def test_every_message_on_the_wire_is_one_dump_lists(monkeypatch, kw, pservers):
    """A recording of the wire: every message any executor of a run hands its transport (values
    by var, collective parts by phase, hello, done, fetch requests and answers) is one of the
    transfers ``placegroup dump`` lists, with its kind; and every value, hello and done listed
    is sent. Where a policy batches (an async pserver's answers, a bounded-async trainer's
    gradients), dump says so, and the recording shows it."""
    import threading

    import placegroup as fluid
    from placegroup.comm.framing import unpack
    from placegroup.comm.loopback import LoopbackTransport
    from placegroup.executor.transfers import transfers

    sent, lock = set(), threading.Lock()
    real = LoopbackTransport.send
    kinds = {"values": None, "hello": "hello", "done": "done", "fetch": "fetch request", "error": "error"}

    def spy(self, peer, frames):
        m = unpack(frames)
        with lock:
            if m.kind != "values":
                sent.add((m.src, peer, "-" if m.kind != "fetch" else "any var a pserver holds", kinds[m.kind]))
            for var, _, _ in m.vals:
                if isinstance(var, tuple):  # a collective's part: (op tag + call, phase + ring step)
                    var = f"{var[0]}:{var[1].rstrip('0123456789.')}"
                sent.add((m.src, peer, var, None))
        return real(self, peer, frames)

    monkeypatch.setattr(LoopbackTransport, "send", spy)
    build = model("linear", "sgd")
    fetch = ("fc_0.w_0",) if pservers else ()   # held on a pserver: fetched from it
    run_cluster(build, 2, pservers, data("linear", 6, 20), fetch=fetch, endpoints=not pservers, **kw)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        startup.random_seed = 7
        build()
    t = fluid.DistributeTranspiler()
    ps = ",".join(f"127.0.0.1:{7100 + i}" for i in range(pservers))
    t.transpile(0, program=main, startup_program=startup, pservers=ps,
                trainers=2 if pservers else "127.0.0.1:7200,127.0.0.1:7201", **kw)
    listed = transfers(t.get_program("127.0.0.1:7200" if not pservers else None, "trainer"))
    control = {"hello", "done", "error", "fetch request"}
    by_key = {(x.src, d, x.var, x.kind if x.kind in control else None) for x in listed for d in x.dst}
    for key in sorted(sent, key=str):
        assert key in by_key, f"{key[0]} -> {key[1]} sent {key[2]} ({key[3] or 'values'}), which dump does not list"
    values = {(x.src, d, x.var) for x in listed for d in x.dst
              if x.kind in ("hello", "done") or (x.when != "when asked" and x.kind not in ("error", "fetch request",
                                                                                           "collective"))}
    assert values <= {(s, d, v) for s, d, v, _ in sent}, values - {(s, d, v) for s, d, v, _ in sent}
    assert {"hello", "done" if pservers else "hello"} <= {c for *_, c in sent}
    if pservers:
        assert any(x.kind == "fetch" and x.var == "fc_0.w_0" for x in listed)
    else:
        assert any(x.kind == "collective" for x in listed)
    by_policy = " ".join(x.when for x in listed)
    if kw.get("staleness") and kw.get("sync_mode") is False:
        assert "leaving every 2 steps in one message per peer" in by_policy
        assert "only the newest is sent" in by_policy
    if kw.get("sync_mode") is False:
        assert "one per pass" in by_policy


def test_a_regularized_sparse_embedding_on_pservers_equals_one_process():
    """L2Decay on embedding(is_sparse=True): the decayed gradient is dense (as in Fluid), and
    the distributed run still equals one process."""
    import placegroup as fluid

    def make():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[3000, 8], is_sparse=True,
                                     param_attr=fluid.ParamAttr(name="emb", regularizer=fluid.regularizer.L2Decay(0.01)))
        cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(fluid.layers.fc(emb, 2), label))
        fluid.optimizer.Momentum(0.1, momentum=0.9).minimize(cost)
        return [ids, label], cost

    batches = train_sparse.batches(3000, 6, 32)
    check_equivalent(run_cluster(make, 2, 2, batches), run_local(make, batches))


def model_with(make_optimizer, hidden: int = 1000):
    """``data("wide", ...)``'s regression (10 -> fc(hidden, relu) -> fc(1)) trained by the
    optimizer ``make_optimizer()`` returns (made inside the build, in its programs)."""
    def build_it():
        import placegroup as fluid

        x = fluid.layers.data(name="x", shape=[10])
        y = fluid.layers.data(name="y", shape=[1])
        pred = fluid.layers.fc(input=fluid.layers.fc(input=x, size=hidden, act="relu"), size=1)
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
        make_optimizer().minimize(cost)
        return [x, y], cost
    return build_it


def _fluid_optimizer(name: str, *args, **kw):
    import placegroup as fluid

    return lambda: getattr(fluid.optimizer, name)(*args, **kw)


@pytest.mark.parametrize("make, hidden", [
    (_fluid_optimizer("RMSProp", 0.01, momentum=0.5, centered=True), 1000),  # fc_0.w_0 in 2 blocks
    (_fluid_optimizer("Adamax", 0.01), 1000),
    (_fluid_optimizer("Adadelta", 0.01), 1000),
    # 16: with fc_0's 10000 weights some gradients are ~1e-5 and cancel, where
    # g / (sqrt(0.05 g²) + 1e-6) turns the float32 summation order into 1e-3 relative differences
    (_fluid_optimizer("DecayedAdagrad", 0.05), 16),
    (_fluid_optimizer("Ftrl", 0.05, l1=0.01, l2=0.01), 1000),
    (_fluid_optimizer("Lamb", 0.01), 16),  # unsliced: NOTE(lamb-norms)
], ids=["rmsprop", "adamax", "adadelta", "decayed_adagrad", "ftrl", "lamb"])
def test_sync_equals_one_process_for_each_new_optimizer(make, hidden):
    """Issue 14, item 6: each new optimizer's op placed, sliced and run on 2 pservers by the
    passes as they are (they ask its OpDef), 2 trainers = one process."""
    batches = data("wide", 6, 30)
    check_equivalent(run_cluster(model_with(make, hidden), 2, 2, batches),
                     run_local(model_with(make, hidden), batches))
