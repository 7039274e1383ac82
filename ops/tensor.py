"""Tensor creation and shape ops: fill_constant, increment."""
from __future__ import annotations

from placegroup.ops.registry import Meta, OpSpec, Slot, register


@register("fill_constant", ins=(), outs=("Out",), attrs={"shape": [1], "value": 0.0, "dtype": "float32"},
          infer=lambda ins, a: {"Out": Meta(tuple(a["shape"]), a["dtype"])}, role="init")
def fill_constant(xp, ins, a):
    """Out = a tensor of ``shape`` filled with ``value``."""
    return {"Out": xp.full(tuple(a["shape"]), a["value"], dtype=a["dtype"])}


@register("increment", ins=(Slot("X", no_grad=True),), outs=("Out",), attrs={"step": 1.0},
          infer=lambda ins, a: {"Out": ins["X"]}, inplace={"Out": "X"})
def increment(xp, ins, a):
    """Out = X + step (X has one element; used for step counters)."""
    x = ins["X"]
    return {"Out": x + xp.asarray(a["step"], dtype=x.dtype)}


@register("fill_zeros_like", ins=(Slot("X", no_grad=True),), outs=("Out",), infer=lambda ins, a: {"Out": ins["X"]})
def fill_zeros_like(xp, ins, a):
    """Out = zeros with X's shape and dtype."""
    return {"Out": xp.zeros_like(ins["X"])}


@register("assign", ins=("X",), outs=("Out",), infer=lambda ins, a: {"Out": ins["X"]},
          grad=lambda op: [OpSpec("assign", {"X": [op.outputs["Out"][0] + "@GRAD"]},
                                  {"Out": [op.grad_of(op.inputs["X"][0])]})])
def assign(xp, ins, a):
    """Out = X (the value is shared, never mutated in place)."""
    return {"Out": ins["X"]}


@register("assign_value", ins=(), outs=("Out",),
          attrs={"shape": [1], "dtype": "float32", "values": []},
          infer=lambda ins, a: {"Out": Meta(tuple(a["shape"]), a["dtype"])}, role="init")
def assign_value(xp, ins, a):
    """Out = the constant ``values`` (flat list) reshaped to ``shape``."""
    return {"Out": xp.asarray(a["values"], dtype=a["dtype"]).reshape(tuple(a["shape"]))}
