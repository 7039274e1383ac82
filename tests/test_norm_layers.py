"""The layers of placegroup/layers/norm.py: batch_norm's and layer_norm's parameters under
Fluid's names and in Fluid's order, the running statistics of a few training steps against
numpy, ``clone(for_test=True)``, dropout's masks stepping per training step in one process
and on two trainers (= one process), and, where PLACEGROUP_PADDLE_PYTHON names a python with
paddle, per-step losses against Paddle 2.6's static graph."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import placegroup as fluid
from placegroup.executor.plan import compile_plan
from placegroup.initializer import NumpyArrayInitializer
from placegroup.ops.dropout import keep_mask, step_key
from tests.inproc import run_cluster, run_local
from tests.paddle_ref.reference import run_reference
from tests.test_layers import check_program_gradients, fresh, value

L = fluid.layers


def _np_bn(x, scale, bias, mean, var, eps=1e-5):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape) + bias.reshape(shape)


def test_param_names_order_and_initial_values():
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[3, 4, 4])
        L.batch_norm(x)
        L.batch_norm(L.data("z", shape=[5, 2, 6]), data_layout="NHWC", moving_mean_name="mm",
                     moving_variance_name="mv", param_attr=fluid.ParamAttr(name="s"))
        L.layer_norm(x, begin_norm_axis=2)
        L.layer_norm(x, scale=False)
        params = main.all_parameters()
        assert [p.name for p in params] == [
            "batch_norm_0.w_0", "batch_norm_0.b_0", "batch_norm_0.w_1", "batch_norm_0.w_2",
            "s", "batch_norm_1.b_0", "mm", "mv", "layer_norm_0.w_0", "layer_norm_0.b_0", "layer_norm_1.b_0"]
        assert [p.trainable for p in params[:4]] == [True, True, False, False]
        assert all(p.shape == (3,) for p in params[:4]) and params[4].shape == (6,)
        assert params[8].shape == (16,) and params[10].shape == (48,)
        exe.run(startup)
        for name, want in [("batch_norm_0.w_0", 1), ("batch_norm_0.b_0", 0), ("batch_norm_0.w_1", 0),
                           ("batch_norm_0.w_2", 1), ("layer_norm_0.w_0", 1), ("layer_norm_0.b_0", 0)]:
            np.testing.assert_array_equal(value(name), np.full(value(name).shape, want, np.float32))
        with pytest.raises(ValueError, match="unsupported data layout 'NCWH'"):
            L.batch_norm(x, data_layout="NCWH")
        with pytest.raises(ValueError, match=r"from begin_norm_axis=0 on must be known, got \[-1, 4\]"):
            L.layer_norm(L.data("v", shape=[-1, 4], append_batch_size=False), begin_norm_axis=0)


def test_batch_norm_running_statistics_follow_numpy():
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((6, 3, 2, 2)) * [[[[1.0]], [[2.0]], [[0.5]]]] + 1.0).astype(np.float32)
               for _ in range(4)]
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[3, 2, 2])
        y = L.batch_norm(x, momentum=0.8)
        loss = L.mean(L.square_error_cost(L.fc(y, 1), L.data("t", shape=[1])))
        fluid.optimizer.SGD(0.1).minimize(loss)
        exe.run(startup)
        mean, var = np.zeros(3), np.ones(3)
        for xb in batches:
            scale, bias = value("batch_norm_0.w_0"), value("batch_norm_0.b_0")
            got_y, saved_var = exe.run(main, feed={"x": xb, "t": np.zeros((6, 1), np.float32)},
                                       fetch_list=[y, "batch_norm_0.tmp_1"])
            bm, bv = xb.mean(axis=(0, 2, 3), dtype=np.float64), xb.var(axis=(0, 2, 3), dtype=np.float64)
            np.testing.assert_allclose(got_y, _np_bn(xb, scale, bias, bm, bv), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(saved_var, 1 / np.sqrt(bv + 1e-5), rtol=1e-5)
            mean, var = mean * 0.8 + bm * 0.2, var * 0.8 + bv * 0.2  # the biased variance, as Fluid
        np.testing.assert_allclose(value("batch_norm_0.w_1"), mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(value("batch_norm_0.w_2"), var, rtol=1e-5, atol=1e-6)


def test_clone_for_test_uses_running_statistics_and_keeps_every_unit():
    rng = np.random.default_rng(1)
    xb = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[3, 2, 2])
        y = L.dropout(L.batch_norm(x), dropout_prob=0.25)
        loss = L.mean(y)
        test = main.clone(for_test=True)
        fluid.optimizer.SGD(0.1).minimize(loss)
        ops = {op.type: op for op in test.global_block().ops}
        assert ops["batch_norm"].attrs["is_test"] and ops["dropout"].attrs["is_test"]
        assert set(ops) == {"batch_norm", "dropout", "mean"}
        exe.run(startup)
        exe.run(main, feed={"x": xb})
        stats = [value(f"batch_norm_0.{n}") for n in ("w_0", "b_0", "w_1", "w_2")]
        got, = exe.run(test, feed={"x": xb}, fetch_list=[y])
        np.testing.assert_allclose(got, _np_bn(xb, *stats) * 0.75, rtol=1e-5, atol=1e-6)
        for before, name in zip(stats[2:], ("w_1", "w_2")):  # a test run leaves them as they are
            np.testing.assert_array_equal(value(f"batch_norm_0.{name}"), before)


def test_whole_program_gradients_through_the_norm_layers():
    rng = np.random.default_rng(2)
    feed = {"x": rng.standard_normal((5, 3, 2, 2)), "t": rng.standard_normal((5, 1))}
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[3, 2, 2], dtype="float64")
        h = L.batch_norm(x, act="tanh")
        # a fixed seed: the check runs the program many times, and each run of a program draws
        # new masks otherwise (as in Fluid)
        h = L.dropout(L.layer_norm(h), dropout_prob=0.3, dropout_implementation="upscale_in_train", seed=5)
        h = L.batch_norm(L.fc(h, 4, act="tanh"))
        loss = L.mean(L.square_error_cost(L.fc(h, 1), L.data("t", shape=[1], dtype="float64")))
        params_grads = fluid.backward.append_backward(loss)
        assert len(params_grads) == 10  # no gradient for the running statistics
        exe.run(startup)
        check_program_gradients(exe, main, loss, feed, params_grads)


def _dropout_model(seed=None):
    def build():
        x, t = L.data("x", shape=[6]), L.data("t", shape=[1])
        h = L.dropout(L.fc(x, 16, act="relu"), dropout_prob=0.4, seed=seed)
        h = L.dropout(L.fc(h, 8), dropout_prob=0.3, dropout_implementation="upscale_in_train")
        cost = L.mean(L.square_error_cost(L.fc(h, 1), t))
        fluid.optimizer.SGD(0.05).minimize(cost)
        return [x, t], cost

    return build


def _batches(steps=4, n=8):
    rng = np.random.default_rng(3)
    return [(rng.standard_normal((n, 6)).astype(np.float32), rng.standard_normal((n, 1)).astype(np.float32))
            for _ in range(steps)]


MASKS = ("dropout_0.tmp_1", "dropout_1.tmp_1")


def _dropouts(program) -> list:
    return [op for op in program.global_block().ops if op.type == "dropout"]


def test_dropout_masks_step_per_training_step():
    with fresh() as (main, startup, exe):
        _dropout_model()()
        a, b = _dropouts(main)
        assert a.attrs["seed"] != b.attrs["seed"] and not a.attrs["fix_seed"]
        plan = compile_plan(main, None, None, np)
        assert not [p for p in plan.ops if p.op.type == "dropout"][0].plain  # ctx.step is kept current
        exe.run(startup)
        masks = [exe.run(main, feed={"x": x, "t": t}, fetch_list=list(MASKS)) for x, t in _batches()]
    for step, (m0, m1) in enumerate(masks):
        np.testing.assert_array_equal(m0, keep_mask(np, m0.shape, 0.4, step_key(a.attrs["seed"], step, False), 0))
        np.testing.assert_array_equal(m1, keep_mask(np, m1.shape, 0.3, step_key(b.attrs["seed"], step, False), 0))
    assert not np.array_equal(masks[0][0], masks[1][0])
    # the same script builds the same seeds; another random_seed, others
    with fresh() as (again, _, _):
        _dropout_model()()
    assert [op.attrs["seed"] for op in _dropouts(again)] == [a.attrs["seed"], b.attrs["seed"]]
    with fresh() as (other, _, _):
        other.random_seed = 5
        _dropout_model()()
    assert _dropouts(other)[0].attrs["seed"] != a.attrs["seed"]


def test_dropout_with_a_fixed_seed_draws_one_mask_every_step():
    with fresh() as (main, startup, exe):
        _dropout_model(seed=7)()
        exe.run(startup)
        first = [exe.run(main, feed={"x": x, "t": t}, fetch_list=[MASKS[0]])[0] for x, t in _batches(3)]
    op = _dropouts(main)[0]
    assert op.attrs["fix_seed"] and op.attrs["seed"] == 7
    assert all(np.array_equal(m, first[0]) for m in first)


def test_dropout_on_two_trainers_equals_one_process():
    batches = _batches(4)
    local = run_local(_dropout_model(), batches, fetch=MASKS)
    cluster = run_cluster(_dropout_model(), trainers=2, pservers=2, batches=batches, fetch=MASKS)
    for step in range(len(batches)):
        for k in (0, 1):  # trainer k's masks are rows [4k, 4k+4) of one process's
            for i in range(len(MASKS)):
                np.testing.assert_array_equal(cluster.fetched[k][step][i], local.fetched[0][step][i][4 * k:4 * k + 4])
        assert np.mean([cluster.losses[k][step] for k in (0, 1)]) == pytest.approx(local.losses[0][step], rel=1e-5)
    for name, want in local.params[0].items():
        for k in (0, 1):
            np.testing.assert_allclose(cluster.params[k][name], want, rtol=1e-5, atol=1e-6, err_msg=name)


# -- against Paddle ---------------------------------------------------------------------------


# Paddle 2.6 builds the same model with its Fluid-style static layers (paddle.static.nn keeps
# the 1.x signatures; its instance_norm needs its attrs to make parameters, NOTE(affine-defaults))
# and trains it with SGD.
PADDLE_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import paddle
    paddle.enable_static()
    spec = json.loads(sys.argv[1])
    d = np.load(spec["data"])
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        attr = lambda k: paddle.ParamAttr(initializer=paddle.nn.initializer.Assign(d[k]))
        x = paddle.static.data("x", [-1, 3, 4, 4], "float32")
        t = paddle.static.data("t", [-1, 1], "float32")
        h = paddle.static.nn.batch_norm(x, act="relu", momentum=0.8)
        h = paddle.static.nn.instance_norm(h, param_attr=paddle.ParamAttr(), bias_attr=paddle.ParamAttr())
        h = paddle.static.nn.group_norm(h, 3, param_attr=paddle.ParamAttr(), bias_attr=paddle.ParamAttr())
        h = paddle.static.nn.fc(h, 8, weight_attr=attr("w1"), bias_attr=attr("b1"))
        h = paddle.static.nn.layer_norm(h, begin_norm_axis=1)
        h = paddle.static.nn.batch_norm(h, data_layout="NHWC")
        pred = paddle.static.nn.fc(h, 1, weight_attr=attr("w2"), bias_attr=attr("b2"))
        loss = paddle.mean(paddle.nn.functional.square_error_cost(pred, t))
        test = main.clone(for_test=True)
        paddle.optimizer.SGD(0.1).minimize(loss)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    losses = [float(exe.run(main, feed={"x": xb, "t": tb}, fetch_list=[loss])[0])
              for xb, tb in zip(d["x"], d["t"])]
    scope = paddle.static.global_scope()
    stats = {n: np.array(scope.find_var(n).get_tensor()) for n in
             ("batch_norm_0.w_1", "batch_norm_0.w_2", "batch_norm_1.w_1", "batch_norm_1.w_2")}
    pred_test = exe.run(test, feed={"x": d["x"][0], "t": d["t"][0]}, fetch_list=[pred])[0]
    np.savez(spec["out"], losses=np.array(losses), pred_test=pred_test, **stats)
""")


@pytest.mark.paddle
def test_norm_layers_train_as_paddle(paddle26_python, tmp_path):
    rng = np.random.default_rng(4)
    f32 = np.float32
    d = {"x": (rng.standard_normal((6, 10, 3, 4, 4)) * 1.5 + 0.5).astype(f32),
         "t": rng.standard_normal((6, 10, 1)).astype(f32),
         "w1": rng.uniform(-0.3, 0.3, (48, 8)).astype(f32), "b1": (0.1 * rng.standard_normal(8)).astype(f32),
         "w2": rng.uniform(-0.5, 0.5, (8, 1)).astype(f32), "b2": np.zeros(1, f32)}
    ref = run_reference(paddle26_python, PADDLE_SCRIPT, tmp_path, d)
    with fresh() as (main, startup, exe):
        attr = lambda k: fluid.ParamAttr(initializer=NumpyArrayInitializer(d[k]))  # noqa: E731
        x, t = L.data("x", shape=[3, 4, 4]), L.data("t", shape=[1])
        h = L.batch_norm(x, act="relu", momentum=0.8)
        h = L.group_norm(L.instance_norm(h), 3, param_attr=fluid.ParamAttr(), bias_attr=fluid.ParamAttr())
        h = L.layer_norm(L.fc(h, 8, param_attr=attr("w1"), bias_attr=attr("b1")), begin_norm_axis=1)
        h = L.batch_norm(h, data_layout="NHWC")
        pred = L.fc(h, 1, param_attr=attr("w2"), bias_attr=attr("b2"))
        loss = L.mean(L.square_error_cost(pred, t))
        test = main.clone(for_test=True)
        fluid.optimizer.SGD(0.1).minimize(loss)
        exe.run(startup)
        losses = [float(exe.run(main, feed={"x": xb, "t": tb}, fetch_list=[loss])[0][0])
                  for xb, tb in zip(d["x"], d["t"])]
        np.testing.assert_allclose(losses, ref["losses"], rtol=1e-5, atol=1e-6)
        for name in ("batch_norm_0.w_1", "batch_norm_0.w_2", "batch_norm_1.w_1", "batch_norm_1.w_2"):
            np.testing.assert_allclose(value(name), ref[name], rtol=1e-5, atol=1e-6, err_msg=name)
        got, = exe.run(test, feed={"x": d["x"][0], "t": d["t"][0]}, fetch_list=[pred])
        np.testing.assert_allclose(got, ref["pred_test"], rtol=1e-5, atol=1e-5)


def test_instance_norm_and_group_norm_layers():
    rng = np.random.default_rng(5)
    xb = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[4, 3, 3])
        yi = L.instance_norm(x)
        yg = L.group_norm(x, groups=2)  # no affine parameters unless their attrs are given
        yga = L.group_norm(x, groups=2, param_attr=fluid.ParamAttr(), bias_attr=fluid.ParamAttr(), act="relu")
        L.instance_norm(x, param_attr=False, bias_attr=False)
        assert [p.name for p in main.all_parameters()] == [
            "instance_norm_0.w_0", "instance_norm_0.b_0", "group_norm_1.w_0", "group_norm_1.b_0"]
        with pytest.raises(ValueError, match="must be False together"):
            L.instance_norm(x, param_attr=False)
        exe.run(startup)
        gi, gg, gga = exe.run(main, feed={"x": xb}, fetch_list=[yi, yg, yga])
    per_channel = xb.reshape(2, 4, -1)
    want_i = (per_channel - per_channel.mean(-1, keepdims=True)) / np.sqrt(per_channel.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(gi, want_i.reshape(xb.shape), rtol=1e-5, atol=1e-5)
    per_group = xb.reshape(2, 2, -1)
    want_g = (per_group - per_group.mean(-1, keepdims=True)) / np.sqrt(per_group.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(gg, want_g.reshape(xb.shape), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gga, np.maximum(want_g.reshape(xb.shape), 0), rtol=1e-5, atol=1e-5)
