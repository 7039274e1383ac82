"""A cluster on a real network, not only loopback.

Each test builds its own little network (tests/netns.py): a bridge in a namespace of its own
and one namespace per process, joined to it by a veth pair, with addresses from 10.77.0.0/24
that exist only inside those namespaces. Pservers are hosts 0 and 1, trainers hosts 2 and 3;
each process is started with ``ip netns exec`` and binds its own address (POD_IP), so every
message crosses a veth, the bridge and another veth. Pulling one host's cable (its bridge port
down) makes a partition: one shorter than PLACEGROUP_PEER_TIMEOUT must heal without a trace in
the results; a longer one must end every process, naming the lost peer.

The tests skip where namespaces cannot be made (not root, no ``ip``, not permitted).
"""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import TIME_FACTOR
from tests.netns import SUBNET, Network, Unavailable

SCRIPT = os.path.join(os.path.dirname(__file__), "dist", "train_model.py")
PORT = 6174           # every process has a namespace, so an address, of its own: one port for all
PEER_TIMEOUT = 6.0
PSERVERS, TRAINERS = (0, 1), (2, 3)  # hosts

pytestmark = pytest.mark.slow


@pytest.fixture
def net():
    try:
        with Network(len(PSERVERS) + len(TRAINERS)) as n:
            yield n
    except Unavailable as e:
        pytest.skip(str(e))


def _envs(net: Network) -> dict[int, dict]:
    """host -> the environment of its process, as ``placegroup launch`` would set it."""
    ps = [f"{net.ips[h]}:{PORT}" for h in PSERVERS]
    tr = [f"{net.ips[h]}:{PORT}" for h in TRAINERS]
    common = {"PADDLE_INIT_PSERVERS": ",".join(ps), "PADDLE_INIT_TRAINERS": str(len(tr)),
              "PADDLE_PSERVERS_IP_PORT_LIST": ",".join(ps), "PADDLE_TRAINERS_NUM": str(len(tr)),
              "PADDLE_TRAINER_ENDPOINTS": ",".join(tr), "PADDLE_INIT_PORT": str(PORT),
              "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1", "PLACEGROUP_PEER_TIMEOUT": str(PEER_TIMEOUT)}
    out = {}
    for i, h in enumerate(PSERVERS):
        out[h] = {**common, "TRAINING_ROLE": "PSERVER", "POD_IP": net.ips[h], "PADDLE_PSERVER_ID": str(i),
                  "PADDLE_CURRENT_ENDPOINT": ps[i]}
    for i, h in enumerate(TRAINERS):
        out[h] = {**common, "TRAINING_ROLE": "TRAINER", "POD_IP": net.ips[h], "PADDLE_TRAINER_ID": str(i),
                  "PADDLE_CURRENT_ENDPOINT": tr[i]}
    return out


def _start(net: Network, tmp_path, *args) -> dict[int, subprocess.Popen]:
    """One process per host; each one's output goes to ``tmp_path/host<h>.log``."""
    procs = {}
    for h, role_env in _envs(net).items():
        with open(tmp_path / f"host{h}.log", "w") as log:
            procs[h] = net.popen(h, [sys.executable, SCRIPT, "--out", str(tmp_path), *args],
                                 env={**os.environ, **role_env}, stdout=log, stderr=subprocess.STDOUT)
    return procs


def _ended(procs: dict, limit: float) -> dict[int, float]:
    """Wait up to ``limit`` seconds; host -> when (time.monotonic()) its process ended
    (inf: it had not)."""
    ends, deadline = {}, time.monotonic() + limit
    while len(ends) < len(procs) and time.monotonic() < deadline:
        for h, p in procs.items():
            if h not in ends and p.poll() is not None:
                ends[h] = time.monotonic()
        time.sleep(0.05)
    return {h: ends.get(h, float("inf")) for h in procs}


def _log(tmp_path, h: int) -> str:
    return (tmp_path / f"host{h}.log").read_text()


def _succeeded(procs, tmp_path, limit: float) -> None:
    ends = _ended(procs, limit)
    for h, p in procs.items():
        assert ends[h] < float("inf"), f"host {h} still runs after {limit:.0f}s: {_log(tmp_path, h)[-2000:]}"
        assert p.returncode == 0, f"host {h} failed ({p.returncode}): {_log(tmp_path, h)[-2000:]}"


def _wait_training(procs, tmp_path) -> None:
    """Until trainer 0 is past its first steps (``--started-file``)."""
    deadline = time.monotonic() + 60 * TIME_FACTOR
    while time.monotonic() < deadline:
        assert all(p.poll() is None for p in procs.values()), \
            {h: _log(tmp_path, h)[-1500:] for h, p in procs.items() if p.poll() is not None}
        if (tmp_path / "trainer0.started").exists():
            return
        time.sleep(0.05)
    raise AssertionError("the cluster did not start training")


def _equals_one_process(tmp_path, *args) -> None:
    """Per-step losses (mean over trainers) and every final parameter equal those of one
    process trained on the whole batch (run here, outside the namespaces)."""
    local = tmp_path / "local"
    local.mkdir()
    subprocess.run([sys.executable, SCRIPT, "--out", str(local), *args], check=True, timeout=120 * TIME_FACTOR,
                   env={k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"})
    ref = np.load(local / "local0.npz")
    runs = [np.load(tmp_path / f"trainer{i}.npz") for i in range(len(TRAINERS))]
    np.testing.assert_allclose(np.mean([r["losses"] for r in runs], axis=0), ref["losses"], rtol=1e-5, atol=1e-6)
    for name in ref.files:
        if name != "losses":
            for r in runs:
                np.testing.assert_allclose(r[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_two_trainers_two_pservers_over_a_bridge_equal_one_process(net, tmp_path):
    """2 trainers + 2 pservers, each in its own namespace at its own address, train in sync
    mode; the result equals one process."""
    args = ("--model", "linear", "--optimizer", "sgd", "--steps", "8")
    procs = _start(net, tmp_path, *args)
    _succeeded(procs, tmp_path, 120 * TIME_FACTOR)
    for h in TRAINERS:  # the trainers reached the pservers at their namespace addresses
        assert f"is held by pserver@{net.ips[PSERVERS[0]]}:{PORT}" in _log(tmp_path, h) or \
               f"is held by pserver@{net.ips[PSERVERS[1]]}:{PORT}" in _log(tmp_path, h), _log(tmp_path, h)
    _equals_one_process(tmp_path, *args)


@pytest.mark.parametrize("cut_s", [2.0, 4.5])
def test_a_partition_shorter_than_the_peer_timeout_heals(net, tmp_path, cut_s):
    """Pserver 0's cable is pulled mid-run for 2 s, and for 4.5 s (PLACEGROUP_PEER_TIMEOUT is
    6 s): the connections survive (TCP resends what was lost, at most a sixth of the timeout
    apart, NOTE(resend-cap) in comm/transport.py; the heartbeats wait), and the job finishes
    with the results of one process."""
    args = ("--model", "linear", "--optimizer", "sgd", "--steps", "40", "--slow", "0.15", "--started-file")
    procs = _start(net, tmp_path, *args)
    victim = PSERVERS[0]
    _wait_training(procs, tmp_path)
    net.cut(victim)
    try:
        assert not net.carrier(victim)
        time.sleep(cut_s)
    finally:
        net.heal(victim)
    running = {h for h, p in procs.items() if p.poll() is None}
    assert running == set(procs), "the partition was not mid-run: " + \
        str({h: _log(tmp_path, h)[-1500:] for h in set(procs) - running})
    _succeeded(procs, tmp_path, 120 * TIME_FACTOR)
    _equals_one_process(tmp_path, *args)


def test_a_partition_longer_than_the_peer_timeout_ends_every_process_naming_the_lost_peer(net, tmp_path):
    """Trainer 1's cable is pulled for good: within PLACEGROUP_PEER_TIMEOUT + 5 s every process
    ends by itself, non-zero. Those on the far side name trainer 1 as the lost peer; trainer 1
    names the pserver it lost."""
    procs = _start(net, tmp_path, "--steps", "3000", "--slow", "0.02", "--started-file")
    victim = TRAINERS[1]
    _wait_training(procs, tmp_path)
    time.sleep(0.5)
    net.cut(victim)
    cut_at = time.monotonic()
    ends = _ended(procs, PEER_TIMEOUT + 20 * TIME_FACTOR)
    for h, p in procs.items():
        took, text = ends[h] - cut_at, _log(tmp_path, h)
        assert took < float("inf"), f"host {h} still runs {PEER_TIMEOUT + 20 * TIME_FACTOR:.0f}s after the cut"
        assert p.returncode != 0, f"host {h} did not fail: {text[-1500:]}"
        assert took < PEER_TIMEOUT + 5 * TIME_FACTOR, f"host {h} ended {took:.1f}s after the cut: {text[-1500:]}"
        lost = f"pserver@{SUBNET}." if h == victim else "trainer:1"
        assert f"peer {lost}" in text and "is gone" in text, f"host {h}: {text[-1500:]}"
