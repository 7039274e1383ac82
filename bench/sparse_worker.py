"""One process of the sparse benchmarks (run by bench_sparse.py and bench_dynamic.py under
placegroup.tools.launch).

ids -> table [*, 64] -> fc(2) -> softmax CE -> mean, SGD(0.01), ``--batch`` ids per trainer per
step; labels are random bits: this measures speed only. Both tables see the same zipf(1.1)
draws ``z`` (the same generator, seeded by the trainer id, drawn in the same order):

* ``--table fixed`` (the default): ``embedding([vocab, 64], is_sparse, is_distributed)`` over
  ``(z * 2654435761) % vocab`` (as for the sparse floor, bench/bench_sparse.py).
* ``--table dynamic``: ``sparse_embedding`` (a table keyed by raw ids, no entry: a row is made
  at an id's first sight) over ``(x * 0x9E3779B97F4A7C15) mod 2**63`` with ``x = z mod 2**40``
  (bench/bench_key_index.py's ``ids_of``).

Writes a JSON record per process (trainer<k>.json, pserver<k>.json) into ``--out``.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

import placegroup as fluid
from placegroup.contrib.layers import sparse_embedding
from placegroup.tools.resources import peak_rss_mb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ is no package

from bench_key_index import ids_of  # noqa: E402

FOLD = 2 ** 40  # ids_of takes x below 2**40


def fixed_table(ids, a):
    return fluid.layers.embedding(input=ids, size=[a.vocab, a.dim], is_sparse=True, is_distributed=True)


def dynamic_table(ids, a):
    attr = fluid.ParamAttr(name="emb", initializer=fluid.initializer.Uniform(-0.1, 0.1))
    return sparse_embedding(ids, size=[1 << 20, a.dim], entry=None, param_attr=attr, table_config=None)


TABLES = {  # --table: (the layer, ids of the zipf draws z)
    "fixed": (fixed_table, lambda z, a: ((z * 2654435761) % a.vocab).astype(np.int64)),
    "dynamic": (dynamic_table, lambda z, a: ids_of(z % FOLD)),
}


def run(a) -> None:
    """Build the model of ``--table``, train ``--steps`` steps (one process, or the role the
    launcher's environment gives), and write the JSON record into ``--out``."""
    layer, draw = TABLES[a.table]
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
        logits=fluid.layers.fc(input=layer(ids, a), size=2), label=label))
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
    batches = [(draw(rng.zipf(1.1, size=(a.batch, 1)), a), rng.integers(0, 2, size=(a.batch, 1)).astype(np.int64))
               for _ in range(a.steps)]
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
    timed = a.steps - a.warmup
    with open(os.path.join(a.out, tag + ".json"), "w") as f:
        json.dump({"steps_per_s": timed / dt, "examples_per_s": timed * a.batch / dt, "peak_rss_mb": peak_rss_mb(),
                   "cpu_s_per_step": cpu / timed, "batch": a.batch, "unique_rows": unique, "step_ends": ends,
                   "warmup": a.warmup}, f)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", choices=sorted(TABLES), default="fixed")
    ap.add_argument("--vocab", type=int, default=1_000_000, help="rows of the fixed table (--table fixed only)")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--mode", choices=["sync", "async"], default="sync")
    ap.add_argument("--out", required=True)
    run(ap.parse_args())


if __name__ == "__main__":
    main()
