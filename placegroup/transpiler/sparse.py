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

with one prefetch per lookup when several lookups share W (NOTE(shared-table)); and W's update
(merge, optimizer, state) is repeated per shard on its pserver
(``parts.repeat_update``), so only touched rows cross the wire and are updated.
"""
from __future__ import annotations

from placegroup.errors import PassError
from placegroup.ops.registry import grad_name
from placegroup.transpiler.parts import repeat_update, shard_parts
from placegroup.transpiler.passes import Job, PassResult


def _readers(block, name: str) -> list:
    return [op for op in block.ops if name in op.input_arg_names]


def _prefetch(main, w, ids, parts, lookup, tag: str) -> str:
    """Insert ids -> split_ids -> shard_lookup per shard -> merge_selected_rows right before
    ``lookup``; returns the name of the prefetched rows (``tag`` keeps each lookup's names apart)."""
    m, height = len(parts), w.shape[0]
    at = main.ops.index(lookup)
    shard_ids = [main.create_var(f"{ids.name}@{w.name}{tag}{part.suffix}", shape=[-1, 1], dtype="int64",
                                 stop_gradient=True).name for part in parts]
    rows = [main.create_var(f"{w.name}@ROWS{tag}{part.suffix}", shape=list(w.shape), dtype=w.dtype,
                            type="selected_rows", stop_gradient=True).name for part in parts]
    prefetched = main.create_var(f"{w.name}@PREFETCH{tag}", shape=list(w.shape), dtype=w.dtype,
                                 type="selected_rows", stop_gradient=True)
    main.insert_op(at, "split_ids", {"Ids": [ids]}, {"Out": shard_ids},
                   {"num_shards": m, "height": height, "table": w.name}, infer=False)
    for i, part in enumerate(parts):
        op = main.insert_op(at + 1 + i, "shard_lookup", {"Ids": [shard_ids[i]], "W": [w.name + part.suffix]},
                            {"Out": [rows[i]]}, {"num_shards": m, "shard_index": part.index, "height": height},
                            infer=False)
        op.edges["Ids"] = "each"
        op.param = w.name + part.suffix
    main.insert_op(at + 1 + m, "merge_selected_rows", {"X": rows}, {"Out": [prefetched]}, infer=False)
    return prefetched.name


def _shard_table(job: Job, w, pservers) -> None:
    main, startup = job.main.global_block(), job.startup.global_block()
    m = len(pservers)
    height = w.shape[0]
    parts = shard_parts(height, m)
    lookups = [op for op in _readers(main, w.name) if op.role == "forward"]
    if not lookups:
        raise PassError(f"distributed table {w.name!r} is read by no forward op")
    grad = grad_name(w.name)
    outside = repeat_update(job, w, parts)  # W@GRAD, read by the merge or the optimizer
    for part in parts:
        main.var(w.name + part.suffix).attrs["pinned"] = pservers[part.index]  # shard k -> pserver k
    # NOTE(shared-table): a table shared by several lookups (a CTR script's 26 id slots) gets one
    # prefetch per lookup, its vars tagged with the lookup's index; each lookup's gradient is a
    # SelectedRows part that append_backward already sums into W@GRAD (NOTE(sum-sparse)), and
    # that sum is what is cut into shards below. One prefetch per lookup keeps each chain next to
    # its lookup (the ids of a later slot may be computed after an earlier lookup).
    prefetched = {}  # ids var name -> the prefetched rows of a lookup over those ids
    for i, lookup in enumerate(lookups):
        tag = "" if len(lookups) == 1 else f"@{i}"
        ids = main.var(lookup.input("Ids")[0])
        if ids.name not in prefetched:  # two lookups of the same ids share one prefetch
            prefetched[ids.name] = _prefetch(main, w, ids, parts, lookup, tag)
        lookup.inputs = {k: [prefetched[ids.name] if n == w.name else n for n in v] for k, v in lookup.inputs.items()}
    # every other trainer-side read of W (a lookup's grad, which reads W for its shape) reads
    # the rows prefetched over its ids, else the first lookup's (any holds W's shape)
    first = next(iter(prefetched.values()))
    for op in _readers(main, w.name):
        if op.param is None:
            rows = prefetched.get((op.inputs.get("Ids") or [None])[0], first)
            op.inputs = {k: [rows if n == w.name else n for n in v] for k, v in op.inputs.items()}
    # backward: the gradient cut into shards of local rows, right after its last writer
    for g in outside:
        if g != grad:
            raise PassError(f"distributed table {w.name!r}: its update reads {g!r} besides its gradient")
        last = max(k for k, op in enumerate(main.ops) if g in op.output_arg_names)
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
