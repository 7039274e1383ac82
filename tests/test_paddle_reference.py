"""Per-step losses equal PaddlePaddle's static graph (2.6 or 3.x).

Models nobody here wrote (Paddle book's fit_a_line, and an fc-relu-fc softmax classifier when
``fluid.layers.softmax_with_cross_entropy`` exists) are built twice: with placegroup's Fluid
API, and with ``paddle.static`` in a subprocess (``tests/paddle_ref/paddle_runner.py``). Both
start from the same parameter values (array initializers) and see the same batches; the
per-step losses must agree to rtol 1e-5 in float32, and the lr each step used must be equal.

Paddle is a local reference only, never a dependency: install it in a separate environment
(``python -m venv pd && pd/bin/pip install paddlepaddle==2.6.2 "protobuf<5"``) and name its
python in ``PLACEGROUP_PADDLE_PYTHON``; without it these skip. Paddle runs in that python, in a
subprocess, so its import (global static mode, glog, thread pools) never touches this one.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import placegroup as fluid
from placegroup.initializer import NumpyArrayInitializer
from placegroup.regularizer import L1Decay, L2Decay
from tests.paddle_ref.reference import run_reference

pytestmark = pytest.mark.paddle

RUNNER = Path(__file__).parent / "paddle_ref" / "paddle_runner.py"
STEPS = 30
PIECEWISE = [[3, 6, 9], [0.001, 0.002, 0.003, 0.004]]


def _case(name, model="fit_a_line", lr=0.01, regularizer=None, **optimizer):
    return {"name": name, "model": model, "optimizer": optimizer, "lr": lr,
            "regularizer": regularizer, "steps": STEPS}


CASES = [
    _case("sgd", type="sgd"),
    _case("momentum_piecewise", lr={"piecewise": PIECEWISE}, type="momentum", momentum=0.9),
    _case("nesterov", lr=0.002, type="momentum", momentum=0.9, use_nesterov=True),
    _case("adam", type="adam", beta1=0.9, beta2=0.999, epsilon=1e-8),
    _case("adam_piecewise", lr={"piecewise": [[10, 20], [0.05, 0.02, 0.01]]}, type="adam"),
    _case("adagrad", lr=0.1, type="adagrad", epsilon=1e-6),
    _case("sgd_l2", regularizer=["l2", 0.05], type="sgd"),
    _case("adam_l1", regularizer=["l1", 0.1], type="adam"),
]
CLASSIFIER_CASES = [
    _case("mlp_sgd", model="mlp", lr=0.1, type="sgd"),
    _case("mlp_momentum_piecewise", model="mlp", lr={"piecewise": [[3, 6, 9], [0.01, 0.02, 0.03, 0.04]]},
          type="momentum", momentum=0.9),
    _case("mlp_adam", model="mlp", lr=0.01, type="adam"),
]
PARAMS = [pytest.param(c, id=c["name"]) for c in CASES + CLASSIFIER_CASES]


def _data() -> dict:
    """Fixed batches and initial parameters shared by both frameworks (float32)."""
    rng = np.random.default_rng(2019)
    f32 = np.float32
    fit_x = rng.normal(size=(STEPS * 20, 13)).astype(f32)
    fit_y = (fit_x @ rng.normal(size=(13, 1)) + 0.3 + 0.1 * rng.normal(size=(STEPS * 20, 1))).astype(f32)
    mlp_x = rng.normal(size=(STEPS * 32, 8)).astype(f32)
    mlp_label = np.argmax(mlp_x @ rng.normal(size=(8, 3)), axis=1).astype(np.int64).reshape(-1, 1)
    lim = lambda i, o: np.sqrt(6.0 / (i + o))  # noqa: E731  (Xavier's range)
    return {
        "fit.x": fit_x, "fit.y": fit_y, "fit_a_line.batch": np.int64(20),
        "fit.w": rng.uniform(-lim(13, 1), lim(13, 1), size=(13, 1)).astype(f32),
        "fit.b": np.array([0.1], f32),
        "mlp.x": mlp_x, "mlp.label": mlp_label, "mlp.batch": np.int64(32),
        "mlp.w1": rng.uniform(-lim(8, 16), lim(8, 16), size=(8, 16)).astype(f32),
        "mlp.b1": (0.1 * rng.normal(size=16)).astype(f32),
        "mlp.w2": rng.uniform(-lim(16, 3), lim(16, 3), size=(16, 3)).astype(f32),
        "mlp.b2": np.zeros(3, f32),
    }


@pytest.fixture(scope="module")
def data() -> dict:
    return _data()


@pytest.fixture(scope="module")
def paddle_results(paddle26_python, data, tmp_path_factory) -> dict:
    """Every case run once by Paddle, in one subprocess (~4 s, mostly importing paddle)."""
    return run_reference(paddle26_python, RUNNER, tmp_path_factory.mktemp("paddle_ref"), data,
                         cases=CASES + CLASSIFIER_CASES)


def _fluid_model(case, d):
    def attr(key):
        return fluid.ParamAttr(name=key, initializer=NumpyArrayInitializer(d[key]))

    L = fluid.layers
    if case["model"] == "fit_a_line":
        x = L.data(name="x", shape=[13], dtype="float32")
        y = L.data(name="y", shape=[1], dtype="float32")
        pred = L.fc(input=x, size=1, param_attr=attr("fit.w"), bias_attr=attr("fit.b"))
        return L.mean(L.square_error_cost(input=pred, label=y))
    x = L.data(name="x", shape=[8], dtype="float32")
    label = L.data(name="label", shape=[1], dtype="int64")
    h = L.fc(input=x, size=16, act="relu", param_attr=attr("mlp.w1"), bias_attr=attr("mlp.b1"))
    logits = L.fc(input=h, size=3, param_attr=attr("mlp.w2"), bias_attr=attr("mlp.b2"))
    return L.mean(L.softmax_with_cross_entropy(logits=logits, label=label))


def run_fluid(case, d) -> tuple[np.ndarray, np.ndarray]:
    """The case with placegroup: per-step losses and the lr each step used."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _fluid_model(case, d)
        lr = case["lr"]
        if isinstance(lr, dict):
            lr = fluid.layers.piecewise_decay(*lr["piecewise"])
        spec = dict(case["optimizer"])
        cls = {"sgd": fluid.optimizer.SGD, "momentum": fluid.optimizer.Momentum,
               "adam": fluid.optimizer.Adam, "adagrad": fluid.optimizer.Adagrad}[spec.pop("type")]
        reg = None
        if case["regularizer"]:
            which, coeff = case["regularizer"]
            reg = {"l1": L1Decay, "l2": L2Decay}[which](coeff)
        opt = cls(learning_rate=lr, regularization=reg, **spec)
        opt.minimize(loss)
        lr_var = opt._global_learning_rate(main)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    b = int(d[case["model"] + ".batch"])
    losses, lrs = [], []
    for step in range(case["steps"]):
        rows = slice(step * b, (step + 1) * b)
        feed = ({"x": d["fit.x"][rows], "y": d["fit.y"][rows]} if case["model"] == "fit_a_line"
                else {"x": d["mlp.x"][rows], "label": d["mlp.label"][rows]})
        loss_v, lr_v = exe.run(main, feed=feed, fetch_list=[loss, lr_var], scope=scope)
        losses.append(loss_v.reshape(()))
        lrs.append(lr_v.reshape(()))
    return np.stack(losses), np.stack(lrs)


@pytest.mark.parametrize("case", PARAMS)
def test_losses_match_paddle(case, data, paddle_results):
    losses, lrs = run_fluid(case, data)
    want_loss = paddle_results[case["name"] + ".loss"]
    want_lr = paddle_results[case["name"] + ".lr"]
    assert losses.dtype == np.float32 and losses.shape == want_loss.shape == (STEPS,)
    np.testing.assert_array_equal(lrs, want_lr, err_msg="the lr each step used differs from Paddle's")
    np.testing.assert_allclose(losses, want_loss, rtol=1e-5, err_msg=f"{case['name']}: per-step losses")
    assert losses[-1] < losses[0]  # it trained, so the comparison is not of two constants


def test_piecewise_steps_line_up_with_paddle(data, paddle_results):
    """Fluid's counter (-1, incremented first) and Paddle's ``last_epoch`` give the same lr
    per step: ``a`` on steps 0-2, ``b`` on 3-5, ``c`` on 6-8, ``d`` after."""
    _, lrs = run_fluid(CASES[1], data)
    a, b, c, d = np.float32(PIECEWISE[1])
    want = np.array([a] * 3 + [b] * 3 + [c] * 3 + [d] * (STEPS - 9), np.float32)
    np.testing.assert_array_equal(lrs, want)
    np.testing.assert_array_equal(paddle_results["momentum_piecewise.lr"], want)


SCHEDULES = {  # Paddle 3's scheduler kind -> the Fluid layer call that must give the same values
    "piecewise": lambda L: L.piecewise_decay([3, 6, 9], [0.1, 0.2, 0.3, 0.4]),
    "exponential": lambda L: L.exponential_decay(0.1, decay_steps=1, decay_rate=0.9),
    "natural_exp": lambda L: L.natural_exp_decay(0.1, decay_steps=1, decay_rate=0.3),
    "inverse_time": lambda L: L.inverse_time_decay(0.1, decay_steps=1, decay_rate=0.5),
    "polynomial": lambda L: L.polynomial_decay(0.1, 5, end_learning_rate=0.01, power=2.0),
    "polynomial_cycle": lambda L: L.polynomial_decay(0.1, 5, end_learning_rate=0.01, power=2.0, cycle=True),
}


@pytest.mark.parametrize("kind", sorted(SCHEDULES))
def test_schedule_values_match_paddle(kind, paddle_results):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        lr = SCHEDULES[kind](fluid.layers)
    scope, exe = fluid.Scope(), fluid.Executor()
    exe.run(startup, scope=scope)
    got = np.array([exe.run(main, fetch_list=[lr], scope=scope)[0][0] for _ in range(13)])
    np.testing.assert_array_equal(got, paddle_results["sched." + kind])
