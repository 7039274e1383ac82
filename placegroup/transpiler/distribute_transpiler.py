"""DistributeTranspiler: Fluid's user entry point, over small passes.

``transpile`` runs the passes (model_parallel, merge, allreduce, slice, sparse, placement) on
copies of the programs, keeps the one shared, placed program, and then rewrites the programs it
was given into this process's part of it, as Fluid 1.8 does (NOTE(in-place-transpile)).
``get_program(endpoint, role)`` returns the placed program with the executor it was made for
recorded in it.

Example (Fluid's classic fit_a_line training script)::

    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id, pservers="127.0.0.1:6174,127.0.0.1:6175", trainers=2)
    prog = t.get_program(current_endpoint, training_role)
    startup = t.get_startup_program(current_endpoint, training_role)
"""
from __future__ import annotations

from typing import Any

from placegroup import config
from placegroup.errors import ConfigError
from placegroup.ir.framework import Program, default_main_program, default_startup_program, note_transpiled_job
from placegroup.ir.place_group import ExecutorId, ExecutorRole
from placegroup.transpiler.endpoints import check_role_has_a_job, pserver_endpoints, trainer_endpoints
from placegroup.transpiler.config import DistributeTranspilerConfig, RoundRobin
from placegroup.transpiler.allreduce import allreduce_gradients
from placegroup.transpiler.checks import check_collective, check_merge_steps, why_trainers_talk
from placegroup.transpiler.merge import merge_gradients
from placegroup.transpiler.model_parallel import shard_model_parallel
from placegroup.transpiler.passes import Job, TranspileContext, run_passes
from placegroup.transpiler.placement import place
from placegroup.transpiler.slice import slice_params
from placegroup.transpiler.sparse import shard_tables
from placegroup.transpiler.var_blocks import VarBlock, log, same_or_split_var, slice_variable

__all__ = ["DistributeTranspiler", "VarBlock", "log", "same_or_split_var", "slice_variable"]

PASSES = (("model_parallel", shard_model_parallel), ("merge", merge_gradients), ("allreduce", allreduce_gradients), ("slice", slice_params),
          ("sparse", shard_tables), ("placement", place))


class DistributeTranspiler:
    """Rewrites a single-process model into the one shared, placed program.

    Args:
        config: a ``DistributeTranspilerConfig``; keyword arguments of ``transpile`` win.
        passes: (class attribute) the ``(name, pass)`` sequence ``transpile`` runs; the
            collective transpilers (collective.py) put their own pass in the place of ``allreduce``.
    """

    passes = PASSES

    def __init__(self, config: DistributeTranspilerConfig | None = None) -> None:
        self.config = config or DistributeTranspilerConfig()
        self._job: Job | None = None

    def transpile(self, trainer_id: int | None = None, program: Program | None = None,
                  pservers: str = "127.0.0.1:6174", trainers: int | str = 1, sync_mode: bool | None = None,
                  startup_program: Program | None = None, current_endpoint: str | None = None, *,
                  slice_var_up: bool | None = None, split_method: Any = None,
                  min_block_size: int | None = None, staleness: int | None = None,
                  merge_steps: int | None = None) -> None:
        """Transpile ``program`` and ``startup_program`` for the job, and rewrite both in place
        into this process's part (NOTE(in-place-transpile)).

        Args:
            trainer_id: this process's trainer id (default: ``$PADDLE_TRAINER_ID`` or 0); a
                pserver ignores it, and a trainer's is checked when its program is asked for.
            pservers: ``"ip:port,ip:port"`` (a bare ip takes ``$PADDLE_INIT_PORT``, said once
                per process on the log); empty: no pservers, the trainers form the group.
            trainers: a count, or ``"ip:port,..."``. Trainers that exchange data with each
                other (no pservers, model-parallel layers) need endpoints: given a count, they
                come from ``$PADDLE_TRAINER_ENDPOINTS`` (NOTE(trainer-endpoints) in endpoints.py).
            program, startup_program: the model (default: the default main and startup
                programs); both are rewritten in place into this process's programs.
            sync_mode: merge the trainers' gradients each step (True) or apply each alone.
            current_endpoint: this process's ``ip:port``. With ``TRAINING_ROLE=PSERVER``, a
                pserver's (or else ``POD_IP:PADDLE_INIT_PORT``) makes the rewrite that pserver's
                part; otherwise the rewrite is trainer ``trainer_id``'s, as in Fluid, which does
                not use this argument in pserver mode.
            merge_steps: m local steps make one round, whose mean gradient is applied once
                (docs/distributed.md, "Modes"; dense gradients only).

        Raises:
            ConfigError: malformed endpoints; trainer endpoints needed and not to be had, or a
                count that ``PADDLE_TRAINER_ENDPOINTS`` contradicts; ``TRAINING_ROLE`` set with
                neither pservers nor trainer endpoints; no pservers and sparse gradients.
            ValueError: merge_steps > 1 with sparse gradients.
            PassError: a pass failed (names the pass).
        """
        main = program or default_main_program()
        if main.cluster is not None:
            raise ConfigError("transpile: this program was transpiled already (transpile rewrites the "
                              "program it is given into this process's part); transpile the model once, "
                              "and build it again in a fresh Program to transpile it for another job")
        cfg = self.config
        port = config.get("PADDLE_INIT_PORT")
        # checked when a trainer's program is asked for: a pserver ignores it, as in Fluid
        self.trainer_id = config.get("PADDLE_TRAINER_ID") if trainer_id is None else int(trainer_id)
        # no pservers: the trainers form a collective group (collective data parallel)
        self.pserver_endpoints = pserver_endpoints(pservers, port)
        check_role_has_a_job(self.pserver_endpoints, trainers)
        n, trainer_eps = trainer_endpoints(trainers, port, why_trainers_talk(main, self.pserver_endpoints))
        check_collective(main, self.pserver_endpoints, n)
        self.trainer_num, self.trainer_endpoints = n, trainer_eps
        self.current_endpoint = current_endpoint or "127.0.0.1:6174"
        ctx = TranspileContext(
            trainers=n, trainer_endpoints=tuple(trainer_eps), pservers=tuple(self.pserver_endpoints),
            sync_mode=cfg.sync_mode if sync_mode is None else sync_mode,
            slice_var_up=cfg.slice_var_up if slice_var_up is None else slice_var_up,
            min_block_size=cfg.min_block_size if min_block_size is None else min_block_size,
            split_method=split_method or cfg.split_method or RoundRobin,
            staleness=cfg.staleness if staleness is None else staleness, mp_fused=cfg.mp_fused,
            merge_steps=cfg.merge_steps if merge_steps is None else merge_steps)
        self.sync_mode = ctx.sync_mode
        check_merge_steps(main, ctx.merge_steps)
        startup = startup_program or default_startup_program()
        self._job = run_passes(Job(main, startup), self.passes, ctx)
        self._origin = (main, startup)
        try:
            self.rewrite_in_place(*self._process_part(current_endpoint))
        except ConfigError:
            # a trainer id this job has not: `get_program` says so when a trainer's part is asked
            # for; the programs stay as they were, and the executor refuses to train them alone
            pass
        note_transpiled_job(self._job.main.cluster if self.pserver_endpoints else None)

    # NOTE(in-place-transpile): Fluid 1.8's transpile turns the program it was given (default: the
    # default main program) into the trainer's program, and the startup program likewise, so
    # Fluid scripts go on to run `fluid.default_main_program()`, `exe.run(fetch_list=[loss])` with
    # no program, or a reference taken before `transpile`, and train with the pservers. Here the
    # passes stay pure: they work on copies, and the one shared, placed program stays whole in
    # `self._job` (what `get_program` cuts from and prog.bin saves). Only `rewrite_in_place` writes
    # back, giving the caller's Program objects this process's part: trainer `trainer_id`'s, as in
    # Fluid, or a pserver's when TRAINING_ROLE=PSERVER says this process is one (`current_endpoint`
    # alone does not: Fluid ignores it in pserver mode, and scripts pass a trainer's, or even a
    # pserver's, endpoint there). A forward-only clone taken before (`main.clone(for_test=True)`,
    # how trainers evaluate) is untouched and runs locally on the parameters the trainer holds.
    # Any other unplaced program that would update parameters is refused by the executor while
    # this process belongs to a job with pservers (`transpiled_job()`), so a trainer never trains
    # alone by mistake.
    def rewrite_in_place(self, endpoint: str | None, role: str) -> None:
        """Rewrite the programs ``transpile`` was given into the part of executor (``endpoint``,
        ``role``), as ``get_program`` would cut it (NOTE(in-place-transpile)). ``transpile`` does
        this for this process already; fleet calls it for the server its role maker names.

        Raises:
            ConfigError: no such executor in the job (as ``get_program``).
        """
        job = self._need()
        executor = self._executor(endpoint, role)
        for mine, placed in zip(self._origin, (job.main, job.startup)):
            part = placed.clone()
            part.executor = executor
            mine.rewrite_from(part)

    def _process_part(self, current_endpoint: str | None) -> tuple[str | None, str]:
        """(endpoint, role) of this process, for the in-place rewrite."""
        if config.get("TRAINING_ROLE") == "PSERVER":
            own = f"{config.get('POD_IP')}:{config.get('PADDLE_INIT_PORT')}"
            for endpoint in (current_endpoint, own):
                if endpoint in self.pserver_endpoints:
                    return endpoint, "pserver"
        return (self.current_endpoint if self.trainer_endpoints else None), "trainer"

    # -- the programs ------------------------------------------------------------------------
    def _need(self) -> Job:
        if self._job is None:
            raise RuntimeError("call transpile() before asking for a program")
        return self._job

    def _executor(self, endpoint: str | None, role: str | None) -> ExecutorId:
        if role is None:
            role = "pserver" if endpoint in self.pserver_endpoints else "trainer"
        if str(role).lower() not in (ExecutorRole.TRAINER.value, ExecutorRole.PSERVER.value):
            raise ConfigError(f"role {role!r} is not TRAINER or PSERVER (the role a Fluid script "
                              f"reads from TRAINING_ROLE)")
        role = str(role).lower()
        if role == ExecutorRole.PSERVER.value:
            if endpoint not in self.pserver_endpoints:
                raise ConfigError(f"pserver endpoint {endpoint!r} (POD_IP:PADDLE_INIT_PORT) is not one of "
                                  f"the pservers {self.pserver_endpoints} (PADDLE_INIT_PSERVERS)")
            return ExecutorId.parse(role, endpoint)
        rank = self.trainer_id
        if self.trainer_endpoints and endpoint in self.trainer_endpoints:
            rank = self.trainer_endpoints.index(endpoint)
        elif not 0 <= rank < self.trainer_num:
            raise ConfigError(f"trainer_id {rank} is not in 0..{self.trainer_num - 1}: PADDLE_TRAINER_ID "
                              f"(or transpile's trainer_id) names one of the {self.trainer_num} trainers")
        ep = self.trainer_endpoints[rank] if self.trainer_endpoints else None
        return ExecutorId.parse(role, ep, rank=rank)

    def get_program(self, endpoint: str | None, role: str | None = None) -> Program:
        """The shared program, recording the executor (``endpoint``, ``role``) that runs it."""
        prog = self._need().main.clone()
        prog.executor = self._executor(endpoint, role)
        return prog

    def get_startup_program(self, endpoint: str | None = None, role: Any = None,
                            pserver_program: Program | None = None) -> Program:
        """The placed startup program for that executor (``pserver_program`` is accepted, as in
        Fluid 1.x, and not needed; a Program passed as ``role`` is taken as it)."""
        if isinstance(role, Program):
            role = None
        prog = self._need().startup.clone()
        prog.executor = self._executor(endpoint, role)
        return prog

    def get_trainer_program(self, wait_port: bool = True) -> Program:
        return self.get_program(self.current_endpoint if self.trainer_endpoints else None, "trainer")

    def get_pserver_program(self, endpoint: str) -> Program:
        return self.get_program(endpoint, "pserver")

    def get_pserver_programs(self, endpoint: str) -> tuple[Program, Program]:
        return self.get_pserver_program(endpoint), self.get_startup_program(endpoint, "pserver")
