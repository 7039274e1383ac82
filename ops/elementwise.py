"""Elementwise binary ops with Fluid's ``axis`` broadcasting, and their gradients.

add, sub, mul, div, max, min and pow have gradients; floordiv and mod have none (Fluid 1.8).

NOTE(broadcast): Fluid broadcasts Y against X by matching Y's shape (trailing 1s dropped) to a
contiguous run of X's dims starting at ``axis``; ``axis=-1`` aligns Y to X's last dims, which
is numpy broadcasting. ``_align`` reshapes Y so numpy broadcasting does the rest; gradients
sum over the broadcast dims (``_unbroadcast``).

NOTE(max-min-ties): where X == Y, elementwise_max's gradient goes to Y and elementwise_min's to
Y too (Paddle's MaxGradDx is ``x > y``, MaxGradDy ``x <= y``; MinGradDx ``x < y``, MinGradDy
``x >= y``), never half to each.

NOTE(int-division): Fluid 1.8 registers elementwise_floordiv for int32/int64 only and computes
``trunc(x / y)`` (C++ integer division, towards zero: -7 // 2 is -3, not numpy's -4);
elementwise_mod is C++ ``x % y`` on integers (the sign of X) and ``fmod(y + fmod(x, y), y)`` on
floats (the sign of Y, as Python's %). Paddle 2 floors instead; we keep 1.8's numbers. A zero
divisor is a ZeroDivisionError naming the op (Paddle throws there too).
"""
from __future__ import annotations

from placegroup.ops.registry import Meta, Slot, check, grad_of, register

_INTS = ("int32", "int64")


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


def _binary(name: str, fwd, dx=None, dy=None, uses=("X", "Y"), outs=(), infer=_infer, doc: str = ""):
    """Register op ``name`` (Out = fwd(xp, X, Y')) and, given the partials, ``name_grad``.

    ``dx(xp, x, y, out, dout)`` and ``dy(...)`` give dOut/dX·dout and dOut/dY·dout on broadcast
    operands; they are summed back to the operands' shapes.
    """
    attrs = {"axis": -1}

    def forward(xp, ins, a, ctx):
        return {"Out": fwd(xp, ins["X"], _align(ins["Y"], ins["X"].ndim, a["axis"]))}

    forward.__doc__ = doc or f"Out = {name[12:]}(X, Y), Y broadcast as NOTE(broadcast) says."
    register(name, ins=("X", "Y"), outs=("Out",), attrs=attrs, infer=infer,
             grad=grad_of(("X", "Y"), uses=uses, outs=outs) if dx else None)(forward)
    if dx is None:
        return forward

    @register(name + "_grad", ins=("X", "Y", Slot("Out", dispensable=True), "Out@GRAD"),
              outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)),
              attrs=attrs, role="backward")
    def backward(xp, ins, a, ctx):
        x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
        ya = _align(y, x.ndim, a["axis"])
        out = ins.get("Out")
        res = {}
        if "X@GRAD" in ctx.outputs:
            res["X@GRAD"] = _unbroadcast(xp, dx(xp, x, ya, out, dout), x.shape, x.shape).astype(x.dtype, copy=False)
        if "Y@GRAD" in ctx.outputs:
            res["Y@GRAD"] = _unbroadcast(xp, dy(xp, x, ya, out, dout), y.shape, ya.shape).astype(y.dtype, copy=False)
        return res

    return forward


_binary("elementwise_add", lambda xp, x, y: x + y, lambda xp, x, y, o, g: g, lambda xp, x, y, o, g: g)
_binary("elementwise_sub", lambda xp, x, y: x - y, lambda xp, x, y, o, g: g, lambda xp, x, y, o, g: -g)
_binary("elementwise_mul", lambda xp, x, y: x * y, lambda xp, x, y, o, g: g * y, lambda xp, x, y, o, g: g * x)
def _div(xp, x, y):
    """x / y; integers divide as C++ does (Fluid's kernel), rounding towards zero."""
    if x.dtype.kind in "iu" and y.dtype.kind in "iu":
        q = xp.abs(x) // xp.abs(y)
        return xp.where((x < 0) != (y < 0), -q, q).astype(x.dtype, copy=False)
    return x / y


_binary("elementwise_div", _div, lambda xp, x, y, o, g: g / y,
        lambda xp, x, y, o, g: -g * x / (y * y))
# NOTE(max-min-ties) says who gets the gradient where X == Y.
_binary("elementwise_max", lambda xp, x, y: xp.maximum(x, y), lambda xp, x, y, o, g: g * (x > y),
        lambda xp, x, y, o, g: g * (x <= y))
_binary("elementwise_min", lambda xp, x, y: xp.minimum(x, y), lambda xp, x, y, o, g: g * (x < y),
        lambda xp, x, y, o, g: g * (x >= y))
_binary("elementwise_pow", lambda xp, x, y: xp.power(x, y), lambda xp, x, y, o, g: g * y * xp.power(x, y - 1),
        lambda xp, x, y, o, g: g * xp.log(x) * o, outs=("Out",))


def _int_infer(op: str, ints_only: bool):
    def infer(ins, a):
        for slot in ("X", "Y"):
            m = ins[slot]
            check(not ints_only or m.dtype in _INTS,
                  f"{op}: {slot} must be int32 or int64 (Fluid 1.8 has no other kernel), got {m.dtype}{list(m.shape)}")
        check(ins["X"].dtype == ins["Y"].dtype, f"{op}: X {ins['X'].dtype} and Y {ins['Y'].dtype} differ in dtype")
        return _infer(ins, a)

    return infer


def _nonzero(xp, op: str, y):
    if bool((y == 0).any()):
        raise ZeroDivisionError(f"{op}: Y holds 0 (a divisor of shape {list(y.shape)})")
    return y


def _floordiv(xp, x, y):
    y = _nonzero(xp, "elementwise_floordiv", y)
    return (xp.sign(x) * xp.sign(y) * (xp.abs(x) // xp.abs(y))).astype(x.dtype, copy=False)


def _mod(xp, x, y):
    y = _nonzero(xp, "elementwise_mod", y)
    if x.dtype.kind in "iu":
        return xp.fmod(x, y)
    return xp.fmod(y + xp.fmod(x, y), y)


# NOTE(int-division): Fluid 1.8's rounding and signs, not Paddle 2's.
_binary("elementwise_floordiv", _floordiv, infer=_int_infer("elementwise_floordiv", True),
        doc="Out = trunc(X / Y) on int32/int64 (NOTE(int-division)); no gradient.")
_binary("elementwise_mod", _mod, infer=_int_infer("elementwise_mod", False),
        doc="Out = X mod Y: the sign of X on integers, of Y on floats (NOTE(int-division)); no gradient.")
