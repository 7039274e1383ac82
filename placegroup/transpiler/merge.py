"""The merge pass: one gradient per update, from ``merge_steps`` steps and ``trainer_num``
trainers.

1. **merge_steps m > 1** (NOTE(merge-steps)): every update's gradient is summed over a
   trainer's m steps in the program, with pservers or without.
2. **pservers, sync mode**: before the first op of each pserver-held update that reads the
   gradient (the optimizer, or a clip ahead of it: ``passes.update_gradients``), ``sum`` (a
   *gather* edge: every trainer's instance of the gradient, in trainer-id order) then
   ``scale(1/N)`` in place; the update reads the mean. **Async mode**: no merge; the ops that
   finish the gradient (a clip, a decay) run on the trainer, the optimizer's Grad input
   becomes an *each* edge and the optimizer runs once per arriving gradient.

The ops are not placed here: the merge ops carry ``op.param``, so that the slice and
placement passes move them with their parameter; the accumulation ops carry none, so they
stay on the trainers. Without pservers the allreduce pass merges
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

from placegroup.ops.registry import CROSS_PARAM, ROUND_END
from placegroup.transpiler.passes import Job, PassResult, reroute_gradient, update_gradients, updates


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
    for op, _slot in found:
        p, mine = op.param, trainer_held(block, op, ctx)
        for g in update_gradients(block, p):
            grad = block.var(g)
            acc = _accumulator(job, grad)
            mean = block.create_var(f"{g}@ROUND", shape=grad.shape, dtype=grad.dtype, type=grad.type)
            at = reroute_gradient(block, p, g, mean.name)
            new = [block.insert_op(at, "sum", {"X": [acc, grad]}, {"Out": [acc]}, role="optimize", infer=False),
                   block.insert_op(at + 1, "scale", {"X": [acc]}, {"Out": [mean]}, {"scale": 1.0 / m},
                                   role="optimize", infer=False),
                   block.insert_op(at + 2, "fill_zeros_like", {"X": [acc]}, {"Out": [acc]}, role="optimize",
                                   infer=False)]
            for o in new[1:]:  # the sums are no update's: they stay on the trainers
                o.attrs[ROUND_END] = True
        if mine:  # the update and the rest of it (a clip, a decay): once per round
            for o in block.ops:
                if o.param == p and o.role == "optimize":
                    o.attrs[ROUND_END] = True
    for o in block.ops:  # a schedule counts rounds (on pservers every step is a round end); a
        if o.role == "lr_sched" or o.attrs.get(CROSS_PARAM):  # clip factor, once per round
            o.attrs[ROUND_END] = True
    return bool(found)


def _finish_on_trainers(block, op, slot: str, ctx) -> None:
    """Async mode: the ops of ``op``'s update that make its gradient (a clip, a decay) run on
    the trainer, which pushes the finished gradient: each trainer's gradient is applied
    alone, so it is clipped alone, as in one process (NOTE(clip-placement) in clip.py)."""
    writer = {n: o for o in block.ops[:block.ops.index(op)] if o.role == "optimize"
              and (o.param is not None or o.attrs.get(CROSS_PARAM)) for n in o.output_arg_names}
    todo = list(op.input(slot))
    while todo:  # back from the gradient the update applies, through a clip's factor too
        o = writer.pop(todo.pop(), None)
        if o is not None:
            o.param = None
            todo += o.input_arg_names
            if ctx.merge_steps > 1:  # it reads the round's gradient
                o.attrs[ROUND_END] = True


def _merge_trainers(block, ctx) -> bool:
    found = updates(block)
    for op, slot in found:
        if not ctx.sync_mode:
            _finish_on_trainers(block, op, slot, ctx)
            op.edges[slot] = "each"
            continue
        p = op.param
        for g in update_gradients(block, p):
            grad = block.var(g)
            merged = block.create_var(f"{g}@MERGED", shape=grad.shape, dtype=grad.dtype, type=grad.type)
            at = reroute_gradient(block, p, g, merged.name)
            s = block.insert_op(at, "sum", {"X": [g]}, {"Out": [merged]}, role="optimize", infer=False)
            s.edges["X"] = "gather"
            m = block.insert_op(at + 1, "scale", {"X": [merged]}, {"Out": [merged]},
                                {"scale": 1.0 / ctx.trainers}, role="optimize", infer=False)
            s.param = m.param = p
    if not ctx.sync_mode:
        for o in block.ops:
            o.attrs.pop(CROSS_PARAM, None)  # a clip factor of the trainer's own gradients
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
