"""The collective data-parallel pass: no pservers, the trainers are the group (issue #5).

Every trainer holds every parameter and runs every optimizer op itself; before each optimizer
op, the gradient is summed over the trainers (``c_allreduce_sum``, a *collective* op: each
member contributes its own instance and gets the sum) and scaled by 1/N, so every trainer
applies the same mean gradient to the same parameters, which therefore stay identical without
ever being sent. The collectives carry their own gradient rules (ops/collective.py); this pass
only inserts forward ones.
"""
from __future__ import annotations

from placegroup.errors import PassError
from placegroup.transpiler.passes import Job, PassResult, updates


def allreduce_gradients(job: Job, ctx) -> PassResult:
    job = job.copy()
    if ctx.pservers or ctx.trainers <= 1:
        return PassResult(job, False)
    block = job.main.global_block()
    found = updates(block)  # model-parallel shards excluded: nothing to all-reduce
    for op, slot in found:
        grad = block.var(op.input(slot)[0])
        if grad.type == "selected_rows":
            raise PassError(f"{op.param!r} has a sparse (SelectedRows) gradient: collective data parallel "
                            f"all-reduces dense gradients only; keep sparse tables on pservers")
        summed = block.create_var(f"{grad.name}@ALLREDUCE", shape=grad.shape, dtype=grad.dtype, type=grad.type)
        at = block.ops.index(op)
        a = block.insert_op(at, "c_allreduce_sum", {"X": [grad]}, {"Out": [summed]}, role="optimize", infer=False)
        m = block.insert_op(at + 1, "scale", {"X": [summed]}, {"Out": [summed]}, {"scale": 1.0 / ctx.trainers},
                            role="optimize", infer=False)
        a.param = m.param = op.param
        op.inputs[slot] = [summed.name]
    job.main._bump()
    return PassResult(job, bool(found))
