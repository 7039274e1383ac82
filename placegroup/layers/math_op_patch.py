"""Python operators on Variables (``x * 2``, ``a + b``) append elementwise ops."""
from __future__ import annotations

from placegroup.layer_helper import LayerHelper


def _as_var(helper, value, like):
    if hasattr(value, "block"):
        return value
    c = helper.create_variable_for_type_inference(like.dtype, stop_gradient=True)
    helper.append_op("fill_constant", outputs={"Out": [c]},
                     attrs={"shape": [1], "value": float(value), "dtype": like.dtype}, role="forward")
    return c


def binary(x, other, op_type: str, reverse: bool = False):
    helper = LayerHelper(op_type)
    y = _as_var(helper, other, x)
    a, b = (y, x) if reverse else (x, y)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": [a], "Y": [b]}, {"Out": [out]}, {"axis": -1})
    return out
