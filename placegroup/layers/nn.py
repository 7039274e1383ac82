"""Neural-network layers, Fluid 1.x signatures."""
from __future__ import annotations

import math

from placegroup.framework import Variable
from placegroup.layer_helper import LayerHelper

__all__ = ["fc", "mean", "square_error_cost"]


def fc(input, size: int, num_flatten_dims: int = 1, param_attr=None, bias_attr=None, act=None,
       is_test: bool = False, name: str | None = None, model_parallel: bool = False):
    """A fully connected layer: ``act(sum_i flatten(input_i) @ W_i + b)``.

    Weights default to Xavier, the bias to zeros (as in Fluid).

    Args:
        input: a Variable or a list of them.
        size: output width.
        num_flatten_dims: dims of ``input`` kept as rows; the rest are flattened.
        model_parallel: mark the layer for the model-parallel pass (seed 004).
    """
    helper = LayerHelper("fc", name=name)
    inputs = input if isinstance(input, (list, tuple)) else [input]
    attrs = param_attr if isinstance(param_attr, (list, tuple)) else [param_attr] * len(inputs)
    parts = []
    for x, pa in zip(inputs, attrs):
        in_dim = math.prod(x.shape[num_flatten_dims:])
        w = helper.create_parameter(pa, [in_dim, size], x.dtype)
        if model_parallel:
            w.attrs["model_parallel"] = "column"
        tmp = helper.create_variable_for_type_inference(x.dtype)
        helper.append_op("mul", {"X": [x], "Y": [w]}, {"Out": [tmp]},
                         {"x_num_col_dims": num_flatten_dims, "y_num_col_dims": 1})
        parts.append(tmp)
    pre = parts[0]
    if len(parts) > 1:
        pre = helper.create_variable_for_type_inference(inputs[0].dtype)
        helper.append_op("sum", {"X": parts}, {"Out": [pre]})
    b = helper.create_parameter(bias_attr, [size], inputs[0].dtype, is_bias=True)
    if b is not None:
        if model_parallel:
            b.attrs["model_parallel"] = "column"
        out = helper.create_variable_for_type_inference(inputs[0].dtype)
        helper.append_op("elementwise_add", {"X": [pre], "Y": [b]}, {"Out": [out]},
                         {"axis": num_flatten_dims})
        pre = out
    return helper.append_activation(pre, act)


def _unary(op_type: str, x: Variable, out_slot: str = "Out", **attrs):
    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": [x]}, {out_slot: [out]}, attrs)
    return out


def mean(x, name=None):
    """The mean of all elements, shape [1]."""
    return _unary("mean", x)


def square_error_cost(input, label):
    """``(input - label)²`` elementwise."""
    helper = LayerHelper("square_error_cost")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("square_error_cost", {"X": [input], "Y": [label]}, {"Out": [out]})
    return out
