"""The layers of placegroup/layers/ops.py build programs that the Executor runs to numpy's
answers; their gradients flow through append_backward; a small model with them trains."""
from __future__ import annotations

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from placegroup.layers import ops
from placegroup.ops.registry import KernelContext, get_op_def
from tests.test_layers import check_program_gradients, fresh

L = fluid.layers


def test_ops_layers_match_numpy():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((4, 5)).astype("float32")
    ys = rng.standard_normal((4, 5)).astype("float32")
    with fresh() as (main, startup, exe):
        x, y = L.data("x", shape=[5]), L.data("y", shape=[5])
        lt, gt = ops.less_than(x, y), ops.greater_equal(x, y)
        outs = [ops.square(x), ops.sqrt(ops.abs(x)), ops.leaky_relu(x, alpha=0.1), ops.clip(x, -0.5, 0.5),
                ops.pow(x, factor=3.0), ops.reduce_max(x, dim=1), ops.reduce_min(x, dim=[0, 1], keep_dim=True),
                ops.reduce_prod(x), ops.round(x), ops.sign(x), lt,
                ops.logical_and(lt, ops.logical_not(gt)), ops.logical_xor(lt, gt), ops.elu(x), ops.swish(x),
                ops.hard_sigmoid(x), ops.relu6(x), ops.softplus(x), ops.exp(x)]
        assert outs[5].shape == (-1,) and outs[6].shape == (1, 1) and outs[7].shape == (1,)
        assert lt.dtype == "bool" and lt.stop_gradient
        got = exe.run(main, feed={"x": xs, "y": ys}, fetch_list=outs)
    want = [xs ** 2, np.sqrt(np.abs(xs)), np.where(xs > 0, xs, 0.1 * xs), np.clip(xs, -0.5, 0.5), xs ** 3,
            xs.max(1), xs.min(keepdims=True), xs.prod().reshape(1), np.sign(xs) * np.floor(np.abs(xs) + 0.5),
            np.sign(xs), xs < ys, xs < ys, (xs < ys) ^ (xs >= ys), np.where(xs > 0, xs, np.exp(xs) - 1),
            xs / (1 + np.exp(-xs)), np.clip(0.2 * xs + 0.5, 0, 1), np.clip(xs, 0, 6), np.logaddexp(0, xs),
            np.exp(xs)]
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype, f"output {i}: {g.dtype} vs {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"output {i}")


def test_build_errors_name_the_problem():
    with fresh():
        x = L.data("x", shape=[5])
        with pytest.raises(ProgramError, match="min 1.0 is greater than max -1.0"):
            ops.clip(x, 1.0, -1.0)
        with pytest.raises(ProgramError, match="X must be bool"):
            ops.logical_not(x)
        with pytest.raises(ProgramError, match="dim 2 is out of range"):
            ops.reduce_max(x, dim=2)


def test_reduce_max_gradient_goes_to_every_tie():
    # Paddle's reduce_max_grad: dX = dOut where X equals the maximum, each tie getting all of it.
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]], np.float32)
    attrs = {**get_op_def("reduce_max_grad").attrs, "dim": [1]}
    ins = {"X": x, "Out": x.max(1), "Out@GRAD": np.array([2.0, 5.0], np.float32)}
    got = get_op_def("reduce_max_grad").kernels["cpu"](np, ins, attrs, KernelContext(outputs=["X@GRAD"]))
    np.testing.assert_array_equal(got["X@GRAD"], [[0, 2, 2], [5, 0, 0]])


def test_gradient_through_the_new_layers():
    # float64 whole-program gradient vs central differences; sign and floor add zero gradients
    # (sign's is a scale by 0), clip's inputs stay away from its bounds.
    rng = np.random.default_rng(3)
    feed = {"x": rng.standard_normal((5, 3))}
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[3], dtype="float64")
        h = L.fc(x, 6)
        a = ops.reduce_max(ops.leaky_relu(h, alpha=0.1), dim=1)
        b = ops.reduce_prod(ops.swish(ops.elu(h)), dim=1)
        c = L.elementwise_mul(ops.sign(h), ops.floor(h))
        d = ops.reduce_min(ops.square(ops.clip(h, -50.0, 50.0)), dim=1)
        loss = L.elementwise_add(L.reduce_mean(L.elementwise_add(L.elementwise_add(a, b), d)), L.reduce_sum(c))
        params_grads = fluid.append_backward(loss)
        main.verify()
        exe.run(startup)
        check_program_gradients(exe, main, loss, feed, params_grads)


def test_model_with_leaky_relu_reduce_max_square_trains():
    # Learn y = max_j x_j: the model's forward is reduce_max(leaky_relu(fc(x))), its loss a square.
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((64, 4)).astype("float32")
    ys = xs.max(1, keepdims=True)
    with fresh() as (main, startup, exe):
        x, y = L.data("x", shape=[4]), L.data("y", shape=[1])
        pred = ops.reduce_max(ops.leaky_relu(L.fc(x, 8)), dim=1, keep_dim=True)
        loss = L.mean(ops.square(L.elementwise_sub(pred, y)))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        main.verify()
        exe.run(startup)
        hist = [float(exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss])[0][0]) for _ in range(80)]
    assert hist[-1] < 0.3 * hist[0], f"loss went {hist[0]} -> {hist[-1]}"
