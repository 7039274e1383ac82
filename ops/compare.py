"""Comparisons and logical ops of Fluid 1.8 (compare_op.cc, logical_op.cc): bool outputs, no
gradient.

Comparisons broadcast Y against X with Fluid's ``axis`` rule (NOTE(broadcast) in
ops/elementwise.py) and carry ``force_cpu``, which changes nothing here. The binary logical
ops take bool X and Y of shapes that broadcast as numpy does (Fluid 1.8 asks for equal
shapes, a special case of it).
"""
from __future__ import annotations

from placegroup.ops.elementwise import _align, _infer
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
