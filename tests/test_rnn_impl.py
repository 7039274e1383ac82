"""``fluid.contrib.layers``' ``basic_gru``, ``basic_lstm``, ``BasicGRUUnit`` and ``BasicLSTMUnit``
(placegroup/contrib/layers/rnn_impl.py), unrolled on StaticRNN.

Checked against a numpy GRU/LSTM stack (1 and 2 layers, one and two directions, with and without
lengths and initial states, both layouts), against float64 central differences (parameters,
input and initial states), for dropout (a new mask each time step; the test program's scaling),
on bad input, and against Fluid 1.8.5 training the same two models from the same parameters
(same parameter names, same per-step losses)."""
import sys
from dataclasses import dataclass

import numpy as np
import pytest

import placegroup as fluid
from placegroup.contrib.layers import BasicGRUUnit, BasicLSTMUnit, basic_gru, basic_lstm
from tests.numeric import central_differences
from tests.paddle_ref.reference import run_reference

L = fluid.layers
T, B, I, H = 4, 3, 3, 4
LENGTHS = np.array([4, 2, 1])


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _np_step(kind, p, x, states, forget_bias=1.0):
    """One unit step in numpy: the new states ([h] or [h, c])."""
    if kind == "gru":
        h, = states
        r, u = np.split(_sig(np.concatenate([x, h], 1) @ p["w_0"] + p["b_0"]), 2, axis=1)
        m = np.tanh(np.concatenate([x, r * h], 1) @ p["w_1"] + p["b_1"])
        return [u * h + (1 - u) * m]
    h, c = states
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ p["w_0"] + p["b_0"], 4, axis=1)
    c = c * _sig(f + forget_bias) + _sig(i) * np.tanh(j)
    return [np.tanh(c) * _sig(o), c]


def _np_rnn(kind, params, x, inits, mask=None, keep=1.0):
    """The stack in numpy. x [T, B, I]; params[d][l] a dict w_0/b_0/...; inits[d][l] the states;
    mask [T, B] or None; keep scales each layer's output (dropout in a test program).
    Returns out [T, B, D*H] and, per state, [L*D, B, H]."""
    outs, lasts = [], []
    for d, layer_params in enumerate(params):
        seq = x if d == 0 else x[::-1]
        m = None if mask is None else (mask if d == 0 else mask[::-1])
        states, ys = [list(s) for s in inits[d]], []
        for t in range(x.shape[0]):
            inp = seq[t]
            for layer, p in enumerate(layer_params):
                new = _np_step(kind, p, inp, states[layer])
                if m is not None:
                    new = [n * m[t][:, None] + s * (1 - m[t][:, None]) for n, s in zip(new, states[layer])]
                states[layer] = new
                inp = new[0] * keep
            ys.append(inp)
        outs.append(np.stack(ys) if d == 0 else np.stack(ys)[::-1])
        lasts.append(states)
    n_layers, n_dirs = len(params[0]), len(params)
    last = [np.stack([lasts[d][layer][k] for layer in range(n_layers) for d in range(n_dirs)])
            for k in range(len(inits[0][0]))]
    return np.concatenate(outs, axis=2), last


@dataclass(frozen=True)
class Case:
    kind: str
    layers: int
    bidirectional: bool
    lengths: bool
    batch_first: bool
    init: bool

    def __str__(self):
        return (f"{self.kind}-L{self.layers}-{'bi' if self.bidirectional else 'uni'}"
                f"{'-len' if self.lengths else ''}-{'bt' if self.batch_first else 'tb'}{'-init' if self.init else ''}")


CASES = [Case("gru", 1, False, False, True, False), Case("gru", 2, True, True, False, True),
         Case("lstm", 1, True, True, True, True), Case("lstm", 2, False, True, False, False),
         Case("lstm", 2, True, False, True, True)]


def _build(case, dtype="float32", dropout_prob=0.0):
    """The case's network on fixed-size data vars; returns (data vars by name, the outputs)."""
    d = 2 if case.bidirectional else 1
    data = {"x": L.data("x", [B, T, I] if case.batch_first else [T, B, I], dtype=dtype, append_batch_size=False)}
    kw = {"num_layers": case.layers, "bidirectional": case.bidirectional, "batch_first": case.batch_first,
          "dtype": dtype, "dropout_prob": dropout_prob}
    if case.lengths:
        kw["sequence_length"] = data["len"] = L.data("len", [B], dtype="int64", append_batch_size=False)
    for name in (("h0", "c0") if case.kind == "lstm" else ("h0",)) if case.init else ():
        data[name] = L.data(name, [case.layers * d, B, H], dtype=dtype, append_batch_size=False)
    if case.kind == "gru":
        return data, basic_gru(data["x"], data.get("h0"), H, **kw)
    return data, basic_lstm(data["x"], data.get("h0"), data.get("c0"), H, **kw)


def _feed(case, rng, dtype="float32"):
    d = 2 if case.bidirectional else 1
    x = rng.standard_normal((T, B, I))
    feed = {"x": (x.transpose(1, 0, 2) if case.batch_first else x).astype(dtype)}
    if case.lengths:
        feed["len"] = LENGTHS
    for name in (("h0", "c0") if case.kind == "lstm" else ("h0",)) if case.init else ():
        feed[name] = rng.standard_normal((case.layers * d, B, H)).astype(dtype)
    return feed


def _set_params(main, rng):
    """Every parameter drawn from ``rng`` (biases too), set by name; returns name -> value."""
    scope, values = fluid.global_scope(), {}
    for p in main.all_parameters():
        values[p.name] = rng.uniform(-0.6, 0.6, p.shape).astype(p.dtype)
        scope.find_var(p.name).get_tensor().set(values[p.name], fluid.CPUPlace())
    return values


def _reference(case, values, feed, keep=1.0):
    """The numpy stack for ``case`` from the parameter values and the feed, time-major."""
    unit = "BasicGRUUnit" if case.kind == "gru" else "BasicLSTMUnit"
    name = f"basic_{case.kind}"
    scopes = ["_layers_", "_reverse_layers_"][:2 if case.bidirectional else 1]
    params = [[{k: values[f"{name}{s}{layer}/{unit}_0.{k}"] for k in (("w_0", "w_1", "b_0", "b_1")
                                                                      if case.kind == "gru" else ("w_0", "b_0"))}
               for layer in range(case.layers)] for s in scopes]
    x = feed["x"].transpose(1, 0, 2) if case.batch_first else feed["x"]
    n_states = 2 if case.kind == "lstm" else 1
    d = len(scopes)
    inits = [[[feed[s][layer * d + k] if case.init else np.zeros((B, H), x.dtype) for s in ("h0", "c0")[:n_states]]
              for layer in range(case.layers)] for k in range(d)]
    mask = (np.arange(T)[:, None] < LENGTHS[None, :]).astype(x.dtype) if case.lengths else None
    out, last = _np_rnn(case.kind, params, x, inits, mask, keep)
    return (out.transpose(1, 0, 2) if case.batch_first else out), last


@pytest.mark.parametrize("case", CASES, ids=str)
def test_forward_equals_numpy(fresh_programs, case):
    main, startup = fresh_programs
    _, outs = _build(case)
    d = 2 if case.bidirectional else 1
    assert outs[0].shape == ((B, T, d * H) if case.batch_first else (T, B, d * H))
    assert all(o.shape == (case.layers * d, B, H) for o in outs[1:])
    assert main.num_blocks == 1  # unrolled: no block of its own
    main.verify()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(0)
    values = _set_params(main, rng)
    feed = _feed(case, rng)
    got = exe.run(main, feed=feed, fetch_list=list(outs))
    want_out, want_last = _reference(case, values, feed)
    np.testing.assert_allclose(got[0], want_out, rtol=1e-5, atol=1e-6)
    for g, w in zip(got[1:], want_last):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_parameters_have_fluids_names_shapes_and_initializers(fresh_programs):
    main, startup = fresh_programs
    x = fluid.data("x", [None, T, I], "float32")
    basic_lstm(x, None, None, H, num_layers=2)
    basic_gru(x, None, H, bidirectional=True)
    lstm, gru = "basic_lstm_layers_{}/BasicLSTMUnit_0.", "basic_gru_{}layers_0/BasicGRUUnit_0."
    assert [(p.name, p.shape) for p in main.all_parameters()] == [
        (lstm.format(0) + "w_0", (I + H, 4 * H)), (lstm.format(0) + "b_0", (4 * H,)),
        (lstm.format(1) + "w_0", (2 * H, 4 * H)), (lstm.format(1) + "b_0", (4 * H,)),
        *[(gru.format(d) + k, s) for d in ("", "reverse_") for k, s in
          (("w_0", (I + H, 2 * H)), ("w_1", (I + H, H)), ("b_0", (2 * H,)), ("b_1", (H,)))]]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    w = np.array(fluid.global_scope().find_var("basic_lstm_layers_1/BasicLSTMUnit_0.w_0").get_tensor())
    limit = np.sqrt(6.0 / (2 * H + 4 * H))  # Xavier uniform
    assert w.std() > 0 and np.abs(w).max() <= limit
    assert not np.array(fluid.global_scope().find_var("basic_gru_layers_0/BasicGRUUnit_0.b_1").get_tensor()).any()


def test_named_attrs_give_fluids_names_and_its_backward_bias_slip(fresh_programs):
    """As Fluid 1.8.5 names them (recorded from it); NOTE(basic-lstm-bw-bias): basic_lstm's
    backward layers take param_attr as their bias attr, one [4H] parameter ``w``."""
    main, _ = fresh_programs
    x = fluid.data("x", [None, T, I], "float32")
    basic_lstm(x, None, None, H, num_layers=2, bidirectional=True, param_attr=fluid.ParamAttr(name="w"))
    basic_gru(x, None, H, bidirectional=True, param_attr=fluid.ParamAttr(name="g"), bias_attr="gb")
    names = [p.name for p in main.all_parameters()]
    assert names[:7] == ["w_fw_w_0", "basic_lstm_layers_0/BasicLSTMUnit_0.b_0", "w_fw_w_1",
                         "basic_lstm_layers_1/BasicLSTMUnit_0.b_0", "w_bw_w_0", "w", "w_bw_w_1"]
    assert main.global_block().var("w").shape == (4 * H,)
    assert names[7:11] == ["g_fw_w_0_gate", "g_fw_w_0_candidate", "gb_fw_b_0_gate", "gb_fw_b_0_candidate"]
    assert names[-1] == "gb_bw_b_0_candidate" and len(names) == 15


def test_units_alone(fresh_programs):
    """A unit is a callable that makes its parameters on the first call; the GRU's activations
    are its arguments, the LSTM's are sigmoid and tanh whatever it is given, as in Fluid."""
    main, startup = fresh_programs
    x = L.data("x", [B, I], append_batch_size=False)
    h = L.data("h", [B, H], append_batch_size=False)
    c = L.data("c", [B, H], append_batch_size=False)
    gru = BasicGRUUnit("unit", H, gate_activation=L.hard_sigmoid, activation=L.relu)
    lstm = BasicLSTMUnit("unit", H, activation=L.relu, forget_bias=0.5)
    assert gru.parameters() == []
    new_h = gru(x, h)
    again = gru(x, new_h)  # the same parameters
    lstm_h, lstm_c = lstm(x, h, c)
    assert gru.full_name() == "unit/BasicGRUUnit_0" and lstm.full_name() == "unit/BasicLSTMUnit_0"
    assert [p.name for p in gru.parameters()] == [f"unit/BasicGRUUnit_0.{k}" for k in ("w_0", "w_1", "b_0", "b_1")]
    assert [p.name for p in lstm.parameters()] == ["unit/BasicLSTMUnit_0.w_0", "unit/BasicLSTMUnit_0.b_0"]
    assert len(main.all_parameters()) == 6
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(1)
    v = _set_params(main, rng)
    feed = {k: rng.standard_normal((B, I if k == "x" else H)).astype("float32") for k in "xhc"}
    got = exe.run(main, feed=feed, fetch_list=[new_h, again, lstm_h, lstm_c])
    g = {k: v[f"unit/BasicGRUUnit_0.{k}"] for k in ("w_0", "w_1", "b_0", "b_1")}

    def gru_np(xs, hs):
        r, u = np.split(np.clip(0.2 * (np.concatenate([xs, hs], 1) @ g["w_0"] + g["b_0"]) + 0.5, 0, 1), 2, axis=1)
        return u * hs + (1 - u) * np.maximum(np.concatenate([xs, r * hs], 1) @ g["w_1"] + g["b_1"], 0)

    one = gru_np(feed["x"], feed["h"])
    np.testing.assert_allclose(got[0], one, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], gru_np(feed["x"], one), rtol=1e-5, atol=1e-6)
    p = {k: v[f"unit/BasicLSTMUnit_0.{k}"] for k in ("w_0", "b_0")}
    want = _np_step("lstm", p, feed["x"], [feed["h"], feed["c"]], forget_bias=0.5)
    np.testing.assert_allclose(got[2], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3], want[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", [Case("lstm", 2, True, True, True, True), Case("gru", 2, True, True, False, True)],
                         ids=str)
def test_gradients_equal_central_differences(fresh_programs, case):
    """float64: each parameter along a random direction, and every element of x and h0."""
    main, startup = fresh_programs
    data, outs = _build(case, "float64")
    for var in data.values():
        var.stop_gradient = var.dtype != "float64"
    weights = [L.data(f"r{k}", list(o.shape), dtype="float64", append_batch_size=False) for k, o in enumerate(outs)]
    loss = L.sums([L.reduce_sum(L.elementwise_mul(o, r)) for o, r in zip(outs, weights)])
    params_grads = fluid.append_backward(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(3)
    _set_params(main, rng)
    feed = _feed(case, rng, "float64")
    feed.update({f"r{k}": rng.standard_normal(o.shape) for k, o in enumerate(outs)})
    scope = fluid.global_scope()

    def loss_at(name, delta):
        tensor = scope.find_var(name).get_tensor()
        base = np.array(tensor)
        tensor.set(base + delta, fluid.CPUPlace())
        try:
            return float(exe.run(main, feed=feed, fetch_list=[loss])[0].reshape(-1)[0])
        finally:
            tensor.set(base, fluid.CPUPlace())

    assert len(params_grads) == len(main.all_parameters()) == (16 if case.kind == "gru" else 8)
    for p, g in params_grads:
        u = rng.standard_normal(p.shape)
        analytic = float(np.vdot(exe.run(main, feed=feed, fetch_list=[g])[0], u))
        numeric = (loss_at(p.name, 1e-6 * u) - loss_at(p.name, -1e-6 * u)) / 2e-6
        assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-9), p.name

    def feed_loss(name, value):
        return float(exe.run(main, feed={**feed, name: value}, fetch_list=[loss])[0].reshape(-1)[0])

    for name in ("x", "h0"):
        grad, = exe.run(main, feed=feed, fetch_list=[f"{name}@GRAD"])
        numeric = central_differences(lambda v: feed_loss(name, v), feed[name])
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("kind, keep", [("gru", 0.5), ("lstm", 1.0)])
def test_dropout_draws_a_new_mask_each_step_and_scales_as_fluid_in_a_test_program(fresh_programs, kind, keep):
    """GRU: downgrade_in_infer (the test program scales by 1 - p); LSTM: upscale_in_train (the
    test program leaves it); each unrolled copy has a seed of its own (NOTE(rnn-impl-unrolled))."""
    main, startup = fresh_programs
    case = Case(kind, 2, False, False, False, False)
    _, outs = _build(case, dropout_prob=0.5)
    dropouts = [op for op in main.global_block().ops if op.type == "dropout"]
    assert len(dropouts) == 2 * T and len({op.attr("seed") for op in dropouts}) == 2 * T
    test_program = main.clone(for_test=True)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(4)
    values = _set_params(main, rng)
    feed = _feed(case, rng)
    out, = exe.run(main, feed=feed, fetch_list=[outs[0]])
    kept = out != 0  # the last layer's dropout: its zeros are its mask
    assert 0 < kept.mean() < 1 and len({kept[t].tobytes() for t in range(T)}) > 1
    got = exe.run(test_program, feed=feed, fetch_list=list(outs))
    want_out, want_last = _reference(case, values, feed, keep=keep)
    np.testing.assert_allclose(got[0], want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want_last[0], rtol=1e-5, atol=1e-6)


def _data(name, shape, dtype="float32"):
    return L.data(name, shape, dtype=dtype, append_batch_size=False)


BAD = [
    ("T unknown", lambda: basic_gru(fluid.data("x", [None, None, I], "float32"), None, H), ValueError,
     r"input must be \[batch, T, input_size\] \(batch_first=True\) with T known .* shape \[-1, -1, 3\]"),
    ("T unknown, time-major", lambda: basic_lstm(fluid.data("x", [None, B, I], "float32"), None, None, H,
                                                 batch_first=False), ValueError, r"\[T, batch, input_size\]"),
    ("not 3-D", lambda: basic_gru(_data("x", [B, I]), None, H), ValueError, r"shape \[3, 3\]"),
    ("not a Variable", lambda: basic_gru(np.zeros((B, T, I)), None, H), TypeError, "input must be a Variable"),
    ("init_hidden rows", lambda: basic_gru(_data("x", [B, T, I]), _data("h0", [1, B, H]), H, num_layers=2,
                                           bidirectional=True), ValueError,
     r"init_hidden must be \[num_layers \* num_directions, batch, hidden_size\] = \[4, 3, 4\]; got \[1, 3, 4\]"),
    ("init_hidden size", lambda: basic_gru(_data("x", [B, T, I]), _data("h0", [1, B, H + 1]), H), ValueError,
     r"= \[1, 3, 4\]; got \[1, 3, 5\] \('h0'\)"),
    ("init_cell rank", lambda: basic_lstm(_data("x", [B, T, I]), _data("h0", [1, B, H]), _data("c0", [B, H]), H),
     ValueError, r"init_cell must be .* got \[3, 4\]"),
    ("init_hidden without init_cell", lambda: basic_lstm(_data("x", [B, T, I]), _data("h0", [1, B, H]), None, H),
     ValueError, "init_hidden is given but init_cell is None"),
    ("hidden_size 0", lambda: basic_lstm(_data("x", [B, T, I]), None, None, 0), ValueError,
     "hidden_size must be a positive int, got 0"),
    ("num_layers 0", lambda: basic_gru(_data("x", [B, T, I]), None, H, num_layers=0), ValueError,
     "num_layers must be a positive int"),
    ("unit input size unknown", lambda: BasicGRUUnit("u", H)(fluid.data("x", [None, None], "float32"),
                                                             _data("h", [B, H])), ValueError,
     r"u/BasicGRUUnit_0: the last dim of input \(its size\) must be known"),
]


@pytest.mark.parametrize("build, exc, match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_says_what_is_wrong(fresh_programs, build, exc, match):
    with pytest.raises(exc, match=match):
        build()


def test_init_cell_alone_is_ignored_with_a_warning_as_in_fluid(fresh_programs):
    with pytest.warns(UserWarning, match="init_cell is ignored without init_hidden"):
        basic_lstm(_data("x", [B, T, I]), None, _data("c0", [1, B, H]), H)


# embedding -> basic_lstm (2 layers, initial states) or basic_gru (2 layers, both directions,
# lengths) -> fc -> softmax_with_cross_entropy, plus a term on the last states; SGD. One script for
# both frameworks; placegroup runs it through the paddle alias, as `placegroup run` would.
SCRIPT = r'''
import json, sys
import numpy as np
spec = json.loads(sys.argv[1])
if spec["framework"] == "placegroup":
    import placegroup.compat
    placegroup.compat.alias_paddle()
import paddle.fluid as fluid
from paddle.fluid.contrib.layers import basic_gru, basic_lstm
d = np.load(spec["data"])
V, E, H, T, L, B = spec["vocab"], spec["emb"], spec["hidden"], spec["steps"], spec["layers"], spec["batch"]
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    x = fluid.layers.data("x", shape=[T, 1], dtype="int64")
    y = fluid.layers.data("y", shape=[T, 1], dtype="int64")
    emb = fluid.layers.embedding(x, size=[V, E])
    if spec["model"] == "lstm":
        h0 = fluid.layers.data("h0", shape=[L, B, H], dtype="float32", append_batch_size=False)
        c0 = fluid.layers.data("c0", shape=[L, B, H], dtype="float32", append_batch_size=False)
        out, last_h, last_c = basic_lstm(emb, h0, c0, H, num_layers=L)
        extra = fluid.layers.reduce_mean(last_h) + fluid.layers.reduce_mean(last_c)
    else:
        sl = fluid.data("sl", shape=[None], dtype="int64")
        out, last_h = basic_gru(emb, None, H, num_layers=L, sequence_length=sl, bidirectional=True)
        extra = fluid.layers.reduce_mean(last_h)
    logits = fluid.layers.fc(fluid.layers.reshape(out, [-1, out.shape[-1]]), size=V)
    ce = fluid.layers.softmax_with_cross_entropy(logits, fluid.layers.reshape(y, [-1, 1]))
    loss = fluid.layers.mean(ce) + 0.1 * extra
    fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)
place = fluid.CPUPlace()
exe = fluid.Executor(place)
exe.run(startup)
names = sorted(p.name for p in main.global_block().all_parameters())
assert names == sorted(k[2:] for k in d.files if k.startswith("p/")), names
for n in names:
    fluid.global_scope().find_var(n).get_tensor().set(d["p/" + n], place)
feeds = [{k: d["%s%d" % (k, i)] for k in ("x", "y", "h0", "c0", "sl") if "%s%d" % (k, i) in d.files}
         for i in range(spec["iters"])]
losses = [exe.run(main, feed=f, fetch_list=[loss])[0] for f in feeds]
out = {"losses": np.array(losses).reshape(-1)}
out.update({"p/" + n: np.array(fluid.global_scope().find_var(n).get_tensor()) for n in names})
np.savez(spec["out"], **out)
'''
SPEC = {"vocab": 12, "emb": 5, "hidden": 6, "steps": 4, "layers": 2, "batch": 3, "iters": 4}


def _shapes(model):
    """Fluid 1.8.5's parameter names and shapes for the script's model."""
    V, E, H = SPEC["vocab"], SPEC["emb"], SPEC["hidden"]
    shapes = {"embedding_0.w_0": (V, E), "fc_0.b_0": (V,)}
    for layer in range(SPEC["layers"]):
        rows = (E if layer == 0 else H) + H
        if model == "lstm":
            shapes.update({f"basic_lstm_layers_{layer}/BasicLSTMUnit_0.w_0": (rows, 4 * H),
                           f"basic_lstm_layers_{layer}/BasicLSTMUnit_0.b_0": (4 * H,)})
            continue
        for scope in ("layers", "reverse_layers"):
            unit = f"basic_gru_{scope}_{layer}/BasicGRUUnit_0"
            shapes.update({f"{unit}.w_0": (rows, 2 * H), f"{unit}.w_1": (rows, H), f"{unit}.b_0": (2 * H,),
                           f"{unit}.b_1": (H,)})
    shapes["fc_0.w_0"] = (H if model == "lstm" else 2 * H, V)
    return shapes


def _script_data(model):
    rng = np.random.default_rng(6)
    V, L, B = SPEC["vocab"], SPEC["layers"], SPEC["batch"]
    data = {"p/" + n: rng.uniform(-0.5, 0.5, s).astype("float32") for n, s in _shapes(model).items()}
    for i in range(SPEC["iters"]):
        data[f"x{i}"] = rng.integers(0, V, (B, SPEC["steps"], 1)).astype("int64")
        data[f"y{i}"] = rng.integers(0, V, (B, SPEC["steps"], 1)).astype("int64")
        if model == "lstm":
            data[f"h0{i}"] = rng.uniform(-0.5, 0.5, (L, B, SPEC["hidden"])).astype("float32")
            data[f"c0{i}"] = rng.uniform(-0.5, 0.5, (L, B, SPEC["hidden"])).astype("float32")
        else:
            data[f"sl{i}"] = rng.permutation([SPEC["steps"], 2, 1]).astype("int64")
    return data


@pytest.mark.parametrize("model", ["lstm", "gru"])
def test_the_models_train_with_fluids_parameter_names(tmp_path, model):
    ours = run_reference(sys.executable, SCRIPT, tmp_path, _script_data(model), framework="placegroup", model=model,
                         **SPEC)
    assert sorted(k[2:] for k in ours if k.startswith("p/")) == sorted(_shapes(model))
    assert ours["losses"].shape == (SPEC["iters"],) and np.isfinite(ours["losses"]).all()
    start = _script_data(model)
    for name in _shapes(model):  # every parameter learns, the backward direction's too
        assert not np.array_equal(ours["p/" + name], start["p/" + name]), name


@pytest.mark.paddle
@pytest.mark.parametrize("model", ["lstm", "gru"])
def test_the_models_train_as_in_fluid_1_8_5(tmp_path, fluid18_python, model):
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, SCRIPT, tmp_path / "fluid", _script_data(model), framework="fluid",
                           model=model, **SPEC)
    ours = run_reference(sys.executable, SCRIPT, tmp_path, _script_data(model), framework="placegroup", model=model,
                         **SPEC)
    assert sorted(ours) == sorted(theirs)
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=1e-5)
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-6, err_msg=key)
