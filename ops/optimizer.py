"""Optimizer ops: each updates a Param from its Grad (slot roles let passes find them)."""
from __future__ import annotations

from placegroup.ops.registry import Slot, register

_P = Slot("Param", role="Param")
_G = Slot("Grad", role="Grad")
_LR = Slot("LearningRate", role="LearningRate")
_PO = Slot("ParamOut", role="ParamOut")


def _param_like(ins, attrs):
    return {"ParamOut": ins["Param"]}


@register("sgd", ins=(_P, _G, _LR), outs=(_PO,), infer=_param_like, role="optimize",
          inplace={"ParamOut": "Param"})
def sgd(xp, ins, a):
    """ParamOut = Param - lr * Grad."""
    p = ins["Param"]
    return {"ParamOut": p - ins["LearningRate"].astype(p.dtype, copy=False) * ins["Grad"]}
