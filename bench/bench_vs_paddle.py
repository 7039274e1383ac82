"""placegroup against PaddlePaddle 2.6.2's fleet parameter server, side by side on fit_a_line.

Both run 2 pservers + 2 trainers on 127.0.0.1, one process per role: placegroup's
bench/sync_worker.py under ``placegroup.tools.launch.launch`` and Paddle's
bench/peers/paddle_fit_a_line.py started the way ``fleetrun`` starts a PS job. Same model (13 ->
fc(1) -> square error -> mean), SGD 0.001, 20 examples per trainer per step, the same fixed batch
per trainer, ``--warmup`` steps and then ``--steps`` timed. Every process is started plainly
(no core binding, the default scheduling policy) on one thread: ``OMP_NUM_THREADS``,
``MKL_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` are 1, and Paddle gets ``CPU_NUM=1`` (one
dataset thread; its ``FLAGS_paddle_num_threads`` is 1 by default). Paddle's trainers share a
gloo barrier over files (``PADDLE_WITH_GLOO=1``, as ``fleetrun --with_gloo``) so that trainer 1
starts from trainer 0's initial parameters. Paddle's libraries still start their own threads
(brpc, its executor); the threads column shows how many each process had.

Paddle is timed with both of its training loops: ``exe.run(feed=...)`` from Python and its C++
loop ``exe.train_from_dataset`` over a QueueDataset. In 2.6.2's async mode only the second one
pulls parameters back from the servers, so the ``exe.run`` loop does not train: its row shows
the loss of the servers' parameters at the end (they walk away along a gradient that never
changes). The runs alternate (placegroup, then each Paddle loop, the order turning each round)
``--repeats`` times. Sync mode (``a_sync=False``) is probed first with a short Paddle run and
compared only if it works; 2.6.2 crashes there (``SendBarrierOp`` finds no communicator).

Paddle's async trainer never waits for a server: it queues its gradients, a client thread sums
up to 13 of them every 10 ms and sends the sum, and another pulls the parameters every 2 ms, so
a step computes on parameters many steps old, with no stated bound. placegroup's async mode
applies each gradient alone and a trainer waits for the answer to its own update (one trainer
equals one process exactly); the like-for-like counterpart of Paddle's loop is placegroup's
async mode with a staleness bound (``--staleness``, default 8): a step computes on parameters
at most k of the trainer's updates old. Both placegroup rows are printed.

Prints, per mode and run kind, steps/s per trainer (the median over repeats and trainers, min-max),
the loss at the end, each role's peak RSS (VmHWM, the largest over repeats) and thread count, and
the ratio placegroup / Paddle, and each placegroup row's step as a number of floor round trips
(a raw pyzmq round trip of 14 floats, bench/floors.py, measured after the runs; the strict async
target is at most 2.5). Paddle runs under the python named by ``PLACEGROUP_PADDLE_PYTHON``
(else /work/paddle-venv/bin/python where it exists); placegroup never imports it. Without a
python that imports paddle it prints why and exits 0. Paddle's trainers also open a client
service of their own on the first free port from 8500 (brpc, not configurable), and its pservers
serve until stopped: as fleetrun does, this script stops them (SIGTERM, by PID) when the trainers
have finished.

    python bench/bench_vs_paddle.py [--steps 3000] [--warmup 300] [--repeats 3] [--modes async,sync]
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import io
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from placegroup.tools.launch import free_ports, launch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from floors import round_trip  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "sync_worker.py")
PEER = os.path.join(HERE, "peers", "paddle_fit_a_line.py")
DEFAULT_PADDLE_PYTHON = "/work/paddle-venv/bin/python"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "CPU_NUM": "1"}
BATCH = 20  # examples per trainer per step
TRAINERS = PSERVERS = 2
LOOPS = {"feed": "paddle exe.run(feed)", "dataset": "paddle train_from_dataset"}


def paddle_python() -> tuple[str | None, str]:
    """(python, version) of the Paddle to compare with, or (None, why not)."""
    py = os.environ.get("PLACEGROUP_PADDLE_PYTHON") or (
        DEFAULT_PADDLE_PYTHON if os.path.exists(DEFAULT_PADDLE_PYTHON) else None)
    if not py:
        return None, f"set PLACEGROUP_PADDLE_PYTHON to a python with paddlepaddle==2.6.2 (no {DEFAULT_PADDLE_PYTHON})"
    if os.sep in py:  # Paddle's processes run in a directory of their own
        py = os.path.abspath(py)
    try:
        r = subprocess.run([py, "-c", "import paddle; print(paddle.__version__)"], capture_output=True,
                           text=True, timeout=180)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{py} could not be run: {e}"
    if r.returncode:
        return None, f"{py} cannot import paddle: {(r.stderr.strip().splitlines() or ['?'])[-1]}"
    return py, r.stdout.strip().splitlines()[-1]


def _status(pid: int) -> tuple[int, int] | None:
    """(VmHWM KiB, threads) of a live process, None once it is gone."""
    hwm = threads = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
    except (OSError, ValueError):
        return None
    return hwm, threads


class Watch(threading.Thread):
    """Samples peak RSS and thread count of a cluster's processes every 0.1 s until stopped.

    ``find()`` returns ``{pid: (role, index)}`` of the processes to watch; it is called until it
    has found all four (placegroup's are found among this process's children)."""

    def __init__(self, find):
        super().__init__(daemon=True)
        self.find, self.procs, self.peak = find, {}, {}
        self.done = threading.Event()

    def sample(self) -> None:
        if len(self.procs) < TRAINERS + PSERVERS:
            self.procs.update(self.find())
        for pid, who in self.procs.items():
            s = _status(pid)
            if s:
                old = self.peak.get(who, (0, 0))
                self.peak[who] = (max(old[0], s[0]), max(old[1], s[1]))

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.sample()

    def stop(self) -> dict:
        self.done.set()
        self.join()
        return self.peak


def _own_children(script: str) -> dict:
    """``{pid: (role, index)}`` of this process's children running ``script``."""
    found = {}
    me = str(os.getpid())
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[1] != me:
                    continue
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if script.encode() not in f.read():
                    continue
            with open(f"/proc/{d}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except (OSError, IndexError):
            continue
        role = env.get(b"TRAINING_ROLE", b"?").decode()
        idx = env.get(b"PADDLE_TRAINER_ID" if role == "TRAINER" else b"PADDLE_PSERVER_ID", b"0").decode()
        found[int(d)] = (role, int(idx))
    return found


def run_placegroup(mode: str, steps: int, warmup: int, timeout: float, staleness: int = 0) -> dict:
    """One placegroup cluster: ``{"rates", "losses", "peak", "error"}``."""
    with tempfile.TemporaryDirectory() as out:
        log = io.StringIO()
        args = ["--mode", mode, "--steps", str(warmup + steps), "--warmup", str(warmup),
                "--batch", str(BATCH * TRAINERS), "--staleness", str(staleness), "--out", out]
        watch = Watch(lambda: _own_children(WORKER))
        watch.start()
        result = {}
        runner = threading.Thread(target=lambda: result.setdefault("code", launch(
            WORKER, args, TRAINERS, PSERVERS, out=log, sched="normal", cpu_bind="none", extra_env=ONE_THREAD)))
        runner.start()
        runner.join(timeout)
        if runner.is_alive():  # stop the processes it started, by PID, and let launch return
            for pid in list(watch.procs):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            runner.join(60)
            result["code"] = f"timed out after {timeout:.0f}s"
        peak = watch.stop()
        if result.get("code"):
            return {"error": f"placegroup {mode}: {result['code']}\n{log.getvalue()[-3000:]}", "peak": peak}
        recs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "TRAINER*.json")))]
    return {"rates": [1.0 / r["mean_s"] for r in recs], "losses": [r["final_loss"] for r in recs],
            "peak": peak, "error": None}


def _crash_site(text: str) -> str:
    """The signal and last C++ frame a Paddle log reports, or its last line."""
    frames = re.findall(r"^\d+\s+(\S.*)$", text, re.M)
    fatal = re.findall(r"FatalError: `([^`]+)`", text)
    if fatal:
        where = re.sub(r"\(.*", "", frames[-1]) if frames else "?"
        return f"{fatal[-1]} in {where}"
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def run_paddle(py: str, mode: str, loop: str, steps: int, warmup: int, timeout: float) -> dict:
    """One Paddle cluster, started as fleetrun starts one: ``{"rates", "losses", "peak", "error"}``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        os.makedirs(os.path.join(tmp, "gloo"))
        os.makedirs(out)
        ports = free_ports(PSERVERS + TRAINERS)
        ps_eps = [f"127.0.0.1:{p}" for p in ports[:PSERVERS]]
        tr_eps = [f"127.0.0.1:{p}" for p in ports[PSERVERS:]]
        common = {**os.environ, **ONE_THREAD, "PYTHONUNBUFFERED": "1", "POD_IP": "127.0.0.1",
                  "PADDLE_PSERVERS_IP_PORT_LIST": ",".join(ps_eps), "PADDLE_TRAINERS_NUM": str(TRAINERS),
                  "PADDLE_TRAINER_ENDPOINTS": ",".join(tr_eps), "PADDLE_WITH_GLOO": "1",
                  "PADDLE_GLOO_RENDEZVOUS": "2", "PADDLE_GLOO_FS_PATH": os.path.join(tmp, "gloo")}
        args = [py, PEER, "--mode", mode, "--loop", loop, "--steps", str(steps), "--warmup", str(warmup),
                "--batch", str(BATCH), "--out", out]
        roles = [("PSERVER", i, ep, {"PADDLE_PORT": ep.split(":")[1]}) for i, ep in enumerate(ps_eps)]
        roles += [("TRAINER", i, ep, {"PADDLE_PORT": ep.split(":")[1], "PADDLE_TRAINER_ID": str(i)})
                  for i, ep in enumerate(tr_eps)]
        procs = {}
        for role, i, ep, extra in roles:
            logf = open(os.path.join(tmp, f"{role.lower()}{i}.log"), "w")
            # cwd: train_from_dataset leaves a <number>_train_desc.prototxt where it runs
            p = subprocess.Popen(args, env={**common, "TRAINING_ROLE": role, **extra}, stdout=logf,
                                 stderr=subprocess.STDOUT, cwd=tmp)
            logf.close()
            procs[p.pid] = (role, i, p)
        watch = Watch(lambda: {pid: (r, i) for pid, (r, i, _) in procs.items()})
        watch.start()
        trainers = [p for r, _, p in procs.values() if r == "TRAINER"]
        servers = [p for r, _, p in procs.values() if r == "PSERVER"]
        deadline, error = time.monotonic() + timeout, None
        while error is None and any(p.poll() is None for p in trainers):
            bad = [(r, i, p) for r, i, p in procs.values() if p.poll() not in (None, 0)]
            if bad:
                r, i, p = bad[0]
                error = f"{r.lower()} {i} exited with {p.returncode}"
            elif time.monotonic() > deadline:
                error = f"timed out after {timeout:.0f}s"
            else:
                time.sleep(0.1)
        if error is None and any(p.returncode for p in trainers):
            p = next(p for p in trainers if p.returncode)
            error = f"trainer exited with {p.returncode}"
        peak = watch.stop()
        watch.sample()  # the pservers' last figures, before they are stopped
        for p in servers + trainers:  # fleetrun's way: the pservers serve until terminated
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in servers + trainers:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if error:
            logs = "".join(open(f).read() for f in sorted(glob.glob(os.path.join(tmp, "trainer*.log"))))
            return {"error": f"{error}: {_crash_site(logs)}", "peak": peak, "log": logs[-3000:]}
        recs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "TRAINER*.json")))]
    return {"rates": [r["steps_per_s"] for r in recs], "losses": [r["loss_server_end"] for r in recs],
            "self_rss": [r["peak_rss_kib"] for r in recs], "peak": peak, "error": None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3000, help="timed steps per trainer")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--modes", default="async,sync")
    ap.add_argument("--loops", default="feed,dataset", help="Paddle's training loops to time")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds one cluster may run")
    ap.add_argument("--staleness", type=int, default=8,
                    help="async: also run placegroup with this staleness bound (0: only the strict async)")
    a = ap.parse_args()
    py, version = paddle_python()
    if py is None:
        print(f"bench_vs_paddle: skipped: {version}")
        return
    modes = [m for m in a.modes.split(",") if m]
    loops = [lp for lp in a.loops.split(",") if lp]
    print(f"placegroup vs PaddlePaddle {version} ({py}) fleet parameter server: fit_a_line, "
          f"{TRAINERS} trainers + {PSERVERS} pservers, {BATCH} examples per trainer per step, SGD 0.001, "
          f"{a.warmup} warm-up + {a.steps} timed steps, {a.repeats} alternating repeats")
    print(f"each process: {' '.join(f'{k}={v}' for k, v in ONE_THREAD.items())}; no core binding, default "
          f"scheduler; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at start")
    results = {}  # (mode, kind) -> [run, ...]
    skipped = {}
    ours = {"async": ["placegroup"] + (["placegroup-k"] if a.staleness else []), "sync": ["placegroup"]}
    names = {"placegroup": "placegroup", "placegroup-k": f"placegroup, staleness {a.staleness}", **LOOPS}
    for mode in modes:
        kinds = ours[mode] + loops
        if mode == "sync":  # probe: 2.6.2's sync mode crashes
            for loop in loops:
                r = run_paddle(py, mode, loop, 20, 10, min(a.timeout, 90))
                if r["error"]:
                    skipped[(mode, loop)] = r["error"]
                    kinds.remove(loop)
        for rep in range(a.repeats):
            turn = rep % len(kinds)
            for kind in kinds[turn:] + kinds[:turn]:
                if kind.startswith("placegroup"):
                    r = run_placegroup(mode, a.steps, a.warmup, a.timeout,
                                       a.staleness if kind == "placegroup-k" else 0)
                else:
                    r = run_paddle(py, mode, kind, a.steps, a.warmup, a.timeout)
                if r["error"]:
                    print(f"{mode} {kind} failed: {r['error']}\n{r.get('log', '')}", file=sys.stderr)
                    sys.exit(1)
                results.setdefault((mode, kind), []).append(r)
    floor_us = 1e6 / round_trip()  # after the runs, in the same window (bench/floors.py)
    print(f"{'mode':<6}{'run':<27}{'steps/s per trainer':>20}{'(min-max)':>14}{'loss at end':>13}"
          f"{'peak RSS MiB':>15}{'threads':>10}")
    print(f"{'':<6}{'':<27}{'median':>20}{'':>14}{'':>13}{'trainer/pserver':>15}{'tr/ps':>10}")
    for mode in modes:
        med = {}
        for kind in ours[mode] + loops:
            runs = results.get((mode, kind))
            name = names[kind]
            if not runs:
                if (mode, kind) in skipped:
                    print(f"{mode:<6}{name:<27}  not run: {skipped[(mode, kind)]}")
                continue
            rates = [v for r in runs for v in r["rates"]]
            losses = [v for r in runs for v in r["losses"]]
            med[kind] = statistics.median(rates)

            def most(role: str, i: int) -> int:
                return max(r["peak"].get((role, x), (0, 0))[i] for r in runs for x in range(2))

            # a Paddle trainer's own VmHWM, read at its end, may be above the last sample
            rss_tr = max(most("TRAINER", 0), max((v for r in runs for v in r.get("self_rss", [])), default=0))
            rss = f"{rss_tr / 1024:.0f} / {most('PSERVER', 0) / 1024:.0f}"
            threads = f"{most('TRAINER', 1)} / {most('PSERVER', 1)}"
            mark = "*" if kind == "feed" and mode == "async" else " "
            span = f"({min(rates):,.0f}-{max(rates):,.0f})"
            print(f"{mode:<6}{name:<27}{med[kind]:>20,.0f}{span:>14}{statistics.median(losses):>12.4g}{mark}"
                  f"{rss:>15}{threads:>10}")
        for kind in ours[mode]:
            if kind in med:  # a step against the raw pyzmq round trip of 14 floats
                print(f"{'':<6}{names[kind]}: a step is {1e6 / med[kind] / floor_us:.2f} floor round trips "
                      f"({1e6 / med[kind]:,.0f} us; the floor {floor_us:,.0f} us)"
                      + ("  [target <= 2.5]" if mode == "async" and kind == "placegroup" else ""))
        for loop in loops:
            for kind in ours[mode]:
                if kind in med and loop in med:
                    print(f"{'':<6}{names[kind]} / {LOOPS[loop]}: {med[kind] / med[loop]:.2f}x")
    if "async" in modes and "feed" in loops:
        print("* the servers' loss: in 2.6.2's async mode exe.run never pulls the parameters back, so its "
              "trainers keep pushing the gradient of their initial parameters and do not train")


if __name__ == "__main__":
    main()
