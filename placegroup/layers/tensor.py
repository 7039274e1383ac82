"""Tensor layers: constants, globals, casts, concatenation and the like (Fluid's tensor.py).

Example::

    import placegroup as fluid
    step = fluid.layers.create_global_var(shape=[1], value=0.0, dtype="float32", persistable=True)
    both = fluid.layers.concat([a, b], axis=1)
"""
from __future__ import annotations

import numpy as np

from placegroup.ir import unique_name
from placegroup.ir.framework import Variable, normalize_dtype
from placegroup.initializer import ConstantInitializer
from placegroup.layer_helper import LayerHelper

__all__ = ["create_tensor", "create_parameter", "create_global_var", "cast", "concat", "sums", "assign",
           "fill_constant", "zeros", "ones"]


def create_tensor(dtype, name=None, persistable: bool = False):
    """An empty var of ``dtype``; the first op that writes it gives it a shape.

    Example::

        t = fluid.layers.create_tensor("float32")
        fluid.layers.assign(x, output=t)
    """
    helper = LayerHelper("create_tensor", name=name)
    return helper.block.create_var(name or unique_name.generate("create_tensor.tmp"),
                                   dtype=normalize_dtype(dtype), persistable=persistable)


def create_parameter(shape, dtype, name=None, attr=None, is_bias: bool = False, default_initializer=None):
    """A trainable parameter of ``shape`` (Xavier-initialized, zeros for a bias, unless told).

    Example::

        w = fluid.layers.create_parameter(shape=[4, 3], dtype="float32", name="w")
    """
    from placegroup.param_attr import ParamAttr

    helper = LayerHelper("create_parameter")
    attr = ParamAttr.to_attr(attr)
    if name is not None and attr is not False and attr.name is None:
        attr.name = name
    return helper.create_parameter(attr, shape, normalize_dtype(dtype), is_bias, default_initializer)


def create_global_var(shape, value, dtype, persistable: bool = False, force_cpu: bool = False, name=None):
    """A global var filled with ``value`` by the startup program (a ``fill_constant`` there).

    Args:
        shape: its shape (no -1).
        value: the initial value.
        persistable: keep it across steps (counters, accumulators).
        force_cpu: accepted for Fluid compatibility; placement comes from PlaceGroups.

    Example::

        counter = fluid.layers.create_global_var([1], 0.0, "float32", persistable=True)
    """
    helper = LayerHelper("global_var", name=name)
    var = helper.create_global_variable(name=name, persistable=persistable, shape=[int(d) for d in shape],
                                        dtype=normalize_dtype(dtype), stop_gradient=True)
    helper.set_variable_initializer(var, ConstantInitializer(float(value)))
    return var


def cast(x, dtype):
    """``x`` converted to ``dtype`` (the gradient is converted back).

    Example::

        xf = fluid.layers.cast(ids, "float32")
    """
    helper = LayerHelper("cast")
    dtype = normalize_dtype(dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("cast", {"X": [x]}, {"Out": [out]}, {"out_dtype": dtype})
    return out


def concat(input, axis: int = 0, name=None):
    """The vars of ``input`` joined along ``axis``; the other dims must agree.

    Example::

        both = fluid.layers.concat([a, b], axis=1)   # [N, 3] and [N, 2] -> [N, 5]
    """
    helper = LayerHelper("concat", name=name)
    out = helper.create_variable_for_type_inference(input[0].dtype)
    helper.append_op("concat", {"X": list(input)}, {"Out": [out]}, {"axis": int(axis)})
    return out


def sums(input, out=None):
    """The elementwise sum of the vars in ``input`` (all of one shape), into ``out`` if given."""
    helper = LayerHelper("sum")
    out = out if out is not None else helper.create_variable_for_type_inference(input[0].dtype)
    helper.append_op("sum", {"X": list(input)}, {"Out": [out]})
    return out


def assign(input, output=None):
    """Copy ``input`` (a var, or a numpy array stored in the program) into ``output``.

    Example::

        c = fluid.layers.assign(np.array([1.0, 2.0], dtype="float32"))
    """
    helper = LayerHelper("assign")
    if isinstance(input, Variable):
        output = output if output is not None else helper.create_variable_for_type_inference(input.dtype)
        helper.append_op("assign", {"X": [input]}, {"Out": [output]})
        return output
    value = np.asarray(input)
    dtype = normalize_dtype(value.dtype)
    output = output if output is not None else helper.create_variable_for_type_inference(dtype)
    helper.append_op("assign_value", outputs={"Out": [output]},
                     attrs={"shape": list(value.shape), "dtype": dtype, "values": value.ravel().tolist()},
                     role="forward")  # a step's constant, not a parameter's initializer
    return output


def fill_constant(shape, dtype, value, force_cpu: bool = False, out=None):
    """A var of ``shape`` filled with ``value``, recomputed each step (into ``out`` if given).

    Example::

        one = fluid.layers.fill_constant(shape=[1], dtype="float32", value=1.0)
    """
    helper = LayerHelper("fill_constant")
    dtype = normalize_dtype(dtype)
    out = out if out is not None else helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("fill_constant", outputs={"Out": [out]},
                     attrs={"shape": [int(d) for d in shape], "dtype": dtype, "value": float(value)},
                     role="forward")  # a step's constant, not a parameter's initializer
    return out


def zeros(shape, dtype, force_cpu: bool = False):
    """``fill_constant(shape, dtype, 0.0)``."""
    return fill_constant(shape, dtype, 0.0)


def ones(shape, dtype, force_cpu: bool = False):
    """``fill_constant(shape, dtype, 1.0)``."""
    return fill_constant(shape, dtype, 1.0)
