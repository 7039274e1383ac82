"""Splitting a parameter's update into parts: what the slice and sparse passes share.

A *part* of parameter ``p`` is a set of its rows: a contiguous block (the slice pass's row
blocks: stride 1) or a strided shard (an embedding table's rows ``k, k+M, k+2M, ...``: stride M).
``repeat_update`` repeats every op of ``p``'s update (the ops whose ``op.param`` is ``p``:
merge, lr scaling, optimizer) once per part, over the part's share of each var:

* ``p`` and every var of ``p``'s shape the update reads or writes (its gradient, the merged
  gradient, moments, velocities) -> ``<name><suffix>``, the part's rows;
* other vars the update writes (beta powers) -> ``<name><suffix>``, a copy per part;
* vars the update only reads (the learning rate) stay shared.

In the startup program each such var's initializer makes only its part, exactly those rows
of what the whole var would have been, by the op's own ``cut`` rule (NOTE(init-cut) in
ops/registry.py: a random op generates just those rows, a constant takes the part's shape, an
``assign_value`` keeps its rows of the array). The caller connects the parts to the
trainer (``split``/``concat`` for blocks, prefetch for shards: prefetch.py). Facts are typed attrs:
``var.attrs["slice_of"] = [p, part index, first row, row stride]``.
"""
from __future__ import annotations

import dataclasses
import math

from placegroup.errors import PassError
from placegroup.ops.registry import Cut


@dataclasses.dataclass(frozen=True)
class Part:
    index: int
    offset: int   # the first row of the whole var in this part
    rows: int     # how many rows
    stride: int   # 1: a block of consecutive rows; M: every M-th row (a shard)
    suffix: str   # ".block0", ".shard1"


def _part_var(block, var, part: Part, sliced: bool):
    name = var.name + part.suffix
    if block.has_var(name):
        return block.var(name)
    shape = [part.rows] + list(var.shape[1:]) if sliced else list(var.shape)
    attrs = {**var.attrs, "slice_of": [var.name, part.index, part.offset if sliced else -1,
                                       part.stride if sliced else 0]}
    if var.is_parameter:
        return block.create_parameter(name, shape, var.dtype, trainable=var.trainable,
                                      optimize_attr=var.optimize_attr, attrs=attrs)
    return block.create_var(name, shape=shape, dtype=var.dtype, persistable=var.persistable,
                            stop_gradient=var.stop_gradient, type=var.type, attrs=attrs)


def _part_init_attrs(op, shape, part: Part | None, var: str) -> dict:
    """Attrs of initializer ``op`` changed to make only ``part`` of ``var`` (None: a copy), by
    the op's own rule (NOTE(init-cut) in ops/registry.py)."""
    if part is None:
        return dict(op.attrs)
    if not op.opdef.is_initializer or op.opdef.cut is None:
        raise PassError(f"{var!r} is split into parts ({var}{part.suffix}, ...), but its startup op `{op.type}` "
                        f"is not an initializer that can make a part alone (its OpDef has no `cut`); give "
                        f"the op one, or initialize {var!r} with another initializer")
    try:
        return op.opdef.cut(dict(op.attrs), Cut.rows(shape, part.offset, part.stride))
    except ValueError as e:
        raise PassError(f"{var!r}, part {part.suffix[1:]} (rows {part.offset}, step {part.stride}): "
                        f"its startup op `{op.type}`: {e}") from None


def repeat_update(job, p, parts: list[Part]) -> list[str]:
    """Repeat ``p``'s update per part (module docstring); returns the vars of ``p``'s shape the
    update reads but other ops write (the gradients the caller must cut into parts)."""
    main, startup = job.main.global_block(), job.startup.global_block()
    group = [op for op in main.ops if op.param == p.name]
    touched = {n for op in group for n in op.input_arg_names + op.output_arg_names}
    written = {n for op in group for n in op.output_arg_names}
    sliced = {n for n in touched if main.var(n).shape == p.shape}
    copied = written - sliced
    outside = sorted(n for n in sliced if n != p.name and n not in written)

    def rename(n: str, part: Part) -> str:
        return n + part.suffix if n in sliced or n in copied else n

    for part in parts:
        for n in sorted(sliced | copied):
            _part_var(main, main.var(n), part, n in sliced)
    for op in group:
        at = main.ops.index(op)
        main.ops.remove(op)
        for i, part in enumerate(parts):
            new = main.insert_op(at + i, op.type, {k: [rename(n, part) for n in v] for k, v in op.inputs.items()},
                                 {k: [rename(n, part) for n in v] for k, v in op.outputs.items()},
                                 op.attrs, role=op.role, infer=False)
            new.edges, new.param = dict(op.edges), p.name + part.suffix
    for op in main.ops:  # an op outside the update reading a per-part value takes every part
        if op.param is None or op.param not in {p.name + part.suffix for part in parts}:
            _read_all_parts(op, copied, parts)
    for n in sorted(sliced | copied):
        init = [k for k, op in enumerate(startup.ops) if n in op.output_arg_names]
        if not init:
            continue
        at, op = init[0], startup.ops[init[0]]
        startup.remove_op(at)
        for i, part in enumerate(parts):
            pv = _part_var(startup, main.var(n), part, n in sliced)
            attrs = _part_init_attrs(op, pv.shape, part if n in sliced else None, n)
            startup.insert_op(at + i, op.type, op.inputs, {"Out": [pv.name]}, attrs, role=op.role, infer=False)
    for n in (sliced | copied) - {p.name} - set(outside):  # whole state vars nobody uses now
        main.remove_var(n)
        startup.remove_var(n)
    return outside


def _read_all_parts(op, copied: set, parts: list[Part]) -> None:
    """``op`` reads the parts' values in place of the whole value (a global-norm clip's
    factor reads each block's squared norm: NOTE(clip-placement) in placegroup/model/clip.py)."""
    for slot, names in op.inputs.items():
        if not copied & set(names):
            continue
        if not op.opdef.slot(slot).duplicable:
            raise PassError(f"op `{op.type}` reads {sorted(copied & set(names))} in its slot {slot!r}, "
                            f"which holds one var; the update that writes it is split into "
                            f"{len(parts)} parts, so the op would need all of them")
        op.inputs[slot] = [m for n in names for m in ([n + part.suffix for part in parts] if n in copied else [n])]


def block_parts(shape, n_pservers: int, min_block_size: int) -> list[Part]:
    """The slice pass's blocks: ``count = min(ceil(numel / min_block_size), #pservers)``, whole
    rows."""
    rows = int(shape[0]) if shape else 1
    numel = math.prod(shape) if shape else 1
    count = max(1, min(math.ceil(numel / min_block_size), n_pservers, rows))
    block_rows = math.ceil(rows / count)
    count = math.ceil(rows / block_rows)
    return [Part(i, i * block_rows, min(block_rows, rows - i * block_rows), 1, f".block{i}")
            for i in range(count)]


def shard_parts(rows: int, n_shards: int) -> list[Part]:
    """Row shards: shard k holds rows ``k, k + n, k + 2n, ...`` (NOTE(row-shards), ops/sparse.py)."""
    return [Part(k, k, len(range(k, rows, n_shards)), n_shards, f".shard{k}") for k in range(n_shards)]
