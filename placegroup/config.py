"""Configuration from the environment: the one module that reads it.

Every environment variable placegroup reads is listed in ``SETTINGS`` below, with its type,
its default and what it does; everything else in the package takes typed values from here
(``config.get(name)``) and never looks at ``os.environ`` itself. ``placegroup env`` prints the
table with the values this environment gives.

Two families:

* the launch contract, which a cluster manager (or ``placegroup launch``) sets for each
  process, in Paddle's names (``TRAINING_ROLE``, ``PADDLE_INIT_PSERVERS``, ...);
* placegroup's own knobs, ``PLACEGROUP_*``: timeouts, debugging, keys, checkpoints, data.

Example::

    from placegroup import config
    timeout = config.get("PLACEGROUP_PEER_TIMEOUT")       # 30.0 unless set
    config.get("PLACEGROUP_PEER_TIMEOUT", {"PLACEGROUP_PEER_TIMEOUT": "5"})   # 5.0

A value that does not parse raises ``ConfigError`` (a ``ValueError``) naming the variable, its
text and what it expects.
Values are read when asked for (so a launcher or a test may set them first), except
``DEBUG``, which is read once at import because the executor's loop consults it per op; a
``PLACEGROUP_DEBUG`` that does not parse leaves it 0 and its error in ``DEBUG_ERROR``, which
``import placegroup`` raises once its one-line failure hook is in place (placegroup/util/failures.py).

Thread-safety: reading is safe from any thread.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Mapping

from placegroup.errors import ConfigError

SCHED_POLICIES = ("batch", "normal")  # PLACEGROUP_SCHED's, and placegroup launch --sched's


@dataclasses.dataclass(frozen=True)
class Setting:
    """One environment variable: its name, how its text becomes a value, its default (the
    value when unset or empty) and what it does."""

    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    expects: str = ""


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _role(text: str) -> str:
    role = text.upper()
    if role not in ("TRAINER", "PSERVER"):
        raise ValueError(text)
    return role


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(text)
    return text == "1"


def _sched(text: str) -> str:
    if text not in SCHED_POLICIES:
        raise ValueError(text)
    return text


def _number(cast: Callable[[str], Any], ok: Callable[[Any], bool]) -> Callable[[str], Any]:
    """A parser: ``cast(text)``, refused (ValueError) unless ``ok`` of it."""
    def parse(text: str):
        value = cast(text)
        if not ok(value):
            raise ValueError(text)
        return value
    return parse


_positive_int = _number(int, lambda v: v >= 1)
_fraction = _number(float, lambda v: 0 < v <= 1)
_positive = _number(float, lambda v: v > 0)


def _seconds(text: str) -> float:
    value = float(text)
    if value < 0:
        raise ValueError(text)
    return value


_S = Setting
SETTINGS: dict[str, Setting] = {s.name: s for s in (
    # -- the launch contract (Paddle's names) --------------------------------------------------
    _S("TRAINING_ROLE", _role, None,
       "This process's role in a cluster (any case); unset: one process alone.", "TRAINER or PSERVER"),
    _S("PADDLE_INIT_PSERVERS", str, "",
       "The pservers: comma-separated ip or ip:port (a bare ip takes PADDLE_INIT_PORT)."),
    _S("PADDLE_INIT_TRAINERS", str, "1", "The trainers: a count, or comma-separated ip[:port]."),
    _S("PADDLE_TRAINER_ENDPOINTS", str, "",
       "The trainers' ip:port list, for jobs whose trainers talk to each other (no pservers, or "
       "model-parallel layers); the transpiler reads it when it was given only a count."),
    _S("POD_IP", str, "127.0.0.1", "This process's IP address."),
    _S("PADDLE_INIT_PORT", str, "6174", "This process's port, and the port of a bare pserver ip."),
    _S("PADDLE_TRAINER_ID", _count, 0, "This trainer's id, 0..N-1 (a pserver ignores it).", "a whole number"),
    _S("PADDLE_PSERVERS_IP_PORT_LIST", str, "",
       "Fleet's name for the pservers, comma-separated ip:port (PaddleCloudRoleMaker reads it)."),
    _S("PADDLE_TRAINERS_NUM", _count, None, "Fleet's name for the number of trainers (PaddleCloudRoleMaker "
       "reads it).", "a whole number"),
    _S("PADDLE_PORT", str, "", "Fleet's name for this process's port: a pserver's endpoint is POD_IP:PADDLE_PORT "
       "(PaddleCloudRoleMaker reads it)."),
    _S("PADDLE_PSERVER_ID", str, "", "Fleet's name for a pserver's index in PADDLE_PSERVERS_IP_PORT_LIST "
       "(GeneralRoleMaker reads it before POD_IP:PADDLE_PORT)."),
    _S("PADDLE_IS_BARRIER_ALL_ROLE", str, "", "0: GeneralRoleMaker's trainers do not barrier with each other "
       "(a MockBarrier), as in Fluid."),
    _S("SYS_JOB_ID", str, "", "A job id GeneralRoleMaker puts before the keys of its store, as Fluid's gloo does."),
    _S("HADOOP_HOME", str, "", "Where `bin/hadoop` is, for the HDFS clients and GeneralRoleMaker's hdfs: store."),
    _S("FS_NAME", str, "", "The HDFS name (fs.default.name) Fleet's HDFS helpers use, as in Fluid."),
    _S("FS_UGI", str, "", "The HDFS user,password (hadoop.job.ugi) Fleet's HDFS helpers use, as in Fluid."),
    _S("CPU_NUM", _count, 1, "How many CPU places fluid.cpu_places() and with_data_parallel use, as in "
       "Fluid (placegroup runs them as one place over the whole batch).", "a whole number"),
    _S("FLAGS_selected_gpus", str, "", "Comma-separated CUDA device ids for fluid.cuda_places(); empty: "
       "every visible device."),
    _S("PYTHONPATH", str, "", "Python's own. `placegroup run` puts placegroup's `paddle` package on it for "
       "the Python processes a script starts, unless a real Paddle is installed."),
    # -- placegroup's own ----------------------------------------------------------------------
    _S("PLACEGROUP_DEBUG", _count, 0,
       "1: log every op an executor runs; 2: every message sent and received too; 3: the "
       "program after each transpiler pass too.", "a level 0-3"),
    _S("PLACEGROUP_PROFILE", _flag, False,
       "1: each executor prints, when it closes or the process exits, the time per op type, "
       "the time spent waiting for peers, and what its messages cost.", "0 or 1"),
    _S("PLACEGROUP_SCHED", _sched, "batch",
       "The scheduling policy an executor that joins a cluster puts its thread (and the socket "
       "threads it starts) under: batch (SCHED_BATCH: a woken peer does not preempt the one that "
       "woke it, which on few cores makes a step's messages much faster) or normal (leave it).",
       "batch or normal"),
    # -- tables keyed by raw ids (sparse_embedding): override every table's config ----------
    _S("PLACEGROUP_TABLE_TTL", _positive_int, None,
       "Updates a row of a sparse_embedding table may go unseen before the next round end drops "
       "it (overrides the layer's table_config.ttl); unset: the layer's.", "an int >= 1"),
    _S("PLACEGROUP_TABLE_MIN_COUNT", _positive, None,
       "A row whose decayed count of sightings is below this goes at a round end (overrides "
       "table_config.min_count); unset: the layer's.", "a number > 0"),
    _S("PLACEGROUP_TABLE_DECAY", _fraction, None,
       "Each round end multiplies every row's count by this (overrides table_config.decay); "
       "unset: the layer's.", "a number in (0, 1]"),
    _S("PLACEGROUP_TABLE_ROUND_STEPS", _positive_int, None,
       "A round (eviction, then decay) ends after every this many updates of a table "
       "(overrides table_config.round_steps); unset: the layer's.", "an int >= 1"),
    _S("PLACEGROUP_PEER_TIMEOUT", _seconds, 30.0,
       "Seconds a silent peer counts as alive; then it is lost (PeerLost names it).", "seconds"),
    _S("PLACEGROUP_START_TIMEOUT", _seconds, 120.0,
       "Seconds to wait for a peer that never connected (pservers may start long before "
       "trainers).", "seconds"),
    _S("PLACEGROUP_WAIT_NOTICE_EVERY", _seconds, 10.0,
       "Seconds between two lines on stderr while an executor waits for a peer that has not "
       "connected yet (naming it and the time left before PLACEGROUP_START_TIMEOUT); 0: none.",
       "seconds"),
    _S("PLACEGROUP_WAIT_TIMEOUT", _seconds, 0.0,
       "Seconds any one wait may last although its peer is alive (a safety net for bugs); "
       "0: no limit.", "seconds"),
    _S("PLACEGROUP_LOST_GRACE", _seconds, 1.0,
       "Seconds a dropped connection may take to come back before its peer counts as lost.",
       "seconds"),
    _S("PLACEGROUP_DROP_LOG_EVERY", _seconds, 10.0,
       "Seconds between two log lines about dropped messages of one peer and reason.", "seconds"),
    _S("PLACEGROUP_MAX_MESSAGE", int, None,
       "The largest frame a socket accepts, in bytes (0 or -1: no limit); unset: twice the "
       "largest var of the program, at least 256 MiB.", "a size in bytes (0 or -1: no limit)"),
    _S("PLACEGROUP_KEYS", str, "",
       "CURVE keys: a key directory, or a .toml/.json file naming the key files (docs/security.md); "
       "unset: plain TCP."),
    _S("PLACEGROUP_CLIENT_KEY", str, "",
       "Which client keypair this process uses: a name in the key directory, or a path."),
    _S("PLACEGROUP_CHECKPOINT_DIR", str, "",
       "Where checkpoints go; with it, a job saves every PLACEGROUP_CHECKPOINT_EVERY steps."),
    _S("PLACEGROUP_CHECKPOINT_EVERY", _count, 0, "Save a checkpoint every this many steps (0: never).",
       "a whole number"),
    _S("PLACEGROUP_CHECKPOINT_KEEP", _count, 3, "How many complete checkpoints to keep.", "a whole number"),
    _S("PLACEGROUP_RESUME", _flag, False,
       "1: resume from the newest complete checkpoint after the startup program.", "a whole number (0 or 1)"),
    _S("PLACEGROUP_PROGRESS", str, "",
       "Set by placegroup launch for its processes, which then tell it as they exit whether they "
       "trained with their peers; launch (its output a terminal) makes a trainer send its progress "
       "to the launcher, which draws a bar per trainer; lines: compact lines as without launch."),
    _S("PLACEGROUP_LAUNCHER_PID", _count, None,
       "Set by placegroup launch: its process id. Only the processes it starts send it records, not "
       "the programs they start in turn (a Dataset's pipe command, say).", "a whole number"),
    _S("PLACEGROUP_RESTART", _count, 0,
       "Set by placegroup launch --max-restarts: how many times the job was restarted before "
       "this attempt (0 on the first).", "a whole number"),
    _S("PLACEGROUP_DATA_HOME", str, "",
       "Where data sets are looked for first (then Paddle's cache, ~/.cache/paddle/dataset)."),
    # -- read by ``placegroup launch`` for the processes it starts -------------------------------
    *(_S(name, _count, None, "BLAS threads per process; unset: placegroup launch gives each "
         "process its share of the cores.", "a whole number")
      for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")),
)}


def raw(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The text of setting ``name`` (stripped), or None when it is unset or empty."""
    if name not in SETTINGS:
        raise KeyError(f"{name} is not a placegroup setting; they are {sorted(SETTINGS)}")
    text = (os.environ if environ is None else environ).get(name, "").strip()
    return text or None


def get(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The value of setting ``name``: parsed from the environment (or ``environ``), or its
    default when unset.

    Raises:
        KeyError: ``name`` is not a setting.
        ConfigError: (a ValueError) naming the variable, its text and what it expects.
    """
    text = raw(name, environ)
    s = SETTINGS[name]
    if text is None:
        return s.default
    try:
        return s.parse(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r}: expected {s.expects or 'a value'} ({s.doc})") from None


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    return raw(name, environ) is not None


def set_for_children(name: str, value: str) -> None:
    """Set setting ``name`` in this process's environment, which the processes it starts
    inherit."""
    if name not in SETTINGS:
        raise KeyError(f"{name} is not a placegroup setting; they are {sorted(SETTINGS)}")
    os.environ[name] = value


try:
    DEBUG: int = get("PLACEGROUP_DEBUG")
    DEBUG_ERROR: ConfigError | None = None
except ConfigError as _e:
    DEBUG, DEBUG_ERROR = 0, _e


def invalid(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each setting whose text does not parse -> ``NAME='text': expected ...``."""
    bad = {}
    for s in SETTINGS.values():
        try:
            get(s.name, environ)
        except ConfigError:
            bad[s.name] = f"{s.name}={raw(s.name, environ)!r}: expected {s.expects or 'a value'}"
    return bad


def describe(environ: Mapping[str, str] | None = None) -> str:
    """The settings as a table: name, value here (or the default in parentheses, as it would be
    typed), what it does; a value that does not parse says INVALID and what it expects."""
    bad, rows = invalid(environ), []
    for s in SETTINGS.values():
        text = raw(s.name, environ)
        shown = text if text is not None else f"({_typed(s.default)})"
        why = f"INVALID, expected {s.expects or 'a value'}. " if s.name in bad else ""
        rows.append(f"{s.name:28} {shown:>12}  {why}{s.doc.replace('``', '')}")
    return "\n".join(rows)


def _typed(default: Any) -> str:
    """A default as one would set it: ``30`` for 30.0, ``0`` for False, ``unset`` for none."""
    if default is None or default == "":
        return "unset"
    if isinstance(default, (bool, float)) and float(default).is_integer():
        return str(int(default))
    return str(default)
