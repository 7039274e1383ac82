"""Embedding lookup: lookup_table and lookup_table_v2, with a dense or a SelectedRows gradient.

``lookup_table_v2`` (``fluid.embedding``) is the same lookup without dropping a trailing dim
of 1: Ids [N, 1] give Out [N, 1, D], Ids [N] give [N, D].

NOTE(lookup-ids): ``Ids`` holds int64 row numbers of ``W`` ([V, D]), shaped [N, 1] (Fluid 1.x)
or [N]; a trailing dim of 1 is dropped, so Out is [N, D]. ``padding_idx`` (-1: none; the
layer maps a negative index p to V + p) names a row that reads as zeros and gets no
gradient. An id outside [0, V) is an error naming the id and V: numpy would wrap negative
ids and cupy would read out of bounds. An empty batch (Ids [0, 1]) gives Out [0, D].

NOTE(lookup-sparse): with ``is_sparse`` the gradient ``W@GRAD`` is a ``SelectedRows``
(placegroup/values.py): rows = the batch's ids flattened, in batch order, repeats kept (the
optimizer merges them), values = the matching rows of ``Out@GRAD``, height = V. Ids equal
to ``padding_idx`` are left out, so the sparse gradient scattered to dense is exactly the
dense gradient (which gives the padding row none). Without ``is_sparse`` the gradient is a
dense [V, D] array, zero in the rows no id hit. ``is_distributed`` only marks the op for the
transpiler's sparse pass.

NOTE(lookup-prefetched): ``W`` may itself be a SelectedRows: the rows of a sharded table a
trainer prefetched (``split_ids -> shard_lookup -> merge_selected_rows``, ops/sparse.py).
Each id is then found among ``W.rows`` (height = V still bounds the ids); an id that was not
prefetched is an error naming it, since reading a zero row instead would train silently
wrong. The padding id needs no prefetched row. The gradient is as above, over the global
rows, so the sparse pass can route it to the shards with ``shard_selected_rows``.
"""
from __future__ import annotations

from placegroup.errors import OutOfRange  # a user's data, not a bug: one line (NOTE(user-errors))
from placegroup.ops.registry import Meta, Slot, check, grad_of, register
from placegroup.values import SelectedRows, is_selected_rows, scatter_add

_ATTRS = {"is_sparse": False, "is_distributed": False, "padding_idx": -1}
_W = Slot("W", rows_by="Ids")  # a lookup and its gradient read only the rows Ids names


def _out_shape(ids_shape: tuple, dim: int) -> tuple:
    ids_shape = tuple(ids_shape)
    if len(ids_shape) > 1 and ids_shape[-1] == 1:
        ids_shape = ids_shape[:-1]
    return ids_shape + (dim,)


def _infer(ins, a, v2: bool = False):
    w, ids = ins["W"], ins["Ids"]
    check(len(w.shape) == 2, f"lookup_table: W must be a 2-D table [V, D], got W{list(w.shape)}")
    check(ids.dtype in ("int64", "int32"), f"lookup_table: Ids must be int64, got {ids.dtype}")
    pad = a["padding_idx"]
    check(pad == -1 or 0 <= pad < w.shape[0] or w.shape[0] == -1,
          f"lookup_table: padding_idx {pad} is outside the table W{list(w.shape)}")
    shape = tuple(ids.shape) + (w.shape[1],) if v2 else _out_shape(ids.shape, w.shape[1])
    return {"Out": Meta(shape, w.dtype)}


def _flat_ids(xp, ids, rows: int):
    flat = ids.reshape(-1)
    if flat.shape[0] and (int(flat.min()) < 0 or int(flat.max()) >= rows):  # See NOTE(lookup-ids).
        v = int(flat[(flat < 0) | (flat >= rows)][0])
        raise OutOfRange(f"lookup_table: id {v} is out of range for a table of {rows} rows (valid ids "
                         f"are 0..{rows - 1}): check the ids fed, or give the table more rows")
    return flat


def _prefetched_positions(xp, w: SelectedRows, flat, pad: int):
    """Index into ``w.values`` of each id (NOTE(lookup-prefetched)); the padding id maps to 0.
    The rows are indexed once per prefetched W (NOTE(row-index) in placegroup/values.py)."""
    pos, found = w.positions(flat)
    if bool(found.all()):
        return pos
    missing = ~found & (flat != pad)
    if bool(missing.any()):
        v = int(flat[missing][0])
        raise IndexError(f"lookup_table: id {v} is not among the {w.rows.shape[0]} rows prefetched into W (a "
                         f"SelectedRows of a table of {w.height} rows); prefetch every id of the "
                         f"batch before the lookup")
    return xp.where(found, pos, 0)


@register("lookup_table", ins=(_W, Slot("Ids", no_grad=True)), outs=("Out",), attrs=_ATTRS,
          infer=_infer, grad=grad_of(("W",)))
def lookup_table(xp, ins, a, ctx):
    """Out[i] = W[Ids[i]], zeros where Ids[i] == padding_idx (NOTE(lookup-ids)); ``W`` may be
    a dense table or the prefetched rows of one (NOTE(lookup-prefetched))."""
    w, ids = ins["W"], ins["Ids"]
    dim, pad = w.shape[1], a["padding_idx"]
    flat = _flat_ids(xp, ids, w.shape[0])
    if is_selected_rows(w):
        idx = _prefetched_positions(xp, w, flat, pad)
        table = w.values
        if table.shape[0] == 0:  # nothing prefetched: every id is the padding id (or none)
            return {"Out": xp.zeros(_out_shape(ids.shape, dim), dtype=table.dtype)}
    else:
        idx, table = flat, w
    out = xp.take(table, idx, axis=0)  # 2.5x quicker than table[idx] on numpy
    if pad != -1:
        out = xp.where((flat == pad)[:, None], xp.zeros_like(out), out)
    return {"Out": out.reshape(_out_shape(ids.shape, dim))}


@register("lookup_table_grad", ins=(_W, "Ids", "Out@GRAD"),
          outs=(Slot("W@GRAD", sparse_if="is_sparse"),), attrs=_ATTRS, role="backward")
def lookup_table_grad(xp, ins, a, ctx):
    """W@GRAD: a SelectedRows over the batch's ids with ``is_sparse``, else dense; repeated
    ids add up, padding ids give nothing (NOTE(lookup-sparse))."""
    w, ids, g = ins["W"], ins["Ids"], ins["Out@GRAD"]
    height, dim, pad = w.shape[0], w.shape[1], a["padding_idx"]
    flat = _flat_ids(xp, ids, height)
    g = g.reshape(-1, dim)
    if a["is_sparse"]:
        if pad != -1:
            keep = flat != pad
            flat, g = flat[keep], g[keep]
        return {"W@GRAD": SelectedRows(flat, g, height)}
    if pad != -1:
        g = xp.where((flat == pad)[:, None], xp.zeros_like(g), g)
    dw = xp.zeros((height, dim), dtype=w.dtype)
    scatter_add(xp, dw, flat, g)
    return {"W@GRAD": dw}


@register("lookup_table_v2", ins=(_W, Slot("Ids", no_grad=True)), outs=("Out",), attrs=_ATTRS,
          infer=lambda ins, a: _infer(ins, a, v2=True), grad=grad_of(("W",)))
def lookup_table_v2(xp, ins, a, ctx):
    """Out[..., :] = W[Ids[...]]: ``lookup_table`` keeping every dim of Ids."""
    out = lookup_table(xp, ins, a, ctx)["Out"]
    return {"Out": out.reshape(tuple(ins["Ids"].shape) + (out.shape[-1],))}


@register("lookup_table_v2_grad", ins=(_W, "Ids", "Out@GRAD"),
          outs=(Slot("W@GRAD", sparse_if="is_sparse"),), attrs=_ATTRS, role="backward")
def lookup_table_v2_grad(xp, ins, a, ctx):
    """As ``lookup_table_grad``: Out@GRAD's rows line up with the flattened Ids."""
    return lookup_table_grad(xp, ins, a, ctx)
