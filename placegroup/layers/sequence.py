"""Sequence layers of Fluid 1.8 (fluid/layers/sequence_lod.py) over LoD vars: sequence_pool,
sequence_first_step, sequence_last_step and sequence_softmax (ops/sequence.py).

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
from placegroup.layer_helper import LayerHelper

__all__ = ["sequence_first_step", "sequence_last_step", "sequence_pool", "sequence_softmax"]


def _check(input, layer: str) -> None:
    """Fluid's check_variable_and_dtype: a Variable of float32 or float64 (TypeError)."""
    if not isinstance(input, Variable):
        raise TypeError(f"The type of 'input' in {layer} must be Variable, but received {type(input).__name__}")
    if input.dtype not in ("float32", "float64"):
        raise TypeError(f"The data type of 'input' in {layer} must be ['float32', 'float64'], but received "
                        f"{input.dtype}")


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
