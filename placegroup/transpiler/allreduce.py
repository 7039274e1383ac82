"""The collective data-parallel pass: no pservers, the trainers are the group (issue #5).

Every trainer holds every parameter and runs every optimizer op itself; before each optimizer
op, the gradient is summed over the trainers (``c_allreduce_sum``, a *collective* op: each
member contributes its own instance and gets the sum) and scaled by 1/N, so every trainer
applies the same mean gradient to the same parameters, which therefore stay identical without
ever being sent. The collectives carry their own gradient rules (ops/collective.py); this pass
only inserts forward ones.

With ``merge_steps`` m > 1 it also merges m local steps into one update of every parameter
the trainers update themselves (all of them without pservers; model-parallel shards with
them): NOTE(merge-steps-collective).
"""
from __future__ import annotations

from placegroup.errors import PassError
from placegroup.ir.framework import SELECTED_ROWS
from placegroup.ops.registry import ROUND_END
from placegroup.transpiler.passes import Job, PassResult, updates

# NOTE(merge-steps-collective): merge_steps m without pservers has the meaning it has with them
# (NOTE(merge-steps) in executor/distributed.py): a trainer's steps s = r*m .. r*m+m-1 form round
# r, the round's mean gradient is applied once, at its last step, and the parameters do not
# change mid-round. With pservers the runtime sums the pushes; here the trainers apply the
# update themselves, so the program says it, in ops `placegroup dump` shows. Per update:
#
#     acc = sum(acc, g)                 every step   (acc: persistable, zeros from the startup)
#     s = c_allreduce_sum(acc)          round end    (one collective per round, not per step)
#     s = scale(s, 1 / (N * m))         round end    (the mean over N trainers and m steps)
#     acc = fill_zeros_like(acc)        round end
#     optimizer(Grad=s)                 round end, with the rest of its update
#
# The round-end ops carry attr ``_round_end`` (ROUND_END); on a trainer, a mid-round step
# skips them (Runtime.run_step) and runs the rest: forward, backward and the sum. The
# learning-rate ops (role lr_sched) are round-end ops too, so a schedule counts rounds, as it
# does on pservers. Every trainer runs the same steps, so a collective's step tag
# (``KernelContext.step``, the step it runs at: r*m + m-1) is the same on every member. A
# model-parallel shard (updated on its trainer even with pservers) gets the same ops less the
# allreduce. Why in the program and not in the runtime (as with pservers): the collective is
# an op, which must run once per round, not per step, and the partial sum is then an ordinary
# var of the scope. A trainer's last, partial round is never applied, as with pservers.


def _held_by_trainers(block, ctx) -> list[tuple]:
    """``[(op, grad slot, allreduce?)]``: the updates the trainers run themselves."""
    dp = {id(op) for op, _ in updates(block)} if not ctx.pservers else set()
    out = []
    for op in block.ops:
        slots = op.opdef.input_slots("Grad") if op.role == "optimize" else []
        if slots and (not ctx.pservers or block.var(op.param).attrs.get("model_parallel")):
            out.append((op, slots[0], id(op) in dp and ctx.trainers > 1))
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


def allreduce_gradients(job: Job, ctx) -> PassResult:
    job = job.copy()
    m = ctx.merge_steps
    block = job.main.global_block()
    found = [u for u in _held_by_trainers(block, ctx) if u[2] or m > 1]
    for op, slot, reduce in found:
        grad = block.var(op.input(slot)[0])
        if grad.type == SELECTED_ROWS:  # (merge_steps: the transpiler says so before any pass)
            raise PassError(f"{op.param!r} has a sparse (SelectedRows) gradient: collective data parallel "
                            f"all-reduces, and merge_steps sums, dense gradients only; keep sparse tables "
                            f"on pservers")
        at = block.ops.index(op)
        new = []  # in program order, before the update

        def add(type_, x, out, attrs=None):
            new.append(block.insert_op(at + len(new), type_, {"X": x}, {"Out": [out]}, attrs, role="optimize",
                                       infer=False))
            new[-1].param = op.param
            return new[-1]

        src = grad
        if m > 1:  # NOTE(merge-steps-collective)
            src = _accumulator(job, grad)
            add("sum", [src, grad], src)
        first = len(new)  # from here on: once per round
        out = block.create_var(f"{grad.name}@{'ALLREDUCE' if reduce else 'MEAN'}", shape=grad.shape,
                               dtype=grad.dtype, type=grad.type)
        if reduce:
            add("c_allreduce_sum", [src], out)
        add("scale", [out if reduce else src], out, {"scale": 1.0 / ((ctx.trainers if reduce else 1) * m)})
        op.inputs[slot] = [out.name]
        if m > 1:
            add("fill_zeros_like", [src], src)
            # the update and the rest of it: once per round
            rest = [o for o in block.ops[block.ops.index(op):] if o.param == op.param and o.role == "optimize"]
            for o in new[first:] + rest:
                o.attrs[ROUND_END] = True
    if m > 1 and found:  # a schedule counts rounds (on pservers it runs once per round anyway)
        for o in block.ops:
            if o.role == "lr_sched":
                o.attrs[ROUND_END] = True
    job.main._bump()
    job.startup._bump()
    return PassResult(job, bool(found))
