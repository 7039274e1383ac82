"""Start a CTR peer script as one process or as a local parameter-server cluster, plainly, and
collect the JSON line each trainer prints; bench/bench_ctr.py runs its three systems with it.

The same launcher serves placegroup (``python = [sys.executable, "-m", "placegroup", "run"]``),
Fluid 1.8.5 (its python, with ``PYTHONPATH`` for its cv2 stub in ``env_extra``) and Paddle
2.6.2 (its python), running bench/peers/ctr_fluid1.py or bench/peers/paddle26_ctr.py. Every
process is started with ``subprocess.Popen``: no core binding, the default scheduling policy,
one thread (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` = 1,
``CPU_NUM=1``), in a working directory of the run (temporary, or ``logdir``; Paddle 2.6.2 leaves
``<number>_train_desc.prototxt`` files where it runs), stdout and stderr each into a file there.

A cluster's processes get, on free ports of 127.0.0.1, the environment that Paddle's launchers
give and that all three read (as ``placegroup launch`` does, placegroup/tools/launch.py):
``TRAINING_ROLE``, ``PADDLE_PSERVERS_IP_PORT_LIST``, ``PADDLE_TRAINERS_NUM``,
``PADDLE_TRAINER_ENDPOINTS``, ``POD_IP``, ``PADDLE_PORT`` and ``PADDLE_CURRENT_ENDPOINT`` (the
process's own endpoint), ``PADDLE_TRAINER_ID`` or ``PADDLE_PSERVER_ID``, the older
``PADDLE_INIT_*`` names, and a gloo barrier over files for Paddle 2.6.2's trainers
(``PADDLE_WITH_GLOO=1``, ``PADDLE_GLOO_RENDEZVOUS=2``, ``PADDLE_GLOO_FS_PATH``, as ``fleetrun
--with_gloo``; the others ignore them). When every trainer has exited, the pservers get
``grace`` seconds to return by themselves (placegroup's do; Fluid's and Paddle 2.6.2's serve until
stopped), then SIGTERM, then after ``grace`` more seconds SIGKILL, each by its PID. A process
that fails (a non-zero exit, or a trainer without its JSON line) or a run past ``timeout`` stops
every process of the run and raises ``PeerError`` with the last lines of the failing process's
stderr (and stdout: Paddle prints its crash report there).

    from launch_peer import run_cluster, run_cluster_all, run_one
    recs = run_cluster("/work/pd26/bin/python", "bench/peers/paddle26_ctr.py",
                       {"CTR_STEPS": "30", "CTR_WARMUP": "5"})
    ref = run_one([sys.executable, "-m", "placegroup", "run"], "bench/peers/ctr_fluid1.py", {})
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence

from placegroup.tools.launch import free_ports

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "CPU_NUM": "1"}
# what a run sets itself; an inherited value of any of them is dropped
ROLE_VARS = ("TRAINING_ROLE", "PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS",
             "PADDLE_TRAINER_ID", "PADDLE_PSERVER_ID", "PADDLE_CURRENT_ENDPOINT", "PADDLE_PORT", "POD_IP",
             "PADDLE_INIT_PSERVERS", "PADDLE_INIT_TRAINERS", "PADDLE_INIT_PORT", "PADDLE_WITH_GLOO",
             "PADDLE_GLOO_RENDEZVOUS", "PADDLE_GLOO_FS_PATH")
TAIL = 30  # lines of each output quoted in an error


class PeerError(RuntimeError):
    """A peer process failed or timed out; the message quotes its last output lines."""


def _command(python: str | Sequence[str], script: str) -> list[str]:
    cmd = [python] if isinstance(python, str) else list(python)
    if os.sep in cmd[0]:  # the processes run in a directory of their own
        cmd[0] = os.path.abspath(cmd[0])
    return cmd + [os.path.abspath(script)]


def _base_env(env_extra: dict | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ROLE_VARS}
    env.update(ONE_THREAD)
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in (env_extra or {}).items()})
    return env


class _Proc:
    """One started process: its name, Popen and log files."""

    def __init__(self, name: str, role: str, cmd: list[str], env: dict, workdir: str) -> None:
        self.name, self.role = name, role
        self.out_path = os.path.join(workdir, f"{name}.out")
        self.err_path = os.path.join(workdir, f"{name}.err")
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.popen = subprocess.Popen(cmd, env=env, cwd=workdir, stdout=out, stderr=err,
                                          stdin=subprocess.DEVNULL)

    def tail(self, n: int = TAIL) -> str:
        """The last ``n`` lines of its stderr, then those of its stdout, and of the output it
        captured itself into ``*_<pid>_*/*.log`` of the run directory (paddle26_ctr.py's, left
        there when the process dies inside Paddle's loop)."""
        workdir = os.path.dirname(self.out_path)
        captured = sorted(glob.glob(os.path.join(workdir, f"*_{self.popen.pid}_*", "*.log")))
        parts = []
        for label, path in [("stderr", self.err_path), ("stdout", self.out_path)] + [
                (os.path.relpath(c, workdir), c) for c in captured]:
            with open(path, errors="replace") as f:
                lines = [ln.rstrip("\n") for ln in f if ln.strip()]
            if lines:
                parts.append(f"--- {label}:\n" + "\n".join(lines[-n:]))
        return "\n".join(parts) or "(no output)"

    def record(self, key: str = "examples_per_s") -> dict:
        """The JSON line it printed (the last line of its stdout that parses to an object with
        ``key``: a trainer's ``examples_per_s``, a pserver's ``cpu_s``)."""
        found = None
        with open(self.out_path, errors="replace") as f:
            for line in f:
                line = line.strip()
                start = line.find("{")  # a launcher may put a prefix before it
                if start < 0 or not line.endswith("}"):
                    continue
                with contextlib.suppress(ValueError):
                    rec = json.loads(line[start:])
                    if isinstance(rec, dict) and key in rec:
                        found = rec
        if found is None:
            raise PeerError(f"{self.name} (pid {self.popen.pid}) exited without its JSON line; "
                            f"its last output:\n{self.tail()}")
        return found


@contextlib.contextmanager
def _workdir(logdir: str | None):
    """The run's working directory: ``logdir`` (made if needed, kept) or a temporary one."""
    if logdir is None:
        with tempfile.TemporaryDirectory(prefix="ctr_peer_") as d:
            yield d
    else:
        os.makedirs(logdir, exist_ok=True)
        yield os.path.abspath(logdir)


def _stop(procs: Sequence[_Proc], grace: float) -> None:
    """SIGTERM each process still running, then SIGKILL those left after ``grace`` seconds."""
    for p in procs:
        if p.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                p.popen.kill()
            p.popen.wait()


def _wait_all(procs: Sequence[_Proc], trainers: Sequence[_Proc], timeout: float) -> None:
    """Wait for every trainer to exit; raise PeerError at the first failure or at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        for p in procs:
            code = p.popen.poll()
            if code not in (None, 0):
                why = (f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals()
                       else f"exit code {code}")
                raise PeerError(f"{p.name} (pid {p.popen.pid}) failed: {why}; its last output:\n{p.tail()}")
        if all(t.popen.poll() is not None for t in trainers):
            return
        if time.monotonic() > deadline:
            running = [p for p in trainers if p.popen.poll() is None]
            raise PeerError(f"timed out after {timeout:.0f}s; {running[0].name} (pid {running[0].popen.pid}) "
                            f"still running, its last output:\n{running[0].tail()}")
        time.sleep(0.1)


def run_cluster(python: str | Sequence[str], script: str, env_extra: dict | None = None, trainers: int = 2,
                pservers: int = 2, timeout: float = 600.0, grace: float = 5.0, logdir: str | None = None,
                *, with_pservers: bool = False):
    """Run ``script`` as ``pservers`` pservers and ``trainers`` trainers on 127.0.0.1.

    Args:
        python: the interpreter, or a command to put before the script
            (``[sys.executable, "-m", "placegroup", "run"]``).
        script: the peer script (run by its absolute path).
        env_extra: more environment for every process (``CTR_*``, ``PYTHONPATH``); it may not
            change the role variables.
        timeout: seconds the trainers may take, from the start.
        grace: seconds the pservers get to return by themselves after the trainers, and again
            after SIGTERM before SIGKILL.
        logdir: where to keep each process's ``<role><i>.out``/``.err`` (default: only in the
            run's temporary directory, removed at the end).

        with_pservers: return ``(trainer records, pserver records)`` instead (``run_cluster_all``).

    Returns:
        The trainers' JSON records, by trainer id.

    Raises:
        PeerError: a process failed, a trainer printed no JSON line, or the run timed out.
    """
    cmd = _command(python, script)
    base = _base_env(env_extra)
    ports = free_ports(pservers + trainers)
    ps_eps = [f"127.0.0.1:{p}" for p in ports[:pservers]]
    tr_eps = [f"127.0.0.1:{p}" for p in ports[pservers:]]
    with _workdir(logdir) as workdir:
        gloo = tempfile.mkdtemp(prefix="gloo_", dir=workdir)  # fresh: a kept logdir may hold an old one
        common = {**base, "PADDLE_PSERVERS_IP_PORT_LIST": ",".join(ps_eps), "PADDLE_TRAINERS_NUM": str(trainers),
                  "PADDLE_TRAINER_ENDPOINTS": ",".join(tr_eps), "POD_IP": "127.0.0.1",
                  "PADDLE_INIT_PSERVERS": ",".join(ps_eps), "PADDLE_INIT_TRAINERS": str(trainers),
                  "PADDLE_WITH_GLOO": "1", "PADDLE_GLOO_RENDEZVOUS": "2", "PADDLE_GLOO_FS_PATH": gloo}
        members = [("PSERVER", i, ep, {"PADDLE_PSERVER_ID": str(i)}) for i, ep in enumerate(ps_eps)]
        members += [("TRAINER", i, ep, {"PADDLE_TRAINER_ID": str(i)}) for i, ep in enumerate(tr_eps)]
        procs: list[_Proc] = []
        try:
            for role, i, ep, own in members:
                port = ep.rsplit(":", 1)[1]
                env = {**common, **own, "TRAINING_ROLE": role, "PADDLE_CURRENT_ENDPOINT": ep, "PADDLE_PORT": port,
                       "PADDLE_INIT_PORT": port}
                procs.append(_Proc(f"{role.lower()}{i}", role, cmd, env, workdir))
            tr_procs = [p for p in procs if p.role == "TRAINER"]
            ps_procs = [p for p in procs if p.role == "PSERVER"]
            _wait_all(procs, tr_procs, timeout)
            records = [t.record() for t in tr_procs]
            deadline = time.monotonic() + grace  # placegroup's pservers return by themselves
            while any(p.popen.poll() is None for p in ps_procs) and time.monotonic() < deadline:
                time.sleep(0.1)
            if with_pservers:
                return records, [_pserver_record(p) for p in ps_procs]
            return records
        finally:
            _stop(procs, grace)


def _pserver_record(p: _Proc) -> dict | None:
    """A pserver's JSON line (with ``cpu_s``), or None: still running, failed, or printed none."""
    if p.popen.poll() != 0:
        return None
    with contextlib.suppress(PeerError):
        return p.record("cpu_s")
    return None


def run_cluster_all(python: str | Sequence[str], script: str, env_extra: dict | None = None, trainers: int = 2,
                    pservers: int = 2, timeout: float = 600.0, grace: float = 5.0,
                    logdir: str | None = None) -> tuple[list[dict], list[dict | None]]:
    """``run_cluster``, returning the pservers' JSON records too: ``(trainer records, pserver
    records)``, each by id. A pserver's record is the last JSON object with ``cpu_s`` on its
    stdout, or None where it printed none or had not exited by itself within ``grace`` seconds
    of the last trainer (Fluid's and Paddle 2.6.2's pservers serve until stopped)."""
    return run_cluster(python, script, env_extra, trainers, pservers, timeout, grace, logdir, with_pservers=True)


def run_one(python: str | Sequence[str], script: str, env_extra: dict | None = None,
            timeout: float = 600.0, logdir: str | None = None) -> dict:
    """Run ``script`` as one process (no role in its environment) and return its JSON record
    (``logdir`` as in ``run_cluster``; the files are ``single.out``/``.err``).

    Raises:
        PeerError: it failed, printed no JSON line, or ran past ``timeout`` seconds.
    """
    with _workdir(logdir) as workdir:
        p = _Proc("single", "TRAINER", _command(python, script), _base_env(env_extra), workdir)
        try:
            _wait_all([p], [p], timeout)
            return p.record()
        finally:
            _stop([p], 5.0)
