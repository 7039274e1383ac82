"""Losses: square_error_cost."""
from __future__ import annotations

from placegroup.ops.registry import Slot, check, grad_of, register


def _sec_infer(ins, attrs):
    x, y = ins["X"], ins["Y"]
    check(len(x.shape) == len(y.shape), f"input {list(x.shape)} and label {list(y.shape)} differ in rank")
    return {"Out": x}


@register("square_error_cost", ins=("X", Slot("Y", no_grad=True)), outs=("Out",), infer=_sec_infer,
          grad=grad_of(("X", "Y")))
def square_error_cost(xp, ins, a):
    """Out = (X - Y)², elementwise."""
    d = ins["X"] - ins["Y"]
    return {"Out": d * d}


@register("square_error_cost_grad", ins=("X", "Y", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), role="backward",
          wants_outputs=True)
def square_error_cost_grad(xp, ins, a, want):
    g = 2 * (ins["X"] - ins["Y"]) * ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = g
    if "Y@GRAD" in want:
        res["Y@GRAD"] = -g
    return res
