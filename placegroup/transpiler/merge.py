"""The merge pass (seed 002 §3.6 step 1): one gradient from ``trainer_num`` trainers.

Sync mode: before each optimizer op, ``sum`` (a *gather* edge: every trainer's instance of
the gradient, in trainer-id order) then ``scale(1/N)`` in place; the optimizer reads the
mean. Async mode: no merge; the optimizer's Grad input becomes an *each* edge and runs once
per arriving gradient (DESIGN.md §4). The ops are not placed here; they carry ``op.param`` so
that the slice and placement passes move them with their parameter.
"""
from __future__ import annotations

from placegroup.transpiler.model_parallel import is_model_parallel
from placegroup.transpiler.passes import Job, PassResult


def merge_gradients(job: Job, ctx) -> PassResult:
    job = job.copy()
    if (ctx.trainers <= 1 and ctx.sync_mode) or not ctx.pservers:  # no pservers: the allreduce pass
        return PassResult(job, False)
    block = job.main.global_block()
    changed = False
    i = 0
    while i < len(block.ops):
        op = block.ops[i]
        grad_slots = op.opdef.input_slots("Grad") if op.role == "optimize" else []
        if grad_slots and is_model_parallel(block.var(op.param)):  # stays on the trainers
            grad_slots = []
        if not grad_slots:
            i += 1
            continue
        slot = grad_slots[0]
        if not ctx.sync_mode:
            op.edges[slot] = "each"
            changed = True
            i += 1
            continue
        grad = block.var(op.input(slot)[0])
        merged = block.create_var(f"{grad.name}@MERGED", shape=grad.shape, dtype=grad.dtype,
                                  type=grad.type)
        s = block.insert_op(i, "sum", {"X": [grad]}, {"Out": [merged]}, role="optimize", infer=False)
        s.edges["X"] = "gather"
        m = block.insert_op(i + 1, "scale", {"X": [merged]}, {"Out": [merged]},
                            {"scale": 1.0 / ctx.trainers}, role="optimize", infer=False)
        s.param = m.param = op.param
        op.inputs[slot] = [merged.name]
        changed = True
        i += 3
    return PassResult(job, changed)
