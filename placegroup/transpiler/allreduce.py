"""The collective data-parallel pass: no pservers, the trainers are the group.

Every trainer holds every parameter and runs every optimizer op itself; before each optimizer
op, the gradient is summed over the trainers (``c_allreduce_sum``, a *collective* op: each
member contributes its own instance and gets the sum) and scaled by 1/N, so every trainer
applies the same mean gradient to the same parameters, which therefore stay identical without
ever being sent. The collectives carry their own gradient rules (ops/collective.py); this pass
only inserts forward ones. With ``merge_steps`` the gradient it reduces is the round's
(NOTE(merge-steps) in merge.py), and the allreduce runs once per round, with the update.
Model-parallel shards are updated on their own trainer without a reduction.
"""
from __future__ import annotations

from placegroup.errors import PassError
from placegroup.ir.framework import SELECTED_ROWS
from placegroup.ops.registry import ROUND_END
from placegroup.transpiler.passes import Job, PassResult, reroute_gradient, update_gradients, updates


def allreduce_gradients(job: Job, ctx) -> PassResult:
    job = job.copy()
    if ctx.pservers or ctx.trainers <= 1:
        return PassResult(job, False)
    block = job.main.global_block()
    found = updates(block)
    for op, _slot in found:
        for g in update_gradients(block, op.param):
            grad = block.var(g)
            if grad.type == SELECTED_ROWS:
                raise PassError(f"{op.param!r} has a sparse (SelectedRows) gradient: collective data parallel "
                                f"all-reduces dense gradients only; keep sparse tables on pservers")
            out = block.create_var(f"{g}@ALLREDUCE", shape=grad.shape, dtype=grad.dtype, type=grad.type)
            at = reroute_gradient(block, op.param, g, out.name)
            new = [block.insert_op(at, "c_allreduce_sum", {"X": [g]}, {"Out": [out]}, role="optimize",
                                   infer=False),
                   block.insert_op(at + 1, "scale", {"X": [out]}, {"Out": [out]}, {"scale": 1.0 / ctx.trainers},
                                   role="optimize", infer=False)]
            for o in new:
                o.param = op.param
                if op.attrs.get(ROUND_END):  # one collective per round (merge_steps)
                    o.attrs[ROUND_END] = True
    job.main._bump()
    return PassResult(job, bool(found))
