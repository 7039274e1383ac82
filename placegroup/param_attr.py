"""ParamAttr: how a layer's parameter is named, initialized, regularized and trained;
WeightNormParamAttr: a weight made of a magnitude and a direction parameter."""
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



class WeightNormParamAttr(ParamAttr):
    """A ParamAttr that makes a layer's weight ``w = g · v / ||v||`` (weight normalization,
    Salimans & Kingma 2016), as Fluid 1.8's ``LayerHelper._create_weight_normalize`` does.

    The layer gets two parameters instead of one, ``<name>_g`` (the magnitude, shaped like the
    weight with 1 in every dim but ``dim``) and ``<name>_v`` (the direction, the weight's
    shape), ``<name>`` being the weight's name (``fc_0.w_0`` by default). The startup program
    initializes ``v`` by ``initializer`` (Xavier by default) and ``g`` to the norm of that
    ``v``, so ``w`` starts equal to ``v``; the main program computes ``w`` from them with ops
    (abs, pow, reduce_sum, pow, elementwise_div, elementwise_mul), so training updates ``g`` and
    ``v`` through their gradients. Both take this attr's learning rate, regularizer,
    trainability and model-average flag.

    Args:
        dim: the dim whose slices are normalized one by one (0..rank-1); None: the whole
            weight as one vector.
        name, initializer, learning_rate, regularizer, trainable, gradient_clip,
        do_model_average: as ``ParamAttr``'s (``do_model_average`` defaults to False here, as
            in Fluid).

    Example::

        y = fluid.layers.fc(x, size=10, param_attr=fluid.WeightNormParamAttr(dim=None, name="wn"))
        # parameters wn_g [1, 1] and wn_v [D, 10]
    """

    # every weight made from a WeightNormParamAttr (Fluid keeps this list too)
    params_with_weight_norm: list = []

    def __init__(self, dim: int | None = None, name: str | None = None, initializer: Any = None,
                 learning_rate: float = 1.0, regularizer: Any = None, trainable: bool = True,
                 gradient_clip: Any = None, do_model_average: bool = False) -> None:
        super().__init__(name=name, initializer=initializer, learning_rate=learning_rate, regularizer=regularizer,
                         trainable=trainable, gradient_clip=gradient_clip, do_model_average=do_model_average)
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 0):
            raise ValueError(f"WeightNormParamAttr: dim must be None or a dim index >= 0, got {dim!r}")
        self.dim = dim
