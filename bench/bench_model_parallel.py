"""Model parallelism for a 1M-class classifier: step time and peak memory per executor.

Runs examples/many_classes.py in one process and on K = 2 and 4 trainers (no pservers, the
last fc column-sliced over them, the fused softmax cross-entropy), and prints per run the
step time, each executor's peak resident memory, and its ratio to the one-process peak.
Collective bandwidth against raw pyzmq is bench/bench_collectives.py.

    python bench/bench_model_parallel.py [--classes 1000000] [--steps 20]
"""
from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys

from placegroup.tools.launch import launch

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples", "many_classes.py")
LINE = re.compile(r"trainer (\d+): (\d+) ms per step; peak memory ([0-9,]+) MiB")


def _parse(text: str) -> list[tuple[int, float, float]]:
    return sorted((int(r), float(ms), float(mb.replace(",", ""))) for r, ms, mb in LINE.findall(text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--classes", type=int, default=1_000_000)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    args = ["--classes", str(a.classes), "--steps", str(a.steps)]
    env = {k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"}
    one = _parse(subprocess.run([sys.executable, EXAMPLE, *args], capture_output=True, text=True, env=env,
                                check=True).stdout)[0]
    print(f"{a.classes:,} classes, dim 32, global batch 32, SGD")
    print(f"{'run':<12} {'ms/step':>8} {'peak MiB per executor':>24} {'vs one process':>15}")
    print(f"{'1 process':<12} {one[1]:>8.0f} {one[2]:>24,.0f} {1.0:>15.2f}")
    for k in (2, 4):
        out = io.StringIO()
        code = launch(EXAMPLE, args, k, 0, out=out)
        if code:
            sys.exit(out.getvalue())
        runs = _parse(out.getvalue())
        ms = max(r[1] for r in runs)
        peaks = [r[2] for r in runs]
        print(f"{f'K = {k}':<12} {ms:>8.0f} {', '.join(f'{p:,.0f}' for p in peaks):>24} "
              f"{max(peaks) / one[2]:>15.2f}")
    print("(2 cores: K = 4 runs 4 processes on them; the memory includes ~60 MiB of Python and numpy)")


if __name__ == "__main__":
    main()
