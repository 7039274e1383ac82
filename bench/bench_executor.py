"""What the executor costs per op, next to the kernels it calls (in units of a floor).

For two models it times one training step three ways, in the same run, on the same data:

* **executor**: ``exe.run(main, feed=..., fetch_list=[loss])``, the whole user-facing call;
* **bare kernels**: the floor: the same ops' cpu kernels (``get_op_def(op.type).kernels["cpu"]``)
  called in program order over a plain dict of values, with every slot and attr resolved
  beforehand; no executor, no feed checks, no fetch;
* **numpy by hand**: the step written directly in numpy, as one would without a framework.

and prints the executor's overhead per op, ``(executor - bare kernels) / #ops``. Each figure is
the median over ``--repeats`` runs of ``--steps`` steps after a warm-up (``time.perf_counter``).
The models are fit_a_line (13 -> fc(1) -> square_error_cost -> mean, SGD, batch 20) and a
3-layer MLP (784-256-256-10, relu, softmax_with_cross_entropy, SGD, batch 64). The inputs are
SYNTHETIC random arrays of the right shapes: the timings do not depend on the values.

``--profile`` runs cProfile over the executor loop of each model and prints the top entries by
own time.

BLAS runs single-threaded unless ``OPENBLAS_NUM_THREADS`` (or ``OMP_``/``MKL_NUM_THREADS``) is
set (NOTE(blas-threads)).

Run::

    python bench/bench_executor.py            # ~10 s
    python bench/bench_executor.py --profile
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

# NOTE(blas-threads): on a small shared machine a multi-threaded BLAS makes the MLP's figures
# swing by 10x (its threads spin while other processes hold the cores), which buries an
# overhead of a few µs per op. The kernels and the numpy step get one BLAS thread unless the
# environment says otherwise; this must happen before numpy is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

import placegroup as fluid  # noqa: E402
from placegroup.ops.registry import EMPTY_VAR, KernelContext, get_op_def  # noqa: E402

LR = 0.01


# -- the models ------------------------------------------------------------------------------

def build_fit_a_line():
    x = fluid.layers.data(name="x", shape=[13], dtype="float32")
    y = fluid.layers.data(name="y", shape=[1], dtype="float32")
    pred = fluid.layers.fc(input=x, size=1, act=None)
    avg_cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    fluid.optimizer.SGD(learning_rate=LR).minimize(avg_cost)
    return avg_cost


def build_mlp():
    img = fluid.layers.data(name="img", shape=[784], dtype="float32")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    h = fluid.layers.fc(input=img, size=256, act="relu")
    h = fluid.layers.fc(input=h, size=256, act="relu")
    logits = fluid.layers.fc(input=h, size=10, act=None)
    avg_cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=label))
    fluid.optimizer.SGD(learning_rate=LR).minimize(avg_cost)
    return avg_cost


def feed_fit_a_line(rng):
    return {"x": rng.standard_normal((20, 13), dtype=np.float32),
            "y": rng.standard_normal((20, 1), dtype=np.float32)}


def feed_mlp(rng):
    return {"img": rng.random((64, 784), dtype=np.float32),
            "label": rng.integers(0, 10, size=(64, 1), dtype=np.int64)}


# -- numpy by hand ---------------------------------------------------------------------------

def numpy_fit_a_line(params: dict, feed: dict, names: list):
    """Returns a step function: forward, backward and SGD for fit_a_line, updated in place."""
    (w, b), x, y = (params[n] for n in names), feed["x"], feed["y"]
    lr = np.float32(LR)

    def step():
        d = x @ w + b - y
        loss = np.mean(d * d)
        g = d * np.float32(2 / len(x))
        w[...] -= lr * (x.T @ g)  # [...]: update the closed-over arrays in place
        b[...] -= lr * g.sum(axis=0)
        return loss

    return step


def numpy_mlp(params: dict, feed: dict, names: list):
    """Returns a step function: forward, backward and SGD for the MLP, updated in place."""
    w1, b1, w2, b2, w3, b3 = (params[n] for n in names)
    x, label = feed["img"], feed["label"][:, 0]
    n, rows, lr = len(x), np.arange(len(x)), np.float32(LR)

    def step():
        h1 = np.maximum(x @ w1 + b1, 0)
        h2 = np.maximum(h1 @ w2 + b2, 0)
        s = h2 @ w3 + b3
        s -= s.max(axis=1, keepdims=True)
        e = np.exp(s)
        p = e / e.sum(axis=1, keepdims=True)
        loss = np.mean(np.log(e.sum(axis=1)) - s[rows, label])
        g3 = p
        g3[rows, label] -= 1
        g3 *= np.float32(1 / n)
        g2 = (g3 @ w3.T) * (h2 > 0)
        g1 = (g2 @ w2.T) * (h1 > 0)
        for w, b, g, a in ((w3, b3, g3, h2), (w2, b2, g2, h1), (w1, b1, g1, x)):
            w -= lr * (a.T @ g)
            b -= lr * g.sum(axis=0)
        return loss

    return step


# -- the floor: bare kernel calls over a dict ------------------------------------------------

def bare_kernels(program, vals: dict):
    """Returns a step function calling each op's cpu kernel in order over ``vals``."""
    calls = []
    for op in program.global_block().ops:
        opdef = get_op_def(op.type)
        ins = tuple((s.name, tuple(op.inputs[s.name]), s.duplicable)
                    for s in opdef.inputs if op.inputs.get(s.name))
        outs = tuple((s.name, tuple(op.outputs[s.name]), s.duplicable)
                     for s in opdef.outputs if op.outputs.get(s.name))
        ctx = KernelContext(outputs=(s for s, _, _ in outs))
        calls.append((opdef.kernels["cpu"], ins, outs, dict(op.attrs), ctx))

    def step():
        for kernel, ins, outs, attrs, ctx in calls:
            args = {slot: ([vals[n] for n in names] if dup else vals[names[0]])
                    for slot, names, dup in ins}
            res = kernel(np, args, attrs, ctx)
            for slot, names, dup in outs:
                if dup:
                    for n, v in zip(names, res[slot]):
                        if n != EMPTY_VAR:
                            vals[n] = v
                elif names[0] != EMPTY_VAR:
                    vals[names[0]] = res[slot]

    return step


# -- timing ----------------------------------------------------------------------------------

def time_per_step(steps_by_name: dict, steps: int, repeats: int, warmup: int) -> dict:
    """Per step function, the mean seconds per call in each of ``repeats`` runs.

    NOTE(interleave): the machines are shared, so the load changes while we measure. The
    versions take turns within every repeat (in a rotating order) rather than one after the
    other, so a slow spell hits them all alike and the medians stay comparable.
    """
    for step in steps_by_name.values():
        for _ in range(warmup):
            step()
    runs: dict = {name: [] for name in steps_by_name}
    order = list(steps_by_name)
    for r in range(repeats):
        for name in order[r % len(order):] + order[:r % len(order)]:
            step = steps_by_name[name]
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            runs[name].append((time.perf_counter() - t0) / steps)
    return runs


MODELS = {
    "fit_a_line": (build_fit_a_line, feed_fit_a_line, numpy_fit_a_line, 20),
    "mlp": (build_mlp, feed_mlp, numpy_mlp, 64),
}


def bench(name: str, steps: int, repeats: int, profile: bool) -> dict:
    build, make_feed, by_hand, batch = MODELS[name]
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    scope = fluid.Scope()
    with fluid.scope_guard(scope), fluid.unique_name.guard(), fluid.program_guard(main, startup):
        avg_cost = build()
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        feed = make_feed(np.random.default_rng(0))
        params = [p.name for p in main.all_parameters()]
        start = {n: np.array(v) for n, v in scope.vars.items()}  # copies of the initial state

        # The three versions must agree on the first loss, or the comparison means nothing...
        first_exe = float(exe.run(main, feed=feed, fetch_list=[avg_cost])[0][0])
        floor_vals = {k: v.copy() for k, v in start.items()} | feed
        floor = bare_kernels(main, floor_vals)
        floor()
        first_floor = float(floor_vals[avg_cost.name][0])
        hand_params = {k: v.copy() for k, v in start.items()}
        hand = by_hand(hand_params, feed, params)
        first_hand = float(hand())
        # ...and on the parameters after that first update (backward and SGD agree too).
        diffs = [abs(first_floor - first_exe) / abs(first_exe),
                 abs(first_hand - first_exe) / abs(first_exe)]
        for n in params:
            ref = np.asarray(scope.vars[n], dtype=np.float64)
            scale = np.abs(ref).max() or 1.0
            diffs += [np.abs(floor_vals[n] - ref).max() / scale,
                      np.abs(hand_params[n] - ref).max() / scale]
        agree = float(max(diffs))

        def exe_step():
            exe.run(main, feed=feed, fetch_list=[avg_cost])

        runs = time_per_step({"exe": exe_step, "floor": floor, "hand": hand}, steps, repeats,
                             warmup=max(steps // 10, 5))
        t = {k: statistics.median(v) for k, v in runs.items()}
        # The overhead is the median of paired differences: each executor run against the
        # bare-kernel run beside it in time (NOTE(interleave)).
        t["overhead"] = statistics.median(e - f for e, f in zip(runs["exe"], runs["floor"]))
        prof = None
        if profile:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(steps):
                exe_step()
            pr.disable()
            out = io.StringIO()
            pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(15)
            prof = out.getvalue()
    n_ops = len(main.global_block().ops)
    return {"model": name, "batch": batch, "ops": n_ops, **t, "agree": agree, "profile": prof}


def print_table(rows: list) -> None:
    cols = [("model", "{model}"), ("batch", "{batch}"), ("ops", "{ops}"),
            ("executor us/step", "{exe_us:.1f}"), ("us/op", "{exe_op:.2f}"),
            ("bare kernels us/step", "{floor_us:.1f}"), ("numpy by hand us/step", "{hand_us:.1f}"),
            ("overhead us/op", "{over_op:.2f}"), ("exe/bare", "{r_floor:.2f}x"),
            ("exe/numpy", "{r_hand:.2f}x"), ("step-1 max rel diff", "{agree:.1e}")]
    cells = []
    for r in rows:
        v = dict(r, exe_us=r["exe"] * 1e6, exe_op=r["exe"] * 1e6 / r["ops"], floor_us=r["floor"] * 1e6,
                 hand_us=r["hand"] * 1e6, over_op=r["overhead"] * 1e6 / r["ops"],
                 r_floor=r["exe"] / r["floor"], r_hand=r["exe"] / r["hand"])
        cells.append([fmt.format(**v) for _, fmt in cols])
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (h, _) in enumerate(cols)]
    print("  ".join(h.rjust(w) for (h, _), w in zip(cols, widths)))
    print("  ".join("-" * w for w in widths))
    for c in cells:
        print("  ".join(x.rjust(w) for x, w in zip(c, widths)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="executor overhead per op vs. bare kernel calls")
    p.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["fit_a_line", "mlp"])
    p.add_argument("--steps", type=int, default=0,
                   help="steps per repeat (default: 1000 for fit_a_line, 50 for mlp)")
    p.add_argument("--repeats", type=int, default=11)
    p.add_argument("--profile", action="store_true", help="cProfile the executor loop, top 15")
    a = p.parse_args(argv)
    rows = []
    for name in a.models:
        steps = a.steps or {"fit_a_line": 1000, "mlp": 50}[name]
        rows.append(bench(name, steps, a.repeats, a.profile))
    print(f"median of {a.repeats} interleaved repeats; numpy {np.__version__}, python "
          f"{sys.version.split()[0]}, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}; "
          f"overhead/op = median(executor - bare kernels) / ops")
    print_table(rows)
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores / 2:
        print(f"note: load average {load:.1f} on {cores} cores while measuring; other processes "
              f"shared the CPUs, so these figures are noisy (re-run on a quiet machine)")
    for r in rows:
        if r["profile"]:
            print(f"\n== cProfile of exe.run, {r['model']} (top 15 by own time) ==")
            print(r["profile"].strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
