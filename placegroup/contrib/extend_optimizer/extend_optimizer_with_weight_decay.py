"""Decoupled weight decay (Loshchilov & Hutter, "Decoupled Weight Decay Regularization"), as
Fluid 1.8's ``fluid.contrib.extend_optimizer.extend_optimizer_with_weight_decay``:
``extend_with_decoupled_weight_decay(Adam)`` is AdamW.

NOTE(decoupled-decay): ``minimize`` appends, after the backward ops and before the optimizer's
update, for every parameter with a gradient (and ``apply_decay_param_fun(name)`` true when
given) the ops ``scaled = param * coeff``, ``param = param - scaled`` (an ``assign`` back into
the parameter), so the update then starts from the decayed parameter: ``p' = update(p -
coeff * p, g)``, as Fluid 1.8 orders them. The ops have role ``optimize`` and belong to their
parameter's update (``op.param``), so a transpiled job runs them where the update runs. A
``coeff`` of 0.0 appends nothing (Fluid 1.8.5's ``minimize`` then fails iterating None).

Thread-safety: ``minimize`` edits the programs it is given; build programs from one thread.
"""
from __future__ import annotations

from placegroup.ir import unique_name
from placegroup.ir.framework import Variable
from placegroup.model.optimizer_base import Optimizer

__all__ = ["extend_with_decoupled_weight_decay"]


class DecoupledWeightDecay:
    """The mixin that adds decoupled weight decay to an optimizer class (NOTE(decoupled-decay));
    ``extend_with_decoupled_weight_decay`` puts it in front of one.

    Args:
        coeff: the decay coefficient, a float or a float Variable of the parameters' dtype.
        apply_decay_param_fun: ``name -> bool``: only the parameters it accepts decay; None: all.
        **kwargs: the base optimizer's arguments.

    Raises:
        TypeError: ``coeff`` is neither a float nor a Variable.
    """

    def __init__(self, coeff=0.0, apply_decay_param_fun=None, **kwargs) -> None:
        if not isinstance(coeff, (float, Variable)):
            raise TypeError("coeff should be float or Variable.")
        self._params_name: set = set()
        self._apply_decay_param_fun = apply_decay_param_fun
        self._coeff = coeff
        super().__init__(**kwargs)

    def _scale_parameters(self, params_grads) -> list:
        """Append ``param * coeff`` for each parameter to decay; [(param, grad, scaled)]."""
        if isinstance(self._coeff, float) and self._coeff == 0.0:
            return []
        scaled = []
        for param, grad in params_grads:
            if grad is None:
                continue
            if self._apply_decay_param_fun is not None and not self._apply_decay_param_fun(param.name):
                continue
            if isinstance(self._coeff, Variable) and self._coeff.dtype != param.dtype:
                raise TypeError(f"the type of coeff({self._coeff.dtype}) and parameter({param.dtype}) is not "
                                f"consistent.")
            if param.name in self._params_name:
                raise ValueError(f"DecoupledWeightDecay: parameter {param.name!r} is decayed twice")
            block = param.block.program.global_block()
            out = _tmp(block, param, "scaled")
            if isinstance(self._coeff, float):
                _op(block, param, "scale", {"X": [param]}, out, {"scale": self._coeff})
            else:
                _op(block, param, "elementwise_mul", {"X": [param], "Y": [self._coeff]}, out)
            scaled.append((param, grad, out))
            self._params_name.add(param.name)
        return scaled

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """Backward, the decay of every chosen parameter, then the base optimizer's update.

        Returns:
            ``(optimize_ops, params_grads)``, as the base optimizer's ``minimize``.
        """
        params_grads = self.backward(loss, startup_program, parameter_list or self._parameter_list, no_grad_set)
        for param, _, scaled in self._scale_parameters(params_grads):
            block = param.block.program.global_block()
            updated = _tmp(block, param, "decayed")
            _op(block, param, "elementwise_sub", {"X": [param], "Y": [scaled]}, updated)
            _op(block, param, "assign", {"X": [updated]}, param)
        optimize_ops = self.apply_optimize(loss, startup_program, params_grads)
        return optimize_ops, params_grads

    def __str__(self) -> str:
        return " ".join(["Weight Decay, params:", ",".join(self._params_name)])


def _tmp(block, param, what: str):
    return block.create_var(unique_name.generate(f"{param.name}.{what}"), shape=param.shape, dtype=param.dtype,
                            stop_gradient=True)


def _op(block, param, op_type: str, inputs: dict, out, attrs=None) -> None:
    op = block.append_op(op_type, inputs, {"Out": [out]}, attrs or {}, role="optimize")
    op.param = param.name  # NOTE(decoupled-decay): runs where the parameter's update runs


def extend_with_decoupled_weight_decay(base_optimizer):
    """An optimizer class: ``base_optimizer`` with decoupled weight decay
    (NOTE(decoupled-decay)): ``new_param = update(param - param * weight_decay, grad)``.

    Args:
        base_optimizer: a subclass of ``fluid.optimizer.Optimizer``.

    Returns:
        ``OptimizerWithDecoupledWeightDecay``, made as ``cls(weight_decay,
        apply_decay_param_fun=None, **base_kwargs)``.

    Raises:
        TypeError: ``base_optimizer`` is not an Optimizer class.

    Example::

        AdamW = fluid.contrib.extend_with_decoupled_weight_decay(fluid.optimizer.Adam)
        optimizer = AdamW(learning_rate=0.1, weight_decay=0.01)
        optimizer.minimize(cost)
    """
    if not isinstance(base_optimizer, type) or not issubclass(base_optimizer, Optimizer):
        raise TypeError("The input(base_optimizer) should be a derived class of Optimizer.")

    class OptimizerWithDecoupledWeightDecay(DecoupledWeightDecay, base_optimizer):
        """``base_optimizer`` with decoupled weight decay.

        Args:
            weight_decay: the coefficient, a float or a Variable.
            apply_decay_param_fun: ``name -> bool`` choosing the parameters to decay.
            **kwargs: the base optimizer's arguments.
        """

        def __init__(self, weight_decay, apply_decay_param_fun=None, **kwargs) -> None:
            super().__init__(weight_decay, apply_decay_param_fun, **kwargs)

    return OptimizerWithDecoupledWeightDecay
