"""The sparse pass: distributed embedding tables live on the pservers.

A table ``W`` [V, D] marked ``distributed`` (``embedding(is_distributed=True)``) becomes M row
shards, shard k on pserver k holding rows ``k, k+M, k+2M, ...`` (NOTE(row-shards) in
ops/sparse.py says why: frequency-sorted vocabularies put their hot rows first, and striding
spreads them over every pserver). The table never exists whole anywhere, not even at start-up:
each shard is initialized alone (ops/random.py, strided rows). On the trainer::

    ids --split_ids--> ids.shard0..M-1                         (unique ids of each shard)
        --shard_lookup on pserver k (each edge)--> rows.shard k  (only to the trainer that asked)
        --merge_selected_rows--> W@PREFETCH                    (the batch's rows, SelectedRows)
    lookup_table(W@PREFETCH, ids), and in backward W@GRAD (SelectedRows of global rows)
        --shard_selected_rows--> W@GRAD.shard k                 (local rows, to pserver k)

with one prefetch for all the lookups that share W where their ids allow (NOTE(shared-table) in
parts.py); and W's update (merge, optimizer, state) is repeated per shard on its pserver
(``parts.repeat_update``), so only touched rows cross the wire and are updated.
"""
from __future__ import annotations

from placegroup.errors import PassError
from placegroup.ir.variable import DYNAMIC_TABLE
from placegroup.ops.registry import grad_name
from placegroup.transpiler.parts import Part, repeat_update, shard_parts
from placegroup.transpiler.prefetch import prefetch_lookups, read_prefetched
from placegroup.transpiler.passes import Job, PassResult


def _readers(block, name: str) -> list:
    return [op for op in block.ops if name in op.input_arg_names]


def _shard_table(job: Job, w, pservers) -> None:
    main, startup = job.main.global_block(), job.startup.global_block()
    m = len(pservers)
    height = w.shape[0]
    dynamic = w.type == DYNAMIC_TABLE
    # a table keyed by raw ids: shard k holds the ids with mix64(id) % m == k (NOTE(hash-shards)
    # in ops/dynamic.py), its rows made as ids come: no row count (-1)
    parts = [Part(k, k, -1, m, f".shard{k}") for k in range(m)] if dynamic else shard_parts(height, m)
    lookups = [op for op in _readers(main, w.name) if op.role == "forward"]
    if not lookups:
        raise PassError(f"distributed table {w.name!r} is read by no forward op")
    grad = grad_name(w.name)
    outside = repeat_update(job, w, parts)  # W@GRAD, read by the merge or the optimizer
    for part in parts:
        main.var(w.name + part.suffix).attrs["pinned"] = pservers[part.index]  # shard k -> pserver k
        if dynamic:
            for block in (main, startup):
                block.var(w.name + part.suffix).type = DYNAMIC_TABLE
    read_prefetched(main, w.name, prefetch_lookups(main, w, parts, lookups))  # NOTE(shared-table) in prefetch.py
    # backward: the gradient cut into shards of local rows, right after its last writer
    for g in outside:
        if g != grad:
            raise PassError(f"distributed table {w.name!r}: its update reads {g!r} besides its gradient")
        last = max(k for k, op in enumerate(main.ops) if g in op.output_arg_names)
        if dynamic:
            main.insert_op(last + 1, "dynamic_shard_grad", {"X": [g]}, {"Out": [g + part.suffix for part in parts]},
                           {"num_shards": m}, role="backward", infer=False)
        else:
            main.insert_op(last + 1, "shard_selected_rows", {"X": [g]}, {"Out": [g + part.suffix for part in parts]},
                           {"num_shards": m, "height": height}, role="backward", infer=False)
    for block in (main, startup):  # the whole table is gone
        block.remove_var(w.name)


def shard_tables(job: Job, ctx) -> PassResult:
    job = job.copy()
    main = job.main.global_block()
    if not ctx.pservers:
        return PassResult(job, False)
    tables = [v for v in main.vars.values() if v.is_parameter and v.attrs.get("distributed")]
    for w in tables:
        _shard_table(job, w, list(ctx.pservers))
    job.main._bump()
    job.startup._bump()
    return PassResult(job, bool(tables))
