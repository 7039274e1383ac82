"""Embedding lookup: lookup_table (dense here).

NOTE(lookup-ids): ``Ids`` holds int64 row numbers of ``W`` ([V, D]), shaped [N, 1] (Fluid 1.x)
or [N]; a trailing dim of 1 is dropped, so Out is [N, D]. ``padding_idx`` (-1: none; the
layer maps a negative index p to V + p) names a row that reads as zeros and gets no
gradient. An id outside [0, V) is an error naming the id and V: numpy would wrap negative
ids and cupy would read out of bounds.

NOTE(lookup-sparse): the gradient is a dense [V, D] array (rows that no id hit are zero).
``is_sparse`` and ``is_distributed`` are accepted and kept on the op for the transpiler; the
SelectedRows gradient they ask for comes with the sparse-update work.
TODO(issue #2): a SelectedRows ``W@GRAD`` when ``is_sparse`` is set.
"""
from __future__ import annotations

from placegroup.ops.registry import Meta, Slot, check, grad_of, register

_ATTRS = {"is_sparse": False, "is_distributed": False, "padding_idx": -1}


def _out_shape(ids_shape: tuple, dim: int) -> tuple:
    ids_shape = tuple(ids_shape)
    if len(ids_shape) > 1 and ids_shape[-1] == 1:
        ids_shape = ids_shape[:-1]
    return ids_shape + (dim,)


def _infer(ins, a):
    w, ids = ins["W"], ins["Ids"]
    check(len(w.shape) == 2, f"lookup_table: W must be a 2-D table [V, D], got W{list(w.shape)}")
    check(ids.dtype in ("int64", "int32"), f"lookup_table: Ids must be int64, got {ids.dtype}")
    pad = a["padding_idx"]
    check(pad == -1 or 0 <= pad < w.shape[0] or w.shape[0] == -1,
          f"lookup_table: padding_idx {pad} is outside the table W{list(w.shape)}")
    return {"Out": Meta(_out_shape(ids.shape, w.shape[1]), w.dtype)}


def _flat_ids(xp, ids, rows: int):
    flat = ids.reshape(-1)
    bad = (flat < 0) | (flat >= rows)
    if bool(bad.any()):  # See NOTE(lookup-ids).
        v = int(flat[bad][0])
        raise IndexError(f"lookup_table: id {v} is out of range for a table of {rows} rows "
                         f"(valid ids are 0..{rows - 1})")
    return flat


@register("lookup_table", ins=("W", Slot("Ids", no_grad=True)), outs=("Out",), attrs=_ATTRS,
          infer=_infer, grad=grad_of(("W",)))
def lookup_table(xp, ins, a):
    """Out[i] = W[Ids[i]], zeros where Ids[i] == padding_idx (NOTE(lookup-ids))."""
    w, ids = ins["W"], ins["Ids"]
    flat = _flat_ids(xp, ids, w.shape[0])
    out = w[flat]
    if a["padding_idx"] != -1:
        out = xp.where((flat == a["padding_idx"])[:, None], xp.zeros_like(out), out)
    return {"Out": out.reshape(_out_shape(ids.shape, w.shape[1]))}


@register("lookup_table_grad", ins=("W", "Ids", "Out@GRAD"), outs=("W@GRAD",), attrs=_ATTRS,
          role="backward")
def lookup_table_grad(xp, ins, a):
    # NOTE(lookup-sparse): dense. Repeated ids add up (scatter-add), the padding row gets none.
    w, ids, g = ins["W"], ins["Ids"], ins["Out@GRAD"]
    flat = _flat_ids(xp, ids, w.shape[0])
    g = g.reshape(-1, w.shape[1])
    if a["padding_idx"] != -1:
        g = xp.where((flat == a["padding_idx"])[:, None], xp.zeros_like(g), g)
    dw = xp.zeros_like(w)
    _scatter_add(xp, dw, flat, g)
    return {"W@GRAD": dw}


def _scatter_add(xp, dst, idx, src) -> None:
    """dst[idx[i]] += src[i] with repeats adding up (numpy and cupy >= 13 have ``add.at``)."""
    at = getattr(xp.add, "at", None)
    if at is not None:
        at(dst, idx, src)
    else:  # older cupy
        import cupyx

        cupyx.scatter_add(dst, idx, src)
