"""What a checkpoint save costs, next to ``np.save`` of the same arrays to the same directory.

One process holds ``--vars`` persistable float32 vars of ``--mb`` MB in all (SYNTHETIC random
values). Each repeat times, in turn on the same disk:

* **np.save** (the floor): ``np.save`` of every var's array to its own ``.npy`` file;
* **np.save + fsync**: the same, each file fsynced (what durability costs on this disk);
* **save, training waits**: ``fluid.io.save_checkpoint(..., background=True)``, as an
  Executor's scheduled save runs: what the training loop waits for (NOTE(save-cost) in
  placegroup/io/checkpoint_store.py); the background sealing is waited for afterwards, untimed;
* **save, sealed**: ``save_checkpoint`` in the foreground: written, checksummed, fsynced,
  renamed into place and pruned (``keep=1``).

and prints the medians and their ratios to the floor (the target for the first save figure is at
most 2). ``--profile`` runs cProfile over the sealed saves and prints the top entries by own time.

Run::

    python bench/bench_checkpoint.py                 # 64 MB in 4 vars, ~10 s
    python bench/bench_checkpoint.py --mb 256 --profile
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import tempfile
import time

import numpy as np

import placegroup as fluid
from placegroup.io.checkpoint_store import wait_sealed


def _program(total_mb: int, nvars: int):
    main = fluid.Program()
    rows = max(1, total_mb * (1 << 20) // nvars // (4 * 1024))
    with fluid.program_guard(main, fluid.Program()):
        for i in range(nvars):
            main.global_block().create_var(name=f"w{i}", shape=[rows, 1024], dtype="float32", persistable=True)
    return main


def _np_save(arrays, folder, fsync=False):
    for name, arr in arrays.items():
        path = os.path.join(folder, f"{name}.npy")
        with open(path, "wb") as f:
            np.save(f, arr)
            if fsync:
                f.flush()
                os.fsync(f.fileno())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--vars", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    main_prog = _program(a.mb, a.vars)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    rng = np.random.default_rng(0)
    arrays = {}
    for v in main_prog.list_vars():
        arrays[v.name] = rng.standard_normal(v.shape, dtype=np.float32)
        scope.var(v.name).get_tensor().set(arrays[v.name])
    nbytes = sum(x.nbytes for x in arrays.values())
    times: dict = {k: [] for k in ("np.save", "np.save + fsync", "save, training waits", "save, sealed")}
    prof = cProfile.Profile() if a.profile else None
    with tempfile.TemporaryDirectory(dir=a.dir) as root:
        floor_dir, ckpt = os.path.join(root, "npy"), os.path.join(root, "ckpt")
        os.makedirs(floor_dir)
        step = 0
        for r in range(a.repeats + 1):  # the first is a warm-up
            for name in times:
                step += 1
                for f in os.listdir(floor_dir):  # new files, as a save writes (no truncation)
                    os.unlink(os.path.join(floor_dir, f))
                os.sync()  # each starts with nothing dirty in the page cache
                t0 = time.perf_counter()
                if name == "np.save":
                    _np_save(arrays, floor_dir)
                elif name == "np.save + fsync":
                    _np_save(arrays, floor_dir, fsync=True)
                elif name == "save, training waits":
                    fluid.io.save_checkpoint(exe, ckpt, main_prog, step, scope=scope, keep=1, background=True)
                else:
                    if prof is not None:
                        prof.enable()
                    fluid.io.save_checkpoint(exe, ckpt, main_prog, step, scope=scope, keep=1)
                    if prof is not None:
                        prof.disable()
                took = time.perf_counter() - t0
                wait_sealed()
                if r:
                    times[name].append(took)
    floor = statistics.median(times["np.save"])
    print(f"checkpoint save of {nbytes / 1e6:,.0f} MB in {a.vars} vars, median of {a.repeats} "
          f"(floor: np.save of the same arrays to the same disk)")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:<24}{med * 1e3:>9.1f} ms  {nbytes / med / 1e9:>6.2f} GB/s  {med / floor:>6.2f}x floor")
    if prof is not None:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
        print(out.getvalue())


if __name__ == "__main__":
    main()
