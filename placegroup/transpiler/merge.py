"""The merge pass (seed 002 §3.6 step 1): one gradient from ``trainer_num`` trainers.

Sync mode: before each optimizer op, ``sum`` (a *gather* edge: every trainer's instance of
the gradient, in trainer-id order) then ``scale(1/N)`` in place; the optimizer reads the
mean. Async mode: no merge; the optimizer's Grad input becomes an *each* edge and runs once
per arriving gradient (DESIGN.md §4). The ops are not placed here; they carry ``op.param`` so
that the slice and placement passes move them with their parameter.
"""
from __future__ import annotations

from placegroup.transpiler.passes import Job, PassResult, updates


def merge_gradients(job: Job, ctx) -> PassResult:
    job = job.copy()
    if (ctx.trainers <= 1 and ctx.sync_mode) or not ctx.pservers:  # no pservers: the allreduce pass
        return PassResult(job, False)
    block = job.main.global_block()
    found = updates(block)
    for op, slot in found:
        if not ctx.sync_mode:
            op.edges[slot] = "each"
            continue
        grad = block.var(op.input(slot)[0])
        merged = block.create_var(f"{grad.name}@MERGED", shape=grad.shape, dtype=grad.dtype,
                                  type=grad.type)
        at = block.ops.index(op)
        s = block.insert_op(at, "sum", {"X": [grad]}, {"Out": [merged]}, role="optimize", infer=False)
        s.edges["X"] = "gather"
        m = block.insert_op(at + 1, "scale", {"X": [merged]}, {"Out": [merged]},
                            {"scale": 1.0 / ctx.trainers}, role="optimize", infer=False)
        s.param = m.param = op.param
        op.inputs[slot] = [merged.name]
    job.main._bump()
    return PassResult(job, bool(found))
