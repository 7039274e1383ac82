"""Layer functions build programs that the Executor runs to numpy's answers; models train.

Each test builds in fresh programs, a fresh scope and a fresh name generator, so tests do
not see each other's vars. Whole-program gradients (append_backward's fan-in ``sum``, the
zero gradient of an unused ``split`` output, ``embedding``) are checked in float64 against
central differences of the loss along a random direction per parameter.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import placegroup as fluid

L = fluid.layers


@contextlib.contextmanager
def fresh():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.scope_guard(fluid.Scope()), fluid.unique_name.guard():
        yield main, startup, fluid.Executor(fluid.CPUPlace())


def value(name_or_var) -> np.ndarray:
    name = getattr(name_or_var, "name", name_or_var)
    return np.array(fluid.global_scope().find_var(name).get_tensor())


def check_program_gradients(exe, main, loss, feed, params_grads) -> None:
    """Each parameter's gradient, along a random direction u, equals the central difference of
    the loss along u (float64 programs)."""
    rng = np.random.default_rng(11)
    for p, g in params_grads:
        base, u = value(p), rng.standard_normal(p.shape)
        tensor = fluid.global_scope().find_var(p.name).get_tensor()
        analytic = float(np.vdot(exe.run(main, feed=feed, fetch_list=[g])[0], u))

        def loss_at(t):
            tensor.set(base + t * u)
            return float(exe.run(main, feed=feed, fetch_list=[loss])[0][0])

        numeric = (loss_at(1e-6) - loss_at(-1e-6)) / 2e-6
        tensor.set(base)
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-9), p.name


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_activations_match_numpy():
    xs = np.random.default_rng(0).standard_normal((4, 5)).astype("float32")
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[5])
        outs = [L.relu(x), L.sigmoid(x), L.tanh(x), L.softmax(x), L.scale(x, 2.0, 1.0, act="relu")]
        assert [o.shape for o in outs] == [(-1, 5)] * 5
        got = exe.run(main, feed={"x": xs}, fetch_list=outs)
    want = [np.maximum(xs, 0), 1 / (1 + np.exp(-xs)), np.tanh(xs), np_softmax(xs), np.maximum(2 * xs + 1, 0)]
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_fc_with_act_relu():
    xs = np.random.default_rng(1).standard_normal((6, 4)).astype("float32")
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[4])
        y = L.fc(x, size=3, act="relu")
        exe.run(startup)
        (got,) = exe.run(main, feed={"x": xs}, fetch_list=[y])
        w, b = (value(p) for p in main.all_parameters())
    assert main.global_block().ops[-1].type == "relu"
    np.testing.assert_allclose(got, np.maximum(xs @ w + b, 0), rtol=1e-5, atol=1e-6)


def test_shape_and_product_layers():
    rng = np.random.default_rng(2)
    xs, ys = rng.standard_normal((2, 3, 4)).astype("float32"), rng.standard_normal((3,)).astype("float32")
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[3, 4])
        y = L.data("y", shape=[3], append_batch_size=False)
        flat = L.reshape(x, [0, -1])
        a, b = L.split(flat, [5, -1], dim=1)
        joined = L.concat([b, a], axis=1)
        mm = L.matmul(x, x, transpose_y=True, alpha=0.5)
        added = L.elementwise_add(x, y, axis=1, act="tanh")
        div = L.elementwise_div(x, L.fill_constant([1], "float32", 4.0))
        sub, mul = L.elementwise_sub(x, y, axis=1), L.elementwise_mul(x, x)
        red = [L.reduce_sum(x), L.reduce_sum(x, dim=1), L.reduce_mean(x, dim=[-1], keep_dim=True)]
        assert (flat.shape, a.shape, b.shape, joined.shape) == ((-1, 12), (-1, 5), (-1, 7), (-1, 12))
        assert mm.shape == (-1, 3, 3)
        assert [r.shape for r in red] == [(1,), (-1, 4), (-1, 3, 1)]
        got = exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[joined, mm, added, div, sub, mul] + red)
    f = xs.reshape(2, 12)
    want = [np.concatenate([f[:, 5:], f[:, :5]], 1), 0.5 * xs @ xs.transpose(0, 2, 1),
            np.tanh(xs + ys[None, :, None]), xs / 4, xs - ys[None, :, None], xs * xs,
            xs.sum().reshape(1), xs.sum(1), xs.mean(-1, keepdims=True)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_losses_and_accuracy():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((5, 4)).astype("float32")
    labels = np.array([[0], [3], [1], [1], [2]], dtype="int64")
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[4])
        lab = L.data("lab", shape=[1], dtype="int64")
        loss, prob = L.softmax_with_cross_entropy(x, lab, return_softmax=True)
        ce = L.cross_entropy(L.softmax(x), lab)
        acc = L.accuracy(L.softmax(x), lab, k=1)
        acc2 = L.accuracy(x, lab, k=2)
        vals, idx = L.topk(x, k=2)
        assert (loss.shape, ce.shape, acc.shape, idx.dtype) == ((-1, 1), (-1, 1), (1,), "int64")
        got = exe.run(main, feed={"x": logits, "lab": labels}, fetch_list=[loss, prob, ce, acc, acc2, idx])
    p = np_softmax(logits.astype(np.float64))
    nll = -np.log(np.take_along_axis(p, labels, 1))
    order = np.argsort(-logits, 1)
    np.testing.assert_allclose(got[0], nll, rtol=1e-5)
    np.testing.assert_allclose(got[1], p, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[2], nll, rtol=1e-5)
    assert got[3].dtype == np.float32 and got[3][0] == pytest.approx((order[:, 0] == labels[:, 0]).mean())
    assert got[4][0] == pytest.approx((order[:, :2] == labels).any(1).mean())
    np.testing.assert_array_equal(got[5], order[:, :2])


def test_embedding_padding_and_bad_ids():
    with fresh() as (main, startup, exe):
        ids = L.data("ids", shape=[1], dtype="int64")
        emb = L.embedding(ids, size=[6, 3], padding_idx=-1,
                          param_attr=fluid.ParamAttr(name="emb", initializer=fluid.initializer.Uniform(0.5, 1.0)))
        assert emb.shape == (-1, 3) and main.global_block().ops[-1].attrs["padding_idx"] == 5
        exe.run(startup)
        (got,) = exe.run(main, feed={"ids": np.array([[0], [5], [2]])}, fetch_list=[emb])
        table = value("emb")
        np.testing.assert_allclose(got, [table[0], np.zeros(3), table[2]])
        with pytest.raises(fluid.OpError, match="id 6 is out of range for a table of 6 rows"):
            exe.run(main, feed={"ids": np.array([[1], [6]])}, fetch_list=[emb])


def test_tensor_layers():
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[2])
        g = L.create_global_var(shape=[2], value=3.0, dtype="float32", persistable=True, name="g")
        t = L.create_tensor("float32")
        L.assign(x, output=t)
        c = L.assign(np.array([[1, 2]], dtype="int64"))
        total = L.sums([x, t, x])
        one = L.ones([2], "float32")
        as_int = L.cast(L.scale(x, 10.0), "int64")
        z = L.zeros([3], "int64")
        p = L.create_parameter([2, 2], "float32", name="p", default_initializer=fluid.initializer.Constant(0.5))
        assert (g.persistable, g.shape, t.shape, as_int.dtype, c.dtype) == (True, (2,), (-1, 2), "int64", "int64")
        assert [op.type for op in startup.global_block().ops] == ["fill_constant", "fill_constant"]
        exe.run(startup)
        got = exe.run(main, feed={"x": np.array([[0.25, -1.5]], "float32")},
                      fetch_list=[g, t, c, total, as_int, z, p, one])
    np.testing.assert_array_equal(got[0], [3.0, 3.0])
    np.testing.assert_array_equal(got[1], [[0.25, -1.5]])
    np.testing.assert_array_equal(got[2], [[1, 2]])
    np.testing.assert_allclose(got[3], [[0.75, -4.5]])
    assert got[4].dtype == np.int64 and got[4].tolist() == [[2, -15]]
    assert got[5].tolist() == [0, 0, 0] and got[6].tolist() == [[0.5, 0.5], [0.5, 0.5]] and got[7].tolist() == [1, 1]


def _blobs(n_per=40):
    rng = np.random.default_rng(4)
    centers = np.array([[2, 0, 0, 1], [-2, 1, 0, -1], [0, -2, 2, 0]], dtype="float32")
    ys = np.repeat(np.arange(3), n_per)
    xs = centers[ys] + 0.7 * rng.standard_normal((len(ys), 4)).astype("float32")
    return xs, ys.reshape(-1, 1).astype("int64")


def test_mlp_classifier_trains():
    xs, ys = _blobs()
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[4])
        lab = L.data("lab", shape=[1], dtype="int64")
        prob = L.fc(L.fc(x, 16, act="relu"), 3, act="softmax")
        loss = L.mean(L.cross_entropy(prob, lab))
        acc = L.accuracy(prob, lab)
        fluid.optimizer.SGD(learning_rate=0.2).minimize(loss)
        main.verify()
        exe.run(startup)
        hist = [exe.run(main, feed={"x": xs, "lab": ys}, fetch_list=[loss, acc]) for _ in range(60)]
    (l0, a0), (l1, a1) = hist[0], hist[-1]
    assert l1[0] < 0.3 * l0[0], f"loss went {l0[0]} -> {l1[0]}"
    assert a1[0] >= 0.95 and a1[0] > a0[0], f"accuracy went {a0[0]} -> {a1[0]}"


def _fan_in():
    # h feeds relu, sigmoid and both slots of one elementwise_mul: its gradient has four parts.
    x = L.data("x", shape=[3], dtype="float64")
    h = L.fc(x, 4)
    return L.mean(L.elementwise_add(L.relu(h), L.sigmoid(h)) + L.elementwise_mul(h, h))


def _split_concat():
    # One split output is unused: append_backward gives it a zero gradient for split's grad.
    x = L.data("x", shape=[3], dtype="float64")
    a, _unused, b = L.split(L.fc(x, 6, act="tanh"), 3, dim=1)
    m = L.matmul(L.reshape(L.concat([b, a], axis=1), [0, 2, 2]), L.reshape(a, [0, 2, 1]))
    return L.reduce_mean(L.scale(m, 2.0, 0.5))


def _embedding_swce():
    ids = L.data("ids", shape=[1], dtype="int64")
    lab = L.data("lab", shape=[1], dtype="int64")
    emb = L.embedding(ids, size=[7, 4], dtype="float64", padding_idx=0)
    return L.mean(L.softmax_with_cross_entropy(L.fc(emb, 3), lab))


@pytest.mark.parametrize("build", [_fan_in, _split_concat, _embedding_swce], ids=lambda f: f.__name__[1:])
def test_whole_program_gradient(build):
    rng = np.random.default_rng(5)
    feed = {"x": rng.standard_normal((5, 3)), "ids": np.array([[1], [0], [6], [1], [3]]),
            "lab": np.array([[0], [2], [1], [1], [0]])}
    with fresh() as (main, startup, exe):
        loss = build()
        params_grads = fluid.append_backward(loss)
        main.verify()
        feed = {k: v for k, v in feed.items() if main.global_block().has_var(k)}
        exe.run(startup)
        exe.run(main, feed=feed)
        assert params_grads and all(p.dtype == "float64" for p, _ in params_grads)
        if build is _fan_in:
            assert any(op.type == "sum" and op.role == "backward" for op in main.global_block().ops)
        check_program_gradients(exe, main, loss, feed, params_grads)
