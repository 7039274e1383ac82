"""Python operators on Variables (``x * 2``, ``a + b``, ``1 - x``): each appends an
elementwise op, as in Fluid; ``x[i]`` appends a slice op (placegroup/layers/indexing.py). The IR's Variable knows nothing of layers; importing the layers
package installs these operators on it (``monkey_patch_variable``), as Fluid's own
math_op_patch does."""
from __future__ import annotations

from placegroup.ir.variable import Variable
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers.indexing import getitem

_BINARY = {"add": "elementwise_add", "sub": "elementwise_sub", "mul": "elementwise_mul",
           "truediv": "elementwise_div"}


def _as_var(helper, value, like):
    if hasattr(value, "block"):
        return value
    c = helper.create_variable_for_type_inference(like.dtype, stop_gradient=True)
    helper.append_op("fill_constant", outputs={"Out": [c]},
                     attrs={"shape": [1], "value": float(value), "dtype": like.dtype}, role="forward")
    return c


def binary(x, other, op_type: str, reverse: bool = False):
    """``x <op> other`` (``other <op> x`` with ``reverse``) as one elementwise op; a Python
    number becomes a ``fill_constant`` of x's dtype."""
    helper = LayerHelper(op_type)
    y = _as_var(helper, other, x)
    a, b = (y, x) if reverse else (x, y)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": [a], "Y": [b]}, {"Out": [out]}, {"axis": -1})
    return out


def _method(op_type: str, reverse: bool):
    def method(self, other):
        return binary(self, other, op_type, reverse)
    method.__name__ = op_type
    return method


def _not_iterable(self):
    raise TypeError(f"a Variable is not iterable ({self.name}{list(self.shape or [])}); index it, as in {self.name}[0], "
                    f"or unstack it")


def monkey_patch_variable() -> None:
    """Give ``Variable`` its ``+ - * /`` (and the reflected forms) and ``x[i]``.

    NOTE(variable-iter): with ``__getitem__`` alone Python would iterate a Variable by indexing
    it 0, 1, 2, ... until an IndexError that never comes (a dim of -1 has no end), appending
    slice ops forever: ``list(var)`` or ``tuple(shape)`` of a Variable shape must fail at once
    instead, so ``__iter__`` raises TypeError (Fluid 1.8 has no ``__iter__`` and loops).
    """
    for name, op_type in _BINARY.items():
        setattr(Variable, f"__{name}__", _method(op_type, False))
        setattr(Variable, f"__r{name}__", _method(op_type, True))
    Variable.__getitem__ = getitem
    Variable.__iter__ = _not_iterable
