"""One distributed table shared by several id slots (a Fluid 1.x CTR script's
``SparseFeatFactors``): one prefetch for all its lookups, the lookups' SelectedRows gradients summed into
the table's gradient, which is cut into shards. 2 trainers + 2 pservers in sync mode equal one
process, over the loopback transport (tests/inproc.py)."""
import numpy as np
import pytest

import placegroup as fluid
from placegroup.values import LoDTensor
from tests.inproc import run_cluster, run_local
from tests.test_modes import TOL, check_equivalent

VOCAB, DIM, SLOTS = 500, 4, 3
TABLE = "SparseFeatFactors"


def _model(optimizer: str):
    def make():
        slots = [fluid.layers.data(name=f"slot{i}", shape=[1], dtype="int64") for i in range(SLOTS)]
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        embs = [fluid.layers.embedding(input=s, size=[VOCAB, DIM], is_sparse=True, is_distributed=True,
                                       param_attr=fluid.ParamAttr(name=TABLE,
                                                                  initializer=fluid.initializer.Uniform(-0.5, 0.5)))
                for s in slots]
        predict = fluid.layers.fc(input=fluid.layers.concat(embs, axis=1), size=2, act="softmax")
        cost = fluid.layers.mean(fluid.layers.cross_entropy(input=predict, label=label))
        {"sgd": lambda: fluid.optimizer.SGD(0.5), "adagrad": lambda: fluid.optimizer.Adagrad(0.2)}[optimizer]().minimize(cost)
        block = cost.block
        return [*(block.var(f"slot{i}") for i in range(SLOTS)), block.var("label")], cost
    return make


def _batches(steps: int, batch: int) -> list:
    rng = np.random.default_rng(3)
    out = []
    for _ in range(steps):
        slots = [((rng.zipf(1.3, size=(batch, 1)) - 1) % VOCAB).astype(np.int64) for _ in range(SLOTS)]
        label = ((slots[0] + 3 * slots[1] + slots[2]) % 5 < 2).astype(np.int64)
        out.append((*slots, label))
    return out


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
def test_a_table_shared_by_3_slots_on_2_pservers_equals_one_process(optimizer):
    batches = _batches(6, 32)
    run = run_cluster(_model(optimizer), 2, 2, batches)
    ref = run_local(_model(optimizer), batches)
    want = {k: v for k, v in ref.params[0].items() if k != TABLE}
    check_equivalent(run, type(ref)(ref.losses, {0: want}, ref.fetched, {}, {}))
    table = np.zeros_like(ref.params[0][TABLE])
    for k in range(2):
        assert TABLE not in run.params[k]  # never whole on a trainer
        table[k::2] = run.pserver_params[k][f"{TABLE}.shard{k}"]
    np.testing.assert_allclose(table, ref.params[0][TABLE], **TOL)


def _trainer_ops(build):
    from tests.inproc import build_programs
    main, startup, _, _ = build_programs(build)
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id=0, program=main, startup_program=startup,
                pservers="127.0.0.1:7100,127.0.0.1:7101", trainers=2)
    return t.get_trainer_program().global_block().ops


def test_fed_slots_share_one_prefetch():
    """NOTE(shared-table): every slot is fed, so one split_ids takes all of them, each distinct
    id is fetched once a step, and every lookup reads the same prefetched rows."""
    ops = _trainer_ops(_model("sgd"))
    lookups = [op for op in ops if op.type == "lookup_table"]
    assert [op.input("W") for op in lookups] == [[f"{TABLE}@PREFETCH"]] * SLOTS
    split = [op for op in ops if op.type == "split_ids"]
    assert len(split) == 1 and split[0].input("Ids") == [f"slot{i}" for i in range(SLOTS)]
    assert sum(op.type == "shard_lookup" for op in ops) == 2
    assert sum(op.type == "shard_selected_rows" for op in ops) == 1


def test_ids_computed_after_a_lookup_get_their_own_prefetch():
    """A lookup whose ids an op computes after an earlier lookup cannot share the first
    prefetch: each lookup prefetches its own ids right before it."""
    def make():
        a = fluid.layers.data(name="a", shape=[1], dtype="int64")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        attr = fluid.ParamAttr(name=TABLE, initializer=fluid.initializer.Uniform(-0.5, 0.5))
        first = fluid.layers.embedding(input=a, size=[VOCAB, DIM], is_sparse=True, is_distributed=True, param_attr=attr)
        b = fluid.layers.elementwise_add(a, fluid.layers.fill_constant([1], "int64", 1))
        second = fluid.layers.embedding(input=b, size=[VOCAB, DIM], is_sparse=True, is_distributed=True,
                                        param_attr=attr)
        predict = fluid.layers.fc(input=fluid.layers.concat([first, second], axis=1), size=2, act="softmax")
        cost = fluid.layers.mean(fluid.layers.cross_entropy(input=predict, label=label))
        fluid.optimizer.SGD(0.5).minimize(cost)
        return [a, label], cost
    ops = _trainer_ops(make)
    lookups = [op for op in ops if op.type == "lookup_table"]
    assert [op.input("W") for op in lookups] == [[f"{TABLE}@PREFETCH@0"], [f"{TABLE}@PREFETCH@1"]]
    assert sum(op.type == "split_ids" for op in ops) == 2
    batches = [(np.arange(8).reshape(-1, 1) * (k + 3) % (VOCAB - 1), np.arange(8).reshape(-1, 1) % 2)
               for k in range(4)]
    run = run_cluster(make, 2, 2, batches)
    ref = run_local(make, batches)
    np.testing.assert_allclose(np.mean([run.losses[k] for k in range(2)], axis=0), ref.losses[0], **TOL)


def _lod_model():
    slots = [fluid.layers.data(name=f"slot{i}", shape=[1], dtype="int64", lod_level=1) for i in range(SLOTS)]
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    pooled = [fluid.layers.sequence_pool(fluid.layers.embedding(
        input=s, size=[VOCAB, DIM], is_sparse=True, is_distributed=True,
        param_attr=fluid.ParamAttr(name=TABLE, initializer=fluid.initializer.Uniform(-0.5, 0.5))), "sum")
        for s in slots]
    predict = fluid.layers.fc(input=fluid.layers.concat(pooled, axis=1), size=2, act="softmax")
    cost = fluid.layers.mean(fluid.layers.cross_entropy(input=predict, label=label))
    fluid.optimizer.SGD(0.3).minimize(cost)
    block = cost.block
    return [*(block.var(f"slot{i}") for i in range(SLOTS)), block.var("label")], cost


def _lod_batches(steps: int, batch: int) -> list:
    rng = np.random.default_rng(4)
    out = []
    for _ in range(steps):
        slots = []
        for _ in range(SLOTS):
            lengths = [int(n) for n in rng.integers(1, 5, size=batch)]
            ids = ((rng.zipf(1.3, size=(sum(lengths), 1)) - 1) % VOCAB).astype(np.int64)
            slots.append(LoDTensor.from_lengths(ids, [lengths]))
        label = rng.integers(0, 2, size=(batch, 1)).astype(np.int64)
        out.append((*slots, label))
    return out


def test_a_table_shared_by_3_lod_slots_pooled_on_2_pservers_equals_one_process():
    batches = _lod_batches(6, 16)
    run = run_cluster(_lod_model, 2, 2, batches)
    ref = run_local(_lod_model, batches)
    check_equivalent(run, type(ref)(ref.losses, {0: {k: v for k, v in ref.params[0].items() if k != TABLE}},
                                    ref.fetched, {}, {}))
    table = np.zeros_like(ref.params[0][TABLE])
    for k in range(2):
        table[k::2] = run.pserver_params[k][f"{TABLE}.shard{k}"]
    np.testing.assert_allclose(table, ref.params[0][TABLE], **TOL)
