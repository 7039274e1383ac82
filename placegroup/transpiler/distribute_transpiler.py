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
from placegroup.ir.framework import SELECTED_ROWS, Program, default_main_program, default_startup_program
from placegroup.ir.place_group import ExecutorId, ExecutorRole, Node
from placegroup.transpiler.config import DistributeTranspilerConfig, RoundRobin
from placegroup.transpiler.allreduce import allreduce_gradients
from placegroup.transpiler.merge import merge_gradients
from placegroup.transpiler.model_parallel import shard_model_parallel
from placegroup.transpiler.passes import Job, TranspileContext, run_passes
from placegroup.transpiler.placement import place
from placegroup.transpiler.slice import slice_params
from placegroup.transpiler.sparse import shard_tables

PASSES = (("model_parallel", shard_model_parallel), ("merge", merge_gradients), ("allreduce", allreduce_gradients), ("slice", slice_params),
          ("sparse", shard_tables), ("placement", place))


def _endpoints(spec: Any, default_port: str, what: str) -> list[str]:
    """``"ip,ip:port,..."`` (or a list) -> ``["ip:port", ...]``; a bare ip takes the port."""
    items = spec if isinstance(spec, (list, tuple)) else str(spec).split(",")
    out = []
    for item in (s.strip() for s in items):
        if not item:
            continue
        ep = item if ":" in item else f"{item}:{default_port}"
        try:
            Node.parse(ep)
        except ValueError as e:
            raise ValueError(f"{what}: {ep!r} is not ip:port ({e})") from None
        out.append(ep)
    if not out:
        raise ValueError(f"{what}: no endpoints in {spec!r}")
    return out


def _check_merge_steps(main: Program, m: int) -> None:
    """merge_steps > 1 sums dense gradients (docs/distributed.md, "Modes").

    Raises:
        ValueError: a distributed table, or another parameter with a sparse gradient.
    """
    if m <= 1:
        return
    tables = sorted(v.name for v in main.list_vars() if v.is_parameter and v.attrs.get("distributed"))
    if tables:
        raise ValueError(f"merge_steps={m} cannot be used with distributed tables {tables}: each step "
                         f"prefetches the rows it looks up from the pservers, which count rounds of "
                         f"{m} steps, so a step inside a round has no version of the rows to ask for. "
                         f"Use merge_steps=1 with these tables (sparse tables train in every mode)")
    block = main.global_block()
    sparse = sorted({op.param for op in block.ops if op.role == "optimize" for slot in op.opdef.input_slots("Grad")
                     if block.var(op.input(slot)[0]).type == SELECTED_ROWS})
    if sparse:
        raise ValueError(f"merge_steps={m} sums dense gradients; {sparse} have sparse (SelectedRows) "
                         f"gradients (embedding(is_sparse=True)). Use merge_steps=1, or is_sparse=False")


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
            trainer_id: this process's trainer id (default: ``$PADDLE_TRAINER_ID`` or 0).
            pservers: ``"ip:port,ip:port"`` (a bare ip takes ``$PADDLE_INIT_PORT``).
            trainers: a count, or ``"ip:port,..."`` (needed for trainer-to-trainer edges).
            sync_mode: merge the trainers' gradients each step (True) or apply each alone.
            merge_steps: m local steps make one round, whose mean gradient is applied once
                (docs/distributed.md, "Modes"; dense gradients only).

        Raises:
            ValueError: malformed endpoints; merge_steps > 1 with sparse gradients.
            PassError: a pass failed (names the pass).
        """
        cfg = self.config
        port = config.get("PADDLE_INIT_PORT")
        self.trainer_id = config.get("PADDLE_TRAINER_ID") if trainer_id is None else int(trainer_id)
        # no pservers: the trainers form a collective group (collective data parallel)
        self.pserver_endpoints = _endpoints(pservers, port, "pservers") if pservers else []
        if isinstance(trainers, int) or str(trainers).strip().isdigit():
            n, trainer_eps = int(trainers), []
        else:
            trainer_eps = _endpoints(trainers, port, "trainers")
            n = len(trainer_eps)
        if n < 1 or not 0 <= self.trainer_id < n:
            raise ValueError(f"trainer_id {self.trainer_id} is not in 0..{n - 1}")
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
        main = program or default_main_program()
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
        role = role.lower()
        if role == ExecutorRole.PSERVER.value:
            if endpoint not in self.pserver_endpoints:
                raise ValueError(f"pserver endpoint {endpoint!r} is not one of {self.pserver_endpoints}")
            return ExecutorId.parse(role, endpoint)
        rank = self.trainer_id
        if self.trainer_endpoints and endpoint in self.trainer_endpoints:
            rank = self.trainer_endpoints.index(endpoint)
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
