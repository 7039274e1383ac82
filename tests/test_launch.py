"""placegroup launch's process set-up: the scheduling policy (NOTE(sched-batch))."""
import io
import os
import sys

import pytest

from placegroup.tools.launch import launch, set_sched

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


def test_cpu_sets_share_the_cores_or_pair_trainer_i_with_pserver_i():
    from placegroup.tools.launch import cpu_sets

    assert cpu_sets(2, 2, [0, 1]) == {("TRAINER", 0): [0], ("TRAINER", 1): [1],
                                      ("PSERVER", 0): [0], ("PSERVER", 1): [1]}
    assert cpu_sets(1, 1, [4, 5, 6, 7]) == {("TRAINER", 0): [4, 5], ("PSERVER", 0): [6, 7]}
    assert cpu_sets(3, 0, [0, 1, 2, 3, 4]) == {("TRAINER", 0): [0], ("TRAINER", 1): [1], ("TRAINER", 2): [2]}
    assert cpu_sets(4, 1, [0, 1]) == {("TRAINER", 0): [0], ("TRAINER", 1): [1], ("TRAINER", 2): [0],
                                      ("TRAINER", 3): [1], ("PSERVER", 0): [0]}
    with pytest.raises(ValueError, match="no cores"):
        cpu_sets(1, 1, [])


def test_auto_binds_only_where_no_core_holds_two_trainers_or_two_pservers():
    from placegroup.tools.launch import bind_pays

    assert bind_pays(2, 2, 2) and bind_pays(1, 0, 1) and bind_pays(2, 2, 8)
    assert not bind_pays(4, 2, 2) and not bind_pays(2, 3, 2)


AFFINITY_SCRIPT = """
import os, threading
seen = []
t = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))
t.start(); t.join()
tag = os.environ["TRAINING_ROLE"] + os.environ.get("PADDLE_TRAINER_ID", os.environ.get("PADDLE_PSERVER_ID", ""))
print(tag, ",".join(map(str, sorted(os.sched_getaffinity(0)))), ",".join(map(str, seen[0])))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
@pytest.mark.parametrize("bind", ["auto", "spread", "none"])
def test_launch_binds_each_process_and_its_threads_to_its_cores(tmp_path, bind):
    from placegroup.tools.launch import bind_pays, cpu_sets

    script = tmp_path / "affinity.py"
    script.write_text(AFFINITY_SCRIPT)
    out = io.StringIO()
    assert launch(str(script), [], 2, 2, out=out, cpu_bind=bind) == 0, out.getvalue()
    got = {}
    for line in out.getvalue().splitlines():
        if "] " in line:
            tag, main, thread = line.split("] ", 1)[1].split()
            assert main == thread  # libzmq's IO thread, started later, inherits the binding
            got[tag] = [int(c) for c in main.split(",")]
    cores = sorted(os.sched_getaffinity(0))
    bound = bind == "spread" or (bind == "auto" and bind_pays(2, 2, len(cores)))
    want = {f"{role}{i}": cs for (role, i), cs in cpu_sets(2, 2, cores).items()} if bound \
        else {tag: cores for tag in ("TRAINER0", "TRAINER1", "PSERVER0", "PSERVER1")}
    assert got == want


def test_an_unknown_cpu_bind_is_refused():
    with pytest.raises(ValueError, match="cpu_bind must be one of auto, spread, none, got 'all'"):
        launch(sys.executable, [], 1, 1, cpu_bind="all")


def _link_policy_in_a_thread(monkeypatch, setting: str | None) -> int:
    """The policy of a fresh thread after it made a pserver's Link (its sockets) over TCP."""
    import threading

    import placegroup as fluid
    from placegroup.executor.link import Link
    from placegroup.ir.cluster import Cluster
    from placegroup.tools.launch import free_ports
    from tests.conftest import build_fit_a_line

    if setting is None:
        monkeypatch.delenv("PLACEGROUP_SCHED", raising=False)
    else:
        monkeypatch.setenv("PLACEGROUP_SCHED", setting)
    ep = f"127.0.0.1:{free_ports(1)[0]}"
    build_fit_a_line()
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id=0, pservers=ep, trainers=1)
    prog = t.get_program(ep, "pserver")
    cluster = Cluster.from_program(prog)
    seen = {}

    def make():  # sched_setscheduler(0) is the calling thread's: this one's, not pytest's
        seen["before"] = os.sched_getscheduler(0)
        Link(prog, cluster.find(prog.executor), cluster, peer_timeout=5).close()
        seen["after"] = os.sched_getscheduler(0)

    th = threading.Thread(target=make)
    th.start()
    th.join()
    assert seen["before"] == os.sched_getscheduler(0)
    return seen["after"]


@needs_batch
def test_an_executor_joining_a_cluster_puts_itself_under_sched_batch(monkeypatch):
    # started plainly (Kubernetes, Slurm, a shell), without the launcher
    assert _link_policy_in_a_thread(monkeypatch, None) == os.SCHED_BATCH


@needs_batch
def test_placegroup_sched_normal_leaves_an_executors_policy_alone(monkeypatch):
    assert _link_policy_in_a_thread(monkeypatch, "normal") == os.sched_getscheduler(0)


def test_an_unknown_placegroup_sched_is_a_config_error(monkeypatch):
    from placegroup import config
    from placegroup.errors import ConfigError

    monkeypatch.setenv("PLACEGROUP_SCHED", "fifo")
    with pytest.raises(ConfigError, match="PLACEGROUP_SCHED"):
        config.get("PLACEGROUP_SCHED")
