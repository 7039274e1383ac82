"""The pass machinery: ``Job``, ``PassResult`` and ``run_passes``.

A pass is a pure function ``f(job, ctx) -> PassResult``: it copies the main and startup
programs it is given, changes the copies, and says whether anything changed. ``run_passes``
verifies both programs after each pass and records the pass in their ``provenance``; on
failure it raises ``PassError("pass 'slice' failed after ['merge']: ...")``.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple, Sequence

from placegroup import config
from placegroup.errors import PassError, PlacegroupError
from placegroup.ir.cluster import ClusterSchema


class Job(NamedTuple):
    """The pair of programs a transpilation rewrites together."""

    main: object
    startup: object

    def copy(self) -> "Job":
        return Job(self.main.clone(), self.startup.clone())


class PassResult(NamedTuple):
    job: Job
    changed: bool


@dataclasses.dataclass(frozen=True)
class TranspileContext:
    """What every pass may read: the cluster and the transpiler's options."""

    trainers: int
    trainer_endpoints: tuple
    pservers: tuple
    sync_mode: bool
    slice_var_up: bool
    min_block_size: int
    split_method: Callable
    staleness: int = 0
    mp_fused: bool = True
    merge_steps: int = 1

    def cluster(self, **more) -> ClusterSchema:
        return ClusterSchema(trainers=self.trainers, trainer_endpoints=list(self.trainer_endpoints),
                             pservers=list(self.pservers), sync_mode=self.sync_mode,
                             staleness=self.staleness, merge_steps=self.merge_steps, **more)


def updates(block) -> list[tuple]:
    """``[(op, grad slot)]``: the optimizer ops of the block with a gradient input, except
    those of model-parallel shards, which stay on their trainers (model_parallel.py)."""
    out = []
    for op in block.ops:
        slots = op.opdef.input_slots("Grad") if op.role == "optimize" else []
        if slots and not block.var(op.param).attrs.get("model_parallel"):
            out.append((op, slots[0]))
    return out


def run_passes(job: Job, passes: Sequence[tuple[str, Callable]], ctx: TranspileContext) -> Job:
    done: list[str] = []
    for name, fn in passes:
        try:
            job = fn(job, ctx).job
            for p in job:
                p.provenance.append(name)
                p.verify()
        except PlacegroupError as e:
            raise PassError(f"pass {name!r} failed after {done}: {e}") from e
        if config.DEBUG >= 3:
            print(f"=== main program after pass {name!r} ===\n{job.main}")
        done.append(name)
    return job
