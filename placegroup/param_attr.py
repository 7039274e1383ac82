"""ParamAttr: how a layer's parameter is named, initialized, regularized and trained."""
from __future__ import annotations

from typing import Any


class ParamAttr:
    """Fluid's ParamAttr.

    Args:
        name: the parameter's name (default: a unique ``<layer>.w_<n>``).
        initializer: an ``Initializer`` (default: the layer's own, e.g. Xavier for fc weights).
        learning_rate: a multiplier on the optimizer's learning rate for this parameter.
        regularizer: a weight-decay regularizer, or None.
        trainable: False keeps the parameter out of backward and the optimizer.
        sparse_update: the gradient travels as SelectedRows (only the touched rows); same as
            ``embedding(is_sparse=True)``.
        gradient_clip: a ``fluid.clip`` clip for this parameter's gradient (an optimizer's
            ``grad_clip`` wins).
        do_model_average: False leaves the parameter out of ``ModelAverage`` and
            ``ExponentialMovingAverage``.

    Example::

        w = fluid.ParamAttr(name="emb", initializer=fluid.initializer.Normal(0.0, 0.01))
    """

    def __init__(self, name: str | None = None, initializer: Any = None, learning_rate: float = 1.0,
                 regularizer: Any = None, trainable: bool = True, gradient_clip: Any = None,
                 do_model_average: bool = True, sparse_update: bool = False) -> None:
        self.name = name
        self.initializer = initializer
        self.learning_rate = learning_rate
        self.regularizer = regularizer
        self.trainable = trainable
        self.gradient_clip = gradient_clip
        self.do_model_average = do_model_average
        self.sparse_update = sparse_update

    @staticmethod
    def to_attr(arg: Any) -> "ParamAttr | bool":
        """None -> default ParamAttr; str -> named; ParamAttr as is; False -> no parameter."""
        if arg is None:
            return ParamAttr()
        if arg is False:
            return False
        if isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        from placegroup.initializer import Initializer

        if isinstance(arg, Initializer):
            return ParamAttr(initializer=arg)
        raise TypeError(f"cannot make a ParamAttr from {arg!r}")

