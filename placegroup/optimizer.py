"""Optimizers: ``minimize(loss)`` appends backward ops and one optimizer op per parameter.

Optimizer state (velocities, moments, beta powers) lives in persistable vars initialized by
the startup program; the learning rate is a var too (a constant, or a schedule's output), so
the transpiler can move all of it next to the parameter it updates.

Example::

    opt = fluid.optimizer.SGD(learning_rate=0.01)
    opt.minimize(avg_cost)
"""
from __future__ import annotations

from typing import Any

from placegroup import unique_name
from placegroup.backward import append_backward
from placegroup.framework import Variable, default_main_program, default_startup_program
from placegroup.initializer import ConstantInitializer


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
        self.helper_startup = None

    # -- learning rate -----------------------------------------------------------------------
    def _global_learning_rate(self, program) -> Variable:
        if isinstance(self._learning_rate, Variable):
            return self._learning_rate
        if self._lr_var is None:
            block = program.global_block()
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
        sblock = self._startup.global_block()
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
                ops.append(self._append_optimize_op(p.block.program.global_block(), p, g))
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
