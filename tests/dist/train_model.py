"""A model trained as Fluid's distributed scripts train, single-process or as one process of a cluster.

Run with no TRAINING_ROLE: one process on the whole batch. With Fluid's launch variables (as
``placegroup launch`` sets them): trainer t is fed the t-th contiguous 1/N of every batch.
Writes ``<out>/<role><id>.npz`` with the per-step losses and, for trainers, every parameter.

    python train_model.py --model linear --optimizer sgd --steps 10 --out DIR

With ``--checkpoint-dir`` every process saves its part every ``--checkpoint-every`` steps, and
with ``--resume`` continues from the newest complete checkpoint (docs/checkpoint.md): a trainer
then trains only the batches after it and records the first step it trained as ``start``.
"""
import argparse
import os
import time

import numpy as np

import placegroup as fluid


def build(model: str, optimizer: str):
    fluid.default_startup_program().random_seed = 7
    if model == "linear":
        x = fluid.layers.data(name="x", shape=[13])
        y = fluid.layers.data(name="y", shape=[1])
        pred = fluid.layers.fc(input=x, size=1)
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    elif model == "wide":  # parameter slicing's example: w1 is 10 x 1000 over 3 pservers -> 2 blocks
        x = fluid.layers.data(name="x", shape=[10])
        y = fluid.layers.data(name="y", shape=[1])
        h = fluid.layers.fc(input=x, size=1000, act="relu")
        pred = fluid.layers.fc(input=h, size=1)
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    elif model == "mp":  # model parallelism: a classifier whose last fc is column-sliced over the trainers
        x = fluid.layers.data(name="x", shape=[10])
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        h = fluid.layers.fc(input=x, size=16, act="relu")
        logits = fluid.layers.fc(input=h, size=8, model_parallel=True)
        cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=y))
    else:
        raise SystemExit(f"unknown model {model}")
    if optimizer == "sgd":
        opt = fluid.optimizer.SGD(learning_rate=0.01)
    elif optimizer == "momentum":
        lr = fluid.layers.piecewise_decay(boundaries=[3, 6, 9], values=[0.01, 0.02, 0.005, 0.001])
        opt = fluid.optimizer.Momentum(learning_rate=lr, momentum=0.9)
    elif optimizer == "adam":
        # epsilon 1e-6, not the default 1e-8: Adam's step for a gradient within a few times
        # epsilon / sqrt(1 - beta2^t) (Fluid 1.8's epsilon) magnifies the gradient's rounding
        # (~1e-10, which differs between a whole batch and its parts summed over trainers or
        # merged steps) to ~1e-6 with 1e-8, to ~1e-8 with 1e-6
        opt = fluid.optimizer.Adam(learning_rate=0.01, epsilon=1e-6)
    else:
        raise SystemExit(f"unknown optimizer {optimizer}")
    opt.minimize(cost)
    return [x, y], cost


def data(model: str, steps: int, batch: int):
    rng = np.random.default_rng(3)
    dim = 13 if model == "linear" else 10
    xs = rng.normal(size=(steps * batch, dim)).astype(np.float32)
    ys = (np.sin(xs.sum(1, keepdims=True)) + 0.1 * xs[:, :1]).astype(np.float32)
    if model == "mp":  # 8 classes
        ys = np.clip(np.floor((ys + 1.1) * 3.6), 0, 7).astype(np.int64)
    return [(xs[i * batch:(i + 1) * batch], ys[i * batch:(i + 1) * batch]) for i in range(steps)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="linear")
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop-early", type=int, default=-1, help="trainer 1 stops after this many steps")
    ap.add_argument("--unfused", action="store_true", help="model parallel: gather the whole logits")
    ap.add_argument("--async", dest="async_", action="store_true", help="sync_mode=False")
    ap.add_argument("--staleness", type=int, default=0)
    ap.add_argument("--merge-steps", type=int, default=1)
    ap.add_argument("--slow", type=float, default=0.0, help="trainer 1 sleeps this long per step")
    ap.add_argument("--started-file", action="store_true", help="touch OUT/<tag>.started after a step")
    ap.add_argument("--fetch-merged", action="store_true",
                    help="also fetch the bias gradient (on trainers: the pserver-held merged one)")
    ap.add_argument("--min-block-size", type=int, default=8192, help="the transpiler's smallest block")
    ap.add_argument("--checkpoint-dir", default=None)
    ap.add_argument("--checkpoint-every", type=int, default=0)
    ap.add_argument("--resume", action="store_true", help="continue from the newest complete checkpoint")
    a = ap.parse_args()
    feeds, cost = build(a.model, a.optimizer)
    ckpt = None if a.checkpoint_dir is None else fluid.io.CheckpointConfig(
        dirname=a.checkpoint_dir, every=a.checkpoint_every, resume=a.resume)
    exe = fluid.Executor(fluid.CPUPlace(), checkpoint=ckpt)
    role = os.environ.get("TRAINING_ROLE")
    batches = data(a.model, a.steps, a.batch)
    params = [p.name for p in fluid.default_main_program().all_parameters()]
    if role is None:
        tag, prog, n, tid = "local0", fluid.default_main_program(), 1, 0
        exe.run(fluid.default_startup_program())
    else:
        port = os.getenv("PADDLE_INIT_PORT", "6174")
        endpoint = os.getenv("POD_IP") + ":" + port
        t = fluid.DistributeTranspiler(fluid.DistributeTranspilerConfig(mp_fused=not a.unfused,
                                                                        min_block_size=a.min_block_size))
        pservers = os.getenv("PADDLE_INIT_PSERVERS")
        # no pservers: collective data parallel, the trainers (by endpoint) are the group
        # (and a model-parallel layer needs them too: its trainers exchange activations)
        trainers = os.getenv("PADDLE_INIT_TRAINERS") if pservers and a.model != "mp" \
            else os.getenv("PADDLE_TRAINER_ENDPOINTS")
        t.transpile(pservers=pservers, trainers=trainers, sync_mode=not a.async_, staleness=a.staleness,
                    merge_steps=a.merge_steps)
        prog = t.get_program(endpoint, role)
        if role == "TRAINER" and os.environ.get("PLACEGROUP_TEST_NO_TRAINER"):
            return  # a trainer that never shows up
        exe.run(t.get_startup_program(endpoint, role))
        if role == "PSERVER":
            exe.run(prog)
            exe.close()
            return
        n, tid = t.trainer_num, t.trainer_id
        tag = f"trainer{tid}"
    losses, grads = [], []
    extra = []
    if a.fetch_merged:
        extra = ["fc_0.b_0@GRAD" if role is None else "fc_0.b_0@GRAD@MERGED"]
    steps = a.steps if not (tid == 1 and a.stop_early >= 0) else a.stop_early
    start = exe.resumed_step  # the checkpoint holds the state after this many steps
    for xb, yb in batches[start:steps]:
        lo, hi = tid * len(xb) // n, (tid + 1) * len(xb) // n
        loss, *g = exe.run(prog, feed={"x": xb[lo:hi], "y": yb[lo:hi]}, fetch_list=[cost] + extra)
        losses.append(float(loss[0]))
        grads += g
        if a.started_file and len(losses) == 2:
            open(os.path.join(a.out, f"{tag}.started"), "w").close()
        if a.slow and tid == 1:
            time.sleep(a.slow)
    scope = fluid.global_scope()
    values = {p: np.array(scope.find_var(p).get_tensor()) for p in params}
    if role is not None and a.model == "mp":  # each trainer checkpoints what it holds: its shard
        ckpt = os.path.join(a.out, f"ckpt_trainer{tid}")
        saved = fluid.io.save_persistables(exe, ckpt, prog)
        fresh = fluid.Scope()
        fluid.io.load_persistables(exe, ckpt, prog, scope=fresh)
        shard = np.array(fresh.find_var("fc_1.w_0").get_tensor())
        print(f"trainer {tid} checkpoint: fc_1.w_0 {list(shard.shape)} reloaded "
              f"{'equal' if np.array_equal(shard, values['fc_1.w_0']) else 'DIFFERENT'}; {len(saved)} vars")
    if role is not None:  # a trainer cannot write what a pserver holds
        try:
            scope.var("learning_rate_0").get_tensor().set(np.zeros(1, np.float32))
        except fluid.PlacementError as e:
            print(f"set guard: {e}")
    if a.staleness:
        print(f"trainer {tid} staleness seen: {exe.staleness_seen}")
    exe.close()
    if grads:
        values["grads"] = np.array(grads)
    np.savez(os.path.join(a.out, tag + ".npz"), losses=np.array(losses), start=start, **values)


if __name__ == "__main__":
    main()
