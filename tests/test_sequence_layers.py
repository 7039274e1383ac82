"""The sequence layers of #15 slice 3a (placegroup/layers/sequence.py, fluid.nets.sequence_conv_pool)
in programs run by the executor: each layer's output and LoD equal its op's per-sequence
reference (tests/cases/sequence.py), a text CNN (embedding -> sequence_conv_pool -> fc softmax)
gets Fluid 1.8's parameter names and trains, and (paddle-marked) its per-step losses equal
Fluid 1.8.5's (PLACEGROUP_PADDLE18_PYTHON).
"""
from __future__ import annotations

import numpy as np
import pytest

import placegroup as fluid
from placegroup.values import LoDTensor
from tests.cases import sequence as cases
from tests.paddle_ref.reference import run_reference

V, D, F, C = 30, 6, 5, 3


def _run(build, feed: dict):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        outs = build()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return main, exe.run(main, feed=feed, fetch_list=outs, return_numpy=False)


def _same(got, want):
    np.testing.assert_allclose(np.array(got), want.data if isinstance(want, LoDTensor) else want, rtol=1e-5,
                               atol=1e-6)
    assert (got.lod() if isinstance(got, LoDTensor) else []) == (want.lod() if isinstance(want, LoDTensor) else [])


def test_layers_give_their_ops_references():
    r = np.random.default_rng(0)
    x = LoDTensor(r.standard_normal((11, 3)).astype(np.float32), cases.LODC)
    y = LoDTensor(r.standard_normal((11, 1)).astype(np.float32), cases.LODC)
    d = r.standard_normal((5, 2)).astype(np.float32)

    def build():
        xv = fluid.layers.data("x", [3], dtype="float32", lod_level=1)
        yv = fluid.layers.data("y", [1], dtype="float32", lod_level=1)
        dv = fluid.layers.data("d", [2], dtype="float32")
        off = fluid.layers.assign(np.array([[0], [0], [0], [1], [1]], np.int64))
        length = fluid.layers.assign(np.array([[2], [0], [1], [3], [1]], np.int64))
        return [fluid.layers.sequence_expand(dv, yv), fluid.layers.sequence_expand_as(dv, yv),
                fluid.layers.sequence_reshape(xv, new_dim=1), fluid.layers.sequence_concat([xv, xv]),
                fluid.layers.sequence_slice(xv, off, length)]

    main, got = _run(build, {"x": x, "y": y, "d": d})
    assert [main.global_block().var(v).lod_level for v in ("x", "d")] == [1, 0]
    _same(got[0], cases._expand_ref({"X": d, "Y": y}, {"ref_level": -1})["Out"])
    _same(got[1], cases._expand_as_ref({"X": d, "Y": y}, {})["Out"])
    _same(got[2], cases._reshape_ref({"X": x}, {"new_dim": 1})["Out"])
    _same(got[3], cases._concat_ref({"X": [x, x]}, {})["Out"])
    _same(got[4], cases._slice_ref({"X": x, "Offset": np.array([0, 0, 0, 1, 1]),
                                    "Length": np.array([2, 0, 1, 3, 1])}, {})["Out"])


def _init():
    r = np.random.default_rng(7)
    return {"emb": r.uniform(-0.5, 0.5, (V, D)).astype(np.float32),
            "conv.w": r.uniform(-0.3, 0.3, (3 * D, F)).astype(np.float32),
            "conv.b": r.uniform(-0.1, 0.1, (F,)).astype(np.float32),
            "out.w": r.uniform(-0.3, 0.3, (F, C)).astype(np.float32),
            "out.b": np.zeros((C,), np.float32)}


def _batches(n):
    r = np.random.default_rng(11)
    return [[([int(i) for i in r.integers(0, V, r.integers(1, 7))], [int(r.integers(0, C))]) for _ in range(6)]
            for _ in range(n)]


def _text_cnn(init=None):
    attr = (lambda n: fluid.ParamAttr(name=n, initializer=fluid.initializer.NumpyArrayInitializer(init[n]))) \
        if init else (lambda n: None)
    words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
    label = fluid.layers.data("label", [1], dtype="int64")
    emb = fluid.layers.embedding(words, size=[V, D], param_attr=attr("emb"))
    conv = fluid.nets.sequence_conv_pool(emb, num_filters=F, filter_size=3, act="tanh", pool_type="max",
                                         param_attr=attr("conv.w"), bias_attr=attr("conv.b"))
    pred = fluid.layers.fc(conv, C, act="softmax", param_attr=attr("out.w"), bias_attr=attr("out.b"))
    loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, label))
    return words, label, loss


def test_text_cnn_has_fluids_names_and_trains():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words, label, loss = _text_cnn()
        fluid.optimizer.SGD(0.5).minimize(loss)
    params = sorted(p.name for p in main.global_block().all_parameters())
    assert {"sequence_conv_0.w_0", "sequence_conv_0.b_0"} <= set(params), params
    assert main.global_block().var("sequence_conv_0.w_0").shape == (3 * D, F) or \
        list(main.global_block().var("sequence_conv_0.w_0").shape) == [3 * D, F]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feeder = fluid.DataFeeder([words, label], fluid.CPUPlace())
    batch = _batches(1)[0]
    losses = [float(exe.run(main, feed=feeder.feed(batch), fetch_list=[loss])[0][0]) for _ in range(20)]
    assert losses[-1] < losses[0] * 0.7, losses


def _train_ours(batches, lr=0.5):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        words, label, loss = _text_cnn(_init())
        fluid.optimizer.SGD(lr).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feeder = fluid.DataFeeder([words, label], fluid.CPUPlace())
    return [float(exe.run(main, feed=feeder.feed(b), fetch_list=[loss])[0][0]) for b in batches]


FLUID18_TEXT_CNN = r"""
import json, sys
import numpy as np
import paddle.fluid as fluid
spec = json.loads(sys.argv[1])
d = np.load(spec["data"])
V, D, F, C = spec["V"], spec["D"], spec["F"], spec["C"]
attr = lambda n: fluid.ParamAttr(name=n, initializer=fluid.initializer.NumpyArrayInitializer(d[n]))
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
    label = fluid.layers.data("label", [1], dtype="int64")
    emb = fluid.layers.embedding(words, size=[V, D], param_attr=attr("emb"))
    conv = fluid.nets.sequence_conv_pool(emb, num_filters=F, filter_size=3, act="tanh", pool_type="max",
                                         param_attr=attr("conv.w"), bias_attr=attr("conv.b"))
    pred = fluid.layers.fc(conv, C, act="softmax", param_attr=attr("out.w"), bias_attr=attr("out.b"))
    loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, label))
    fluid.optimizer.SGD(spec["lr"]).minimize(loss)
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
feeder = fluid.DataFeeder([words, label], fluid.CPUPlace())
losses = [float(exe.run(main, feed=feeder.feed([tuple(x) for x in b]), fetch_list=[loss])[0][0])
          for b in spec["batches"]]
np.savez(spec["out"], losses=np.array(losses))
"""


@pytest.mark.paddle
def test_text_cnn_losses_equal_fluid_1_8(fluid18_python, tmp_path):
    batches = _batches(15)
    theirs = run_reference(fluid18_python, FLUID18_TEXT_CNN, tmp_path, _init(), timeout=600, V=V, D=D, F=F, C=C,
                           lr=0.5, batches=batches)["losses"]
    np.testing.assert_allclose(_train_ours(batches), theirs, rtol=1e-5, atol=1e-6)
