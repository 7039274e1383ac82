"""Metric layers: accuracy.

Example::

    import placegroup as fluid
    acc = fluid.layers.accuracy(input=prob, label=label, k=1)
"""
from __future__ import annotations

from placegroup.layer_helper import LayerHelper

__all__ = ["accuracy"]


def accuracy(input, label, k: int = 1, correct=None, total=None):
    """The fraction of rows whose ``label`` is among the ``k`` largest entries of ``input``.

    Appends ``top_k`` and ``accuracy`` ops, as Fluid does; neither has a gradient.

    Args:
        input: scores or probabilities, [N, C].
        label: int64 class ids, [N, 1].
        k: how many of the top entries count as a hit.
        correct, total: int64 [1] vars to receive the counts (new ones when None).

    Returns:
        The accuracy, a float32 var of shape [1].

    Example::

        acc = fluid.layers.accuracy(input=prob, label=label)
        loss_v, acc_v = exe.run(main, feed=..., fetch_list=[loss, acc])
    """
    helper = LayerHelper("accuracy")
    values = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    indices = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("top_k", {"X": [input]}, {"Out": [values], "Indices": [indices]}, {"k": int(k)})
    acc = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    correct = correct if correct is not None else helper.create_variable_for_type_inference("int64", True)
    total = total if total is not None else helper.create_variable_for_type_inference("int64", True)
    helper.append_op("accuracy", {"Out": [values], "Indices": [indices], "Label": [label]},
                     {"Accuracy": [acc], "Correct": [correct], "Total": [total]})
    return acc
