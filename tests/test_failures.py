"""Failure detection across real processes.

A cluster is started by hand (``cluster_envs``, as ``placegroup launch`` does) so one process
can be killed or stopped mid-run; every other process must exit within the peer timeout plus
a few seconds, naming the dead one, its role and endpoint, and what it was waiting for.
"""
import io
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from placegroup.tools.launch import cluster_envs, launch
from tests.conftest import TIME_FACTOR

SCRIPT = os.path.join(os.path.dirname(__file__), "dist", "train_model.py")
PEER_TIMEOUT = 3.0


def _start(tmp_path, trainers, pservers, *args, env=None):
    procs = {}
    for m in cluster_envs(trainers, pservers):
        full = {**os.environ, **m.env, "PLACEGROUP_PEER_TIMEOUT": str(PEER_TIMEOUT), **(env or {})}
        procs[m.role.lower(), m.index] = subprocess.Popen([sys.executable, SCRIPT, "--out", str(tmp_path), *args],
                                                          env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                          text=True)
    return procs


def _finish(procs, limit):
    """Wait for every process; ``{(role, index): (seconds it took, exit code, output)}``."""
    t0, out = time.monotonic(), {}
    for tag, p in procs.items():
        try:
            text, _ = p.communicate(timeout=max(0.1, limit - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
            out[tag] = (float("inf"), None, text)
            continue
        out[tag] = (time.monotonic() - t0, p.returncode, text)
    return out


def _kill_all(procs):
    for p in procs.values():
        if p.poll() is None:
            p.kill()
        p.wait()


def _training(procs, tmp_path):
    """Wait until the trainers are past their first steps (the script prints per step)."""
    deadline = time.monotonic() + 60 * TIME_FACTOR
    while time.monotonic() < deadline:
        if all(p.poll() is None for p in procs.values()) and (tmp_path / "trainer0.started").exists():
            time.sleep(1.0)
            return
        time.sleep(0.1)
    raise AssertionError("the cluster did not start training")


@pytest.mark.parametrize("victim, how", [(("pserver", 0), signal.SIGKILL), (("trainer", 1), signal.SIGKILL),
                                         (("pserver", 1), signal.SIGSTOP)],
                         ids=["kill-pserver-0", "kill-trainer-1", "stop-pserver-1"])
def test_every_process_stops_naming_the_dead_peer(tmp_path, victim, how):
    """Kill a pserver or a trainer, or stop one (silent but connected: only the heartbeats
    notice), mid-run: each other process exits non-zero within the peer timeout plus a few
    seconds, and its output names the dead peer."""
    procs = _start(tmp_path, 2, 2, "--steps", "20000", "--slow", "0.01", "--started-file")
    try:
        _training(procs, tmp_path)
        procs[victim].send_signal(how)
        others = {t: p for t, p in procs.items() if t != victim}
        done = _finish(others, PEER_TIMEOUT + 12 * TIME_FACTOR)
    finally:
        if how == signal.SIGSTOP:
            procs[victim].send_signal(signal.SIGCONT)
        _kill_all(procs)
    role, rank = victim
    name = f"trainer:{rank}" if role == "trainer" else "pserver@127.0.0.1:"
    for tag, (took, code, text) in done.items():
        assert code not in (0, None), f"{tag} did not fail ({took:.1f}s): {text[-1500:]}"
        assert took < PEER_TIMEOUT + 10 * TIME_FACTOR, f"{tag} took {took:.1f}s"
        assert f"peer {name}" in text and "is gone" in text, f"{tag}: {text[-1500:]}"
        if role == "trainer" and tag[0] == "pserver":  # what it was waiting for, from whom
            assert f"from {name}" in text and "was waiting in op #" in text, text[-1500:]


def test_a_slow_peer_is_no_failure(tmp_path):
    """A trainer slower per step than the peer timeout is alive (libzmq answers heartbeats
    while Python computes): the run completes."""
    procs = _start(tmp_path, 2, 1, "--steps", "3", "--slow", "1.5", env={"PLACEGROUP_PEER_TIMEOUT": "1"})
    try:
        done = _finish(procs, 90 * TIME_FACTOR)
    finally:
        _kill_all(procs)
    for tag, (_, code, text) in done.items():
        assert code == 0, f"{tag}: {text[-2000:]}"


def test_launch_names_the_process_that_failed_first(tmp_path):
    """``placegroup launch``: the first failure is reported as such, the rest are stopped,
    and the others' failures (caused by it) are not mistaken for it."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os, sys, time\n"
                   "if os.environ['TRAINING_ROLE'] == 'PSERVER':\n"
                   "    time.sleep(1.0); sys.exit(5)\n"
                   "time.sleep(1.5); sys.exit(7)\n")
    out = io.StringIO()
    code = launch(str(bad), [], 2, 1, grace=5, out=out)
    text = out.getvalue()
    assert code == 5, text
    assert re.search(r"^\[launch\] pserver@127\.0\.0\.1:\d+ \(PSERVER, pid \d+\) failed first \(exit code 5\)",
                     text, re.M), text
