"""Matrix products, scaling, reductions and channel ops: mul, matmul, scale, mean, sum, reduce_sum,
reduce_mean, reduce_max, reduce_min, reduce_prod; lrn, maxout, affine_channel, clip_by_norm;
bmm, dot, addmm, bilinear_tensor_product, kron, trace, cross, dist (Fluid 1.8's op types,
slots and attrs).

The bool reductions (reduce_all, reduce_any) are in ops/compare.py.
"""
from __future__ import annotations

import math

from placegroup.ops.elementwise import _infer as broadcast_infer, _unbroadcast
from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, grad_of, register
from placegroup.values import is_selected_rows, scatter_add
from placegroup.ops.sparse import concat_rows


def _flat2d(shape, k: int) -> tuple:
    return (math.prod(shape[:k]), math.prod(shape[k:]))


def _mul_infer(ins, attrs):
    x, y = ins["X"].shape, ins["Y"].shape
    xn, yn = attrs["x_num_col_dims"], attrs["y_num_col_dims"]
    check(0 < xn < len(x) and 0 < yn < len(y), f"num_col_dims ({xn}, {yn}) do not fit X{list(x)}, Y{list(y)}")
    kx, ky = math.prod(x[xn:]), math.prod(y[:yn])
    check(kx == ky or kx < 0 or ky < 0,
          f"X{list(x)} flattened at {xn} has {kx} columns but Y{list(y)} flattened at {yn} has {ky} rows")
    return {"Out": Meta(tuple(x[:xn]) + tuple(y[yn:]), ins["X"].dtype)}


@register("mul", ins=("X", "Y"), outs=("Out",), attrs={"x_num_col_dims": 1, "y_num_col_dims": 1},
          infer=_mul_infer, grad=grad_of(("X", "Y")))
def mul(xp, ins, a, ctx):
    """Out = flatten(X, x_num_col_dims) @ flatten(Y, y_num_col_dims), reshaped (Fluid's mul)."""
    x, y = ins["X"], ins["Y"]
    xn, yn = a["x_num_col_dims"], a["y_num_col_dims"]
    out = x.reshape(_flat2d(x.shape, xn)) @ y.reshape(_flat2d(y.shape, yn))
    return {"Out": out.reshape(x.shape[:xn] + y.shape[yn:])}


@register("mul_grad", ins=("X", "Y", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)),
          attrs={"x_num_col_dims": 1, "y_num_col_dims": 1}, role="backward")
def mul_grad(xp, ins, a, ctx):
    x, y, g = ins["X"], ins["Y"], ins["Out@GRAD"]
    x2, y2 = x.reshape(_flat2d(x.shape, a["x_num_col_dims"])), y.reshape(_flat2d(y.shape, a["y_num_col_dims"]))
    g2 = g.reshape(x2.shape[0], y2.shape[1])
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = (g2 @ y2.T).reshape(x.shape)
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = (x2.T @ g2).reshape(y.shape)
    return res


@register("mean", ins=("X",), outs=("Out",), infer=lambda ins, a: {"Out": Meta((1,), ins["X"].dtype)},
          grad=grad_of(("X",)))
def mean(xp, ins, a, ctx):
    """Out = mean of all elements of X, shape [1] (Fluid 1.x)."""
    x = ins["X"]
    return {"Out": x.mean(dtype=x.dtype).reshape(1)}


@register("mean_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), role="backward")
def mean_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Out@GRAD"]
    return {"X@GRAD": xp.full(x.shape, g.reshape(()) / x.size, dtype=x.dtype)}


def _sum_infer(ins, attrs):
    xs = ins["X"]
    for m in xs[1:]:
        check(len(m.shape) == len(xs[0].shape), f"sum inputs differ in rank: {[list(x.shape) for x in xs]}")
    return {"Out": xs[0]}


def _sum_grad(op):
    g = op.outputs["Out"][0] + "@GRAD"
    return [OpSpec("assign", {"X": [g]}, {"Out": [op.grad_of(n)]}) for n in op.inputs["X"] if n in op.need]


# NOTE(sum-sparse): ``sum`` is where gradients meet (append_backward's fan-in, the pserver's
# merge of the trainers' gradients), so it takes SelectedRows too. All SelectedRows: a
# SelectedRows holding every entry (rows and values concatenated, repeats kept: whoever
# needs unique rows merges, see SelectedRows.merged). Dense and SelectedRows mixed: dense,
# each SelectedRows scatter-added into the sum of the dense ones.


@register("sum", ins=(Slot("X", duplicable=True),), outs=("Out",), infer=_sum_infer, grad=_sum_grad)
def sum_(xp, ins, a, ctx):
    """Out = X[0] + X[1] + ... (same shapes); SelectedRows inputs as NOTE(sum-sparse) says."""
    xs = ins["X"]
    sparse = [x for x in xs if is_selected_rows(x)]
    if sparse:
        if len(sparse) == len(xs):
            return {"Out": concat_rows(xp, "sum", xs)}
        dense = [x for x in xs if not is_selected_rows(x)]
        out = dense[0].copy()
        for x in dense[1:]:
            out += x
        for x in sparse:
            if x.shape != out.shape:
                raise ValueError(f"sum: a SelectedRows input of shape {list(x.shape)} cannot add to "
                                 f"dense inputs of shape {list(out.shape)}")
            scatter_add(xp, out, x.rows, x.values.astype(out.dtype, copy=False))
        return {"Out": out}
    out = xs[0].copy() if len(xs) > 1 else xs[0]
    for x in xs[1:]:
        out += x
    return {"Out": out}


# -- matmul ---------------------------------------------------------------------------------
# NOTE(matmul-rank): X and Y of rank >= 2 multiply as numpy.matmul does (the last two dims are
# the matrix, the leading dims broadcast; Fluid 1.x asks for equal batch dims, which is the
# common case of this). A 1-D X is a row [1, K] and a 1-D Y a column [K, 1]; the added dim is
# dropped from Out, and an Out that would have no dims is [1] (Fluid 1.x). Transposing a 1-D
# operand is rejected: Fluid 1.x gives it an outer-product meaning that numpy does not.

_MATMUL_ATTRS = {"transpose_X": False, "transpose_Y": False, "alpha": 1.0}


def _mat_shape(shape: tuple, trans: bool, is_x: bool) -> tuple:
    if len(shape) == 1:
        return (1, shape[0]) if is_x else (shape[0], 1)
    return tuple(shape[:-2]) + ((shape[-1], shape[-2]) if trans else (shape[-2], shape[-1]))


def _matmul_infer(ins, a):
    x, y = tuple(ins["X"].shape), tuple(ins["Y"].shape)
    tx, ty = a["transpose_X"], a["transpose_Y"]
    check(len(x) >= 1 and len(y) >= 1, f"matmul: X{list(x)} and Y{list(y)} must have rank >= 1")
    check(not (len(x) == 1 and tx) and not (len(y) == 1 and ty),
          f"matmul: transpose_X/transpose_Y on a 1-D operand (X{list(x)}, Y{list(y)}) is not "
          f"supported; reshape it to 2-D first")
    mx, my = _mat_shape(x, tx, True), _mat_shape(y, ty, False)
    check(mx[-1] == my[-2] or -1 in (mx[-1], my[-2]),
          f"matmul: X{list(x)} (transpose_X={tx}) has {mx[-1]} columns but Y{list(y)} "
          f"(transpose_Y={ty}) has {my[-2]} rows")
    bx, by = mx[:-2], my[:-2]
    n = max(len(bx), len(by))
    bx, by = (1,) * (n - len(bx)) + bx, (1,) * (n - len(by)) + by
    batch = []
    for p, q in zip(bx, by):
        check(p == q or 1 in (p, q) or -1 in (p, q),
              f"matmul: batch dims of X{list(x)} and Y{list(y)} do not broadcast")
        batch.append(q if p == 1 else p if q == 1 else max(p, q) if -1 not in (p, q) else -1)
    out = batch + ([mx[-2]] if len(x) > 1 else []) + ([my[-1]] if len(y) > 1 else [])
    return {"Out": Meta(tuple(out) or (1,), ins["X"].dtype)}


def _as_mat(xp, v, trans: bool, is_x: bool):
    if v.ndim == 1:
        return v.reshape((1, -1) if is_x else (-1, 1))
    return xp.swapaxes(v, -1, -2) if trans else v


@register("matmul", ins=("X", "Y"), outs=("Out",), attrs=_MATMUL_ATTRS, infer=_matmul_infer,
          grad=grad_of(("X", "Y")))
def matmul(xp, ins, a, ctx):
    """Out = alpha · op(X) @ op(Y), op = transpose of the last two dims when asked
    (NOTE(matmul-rank))."""
    x, y = ins["X"], ins["Y"]
    out = _as_mat(xp, x, a["transpose_X"], True) @ _as_mat(xp, y, a["transpose_Y"], False)
    if a["alpha"] != 1.0:
        out = out * xp.asarray(a["alpha"], dtype=out.dtype)
    shape = out.shape[:-2] + out.shape[-2:-1] * (x.ndim > 1) + out.shape[-1:] * (y.ndim > 1)
    return {"Out": out.reshape(shape or (1,))}


def _sum_to(xp, g, shape: tuple):
    """Sum the leading (broadcast) batch dims of ``g`` down to ``shape``."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape[:-2])
                                      if d == 1 and g.shape[lead + i] != 1)
    return g.sum(axis=axes).reshape(shape) if axes else g


@register("matmul_grad", ins=("X", "Y", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)),
          attrs=_MATMUL_ATTRS, role="backward")
def matmul_grad(xp, ins, a, ctx):
    # With A = op(X), B = op(Y) and Out = alpha·A@B: dA = alpha·G@Bᵀ, dB = alpha·Aᵀ@G; dX is
    # dA (or dAᵀ when X was transposed), summed over the batch dims X was broadcast along.
    x, y, g = ins["X"], ins["Y"], ins["Out@GRAD"]
    tx, ty = a["transpose_X"], a["transpose_Y"]
    am, bm = _as_mat(xp, x, tx, True), _as_mat(xp, y, ty, False)
    n = max(am.ndim, bm.ndim) - 2
    ba, bb = (1,) * (n - am.ndim + 2) + am.shape[:-2], (1,) * (n - bm.ndim + 2) + bm.shape[:-2]
    g = g.reshape(tuple(max(p, q) for p, q in zip(ba, bb)) + (am.shape[-2], bm.shape[-1]))
    if a["alpha"] != 1.0:
        g = g * xp.asarray(a["alpha"], dtype=g.dtype)
    res = {}
    if "X@GRAD" in ctx.outputs:
        da = g @ xp.swapaxes(bm, -1, -2)
        da = xp.swapaxes(da, -1, -2) if tx else da
        res["X@GRAD"] = _sum_to(xp, da, _mat_shape(x.shape, False, True)).reshape(x.shape)
    if "Y@GRAD" in ctx.outputs:
        db = xp.swapaxes(am, -1, -2) @ g
        db = xp.swapaxes(db, -1, -2) if ty else db
        res["Y@GRAD"] = _sum_to(xp, db, _mat_shape(y.shape, False, False)).reshape(y.shape)
    return res


# -- scale ----------------------------------------------------------------------------------


def _scale_grad(op):
    # d(scale·X + bias)/dX = scale either way round, so the gradient is a scale op too.
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    ins = {"X": [grad_name(op.outputs["Out"][0])]}
    if op.inputs.get("ScaleTensor"):
        ins["ScaleTensor"] = op.inputs["ScaleTensor"]
    return [OpSpec("scale", ins, {"Out": [op.grad_of(x)]},
                   {"scale": op.attrs["scale"], "bias": 0.0, "bias_after_scale": True})]


def _scale_infer(ins, a):
    st = ins.get("ScaleTensor")
    check(st is None or math.prod(st.shape) == 1,
          f"scale: ScaleTensor must hold one value, got shape {list(st.shape) if st else None}")
    return {"Out": ins["X"]}


@register("scale", ins=("X", Slot("ScaleTensor", dispensable=True, no_grad=True)), outs=("Out",),
          attrs={"scale": 1.0, "bias": 0.0, "bias_after_scale": True}, infer=_scale_infer, grad=_scale_grad)
def scale(xp, ins, a, ctx):
    """Out = scale·X + bias, or scale·(X + bias) when ``bias_after_scale`` is False; a
    ``ScaleTensor`` input (one value, computed in the program: a clip's factor) replaces
    the ``scale`` attr.

    A SelectedRows X gives a SelectedRows with its values scaled (a gradient's 1/N); a bias
    would make every row nonzero, so it must be 0 then.
    """
    x = ins["X"]
    s, b = a["scale"], a["bias"]
    if ins.get("ScaleTensor") is not None:
        s = ins["ScaleTensor"].reshape(()).astype(x.dtype, copy=False)
    if is_selected_rows(x):
        if b != 0:
            raise ValueError(f"scale: X is a SelectedRows of shape {list(x.shape)}, and bias={b} "
                             f"would touch every row; only bias=0 is supported for it")
        return {"Out": x.with_values((s * x.values).astype(x.dtype, copy=False))}
    out = s * x + b if a["bias_after_scale"] else s * (x + b)
    return {"Out": out.astype(x.dtype, copy=False)}


# -- reduce_sum, reduce_mean ----------------------------------------------------------------
# Fluid's attrs: ``dim`` (a list; negative counts from the end), ``keep_dim``, ``reduce_all``.
# A reduction that would leave no dims gives [1], as in Fluid 1.x.

_REDUCE_ATTRS = {"dim": [0], "keep_dim": False, "reduce_all": False}


def _reduce_axes(ndim: int, a) -> tuple:
    if a["reduce_all"]:
        return tuple(range(ndim))
    dims = a["dim"] if isinstance(a["dim"], (list, tuple)) else [a["dim"]]
    return tuple(sorted({d + ndim if d < 0 else d for d in dims}))


def _reduce_infer(ins, a):
    x = ins["X"].shape
    dims = a["dim"] if isinstance(a["dim"], (list, tuple)) else [a["dim"]]
    for d in dims if not a["reduce_all"] else ():
        check(-len(x) <= d < len(x), f"reduce: dim {d} is out of range for X{list(x)}")
    axes = _reduce_axes(len(x), a)
    out = [1 if i in axes else d for i, d in enumerate(x)] if a["keep_dim"] else \
        [d for i, d in enumerate(x) if i not in axes]
    return {"Out": Meta(tuple(out) or (1,), ins["X"].dtype)}


def _reduce(name: str, mean_: bool) -> None:
    @register(name, ins=("X",), outs=("Out",), attrs=_REDUCE_ATTRS, infer=_reduce_infer,
              grad=grad_of(("X",)))
    def forward(xp, ins, a, ctx):
        x = ins["X"]
        axes = _reduce_axes(x.ndim, a)
        out = x.mean(axis=axes, keepdims=a["keep_dim"]) if mean_ else x.sum(axis=axes, keepdims=a["keep_dim"])
        return {"Out": out.astype(x.dtype, copy=False).reshape(out.shape or (1,))}

    @register(name + "_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs=_REDUCE_ATTRS,
              role="backward")
    def backward(xp, ins, a, ctx):
        x, g = ins["X"], ins["Out@GRAD"]
        axes = _reduce_axes(x.ndim, a)
        g = g.reshape([1 if i in axes else d for i, d in enumerate(x.shape)])
        if mean_:
            g = g / xp.asarray(math.prod(x.shape[i] for i in axes), dtype=x.dtype)
        return {"X@GRAD": xp.broadcast_to(g, x.shape).astype(x.dtype)}

    forward.__doc__ = f"Out = the {'mean' if mean_ else 'sum'} of X over ``dim`` (all dims with ``reduce_all``)."


_reduce("reduce_sum", False)
_reduce("reduce_mean", True)


# -- reduce_max, reduce_min, reduce_prod ----------------------------------------------------
# NOTE(reduce-grad): as Paddle's reduce_max_grad/reduce_min_grad, the gradient goes to every
# position equal to the result (each of tied maxima gets all of it). reduce_prod's gradient
# at x is the product of the *other* entries of its group: Paddle computes Out/X, which is
# NaN at a zero; we take the products left and right of each entry (exclusive cumprods), the
# same where X != 0 and right where it is 0.


def _keep_shape(x, axes) -> list:
    return [1 if i in axes else d for i, d in enumerate(x.shape)]


def _prod_of_others(xp, x, axes: tuple):
    """For each entry, the product of the other entries of its reduction group."""
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    xt = xp.transpose(x, perm)
    flat = xt.reshape(xt.shape[:len(keep)] + (-1,))
    one = xp.ones_like(flat[..., :1])
    left = xp.cumprod(xp.concatenate([one, flat[..., :-1]], axis=-1), axis=-1)
    right = xp.flip(xp.cumprod(xp.flip(xp.concatenate([flat[..., 1:], one], axis=-1), -1), axis=-1), -1)
    inv = [perm.index(i) for i in range(x.ndim)]
    return xp.transpose((left * right).reshape(xt.shape), inv)


def _extreme(name: str, kind: str) -> None:
    @register(name, ins=("X",), outs=("Out",), attrs=_REDUCE_ATTRS, infer=_reduce_infer,
              grad=grad_of(("X",), outs=("Out",)))
    def forward(xp, ins, a, ctx):
        x = ins["X"]
        axes = _reduce_axes(x.ndim, a)
        out = getattr(x, kind)(axis=axes, keepdims=a["keep_dim"])
        return {"Out": out.astype(x.dtype, copy=False).reshape(out.shape or (1,))}

    @register(name + "_grad", ins=("X", "Out", "Out@GRAD"), outs=("X@GRAD",), attrs=_REDUCE_ATTRS,
              role="backward")
    def backward(xp, ins, a, ctx):
        x, out, g = ins["X"], ins["Out"], ins["Out@GRAD"]
        shape = _keep_shape(x, _reduce_axes(x.ndim, a))
        g = g.reshape(shape)
        if kind == "prod":
            return {"X@GRAD": (g * _prod_of_others(xp, x, _reduce_axes(x.ndim, a))).astype(x.dtype, copy=False)}
        return {"X@GRAD": (g * (x == out.reshape(shape))).astype(x.dtype, copy=False)}

    forward.__doc__ = (f"Out = the {kind} of X over ``dim`` (all dims with ``reduce_all``); gradient as "
                       f"NOTE(reduce-grad).")


_extreme("reduce_max", "max")
_extreme("reduce_min", "min")
_extreme("reduce_prod", "prod")


# -- lrn, maxout, affine_channel, clip_by_norm ----------------------------------------------
# NOTE(lrn): Fluid's lrn (lrn_op.cc) is MidOut = k + alpha·Σ x² over the n channels
# c - (n-1)/2 .. c + (n-1)/2 (alpha is not divided by n; n must be odd, as Paddle checks),
# Out = X·MidOut^-beta; zero channels pad the ends.

_LRN_ATTRS = {"n": 5, "k": 2.0, "alpha": 1e-4, "beta": 0.75, "data_format": "AnyLayout"}


def _channels_first(xp, x, fmt: str, back: bool = False):
    if fmt != "NHWC":
        return x
    return xp.moveaxis(x, 1, 3) if back else xp.moveaxis(x, 3, 1)


def _lrn_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) == 4, f"lrn: X must be 4-D, got X{list(x.shape)}")
    check(a["n"] >= 1 and a["n"] % 2 == 1, f"lrn: n must be a positive odd number, got {a['n']}")
    check(a["data_format"] in ("AnyLayout", "NCHW", "NHWC"), f"lrn: data_format {a['data_format']!r} must be NCHW "
                                                              f"or NHWC")
    return {"Out": x, "MidOut": x}


def _channel_window_sum(xp, v, n: int):
    """Σ v[:, c - (n-1)/2 .. c + (n-1)/2] along dim 1 for odd n, zero outside [0, C)."""
    c = v.shape[1]
    pad = xp.zeros((v.shape[0], c + n - 1) + v.shape[2:], dtype=v.dtype)
    pad[:, (n - 1) // 2:(n - 1) // 2 + c] = v
    out = pad[:, 0:c].copy()
    for j in range(1, n):
        out += pad[:, j:j + c]
    return out


@register("lrn", ins=("X",), outs=("Out", Slot("MidOut", no_grad=True)), attrs=_LRN_ATTRS, infer=_lrn_infer,
          grad=grad_of(("X",), outs=("Out", "MidOut")))
def lrn(xp, ins, a, ctx):
    """Local response normalization across channels (NOTE(lrn)); NCHW or NHWC."""
    x = _channels_first(xp, ins["X"], a["data_format"])
    n = a["n"]
    mid = a["k"] + a["alpha"] * _channel_window_sum(xp, x * x, n)
    mid = mid.astype(x.dtype, copy=False)
    out = x * mid ** -a["beta"]
    f = a["data_format"]
    return {"Out": _channels_first(xp, out, f, True), "MidOut": _channels_first(xp, mid, f, True)}


@register("lrn_grad", ins=("X", "Out", "MidOut", "Out@GRAD"), outs=("X@GRAD",), attrs=_LRN_ATTRS, role="backward")
def lrn_grad(xp, ins, a, ctx):
    f, n = a["data_format"], a["n"]
    x, out, mid, g = (_channels_first(xp, ins[s], f) for s in ("X", "Out", "MidOut", "Out@GRAD"))
    acc = _channel_window_sum(xp, g * out / mid, n)  # dMidOut[c'] / dX[c] = 2·alpha·X[c] in c's window
    dx = mid ** -a["beta"] * g - 2 * a["alpha"] * a["beta"] * x * acc
    return {"X@GRAD": _channels_first(xp, dx.astype(x.dtype, copy=False), f, True)}


def _maxout_infer(ins, a):
    x, g, ax = ins["X"], a["groups"], a["axis"]
    check(len(x.shape) == 4 and ax in (1, 3, -1), f"maxout: X must be 4-D and axis 1 (NCHW) or 3 (NHWC), got "
                                                  f"X{list(x.shape)}, axis {ax}")
    c = x.shape[ax]
    check(g >= 1 and (c == -1 or c % g == 0), f"maxout: groups {g} must divide the {c} channels of X{list(x.shape)}")
    out = list(x.shape)
    out[ax] = -1 if c == -1 else c // g
    return {"Out": Meta(tuple(out), x.dtype)}


def _maxout_groups(xp, x, a):
    """X as [N, C/groups, groups, H, W], channels first."""
    x = xp.moveaxis(x, a["axis"], 1) if a["axis"] != 1 else x
    return x.reshape((x.shape[0], x.shape[1] // a["groups"], a["groups"]) + x.shape[2:])


@register("maxout", ins=("X",), outs=("Out",), attrs={"groups": 1, "axis": 1}, infer=_maxout_infer,
          grad=grad_of(("X",), outs=("Out",)))
def maxout(xp, ins, a, ctx):
    """Out[:, c] = max over k < groups of X[:, c·groups + k] (channels at ``axis``); the gradient
    goes to the first of tied maxima, as Paddle's MaxOutGradFunctor."""
    out = _maxout_groups(xp, ins["X"], a).max(axis=2)
    return {"Out": xp.moveaxis(out, 1, a["axis"]) if a["axis"] != 1 else out}


@register("maxout_grad", ins=("X", "Out", "Out@GRAD"), outs=("X@GRAD",), attrs={"groups": 1, "axis": 1},
          role="backward")
def maxout_grad(xp, ins, a, ctx):
    x = ins["X"]
    grouped = _maxout_groups(xp, x, a)
    first = xp.argmax(grouped, axis=2)[:, :, None]
    g = ins["Out@GRAD"]
    g = xp.moveaxis(g, a["axis"], 1) if a["axis"] != 1 else g
    dx = (xp.arange(a["groups"]).reshape(1, 1, -1, *([1] * (x.ndim - 2))) == first) * g[:, :, None]
    dx = dx.reshape((dx.shape[0], -1) + dx.shape[3:]).astype(x.dtype, copy=False)
    return {"X@GRAD": xp.moveaxis(dx, 1, a["axis"]) if a["axis"] != 1 else dx}


def _affine_channel_infer(ins, a):
    x, fmt = ins["X"], a["data_layout"]
    check(fmt in ("NCHW", "NHWC", "AnyLayout") and len(x.shape) >= 2,
          f"affine_channel: data_layout {fmt!r} must be NCHW or NHWC and X of rank >= 2, got X{list(x.shape)}")
    c = x.shape[1 if fmt == "NCHW" else -1]
    for slot in ("Scale", "Bias"):
        m = ins[slot]
        check(c == -1 or math.prod(m.shape) == c, f"affine_channel: {slot}{list(m.shape)} must hold one value per "
                                                  f"channel of X{list(x.shape)} ({c}, {fmt})")
    return {"Out": x}


def _per_channel(x, fmt: str) -> tuple:
    # Paddle reads channels from dim 1 only for "NCHW": "AnyLayout" (the op's default) is last
    return (1, -1) + (1,) * (x.ndim - 2) if fmt == "NCHW" else (1,) * (x.ndim - 1) + (-1,)


@register("affine_channel", ins=("X", "Scale", "Bias"), outs=("Out",), attrs={"data_layout": "AnyLayout"},
          infer=_affine_channel_infer, grad=grad_of(("X", "Scale", "Bias"), uses=("X", "Scale")))
def affine_channel(xp, ins, a, ctx):
    """Out = X·Scale + Bias with one Scale and Bias per channel: dim 1 for ``data_layout`` NCHW
    (the layer's default), the last dim otherwise (NHWC, and the op's default AnyLayout, as
    Paddle reads it)."""
    x, shape = ins["X"], _per_channel(ins["X"], a["data_layout"])
    return {"Out": (x * ins["Scale"].reshape(shape) + ins["Bias"].reshape(shape)).astype(x.dtype, copy=False)}


@register("affine_channel_grad", ins=("X", "Scale", "Out@GRAD"),
          outs=tuple(Slot(s + "@GRAD", dispensable=True) for s in ("X", "Scale", "Bias")),
          attrs={"data_layout": "AnyLayout"}, role="backward")
def affine_channel_grad(xp, ins, a, ctx):
    x, scale, g = ins["X"], ins["Scale"], ins["Out@GRAD"]
    shape = _per_channel(x, a["data_layout"])
    axes = tuple(i for i, d in enumerate(shape) if d == 1)
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = (g * scale.reshape(shape)).astype(x.dtype, copy=False)
    if "Scale@GRAD" in ctx.outputs:
        res["Scale@GRAD"] = (g * x).sum(axis=axes).reshape(scale.shape)
    if "Bias@GRAD" in ctx.outputs:
        res["Bias@GRAD"] = g.sum(axis=axes).reshape(scale.shape)
    return res


def _clip_by_norm_infer(ins, a):
    check(a["max_norm"] > 0, f"clip_by_norm: max_norm must be > 0, got {a['max_norm']}")
    return {"Out": ins["X"]}


@register("clip_by_norm", ins=(Slot("X", no_grad=True),), outs=("Out",), attrs={"max_norm": 1.0},
          infer=_clip_by_norm_infer)
def clip_by_norm(xp, ins, a, ctx):
    """Out = X·max_norm / ‖X‖₂ when ‖X‖₂ > max_norm, else X (the norm over all entries; a
    SelectedRows X is merged first and stays one). No gradient, as in Fluid 1.8."""
    x = ins["X"]
    rows = is_selected_rows(x)
    if rows:
        x = x.merged(xp)
    v = x.values if rows else x
    norm = xp.sqrt((v * v).sum())
    scale = xp.where(norm > a["max_norm"], a["max_norm"] / xp.maximum(norm, a["max_norm"]), 1).astype(v.dtype)
    out = (v * scale).astype(v.dtype, copy=False)
    return {"Out": x.with_values(out) if rows else out}


# -- bmm, dot, addmm, bilinear_tensor_product, kron, trace, cross, dist ---------------------


def _bmm_infer(ins, a):
    x, y = ins["X"].shape, ins["Y"].shape
    check(len(x) == 3 and len(y) == 3, f"bmm: X{list(x)} and Y{list(y)} must both be 3-D")
    check(-1 in (x[0], y[0]) or x[0] == y[0], f"bmm: X{list(x)} and Y{list(y)} differ in batch size")
    check(-1 in (x[2], y[1]) or x[2] == y[1], f"bmm: X{list(x)} has {x[2]} columns but Y{list(y)} has {y[1]} rows")
    return {"Out": Meta((x[0] if x[0] != -1 else y[0], x[1], y[2]), ins["X"].dtype)}


@register("bmm", ins=("X", "Y"), outs=("Out",), infer=_bmm_infer, grad=grad_of(("X", "Y")))
def bmm(xp, ins, a, ctx):
    """Out[b] = X[b] @ Y[b] for X [B, M, K] and Y [B, K, N]."""
    return {"Out": xp.matmul(ins["X"], ins["Y"])}


@register("bmm_grad", ins=("X", "Y", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), role="backward")
def bmm_grad(xp, ins, a, ctx):
    x, y, g = ins["X"], ins["Y"], ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = xp.matmul(g, xp.swapaxes(y, 1, 2))
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = xp.matmul(xp.swapaxes(x, 1, 2), g)
    return res


def _dot_infer(ins, a):
    x, y = ins["X"], ins["Y"]
    same = len(x.shape) == len(y.shape) and all(-1 in (p, q) or p == q for p, q in zip(x.shape, y.shape))
    check(same and len(x.shape) in (1, 2), f"dot: X{list(x.shape)} and Y{list(y.shape)} must be 1-D or 2-D of one "
                                           f"shape")
    return {"Out": Meta(tuple(x.shape[:-1]) + (1,), x.dtype)}


@register("dot", ins=("X", "Y"), outs=("Out",), infer=_dot_infer, grad=grad_of(("X", "Y")))
def dot(xp, ins, a, ctx):
    """Out = Σ X·Y over the last dim: [1] for vectors, [N, 1] for rows of matrices."""
    x, y = ins["X"], ins["Y"]
    return {"Out": (x * y).sum(axis=-1, keepdims=True)}


@register("dot_grad", ins=("X", "Y", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), role="backward")
def dot_grad(xp, ins, a, ctx):
    x, y, g = ins["X"], ins["Y"], ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = g * y
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = g * x
    return res


def _addmm_infer(ins, a):
    inp, x, y = (ins[s].shape for s in ("Input", "X", "Y"))
    check(len(x) == 2 and len(y) == 2 and (-1 in (x[1], y[0]) or x[1] == y[0]),
          f"addmm: X{list(x)} and Y{list(y)} must be matrices that multiply")
    ok = len(inp) == 2 and all(p in (1, q, -1) or q == -1 for p, q in zip(inp, (x[0], y[1])))
    check(ok, f"addmm: Input{list(inp)} must be 2-D and broadcast to X @ Y's [{x[0]}, {y[1]}]")
    return {"Out": Meta((x[0], y[1]), ins["X"].dtype)}


@register("addmm", ins=("Input", "X", "Y"), outs=("Out",), attrs={"Alpha": 1.0, "Beta": 1.0}, infer=_addmm_infer,
          grad=grad_of(("Input", "X", "Y")))
def addmm(xp, ins, a, ctx):
    """Out = Beta·Input + Alpha·(X @ Y), Input broadcast over the rows or columns it lacks."""
    x = ins["X"]
    return {"Out": (a["Beta"] * ins["Input"] + a["Alpha"] * (x @ ins["Y"])).astype(x.dtype, copy=False)}


@register("addmm_grad", ins=("Input", "X", "Y", "Out@GRAD"),
          outs=tuple(Slot(s + "@GRAD", dispensable=True) for s in ("Input", "X", "Y")),
          attrs={"Alpha": 1.0, "Beta": 1.0}, role="backward")
def addmm_grad(xp, ins, a, ctx):
    inp, x, y, g = ins["Input"], ins["X"], ins["Y"], ins["Out@GRAD"]
    res = {}
    if "Input@GRAD" in ctx.outputs:
        axes = tuple(i for i in range(2) if inp.shape[i] == 1 and g.shape[i] != 1)
        res["Input@GRAD"] = (a["Beta"] * g.sum(axis=axes, keepdims=True)).astype(inp.dtype, copy=False)
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = (a["Alpha"] * (g @ y.T)).astype(x.dtype, copy=False)
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = (a["Alpha"] * (x.T @ g)).astype(y.dtype, copy=False)
    return res


def _btp_infer(ins, a):
    x, y, w, b = ins["X"].shape, ins["Y"].shape, ins["Weight"].shape, ins.get("Bias")
    check(len(x) == 2 and len(y) == 2 and len(w) == 3 and w[1:] == (x[1], y[1]) and x[1] != -1 and y[1] != -1,
          f"bilinear_tensor_product: Weight{list(w)} must be [size, {x[1]}, {y[1]}] for X{list(x)} and Y{list(y)}")
    check(b is None or tuple(b.shape) == (1, w[0]), f"bilinear_tensor_product: Bias{list(b.shape) if b else []} must "
                                                    f"be [1, {w[0]}]")
    return {"Out": Meta((x[0] if x[0] != -1 else y[0], w[0]), ins["X"].dtype)}


@register("bilinear_tensor_product", ins=("X", "Y", "Weight", Slot("Bias", dispensable=True)), outs=("Out",),
          infer=_btp_infer, grad=grad_of(("X", "Y", "Weight", "Bias"), uses=("X", "Y", "Weight")))
def bilinear_tensor_product(xp, ins, a, ctx):
    """Out[b, s] = X[b] · Weight[s] · Y[b]ᵀ (+ Bias[0, s])."""
    x, y, w = ins["X"], ins["Y"], ins["Weight"]
    out = xp.einsum("bm,smn,bn->bs", x, w, y)
    if ins.get("Bias") is not None:
        out = out + ins["Bias"]
    return {"Out": out.astype(x.dtype, copy=False)}


@register("bilinear_tensor_product_grad", ins=("X", "Y", "Weight", "Out@GRAD"),
          outs=tuple(Slot(s + "@GRAD", dispensable=True) for s in ("X", "Y", "Weight", "Bias")), role="backward")
def bilinear_tensor_product_grad(xp, ins, a, ctx):
    x, y, w, g = ins["X"], ins["Y"], ins["Weight"], ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = xp.einsum("bs,smn,bn->bm", g, w, y)
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = xp.einsum("bs,smn,bm->bn", g, w, x)
    if "Weight@GRAD" in ctx.outputs:
        res["Weight@GRAD"] = xp.einsum("bs,bm,bn->smn", g, x, y)
    if "Bias@GRAD" in ctx.outputs:
        res["Bias@GRAD"] = g.sum(axis=0, keepdims=True)
    return res


def _kron_shapes(x, y) -> tuple:
    n = max(len(x), len(y))
    return (1,) * (n - len(x)) + tuple(x), (1,) * (n - len(y)) + tuple(y)


def _kron_infer(ins, a):
    x, y = _kron_shapes(ins["X"].shape, ins["Y"].shape)
    return {"Out": Meta(tuple(-1 if -1 in (p, q) else p * q for p, q in zip(x, y)), ins["X"].dtype)}


def _kron_parts(x, y):
    """X and Y reshaped so that their product broadcasts to Out as [x0, y0, x1, y1, ...]."""
    xs, ys = _kron_shapes(x.shape, y.shape)
    n = len(xs)
    return (x.reshape(tuple(d for p in xs for d in (p, 1))), y.reshape(tuple(d for q in ys for d in (1, q))),
            tuple(d for p, q in zip(xs, ys) for d in (p, q)), n)


@register("kron", ins=("X", "Y"), outs=("Out",), infer=_kron_infer, grad=grad_of(("X", "Y")))
def kron(xp, ins, a, ctx):
    """Out = the Kronecker product of X and Y (the lower rank padded with leading 1s):
    Out[i·Yd + j] = X[i]·Y[j] in every dim."""
    xr, yr, inter, n = _kron_parts(ins["X"], ins["Y"])
    out = xr * yr
    return {"Out": out.reshape(tuple(inter[2 * i] * inter[2 * i + 1] for i in range(n)))}


@register("kron_grad", ins=("X", "Y", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), role="backward")
def kron_grad(xp, ins, a, ctx):
    x, y = ins["X"], ins["Y"]
    xr, yr, inter, n = _kron_parts(x, y)
    g = ins["Out@GRAD"].reshape(inter)
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = (g * yr).sum(axis=tuple(range(1, 2 * n, 2))).reshape(x.shape)
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = (g * xr).sum(axis=tuple(range(0, 2 * n, 2))).reshape(y.shape)
    return res


_TRACE_ATTRS = {"offset": 0, "dim1": 0, "dim2": 1}


def _trace_dims(op: str, shape, a, extra: int = 0) -> tuple:
    r = len(shape) + extra
    d1, d2 = a["dim1"], a["dim2"]
    check(-r <= d1 < r and -r <= d2 < r and d1 % r != d2 % r,
          f"{op}: dim1 {d1} and dim2 {d2} must be two different dims of a rank-{r} tensor (Input{list(shape)})")
    return min(d1 % r, d2 % r), max(d1 % r, d2 % r)


def _trace_infer(ins, a):
    x = ins["Input"].shape
    check(len(x) >= 2, f"trace: Input must have rank >= 2, got Input{list(x)}")
    d1, d2 = _trace_dims("trace", x, a)
    return {"Out": Meta(tuple(d for i, d in enumerate(x) if i not in (d1, d2)) or (1,), ins["Input"].dtype)}


def _diag_mask(xp, n1: int, n2: int, offset: int, dtype):
    return (xp.arange(n2)[None, :] - xp.arange(n1)[:, None] == offset).astype(dtype)


@register("trace", ins=("Input",), outs=("Out",), attrs=_TRACE_ATTRS, infer=_trace_infer, grad=grad_of(("Input",)))
def trace(xp, ins, a, ctx):
    """Out = the sum of Input's diagonal ``offset`` (above the main one if > 0) in the plane of
    dims ``dim1`` and ``dim2``; those dims are removed ([1] if none is left). As Paddle's
    Diagonal, the plane's rows are always the lower of the two dims (numpy's trace would
    transpose it when dim1 > dim2)."""
    x = ins["Input"]
    d1, d2 = _trace_dims("trace", x.shape, a)
    m = xp.moveaxis(x, (d1, d2), (-2, -1))
    out = (m * _diag_mask(xp, m.shape[-2], m.shape[-1], a["offset"], x.dtype)).sum(axis=(-2, -1))
    return {"Out": out.reshape(out.shape or (1,))}


@register("trace_grad", ins=("Input", "Out@GRAD"), outs=("Input@GRAD",), attrs=_TRACE_ATTRS, role="backward")
def trace_grad(xp, ins, a, ctx):
    x, g = ins["Input"], ins["Out@GRAD"]
    d1, d2 = _trace_dims("trace", x.shape, a)
    shape = [d for i, d in enumerate(x.shape) if i not in (d1, d2)]
    mask = _diag_mask(xp, x.shape[d1], x.shape[d2], a["offset"], g.dtype)
    dm = g.reshape(shape + [1, 1]) * mask
    return {"Input@GRAD": xp.moveaxis(dm, (-2, -1), (d1, d2))}


_CROSS_DEFAULT = 9  # Fluid 1.8's kDefaultDim (DDim::kMaxRank): the first dim of size 3


def _cross_dim(shape, dim: int) -> int:
    if dim == _CROSS_DEFAULT:
        threes = [i for i, d in enumerate(shape) if d == 3]
        check(bool(threes), f"cross: no dim of X{list(shape)} has size 3 (give dim)")
        return threes[0]
    r = len(shape)
    check(-r <= dim < r and shape[dim] in (3, -1), f"cross: dim {dim} of X{list(shape)} must have size 3")
    return dim % r


def _cross_infer(ins, a):
    x, y = ins["X"], ins["Y"]
    same = len(x.shape) == len(y.shape) and all(-1 in (p, q) or p == q for p, q in zip(x.shape, y.shape))
    check(same, f"cross: X{list(x.shape)} and Y{list(y.shape)} must have one shape")
    _cross_dim(x.shape, a["dim"])
    return {"Out": x}


def _cross(xp, u, v, ax):
    u0, u1, u2 = (xp.take(u, i, axis=ax) for i in range(3))
    v0, v1, v2 = (xp.take(v, i, axis=ax) for i in range(3))
    return xp.stack([u1 * v2 - u2 * v1, u2 * v0 - u0 * v2, u0 * v1 - u1 * v0], axis=ax)


@register("cross", ins=("X", "Y"), outs=("Out",), attrs={"dim": _CROSS_DEFAULT}, infer=_cross_infer,
          grad=grad_of(("X", "Y")))
def cross(xp, ins, a, ctx):
    """Out = X × Y, the vector product along ``dim`` (size 3; default the first such dim)."""
    x = ins["X"]
    return {"Out": _cross(xp, x, ins["Y"], _cross_dim(x.shape, a["dim"]))}


@register("cross_grad", ins=("X", "Y", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), attrs={"dim": _CROSS_DEFAULT},
          role="backward")
def cross_grad(xp, ins, a, ctx):
    # <G, X × Y> = <X, Y × G> = <Y, G × X>
    x, y, g = ins["X"], ins["Y"], ins["Out@GRAD"]
    ax = _cross_dim(x.shape, a["dim"])
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = _cross(xp, y, g, ax)
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = _cross(xp, g, x, ax)
    return res


def _dist_infer(ins, a):
    broadcast_infer({"X": ins["X"], "Y": ins["Y"]}, {"axis": -1})
    return {"Out": Meta((1,), ins["X"].dtype)}


@register("dist", ins=("X", "Y"), outs=("Out",), attrs={"p": 2.0}, infer=_dist_infer,
          grad=grad_of(("X", "Y"), outs=("Out",)))
def dist(xp, ins, a, ctx):
    """Out = ‖X - Y‖_p over all entries (X and Y broadcast as numpy does), shape [1]: p = 0
    counts the nonzero differences, ±inf takes the largest / smallest |X - Y|."""
    x = ins["X"]
    d = xp.abs(x - ins["Y"])
    p = a["p"]
    if p == 0:
        out = (d != 0).sum()
    elif math.isinf(p):
        out = d.max() if p > 0 else d.min()
    else:
        out = (d ** p).sum() ** (1 / p)
    return {"Out": xp.asarray(out, dtype=x.dtype).reshape(1)}


@register("dist_grad", ins=("X", "Y", "Out", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), attrs={"p": 2.0},
          role="backward")
def dist_grad(xp, ins, a, ctx):
    # Paddle's DistGradFunction: |d|^(p-1) / (Out + 1e-10)^(p-1)·sign(d); for ±inf the
    # gradient goes to every entry with |d| == Out; for p = 0 it is zero.
    x, y, out, g = ins["X"], ins["Y"], ins["Out"], ins["Out@GRAD"]
    d = x - y
    p, sign = a["p"], xp.sign(d)
    if p == 0:
        grad = xp.zeros_like(d)
    elif math.isinf(p):
        grad = (xp.abs(d) == out) * sign * g
    else:
        grad = (xp.abs(d) / (out + 1e-10)) ** (p - 1) * sign * g
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = _unbroadcast(xp, grad, x.shape, x.shape).astype(x.dtype, copy=False)
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = _unbroadcast(xp, -grad, y.shape, y.shape).astype(y.dtype, copy=False)
    return res
