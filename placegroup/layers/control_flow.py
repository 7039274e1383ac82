"""``fluid.layers.control_flow``: Fluid's control-flow layers, as far as placegroup has them.

Scripts import the module by this path. The comparisons Fluid keeps here are the ones of
placegroup/layers/ops.py, and so is ``increment``; ``Print`` and ``is_empty`` are here, as in
Fluid 1.8 (ops/misc.py). Every other Fluid 1.8 name of the module (``While``, ``IfElse``,
``Switch``, ``StaticRNN``, ...) raises ``NotImplementedInPlacegroup``.

Example::

    import placegroup as fluid
    x = fluid.layers.data("x", shape=[3])
    h = fluid.layers.Print(fluid.layers.fc(x, 4), message="hidden", summarize=8, first_n=2)
    empty = fluid.layers.is_empty(x)
"""
from __future__ import annotations

from placegroup.ir.framework import Variable
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers.ops import equal, greater_equal, greater_than, increment, less_equal, less_than, not_equal

__all__ = ["equal", "greater_equal", "greater_than", "less_equal", "less_than", "not_equal", "increment", "Print",
           "is_empty"]

_PRINTABLE = ("float32", "float64", "int32", "int64", "bool")
_PHASES = ("forward", "backward", "both")


def Print(input, first_n: int = -1, message=None, summarize: int = 20, print_tensor_name: bool = True,  # noqa: N802
          print_tensor_type: bool = True, print_tensor_shape: bool = True, print_tensor_lod: bool = True,
          print_phase: str = "both"):
    """Pass ``input`` through a ``print`` op that writes it to stderr each time it runs, in Fluid
    1.8's format (NOTE(print-format) in ops/misc.py): the message, then the var's name, shape
    and dtype, then its first ``summarize`` elements.

    Use the returned var afterwards: the gradient of ``input`` flows through it, and with
    ``print_phase`` "backward" or "both" the print op of the backward pass writes that gradient.

    Args:
        input: a float32, float64, int32, int64 or bool Variable.
        first_n: print only the first ``first_n`` times the op runs (<= 0: always); the count
            lives as long as the executor's plan of the program (NOTE(print-first-n)).
        message: a text written before the value.
        summarize: how many elements to write (-1: all).
        print_tensor_name, print_tensor_type, print_tensor_shape: write the name, the dtype,
            the shape.
        print_tensor_lod: accepted; a dense value has no LoD to write.
        print_phase: "forward", "backward" or "both".

    Returns:
        A new Variable equal to ``input`` (named ``print_<input>_<n>.tmp_0`` as in Fluid).

    Raises:
        TypeError: ``input`` is not a Variable of a printable dtype.
        ValueError: an unknown ``print_phase``.

    Thread-safety: the op writes each value in one write; build programs from one thread.

    Example::

        loss = fluid.layers.Print(loss, message="loss", first_n=10)
    """
    if not isinstance(input, Variable) or input.dtype not in _PRINTABLE:
        raise TypeError(f"Print: input must be a Variable of dtype {list(_PRINTABLE)}, got {input!r}")
    if str(print_phase).lower() not in _PHASES:
        raise ValueError(f"Print: print_phase must be one of {list(_PHASES)}, got {print_phase!r}")
    helper = LayerHelper("print_" + input.name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("print", {"In": [input]}, {"Out": [out]},
                     {"first_n": int(first_n), "summarize": int(summarize), "message": message or "",
                      "print_tensor_name": bool(print_tensor_name), "print_tensor_type": bool(print_tensor_type),
                      "print_tensor_shape": bool(print_tensor_shape), "print_tensor_lod": bool(print_tensor_lod),
                      "print_phase": print_phase.upper(), "_tensor_name": input.name})
    return out


def is_empty(x, cond=None):
    """Whether ``x`` has no elements, as a bool Variable [1] computed at run time.

    Args:
        x: a float32, float64, int32 or int64 Variable.
        cond: a bool Variable to write the answer into (default: a new one).

    Returns:
        ``cond``, or the new bool Variable (no gradient).

    Raises:
        TypeError: ``cond`` is not bool.

    Example::

        empty = fluid.layers.is_empty(x)      # [False] for a batch with rows
    """
    helper = LayerHelper("is_empty")
    if cond is None:
        cond = helper.create_variable_for_type_inference("bool", stop_gradient=True)
    elif cond.dtype != "bool":
        raise TypeError(f"is_empty: cond must be a bool Variable, got {cond.dtype}")
    helper.append_op("is_empty", {"X": [x]}, {"Out": [cond]})
    return cond
