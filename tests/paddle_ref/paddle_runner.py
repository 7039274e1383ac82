"""Run the reference models with PaddlePaddle 3's static graph and save per-step losses.

Usage: ``python paddle_runner.py SPEC.json`` where the spec names the data (an ``.npz``), the
output (an ``.npz``) and the cases; see ``tests/test_paddle_reference.py``, which writes the
spec and runs the same cases with placegroup. Paddle runs here, in its own process, so its
import (global static-graph mode, glog, its thread pools) never touches the test process.

Each case is ``{"name", "model": "fit_a_line" | "mlp", "optimizer": {"type", ...kwargs},
"lr": float | {"piecewise": [boundaries, values]}, "regularizer": null | ["l1" | "l2", coeff],
"steps": n}``. Output keys: ``<name>.loss`` and ``<name>.lr`` (the lr each step used, read
back from Paddle's lr var), and ``sched.<kind>`` (scheduler values over steps 0..12).

NOTE(paddle-steps): Paddle 3's schedulers live on the host. The optimizer makes a float32 lr
var and ``Executor.run`` writes ``scheduler()`` into it before each run; the caller then calls
``scheduler.step()``. A new scheduler has ``last_epoch == 0``, so run k (0-based) uses the
value at epoch k: the same as Fluid's ``@LR_DECAY_COUNTER@``, which is -1 after startup and
incremented first thing in every run.
"""
from __future__ import annotations

import json
import sys

import numpy as np


def _model(paddle, case, d):
    F = paddle.nn.functional
    Assign = paddle.nn.initializer.Assign

    def attr(key):
        return paddle.ParamAttr(name=key, initializer=Assign(d[key]))

    if case["model"] == "fit_a_line":
        x = paddle.static.data("x", [-1, 13], "float32")
        y = paddle.static.data("y", [-1, 1], "float32")
        pred = paddle.static.nn.fc(x, 1, weight_attr=attr("fit.w"), bias_attr=attr("fit.b"))
        return paddle.mean(F.square_error_cost(pred, y))
    x = paddle.static.data("x", [-1, 8], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    h = paddle.static.nn.fc(x, 16, weight_attr=attr("mlp.w1"), bias_attr=attr("mlp.b1"), activation="relu")
    logits = paddle.static.nn.fc(h, 3, weight_attr=attr("mlp.w2"), bias_attr=attr("mlp.b2"))
    return paddle.mean(F.softmax_with_cross_entropy(logits, label))


def _optimizer(paddle, case):
    spec = dict(case["optimizer"])
    kind = spec.pop("type")
    lr = case["lr"]
    sched = None
    if isinstance(lr, dict):
        sched = paddle.optimizer.lr.PiecewiseDecay(*lr["piecewise"])
        lr = sched
    reg = None
    if case.get("regularizer"):
        which, coeff = case["regularizer"]
        reg = {"l1": paddle.regularizer.L1Decay, "l2": paddle.regularizer.L2Decay}[which](coeff)
    cls = {"sgd": paddle.optimizer.SGD, "momentum": paddle.optimizer.Momentum,
           "adam": paddle.optimizer.Adam, "adagrad": paddle.optimizer.Adagrad}[kind]
    return cls(learning_rate=lr, weight_decay=reg, **spec), sched


def run_case(paddle, case, d):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        loss = _model(paddle, case, d)
        opt, sched = _optimizer(paddle, case)
        opt.minimize(loss)
        lr_var = opt._global_learning_rate()
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    losses, lrs = [], []
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        batch = d[case["model"] + ".batch"]
        for step in range(case["steps"]):
            rows = slice(step * batch, (step + 1) * batch)
            if case["model"] == "fit_a_line":
                feed = {"x": d["fit.x"][rows], "y": d["fit.y"][rows]}
            else:
                feed = {"x": d["mlp.x"][rows], "label": d["mlp.label"][rows]}
            loss_v, lr_v = exe.run(main, feed=feed, fetch_list=[loss, lr_var])
            losses.append(np.asarray(loss_v, dtype=np.float32).reshape(()))
            lrs.append(np.asarray(lr_v, dtype=np.float32).reshape(()))
            if sched is not None:
                sched.step()
    return np.stack(losses), np.stack(lrs)


def schedules(paddle):
    """Paddle 3's schedulers that are Fluid's with decay_steps=1, over steps 0..12."""
    lr = paddle.optimizer.lr
    make = {
        "piecewise": lambda: lr.PiecewiseDecay([3, 6, 9], [0.1, 0.2, 0.3, 0.4]),
        "exponential": lambda: lr.ExponentialDecay(0.1, 0.9),
        "natural_exp": lambda: lr.NaturalExpDecay(0.1, 0.3),
        "inverse_time": lambda: lr.InverseTimeDecay(0.1, 0.5),
        "polynomial": lambda: lr.PolynomialDecay(0.1, 5, end_lr=0.01, power=2.0),
        "polynomial_cycle": lambda: lr.PolynomialDecay(0.1, 5, end_lr=0.01, power=2.0, cycle=True),
    }
    out = {}
    for kind, mk in make.items():
        s, vals = mk(), []
        for _ in range(13):
            vals.append(np.float32(s()))  # the executor writes float32(scheduler()) to the lr var
            s.step()
        out["sched." + kind] = np.array(vals, dtype=np.float32)
    return out


def main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    import paddle

    paddle.enable_static()
    with np.load(spec["data"], allow_pickle=False) as z:
        d = dict(z)
    out = schedules(paddle)
    for case in spec["cases"]:
        out[case["name"] + ".loss"], out[case["name"] + ".lr"] = run_case(paddle, case, d)
    np.savez(spec["out"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
