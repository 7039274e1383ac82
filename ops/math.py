"""Matrix products and reductions: mul, mean."""
from __future__ import annotations

import math

from placegroup.ops.registry import Meta, Slot, check, grad_of, register


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
def mul(xp, ins, a):
    """Out = flatten(X, x_num_col_dims) @ flatten(Y, y_num_col_dims), reshaped (Fluid's mul)."""
    x, y = ins["X"], ins["Y"]
    xn, yn = a["x_num_col_dims"], a["y_num_col_dims"]
    out = x.reshape(_flat2d(x.shape, xn)) @ y.reshape(_flat2d(y.shape, yn))
    return {"Out": out.reshape(x.shape[:xn] + y.shape[yn:])}


@register("mul_grad", ins=("X", "Y", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)),
          attrs={"x_num_col_dims": 1, "y_num_col_dims": 1}, role="backward", wants_outputs=True)
def mul_grad(xp, ins, a, want):
    x, y, g = ins["X"], ins["Y"], ins["Out@GRAD"]
    x2, y2 = x.reshape(_flat2d(x.shape, a["x_num_col_dims"])), y.reshape(_flat2d(y.shape, a["y_num_col_dims"]))
    g2 = g.reshape(x2.shape[0], y2.shape[1])
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = (g2 @ y2.T).reshape(x.shape)
    if "Y@GRAD" in want:
        res["Y@GRAD"] = (x2.T @ g2).reshape(y.shape)
    return res


@register("mean", ins=("X",), outs=("Out",), infer=lambda ins, a: {"Out": Meta((1,), ins["X"].dtype)},
          grad=grad_of(("X",)))
def mean(xp, ins, a):
    """Out = mean of all elements of X, shape [1] (Fluid 1.x)."""
    x = ins["X"]
    return {"Out": x.mean(dtype=x.dtype).reshape(1)}


@register("mean_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), role="backward")
def mean_grad(xp, ins, a):
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


@register("sum", ins=(Slot("X", duplicable=True),), outs=("Out",), infer=_sum_infer, grad=_sum_grad)
def sum_(xp, ins, a):
    """Out = X[0] + X[1] + ... (same shapes)."""
    xs = ins["X"]
    out = xs[0].copy() if len(xs) > 1 else xs[0]
    for x in xs[1:]:
        out += x
    return {"Out": out}
