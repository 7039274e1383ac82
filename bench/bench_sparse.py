"""Sparse prefetch + update: placegroup against numpy's own gather/scatter, in the same run.

The floor, in one process: a float32 table [vocab x 64]; 50 batches of 1024 ids drawn as
``(zipf(1.1) * 2654435761) % vocab``; per batch ``rows = table[ids]`` then
``np.add.at(table, ids, -0.01 * rows)``; examples per second. Then ids -> embedding [vocab x
64] -> fc(2) -> softmax CE with a sharded table, batch 1024 per trainer, 2 trainers + 2
pservers, sync or async, examples per second in total, and the trainers' peak RSS. The target
is 0.6 of the floor (PaddlePaddle's classic pserver mode reaches about 0.19), median to median
(NOTE(bench-windows)); the whole run's mean is printed too, and how the first window after the
warm-up compares with the median (the target: within 1.5x of the steady state).

    python bench/bench_sparse.py [--vocab 1000000] [--steps 400] [--window 20] [--mode async]
"""
from __future__ import annotations

import argparse
import glob
import io
import json
import os
import sys
import tempfile
import time

import numpy as np

from placegroup.tools.launch import launch

HERE = os.path.dirname(os.path.abspath(__file__))


def floor(vocab: int, dim: int = 64, batches: int = 50, batch: int = 1024, repeats: int = 7) -> list[float]:
    """The sparse floor (module docstring): examples/s of each of ``repeats`` runs of 50 batches
    (a run lasts tens of milliseconds, so one run is at the mercy of the scheduler)."""
    rng = np.random.default_rng(0)
    table = rng.random((vocab, dim), dtype=np.float32)
    all_ids = [((rng.zipf(1.1, size=batch) * 2654435761) % vocab).astype(np.int64) for _ in range(batches)]
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for ids in all_ids:
            rows = table[ids]
            np.add.at(table, ids, -0.01 * rows)
        runs.append(batches * batch / (time.perf_counter() - t0))
    return runs


def windows(runs: list[dict], steps: int) -> list[float]:
    """Examples/s of the whole cluster in each window of ``steps`` consecutive steps.

    NOTE(bench-windows): these machines are shared, and their speed swings several-fold within
    seconds. The floor is a set of short runs, so the cluster's run is cut into windows of about
    the same length (tens of ms) and the two are compared median to median: a burst of a
    neighbour's load then moves a few samples on either side, not the headline. Sync trainers
    run in lockstep, so the same step range is the same time span on each."""
    n = min(len(r["step_ends"]) for r in runs)
    steps = max(1, min(steps, n))  # a run shorter than one window is one window
    out = []
    for lo in range(0, n - steps + 1, steps):
        out.append(sum(r["batch"] * steps / (r["step_ends"][lo + steps - 1] - (r["step_ends"][lo - 1] if lo else 0.0))
                       for r in runs))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=1_000_000)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--window", type=int, default=20, help="steps per window (NOTE(bench-windows))")
    ap.add_argument("--mode", choices=["sync", "async"], default="sync", help="the training mode")
    ap.add_argument("--sched", choices=["batch", "normal"], default="batch", help="placegroup launch --sched")
    ap.add_argument("--cpu-bind", choices=["auto", "spread", "none"], default="auto", help="placegroup launch --cpu-bind")
    a = ap.parse_args()
    before = floor(a.vocab)  # the machine's speed drifts: the floor is taken before and after
    with tempfile.TemporaryDirectory() as out:
        log = io.StringIO()
        code = launch(os.path.join(HERE, "sparse_worker.py"),
                      ["--vocab", str(a.vocab), "--steps", str(a.steps), "--mode", a.mode, "--out", out], 2, 2, out=log,
                      sched=a.sched, cpu_bind=a.cpu_bind)
        if code:
            sys.exit(f"cluster failed ({code}):\n{log.getvalue()}")
        runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "trainer*.json")))]
        servers = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "pserver*.json")))]
    after = floor(a.vocab)
    floors = before + after
    f = float(np.median(floors))
    win = windows(runs, a.window)
    med = float(np.median(win))
    total = sum(r["examples_per_s"] for r in runs)
    steps = ", ".join(f"{r['steps_per_s']:.1f}" for r in runs)
    rss = ", ".join(f"{r['peak_rss_mb']:.0f}" for r in runs)
    table_mb = a.vocab * 64 * 4 / 2 ** 20
    print(f"floor: numpy gather + np.add.at on a [{a.vocab:,} x 64] table, batches of 1024 zipf ids: "
          f"median {f:,.0f} examples/s over {len(floors)} runs of 50 batches "
          f"(min {min(floors):,.0f}, max {max(floors):,.0f})")
    print(f"placegroup, 2 trainers + 2 pservers, batch 1024 per trainer, SGD, {a.mode}:")
    print(f"  median {med:,.0f} examples/s over {len(win)} windows of {a.window} steps "
          f"(min {min(win):,.0f}, max {max(win):,.0f}) = {med / f:.2f} of the floor  "
          f"[target >= 0.6; Paddle ~0.19]")
    print(f"  warm-up: the first window after the {runs[0]['warmup']} warm-up steps ran at "
          f"{win[0] / med:.2f} of the median window  [target >= 0.67: within 1.5x of the steady state]")
    steps_s = sum(r["steps_per_s"] for r in runs) / len(runs)
    fetched = steps_s * sum(r["unique_rows"] for r in runs)
    print(f"  rows: {fetched:,.0f}/s prefetched (each trainer's distinct ids), {total:,.0f}/s of gradient "
          f"applied (one per example; the floor gathers and scatters one row per example)")
    print(f"  whole run: {total:,.0f} examples/s ({steps} steps/s per trainer) = "
          f"{total / float(np.mean(floors)):.2f} of the floor's mean")
    cpu = [1e3 * r["cpu_s_per_step"] for r in runs + servers]
    print(f"  CPU per step (trainers, pservers): {', '.join(f'{c:.2f}' for c in cpu)} ms")
    print(f"  trainers' peak RSS {rss} MB; the table is "
          f"{table_mb:,.0f} MB, on the pservers")


if __name__ == "__main__":
    main()
