"""Sequence layout layers of Fluid 1.8 (fluid/layers/sequence_lod.py and nn.py):
sequence_pad, sequence_unpad, sequence_mask, sequence_enumerate, sequence_reverse,
sequence_scatter, lod_reset and lod_append (ops/sequence_pad.py).

They move rows between LoD sequences and padded batches, or make and read LoD; each appends
one op with Fluid 1.8's type, slots and attrs.

Example::

    import numpy as np
    import placegroup as fluid
    x = fluid.layers.data(name="x", shape=[8], dtype="float32", lod_level=1)
    pad = fluid.layers.assign(np.array([0.0], np.float32))
    padded, length = fluid.layers.sequence_pad(x, pad)            # [n, longest, 8], [n]
    mask = fluid.layers.sequence_mask(length, dtype="float32")     # [n, longest]
    back = fluid.layers.sequence_unpad(padded, length)             # x again, lod_level 1
"""
from __future__ import annotations

from collections.abc import Iterable

from placegroup.ir.framework import Variable, normalize_dtype
from placegroup.model.layer_helper import LayerHelper

__all__ = ["lod_append", "lod_reset", "sequence_enumerate", "sequence_mask", "sequence_pad", "sequence_reverse",
           "sequence_scatter", "sequence_unpad"]

FLOATS_INTS = ("float32", "float64", "int32", "int64")


def _check(var, arg: str, layer: str, allowed: tuple = FLOATS_INTS) -> None:
    """Fluid's check_variable_and_dtype: a Variable of an allowed dtype (TypeError)."""
    if not isinstance(var, Variable):
        raise TypeError(f"The type of '{arg}' in {layer} must be Variable, but received {type(var).__name__}")
    if var.dtype not in allowed:
        raise TypeError(f"The data type of '{arg}' in {layer} must be {list(allowed)}, but received {var.dtype}")


def sequence_pad(x, pad_value, maxlen=None, name=None):
    """Pad the sequences of ``x`` to one length: ``(Out, Length)``.

    Args:
        x: a var with lod_level >= 1, [M, K...] (float32/float64/int32/int64).
        pad_value: a var, [1] or [K...], of ``x``'s dtype, written after each sequence's end.
        maxlen: the padded length; None: the longest sequence's (at run time; a given one
            shorter than the longest is an error then).
        name: accepted for Fluid's signature.

    Returns:
        ``(Out, Length)``: Out [number of sequences, maxlen, K...] with no LoD, Length int64
        [number of sequences] holding the lengths (stop_gradient).

    Raises:
        TypeError: ``x`` or ``pad_value`` is not a Variable of an allowed dtype.

    Example::

        x = fluid.data(name="x", shape=[10, 5], dtype="float32", lod_level=1)
        pad_value = fluid.layers.assign(input=numpy.array([0.0], dtype=numpy.float32))
        out, length = fluid.layers.sequence_pad(x=x, pad_value=pad_value)
    """
    _check(x, "x", "fluid.layers.sequence_pad")
    _check(pad_value, "pad_value", "fluid.layers.sequence_pad")
    helper = LayerHelper("sequence_pad", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    length = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    pad_value.stop_gradient = True
    helper.append_op("sequence_pad", {"X": [x], "PadValue": [pad_value]}, {"Out": [out], "Length": [length]},
                     {"padded_length": -1 if maxlen is None else int(maxlen)})
    return out, length


def sequence_unpad(x, length, name=None):
    """The sequences of a padded ``x`` back as one LoD var: the first ``length[i]`` steps of
    each ``x[i]``.

    Args:
        x: [N, L, K...] (rank >= 2), float32/float64/int32/int64.
        length: int64 [N] (or [N, 1]), e.g. sequence_pad's Length (stop_gradient).
        name: accepted for Fluid's signature.

    Returns:
        A var with lod_level 1, [sum of lengths, K...] ([sum, 1] for a rank-2 ``x``).

    Example::

        out, length = fluid.layers.sequence_pad(x=x, pad_value=pad_value)
        unpadded = fluid.layers.sequence_unpad(x=out, length=length)
    """
    _check(x, "x", "fluid.layers.sequence_unpad")
    _check(length, "length", "fluid.layers.sequence_unpad", ("int64",))
    helper = LayerHelper("sequence_unpad", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    length.stop_gradient = True
    helper.append_op("sequence_unpad", {"X": [x], "Length": [length]}, {"Out": [out]})
    return out


def sequence_mask(x, maxlen=None, dtype="int64", name=None):
    """A mask from lengths: ``y[..., j] = j < x[...]`` for ``j < maxlen``.

    Args:
        x: int32/int64 lengths, any shape (a dense var; no LoD needed).
        maxlen: an int, an int var ([1], MaxLenTensor), or None for ``max(x)`` at run time.
        dtype: the mask's dtype (default int64).
        name: accepted for Fluid's signature.

    Returns:
        A var of shape ``x.shape + [maxlen]`` (stop_gradient).

    Example::

        mask = fluid.layers.sequence_mask(length, dtype="float32")
    """
    helper = LayerHelper("sequence_mask", name=name)
    dtype = normalize_dtype(dtype)
    out = helper.create_variable_for_type_inference(dtype)
    inputs, attrs = {"X": [x]}, {"out_dtype": dtype}
    if isinstance(maxlen, Variable):
        inputs["MaxLenTensor"] = [maxlen]
    elif maxlen is not None:
        attrs["maxlen"] = int(maxlen)
    helper.append_op("sequence_mask", inputs, {"Y": [out]}, attrs)
    out.stop_gradient = True
    return out


def sequence_enumerate(input, win_size, pad_value=0, name=None):
    """For each step, the ``win_size`` ids starting there (``pad_value`` past the sequence's end).

    Args:
        input: int32/int64 ids with lod_level 1, [N, 1] or [N].
        win_size: the window, >= 1.
        pad_value: what stands for ids past a sequence's end.
        name: accepted for Fluid's signature.

    Returns:
        A var [N, win_size] with ``input``'s LoD (stop_gradient).

    Example::

        x = fluid.data(name="x", shape=[-1, 1], dtype="int32", lod_level=1)
        out = fluid.layers.sequence_enumerate(input=x, win_size=3, pad_value=0)
    """
    _check(input, "input", "sequence_enumerate", ("int32", "int64"))
    helper = LayerHelper("sequence_enumerate", name=name)
    out = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op("sequence_enumerate", {"X": [input]}, {"Out": [out]},
                     {"win_size": win_size, "pad_value": pad_value})
    return out


def sequence_reverse(x, name=None):
    """Each sequence of ``x``'s last LoD level back to front; the LoD is kept.

    Example::

        x = fluid.data(name="x", shape=[None, 10], dtype="float32", lod_level=1)
        x_reversed = fluid.layers.sequence_reverse(x)
    """
    _check(x, "x", "fluid.layers.sequence_reverse", ("float32", "float64", "int8", "int32", "int64"))
    helper = LayerHelper("sequence_reverse", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("sequence_reverse", {"X": [x]}, {"Y": [out]}, {})
    return out


def sequence_scatter(input, index, updates, name=None):
    """``out = input``, then ``out[i, index[j]] += updates[j]`` for each j of sequence i of ``index``.

    Args:
        input: a dense [B, D] var (float32/float64/int32/int64).
        index: int64 ids with lod_level 1 ([M, 1]); its sequence i scatters into row i.
        updates: [M, 1] of ``input``'s dtype, with ``index``'s LoD.
        name: accepted for Fluid's signature.

    Returns:
        A var of ``input``'s shape.

    Example::

        out = fluid.layers.sequence_scatter(input, index, updates)
    """
    _check(input, "input", "sequence_scatter")
    _check(index, "index", "sequence_scatter", ("int32", "int64"))
    _check(updates, "updates", "sequence_scatter")
    helper = LayerHelper("sequence_scatter", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("sequence_scatter", {"X": [input], "Ids": [index], "Updates": [updates]}, {"Out": [out]})
    return out


def lod_reset(x, y=None, target_lod=None):
    """``x``'s rows under another LoD: ``y``'s LoD when ``y`` is a sequence, else ``y``'s values
    (int32 offsets) or ``target_lod`` as one level.

    Raises:
        TypeError: ``x`` is not a Variable of an allowed dtype, or ``y`` not a Variable.
        ValueError: neither ``y`` nor ``target_lod`` is given.

    Example::

        x = fluid.layers.data(name="x", shape=[10])
        out = fluid.layers.lod_reset(x=x, target_lod=[0, 4, 6])
    """
    _check(x, "x", "lod_reset")
    helper = LayerHelper("lod_reset")
    out = helper.create_variable_for_type_inference(x.dtype)
    if y is not None:
        if not isinstance(y, Variable):
            raise TypeError(f"The type of 'y' in lod_reset must be Variable, but received {type(y).__name__}")
        helper.append_op("lod_reset", {"X": [x], "Y": [y]}, {"Out": [out]})
    elif target_lod is not None:
        helper.append_op("lod_reset", {"X": [x]}, {"Out": [out]}, {"target_lod": list(target_lod)})
    else:
        raise ValueError("y and target_lod should not be both none.")
    return out


def lod_append(x, level):
    """``x`` with one more LoD level below its own: ``level`` (offsets, a list or an int var).

    Appends a ``lod_reset`` op with ``append=True``, as Fluid 1.8 does.

    Example::

        x = fluid.layers.data(name="x", shape=[6, 10], lod_level=1)
        out = fluid.layers.lod_append(x, [1, 1, 1, 1, 1, 1])
    """
    if x is None:
        raise ValueError("Input(x) can't be None.")
    if not isinstance(level, (Iterable, Variable)):
        raise ValueError("Input(level) must be list, tuple or Variable.")
    _check(x, "x", "lod_append")
    helper = LayerHelper("lod_append")
    out = helper.create_variable_for_type_inference(x.dtype)
    inputs, attrs = {"X": [x]}, {"append": True}
    if isinstance(level, Variable):
        inputs["Y"] = [level]
    else:
        attrs["target_lod"] = list(level)
    helper.append_op("lod_reset", inputs, {"Out": [out]}, attrs)
    return out
