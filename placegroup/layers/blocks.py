"""The blocks Fluid 1.8's loops and branches are made of: the tensor arrays (``create_array``,
``array_write``, ``array_read``, ``array_length``), the sub-block builder, ``While`` and
``ConditionalBlock``. fluid.layers.control_flow (placegroup/layers/control_flow.py) builds the
rest on them, and so does ``DynamicRNN`` (placegroup/layers/dynamic_rnn.py); each block is run by
the executor (NOTE(sub-blocks) in executor/blocks.py).
"""
from __future__ import annotations

import contextlib

import numpy as np

from placegroup.ir.framework import TENSOR_ARRAY, Variable
from placegroup.model.layer_helper import LayerHelper

__all__ = ["create_array", "array_write", "array_read", "array_length", "While", "ConditionalBlock"]


def create_array(dtype):
    """An empty tensor array of ``dtype`` (a var of type LoDTensorArray), empty again each run.

    Example::

        arr = fluid.layers.create_array("float32")
        fluid.layers.array_write(x, i, array=arr)
    """
    helper = LayerHelper("array")
    out = helper.block.create_var(f"{helper.name}.out", dtype=str(dtype), type=TENSOR_ARRAY)
    helper.append_op("create_array", {}, {"Out": [out]}, {"dtype": str(dtype)})
    return out


def array_write(x, i, array=None):
    """Write ``x`` at index ``i`` (an int64 [1]) of ``array`` (a new one when None); returns the array.

    Example::

        arr = fluid.layers.array_write(x, i)
    """
    helper = LayerHelper("array_write")
    if array is None:
        array = create_array(x.dtype)
    helper.append_op("write_to_array", {"X": [x], "I": [i], "Array": [array]}, {"Out": [array]})
    return array


def array_read(array, i):
    """The tensor at index ``i`` (an int64 [1]) of ``array``.

    Example::

        x = fluid.layers.array_read(arr, i)
    """
    helper = LayerHelper("array_read")
    out = helper.create_variable_for_type_inference(array.dtype)
    helper.append_op("read_from_array", {"X": [array], "I": [i]}, {"Out": [out]})
    return out


def array_length(array):
    """The number of entries of ``array``, an int64 [1].

    Example::

        n = fluid.layers.array_length(arr)
    """
    helper = LayerHelper("array_length")
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("lod_array_length", {"X": [array]}, {"Out": [out]})
    return out


# -- blocks ----------------------------------------------------------------------------------

def _block_io(block, parent, skip=()) -> tuple[list, list]:
    """(the outer vars ``block`` reads before it writes them, the outer vars it writes), as
    Fluid lists them in the op that owns the block."""
    made, reads = set(skip), []
    for op in block.ops:
        for n in op.input_arg_names:
            if n not in made and n not in reads:
                reads.append(n)
        made.update(op.output_arg_names)
    ins = [parent.var(n) for n in reads if parent.has_var(n)]
    outs = [parent.var(n) for n in sorted(made) if parent.has_var(n)]
    return ins, outs


@contextlib.contextmanager
def _sub_block(program, owner, skip=()):
    """Build a sub-block: the ops appended inside go to a new block, then ``owner(parent,
    block, inputs, outputs, scope var)`` appends the op that owns it to the parent block, with
    the outer vars the block reads and writes (``_block_io``)."""
    inner = program._create_block()
    try:
        yield
        parent = program.block(inner.parent_idx)
        ins, outs = _block_io(inner, parent, skip)
        owner(parent, inner, ins, outs, parent.create_var(None, type="step_scopes"))
    finally:
        program._rollback()


class While:
    """``while cond: <the ops built inside "with loop.block():">``. The block runs while the
    bool [1] ``cond`` holds; it updates ``cond`` itself (``less_than(i, n, cond=cond)``), and
    the vars of outer blocks it writes keep their values for the next iteration and after.

    Args:
        cond: a bool Variable of one element.
        is_test: accepted for Fluid's signature (it marks an inference loop there).
        name: accepted for Fluid's signature.

    Raises:
        TypeError: ``cond`` is not a bool Variable of one element.

    Example::

        i = fluid.layers.fill_constant([1], "int64", 0)
        n = fluid.layers.fill_constant([1], "int64", 10)
        cond = fluid.layers.less_than(i, n)
        loop = fluid.layers.While(cond)
        with loop.block():
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=cond)
    """

    def __init__(self, cond, is_test: bool = False, name=None) -> None:
        if not isinstance(cond, Variable) or cond.dtype != "bool" or (cond.shape and int(np.prod(cond.shape)) != 1):
            raise TypeError(f"While: cond must be a bool Variable of one element, got {cond!r}")
        self.cond, self.is_test, self.helper = cond, bool(is_test), LayerHelper("while")

    def block(self):
        def owner(parent, inner, ins, outs, scope):
            parent.append_op("while", {"X": ins, "Condition": [self.cond]}, {"Out": outs, "StepScopes": [scope]},
                             {"sub_block": inner.idx, "is_test": self.is_test}, infer=False)
        return _sub_block(self.helper.main_program, owner, skip=(self.cond.name,))


class ConditionalBlock:
    """Fluid's ``ConditionalBlock``: the ops built inside ``with cb.block():`` run once if the
    condition holds: ``inputs`` a bool [1] with ``is_scalar_condition``, else tensors that all
    have elements. ``Switch`` and ``cond`` are built on it.

    Example::

        cb = ConditionalBlock([flag], is_scalar_condition=True)
        with cb.block():
            fluid.layers.assign(fluid.layers.fill_constant([1], "float32", 0.5), lr)
    """

    def __init__(self, inputs, is_scalar_condition: bool = False, name=None) -> None:
        if not isinstance(inputs, (list, tuple)) or not all(isinstance(v, Variable) for v in inputs):
            raise TypeError(f"ConditionalBlock: inputs must be a list of Variables, got {inputs!r}")
        if is_scalar_condition and (len(inputs) != 1 or inputs[0].dtype != "bool"):
            raise TypeError("ConditionalBlock: a scalar condition is one bool Variable")
        self.inputs, self.is_scalar_condition = list(inputs), bool(is_scalar_condition)
        self.helper = LayerHelper("conditional_block", name=name)

    def block(self):
        def owner(parent, inner, ins, outs, scope):
            parent.append_op("conditional_block", {"Cond": self.inputs, "Input": ins}, {"Out": outs, "Scope": [scope]},
                             {"sub_block": inner.idx, "is_scalar_condition": self.is_scalar_condition}, infer=False)
        return _sub_block(self.helper.main_program, owner)
