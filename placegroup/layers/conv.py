"""Convolution and pooling layers, Fluid 1.8 signatures and defaults (Fluid's layers/nn.py).

``conv2d``/``conv3d`` and ``conv2d_transpose``/``conv3d_transpose`` make a filter parameter and
a bias named by Fluid's scheme (``conv2d_0.w_0``, ``conv3d_0.b_0``), append the op
(ops/conv.py), add the bias with an ``elementwise_add`` on axis 1 and then ``act``, as Fluid's
LayerHelper.append_bias_op and append_activation do. ``pool2d``/``pool3d`` and
``adaptive_pool2d``/``adaptive_pool3d`` append one op (ops/pool.py). The 2-D and 3-D layers
share one builder each, with 2 or 3 spatial axes. Only channels-first runs:
``data_format="NHWC"`` (``"NDHWC"``) is accepted here and refused by the op with a
ProgramError. Building a program is single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    img = fluid.layers.data("img", shape=[1, 28, 28])
    h = fluid.layers.conv2d(img, num_filters=20, filter_size=5, act="relu")    # [-1, 20, 24, 24]
    h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2)                     # [-1, 20, 12, 12]
    prob = fluid.layers.fc(h, size=10, act="softmax")
    clip = fluid.layers.data("clip", shape=[3, 8, 32, 32])                     # NCDHW
    v = fluid.layers.pool3d(fluid.layers.conv3d(clip, 16, 3, padding=1), 2, pool_stride=2)
"""
from __future__ import annotations

import math

from placegroup.model.initializer import NormalInitializer
from placegroup.model.layer_helper import LayerHelper

__all__ = ["conv2d", "conv2d_transpose", "pool2d", "adaptive_pool2d", "conv3d", "conv3d_transpose", "pool3d",
           "adaptive_pool3d"]

_LAYOUTS = {2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def _ints(value, n: int, name: str) -> list:
    """Fluid's utils.convert_to_list: an int repeated ``n`` times, or a list/tuple of ``n`` ints."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * n
    if not isinstance(value, (list, tuple)) or len(value) != n or not all(isinstance(v, int) for v in value):
        raise ValueError(f"{name} must be an int or a list/tuple of {n} ints, got {value!r}")
    return list(value)


def _padding(padding, data_format: str, op: str, full: bool = False, nd: int = 2):
    """Fluid's padding argument -> (paddings attr, padding_algorithm).

    ``padding`` is an int, one int per spatial axis, two per axis ([top, bottom, left, right];
    [front, back, top, bottom, left, right] in 3-D), Fluid's nested pairs (one per dim of the
    input, [[0, 0], [0, 0], [top, bottom], [left, right]] for NCHW), or "SAME"/"VALID". A
    symmetric two-per-axis list collapses to one per axis; ``full`` (the transposed convs)
    keeps two per axis while they compute.
    """
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ValueError(f"{op}: unknown padding {padding!r}; it can only be 'SAME' or 'VALID'")
        return [0] * (2 * nd if full else nd), padding.upper()
    if isinstance(padding, (list, tuple)) and len(padding) in (nd + 2, 2 * nd) and (
            len(padding) == 2 * nd or isinstance(padding[0], (list, tuple))):
        if isinstance(padding[0], (list, tuple)):
            keep = range(2, nd + 2) if data_format == _LAYOUTS[nd][0] else range(1, nd + 1)
            if any(list(padding[i]) != [0, 0] for i in range(nd + 2) if i not in keep):
                raise ValueError(f"{op}: non-zero padding {padding} in the batch or channel dimensions "
                                 f"is not supported")
            padding = [v for i in keep for v in padding[i]]
        padding = _ints(list(padding), 2 * nd, f"{op}: padding")
        symmetric = all(padding[2 * i] == padding[2 * i + 1] for i in range(nd))
        return (padding[::2] if symmetric and not full else padding), "EXPLICIT"
    pads = _ints(padding, nd, f"{op}: padding")
    return ([p for p in pads for _ in (0, 1)] if full else pads), "EXPLICIT"


def _check_common(input, op: str, use_cudnn, data_format: str, nd: int = 2) -> int:
    if len(input.shape) != nd + 2:
        raise ValueError(f"{op}: input {input.name} must be {nd + 2}-D, got shape {list(input.shape)}")
    if not isinstance(use_cudnn, bool):
        raise ValueError(f"{op}: use_cudnn must be True or False, got {use_cudnn!r}")
    if data_format not in _LAYOUTS[nd]:
        raise ValueError(f"{op}: data_format must be {' or '.join(map(repr, _LAYOUTS[nd]))}, got {data_format!r}")
    channels = input.shape[nd + 1] if data_format == _LAYOUTS[nd][1] else input.shape[1]
    if channels < 0:
        raise ValueError(f"{op}: the channel dim of input {input.name}{list(input.shape)} must be known")
    return channels


def _bias_act(helper, pre, bias_attr, act, data_format: str):
    """Fluid's append_bias_op(dim_start=1) then append_activation: bias [M] on the channel axis."""
    axis = len(pre.shape) - 1 if data_format in ("NHWC", "NDHWC") else 1
    b = helper.create_parameter(bias_attr, [pre.shape[axis]], pre.dtype, is_bias=True)
    if b is not None:
        out = helper.create_variable_for_type_inference(pre.dtype)
        helper.append_op("elementwise_add", {"X": [pre], "Y": [b]}, {"Out": [out]}, {"axis": axis})
        pre = out
    return helper.append_activation(pre, act)


def _conv(nd, input, num_filters, filter_size, stride, padding, dilation, groups, param_attr, bias_attr,
          use_cudnn, act, name, data_format):
    """conv2d / conv3d: the filter N(0, sqrt(2 / (prod(k) * C))), the op, bias and act."""
    op = f"conv{nd}d"
    channels = _check_common(input, op, use_cudnn, data_format, nd)
    if param_attr is False:
        raise ValueError(f"{op}: param_attr must not be False (the filter is required)")
    if groups is not None and (not isinstance(groups, int) or groups <= 0 or channels % groups):
        raise ValueError(f"{op}: groups must be a positive int dividing the input's {channels} channels, "
                         f"got {groups!r}")
    depthwise = nd == 2 and channels == groups and num_filters % channels == 0 and not use_cudnn
    l_type = "depthwise_conv2d" if depthwise else op
    helper = LayerHelper(l_type, name=name)
    filter_size = _ints(filter_size, nd, f"{op}: filter_size")
    paddings, algorithm = _padding(padding, data_format, op, nd=nd)
    std = (2.0 / (math.prod(filter_size) * channels)) ** 0.5
    w = helper.create_parameter(param_attr, [num_filters, channels // (groups or 1)] + filter_size, input.dtype,
                                default_initializer=NormalInitializer(0.0, std, 0))
    pre = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(l_type, {"Input": [input], "Filter": [w]}, {"Output": [pre]},
                     {"strides": _ints(stride, nd, f"{op}: stride"), "paddings": paddings,
                      "dilations": _ints(dilation, nd, f"{op}: dilation"), "groups": groups or 1,
                      "use_cudnn": use_cudnn, "padding_algorithm": algorithm, "data_format": data_format})
    return _bias_act(helper, pre, bias_attr, act, data_format)


def _conv_transpose(nd, input, num_filters, output_size, filter_size, padding, stride, dilation, groups,
                    param_attr, bias_attr, use_cudnn, act, name, data_format):
    """conv2d_transpose / conv3d_transpose: the filter (Xavier), the op, bias and act."""
    op = f"conv{nd}d_transpose"
    channels = _check_common(input, op, use_cudnn, data_format, nd)
    if param_attr is False:
        raise ValueError(f"{op}: param_attr must not be False (the filter is required)")
    groups = 1 if groups is None else groups
    if not isinstance(groups, int) or groups <= 0 or channels % groups or num_filters % groups:
        raise ValueError(f"{op}: groups must be a positive int dividing the input's {channels} channels and "
                         f"num_filters={num_filters}, got {groups!r}")
    depthwise = nd == 2 and channels == groups == num_filters and not use_cudnn
    l_type = "depthwise_conv2d_transpose" if depthwise else op
    helper = LayerHelper(l_type, name=name)
    stride, dilation = _ints(stride, nd, f"{op}: stride"), _ints(dilation, nd, f"{op}: dilation")
    paddings, algorithm = _padding(padding, data_format, op, full=True, nd=nd)
    output_size = [] if output_size is None else _ints(output_size, nd, f"{op}: output_size")
    if filter_size is None:
        if not output_size:
            raise ValueError(f"{op}: output_size must be set when filter_size is None")
        sizes = input.shape[1:nd + 1] if data_format == _LAYOUTS[nd][1] else input.shape[2:]
        filter_size = [(output_size[i] - (sizes[i] - 1) * stride[i] + paddings[2 * i] + paddings[2 * i + 1] - 1)
                       // dilation[i] + 1 for i in range(nd)]
    else:
        filter_size = _ints(filter_size, nd, f"{op}: filter_size")
    if all(paddings[2 * i] == paddings[2 * i + 1] for i in range(nd)):
        paddings = paddings[::2]
    w = helper.create_parameter(param_attr, [channels, num_filters // groups] + filter_size, input.dtype)
    pre = helper.create_variable_for_type_inference(input.dtype)
    # Fluid 1.8's conv3d_transpose writes its layout as "NCHW"/"NHWC" (conv_transpose_op.cc reads both)
    layout = {"NCDHW": "NCHW", "NDHWC": "NHWC"}.get(data_format, data_format)
    helper.append_op(l_type, {"Input": [input], "Filter": [w]}, {"Output": [pre]},
                     {"output_size": output_size, "strides": stride, "paddings": paddings,
                      "padding_algorithm": algorithm, "dilations": dilation, "groups": groups,
                      "use_cudnn": use_cudnn, "data_format": layout})
    return _bias_act(helper, pre, bias_attr, act, data_format)


def _pool(nd, input, pool_size, pool_type, pool_stride, pool_padding, global_pooling, use_cudnn, ceil_mode, name,
          exclusive, data_format):
    """pool2d / pool3d: one op."""
    op = f"pool{nd}d"
    if pool_type not in ("max", "avg"):
        raise ValueError(f"{op}: unknown pool_type {pool_type!r}; it can only be 'max' or 'avg'")
    if global_pooling is False and pool_size == -1:
        raise ValueError(f"{op}: pool_size must be given unless global_pooling is True (got -1)")
    if not isinstance(use_cudnn, bool):
        raise TypeError(f"{op}: use_cudnn must be True or False, got {use_cudnn!r}")
    if data_format not in _LAYOUTS[nd]:
        raise ValueError(f"{op}: data_format must be {' or '.join(map(repr, _LAYOUTS[nd]))}, got {data_format!r}")
    paddings, algorithm = _padding(pool_padding, data_format, op, nd=nd)
    if algorithm == "VALID" and ceil_mode:
        raise ValueError(f'{op}: when pool_padding is "VALID", ceil_mode must be False')
    helper = LayerHelper(op, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(op, {"X": [input]}, {"Out": [out]},
                     {"pooling_type": pool_type, "ksize": _ints(pool_size, nd, f"{op}: pool_size"),
                      "global_pooling": global_pooling, "strides": _ints(pool_stride, nd, f"{op}: pool_stride"),
                      "paddings": paddings, "padding_algorithm": algorithm, "use_cudnn": use_cudnn,
                      "ceil_mode": ceil_mode, "exclusive": exclusive, "data_format": data_format})
    return out


def _adaptive(nd, input, pool_size, pool_type, require_index, name):
    """adaptive_pool2d / adaptive_pool3d: pool{nd}d (avg) or max_pool{nd}d_with_index (max)."""
    op = f"adaptive_pool{nd}d"
    if pool_type not in ("max", "avg"):
        raise ValueError(f"{op}: unknown pool_type {pool_type!r}; it can only be 'max' or 'avg'")
    if pool_type == "avg" and require_index:
        raise ValueError(f"{op}: require_index=True is invalid with pool_type 'avg'")
    pool_size = _ints(pool_size, nd, f"{op}: pool_size")
    l_type = f"max_pool{nd}d_with_index" if pool_type == "max" else f"pool{nd}d"
    helper = LayerHelper(l_type, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    if pool_type == "avg":
        helper.append_op(l_type, {"X": [input]}, {"Out": [out]},
                         {"pooling_type": "avg", "ksize": pool_size, "adaptive": True})
        return out
    mask = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op(l_type, {"X": [input]}, {"Out": [out], "Mask": [mask]}, {"ksize": pool_size, "adaptive": True})
    return (out, mask) if require_index else out


def conv2d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=None, param_attr=None,
           bias_attr=None, use_cudnn=True, act=None, name=None, data_format="NCHW"):
    """A 2-D convolution layer: ``act(conv(input, W) + b)``.

    Output size per axis: ``(in + pad_top + pad_bottom - (dilation*(k-1) + 1)) // stride + 1``.
    The filter W is ``[num_filters, C/groups, kh, kw]``, initialized (unless ``param_attr``
    says) from Normal(0, std) with ``std = sqrt(2 / (kh*kw*C))`` and C the input's *total*
    channels, as Fluid 1.8 does (not C/groups); the bias [num_filters] from zeros. With
    ``groups == C``, ``num_filters % C == 0`` and ``use_cudnn=False`` Fluid appends a
    ``depthwise_conv2d`` op and names the layer ``depthwise_conv2d_N``; so does this.

    Args:
        input: a 4-D float Variable, [N, C, H, W].
        num_filters: M, the output channels.
        filter_size: k or (kh, kw).
        stride, dilation: an int or a pair.
        padding: an int, a pair, [top, bottom, left, right], Fluid's nested pairs, or
            "SAME" / "VALID" (NOTE(conv-padding) in ops/conv.py).
        groups: channel groups (None: 1); C and num_filters must divide by it.
        param_attr, bias_attr: ParamAttr of W and b; ``bias_attr=False`` drops the bias.
        use_cudnn: accepted; it only picks depthwise_conv2d as above.
        act: an activation op type appended after the bias, e.g. "relu".
        name: the layer's name (default ``conv2d_N``).
        data_format: "NCHW" (runs) or "NHWC" (refused by the op).

    Returns:
        The output Variable, [N, num_filters, H_out, W_out].

    Raises:
        ValueError: a non-4-D input, unknown channels, bad groups, padding or use_cudnn.
        ProgramError: from the op, when the filter does not fit the input.

    Example::

        h = fluid.layers.conv2d(img, num_filters=32, filter_size=3, padding=1, act="relu")
    """
    return _conv(2, input, num_filters, filter_size, stride, padding, dilation, groups, param_attr, bias_attr,
                 use_cudnn, act, name, data_format)


def conv2d_transpose(input, num_filters, output_size=None, filter_size=None, padding=0, stride=1, dilation=1,
                     groups=None, param_attr=None, bias_attr=None, use_cudnn=True, act=None, name=None,
                     data_format="NCHW"):
    """A 2-D transposed convolution layer (the adjoint of conv2d): ``act(conv_t(input, W) + b)``.

    Output size per axis: ``(in - 1)*stride - pad_top - pad_bottom + dilation*(k-1) + 1``, or
    ``output_size``, which must lie in [that, that + stride). Without ``filter_size`` it is
    computed from ``output_size`` as Fluid does. W is ``[C, num_filters/groups, kh, kw]``
    (Xavier unless ``param_attr`` says), the bias [num_filters] zeros. With
    ``groups == C == num_filters`` and ``use_cudnn=False`` the op is
    ``depthwise_conv2d_transpose``.

    Args:
        input: a 4-D float Variable, [N, C, H, W].
        num_filters: M, the output channels (divisible by ``groups``).
        output_size: None, an int or (h, w).
        filter_size: None (then from ``output_size``), k or (kh, kw).
        padding, stride, dilation, groups, param_attr, bias_attr, use_cudnn, act, name,
            data_format: as for ``conv2d``.

    Returns:
        The output Variable, [N, num_filters, H_out, W_out].

    Raises:
        ValueError: a non-4-D input, neither filter_size nor output_size, bad groups or padding.
        ProgramError: from the op, when output_size is out of range.

    Example::

        up = fluid.layers.conv2d_transpose(h, num_filters=16, filter_size=2, stride=2)   # 2x larger
    """
    return _conv_transpose(2, input, num_filters, output_size, filter_size, padding, stride, dilation, groups,
                           param_attr, bias_attr, use_cudnn, act, name, data_format)


def pool2d(input, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0, global_pooling=False,
           use_cudnn=True, ceil_mode=False, name=None, exclusive=True, data_format="NCHW"):
    """Max or average pooling over windows of ``input`` [N, C, H, W].

    Output size per axis: ``(in - k + pad_top + pad_bottom) // stride + 1`` (rounded up with
    ``ceil_mode``); a window's cells are clipped to the input (NOTE(pool-windows) in
    ops/pool.py). An average divides by the cells inside the input when ``exclusive``, else
    by k*k. The max's gradient goes to the first maximal cell of each window.

    Args:
        input: a 4-D float Variable.
        pool_size: k or (kh, kw); may be -1 only with ``global_pooling``.
        pool_type: "max" or "avg".
        pool_stride: an int or a pair.
        pool_padding: as ``conv2d``'s ``padding`` ("VALID" refuses ``ceil_mode``).
        global_pooling: pool the whole H x W (output [N, C, 1, 1]).
        use_cudnn: accepted and ignored.
        ceil_mode: round the output size up.
        name: the layer's name.
        exclusive: see above.
        data_format: "NCHW" (runs) or "NHWC" (refused by the op).

    Returns:
        The pooled Variable, [N, C, H_out, W_out].

    Raises:
        ValueError: a bad pool_type, pool_size, padding, use_cudnn or data_format.

    Example::

        p = fluid.layers.pool2d(h, pool_size=2, pool_type="max", pool_stride=2)
    """
    return _pool(2, input, pool_size, pool_type, pool_stride, pool_padding, global_pooling, use_cudnn, ceil_mode,
                 name, exclusive, data_format)


def adaptive_pool2d(input, pool_size, pool_type="max", require_index=False, name=None):
    """Pooling to a fixed output size: cell (i, j) pools rows [floor(i*H/h), ceil((i+1)*H/h))
    and the columns likewise.

    As in Fluid, "avg" appends ``pool2d`` with ``adaptive=True`` and "max" appends
    ``max_pool2d_with_index``, whose ``Mask`` (int32, ``row*W + col`` of each max) is returned
    too with ``require_index``.

    Args:
        input: a 4-D float Variable, [N, C, H, W].
        pool_size: the output size, h or (h, w).
        pool_type: "max" or "avg".
        require_index: also return the Mask (max only).
        name: the layer's name.

    Returns:
        The pooled Variable [N, C, h, w], or ``(out, mask)`` with ``require_index``.

    Raises:
        ValueError: a bad pool_type, or require_index with "avg".

    Example::

        feat = fluid.layers.adaptive_pool2d(h, pool_size=[1, 1], pool_type="avg")   # [-1, C, 1, 1]
    """
    return _adaptive(2, input, pool_size, pool_type, require_index, name)


def conv3d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=None, param_attr=None,
           bias_attr=None, use_cudnn=True, act=None, name=None, data_format="NCDHW"):
    """A 3-D convolution layer over [N, C, D, H, W]: ``act(conv(input, W) + b)``.

    Output size per axis: ``(in + pad_front + pad_back - (dilation*(k-1) + 1)) // stride + 1``.
    The filter W is ``[num_filters, C/groups, kd, kh, kw]``, initialized (unless
    ``param_attr`` says) from Normal(0, std) with ``std = sqrt(2 / (kd*kh*kw*C))``, C the
    input's total channels, as Fluid 1.8; the bias [num_filters] from zeros. The op is always
    ``conv3d`` (Fluid has no depthwise 3-D op).

    Args:
        input: a 5-D float Variable, [N, C, D, H, W].
        num_filters: M, the output channels.
        filter_size: k or (kd, kh, kw).
        stride, dilation: an int or a triple.
        padding: an int, a triple, [front, back, top, bottom, left, right], Fluid's nested
            pairs ([[0, 0], [0, 0], [front, back], [top, bottom], [left, right]]), or
            "SAME" / "VALID" (NOTE(conv-padding) in ops/conv.py).
        groups: channel groups (None: 1); C and num_filters must divide by it.
        param_attr, bias_attr: ParamAttr of W and b; ``bias_attr=False`` drops the bias.
        use_cudnn: accepted and ignored.
        act: an activation op type appended after the bias.
        name: the layer's name (default ``conv3d_N``).
        data_format: "NCDHW" (runs) or "NDHWC" (refused by the op).

    Returns:
        The output Variable, [N, num_filters, D_out, H_out, W_out].

    Raises:
        ValueError: a non-5-D input, unknown channels, bad groups, padding or use_cudnn.
        ProgramError: from the op, when the filter does not fit the input.

    Example::

        v = fluid.layers.conv3d(clip, num_filters=16, filter_size=3, padding=1, act="relu")
    """
    return _conv(3, input, num_filters, filter_size, stride, padding, dilation, groups, param_attr, bias_attr,
                 use_cudnn, act, name, data_format)


def conv3d_transpose(input, num_filters, output_size=None, filter_size=None, padding=0, stride=1, dilation=1,
                     groups=None, param_attr=None, bias_attr=None, use_cudnn=True, act=None, name=None,
                     data_format="NCDHW"):
    """A 3-D transposed convolution layer (the adjoint of conv3d): ``act(conv_t(input, W) + b)``.

    Output size per axis: ``(in - 1)*stride - pad_lo - pad_hi + dilation*(k-1) + 1``, or
    ``output_size``, which must lie in [that, that + stride). Without ``filter_size`` it is
    computed from ``output_size`` as Fluid does. W is ``[C, num_filters/groups, kd, kh, kw]``
    (Xavier unless ``param_attr`` says), the bias [num_filters] zeros. As in Fluid 1.8 the op's
    ``data_format`` attr says "NCHW" for NCDHW.

    Args:
        input: a 5-D float Variable, [N, C, D, H, W].
        num_filters: M, the output channels (divisible by ``groups``).
        output_size: None, an int or (d, h, w).
        filter_size: None (then from ``output_size``), k or (kd, kh, kw).
        padding, stride, dilation, groups, param_attr, bias_attr, use_cudnn, act, name,
            data_format: as for ``conv3d``.

    Returns:
        The output Variable, [N, num_filters, D_out, H_out, W_out].

    Raises:
        ValueError: a non-5-D input, neither filter_size nor output_size, bad groups or padding.
        ProgramError: from the op, when output_size is out of range.

    Example::

        up = fluid.layers.conv3d_transpose(v, num_filters=8, filter_size=2, stride=2)   # 2x larger
    """
    return _conv_transpose(3, input, num_filters, output_size, filter_size, padding, stride, dilation, groups,
                           param_attr, bias_attr, use_cudnn, act, name, data_format)


def pool3d(input, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0, global_pooling=False,
           use_cudnn=True, ceil_mode=False, name=None, exclusive=True, data_format="NCDHW"):
    """Max or average pooling over windows of ``input`` [N, C, D, H, W]; ``pool2d`` with a
    depth axis (NOTE(pool-windows) in ops/pool.py).

    Args:
        input: a 5-D float Variable.
        pool_size: k or (kd, kh, kw); may be -1 only with ``global_pooling``.
        pool_type: "max" or "avg".
        pool_stride: an int or a triple.
        pool_padding: as ``conv3d``'s ``padding`` ("VALID" refuses ``ceil_mode``).
        global_pooling: pool the whole D x H x W (output [N, C, 1, 1, 1]).
        use_cudnn: accepted and ignored.
        ceil_mode: round the output size up.
        name: the layer's name.
        exclusive: an average divides by the cells inside the input, else by kd*kh*kw.
        data_format: "NCDHW" (runs) or "NDHWC" (refused by the op).

    Returns:
        The pooled Variable, [N, C, D_out, H_out, W_out].

    Raises:
        ValueError: a bad pool_type, pool_size, padding or data_format.
        TypeError: use_cudnn not a bool.

    Example::

        p = fluid.layers.pool3d(v, pool_size=2, pool_type="avg", pool_stride=2)
    """
    return _pool(3, input, pool_size, pool_type, pool_stride, pool_padding, global_pooling, use_cudnn, ceil_mode,
                 name, exclusive, data_format)


def adaptive_pool3d(input, pool_size, pool_type="max", require_index=False, name=None):
    """Pooling [N, C, D, H, W] to a fixed output size: cell (i, j, l) pools depths
    [floor(i*D/d), ceil((i+1)*D/d)) and the rows and columns likewise.

    As in Fluid, "avg" appends ``pool3d`` with ``adaptive=True`` and "max" appends
    ``max_pool3d_with_index``, whose ``Mask`` (int32, ``(depth*H + row)*W + col`` of each max)
    is returned too with ``require_index``.

    Args:
        input: a 5-D float Variable, [N, C, D, H, W].
        pool_size: the output size, d or (d, h, w).
        pool_type: "max" or "avg".
        require_index: also return the Mask (max only).
        name: the layer's name.

    Returns:
        The pooled Variable [N, C, d, h, w], or ``(out, mask)`` with ``require_index``.

    Raises:
        ValueError: a bad pool_type, or require_index with "avg".

    Example::

        feat = fluid.layers.adaptive_pool3d(v, pool_size=1, pool_type="avg")   # [-1, C, 1, 1, 1]
    """
    return _adaptive(3, input, pool_size, pool_type, require_index, name)
