"""``fluid.install_check.run_check()``: train a tiny model for a step in one process, then in
two executors of one process (a trainer and a pserver over the in-process transport), and say
whether placegroup works here.

Example::

    python -c "import placegroup as fluid; fluid.install_check.run_check()"
"""
from __future__ import annotations

import threading

import numpy as np

from placegroup import layers
from placegroup.comm.loopback import LoopbackNetwork
from placegroup.executor import Executor, Scope
from placegroup.ir import unique_name
from placegroup.ir.framework import Program, program_guard
from placegroup.ir.places import CPUPlace
from placegroup.model.optimizer import SGD
from placegroup.transpiler import DistributeTranspiler

__all__ = ["run_check"]


def _build():
    main, startup = Program(), Program()
    with program_guard(main, startup), unique_name.guard():
        x = layers.data(name="x", shape=[2])
        loss = layers.mean(layers.fc(x, 1))
        SGD(0.01).minimize(loss)
    return main, startup, loss


def run_check() -> None:
    """Print a line saying placegroup runs here; raise the first error otherwise."""
    feed = {"x": np.ones((2, 2), "float32")}
    main, startup, loss = _build()
    exe = Executor(CPUPlace())
    scope = Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    print("placegroup runs a program in one process.")

    t = DistributeTranspiler()
    t.transpile(0, program=main, startup_program=startup, pservers="127.0.0.1:6174", trainers=1)
    net, errors = LoopbackNetwork(), []

    def run(role, endpoint):
        try:
            e, s = Executor(network=net), Scope()
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
