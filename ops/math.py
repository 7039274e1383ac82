"""Matrix products, scaling and reductions: mul, matmul, scale, mean, sum, reduce_sum, reduce_mean,
reduce_max, reduce_min, reduce_prod."""
from __future__ import annotations

import math

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
    from placegroup.ops.registry import OpSpec

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
