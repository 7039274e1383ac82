"""Normalization and dropout layers, Fluid 1.8 signatures (Fluid's layers/nn.py): batch_norm,
inplace_abn, layer_norm, instance_norm, group_norm, spectral_norm and dropout.

``batch_norm`` and ``layer_norm`` create their parameters in Fluid's order and under Fluid's
unique names (``batch_norm_0.w_0`` ...), with their initializers in the startup program;
``instance_norm`` and ``group_norm`` normalize per example (NOTE(affine-defaults) says which
parameters they make); ``dropout`` gives each of its ops a seed of its own
(NOTE(dropout-seed)). The ops are in ops/norm.py and ops/dropout.py.
``Program.clone(for_test=True)`` sets ``is_test`` on batch_norm and dropout ops, so a test
program normalizes by the running statistics and keeps every unit. Building a program is
single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    img = fluid.layers.data("img", shape=[3, 8, 8])
    h = fluid.layers.batch_norm(fluid.layers.conv2d(img, 4, 3), act="relu")
    h = fluid.layers.dropout(fluid.layers.fc(h, 16), dropout_prob=0.5)
    h = fluid.layers.layer_norm(h)
"""
from __future__ import annotations

import hashlib
import math

from placegroup.model.initializer import ConstantInitializer, NormalInitializer
from placegroup.ir.framework import Variable
from placegroup.model.layer_helper import LayerHelper
from placegroup.model.param_attr import ParamAttr

__all__ = ["batch_norm", "layer_norm", "instance_norm", "group_norm", "dropout", "inplace_abn", "spectral_norm"]


def _channels(layer: str, helper, input, data_layout: str) -> int:
    """The channel count of ``input`` for ``data_layout``; ValueError naming the layer if unknown."""
    if data_layout not in ("NCHW", "NHWC"):
        raise ValueError(f"{layer} {helper.name}: unsupported data layout {data_layout!r}; use 'NCHW' or 'NHWC'")
    shape = list(input.shape)
    if len(shape) < 2:
        raise ValueError(f"{layer} {helper.name}: input {input.name!r} must have rank >= 2, got {shape}")
    channels = shape[1] if data_layout == "NCHW" else shape[-1]
    if channels is None or channels <= 0:
        raise ValueError(f"{layer} {helper.name}: the channel dim of input {input.name!r} {shape} "
                         f"({data_layout}) must be known, got {channels}")
    return channels


def batch_norm(input, act=None, is_test: bool = False, momentum=0.9, epsilon: float = 1e-05, param_attr=None,
               bias_attr=None, data_layout: str = "NCHW", in_place: bool = False, name=None,
               moving_mean_name=None, moving_variance_name=None, do_model_average_for_mean_and_var: bool = True,
               use_global_stats: bool = False):
    """Batch normalization over every axis of ``input`` but its channel axis.

    Training normalizes by the batch's mean and biased variance and moves the running
    statistics: ``moving = moving * momentum + batch * (1 - momentum)``; ``is_test`` (or
    ``use_global_stats``) normalizes by the running statistics instead (NOTE(bn-stats) in
    ops/norm.py). Four parameters are made, in Fluid's order: the scale (``<name>.w_0``,
    ones), the bias (``<name>.b_0``, zeros), the moving mean (``<name>.w_1`` or
    ``moving_mean_name``, zeros) and the moving variance (``<name>.w_2`` or
    ``moving_variance_name``, ones); the last two are not trainable and the op updates them
    in place.

    Args:
        input: a float Variable of rank 2 to 5, ``[N, C]`` or ``[N, C, ...]`` (``NCHW``) or
            ``[N, ..., C]`` (``NHWC``).
        act: an activation appended after the op (e.g. ``"relu"``), or None.
        is_test: use the running statistics and leave them as they are.
        momentum: a float, or a one-element float Variable (the op's ``MomentumTensor``).
        epsilon: added to the variance, in [0, 0.001] as Fluid requires.
        param_attr, bias_attr: ParamAttrs of the scale and the bias.
        data_layout: ``"NCHW"`` or ``"NHWC"``: where the channel axis is.
        in_place: accepted and ignored: the output is always a new var (a value is never
            overwritten in place here, so the grad op can read ``input``).
        name: the layer's name (default ``batch_norm_<n>``).
        moving_mean_name, moving_variance_name: names of the running statistics, to share
            them between programs.
        do_model_average_for_mean_and_var: accepted, as Fluid's (ModelAverage is not here).
        use_global_stats: normalize by the running statistics in training too.

    Returns:
        The normalized Variable, ``input``'s shape (after ``act``).

    Raises:
        ValueError: for a ``data_layout`` other than NCHW/NHWC or an unknown channel count.
        ProgramError: from the op, for a bad rank or epsilon (naming both values).

    Example::

        x = fluid.layers.data("x", shape=[3, 8, 8])
        y = fluid.layers.batch_norm(x, act="relu")     # [-1, 3, 8, 8]
        test_prog = fluid.default_main_program().clone(for_test=True)
    """
    helper = LayerHelper("batch_norm", name=name)
    out = _bn_op(helper, "batch_norm", input, momentum, epsilon, param_attr, bias_attr, data_layout,
                 moving_mean_name, moving_variance_name, do_model_average_for_mean_and_var,
                 {"is_test": is_test, "use_global_stats": use_global_stats})
    return helper.append_activation(out, act)


def _bn_op(helper, op_type: str, input, momentum, epsilon, param_attr, bias_attr, data_layout, moving_mean_name,
           moving_variance_name, do_model_average, attrs: dict):
    """batch_norm's parameters (in Fluid's order) and its op (``op_type``); returns Y."""
    channels = _channels(op_type, helper, input, data_layout)
    if bias_attr is False:
        raise ValueError(f"{op_type} {helper.name}: bias_attr must not be False (the op needs its bias, as in "
                         f"Fluid); pass None or a ParamAttr")
    dtype = input.dtype
    scale = helper.create_parameter(param_attr, [channels], dtype, default_initializer=ConstantInitializer(1.0))
    bias = helper.create_parameter(bias_attr, [channels], dtype, is_bias=True)
    stats = []
    for stat_name, value in ((moving_mean_name, 0.0), (moving_variance_name, 1.0)):
        attr = ParamAttr(name=stat_name, initializer=ConstantInitializer(value), trainable=False,
                         do_model_average=do_model_average)
        var = helper.create_parameter(attr, [channels], dtype)
        var.stop_gradient = True
        stats.append(var)
    mean, variance = stats
    saved_mean = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    saved_variance = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(dtype)
    inputs = {"X": [input], "Scale": [scale], "Bias": [bias], "Mean": [mean], "Variance": [variance]}
    attrs = {"epsilon": epsilon, "data_layout": data_layout, **attrs}
    if isinstance(momentum, Variable):
        inputs["MomentumTensor"] = [momentum]
    else:
        attrs["momentum"] = float(momentum)
    helper.append_op(op_type, inputs,
                     {"Y": [out], "MeanOut": [mean], "VarianceOut": [variance], "SavedMean": [saved_mean],
                      "SavedVariance": [saved_variance]}, attrs)
    return out


_ABN_ACTS = (None, "identity", "leaky_relu", "elu")


def inplace_abn(input, act=None, is_test: bool = False, momentum=0.9, epsilon: float = 1e-05, param_attr=None,
                bias_attr=None, data_layout: str = "NCHW", name=None, moving_mean_name=None, moving_variance_name=None,
                do_model_average_for_mean_and_var: bool = True, use_global_stats: bool = False,
                act_alpha: float = 1.0):
    """Batch normalization and an activation in one op (``inplace_abn``): the numbers of
    ``batch_norm`` followed by ``act`` (NOTE(inplace-abn) in ops/norm.py), with batch_norm's
    four parameters named ``inplace_abn_<n>.w_0, .b_0, .w_1, .w_2``.

    Fluid's op overwrites ``input`` to save memory; here the output is a new var and ``input``
    keeps its value.

    Args:
        input, is_test, momentum, epsilon, param_attr, data_layout, name, moving_mean_name,
        moving_variance_name, do_model_average_for_mean_and_var, use_global_stats: as
            ``batch_norm``'s.
        act: None (or "identity"), "leaky_relu" or "elu".
        bias_attr: the bias's ParamAttr; False is refused, as in Fluid.
        act_alpha: leaky_relu's slope or elu's alpha.

    Returns:
        The normalized, activated Variable, ``input``'s shape.

    Raises:
        ValueError: another ``act``, ``bias_attr=False``, or batch_norm's errors.

    Example::

        y = fluid.layers.inplace_abn(x, act="leaky_relu", act_alpha=0.01)
    """
    if act not in _ABN_ACTS:
        raise ValueError(f"inplace_abn: act must be one of {list(_ABN_ACTS)}, got {act!r}")
    if bias_attr is False:
        raise ValueError("inplace_abn: bias_attr must not be False")
    helper = LayerHelper("inplace_abn", name=name)
    return _bn_op(helper, "inplace_abn", input, momentum, epsilon, param_attr, bias_attr, data_layout,
                  moving_mean_name, moving_variance_name, do_model_average_for_mean_and_var,
                  {"is_test": is_test, "use_global_stats": use_global_stats, "activation": act or "",
                   "alpha": float(act_alpha)})


def layer_norm(input, scale: bool = True, shift: bool = True, begin_norm_axis: int = 1, epsilon: float = 1e-05,
               param_attr=None, bias_attr=None, act=None, name=None):
    """Layer normalization: each example's dims from ``begin_norm_axis`` on, flattened,
    normalized to mean 0 and variance 1, then scaled and shifted elementwise.

    Args:
        input: a float Variable.
        scale: learn a scale (``<name>.w_0``, ones) of the normalized size.
        shift: learn a bias (``<name>.b_0``, zeros) of the normalized size.
        begin_norm_axis: the first normalized axis, in [1, rank).
        epsilon: added to the variance, in [0, 0.001].
        param_attr, bias_attr: ParamAttrs of the scale and the bias.
        act: an activation appended after the op, or None.
        name: the layer's name (default ``layer_norm_<n>``).

    Returns:
        The normalized Variable, ``input``'s shape (after ``act``).

    Raises:
        ValueError: when the normalized dims are not all known, or ``scale``/``shift`` is
            asked for with its attr False.

    Example::

        h = fluid.layers.layer_norm(fluid.layers.fc(x, 16), begin_norm_axis=1)
    """
    helper = LayerHelper("layer_norm", name=name)
    dims = list(input.shape)[begin_norm_axis:]
    if not dims or any(d is None or d <= 0 for d in dims):
        raise ValueError(f"layer_norm {helper.name}: the dims of input {input.name!r} {list(input.shape)} from "
                         f"begin_norm_axis={begin_norm_axis} on must be known, got {dims}")
    inputs = {"X": [input]}
    width = [math.prod(dims)]
    if scale:
        if param_attr is False:
            raise ValueError(f"layer_norm {helper.name}: param_attr must not be False when scale=True")
        inputs["Scale"] = [helper.create_parameter(param_attr, width, input.dtype,
                                                   default_initializer=ConstantInitializer(1.0))]
    if shift:
        if bias_attr is False:
            raise ValueError(f"layer_norm {helper.name}: bias_attr must not be False when shift=True")
        inputs["Bias"] = [helper.create_parameter(bias_attr, width, input.dtype, is_bias=True)]
    mean = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    variance = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("layer_norm", inputs, {"Y": [out], "Mean": [mean], "Variance": [variance]},
                     {"epsilon": epsilon, "begin_norm_axis": begin_norm_axis})
    return helper.append_activation(out, act)


# NOTE(affine-defaults): which of its parameters a layer makes when ``param_attr``/``bias_attr``
# are left None follows Fluid's code, which differs between the two: ``instance_norm`` makes
# the scale and the bias unless an attr is False (both must then be False); ``group_norm``
# makes each only for a truthy attr (``if param_attr:``), so by default it has neither, as
# Paddle's static ``group_norm`` still does.


def instance_norm(input, epsilon: float = 1e-05, param_attr=None, bias_attr=None, name=None):
    """Instance normalization: each example's channels normalized one by one over their
    spatial positions (biased variance), then scaled and shifted per channel.

    Args:
        input: a float Variable ``[N, C, ...]`` of rank 2 to 5.
        epsilon: added to the variance, in [0, 0.001].
        param_attr, bias_attr: ParamAttrs of the scale (``<name>.w_0``, ones) and the bias
            (``<name>.b_0``, zeros); False for both: no affine part (NOTE(affine-defaults)).
        name: the layer's name (default ``instance_norm_<n>``).

    Returns:
        The normalized Variable, ``input``'s shape.

    Raises:
        ValueError: when only one of ``param_attr``/``bias_attr`` is False, or C is unknown.

    Example::

        y = fluid.layers.instance_norm(fluid.layers.data("img", shape=[3, 8, 8]))
    """
    helper = LayerHelper("instance_norm", name=name)
    if (param_attr is False) != (bias_attr is False):
        raise ValueError(f"instance_norm {helper.name}: param_attr and bias_attr must be False together, got "
                         f"param_attr={param_attr!r}, bias_attr={bias_attr!r}")
    channels = _channels("instance_norm", helper, input, "NCHW")
    inputs = {"X": [input]}
    if param_attr is not False:
        inputs["Scale"] = [helper.create_parameter(param_attr, [channels], input.dtype,
                                                   default_initializer=ConstantInitializer(1.0))]
        inputs["Bias"] = [helper.create_parameter(bias_attr, [channels], input.dtype, is_bias=True)]
    saved_mean = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    saved_variance = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("instance_norm", inputs, {"Y": [out], "SavedMean": [saved_mean],
                                               "SavedVariance": [saved_variance]}, {"epsilon": epsilon})
    return out


def group_norm(input, groups: int, epsilon: float = 1e-05, param_attr=None, bias_attr=None, act=None,
               data_layout: str = "NCHW", name=None):
    """Group normalization: each example's channels in ``groups`` groups of ``ceil(C /
    groups)`` (the last may be smaller), each group normalized over its channels and
    positions, then scaled and shifted per channel (NOTE(group-stats) in ops/norm.py).

    Args:
        input: a float Variable ``[N, C, ...]`` (NCHW) or ``[N, ..., C]`` (NHWC).
        groups: the number of groups, in [1, C].
        epsilon: added to the variance, in [0, 0.001].
        param_attr, bias_attr: ParamAttrs of the scale (ones) and the bias (zeros); each is
            made only when its attr is given (NOTE(affine-defaults)).
        act: an activation appended after the op, or None.
        data_layout: ``"NCHW"`` or ``"NHWC"``.
        name: the layer's name (default ``group_norm_<n>``).

    Returns:
        The normalized Variable, ``input``'s shape (after ``act``).

    Raises:
        ValueError: for another data_layout or an unknown channel count.
        ProgramError: from the op, for ``groups`` outside [1, C].

    Example::

        y = fluid.layers.group_norm(x, groups=4, param_attr=fluid.ParamAttr(), bias_attr=fluid.ParamAttr())
    """
    helper = LayerHelper("group_norm", name=name)
    channels = _channels("group_norm", helper, input, data_layout)
    inputs = {"X": [input]}
    if param_attr:
        inputs["Scale"] = [helper.create_parameter(param_attr, [channels], input.dtype,
                                                   default_initializer=ConstantInitializer(1.0))]
    if bias_attr:
        inputs["Bias"] = [helper.create_parameter(bias_attr, [channels], input.dtype, is_bias=True)]
    mean = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    variance = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("group_norm", inputs, {"Y": [out], "Mean": [mean], "Variance": [variance]},
                     {"epsilon": epsilon, "groups": int(groups), "data_layout": data_layout})
    return helper.append_activation(out, act)


# NOTE(dropout-seed): Fluid 1.8 draws a fresh seed per run unless a seed is fixed, and fixes
# ``program.random_seed`` for every dropout op of a program that has one (so all of them share
# one mask sequence). Here a mask is a function of (seed, step, example, element)
# (NOTE(dropout-masks) in ops/dropout.py), so the seed must tell the ops apart: a layer given
# no seed (or 0) gets ``_op_seed(program.random_seed, k)``, k counting the dropout ops already
# in the program, with ``fix_seed`` False (new masks every step). The same script builds the
# same seeds, in one process and on every trainer (the transpiler copies attrs). A seed the
# user gives is fixed, as in Fluid: the same mask every step.


def _op_seed(random_seed: int, k: int) -> int:
    """A positive int32 seed for the k-th dropout op of a program with ``random_seed``."""
    digest = hashlib.blake2b(f"dropout:{random_seed}:{k}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF or 1


def dropout(x, dropout_prob: float, is_test: bool = False, seed=None, name=None,
            dropout_implementation: str = "downgrade_in_infer"):
    """Drop each element of ``x`` with probability ``dropout_prob``.

    ``downgrade_in_infer``: training ``x * mask``, test ``x * (1 - p)``;
    ``upscale_in_train``: training ``x * mask / (1 - p)``, test ``x``. Masks are counter-based:
    a trainer that runs a contiguous part of the batch draws exactly the masks one process
    draws for those examples, and each training step draws new ones (NOTE(dropout-masks)).

    Args:
        x: a float Variable.
        dropout_prob: the probability of dropping an element, in [0, 1].
        is_test: the test behaviour (``Program.clone(for_test=True)`` sets it).
        seed: a fixed seed: the same mask every step, as in Fluid. None (or 0): a seed of the
            layer's own, new masks each step (NOTE(dropout-seed)).
        name: the layer's name (default ``dropout_<n>``).
        dropout_implementation: ``"downgrade_in_infer"`` or ``"upscale_in_train"``.

    Returns:
        A Variable of ``x``'s shape and dtype. The op also writes a uint8 mask var.

    Raises:
        ProgramError: for ``dropout_prob`` outside [0, 1] or an unknown implementation.

    Example::

        h = fluid.layers.dropout(fluid.layers.fc(x, 64, act="relu"), dropout_prob=0.5)
    """
    helper = LayerHelper("dropout", name=name)
    program = helper.main_program
    fixed = seed is not None and seed != 0
    if not fixed:
        k = sum(op.type == "dropout" for b in program.blocks for op in b.ops)
        seed = _op_seed(program.random_seed, k)
    out = helper.create_variable_for_type_inference(x.dtype)
    mask = helper.create_variable_for_type_inference("uint8", stop_gradient=True)
    helper.append_op("dropout", {"X": [x]}, {"Out": [out], "Mask": [mask]},
                     {"dropout_prob": float(dropout_prob), "is_test": is_test, "fix_seed": fixed,
                      "seed": int(seed), "dropout_implementation": dropout_implementation})
    return out


def spectral_norm(weight, dim: int = 0, power_iters: int = 1, eps: float = 1e-12, name=None):
    """``weight`` divided by its largest singular value, estimated by ``power_iters`` rounds of
    power iteration (op ``spectral_norm``, NOTE(spectral-norm) in ops/norm.py).

    Two parameters hold the iteration's start vectors, as in Fluid 1.8: U [h]
    (``spectral_norm_<n>.w_0``) and V [w] (``.w_1``), drawn from N(0, 1) by the startup
    program, with no gradient; the op never updates them. ``h`` is ``weight``'s dim ``dim`` and
    ``w`` the product of its other dims.

    Args:
        weight: a float Variable of rank 2 to 5 (a parameter, typically).
        dim: 0 for an fc weight, 1 for a conv filter.
        power_iters: rounds of power iteration per run.
        eps: added to the norms the iteration divides by.
        name: the layer's name (default ``spectral_norm_<n>``).

    Returns:
        A Variable of ``weight``'s shape.

    Raises:
        TypeError: ``dim``/``power_iters`` not ints, ``eps`` not a float, or ``weight`` not float.
        ProgramError: from the op, for dim outside {0, 1} or a rank outside 2..5.

    Example::

        w = fluid.layers.create_parameter([8, 4], "float32")
        w_sn = fluid.layers.spectral_norm(w, dim=0, power_iters=2)
    """
    if weight.dtype not in ("float32", "float64"):
        raise TypeError(f"spectral_norm: weight must be float32 or float64, got {weight.dtype}")
    for arg, value, kind in (("dim", dim, int), ("power_iters", power_iters, int), ("eps", eps, float)):
        if not isinstance(value, kind) or isinstance(value, bool):
            raise TypeError(f"spectral_norm: {arg} must be {kind.__name__}, got {value!r}")
    helper = LayerHelper("spectral_norm", name=name)
    shape = list(weight.shape)
    if not 0 <= dim < len(shape) or any(d <= 0 for d in shape):
        raise ValueError(f"spectral_norm {helper.name}: weight {weight.name!r} {shape} must be fully known and have "
                         f"a dim {dim}")
    h = shape[dim]
    uv = []
    for size in (h, math.prod(shape) // h):
        p = helper.create_parameter(ParamAttr(), [size], weight.dtype, default_initializer=NormalInitializer(0.0, 1.0))
        p.stop_gradient = True
        uv.append(p)
    out = helper.create_variable_for_type_inference(weight.dtype)
    helper.append_op("spectral_norm", {"Weight": [weight], "U": [uv[0]], "V": [uv[1]]}, {"Out": [out]},
                     {"dim": dim, "power_iters": power_iters, "eps": eps})
    return out
