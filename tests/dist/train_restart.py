"""One process of a job that dies on purpose, run under ``placegroup launch --max-restarts``.

It trains train_model.py's models in sync mode, with checkpoints configured by the environment
(``--checkpoint-dir``/``--checkpoint-every`` of launch), and resumes where ``exe.resumed_step``
says. ``--die A:WHO:S`` (repeatable) makes process WHO kill itself with SIGKILL in attempt A
(``PLACEGROUP_RESTART``) when trainer 0 is about to run global step S: a trainer just before that
step, a pserver from a thread, wherever it then is. WHO is a trainer by its name (``trainer:0``)
and a pserver by its index (``pserver:1``: its endpoint, the rest of its name, changes with each
attempt); ``trainer.0`` and ``pserver.1`` are read too. As it dies it prints ``dying on purpose``,
which launch prefixes with its name.

Each trainer appends ``attempt step loss`` to ``OUT/<tag>.losses`` (tag: ``trainer.0``) as it goes (a killed run
keeps what it wrote), and at the end writes ``OUT/<tag>.npz`` with every parameter.

    placegroup launch --max-restarts 2 --checkpoint-dir C --checkpoint-every 2 \\
        train_restart.py --out OUT --steps 20 --die 0:pserver:1:7
"""
import argparse
import os
import signal
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_model  # noqa: E402  (its models and data)

import placegroup as fluid  # noqa: E402
from placegroup import config  # noqa: E402

PROGRESS = "progress"  # OUT/progress: "attempt step" that trainer 0 is about to run


def _die() -> None:
    print("dying on purpose", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def _death(text: str) -> tuple[tuple[int, str], int]:
    """``A:WHO:S`` -> ((A, its file tag: ``trainer.0``), S); WHO is ``trainer:0`` or ``trainer.0``."""
    attempt, rest = text.split(":", 1)
    who, step = rest.rsplit(":", 1)
    role, _, index = who.replace(":", ".").partition(".")
    return (int(attempt), f"{role}.{int(index)}"), int(step)


def _watch(out: str, attempt: int, step: int) -> None:
    """A pserver's death: once trainer 0 of this attempt is about to run ``step``."""
    path = os.path.join(out, PROGRESS)
    while True:
        try:
            a, s = map(int, open(path).read().split())
        except (FileNotFoundError, ValueError):
            a, s = -1, -1
        if a == attempt and s >= step:
            _die()
        time.sleep(0.002)


def _progress(out: str, attempt: int, step: int) -> None:
    tmp = os.path.join(out, f".{PROGRESS}.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(f"{attempt} {step}")
    os.replace(tmp, os.path.join(out, PROGRESS))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="wide")
    ap.add_argument("--optimizer", default="momentum")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--die", action="append", default=[], help="ATTEMPT:WHO:STEP (repeatable)")
    a = ap.parse_args()
    deaths = dict(map(_death, a.die))  # (attempt, file tag) -> step
    attempt = config.get("PLACEGROUP_RESTART")
    feeds, cost = train_model.build(a.model, a.optimizer)
    exe = fluid.Executor(fluid.CPUPlace())
    role = config.get("TRAINING_ROLE")
    endpoint = config.get("POD_IP") + ":" + config.get("PADDLE_INIT_PORT")
    t = fluid.DistributeTranspiler(fluid.DistributeTranspilerConfig(min_block_size=2000))
    t.transpile(pservers=config.get("PADDLE_INIT_PSERVERS"), trainers=config.get("PADDLE_INIT_TRAINERS"))
    prog = t.get_program(endpoint, role)
    if role == "PSERVER":
        tag = f"pserver.{t.pserver_endpoints.index(endpoint)}"
        if (attempt, tag) in deaths:
            threading.Thread(target=_watch, args=(a.out, attempt, deaths[attempt, tag]), daemon=True).start()
        exe.run(t.get_startup_program(endpoint, role))
        exe.run(prog)
        exe.close()
        return
    tid, n = t.trainer_id, t.trainer_num
    tag = f"trainer.{tid}"
    exe.run(t.get_startup_program(endpoint, role))
    batches = train_model.data(a.model, a.steps, a.batch)
    with open(os.path.join(a.out, f"{tag}.losses"), "a") as log:
        for step in range(exe.resumed_step, a.steps):
            if tid == 0:
                _progress(a.out, attempt, step)
            if deaths.get((attempt, tag)) == step:
                _die()
            xb, yb = batches[step]
            lo, hi = tid * len(xb) // n, (tid + 1) * len(xb) // n
            loss, = exe.run(prog, feed={"x": xb[lo:hi], "y": yb[lo:hi]}, fetch_list=[cost])
            log.write(f"{attempt} {step} {float(loss[0])!r}\n")
            log.flush()
    scope = fluid.global_scope()
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in fluid.default_main_program().all_parameters()}
    exe.close()
    np.savez(os.path.join(a.out, f"{tag}.npz"), **params)


if __name__ == "__main__":
    main()
