"""``fluid.nets``: Fluid 1.8's composite networks, built from layers exactly as Fluid builds
them (the same ops in the same order, so parameters get the same names).

``sequence_conv_pool`` (a text CNN's convolution over LoD sequences) is here too.

Example (the MNIST chapter's convolutional network)::

    img = fluid.layers.data(name="img", shape=[1, 28, 28])
    h = fluid.nets.simple_img_conv_pool(img, num_filters=20, filter_size=5, pool_size=2,
                                        pool_stride=2, act="relu")
    h = fluid.nets.simple_img_conv_pool(h, num_filters=50, filter_size=5, pool_size=2,
                                        pool_stride=2, act="relu")
    prediction = fluid.layers.fc(h, size=10, act="softmax")
"""
from __future__ import annotations

from placegroup import layers

__all__ = ["glu", "img_conv_group", "scaled_dot_product_attention", "sequence_conv_pool", "simple_img_conv_pool"]


def simple_img_conv_pool(input, num_filters, filter_size, pool_size, pool_stride, pool_padding=0,
                         pool_type="max", global_pooling=False, conv_stride=1, conv_padding=0, conv_dilation=1,
                         conv_groups=1, param_attr=None, bias_attr=None, act=None, use_cudnn=True):
    """``conv2d`` (with its bias and ``act``) then ``pool2d``."""
    conv_out = layers.conv2d(input=input, num_filters=num_filters, filter_size=filter_size, stride=conv_stride,
                             padding=conv_padding, dilation=conv_dilation, groups=conv_groups,
                             param_attr=param_attr, bias_attr=bias_attr, act=act, use_cudnn=use_cudnn)
    return layers.pool2d(input=conv_out, pool_size=pool_size, pool_type=pool_type, pool_stride=pool_stride,
                         pool_padding=pool_padding, global_pooling=global_pooling, use_cudnn=use_cudnn)


def img_conv_group(input, conv_num_filter, pool_size, conv_padding=1, conv_filter_size=3, conv_act=None,
                   param_attr=None, conv_with_batchnorm=False, conv_batchnorm_drop_rate=0.0, pool_stride=1,
                   pool_type="max", use_cudnn=True):
    """A VGG block: one ``conv2d`` per entry of ``conv_num_filter`` (each optionally followed by
    ``batch_norm`` carrying the activation, then ``dropout``), then one ``pool2d``. Every other
    per-conv argument is one value for all or a list with one per conv.

    Raises:
        TypeError: ``conv_num_filter`` is not a list or tuple.
        ValueError: a per-conv list has another length than ``conv_num_filter``.
    """
    if not isinstance(conv_num_filter, (list, tuple)):
        raise TypeError(f"img_conv_group: conv_num_filter must be a list or tuple, got {conv_num_filter!r}")
    n = len(conv_num_filter)

    def per_conv(name, obj):
        if not hasattr(obj, "__len__"):
            return [obj] * n
        if len(obj) != n:
            raise ValueError(f"img_conv_group: {name} has {len(obj)} entries for {n} convolutions")
        return obj

    padding = per_conv("conv_padding", conv_padding)
    filter_size = per_conv("conv_filter_size", conv_filter_size)
    attrs = per_conv("param_attr", param_attr)
    with_bn = per_conv("conv_with_batchnorm", conv_with_batchnorm)
    drop = per_conv("conv_batchnorm_drop_rate", conv_batchnorm_drop_rate)
    tmp = input
    for i in range(n):
        tmp = layers.conv2d(input=tmp, num_filters=conv_num_filter[i], filter_size=filter_size[i],
                            padding=padding[i], param_attr=attrs[i], act=None if with_bn[i] else conv_act,
                            use_cudnn=use_cudnn)
        if with_bn[i]:
            tmp = layers.batch_norm(input=tmp, act=conv_act, in_place=True)
            if abs(drop[i]) > 1e-5:
                tmp = layers.dropout(x=tmp, dropout_prob=drop[i])
    return layers.pool2d(input=tmp, pool_size=pool_size, pool_type=pool_type, pool_stride=pool_stride,
                         use_cudnn=use_cudnn)


def glu(input, dim=-1):
    """Gated linear unit: split ``input`` in two halves ``a, b`` along ``dim``; ``a * sigmoid(b)``."""
    a, b = layers.split(input, num_or_sections=2, dim=dim)
    return layers.elementwise_mul(x=a, y=layers.sigmoid(x=b))


def scaled_dot_product_attention(queries, keys, values, num_heads=1, dropout_rate=0.0):
    """``softmax(Q Kᵀ / sqrt(d)) V`` over 3-D ``[batch, length, hidden]`` inputs; with
    ``num_heads > 1`` Q, K and V first go through an ``fc`` each (with a bias, as in Fluid), are
    split into heads, and the heads are joined again at the end.

    Raises:
        ValueError: inputs that are not 3-D, hidden sizes that do not match or do not divide
            by ``num_heads``, keys and values of different lengths.
    """
    for name, v in (("queries", queries), ("keys", keys), ("values", values)):
        if len(v.shape) != 3:
            raise ValueError(f"scaled_dot_product_attention: {name} must be 3-D [batch, length, hidden], "
                             f"got {list(v.shape)}")
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(f"scaled_dot_product_attention: queries and keys must have the same hidden size, "
                         f"got {queries.shape[-1]} and {keys.shape[-1]}")
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: keys and values must have the same length, "
                         f"got {keys.shape[-2]} and {values.shape[-2]}")
    for name, v in (("keys", keys), ("values", values)):
        if v.shape[-1] % num_heads:
            raise ValueError(f"scaled_dot_product_attention: the hidden size of {name} ({v.shape[-1]}) "
                             f"does not divide by num_heads={num_heads}")

    def split_heads(x):
        if num_heads == 1:
            return x
        hidden = x.shape[-1]
        x = layers.reshape(x=x, shape=list(x.shape[:-1]) + [num_heads, hidden // num_heads])
        return layers.transpose(x=x, perm=[0, 2, 1, 3])

    def combine_heads(x):
        if len(x.shape) == 3:
            return x
        x = layers.transpose(x, perm=[0, 2, 1, 3])
        return layers.reshape(x=x, shape=[x.shape[0], x.shape[1], x.shape[2] * x.shape[3]])

    q, k, v = queries, keys, values
    if num_heads > 1:
        q = layers.fc(input=queries, size=queries.shape[-1], num_flatten_dims=2)
        k = layers.fc(input=keys, size=keys.shape[-1], num_flatten_dims=2)
        v = layers.fc(input=values, size=values.shape[-1], num_flatten_dims=2)
    q, k, v = split_heads(q), split_heads(k), split_heads(v)
    scaled_q = layers.scale(x=q, scale=(keys.shape[-1] // num_heads) ** -0.5)
    product = layers.matmul(x=scaled_q, y=k, transpose_y=True)
    weights = layers.reshape(x=layers.reshape(x=product, shape=[-1, product.shape[-1]], act="softmax"),
                             shape=product.shape)
    if dropout_rate:
        weights = layers.dropout(weights, dropout_prob=dropout_rate, is_test=False)
    return combine_heads(layers.matmul(weights, v))


def sequence_conv_pool(input, num_filters, filter_size, param_attr=None, act="sigmoid", pool_type="max",
                       bias_attr=None):
    """``sequence_conv`` (with its bias and ``act``) then ``sequence_pool``: one row per sequence.

    Args:
        input: a float32/float64 var [N, width] with lod_level 1 (e.g. an embedding of word ids).
        num_filters, filter_size: the convolution's output width and context length.
        param_attr, bias_attr: of the convolution's filter and bias.
        act: the convolution's activation (default ``"sigmoid"``, as Fluid 1.8).
        pool_type: ``"max"``, ``"average"``, ``"sum"`` or ``"sqrt"``.

    Example::

        words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
        emb = fluid.layers.embedding(input=words, size=[100, 128], is_sparse=True)
        conv = fluid.nets.sequence_conv_pool(input=emb, num_filters=512, filter_size=3, act="tanh",
                                             pool_type="sqrt")
    """
    from placegroup.layers.sequence import _check

    _check(input, "input")
    conv_out = layers.sequence_conv(input=input, num_filters=num_filters, filter_size=filter_size,
                                    param_attr=param_attr, bias_attr=bias_attr, act=act)
    return layers.sequence_pool(input=conv_out, pool_type=pool_type)
