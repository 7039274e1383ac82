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
trainer (``split``/``concat`` for blocks, prefetch for shards). Facts are typed attrs:
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


def ids_of(op, w: str) -> str | None:
    """The ids var by whose rows ``op`` reads table ``w`` (its OpDef's ``Slot.rows_by``: a
    lookup or its gradient), or None where the op reads ``w`` otherwise."""
    for slot, names in op.inputs.items():
        by = op.opdef.slot(slot).rows_by if w in names else None
        if by:
            return op.input(by)[0]
    return None


def prefetch(main, w, ids: list[str], parts: list[Part], at: int, tag: str) -> str:
    """Insert, at op ``at``, ids -> ``split_ids`` -> ``shard_lookup`` on each part (an each edge,
    run where the part lives) -> ``merge_selected_rows``; returns the name of the rows fetched
    (a SelectedRows of ``w``'s global rows). ``ids`` are the id vars whose rows are wanted, each
    distinct id fetched once; ``tag`` keeps the names of several prefetches of ``w`` apart. Parts
    are ``w``'s row shards (stride M) or its blocks (stride 1: NOTE(block-prefetch) in slice.py)."""
    m, height = len(parts), w.shape[0]
    blocks = parts[0].stride == 1
    shard_ids = [main.create_var(f"{ids[0]}@{w.name}{tag}{part.suffix}", shape=[-1, 1], dtype="int64",
                                 stop_gradient=True).name for part in parts]
    rows = [main.create_var(f"{w.name}@ROWS{tag}{part.suffix}", shape=list(w.shape), dtype=w.dtype,
                            type="selected_rows", stop_gradient=True).name for part in parts]
    fetched = main.create_var(f"{w.name}@PREFETCH{tag}", shape=list(w.shape), dtype=w.dtype,
                              type="selected_rows", stop_gradient=True, attrs={"prefetch_of": w.name})
    main.insert_op(at, "split_ids", {"Ids": list(ids)}, {"Out": shard_ids},
                   {"num_shards": m, "height": height, "table": w.name,
                    "sections": [part.rows for part in parts] if blocks else []}, infer=False)
    for i, part in enumerate(parts):
        op = main.insert_op(at + 1 + i, "shard_lookup", {"Ids": [shard_ids[i]], "W": [w.name + part.suffix]},
                            {"Out": [rows[i]]}, {"num_shards": m, "shard_index": part.index, "height": height,
                                                 "block_start": part.offset if blocks else -1}, infer=False)
        op.edges["Ids"] = "each"
        op.param = w.name + part.suffix
    main.insert_op(at + 1 + m, "merge_selected_rows", {"X": rows}, {"Out": [fetched]}, infer=False)
    return fetched.name


def prefetch_lookups(main, w, parts: list[Part], lookups: list) -> dict:
    """Prefetches for ``lookups`` of ``w`` (forward lookup ops, in program order); returns ids
    var -> the rows fetched for it.

    NOTE(shared-table): a table shared by several lookups (a CTR script's 26 id slots of one
    ``SparseFeatFactors``) is prefetched once for all of them when every lookup's ids are ready
    before the first lookup (fed, as slots are): one ``split_ids`` over all the ids, one
    ``shard_lookup`` per part, each distinct id fetched once a step, and one row index that
    every lookup reads (NOTE(row-index) in placegroup/values.py). Where some lookup's ids are
    computed after an earlier lookup, each lookup prefetches its own ids right before it, its
    vars tagged with the lookup's index. Either way the lookups' SelectedRows gradients are
    what ``append_backward`` sums into ``W@GRAD`` (NOTE(sum-sparse))."""
    ids = list(dict.fromkeys(ids_of(op, w.name) for op in lookups))
    first = main.ops.index(lookups[0])
    last_writer = {n: k for k, op in enumerate(main.ops) for n in op.output_arg_names}
    if all(last_writer.get(n, -1) < first for n in ids):
        return dict.fromkeys(ids, prefetch(main, w, ids, parts, first, ""))
    rows: dict = {}
    for i, op in enumerate(lookups):
        n = ids_of(op, w.name)
        if n not in rows:
            rows[n] = prefetch(main, w, [n], parts, main.ops.index(op), f"@{i}")
    return rows


def read_prefetched(main, w: str, rows: dict) -> None:
    """Every op of ``main`` that reads ``w`` besides its update (the lookups, and their
    gradients) reads the rows prefetched over its ids instead (else any prefetch's: all hold
    W's shape)."""
    any_rows = next(iter(rows.values()))
    for op in main.ops:
        if w in op.input_arg_names and op.param is None:
            fetched = rows.get(ids_of(op, w), any_rows)
            op.inputs = {k: [fetched if n == w else n for n in v] for k, v in op.inputs.items()}


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
