"""One process of the sync-training benchmark (run by bench_sync.py under placegroup.tools.launch).

Builds fit_a_line (13 -> 1, batch 20, SGD) or a wide MLP with a few million parameters,
transpiles it for the cluster in the environment, and times ``exe.run`` per step on
trainers. The data are made up: a fixed random batch per trainer and a linear target with noise, so
the loss can be compared between modes; it measures speed and convergence, not accuracy.
"""
import argparse
import json
import os
import time

import numpy as np

import placegroup as fluid


def build(model: str):
    if model == "fit_a_line":
        x = fluid.layers.data(name="x", shape=[13])
        pred = fluid.layers.fc(input=x, size=1)
    else:  # "wide": 1024 -> 2048 -> 512 -> 1, about 3.1M parameters
        x = fluid.layers.data(name="x", shape=[1024])
        h = fluid.layers.fc(input=x, size=2048, act="relu")
        h = fluid.layers.fc(input=h, size=512, act="relu")
        pred = fluid.layers.fc(input=h, size=1)
    y = fluid.layers.data(name="y", shape=[1])
    cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    fluid.optimizer.SGD(learning_rate=0.001).minimize(cost)
    return x, cost


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="fit_a_line")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=("sync", "ssp", "async"), default="sync")
    ap.add_argument("--staleness", type=int, default=None,
                    help="bounded staleness k (default: 2 for ssp, 0 otherwise; async: reads at most k updates old)")
    ap.add_argument("--slow", type=float, default=0.0, help="the last trainer sleeps this long per step")
    ap.add_argument("--slow-every", type=int, default=1,
                    help="... in bursts: slow * K every K-th step instead (the same mean)")
    a = ap.parse_args()
    if not 0 <= a.warmup < a.steps:
        ap.error(f"--warmup must be below --steps ({a.steps}), got {a.warmup}")
    cpu_start = time.process_time()  # after the imports
    x, cost = build(a.model)
    exe = fluid.Executor(fluid.CPUPlace())
    prog, role, tid, n = fluid.transpile_from_env(
        exe, sync_mode=a.mode != "async",
        staleness=a.staleness if a.staleness is not None else 2 if a.mode == "ssp" else 0)
    if role == "PSERVER":  # it has served every trainer: its CPU per step, warm-up steps included
        with open(os.path.join(a.out, f"PSERVER{os.getpid()}.json"), "w") as f:
            json.dump({"cpu_per_step_s": (time.process_time() - cpu_start) / a.steps}, f)
        return
    rng = np.random.default_rng(tid)
    per = a.batch // n
    xs = rng.normal(size=(per, x.shape[1])).astype(np.float32)
    w_true = np.random.default_rng(99).normal(size=(x.shape[1], 1)) / np.sqrt(x.shape[1])
    feed = {"x": xs, "y": (xs @ w_true + 0.1 * rng.normal(size=(per, 1))).astype(np.float32)}
    times, losses = [], []
    slow = a.slow if n > 1 and tid == n - 1 else 0.0
    w0 = time.perf_counter()
    for i in range(a.steps):
        if i == a.warmup:
            rt = exe.link
            sent0, recv0 = (rt.transport.bytes_sent, rt.transport.bytes_received) if rt else (0, 0)
            cpu0 = time.process_time()
        t0 = time.perf_counter()
        loss, = exe.run(prog, feed=feed, fetch_list=[cost])
        losses.append(float(loss[0]))
        if slow and i % a.slow_every == 0:
            time.sleep(slow * a.slow_every)
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    wall = time.perf_counter() - w0
    cpu = time.process_time() - cpu0
    rt = exe.link
    n_timed = a.steps - a.warmup
    moved = ((rt.transport.bytes_sent - sent0 + rt.transport.bytes_received - recv0) / n_timed) if rt else 0
    exe.close()
    with open(os.path.join(a.out, f"{role or 'local'}{tid}.json"), "w") as f:
        json.dump({"median_s": float(np.median(times)), "mean_s": float(np.mean(times)),
                   "bytes_per_step": moved, "wall_s": wall,
                   "cpu_per_step_s": cpu / n_timed, "examples": a.steps * per,
                   "final_loss": float(np.mean(losses[-20:]))}, f)


if __name__ == "__main__":
    main()
