"""Shared fixtures: every test builds its programs in fresh default programs, names and scope."""
import os

import pytest

import placegroup as fluid
from placegroup.ir.framework import note_transpiled_job

# One factor scales every timeout in the distributed tests (STYLE.md rule 13).
TIME_FACTOR = float(os.environ.get("PLACEGROUP_TEST_TIME_FACTOR", "1"))
# A wait on a live peer has no limit in production; in the tests (and the
# processes they start) a bug that deadlocks fails after this many seconds instead of hanging.
os.environ.setdefault("PLACEGROUP_WAIT_TIMEOUT", str(120 * TIME_FACTOR))


# The launch contract's variables: what placegroup launch sets for each process (Paddle's and
# Fleet's names); tests that read the environment start without any of them.
LAUNCH_VARS = ("TRAINING_ROLE", "PADDLE_INIT_PSERVERS", "PADDLE_INIT_TRAINERS", "PADDLE_TRAINER_ENDPOINTS",
               "PADDLE_TRAINER_ID", "POD_IP", "PADDLE_INIT_PORT", "PADDLE_PORT", "PADDLE_CURRENT_ENDPOINT",
               "PADDLE_PSERVER_ID", "PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_TRAINERS_NUM")


@pytest.fixture
def launch_env(monkeypatch):
    """No launch variable from outside; returns a setter for the test's own."""
    for name in LAUNCH_VARS:
        monkeypatch.delenv(name, raising=False)

    def set_(**values):
        for k, v in values.items():
            monkeypatch.setenv(k, v)
    return set_


@pytest.fixture(scope="session")
def fluid18_python() -> str:
    """The python with PaddlePaddle Fluid 1.8.5 that ``PLACEGROUP_PADDLE18_PYTHON`` names, for the
    comparisons with Fluid itself (mark them ``paddle``; tests/paddle_ref/reference.py runs it);
    skips the test when it is unset.
    ``eval "$(python -m tests.fluid18_env)"`` makes one and sets it."""
    python = os.environ.get("PLACEGROUP_PADDLE18_PYTHON")
    if not python:
        pytest.skip("PLACEGROUP_PADDLE18_PYTHON is not set (a python with paddlepaddle==1.8.5: "
                    "eval \"$(python -m tests.fluid18_env)\" makes one)")
    return python


@pytest.fixture(scope="session")
def paddle26_python() -> str:
    """The python with PaddlePaddle 2.6.2 that ``PLACEGROUP_PADDLE_PYTHON`` names, for the
    comparisons with Paddle 2.6 (mark them ``paddle``; tests/paddle_ref/reference.py runs it);
    skips the test when it is unset. A local reference only: ``python3.11 -m venv pd26 &&
    pd26/bin/pip install paddlepaddle==2.6.2 "protobuf<5"`` makes one."""
    python = os.environ.get("PLACEGROUP_PADDLE_PYTHON")
    if not python:
        pytest.skip("PLACEGROUP_PADDLE_PYTHON is not set (a python with paddlepaddle==2.6.2; a local reference only)")
    return python


@pytest.fixture(autouse=True)
def fresh_programs():
    """Fresh main/startup programs, unique names and global scope for each test."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard(), \
            fluid.scope_guard(fluid.Scope()):
        yield main, startup
    # a test that transpiled for a job with pservers leaves the process a member of that job
    note_transpiled_job(None)


def build_fit_a_line(lr: float = 0.01):
    """The fit_a_line model (x -> fc(1) -> square_error_cost -> mean, SGD) in the default programs;
    returns the mean cost."""
    x = fluid.layers.data(name="x", shape=[13])
    y = fluid.layers.data(name="y", shape=[1])
    pred = fluid.layers.fc(input=x, size=1)
    avg = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    fluid.optimizer.SGD(learning_rate=lr).minimize(avg)
    return avg
