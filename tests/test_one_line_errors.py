"""A process that dies of a user error (placegroup.errors.UserError, NOTE(user-errors): a bad
environment, feed, program or file, a Fluid name placegroup lacks, a peer lost or never come,
a peer's error) prints one line that ends with the user's own file:line and exits non-zero,
without a traceback unless PLACEGROUP_DEBUG is set (placegroup/util/failures.py): for ``python
train.py``, ``placegroup run`` and ``placegroup launch``. Any other exception keeps its traceback."""
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from placegroup.util import failures
from placegroup.errors import ConfigError, OpError, OutOfRange, PeerLost, RemoteError
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
FIT = """\
    import numpy as np
    import placegroup as fluid
    x = fluid.data(name="x", shape=[-1, 13], dtype="float32")
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(input=ids, size=[10, 4])
    avg = fluid.layers.mean(fluid.layers.fc(input=x, size=1)) + fluid.layers.mean(emb)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    """
GOOD_X, GOOD_IDS = 'np.ones((2, 13), "float32")', 'np.array([[1], [2]], "int64")'


def _feed(x=GOOD_X, ids=GOOD_IDS):
    return FIT + f'exe.run(feed={{"x": {x}, "ids": {ids}}}, fetch_list=[avg])\n'


# NOTE(user-errors) in placegroup/errors.py: each user error, a script that causes it, how it is
# run (plain python, or `placegroup run` for `import paddle`), its environment, the start of
# its one line, and the script's line that the one line ends with
CASES = {
    "feed_shape": (_feed(x='np.ones((2, 12), "float32")'), "python", {},
                   "ProgramError: feed 'x' has shape [2, 12], but the var is declared [-1, 13] by fluid.data", 9),
    "feed_dtype": (_feed(ids='np.array([[1.5], [2.0]])'), "python", {}, "ProgramError: feed 'ids': ", 9),
    "missing_feed": (FIT + 'exe.run(feed={"x": np.ones((2, 13), "float32")}, fetch_list=[avg])\n', "python", {},
                     "MissingInput: While executing op #", 9),
    "id_out_of_range": (_feed(ids='np.array([[3], [12]], "int64")'), "python", {},
                        "OutOfRange: lookup_table: id 12 is out of range for a table of 10 rows (valid ids are "
                        "0..9): check the ids fed, or give the table more rows (OpError: While executing op #", 9),
    "not_implemented": ("import placegroup as fluid\nfluid.layers.roi_pool()\n", "python", {},
                        "NotImplementedInPlacegroup: placegroup does not implement fluid.layers.roi_pool: "
                        "region-of-interest pooling of detection models (detection; docs/fluid_compat.md)", 2),
    "missing_module": ("import paddle.fluid as fluid\nimport paddle.fluid.contrib.slim\n", "run", {},
                       "ModuleNotInPlacegroup: placegroup does not implement paddle.fluid.contrib.slim: model "
                       "compression (contrib; docs/fluid_compat.md)", 2),
    "fleet_utils": ("import paddle.fluid.incubate.fleet.utils.fleet_util as fu\n", "run", {},
                    "ModuleNotInPlacegroup: placegroup does not implement paddle.fluid.incubate.fleet.utils."
                    "fleet_util: PSLib's fleet utilities", 1),
    "dataset_file": ("import paddle\n\nparams = paddle.dataset.imdb.word_dict()\n", "run",
                     {"PLACEGROUP_DATA_HOME": "", "HOME": "{tmp}"},
                     "DatasetFileNotFound: dataset imdb: the aclImdb reviews file 'imdb%2FaclImdb_v1.tar.gz' "
                     "not found. Looked in: - {tmp}/.cache/paddle/dataset/imdb/", 3),
    "pservers_with_spaces": (SCRIPTS["lonely"], "python",
                             {"TRAINING_ROLE": "TRAINER", "PADDLE_INIT_PSERVERS": "127.0.0.1:7164 127.0.0.1:7165"},
                             "ConfigError: PADDLE_INIT_PSERVERS: '127.0.0.1:7164 127.0.0.1:7165' is several "
                             "endpoints: use commas between them, as in '127.0.0.1:7164,127.0.0.1:7165'", 7),
    "debug_yes": ("\nimport placegroup\n", "python", {"PLACEGROUP_DEBUG": "yes"},
                  "ConfigError: PLACEGROUP_DEBUG='yes': expected a level 0-3", 2),
}


def run(tmp_path, name, *command, text=None, **env):
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(SCRIPTS[name] if text is None else text))
    env = {**os.environ, "PYTHONPATH": ROOT, **env}
    if "PLACEGROUP_DEBUG" not in env or not env["PLACEGROUP_DEBUG"]:
        env.pop("PLACEGROUP_DEBUG", None)
    return subprocess.run([*(command or [sys.executable]), str(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60 * TIME_FACTOR)


def test_a_config_error_is_one_line(tmp_path):
    p = run(tmp_path, "config")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == f"placegroup: ConfigError: {BAD_ROLE} (config.py:2)\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_user_error_is_one_line_ending_with_the_users_line(tmp_path, name):
    text, how, env, start, line = CASES[name]
    env = {k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()}
    command = (sys.executable, "-m", "placegroup", "run") if how == "run" else ()
    p = run(tmp_path, name, *command, text=text, **env)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("placegroup: " + start.replace("{tmp}", str(tmp_path))), p.stderr
    assert p.stderr.endswith(f" ({name}.py:{line})\n") and p.stderr.count("\n") == 1, p.stderr


def test_a_port_in_use_names_the_endpoint_its_variables_and_who_holds_it(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        p = run(tmp_path, "lonely", TRAINING_ROLE="PSERVER", PADDLE_INIT_PSERVERS=f"127.0.0.1:{port}",
                PADDLE_INIT_TRAINERS="1", POD_IP="127.0.0.1", PADDLE_INIT_PORT=str(port))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith(f"placegroup: BindError: pserver@127.0.0.1:{port} cannot listen on 127.0.0.1:{port}: "
                               f"the port is in use (by pid {os.getpid()}: "), p.stderr
    assert (f"; the endpoint comes from POD_IP=127.0.0.1 and PADDLE_INIT_PORT={port} and PADDLE_INIT_PSERVERS "
            f"(which lists it): stop that process, or give this one a free port (lonely.py:") in p.stderr, p.stderr
    assert p.stderr.count("\n") == 1


def test_debug_brings_the_traceback_back(tmp_path):
    p = run(tmp_path, "config", PLACEGROUP_DEBUG="1")
    assert p.returncode == 1
    assert p.stderr.startswith("Traceback (most recent call last):")
    assert p.stderr.endswith(f"placegroup.errors.ConfigError: {BAD_ROLE}\n")


def test_a_wrapped_peer_lost_is_one_line_naming_the_wrapper(tmp_path):
    p = run(tmp_path, "wrapped")
    assert p.returncode == 1
    assert p.stderr == ("placegroup: PeerLost: peer trainer:1 (trainer 1) is gone: its connection dropped "
                        "1.0s ago (OpError: [trainer:0, step 3] While executing op #4 `allreduce`: ...) "
                        "(wrapped.py:6)\n")


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
    assert p.stderr.endswith(" (lonely.py:8)\n") and p.stderr.count("\n") == 1


def test_under_placegroup_run(tmp_path):
    p = run(tmp_path, "config", sys.executable, "-m", "placegroup", "run")
    assert p.returncode == 1 and p.stderr == f"placegroup: ConfigError: {BAD_ROLE} (config.py:2)\n"


def test_under_placegroup_launch(tmp_path):
    p = run(tmp_path, "config", sys.executable, "-m", "placegroup", "launch", "--trainers", "1",
            "--pservers", "0", "--cpu-bind", "none")
    assert p.returncode == 1 and "Traceback" not in p.stdout + p.stderr
    assert f"placegroup: ConfigError: {BAD_ROLE}" in p.stdout  # the trainer's line, with its prefix


# -- the hook itself, in this process ---------------------------------------------------------
def _raised_from(exc, cause):
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize("exc, line", [
    (ConfigError("PADDLE_TRAINER_ID='x': expected a whole number"),
     "placegroup: ConfigError: PADDLE_TRAINER_ID='x': expected a whole number"),
    (RemoteError("pserver@127.0.0.1:7164 failed:\n  PeerLost: ..."),
     "placegroup: RemoteError: pserver@127.0.0.1:7164 failed: PeerLost: ..."),
    (OpError("op #1 failed"), None),  # a kernel's bug keeps its traceback ...
    (_raised_from(OpError("op #1 `lookup_table` failed\n  more"), OutOfRange("id 12 is out of range")),
     "placegroup: OutOfRange: id 12 is out of range (OpError: op #1 `lookup_table` failed)"),  # ... a user's data not
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
