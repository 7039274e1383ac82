"""Slot model (LoD ids): placegroup against numpy's own gather/reduceat/scatter, in the same run.

The floor, in one process: a float32 table [1,000,000 x 16]; batches of
512 examples, each with 26 slots of 1 + Poisson(4) ids drawn as ``(zipf(1.1) * 2654435761) %
vocab``; per batch ``rows = table[ids]``, ``np.add.reduceat(rows, starts)`` into per-(example,
slot) sums, and ``np.add.at(table, ids, -1e-5 * rows)``; examples per second over 50 batches.
NOTE(floor-rate): a batch holds about 66,000 ids and zipf(1.1) gives its commonest id about a tenth of
them, so bench_sparse.py's -0.01 would scale that row by about 1 - 66 a batch and overflow to
inf/nan within a few batches (which changes the arithmetic's speed); -1e-5 keeps it finite.

The model: the ids of one batch as one LoD var whose sequences are the (example, slot) pairs,
example-major (26 sequences per example) -> embedding([vocab, 16], is_sparse, is_distributed)
-> sequence_pool(sum) -> reshape [-1, 26 * 16] -> fc(2) -> softmax CE -> mean, SGD, batch 512
per trainer. NOTE(slots-one-var): the 26 slots travel as one LoD var, not 26 feeds, because the
transpiler prefetches a distributed table through one lookup op (docs/sparse.md) and the floor
has one table too; the sums it pools are the floor's per-(example, slot) sums.

Printed: (a) the floor, (b) placegroup in one process, (c) placegroup 2 trainers + 2 pservers
(real processes, placegroup.tools.launch), each in examples/s with its ratio to the floor (the
floor's median over short runs before and after the cluster, NOTE(bench-windows) in
bench_sparse.py). Target: (c) >= 0.4 of (a).

    python bench/bench_slots.py [--vocab 1000000] [--steps 60]
"""
from __future__ import annotations

import argparse
import glob
import io
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

SLOTS, DIM, BATCH = 26, 16, 512


def draw(rng, vocab: int, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """One batch: ``(ids [n], lengths [batch * 26])``, example-major, 1 + Poisson(4) ids a slot."""
    lengths = 1 + rng.poisson(4, size=batch * SLOTS)
    ids = ((rng.zipf(1.1, size=int(lengths.sum())) * 2654435761) % vocab).astype(np.int64)
    return ids, lengths


def floor(vocab: int, batches: int = 50, batch: int = BATCH, repeats: int = 5) -> list[float]:
    """The slots floor (module docstring): examples/s of each of ``repeats`` runs of 50 batches."""
    rng = np.random.default_rng(0)
    table = rng.random((vocab, DIM), dtype=np.float32)
    data = []
    for _ in range(batches):
        ids, lengths = draw(rng, vocab, batch)
        data.append((ids, np.concatenate([[0], np.cumsum(lengths)[:-1]])))
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for ids, starts in data:
            rows = table[ids]
            np.add.reduceat(rows, starts, axis=0)
            np.add.at(table, ids, -1e-5 * rows)
        runs.append(batches * batch / (time.perf_counter() - t0))
    return runs


def worker(a) -> None:
    """One process of the model (alone, or a role under placegroup launch); writes its figures
    to ``a.out``/<role><i>.json."""
    import placegroup as fluid
    from placegroup.tools.resources import peak_rss_mb
    from placegroup.values import LoDTensor

    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64", lod_level=1)
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(input=ids, size=[a.vocab, DIM], is_sparse=True, is_distributed=True)
    pooled = fluid.layers.reshape(fluid.layers.sequence_pool(emb, "sum"), [-1, SLOTS * DIM])
    cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
        logits=fluid.layers.fc(input=pooled, size=2), label=label))
    fluid.optimizer.SGD(learning_rate=0.01).minimize(cost)
    exe = fluid.Executor(fluid.CPUPlace())
    prog, role, tid, n = fluid.transpile_from_env(exe)
    if role == "PSERVER":
        return
    rng = np.random.default_rng(1 + tid)
    batches = []
    for _ in range(a.steps):
        x, lengths = draw(rng, a.vocab, a.batch)
        batches.append({"ids": LoDTensor.from_lengths(x.reshape(-1, 1), [lengths.tolist()]),
                        "label": rng.integers(0, 2, size=(a.batch, 1)).astype(np.int64)})
    for i, feed in enumerate(batches):
        if i == a.warmup:
            t0, c0 = time.perf_counter(), time.process_time()
        exe.run(prog, feed=feed, fetch_list=[cost])
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    exe.close()
    done = a.steps - a.warmup
    with open(os.path.join(a.out, f"{'trainer' if role else 'local'}{tid}.json"), "w") as f:
        json.dump({"examples_per_s": done * a.batch / dt, "cpu_ms_per_step": 1e3 * cpu / done,
                   "peak_rss_mb": peak_rss_mb()}, f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=1_000_000)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--worker", action="store_true", help="run one process of the model (internal)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    from placegroup.tools.launch import launch

    args = ["--worker", "--vocab", str(a.vocab), "--steps", str(a.steps), "--warmup", str(a.warmup),
            "--batch", str(a.batch)]
    before = floor(a.vocab)
    with tempfile.TemporaryDirectory() as out:
        env = {k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"}
        subprocess.run([sys.executable, os.path.abspath(__file__), *args, "--out", out], check=True, env=env)
        local = json.load(open(os.path.join(out, "local0.json")))
        log = io.StringIO()
        code = launch(os.path.abspath(__file__), args + ["--out", out], 2, 2, out=log)
        if code:
            sys.exit(f"cluster failed ({code}):\n{log.getvalue()}")
        runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "trainer*.json")))]
    floors = before + floor(a.vocab)
    f = float(np.median(floors))
    one, two = local["examples_per_s"], sum(r["examples_per_s"] for r in runs)
    cpu = ", ".join(f"{r['cpu_ms_per_step']:.1f}" for r in runs)
    rss = ", ".join(f"{r['peak_rss_mb']:.0f}" for r in runs)
    print(f"(a) floor: numpy gather + np.add.reduceat + np.add.at on a [{a.vocab:,} x {DIM}] table, "
          f"batches of {a.batch} x {SLOTS} slots of 1 + Poisson(4) zipf ids: median {f:,.0f} examples/s "
          f"over {len(floors)} runs of 50 batches (min {min(floors):,.0f}, max {max(floors):,.0f})")
    print(f"(b) placegroup, one process, batch {a.batch}: {one:,.0f} examples/s = {one / f:.2f} of the floor "
          f"({local['cpu_ms_per_step']:.1f} ms CPU a step)")
    print(f"(c) placegroup, 2 trainers + 2 pservers, batch {a.batch} per trainer: {two:,.0f} examples/s = "
          f"{two / f:.2f} of the floor  [target >= 0.4]  (CPU a step per trainer: {cpu} ms; "
          f"peak RSS {rss} MB)")


if __name__ == "__main__":
    main()
