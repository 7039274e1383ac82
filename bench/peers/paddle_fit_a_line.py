"""fit_a_line on PaddlePaddle 2.6.2's fleet parameter server, one process per role.

The peer of bench/sync_worker.py's fit_a_line, run by bench/bench_vs_paddle.py: the same model
(13 -> fc(1) -> square_error_cost -> mean), the same SGD learning rate (0.001), the same data (a
fixed batch per trainer from ``np.random.default_rng(trainer id)``, exactly as sync_worker.py
makes it) and the same step counts. It is written the way Paddle's own
parameter-server examples are: static graph, ``fleet.init(PaddleCloudRoleMaker())``,
``DistributedStrategy(a_sync=...)``, ``fleet.distributed_optimizer``, then
``init_server``/``run_server`` on a pserver and ``init_worker``, a training loop and
``stop_worker`` on a trainer. Roles come from the variables Paddle's launcher (``fleetrun``)
sets: ``TRAINING_ROLE``, ``PADDLE_PSERVERS_IP_PORT_LIST``, ``PADDLE_TRAINERS_NUM``,
``PADDLE_TRAINER_ID``, ``PADDLE_TRAINER_ENDPOINTS``, ``PADDLE_PORT``, ``POD_IP`` (and
``PADDLE_WITH_GLOO``/``PADDLE_GLOO_*`` for the trainers' barrier, as fleetrun's ``--with_gloo``).

A trainer trains with one of two loops (``--loop``):

* ``feed``: ``exe.run(main, feed={numpy arrays}, fetch_list=[loss])`` once per step. In 2.6.2's
  async mode this loop pushes gradients but never pulls parameters back (only the C++ loop
  below starts the thread that pulls), so its trainers never see the server's updates;
  ``loss_end`` stays at ``loss_start`` while ``loss_server_end`` shows what the servers learned.
* ``dataset``: Paddle's C++ loop, ``exe.train_from_dataset`` over a ``QueueDataset`` reading a
  MultiSlot text file in ``--out`` that holds the same batch once per step (one thread,
  ``CPU_NUM=1``). Paddle writes ``<number>_train_desc.prototxt`` into the working directory at
  each call.

It runs ``--warmup`` steps untimed, then times ``--steps`` steps. For ``dataset``, each
``train_from_dataset`` call also starts its reader and threads and flushes the client at the
end (about 0.1 s); ``steps_per_s`` is the marginal rate between a short timed call of
``--steps // 10`` steps and the long one, which leaves that fixed cost out (``steps_per_s_call``
keeps it in). A trainer prints one line and writes ``--out/TRAINER<id>.json``: steps/s, the
loss on its batch from its own parameters before and after, the loss from the servers'
parameters at the end, and its peak RSS (VmHWM, KiB). A pserver serves until it is stopped from
outside (2.6.2's servers do not return when the trainers finish; fleetrun terminates them).

Run it under a python with paddlepaddle==2.6.2, one process per role with the environment
above; bench/bench_vs_paddle.py does that::

    PLACEGROUP_PADDLE_PYTHON=/path/to/paddle/python python bench/bench_vs_paddle.py
"""
# NOTE(paddle-async-ps): what 2.6.2's async parameter server does for this dense model, read
# from its sources (paddle/fluid/distributed/ps/service/brpc_ps_client.cc, fleet/fleet.cc,
# framework/pull_dense_worker.cc, distributed/ps/the_one_ps.py) and checked by running it:
# * The trainer program keeps forward and backward; its optimizer ops are removed, and one
#   `send` op pushes all dense gradients merged into one 14-float vector ("Dense@GRAD_0").
#   No AsyncCommunicator is made in async or sync mode (only GEO/heter), so the
#   FLAGS_communicator_* values it prints ("communicator config: ...") are not used here.
# * `send` -> FleetWrapper::PushDenseVarsAsync -> BrpcPsClient::PushDense copies the gradient
#   into a task on a per-table queue and returns; while that queue holds more than
#   FLAGS_pserver_max_async_call_num (13) tasks, the trainer sleeps 5 ms at a time.
# * One client thread (PushDenseTaskConsume) wakes every FLAGS_pserver_async_push_dense_interval_ms
#   (10 ms) and, where a queue holds more than FLAGS_pserver_push_dense_merge_limit (12) tasks,
#   sums up to 13 of them (10 merge threads; not averaged, FLAGS_pserver_scale_gradient_by_merge
#   is false) and sends the sum, split evenly, to every pserver over brpc. A trainer thus pushes
#   at most 13 gradients per 10 ms: about 1,300 steps/s, whatever the CPU (one trainer and one
#   pserver alone ran at about 1,220). These pserver_* flags are plain gflags that Paddle
#   does not read from the environment.
# * Each pserver keeps its slice in a MemoryDenseTable and applies SGD to every (summed)
#   gradient it receives (brpc, server_thread_num 12).
# * Parameters come back only through the PullDenseWorker thread of train_from_dataset's
#   DistMultiTrainer/DownpourLite worker: every 2 ms (sleep_time_ms) it pulls the whole table
#   once the trainer has done a step since the last pull (threshold 1). exe.run starts no such
#   thread, so an exe.run loop never receives the servers' parameters.
# * Sync mode (a_sync=False) adds a send_barrier op that calls Communicator::GetInstance()
#   ->Barrier() on a communicator that was never made: SIGSEGV at the first step.
import argparse
import json
import os
import time

import numpy as np


def peak_rss_kib() -> int:
    """This process's peak resident set size in KiB (VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def batch(tid: int, per: int):
    """The batch trainer ``tid`` trains on, made as bench/sync_worker.py makes it."""
    rng = np.random.default_rng(tid)
    xs = rng.normal(size=(per, 13)).astype(np.float32)
    w_true = np.random.default_rng(99).normal(size=(13, 1)) / np.sqrt(13)
    ys = (xs @ w_true + 0.1 * rng.normal(size=(per, 1))).astype(np.float32)
    return xs, ys


def write_multislot(path: str, xs, ys, steps: int) -> None:
    """``steps`` copies of the batch, one example a line: ``13 x... 1 y`` (MultiSlot text)."""
    rows = "".join("13 " + " ".join(repr(float(v)) for v in x) + f" 1 {float(y[0])!r}\n" for x, y in zip(xs, ys))
    with open(path, "w") as f:
        for _ in range(steps):
            f.write(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("async", "sync"), default="async")
    ap.add_argument("--loop", choices=("feed", "dataset"), default="feed")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--batch", type=int, default=20, help="examples per trainer per step")
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    import paddle
    import paddle.distributed.fleet as fleet
    from paddle.distributed.fleet.base.role_maker import PaddleCloudRoleMaker

    paddle.enable_static()
    fleet.init(role_maker=PaddleCloudRoleMaker())
    x = paddle.static.data(name="x", shape=[-1, 13], dtype="float32")
    y = paddle.static.data(name="y", shape=[-1, 1], dtype="float32")
    pred = paddle.static.nn.fc(x, size=1)
    loss = paddle.mean(paddle.nn.functional.square_error_cost(input=pred, label=y))
    strategy = fleet.DistributedStrategy()
    strategy.a_sync = a.mode == "async"
    fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=a.lr), strategy).minimize(loss)

    exe = paddle.static.Executor(paddle.CPUPlace())
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return

    tid = fleet.worker_index()
    exe.run(paddle.static.default_startup_program())
    fleet.init_worker()
    fleet.barrier_worker()  # both trainers start together (a no-op without gloo)
    main_prog = paddle.static.default_main_program()
    scope = paddle.static.global_scope()
    xs, ys = batch(tid, a.batch)

    names = {tuple(p.shape): p.name for p in main_prog.all_parameters()}  # fc's weight and bias

    def loss_now() -> float:
        w, b = (np.array(scope.find_var(names[s]).get_tensor()) for s in ((13, 1), (1,)))
        return float(np.mean((xs @ w + b - ys) ** 2))

    loss_start = loss_now()
    rates = {}
    if a.loop == "feed":
        feed = {"x": xs, "y": ys}
        for i in range(a.warmup + a.steps):
            if i == a.warmup:
                t0 = time.perf_counter()
            exe.run(main_prog, feed=feed, fetch_list=[loss])
        rates["steps_per_s"] = a.steps / (time.perf_counter() - t0)
    else:
        short = max(1, a.steps // 10)
        times = {}
        for part, n in (("warmup", a.warmup), ("short", short), ("timed", a.steps)):
            path = os.path.join(a.out, f"data{tid}_{part}.txt")
            write_multislot(path, xs, ys, n)
            ds = paddle.distributed.QueueDataset()
            ds.init(batch_size=a.batch, thread_num=1, use_var=[x, y], pipe_command="cat")
            ds.set_filelist([path])
            t0 = time.perf_counter()
            exe.train_from_dataset(program=main_prog, dataset=ds, debug=False)
            times[part] = time.perf_counter() - t0
            os.remove(path)
        rates["steps_per_s"] = (a.steps - short) / (times["timed"] - times["short"])
        rates["steps_per_s_call"] = a.steps / times["timed"]
    loss_end = loss_now()
    # Not a user API: pull the servers' parameters once, to see what they learned (in the
    # feed loop the trainer never pulls them itself).
    rt = fleet.fleet._runtime_handle
    from paddle.distributed.ps.utils.public import get_the_one_recv_context

    rt._pull_all_dense(rt.scopes, rt._send_ctx, get_the_one_recv_context(rt.context))
    loss_server_end = loss_now()
    fleet.stop_worker()
    rec = {**rates, "steps": a.steps, "loop": a.loop, "mode": a.mode, "loss_start": loss_start,
           "loss_end": loss_end, "loss_server_end": loss_server_end, "peak_rss_kib": peak_rss_kib()}
    print(f"paddle trainer {tid} {a.mode}/{a.loop}: {rec['steps_per_s']:,.0f} steps/s, loss {loss_start:.4f} -> "
          f"{loss_end:.4f} (servers' {loss_server_end:.4f}), peak RSS {rec['peak_rss_kib'] / 1024:.0f} MiB", flush=True)
    with open(os.path.join(a.out, f"TRAINER{tid}.json"), "w") as f:
        json.dump(rec, f)


if __name__ == "__main__":
    main()
