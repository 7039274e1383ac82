"""Prefetching a table's rows by id: what the slice and sparse passes put on a trainer for a
parameter that only lookups read.

A trainer asks each part of ``w`` (its row blocks or shards, parts.py) for the rows its batch's
ids name, once per distinct id, and the lookups read those rows instead of ``w``
(NOTE(shared-table), NOTE(block-prefetch) in slice.py). A table keyed by raw ids takes the same
path with its own two ops (NOTE(hash-shards) in ops/dynamic.py).
"""
from __future__ import annotations

from placegroup.ir.variable import DYNAMIC_TABLE
from placegroup.transpiler.parts import Part


def ids_of(op, w: str) -> str | None:
    """The ids var by whose rows ``op`` reads table ``w`` (its OpDef's ``Slot.rows_by``: a
    lookup or its gradient), or None where the op reads ``w`` otherwise."""
    for slot, names in op.inputs.items():
        by = op.opdef.slot(slot).rows_by if w in names else None
        if by:
            return op.input(by)[0]
    return None


def prefetch(main, w, ids: list[str], parts: list[Part], at: int, tag: str, lookups: list) -> str:
    """Insert, at op ``at``, ids -> ``split_ids`` -> ``shard_lookup`` on each part (an each edge,
    run where the part lives) -> ``merge_selected_rows``; returns the name of the rows fetched
    (a SelectedRows of ``w``'s global rows). ``ids`` are the id vars whose rows are wanted, each
    distinct id fetched once; ``tag`` keeps the names of several prefetches of ``w`` apart. Parts
    are ``w``'s row shards (stride M) or its blocks (stride 1: NOTE(block-prefetch) in slice.py).
    A table keyed by raw ids (``sparse_embedding``) takes the same path with its own two ops,
    ``dynamic_split_ids`` and ``dynamic_shard_lookup`` (NOTE(hash-shards) in ops/dynamic.py),
    which take from ``lookups`` (the ops the rows are for) whether they only read (``is_test``)
    and the padding id."""
    m, height = len(parts), w.shape[0]
    shard_ids = [main.create_var(f"{ids[0]}@{w.name}{tag}{part.suffix}", shape=[-1, 1], dtype="int64",
                                 stop_gradient=True).name for part in parts]
    rows = [main.create_var(f"{w.name}@ROWS{tag}{part.suffix}", shape=list(w.shape), dtype=w.dtype,
                            type="selected_rows", stop_gradient=True).name for part in parts]
    fetched = main.create_var(f"{w.name}@PREFETCH{tag}", shape=list(w.shape), dtype=w.dtype,
                              type="selected_rows", stop_gradient=True, attrs={"prefetch_of": w.name})
    dynamic, blocks = w.type == DYNAMIC_TABLE, parts[0].stride == 1
    if dynamic:
        pads = {op.attrs["padding_idx"] for op in lookups}
        is_test = all(op.attrs["is_test"] for op in lookups)
        main.insert_op(at, "dynamic_split_ids", {"Ids": list(ids)}, {"Out": shard_ids},
                       {"num_shards": m, "table": w.name, "ids_names": list(ids),
                        "padding_idx": pads.pop() if len(pads) == 1 else -1}, infer=False)
    else:
        main.insert_op(at, "split_ids", {"Ids": list(ids)}, {"Out": shard_ids},
                       {"num_shards": m, "height": height, "table": w.name,
                        "sections": [part.rows for part in parts] if blocks else []}, infer=False)
    for i, part in enumerate(parts):
        kind, attrs = (("dynamic_shard_lookup", {"num_shards": m, "shard_index": part.index, "is_test": is_test})
                       if dynamic else
                       ("shard_lookup", {"num_shards": m, "shard_index": part.index, "height": height,
                                         "block_start": part.offset if blocks else -1}))
        op = main.insert_op(at + 1 + i, kind, {"Ids": [shard_ids[i]], "W": [w.name + part.suffix]},
                            {"Out": [rows[i]]}, attrs, infer=False)
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
        return dict.fromkeys(ids, prefetch(main, w, ids, parts, first, "", lookups))
    rows: dict = {}
    for i, op in enumerate(lookups):
        n = ids_of(op, w.name)
        if n not in rows:
            rows[n] = prefetch(main, w, [n], parts, main.ops.index(op), f"@{i}",
                               [o for o in lookups if ids_of(o, w.name) == n])
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
