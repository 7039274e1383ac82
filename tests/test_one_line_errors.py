"""A process that dies of an expected failure (placegroup.errors.EXPECTED: a bad environment,
a peer lost or never come, a peer's error) prints one line and exits non-zero, without a
traceback unless PLACEGROUP_DEBUG is set (placegroup/failures.py): for ``python train.py``,
``placegroup run`` and ``placegroup launch``. Any other exception keeps its traceback."""
import os
import subprocess
import sys
import textwrap

import pytest

from placegroup import failures
from placegroup.errors import ConfigError, OpError, PeerLost, RemoteError
from tests.conftest import TIME_FACTOR

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BAD_ROLE = "TRAINING_ROLE='CHEF': expected TRAINER or PSERVER"

SCRIPTS = {
    "config": f"""\
        import placegroup
        raise placegroup.errors.ConfigError({BAD_ROLE!r})
        """,
    "wrapped": """\
        import placegroup
        from placegroup.errors import OpError, PeerLost
        try:
            raise PeerLost("peer trainer:1 (trainer 1) is gone: its connection dropped 1.0s ago")
        except PeerLost as e:
            raise OpError("[trainer:0, step 3] While executing op #4 `allreduce`: ...\\n  more") from e
        """,
    "plain": """\
        import placegroup
        raise ValueError("a bug of the script, with its traceback")
        """,
    "lonely": """\
        import numpy as np
        import placegroup as fluid
        x = fluid.layers.data(name="x", shape=[13])
        avg = fluid.layers.mean(fluid.layers.fc(input=x, size=1))
        fluid.optimizer.SGD(learning_rate=0.01).minimize(avg)
        exe = fluid.Executor(fluid.CPUPlace())
        prog, _, _, _ = fluid.transpile_from_env(exe)
        exe.run(prog, feed={"x": np.ones((2, 13), "float32")}, fetch_list=[avg])
        """,
}


def run(tmp_path, name, *command, **env):
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(SCRIPTS[name]))
    env = {**os.environ, "PYTHONPATH": ROOT, **env}
    if "PLACEGROUP_DEBUG" not in env or not env["PLACEGROUP_DEBUG"]:
        env.pop("PLACEGROUP_DEBUG", None)
    return subprocess.run([*(command or [sys.executable]), str(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60 * TIME_FACTOR)


def test_a_config_error_is_one_line(tmp_path):
    p = run(tmp_path, "config")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == f"placegroup: ConfigError: {BAD_ROLE}\n"


def test_debug_brings_the_traceback_back(tmp_path):
    p = run(tmp_path, "config", PLACEGROUP_DEBUG="1")
    assert p.returncode == 1
    assert p.stderr.startswith("Traceback (most recent call last):")
    assert p.stderr.endswith(f"placegroup.errors.ConfigError: {BAD_ROLE}\n")


def test_a_wrapped_peer_lost_is_one_line_naming_the_wrapper(tmp_path):
    p = run(tmp_path, "wrapped")
    assert p.returncode == 1
    assert p.stderr == ("placegroup: PeerLost: peer trainer:1 (trainer 1) is gone: its connection dropped "
                        "1.0s ago (OpError: [trainer:0, step 3] While executing op #4 `allreduce`: ...)\n")


def test_other_exceptions_keep_their_traceback(tmp_path):
    p = run(tmp_path, "plain")
    assert p.returncode == 1 and "Traceback (most recent call last)" in p.stderr
    assert p.stderr.endswith("ValueError: a bug of the script, with its traceback\n")
    assert "placegroup:" not in p.stderr


def test_a_peer_that_never_came_is_one_line(tmp_path):
    p = run(tmp_path, "lonely", TRAINING_ROLE="TRAINER", PADDLE_INIT_PSERVERS="127.0.0.1:1",
            PADDLE_INIT_TRAINERS="1", PLACEGROUP_START_TIMEOUT="1")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith("placegroup: PeerLost: peer pserver@127.0.0.1:1 (pserver, at 127.0.0.1:1) "
                               "never came: no connection in ")
    assert p.stderr.count("\n") == 1


def test_under_placegroup_run(tmp_path):
    p = run(tmp_path, "config", sys.executable, "-m", "placegroup", "run")
    assert p.returncode == 1 and p.stderr == f"placegroup: ConfigError: {BAD_ROLE}\n"


def test_under_placegroup_launch(tmp_path):
    p = run(tmp_path, "config", sys.executable, "-m", "placegroup", "launch", "--trainers", "1",
            "--pservers", "0", "--cpu-bind", "none")
    assert p.returncode == 1 and "Traceback" not in p.stdout + p.stderr
    assert f"placegroup: ConfigError: {BAD_ROLE}" in p.stdout  # the trainer's line, with its prefix


# -- the hook itself, in this process ---------------------------------------------------------
@pytest.mark.parametrize("exc, line", [
    (ConfigError("PADDLE_TRAINER_ID='x': expected a whole number"),
     "placegroup: ConfigError: PADDLE_TRAINER_ID='x': expected a whole number"),
    (RemoteError("pserver@127.0.0.1:7164 failed:\n  PeerLost: ..."),
     "placegroup: RemoteError: pserver@127.0.0.1:7164 failed:; PeerLost: ..."),
    (OpError("op #1 failed"), None),
    (KeyError("w"), None),
])
def test_one_line(exc, line):
    assert failures.one_line(exc) == line


def test_the_hook_prints_one_line_and_defers_the_rest(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(failures, "_previous", failures._previous)  # restored after the test
    monkeypatch.setattr(sys, "excepthook", lambda *a: seen.append(a[0]))
    failures.install()
    failures.install()  # once only: the previous hook is not our own
    hook = sys.excepthook
    assert hook is failures._hook
    hook(PeerLost, PeerLost("peer x is gone"), None)
    assert capsys.readouterr().err == "placegroup: PeerLost: peer x is gone\n" and seen == []
    hook(ZeroDivisionError, ZeroDivisionError("1/0"), None)
    assert seen == [ZeroDivisionError]
