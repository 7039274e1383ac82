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

import inspect

import numpy as np

from placegroup.ir.framework import SELECTED_ROWS, Variable
from placegroup.model.layer_helper import LayerHelper
from placegroup.ops.misc import callable_name, register_callable, registered_callable, registered_callable_count
from placegroup.values import LoDTensor

__all__ = ["py_func", "merge_selected_rows", "get_tensor_from_selected_rows"]


class PyFuncRegistry:
    """A Python function registered for ``py_func`` ops, as Fluid 1.8's ``fluid.layers.nn.
    PyFuncRegistry``: making one registers ``func`` in this process's registry
    (NOTE(py-func-registry) in ops/misc.py) under the id ``self.id`` that a py_func op names.

    Calling the object calls ``func`` with its arguments bound by name to ``func``'s positional
    parameters (the rest passed positionally), as Fluid's does, and returns a tuple with one
    entry per result: None and LoDTensors as they are, anything else as a LoDTensor of its
    numpy array.

    ``PyFuncRegistry.registered_func(idx)`` is the function a py_func op with id ``idx``
    calls, ``registered_func_num()`` how many this process has (``py_func.registered_func``
    and ``py_func.registered_func_num`` are these).

    Args:
        func: the function.

    Raises:
        TypeError: ``func`` is None or not callable.

    Thread-safety: registers into a process-wide list; build programs from one thread.

    Example::

        reg = fluid.layers.nn.PyFuncRegistry(lambda x: x * 2)
        reg(np.ones(2))[0]                      # a LoDTensor holding [2., 2.]
        fluid.layers.nn.PyFuncRegistry.registered_func(reg.id)   # the lambda
    """

    _register_funcs: list = []

    def __init__(self, func) -> None:
        if func is None or not callable(func):
            raise TypeError(f"func must be a Python function: py_func expected a Python function, got {func!r}")
        self._func = func
        try:
            spec = inspect.getfullargspec(func)
            plain = not spec.args and spec.varargs is None and spec.varkw is None
            self._named_args = None if plain else list(spec.args)
        except TypeError:  # a builtin without a signature (np.tanh): its arguments go positionally
            self._named_args = []
        self._id = register_callable(func)
        PyFuncRegistry._register_funcs.append(self)  # keeps the function alive, as Fluid's list does

    @classmethod
    def registered_func(cls, idx: int):
        """The function registered under id ``idx``."""
        return registered_callable(idx)

    @classmethod
    def registered_func_num(cls) -> int:
        """How many functions this process registered."""
        return registered_callable_count()

    @property
    def id(self) -> int:
        return self._id

    def __call__(self, *args):
        if self._named_args is None:
            ret = self._func()
        else:
            named = dict(zip(self._named_args, args))
            ret = self._func(*args[len(named):], **named)
        if not isinstance(ret, (list, tuple)):
            ret = (ret,)
        return tuple(r if r is None or isinstance(r, LoDTensor) else LoDTensor(np.asarray(r)) for r in ret)


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
    fwd = PyFuncRegistry(func).id
    bwd = PyFuncRegistry(backward_func).id if backward_func is not None else -1
    helper.append_op("py_func", {"X": xs}, {"Out": outs},
                     {"forward_callable_id": fwd, "backward_callable_id": bwd, "backward_skip_vars": sorted(set(skip)),
                      "_forward_callable": callable_name(func),
                      "_backward_callable": callable_name(backward_func) if backward_func is not None else "",
                      "_out_dtypes": [v.dtype for v in outs], "_out_shapes": [list(v.shape) for v in outs],
                      "_in_dtypes": [v.dtype for v in xs]})
    return out


# Fluid's debugging helpers on the layer
py_func.registered_func = PyFuncRegistry.registered_func
py_func.registered_func_num = PyFuncRegistry.registered_func_num


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
