"""Elementwise math, more reductions, comparisons and logical layers, Fluid 1.8 signatures
(Fluid's layers/ops.py, nn.py and control_flow.py).

Each function appends one op (ops/unary.py, ops/math.py, ops/compare.py) to the default
main program and returns its output var; the op's ``infer`` gives the shape (-1 for the batch
dim). Comparisons and logical ops return bool vars with ``stop_gradient`` set: they have no
gradient. Building a program is single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    from placegroup.layers import ops
    x = fluid.layers.data("x", shape=[4])
    h = ops.leaky_relu(fluid.layers.fc(x, 8), alpha=0.1)
    peak = ops.reduce_max(ops.square(h), dim=1)        # [-1]
    big = ops.greater_than(peak, fluid.layers.fill_constant([1], "float32", 1.0))
"""
from __future__ import annotations

from placegroup.layer_helper import LayerHelper

_PLAIN = ["square", "sqrt", "rsqrt", "abs", "exp", "log", "reciprocal", "softsign", "softplus", "floor",
          "ceil", "round", "sign"]
_COMPARE = ["less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"]
__all__ = _PLAIN + ["pow", "leaky_relu", "elu", "relu6", "brelu", "hard_sigmoid", "swish", "clip",
                    "reduce_max", "reduce_min", "reduce_prod"] + _COMPARE + [
    "logical_and", "logical_or", "logical_xor", "logical_not"]


def _append(op_type: str, inputs: dict, attrs: dict, name=None, dtype=None, out=None):
    """Append ``op_type`` writing ``out`` (a new temp if None); return the output var."""
    helper = LayerHelper(op_type, name=name)
    if out is None:
        first = next(iter(inputs.values()))
        out = helper.create_variable_for_type_inference(dtype or first.dtype, stop_gradient=dtype == "bool")
    if dtype == "bool":
        out.stop_gradient = True
    helper.append_op(op_type, {k: [v] for k, v in inputs.items()}, {"Out": [out]}, attrs)
    return out


def _plain(op_type: str, what: str):
    def layer(x, name=None):
        return _append(op_type, {"X": x}, {}, name)

    layer.__name__ = layer.__qualname__ = op_type
    layer.__doc__ = f"""Elementwise ``{op_type}`` of ``x``: {what}.

    Args:
        x: a float Variable.
        name: the layer's name (default: generated).

    Returns:
        A Variable of ``x``'s shape and dtype.

    Example::

        y = ops.{op_type}(x)
    """
    return layer


square = _plain("square", "x²")
sqrt = _plain("sqrt", "√x, for x >= 0")
rsqrt = _plain("rsqrt", "1/√x, for x > 0")
abs = _plain("abs", "|x|")  # noqa: A001  (Fluid's name)
exp = _plain("exp", "e^x")
log = _plain("log", "ln x, for x > 0")
reciprocal = _plain("reciprocal", "1/x")
softsign = _plain("softsign", "x / (1 + |x|)")
softplus = _plain("softplus", "ln(1 + e^x)")
floor = _plain("floor", "⌊x⌋, with a zero gradient")
ceil = _plain("ceil", "⌈x⌉, with a zero gradient")
round = _plain("round", "x rounded, halves away from zero, with a zero gradient")  # noqa: A001
sign = _plain("sign", "-1, 0 or 1, with a zero gradient")


def pow(x, factor: float = 1.0, name=None):  # noqa: A001  (Fluid's name)
    """``x ** factor`` elementwise (NaN where x < 0 and factor is not an integer).

    Example::

        cube = ops.pow(x, factor=3.0)
    """
    return _append("pow", {"X": x}, {"factor": float(factor)}, name)


def leaky_relu(x, alpha: float = 0.02, name=None):
    """``max(x, alpha·x)`` elementwise; the gradient is 1 at x >= 0, alpha below.

    Example::

        h = ops.leaky_relu(fluid.layers.fc(x, 8), alpha=0.1)
    """
    return _append("leaky_relu", {"X": x}, {"alpha": float(alpha)}, name)


def elu(x, alpha: float = 1.0, name=None):
    """``x`` where x > 0, else ``alpha·(e^x - 1)``.

    Example::

        h = ops.elu(x, alpha=0.5)
    """
    return _append("elu", {"X": x}, {"alpha": float(alpha)}, name)


def relu6(x, threshold: float = 6.0, name=None):
    """``min(max(x, 0), threshold)``; zero gradient outside (0, threshold).

    Example::

        h = ops.relu6(x)
    """
    return _append("relu6", {"X": x}, {"threshold": float(threshold)}, name)


def brelu(x, t_min: float = 0.0, t_max: float = 24.0, name=None):
    """``min(max(x, t_min), t_max)``; zero gradient outside (t_min, t_max).

    Example::

        h = ops.brelu(x, t_min=1.0, t_max=4.0)
    """
    return _append("brelu", {"X": x}, {"t_min": float(t_min), "t_max": float(t_max)}, name)


def hard_sigmoid(x, slope: float = 0.2, offset: float = 0.5, name=None):
    """``clip(slope·x + offset, 0, 1)``.

    Example::

        gate = ops.hard_sigmoid(x)
    """
    return _append("hard_sigmoid", {"X": x}, {"slope": float(slope), "offset": float(offset)}, name)


def swish(x, beta: float = 1.0, name=None):
    """``x · sigmoid(beta·x)``.

    Example::

        h = ops.swish(x, beta=2.0)
    """
    return _append("swish", {"X": x}, {"beta": float(beta)}, name)


def clip(x, min: float, max: float, name=None):  # noqa: A002  (Fluid's names)
    """``min(max(x, min), max)``; the gradient passes only where ``min < x < max``.

    Raises:
        ProgramError: if min > max.

    Example::

        y = ops.clip(x, min=-1.0, max=1.0)
    """
    return _append("clip", {"X": x}, {"min": float(min), "max": float(max)}, name)


def _reduce(op_type: str, input, dim, keep_dim: bool, name):
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    return _append(op_type, {"X": input}, {"dim": dims or [0], "keep_dim": keep_dim, "reduce_all": dim is None},
                   name)


def reduce_max(input, dim=None, keep_dim: bool = False, name=None):
    """The maximum over ``dim`` (an int or list; None: every dim, giving [1]). The gradient goes
    to every entry equal to the maximum (ties each get all of it), as in Paddle.

    Raises:
        ProgramError: a ``dim`` outside ``-rank <= d < rank``.

    Example::

        peak = ops.reduce_max(x, dim=1)
    """
    return _reduce("reduce_max", input, dim, keep_dim, name)


def reduce_min(input, dim=None, keep_dim: bool = False, name=None):
    """The minimum over ``dim``, as ``reduce_max``.

    Example::

        low = ops.reduce_min(x, dim=[0, 1], keep_dim=True)
    """
    return _reduce("reduce_min", input, dim, keep_dim, name)


def reduce_prod(input, dim=None, keep_dim: bool = False, name=None):
    """The product over ``dim``, as ``reduce_max``; its gradient is right at zeros too.

    Example::

        p = ops.reduce_prod(x, dim=-1)
    """
    return _reduce("reduce_prod", input, dim, keep_dim, name)


def _compare(op_type: str, sym: str):
    def layer(x, y, force_cpu=None, cond=None):
        attrs = {} if force_cpu is None else {"force_cpu": bool(force_cpu)}
        return _append(op_type, {"X": x, "Y": y}, attrs, dtype="bool", out=cond)

    layer.__name__ = layer.__qualname__ = op_type
    layer.__doc__ = f"""``x {sym} y`` elementwise, a bool Variable (no gradient); ``y`` broadcasts
    against ``x`` as in ``elementwise_add`` (axis -1).

    Args:
        x, y: Variables of one dtype.
        force_cpu: kept for Fluid's signature; placegroup computes on the var's place.
        cond: a bool Variable to write into (default: a new one).

    Raises:
        ProgramError: if the shapes do not broadcast.

    Example::

        mask = ops.{op_type}(x, y)
    """
    return layer


less_than = _compare("less_than", "<")
less_equal = _compare("less_equal", "<=")
greater_than = _compare("greater_than", ">")
greater_equal = _compare("greater_equal", ">=")
equal = _compare("equal", "==")
not_equal = _compare("not_equal", "!=")


def _logical_doc(fn, op_type: str, binary: bool):
    fn.__name__ = fn.__qualname__ = op_type
    fn.__doc__ = f"""``{op_type}`` of bool Variables, elementwise (no gradient).

    Args:
        x{", y" if binary else ""}: bool Variables{" whose shapes broadcast" if binary else ""}.
        out: a bool Variable to write into (default: a new one).
        name: the layer's name (default: generated).

    Raises:
        ProgramError: an input that is not bool.

    Example::

        both = ops.{op_type}({"a, b" if binary else "a"})
    """
    return fn


def _logical(op_type: str):
    def layer(x, y, out=None, name=None):
        return _append(op_type, {"X": x, "Y": y}, {}, name, dtype="bool", out=out)

    return _logical_doc(layer, op_type, True)


logical_and = _logical("logical_and")
logical_or = _logical("logical_or")
logical_xor = _logical("logical_xor")


def logical_not(x, out=None, name=None):
    return _append("logical_not", {"X": x}, {}, name, dtype="bool", out=out)


_logical_doc(logical_not, "logical_not", False)
