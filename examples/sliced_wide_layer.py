"""A wide layer whose weight is sliced over the pservers, on real data.

scikit-learn's bundled handwritten digits (1,797 images of 8 x 8 pixels, 10 classes; no
download) go through a wide hidden layer and a narrow classifier, the shape of the classic
sliced-parameter example (a wide weight cut into row blocks over the pservers)::

    x [64] -> fc(2048, relu) -> fc(10) -> softmax_with_cross_entropy -> mean -> Momentum

The hidden weight has 64 x 2048 = 131,072 elements: with the default ``min_block_size`` of
8192 it may be cut into up to 16 blocks, so on M pservers it becomes min(16, M) row blocks,
one per pserver, while the small classifier weight stays whole. Trainer 0 prints where every
parameter block lives before it trains.

Run::

    python examples/sliced_wide_layer.py                                   # one process
    placegroup launch --trainers 2 --pservers 3 examples/sliced_wide_layer.py
    placegroup launch --trainers 2 --pservers 0 examples/sliced_wide_layer.py  # trainers only: nothing sliced
"""
from __future__ import annotations

import argparse

import numpy as np

import placegroup as fluid


def load_digits(seed: int = 0):
    """(train_x, train_y, test_x, test_y): pixels scaled to [0, 1], a fixed 80/20 split."""
    from sklearn.datasets import load_digits as sk_digits

    d = sk_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64).reshape(-1, 1)
    order = np.random.default_rng(seed).permutation(len(x))
    cut = len(x) * 4 // 5
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def build(hidden: int):
    img = fluid.layers.data(name="img", shape=[64])
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    h = fluid.layers.fc(input=img, size=hidden, act="relu")
    logits = fluid.layers.fc(input=h, size=10)
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=label))
    acc = fluid.layers.accuracy(input=fluid.layers.softmax(logits), label=label)
    test_program = fluid.default_main_program().clone(for_test=True)
    fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9).minimize(loss)
    return loss, acc, test_program


def placement_report(prog) -> str:
    """Which pserver holds each parameter (or parameter block) of ``prog``."""
    lines = []
    for v in sorted(prog.global_block().vars.values(), key=lambda v: v.name):
        if v.is_parameter and v.place is not None and "pserver" in str(v.place):
            of = v.attrs.get("slice_of")
            what = f"rows {of[2]}..{of[2] + v.shape[0] - 1} of {of[0]}" if of else "whole"
            lines.append(f"  {v.name:<18} {str(list(v.shape)):<12} {what:<26} @{v.place}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=2048)
    a = ap.parse_args()
    fluid.default_startup_program().random_seed = 1
    loss, acc, test_program = build(a.hidden)
    train_x, train_y, test_x, test_y = load_digits()
    exe = fluid.Executor(fluid.CPUPlace())

    prog, role, tid, n = fluid.transpile_from_env(exe)  # Fluid's launch environment, if set
    if role == "PSERVER":
        print("pserver: every trainer is done")
        return
    if tid == 0 and role is not None:
        print("parameter placement:\n" + placement_report(prog))

    steps = len(train_x) // a.batch_size  # whole batches only: they split evenly over trainers
    for pass_id in range(a.passes):
        losses = []
        for s in range(steps):
            lo = s * a.batch_size + tid * a.batch_size // n
            hi = s * a.batch_size + (tid + 1) * a.batch_size // n
            value, = exe.run(prog, feed={"img": train_x[lo:hi], "label": train_y[lo:hi]}, fetch_list=[loss])
            losses.append(float(value[0]))
        print(f"pass {pass_id:2d}  train loss {np.mean(losses):.4f}")
    # the trainer holds the latest parameters: evaluate with the one-process test program
    test_acc, = exe.run(test_program, feed={"img": test_x, "label": test_y}, fetch_list=[acc])
    print(f"test accuracy {float(test_acc[0]):.4f} on {len(test_x)} images")
    exe.close()


if __name__ == "__main__":
    main()
