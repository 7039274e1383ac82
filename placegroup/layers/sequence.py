"""Sequence layers of Fluid 1.8 (fluid/layers/sequence_lod.py) over LoD vars: sequence_pool,
sequence_first_step, sequence_last_step, sequence_softmax, sequence_conv, sequence_expand,
sequence_expand_as, sequence_reshape, sequence_concat and sequence_slice (ops/sequence.py).

Their input is a var holding a batch of sequences (``lod_level >= 1``: a data var declared so,
or what an op keeps of one, e.g. an embedding of LoD ids); they pool or normalise along the
sequences of its last LoD level.

Example::

    import placegroup as fluid
    words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    emb = fluid.layers.embedding(words, size=[5000, 32])          # [-1, 32], lod_level 1
    bow = fluid.layers.sequence_pool(emb, pool_type="sum")         # [-1, 32]: one row per sentence
    last = fluid.layers.sequence_last_step(emb)
    att = fluid.layers.sequence_softmax(fluid.layers.fc(emb, 1))   # weights summing to 1 per sentence
"""
from __future__ import annotations

from placegroup.ir.framework import Variable
from placegroup.model.layer_helper import LayerHelper

__all__ = ["sequence_concat", "sequence_conv", "sequence_expand", "sequence_expand_as", "sequence_first_step",
           "sequence_last_step", "sequence_pool", "sequence_reshape", "sequence_slice", "sequence_softmax"]


def _check(input, layer: str, dtypes=("float32", "float64"), what: str = "input") -> None:
    """Fluid's check_variable_and_dtype: a Variable of one of ``dtypes`` (TypeError)."""
    if not isinstance(input, Variable):
        raise TypeError(f"The type of '{what}' in {layer} must be Variable, but received {type(input).__name__}")
    if input.dtype not in dtypes:
        raise TypeError(f"The data type of '{what}' in {layer} must be {list(dtypes)}, but received "
                        f"{input.dtype}")


_ANY = ("float32", "float64", "int32", "int64")


def sequence_pool(input, pool_type: str, is_test: bool = False, pad_value: float = 0.0):
    """Pool each sequence of ``input``'s last LoD level into one row.

    ``pool_type`` is ``"average"`` (sum / length), ``"sum"``, ``"sqrt"`` (sum / sqrt(length)),
    ``"max"`` (elementwise), ``"last"`` or ``"first"``; an empty sequence gives ``pad_value``.
    With a 2-level LoD the output keeps the first level (lod_level 1), else it has none.

    Args:
        input: a float32/float64 var with lod_level >= 1, [N, ...] (N: all steps).
        pool_type: one of the six above (any case).
        is_test: accepted for Fluid's signature (MaxIndex is filled either way).
        pad_value: the output row of an empty sequence.

    Returns:
        The pooled var, [number of sequences, ...].

    Raises:
        TypeError: ``input`` is not a float Variable.
        ProgramError: an unknown ``pool_type``.

    Example::

        x = fluid.layers.data(name="x", shape=[10], dtype="float32", lod_level=1)
        avg_x = fluid.layers.sequence_pool(input=x, pool_type="average")
    """
    _check(input, "sequence_pool")
    helper = LayerHelper("sequence_pool")
    pool_out = helper.create_variable_for_type_inference(input.dtype)
    max_index = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("sequence_pool", {"X": [input]}, {"Out": [pool_out], "MaxIndex": [max_index]},
                     {"pooltype": str(pool_type).upper(), "is_test": is_test, "pad_value": pad_value})
    if str(pool_type).lower() == "max":  # as Fluid: MaxIndex is an index, no value to differentiate
        max_index.stop_gradient = True
    return pool_out


def sequence_first_step(input):
    """The first step of each sequence (``sequence_pool(input, "first")``).

    Example::

        x = fluid.layers.data(name="x", shape=[10], dtype="float32", lod_level=1)
        first = fluid.layers.sequence_first_step(input=x)
    """
    _check(input, "sequence_first_step")
    return sequence_pool(input=input, pool_type="first")


def sequence_last_step(input):
    """The last step of each sequence (``sequence_pool(input, "last")``).

    Example::

        x = fluid.layers.data(name="x", shape=[10], dtype="float32", lod_level=1)
        last = fluid.layers.sequence_last_step(input=x)
    """
    _check(input, "sequence_last_step")
    return sequence_pool(input=input, pool_type="last")


def sequence_softmax(input, use_cudnn: bool = False, name=None):
    """Softmax over the steps of each sequence: ``exp(x_j) / sum over the sequence of exp``.

    Args:
        input: a float32/float64 var with lod_level >= 1, [N, 1] or [N] (one value per step).
        use_cudnn: accepted for Fluid's signature.
        name: the layer's name (default ``sequence_softmax_<n>``).

    Returns:
        A var of ``input``'s shape and LoD.

    Example::

        x = fluid.layers.data(name="x", shape=[1], dtype="float32", lod_level=1)
        weights = fluid.layers.sequence_softmax(input=x)
    """
    _check(input, "sequence_softmax")
    helper = LayerHelper("sequence_softmax", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("sequence_softmax", {"X": [input]}, {"Out": [out]}, {"use_cudnn": use_cudnn})
    return out


def sequence_conv(input, num_filters: int, filter_size: int = 3, filter_stride: int = 1, padding: bool = True,
                  padding_start=None, bias_attr=None, param_attr=None, act=None, name=None):
    """A 1-D convolution along each sequence: row k sees rows ``k + padding_start ..
    k + padding_start + filter_size - 1`` of its own sequence, zeros past its ends.

    Builds, as Fluid 1.8: the parameter ``<name>.w_0`` of ``[filter_size * width,
    num_filters]`` (Xavier unless ``param_attr`` says), a ``sequence_conv`` op, the bias
    ``<name>.b_0`` of ``[num_filters]`` (zeros; none with ``bias_attr=False``) added on axis 1,
    then ``act``.

    Args:
        input: a float32/float64 var [N, width] with lod_level 1.
        num_filters: the output width.
        filter_size: the context length.
        filter_stride: must be 1 (as Fluid's op).
        padding: accepted for Fluid's signature and unused there too (zeros pad always).
        padding_start: the first context row relative to each row; default
            ``-(filter_size // 2)`` (centred).
        bias_attr, param_attr: ParamAttr of the bias and the filter.
        act: an activation op type, e.g. ``"tanh"``.
        name: the layer's name (default ``sequence_conv_<n>``).

    Returns:
        A var [N, num_filters] with ``input``'s LoD.

    Raises:
        TypeError: ``input`` is not a float Variable.
        ProgramError: ``filter_stride`` other than 1, or ``input`` with 2 LoD levels.

    Example::

        x = fluid.layers.data(name="x", shape=[32], dtype="float32", lod_level=1)
        h = fluid.layers.sequence_conv(x, num_filters=64, filter_size=3, act="tanh")
    """
    _check(input, "sequence_conv")
    helper = LayerHelper("sequence_conv", name=name)
    w = helper.create_parameter(param_attr, [filter_size * input.shape[1], num_filters], input.dtype)
    pre_bias = helper.create_variable_for_type_inference(input.dtype)
    if padding_start is None:
        padding_start = -int(filter_size // 2)
    helper.append_op("sequence_conv", {"X": [input], "Filter": [w]}, {"Out": [pre_bias]},
                     {"contextStride": filter_stride, "contextStart": padding_start, "contextLength": filter_size})
    pre_act = pre_bias
    b = helper.create_parameter(bias_attr, [num_filters], input.dtype, is_bias=True)
    if b is not None:
        pre_act = helper.create_variable_for_type_inference(input.dtype)
        helper.append_op("elementwise_add", {"X": [pre_bias], "Y": [b]}, {"Out": [pre_act]}, {"axis": 1})
    return helper.append_activation(pre_act, act)


def sequence_expand(x, y, ref_level: int = -1, name=None):
    """Repeat sequence i of ``x`` (row i if ``x`` has no LoD) as often as sequence i of level
    ``ref_level`` of ``y`` has elements.

    Args:
        x: a var of rank >= 2, lod_level 0 or 1.
        y: the sequences whose LoD says the repeats.
        ref_level: a level of ``y``'s LoD; -1 is its last.
        name: the layer's name.

    Returns:
        A var [-1, x's other dims], with a LoD of one level when ``x`` has one.

    Example::

        x = fluid.layers.data(name="x", shape=[10], dtype="float32")
        y = fluid.layers.data(name="y", shape=[10], dtype="float32", lod_level=1)
        out = fluid.layers.sequence_expand(x=x, y=y, ref_level=0)
    """
    _check(x, "sequence_expand", _ANY, "x")
    helper = LayerHelper("sequence_expand", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("sequence_expand", {"X": [x], "Y": [y]}, {"Out": [out]}, {"ref_level": ref_level})
    return out


def sequence_expand_as(x, y, name=None):
    """Repeat row i of ``x`` as often as sequence i of ``y`` is long; the result has ``y``'s LoD.

    Example::

        x = fluid.layers.data(name="x", shape=[10], dtype="float32")
        y = fluid.layers.data(name="y", shape=[10], dtype="float32", lod_level=1)
        out = fluid.layers.sequence_expand_as(x=x, y=y)
    """
    _check(x, "sequence_expand_as", _ANY, "x")
    if not isinstance(y, Variable):
        raise TypeError(f"The type of 'y' in sequence_expand_as must be Variable, but received {type(y).__name__}")
    helper = LayerHelper("sequence_expand_as", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("sequence_expand_as", {"X": [x], "Y": [y]}, {"Out": [out]})
    return out


def sequence_reshape(input, new_dim: int):
    """Re-cut each sequence's values into rows of ``new_dim`` (each sequence's length times
    the width must divide by it); the LoD scales to match.

    Example::

        x = fluid.layers.data(name="x", shape=[12], dtype="float32", lod_level=1)
        x4 = fluid.layers.sequence_reshape(input=x, new_dim=4)   # 3 rows per row of x
    """
    _check(input, "fluid.layers.sequence_reshape", _ANY)
    helper = LayerHelper("sequence_reshape")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("sequence_reshape", {"X": [input]}, {"Out": [out]}, {"new_dim": new_dim})
    return out


def sequence_concat(input, name=None):
    """Concatenate, sequence by sequence, a list of vars with as many sequences each: the
    result's sequence i is sequence i of input[0], then of input[1], ...

    Example::

        x = fluid.layers.data(name="x", shape=[10], dtype="float32", lod_level=1)
        y = fluid.layers.data(name="y", shape=[10], dtype="float32", lod_level=1)
        out = fluid.layers.sequence_concat(input=[x, y])
    """
    if not isinstance(input, list):
        raise TypeError(f"The type of 'input' in fluid.layers.sequence_concat must be list, but received "
                        f"{type(input).__name__}")
    for i, v in enumerate(input):
        _check(v, "fluid.layers.sequence_concat", ("int64", "float32", "float64"), f"input[{i}]")
    helper = LayerHelper("sequence_concat", name=name)
    out = helper.create_variable_for_type_inference(input[0].dtype)
    helper.append_op("sequence_concat", {"X": list(input)}, {"Out": [out]})
    return out


def sequence_slice(input, offset, length, name=None):
    """Rows ``offset[i] .. offset[i] + length[i] - 1`` of each sequence i of ``input``.

    Args:
        input: a var with lod_level 1.
        offset, length: int32/int64 vars [number of sequences, 1]; marked stop_gradient.

    Example::

        import numpy as np
        seqs = fluid.layers.data(name="x", shape=[10, 5], dtype="float32", lod_level=1)
        offset = fluid.layers.assign(input=np.array([[0, 1]]).astype("int32"))
        length = fluid.layers.assign(input=np.array([[2, 1]]).astype("int32"))
        subseqs = fluid.layers.sequence_slice(input=seqs, offset=offset, length=length)
    """
    _check(input, "sequence_slice", _ANY)
    _check(offset, "sequence_slice", ("int32", "int64"), "offset")
    _check(length, "sequence_slice", ("int32", "int64"), "length")
    helper = LayerHelper("sequence_slice", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    offset.stop_gradient = True
    length.stop_gradient = True
    helper.append_op("sequence_slice", {"X": [input], "Offset": [offset], "Length": [length]}, {"Out": [out]})
    return out
