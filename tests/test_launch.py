"""placegroup launch's process set-up: the scheduling policy (NOTE(sched-batch))."""
import io
import os
import sys

import pytest

from placegroup.launch import launch, set_sched

POLICY_SCRIPT = """
import os, threading
seen = []
t = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
t.start(); t.join()
print(os.environ["TRAINING_ROLE"], os.sched_getscheduler(0), seen[0])
"""

needs_batch = pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="no SCHED_BATCH here")


def _policies(tmp_path, **kw) -> set:
    script = tmp_path / "policy.py"
    script.write_text(POLICY_SCRIPT)
    out = io.StringIO()
    assert launch(str(script), [], 1, 1, out=out, **kw) == 0, out.getvalue()
    lines = [line.split("] ", 1)[1].split() for line in out.getvalue().splitlines() if "] " in line]
    assert sorted(role for role, _, _ in lines) == ["PSERVER", "TRAINER"]
    return {(int(main), int(thread)) for _, main, thread in lines}


@needs_batch
def test_launch_runs_every_process_and_its_threads_under_sched_batch(tmp_path):
    assert _policies(tmp_path) == {(os.SCHED_BATCH, os.SCHED_BATCH)}


@needs_batch
def test_sched_normal_leaves_the_policy_alone(tmp_path):
    mine = os.sched_getscheduler(0)
    assert _policies(tmp_path, sched="normal") == {(mine, mine)}


def test_an_unknown_policy_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="sched must be one of batch, normal, got 'fifo'"):
        launch(sys.executable, [], 1, 1, sched="fifo")
    with pytest.raises(ValueError, match="got 'rt'"):
        set_sched(os.getpid(), "rt")


def test_set_sched_on_a_process_that_is_gone_says_false():
    import subprocess

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert set_sched(p.pid, "batch") is False
