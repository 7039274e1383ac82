"""The slice pass: big parameters become row blocks spread over the pservers.

Per parameter ``p`` with an optimizer (the ops whose ``op.param`` is ``p``)::

    count      = min(ceil(numel / min_block_size), #pservers)
    block_rows = ceil(rows / count)          # whole rows of dim 0
    count      = ceil(rows / block_rows)     # blocks tile p; all but the last are equal

With ``count > 1`` the update is repeated per block (``parts.repeat_update``). On the trainer,
``split`` cuts the gradient into blocks right after backward writes it, and ``concat`` joins
the updated blocks back into ``p`` at the end of the step (and at the end of the startup
program), so the trainer's ``p`` always holds the latest update, except for a table only
lookups read, whose rows the trainer prefetches (NOTE(block-prefetch)). Tables marked
``distributed`` are left to the sparse pass.
"""
from __future__ import annotations

from placegroup.ops.registry import ROUND_END, grad_name
from placegroup.transpiler.parts import Part, block_parts, repeat_update
from placegroup.transpiler.prefetch import ids_of, prefetch_lookups, read_prefetched
from placegroup.transpiler.passes import Job, PassResult


def block_layout(shape, n_pservers: int, min_block_size: int) -> list[tuple[int, int]]:
    """``[(row_offset, rows)]`` of each block of a var of ``shape`` (``parts.block_parts``)."""
    return [(part.offset, part.rows) for part in block_parts(shape, n_pservers, min_block_size)]


def _slice_param(job: Job, p, parts, lookups: list) -> None:
    main, startup = job.main.global_block(), job.startup.global_block()
    for g in repeat_update(job, p, parts):
        grad = main.var(g)
        last = max(k for k, op in enumerate(main.ops) if g in op.output_arg_names)
        split = "split_selected_rows" if grad.type == "selected_rows" else "split"
        attrs = {"sections": [part.rows for part in parts], "axis": 0}
        if main.ops[last].attrs.get(ROUND_END):  # a round's gradient is cut once per round
            attrs[ROUND_END] = True
        main.insert_op(last + 1, split, {"X": [g]}, {"Out": [g + part.suffix for part in parts]},
                       attrs, role="backward", infer=False)
    if lookups:
        _prefetch_blocks(job, p, parts, lookups)
        return
    blocks = [p.name + part.suffix for part in parts]
    main.append_op("concat", {"X": blocks}, {"Out": [p.name]}, {"axis": 0}, role="optimize", infer=False)
    startup.append_op("concat", {"X": blocks}, {"Out": [p.name]}, {"axis": 0}, role="init", infer=False)


def _row_readers(main, name: str) -> list:
    """The forward ops that read table ``name`` when its gradient is sparse and every op that
    reads it besides its own update reads it by rows (``Slot.rows_by``: lookups and their
    gradients); else []."""
    grad = main.var(grad_name(name)) if main.has_var(grad_name(name)) else None
    if grad is None or grad.type != "selected_rows":
        return []
    readers = [op for op in main.ops if name in op.input_arg_names and op.param != name]
    if not readers or any(ids_of(op, name) is None for op in readers):
        return []
    return [op for op in readers if op.role == "forward"]


def _prefetch_blocks(job: Job, p, parts, lookups: list) -> None:
    """NOTE(block-prefetch): a table sliced into row blocks that only lookups read (an
    ``embedding(is_sparse=True)`` without ``is_distributed``) is not pulled whole into the
    trainer each step, as Fluid does (40 MB a step for a 1M x 10 table): the trainer prefetches
    the rows its batch looks up from the blocks, as it does from a distributed table's shards
    (transpiler/sparse.py), and the lookups read those. The blocks, their update and their
    names are the slice pass's; only the way the trainer reads them changes, so the values every
    lookup sees are the same. Lookups that share the table share one prefetch where they can
    (NOTE(shared-table) in prefetch.py)."""
    main, startup = job.main.global_block(), job.startup.global_block()
    read_prefetched(main, p.name, prefetch_lookups(main, p, parts, lookups))
    # the trainer holds no copy: the var stays in the program, unread and unwritten, so that a
    # trainer's save_persistables still names it and gets it from the blocks (NOTE(save-gather)
    # in executor/executor.py)
    startup.remove_var(p.name)


def _prefetch_whole(job: Job, p, lookups: list) -> None:
    """A table left whole on its pserver (one pserver, or ``slice_var_up=False``) that only
    lookups read is prefetched by rows too, as one block: NOTE(block-prefetch). It stays where
    its update runs and its startup op makes it, and no trainer op reads it now."""
    main = job.main.global_block()
    whole = [Part(0, 0, int(p.shape[0]), 1, "")]
    read_prefetched(main, p.name, prefetch_lookups(main, p, whole, lookups))


def slice_params(job: Job, ctx) -> PassResult:
    job = job.copy()
    if not ctx.pservers:
        return PassResult(job, False)
    slicing = ctx.slice_var_up and len(ctx.pservers) > 1
    main = job.main.global_block()
    changed = False
    order = []
    for op in main.ops:
        if op.role == "optimize" and op.param and op.param not in order:
            order.append(op.param)
    for name in order:
        p = main.var(name)
        if p.attrs.get("distributed") or p.attrs.get("model_parallel"):
            continue
        parts = block_parts(p.shape, len(ctx.pservers), ctx.min_block_size) if slicing else []
        lookups = _row_readers(main, name)
        if len(parts) > 1:
            _slice_param(job, p, parts, lookups)
            changed = True
        elif lookups:
            _prefetch_whole(job, p, lookups)
            changed = True
    job.main._bump()
    job.startup._bump()
    return PassResult(job, changed)
