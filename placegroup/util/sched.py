"""The scheduling policy a cluster's processes run under (NOTE(sched-batch)).

``placegroup launch`` puts every process it starts under SCHED_BATCH (``--sched``), and an
executor that joins a cluster puts its own thread under it too (``PLACEGROUP_SCHED``), so a job
started plainly, as Kubernetes or Slurm start processes, runs as fast as under the launcher.
"""
from __future__ import annotations

import os

from placegroup.config import SCHED_POLICIES


def set_sched(pid: int, policy: str) -> bool:
    """Run process ``pid`` (0: the calling thread; in either case the threads it starts from
    now on) under ``policy``.

    NOTE(sched-batch): the processes of a step wake one another over sockets, a message at a
    time. Under the default policy (SCHED_OTHER) Linux puts a woken thread on its waker's core
    and lets it preempt the waker at once: a pserver that has answered trainer 0 loses its
    core to trainer 0 for a whole step before it can answer trainer 1, while the other core
    idles (seen with ``perf sched``: a 128 us send took 2.3 ms). SCHED_BATCH threads never
    preempt on wake-up (the tick still shares a busy core fairly), so the waker finishes what
    it was doing and a woken peer takes an idle core instead. On 2 cores and 2 trainers + 2
    pservers that is 0.30 -> 0.36 of the sparse floor (median of 10 runs each, bench/
    bench_sparse.py), and 10.0 -> 7.3 floor round trips a sync fit_a_line step started
    plainly (bench/bench_sync.py, medians of 5 alternations). It needs no privilege;
    ``normal`` leaves the policy alone. Returns False where the platform has no SCHED_BATCH
    (macOS, Windows) or forbids it.

    Raises:
        ValueError: ``policy`` is not one of SCHED_POLICIES.
    """
    if policy not in SCHED_POLICIES:
        raise ValueError(f"sched must be one of {', '.join(SCHED_POLICIES)}, got {policy!r}")
    if policy == "normal" or not hasattr(os, "SCHED_BATCH"):
        return False
    try:
        os.sched_setscheduler(pid, os.SCHED_BATCH, os.sched_param(0))
    except OSError:  # it already exited, or a sandbox forbids it
        return False
    return True
