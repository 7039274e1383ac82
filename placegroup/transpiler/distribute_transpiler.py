"""DistributeTranspiler: Fluid's user entry point, over small passes.

``transpile`` runs the passes (model_parallel, merge, allreduce, slice, sparse, placement) on copies of the programs (the input is never mutated), and
``get_program(endpoint, role)`` returns the one placed program with the executor it was made
for recorded in it.

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
from placegroup.ir.framework import SELECTED_ROWS, Program, default_main_program, default_startup_program
from placegroup.ir.place_group import ExecutorId, ExecutorRole
from placegroup.transpiler.endpoints import check_role_has_a_job, pserver_endpoints, trainer_endpoints
from placegroup.transpiler.config import DistributeTranspilerConfig, RoundRobin
from placegroup.transpiler.allreduce import allreduce_gradients
from placegroup.transpiler.merge import merge_gradients
from placegroup.transpiler.model_parallel import is_model_parallel, shard_model_parallel
from placegroup.transpiler.passes import Job, TranspileContext, run_passes
from placegroup.transpiler.placement import place
from placegroup.transpiler.slice import slice_params
from placegroup.transpiler.sparse import shard_tables

PASSES = (("model_parallel", shard_model_parallel), ("merge", merge_gradients), ("allreduce", allreduce_gradients), ("slice", slice_params),
          ("sparse", shard_tables), ("placement", place))


def _distributed_tables(main: Program) -> list[str]:
    """The parameters that are distributed tables (embedding(is_distributed=True))."""
    return sorted(v.name for v in main.list_vars() if v.is_parameter and v.attrs.get("distributed"))


def _sparse_updated(main: Program) -> list[str]:
    """The parameters whose optimizer op takes a sparse (SelectedRows) gradient."""
    block = main.global_block()
    return sorted({op.param for op in block.ops if op.role == "optimize" for slot in op.opdef.input_slots("Grad")
                   if block.var(op.input(slot)[0]).type == SELECTED_ROWS})


def _check_merge_steps(main: Program, m: int) -> None:
    """merge_steps > 1 sums dense gradients (docs/distributed.md, "Modes").

    Raises:
        ValueError: a distributed table, or another parameter with a sparse gradient.
    """
    if m <= 1:
        return
    tables = _distributed_tables(main)
    if tables:
        raise ValueError(f"merge_steps={m} cannot be used with distributed tables {tables}: each step "
                         f"prefetches the rows it looks up from the pservers, which count rounds of "
                         f"{m} steps, so a step inside a round has no version of the rows to ask for. "
                         f"Use merge_steps=1 with these tables (sparse tables train in every mode)")
    sparse = _sparse_updated(main)
    if sparse:
        raise ValueError(f"merge_steps={m} sums dense gradients; {sparse} have sparse (SelectedRows) "
                         f"gradients (embedding(is_sparse=True)). Use merge_steps=1, or is_sparse=False")


def _why_trainers_talk(main: Program, pservers: list[str]) -> str | None:
    """Why the trainers exchange data with each other (NOTE(trainer-endpoints)), or None."""
    if not pservers:
        return "no pservers (PADDLE_INIT_PSERVERS is empty): the trainers form the group and all-reduce"
    if any(is_model_parallel(v) for v in main.list_vars()):
        return "model-parallel layers: the trainers exchange activations"
    return None


def _check_collective(main: Program, pservers: list[str], n: int) -> None:
    """Without pservers the trainers all-reduce dense gradients (allreduce.py); a sparse one,
    or a distributed table, needs pservers. Checked before the passes, so the message names
    the setting to change rather than a pass.

    Raises:
        ConfigError: naming the parameters and the two ways out.
    """
    if pservers or n <= 1:
        return
    sparse = sorted(set(_sparse_updated(main)) | set(_distributed_tables(main)))
    if sparse:
        raise ConfigError(f"{n} trainers and no pservers (PADDLE_INIT_PSERVERS is empty): the trainers "
                          f"all-reduce dense gradients only, and {sparse} have sparse ones (embedding("
                          f"is_sparse=True) or a distributed table). Give the job pservers "
                          f"(placegroup launch --pservers N), or use is_sparse=False")


class DistributeTranspiler:
    """Rewrites a single-process model into the one shared, placed program.

    Args:
        config: a ``DistributeTranspilerConfig``; keyword arguments of ``transpile`` win.
    """

    def __init__(self, config: DistributeTranspilerConfig | None = None) -> None:
        self.config = config or DistributeTranspilerConfig()
        self._job: Job | None = None

    def transpile(self, trainer_id: int | None = None, program: Program | None = None,
                  pservers: str = "127.0.0.1:6174", trainers: int | str = 1, sync_mode: bool | None = None,
                  startup_program: Program | None = None, current_endpoint: str = "127.0.0.1:6174", *,
                  slice_var_up: bool | None = None, split_method: Any = None,
                  min_block_size: int | None = None, staleness: int | None = None,
                  merge_steps: int | None = None) -> None:
        """Run the passes over copies of ``program`` and ``startup_program``.

        Args:
            trainer_id: this process's trainer id (default: ``$PADDLE_TRAINER_ID`` or 0); a
                pserver ignores it, and a trainer's is checked when its program is asked for.
            pservers: ``"ip:port,ip:port"`` (a bare ip takes ``$PADDLE_INIT_PORT``, said once
                per process on the log); empty: no pservers, the trainers form the group.
            trainers: a count, or ``"ip:port,..."``. Trainers that exchange data with each
                other (no pservers, model-parallel layers) need endpoints: given a count, they
                come from ``$PADDLE_TRAINER_ENDPOINTS`` (NOTE(trainer-endpoints) in endpoints.py).
            sync_mode: merge the trainers' gradients each step (True) or apply each alone.
            merge_steps: m local steps make one round, whose mean gradient is applied once
                (docs/distributed.md, "Modes"; dense gradients only).

        Raises:
            ConfigError: malformed endpoints; trainer endpoints needed and not to be had, or a
                count that ``PADDLE_TRAINER_ENDPOINTS`` contradicts; ``TRAINING_ROLE`` set with
                neither pservers nor trainer endpoints; no pservers and sparse gradients.
            ValueError: merge_steps > 1 with sparse gradients.
            PassError: a pass failed (names the pass).
        """
        cfg = self.config
        port = config.get("PADDLE_INIT_PORT")
        # checked when a trainer's program is asked for: a pserver ignores it, as in Fluid
        self.trainer_id = config.get("PADDLE_TRAINER_ID") if trainer_id is None else int(trainer_id)
        main = program or default_main_program()
        # no pservers: the trainers form a collective group (collective data parallel)
        self.pserver_endpoints = pserver_endpoints(pservers, port)
        check_role_has_a_job(self.pserver_endpoints, trainers)
        n, trainer_eps = trainer_endpoints(trainers, port, _why_trainers_talk(main, self.pserver_endpoints))
        _check_collective(main, self.pserver_endpoints, n)
        self.trainer_num, self.trainer_endpoints = n, trainer_eps
        self.current_endpoint = current_endpoint
        ctx = TranspileContext(
            trainers=n, trainer_endpoints=tuple(trainer_eps), pservers=tuple(self.pserver_endpoints),
            sync_mode=cfg.sync_mode if sync_mode is None else sync_mode,
            slice_var_up=cfg.slice_var_up if slice_var_up is None else slice_var_up,
            min_block_size=cfg.min_block_size if min_block_size is None else min_block_size,
            split_method=split_method or cfg.split_method or RoundRobin,
            staleness=cfg.staleness if staleness is None else staleness, mp_fused=cfg.mp_fused,
            merge_steps=cfg.merge_steps if merge_steps is None else merge_steps)
        self.sync_mode = ctx.sync_mode
        _check_merge_steps(main, ctx.merge_steps)
        startup = startup_program or default_startup_program()
        self._job = run_passes(Job(main, startup), PASSES, ctx)

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
