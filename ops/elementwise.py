"""Elementwise binary ops with Fluid's ``axis`` broadcasting, and their gradients.

NOTE(broadcast): Fluid broadcasts Y against X by matching Y's shape (trailing 1s dropped) to a
contiguous run of X's dims starting at ``axis``; ``axis=-1`` aligns Y to X's last dims, which
is numpy broadcasting. ``_align`` reshapes Y so numpy broadcasting does the rest; gradients
sum over the broadcast dims (``_unbroadcast``).
"""
from __future__ import annotations

from placegroup.ops.registry import Meta, Slot, check, grad_of, register


def _align(y, x_ndim: int, axis: int):
    """Y reshaped so that numpy broadcasting against X follows Fluid's ``axis`` rule."""
    if axis == -1 or y.ndim == x_ndim:
        return y
    shape = list(y.shape)
    while len(shape) > 1 and shape[-1] == 1:
        shape.pop()
    return y.reshape((1,) * axis + tuple(shape) + (1,) * (x_ndim - axis - len(shape)))


def _aligned_shape(ys: tuple, x_ndim: int, axis: int) -> tuple:
    if axis == -1 or len(ys) == x_ndim:
        return ys
    shape = list(ys)
    while len(shape) > 1 and shape[-1] == 1:
        shape.pop()
    return (1,) * axis + tuple(shape) + (1,) * (x_ndim - axis - len(shape))


def _unbroadcast(xp, g, shape: tuple, aligned: tuple):
    """Sum ``g`` down to ``aligned`` (the operand as broadcast saw it), then reshape to ``shape``."""
    lead = g.ndim - len(aligned)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(aligned)
                                      if d == 1 and g.shape[lead + i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
        if lead:
            g = g.reshape(g.shape[lead:])
    return g.reshape(shape)


def _infer(ins, attrs):
    x, y = ins["X"].shape, ins["Y"].shape
    axis = attrs["axis"]
    if axis != -1:
        check(0 <= axis <= len(x) - len(y), f"axis {axis} does not fit Y{list(y)} into X{list(x)}")
    ya = _aligned_shape(y, len(x), axis)
    n = max(len(x), len(ya))
    xs, ys = (1,) * (n - len(x)) + tuple(x), (1,) * (n - len(ya)) + tuple(ya)
    out = []
    for a, b in zip(xs, ys):
        check(a == b or a == 1 or b == 1 or a == -1 or b == -1,
              f"X{list(x)} and Y{list(y)} do not broadcast (axis={axis})")
        out.append(-1 if -1 in (a, b) and 1 in (a, b) or (a == -1 and b == -1) else max(a, b))
    return {"Out": Meta(tuple(out), ins["X"].dtype)}


def _binary(name: str, fwd, dx, dy, uses=("X", "Y"), outs=()):
    """Register op ``name`` (Out = fwd(X, Y')) and ``name_grad`` from the partials.

    ``dx(x, y, out, dout)`` and ``dy(...)`` give dOut/dX·dout and dOut/dY·dout on broadcast
    operands; they are summed back to the operands' shapes.
    """
    attrs = {"axis": -1}

    @register(name, ins=("X", "Y"), outs=("Out",), attrs=attrs, infer=_infer,
              grad=grad_of(("X", "Y"), uses=uses, outs=outs))
    def forward(xp, ins, a, ctx):
        return {"Out": fwd(ins["X"], _align(ins["Y"], ins["X"].ndim, a["axis"]))}

    @register(name + "_grad", ins=("X", "Y", Slot("Out", dispensable=True), "Out@GRAD"),
              outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)),
              attrs=attrs, role="backward")
    def backward(xp, ins, a, ctx):
        x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
        ya = _align(y, x.ndim, a["axis"])
        out = ins.get("Out")
        res = {}
        if "X@GRAD" in ctx.outputs:
            res["X@GRAD"] = _unbroadcast(xp, dx(x, ya, out, dout), x.shape, x.shape).astype(x.dtype, copy=False)
        if "Y@GRAD" in ctx.outputs:
            res["Y@GRAD"] = _unbroadcast(xp, dy(x, ya, out, dout), y.shape, ya.shape).astype(y.dtype, copy=False)
        return res

    return forward


_binary("elementwise_add", lambda x, y: x + y, lambda x, y, o, g: g, lambda x, y, o, g: g)
_binary("elementwise_sub", lambda x, y: x - y, lambda x, y, o, g: g, lambda x, y, o, g: -g)
_binary("elementwise_mul", lambda x, y: x * y, lambda x, y, o, g: g * y, lambda x, y, o, g: g * x)
_binary("elementwise_div", lambda x, y: x / y, lambda x, y, o, g: g / y,
        lambda x, y, o, g: -g * x / (y * y))
