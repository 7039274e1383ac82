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


def update_gradients(block, param: str) -> list[str]:
    """The gradients flowing into ``param``'s update from outside it: traced back from the
    optimizer's ``Grad`` through the update's own ops (``op.param == param``: a clip, a decay)
    along their differentiable inputs, the vars where the trace leaves the update. These are
    what a merge or a reduction of the trainers' gradients combines (NOTE(clip-placement) in
    placegroup/model/clip.py)."""
    group = [op for op in block.ops if op.param == param]
    writer = {n: op for op in group for n in op.output_arg_names}
    todo = [n for op in group for slot in op.opdef.input_slots("Grad") for n in op.input(slot)]
    found, seen = set(), set()
    while todo:
        n = todo.pop()
        if n in seen or n == param:
            continue
        seen.add(n)
        op = writer.get(n)
        if op is None:
            found.add(n)
            continue
        todo += [m for slot, names in op.inputs.items() if not op.opdef.slot(slot).no_grad for m in names
                 if not block.var(m).persistable]
    return sorted(found)


def reroute_gradient(block, param: str, grad: str, new: str) -> int:
    """Make ``param``'s update ops read ``new`` where they read ``grad``; return the index of
    the first of them, where the ops that write ``new`` go."""
    readers = [op for op in block.ops if op.param == param and grad in op.input_arg_names]
    at = block.ops.index(readers[0])
    for op in readers:
        for slot, names in op.inputs.items():
            op.inputs[slot] = [new if n == grad else n for n in names]
    return at


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
