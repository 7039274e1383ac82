"""``py_func`` (a Python function run as an op) and the SelectedRows layers
``merge_selected_rows`` and ``get_tensor_from_selected_rows``: Fluid 1.8's ``layers.nn`` names
that run outside the array maths, with Fluid 1.8's signatures.

A py_func op names its functions by an id into a registry of this process; functions are never
pickled or sent, so every process that runs such a program must build it itself, calling
``py_func`` in the same order (NOTE(py-func-registry) in ops/misc.py). A program that carries a
py_func op run where its function was not registered fails with an error saying so.

Example::

    import numpy as np
    import placegroup as fluid

    def tanh(x):
        return np.tanh(x)

    def tanh_grad(y, dy):
        return dy * (1 - y * y)

    x = fluid.layers.data("x", shape=[4])
    h = fluid.layers.fc(x, 8)
    out = fluid.default_main_program().current_block().create_var(name="h_tanh", dtype="float32",
                                                                 shape=h.shape)
    fluid.layers.py_func(tanh, h, out, backward_func=tanh_grad, skip_vars_in_backward_input=h)
"""
from __future__ import annotations

from placegroup.ir.framework import SELECTED_ROWS, Variable
from placegroup.layer_helper import LayerHelper
from placegroup.ops.misc import callable_name, register_callable, registered_callable, registered_callable_count

__all__ = ["py_func", "merge_selected_rows", "get_tensor_from_selected_rows"]


def _vars(arg, what: str) -> list:
    if arg is None:
        return []
    items = [arg] if isinstance(arg, Variable) else list(arg) if isinstance(arg, (list, tuple)) else None
    if items is None or not all(isinstance(v, Variable) for v in items):
        raise TypeError(f"py_func: {what} must be a Variable or a list/tuple of them, got {arg!r}")
    return items


def py_func(func, x, out, backward_func=None, skip_vars_in_backward_input=None):
    """Run ``func`` as an op: at run time it gets ``x``'s values as numpy arrays and returns the
    values of ``out`` (NOTE(py-func-registry)).

    ``out`` must be made beforehand with its shape and dtype (``block.create_var``), as in
    Fluid; a returned array is cast to its var's dtype. With ``backward_func`` the op has a
    gradient: ``backward_func`` gets ``x``, then ``out``, less ``skip_vars_in_backward_input``,
    then the gradients of ``out``, and returns the gradient of each ``x`` (None for one nobody
    needs) (NOTE(py-func-grad)).

    Args:
        func: the forward function; ``func(*x_values)``. Returning None fits no outputs.
        x: a Variable, a list/tuple of them, or None.
        out: a Variable, a list/tuple of them, or None (a function run for its effect).
        backward_func: the backward function, or None (no gradient).
        skip_vars_in_backward_input: vars of ``x`` or ``out`` that ``backward_func`` does not get.

    Returns:
        ``out``, as given.

    Raises:
        TypeError: ``func``/``backward_func`` is not callable, or ``x``/``out`` are not Variables.
        ValueError: an ``out`` var without a shape, or a skipped var that is neither in ``x``
            nor in ``out``.

    Thread-safety: registers functions in a process-wide list; build programs from one thread.
    The functions run on the executor's thread.

    Example::

        fluid.layers.py_func(func=lambda a, b: a + b, x=[x, y], out=z)
    """
    helper = LayerHelper("py_func")
    xs, outs = _vars(x, "x"), _vars(out, "out")
    for v in outs:
        if not v.shape:
            raise ValueError(f"py_func: the shape of output {v.name!r} must be given when it is made "
                             f"(Fluid cannot infer it either)")
    skip = []
    if backward_func is not None and skip_vars_in_backward_input is not None:
        known = {v.name for v in xs + outs}
        for v in _vars(skip_vars_in_backward_input, "skip_vars_in_backward_input"):
            if v.name not in known:
                raise ValueError(f"py_func: skip var {v.name!r} is neither an input nor an output of the op")
            skip.append(v.name)
    fwd = register_callable(func)
    bwd = register_callable(backward_func) if backward_func is not None else -1
    helper.append_op("py_func", {"X": xs}, {"Out": outs},
                     {"forward_callable_id": fwd, "backward_callable_id": bwd, "backward_skip_vars": sorted(set(skip)),
                      "_forward_callable": callable_name(func),
                      "_backward_callable": callable_name(backward_func) if backward_func is not None else "",
                      "_out_dtypes": [v.dtype for v in outs], "_out_shapes": [list(v.shape) for v in outs],
                      "_in_dtypes": [v.dtype for v in xs]})
    return out


# Fluid's debugging helpers on the layer
py_func.registered_func = registered_callable
py_func.registered_func_num = registered_callable_count


def merge_selected_rows(x, name=None):
    """The SelectedRows ``x`` with its rows sorted and each listed once, the values of a repeated
    row summed (ops/sparse.py); a SelectedRows var of ``x``'s shape.

    Example::

        merged = fluid.layers.merge_selected_rows(emb_grad)
    """
    helper = LayerHelper("merge_selected_rows", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    out.type = SELECTED_ROWS
    helper.append_op("merge_selected_rows", {"X": [x]}, {"Out": [out]})
    return out


def get_tensor_from_selected_rows(x, name=None):
    """The value tensor of the SelectedRows ``x``: one row per listed row, ``[-1, ...]``.

    Raises:
        TypeError: ``x`` is not a SelectedRows var.

    Example::

        rows = fluid.layers.get_tensor_from_selected_rows(fluid.layers.merge_selected_rows(emb_grad))
    """
    if not isinstance(x, Variable) or x.type != SELECTED_ROWS:
        raise TypeError(f"get_tensor_from_selected_rows: x must be a SELECTED_ROWS Variable, got {x!r}")
    helper = LayerHelper("get_tensor_from_selected_rows", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("get_tensor_from_selected_rows", {"X": [x]}, {"Out": [out]})
    return out
