"""Fluid 1.8's ``fluid.layers.layer_function_generator``: a layer function made from an op
type's proto (placegroup/ir/op_proto.py), and the docstring decorators of Fluid's layers.

``generate_layer_fn("mean")`` gives ``mean(x, name=None, **attrs)``: its keyword arguments are
the op's input slots in snake case (``X`` -> ``x``, ``SampleWeight`` -> ``sample_weight``; a
positional argument fills the next input slot), ``act`` appends an activation, ``name`` names
the layer, and the rest are the op's attrs. It makes the op's one non-intermediate output (and
a temp for each intermediate one, NOTE(intermediate) in placegroup/ir/op_proto.py) and returns
it. ``generate_activation_fn("tanh")`` gives ``tanh(x, name=None)``.

Example::

    reduce_sum = generate_layer_fn("reduce_sum")
    s = reduce_sum(x, dim=[1], keep_dim=False, reduce_all=False)
    gelu = generate_activation_fn("gelu")

Thread-safety: building a program is single-threaded, as in Fluid.
"""
from __future__ import annotations

import functools
import io
import re
import string
import warnings
from typing import Any, Callable, Sequence

from placegroup.model import switches
from placegroup.datafeed.dtype_checks import check_variable_and_dtype
from placegroup.ir.framework import Variable, convert_np_dtype_to_dtype_
from placegroup.ir.op_proto import OpProto, OpProtoHolder
from placegroup.model.layer_helper import LayerHelper

__all__ = ["autodoc", "deprecated", "escape_math", "generate_activation_fn", "generate_layer_fn", "templatedoc"]

in_dygraph_mode = switches.in_dygraph_mode  # Fluid 1.8 binds it here
# the activations Fluid 1.8 lets take ints too; every other generated activation takes floats
_INT_ACTIVATIONS = ("abs", "exp", "square")
_FLOATS = ["float16", "float32", "float64"]


def _snake(name: str) -> str:
    """A slot name as a Python argument: ``SampleWeight`` -> ``sample_weight``, ``X`` -> ``x``."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


_TWO_DOLLARS = re.compile(r"\$\$([^$]+)\$\$")
_ONE_DOLLAR = re.compile(r"\$([^$]+)\$")
_TWO_BANGS = re.compile(r"!!([^!]+)!!")


def escape_math(text: str) -> str:
    """reStructuredText math from an op comment: ``$x$`` -> ``:math:`x```, ``$$x$$`` kept."""
    return _TWO_BANGS.sub(r"$$\1$$", _ONE_DOLLAR.sub(r":math:`\1`", _TWO_DOLLARS.sub(r"!!\1!!", text)))


def _doc(proto: OpProto, extra_args: Sequence[str] = (), skip_attrs: Sequence[str] = ()) -> str:
    """A layer's docstring from its op's proto: the comment, Args (inputs, attrs) and Returns."""
    if not isinstance(proto, OpProto):
        raise TypeError("OpProto should be `OpProto`")
    buf = io.StringIO()
    buf.write(escape_math(proto.comment) + "\nArgs:\n")
    for v in proto.inputs:
        buf.write(f"    {_snake(v.name)}: {escape_math(v.comment)}"
                  f"{'  Duplicatable.' if v.duplicable else ''}{'  Optional.' if v.dispensable else ''}\n")
    skip = OpProtoHolder.generated_op_attr_names() | {"use_mkldnn", "is_test", "use_cudnn"} | set(skip_attrs)
    for a in proto.attrs:
        if a.name not in skip and not a.generated:
            buf.write(f"    {a.name} ({a.type}): {escape_math(a.comment)}\n")
    for line in extra_args:
        buf.write(f"    {line.strip()}\n")
    shown = [v for v in proto.outputs if not v.intermediate] or list(proto.outputs[-1:])
    if shown:
        buf.write(f"\nReturns:\n    {escape_math(shown[0].comment)}")
    return buf.getvalue()


def generate_layer_fn(op_type: str) -> Callable[..., Variable]:
    """A layer function appending one ``op_type`` op (module docstring).

    Raises:
        ValueError: the op type is not registered; it has not exactly one non-intermediate
            output; that output or an intermediate one is duplicable (as Fluid refuses them).
    """
    proto = OpProtoHolder.instance().get_op_proto(op_type)
    main = [o for o in proto.outputs if not o.intermediate]
    extra = [o for o in proto.outputs if o.intermediate]
    if len(main) != 1:
        raise ValueError(f"Only one non intermediate output operator can be automatically generated. {op_type} "
                         f"has {[o.name for o in main]}")
    if main[0].duplicable or any(o.duplicable for o in extra):
        raise ValueError(f"{op_type}: only an op whose outputs are not duplicable can be automatically generated")

    def take_inputs(args: list, kwargs: dict) -> dict:
        """Input slot -> its Variables, from the keyword (snake case) or the next positional
        argument; popped from ``args`` and ``kwargs``."""
        inputs = {}
        for slot in proto.inputs:
            val = kwargs.pop(_snake(slot.name), [])
            if not isinstance(val, (list, tuple)):
                val = [val]
            if not val and args:
                val = args.pop(0)
                val = list(val) if isinstance(val, (list, tuple)) else [val]
            inputs[slot.name] = list(val)
        return inputs

    def dtype_of(inputs: dict, kwargs: dict) -> str:
        dtype = None
        for vals in inputs.values():
            for v in vals:
                if not isinstance(v, Variable):
                    raise ValueError(f"input of {op_type} must be variable")
                if dtype is None:
                    dtype = v.dtype
                elif dtype != v.dtype:
                    raise ValueError(f"operator {op_type} must input same dtype. {dtype} vs {v.dtype}")
        if dtype is None:
            given = kwargs.get("dtype")
            dtype = convert_np_dtype_to_dtype_(given) if given else "float32"
        return dtype

    def func(*args: Any, **kwargs: Any) -> Variable:
        helper = LayerHelper(op_type, name=kwargs.pop("name", None))
        act = kwargs.pop("act", None)
        inputs = take_inputs(list(args), kwargs)
        dtype = dtype_of(inputs, kwargs)
        out = kwargs.pop(_snake(main[0].name), None)
        out = (out[0] if isinstance(out, (list, tuple)) else out) or helper.create_variable_for_type_inference(dtype)
        outputs = {main[0].name: [out]}
        for o in extra:
            outputs[o.name] = [helper.create_variable_for_type_inference(dtype, stop_gradient=True)]
        if "dtype" in kwargs and "dtype" not in {a.name for a in proto.attrs}:
            kwargs.pop("dtype")
        helper.append_op(op_type, inputs, outputs, kwargs)
        return helper.append_activation(out, act)

    func.__name__ = func.__qualname__ = op_type
    func.__doc__ = _doc(proto, ["act (str, optional): an activation appended after the op.",
                                "name (str, optional): the layer's name (default: generated)."])
    return func


def generate_activation_fn(op_type: str) -> Callable[..., Variable]:
    """A layer ``f(x, name=None)`` appending ``op_type`` from ``X`` to ``Out``; ``x`` must be a
    float Variable (abs, exp and square take int32 and int64 too, as in Fluid).

    Raises:
        ValueError: the op type is not registered.
    """
    proto = OpProtoHolder.instance().get_op_proto(op_type)
    dtypes = (["int32", "int64"] + _FLOATS) if op_type in _INT_ACTIVATIONS else _FLOATS

    def func(x: Variable, name: str | None = None) -> Variable:
        check_variable_and_dtype(x, "x", dtypes, op_type)
        helper = LayerHelper(op_type, name=name)
        out = helper.create_variable_for_type_inference(x.dtype)
        helper.append_op(op_type, {"X": [x]}, {"Out": [out]})
        return out

    func.__name__ = func.__qualname__ = op_type
    func.__doc__ = _doc(proto, ["name (str, optional): the layer's name (default: generated)."]) + f"""

Return type
  Variable
Examples:
    .. code-block:: python

        import paddle.fluid as fluid
        x = fluid.data(name="x", shape=[None, 4], dtype="float32")
        y = fluid.layers.{op_type}(x)
"""
    return func


def deprecated(func_or_class: Callable) -> Callable:
    """Make each call of ``func_or_class`` warn ``Call to deprecated function <name>.`` with a
    ``DeprecationWarning`` (shown every time), then run it.

    Fluid 1.8's version refers to a name it does not define and fails when applied.
    """
    @functools.wraps(func_or_class)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("always", DeprecationWarning)
            warnings.warn(f"Call to deprecated function {func_or_class.__name__}.", category=DeprecationWarning,
                          stacklevel=2)
        return func_or_class(*args, **kwargs)

    return wrapper


def autodoc(comment: str = "") -> Callable[[Callable], Callable]:
    """A decorator giving a layer function the docstring of its op (the op type is the
    function's name), followed by ``comment``.

    Raises:
        ValueError: (when applied) no op type of the function's name is registered.
    """
    def __impl__(func: Callable) -> Callable:
        func.__doc__ = _doc(OpProtoHolder.instance().get_op_proto(func.__name__)) + comment
        return func

    return __impl__


def templatedoc(op_type: str | None = None) -> Callable[[Callable], Callable]:
    """A decorator filling the function's docstring, a ``string.Template``, from its op's proto:
    ``${comment}`` (the op's comment), ``${<name>_comment}`` and ``${<name>_type}`` for each
    input, output and attr (``<name>`` in snake case; slots are of type ``Variable``).

    Args:
        op_type: the op type (default: the function's name).

    Raises:
        ValueError: (when applied) the op type is not registered.
        KeyError: the docstring names a placeholder the proto does not fill.
    """
    def __impl__(func: Callable) -> Callable:
        proto = OpProtoHolder.instance().get_op_proto(op_type or func.__name__)
        paragraphs, current = [], []
        for line in proto.comment.split("\n"):
            line = line.strip()
            if line:
                current.append(escape_math(line))
            elif current:
                paragraphs.append(" ".join(current))
                current = []
        if current:
            paragraphs.append(" ".join(current))
        args = {"comment": "\n    \n    ".join(paragraphs).rstrip(".")}
        for v in proto.inputs + proto.outputs:
            args[f"{_snake(v.name)}_comment"] = v.comment.rstrip(".")
            args[f"{_snake(v.name)}_type"] = "Variable"
        for a in proto.attrs:
            args[f"{_snake(a.name)}_comment"] = a.comment.rstrip(".")
            args[f"{_snake(a.name)}_type"] = a.type
        func.__doc__ = string.Template(func.__doc__ or "").substitute(args)
        return func

    return __impl__
