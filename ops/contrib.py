"""The ops of Fluid 1.8's ``fluid.contrib.layers`` that placegroup has: ``partial_sum``,
``partial_concat``, ``fused_embedding_seq_pool`` and ``fused_elemwise_activation``, with their
gradients, and ``l1_norm`` (which ``ctr_metric_bundle`` appends).

NOTE(partial-ops): every X is 2-D [N, W] (the same shape). Each input's columns
``[start, start + length)`` are taken, ``start = start_index`` (plus W when negative, which
must land in [0, W)), ``length = W - start`` when -1; the slice must fit in W. partial_sum
adds the slices ([N, length]); partial_concat puts them side by side ([N, len(X) * length]).
A gradient goes back to the columns it came from; the other columns get zeros. Checked against
Fluid 1.8.5, whose partial_sum kernel (unlike its partial_concat) does not add W to a negative
start_index and so reads columns of the row before (row 0 reads outside X): here both ops take
the same columns.

NOTE(fused-emb-pool): fused_embedding_seq_pool is ``lookup_table`` then a "sum"
``sequence_pool``, fused: Ids [T, 1] int64 with a 1-level LoD (the last dim is 1; a shape
[T, k, 1] holds k ids per row, and then Out has k blocks of D side by side, block j summing
column j's embeddings), W [V, D], Out [number of sequences, k * D]; an id equal to
``padding_idx`` (-1: none) adds nothing, an empty sequence gives zeros, and an id outside
[0, V) is an error. Only the "sum" combiner exists, as in Fluid 1.8. The gradient of W is
dense [V, D], or with ``is_sparse`` a SelectedRows whose rows are the ids, row by row, each
carrying its sequence's Out@GRAD block. Padding ids are left out of the sparse gradient too,
so that it scatters to the dense one (NOTE(lookup-sparse) in ops/lookup.py); Fluid 1.8.5's
sparse gradient keeps them, so an optimizer there moves the padding row, which its dense
gradient (zero there) does not.

NOTE(fused-elemwise): fused_elemwise_activation computes, for ``functor_list`` [f0, f1],
``Unary(Binary(X, Y))`` when f1 is the binary one and ``Binary(X, Unary(Y))`` when f0 is;
Binary is elementwise_add or elementwise_mul with Y broadcast into X by ``axis`` as the
elementwise ops do (NOTE(broadcast) in ops/elementwise.py), Unary is scale (times the attr
``scale``), relu, tanh or sigmoid. Fluid 1.8 runs only eight pairs: add+scale, scale+add,
add+relu, relu+add, mul+scale, tanh+add, mul+tanh and mul+sigmoid (another fails at run time
there; here at build time). tanh and sigmoid are Fluid's functors.h forms (sigmoid's input
and tanh's 2x clipped to [-40, 13]). IntermediateOut is the inner result (Binary(X, Y) of X's
shape, or Unary(Y) of Y's shape). Checked against Fluid 1.8.5 for every pair, with Y of X's
shape, of its last dims and at axis 1, and their gradients; one difference: for mul+tanh and
mul+sigmoid with a broadcast Y and ``save_intermediate_out=False``, Fluid 1.8.5's Y@GRAD is
wrong (it recomputes Unary(Y) at the wrong positions; with the intermediate saved it agrees
with this, the chain rule's).
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import OutOfRange
from placegroup.ops.elementwise import _align, _infer as _binary_infer, _unbroadcast
from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, grad_of, register
from placegroup.values import LoDTensor, SelectedRows, as_host, scatter_add

# -- partial_sum / partial_concat (NOTE(partial-ops)) -----------------------------------------


def _span(op: str, width: int, a) -> tuple[int, int]:
    """(start, length) of the columns taken, checked against ``width`` (-1: not known yet)."""
    start, length = a["start_index"], a["length"]
    if width == -1:
        return start, length
    check(-width <= start < width, f"{op}: start_index {start} must be in [{-width}, {width}) for inputs of "
                                   f"width {width}")
    start = start + width if start < 0 else start
    length = width - start if length == -1 else length
    check(length >= 1 and start + length <= width,
          f"{op}: start_index {a['start_index']} and length {a['length']} take columns [{start}, {start + length}), "
          f"which do not fit in width {width}")
    return start, length


def _partial_infer(op: str, concat: bool):
    def infer(ins, a):
        xs = ins["X"]
        check(len(xs) >= 1, f"{op}: X needs at least one input")
        first = xs[0]
        for k, m in enumerate(xs):
            check(len(m.shape) == 2, f"{op}: only 2-D inputs are supported, got X[{k}]{list(m.shape)}")
            check(m.dtype == first.dtype and m.shape[1] == first.shape[1],
                  f"{op}: every X must match X[0] {first.dtype}{list(first.shape)}, "
                  f"got X[{k}] {m.dtype}{list(m.shape)}")
        _, length = _span(op, first.shape[1], a)
        width = -1 if length == -1 else (length * len(xs) if concat else length)
        return {"Out": Meta((first.shape[0], width), first.dtype)}

    return infer


_PARTIAL_ATTRS = {"start_index": 0, "length": -1}


@register("partial_sum", ins=(Slot("X", duplicable=True),), outs=("Out",),
          attrs={**_PARTIAL_ATTRS, "use_mkldnn": False}, infer=_partial_infer("partial_sum", False),
          grad=grad_of(("X",), uses=("X",)))
def partial_sum(xp, ins, a, ctx):
    """Out = sum_i X_i[:, start:start + length] (NOTE(partial-ops))."""
    xs = ins["X"]
    s, n = _span("partial_sum", xs[0].shape[1], a)
    out = xs[0][:, s:s + n].copy()
    for x in xs[1:]:
        out += x[:, s:s + n]
    return {"Out": out}


@register("partial_sum_grad", ins=(Slot("X", duplicable=True), "Out@GRAD"),
          outs=(Slot("X@GRAD", duplicable=True, dispensable=True),), attrs={**_PARTIAL_ATTRS, "use_mkldnn": False},
          role="backward")
def partial_sum_grad(xp, ins, a, ctx):
    xs, g = ins["X"], ins["Out@GRAD"]
    s, n = _span("partial_sum", xs[0].shape[1], a)
    out = []
    for x in xs:
        dx = xp.zeros_like(x)
        dx[:, s:s + n] = g
        out.append(dx)
    return {"X@GRAD": out}


@register("partial_concat", ins=(Slot("X", duplicable=True),), outs=("Out",), attrs=_PARTIAL_ATTRS,
          infer=_partial_infer("partial_concat", True), grad=grad_of(("X",), uses=("X",)))
def partial_concat(xp, ins, a, ctx):
    """Out = [X_0[:, start:start + length], X_1[...], ...] side by side (NOTE(partial-ops))."""
    xs = ins["X"]
    s, n = _span("partial_concat", xs[0].shape[1], a)
    return {"Out": xp.concatenate([x[:, s:s + n] for x in xs], axis=1)}


@register("partial_concat_grad", ins=(Slot("X", duplicable=True), "Out@GRAD"),
          outs=(Slot("X@GRAD", duplicable=True, dispensable=True),), attrs=_PARTIAL_ATTRS, role="backward")
def partial_concat_grad(xp, ins, a, ctx):
    xs, g = ins["X"], ins["Out@GRAD"]
    s, n = _span("partial_concat", xs[0].shape[1], a)
    out = []
    for k, x in enumerate(xs):
        dx = xp.zeros_like(x)
        dx[:, s:s + n] = g[:, k * n:(k + 1) * n]
        out.append(dx)
    return {"X@GRAD": out}


# -- fused_embedding_seq_pool (NOTE(fused-emb-pool)) ------------------------------------------

_FESP_ATTRS = {"combiner": "sum", "padding_idx": -1, "is_sparse": False, "grad_inplace": False}


def _fesp_infer(ins, a):
    w, ids = ins["W"], ins["Ids"]
    check(len(w.shape) == 2, f"fused_embedding_seq_pool: W must be a 2-D table [V, D], got W{list(w.shape)}")
    check(len(ids.shape) >= 2 and ids.shape[-1] == 1,
          f"fused_embedding_seq_pool: Ids must be [T, 1] (its last dim 1), got Ids{list(ids.shape)}")
    check(ids.dtype == "int64", f"fused_embedding_seq_pool: Ids must be int64, got {ids.dtype}")
    check(a["combiner"] == "sum", f"fused_embedding_seq_pool: only the 'sum' combiner exists, got {a['combiner']!r}")
    k = int(np.prod(ids.shape[1:]))
    return {"Out": Meta((-1, -1 if w.shape[1] == -1 or k < 0 else w.shape[1] * k), w.dtype)}


def _fesp_ids(op: str, ids, height: int):
    """(ids as a host [T, k] int64 array, the LoD's offsets) of a LoD Ids."""
    if not isinstance(ids, LoDTensor) or ids.lod_level != 1:
        raise ValueError(f"{op}: Ids must be a LoDTensor with a 1-level LoD (the sequences to pool), "
                         f"got {'a dense array' if not isinstance(ids, LoDTensor) else f'{ids.lod_level} levels'}")
    flat = np.asarray(as_host(ids.data)).astype(np.int64)
    flat = flat.reshape(flat.shape[0], -1)
    if flat.size and (flat.min() < 0 or flat.max() >= height):
        v = int(flat[(flat < 0) | (flat >= height)][0])
        raise OutOfRange(f"{op}: id {v} is out of range for a table of {height} rows (valid ids are 0..{height - 1})")
    return flat, np.asarray(as_host(ids.offsets[0]), dtype=np.int64)


def _seq_of_rows(offsets):
    return np.repeat(np.arange(offsets.shape[0] - 1), np.diff(offsets))


@register("fused_embedding_seq_pool", ins=("W", Slot("Ids", no_grad=True)), outs=("Out",), attrs=_FESP_ATTRS,
          infer=_fesp_infer, lod="drop", wants_lod=("Ids",), grad=grad_of(("W",)))
def fused_embedding_seq_pool(xp, ins, a, ctx):
    """Out[s] = the sum of W[id] over sequence s's ids, per id column (NOTE(fused-emb-pool))."""
    w = ins["W"]
    ids, off = _fesp_ids("fused_embedding_seq_pool", ins["Ids"], w.shape[0])
    n, k, d = off.shape[0] - 1, ids.shape[1], w.shape[1]
    emb = w[xp.asarray(ids.reshape(-1))].reshape(ids.shape[0], k * d)
    pad = a["padding_idx"]
    if pad != -1:
        emb = emb * xp.asarray(np.repeat(ids != pad, d, axis=1).astype(w.dtype))
    out = xp.zeros((n, k * d), dtype=w.dtype)
    scatter_add(xp, out, xp.asarray(_seq_of_rows(off)), emb)
    return {"Out": out}


@register("fused_embedding_seq_pool_grad", ins=("W", "Ids", "Out@GRAD"),
          outs=(Slot("W@GRAD", sparse_if="is_sparse"),), attrs=_FESP_ATTRS, role="backward", wants_lod=("Ids",))
def fused_embedding_seq_pool_grad(xp, ins, a, ctx):
    w, g = ins["W"], ins["Out@GRAD"]
    ids, off = _fesp_ids("fused_embedding_seq_pool_grad", ins["Ids"], w.shape[0])
    d = w.shape[1]
    rows = ids.reshape(-1)
    vals = g[xp.asarray(_seq_of_rows(off))].reshape(-1, d)  # block j of a row's sequence, for its column j
    keep = rows != a["padding_idx"]
    if a["is_sparse"]:
        return {"W@GRAD": SelectedRows(xp.asarray(rows[keep]), vals[xp.asarray(keep)], w.shape[0])}
    dw = xp.zeros_like(w)
    scatter_add(xp, dw, xp.asarray(rows[keep]), vals[xp.asarray(keep)])
    return {"W@GRAD": dw}


# -- fused_elemwise_activation (NOTE(fused-elemwise)) -----------------------------------------

BINARY = ("elementwise_add", "elementwise_mul")
UNARY = ("scale", "relu", "tanh", "sigmoid")
FLUID_PAIRS = ("elementwise_add,scale", "scale,elementwise_add", "elementwise_add,relu", "relu,elementwise_add",
               "elementwise_mul,scale", "tanh,elementwise_add", "elementwise_mul,tanh", "elementwise_mul,sigmoid")
_FEA_ATTRS = {"axis": -1, "scale": 0.0, "save_intermediate_out": False, "functor_list": []}


def _unary(xp, name: str, x, scale: float):
    if name == "scale":
        return x * xp.asarray(scale, dtype=x.dtype)
    if name == "relu":
        return xp.maximum(x, 0)
    if name == "tanh":
        return 2 / (1 + xp.exp(-xp.clip(2 * x, -40, 13))) - 1
    return 1 / (1 + xp.exp(-xp.clip(x, -40, 13)))


def _unary_grad(name: str, g, x, y, scale: float):
    """dUnary at input x (output y) times g."""
    if name == "scale":
        return g * scale
    if name == "relu":
        return g * (x > 0)
    if name == "tanh":
        return g * (1 - y * y)
    return g * y * (1 - y)


def _fea_infer(ins, a):
    fl = list(a["functor_list"])
    check(",".join(fl) in FLUID_PAIRS,
          f"fused_elemwise_activation: functor_list {fl} is not one of the pairs Fluid 1.8 runs: {list(FLUID_PAIRS)}")
    x, y = ins["X"], ins["Y"]
    check(len(x.shape) >= len(y.shape), f"fused_elemwise_activation: Y{list(y.shape)} must broadcast into "
                                        f"X{list(x.shape)} (Y may not have more dims)")
    out = _binary_infer(ins, {"axis": a["axis"]})["Out"]
    inter = out if fl[1] in BINARY else y
    return {"Out": out, "IntermediateOut": Meta(tuple(inter.shape), x.dtype)}


def _fea_parts(xp, ins, a):
    """(binary, unary, whether Unary(Binary(...)), Y aligned to X) of one op."""
    f0, f1 = a["functor_list"]
    outer_unary = f1 in BINARY
    binary, unary = (f1, f0) if outer_unary else (f0, f1)
    return binary, unary, outer_unary, _align(ins["Y"], ins["X"].ndim, a["axis"])


def _fea_grad(op):
    need = [s for s in ("X", "Y") if op.inputs[s][0] in op.need]
    if not need:
        return []
    ins = {"X": list(op.inputs["X"]), "Y": list(op.inputs["Y"]), "Out": list(op.outputs["Out"]),
           "Out@GRAD": [grad_name(op.outputs["Out"][0])]}
    outs = {s + "@GRAD": [op.grad_of(op.inputs[s][0])] for s in need}
    return [OpSpec("fused_elemwise_activation_grad", ins, outs, dict(op.attrs))]


@register("fused_elemwise_activation", ins=("X", "Y"), outs=("Out", Slot("IntermediateOut", dispensable=True)),
          attrs=_FEA_ATTRS, infer=_fea_infer, grad=_fea_grad)
def fused_elemwise_activation(xp, ins, a, ctx):
    """Unary(Binary(X, Y)) or Binary(X, Unary(Y)) (NOTE(fused-elemwise))."""
    binary, unary, outer_unary, y = _fea_parts(xp, ins, a)
    x = ins["X"]
    op = xp.add if binary == "elementwise_add" else xp.multiply
    if outer_unary:
        inter = op(x, y)
        out = _unary(xp, unary, inter, a["scale"])
    else:
        inter = _unary(xp, unary, ins["Y"], a["scale"])
        out = op(x, _align(inter, x.ndim, a["axis"]))
    res = {"Out": out.astype(x.dtype, copy=False)}
    if "IntermediateOut" in ctx.outputs:
        res["IntermediateOut"] = inter.astype(x.dtype, copy=False)
    return res


@register("fused_elemwise_activation_grad", ins=("X", "Y", "Out", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), attrs=_FEA_ATTRS,
          role="backward")
def fused_elemwise_activation_grad(xp, ins, a, ctx):
    binary, unary, outer_unary, ya = _fea_parts(xp, ins, a)
    x, y, out, g = ins["X"], ins["Y"], ins["Out"], ins["Out@GRAD"]
    add = binary == "elementwise_add"
    if outer_unary:
        inter = x + ya if add else x * ya
        d = _unary_grad(unary, g, inter, out, a["scale"])
        dx, dy = (d, d) if add else (d * ya, d * x)
    else:
        u = _unary(xp, unary, ya, a["scale"])
        dx = g if add else g * u
        dy = _unary_grad(unary, g if add else g * x, ya, u, a["scale"])
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = _unbroadcast(xp, xp.broadcast_to(dx, out.shape), x.shape, x.shape).astype(x.dtype, copy=False)
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = _unbroadcast(xp, xp.broadcast_to(dy, out.shape), y.shape, ya.shape).astype(y.dtype, copy=False)
    return res


# -- l1_norm ----------------------------------------------------------------------------------


@register("l1_norm", ins=("X",), outs=("Out",), infer=lambda ins, a: {"Out": Meta((1,), ins["X"].dtype)},
          grad=grad_of(("X",)))
def l1_norm(xp, ins, a, ctx):
    """Out [1] = sum(|X|)."""
    x = ins["X"]
    return {"Out": xp.abs(x).sum().reshape(1).astype(x.dtype, copy=False)}


@register("l1_norm_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), role="backward")
def l1_norm_grad(xp, ins, a, ctx):
    x = ins["X"]
    return {"X@GRAD": (xp.sign(x) * ins["Out@GRAD"].reshape(())).astype(x.dtype, copy=False)}
