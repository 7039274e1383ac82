"""Elementwise math, activations, more reductions and products, comparisons and logical
layers, Fluid 1.8 signatures (Fluid's layers/ops.py, nn.py, tensor.py and control_flow.py).

Each function appends one op (ops/unary.py, ops/elementwise.py, ops/math.py, ops/linalg.py,
ops/compare.py) to the default main program and returns its output var; the op's ``infer``
gives the shape (-1 for the batch dim). A few are Fluid's compositions of other layers (logsumexp, addcmul,
dice_loss, rank). Comparisons, logical ops and tests return bool vars with ``stop_gradient``
set: they have no gradient. Layers with parameters (prelu, bilinear_tensor_product) name them
as Fluid does (``prelu_0.w_0``). Building a program is single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    from placegroup.layers import ops
    x = fluid.layers.data("x", shape=[4])
    h = ops.leaky_relu(fluid.layers.fc(x, 8), alpha=0.1)
    peak = ops.reduce_max(ops.square(h), dim=1)        # [-1]
    big = ops.greater_than(peak, fluid.layers.fill_constant([1], "float32", 1.0))
"""
from __future__ import annotations

import builtins
import sys

import numpy as np

from placegroup.model.initializer import ConstantInitializer
from placegroup.ir.framework import Variable
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers import manip, nn, tensor

_PLAIN = ["square", "sqrt", "rsqrt", "abs", "exp", "log", "reciprocal", "softsign", "softplus", "floor",
          "ceil", "round", "sign"]
_COMPARE = ["less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"]
_MORE_PLAIN = ["sin", "cos", "asin", "acos", "atan", "logsigmoid", "tanh_shrink"]
_ELEMENTWISE = ["elementwise_max", "elementwise_min", "elementwise_pow", "elementwise_floordiv", "elementwise_mod"]
__all__ = _PLAIN + ["pow", "leaky_relu", "elu", "relu6", "brelu", "hard_sigmoid", "swish", "clip",
                    "reduce_max", "reduce_min", "reduce_prod"] + _COMPARE + [
    "logical_and", "logical_or", "logical_xor", "logical_not"] + _MORE_PLAIN + _ELEMENTWISE + [
    "log1p", "erf", "gelu", "selu", "hard_swish", "mish", "thresholded_relu", "softshrink", "hard_shrink", "stanh",
    "soft_relu", "prelu", "maxout", "label_smooth", "lrn", "clip_by_norm", "clamp", "mul", "sum", "increment",
    "reduce_all", "reduce_any", "logsumexp", "isfinite", "has_inf", "has_nan", "size", "rank", "allclose",
    "elementwise_equal", "bmm", "dot", "addmm", "addcmul", "kron", "trace", "cross", "dist", "affine_channel",
    "bilinear_tensor_product", "dice_loss"]


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


# -- more activations and elementwise functions ---------------------------------------------

sin = _plain("sin", "sin x")
cos = _plain("cos", "cos x")
asin = _plain("asin", "arcsin x, for |x| <= 1")
acos = _plain("acos", "arccos x, for |x| <= 1")
atan = _plain("atan", "arctan x")
logsigmoid = _plain("logsigmoid", "ln sigmoid(x) = -ln(1 + e^-x)")
tanh_shrink = _plain("tanh_shrink", "x - tanh x")


def log1p(x, out=None, name=None):
    """``ln(1 + x)`` elementwise, accurate near 0 (into ``out`` if given).

    Example::

        y = ops.log1p(x)
    """
    return _append("log1p", {"X": x}, {}, name, out=out)


def erf(x):
    """The error function ``erf x`` elementwise (NOTE(erf) in ops/unary.py).

    Example::

        y = ops.erf(x)
    """
    return _append("erf", {"X": x}, {})


def gelu(x, approximate: bool = False):
    """``x·Φ(x)``: ``0.5·x·(1 + erf(x/√2))``, or with ``approximate`` the tanh form
    ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``.

    Example::

        h = ops.gelu(fluid.layers.fc(x, 64))
    """
    return _append("gelu", {"X": x}, {"approximate": bool(approximate)})


def _given(**attrs) -> dict:
    """The attrs that are not None, as floats: Fluid's generated layers pass only those, so the
    op's defaults apply to the rest."""
    return {k: float(v) for k, v in attrs.items() if v is not None}


def selu(x, scale=None, alpha=None, name=None):
    """``scale·x`` for x > 0, else ``scale·alpha·(e^x - 1)``; the defaults are SELU's
    (scale ≈ 1.0507, alpha ≈ 1.6733).

    Example::

        h = ops.selu(x)
    """
    return _append("selu", {"X": x}, _given(scale=scale, alpha=alpha), name)


def hard_swish(x, threshold: float = 6.0, scale: float = 6.0, offset: float = 3.0, name=None):
    """``x·min(max(x + offset, 0), threshold) / scale``.

    Example::

        h = ops.hard_swish(x)
    """
    return _append("hard_swish", {"X": x}, _given(threshold=threshold, scale=scale, offset=offset), name)


def mish(x, threshold: float = 20, name=None):
    """``x·tanh(softplus(x))``; past ±``threshold`` softplus is taken as x or e^x.

    Raises:
        ValueError: a threshold that is not > 0.

    Example::

        h = ops.mish(x)
    """
    if not threshold or threshold <= 0:
        raise ValueError(f"mish: threshold must be > 0, got {threshold}")
    return _append("mish", {"X": x}, {"threshold": float(threshold)}, name)


def thresholded_relu(x, threshold=None):
    """``x`` where ``x > threshold`` (default 1.0), else 0.

    Example::

        h = ops.thresholded_relu(x, threshold=0.5)
    """
    return _append("thresholded_relu", {"X": x}, _given(threshold=threshold))


def softshrink(x, alpha=None):
    """``x - alpha`` above ``alpha`` (default 0.5), ``x + alpha`` below ``-alpha``, else 0 (the
    op's attr is Fluid's ``lambda``).

    Example::

        h = ops.softshrink(x, alpha=0.3)
    """
    return _append("softshrink", {"X": x}, {} if alpha is None else {"lambda": float(alpha)})


def hard_shrink(x, threshold=None):
    """``x`` where ``|x| > threshold`` (default 0.5), else 0.

    Example::

        h = ops.hard_shrink(x, threshold=0.3)
    """
    return _append("hard_shrink", {"X": x}, _given(threshold=threshold))


def stanh(x, scale_a: float = 0.67, scale_b: float = 1.7159, name=None):
    """``scale_b·tanh(scale_a·x)``.

    Example::

        h = ops.stanh(x)
    """
    return _append("stanh", {"X": x}, {"scale_a": float(scale_a), "scale_b": float(scale_b)}, name)


def soft_relu(x, threshold: float = 40.0, name=None):
    """``ln(1 + e^clip(x, -threshold, threshold))``.

    Example::

        h = ops.soft_relu(x)
    """
    return _append("soft_relu", {"X": x}, {"threshold": float(threshold)}, name)


def _elementwise_layer(op_type: str, what: str):
    def layer(x, y, axis: int = -1, act=None, name=None):
        helper = LayerHelper(op_type, name=name)
        out = helper.create_variable_for_type_inference(x.dtype)
        helper.append_op(op_type, {"X": [x], "Y": [y]}, {"Out": [out]}, {"axis": int(axis)})
        return helper.append_activation(out, act)

    layer.__name__ = layer.__qualname__ = op_type
    layer.__doc__ = f"""``{what}`` elementwise, ``y`` broadcast against ``x`` from dim ``axis`` as
    in ``elementwise_add`` (NOTE(broadcast) in ops/elementwise.py), then ``act`` if given.

    Raises:
        ProgramError: if the shapes do not broadcast.

    Example::

        out = fluid.layers.{op_type}(x, y)
    """
    return layer


elementwise_max = _elementwise_layer("elementwise_max", "max(x, y)")
elementwise_min = _elementwise_layer("elementwise_min", "min(x, y)")
elementwise_pow = _elementwise_layer("elementwise_pow", "x ** y")
elementwise_floordiv = _elementwise_layer("elementwise_floordiv", "x // y, towards zero, on int32/int64 "
                                                                  "(NOTE(int-division))")
elementwise_mod = _elementwise_layer("elementwise_mod", "x mod y (NOTE(int-division))")


def elementwise_equal(x, y, name=None):
    """``x == y`` elementwise, a bool Variable (an ``equal`` op; no gradient).

    Example::

        same = fluid.layers.elementwise_equal(a, b)
    """
    return _append("equal", {"X": x, "Y": y}, {"force_cpu": False}, name, dtype="bool")


# -- activations with parameters or channel structure ---------------------------------------


def prelu(x, mode: str, param_attr=None, name=None):
    """``x`` where x > 0, else ``alpha·x``, with a learned ``alpha`` (parameter ``prelu_N.w_0``,
    float32, initialized to 0.25): one value (``mode="all"``), one per channel (``"channel"``:
    shape [1, C, 1, 1], dim 1 of x) or one per element of a sample (``"element"``).

    Raises:
        ValueError: an unknown mode, or a mode x's rank cannot take.

    Example::

        h = fluid.layers.prelu(conv, mode="channel")
    """
    if mode not in ("all", "channel", "element"):
        raise ValueError(f"prelu: mode should be one of all, channel, element; got {mode!r}")
    shape = [1]
    if mode == "channel":
        if len(x.shape) < 2:
            raise ValueError(f"prelu: mode 'channel' needs x of rank >= 2, got {x.name}{list(x.shape)}")
        shape = [1, x.shape[1], 1, 1]  # Fluid 1.8 keeps this 4-D shape for any rank
    elif mode == "element":
        shape = [1] + list(x.shape[1:])
    helper = LayerHelper("prelu", name=name)
    alpha = helper.create_parameter(param_attr, shape, "float32", default_initializer=ConstantInitializer(0.25))
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("prelu", {"X": [x], "Alpha": [alpha]}, {"Out": [out]}, {"mode": mode})
    return out


def maxout(x, groups: int, name=None, axis: int = 1):
    """The maximum over each run of ``groups`` channels: [N, C, H, W] -> [N, C/groups, H, W]
    (``axis`` 1), or channels last with ``axis`` 3 or -1.

    Raises:
        ValueError: an axis other than 1, 3 or -1.

    Example::

        h = fluid.layers.maxout(conv, groups=2)
    """
    if axis not in (1, -1, 3):
        raise ValueError(f"maxout: axis should be 1 (NCHW), or -1 or 3 (NHWC); got {axis}")
    return _append("maxout", {"X": x}, {"groups": int(groups), "axis": 3 if axis == -1 else int(axis)}, name)


def label_smooth(label, prior_dist=None, epsilon: float = 0.1, dtype="float32", name=None):
    """``(1 - epsilon)·label + epsilon·prior_dist`` (or ``epsilon / K`` for K classes) of a
    one-hot ``label`` [N, K]; ``label`` gets ``stop_gradient``.

    Raises:
        ValueError: an epsilon outside [0, 1].

    Example::

        soft = fluid.layers.label_smooth(fluid.layers.one_hot(label, 10), epsilon=0.1)
    """
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"label_smooth: the value of epsilon must be between 0 and 1, got {epsilon}")
    label.stop_gradient = True
    helper = LayerHelper("label_smooth", name=name)
    out = helper.create_variable_for_type_inference(dtype)
    inputs = {"X": [label]} if prior_dist is None else {"X": [label], "PriorDist": [prior_dist]}
    helper.append_op("label_smooth", inputs, {"Out": [out]}, {"epsilon": float(epsilon)})
    return out


def lrn(input, n: int = 5, k: float = 1.0, alpha: float = 1e-4, beta: float = 0.75, name=None, data_format="NCHW"):
    """Local response normalization across channels: ``input / (k + alpha·Σ x²)^beta`` over
    the ``n`` (odd) channels around each one (NOTE(lrn) in ops/math.py); 4-D input.

    Raises:
        ValueError: an input that is not 4-D or a data_format other than NCHW / NHWC.

    Example::

        h = fluid.layers.lrn(conv, n=5)
    """
    if len(input.shape) != 4:
        raise ValueError(f"lrn: input must be 4-D, got {input.name}{list(input.shape)}")
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"lrn: data_format must be NCHW or NHWC, got {data_format!r}")
    helper = LayerHelper("lrn", name=name)
    mid = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("lrn", {"X": [input]}, {"Out": [out], "MidOut": [mid]},
                     {"n": int(n), "k": float(k), "alpha": float(alpha), "beta": float(beta),
                      "data_format": data_format})
    return out


def affine_channel(x, scale=None, bias=None, data_layout: str = "NCHW", name=None, act=None):
    """``x·scale + bias`` with one value of the Variables ``scale`` and ``bias`` [C] per
    channel (dim 1 for NCHW, the last for NHWC), then ``act``.

    Raises:
        ValueError: a missing scale or bias.

    Example::

        y = fluid.layers.affine_channel(x, scale=s, bias=b)
    """
    if scale is None or bias is None:
        raise ValueError("affine_channel: scale and bias are both required Variables")
    helper = LayerHelper("affine_channel", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("affine_channel", {"X": [x], "Scale": [scale], "Bias": [bias]}, {"Out": [out]},
                     {"data_layout": data_layout})
    return helper.append_activation(out, act)


def clip_by_norm(x, max_norm: float, name=None):
    """``x·max_norm / ‖x‖₂`` when the norm of all of x exceeds ``max_norm``, else ``x``
    (no gradient, as in Fluid).

    Example::

        g = fluid.layers.clip_by_norm(grad, max_norm=5.0)
    """
    return _append("clip_by_norm", {"X": x}, {"max_norm": float(max_norm)}, name)


def clamp(input, min=None, max=None, output=None, name=None):  # noqa: A002  (Fluid's names)
    """Fluid 1.8's clamp: a ``clip`` op whose missing bound is ``sys.float_info.min`` (the
    smallest *positive* double, so a clamp with only ``max`` also clips negatives to ~0, as
    1.8 does) or ``sys.float_info.max``.

    Raises:
        ValueError: neither bound given, or a bound given as a Variable (not supported).

    Example::

        y = fluid.layers.clamp(x, min=-1.0, max=1.0)
    """
    if min is None and max is None:
        raise ValueError("clamp: either min or max should be defined")
    if isinstance(min, Variable) or isinstance(max, Variable):
        raise ValueError("clamp: min or max given as a Variable is not supported; pass floats")
    attrs = {"min": sys.float_info.min if min is None else float(min),
             "max": sys.float_info.max if max is None else float(max)}
    return _append("clip", {"X": input}, attrs, name, out=output)


# -- products, sums, counters ---------------------------------------------------------------


def mul(x, y, x_num_col_dims: int = 1, y_num_col_dims: int = 1, name=None):
    """``flatten(x, x_num_col_dims) @ flatten(y, y_num_col_dims)``, reshaped back (the op ``fc``
    uses).

    Example::

        out = fluid.layers.mul(x, w)   # [N, K] @ [K, M]
    """
    return _append("mul", {"X": x, "Y": y}, {"x_num_col_dims": int(x_num_col_dims),
                                             "y_num_col_dims": int(y_num_col_dims)}, name)


def sum(x):  # noqa: A001  (Fluid's name)
    """The elementwise sum of the Variables in ``x`` (a list, or one Variable).

    Example::

        total = fluid.layers.sum([a, b, c])
    """
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    helper = LayerHelper("sum")
    out = helper.create_variable_for_type_inference(xs[0].dtype)
    helper.append_op("sum", {"X": xs}, {"Out": [out]})
    return out


def increment(x, value: float = 1.0, in_place: bool = True):
    """``x + value`` for a one-element ``x`` (a counter); with ``in_place`` the result is
    written back into ``x`` (the op updates it in place) and ``x`` is returned.

    Example::

        step = fluid.layers.increment(counter, value=1.0)
    """
    helper = LayerHelper("increment")
    out = x if in_place else helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("increment", {"X": [x]}, {"Out": [out]}, {"step": float(value)})
    return out


def bmm(x, y, name=None):
    """Batched matrix product: ``out[b] = x[b] @ y[b]`` for [B, M, K] and [B, K, N].

    Example::

        scores = fluid.layers.bmm(q, k)
    """
    return _append("bmm", {"X": x, "Y": y}, {}, name)


def dot(x, y, name=None):
    """The inner product along the last dim: [1] for vectors, [N, 1] for rows of [N, D].

    Example::

        s = fluid.layers.dot(u, v)
    """
    return _append("dot", {"X": x, "Y": y}, {}, name)


def addmm(input, x, y, alpha: float = 1.0, beta: float = 1.0, name=None):
    """``beta·input + alpha·(x @ y)``, ``input`` broadcast over rows or columns it lacks.

    Example::

        out = fluid.layers.addmm(bias_row, x, w)
    """
    return _append("addmm", {"Input": input, "X": x, "Y": y}, {"Alpha": float(alpha), "Beta": float(beta)}, name,
                   dtype=x.dtype)


def addcmul(input, tensor1, tensor2, value=1.0, out=None, name=None):
    """``input + value·tensor1·tensor2`` (Fluid's composition: elementwise_mul, scale,
    elementwise_add).

    Example::

        out = fluid.layers.addcmul(x, a, b, value=0.5)
    """
    prod = nn.scale(nn.elementwise_mul(tensor1, tensor2), scale=float(value))
    res = nn.elementwise_add(input, prod)
    if out is not None:
        _append("assign", {"X": res}, {}, out=out)
        return out
    return res


def kron(x, y, out=None, name=None):
    """The Kronecker product of ``x`` and ``y`` (the lower rank padded with leading 1s).

    Example::

        k = fluid.layers.kron(a, b)
    """
    return _append("kron", {"X": x, "Y": y}, {}, name, out=out)


def trace(input, offset: int = 0, dim1: int = 0, dim2: int = 1, out=None, name=None):
    """The sum of diagonal ``offset`` in the plane of dims ``dim1`` and ``dim2``, which are
    removed ([1] if no dim is left).

    Example::

        t = fluid.layers.trace(m)
    """
    return _append("trace", {"Input": input}, {"offset": int(offset), "dim1": int(dim1), "dim2": int(dim2)}, name,
                   out=out)


def cross(input, other, dim=None):
    """The vector product along ``dim`` (size 3; default the first dim of size 3).

    Example::

        n = fluid.layers.cross(u, v, dim=1)
    """
    return _append("cross", {"X": input, "Y": other}, {"dim": int(dim)} if dim else {})


def dist(x, y, p=2):
    """``‖x - y‖_p`` over all entries (x and y broadcast), shape [1]; p = 0 counts the nonzero
    differences, ±inf takes the largest / smallest.

    Example::

        d = fluid.layers.dist(a, b, p=1)
    """
    return _append("dist", {"X": x, "Y": y}, {"p": float(p)})


def bilinear_tensor_product(x, y, size: int, act=None, name=None, param_attr=None, bias_attr=None):
    """``out[b, s] = x[b] · W[s] · y[b]ᵀ + bias[s]`` with a parameter W [size, M, N]
    (``bilinear_tensor_product_N.w_0``, Xavier) and a bias [1, size] (zeros) unless
    ``bias_attr`` is False; then ``act``.

    Example::

        out = fluid.layers.bilinear_tensor_product(u, v, size=8)
    """
    helper = LayerHelper("bilinear_tensor_product", name=name)
    w = helper.create_parameter(param_attr, [size, x.shape[1], y.shape[1]], x.dtype)
    inputs = {"X": [x], "Y": [y], "Weight": [w]}
    bias = helper.create_parameter(bias_attr, [1, size], x.dtype, is_bias=True)
    if bias is not None:
        inputs["Bias"] = [bias]
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("bilinear_tensor_product", inputs, {"Out": [out]})
    return helper.append_activation(out, act)


# -- reductions and tests -------------------------------------------------------------------


def _bool_reduce(op_type: str, input, dim, keep_dim: bool, name):
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    return _append(op_type, {"X": input}, {"dim": dims or [0], "keep_dim": bool(keep_dim), "reduce_all": not dims},
                   name, dtype="bool")


def reduce_all(input, dim=None, keep_dim: bool = False, name=None):
    """Whether every entry of the bool ``input`` is true over ``dim`` (None or []: all dims).

    Example::

        ok = fluid.layers.reduce_all(mask, dim=1)
    """
    return _bool_reduce("reduce_all", input, dim, keep_dim, name)


def reduce_any(input, dim=None, keep_dim: bool = False, name=None):
    """Whether some entry of the bool ``input`` is true over ``dim`` (None or []: all dims).

    Example::

        hit = fluid.layers.reduce_any(mask)
    """
    return _bool_reduce("reduce_any", input, dim, keep_dim, name)


def logsumexp(x, dim=None, keepdim: bool = False, out=None, name=None):
    """``ln Σ e^x`` over ``dim`` (None: all dims), Fluid 1.8's composition exp -> reduce_sum ->
    log (no max shift: large x overflow as in Fluid).

    Example::

        lse = fluid.layers.logsumexp(logits, dim=1)
    """
    total = nn.reduce_sum(exp(x), dim, keepdim)
    return _append("log", {"X": total}, {}, name, out=out)


def isfinite(x):
    """A bool [1]: whether every entry of ``x`` is finite.

    Example::

        ok = fluid.layers.isfinite(loss)
    """
    return _append("isfinite", {"X": x}, {}, dtype="bool")


def has_inf(x):
    """A bool [1]: whether some entry of ``x`` is ±inf (an ``isinf`` op).

    Example::

        bad = fluid.layers.has_inf(grad)
    """
    return _append("isinf", {"X": x}, {}, dtype="bool")


def has_nan(x):
    """A bool [1]: whether some entry of ``x`` is NaN (an ``isnan`` op).

    Example::

        bad = fluid.layers.has_nan(grad)
    """
    return _append("isnan", {"X": x}, {}, dtype="bool")


def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False, name=None):
    """A bool [1]: ``|input - other| <= atol + rtol·|other|`` everywhere.

    Example::

        same = fluid.layers.allclose(a, b)
    """
    return _append("allclose", {"Input": input, "Other": other},
                   {"rtol": float(rtol), "atol": float(atol), "equal_nan": bool(equal_nan)}, name, dtype="bool")


def size(input):
    """The number of entries of ``input``, an int64 [1] computed at run time.

    Example::

        n = fluid.layers.size(x)
    """
    out = _append("size", {"Input": input}, {}, dtype="int64")
    out.stop_gradient = True
    return out


def rank(input):
    """The rank of ``input`` as a constant int32 Variable (an ``assign_value``, as Fluid 1.8).

    Example::

        r = fluid.layers.rank(x)   # [4] for an image batch
    """
    return tensor.assign(np.array([len(input.shape)], "int32"))


def dice_loss(input, label, epsilon: float = 1e-05, name=None):
    """The mean over samples of ``1 - 2·Σ input·onehot(label) / (Σ input + Σ onehot(label) +
    epsilon)``, the sums over every dim but the first (Fluid 1.8's composition).

    Example::

        loss = fluid.layers.dice_loss(prob, label)   # prob [N, ..., C], label [N, ..., 1]
    """
    onehot = manip.one_hot(label, depth=input.shape[-1])
    dims = list(builtins.range(1, len(input.shape)))
    inse = nn.reduce_sum(nn.elementwise_mul(input, onehot), dim=dims)
    denom = nn.elementwise_add(nn.reduce_sum(input, dim=dims), nn.reduce_sum(onehot, dim=dims))
    frac = nn.elementwise_div(nn.scale(inse, scale=2.0), nn.scale(denom, bias=float(epsilon)))
    return nn.reduce_mean(nn.scale(frac, scale=-1.0, bias=1.0))
