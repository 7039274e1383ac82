"""Optimizers: ``minimize(loss)`` appends backward ops and one optimizer op per parameter.

Optimizer state (velocities, moments, beta powers) lives in persistable vars initialized by
the startup program; the learning rate is a var too (a constant, or a schedule's output), so
the transpiler can move all of it next to the parameter it updates.

The update each one appends is the op of the same name in ``ops/optimizer.py`` (Paddle's
maths: the losses match PaddlePaddle's own executor); ``regularization``
(``fluid.regularizer.L2Decay``, ``L1Decay``) or a parameter's own
``ParamAttr(regularizer=...)`` adds its decay term to the gradient first.

Example::

    opt = fluid.optimizer.SGD(learning_rate=0.01)
    opt.minimize(avg_cost)

Thread-safety: ``minimize`` edits the programs it is given; build programs from one thread.
"""
from __future__ import annotations

from typing import Any

from placegroup.ir import unique_name
from placegroup.backward import append_backward
from placegroup.ir.framework import Variable, default_main_program, default_startup_program
from placegroup.initializer import ConstantInitializer

__all__ = ["Adagrad", "AdagradOptimizer", "Adam", "AdamOptimizer", "Momentum", "MomentumOptimizer",
           "Optimizer", "SGD", "SGDOptimizer"]


class Optimizer:
    """Base class. Subclasses set ``type`` and implement ``_append_optimize_op``."""

    type = ""

    def __init__(self, learning_rate: float | Variable, regularization: Any = None,
                 name: str | None = None) -> None:
        if not isinstance(learning_rate, (float, int, Variable)):
            raise TypeError(f"learning_rate must be a float or a Variable, got {type(learning_rate)}")
        self._learning_rate = learning_rate
        self.regularization = regularization
        self._name = name
        self._lr_var: Variable | None = None
        self._accumulators: dict[tuple[str, str], Variable] = {}
        self._startup = None  # set by minimize; the default startup program otherwise

    # -- learning rate -----------------------------------------------------------------------
    def _global_learning_rate(self, program=None) -> Variable:
        """The lr var every parameter's update reads (a schedule's output, or a constant var
        made on first use in ``program``, default the default main program)."""
        if isinstance(self._learning_rate, Variable):
            return self._learning_rate
        if self._lr_var is None:
            block = (program or default_main_program()).global_block()
            self._lr_var = block.create_var(unique_name.generate("learning_rate"), shape=[1],
                                            dtype="float32", persistable=True, stop_gradient=True)
            self._init_var(self._lr_var, ConstantInitializer(float(self._learning_rate)))
        return self._lr_var

    def _param_lr(self, block, param) -> Variable:
        """The lr for ``param``: the global one times ``param.optimize_attr['learning_rate']``."""
        lr = self._global_learning_rate(block.program)
        mult = param.optimize_attr.get("learning_rate", 1.0)
        if mult == 1.0:
            return lr
        out = block.create_var(unique_name.generate(f"{param.name}.lr"), shape=[1], dtype="float32")
        block.append_op("scale", {"X": [lr]}, {"Out": [out]}, {"scale": float(mult)}, role="optimize")
        return out

    # -- state -------------------------------------------------------------------------------
    def _init_var(self, var, initializer) -> None:
        sblock = (self._startup or default_startup_program()).global_block()
        if not sblock.has_var(var.name):
            svar = sblock.create_var(var.name, shape=var.shape, dtype=var.dtype, persistable=True)
            initializer(svar, sblock)

    def _add_accumulator(self, name: str, param, fill_value: float = 0.0, shape=None,
                         dtype: str | None = None) -> Variable:
        key = (name, param.name)
        if key in self._accumulators:
            return self._accumulators[key]
        block = param.block.program.global_block()
        var = block.create_var(unique_name.generate(f"{param.name}_{name}"),
                               shape=list(shape if shape is not None else param.shape),
                               dtype=dtype or param.dtype, persistable=True, stop_gradient=True,
                               attrs={"accumulator_of": param.name})
        self._init_var(var, ConstantInitializer(fill_value))
        self._accumulators[key] = var
        return var

    def _append_optimize_op(self, block, param, grad):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- the public entry points -------------------------------------------------------------
    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, callbacks=None):
        return append_backward(loss, parameter_list, no_grad_set)

    def apply_gradients(self, params_grads) -> list:
        ops = []
        for p, g in params_grads:
            if p.trainable:
                block = p.block.program.global_block()
                first = len(block.ops)
                ops.append(self._append_optimize_op(block, p, g))
                for op in block.ops[first:]:  # the update op and its helpers (a scaled lr)
                    op.param = p.name
        return ops

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """Append backward and optimizer ops for ``loss``.

        Returns:
            ``(optimize_ops, params_grads)`` as in Fluid.
        """
        self._startup = startup_program or default_startup_program()
        params_grads = self.backward(loss, self._startup, parameter_list, no_grad_set)
        if self.regularization is not None or any(p.regularizer for p, _ in params_grads):
            from placegroup.regularizer import append_regularization_ops

            params_grads = append_regularization_ops(params_grads, self.regularization)
        return self.apply_gradients(params_grads), params_grads


class SGDOptimizer(Optimizer):
    """``param -= lr * grad``."""

    type = "sgd"

    def _append_optimize_op(self, block, param, grad):
        return block.append_op("sgd", {"Param": [param], "Grad": [grad],
                                       "LearningRate": [self._param_lr(block, param)]},
                               {"ParamOut": [param]}, role="optimize")


SGD = SGDOptimizer


class MomentumOptimizer(Optimizer):
    """Momentum SGD: ``v = momentum * v + g``, then ``p -= lr * v``, or with ``use_nesterov``
    ``p -= lr * (g + momentum * v)``. The velocity ``v`` starts at zero.

    Args:
        learning_rate: a float or a schedule's Variable.
        momentum: the decay ``mu`` of the velocity.
        use_nesterov: use Nesterov's look-ahead update.
        regularization: a regularizer for every parameter without its own.
        lazy_mode: with a SelectedRows gradient, update only the touched rows' velocity and
            parameter (NOTE(lazy-mode) in ops/optimizer.py); False equals the dense update.

    Example::

        fluid.optimizer.Momentum(learning_rate=0.01, momentum=0.9).minimize(avg_cost)
    """

    type = "momentum"

    def __init__(self, learning_rate, momentum: float, use_nesterov: bool = False,
                 regularization: Any = None, name: str | None = None, lazy_mode: bool = False) -> None:
        super().__init__(learning_rate, regularization, name)
        self._momentum = float(momentum)
        self._use_nesterov = bool(use_nesterov)
        self._lazy_mode = bool(lazy_mode)

    def _append_optimize_op(self, block, param, grad):
        v = self._add_accumulator("velocity", param)
        return block.append_op(
            "momentum", {"Param": [param], "Grad": [grad], "Velocity": [v],
                         "LearningRate": [self._param_lr(block, param)]},
            {"ParamOut": [param], "VelocityOut": [v]},
            {"mu": self._momentum, "use_nesterov": self._use_nesterov, "lazy_mode": self._lazy_mode},
            role="optimize")


class AdamOptimizer(Optimizer):
    """Adam (Kingma & Ba) in Paddle's form: moments start at zero, the beta-power
    accumulators (shape [1]) at ``beta1`` and ``beta2``, and the bias correction is folded
    into the step size (see the ``adam`` op).

    Args:
        learning_rate: a float or a schedule's Variable.
        beta1, beta2: decay rates of the first and second moments.
        epsilon: added to ``sqrt(m2)``, scaled by ``sqrt(1 - beta2^t)`` as Paddle does.
        lazy_mode: only update the rows a SelectedRows gradient touches (dense: no effect).

    Example::

        fluid.optimizer.Adam(learning_rate=0.001).minimize(avg_cost)
    """

    type = "adam"

    def __init__(self, learning_rate=0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, regularization: Any = None, name: str | None = None,
                 lazy_mode: bool = False) -> None:
        super().__init__(learning_rate, regularization, name)
        self._beta1, self._beta2 = float(beta1), float(beta2)
        self._epsilon = float(epsilon)
        self._lazy_mode = bool(lazy_mode)

    def _append_optimize_op(self, block, param, grad):
        m1 = self._add_accumulator("moment1", param)
        m2 = self._add_accumulator("moment2", param)
        b1 = self._add_accumulator("beta1_pow_acc", param, fill_value=self._beta1, shape=[1])
        b2 = self._add_accumulator("beta2_pow_acc", param, fill_value=self._beta2, shape=[1])
        return block.append_op(
            "adam", {"Param": [param], "Grad": [grad], "LearningRate": [self._param_lr(block, param)],
                     "Moment1": [m1], "Moment2": [m2], "Beta1Pow": [b1], "Beta2Pow": [b2]},
            {"ParamOut": [param], "Moment1Out": [m1], "Moment2Out": [m2], "Beta1PowOut": [b1],
             "Beta2PowOut": [b2]},
            {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon,
             "lazy_mode": self._lazy_mode}, role="optimize")


class AdagradOptimizer(Optimizer):
    """Adagrad: ``m += g * g``, then ``p -= lr * g / (sqrt(m) + epsilon)``.

    Args:
        learning_rate: a float or a schedule's Variable.
        epsilon: keeps the division finite.
        initial_accumulator_value: the starting value of ``m``.
        lazy_mode: accepted for symmetry: a zero gradient leaves Adagrad's state and parameter
            unchanged, so lazy and dense updates agree (NOTE(lazy-mode) in ops/optimizer.py).

    Example::

        fluid.optimizer.Adagrad(learning_rate=0.1).minimize(avg_cost)
    """

    type = "adagrad"

    def __init__(self, learning_rate, epsilon: float = 1e-6, regularization: Any = None,
                 name: str | None = None, initial_accumulator_value: float = 0.0,
                 lazy_mode: bool = False) -> None:
        super().__init__(learning_rate, regularization, name)
        self._epsilon = float(epsilon)
        self._lazy_mode = bool(lazy_mode)
        self._initial_accumulator_value = float(initial_accumulator_value)

    def _append_optimize_op(self, block, param, grad):
        m = self._add_accumulator("moment", param, fill_value=self._initial_accumulator_value)
        return block.append_op(
            "adagrad", {"Param": [param], "Grad": [grad], "Moment": [m],
                        "LearningRate": [self._param_lr(block, param)]},
            {"ParamOut": [param], "MomentOut": [m]}, {"epsilon": self._epsilon, "lazy_mode": self._lazy_mode},
            role="optimize")


Momentum = MomentumOptimizer
Adam = AdamOptimizer
Adagrad = AdagradOptimizer
