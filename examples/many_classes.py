"""A classifier with a million classes, its last layer column-sliced over the trainers.

    x [dim] -> fc(classes, model_parallel=True) -> softmax_with_cross_entropy -> mean -> SGD

Over K trainers each holds only its [dim, classes / K] shard of the weight, initialized to its
columns of what the whole weight would have been; the fused parallel softmax cross-entropy
never makes the whole [batch, classes] logits anywhere (docs/model_parallel.md). In one
process the same script trains the whole layer, for comparison: same losses, about K times
the memory for the last layer.

The data are SYNTHETIC, made here: class c has a fixed random prototype in ``dim`` dimensions
and a sample is its prototype plus noise; classes are drawn with a Zipf law, so the frequent
ones are learned within a few dozen steps.

Run::

    python examples/many_classes.py --classes 1000000                    # one process
    placegroup launch --trainers 2 --pservers 0 examples/many_classes.py # 2 trainers, no pservers
    placegroup launch --trainers 2 --pservers 2 examples/many_classes.py # pservers idle: nothing else to hold
    placegroup launch --trainers 4 --pservers 0 examples/many_classes.py
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import placegroup as fluid
from placegroup.tools.resources import peak_rss_mb


def batches(classes: int, dim: int, steps: int, batch: int, seed: int = 0):
    """``steps`` global batches of (x [batch, dim], label [batch, 1]) of the synthetic data."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        label = (rng.zipf(1.3, size=batch) - 1) % classes
        proto = np.sin(np.outer(label + 1, np.arange(1, dim + 1)) * 0.618)  # class c's prototype
        x = (proto + 0.3 * rng.normal(size=(batch, dim))).astype(np.float32)
        out.append((x, label.reshape(-1, 1).astype(np.int64)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--classes", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=32, help="the global batch, split over the trainers")
    ap.add_argument("--steps", type=int, default=40)
    a = ap.parse_args()
    fluid.default_startup_program().random_seed = 5
    x = fluid.layers.data(name="x", shape=[a.dim])
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    logits = fluid.layers.fc(input=x, size=a.classes, model_parallel=True)
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=label))
    fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    prog, role, tid, n = fluid.transpile_from_env(exe)  # Fluid's launch environment, if set
    if role == "PSERVER":  # the shards stay on the trainers; a pserver has nothing of this layer
        print("pserver: every trainer is done")
        return
    shard = fluid.global_scope().find_var("fc_0.w_0").get_tensor().shape()
    print(f"trainer {tid} of {n}: holds fc_0.w_0 {shard} of [{a.dim}, {a.classes}]")
    t0 = time.perf_counter()
    window = []
    for step, (xs, ys) in enumerate(batches(a.classes, a.dim, a.steps, a.batch_size)):
        lo, hi = tid * len(xs) // n, (tid + 1) * len(xs) // n
        value, = exe.run(prog, feed={"x": xs[lo:hi], "label": ys[lo:hi]}, fetch_list=[loss])
        window.append(float(value[0]))
        if (step + 1) % 10 == 0:
            print(f"step {step + 1:3d}  loss {np.mean(window):.4f}")
            window = []
    per_step = (time.perf_counter() - t0) / a.steps
    exe.close()
    print(f"trainer {tid}: {1e3 * per_step:.0f} ms per step; peak memory {peak_rss_mb():,.0f} MiB "
          f"(the whole weight is {a.dim * a.classes * 4 / 2 ** 20:,.1f} MiB)")


if __name__ == "__main__":
    main()
