"""Loops and branches that train: a recurrent net written with ``While``, and a model that routes
each example through one of two blocks with ``IfElse``.

    rnn:    x [T steps of D features] -> tensor array of the steps
            h0 = fc(step 0, tanh); While i < T: h[i+1] = fc([x[i], h[i]], tanh)  (states in an array)
            -> fc(h[T], 1) -> square_error_cost(y) -> mean -> SGD
    ifelse: IfElse(x[:, 0] < 0): true block fc(tanh), false block fc(sigmoid), merged back
            -> fc(1) -> square_error_cost(y) -> mean -> SGD

Both are written as Fluid 1.x programs are: the loop reads and writes tensor arrays, counts with
``increment(i, in_place=True)`` and updates its condition with ``less_than(i, n, cond=cond)``.
The gradients flow back through the loop and the branches (docs/control_flow.md).

The data is SYNTHETIC, made here: ``rnn`` learns a decaying sum of the steps' first feature,
``ifelse`` a target whose rule differs with the sign of the first feature. Each prints the
loss of predicting the targets' mean, for scale.

The losses are means over examples, so trainer t fed the t-th contiguous 1/N of every batch
gives, in sync mode, the one-process losses as the mean of the trainers' losses
(tests/test_control_flow_grad.py checks it, with 2 trainers and 2 pservers).

Run::

    python examples/control_flow.py                  # the While RNN, one process
    python examples/control_flow.py --model ifelse
    placegroup launch --trainers 2 --pservers 2 examples/control_flow.py
    placegroup launch --trainers 2 --pservers 2 examples/control_flow.py --model ifelse
"""
from __future__ import annotations

import argparse

import numpy as np

import placegroup as fluid

T, D, H = 4, 3, 8  # steps, features per step, hidden units


def rnn(x, y):
    """A tanh RNN over the T steps of ``x`` [N, T*D], its states in a tensor array; the loss."""
    layers = fluid.layers
    steps = layers.create_array("float32")
    for t in range(T):
        step = layers.slice(x, axes=[1], starts=[t * D], ends=[(t + 1) * D])
        layers.array_write(step, layers.fill_constant([1], "int64", t), array=steps)
    i = layers.fill_constant([1], "int64", 0)
    n = layers.fill_constant([1], "int64", T)
    h0 = layers.fc(layers.slice(x, axes=[1], starts=[0], ends=[D]), H, act="tanh",
                   param_attr=fluid.ParamAttr(name="h0_w"), bias_attr=fluid.ParamAttr(name="h0_b"))
    states = layers.array_write(h0, i)
    cond = layers.less_than(i, n)
    loop = layers.While(cond)
    with loop.block():
        h = layers.fc([layers.array_read(steps, i), layers.array_read(states, i)], H, act="tanh",
                      param_attr=[fluid.ParamAttr(name="wx"), fluid.ParamAttr(name="wh")],
                      bias_attr=fluid.ParamAttr(name="bh"))
        layers.increment(i, in_place=True)
        layers.array_write(h, i, array=states)
        layers.less_than(i, n, cond=cond)
    pred = layers.fc(layers.array_read(states, n), 1, param_attr=fluid.ParamAttr(name="out_w"),
                     bias_attr=fluid.ParamAttr(name="out_b"))
    return layers.mean(layers.square_error_cost(pred, y))


def ifelse(x, y):
    """Rows whose first feature is negative through one fc, the others through another; the loss."""
    layers = fluid.layers
    first = layers.slice(x, axes=[1], starts=[0], ends=[1])
    ie = layers.IfElse(layers.less_than(first, layers.fill_constant([1], "float32", 0.0)))
    with ie.true_block():
        ie.output(layers.fc(ie.input(x), H, act="tanh", param_attr=fluid.ParamAttr(name="neg_w"),
                            bias_attr=fluid.ParamAttr(name="neg_b")))
    with ie.false_block():
        ie.output(layers.fc(ie.input(x), H, act="sigmoid", param_attr=fluid.ParamAttr(name="pos_w"),
                            bias_attr=fluid.ParamAttr(name="pos_b")))
    h, = ie()
    pred = layers.fc(h, 1, param_attr=fluid.ParamAttr(name="out_w"), bias_attr=fluid.ParamAttr(name="out_b"))
    return layers.mean(layers.square_error_cost(pred, y))


def build(model: str = "rnn", lr: float = 0.1):
    """The model in the default programs; returns ``(feeds, loss)``."""
    x = fluid.layers.data("x", [T * D], dtype="float32")
    y = fluid.layers.data("y", [1], dtype="float32")
    loss = {"rnn": rnn, "ifelse": ifelse}[model](x, y)
    fluid.optimizer.SGD(learning_rate=lr).minimize(loss)
    return [x, y], loss


def batches(model: str, steps: int, batch: int, seed: int = 0) -> list:
    """``steps`` ``(x, y)`` batches of ``batch`` examples."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        x = rng.normal(size=(batch, T * D)).astype("float32")
        if model == "rnn":
            y = sum(0.6 ** (T - 1 - t) * x[:, t * D] for t in range(T))
        else:
            y = np.where(x[:, 0] < 0, np.tanh(x[:, 1] - x[:, 2]), 0.5 * (x[:, 1] + x[:, 2]))
        out.append((x, y.reshape(-1, 1).astype("float32")))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=("rnn", "ifelse"), default="rnn")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--sync", dest="sync", action="store_true", default=True, help="sync mode (default)")
    ap.add_argument("--async", dest="sync", action="store_false", help="async mode, in a cluster")
    a = ap.parse_args(argv)
    fluid.default_startup_program().random_seed = 3
    _, loss = build(a.model, a.lr)
    exe = fluid.Executor(fluid.CPUPlace())
    prog, role, tid, n = fluid.transpile_from_env(exe, sync_mode=a.sync)  # Fluid's launch environment, if set
    if role == "PSERVER":
        print("pserver: every trainer is done")
        return
    data = batches(a.model, a.steps, a.batch_size)
    ys = np.concatenate([y for _, y in data])
    print(f"{a.model}: the loss of predicting the mean is {ys.var():.4f}")
    window = []
    for step, (x, y) in enumerate(data):
        rows = slice(tid * len(x) // n, (tid + 1) * len(x) // n)
        got, = exe.run(prog, feed={"x": x[rows], "y": y[rows]}, fetch_list=[loss])
        window.append(float(np.array(got).ravel()[0]))
        if (step + 1) % 50 == 0 or step + 1 == a.steps:
            print(f"step {step + 1:4d}  loss {np.mean(window):.4f}")
            window = []
    exe.close()


if __name__ == "__main__":
    main()
