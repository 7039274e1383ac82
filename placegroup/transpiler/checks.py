"""What ``DistributeTranspiler.transpile`` checks before the passes run, so that a message names
the setting to change rather than a pass."""
from __future__ import annotations

from placegroup.errors import ConfigError
from placegroup.ir.framework import SELECTED_ROWS, Program
from placegroup.ir.variable import DYNAMIC_TABLE
from placegroup.transpiler.model_parallel import is_model_parallel


def _distributed_tables(main: Program) -> list[str]:
    """The parameters that are distributed tables (embedding(is_distributed=True))."""
    return sorted(v.name for v in main.list_vars() if v.is_parameter and v.attrs.get("distributed"))


def _sparse_updated(main: Program) -> list[str]:
    """The parameters whose optimizer op takes a sparse (SelectedRows) gradient."""
    block = main.global_block()
    return sorted({op.param for op in block.ops if op.role == "optimize" for slot in op.opdef.input_slots("Grad")
                   if block.var(op.input(slot)[0]).type == SELECTED_ROWS})


def check_merge_steps(main: Program, m: int) -> None:
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


def why_trainers_talk(main: Program, pservers: list[str]) -> str | None:
    """Why the trainers exchange data with each other (NOTE(trainer-endpoints)), or None."""
    if not pservers:
        return "no pservers (PADDLE_INIT_PSERVERS is empty): the trainers form the group and all-reduce"
    if any(is_model_parallel(v) for v in main.list_vars()):
        return "model-parallel layers: the trainers exchange activations"
    return None


def check_collective(main: Program, pservers: list[str], n: int) -> None:
    """Without pservers the trainers all-reduce dense gradients (allreduce.py); a sparse one,
    or a distributed table, needs pservers. Checked before the passes, so the message names
    the setting to change rather than a pass.

    Raises:
        ConfigError: naming the parameters and the two ways out.
    """
    if pservers or n <= 1:
        return
    sparse = sorted(set(_sparse_updated(main)) | set(_distributed_tables(main)))
    grown = sorted(v.name for v in main.list_vars() if v.is_parameter and v.type == DYNAMIC_TABLE)
    if grown:
        raise ConfigError(f"{n} trainers and no pservers (PADDLE_INIT_PSERVERS is empty): {grown} are tables "
                          f"keyed by raw ids (sparse_embedding), which live on pservers; give the job "
                          f"pservers (placegroup launch --pservers N)")
    if sparse:
        raise ConfigError(f"{n} trainers and no pservers (PADDLE_INIT_PSERVERS is empty): the trainers "
                          f"all-reduce dense gradients only, and {sparse} have sparse ones (embedding("
                          f"is_sparse=True) or a distributed table). Give the job pservers "
                          f"(placegroup launch --pservers N), or use is_sparse=False")
