"""Fluid 1.8's ``fluid.contrib.layers.metric_op``: ``ctr_metric_bundle``.

Building a program is single-threaded, as in Fluid.
"""
from __future__ import annotations

from placegroup.model.initializer import ConstantInitializer
from placegroup.ir.framework import Variable
from placegroup.model.layer_helper import LayerHelper

__all__ = ["ctr_metric_bundle"]

_SUM_ROWS = {"dim": [0], "keep_dim": False, "reduce_all": False}  # Fluid's reduce_sum defaults, as its layer appends


def ctr_metric_bundle(input, label):
    """Running sums for CTR metrics, kept in six persistable float32 [1] vars (zeros at
    startup) that every run of the program adds the batch's numbers to.

    With n = local_ins_num: MAE = local_abserr / n, RMSE = sqrt(local_sqrerr / n), predicted CTR
    = local_prob / n, q = local_q / n. In a distributed job, all-reduce the sums and n first.
    As in Fluid 1.8: sqrerr and abserr sum (input - label)² and |input - label|, prob sums
    the inputs, q sums sigmoid(input) (Fluid's choice), pos_num the labels; sums run over
    dim 0 (Fluid's reduce_sum defaults), so the inputs are [N, 1].

    Args:
        input: the predicted probability, float32 [N, 1].
        label: the label, [N, 1] of the same shape; an int label is cast to ``input``'s dtype
            first (Fluid's elementwise_sub fails on an int label at run time).

    Returns:
        (local_sqrerr, local_abserr, local_prob, local_q, local_pos_num, local_ins_num).

    Raises:
        ValueError: ``input`` and ``label`` have different shapes.

    Example::

        predict = fluid.layers.sigmoid(fluid.layers.fc(input=data, size=1))
        sqrerr, abserr, prob, q, pos, total = fluid.contrib.layers.ctr_metric_bundle(predict, label)
    """
    if not isinstance(input, Variable) or not isinstance(label, Variable):
        raise TypeError("ctr_metric_bundle: input and label must be Variables")
    if tuple(input.shape) != tuple(label.shape):
        raise ValueError(f"ctr_metric_bundle: input{list(input.shape)} and label{list(label.shape)} must have one "
                         f"shape")
    helper = LayerHelper("ctr_metric_bundle")
    dtype = "float32"

    def local():
        var = helper.create_global_variable(persistable=True, dtype=dtype, shape=[1], stop_gradient=True)
        helper.set_variable_initializer(var, ConstantInitializer(0.0))
        return var

    def tmp():
        return helper.create_variable_for_type_inference(dtype, stop_gradient=True)

    sqrerr, abserr, prob, q, pos_num, ins_num = (local() for _ in range(6))
    if label.dtype != input.dtype:
        cast = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
        helper.append_op("cast", {"X": [label]}, {"Out": [cast]}, {"out_dtype": input.dtype})
        label = cast

    def accumulate(batch, total):
        helper.append_op("elementwise_add", {"X": [batch], "Y": [total]}, {"Out": [total]})

    diff = tmp()
    helper.append_op("elementwise_sub", {"X": [input], "Y": [label]}, {"Out": [diff]})
    for op_type, x, total in (("squared_l2_norm", diff, sqrerr), ("l1_norm", diff, abserr)):
        batch = tmp()
        helper.append_op(op_type, {"X": [x]}, {"Out": [batch]})
        accumulate(batch, total)
    sig = tmp()
    helper.append_op("sigmoid", {"X": [input]}, {"Out": [sig]})
    ones = tmp()
    helper.append_op("fill_constant_batch_size_like", {"Input": [label]}, {"Out": [ones]},
                     {"shape": [-1, 1], "dtype": dtype, "value": 1.0})
    for x, total in ((input, prob), (sig, q), (label, pos_num), (ones, ins_num)):
        batch = tmp()
        helper.append_op("reduce_sum", {"X": [x]}, {"Out": [batch]}, _SUM_ROWS)
        accumulate(batch, total)
    return sqrerr, abserr, prob, q, pos_num, ins_num
