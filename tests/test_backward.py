"""append_backward: graph walking, fan-in sums, stop_gradient, and the whole-program gradient."""
import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError


def _run_grads(main, startup, feed, names):
    exe = fluid.Executor()
    exe.run(startup)
    return exe.run(main, feed=feed, fetch_list=names)


def test_fan_in_gradients_are_summed(fresh_programs):
    main, startup = fresh_programs
    x = fluid.layers.data(name="x", shape=[3])
    h = fluid.layers.fc(input=x, size=3)
    # h feeds two consumers: its gradient has two parts that must be summed
    loss = fluid.layers.mean((h * 3.0 - h * h) * (h * 3.0 - h * h))
    pg = fluid.append_backward(loss)
    types = [op.type for op in main.global_block().ops]
    assert "sum" in types
    sum_op = next(op for op in main.global_block().ops if op.type == "sum")
    assert sum_op.output("Out") == ["fc_0.tmp_1@GRAD"]
    assert all("@RENAME@" in n for n in sum_op.input("X")) and len(sum_op.input("X")) >= 2
    main.verify()

    rng = np.random.default_rng(1)
    xs = rng.normal(size=(4, 3)).astype(np.float64)
    exe = fluid.Executor()
    exe.run(startup)
    scope = fluid.global_scope()
    w = np.array(scope.find_var("fc_0.w_0").get_tensor(), dtype=np.float64)

    def f(w_):
        hh = xs @ w_
        return np.mean((hh * 3 - hh * hh) ** 2)

    g, = exe.run(main, feed={"x": xs.astype(np.float32)}, fetch_list=["fc_0.w_0@GRAD"])
    num = np.zeros_like(w)
    eps = 1e-6
    for i in np.ndindex(*w.shape):
        d = np.zeros_like(w); d[i] = eps
        num[i] = (f(w + d) - f(w - d)) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=2e-3, atol=1e-4)
    assert [p.name for p, _ in pg] == ["fc_0.w_0", "fc_0.b_0"]


def test_stop_gradient_and_no_grad_set(fresh_programs):
    main, _ = fresh_programs
    x = fluid.layers.data(name="x", shape=[3])
    h1 = fluid.layers.fc(input=x, size=3)
    h2 = fluid.layers.fc(input=h1, size=1)
    loss = fluid.layers.mean(h2)
    pg = fluid.append_backward(loss, no_grad_set={"fc_0.tmp_1"})
    names = [p.name for p, _ in pg]
    assert names == ["fc_1.w_0", "fc_1.b_0"]  # nothing flows below the cut
    assert not main.global_block().has_var("x@GRAD")  # data never gets a gradient


def test_a_data_var_marked_stop_gradient_false_gets_its_gradient(fresh_programs):
    """As in Fluid: ``x.stop_gradient = False`` on an input makes append_backward compute
    ``x@GRAD`` (the gradient of the loss with respect to the input), checked numerically."""
    main, startup = fresh_programs
    x = fluid.layers.data(name="x", shape=[3])
    label = fluid.layers.data(name="label", shape=[1])
    x.stop_gradient = False
    h = fluid.layers.fc(input=x, size=4, act="tanh")
    loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(input=h, size=1), label))
    pg = fluid.append_backward(loss)
    assert [p.name for p, _ in pg] == ["fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"]  # params only
    assert not main.global_block().has_var("label@GRAD")  # stop_gradient, as data vars are
    rng = np.random.default_rng(2)
    xs, ys = rng.normal(size=(5, 3)), rng.normal(size=(5, 1))
    exe = fluid.Executor()
    exe.run(startup)
    gx, = exe.run(main, feed={"x": xs.astype(np.float32), "label": ys.astype(np.float32)}, fetch_list=["x@GRAD"])
    scope = fluid.global_scope()
    w0, b0, w1, b1 = (np.array(scope.find_var(n).get_tensor(), np.float64)
                      for n in ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"))

    def f(x_):
        return np.mean((np.tanh(x_ @ w0 + b0) @ w1 + b1 - ys) ** 2)

    num = np.zeros_like(xs)
    for i in np.ndindex(*xs.shape):
        d = np.zeros_like(xs); d[i] = 1e-6
        num[i] = (f(xs + d) - f(xs - d)) / 2e-6
    np.testing.assert_allclose(gx, num, rtol=1e-3, atol=1e-6)


def test_frozen_parameter_gets_no_update(fresh_programs):
    main, startup = fresh_programs
    x = fluid.layers.data(name="x", shape=[2])
    y = fluid.layers.fc(input=x, size=1, param_attr=fluid.ParamAttr(name="w", trainable=False))
    _, pg = fluid.optimizer.SGD(0.5).minimize(fluid.layers.mean(y))
    assert [p.name for p, _ in pg] == ["fc_0.b_0"]
    exe = fluid.Executor()
    exe.run(startup)
    w0 = np.array(fluid.global_scope().find_var("w").get_tensor())
    exe.run(main, feed={"x": np.ones((2, 2), np.float32)})
    np.testing.assert_array_equal(np.array(fluid.global_scope().find_var("w").get_tensor()), w0)


def test_loss_must_come_from_an_op(fresh_programs):
    x = fluid.layers.data(name="x", shape=[1])
    with pytest.raises(ProgramError, match="no op of the program writes the loss 'x'"):
        fluid.append_backward(x)


def test_unused_output_gets_zero_gradient(fresh_programs):
    """An op with two outputs where only one reaches the loss still gets both out-grads."""
    main, startup = fresh_programs
    x = fluid.layers.data(name="x", shape=[4])
    h = fluid.layers.fc(input=x, size=4)
    b = main.global_block()
    a_out = b.create_var("a_out")
    c_out = b.create_var("c_out")
    b.append_op("split", {"X": [h]}, {"Out": [a_out, c_out]}, {"num": 2, "axis": 1})
    loss = fluid.layers.mean(a_out)
    fluid.append_backward(loss)
    assert "fill_zeros_like" in [op.type for op in b.ops]
    main.verify()
    exe = fluid.Executor()
    exe.run(startup)
    g, = exe.run(main, feed={"x": np.ones((2, 4), np.float32)}, fetch_list=["fc_0.tmp_1@GRAD"])
    np.testing.assert_allclose(g, [[0.25, 0.25, 0, 0]] * 2)


def test_fluid_gradients_of_targets_with_respect_to_inputs(fresh_programs):
    x = fluid.layers.data(name="x", shape=[2], stop_gradient=False)
    h = fluid.layers.square(x)
    y = fluid.layers.reduce_sum(h)
    other = fluid.layers.data(name="o", shape=[2], stop_gradient=False)
    dx, none = fluid.gradients([y], [x, other])
    assert none is None
    seed = fluid.layers.fill_constant([1], "float32", 3.0)
    dh, = fluid.gradients(y, h, target_gradients=[seed])
    got = fluid.Executor().run(feed={"x": np.array([[1.0, 2.0]], "float32")}, fetch_list=[dx, dh])
    np.testing.assert_array_equal(got[0], [[2.0, 4.0]])
    np.testing.assert_array_equal(got[1], [[3.0, 3.0]])
    with pytest.raises(ValueError, match="2 target_gradients for 1 targets"):
        fluid.gradients([y], [x], target_gradients=[seed, seed])
