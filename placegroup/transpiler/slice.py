"""The slice pass (seed 000): big parameters become row blocks spread over the pservers.

Per parameter ``p`` with an optimizer (the ops whose ``op.param`` is ``p``):

    count      = min(ceil(numel / min_block_size), #pservers)
    block_rows = ceil(rows / count)          # whole rows of dim 0
    count      = ceil(rows / block_rows)     # blocks tile p; all but the last are equal

With ``count > 1`` every op of ``p``'s update (merge, lr scaling, optimizer) is repeated per
block over the block's slice of each var:
* ``p`` itself, and every var of ``p``'s shape that the update reads or writes (its gradient,
  the merged gradient, moments, velocities) -> ``<name>.block<i>``, a row slice;
* other vars the update writes (beta powers) -> ``<name>.block<i>``, a copy per block;
* vars the update only reads (the learning rate) stay shared.
On the trainer, ``split`` cuts the gradient into blocks right after backward writes it, and
``concat`` joins the updated blocks back into ``p`` at the end of the step (and at the end of
the startup program), so the trainer's ``p`` always holds the latest update (DESIGN.md §4).
In the startup program each sliced var's initializer makes only its block: a random
initializer gets ``whole_shape``/``offsets`` (NOTE(counter-rng) in ops/random.py), a constant
its block's shape, an ``assign_value`` the rows of its values.
Facts go into typed attrs: ``var.attrs["slice_of"] = [p, index, row_offset]``.
"""
from __future__ import annotations

import math

from placegroup.transpiler.passes import Job, PassResult


def block_layout(shape, n_pservers: int, min_block_size: int) -> list[tuple[int, int]]:
    """``[(row_offset, rows)]`` of each block of a var of ``shape`` (seed 000's rule)."""
    rows = int(shape[0]) if shape else 1
    numel = math.prod(shape) if shape else 1
    count = max(1, min(math.ceil(numel / min_block_size), n_pservers, rows))
    block_rows = math.ceil(rows / count)
    count = math.ceil(rows / block_rows)
    return [(i * block_rows, min(block_rows, rows - i * block_rows)) for i in range(count)]


def _block_var(block, var, i: int, off: int, rows: int | None):
    shape = list(var.shape) if rows is None else [rows] + list(var.shape[1:])
    name = f"{var.name}.block{i}"
    if block.has_var(name):
        return block.var(name)
    attrs = {**var.attrs, "slice_of": [var.name, i, off if rows is not None else -1]}
    if var.is_parameter:
        return block.create_parameter(name, shape, var.dtype, trainable=var.trainable,
                                      optimize_attr=var.optimize_attr, attrs=attrs)
    return block.create_var(name, shape=shape, dtype=var.dtype, persistable=var.persistable,
                            stop_gradient=var.stop_gradient, type=var.type, attrs=attrs)


def _slice_init_op(op, name: str, shape, off: int | None, whole) -> dict:
    """Attrs of ``op`` (an initializer) changed to make only one block of its output."""
    attrs = dict(op.attrs)
    attrs["shape"] = list(shape)
    if off is not None and "whole_shape" in attrs:
        attrs["whole_shape"] = list(whole)
        attrs["offsets"] = [off] + [0] * (len(whole) - 1)
    if off is not None and "values" in attrs:
        per_row = math.prod(whole[1:]) if len(whole) > 1 else 1
        attrs["values"] = attrs["values"][off * per_row:(off + shape[0]) * per_row]
    return attrs


def _slice_param(job: Job, p, layout) -> None:
    main, startup = job.main.global_block(), job.startup.global_block()
    group = [op for op in main.ops if op.param == p.name]
    touched = {n for op in group for n in op.input_arg_names + op.output_arg_names}
    written = {n for op in group for n in op.output_arg_names}
    sliced = {n for n in touched if main.var(n).shape == p.shape}
    copied = {n for n in written - sliced}
    outside = [n for n in sliced if n != p.name and n not in written]  # gradients from backward

    def rename(n: str, i: int) -> str:
        return f"{n}.block{i}" if n in sliced or n in copied else n

    for i, (off, rows) in enumerate(layout):
        for n in sorted(sliced | copied):
            _block_var(main, main.var(n), i, off, rows if n in sliced else None)
    # the update ops, once per block, where the whole-var op was
    for op in group:
        at = main.ops.index(op)
        main.ops.remove(op)
        for i in range(len(layout)):
            new = main.insert_op(at + i, op.type, {k: [rename(n, i) for n in v] for k, v in op.inputs.items()},
                                 {k: [rename(n, i) for n in v] for k, v in op.outputs.items()},
                                 op.attrs, role=op.role, infer=False)
            new.edges, new.param = dict(op.edges), f"{p.name}.block{i}"
    sections = [rows for _, rows in layout]
    for g in outside:
        last = max(k for k, op in enumerate(main.ops) if g in op.output_arg_names)
        main.insert_op(last + 1, "split", {"X": [g]}, {"Out": [rename(g, i) for i in range(len(layout))]},
                       {"sections": sections, "axis": 0}, role="backward", infer=False)
    blocks = [rename(p.name, i) for i in range(len(layout))]
    main.append_op("concat", {"X": blocks}, {"Out": [p.name]}, {"axis": 0}, role="optimize", infer=False)
    # the startup program: each sliced or copied var is initialized block by block
    for n in sorted(sliced | copied):
        init = [k for k, op in enumerate(startup.ops) if n in op.output_arg_names]
        if not init:
            continue
        at, op = init[0], startup.ops[init[0]]
        whole = main.var(n).shape
        startup.remove_op(at)
        for i, (off, rows) in enumerate(layout):
            bv = _block_var(startup, main.var(n), i, off, rows if n in sliced else None)
            attrs = _slice_init_op(op, bv.name, bv.shape, off if n in sliced else None, whole)
            startup.insert_op(at + i, op.type, op.inputs, {"Out": [bv.name]}, attrs, role=op.role, infer=False)
    startup.append_op("concat", {"X": blocks}, {"Out": [p.name]}, {"axis": 0}, role="init", infer=False)
    for n in (sliced | copied) - {p.name} - set(outside):  # whole state vars nobody uses now
        main.remove_var(n)
        startup.remove_var(n)


def slice_params(job: Job, ctx) -> PassResult:
    job = job.copy()
    if not ctx.slice_var_up or len(ctx.pservers) <= 1:
        return PassResult(job, False)
    main = job.main.global_block()
    changed = False
    order = []
    for op in main.ops:
        if op.role == "optimize" and op.param and op.param not in order:
            order.append(op.param)
    for name in order:
        p = main.var(name)
        layout = block_layout(p.shape, len(ctx.pservers), ctx.min_block_size)
        if len(layout) > 1:
            _slice_param(job, p, layout)
            changed = True
    job.main._bump()
    job.startup._bump()
    return PassResult(job, changed)
