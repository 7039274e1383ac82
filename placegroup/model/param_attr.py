"""ParamAttr: how a layer's parameter is named, initialized, regularized and trained;
WeightNormParamAttr: a weight made of a magnitude and a direction parameter."""
from __future__ import annotations

from typing import Any

from placegroup.model.initializer import Initializer
from placegroup.model.regularizer import WeightDecayRegularizer

# what a layer's param_attr/bias_attr may be (NOTE(attr-forms)), for error messages
ATTR_FORMS = ("None, True (the default), False (no parameter), a name (str), an Initializer, a "
              "WeightDecayRegularizer, a ParamAttr or WeightNormParamAttr, or (for a layer of several "
              "inputs, such as fc) a list of these")


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

    # NOTE(attr-forms): the forms a layer's ``param_attr``/``bias_attr`` takes, as Fluid 1.8.5's
    # ``ParamAttr._to_attr``: None and True are the default attr (the layer's own name and
    # initializer); False is no parameter (a layer without a bias; a weight a layer needs
    # cannot be False, and the layer says so); a str names it; an Initializer or a
    # WeightDecayRegularizer is an attr with only that set; a ParamAttr (or
    # WeightNormParamAttr) is taken as is and never changed; a list or tuple of these gives one
    # attr per item (only ``fc`` and other layers of several inputs take one:
    # ``LayerHelper.multiple_param_attr``). Anything else, a number included, is a TypeError
    # naming the argument and these forms.
    @staticmethod
    def to_attr(arg: Any, arg_name: str = "param_attr") -> "ParamAttr | bool | list":
        """The ParamAttr (or False, or list of them) that ``arg`` stands for (NOTE(attr-forms)).

        Args:
            arg: None, True, False, a str, an Initializer, a WeightDecayRegularizer, a
                ParamAttr, or a list/tuple of these.
            arg_name: the argument's name in the layer's call, for the error.

        Returns:
            A ParamAttr, False, or a list of them (for a list or tuple).

        Raises:
            TypeError: any other ``arg``, naming ``arg_name`` and the forms it takes.

        Example::

            ParamAttr.to_attr("w").name  # 'w'
            ParamAttr.to_attr(False)     # False: no parameter
        """
        if arg is None:
            return ParamAttr()
        if isinstance(arg, (list, tuple)):
            return [ParamAttr.to_attr(a, arg_name) for a in arg]
        if isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        if isinstance(arg, Initializer):
            return ParamAttr(initializer=arg)
        if isinstance(arg, WeightDecayRegularizer):
            return ParamAttr(regularizer=arg)
        if isinstance(arg, bool):
            return ParamAttr() if arg else False
        raise TypeError(f"{arg_name}={arg!r} ({type(arg).__name__}) is not a form a ParamAttr is made from; "
                        f"{arg_name} takes {ATTR_FORMS}")

    _to_attr = to_attr  # Fluid's name, which some scripts call


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
