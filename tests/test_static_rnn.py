"""``fluid.layers.StaticRNN``, unrolled into T copies of its step (NOTE(static-rnn-unroll) in
placegroup/layers/static_rnn.py).

Checked against a numpy RNN (memories from ``init`` and from ``batch_ref``, two step inputs,
several outputs), against float64 central differences (the fc parameters, the input and the
memory's init), on bad input (Fluid's messages where Fluid has one), and against Fluid 1.8.5
training the same PTB-style language model from the same parameters."""
import sys

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from tests.numeric import central_differences
from tests.paddle_ref.reference import SCRIPT_HEAD, run_reference

L = fluid.layers
T, B, D, E, H = 3, 2, 4, 5, 6


def _value(name) -> np.ndarray:
    return np.array(fluid.global_scope().find_var(name).get_tensor())


def _two_memory_rnn(dtype="float32"):
    """h_t = tanh(fc([x_t, h_{t-1}])) from h0; c_t = 0.5 c_{t-1} + fc(z_t) from 0.25; outputs h, c, x_t."""
    x = L.data("x", shape=[T, B, D], dtype=dtype, append_batch_size=False)
    z = L.data("z", shape=[T, B, E], dtype=dtype, append_batch_size=False)
    h0 = L.data("h0", shape=[B, H], dtype=dtype, append_batch_size=False)
    rnn = L.StaticRNN()
    with rnn.step():
        x_t, z_t = rnn.step_input(x), rnn.step_input(z)
        h_pre = rnn.memory(init=h0)
        c_pre = rnn.memory(shape=[-1, H], batch_ref=x_t, init_value=0.25)
        h = L.fc([x_t, h_pre], size=H, act="tanh")
        c = L.elementwise_add(L.scale(c_pre, 0.5), L.fc(z_t, size=H))
        rnn.update_memory(h_pre, h)
        rnn.update_memory(c_pre, c)
        rnn.output(h, c)
        rnn.step_output(x_t)
    return (x, z, h0), rnn()


def _numpy_rnn(xs, zs, h0s):
    w0, w1, b0, wz, bz = (_value(n) for n in ("fc_0.w_0", "fc_0.w_1", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"))
    h, c, hs, cs = h0s, np.full((B, H), 0.25), [], []
    for t in range(T):
        h = np.tanh(xs[t] @ w0 + h @ w1 + b0)
        c = 0.5 * c + zs[t] @ wz + bz
        hs.append(h)
        cs.append(c)
    return np.stack(hs), np.stack(cs)


def _feed(rng, dtype="float32"):
    return {"x": rng.standard_normal((T, B, D)).astype(dtype), "z": rng.standard_normal((T, B, E)).astype(dtype),
            "h0": rng.standard_normal((B, H)).astype(dtype)}


def test_forward_equals_numpy_and_the_program_holds_t_plain_copies(fresh_programs):
    main, startup = fresh_programs
    _, outs = _two_memory_rnn()
    assert [o.shape for o in outs] == [(T, B, H), (T, B, H), (T, B, D)]
    assert main.num_blocks == 1 and main.current_block_idx == 0  # the step's block is gone
    main.verify()
    types = [op.type for op in main.global_block().ops]
    assert types.count("unstack") == 2 and types.count("stack") == 3 and types.count("tanh") == T
    assert "x@step2" in str(main) and "fc_0.tmp_0@step1" in str(main)
    assert sorted(p.name for p in main.all_parameters()) == ["fc_0.b_0", "fc_0.w_0", "fc_0.w_1", "fc_1.b_0",
                                                             "fc_1.w_0"]  # made once, Fluid's names
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feed = _feed(np.random.default_rng(0))
    got = exe.run(main, feed=feed, fetch_list=outs)
    hs, cs = _numpy_rnn(feed["x"], feed["z"], feed["h0"])
    np.testing.assert_allclose(got[0], hs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], cs, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[2], feed["x"])


def test_one_output_is_a_var_and_a_memory_may_feed_another(fresh_programs):
    main, _ = fresh_programs
    x = L.data("x", shape=[T, B, D], append_batch_size=False)
    rnn = L.StaticRNN(name="swap")
    with rnn.step():
        x_t = rnn.step_input(x)
        a = rnn.memory(shape=[-1, D], batch_ref=x_t, init_value=1.0)
        b = rnn.memory(shape=[-1, D], batch_ref=x_t, init_value=2.0)
        rnn.update_memory(a, b)  # a_t = b_{t-1}, b_t = a_{t-1} + x_t
        rnn.update_memory(b, L.elementwise_add(a, x_t))
        rnn.step_output(a)  # step t reads a_{t-1}
    out = rnn()
    assert isinstance(out, fluid.Variable) and out.name == "swap.tmp_0"
    exe = fluid.Executor(fluid.CPUPlace())
    xs = np.random.default_rng(1).standard_normal((T, B, D)).astype("float32")
    got, = exe.run(main, feed={"x": xs}, fetch_list=[out])
    a, b, want = np.ones((B, D)), np.full((B, D), 2.0), []
    for t in range(T):
        want.append(a)
        a, b = b, a + xs[t]
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-6)


def test_gradients_equal_central_differences(fresh_programs):
    """float64: each parameter along a random direction, and every element of x and h0."""
    main, startup = fresh_programs
    (x, _, h0), (h, c, _) = _two_memory_rnn("float64")
    x.stop_gradient = h0.stop_gradient = False
    loss = L.mean(L.elementwise_mul(h, c))
    params_grads = fluid.append_backward(loss)
    assert main.num_blocks == 1
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(2)
    feed = _feed(rng, "float64")
    scope = fluid.global_scope()

    def loss_at(name, delta):
        tensor = scope.find_var(name).get_tensor()
        base = np.array(tensor)
        tensor.set(base + delta)
        try:
            return float(exe.run(main, feed=feed, fetch_list=[loss])[0][0])
        finally:
            tensor.set(base)

    assert len(params_grads) == 5
    for p, g in params_grads:
        u = rng.standard_normal(p.shape)
        analytic = float(np.vdot(exe.run(main, feed=feed, fetch_list=[g])[0], u))
        numeric = (loss_at(p.name, 1e-6 * u) - loss_at(p.name, -1e-6 * u)) / 2e-6
        assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-10), p.name

    def feed_loss(name, value):
        return float(exe.run(main, feed={**feed, name: value}, fetch_list=[loss])[0][0])

    for name in ("x", "h0"):
        grad, = exe.run(main, feed=feed, fetch_list=[f"{name}@GRAD"])
        numeric = central_differences(lambda v: feed_loss(name, v), feed[name])
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-10, err_msg=name)


def _step(rnn, body):
    with rnn.step():
        body(rnn)


def _seq(name="x", shape=(T, B, D)):
    return L.data(name, shape=list(shape), append_batch_size=False)


def _no_update(rnn):
    x_t = rnn.step_input(_seq())
    rnn.memory(shape=[-1, D], batch_ref=x_t)
    rnn.step_output(x_t)


def _loop_in_step(rnn):
    x_t = rnn.step_input(_seq())
    i = L.fill_constant([1], "int64", 0)
    loop = L.While(L.less_than(i, L.fill_constant([1], "int64", 2)))
    with loop.block():
        L.increment(i, in_place=True)
    rnn.step_output(x_t)


BAD = [
    ("unknown T", lambda r: r.step_input(L.data("x", shape=[B, D])), ValueError,
     r"first dim of x \(the sequence length T\) must be known .* shape \[-1, 2, 4\]"),
    ("two lengths", lambda r: [r.step_input(_seq()), r.step_input(_seq("y", (T + 1, B, D)))], ValueError,
     "Static RNN only take fix seq_len input"),
    ("no init, no batch_ref", lambda r: r.memory(shape=[-1, D]), ValueError,
     "if init is None, memory at least need shape and batch_ref"),
    ("not a memory", lambda r: r.update_memory(r.step_input(_seq()), r.step_input(_seq())), ValueError,
     "'x' is not a memory of static_rnn_0"),
    ("update of another shape", lambda r: r.update_memory(r.memory(init=_seq("h", (B, H))), r.step_input(_seq())),
     ValueError, r"memory 'static_rnn_0@mem_0' is float32\[2, 6\] but var 'x' is float32\[2, 4\]"),
    ("rnn() inside step", lambda r: r(), ValueError, "RNN output can only be retrieved after rnn block"),
    ("not a Variable", lambda r: r.step_input(np.zeros((T, B))), TypeError,
     "The type of 'x' in fluid.layers.StaticRNN.step_input must be"),
    ("init made in the step", lambda r: r.memory(init=L.scale(r.step_input(_seq()), 2.0)), ValueError,
     "init 'scale_0.tmp_0' is made inside the step"),
    ("memory not updated", _no_update, ValueError, "should be updated in every step"),
    ("no step_input", lambda r: r.step_output(_seq()), ValueError, "the step has no step_input"),
    ("control flow in the step", _loop_in_step, ProgramError, "does not unroll control flow"),
]


@pytest.mark.parametrize("body, exc, match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_says_what_is_wrong_and_leaves_the_program_clean(fresh_programs, body, exc, match):
    main, _ = fresh_programs
    rnn = L.StaticRNN()
    with pytest.raises(exc, match=match):
        _step(rnn, body)
    assert main.num_blocks == 1 and main.current_block_idx == 0
    assert not [op for op in main.global_block().ops if "@step" in str(op)]
    with pytest.raises(ValueError, match="You must invoke step_output in rnn block"):
        rnn.step_output(_seq("late"))  # the RNN is spent: its step's block is gone


def test_calls_outside_the_step_are_refused():
    rnn = L.StaticRNN()
    x = _seq()
    with pytest.raises(ValueError, match="You must invoke step_input in rnn block"):
        rnn.step_input(x)
    with pytest.raises(ValueError, match="RNN output can only be retrieved after rnn block"):
        rnn()
    with rnn.step():
        rnn.step_input(x)
    with pytest.raises(ValueError, match="RNN has no output"):
        rnn()
    with pytest.raises(ValueError, match="You must invoke memory in rnn block"):
        rnn.memory(init=x)
    with pytest.raises(ValueError, match="step\\(\\) can be entered only once"):
        rnn.step().__enter__()
    with pytest.raises(TypeError, match="The type of 'name' in fluid.layers.StaticRNN"):
        L.StaticRNN(name=3)


# a PTB-style language model: embedding -> StaticRNN (an fc cell, a memory) -> fc softmax -> cross entropy
LM_SCRIPT = SCRIPT_HEAD + r'''
d = np.load(spec["data"])
V, H, T = spec["vocab"], spec["hidden"], spec["steps"]
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    x = fluid.layers.data("x", shape=[T, 1], dtype="int64")
    y = fluid.layers.data("y", shape=[T, 1], dtype="int64")
    emb = fluid.layers.transpose(fluid.layers.embedding(x, size=[V, H]), perm=[1, 0, 2])
    rnn = fluid.layers.StaticRNN()
    with rnn.step():
        word = rnn.step_input(emb)
        prev = rnn.memory(shape=[-1, H], batch_ref=word)
        hidden = fluid.layers.fc(input=[word, prev], size=H, act="tanh")
        rnn.update_memory(prev, hidden)
        rnn.step_output(hidden)
    out = fluid.layers.reshape(fluid.layers.transpose(rnn(), perm=[1, 0, 2]), [-1, H])
    probs = fluid.layers.fc(out, size=V, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(probs, fluid.layers.reshape(y, [-1, 1])))
    fluid.optimizer.Adam(learning_rate=0.05).minimize(loss)
place = fluid.CPUPlace()
exe = fluid.Executor(place)
exe.run(startup)
names = sorted(p.name for p in main.global_block().all_parameters())
assert names == sorted(k[2:] for k in d.files if k.startswith("p/")), names
for n in names:
    fluid.global_scope().find_var(n).get_tensor().set(d["p/" + n], place)
losses = [exe.run(main, feed={"x": d["x%d" % i], "y": d["y%d" % i]}, fetch_list=[loss])[0]
          for i in range(spec["iters"])]
out = {"losses": np.array(losses).reshape(-1)}
out.update({"p/" + n: np.array(fluid.global_scope().find_var(n).get_tensor()) for n in names})
np.savez(spec["out"], **out)
'''
LM = {"vocab": 12, "hidden": 6, "steps": 4, "iters": 4}


def _lm_data(batch=3):
    rng = np.random.default_rng(5)
    V, H = LM["vocab"], LM["hidden"]
    shapes = {"embedding_0.w_0": (V, H), "fc_0.w_0": (H, H), "fc_0.w_1": (H, H), "fc_0.b_0": (H,),
              "fc_1.w_0": (H, V), "fc_1.b_0": (V,)}
    data = {"p/" + n: rng.uniform(-0.5, 0.5, s).astype("float32") for n, s in shapes.items()}
    for i in range(LM["iters"]):
        data[f"x{i}"] = rng.integers(0, V, (batch, LM["steps"], 1)).astype("int64")
        data[f"y{i}"] = rng.integers(0, V, (batch, LM["steps"], 1)).astype("int64")
    return data


def test_a_language_model_trains(tmp_path):
    ours = run_reference(sys.executable, LM_SCRIPT, tmp_path, _lm_data(), framework="placegroup", **LM)
    assert ours["losses"].shape == (LM["iters"],) and np.isfinite(ours["losses"]).all()
    assert not np.array_equal(ours["p/fc_0.w_1"], _lm_data()["p/fc_0.w_1"])  # the recurrent weight learns


@pytest.mark.paddle
def test_a_language_model_trains_as_in_fluid_1_8_5(tmp_path, fluid18_python):
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, LM_SCRIPT, tmp_path / "fluid", _lm_data(), framework="fluid", **LM)
    ours = run_reference(sys.executable, LM_SCRIPT, tmp_path, _lm_data(), framework="placegroup", **LM)
    assert sorted(ours) == sorted(theirs)
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=1e-5)
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-6, err_msg=key)
