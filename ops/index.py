"""Indexing ops of Fluid 1.8: gather, gather_nd, scatter, scatter_nd_add, index_select,
index_sample, multiplex, where_index, unique, unique_with_counts, one_hot, arg_max, arg_min,
argsort, cumsum, and the ops that read a var's shape (shape, size, fill_constant_batch_size_like,
fill_any_like, range). Shape ops are in ops/shape.py.

Op types, slots, attrs and defaults are Fluid 1.8's; every kernel is vectorised over ``xp``
(numpy or cupy) and runs on float64 for the gradient checks.

NOTE(index-range): an index outside its dim is an IndexError naming the op, the slot, the
index and the dim, at run time (Paddle reads out of bounds there; numpy would wrap a negative
index). one_hot with ``allow_out_of_range`` gives a row of zeros instead.

NOTE(overwrite): Fluid 1.8's ``overwrite`` decides what a repeated index does. ``scatter``:
True writes the *last* update for a repeated id (ScatterAssign's loop), False zeroes the
rows it names and adds every update. ``gather``: only its gradient reads it; True writes the
last ``Out@GRAD`` row of a repeated index into X@GRAD (Fluid's CPU kernel, *not* the sum),
False adds them (the true gradient). Only the layer's default (True) loses gradient for
repeated indices, exactly as in Fluid 1.8.

NOTE(scatter-grad-1.8): Fluid 1.8's ``scatter_grad`` sets ``X@GRAD = Out@GRAD`` unchanged,
although the rows named by ``Ids`` were overwritten and have no gradient to X; Paddle fixed
this in 2.0 (PR 30604). We keep 1.8's rule, so training scripts give 1.8's numbers; tests
check it against that rule, not against finite differences. ``Updates@GRAD = Out@GRAD[Ids]``
in both modes (a repeated id with overwrite=True gets the gradient too, as in Fluid).
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.errors import OutOfRange  # a user's data, not a bug: one line (NOTE(user-errors))
from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, grad_of, register
from placegroup.ops.shape import _axis, _merge, _prod
from placegroup.values import scatter_add

_INTS = ("int32", "int64")


# -- helpers ---------------------------------------------------------------------------------


def _int_index(op: str, slot: str, m: Meta) -> None:
    check(m.dtype in _INTS, f"{op}: {slot} must be int32 or int64, got {m.dtype}{list(m.shape)}")


def _check_range(xp, op: str, slot: str, idx, n: int, what: str = "a dim of") -> None:
    """Raise IndexError unless every entry of ``idx`` is in [0, n) (NOTE(index-range))."""
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
        v = int(idx[(idx < 0) | (idx >= n)].ravel()[0])
        raise OutOfRange(f"{op}: {slot} holds {v}, out of range for {what} {n} (valid: 0..{n - 1})")


def _rows_index(op: str, slot: str, m: Meta) -> None:
    """A row index: int, 1-D or [N, 1]."""
    _int_index(op, slot, m)
    s = list(m.shape)
    check(len(s) == 1 or (len(s) == 2 and s[1] in (1, -1)), f"{op}: {slot} must be 1-D or [N, 1], got {slot}{s}")


def _last_occurrence(xp, idx):
    """Mask of the entries of 1-D ``idx`` that no later entry repeats."""
    order = xp.argsort(idx, kind="stable")
    s = idx[order]
    last = xp.ones(idx.shape, dtype=bool)
    last[:-1] = s[1:] != s[:-1]
    mask = xp.empty(idx.shape, dtype=bool)
    mask[order] = last
    return mask


def _assign_last(xp, dst, idx, src) -> None:
    """``dst[idx[i]] = src[i]`` in order, the last write to a row winning (NOTE(overwrite))."""
    keep = _last_occurrence(xp, idx)
    dst[idx[keep]] = src[keep]



# -- gather, gather_nd, scatter -------------------------------------------------------------


def _gather_infer(ins, a):
    x, idx = ins["X"], ins["Index"]
    _rows_index("gather", "Index", idx)
    check(len(x.shape) >= 1, "gather: X must have at least one dim")
    return {"Out": Meta((idx.shape[0],) + tuple(x.shape[1:]), x.dtype)}


def _rows(xp, op, slot, idx, n):
    flat = idx.reshape(-1)
    _check_range(xp, op, slot, flat, n)
    return flat


@register("gather", ins=("X", Slot("Index", no_grad=True)), outs=("Out",), attrs={"overwrite": True},
          infer=_gather_infer, grad=grad_of(("X",)))
def gather(xp, ins, a, ctx):
    """Out[i] = X[Index[i]] (rows of X; Index int32/int64, 1-D or [N, 1]); ``overwrite`` only
    changes the gradient of a repeated index (NOTE(overwrite))."""
    x = ins["X"]
    return {"Out": xp.take(x, _rows(xp, "gather", "Index", ins["Index"], x.shape[0]), axis=0)}


@register("gather_grad", ins=("X", "Index", "Out@GRAD"), outs=("X@GRAD",), attrs={"overwrite": True},
          role="backward")
def gather_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Out@GRAD"]
    idx = _rows(xp, "gather", "Index", ins["Index"], x.shape[0])
    dx = xp.zeros(x.shape, dtype=g.dtype)
    if a["overwrite"]:
        _assign_last(xp, dx, idx, g)
    else:
        scatter_add(xp, dx, idx, g)
    return {"X@GRAD": dx}


def _gather_nd_infer(ins, a):
    x, idx = ins["X"], ins["Index"]
    _int_index("gather_nd", "Index", idx)
    k = idx.shape[-1] if idx.shape else -1
    check(len(idx.shape) >= 1 and 1 <= k <= len(x.shape),
          f"gather_nd: the last dim of Index{list(idx.shape)} must be in 1..{len(x.shape)} (the rank of "
          f"X{list(x.shape)})")
    return {"Out": Meta(tuple(idx.shape[:-1]) + tuple(x.shape[k:]), x.dtype)}


def _nd_index(xp, x, idx, op: str = "gather_nd") -> tuple:
    """Index's last dim split into one index array per leading dim of X, range-checked."""
    cols = tuple(idx[..., i] for i in range(idx.shape[-1]))
    for i, c in enumerate(cols):
        _check_range(xp, op, f"Index[..., {i}]", c, x.shape[i])
    return cols


def _nd_flat(xp, shape, cols):
    """The row-major number of each index tuple among the leading dims of ``shape``."""
    flat = xp.zeros(cols[0].shape, dtype=np.int64)
    for c, d in zip(cols, shape):
        flat = flat * d + c
    return flat


@register("gather_nd", ins=("X", Slot("Index", no_grad=True)), outs=("Out",), infer=_gather_nd_infer,
          grad=grad_of(("X",)))
def gather_nd(xp, ins, a, ctx):
    """Out[i..] = X[Index[i.., 0], ..., Index[i.., k-1]] (k = Index's last dim): an element or
    a slice of X per index tuple."""
    x = ins["X"]
    return {"Out": x[_nd_index(xp, x, ins["Index"])]}


@register("gather_nd_grad", ins=("X", "Index", "Out@GRAD"), outs=("X@GRAD",), role="backward")
def gather_nd_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Out@GRAD"]
    cols = _nd_index(xp, x, ins["Index"])
    lead, rest = x.shape[:len(cols)], x.shape[len(cols):]
    flat = _nd_flat(xp, lead, cols)
    dx = xp.zeros((math.prod(lead),) + rest, dtype=g.dtype)
    scatter_add(xp, dx, flat.reshape(-1), g.reshape((-1,) + rest))
    return {"X@GRAD": dx.reshape(x.shape)}


def _scatter_infer(ins, a):
    x, ids, upd = ins["X"], ins["Ids"], ins["Updates"]
    _rows_index("scatter", "Ids", ids)
    ok = (len(upd.shape) == len(x.shape) >= 1
          and all(-1 in (p, q) or p == q for p, q in zip(upd.shape[1:], x.shape[1:]))
          and (-1 in (upd.shape[0], ids.shape[0]) or upd.shape[0] == ids.shape[0]))
    check(ok and upd.dtype == x.dtype, f"scatter: Updates {upd.dtype}{list(upd.shape)} must be {x.dtype} rows of "
                                       f"X{list(x.shape)}, one per id of Ids{list(ids.shape)}")
    return {"Out": x}


@register("scatter", ins=("X", Slot("Ids", no_grad=True), "Updates"), outs=("Out",), attrs={"overwrite": True},
          infer=_scatter_infer, grad=grad_of(("X", "Updates"), uses=("Ids",)))
def scatter(xp, ins, a, ctx):
    """Out = X with row ``Ids[i]`` replaced by ``Updates[i]``; a repeated id takes the last
    update (overwrite) or the sum of its updates (not overwrite) (NOTE(overwrite))."""
    x, upd = ins["X"], ins["Updates"]
    ids = _rows(xp, "scatter", "Ids", ins["Ids"], x.shape[0])
    out = x.copy()
    if a["overwrite"]:
        _assign_last(xp, out, ids, upd)
    else:
        out[ids] = 0
        scatter_add(xp, out, ids, upd)
    return {"Out": out}


@register("scatter_grad", ins=("Ids", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Updates@GRAD", dispensable=True)),
          attrs={"overwrite": True}, role="backward")
def scatter_grad(xp, ins, a, ctx):
    # See NOTE(scatter-grad-1.8): X@GRAD is Out@GRAD unchanged, as in Fluid 1.8.
    g, res = ins["Out@GRAD"], {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = g
    if "Updates@GRAD" in ctx.outputs:
        res["Updates@GRAD"] = xp.take(g, _rows(xp, "scatter", "Ids", ins["Ids"], g.shape[0]), axis=0)
    return res


# -- one_hot, arg_max / arg_min, argsort ----------------------------------------------------


def _one_hot_infer(v2: bool):
    op = "one_hot_v2" if v2 else "one_hot"

    def infer(ins, a):
        x, depth = ins["X"], a["depth"]
        _int_index(op, "X", x)
        check(depth >= 1, f"{op}: depth must be >= 1, got {depth}")
        if v2:
            return {"Out": Meta(tuple(x.shape) + (depth,), np.dtype(a["dtype"]).name)}
        check(len(x.shape) >= 2 and x.shape[-1] in (1, -1),
              f"one_hot: X must end in a dim of 1 ([N, 1] ids), got X{list(x.shape)}; one_hot_v2 takes [N]")
        return {"Out": Meta(tuple(x.shape[:-1]) + (depth,), np.dtype(a["dtype"]).name)}

    return infer


def _one_hot(op: str, v2: bool):
    def kernel(xp, ins, a, ctx):
        x, depth = ins["X"], a["depth"]
        if not a["allow_out_of_range"]:
            _check_range(xp, op, "X", x, depth, "depth")
        return {"Out": ((x[..., None] if v2 else x) == xp.arange(depth, dtype=x.dtype)).astype(a["dtype"])}

    kernel.__doc__ = (f"Out[..., j] = 1 where X{'' if v2 else '[..., 0]'} == j, else 0, for j < depth; an id outside "
                      f"[0, depth) is an error unless allow_out_of_range (a row of zeros). No gradient.")
    return kernel


_ONE_HOT_ATTRS = {"depth": -1, "dtype": "float32", "allow_out_of_range": False}
register("one_hot", ins=(Slot("X", no_grad=True),), outs=("Out",), attrs=_ONE_HOT_ATTRS,
         infer=_one_hot_infer(False))(_one_hot("one_hot", False))
register("one_hot_v2", ins=(Slot("X", no_grad=True),), outs=("Out",), attrs=_ONE_HOT_ATTRS,
         infer=_one_hot_infer(True))(_one_hot("one_hot_v2", True))


def _arg_infer(op: str):
    def infer(ins, a):
        x = ins["X"]
        ax = _axis(op, a["axis"], x.shape)
        check(np.dtype(a["dtype"]).name in _INTS, f"{op}: dtype must be int32 or int64, got {a['dtype']}")
        shape = tuple(x.shape[:ax]) + ((1,) if a["keepdims"] else ()) + tuple(x.shape[ax + 1:])
        return {"Out": Meta(shape or (1,), np.dtype(a["dtype"]).name)}

    return infer


def _arg(fn):
    def kernel(xp, ins, a, ctx):
        x = ins["X"]
        ax = a["axis"] % x.ndim
        out = getattr(xp, fn)(x, axis=ax).astype(a["dtype"])
        return {"Out": xp.expand_dims(out, ax) if a["keepdims"] else out.reshape(out.shape or (1,))}

    kernel.__doc__ = f"Out = the index of the first {fn[3:]}imum of X along ``axis`` (int64 by default). No gradient."
    return kernel


_ARG_ATTRS = {"axis": -1, "keepdims": False, "dtype": "int64"}
register("arg_max", ins=(Slot("X", no_grad=True),), outs=("Out",), attrs=_ARG_ATTRS,
         infer=_arg_infer("arg_max"))(_arg("argmax"))
register("arg_min", ins=(Slot("X", no_grad=True),), outs=("Out",), attrs=_ARG_ATTRS,
         infer=_arg_infer("arg_min"))(_arg("argmin"))


def _argsort_infer(ins, a):
    x = ins["X"]
    _axis("argsort", a["axis"], x.shape)
    return {"Out": x, "Indices": Meta(tuple(x.shape), "int64")}


@register("argsort", ins=("X",), outs=("Out", "Indices"), attrs={"axis": -1, "descending": False},
          infer=_argsort_infer, grad=grad_of(("X",), outs=("Indices",)))
def argsort(xp, ins, a, ctx):
    """Out = X sorted along ``axis`` (ascending, or descending), Indices = where each came from
    (int64). Ties keep their order in X; numpy puts NaN last where Paddle puts it first."""
    x = ins["X"]
    ax = a["axis"] % x.ndim
    if a["descending"]:  # a stable descending order: sort X reversed, then read it backwards
        n = x.shape[ax]
        idx = n - 1 - xp.flip(xp.argsort(xp.flip(x, ax), axis=ax, kind="stable"), ax)
    else:
        idx = xp.argsort(x, axis=ax, kind="stable")
    return {"Out": xp.take_along_axis(x, idx, ax), "Indices": idx.astype(np.int64)}


@register("argsort_grad", ins=("X", "Indices", "Out@GRAD"), outs=("X@GRAD",), attrs={"axis": -1, "descending": False},
          role="backward")
def argsort_grad(xp, ins, a, ctx):
    idx, g = ins["Indices"], ins["Out@GRAD"]
    ax = a["axis"] % g.ndim
    # Out = take(X, idx), so X@GRAD = take(Out@GRAD, inverse permutation of idx)
    return {"X@GRAD": xp.take_along_axis(g, xp.argsort(idx, axis=ax), ax)}


# -- cumsum ---------------------------------------------------------------------------------


def _cumsum_grad(op):
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    return [OpSpec("cumsum", {"X": [grad_name(op.outputs["Out"][0])]}, {"Out": [op.grad_of(x)]},
                   {**op.attrs, "reverse": not op.attrs["reverse"]})]


def _cumsum_infer(ins, a):
    _axis("cumsum", a["axis"], ins["X"].shape)
    return {"Out": ins["X"]}


@register("cumsum", ins=("X",), outs=("Out",), attrs={"axis": -1, "exclusive": False, "reverse": False},
          infer=_cumsum_infer, grad=_cumsum_grad)
def cumsum(xp, ins, a, ctx):
    """Out = running sums of X along ``axis`` (from the end with ``reverse``; each excluding
    its own element with ``exclusive``), summed in order. Its gradient is a cumsum the other
    way round."""
    x = ins["X"]
    ax = a["axis"] % x.ndim
    y = xp.flip(x, ax) if a["reverse"] else x
    out = xp.cumsum(y, axis=ax, dtype=x.dtype)
    if a["exclusive"]:
        head = xp.zeros_like(xp.take(out, xp.arange(min(1, x.shape[ax])), axis=ax))
        out = xp.concatenate([head, xp.take(out, xp.arange(x.shape[ax] - 1), axis=ax)], axis=ax)
    return {"Out": xp.flip(out, ax) if a["reverse"] else out}


# -- shapes and fills from a var ------------------------------------------------------------


@register("shape", ins=(Slot("Input", no_grad=True),), outs=("Out",),
          infer=lambda ins, a: {"Out": Meta((len(ins["Input"].shape),), "int32")})
def shape(xp, ins, a, ctx):
    """Out = Input's shape as an int32 vector."""
    return {"Out": xp.asarray(ins["Input"].shape, dtype=np.int32)}


def _fcbsl_shape(op: str, in_shape, a) -> tuple:
    shape, i, o = [int(d) for d in a["shape"]], a["input_dim_idx"], a["output_dim_idx"]
    check(0 <= i < len(in_shape) and 0 <= o < len(shape),
          f"{op}: input_dim_idx {i} must name a dim of Input{list(in_shape)} and output_dim_idx {o} one of "
          f"shape {shape}")
    shape[o] = in_shape[i]
    return tuple(shape)


@register("fill_constant_batch_size_like", ins=(Slot("Input", no_grad=True),), outs=("Out",),
          attrs={"shape": [], "dtype": "float32", "value": 0.0, "input_dim_idx": 0, "output_dim_idx": 0,
                 "str_value": "", "force_cpu": False},
          infer=lambda ins, a: {"Out": Meta(_fcbsl_shape("fill_constant_batch_size_like", ins["Input"].shape, a),
                                            np.dtype(a["dtype"]).name)})
def fill_constant_batch_size_like(xp, ins, a, ctx):
    """Out = ``value`` in ``shape``, whose dim ``output_dim_idx`` is Input's dim
    ``input_dim_idx`` (the batch size). ``str_value``, if given, is the value as text."""
    value = float(a["str_value"]) if a["str_value"] else a["value"]
    return {"Out": xp.full(_fcbsl_shape("fill_constant_batch_size_like", ins["Input"].shape, a), value,
                           dtype=a["dtype"])}


def _fill_any_dtype(a, x_dtype: str) -> str:
    return x_dtype if a["dtype"] in (-1, None, "") else np.dtype(a["dtype"]).name


@register("fill_any_like", ins=(Slot("X", no_grad=True),), outs=("Out",), attrs={"value": 0.0, "dtype": -1},
          infer=lambda ins, a: {"Out": Meta(tuple(ins["X"].shape), _fill_any_dtype(a, ins["X"].dtype))})
def fill_any_like(xp, ins, a, ctx):
    """Out = ``value`` in X's shape, of ``dtype`` (-1: X's dtype). No gradient."""
    x = ins["X"]
    return {"Out": xp.full(x.shape, a["value"], dtype=_fill_any_dtype(a, x.dtype.name))}


def _range_infer(ins, a):
    ms = [ins[s] for s in ("Start", "End", "Step")]
    check(all(m.dtype == ms[0].dtype for m in ms) and ms[0].dtype in ("float32", "float64") + _INTS,
          f"range: Start, End and Step must share one of float32, float64, int32, int64; got "
          f"{[m.dtype for m in ms]}")
    check(all(_prod(m.shape) in (1, -1) for m in ms), f"range: Start, End and Step must hold one value each, got "
                                                      f"shapes {[list(m.shape) for m in ms]}")
    return {"Out": Meta((-1,), ms[0].dtype)}


@register("range", ins=tuple(Slot(s, no_grad=True) for s in ("Start", "End", "Step")), outs=("Out",),
          infer=_range_infer)
def range_(xp, ins, a, ctx):
    """Out = start, start + step, ... while short of End: ceil(|End - Start| / |Step|) values
    (their length is known only at run time), accumulated by repeated addition as Fluid's
    CPU kernel does. Step 0, or a step pointing away from End, is a ValueError."""
    dt = ins["Start"].dtype
    start, end, step = (dt.type(ins[s].reshape(-1)[0].item()) for s in ("Start", "End", "Step"))
    if step == 0 or (start < end and step < 0) or (start > end and step > 0):
        raise ValueError(f"range: step {step} never takes start {start} to end {end} (it must be non-zero and "
                         f"point from start to end)")
    if dt.kind in "iu":
        n = int((abs(end - start) + abs(step) - 1) // abs(step))
    else:
        n = int(math.ceil(abs((end - start) / step)))
    steps = xp.full((n,), step, dtype=dt)
    if n:
        steps[0] = start
    return {"Out": xp.cumsum(steps, dtype=dt)}



# -- scatter_nd_add, index_select, index_sample, multiplex ----------------------------------


def _scatter_nd_infer(ins, a):
    x, idx, upd = ins["X"], ins["Index"], ins["Updates"]
    _int_index("scatter_nd_add", "Index", idx)
    k = idx.shape[-1] if idx.shape else -1
    check(len(idx.shape) >= 1 and 1 <= k <= len(x.shape),
          f"scatter_nd_add: the last dim of Index{list(idx.shape)} must be in 1..{len(x.shape)} (the rank of "
          f"X{list(x.shape)})")
    want = tuple(idx.shape[:-1]) + tuple(x.shape[k:])
    ok = len(upd.shape) == len(want) and all(-1 in (p, q) or p == q for p, q in zip(upd.shape, want))
    check(ok and upd.dtype == x.dtype, f"scatter_nd_add: Updates {upd.dtype}{list(upd.shape)} must be {x.dtype}"
                                       f"{list(want)} (Index's dims but the last, then X's dims after the first {k})")
    return {"Out": x}


@register("scatter_nd_add", ins=("X", Slot("Index", no_grad=True), "Updates"), outs=("Out",),
          infer=_scatter_nd_infer, grad=grad_of(("X", "Updates"), uses=("X", "Index")))
def scatter_nd_add(xp, ins, a, ctx):
    """Out = X with Updates[i..] added at X[Index[i.., 0], ..., Index[i.., k-1]] (an element or
    a slice per index tuple); repeated tuples add up."""
    x, upd = ins["X"], ins["Updates"]
    cols = _nd_index(xp, x, ins["Index"], "scatter_nd_add")
    lead, rest = x.shape[:len(cols)], x.shape[len(cols):]
    out = x.reshape((math.prod(lead),) + rest).copy()
    scatter_add(xp, out, _nd_flat(xp, lead, cols).reshape(-1), upd.reshape((-1,) + rest).astype(x.dtype, copy=False))
    return {"Out": out.reshape(x.shape)}


@register("scatter_nd_add_grad", ins=("X", "Index", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Updates@GRAD", dispensable=True)), role="backward")
def scatter_nd_add_grad(xp, ins, a, ctx):
    g, res = ins["Out@GRAD"], {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = g
    if "Updates@GRAD" in ctx.outputs:
        res["Updates@GRAD"] = g[_nd_index(xp, g, ins["Index"], "scatter_nd_add")]
    return res


def _index_select_infer(ins, a):
    x, idx = ins["X"], ins["Index"]
    _int_index("index_select", "Index", idx)
    check(len(idx.shape) == 1 or (len(idx.shape) == 2 and idx.shape[1] == 1),
          f"index_select: Index must be 1-D, got Index{list(idx.shape)}")
    ax = _axis("index_select", a["dim"], x.shape, "dim")
    return {"Out": Meta(tuple(x.shape[:ax]) + (idx.shape[0],) + tuple(x.shape[ax + 1:]), x.dtype)}


@register("index_select", ins=("X", Slot("Index", no_grad=True)), outs=("Out",), attrs={"dim": 0},
          infer=_index_select_infer, grad=grad_of(("X",)))
def index_select(xp, ins, a, ctx):
    """Out = X's slices ``Index[i]`` along ``dim`` (negative counts from the end), in order."""
    x = ins["X"]
    ax = a["dim"] % x.ndim
    return {"Out": xp.take(x, _rows(xp, "index_select", "Index", ins["Index"], x.shape[ax]), axis=ax)}


@register("index_select_grad", ins=("X", "Index", "Out@GRAD"), outs=("X@GRAD",), attrs={"dim": 0},
          role="backward")
def index_select_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Out@GRAD"]
    ax = a["dim"] % x.ndim
    idx = _rows(xp, "index_select", "Index", ins["Index"], x.shape[ax])
    dx = xp.zeros((x.shape[ax],) + x.shape[:ax] + x.shape[ax + 1:], dtype=g.dtype)
    scatter_add(xp, dx, idx, xp.ascontiguousarray(xp.moveaxis(g, ax, 0)))
    return {"X@GRAD": xp.moveaxis(dx, 0, ax)}


def _index_sample_infer(ins, a):
    x, idx = ins["X"], ins["Index"]
    _int_index("index_sample", "Index", idx)
    rows = x.shape[0] == idx.shape[0] or -1 in (x.shape[0], idx.shape[0])
    check(len(x.shape) == 2 and len(idx.shape) == 2 and rows,
          f"index_sample: X{list(x.shape)} and Index{list(idx.shape)} must be 2-D with one row each per sample")
    return {"Out": Meta((x.shape[0] if x.shape[0] != -1 else idx.shape[0], idx.shape[1]), x.dtype)}


@register("index_sample", ins=("X", Slot("Index", no_grad=True)), outs=("Out",), infer=_index_sample_infer,
          grad=grad_of(("X",)))
def index_sample(xp, ins, a, ctx):
    """Out[b, k] = X[b, Index[b, k]] for X [B, N] and Index [B, K]."""
    x, idx = ins["X"], ins["Index"]
    _check_range(xp, "index_sample", "Index", idx, x.shape[1])
    return {"Out": xp.take_along_axis(x, idx.astype(np.int64, copy=False), axis=1)}


@register("index_sample_grad", ins=("X", "Index", "Out@GRAD"), outs=("X@GRAD",), role="backward")
def index_sample_grad(xp, ins, a, ctx):
    x, idx, g = ins["X"], ins["Index"], ins["Out@GRAD"]
    _check_range(xp, "index_sample", "Index", idx, x.shape[1])
    flat = (idx.astype(np.int64) + (xp.arange(x.shape[0]) * x.shape[1])[:, None]).reshape(-1)
    dx = xp.zeros(x.size, dtype=g.dtype)
    scatter_add(xp, dx, flat, g.reshape(-1))
    return {"X@GRAD": dx.reshape(x.shape)}


def _multiplex_infer(ins, a):
    xs, ids = ins["X"], ins["Ids"]
    _int_index("multiplex", "Ids", ids)
    check(len(xs) >= 2, f"multiplex: X must hold at least 2 candidates, got {len(xs)}")
    shape = _merge("multiplex", xs, "X")
    check(len(ids.shape) == 2 and ids.shape[1] == 1, f"multiplex: Ids must be [M, 1], got Ids{list(ids.shape)}")
    return {"Out": Meta(tuple(shape), xs[0].dtype)}


@register("multiplex", ins=(Slot("X", duplicable=True), Slot("Ids", no_grad=True)), outs=("Out",),
          infer=_multiplex_infer, grad=grad_of(("X",), uses=("X", "Ids")))
def multiplex(xp, ins, a, ctx):
    """Out[i] = X[Ids[i, 0]][i]: row i from the candidate that Ids names (all X of one shape)."""
    xs, ids = ins["X"], ins["Ids"].reshape(-1)
    _check_range(xp, "multiplex", "Ids", ids, len(xs))
    stacked = xp.stack(xs)
    return {"Out": stacked[ids, xp.arange(stacked.shape[1])]}


@register("multiplex_grad", ins=(Slot("X", duplicable=True), "Ids", "Out@GRAD"),
          outs=(Slot("X@GRAD", duplicable=True, dispensable=True),), role="backward")
def multiplex_grad(xp, ins, a, ctx):
    ids, g = ins["Ids"].reshape(-1), ins["Out@GRAD"]
    mask = (ids[None, :] == xp.arange(len(ins["X"]))[:, None]).reshape((len(ins["X"]), -1) + (1,) * (g.ndim - 1))
    return {"X@GRAD": list(mask * g)}


# -- where_index, unique, unique_with_counts, size ------------------------------------------


@register("where_index", ins=(Slot("Condition", no_grad=True),), outs=("Out",),
          infer=lambda ins, a: {"Out": Meta((-1, len(ins["Condition"].shape)), "int64")})
def where_index(xp, ins, a, ctx):
    """Out = the int64 coordinates [N, rank] of the true (nonzero) entries of Condition, in
    row-major order (fluid.layers.where and nonzero); N is known only at run time."""
    c = ins["Condition"]
    return {"Out": xp.argwhere(c).astype(np.int64).reshape(-1, c.ndim)}


def _unique_infer(counts: bool):
    op = "unique_with_counts" if counts else "unique"

    def infer(ins, a):
        x = ins["X"]
        check(len(x.shape) == 1, f"{op}: X must be 1-D, got X{list(x.shape)}")
        dt = np.dtype(a["dtype"]).name
        check(dt in _INTS, f"{op}: dtype must be int32 or int64, got {a['dtype']}")
        out = {"Out": Meta((-1,), x.dtype), "Index": Meta(tuple(x.shape), dt)}
        return {**out, "Count": Meta((-1,), dt)} if counts else out

    return infer


def _unique(counts: bool):
    def kernel(xp, ins, a, ctx):
        x = ins["X"]
        vals, first, inverse, count = xp.unique(x, return_index=True, return_inverse=True, return_counts=True)
        order = xp.argsort(first)  # Fluid keeps the order of first appearance, not sorted order
        rank = xp.empty_like(order)
        rank[order] = xp.arange(order.size)
        out = {"Out": vals[order], "Index": rank[inverse.reshape(-1)].astype(a["dtype"])}
        return {**out, "Count": count[order].astype(a["dtype"])} if counts else out

    kernel.__doc__ = (f"Out = the distinct values of the 1-D X in the order they first appear; Index[i] = the "
                      f"position of X[i] in Out{'; Count = how often each appears' if counts else ''} "
                      f"(``dtype``, int32 by default). No gradient.")
    return kernel


register("unique", ins=(Slot("X", no_grad=True),), outs=("Out", "Index"), attrs={"dtype": "int32"},
         infer=_unique_infer(False))(_unique(False))
register("unique_with_counts", ins=(Slot("X", no_grad=True),), outs=("Out", "Index", "Count"),
         attrs={"dtype": "int32"}, infer=_unique_infer(True))(_unique(True))


@register("size", ins=(Slot("Input", no_grad=True),), outs=("Out",),
          infer=lambda ins, a: {"Out": Meta((1,), "int64")})
def size(xp, ins, a, ctx):
    """Out = the number of entries of Input, int64 [1]."""
    return {"Out": xp.asarray([ins["Input"].size], dtype=np.int64)}
