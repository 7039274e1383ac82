"""append_backward: walk the forward ops in reverse, ask each op's grad maker, sum fan-in.

It knows nothing about particular op types: the gradient of an op is its
OpDef's ``grad`` entry. What it does itself:

* finds the vars that need a gradient: those that depend, through differentiable slots, on a
  trainable parameter (or on ``parameter_list``) or on an input no op writes that is not
  ``stop_gradient`` (a data var marked so gets ``x@GRAD``, as in Fluid), minus ``no_grad_set``
  and ``stop_gradient``;
* seeds ``loss@GRAD`` with ones;
* when several ops contribute to the gradient of one var, names the parts
  ``x@GRAD@RENAME@k`` and adds a ``sum`` before the first reader of ``x@GRAD``;
* gives an output whose gradient nobody produced a zero gradient (``fill_zeros_like``);
* calls ``append_backward``'s ``callbacks`` once per gradient, as soon as it is complete and
  before any op reads it (NOTE(backward-callbacks)).

NOTE(backward-callbacks): Fluid calls each callback after every grad op it appends, as
``cb(block=block, context=grad_to_var)`` with the new op the block's last; its
``error_clip_callback`` then clips the op's outputs that are gradients of vars with an
``error_clip``. Here a gradient's last writer is known only when its parts are summed or renamed
(``_Grads.finish``), so each callback is called then, as ``cb(block=block, context={grad_name:
fwd_name})`` naming that one gradient; an op the callback appends (placegroup.clip's in-place
``clip``) comes before every reader of the gradient. A callback written for Fluid's protocol
(reading ``block.desc``) does not run here.
"""
from __future__ import annotations

from typing import Iterable

from placegroup.errors import ProgramError
from placegroup.ir.op_proto import op_desc_text
from placegroup.model.backward_blocks import append_block_grad
from placegroup.model.grad_parts import (Grads, differentiable_inputs, leaves_wanting_grad, type_sparse_outputs,
                                         vars_needing_grad)
from placegroup.ops.registry import EMPTY_VAR, GradOpView, grad_name
from placegroup.util.program_stats import ProgramStats


def append_backward(loss, parameter_list: Iterable | None = None, no_grad_set: Iterable | None = None,
                    callbacks=None) -> list[tuple]:
    """Append the backward ops of ``loss`` to its program; return ``[(param, grad)]``.

    Args:
        loss: a Variable with one element (shape [1]).
        parameter_list: parameters (or names) to differentiate; default every trainable one.
        no_grad_set: var names whose gradient is not wanted.
        callbacks: functions called as ``cb(block=block, context={grad_name: fwd_name})`` once
            per gradient as soon as it is complete (NOTE(backward-callbacks)), e.g.
            ``[fluid.clip.error_clip_callback]``.

    Raises:
        ProgramError: if ``loss`` is not written by an op of the global block.
        TypeError: ``callbacks`` is not a list of callables.
    """
    if callbacks is not None and (not isinstance(callbacks, (list, tuple)) or not all(map(callable, callbacks))):
        raise TypeError(f"append_backward: callbacks must be a list of callables, got {callbacks!r}")
    block = loss.block.program.global_block()
    if parameter_list is None:
        params = {p.name for p in block.all_parameters() if p.trainable}
    else:
        params = {getattr(p, "name", p) for p in parameter_list}

    def seed(target):
        block.create_var(grad_name(target.name), shape=target.shape, dtype=target.dtype)
        # ``_loss`` names the loss, so a pass that rewrites the forward can run this again
        block.append_op("fill_constant", outputs={"Out": [grad_name(target.name)]}, role="backward",
                        attrs={"shape": list(target.shape), "value": 1.0, "dtype": target.dtype,
                               "_loss": target.name}, infer=False)

    leaves = leaves_wanting_grad(block)
    grads, need = _walk(block, [loss], seed, params | leaves, no_grad_set,
                        "append_backward: no op of the program writes the loss", callbacks or ())
    for name in sorted(leaves & need):
        grads.finish(name)  # x@GRAD of a data var the user marked stop_gradient=False
    result = []
    for p in block.all_parameters():
        if p.name in params and p.name in need and grads.finish(p.name):
            result.append((p, block.var(grad_name(p.name))))
    return result


def gradients(targets, inputs, target_gradients=None, no_grad_set=None) -> list:
    """Append the ops computing the gradients of ``sum(targets)`` with respect to ``inputs``
    (Fluid's ``fluid.gradients``); return one gradient var per input, None where an input does
    not reach the targets. ``target_gradients`` (one var per target, None for ones) seeds them.

    Raises:
        ProgramError: a target no op writes; ValueError: ``target_gradients`` of another length.

    Example::

        x = fluid.layers.data("x", [2], stop_gradient=False)
        dx, = fluid.gradients([fluid.layers.reduce_sum(fluid.layers.square(x))], [x])   # 2x
    """
    targets = list(targets) if isinstance(targets, (list, tuple)) else [targets]
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    seeds = list(target_gradients) if isinstance(target_gradients, (list, tuple)) else [target_gradients] * len(targets)
    if len(seeds) != len(targets):
        raise ValueError(f"gradients: {len(seeds)} target_gradients for {len(targets)} targets")
    for t, g in zip(targets, seeds):
        if g is not None and tuple(t.shape or ()) != tuple(g.shape or ()):
            raise ValueError(f"The shapes of target and grad are different: {t.name} {list(t.shape or ())} and "
                             f"{g.name} {list(g.shape or ())}")
    block = targets[0].block.program.global_block()
    given = dict(zip((t.name for t in targets), seeds))

    def seed(target):
        block.create_var(grad_name(target.name), shape=target.shape, dtype=target.dtype)
        g = given[target.name]
        if g is None:
            block.append_op("fill_any_like", {"X": [target.name]}, {"Out": [grad_name(target.name)]},
                            {"value": 1.0}, role="backward", infer=False)
        else:
            block.append_op("assign", {"X": [g.name]}, {"Out": [grad_name(target.name)]}, role="backward",
                            infer=False)

    names = [getattr(x, "name", x) for x in inputs]
    grads, need = _walk(block, targets, seed, set(names), no_grad_set, "gradients: no op of the program writes the target")
    return [block.var(grad_name(n)) if n in need and grads.finish(n) else None for n in names]


def calc_gradient(targets, inputs, target_gradients=None, no_grad_set=None):
    """Fluid's ``fluid.backward.calc_gradient``: ``gradients`` (same arguments), but one input
    gives its gradient var alone (None if it does not reach the targets), not in a list.

    Raises:
        ProgramError: a target no op writes; ValueError: ``target_gradients`` of another length,
            or one whose shape is not its target's.

    Example::

        dx = fluid.backward.calc_gradient(loss, x)
    """
    grads = gradients(targets, inputs, target_gradients, no_grad_set)
    return grads[0] if len(grads) == 1 else grads


def serialize_op_decs(op_desc) -> str:
    """An op as Fluid prints its ``OpDesc`` proto (text: inputs, outputs, type, attrs), for
    reading and diffing; ``op_desc`` is an Operator (placegroup's ops are their own desc).

    Raises:
        ValueError: the op's type is not registered.
    """
    return op_desc_text(op_desc)


def _walk(block, targets, seed, wanted: set, no_grad_set, unwritten: str, callbacks=()):
    """Seed each target's gradient, then append the grad ops of every forward op up to the last
    one writing a target, in reverse. Returns the partial gradients and the vars needing one."""
    last = -1
    for t in targets:
        writers = [i for i, op in enumerate(block.ops) if t.name in op.output_arg_names]
        if not writers:
            raise ProgramError(f"{unwritten} {t.name!r}")
        last = max(last, writers[-1])
    fwd_ops = [op for op in block.ops[: last + 1] if op.role == "forward"]
    no_grad = {getattr(n, "name", n) for n in (no_grad_set or ())}
    need = vars_needing_grad(block, fwd_ops, wanted, no_grad)
    grads = Grads(block, callbacks)
    for t in targets:
        seed(t)
        grads.parts[t.name] = [grad_name(t.name)]
        grads.done.add(t.name)
    _append_grad_ops(block, fwd_ops, grads, need, no_grad)
    return grads, need


def _append_grad_ops(target, fwd_ops, grads, need, no_grad, outer=None, after=None) -> None:
    """Append to ``target`` the grad ops of ``fwd_ops``, last first. ``outer``: in a block's
    gradient, the vars of the blocks around it, whose writes start new parts (``renew``);
    ``after(op)`` is called once each forward op is done with."""
    for op in reversed(fwd_ops):
        outs = [n for n in op.output_arg_names if n in grads.parts]
        wanted_here = frozenset(n for n in differentiable_inputs(op) if n in need and n not in no_grad)
        if outs and wanted_here and op.opdef.sub_block:
            append_block_grad(target, op, grads, need, no_grad, wanted_here, _append_grad_ops)
        elif outs and wanted_here and op.opdef.grad is not None:
            silent = {n for slot in op.opdef.outputs if slot.no_grad for n in op.outputs.get(slot.name, ())}
            for n in op.output_arg_names:
                # an output nobody differentiated: its gradient is zero (none for a slot that never
                # has one: batch_norm's running statistics, dropout's mask, an XShape)
                if not grads.finish(n) and n not in silent:
                    v = target.var(n)
                    target.create_var(grad_name(n), shape=v.shape, dtype=v.dtype, type=v.type)
                    target.append_op("fill_zeros_like", {"X": [n]}, {"Out": [grad_name(n)]},
                                     role="backward", infer=False)
                    grads.parts[n] = [grad_name(n)]
                    grads.done.add(n)
            for n in op.output_arg_names:
                if n in op.input_arg_names or (outer is not None and n in outer):
                    grads.renew(n)
            view = GradOpView(op.type, op.inputs, op.outputs, op.attrs, wanted_here, grads.name_for)
            for spec in op.opdef.grad(view):
                new = target.append_op(spec.type, spec.inputs, spec.outputs, spec.attrs,
                                       role="backward", infer=False)
                grads.wrote(new)
                type_sparse_outputs(target, new)
        elif outer is not None:
            for n in op.output_arg_names:
                if n in outer:
                    grads.renew(n)
        if after is not None:
            after(op)


def gradients_of(block, names: Iterable[str]) -> dict:
    """name -> its gradient var in ``block`` (for tests and tools)."""
    return {n: block.var(grad_name(n)) for n in names if block.has_var(grad_name(n))}


__all__ = ["append_backward", "gradients", "EMPTY_VAR"]
__all__ += ["ProgramStats", "calc_gradient", "serialize_op_decs"]
