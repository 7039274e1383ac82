"""``transpile_from_env``: the boilerplate of Fluid's distributed training scripts, once.

Every script that runs both in one process and as one process of a cluster reads the same
environment (docs/launch.md), transpiles, runs its startup program, and, on a pserver, serves.
This does that and says what this process is.

Example::

    exe = fluid.Executor(fluid.CPUPlace())
    prog, role, tid, n = fluid.transpile_from_env(exe)
    if role == "PSERVER":
        return                      # it has served every trainer
    for step, batch in enumerate(batches):
        lo, hi = tid * len(batch) // n, (tid + 1) * len(batch) // n
        exe.run(prog, feed=feed_of(batch[lo:hi]), fetch_list=[loss])
"""
from __future__ import annotations

from typing import Any

from placegroup import config
from placegroup.ir.framework import default_main_program, default_startup_program
from placegroup.transpiler import DistributeTranspiler


def transpile_from_env(exe, main=None, startup=None, **transpile_kw: Any) -> tuple:
    """Transpile for the cluster the environment names, if any, and run the startup program.

    Without ``TRAINING_ROLE`` this is one process: ``(main, None, 0, 1)``. Otherwise the
    program of this process's role and endpoint (``POD_IP``:``PADDLE_INIT_PORT``), with the
    pservers of ``PADDLE_INIT_PSERVERS`` (empty: none, the trainers form the group). The trainers
    are counted by ``PADDLE_INIT_TRAINERS``, and the transpiler takes their endpoints from
    ``PADDLE_TRAINER_ENDPOINTS`` where they need them (no pservers, model-parallel layers); a job
    that sets only ``PADDLE_TRAINER_ENDPOINTS`` (Fleet's collective jobs) is named by it. A
    pserver ignores ``PADDLE_TRAINER_ID``, serves here until every trainer is done, then closes
    ``exe``.

    Returns:
        ``(program, role, trainer_id, trainer_num)``; role is ``"TRAINER"``, ``"PSERVER"`` or None.

    Raises:
        ConfigError: the environment names no job this process can be part of (a bad
            ``TRAINING_ROLE``; a trainer with neither pservers nor trainer endpoints; counts
            that disagree; this pserver's endpoint not among the pservers); the message names
            the variables.
    """
    main = main if main is not None else default_main_program()
    startup = startup if startup is not None else default_startup_program()
    role = config.get("TRAINING_ROLE")
    if role is None:
        exe.run(startup)
        return main, None, 0, 1
    transpile_kw.pop("trainer_endpoints", None)  # the transpiler finds out whether it needs them
    by_endpoint = config.is_set("PADDLE_TRAINER_ENDPOINTS") and not config.is_set("PADDLE_INIT_TRAINERS")
    trainers = config.get("PADDLE_TRAINER_ENDPOINTS") if by_endpoint else config.get("PADDLE_INIT_TRAINERS")
    endpoint = config.get("POD_IP") + ":" + config.get("PADDLE_INIT_PORT")
    t = DistributeTranspiler()
    t.transpile(pservers=config.get("PADDLE_INIT_PSERVERS"), trainers=trainers, program=main,
                startup_program=startup, **transpile_kw)
    prog = t.get_program(endpoint, role)
    exe.run(t.get_startup_program(endpoint, role))
    if role == "PSERVER":
        exe.run(prog)
        exe.close()
    return prog, role, t.trainer_id, t.trainer_num
