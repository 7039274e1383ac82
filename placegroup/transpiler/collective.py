"""``fluid.transpiler.collective``: Fluid 1.8's collective transpilers, over placegroup's
collective data parallel (no pservers: the trainers are the group, docs/distributed.md).

``GradAllReduce().transpile(startup, main, rank, endpoints, current_endpoint, wait_port)``
rewrites both programs in place into trainer ``rank``'s part of a job of ``len(endpoints)``
trainers, as Fluid does, so the script goes on with ``exe.run(startup)`` and
``exe.run(main, ...)``. Each is a ``DistributeTranspiler`` run with no pservers and the trainers
named by ``endpoints``, with one pass of its own:

* ``GradAllReduce``: the ``allreduce`` pass (allreduce.py): before each update, the gradient is
  summed over the trainers (``c_allreduce_sum``) and scaled by 1/N. Fluid scales the loss's
  gradient by 1/N before backward instead; the updates are the same numbers.
* ``LocalSGD``: each trainer applies its own gradient, then the parameters are averaged:
  after the updates of parameter ``p``, ``p = snapshot - mean_k(snapshot - p_k)`` over the
  trainers, and ``snapshot = p`` (``p@SNAPSHOT``, set from ``p`` at the end of the startup
  program), as Fluid's LocalSGD computes. The optimizer's own state (Adam's moments) stays
  each trainer's.
* ``SingleProcessMultiThread``: Fluid all-reduces the gradients of the devices of one process.
  placegroup sums the places' gradients inside the program the executor runs
  (NOTE(data-parallel) in placegroup/model/data_parallel.py), so with one endpoint the programs
  are already right and are left as they are; with several it is
  ``GradAllReduce`` over those processes.

Fluid's collectives need NCCL ids made and broadcast in the startup program, and the parameters
broadcast from rank 0. Here the executors find each other through ``program.cluster`` when they
first run (waiting up to ``PLACEGROUP_START_TIMEOUT``, which is what ``wait_port`` asks for), and
every trainer's startup program draws the same initial values (placegroup's fixed default seed,
as ``DistributeTranspiler`` relies on), so no broadcast is needed. ``nrings`` (NCCL rings) has no
meaning here: one communicator serves the group.

Example (each of 2 processes, rank 0 and 1)::

    eps = ["127.0.0.1:7460", "127.0.0.1:7461"]
    fluid.transpiler.collective.GradAllReduce().transpile(
        startup_program=startup, main_program=main, rank=rank, endpoints=eps,
        current_endpoint=eps[rank], wait_port=True)
    exe.run(startup)
    for batch in my_half_of_the_data:
        exe.run(main, feed=batch, fetch_list=[loss])
    exe.close()

Thread-safety: a transpiler object is used by one thread.
"""
from __future__ import annotations

from placegroup.errors import PassError
from placegroup.ir.framework import Program, default_main_program, default_startup_program
from placegroup.transpiler.details.checkport import wait_server_ready
from placegroup.transpiler.distribute_transpiler import PASSES, DistributeTranspiler
from placegroup.transpiler.passes import Job, PassResult, updates

# the transpilers, and what Fluid's module binds here too
__all__ = ["Collective", "GradAllReduce", "LocalSGD", "SingleProcessMultiThread", "Program", "default_main_program",
           "default_startup_program", "wait_server_ready"]


class Collective:
    """The base of the collective transpilers: checks the group, then runs ``passes()``.

    Args:
        nrings: Fluid's number of NCCL rings; accepted (an int >= 1) and without meaning here.

    Attributes (after ``transpile``, as Fluid's): ``endpoints``, ``current_endpoint``,
    ``nranks``, ``rank``, ``startup_program``, ``main_program``, ``wait_port``.
    """

    mode: str | None = None
    op_role_key = "op_role"          # Fluid's attr names, which its subclasses read
    op_role_var_key = "op_role_var"

    def __init__(self, nrings: int) -> None:
        if isinstance(nrings, bool) or not isinstance(nrings, int) or nrings < 1:
            raise ValueError(f"nrings must be an int >= 1, got {nrings!r}")
        self.nrings = nrings
        self.endpoints = None
        self.current_endpoint = None
        self.nranks = None
        self.rank = None
        self.startup_program = None
        self.main_program = None
        self.wait_port = None

    def transpile(self, startup_program, main_program, rank: int, endpoints, current_endpoint: str,
                  wait_port: bool) -> None:
        """Rewrite ``startup_program`` and ``main_program`` (None: the default ones) in place into
        trainer ``rank``'s part of the group ``endpoints``.

        Args:
            rank: this trainer's index in ``endpoints``.
            endpoints: ``"ip:port,ip:port"`` or a list, one per trainer, in rank order.
            current_endpoint: this trainer's endpoint (``endpoints[rank]``).
            wait_port: accepted; the executors wait for each other anyway (module docstring).

        Raises:
            ValueError: fewer than 2 endpoints (except ``SingleProcessMultiThread``), a negative
                rank, or ``current_endpoint`` not ``endpoints[rank]``.
            ConfigError: a program transpiled already, a malformed endpoint, or sparse
                gradients (which a collective group does not reduce: give the job pservers).
            PassError: a pass failed (names it).
        """
        if isinstance(endpoints, str):
            endpoints = endpoints.split(",")
        endpoints = [str(ep).strip() for ep in endpoints]
        self.startup_program = startup_program if startup_program is not None else default_startup_program()
        self.main_program = main_program if main_program is not None else default_main_program()
        self.nranks = len(endpoints)
        if self.nranks == 1 and self.mode != "single_process_multi_thread":
            raise ValueError("the number of endpoints must > 1")
        if rank < 0:
            raise ValueError(f"rank must >= 0, got {rank}")
        if current_endpoint not in endpoints:
            raise ValueError(f"current endpoint {current_endpoint} is not in {endpoints}")
        if endpoints.index(current_endpoint) != rank:
            raise ValueError(f"rank {rank} and current endpoint {current_endpoint} disagree: the trainers are "
                             f"ranked in the order of endpoints {endpoints}, where {current_endpoint} is rank "
                             f"{endpoints.index(current_endpoint)}")
        self.rank, self.endpoints, self.current_endpoint, self.wait_port = rank, endpoints, current_endpoint, wait_port
        self.startup_program._origin_program = self.startup_program.clone()
        self.main_program._origin_program = self.main_program.clone()
        if self.nranks == 1:
            return  # one process, one place: nothing to reduce (SingleProcessMultiThread)
        transpiler = DistributeTranspiler()
        transpiler.passes = self.passes()
        transpiler.transpile(trainer_id=rank, program=self.main_program, pservers="", trainers=endpoints,
                             startup_program=self.startup_program, current_endpoint=current_endpoint)

    def passes(self) -> tuple:
        """The ``(name, pass)`` sequence the transpile runs (``DistributeTranspiler.passes``)."""
        raise NotImplementedError("call the inherited method of subclasses")


class GradAllReduce(Collective):
    """Collective data parallel: every trainer applies the mean of the trainers' gradients."""

    def __init__(self, nrings: int = 2) -> None:
        super().__init__(nrings)
        self.mode = "grad_allreduce"

    def passes(self) -> tuple:
        return PASSES


class LocalSGD(Collective):
    """Each trainer applies its own gradient, then the trainers' parameters are averaged
    (module docstring)."""

    def __init__(self, nrings: int = 2) -> None:
        super().__init__(nrings)
        self.snapshot_key = "@SNAPSHOT"
        self.mode = "local_sgd"

    def snapshot_name(self, param_name: str) -> str:
        return param_name + self.snapshot_key

    def passes(self) -> tuple:
        return tuple(("local_sgd", self.average_parameters) if name == "allreduce" else (name, fn)
                     for name, fn in PASSES)

    def average_parameters(self, job: Job, ctx) -> PassResult:
        """The pass: after each parameter's updates, average it over the trainers through its
        snapshot (module docstring). Model-parallel shards stay their trainer's own."""
        job = job.copy()
        if ctx.pservers or ctx.trainers <= 1:
            return PassResult(job, False)
        main, startup = job.main.global_block(), job.startup.global_block()
        params = list(dict.fromkeys(op.param for op, _slot in updates(main)))
        for name in params:
            p = main.var(name)
            snap = self.snapshot_name(name)
            if main.has_var(snap) or startup.has_var(snap):
                raise PassError(f"LocalSGD: {snap!r} exists already; is the program transpiled twice?")
            like = dict(shape=p.shape, dtype=p.dtype)
            for block in (main, startup):
                block.create_var(snap, persistable=True, stop_gradient=True, **like)
            delta = main.create_var(f"{snap}@DELTA", **like).name
            mean = main.create_var(f"{snap}@MEAN_DELTA", **like).name
            at = 1 + max(i for i, op in enumerate(main.ops) if op.param == name)
            new = [("elementwise_sub", {"X": [snap], "Y": [name]}, {"Out": [delta]}, {}),
                   ("c_allreduce_sum", {"X": [delta]}, {"Out": [mean]}, {}),
                   ("scale", {"X": [mean]}, {"Out": [mean]}, {"scale": 1.0 / ctx.trainers}),
                   ("elementwise_sub", {"X": [snap], "Y": [mean]}, {"Out": [name]}, {}),
                   ("assign", {"X": [name]}, {"Out": [snap]}, {})]
            for k, (op_type, ins, outs, attrs) in enumerate(new):
                main.insert_op(at + k, op_type, ins, outs, attrs, role="optimize", infer=False).param = name
            startup.append_op("assign", {"X": [name]}, {"Out": [snap]}, role="init", infer=False)
        job.main._bump()
        job.startup._bump()
        return PassResult(job, bool(params))


class SingleProcessMultiThread(GradAllReduce):
    """Fluid's all-reduce among one process's devices; here one endpoint leaves the programs as
    they are (module docstring), and several make it ``GradAllReduce``."""

    def __init__(self) -> None:
        super().__init__(1)
        self.mode = "single_process_multi_thread"
