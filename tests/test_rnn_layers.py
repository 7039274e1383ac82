"""The recurrent layers (placegroup/layers/rnn.py) in whole programs.

``MODEL`` is a Fluid 1.x text classifier, words -> embedding -> fc -> dynamic_lstm or
dynamic_gru -> sequence_pool(max) -> fc softmax -> cross entropy, SGD, written once as source
text against a ``fluid`` module: here it runs with placegroup, and in the ``paddle``-marked
tests the same text runs in a subprocess with Fluid 1.8.5 (``PLACEGROUP_PADDLE18_PYTHON``)
from the same initial values (array initializers) and the same batches, and the per-step
losses, the first step's RNN outputs and its parameter gradients must agree (rtol 1e-4).
Without that python those tests skip. The ops' own numerics are in tests/cases/rnn.py.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import placegroup as fluid
from tests.paddle_ref.reference import run_python

V, E, H, C = 30, 8, 6, 3

MODEL = r'''
import numpy as np

def build(fluid, cell, init, lr, opts):
    """The classifier; returns (main, startup, fetch names)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        def attr(n):
            return fluid.ParamAttr(name=n, initializer=fluid.initializer.NumpyArrayInitializer(np.array(init[n])))
        words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
        label = fluid.layers.data("label", [1], dtype="int64")
        emb = fluid.layers.embedding(words, size=list(np.shape(init["emb"])), param_attr=attr("emb"))
        width = np.shape(init["proj.w"])[1]
        proj = fluid.layers.fc(emb, width, param_attr=attr("proj.w"), bias_attr=attr("proj.b"))
        if cell == "lstm":
            hidden, _ = fluid.layers.dynamic_lstm(proj, size=width, param_attr=attr("rnn.w"), bias_attr=attr("rnn.b"),
                                                  **opts)
        else:
            hidden = fluid.layers.dynamic_gru(proj, size=width // 3, param_attr=attr("rnn.w"),
                                              bias_attr=attr("rnn.b"), **opts)
        pooled = fluid.layers.sequence_pool(hidden, "max")
        prob = fluid.layers.fc(pooled, np.shape(init["out.w"])[1], act="softmax", param_attr=attr("out.w"),
                               bias_attr=attr("out.b"))
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
        fluid.optimizer.SGD(lr).minimize(loss)
    return main, startup, [loss.name, hidden.name, "rnn.w@GRAD", "rnn.b@GRAD", "proj.w@GRAD"]


def train(fluid, cell, init, lr, opts, batches):
    """Per-step losses, and the first step's hidden and gradients (as lists)."""
    main, startup, fetch = build(fluid, cell, init, lr, opts)
    exe = fluid.Executor(fluid.CPUPlace())
    losses, first = [], None
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        for ids, lens, labels in batches:
            feed = {"words": fluid.create_lod_tensor(np.array(ids, "int64").reshape(-1, 1), [lens], fluid.CPUPlace()),
                    "label": np.array(labels, "int64").reshape(-1, 1)}
            out = exe.run(main, feed=feed, fetch_list=fetch, return_numpy=False)
            losses.append(float(np.array(out[0]).reshape(-1)[0]))
            if first is None:
                first = [np.array(v).tolist() for v in out[1:]]
    return {"losses": losses, "first": first}


def train_units(fluid, init, lr, batches):
    """x, h, c -> lstm_unit -> (h1, c1); gru_unit(fc(x), h1) -> h2; fc([h1, c1, h2]) softmax."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        def attr(n):
            return fluid.ParamAttr(name=n, initializer=fluid.initializer.NumpyArrayInitializer(np.array(init[n])))
        d = np.shape(init["gu.w"])[0]
        x = fluid.layers.data("x", [np.shape(init["proj.w"])[0]])
        h = fluid.layers.data("h", [d])
        c = fluid.layers.data("c", [d])
        c.stop_gradient = False  # Fluid 1.8's lstm_unit_grad insists on writing C_prev@GRAD
        label = fluid.layers.data("label", [1], dtype="int64")
        h1, c1 = fluid.layers.lstm_unit(x, h, c, forget_bias=0.5, param_attr=attr("lu.w"), bias_attr=attr("lu.b"))
        proj = fluid.layers.fc(x, 3 * d, param_attr=attr("proj.w"), bias_attr=attr("proj.b"))
        h2, _, _ = fluid.layers.gru_unit(proj, h1, 3 * d, param_attr=attr("gu.w"), bias_attr=attr("gu.b"))
        prob = fluid.layers.fc(fluid.layers.concat([h1, c1, h2], axis=1), np.shape(init["out.w"])[1], act="softmax",
                               param_attr=attr("out.w"), bias_attr=attr("out.b"))
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
        fluid.optimizer.SGD(lr).minimize(loss)
    fetch = [loss.name, h2.name, "lu.w@GRAD", "gu.w@GRAD", "gu.b@GRAD"]
    exe = fluid.Executor(fluid.CPUPlace())
    losses, first = [], None
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        for xs, hs, cs, labels in batches:
            feed = {"x": np.array(xs, "float32"), "h": np.array(hs, "float32"), "c": np.array(cs, "float32"),
                    "label": np.array(labels, "int64").reshape(-1, 1)}
            out = exe.run(main, feed=feed, fetch_list=fetch)
            losses.append(float(np.array(out[0]).reshape(-1)[0]))
            if first is None:
                first = [np.array(v).tolist() for v in out[1:]]
    return {"losses": losses, "first": first}
'''

RUNNER = MODEL + r'''
import json, sys
import paddle.fluid as fluid
args = json.loads(sys.stdin.read())
if args["cell"] == "units":
    got = train_units(fluid, args["init"], args["lr"], args["batches"])
else:
    got = train(fluid, args["cell"], args["init"], args["lr"], args["opts"], args["batches"])
print("RESULT " + json.dumps(got))
'''


def _model():
    ns: dict = {}
    exec(compile(MODEL, "<rnn MODEL>", "exec"), ns)  # noqa: S102 - our own source text
    return ns


def _init(cell: str, opts: dict, seed: int = 0) -> dict:
    r = np.random.default_rng(seed)
    gates = 4 if cell == "lstm" else 3
    bias = 7 if cell == "lstm" and opts.get("use_peepholes", True) else gates
    return {"emb": r.normal(0, 0.5, (V, E)), "proj.w": r.normal(0, 0.3, (E, gates * H)),
            "proj.b": r.normal(0, 0.1, (gates * H,)), "rnn.w": r.normal(0, 0.3, (H, gates * H)),
            "rnn.b": r.normal(0, 0.1, (1, bias * H)), "out.w": r.normal(0, 0.3, (H, C)), "out.b": np.zeros(C)}


def _batches(n: int, seed: int = 1) -> list:
    """Sentences whose class is which third of the vocabulary most of their words come from."""
    r = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        labels = r.integers(0, C, 8)
        lens = r.integers(1, 7, 8)
        ids = [int(r.integers(c * V // C, (c + 1) * V // C)) if r.random() < 0.8 else int(r.integers(0, V))
               for c, k in zip(labels, lens) for _ in range(k)]
        out.append((ids, lens.tolist(), labels.tolist()))
    return out


def _as_lists(init: dict) -> dict:
    return {k: v.astype("float32").tolist() for k, v in init.items()}


LSTM_OPTS = [{}, {"use_peepholes": False}, {"is_reverse": True, "gate_activation": "sigmoid",
                                            "cell_activation": "relu", "candidate_activation": "tanh"}]


@pytest.mark.parametrize("opts", LSTM_OPTS, ids=["peephole", "plain", "reverse_relu"])
def test_lstm_classifier_trains(opts):
    got = _model()["train"](fluid, "lstm", _as_lists(_init("lstm", opts)), 0.5, opts, _batches(60))
    losses = got["losses"]
    assert all(np.isfinite(losses)), losses
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10]), losses


def test_dynamic_lstm_builds_fluids_parameters_and_checks_its_arguments():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [12], lod_level=1)
        hidden, cell = fluid.layers.dynamic_lstm(x, size=12)
        assert list(hidden.shape) == [-1, 3] and list(cell.shape) == [-1, 3]
        assert hidden.lod_level == 1 and cell.lod_level == 1
        params = {p.name: list(p.shape) for p in main.global_block().all_parameters()}
        assert params == {"lstm_0.w_0": [3, 12], "lstm_0.b_0": [1, 21]}
        with pytest.raises(ValueError, match="bias_attr should not be False"):
            fluid.layers.dynamic_lstm(x, size=12, bias_attr=False)
        with pytest.raises(ValueError, match=r"size must be 4 \* hidden size and input's width, got size=8"):
            fluid.layers.dynamic_lstm(x, size=8)
        h0 = fluid.layers.data("h0", [3])
        with pytest.raises(ValueError, match="h_0 and c_0 can be None only at the same time"):
            fluid.layers.dynamic_lstm(x, size=12, h_0=h0)


# -- against Fluid 1.8.5 ----------------------------------------------------------------------

def _fluid18(python: str, cell: str, init: dict, lr: float, opts: dict, batches: list) -> dict:
    args = json.dumps({"cell": cell, "init": init, "lr": lr, "opts": opts, "batches": batches})
    done = run_python(python, "-c", RUNNER, input=args, timeout=300,
                      env={**os.environ, "GLOG_minloglevel": "3", "CUDA_VISIBLE_DEVICES": ""})
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def _compare(python: str, cell: str, opts: dict) -> None:
    init, batches = _as_lists(_init(cell, opts)), _batches(20)
    want = _fluid18(python, cell, init, 0.5, opts, batches)
    got = _model()["train"](fluid, cell, init, 0.5, opts, batches)
    names = ["hidden", "rnn.w@GRAD", "rnn.b@GRAD", "proj.w@GRAD"]
    for name, g, w in zip(names, got["first"], want["first"], strict=True):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-4, atol=1e-6, err_msg=f"{cell} {opts}: {name}")
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-4, atol=1e-6, err_msg=f"{cell} {opts}: losses")


@pytest.mark.paddle
@pytest.mark.parametrize("opts", LSTM_OPTS, ids=["peephole", "plain", "reverse_relu"])
def test_lstm_classifier_equals_fluid18(opts, fluid18_python):
    _compare(fluid18_python, "lstm", opts)


GRU_OPTS = [{}, {"origin_mode": True}, {"is_reverse": True, "candidate_activation": "relu"}]
GRU_IDS = ["default", "origin", "reverse_relu"]


@pytest.mark.parametrize("opts", GRU_OPTS, ids=GRU_IDS)
def test_gru_classifier_trains(opts):
    got = _model()["train"](fluid, "gru", _as_lists(_init("gru", opts)), 0.5, opts, _batches(60))
    losses = got["losses"]
    assert all(np.isfinite(losses)), losses
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10]), losses


def test_dynamic_gru_builds_fluids_parameters_and_checks_its_arguments():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [9], lod_level=1)
        hidden = fluid.layers.dynamic_gru(x, size=3)
        assert list(hidden.shape) == [-1, 3] and hidden.lod_level == 1
        params = {p.name: list(p.shape) for p in main.global_block().all_parameters()}
        assert params == {"gru_0.w_0": [3, 9], "gru_0.b_0": [1, 9]}
        with pytest.raises(ValueError, match=r"input's width must be 3 \* size = 12"):
            fluid.layers.dynamic_gru(x, size=4)


@pytest.mark.paddle
@pytest.mark.parametrize("opts", GRU_OPTS, ids=GRU_IDS)
def test_gru_classifier_equals_fluid18(opts, fluid18_python):
    _compare(fluid18_python, "gru", opts)


def _unit_init(seed: int = 0) -> dict:
    r = np.random.default_rng(seed)
    m = 5
    return {"lu.w": r.normal(0, 0.3, (m + H, 4 * H)), "lu.b": r.normal(0, 0.1, (4 * H,)),
            "proj.w": r.normal(0, 0.3, (m, 3 * H)), "proj.b": r.normal(0, 0.1, (3 * H,)),
            "gu.w": r.normal(0, 0.3, (H, 3 * H)), "gu.b": r.normal(0, 0.1, (1, 3 * H)),
            "out.w": r.normal(0, 0.3, (3 * H, C)), "out.b": np.zeros(C)}


def _unit_batches(n: int, seed: int = 2) -> list:
    """Points whose class is the largest of their first three features."""
    r = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = r.normal(0, 1, (8, 5))
        out.append((x.tolist(), r.normal(0, 0.5, (8, H)).tolist(), r.normal(0, 0.5, (8, H)).tolist(),
                    np.argmax(x[:, :C], 1).tolist()))
    return out


def test_unit_model_trains():
    got = _model()["train_units"](fluid, _as_lists(_unit_init()), 0.5, _unit_batches(60))
    losses = got["losses"]
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10]), losses


def test_units_build_fluids_parameters_and_check_their_arguments():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x, h, c = fluid.layers.data("x", [5]), fluid.layers.data("h", [3]), fluid.layers.data("c", [3])
        h1, c1 = fluid.layers.lstm_unit(x, h, c)
        h2, reset, gate = fluid.layers.gru_unit(fluid.layers.fc(x, 9), h1, 9, activation="relu")
        assert [list(v.shape) for v in (h1, c1, h2, reset, gate)] == [[-1, 3], [-1, 3], [-1, 3], [-1, 3], [-1, 9]]
        params = {p.name: list(p.shape) for p in main.global_block().all_parameters()}
        assert params == {"fc_0.w_0": [8, 12], "fc_0.b_0": [12], "fc_1.w_0": [5, 9], "fc_1.b_0": [9],
                          "gru_unit_0.w_0": [3, 9], "gru_unit_0.b_0": [1, 9]}
        op = main.global_block().ops[-1]
        assert op.type == "gru_unit" and op.attrs["activation"] == 2  # NOTE(gru-unit-acts)
        with pytest.raises(ValueError, match="gru_unit: activation 'softsign' is not one of"):
            fluid.layers.gru_unit(gate, h1, 9, activation="softsign")
        with pytest.raises(ValueError, match="lstm_unit: the 2nd dimensions of hidden_t_prev and cell_t_prev"):
            fluid.layers.lstm_unit(x, h, fluid.layers.data("c4", [4]))


@pytest.mark.paddle
def test_unit_model_equals_fluid18(fluid18_python):
    init, batches = _as_lists(_unit_init()), _unit_batches(15)
    want = _fluid18(fluid18_python, "units", init, 0.5, {}, batches)
    got = _model()["train_units"](fluid, init, 0.5, batches)
    for name, g, w in zip(["h2", "lu.w@GRAD", "gu.w@GRAD", "gu.b@GRAD"], got["first"], want["first"], strict=True):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-4, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-4, atol=1e-6, err_msg="losses")
