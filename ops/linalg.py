"""Linear algebra ops of Fluid 1.8: matrix and vector products and the reductions built on
them: mul, matmul, bmm, dot, addmm, bilinear_tensor_product, kron, trace, cross, dist (Fluid
1.8's op types, slots and attrs).

Every kernel is vectorised over ``xp`` (numpy or cupy), keeps its inputs' float dtype and runs
on float64 for the gradient checks. Each grad kernel writes only the gradients its caller asks
for (``ctx.outputs``). Scaling, sums and reductions are in ops/math.py.
"""
from __future__ import annotations

import math

from placegroup.ops.elementwise import _infer as broadcast_infer, _unbroadcast
from placegroup.ops.registry import Meta, Slot, check, grad_of, register


# -- mul ------------------------------------------------------------------------------------


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
