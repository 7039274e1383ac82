"""The merge pass: one gradient per update, from ``merge_steps`` steps and ``trainer_num``
trainers.

1. **merge_steps m > 1** (NOTE(merge-steps)): every update's gradient is summed over a
   trainer's m steps in the program, with pservers or without.
2. **pservers, sync mode**: before each pserver-held optimizer op, ``sum`` (a *gather* edge:
   every trainer's instance of the gradient, in trainer-id order) then ``scale(1/N)`` in
   place; the optimizer reads the mean. **Async mode**: no merge; the optimizer's Grad input
   becomes an *each* edge and runs once per arriving gradient.

The ops are not placed here: the merge ops carry ``op.param``, so that the slice and
placement passes move them with their parameter; the accumulation ops of a pserver-held
update carry none, so they stay on the trainers. Without pservers the allreduce pass merges
the trainers' gradients instead (allreduce.py).

NOTE(merge-steps): merge_steps m means the same in every mode and topology: a trainer's steps
r*m .. r*m+m-1 form round r, the round's mean gradient is applied once, at its last step, and
the parameters do not change mid-round. Per update, on the trainers::

    acc = sum(acc, g)            every step  (acc: <g>@STEPS, persistable, zeros from the startup)
    g_round = scale(acc, 1/m)    round end   (<g>@ROUND: what is merged, pushed or applied)
    acc = fill_zeros_like(acc)   round end
    optimizer(Grad=g_round)      round end when the trainers run it; a pserver counts rounds

Round-end ops carry attr ``_round_end`` (``ROUND_END``); a trainer's version policy skips them
mid-round (executor/policy.py, ``Rounds``) and tags what it sends with the round. The
learning-rate ops are round-end ops too, so a schedule counts rounds wherever it runs. A
trainer's last, partial round is never applied. Everything a step sends is thus an op's
output that ``placegroup dump`` shows, in both topologies.
"""
from __future__ import annotations

from placegroup.ops.registry import ROUND_END
from placegroup.transpiler.passes import Job, PassResult, updates


def trainer_held(block, op, ctx) -> bool:
    """Whether the trainers run update ``op`` themselves (no pservers, or a model-parallel shard)."""
    return not ctx.pservers or bool(block.var(op.param).attrs.get("model_parallel"))


def _all_updates(block) -> list[tuple]:
    """``[(op, grad slot)]``: every optimizer op with a gradient input, shards included."""
    out = []
    for op in block.ops:
        slots = op.opdef.input_slots("Grad") if op.role == "optimize" else []
        if slots:
            out.append((op, slots[0]))
    return out


def _accumulator(job: Job, grad):
    """A persistable var like ``grad``, zeros from the startup program."""
    name = f"{grad.name}@STEPS"
    acc = job.main.global_block().create_var(name, shape=grad.shape, dtype=grad.dtype, persistable=True,
                                             stop_gradient=True)
    startup = job.startup.global_block()
    startup.create_var(name, shape=grad.shape, dtype=grad.dtype, persistable=True)
    startup.append_op("fill_constant", {}, {"Out": [name]},
                      {"shape": list(grad.shape), "dtype": grad.dtype, "value": 0.0}, role="init")
    return acc


def _accumulate(job: Job, ctx) -> bool:
    """NOTE(merge-steps): sum each update's gradient over a round."""
    m = ctx.merge_steps
    block = job.main.global_block()
    found = _all_updates(block)
    for op, slot in found:
        grad = block.var(op.input(slot)[0])
        mine = trainer_held(block, op, ctx)
        acc = _accumulator(job, grad)
        mean = block.create_var(f"{grad.name}@ROUND", shape=grad.shape, dtype=grad.dtype, type=grad.type)
        at = block.ops.index(op)
        new = [block.insert_op(at, "sum", {"X": [acc, grad]}, {"Out": [acc]}, role="optimize", infer=False),
               block.insert_op(at + 1, "scale", {"X": [acc]}, {"Out": [mean]}, {"scale": 1.0 / m},
                               role="optimize", infer=False),
               block.insert_op(at + 2, "fill_zeros_like", {"X": [acc]}, {"Out": [acc]}, role="optimize",
                               infer=False)]
        for o in new:
            o.param = op.param if mine else None  # a pserver-held update's sums stay on the trainers
        for o in new[1:]:
            o.attrs[ROUND_END] = True
        op.inputs[slot] = [mean.name]
        if mine:  # the update and the rest of it: once per round
            for o in block.ops[block.ops.index(op):]:
                if o.param == op.param and o.role == "optimize":
                    o.attrs[ROUND_END] = True
    for o in block.ops:  # a schedule counts rounds (on pservers every step is a round end)
        if o.role == "lr_sched":
            o.attrs[ROUND_END] = True
    return bool(found)


def _merge_trainers(block, ctx) -> bool:
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
    return bool(found)


def merge_gradients(job: Job, ctx) -> PassResult:
    job = job.copy()
    changed = False
    if ctx.merge_steps > 1:
        changed |= _accumulate(job, ctx)
    if ctx.pservers and (ctx.trainers > 1 or not ctx.sync_mode):
        changed |= _merge_trainers(job.main.global_block(), ctx)
    job.main._bump()
    job.startup._bump()
    return PassResult(job, changed)
