"""Every initializer in every placement: a parameter the transpiler splits starts as exactly
the parts of what the whole parameter would have been, and trains as in one process.

A table of (initializer, placement). The placements are a parameter sliced into row blocks over
2 pservers, a whole parameter on one pserver, an ``is_sparse`` embedding table (row blocks, sparse
gradients), an ``is_distributed`` table (strided row shards, never whole on a trainer) and a
model-parallel fc (column shards over the trainers). Each initializer makes its part alone by its
op's ``cut`` rule (NOTE(init-cut) in ops/registry.py). For each case, over the loopback transport
(tests/inproc.py), 2 trainers + 2 pservers:

* the parts held after the startup programs put together equal, bit for bit, the parameter one
  process starts with (and a trainer that holds the whole parameter holds exactly it);
* 3 steps of training equal one process: the mean of the trainers' losses per step and the final
  parameters to rtol 1e-5.

Real processes over ZeroMQ only for ``NumpyArrayInitializer`` (tests/dist/train_array_init.py):
a sliced weight and a distributed table started from arrays, launched 2 x 2.
"""
import dataclasses
import inspect
import io
import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest

import placegroup as fluid
import placegroup.initializer as initializers
from placegroup.ops.registry import Cut, KernelContext, get_op_def, registered_ops
from placegroup.tools.launch import launch
from tests.conftest import TIME_FACTOR
from tests.inproc import run_cluster, run_local

TOL = {"rtol": 1e-5, "atol": 1e-6}
TRAINERS = PSERVERS = 2
STEPS, BATCH = 3, 8
# min_block_size of these jobs, so that small parameters are sliced: a [15, 12] weight (180
# elements) is 2 blocks of 8 + 7 rows, a [44, 4] table 2 blocks of 22 rows, a [4, 3] weight whole
MIN_BLOCK = 64


def _array(shape) -> np.ndarray:
    """A "pretrained" array of ``shape``, the same in every process."""
    return (0.3 * np.random.default_rng(int(np.prod(shape))).normal(size=shape)).astype(np.float32)


# initializer name -> the initializer for a parameter of a shape
INITIALIZERS: dict[str, Callable] = {
    "Constant": lambda shape: fluid.initializer.Constant(0.25),
    "Uniform": lambda shape: fluid.initializer.Uniform(-0.4, 0.6),
    "Normal": lambda shape: fluid.initializer.Normal(0.1, 0.3),
    "TruncatedNormal": lambda shape: fluid.initializer.TruncatedNormal(0.0, 0.4),
    "Xavier-uniform": lambda shape: fluid.initializer.Xavier(uniform=True),
    "Xavier-normal": lambda shape: fluid.initializer.Xavier(uniform=False),
    "MSRA-uniform": lambda shape: fluid.initializer.MSRA(uniform=True),
    "MSRA-normal": lambda shape: fluid.initializer.MSRA(uniform=False),
    "Bilinear": lambda shape: fluid.initializer.Bilinear(),
    "NumpyArray": lambda shape: fluid.initializer.NumpyArrayInitializer(_array(shape)),
}
# Bilinear makes the upsampling kernel of a conv2d_transpose, [C_in, C_out, K, K]: it is sliced
# and whole as a conv filter, and has no 2-D placements
CONV_ONLY = {"Bilinear"}
NOT_APPLICABLE = {("Bilinear", p): "a table and a model-parallel fc weight are 2-D; Bilinear fits only "
                  "[C_in, C_out, K, K]" for p in ("sparse", "distributed", "model-parallel")}


@dataclasses.dataclass(frozen=True)
class Placement:
    """A model whose parameter ``w`` (and, model-parallel, ``b``) is placed one way."""

    build: Callable          # (initializer factory) -> model builder for run_cluster/run_local
    data: Callable           # () -> batches
    parts: Callable          # (Run, name) -> the parameter put together from the job's parts
    conv: bool = False       # w is a conv2d_transpose filter [C_in, C_out, K, K]
    endpoints: bool = False  # the trainers exchange activations (model parallel)
    params: tuple = ("w",)


def _dense_data(dim: int, classes: int = 0):
    def data():
        rng = np.random.default_rng(5)
        xs = rng.normal(size=(STEPS * BATCH, dim)).astype(np.float32)
        ys = (np.abs(xs[:, :1] * 3).astype(np.int64) % classes) if classes else \
            (xs[:, :2].sum(axis=1, keepdims=True) + 0.1).astype(np.float32)
        return [(xs[i * BATCH:(i + 1) * BATCH], ys[i * BATCH:(i + 1) * BATCH]) for i in range(STEPS)]
    return data


def _ids_data(vocab: int):
    def data():
        rng = np.random.default_rng(7)
        ids = (rng.integers(0, vocab, size=(STEPS * BATCH, 1))).astype(np.int64)
        ys = (ids % 3 - 1).astype(np.float32)
        return [(ids[i * BATCH:(i + 1) * BATCH], ys[i * BATCH:(i + 1) * BATCH]) for i in range(STEPS)]
    return data


def _regression(build_hidden):
    """x -> hidden (holding w) -> fc(1) -> square error, trained by Adam (moments split with w)."""
    def with_init(init):
        def build():
            x, hidden = build_hidden(init)
            y = fluid.layers.data(name="y", shape=[1])
            cost = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(hidden, size=1), y))
            fluid.optimizer.Adam(0.05).minimize(cost)
            return [x, y], cost
        return build
    return with_init


def _fc_hidden(dim: int, size: int):
    def hidden(init):
        x = fluid.layers.data(name="x", shape=[dim])
        attr = fluid.ParamAttr(name="w", initializer=init([dim, size]))
        return x, fluid.layers.fc(x, size=size, act="tanh", param_attr=attr)
    return hidden


def _conv_hidden(channels: int):
    """A conv2d_transpose whose filter [channels, channels, 4, 4] is w (for Bilinear)."""
    def hidden(init):
        x = fluid.layers.data(name="x", shape=[channels * 4])
        img = fluid.layers.reshape(x, [-1, channels, 2, 2])
        attr = fluid.ParamAttr(name="w", initializer=init([channels, channels, 4, 4]))
        up = fluid.layers.conv2d_transpose(img, num_filters=channels, filter_size=4, stride=2, padding=1,
                                           param_attr=attr, bias_attr=False)
        return x, up
    return hidden


def _embedding_hidden(vocab: int, dim: int, distributed: bool):
    def hidden(init):
        ids = fluid.layers.data(name="x", shape=[1], dtype="int64")
        attr = fluid.ParamAttr(name="w", initializer=init([vocab, dim]))
        return ids, fluid.layers.embedding(ids, size=[vocab, dim], is_sparse=True, is_distributed=distributed,
                                           param_attr=attr)
    return hidden


def _model_parallel(dim: int, classes: int):
    def with_init(init):
        def build():
            x = fluid.layers.data(name="x", shape=[dim])
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            logits = fluid.layers.fc(x, size=classes, model_parallel=True,
                                     param_attr=fluid.ParamAttr(name="w", initializer=init([dim, classes])),
                                     bias_attr=fluid.ParamAttr(name="b", initializer=init([classes])))
            cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=y))
            fluid.optimizer.Adam(0.05).minimize(cost)
            return [x, y], cost
        return build
    return with_init


def _same_on_trainers(run, name, whole) -> None:
    """A trainer that holds the whole parameter (pulled from the pservers) holds ``whole``."""
    for k in range(TRAINERS):
        if name in run.params[k]:
            np.testing.assert_array_equal(run.params[k][name], whole, err_msg=f"trainer {k}'s {name}")


def _blocks(run, name):
    """Row blocks ``name.block<i>`` from whichever pserver holds each, in order; and the trainers'."""
    held = {n: v for i in range(PSERVERS) for n, v in run.pserver_params[i].items() if n.startswith(name + ".block")}
    assert len(held) == 2, f"{name} is not in 2 blocks: {sorted(held)}"
    whole = np.concatenate([held[f"{name}.block{i}"] for i in range(len(held))])
    _same_on_trainers(run, name, whole)
    return whole


def _on_one_pserver(run, name):
    holders = [i for i in range(PSERVERS) if name in run.pserver_params[i]]
    assert len(holders) == 1, f"{name} is held by pservers {holders}"
    _same_on_trainers(run, name, run.pserver_params[holders[0]][name])
    return run.pserver_params[holders[0]][name]


def _shards(run, name):
    """Row shards: pserver k holds rows k, k+M, ... (the sparse pass's mapping); no trainer holds
    the table."""
    shards = [run.pserver_params[k][f"{name}.shard{k}"] for k in range(PSERVERS)]
    whole = np.zeros((sum(len(s) for s in shards),) + shards[0].shape[1:], dtype=shards[0].dtype)
    for k, s in enumerate(shards):
        whole[k::PSERVERS] = s
    assert all(name not in run.params[k] for k in range(TRAINERS)), f"{name} is whole on a trainer"
    return whole


def _columns(run, name):
    """Column shards: trainer k holds the k-th 1/K of the last axis, and only it."""
    shards = [run.params[k][name] for k in range(TRAINERS)]
    whole = np.concatenate(shards, axis=-1)
    assert all(s.shape[-1] * TRAINERS == whole.shape[-1] for s in shards), [s.shape for s in shards]
    return whole


PLACEMENTS = {
    "sliced": Placement(_regression(_fc_hidden(15, 12)), _dense_data(15), _blocks),
    "sliced-conv": Placement(_regression(_conv_hidden(4)), _dense_data(16), _blocks, conv=True),
    "whole": Placement(_regression(_fc_hidden(4, 3)), _dense_data(4), _on_one_pserver),
    "whole-conv": Placement(_regression(_conv_hidden(2)), _dense_data(8), _on_one_pserver, conv=True),
    "sparse": Placement(_regression(_embedding_hidden(44, 4, False)), _ids_data(44), _blocks),
    "distributed": Placement(_regression(_embedding_hidden(41, 4, True)), _ids_data(41), _shards),
    "model-parallel": Placement(_model_parallel(6, 8), _dense_data(6, classes=8), _columns, endpoints=True,
                                params=("w", "b")),
}
# a placement's conv form ("sliced-conv") is that placement for a conv-only initializer
CASES = [pytest.param(i, p, id=f"{i}-{p}") for i in INITIALIZERS for p, placement in PLACEMENTS.items()
         if placement.conv == (i in CONV_ONLY)]


def _run(init: str, where: str, batches: list, local: bool):
    """One process, or 2 trainers + 2 pservers in threads, trained on ``batches`` ([]: started only)."""
    placement = PLACEMENTS[where]
    build = placement.build(INITIALIZERS[init])
    if local:
        return run_local(build, batches)
    return run_cluster(build, TRAINERS, PSERVERS, batches, endpoints=placement.endpoints,
                       config=fluid.DistributeTranspilerConfig(min_block_size=MIN_BLOCK))


@pytest.mark.parametrize("init, where", CASES)
def test_the_parts_start_as_the_whole_and_train_as_one_process(init, where):
    placement, batches = PLACEMENTS[where], PLACEMENTS[where].data()
    ref_start, ref = _run(init, where, [], local=True), _run(init, where, batches, local=True)
    start = _run(init, where, [], local=False)  # the startup programs only
    for name in placement.params:
        want, got = ref_start.params[0][name], placement.parts(start, name)
        assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=f"{name} at the start")
    run = _run(init, where, batches, local=False)
    np.testing.assert_allclose(np.mean([run.losses[k] for k in range(TRAINERS)], axis=0), ref.losses[0], **TOL)
    for name in placement.params:
        np.testing.assert_allclose(placement.parts(run, name), ref.params[0][name], err_msg=name, **TOL)


def test_the_table_covers_every_initializer():
    """A new initializer in placegroup/model/initializer.py needs a row here (and a ``cut`` rule for
    its op, which this table then proves)."""
    classes = {obj for _, obj in inspect.getmembers(initializers, inspect.isclass)
               if issubclass(obj, initializers.Initializer) and obj is not initializers.Initializer}
    covered = {type(make([2, 2, 4, 4])) for make in INITIALIZERS.values()}
    assert classes <= covered, f"no row for {sorted(c.__name__ for c in classes - covered)}"
    for init in INITIALIZERS:
        for where in ("sliced", "whole", "sparse", "distributed", "model-parallel"):
            has = any(p.values[:2] == (init, where) or p.values[:2] == (init, where + "-conv") for p in CASES)
            assert has or (init, where) in NOT_APPLICABLE, (init, where)


def test_an_initializer_op_without_a_cut_rule_is_refused_naming_it():
    """An op that writes a sliced parameter in the startup program but cannot make a part alone."""
    from placegroup.errors import PassError

    def build():
        x = fluid.layers.data(name="x", shape=[15])
        w = fluid.layers.create_parameter([15, 12], "float32", name="w")
        startup = fluid.default_startup_program().global_block()
        startup.ops.clear()
        src = startup.create_var("w@SRC", shape=[15, 12], dtype="float32", persistable=True)
        startup.append_op("fill_constant", outputs={"Out": [src.name]}, attrs={"shape": [15, 12], "value": 1.0})
        startup.append_op("assign", inputs={"X": [src.name]}, outputs={"Out": ["w"]})
        y = fluid.layers.data(name="y", shape=[1])
        cost = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(fluid.layers.mul(x, w), 1), y))
        fluid.optimizer.SGD(0.1).minimize(cost)
        return [x, y], cost

    with pytest.raises(PassError, match=r"'w' is split into parts \(w\.block0, \.\.\.\), but its startup op "
                                        r"`assign` is not an initializer that can make a part alone"):
        run_cluster(build, TRAINERS, PSERVERS, [], config=fluid.DistributeTranspilerConfig(min_block_size=MIN_BLOCK))


# -- each initializer op's own cut rule, alone -------------------------------------------------
WHOLE = (6, 4)
# initializer op -> attrs that make a [6, 4] var of distinct values (a new one needs a row)
OP_ATTRS = {
    "fill_constant": {"value": 1.5},
    "assign_value": {"values": [float(v) for v in range(24)]},
    "uniform_random": {"seed": 7, "min": -1.0, "max": 2.0},
    "gaussian_random": {"seed": 7, "mean": 0.5, "std": 2.0},
    "truncated_gaussian_random": {"seed": 7, "std": 0.5},
}
# (cuts applied one after another, the executor's rank, the whole var's rows and columns made)
CUTS = [
    ([Cut.rows((4, 4), 2)], 0, np.s_[2:6, :]),                                  # a row block
    ([Cut.rows((3, 4), 1, 2)], 0, np.s_[1::2, :]),                              # row shard 1 of 2
    ([Cut((2, 3), (3, 1), (1, 1))], 0, np.s_[3:5, 1:4]),                        # a box
    ([Cut.rows((3, 4), 1, 2), Cut.rows((2, 4), 1)], 0, np.s_[3::2, :]),         # a cut of a cut
    ([Cut.per_rank((6, 2), 1)], 1, np.s_[:, 2:4]),                              # column shard of rank 1
    ([Cut.rows((4, 4), 2), Cut.per_rank((4, 2), 1)], 1, np.s_[2:6, 2:4]),       # ... of a row block
]


def _make(op_type: str, attrs: dict, rank: int = 0) -> np.ndarray:
    opdef = get_op_def(op_type)
    return opdef.kernels["cpu"](np, {}, attrs, KernelContext(outputs=("Out",), rank=rank))["Out"]


# dynamic_table makes no array: its cut is a hash shard of a table keyed by raw ids, whose rows
# are a function of (seed, id) wherever they live (tests/test_sparse_embedding.py)
@pytest.mark.parametrize("op_type", [t for t in registered_ops() if get_op_def(t).is_initializer and t != "dynamic_table"])
def test_each_initializer_op_cuts_exactly_its_part(op_type):
    opdef = get_op_def(op_type)
    assert opdef.cut is not None, f"initializer op `{op_type}` has no cut rule (NOTE(init-cut))"
    assert op_type in OP_ATTRS, f"add a row for initializer op `{op_type}` to OP_ATTRS"
    whole_attrs = {**opdef.attrs, **OP_ATTRS[op_type], "shape": list(WHOLE), "dtype": "float32"}
    whole = _make(op_type, whole_attrs)
    for cuts, rank, box in CUTS:
        attrs = whole_attrs
        for cut in cuts:
            attrs = opdef.cut(dict(attrs), cut)
        np.testing.assert_array_equal(_make(op_type, attrs, rank), whole[box], err_msg=f"{cuts} rank {rank}")
    with pytest.raises(ValueError, match=r"is not inside its output \[6, 4\]"):
        opdef.cut(dict(whole_attrs), Cut.rows((4, 4), 3))


# -- real processes: arrays only --------------------------------------------------------------
SCRIPT = os.path.join(os.path.dirname(__file__), "dist", "train_array_init.py")


def test_arrays_sliced_and_sharded_over_real_processes_equal_one_process(tmp_path):
    """A weight sliced into 2 blocks and a distributed table in 2 shards, both started from
    arrays, 2 trainers + 2 pservers over ZeroMQ: the pservers' parts start as the arrays, and
    training equals one process."""
    from tests.dist.train_array_init import TABLE, W

    env = {k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"}
    subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path)], check=True, env=env, timeout=60 * TIME_FACTOR)
    out = io.StringIO()
    code = launch(SCRIPT, ["--out", str(tmp_path)], 2, 2, grace=20 * TIME_FACTOR, out=out,
                  extra_env={"PLACEGROUP_PEER_TIMEOUT": str(30 * TIME_FACTOR)})
    assert code == 0, out.getvalue()
    ref = np.load(tmp_path / "local0.npz")
    runs = [np.load(tmp_path / f"trainer{k}.npz") for k in range(2)]
    ps = [np.load(tmp_path / f"pserver{k}.npz") for k in range(2)]
    np.testing.assert_array_equal(ref["start_w"], W)
    np.testing.assert_array_equal(ref["start_emb"], TABLE)
    blocks = {n: p[n] for p in ps for n in p.files if n.startswith("start_w.block")}
    np.testing.assert_array_equal(np.concatenate([blocks[f"start_w.block{i}"] for i in range(2)]), W)
    table = np.zeros_like(TABLE)
    for k in range(2):
        table[k::2] = ps[k][f"start_emb.shard{k}"]
    np.testing.assert_array_equal(table, TABLE)
    for r in runs:
        np.testing.assert_array_equal(r["start_w"], W)
        assert "emb" not in r.files  # a distributed table never exists on a trainer
    np.testing.assert_allclose(np.mean([r["losses"] for r in runs], axis=0), ref["losses"], **TOL)
    for r in runs:
        np.testing.assert_allclose(r["w"], ref["w"], err_msg="w", **TOL)
    table = np.zeros_like(TABLE)
    for k in range(2):
        table[k::2] = ps[k][f"emb.shard{k}"]
    np.testing.assert_allclose(table, ref["emb"], **TOL)
