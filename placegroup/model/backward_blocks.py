"""The gradient of a loop or a branch: ``while_grad`` and ``conditional_block_grad``, as Fluid 1.8
builds them.

NOTE(block-grad): when append_backward meets a ``while`` or ``conditional_block`` whose outputs
have gradients and whose inputs want one, it builds a gradient block: the grad ops of the
forward block's ops, last first, with the same rules as the ops of the global block. Its parent
is the forward block, so that it reads the forward block's vars by name. The op that owns it,
``<type>_grad``, has Fluid's slots:

* ``X`` (``Input``), ``Out``: the forward op's;
* ``Out@GRAD``: the gradients of its outputs from the ops after it;
* ``StepScopes`` (``Scope``): the forward op's runs (NOTE(step-records) in executor/blocks.py);
* ``X@GRAD`` (``Input@GRAD``): a gradient for each input that wants one, ``@EMPTY@`` for the
  others;
* attrs ``original_output_grad`` and ``original_input_grad``: the names the gradient block
  gives the outputs' and the inputs' gradients (a pass that renames the op's vars, as data
  parallelism does per place, leaves the block's own names as they are).

Inside the gradient block, the gradient of an outer var ``x`` is ``x@GRAD``, a var of the block.
An output's gradient starts as ``Out@GRAD``. An input the block also writes (a loop var, a
tensor array) carries its gradient from one run to the one before. An input it only reads (a
parameter) sums its gradient over the runs.

A forward op of the block that writes over a var of an outer block that the block also reads
(``increment(i)`` in place, the ``assign`` of a loop var) gets two ``assign`` ops: one before it
in the forward block keeps the value it overwrites (``i@PRE@0``), one after its grad ops in the
gradient block puts that value back. So the grad ops of the ops before it read the value they
saw. Fluid 1.8 puts back only a counter, with ``increment``'s grad. Without the copy, a loop var
read in the body differentiates at its last value (docs/control_flow.md).
"""
from __future__ import annotations

from placegroup.ir.framework import TENSOR_ARRAY
from placegroup.model.grad_parts import Grads, vars_needing_grad
from placegroup.ops.control_flow import BLOCK_SLOTS
from placegroup.ops.registry import EMPTY_VAR, grad_name


def _need_in_block(block, need: set, no_grad: set) -> set:
    """The vars needing a gradient, over a block's ops run again and again: a loop var can need
    one only once the body's later ops have been seen."""
    while True:
        grown = vars_needing_grad(block, block.ops, need, no_grad)
        if grown == need:
            return need
        need = grown


def _put_back(sub, gblock, outer_written: set):
    """The ``after`` hook of the forward block's walk: a forward op that writes over a var of an
    outer block that the block reads gets its value kept before it and put back after its grad
    ops (module docstring)."""
    read = {n for op in sub.ops for n in op.input_arg_names}
    count = [0]

    def after(op) -> None:
        for n in op.output_arg_names:
            if n not in outer_written or n not in read or sub.var(n).type == TENSOR_ARRAY:
                continue
            v = sub.var(n)
            kept = sub.create_var(f"{n}@PRE@{count[0]}", shape=v.shape, dtype=v.dtype, lod_level=v.lod_level)
            count[0] += 1
            at = next(k for k, o in enumerate(sub.ops) if o is op)
            sub.insert_op(at, "assign", {"X": [n]}, {"Out": [kept.name]}, infer=False)
            gblock.append_op("assign", {"X": [kept.name]}, {"Out": [n]}, role="backward", infer=False)

    return after


def append_block_grad(target, op, grads: Grads, need: set, no_grad: set, wanted: frozenset, walk) -> None:
    """Append ``op``'s ``<type>_grad`` to ``target``, with its gradient block (NOTE(block-grad));
    ``walk`` appends the grad ops of a list of forward ops (backward._append_grad_ops)."""
    program = target.program
    sub = program.block(op.attrs["sub_block"])
    x_slot, runs_slot = BLOCK_SLOTS[op.type]
    xs, outs = op.inputs.get(x_slot, []), op.outputs.get("Out", [])
    ogs = [o for o in outs if grads.finish(o)]
    if not ogs:
        return
    for o in outs:
        if o in xs:
            grads.renew(o)  # what reaches the op's inputs is for their values before it
    current = program.current_block_idx
    gblock = program._create_block(parent_idx=sub.idx)
    program.current_block_idx = current
    inner = Grads(gblock)
    for n in dict.fromkeys(ogs + [x for x in xs if x in wanted and x in outs]):
        inner.seed(n)
    outer_written = {n for o in sub.ops for n in o.output_arg_names} - set(sub.vars)
    walk(gblock, list(sub.ops), inner, _need_in_block(sub, set(need), no_grad), no_grad, outer=outer_written,
         after=_put_back(sub, gblock, outer_written))
    x_grads = [grads.name_for(x) if x in wanted and inner.finish(x) else EMPTY_VAR for x in xs]
    ins = {x_slot: xs, "Out": outs, "Out@GRAD": [grad_name(o) for o in ogs], runs_slot: op.outputs[runs_slot]}
    attrs = {k: v for k, v in op.attrs.items() if k != "sub_block"}
    attrs.update(sub_block=gblock.idx, original_output_grad=[grad_name(o) for o in ogs],
                 original_input_grad=[grad_name(x) for x in xs])
    if "Cond" in op.inputs:
        ins["Cond"] = op.inputs["Cond"]
    new = target.append_op(op.type + "_grad", ins, {x_slot + "@GRAD": x_grads}, attrs, role="backward",
                           infer=False)
    grads.wrote(new)
