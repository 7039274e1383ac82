"""Fluid 1.8's ``fluid.communicator.Communicator``: a trainer's link to its pservers, as a
handle that fleet (or a script) starts before training and stops after.

In Fluid it wraps a C++ communicator whose threads merge and send gradients and receive
parameters in the background (async, half-async, GEO; or sync), and ``stop()`` ends them.

NOTE(communicator-handle): in placegroup that work is the executor's link to its peers
(executor/link.py, NOTE(one-link-per-process) in executor/executor.py), one per process and
job member, opened at the first ``exe.run`` of the trainer program, because it runs on the
executor's place (its array module) and network; and the mode is the transpiled program's
(``DistributeTranspilerConfig.sync_mode``, ``program.cluster.sync_mode``), not the
communicator's. So:

* ``Communicator(program, mode)`` checks that ``program`` is a transpiled trainer program
  whose mode is ``mode`` (HALF_ASYNC and GEO run as async here, docs/distributed.md);
* ``start()`` marks the handle running; the link opens at the next ``exe.run`` (there is no
  background thread to start before it);
* ``stop()`` does what stopping Fluid's communicator and ``exe.close()`` do together: every
  distributed executor of the process takes its last parameters, sends what it posted, tells
  the pservers it is done and closes its sockets (``close_distributed``, as fleet's
  ``stop_worker``). Run no distributed program after it.

Example::

    comm = fluid.communicator.Communicator(trainer_prog, DistributedMode.ASYNC)
    comm.start()
    for batch in reader():
        exe.run(trainer_prog, feed=batch)
    comm.stop()

Thread-safety: start and stop it from one thread.
"""
from __future__ import annotations

from placegroup.errors import ConfigError
from placegroup.executor.executor import close_distributed
from placegroup.ir.framework import Program
from placegroup.ir.place_group import ExecutorRole
from placegroup.transpiler.config import DistributedMode

__all__ = ["Communicator"]

_MODES = {DistributedMode.SYNC: "SYNC", DistributedMode.ASYNC: "ASYNC", DistributedMode.HALF_ASYNC: "HALF_ASYNC",
          DistributedMode.GEO: "GEO"}


class Communicator:
    """The handle of a trainer's communication with its pservers (NOTE(communicator-handle)).

    Args:
        program: the trainer's program made by the DistributeTranspiler (or fleet).
        mode: a ``DistributedMode``: SYNC for a program transpiled with ``sync_mode=True``;
            ASYNC, HALF_ASYNC or GEO for one with ``sync_mode=False`` (all run async here).
        kwargs: Fluid's mode settings (``pserver_endpoints`` and ``trainer_id`` for SYNC,
            ``push_vars``/``trainers``/``push_nums`` for GEO): kept; the program already holds them.
        envs: Fluid's communicator flags (``communicator_*``): kept, inert.

    Attributes:
        mode: the mode's name, ``"SYNC"``, ``"ASYNC"``, ``"HALF_ASYNC"`` or ``"GEO"``.

    Raises:
        TypeError: ``program`` is not a Program.
        ConfigError: it is no transpiled trainer program, ``mode`` is unknown, or ``mode``
            disagrees with the program's sync mode.
    """

    def __init__(self, program, mode, kwargs=None, envs=None) -> None:
        if not isinstance(program, Program):
            raise TypeError(f"Communicator: program must be a fluid.Program, got {type(program).__name__}")
        if mode not in _MODES:
            raise ConfigError(f"Communicator: mode {mode!r} is not a DistributedMode (SYNC=0, ASYNC=1, "
                              f"HALF_ASYNC=2, GEO=3)")
        executor = program.executor
        if program.cluster is None or executor is None or executor.role != ExecutorRole.TRAINER:
            raise ConfigError("Communicator: the program is not a trainer's program of a transpiled job (it has no "
                              f"cluster{'' if executor is None else f', it runs as {executor}'}); pass "
                              "t.get_trainer_program() of a DistributeTranspiler, or fleet.main_program on a worker")
        sync = mode == DistributedMode.SYNC
        if sync != program.cluster.sync_mode:
            raise ConfigError(f"Communicator: mode {_MODES[mode]} but the program was transpiled for "
                              f"{'sync' if program.cluster.sync_mode else 'async'} training (DistributeTranspilerConfig."
                              f"sync_mode={program.cluster.sync_mode}); the program's mode is the one that runs, so "
                              f"pass DistributedMode.{'SYNC' if program.cluster.sync_mode else 'ASYNC'}")
        self.mode = _MODES[mode]
        self.program = program
        self.kwargs = dict(kwargs or {})
        self.envs = dict(envs or {})
        self._running = False
        self._stopped = False

    def start(self) -> None:
        """Mark the communicator running; the link opens at the next ``exe.run`` of the
        program (NOTE(communicator-handle)). Calling it again does nothing.

        Raises:
            ConfigError: it was stopped (its links are closed for good).
        """
        if self._stopped:
            raise ConfigError("Communicator.start: this communicator was stopped, and the trainer told its "
                              "pservers it is done; a stopped job member does not come back")
        self._running = True

    def stop(self) -> None:
        """Take the last parameters, send what was posted, tell the pservers this trainer is
        done and close the links of every distributed executor of the process. Calling it
        again, or before ``start``, does the same (nothing left to close)."""
        close_distributed()
        self._running = False
        self._stopped = True

    def is_running(self) -> bool:
        """Whether ``start`` was called and ``stop`` was not (Fluid's returns None: a bug)."""
        return self._running
