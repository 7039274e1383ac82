"""One process of the sparse benchmark (run by bench_sparse.py under placegroup.tools.launch).

ids -> embedding([vocab, 64], is_sparse, is_distributed) -> fc(2) -> softmax CE -> mean, SGD,
``--batch`` ids per trainer per step, drawn as ``(zipf(1.1) * 2654435761) % vocab`` (as for the
sparse floor, bench/bench_sparse.py). Labels are random bits: this measures speed only.
"""
import argparse
import json
import os
import time

import numpy as np

import placegroup as fluid
from placegroup.tools.resources import peak_rss_mb


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--mode", choices=["sync", "async"], default="sync")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(input=ids, size=[a.vocab, a.dim], is_sparse=True, is_distributed=True)
    cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
        logits=fluid.layers.fc(input=emb, size=2), label=label))
    fluid.optimizer.SGD(learning_rate=0.01).minimize(cost)
    exe = fluid.Executor(fluid.CPUPlace())
    role = os.environ.get("TRAINING_ROLE")
    prog, tag = fluid.default_main_program(), "local0"
    if role is None:
        exe.run(fluid.default_startup_program())
    else:
        endpoint = os.environ["POD_IP"] + ":" + os.environ["PADDLE_INIT_PORT"]
        t = fluid.DistributeTranspiler()
        t.transpile(pservers=os.environ["PADDLE_INIT_PSERVERS"], trainers=os.environ["PADDLE_INIT_TRAINERS"],
                    sync_mode=a.mode == "sync")
        prog = t.get_program(endpoint, role)
        exe.run(t.get_startup_program(endpoint, role))
        if role == "PSERVER":
            c0 = time.process_time()
            exe.run(prog)
            cpu = time.process_time() - c0
            exe.close()
            with open(os.path.join(a.out, f"pserver{t.pserver_endpoints.index(endpoint)}.json"), "w") as f:
                json.dump({"cpu_s_per_step": cpu / a.steps}, f)
            return
        tag = f"trainer{t.trainer_id}"
    rng = np.random.default_rng(int(os.environ.get("PADDLE_TRAINER_ID", "0")))
    batches = [(((rng.zipf(1.1, size=(a.batch, 1)) * 2654435761) % a.vocab).astype(np.int64),
                rng.integers(0, 2, size=(a.batch, 1)).astype(np.int64)) for _ in range(a.steps)]
    unique = float(np.mean([np.unique(x).size for x, _ in batches[a.warmup:]]))  # rows one prefetch fetches
    ends = []  # when each step after the warm-up ended: bench_sparse.py's windows
    for i, (x, y) in enumerate(batches):
        if i == a.warmup:
            t0, c0 = time.perf_counter(), time.process_time()
        exe.run(prog, feed={"ids": x, "label": y}, fetch_list=[cost])
        if i >= a.warmup:
            ends.append(time.perf_counter() - t0)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    exe.close()
    with open(os.path.join(a.out, tag + ".json"), "w") as f:
        json.dump({"steps_per_s": (a.steps - a.warmup) / dt, "examples_per_s": (a.steps - a.warmup) * a.batch / dt,
                   "peak_rss_mb": peak_rss_mb(), "cpu_s_per_step": cpu / (a.steps - a.warmup),
                   "batch": a.batch, "unique_rows": unique, "step_ends": ends, "warmup": a.warmup}, f)


if __name__ == "__main__":
    main()
