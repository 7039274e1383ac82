"""Ops over ids and SelectedRows for row-sharded tables: split_ids, shard_lookup,
merge_selected_rows, shard_selected_rows (docs/sparse.md).

NOTE(row-shards): a table of ``height`` rows over ``num_shards`` shards puts global row ``i``
on shard ``i % num_shards``, at local row ``i // num_shards``. Shard ``k`` holds global rows
``k, k + n, k + 2n, ...``: ``shard_rows(height, n, k) = ceil((height - k) / n)`` of them. Rows
are dealt round-robin rather than cut into ranges because vocabularies are usually sorted by
frequency: ranges would put every hot row (small ids) on shard 0, while modulo spreads any
run of consecutive ids evenly.

The trainer side of a prefetch is ``split_ids`` (the batch's unique ids per shard) -> one
``shard_lookup`` per shard, run where the shard lives -> ``merge_selected_rows`` -> the
``lookup_table`` that reads the merged rows (NOTE(lookup-prefetched) in ops/lookup.py). The
gradient goes back through ``shard_selected_rows``, which turns global rows into each shard's
local rows so the pserver's optimizer applies it to its shard as it stands.

Vars holding SelectedRows have ``Variable.type == "selected_rows"`` (the layer or the pass
sets it); their ``Meta`` is the whole var's shape ([height, D]), as ``infer`` gives here.
None of these ops has a gradient: ids are not differentiable, and the sparse pass moves
gradients itself with ``shard_selected_rows``.
"""
from __future__ import annotations

import numpy

from placegroup.errors import OutOfRange  # a user's data, not a bug: one line (NOTE(user-errors))
from placegroup.ops.registry import Meta, Slot, check, register
from placegroup.values import SelectedRows, is_selected_rows, sorted_unique


def shard_rows(height: int, num_shards: int, k: int) -> int:
    """The number of rows of shard ``k`` of a table of ``height`` rows (NOTE(row-shards)).

    Example::

        [shard_rows(10, 3, k) for k in range(3)]   # [4, 3, 3]
    """
    return max(0, -(-(height - k) // num_shards))


def _check_shards(op: str, a, k: int | None = None, height: bool = False) -> None:
    n = a["num_shards"]
    check(isinstance(n, int) and n >= 1, f"{op}: num_shards must be an int >= 1, got {n!r}")
    if height:
        check(isinstance(a["height"], int) and a["height"] >= 1,
              f"{op}: height (the whole table's row count) must be an int >= 1, got {a['height']!r}")
    if k is not None:
        check(0 <= k < n, f"{op}: shard_index {k} must be in 0..{n - 1} (num_shards={n})")


def _check_ids(op: str, ids: Meta) -> None:
    check(ids.dtype in ("int64", "int32"), f"{op}: Ids must be int64, got {ids.dtype}")
    check(len(ids.shape) == 1 or (len(ids.shape) == 2 and ids.shape[1] == 1),
          f"{op}: Ids must be [N, 1] or [N], got Ids{list(ids.shape)}")


def _sr(op: str, slot: str, x) -> SelectedRows:
    if not is_selected_rows(x):
        raise TypeError(f"{op}: {slot} must be a SelectedRows, got a dense {type(x).__name__} "
                        f"of shape {list(getattr(x, 'shape', ()))}")
    return x


# -- split_ids ------------------------------------------------------------------------------


def _split_ids_infer(ins, a):
    for ids in ins["Ids"]:
        _check_ids("split_ids", ids)
    _check_shards("split_ids", a)
    sections = a["sections"]
    check(not sections or (len(sections) == a["num_shards"] and all(r >= 1 for r in sections)),
          f"split_ids: sections {sections} must give num_shards={a['num_shards']} row counts >= 1")
    return {"Out": [Meta((-1, 1), "int64")] * a["num_shards"]}


@register("split_ids", ins=(Slot("Ids", no_grad=True, duplicable=True),), outs=(Slot("Out", duplicable=True),),
          attrs={"num_shards": 1, "height": 0, "table": "", "sections": []}, infer=_split_ids_infer,
          lod="drop")
def split_ids(xp, ins, a, ctx):
    """Out[k] = the sorted unique ids ``i`` of every Ids var with ``i % num_shards == k``, int64
    [n_k, 1] (NOTE(row-shards)); a shard no id falls in gets [0, 1]. With ``sections`` (the row
    counts of a table cut into consecutive blocks, NOTE(block-prefetch)) part k takes the ids of
    block k instead.

    Example: Ids [[5], [2], [5], [0]], num_shards 2 -> Out [[[0], [2]], [[5]]];
    with sections [3, 3]: Out [[[0], [2]], [[5]]] too (block 0 is ids 0..2, block 1 ids 3..5).

    Raises:
        IndexError: for a negative id, or one ``>= height`` when ``height`` is set, naming the
            id and the ``table`` (checked here, on the trainer, before anything is sent).
    """
    n = a["num_shards"]
    flat = xp.concatenate([ids.reshape(-1) for ids in ins["Ids"]]).astype(xp.int64, copy=False)
    uniq = sorted_unique(xp, flat)
    if uniq.shape[0] and (int(uniq[0]) < 0 or (a["height"] and int(uniq[-1]) >= a["height"])):
        bad = int(uniq[0]) if int(uniq[0]) < 0 else int(uniq[-1])
        table = f" {a['table']!r}" if a["table"] else ""
        rows = f" of {a['height']:,} rows" if a["height"] else ""
        raise OutOfRange(f"split_ids: id {bad} is out of range for table{table}{rows}")
    if a["sections"]:  # sorted ids: each block's are one run
        cuts = xp.searchsorted(uniq, xp.asarray(numpy.cumsum(a["sections"])[:-1]))
        return {"Out": [part.reshape(-1, 1) for part in xp.split(uniq, cuts)]}
    shard = uniq % n
    return {"Out": [uniq[shard == k].reshape(-1, 1) for k in range(n)]}


# -- shard_lookup ---------------------------------------------------------------------------

_SHARD_ATTRS = {"num_shards": 1, "shard_index": 0, "height": 0, "block_start": -1}


def _shard_lookup_infer(ins, a):
    w = ins["W"]
    _check_ids("shard_lookup", ins["Ids"])
    _check_shards("shard_lookup", a, a["shard_index"], height=True)
    check(len(w.shape) == 2, f"shard_lookup: W must be a 2-D shard [rows, D], got W{list(w.shape)}")
    if a["block_start"] >= 0:
        return {"Out": Meta((a["height"], w.shape[1]), w.dtype)}
    want = shard_rows(a["height"], a["num_shards"], a["shard_index"])
    check(w.shape[0] in (want, -1),
          f"shard_lookup: shard {a['shard_index']} of {a['num_shards']} of a table of "
          f"{a['height']} rows has {want} rows, but W is {list(w.shape)}")
    return {"Out": Meta((a["height"], w.shape[1]), w.dtype)}


@register("shard_lookup", ins=(Slot("Ids", no_grad=True), "W"), outs=("Out",), attrs=_SHARD_ATTRS,
          infer=_shard_lookup_infer)
def shard_lookup(xp, ins, a, ctx):
    """The pserver side of a prefetch: Out = SelectedRows(rows=Ids, values=W[Ids // num_shards],
    height) where ``W`` is shard ``shard_index`` of the table (NOTE(row-shards)).

    Raises:
        IndexError: for an id outside [0, height) or not of this shard, naming the id, the
            shard and the table's height.
    """
    w, n, k, height = ins["W"], a["num_shards"], a["shard_index"], a["height"]
    flat = ins["Ids"].reshape(-1).astype(xp.int64, copy=False)
    if a["block_start"] >= 0:
        return {"Out": SelectedRows(flat, _block_rows(xp, w, flat, a["block_start"], height), height)}
    local, shard = xp.divmod(flat, n)
    # one pass of cheap checks; the error path works out which id is wrong and why
    if flat.shape[0] and (bool((shard != k).any()) or int(flat.min()) < 0 or int(flat.max()) >= height):
        bad = (flat < 0) | (flat >= height) | (shard != k)
        v = int(flat[bad][0])
        why = (f"is out of range for a table of {height} rows" if not 0 <= v < height
               else f"belongs to shard {v % n}")
        raise IndexError(f"shard_lookup: id {v} {why}, but this is shard {k} of {n} of a table of "
                         f"{height} rows (it holds ids i with i % {n} == {k})")
    if local.shape[0] and int(local.max()) >= w.shape[0]:
        raise IndexError(f"shard_lookup: id {int(flat[local >= w.shape[0]][0])} needs local row "
                         f"{int(local.max())} but shard {k} has {w.shape[0]} rows (expected "
                         f"{shard_rows(height, n, k)} for a table of {height} rows)")
    return {"Out": SelectedRows(flat, w[local], height)}


def _block_rows(xp, w, flat, start: int, height: int):
    """Rows ``flat - start`` of block ``w`` (the block of a table of ``height`` rows that starts
    at row ``start``: NOTE(block-prefetch))."""
    if flat.shape[0] and (int(flat.min()) < start or int(flat.max()) >= start + w.shape[0]):
        bad = int(flat[(flat < start) | (flat >= start + w.shape[0])][0])
        raise IndexError(f"shard_lookup: id {bad} is not in this block of a table of {height} rows "
                         f"(it holds rows {start}..{start + w.shape[0] - 1})")
    return xp.take(w, flat - start, axis=0)


# -- merge_selected_rows --------------------------------------------------------------------


def _merge_infer(ins, a):
    xs = ins["X"]
    for m in xs[1:]:
        check(tuple(m.shape) == tuple(xs[0].shape),
              f"merge_selected_rows: inputs differ in shape: {[list(x.shape) for x in xs]}")
    return {"Out": xs[0]}


def concat_rows(xp, op: str, xs) -> SelectedRows:
    """One SelectedRows holding all of ``xs``'s entries (rows and values concatenated)."""
    xs = [_sr(op, f"X[{i}]", x) for i, x in enumerate(xs)]
    for i, x in enumerate(xs[1:], 1):
        if x.shape != xs[0].shape:
            raise ValueError(f"{op}: X[{i}] is a SelectedRows of shape {list(x.shape)} but X[0] is "
                             f"{list(xs[0].shape)}; all must cover the same var")
    if len(xs) == 1:
        return xs[0]
    weighted = [x.weights is not None for x in xs]
    if any(weighted) and not all(weighted):  # NOTE(sighting-weights) in ops/dynamic.py
        raise ValueError(f"{op}: X[{weighted.index(True)}] carries sighting weights but X[{weighted.index(False)}] "
                         f"does not; a table's gradients must all come from its lookups")
    weights = xp.concatenate([x.weights for x in xs]) if all(weighted) else None
    return SelectedRows(xp.concatenate([x.rows for x in xs]),
                        xp.concatenate([x.values for x in xs]), xs[0].height, weights)


@register("merge_selected_rows", ins=(Slot("X", duplicable=True),), outs=("Out",), infer=_merge_infer)
def merge_selected_rows(xp, ins, a, ctx):
    """Out = the sum of the SelectedRows X[0], X[1], ...: rows sorted unique, the values of a
    row listed more than once (in one input or across inputs) summed."""
    return {"Out": concat_rows(xp, "merge_selected_rows", ins["X"]).merged(xp)}


# -- shard_selected_rows --------------------------------------------------------------------


def _shard_sr_infer(ins, a):
    x = ins["X"]
    _check_shards("shard_selected_rows", a, height=True)
    check(x.shape[0] in (a["height"], -1),
          f"shard_selected_rows: X{list(x.shape)} must cover the whole table of height {a['height']}")
    n = a["num_shards"]
    return {"Out": [Meta((shard_rows(a["height"], n, k),) + tuple(x.shape[1:]), x.dtype) for k in range(n)]}


@register("shard_selected_rows", ins=("X",), outs=(Slot("Out", duplicable=True),),
          attrs={"num_shards": 1, "height": 0}, infer=_shard_sr_infer, role="backward")
def shard_selected_rows(xp, ins, a, ctx):
    """Out[k] = the entries of X on shard k, rows made local (``row // num_shards``), height
    ``shard_rows(height, num_shards, k)`` (NOTE(row-shards)). Entries keep their order and
    repeats; the optimizer merges them. Its role is backward: it only reshapes a gradient.

    Raises:
        ValueError: if X's height is not ``height``.
    """
    x, n, height = _sr("shard_selected_rows", "X", ins["X"]), a["num_shards"], a["height"]
    if x.height != height:
        raise ValueError(f"shard_selected_rows: X is a SelectedRows of height {x.height}, but the "
                         f"table has height {height}")
    local, shard = xp.divmod(x.rows, n)
    outs = []
    for k in range(n):
        keep = shard == k
        outs.append(SelectedRows(local[keep], x.values[keep], shard_rows(height, n, k)))
    return {"Out": outs}


# -- split_selected_rows --------------------------------------------------------------------


def _split_sr_infer(ins, a):
    x = ins["X"]
    sections = list(a["sections"])
    check(a["axis"] == 0 and sections and all(r > 0 for r in sections),
          f"split_selected_rows: splits rows (axis 0) into positive sections, got axis {a['axis']}, "
          f"sections {sections}")
    check(x.shape[0] in (sum(sections), -1),
          f"split_selected_rows: sections {sections} do not add up to X's {x.shape[0]} rows")
    return {"Out": [Meta((r,) + tuple(x.shape[1:]), x.dtype) for r in sections]}


@register("split_selected_rows", ins=("X",), outs=(Slot("Out", duplicable=True),),
          attrs={"sections": [], "axis": 0}, infer=_split_sr_infer, role="backward")
def split_selected_rows(xp, ins, a, ctx):
    """Out[k] = the entries of X in the k-th block of consecutive rows (``sections``), rows made
    local to the block: the gradient of a sparse parameter sliced into row blocks (the slice pass),
    as ``split`` is for a dense one.

    Raises:
        ValueError: if the sections do not add up to X's height.
    """
    x = _sr("split_selected_rows", "X", ins["X"])
    sections = [int(r) for r in a["sections"]]
    if sum(sections) != x.height:
        raise ValueError(f"split_selected_rows: sections {sections} do not add up to X's height {x.height}")
    outs, start = [], 0
    for rows in sections:
        keep = (x.rows >= start) & (x.rows < start + rows)
        # compress, not values[keep]: 4x quicker on a batch's [130k, 10] gradient
        outs.append(SelectedRows(xp.compress(keep, x.rows) - start, xp.compress(keep, x.values, axis=0), rows))
        start += rows
    return {"Out": outs}


__all__ = ["concat_rows", "shard_rows"]
