"""A real CTR job on placegroup, Fluid 1.8.5 and Paddle 2.6.2, side by side.

The job: bench/peers/ctr_fluid1.py, a CTR DNN written once as a Fluid 1.x script (13 dense
features, 26 slots of 1 + Poisson(4) ids sum-pooled from one shared ``is_sparse=True``
embedding [1M x 10], fc 400-400-400, Adam, AUC, batch 1000 per trainer). placegroup runs it
unchanged (``placegroup run``), and so does Fluid 1.8.5. Paddle 2.6.2 has no ``paddle.fluid``:
it runs the same model in ``paddle.static`` (bench/peers/paddle26_ctr.py), fed by
``train_from_dataset`` over the same batches written as MultiSlot files. Every process is
started plainly (no core binding, the default scheduler) on one thread
(bench/peers/launch_peer.py).

Rows, each ``--repeats`` times, the runs interleaved (the order turns each round):

* placegroup, one process: the floor every ratio of the 2 + 2 runs is taken against;
* placegroup 2 trainers + 2 pservers, sync and async (its default strict async: a trainer
  waits for its own update, never for another trainer);
* Fluid 1.8.5 (its AVX core) one process, 2 + 2 sync, and 2 + 2 async through its
  communicator (the transpiler's ``runtime_split_send_recv``);
* Paddle 2.6.2 one process and 2 + 2 with fleet's async parameter server.

A cluster's examples/s is the sum of its trainers' (each: timed steps x batch / seconds). The
one-process rows also give the ops' own time per step from each framework's profiler
(``fluid.profiler``, which placegroup implements too; Paddle 2.6.2: not measured), since
Fluid's and Paddle's kernels are C++ with MKL. Each row prints its loss at the first and last
step and its AUC, so that it is visible that every side trains.

Targets (examples/s, medians): placegroup sync 2 + 2 >= 1.8x its one process; >= 2x Fluid
1.8.5's sync 2 + 2; placegroup async >= 1.5x Fluid 1.8.5's async and >= 1.5x Paddle 2.6.2's.

    python bench/bench_ctr.py [--steps 60] [--warmup 10] [--repeats 5] [--distributed]
        [--only placegroup,fluid,paddle26]

Fluid 1.8.5 runs under the python ``PLACEGROUP_FLUID18_PYTHON`` names (a venv with its AVX core;
``PLACEGROUP_FLUID18_PATH`` is put on its PYTHONPATH, for a cv2 stub), Paddle 2.6.2 under
``PLACEGROUP_PADDLE_PYTHON``; a side whose python is missing is left out, saying why.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))

from launch_peer import PeerError, run_cluster, run_one  # noqa: E402

FLUID_SCRIPT = os.path.join(HERE, "peers", "ctr_fluid1.py")
PADDLE_SCRIPT = os.path.join(HERE, "peers", "paddle26_ctr.py")
PLACEGROUP = [sys.executable, "-m", "placegroup", "run"]


def _works(python: str, probe: str, env: dict) -> str | None:
    try:
        r = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120,
                           env={**os.environ, **env})
    except OSError as e:
        return str(e)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["failed"])[-1]


def sides(only: set) -> dict:
    """name -> (python command, script, extra env), for each side that can run here."""
    out = {}
    if "placegroup" in only:
        out["placegroup"] = (PLACEGROUP, FLUID_SCRIPT, {})
    fluid = os.environ.get("PLACEGROUP_FLUID18_PYTHON")
    if "fluid" in only:
        env = {"PYTHONPATH": os.environ["PLACEGROUP_FLUID18_PATH"]} if os.environ.get("PLACEGROUP_FLUID18_PATH") else {}
        why = "PLACEGROUP_FLUID18_PYTHON is not set" if not fluid else _works(
            fluid, "import paddle; assert paddle.__version__.startswith('1.8'), paddle.__version__", env)
        if why:
            print(f"Fluid 1.8.5 left out: {why}")
        else:
            out["fluid"] = (fluid, FLUID_SCRIPT, env)
    paddle = os.environ.get("PLACEGROUP_PADDLE_PYTHON")
    if "paddle26" in only:
        why = "PLACEGROUP_PADDLE_PYTHON is not set" if not paddle else _works(
            paddle, "import paddle; assert paddle.__version__.startswith('2.6'), paddle.__version__", {})
        if why:
            print(f"Paddle 2.6.2 left out: {why}")
        else:
            out["paddle26"] = (paddle, PADDLE_SCRIPT, {})
    return out


def runs(available: dict) -> list[tuple]:
    """(row label, side, kind, mode) of every row, in print order."""
    rows = []
    for side, label in (("placegroup", "placegroup"), ("fluid", "Fluid 1.8.5"), ("paddle26", "Paddle 2.6.2")):
        if side not in available:
            continue
        rows.append((f"{label}, one process", side, "one", "sync"))
        if side != "paddle26":  # 2.6.2's sync parameter server does not run (paddle26_ctr.py)
            rows.append((f"{label}, 2 + 2 sync", side, "cluster", "sync"))
        rows.append((f"{label}, 2 + 2 async", side, "cluster", "async"))
    return rows


def run_row(available: dict, side: str, kind: str, mode: str, env: dict) -> dict:
    python, script, extra = available[side]
    env = {**extra, **env, "CTR_MODE": mode}
    if kind == "one":
        rec = run_one(python, script, {**env, "CTR_PROFILE": "1"} if side != "paddle26" else env)
        recs = [rec]
    else:
        recs = run_cluster(python, script, env)
    return {"examples_per_s": sum(r["examples_per_s"] for r in recs),
            "first_loss": statistics.mean(r["first_loss"] for r in recs),
            "last_loss": statistics.mean(r["last_loss"] for r in recs),
            "auc": statistics.mean(r["auc"] for r in recs),
            "cpu_ms": statistics.mean(r["cpu_ms_per_step"] for r in recs),
            "kernel_ms": recs[0].get("kernel_ms_per_step")}


def med(xs: list) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{statistics.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60, help="steps per trainer, warm-up included")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=1000, help="examples per trainer per step")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--distributed", action="store_true", help="the table is_distributed=True")
    ap.add_argument("--only", default="placegroup,fluid,paddle26", help="the sides to run")
    a = ap.parse_args()
    available = sides(set(a.only.split(",")))
    rows = runs(available)
    env = {"CTR_STEPS": str(a.steps), "CTR_WARMUP": str(a.warmup), "CTR_BATCH": str(a.batch),
           "CTR_DISTRIBUTED": "1" if a.distributed else "0"}
    got: dict = {r[0]: [] for r in rows}
    failed: dict = {}
    for rep in range(a.repeats):
        k = rep % len(rows)
        for label, side, kind, mode in rows[k:] + rows[:k]:
            if label in failed:
                continue
            try:
                got[label].append(run_row(available, side, kind, mode, env))
            except PeerError as e:
                failed[label] = str(e).splitlines()[-1][:160]
            print(f"  round {rep + 1}: {label}: "
                  + (f"{got[label][-1]['examples_per_s']:,.0f} ex/s" if label not in failed else "failed"), flush=True)
    print(f"\nCTR DNN, {a.batch} examples per trainer a step, {a.steps - a.warmup} timed steps, "
          f"table {'is_distributed' if a.distributed else 'is_sparse'}; medians (min-max) of {a.repeats} runs")
    print(f"{'run':34} {'examples/s':>26} {'CPU ms/step':>12} {'ops ms/step':>12} {'loss first -> last':>20} {'AUC':>6}")
    for label, *_ in rows:
        rs = got[label]
        if label in failed or not rs:
            print(f"{label:34} failed: {failed.get(label, 'no run')}")
            continue
        loss = f"{statistics.median(r['first_loss'] for r in rs):.4f} -> {statistics.median(r['last_loss'] for r in rs):.4f}"
        print(f"{label:34} {med([r['examples_per_s'] for r in rs]):>26} {med([r['cpu_ms'] for r in rs]):>12} "
              f"{med([r['kernel_ms'] for r in rs]):>12} {loss:>20} {statistics.median(r['auc'] for r in rs):6.3f}")

    def rate(label):
        rs = got.get(label) or []
        return statistics.median(r["examples_per_s"] for r in rs) if rs and label not in failed else None

    print()
    for what, num, den, target in (
            ("placegroup 2 + 2 sync / its one process", "placegroup, 2 + 2 sync", "placegroup, one process", 1.8),
            ("placegroup sync / Fluid 1.8.5 sync", "placegroup, 2 + 2 sync", "Fluid 1.8.5, 2 + 2 sync", 2.0),
            ("placegroup async / Fluid 1.8.5 async", "placegroup, 2 + 2 async", "Fluid 1.8.5, 2 + 2 async", 1.5),
            ("placegroup async / Paddle 2.6.2 async", "placegroup, 2 + 2 async", "Paddle 2.6.2, 2 + 2 async", 1.5),
            ("placegroup one process / Fluid 1.8.5's", "placegroup, one process", "Fluid 1.8.5, one process", None)):
        n, d = rate(num), rate(den)
        if n and d:
            print(f"{what:42} {n / d:5.2f}x" + (f"   (target >= {target}x)" if target else ""))


if __name__ == "__main__":
    main()
