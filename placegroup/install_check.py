"""``fluid.install_check.run_check()``: train a tiny model for a step in one process, then in
two executors of one process (a trainer and a pserver over the in-process transport), and say
whether placegroup works here.

Example::

    python -c "import placegroup as fluid; fluid.install_check.run_check()"
"""
from __future__ import annotations

import threading

import numpy as np

__all__ = ["run_check"]


def _build(fluid):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[2])
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        fluid.optimizer.SGD(0.01).minimize(loss)
    return main, startup, loss


def run_check() -> None:
    """Print a line saying placegroup runs here; raise the first error otherwise."""
    import placegroup as fluid
    from placegroup.comm.loopback import LoopbackNetwork

    feed = {"x": np.ones((2, 2), "float32")}
    main, startup, loss = _build(fluid)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    print("placegroup runs a program in one process.")

    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, startup_program=startup, pservers="127.0.0.1:6174", trainers=1)
    net, errors = LoopbackNetwork(), []

    def run(role, endpoint):
        try:
            e, s = fluid.Executor(network=net), fluid.Scope()
            e.run(t.get_startup_program(endpoint, role), scope=s)
            e.run(t.get_program(endpoint, role), feed=feed if role == "trainer" else None, scope=s)
            e.close()
        except BaseException as err:  # noqa: BLE001 - re-raised below
            errors.append(err)

    threads = [threading.Thread(target=run, args=("pserver", "127.0.0.1:6174")),
               threading.Thread(target=run, args=("trainer", None))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    if errors:
        raise errors[0]
    print("placegroup runs a trainer and a pserver. placegroup is installed successfully!")
