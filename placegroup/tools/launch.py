"""``placegroup launch``: a local cluster of trainers and pservers on 127.0.0.1.

Each process gets the environment Fluid's distributed scripts read (docs/launch.md):
``TRAINING_ROLE``, ``PADDLE_INIT_PSERVERS`` (``ip:port,...``), ``PADDLE_INIT_TRAINERS`` (the
count), ``PADDLE_INIT_PORT`` and ``POD_IP`` (its own endpoint), ``PADDLE_TRAINER_ID``, and the
Fleet names ``PADDLE_PSERVERS_IP_PORT_LIST``, ``PADDLE_TRAINERS_NUM``,
``PADDLE_CURRENT_ENDPOINT``, ``PADDLE_TRAINER_ENDPOINTS``, ``PADDLE_PORT``, and its share of the cores for BLAS
(``OMP_NUM_THREADS`` and friends, unless already set), under the SCHED_BATCH policy
(NOTE(sched-batch); ``--sched normal`` to leave it to the processes) and, where that pays,
bound to its share of the cores (NOTE(cpu-bind); ``--cpu-bind spread|none`` to choose). Every line a process prints is
prefixed with its name (``[trainer:0]``, ``[pserver@127.0.0.1:41237]``, NOTE(process-names)).
The first process that fails stops the others;
``launch`` exits with its code. When every trainer has finished, the pservers, told by the
trainers, return by themselves; any still running after ``--grace`` seconds are stopped. A script
that takes its role from flags gets them from ``--trainer-args``/``--pserver-args``
(NOTE(role-args)); a job whose trainers all trained alone ends with a warning
(NOTE(trained-alone)).

Example::

    placegroup launch --trainers 2 --pservers 2 examples/fit_a_line.py --passes 5
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import signal
import socket
import string
import subprocess
import sys
import threading
import time
from typing import NamedTuple, Sequence

from placegroup import config
from placegroup.errors import ConfigError
from placegroup.ir.place_group import ExecutorId
from placegroup.tools.progress import Bars
from placegroup.util.sched import SCHED_POLICIES, set_sched


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports that were free a moment ago (bound to port 0, then released)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]


# NOTE(process-names): launch calls a process what the runtime calls it in its own messages
# (PeerLost, waits, dumps: ``str(ExecutorId)``): ``trainer:0``, ``pserver@127.0.0.1:41237``, in the
# prefix of its lines, in its progress bar and in launch's own lines. A pserver's name changes
# with each restart attempt, as its port does; that is what its peers then call it too. Launch
# keeps role and index apart and never parses a name back; the checkpoint tags on disk
# (``pserver.1``, by index: the same across restarts) are file names, not these.
def process_name(role: str, index: int, endpoint: str) -> str:
    """The runtime's name for process ``index`` of ``role`` (NOTE(process-names))."""
    return str(ExecutorId.parse(role, endpoint, rank=index if role == "TRAINER" else None))


class Member(NamedTuple):
    """One process of a local cluster: its role (``TRAINER`` or ``PSERVER``), its index among
    that role's processes (a trainer's id, a pserver's place in the list) and its environment."""
    role: str
    index: int
    env: dict

    @property
    def endpoint(self) -> str:
        return self.env["PADDLE_CURRENT_ENDPOINT"]

    @property
    def name(self) -> str:
        return process_name(self.role, self.index, self.endpoint)


@dataclasses.dataclass
class Proc:
    member: Member
    popen: subprocess.Popen
    thread: threading.Thread | None = None

    @property
    def role(self) -> str:
        return self.member.role

    @property
    def name(self) -> str:
        return self.member.name

    def describe(self) -> str:
        """``pserver@127.0.0.1:41237 (PSERVER, pid 16834)``; a trainer's endpoint is not in its name."""
        where = "" if self.member.endpoint in self.name else f", {self.member.endpoint}"
        return f"{self.name} ({self.role}{where}, pid {self.popen.pid})"


def _exit_text(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def cluster_envs(trainers: int, pservers: int, host: str = "127.0.0.1") -> list[Member]:
    """The processes of a local cluster, pservers first, then trainers, each with its environment."""
    ports = free_ports(pservers + trainers, host)
    ps_eps = [f"{host}:{p}" for p in ports[:pservers]]
    tr_eps = [f"{host}:{p}" for p in ports[pservers:]]
    # NOTE(blas-threads): BLAS pools spin while they wait; with several processes per core
    # they fight each other (a 15 ms matmul instead of 2 ms on 2 cores and 4 processes). Each
    # process gets its share of the cores unless the user chose.
    share = str(max(1, (os.cpu_count() or 1) // (pservers + trainers)))
    threads = {k: config.raw(k) or share for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    common = {
        **threads,
        "PADDLE_INIT_PSERVERS": ",".join(ps_eps), "PADDLE_INIT_TRAINERS": str(trainers),
        "PADDLE_PSERVERS_IP_PORT_LIST": ",".join(ps_eps), "PADDLE_TRAINERS_NUM": str(trainers),
        "PADDLE_TRAINER_ENDPOINTS": ",".join(tr_eps), "POD_IP": host, "PYTHONUNBUFFERED": "1",
    }
    out = []
    for i, ep in enumerate(ps_eps):
        out.append(Member("PSERVER", i, {**common, "TRAINING_ROLE": "PSERVER", "PADDLE_INIT_PORT": ep.split(":")[1],
                                         "PADDLE_PORT": ep.split(":")[1],
                                         "PADDLE_CURRENT_ENDPOINT": ep, "PADDLE_PSERVER_ID": str(i)}))
    for i, ep in enumerate(tr_eps):
        out.append(Member("TRAINER", i, {**common, "TRAINING_ROLE": "TRAINER", "PADDLE_INIT_PORT": ep.split(":")[1],
                                         "PADDLE_PORT": ep.split(":")[1],
                                         "PADDLE_CURRENT_ENDPOINT": ep, "PADDLE_TRAINER_ID": str(i)}))
    return out


# NOTE(role-args): many public Fluid scripts (PaddleRec's cluster_train.py, Paddle's distributed
# unit tests) learn their role from flags (--role pserver --current_endpoint ...), not from the
# environment, and launch gives every process the same arguments: such a script trained alone in
# every process. --trainer-args/--pserver-args are appended to that role's arguments, split as a
# shell would (shlex), each placeholder filled from the process's own launch environment. They are
# filled again for every attempt, so a restart's fresh ports reach the flags too.
PLACEHOLDERS = {"endpoint": "PADDLE_CURRENT_ENDPOINT", "trainer_id": "PADDLE_TRAINER_ID",
                "pserver_id": "PADDLE_PSERVER_ID", "pservers": "PADDLE_PSERVERS_IP_PORT_LIST",
                "trainers": "PADDLE_TRAINERS_NUM", "trainer_endpoints": "PADDLE_TRAINER_ENDPOINTS",
                "role": "TRAINING_ROLE"}  # placeholder -> the launch variable it takes its value from
ROLE_ONLY = {"trainer_id": "TRAINER", "pserver_id": "PSERVER"}


def role_args(text: str | None, role: str) -> list[str]:
    """``text`` (``--trainer-args`` for ``role`` TRAINER, ``--pserver-args`` for PSERVER) split as a
    shell would, its placeholders checked (NOTE(role-args)); ``expand_role_args`` fills them.

    Raises:
        ConfigError: a quote left open, a brace that opens no placeholder, or a placeholder that
            is unknown or of the other role, naming it and the ones there are.
    """
    flag = f"--{role.lower()}-args"
    known = [n for n in PLACEHOLDERS if ROLE_ONLY.get(n, role) == role]
    names = ", ".join("{%s}" % n for n in known)
    try:
        tokens = shlex.split(text or "")
    except ValueError as e:
        raise ConfigError(f"{flag} {text!r}: {e}") from None
    for tok in tokens:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(tok) if f is not None]
            bad = next((f for f in fields if f not in known), None)
            if bad is None:
                tok.format_map(dict.fromkeys(known, "0"))  # a conversion or format spec that fails
        except (ValueError, KeyError, IndexError, AttributeError) as e:
            raise ConfigError(f"{flag}: {tok!r}: {e} (write {{{{ and }}}} for a literal brace); the "
                              f"placeholders are {names}") from None
        if bad is not None:
            what = (f"{{{bad}}} is a {ROLE_ONLY[bad].lower()}'s placeholder" if bad in ROLE_ONLY
                    else f"unknown placeholder {{{bad}}} in {tok!r}")
            raise ConfigError(f"{flag}: {what}; a {role.lower()}'s placeholders are {names}")
    return tokens


def expand_role_args(tokens: Sequence[str], env: dict) -> list[str]:
    """``tokens`` (from ``role_args``) with each placeholder replaced by its value in ``env``, a
    process's launch environment (``cluster_envs``)."""
    values = {n: env[v] for n, v in PLACEHOLDERS.items() if v in env}
    return [t.format_map(values) for t in tokens]


def take_role_args(args: Sequence[str], given: dict) -> tuple[list[str], dict]:
    """``--trainer-args X``/``--pserver-args X`` (or ``=X``) taken out of a script's ``args`` and
    joined to ``given`` (``{"TRAINER": text or None, "PSERVER": ...}``, from before the script),
    checked by ``role_args``: ``launch ... train.py --is_local 0 --pserver-args "..."`` reads as
    its user wrote it. Returns the script's other arguments and the joined texts."""
    rest, taken, it = [], dict(given), iter(args)
    for a in it:
        flag, eq, value = a.partition("=")
        if flag not in ("--trainer-args", "--pserver-args"):
            rest.append(a)
            continue
        value, role = (value if eq else next(it, None)), flag[2:-5]
        if value is None:
            raise ConfigError(f"{a} needs a value, such as {a} \"--role {role}\"")
        taken[role.upper()] = " ".join(filter(None, (taken.get(role.upper()), value)))
    for role, text in taken.items():
        role_args(text, role)
    return rest, taken


def _pump(proc: Proc, sink: Bars, lock: threading.Lock) -> None:
    name = proc.name
    for line in iter(proc.popen.stdout.readline, b""):
        with lock:
            sink.line(name, line.decode(errors="replace"))


def _stop(procs: Sequence[Proc], grace: float) -> None:
    for p in procs:
        if p.popen.poll() is None:
            p.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.popen.wait(max(0.0, deadline - time.monotonic()))
        if p.popen.poll() is None:
            p.popen.kill()
            p.popen.wait()


# How many times the job was restarted before this attempt (0 on the first): set for every
# process, so a script can tell a fresh start from a restart (NOTE(restarts)).
RESTART_ENV = "PLACEGROUP_RESTART"


CPU_BINDS = ("auto", "spread", "none")


def cpu_sets(trainers: int, pservers: int, cores: Sequence[int]) -> dict[tuple[str, int], list[int]]:
    """The cores each process of a local cluster runs on: ``{(role, index): [core, ...]}``.

    NOTE(cpu-bind): with no more processes than cores, each process gets its own equal share
    (as its BLAS threads do, NOTE(blas-threads)). With more, trainer ``i`` and pserver ``i``
    share core ``i mod C``: a step's trainers then compute on different cores, and so do its
    pservers, which run while the trainers wait. Left alone, Linux wakes each process on the
    core of the one that woke it, and a core that idles for less than the migration cost (0.5
    ms) does not pull waiting work over, so the two trainers (or pservers) often queue on one
    core while the other idles. On 2 cores, 2 trainers + 2 pservers, binding gave 616k against
    471k examples/s (bench/bench_sparse.py, median of five alternations). With more trainers
    (or pservers) than cores some must share a core anyway, and there binding only stops the
    kernel from balancing them: 4 trainers + 2 pservers ran 10-30% slower bound
    (bench/bench_modes.py), so ``auto`` binds only when ``bind_pays``.

    Example::

        cpu_sets(2, 2, [0, 1])   # {('TRAINER', 0): [0], ('TRAINER', 1): [1],
                                 #  ('PSERVER', 0): [0], ('PSERVER', 1): [1]}
    """
    cores = list(cores)
    if not cores:
        raise ValueError("no cores to bind to")
    procs = [("TRAINER", i) for i in range(trainers)] + [("PSERVER", i) for i in range(pservers)]
    if len(procs) <= len(cores):
        share = len(cores) // len(procs)
        return {p: cores[k * share:(k + 1) * share] for k, p in enumerate(procs)}
    return {(role, i): [cores[i % len(cores)]] for role, i in procs}


def bind_pays(trainers: int, pservers: int, cores: int) -> bool:
    """Whether ``auto`` binds (NOTE(cpu-bind)): each core then holds at most one trainer and one
    pserver."""
    return trainers <= cores and pservers <= cores


def launch(script: str, args: Sequence[str], trainers: int, pservers: int, grace: float = 30.0,
           out=None, python: str = sys.executable, extra_env: dict | None = None,
           keys: str | None = None, sched: str = "batch", cpu_bind: str = "auto",
           paddle_compat: bool = False, max_restarts: int = 0, trainer_args: str | None = None,
           pserver_args: str | None = None) -> int:
    """Run ``script`` as a local cluster; return the exit code (the first failure's, or 0).

    Args:
        script: the training script, run as ``python script args...`` in every process.
        trainers, pservers: how many of each.
        grace: seconds the pservers get to finish after the last trainer, and processes get
            after SIGTERM before SIGKILL.
        out: where the prefixed output goes (default ``sys.stdout``).
        keys: a key directory or config file (``placegroup keys``, docs/security.md), exported
            to every process as ``PLACEGROUP_KEYS``; one already in the environment passes
            through without it.
        sched: ``"batch"`` runs every process under SCHED_BATCH (NOTE(sched-batch)),
            ``"normal"`` leaves it to the processes (whose executors take it themselves unless
            PLACEGROUP_SCHED=normal).
        cpu_bind: ``"spread"`` binds each process to its cores (``cpu_sets``, NOTE(cpu-bind)),
            ``"none"`` lets them run anywhere, ``"auto"`` spreads where ``bind_pays``.
        paddle_compat: run ``python -m placegroup run script args...`` instead, so that an
            unmodified Fluid 1.x script's ``import paddle.fluid`` gives placegroup
            (``placegroup.compat``).
        max_restarts: after a failure, start the whole job again this many times at most,
            resuming from the newest complete checkpoint (NOTE(restarts)).
        trainer_args, pserver_args: more arguments for that role's processes, after ``args``,
            with placeholders such as ``{endpoint}`` and ``{trainer_id}`` (NOTE(role-args)),
            e.g. ``"--role trainer --trainer_id {trainer_id} --endpoints {pservers}"``.

    Raises:
        ConfigError: a bad placeholder in ``trainer_args`` or ``pserver_args`` (``role_args``),
            before anything starts.
    """
    if sched not in SCHED_POLICIES:
        raise ValueError(f"sched must be one of {', '.join(SCHED_POLICIES)}, got {sched!r}")
    if cpu_bind not in CPU_BINDS:
        raise ValueError(f"cpu_bind must be one of {', '.join(CPU_BINDS)}, got {cpu_bind!r}")
    if trainers < 1 or pservers < 0:
        raise ValueError(f"need at least one trainer and no negative pservers, got {trainers}, {pservers}")
    if max_restarts < 0:
        raise ValueError(f"max_restarts must be 0 or more, got {max_restarts}")
    per_role = {"TRAINER": role_args(trainer_args, "TRAINER"), "PSERVER": role_args(pserver_args, "PSERVER")}
    binding = None
    if cpu_bind != "none" and hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        if cpu_bind == "spread" or bind_pays(trainers, pservers, len(cores)):
            binding = cpu_sets(trainers, pservers, cores)
    extra_env = dict(extra_env or {})
    if keys is not None:
        from placegroup.comm.security import KEYS_ENV, Security

        Security.from_path(keys)  # a path that is not there fails here, not in every process
        extra_env[KEYS_ENV] = os.path.abspath(keys)
    # the trainers' progress becomes bars on a terminal; every process reports how it ended
    # (NOTE(exit-record) in tools/progress.py)
    extra_env.setdefault("PLACEGROUP_PROGRESS", "launch" if out is None and sys.stdout.isatty() else "lines")
    extra_env["PLACEGROUP_LAUNCHER_PID"] = str(os.getpid())
    out = Bars(out or sys.stdout)
    lock = threading.Lock()
    command = [python, "-m", "placegroup", "run", script, *args] if paddle_compat else [python, script, *args]
    ckpt_dir = extra_env.get("PLACEGROUP_CHECKPOINT_DIR") or config.get("PLACEGROUP_CHECKPOINT_DIR")
    if max_restarts and not ckpt_dir:
        _say(out, lock, "--max-restarts without PLACEGROUP_CHECKPOINT_DIR (or --checkpoint-dir): a "
                        "restarted job resumes only if the script configures its own checkpoints")
    restart = 0
    while True:
        env = {**extra_env, RESTART_ENV: str(restart)}
        if restart:
            env["PLACEGROUP_RESUME"] = "1"
        code, trained = _attempt(command, per_role, trainers, pservers, grace, out, lock, env, sched, binding,
                                 f"attempt {restart + 1}: " if max_restarts else "")
        if code == 0 or code == 130 or trained:
            return code
        if restart >= max_restarts:
            if max_restarts:
                _say(out, lock, f"giving up: the job failed {restart + 1} times")
            return code
        restart += 1
        step = _newest_step(ckpt_dir)
        where = (f"from checkpoint step {step}" if step is not None
                 else "from step 0 (no complete checkpoint yet)" if ckpt_dir
                 else "resuming as the script's own checkpoint settings allow")
        _say(out, lock, f"restart {restart} of {max_restarts} {where}")


# NOTE(restarts): torchrun's elastic restart, for a job of fixed size. When any process fails,
# launch stops the others (SIGTERM, then SIGKILL) and starts the whole job again, on fresh ports,
# with PLACEGROUP_RESUME=1: every process loads the newest complete checkpoint after its startup
# program and the trainers skip ``exe.resumed_step`` batches. The whole job goes back, not only
# the process that died: what a lost pserver held since the last checkpoint is gone, and the
# survivors have moved past that checkpoint, so all of them return to it together. In sync mode
# a checkpoint is one moment of the job, so the continued run equals an uninterrupted one
# (docs/checkpoint.md). A failure before the first checkpoint, or in a job with no checkpoint
# directory, restarts at step 0 (NOTE(resume-without-dir) in placegroup/io/checkpoint.py);
# Ctrl-C never restarts.
def _say(sink: Bars, lock: threading.Lock, text: str) -> None:
    with lock:
        sink.line("launch", text + "\n")


def _newest_step(dirname: str | None) -> int | None:
    """The newest complete checkpoint step in ``dirname`` (None: none, or no directory)."""
    if not dirname or not os.path.isdir(dirname):
        return None
    from placegroup.io.checkpoint_store import latest_checkpoint

    return latest_checkpoint(dirname)


def _attempt(command: list, per_role: dict, trainers: int, pservers: int, grace: float, out: Bars,
             lock: threading.Lock, extra_env: dict, sched: str, binding: dict | None, label: str) -> tuple[int, bool]:
    """Start every process of the job once and watch them: the first failure stops the others
    and is the exit code; 0 when every trainer finished and the pservers returned. Also returns
    whether every trainer finished its training (a pserver that then would not stop is no
    reason to train again). ``per_role``: each role's ``role_args``, filled in here."""
    procs: list[Proc] = []
    out.exits.clear()
    for m in cluster_envs(trainers, pservers):
        env = {**os.environ, **extra_env, **m.env}
        popen = subprocess.Popen(command + expand_role_args(per_role[m.role], m.env), env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # the child is still starting Python: the threads it makes later (libzmq's) inherit this
        set_sched(popen.pid, sched)
        if binding is not None:
            with contextlib.suppress(OSError):  # it already exited, or a sandbox forbids it
                os.sched_setaffinity(popen.pid, binding[(m.role, m.index)])
        p = Proc(m, popen)
        p.thread = threading.Thread(target=_pump, args=(p, out, lock), daemon=True)
        p.thread.start()
        procs.append(p)
    code, trained = 0, False
    try:
        trainers_left = [p for p in procs if p.role == "TRAINER"]
        trainers_done_at = None
        while True:
            failed = [p for p in procs if p.popen.poll() not in (None, 0)]
            if failed:  # polled every 50 ms: the others' failures it causes come later
                first = failed[0]
                code = first.popen.returncode
                _say(out, lock, f"{label}{first.describe()} failed first ({_exit_text(code)}); stopping the others")
                code = code if code > 0 else 128 - code
                break
            running = [p for p in procs if p.popen.poll() is None]
            if not running:
                break
            if all(p.popen.poll() is not None for p in trainers_left):
                trainers_done_at = trainers_done_at or time.monotonic()
                if time.monotonic() - trainers_done_at > grace:
                    _say(out, lock, f"{label}{', '.join(p.name for p in running)} still running {grace:.0f}s "
                                    f"after the trainers finished; stopping them")
                    code, trained = 1, all(p.popen.returncode == 0 for p in trainers_left)
                    break
            time.sleep(0.05)
    except KeyboardInterrupt:
        code = 130
    finally:
        _stop(procs, grace=min(grace, 10.0))
        for p in procs:
            if p.thread is not None:
                p.thread.join(timeout=5)
        with lock:
            out.close()
    if pservers and code != 130 and trained_alone(procs, out.exits):
        _warn(out, lock, TRAINED_ALONE)
    return code, trained


# NOTE(trained-alone): a script that reads its role from flags, started without them
# (NOTE(role-args)), trains alone in every process: the pservers are never contacted, every
# trainer writes the same model, and each exits 0. Every process placegroup runs under launch
# says as it exits whether it ever ran a distributed program (NOTE(exit-record)); when pservers
# were started and every trainer finished with status 0 saying it did not, the job ends with
# TRAINED_ALONE on launch's output and on stderr (where a log collector that keeps stdout as
# the job's log looks for trouble). The exit status stays 0: each process did what its script
# said, and what it wrote is a valid local run; a script may use the pservers' slots on purpose
# for something else, and a status that changed with a guess would break pipelines that ran.
TRAINED_ALONE = ("pservers were started, but no trainer ever exchanged data with them: each trainer "
                 "trained alone. If the script reads its role from arguments (--role, --endpoints, "
                 "--trainer_id, ...), pass them with --trainer-args and --pserver-args, with what "
                 "makes it train distributed (such as --is_local 0 or --update_method pserver); "
                 "docs/launch.md, \"Scripts that take their role as arguments\"")


def trained_alone(procs: Sequence[Proc], exits: dict) -> bool:
    """Whether every trainer of ``procs`` exited 0 and said (``exits``: name -> ran a distributed
    program, from the exit records) it never ran a distributed program (NOTE(trained-alone)). A
    trainer that sent no record (a script without placegroup) leaves it unknown: False."""
    trainers = [p for p in procs if p.role == "TRAINER"]
    return all(p.popen.returncode == 0 and exits.get(p.name) is False for p in trainers)


def _warn(sink: Bars, lock: threading.Lock, text: str) -> None:
    """``text`` on launch's output and on stderr, once where both are the same terminal."""
    _say(sink, lock, "warning: " + text)
    if sink.out is not sys.stderr and not (sink.out is sys.stdout and sys.stdout.isatty() and sys.stderr.isatty()):
        print(f"placegroup launch: warning: {text}", file=sys.stderr, flush=True)
