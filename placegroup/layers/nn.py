"""Neural-network layers, Fluid 1.x signatures.

Each function appends ops (and, for ``fc`` and ``embedding``, parameters with their
initializers in the startup program) to the default programs and returns the output var(s),
whose shapes the ops' ``infer`` gives (-1 for the batch dim). Building a program is
single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    x = fluid.layers.data("x", shape=[4])
    label = fluid.layers.data("label", shape=[1], dtype="int64")
    prob = fluid.layers.fc(fluid.layers.fc(x, 8, act="relu"), 3, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
"""
from __future__ import annotations

import math

from placegroup.ir.framework import Variable
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers.py_func import PyFuncRegistry  # noqa: F401  (Fluid binds it here, outside __all__)
from placegroup.layers.crf import crf_decoding, linear_chain_crf
from placegroup.layers.ctc import ctc_greedy_decoder
from placegroup.layers.sequence_nn import chunk_eval, filter_by_instag, im2sequence, row_conv
from placegroup.layers.tensor import shape_inputs

__all__ = ["fc", "embedding", "mean", "square_error_cost", "cross_entropy", "softmax_with_cross_entropy",
           "relu", "sigmoid", "tanh", "softmax", "matmul", "scale", "reshape", "split", "topk",
           "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div", "reduce_sum",
           "reduce_mean"]
__all__ += ["chunk_eval", "filter_by_instag", "im2sequence", "row_conv"]  # placegroup/layers/sequence_nn.py
__all__ += ["crf_decoding", "linear_chain_crf"]  # placegroup/layers/crf.py
__all__ += ["ctc_greedy_decoder"]  # placegroup/layers/ctc.py


def fc(input, size: int, num_flatten_dims: int = 1, param_attr=None, bias_attr=None, act=None,
       is_test: bool = False, name: str | None = None, model_parallel: bool = False):
    """A fully connected layer: ``act(sum_i flatten(input_i) @ W_i + b)``.

    Weights default to Xavier, the bias to zeros (as in Fluid).

    Args:
        input: a Variable or a list of them.
        size: output width.
        num_flatten_dims: dims of ``input`` kept as rows; the rest are flattened.
        param_attr: the weights' attr, one for all inputs or a list of one per input
            (NOTE(attr-forms) in placegroup/model/param_attr.py); not False.
        bias_attr: the bias's attr; False: no bias.
        model_parallel: mark the layer for the model-parallel pass: its weight is
            column-sliced over the trainers (docs/model_parallel.md).
    """
    helper = LayerHelper("fc", name=name)
    inputs = input if isinstance(input, (list, tuple)) else [input]
    attrs = helper.multiple_param_attr(param_attr, len(inputs))
    parts = []
    for x, pa in zip(inputs, attrs):
        in_dim = math.prod(x.shape[num_flatten_dims:])
        w = helper.create_parameter(pa, [in_dim, size], x.dtype)
        if model_parallel:
            w.attrs["model_parallel"] = "column"
        tmp = helper.create_variable_for_type_inference(x.dtype)
        helper.append_op("mul", {"X": [x], "Y": [w]}, {"Out": [tmp]},
                         {"x_num_col_dims": num_flatten_dims, "y_num_col_dims": 1})
        parts.append(tmp)
    pre = parts[0]
    if len(parts) > 1:
        pre = helper.create_variable_for_type_inference(inputs[0].dtype)
        helper.append_op("sum", {"X": parts}, {"Out": [pre]})
    b = helper.create_parameter(bias_attr, [size], inputs[0].dtype, is_bias=True)
    if b is not None:
        if model_parallel:
            b.attrs["model_parallel"] = "column"
        out = helper.create_variable_for_type_inference(inputs[0].dtype)
        helper.append_op("elementwise_add", {"X": [pre], "Y": [b]}, {"Out": [out]},
                         {"axis": num_flatten_dims})
        pre = out
    return helper.append_activation(pre, act)


def _unary(op_type: str, x: Variable, act=None, name=None, **attrs):
    """Append ``op_type`` (X -> Out) with ``attrs``, then ``act`` if given."""
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": [x]}, {"Out": [out]}, attrs)
    return helper.append_activation(out, act)


def mean(x, name=None):
    """The mean of all elements, shape [1]."""
    return _unary("mean", x, name=name)


def square_error_cost(input, label):
    """``(input - label)²`` elementwise."""
    helper = LayerHelper("square_error_cost")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("square_error_cost", {"X": [input], "Y": [label]}, {"Out": [out]})
    return out


# -- activations ----------------------------------------------------------------------------


def relu(x, name=None):
    """``max(x, 0)`` elementwise.

    Example::

        h = fluid.layers.relu(fluid.layers.fc(x, 8))
    """
    return _unary("relu", x, name=name)


def sigmoid(x, name=None):
    """``1 / (1 + exp(-x))`` elementwise."""
    return _unary("sigmoid", x, name=name)


def tanh(x, name=None):
    """``tanh(x)`` elementwise."""
    return _unary("tanh", x, name=name)


def softmax(input, use_cudnn: bool = False, name=None, axis: int = -1):
    """Softmax along ``axis`` (default the last), as Paddle computes it (ops/activation.py).

    Example::

        prob = fluid.layers.softmax(logits)   # rows sum to 1
    """
    return _unary("softmax", input, name=name, axis=axis)


# -- losses ---------------------------------------------------------------------------------


def cross_entropy(input, label, soft_label: bool = False, ignore_index: int = -100):
    """Cross entropy of probabilities ``input`` [N, C] against ``label``.

    Args:
        input: probabilities (e.g. a softmax output), [N, C].
        label: int64 class ids [N, 1]; or, with ``soft_label``, a distribution [N, C].
        ignore_index: rows with this label get loss 0 and no gradient.

    Returns:
        The per-row loss, [N, 1]: ``-log(input[label])``.

    Raises:
        ProgramError: when ``label``'s shape or dtype does not fit ``input``.

    Example::

        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
    """
    helper = LayerHelper("cross_entropy")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("cross_entropy", {"X": [input], "Label": [label]}, {"Y": [out]},
                     {"soft_label": soft_label, "ignore_index": ignore_index})
    return out


def softmax_with_cross_entropy(logits, label, soft_label: bool = False, ignore_index: int = -100,
                               numeric_stable_mode: bool = True, return_softmax: bool = False,
                               axis: int = -1):
    """Softmax of ``logits`` [N, C] and its cross entropy against ``label``, in one stable op.

    Returns:
        The loss [N, 1], or ``(loss, softmax)`` with ``return_softmax``.

    Example::

        loss = fluid.layers.softmax_with_cross_entropy(logits, label)   # label int64 [N, 1]
    """
    helper = LayerHelper("softmax_with_cross_entropy")
    prob = helper.create_variable_for_type_inference(logits.dtype)
    loss = helper.create_variable_for_type_inference(logits.dtype)
    helper.append_op("softmax_with_cross_entropy", {"Logits": [logits], "Label": [label]},
                     {"Softmax": [prob], "Loss": [loss]},
                     {"soft_label": soft_label, "ignore_index": ignore_index,
                      "numeric_stable_mode": numeric_stable_mode, "axis": axis})
    return (loss, prob) if return_softmax else loss


# -- embedding ------------------------------------------------------------------------------


def embedding(input, size, is_sparse: bool = False, is_distributed: bool = False, padding_idx=None,
              param_attr=None, dtype: str = "float32"):
    """Rows of a [V, D] table, one per id.

    Args:
        input: int64 ids, [N, 1] (or [N]).
        size: ``[V, D]``, the table's shape.
        is_sparse: the table's gradient ``W@GRAD`` is a SelectedRows of the batch's rows
            instead of a dense [V, D] array (NOTE(lookup-sparse) in ops/lookup.py), even in one
            process; ``ParamAttr(sparse_update=True)`` means the same. The parameter gets
            ``attrs["sparse_update"] = True``.
        is_distributed: the table is row-sharded over the pservers by the transpiler's sparse
            pass (NOTE(row-shards) in ops/sparse.py); the parameter gets
            ``attrs["distributed"] = True``.
        padding_idx: an id whose row reads as zeros and gets no gradient; negative counts
            from the end (``V + padding_idx``); None for none.
        param_attr: the table's ParamAttr (Xavier-initialized by default).

    Returns:
        The embeddings, [N, D].

    Raises:
        ValueError: for a size that is not [V, D] or a padding_idx outside the table.
        OpError: at run time, for an id outside [0, V) (naming the id and V).

    Example::

        emb = fluid.layers.embedding(ids, size=[10000, 64], is_sparse=True, padding_idx=0)
    """
    return lookup("lookup_table", input, size, is_sparse, is_distributed, padding_idx, param_attr, dtype)


def lookup(op_type: str, input, size, is_sparse, is_distributed, padding_idx, param_attr, dtype):
    """``embedding`` with the lookup op ``op_type`` (``fluid.embedding`` uses lookup_table_v2)."""
    helper = LayerHelper("embedding")
    size = [int(d) for d in size]
    if len(size) != 2:
        raise ValueError(f"embedding: size must be [vocab, dim], got {size}")
    pad = -1 if padding_idx is None else padding_idx if padding_idx >= 0 else size[0] + padding_idx
    if not -1 <= pad < size[0]:
        raise ValueError(f"embedding: padding_idx {padding_idx} is outside a table of {size[0]} rows")
    w = helper.create_parameter(param_attr, size, dtype)
    # Facts for append_backward and the transpiler's sparse pass live on the parameter as
    # typed attrs, never read from names; either way of asking for sparse gradients sets the
    # parameter's attr and the op's.
    is_sparse = bool(is_sparse or w.attrs.get("sparse_update"))
    if is_sparse:
        w.attrs["sparse_update"] = True
    if is_distributed:
        w.attrs["distributed"] = True
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(op_type, {"Ids": [input], "W": [w]}, {"Out": [out]},
                     {"is_sparse": is_sparse, "is_distributed": bool(is_distributed), "padding_idx": pad})
    return out


# -- products, scaling, shapes --------------------------------------------------------------


def matmul(x, y, transpose_x: bool = False, transpose_y: bool = False, alpha: float = 1.0, name=None):
    """``alpha · op(x) @ op(y)``; ranks > 2 are batches (NOTE(matmul-rank) in ops/linalg.py).

    Example::

        scores = fluid.layers.matmul(q, k, transpose_y=True, alpha=0.125)
    """
    helper = LayerHelper("matmul", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("matmul", {"X": [x], "Y": [y]}, {"Out": [out]},
                     {"transpose_X": transpose_x, "transpose_Y": transpose_y, "alpha": float(alpha)})
    return out


def scale(x, scale: float = 1.0, bias: float = 0.0, bias_after_scale: bool = True, act=None, name=None):
    """``scale·x + bias`` (or ``scale·(x + bias)`` when ``bias_after_scale`` is False)."""
    return _unary("scale", x, act, name, scale=float(scale), bias=float(bias), bias_after_scale=bias_after_scale)


def reshape(x, shape, actual_shape=None, act=None, inplace: bool = False, name=None):
    """``x`` with a new shape: a 0 copies x's dim at that index, one -1 is inferred. Appends a
    ``reshape2`` op (with its XShape output, NOTE(xshape) in ops/shape.py), as Fluid 1.8 does.

    ``inplace`` is accepted and ignored (values are never shared in place here).

    Raises:
        ProgramError: when the shape cannot hold x's elements.
        ValueError: for ``actual_shape`` or a ``shape`` that is one Variable, which are not
            supported; a list may hold int Variables (read at run time).

    Example::

        flat = fluid.layers.reshape(img, shape=[0, -1])   # [N, C, H, W] -> [N, C*H*W]
    """
    if actual_shape is not None or isinstance(shape, Variable):
        raise ValueError("reshape: actual_shape, or a shape given as one Variable, is not supported; pass a list "
                         "of ints (0: copy, -1: infer) and int Variables")
    helper = LayerHelper("reshape2", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    x_shape = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    inputs, dims = shape_inputs("reshape", shape)
    if "ShapeTensorList" in inputs:  # reshape2 names its list ShapeTensor
        inputs = {"ShapeTensor": inputs["ShapeTensorList"]}
    helper.append_op("reshape2", {"X": [x], **inputs}, {"Out": [out], "XShape": [x_shape]}, {"shape": dims})
    return helper.append_activation(out, act)


def split(input, num_or_sections, dim: int = -1, name=None):
    """Cut ``input`` along ``dim`` into ``num_or_sections`` equal parts (an int) or parts of
    the given sizes (a list; one may be -1).

    Returns:
        A list of vars.

    Example::

        a, b = fluid.layers.split(x, num_or_sections=2, dim=1)
    """
    helper = LayerHelper("split", name=name)
    if isinstance(num_or_sections, int):
        n, attrs = num_or_sections, {"num": num_or_sections, "sections": []}
    else:
        n, attrs = len(num_or_sections), {"num": 0, "sections": [int(s) for s in num_or_sections]}
    outs = [helper.create_variable_for_type_inference(input.dtype) for _ in range(n)]
    helper.append_op("split", {"X": [input]}, {"Out": outs}, {**attrs, "axis": dim})
    return outs


def topk(input, k: int, name=None):
    """The ``k`` largest entries of each row and their int64 indices, largest first.

    Returns:
        ``(values, indices)``.
    """
    helper = LayerHelper("top_k", name=name)
    values = helper.create_variable_for_type_inference(input.dtype)
    indices = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("top_k", {"X": [input]}, {"Out": [values], "Indices": [indices]}, {"k": int(k)})
    return values, indices


def _elementwise(op_type: str, x, y, axis: int, act, name):
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": [x], "Y": [y]}, {"Out": [out]}, {"axis": axis})
    return helper.append_activation(out, act)


def elementwise_add(x, y, axis: int = -1, act=None, name=None):
    """``x + y`` with Fluid's broadcasting: y's dims match x's from ``axis`` (-1: the last).

    Example::

        out = fluid.layers.elementwise_add(x, bias, axis=1)   # x [N, C, H], bias [C]
    """
    return _elementwise("elementwise_add", x, y, axis, act, name)


def elementwise_sub(x, y, axis: int = -1, act=None, name=None):
    """``x - y``, broadcast as in ``elementwise_add``."""
    return _elementwise("elementwise_sub", x, y, axis, act, name)


def elementwise_mul(x, y, axis: int = -1, act=None, name=None):
    """``x * y``, broadcast as in ``elementwise_add``."""
    return _elementwise("elementwise_mul", x, y, axis, act, name)


def elementwise_div(x, y, axis: int = -1, act=None, name=None):
    """``x / y``, broadcast as in ``elementwise_add``."""
    return _elementwise("elementwise_div", x, y, axis, act, name)


def _reduce(op_type: str, input, dim, keep_dim: bool, name):
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    return _unary(op_type, input, name=name, dim=dims or [0], keep_dim=keep_dim, reduce_all=dim is None)


def reduce_sum(input, dim=None, keep_dim: bool = False, name=None):
    """The sum over ``dim`` (an int or list; None: every dim, giving [1]).

    Example::

        row_sums = fluid.layers.reduce_sum(x, dim=1)
    """
    return _reduce("reduce_sum", input, dim, keep_dim, name)


def reduce_mean(input, dim=None, keep_dim: bool = False, name=None):
    """The mean over ``dim`` (an int or list; None: every dim, giving [1])."""
    return _reduce("reduce_mean", input, dim, keep_dim, name)
