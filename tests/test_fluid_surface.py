"""Fluid 1.8's top-level surface: fluid.data / embedding / one_hot, the lenient feed of
fluid.layers.data, fluid.nets, Fluid's parameter names in creation order, replacing a value by
name after the startup program, and the process-wide switches."""
import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import NotImplementedInPlacegroup, ProgramError
from tests.inproc import build_programs


def _run(build, feed, fetch):
    main, startup, _, _ = build_programs(lambda: (build(), None))
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return main, exe.run(main, feed=feed, fetch_list=fetch(main), scope=scope)


def test_fluid_data_embedding_and_one_hot_keep_every_dim():
    def build():
        ids = fluid.data(name="ids", shape=[None, 3], dtype="int64")
        return fluid.embedding(ids, size=[10, 4], param_attr="emb"), fluid.one_hot(ids, depth=10)

    main, (emb, hot) = _run(build, {"ids": np.array([[1, 2, 9], [0, 0, 3]])},
                            lambda m: [op.output("Out")[0] for op in m.global_block().ops])
    assert emb.shape == (2, 3, 4) and hot.shape == (2, 3, 10)
    assert [op.type for op in main.global_block().ops] == ["lookup_table_v2", "one_hot_v2"]
    np.testing.assert_array_equal(hot.argmax(-1), [[1, 2, 9], [0, 0, 3]])
    assert main.global_block().var("ids").shape == (-1, 3)


def test_fluid_data_checks_its_feed_and_layers_data_takes_the_same_elements():
    x = fluid.data(name="x", shape=[None, 1], dtype="float32")
    y = fluid.layers.data(name="y", shape=[1], dtype="float32")
    out = fluid.layers.elementwise_add(fluid.layers.scale(y, 2.0), x)
    exe = fluid.Executor()
    # as Fluid 1.8.5 (NOTE(feed-shape)): each op sees the fed shape; y fed as [3] broadcasts against x
    got, = exe.run(feed={"x": np.ones((3, 1), "float32"), "y": np.arange(3, dtype="float32")}, fetch_list=[out])
    np.testing.assert_array_equal(got, [[1.0, 3.0, 5.0]] * 3)
    got, = exe.run(feed={"x": np.ones(3, "float32"), "y": np.arange(3, dtype="float32")}, fetch_list=[out])
    np.testing.assert_array_equal(got, [1.0, 3.0, 5.0])  # fluid.data takes fewer dims that fit
    got, = exe.run(feed={"x": np.ones((3, 1), "float32"), "y": np.arange(6, dtype="float32").reshape(3, 2)},
                   fetch_list=[out])
    np.testing.assert_array_equal(got, [[1.0, 3.0], [5.0, 7.0], [9.0, 11.0]])
    with pytest.raises(ProgramError, match=r"feed 'x' has shape \[3, 2\], but the var is declared \[-1, 1\]"):
        exe.run(feed={"x": np.ones((3, 2), "float32"), "y": np.ones(3, "float32")}, fetch_list=[out])


def test_parameters_follow_fluids_unique_names_in_creation_order():
    def build():
        img = fluid.layers.data(name="img", shape=[1, 8, 8])
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        h = fluid.layers.conv2d(img, 4, 3, act="relu")
        h = fluid.layers.batch_norm(h)
        h = fluid.layers.fc(fluid.layers.pool2d(h, 2, pool_stride=2), 6)
        e = fluid.layers.embedding(ids, size=[20, 6])
        return fluid.layers.fc(fluid.layers.elementwise_add(h, e), 2)

    main, _, _, _ = build_programs(lambda: (build(), None))
    assert [p.name for p in main.all_parameters()] == [
        "conv2d_0.w_0", "conv2d_0.b_0", "batch_norm_0.w_0", "batch_norm_0.b_0", "batch_norm_0.w_1",
        "batch_norm_0.w_2", "fc_0.w_0", "fc_0.b_0", "embedding_0.w_0", "fc_1.w_0", "fc_1.b_0"]


def test_a_value_set_by_name_after_the_startup_program_is_the_one_used():
    x = fluid.layers.data(name="x", shape=[3])
    y = fluid.layers.fc(x, 2, bias_attr=False)
    exe, place = fluid.Executor(fluid.CPUPlace()), fluid.CPUPlace()
    exe.run(fluid.default_startup_program())
    w = np.arange(6, dtype="float32").reshape(3, 2)
    fluid.global_scope().find_var("fc_0.w_0").get_tensor().set(w, place)
    got, = exe.run(feed={"x": np.ones((1, 3), "float32")}, fetch_list=[y])
    np.testing.assert_array_equal(got, [[6.0, 9.0]])


def test_nets_build_fluids_networks():
    img = fluid.layers.data(name="img", shape=[1, 12, 12])
    a = fluid.nets.simple_img_conv_pool(img, num_filters=4, filter_size=3, pool_size=2, pool_stride=2, act="relu")
    b = fluid.nets.img_conv_group(img, [4, 4], pool_size=2, conv_act="relu", conv_with_batchnorm=True,
                                  conv_batchnorm_drop_rate=[0.1, 0.0], pool_stride=2)
    q = fluid.layers.data(name="q", shape=[5, 8])
    att = fluid.nets.scaled_dot_product_attention(q, q, q, num_heads=2)
    g = fluid.nets.glu(fluid.layers.data(name="g", shape=[6]))
    assert a.shape == (-1, 4, 5, 5) and b.shape == (-1, 4, 6, 6) and att.shape == (-1, 5, 8) and g.shape == (-1, 3)
    types = [op.type for op in fluid.default_main_program().global_block().ops]
    assert types.count("batch_norm") == 2 and types.count("dropout") == 1
    exe = fluid.Executor()
    exe.run(fluid.default_startup_program())
    rng = np.random.default_rng(0)
    qv = rng.standard_normal((2, 5, 8)).astype("float32")
    out, = exe.run(feed={"img": rng.random((2, 1, 12, 12), "float32"), "q": qv,
                         "g": np.ones((2, 6), "float32")}, fetch_list=[att])
    assert out.shape == (2, 5, 8) and np.isfinite(out).all()


def test_single_head_attention_is_softmax_qk_v():
    q = fluid.layers.data(name="q", shape=[4, 6])
    att = fluid.nets.scaled_dot_product_attention(q, q, q)
    qv = np.random.default_rng(1).standard_normal((2, 4, 6)).astype("float32")
    out, = fluid.Executor().run(feed={"q": qv}, fetch_list=[att])
    s = qv @ qv.transpose(0, 2, 1) / np.sqrt(6)
    w = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(out, (w / w.sum(-1, keepdims=True)) @ qv, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, err, match", [
    (lambda: fluid.nets.img_conv_group(fluid.layers.data("i", [1, 4, 4]), 4, 2), TypeError, "must be a list"),
    (lambda: fluid.nets.img_conv_group(fluid.layers.data("i", [1, 4, 4]), [4, 4], 2, conv_padding=[1]),
     ValueError, "conv_padding has 1 entries for 2"),
    (lambda: fluid.nets.scaled_dot_product_attention(*[fluid.layers.data(n, [4, 6]) for n in "qkv"], num_heads=4),
     ValueError, "does not divide by num_heads=4"),
    (lambda: fluid.enable_dygraph(), NotImplementedInPlacegroup, "static Programs only"),
    (lambda: fluid.set_flags(["FLAGS_x"]), TypeError, "must be a dict"),
    (lambda: fluid.get_flags("FLAGS_never_set"), ValueError, "were not set"),
    (lambda: fluid.require_version("2.0.0"), Exception, "outside the required range"),
    (lambda: fluid.require_version("1.x"), ValueError, "is not a version"),
])
def test_bad_calls_say_what_is_wrong(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_switches():
    assert fluid.in_dygraph_mode() is False
    fluid.require_version("1.5.0", "1.8.9")
    with pytest.warns(UserWarning, match="changes nothing"):
        fluid.set_flags({"FLAGS_eager_delete_tensor_gb": 0.0})
    assert fluid.get_flags(["FLAGS_eager_delete_tensor_gb"]) == {"FLAGS_eager_delete_tensor_gb": 0.0}
    with fluid.name_scope("block"), pytest.warns(UserWarning, match="device_guard"), fluid.device_guard("cpu"):
        fluid.layers.fc(fluid.layers.data("x", [2]), 1)
    assert fluid.learning_rate_decay.exponential_decay is fluid.layers.exponential_decay


def test_backward_makes_no_zero_gradients_for_outputs_that_never_have_one():
    x = fluid.layers.data(name="x", shape=[3, 4, 4])
    h = fluid.layers.dropout(fluid.layers.batch_norm(x), 0.5)
    fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(h))
    ops = fluid.default_main_program().global_block().ops
    assert not [op for op in ops if op.type == "fill_zeros_like"]


def test_a_lod_tensor_holds_data_and_feeds_it():
    t = fluid.core.LoDTensor()
    with pytest.raises(ValueError, match="holds no value yet"):
        t.shape()
    t.set(np.arange(6, dtype="float32").reshape(2, 3), fluid.CPUPlace())
    assert t.shape() == [2, 3] and t.lod() == [] and t.has_valid_recursive_sequence_lengths()
    x = fluid.layers.data(name="x", shape=[3])
    got, = fluid.Executor().run(feed={"x": t}, fetch_list=[fluid.layers.scale(x, 2.0)])
    np.testing.assert_array_equal(got, 2 * np.array(t))
    t.set_recursive_sequence_lengths([[1, 1]])
    assert t.lod() == [[0, 1, 2]]
    assert fluid.LoDTensor is fluid.core.LoDTensor is fluid.Tensor


def test_weighted_average_and_install_check(capsys):
    with pytest.warns(DeprecationWarning):
        avg = fluid.average.WeightedAverage()
    with pytest.raises(ValueError, match="no data"):
        avg.eval()
    avg.add(value=0.5, weight=32)
    avg.add(value=np.array([0.75]), weight=32)
    np.testing.assert_allclose(avg.eval(), [0.625])
    with pytest.raises(ValueError, match="weight must be a number"):
        avg.add(1.0, "2")
    fluid.install_check.run_check()
    assert "installed successfully" in capsys.readouterr().out


def test_each_run_of_a_forward_program_draws_anew_unless_seeded():
    x = fluid.layers.data(name="x", shape=[64])
    free = fluid.layers.dropout(x, 0.5)
    fixed = fluid.layers.dropout(x, 0.5, seed=3)
    exe, feed = fluid.Executor(), {"x": np.ones((4, 64), "float32")}
    (a1, b1), (a2, b2) = (exe.run(feed=feed, fetch_list=[free, fixed]) for _ in range(2))
    assert not np.array_equal(a1, a2)
    np.testing.assert_array_equal(b1, b2)


def test_layers_data_takes_fluids_argument_order_and_explicit_batch_dims():
    assert fluid.layers.data("a", [13]).shape == (-1, 13)
    assert fluid.layers.data("b", [None, 13]).shape == (-1, 13)  # a batch dim given: none added
    c = fluid.layers.data("c", [4], False, "int64")  # (name, shape, append_batch_size, dtype)
    assert c.shape == (4,) and c.dtype == "int64"
