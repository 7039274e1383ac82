"""Shared fixtures: every test builds its programs in fresh default programs, names and scope."""
import os

import pytest

import placegroup as fluid

# One factor scales every timeout in the distributed tests (STYLE.md rule 13).
TIME_FACTOR = float(os.environ.get("PLACEGROUP_TEST_TIME_FACTOR", "1"))
# A wait on a live peer has no limit in production; in the tests (and the
# processes they start) a bug that deadlocks fails after this many seconds instead of hanging.
os.environ.setdefault("PLACEGROUP_WAIT_TIMEOUT", str(120 * TIME_FACTOR))


@pytest.fixture(autouse=True)
def fresh_programs():
    """Fresh main/startup programs, unique names and global scope for each test."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard(), \
            fluid.scope_guard(fluid.Scope()):
        yield main, startup


def build_fit_a_line(lr: float = 0.01):
    """The fit_a_line model (x -> fc(1) -> square_error_cost -> mean, SGD) in the default programs;
    returns the mean cost."""
    x = fluid.layers.data(name="x", shape=[13])
    y = fluid.layers.data(name="y", shape=[1])
    pred = fluid.layers.fc(input=x, size=1)
    avg = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    fluid.optimizer.SGD(learning_rate=lr).minimize(avg)
    return avg
