"""Sync training speed: placegroup against floors measured in the same run (bench/floors.py).

Prints, for fit_a_line (batch 20, SGD, 2 trainers + 2 pservers, one process each) the step
time in units of the floor round trip (one gradient push + parameter pull of 14 floats over
raw pyzmq; the target is at most 4, PaddlePaddle's classic pserver mode spends about 97), and
for a model of about 3 million parameters the step time in one process and on 2 + 2, with the
bytes each trainer moves per step next to raw pyzmq's bandwidth for messages of that size.

    python bench/bench_sync.py [--steps 2000] [--wide-steps 30]
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from floors import bandwidth, round_trip_cost  # noqa: E402

from placegroup.tools.launch import launch  # noqa: E402

WORKER = os.path.join(HERE, "sync_worker.py")


def _cluster(model: str, steps: int, warmup: int, batch: int, trainers=2, pservers=2, **launch_kw):
    """(the trainers' records, the pservers' CPU seconds per step)."""
    with tempfile.TemporaryDirectory() as out:
        log = io.StringIO()
        args = ["--model", model, "--steps", str(steps), "--warmup", str(warmup), "--batch", str(batch),
                "--out", out]
        code = launch(WORKER, args, trainers, pservers, out=log, **launch_kw)
        if code:
            raise SystemExit(f"{model} cluster failed ({code}):\n{log.getvalue()}")
        return ([json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, "TRAINER*.json")))],
                [json.load(open(f))["cpu_per_step_s"] for f in sorted(glob.glob(os.path.join(out, "PSERVER*.json")))])


def _local(model: str, steps: int, warmup: int, batch: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        env = {k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"}
        subprocess.run([sys.executable, WORKER, "--model", model, "--steps", str(steps), "--warmup",
                        str(warmup), "--batch", str(batch), "--out", out], check=True, env=env)
        return json.load(open(os.path.join(out, "local0.json")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--wide-steps", type=int, default=30, help="steps of the wide MLP, 5 of them warm-up (0: skip it)")
    ap.add_argument("--sched", choices=["batch", "normal"], default="batch", help="placegroup launch --sched")
    ap.add_argument("--cpu-bind", choices=["auto", "spread", "none"], default="auto", help="placegroup launch --cpu-bind")
    a = ap.parse_args()
    if 0 < a.wide_steps <= 5:
        ap.error(f"--wide-steps must be 0 (skip the wide MLP) or more than its 5 warm-up steps, got {a.wide_steps}")
    how = {"sched": a.sched, "cpu_bind": a.cpu_bind}
    load = os.getloadavg()[0]
    rt_s, rt_cpu_s = round_trip_cost()
    rt, floor_us = 1 / rt_s, 1e6 * rt_s
    fit, fit_ps_cpu = _cluster("fit_a_line", a.steps, a.steps // 10, 20, **how)
    fit_local = _local("fit_a_line", a.steps, a.steps // 10, 20)
    step_us = 1e6 * sum(r["median_s"] for r in fit) / len(fit)
    print(f"floor: one push + pull round trip of 14 floats over raw pyzmq: {floor_us:.1f} us "
          f"({rt:,.0f}/s)")
    print("fit_a_line, batch 20, SGD, sync, 2 trainers + 2 pservers:")
    print(f"  step {step_us:.1f} us ({1e6 / step_us:,.0f} steps/s per trainer) = "
          f"{step_us / floor_us:.1f} floor round trips  [target <= 4; PaddlePaddle 1.8.5 ~97]")
    print(f"  one process, whole batch: {1e6 * fit_local['median_s']:.1f} us per step")
    # NOTE(cpu-bound): on few cores a step is bounded by the CPU its processes spend, not by latency
    cores = os.cpu_count() or 1
    cpu_us = 1e6 * (sum(r["cpu_per_step_s"] for r in fit) + sum(fit_ps_cpu))
    trainers_us = ", ".join(f"{1e6 * r['cpu_per_step_s']:.0f}" for r in fit)
    pservers_us = ", ".join(f"{1e6 * c:.0f}" for c in fit_ps_cpu)
    print(f"  CPU per step: trainers {trainers_us} us, pservers {pservers_us} us (all steps); all together "
          f"{cpu_us:.0f} us = {cpu_us / cores / floor_us:.1f} floor round trips of wall on {cores} cores")
    print(f"  a floor round trip takes {1e6 * rt_cpu_s:.0f} us of CPU (both ends); the step's 4 round trips "
          f"(each trainer with each pserver) at that price alone: {4e6 * rt_cpu_s / cores / floor_us:.1f} floor "
          f"round trips of wall on {cores} cores")
    print(f"  bytes per trainer step: {fit[0]['bytes_per_step']:,.0f}")
    if not a.wide_steps:
        return
    wide, _ = _cluster("wide", a.wide_steps, 5, 64, **how)
    wide_local = _local("wide", a.wide_steps, 5, 64)
    moved = sum(r["bytes_per_step"] for r in wide) / len(wide)
    bw = bandwidth(int(moved / 2))
    w_ms = 1e3 * sum(r["median_s"] for r in wide) / len(wide)
    print("wide MLP 1024-2048-512-1 (3.15M parameters), batch 64, SGD:")
    print(f"  one process: {1e3 * wide_local['median_s']:.1f} ms per step; 2 trainers + 2 pservers: "
          f"{w_ms:.1f} ms per step")
    print(f"  each trainer moves {moved / 1e6:.1f} MB per step; at raw pyzmq's {bw / 1e9:.2f} GB/s for "
          f"{moved / 2e6:.1f} MB messages that alone takes {1e3 * moved / bw:.1f} ms "
          f"= {100 * (moved / bw) / (w_ms / 1e3):.0f}% of the step")
    print(f"(load average {load:.1f} on {os.cpu_count()} cores when started; 4 processes share them)")


if __name__ == "__main__":
    main()
