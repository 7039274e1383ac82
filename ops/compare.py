"""Comparisons, logical ops and bool tests of Fluid 1.8 (compare_op.cc, logical_op.cc,
reduce_all/reduce_any, isfinite_op.cc, allclose_op.cc): bool outputs, no gradient.

Comparisons broadcast Y against X with Fluid's ``axis`` rule (NOTE(broadcast) in
ops/elementwise.py) and carry ``force_cpu``, which changes nothing here. The binary logical
ops take bool X and Y of shapes that broadcast as numpy does (Fluid 1.8 asks for equal
shapes, a special case of it).
"""
from __future__ import annotations

from placegroup.ops.elementwise import _align, _infer
from placegroup.ops.math import _REDUCE_ATTRS, _reduce_axes, _reduce_infer
from placegroup.ops.registry import Meta, Slot, check, register

_CMP_ATTRS = {"axis": -1, "force_cpu": False}


def _cmp_infer(ins, a):
    return {"Out": Meta(_infer(ins, a)["Out"].shape, "bool")}


def _compare(name: str, fn, sym: str) -> None:
    @register(name, ins=(Slot("X", no_grad=True), Slot("Y", no_grad=True)), outs=("Out",), attrs=_CMP_ATTRS,
              infer=_cmp_infer)
    def forward(xp, ins, a, ctx):
        return {"Out": fn(xp, ins["X"], _align(ins["Y"], ins["X"].ndim, a["axis"]))}

    forward.__doc__ = f"Out = X {sym} Y elementwise (bool), Y broadcast as in elementwise_add."


for _name, _fn, _sym in [("less_than", lambda xp, x, y: xp.less(x, y), "<"),
                         ("less_equal", lambda xp, x, y: xp.less_equal(x, y), "<="),
                         ("greater_than", lambda xp, x, y: xp.greater(x, y), ">"),
                         ("greater_equal", lambda xp, x, y: xp.greater_equal(x, y), ">="),
                         ("equal", lambda xp, x, y: xp.equal(x, y), "=="),
                         ("not_equal", lambda xp, x, y: xp.not_equal(x, y), "!=")]:
    _compare(_name, _fn, _sym)


def _logical_infer(ins, a):
    for slot, m in ins.items():
        if m is not None:
            check(m.dtype == "bool", f"{slot} must be bool, got {m.dtype}{list(m.shape)}")
    if ins.get("Y") is None:
        return {"Out": ins["X"]}
    return {"Out": Meta(_infer(ins, {"axis": -1})["Out"].shape, "bool")}


def _logical(name: str, fn, doc: str, binary: bool = True) -> None:
    ins = (Slot("X", no_grad=True),) + ((Slot("Y", no_grad=True),) if binary else ())

    @register(name, ins=ins, outs=("Out",), infer=_logical_infer)
    def forward(xp, ins, a, ctx):
        return {"Out": fn(xp, ins["X"], ins["Y"]) if binary else fn(xp, ins["X"])}

    forward.__doc__ = doc


_logical("logical_and", lambda xp, x, y: xp.logical_and(x, y), "Out = X and Y (bool).")
_logical("logical_or", lambda xp, x, y: xp.logical_or(x, y), "Out = X or Y (bool).")
_logical("logical_xor", lambda xp, x, y: xp.logical_xor(x, y), "Out = X xor Y (bool).")
_logical("logical_not", lambda xp, x: xp.logical_not(x), "Out = not X (bool).", binary=False)


# -- reductions and tests with a bool result ------------------------------------------------


def _bool_reduce(name: str, fn) -> None:
    def infer(ins, a):
        check(ins["X"].dtype == "bool", f"{name}: X must be bool, got {ins['X'].dtype}{list(ins['X'].shape)}")
        return _reduce_infer(ins, a)

    def kernel(xp, ins, a, ctx):
        x = ins["X"]
        out = fn(x, axis=_reduce_axes(x.ndim, a), keepdims=a["keep_dim"])
        return {"Out": xp.asarray(out).reshape(out.shape or (1,))}

    kernel.__doc__ = (f"Out = {'all' if name == 'reduce_all' else 'any'} of the bool X over ``dim`` (every dim with "
                      f"``reduce_all``; [1] when no dim is left). No gradient.")
    register(name, ins=(Slot("X", no_grad=True),), outs=("Out",), attrs=_REDUCE_ATTRS, infer=infer)(kernel)


_bool_reduce("reduce_all", lambda x, **kw: x.all(**kw))
_bool_reduce("reduce_any", lambda x, **kw: x.any(**kw))


def _test(name: str, fn, doc: str) -> None:
    def kernel(xp, ins, a, ctx):
        return {"Out": xp.asarray(fn(xp, ins["X"])).reshape(1)}

    kernel.__doc__ = doc
    register(name, ins=(Slot("X", no_grad=True),), outs=("Out",),
             infer=lambda ins, a: {"Out": Meta((1,), "bool")})(kernel)


# Fluid 1.8's isfinite/isinf/isnan (isfinite_op.cc) answer for the whole tensor: one bool.
_test("isfinite", lambda xp, x: xp.isfinite(x).all(), "Out = [True] when every entry of X is finite.")
_test("isinf", lambda xp, x: xp.isinf(x).any(), "Out = [True] when some entry of X is ±inf (fluid.layers.has_inf).")
_test("isnan", lambda xp, x: xp.isnan(x).any(), "Out = [True] when some entry of X is NaN (fluid.layers.has_nan).")


def _allclose_infer(ins, a):
    x, y = ins["Input"], ins["Other"]
    check(_broadcastable(x.shape, y.shape), f"allclose: Input{list(x.shape)} and Other{list(y.shape)} do not broadcast")
    return {"Out": Meta((1,), "bool")}


def _broadcastable(p, q) -> bool:
    return all(a == b or 1 in (a, b) or -1 in (a, b) for a, b in zip(p[::-1], q[::-1]))


@register("allclose", ins=(Slot("Input", no_grad=True), Slot("Other", no_grad=True)), outs=("Out",),
          attrs={"rtol": 1e-5, "atol": 1e-8, "equal_nan": False}, infer=_allclose_infer)
def allclose(xp, ins, a, ctx):
    """Out = [True] when |Input - Other| <= atol + rtol·|Other| everywhere (numpy's rule); two
    NaNs count as equal only with ``equal_nan``."""
    x, y = ins["Input"], ins["Other"]
    ok = xp.abs(x - y) <= a["atol"] + a["rtol"] * xp.abs(y)
    if a["equal_nan"]:
        ok = ok | (xp.isnan(x) & xp.isnan(y))
    return {"Out": xp.asarray(ok.all()).reshape(1)}
