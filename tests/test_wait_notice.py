"""While an executor waits for a peer that has not connected yet, it says so every
PLACEGROUP_WAIT_NOTICE_EVERY seconds, naming the peer and the time left before
PLACEGROUP_START_TIMEOUT, then fails with one line (comm/session.py, docs/failures.md).
Real processes whose peers never come."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

from placegroup.tools.launch import free_ports
from tests.conftest import TIME_FACTOR

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LONELY = textwrap.dedent("""\
    import numpy as np
    import placegroup as fluid

    x = fluid.layers.data(name="x", shape=[13])
    y = fluid.layers.data(name="y", shape=[1])
    avg = fluid.layers.mean(fluid.layers.square_error_cost(input=fluid.layers.fc(input=x, size=1), label=y))
    fluid.optimizer.SGD(learning_rate=0.01).minimize(avg)
    exe = fluid.Executor(fluid.CPUPlace())
    prog, role, _, _ = fluid.transpile_from_env(exe)
    if role == "TRAINER":
        exe.run(prog, feed={"x": np.ones((2, 13), "float32"), "y": np.ones((2, 1), "float32")}, fetch_list=[avg])
""")


def run_alone(tmp_path, role: str, **env) -> subprocess.CompletedProcess:
    """One process of a 1-pserver job whose other processes never start."""
    script = tmp_path / "lonely.py"
    script.write_text(LONELY)
    port, = free_ports(1)
    env = {**os.environ, "PYTHONPATH": ROOT, "TRAINING_ROLE": role, "PADDLE_INIT_TRAINERS": "2",
           "PADDLE_INIT_PSERVERS": f"127.0.0.1:{port}", "PADDLE_INIT_PORT": str(port),
           "PLACEGROUP_START_TIMEOUT": "3.5", "PLACEGROUP_WAIT_NOTICE_EVERY": "1", **env}
    env.pop("PLACEGROUP_DEBUG", None)
    return subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60 * TIME_FACTOR)


@pytest.mark.parametrize("role, missing", [
    ("TRAINER", r"pserver@127\.0\.0\.1:\d+ \(pserver, at 127\.0\.0\.1:\d+\)"),
    ("PSERVER", r"trainer:0 \(trainer 0\), trainer:1 \(trainer 1\)"),
])
def test_a_wait_for_a_peer_that_never_comes_says_so_then_fails(tmp_path, role, missing):
    p = run_alone(tmp_path, role)
    lines = p.stderr.splitlines()
    notices = [ln for ln in lines if "still waiting for" in ln]
    assert len(notices) >= 2, p.stderr
    for i, ln in enumerate(notices):
        m = re.fullmatch(rf"\S+: still waiting for {missing}, not connected in (\d+)s; giving up in (\d+)s "
                         r"\(PLACEGROUP_START_TIMEOUT=3\.5s\)", ln)
        assert m, ln
        assert int(m[1]) + int(m[2]) in (3, 4)  # seconds so far + seconds left: the timeout, rounded
    assert [int(re.search(r"in (\d+)s;", n)[1]) for n in notices] == sorted(
        int(re.search(r"in (\d+)s;", n)[1]) for n in notices)
    assert p.returncode == 1
    assert re.fullmatch(r"placegroup: PeerLost: peer .* never came: no connection in \d+s "
                        r"\(PLACEGROUP_START_TIMEOUT=3\.5s; is it running\?\); executor .* was waiting .*", lines[-1])
    assert lines[:-1] == notices and "Traceback" not in p.stderr  # the notices, then the one line


def test_no_notice_when_turned_off(tmp_path):
    p = run_alone(tmp_path, "TRAINER", PLACEGROUP_WAIT_NOTICE_EVERY="0", PLACEGROUP_START_TIMEOUT="1.5")
    assert p.returncode == 1 and "still waiting" not in p.stderr
    assert p.stderr.count("\n") == 1 and "PeerLost: peer pserver@" in p.stderr
