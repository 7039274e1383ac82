"""Weight-decay regularizers: each adds a decay term to a parameter's gradient, as ops.

``Optimizer.minimize`` calls ``append_regularization_ops`` between backward and the optimizer
ops. For every (param, grad) whose parameter has a regularizer (its own
``ParamAttr(regularizer=...)`` first, else the optimizer's ``regularization``) it appends

* L2Decay(c): ``decay = scale(param, c)``;
* L1Decay(c): ``decay = scale(sign(param), c)``;

then ``grad' = elementwise_add(grad, decay)``, and the optimizer updates from ``grad'``.
``grad'`` is a new var rather than ``grad`` rewritten, so every var keeps one writer.

NOTE(reg-placement): the decay ops have role ``backward`` and no ``op.param``: they finish
the gradient of the regularized loss, so the transpiler leaves them on the trainers, where
the gradient and a copy of the parameter already are, and the merge pass gathers ``grad'``
(the optimizer's ``Grad``). In sync mode every trainer holds the same parameter, so the mean
of ``g_t + c·p`` is ``mean(g_t) + c·p``: the same update as Fluid's, which ran these ops on
the pserver after the merge. Running them there would need the raw gradient gathered instead,
which is what happens behind a gradient clip: clipping is not linear, so it runs on the merged
gradient, and the decay follows it there (NOTE(clip-placement) in clip.py).

NOTE(sparse-decay): a SelectedRows gradient (``embedding(is_sparse=True)``) plus the decay
of the whole parameter is dense, as in Fluid 1.x, which sums the two into a dense gradient: every
row decays every step, touched or not, and the update is the dense one. ``grad'`` is then the
``sum`` of the two (the SelectedRows scatter-added into the decay). A distributed table is
refused: its dense gradient would be the whole table on every trainer.

Example::

    opt = fluid.optimizer.SGD(0.01, regularization=fluid.regularizer.L2Decay(1e-4))
    w_attr = fluid.ParamAttr(regularizer=fluid.regularizer.L1Decay(1e-5))  # per parameter

Thread-safety: appends to programs; build programs from one thread.
"""
from __future__ import annotations

import warnings

from placegroup.ir import unique_name
from placegroup.ir.framework import SELECTED_ROWS
from placegroup.ir.variable import DYNAMIC_TABLE

__all__ = ["L1Decay", "L1DecayRegularizer", "L2Decay", "L2DecayRegularizer",
           "WeightDecayRegularizer", "append_regularization_ops"]


class WeightDecayRegularizer:
    """Base class: ``__call__(param, grad, block)`` appends ops and returns the decay var."""

    def __init__(self, regularization_coeff: float = 0.0) -> None:
        if isinstance(regularization_coeff, bool) or not isinstance(regularization_coeff, (int, float)):
            raise TypeError(f"{type(self).__name__}: regularization_coeff must be a number, got "
                            f"{regularization_coeff!r}")
        self._regularization_coeff = float(regularization_coeff)

    def _tmp(self, block, param, what: str):
        return block.create_var(unique_name.generate(f"{param.name}.{what}"), shape=param.shape,
                                dtype=param.dtype, stop_gradient=True)

    def _scaled(self, block, param, x):
        decay = self._tmp(block, param, "decay")
        block.append_op("scale", {"X": [x]}, {"Out": [decay]},
                        {"scale": self._regularization_coeff, "_regularizer": True}, role="backward")
        return decay

    def __call__(self, param, grad, block):  # pragma: no cover - abstract
        raise NotImplementedError

    def __str__(self) -> str:
        return f"{type(self).__name__}(regularization_coeff={self._regularization_coeff})"


class L2DecayRegularizer(WeightDecayRegularizer):
    """Adds ``coeff * param`` to the gradient (the gradient of ``coeff/2 * ||param||²``).

    Example::

        fluid.optimizer.Adam(1e-3, regularization=fluid.regularizer.L2Decay(1e-4))
    """

    def __call__(self, param, grad, block):
        return self._scaled(block, param, param)


class L1DecayRegularizer(WeightDecayRegularizer):
    """Adds ``coeff * sign(param)`` to the gradient (the gradient of ``coeff * |param|``).

    Example::

        fluid.ParamAttr(regularizer=fluid.regularizer.L1Decay(1e-5))
    """

    def __call__(self, param, grad, block):
        sign = self._tmp(block, param, "sign")
        # See NOTE(l1-sign) in ops/optimizer.py for why this is not a plain `sign` op.
        block.append_op("l1_decay_sign", {"X": [param]}, {"Out": [sign]}, {"_regularizer": True}, role="backward")
        return self._scaled(block, param, sign)


L2Decay = L2DecayRegularizer
L1Decay = L1DecayRegularizer


def append_regularization_ops(params_grads, regularization=None, on_update: bool = False) -> list:
    """Add each parameter's decay term to its gradient.

    Args:
        params_grads: ``[(param, grad)]`` as ``append_backward`` returns them; ``grad`` may be
            None (left alone).
        regularization: the regularizer for parameters without their own (or None).
        on_update: make the decay ops part of each parameter's update (role ``optimize``,
            ``op.param`` set), after a gradient clip (NOTE(clip-placement) in clip.py).

    Returns:
        ``[(param, grad')]`` in the same order, ``grad'`` the regularized gradient var (or the
        original one when no regularizer applies).

    Raises:
        TypeError: if a regularizer is not a ``WeightDecayRegularizer``.
    """
    out = []
    for param, grad in params_grads:
        reg = getattr(param, "regularizer", None) or regularization
        if grad is None or reg is None:
            out.append((param, grad))
            continue
        if not isinstance(reg, WeightDecayRegularizer):
            raise TypeError(f"regularizer of parameter {param.name!r} must be L1Decay or L2Decay, "
                            f"got {reg!r}")
        if param.type == DYNAMIC_TABLE:
            warnings.warn(f"{param.name!r} is a table keyed by raw ids (sparse_embedding): the table's own optimizer "
                          f"updates its rows and applies no {type(reg).__name__}, so the table is left "
                          f"unregularized, as Paddle's parameter-server tables are", stacklevel=4)
            out.append((param, grad))
            continue
        block = grad.block
        sparse = grad.type == SELECTED_ROWS
        if sparse and param.attrs.get("distributed"):
            raise ValueError(f"{param.name!r} is a distributed table (embedding(is_distributed=True)); "
                             f"a decay term would make its gradient dense, the whole table on every "
                             f"trainer. Regularize it with is_distributed=False, or leave it unregularized")
        first = len(block.ops)
        decay = reg(param, grad, block)
        new_grad = block.create_var(unique_name.generate(f"{grad.name}.regularized"),
                                    shape=param.shape, dtype=grad.dtype, stop_gradient=True)
        if sparse:  # NOTE(sparse-decay)
            block.append_op("sum", {"X": [grad, decay]}, {"Out": [new_grad]}, {"_regularizer": True},
                            role="backward")
        else:
            block.append_op("elementwise_add", {"X": [grad], "Y": [decay]}, {"Out": [new_grad]},
                            {"_regularizer": True}, role="backward")
        if on_update:
            for op in block.ops[first:]:
                op.role, op.param = "optimize", param.name
        out.append((param, new_grad))
    return out
