"""Sync, bounded staleness (SSP, k = 2) and async, with and without one slow trainer.

fit_a_line (13 -> 1, SGD) on 4 trainers + 2 pservers; the slow cases make the last trainer
sleep after every step ("5 ms"), or as long on average in bursts ("15 ms /3": 15 ms every
third step). SSP merges as sync does and lets the others run at most k steps ahead
of the slow one: it overlaps the slow trainer's sleep with the others' work and messages, but
no run ends before the slow trainer's own steps are done. Async does not wait for it. Prints, per mode, examples/s over all trainers, the wall time of the
fastest trainer's run, and the loss the trainers end at, side by side.

    python bench/bench_modes.py [--steps 300] [--slow 0.005]
"""
from __future__ import annotations

import argparse
import glob
import io
import json
import os
import sys
import tempfile

from placegroup.tools.launch import launch

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sync_worker.py")


def run(mode: str, steps: int, slow: float, every: int = 1, trainers: int = 4, pservers: int = 2,
        **launch_kw) -> list[dict]:
    with tempfile.TemporaryDirectory() as out:
        log = io.StringIO()
        args = ["--mode", mode, "--steps", str(steps), "--warmup", "10", "--batch", "40", "--slow", str(slow),
                "--slow-every", str(every), "--out", out]
        if launch(WORKER, args, trainers, pservers, out=log, **launch_kw):
            sys.exit(log.getvalue())
        return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "TRAINER*.json")))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--slow", type=float, default=0.005)
    ap.add_argument("--sched", choices=["batch", "normal"], default="batch", help="placegroup launch --sched")
    ap.add_argument("--cpu-bind", choices=["auto", "spread", "none"], default="auto", help="placegroup launch --cpu-bind")
    a = ap.parse_args()
    print(f"fit_a_line, 4 trainers + 2 pservers, {a.steps} steps each, batch 40 in all")
    print(f"{'mode':<8} {'slow trainer':>13} {'examples/s':>11} {'fastest wall s':>15} {'final loss':>11}")
    for slow, every in ((0.0, 1), (a.slow, 1), (a.slow, 3)):
        for mode in ("sync", "ssp", "async"):
            runs = run(mode, a.steps, slow, every, sched=a.sched, cpu_bind=a.cpu_bind)
            rate = sum(r["examples"] / r["wall_s"] for r in runs)
            loss = sum(r["final_loss"] for r in runs) / len(runs)
            what = "no" if not slow else f"{1e3 * slow * every:.0f} ms" + (f" /{every}" if every > 1 else "")
            print(f"{mode:<8} {what:>13} {rate:>11,.0f} "
                  f"{min(r['wall_s'] for r in runs):>15.2f} {loss:>11.4f}")


if __name__ == "__main__":
    main()
