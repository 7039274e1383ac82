"""Tables keyed by raw 64-bit ids (sparse_embedding, DynamicTable): training speed against the
fixed-vocabulary table, inserts against np.unique, and bytes per row against the row's own
bytes, all in the same run.

* End to end: ids -> table [*, 64] -> fc(2) -> softmax CE, SGD, batch 1024 per trainer, 2
  trainers + 2 pservers (bench/sparse_worker.py), once with bench_sparse.py's sharded
  ``embedding([vocab, 64], is_sparse, is_distributed)`` over ``(zipf(1.1) * 2654435761) % vocab``
  (the floor) and once with ``sparse_embedding`` over ``(x * 0x9E3779B97F4A7C15) mod 2**63``, x
  the same zipf draws folded below 2**40 (every id raw, rows made at first sight), the two
  alternated ``--repeats`` times. Printed: each table's median examples/s over windows of
  ``--window`` steps (NOTE(bench-windows) in bench_sparse.py) and dynamic / fixed. Target:
  >= 0.8.
* Inserts, one process: a fresh ``DynamicTable(TableConfig(dim=16, optimizer="adagrad"))`` is
  handed 64k new distinct ids per ``pull`` (bench_key_index.py's ids over a shuffled range)
  until ``--insert-ids`` are in. Printed: inserts/s over the whole load (growth and index
  rebuilds included) and the median call's rate, against the floor ``np.unique`` of the same
  batches. Target: >= 1M inserts/s. A pull before the timed load loads (or, the first time on a
  machine, compiles) the index's kernels; its time is printed apart.
* Memory: ``--memory-ids`` distinct ids loaded the same way into a fresh table of that config;
  ``nbytes / len`` against the row's values and optimizer state plus 24 bytes (dim 16 float32:
  64 + adagrad's moment 64 + 24 = 152 B). Target: <= 1.3x.

    python bench/bench_dynamic.py [--steps 400] [--repeats 2] [--insert-ids 4000000]
                                  [--memory-ids 10000000] [--quick]
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
from placegroup.util.dynamic_table import DynamicTable, TableConfig

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # bench/ is no package

from bench_key_index import ids_of, rate  # noqa: E402
from bench_sparse import windows  # noqa: E402

TABLES = ("fixed", "dynamic")
CONFIG = TableConfig(dim=16, optimizer="adagrad")
CALL = 65536  # new ids per pull


def cluster(table: str, a) -> tuple[list[dict], list[dict]]:
    """One 2 + 2 launch of sparse_worker.py with ``--table table``: (trainers', pservers' records)."""
    with tempfile.TemporaryDirectory() as out:
        log = io.StringIO()
        code = launch(os.path.join(HERE, "sparse_worker.py"),
                      ["--table", table, "--vocab", str(a.vocab), "--steps", str(a.steps), "--mode", a.mode,
                       "--out", out], 2, 2, out=log, sched=a.sched, cpu_bind=a.cpu_bind)
        if code:
            sys.exit(f"cluster ({table}) failed ({code}):\n{log.getvalue()}")
        return ([json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "trainer*.json")))],
                [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "pserver*.json")))])


def batches_of(n: int, seed: int) -> list[np.ndarray]:
    """``n`` distinct raw ids (bench_key_index.py's, over 1..n shuffled) in calls of CALL."""
    new = ids_of(np.random.default_rng(seed).permutation(n) + 1)
    return [new[i:i + CALL] for i in range(0, n, CALL)]


def load(batches: list[np.ndarray]) -> tuple[DynamicTable, list[float]]:
    """A fresh table of CONFIG after one ``pull`` per batch, and each call's seconds."""
    t = DynamicTable(CONFIG)
    secs = []
    for b in batches:
        t0 = time.perf_counter()
        t.pull(b)
        secs.append(time.perf_counter() - t0)
    return t, secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=1_000_000, help="rows of the fixed table")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--window", type=int, default=20, help="steps per window (NOTE(bench-windows))")
    ap.add_argument("--repeats", type=int, default=2, help="launches of each table, alternated")
    ap.add_argument("--mode", choices=["sync", "async"], default="sync", help="the training mode")
    ap.add_argument("--sched", choices=["batch", "normal"], default="batch", help="placegroup launch --sched")
    ap.add_argument("--cpu-bind", choices=["auto", "spread", "none"], default="auto",
                    help="placegroup launch --cpu-bind")
    ap.add_argument("--insert-ids", type=int, default=4_000_000, help="distinct ids of the insert load")
    ap.add_argument("--memory-ids", type=int, default=10_000_000, help="distinct ids of the memory load")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 40 steps, 1 repeat, 200k and 1M ids")
    a = ap.parse_args()
    if a.quick:
        a.steps, a.window, a.repeats, a.insert_ids, a.memory_ids = 40, 10, 1, 200_000, 1_000_000

    # a. end to end, the two tables alternated (the machine's speed drifts)
    runs: dict[str, list] = {t: [] for t in TABLES}
    for _ in range(a.repeats):
        for t in TABLES:
            runs[t].append(cluster(t, a))
    print(f"2 trainers + 2 pservers, batch 1024 per trainer, ids -> table [*, 64] -> fc(2), SGD, {a.mode}, "
          f"{a.steps} steps, {a.repeats} launch(es) of each, alternated:")
    med = {}
    for t in TABLES:
        win = [w for trainers, _ in runs[t] for w in windows(trainers, a.window)]
        med[t] = float(np.median(win))
        per = ", ".join(f"{np.median(windows(tr, a.window)):,.0f}" for tr, _ in runs[t])
        cpu = [1e3 * r["cpu_s_per_step"] for tr, ps in runs[t] for r in tr + ps]
        what = (f"embedding [{a.vocab:,} x 64], (zipf * 2654435761) % vocab" if t == "fixed" else
                "sparse_embedding, raw ids (zipf mod 2**40) * 0x9E3779B97F4A7C15 mod 2**63")
        print(f"  {t:7s} ({what}):")
        print(f"    median {med[t]:,.0f} examples/s over {len(win)} windows of {a.window} steps "
              f"(min {min(win):,.0f}, max {max(win):,.0f}; per launch {per})")
        rss = ", ".join(f"{r['peak_rss_mb']:.0f}" for tr, _ in runs[t] for r in tr)
        print(f"    CPU per step (trainers, pservers; each launch): {', '.join(f'{c:.2f}' for c in cpu)} ms; "
              f"trainers' peak RSS {rss} MB")
    print(f"  dynamic / fixed = {med['dynamic'] / med['fixed']:.2f}  [target >= 0.8]")

    # b. inserts, one process; the first use of the kernels on a machine compiles them (NOTE(key-kernels))
    t0 = time.perf_counter()
    DynamicTable(CONFIG).pull(batches_of(1000, 2)[0])
    first_use = time.perf_counter() - t0
    ins = batches_of(a.insert_ids, 0)
    t, secs = load(ins)
    total = a.insert_ids / sum(secs)
    calls = [b.size / s for b, s in zip(ins, secs)]
    slow = int(np.argmax(secs))
    uniq = rate(np.unique, ins)
    print(f"inserts: DynamicTable(dim 16, adagrad), {a.insert_ids:,} new distinct ids in {len(ins)} pulls of "
          f"{CALL:,} ({len(t):,} rows at the end):")
    print(f"  {total:,.0f} inserts/s over the whole load (growth and rebuilds included); median call "
          f"{np.median(calls):,.0f}/s (slowest: call {slow}, {1e3 * secs[slow]:.0f} ms = {calls[slow]:,.0f}/s)  "
          f"[target >= 1,000,000]")
    print(f"  floor: np.unique of the same batches {uniq:,.0f} ids/s; inserts / np.unique = {total / uniq:.2f} "
          f"(whole load), {np.median(calls) / uniq:.2f} (median call)")
    print(f"  (before timing, a first pull of 1,000 ids took {first_use:.2f} s: numba's import and the "
          f"kernels, compiled or loaded from their cache)")
    del t, ins

    # c. memory
    t, secs = load(batches_of(a.memory_ids, 1))
    row = state = CONFIG.dim * np.dtype(CONFIG.dtype).itemsize  # values; adagrad's moment, as large
    ref = row + state + 24
    per_row = t.nbytes / len(t)
    print(f"memory: {len(t):,} distinct ids loaded ({len(t) / sum(secs):,.0f} inserts/s), "
          f"{t.nbytes / 2 ** 20:,.1f} MiB: "
          f"{per_row:.1f} B per live row against row {row} + optimizer state {state} + 24 = {ref} B: "
          f"{per_row / ref:.2f}x  [target <= 1.3]; growth policy: the row arrays (values, moment, float32 "
          f"count, int32 last-seen step) grow 1.25x + 16 rows in place, the key index is open addressing "
          f"with 4-byte slots at a load kept in [0.5, 0.75] (1.5x growth) plus an 8-byte row -> key array")
    counters = t._index.nbytes + t._a["count"].nbytes + t._a["last"].nbytes
    print(f"  index and counters: {counters / len(t):.1f} B per live id [issue: 24 with the rows full; the "
          f"row arrays hold {t._a['count'].size / len(t):.2f}x the live rows now]")


if __name__ == "__main__":
    main()
