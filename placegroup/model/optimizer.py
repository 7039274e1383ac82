"""Optimizers: ``minimize(loss)`` appends backward ops and one optimizer op per parameter.

Optimizer state (velocities, moments, beta powers) lives in persistable vars initialized by
the startup program; the learning rate is a var too (a constant, or a schedule's output), so
the transpiler can move all of it next to the parameter it updates.

The update each one appends is the op of the same name in ``ops/optimizer.py`` or
``ops/lars_dpsgd.py`` (Paddle's maths: the losses match PaddlePaddle's own executor);
``regularization``
(``fluid.regularizer.L2Decay``, ``L1Decay``) or a parameter's own
``ParamAttr(regularizer=...)`` adds its decay term to the gradient first.

The base class lives in placegroup/model/optimizer_base.py and the wrappers
(``LookaheadOptimizer``, ``RecomputeOptimizer``) in placegroup/model/optimizer_wrappers.py, both
re-exported here. The averages (``ModelAverage``, ``ExponentialMovingAverage``) read and write an
executor's scope, so they live above the executor (placegroup/runtime/averaging.py);
``fluid.optimizer`` (placegroup/optimizer.py) has all of them. Fluid 1.8's ``PipelineOptimizer``
and ``DGCMomentumOptimizer`` are multi-device strategies placegroup does not have: they raise
``NotImplementedInPlacegroup``.

Example::

    opt = fluid.optimizer.SGD(learning_rate=0.01)
    opt.minimize(avg_cost)

Thread-safety: ``minimize`` edits the programs it is given; build programs from one thread.
"""
from __future__ import annotations

from numbers import Real
from typing import Any

from placegroup.model.optimizer_base import Optimizer
from placegroup.model.optimizer_wrappers import LookaheadOptimizer, RecomputeOptimizer

__all__ = ["Adadelta", "AdadeltaOptimizer", "Adagrad", "AdagradOptimizer", "Adam", "AdamOptimizer", "Adamax",
           "AdamaxOptimizer", "DecayedAdagrad", "DecayedAdagradOptimizer", "Dpsgd", "DpsgdOptimizer",
           "Ftrl", "FtrlOptimizer", "Lamb", "LambOptimizer", "LarsMomentum",
           "LarsMomentumOptimizer", "LookaheadOptimizer", "Momentum", "MomentumOptimizer",
           "Optimizer", "RMSProp", "RMSPropOptimizer", "RecomputeOptimizer", "SGD", "SGDOptimizer"]


class SGDOptimizer(Optimizer):
    """``param -= lr * grad``."""

    type = "sgd"

    def __init__(self, learning_rate, parameter_list=None, regularization: Any = None, grad_clip: Any = None,
                 name: str | None = None) -> None:
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)

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

    def __init__(self, learning_rate, momentum: float, parameter_list=None, use_nesterov: bool = False,
                 regularization: Any = None, grad_clip: Any = None, name: str | None = None,
                 lazy_mode: bool = False) -> None:
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
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
                 epsilon: float = 1e-8, parameter_list=None, regularization: Any = None,
                 grad_clip: Any = None, name: str | None = None, lazy_mode: bool = False) -> None:
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
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

    def __init__(self, learning_rate, epsilon: float = 1e-6, parameter_list=None, regularization: Any = None,
                 grad_clip: Any = None, name: str | None = None, initial_accumulator_value: float = 0.0,
                 lazy_mode: bool = False) -> None:
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
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


class RMSPropOptimizer(Optimizer):
    """RMSProp with optional momentum and centering (Fluid 1.8's ``rmsprop`` op)::

        ms = rho * ms + (1 - rho) * g²
        mg = rho * mg + (1 - rho) * g                        (centered only)
        v  = momentum * v + lr * g / sqrt(ms [- mg²] + epsilon)
        p -= v

    Args:
        learning_rate: a float or a schedule's Variable.
        rho: the decay of the running averages (the op's ``decay``).
        epsilon: added under the square root.
        momentum: the decay of ``v``.
        centered: divide by the estimated variance (``ms - mg²``) instead of ``ms``.
        regularization: a regularizer for every parameter without its own.

    A sparse (SelectedRows) gradient is the dense update on the scattered gradient.

    Example::

        fluid.optimizer.RMSProp(learning_rate=0.01).minimize(avg_cost)
    """

    type = "rmsprop"

    def __init__(self, learning_rate, rho: float = 0.95, epsilon: float = 1.0e-6, momentum: float = 0.0,
                 centered: bool = False, parameter_list=None, regularization: Any = None,
                 grad_clip: Any = None, name: str | None = None) -> None:
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._rho, self._epsilon = float(rho), float(epsilon)
        self._momentum, self._centered = float(momentum), bool(centered)

    def _append_optimize_op(self, block, param, grad):
        mom = self._add_accumulator("momentum", param)
        ms = self._add_accumulator("mean_square", param)
        mg = self._add_accumulator("mean_grad", param)
        return block.append_op(
            "rmsprop", {"Param": [param], "Grad": [grad], "Moment": [mom], "MeanSquare": [ms],
                        "MeanGrad": [mg], "LearningRate": [self._param_lr(block, param)]},
            {"ParamOut": [param], "MomentOut": [mom], "MeanSquareOut": [ms], "MeanGradOut": [mg]},
            {"epsilon": self._epsilon, "decay": self._rho, "momentum": self._momentum,
             "centered": self._centered}, role="optimize")


class AdamaxOptimizer(Optimizer):
    """Adamax (Adam's infinity-norm variant)::

        m = beta1 * m + (1 - beta1) * g;  u = max(beta2 * u + epsilon, |g|)
        p -= lr / (1 - beta1^t) * m / u

    ``m`` and ``u`` start at zero, the power accumulator (shape [1]) at ``beta1``; the op
    advances it (NOTE(fluid18-optimizers) in ops/optimizer.py). Dense gradients only.

    Args:
        learning_rate: a float or a schedule's Variable.
        beta1, beta2: decay rates of the moment and of the infinity norm.
        epsilon: keeps ``u`` away from zero.
        regularization: a regularizer for every parameter without its own.

    Example::

        fluid.optimizer.Adamax(learning_rate=0.002).minimize(avg_cost)
    """

    type = "adamax"

    def __init__(self, learning_rate=0.001, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                 parameter_list=None, regularization: Any = None, grad_clip: Any = None,
                 name: str | None = None) -> None:
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._beta1, self._beta2, self._epsilon = float(beta1), float(beta2), float(epsilon)

    def _append_optimize_op(self, block, param, grad):
        m = self._add_accumulator("moment", param)
        u = self._add_accumulator("inf_norm", param)
        b1 = self._add_accumulator("beta1_pow_acc", param, fill_value=self._beta1, shape=[1])
        return block.append_op(
            "adamax", {"Param": [param], "Grad": [grad], "LearningRate": [self._param_lr(block, param)],
                       "Moment": [m], "InfNorm": [u], "Beta1Pow": [b1]},
            {"ParamOut": [param], "MomentOut": [m], "InfNormOut": [u], "Beta1PowOut": [b1]},
            {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon}, role="optimize")


class AdadeltaOptimizer(Optimizer):
    """Adadelta (Zeiler 2012)::

        E[g²]  = rho * E[g²] + (1 - rho) * g²
        dx     = -sqrt((E[dx²] + epsilon) / (E[g²] + epsilon)) * g
        E[dx²] = rho * E[dx²] + (1 - rho) * dx²;   p += dx

    As in Fluid 1.8 the ``adadelta`` op has no learning rate: ``learning_rate`` is accepted
    (and type-checked) but does not scale the step. Dense gradients only.

    Args:
        learning_rate: accepted for Fluid's signature; unused by the update.
        epsilon: keeps both roots finite.
        rho: the decay of both running averages.
        regularization: a regularizer for every parameter without its own.

    Example::

        fluid.optimizer.Adadelta(learning_rate=0.0003, epsilon=1.0e-6, rho=0.95).minimize(avg_cost)
    """

    type = "adadelta"

    def __init__(self, learning_rate, epsilon: float = 1.0e-6, rho: float = 0.95, parameter_list=None,
                 regularization: Any = None, grad_clip: Any = None, name: str | None = None) -> None:
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._epsilon, self._rho = float(epsilon), float(rho)

    def _append_optimize_op(self, block, param, grad):
        asg = self._add_accumulator("_avg_squared_grad", param)
        asu = self._add_accumulator("_avg_squared_update", param)
        return block.append_op(
            "adadelta", {"Param": [param], "Grad": [grad], "AvgSquaredGrad": [asg], "AvgSquaredUpdate": [asu]},
            {"ParamOut": [param], "AvgSquaredGradOut": [asg], "AvgSquaredUpdateOut": [asu]},
            {"epsilon": self._epsilon, "rho": self._rho}, role="optimize")


class DecayedAdagradOptimizer(Optimizer):
    """Adagrad with a decaying sum: ``m = decay * m + (1 - decay) * g²``, then
    ``p -= lr * g / (sqrt(m) + epsilon)``. Dense gradients only.

    Args:
        learning_rate: a float or a schedule's Variable.
        decay: the decay of ``m``.
        epsilon: keeps the division finite.
        regularization: a regularizer for every parameter without its own.

    Example::

        fluid.optimizer.DecayedAdagrad(learning_rate=0.2).minimize(avg_cost)
    """

    type = "decayed_adagrad"

    def __init__(self, learning_rate, decay: float = 0.95, epsilon: float = 1.0e-6, parameter_list=None,
                 regularization: Any = None, grad_clip: Any = None, name: str | None = None) -> None:
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._decay, self._epsilon = float(decay), float(epsilon)

    def _append_optimize_op(self, block, param, grad):
        m = self._add_accumulator("moment", param)
        return block.append_op(
            "decayed_adagrad", {"Param": [param], "Grad": [grad], "Moment": [m],
                                "LearningRate": [self._param_lr(block, param)]},
            {"ParamOut": [param], "MomentOut": [m]}, {"epsilon": self._epsilon, "decay": self._decay},
            role="optimize")


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal (McMahan et al., "Ad Click Prediction", 2013): per coordinate a squared
    sum ``n`` and a linear term ``z`` (both from zero), and the parameter solved in closed
    form with L1/L2 shrinkage (see the ``ftrl`` op). Dense gradients only.

    Args:
        learning_rate: a float or a schedule's Variable.
        l1, l2: the L1 and L2 strengths of the proximal step.
        lr_power: the power of ``n`` in the per-coordinate rate (-0.5: ``1/sqrt(n)``).
        regularization: a regularizer for every parameter without its own.

    Example::

        fluid.optimizer.Ftrl(learning_rate=0.1).minimize(avg_cost)
    """

    type = "ftrl"

    def __init__(self, learning_rate, l1: float = 0.0, l2: float = 0.0, lr_power: float = -0.5,
                 parameter_list=None, regularization: Any = None, grad_clip: Any = None,
                 name: str | None = None) -> None:
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._l1, self._l2, self._lr_power = float(l1), float(l2), float(lr_power)

    def _append_optimize_op(self, block, param, grad):
        n = self._add_accumulator("squared", param)
        z = self._add_accumulator("linear", param)
        return block.append_op(
            "ftrl", {"Param": [param], "Grad": [grad], "SquaredAccumulator": [n], "LinearAccumulator": [z],
                     "LearningRate": [self._param_lr(block, param)]},
            {"ParamOut": [param], "SquaredAccumOut": [n], "LinearAccumOut": [z]},
            {"l1": self._l1, "l2": self._l2, "lr_power": self._lr_power}, role="optimize")


class LambOptimizer(AdamOptimizer):
    """LAMB (You et al., 2019) as Fluid 1.8 computes it: Adam's moments without bias
    correction, then a layer-wise trust ratio::

        r = m1 / (sqrt(m2) + epsilon) + lamb_weight_decay * p
        p -= lr * (||p|| / ||r||) * r

    Like Fluid 1.8 it makes Adam's beta-power accumulators, which the op reads by no formula
    and never advances (NOTE(fluid18-optimizers), NOTE(lamb-norms) in ops/optimizer.py).

    Args:
        learning_rate: a float or a schedule's Variable.
        lamb_weight_decay: the decoupled weight decay ``lambda``.
        beta1, beta2: decay rates of the moments.
        epsilon: added to ``sqrt(m2)``.
        regularization: a regularizer for every parameter without its own.
        exclude_from_weight_decay_fn: ``fn(param) -> bool``; True gives that parameter
            ``lamb_weight_decay = 0``.

    Example::

        fluid.optimizer.Lamb(learning_rate=0.002,
                             exclude_from_weight_decay_fn=lambda p: p.name.endswith(".b_0")).minimize(avg_cost)
    """

    type = "lamb"

    def __init__(self, learning_rate=0.001, lamb_weight_decay: float = 0.01, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-6, parameter_list=None, regularization: Any = None,
                 grad_clip: Any = None, exclude_from_weight_decay_fn=None, name: str | None = None) -> None:
        super().__init__(learning_rate, beta1, beta2, epsilon, parameter_list, regularization, grad_clip, name)
        self._weight_decay = float(lamb_weight_decay)
        self._exclude_from_weight_decay_fn = exclude_from_weight_decay_fn

    def _append_optimize_op(self, block, param, grad):
        m1 = self._add_accumulator("moment1", param)
        m2 = self._add_accumulator("moment2", param)
        b1 = self._add_accumulator("beta1_pow_acc", param, fill_value=self._beta1, shape=[1])
        b2 = self._add_accumulator("beta2_pow_acc", param, fill_value=self._beta2, shape=[1])
        excluded = self._exclude_from_weight_decay_fn is not None and self._exclude_from_weight_decay_fn(param)
        return block.append_op(
            "lamb", {"Param": [param], "Grad": [grad], "LearningRate": [self._param_lr(block, param)],
                     "Moment1": [m1], "Moment2": [m2], "Beta1Pow": [b1], "Beta2Pow": [b2]},
            {"ParamOut": [param], "Moment1Out": [m1], "Moment2Out": [m2]},
            {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon,
             "weight_decay": 0.0 if excluded else self._weight_decay}, role="optimize")


RMSProp = RMSPropOptimizer
Adamax = AdamaxOptimizer
Adadelta = AdadeltaOptimizer
DecayedAdagrad = DecayedAdagradOptimizer
Ftrl = FtrlOptimizer
Lamb = LambOptimizer


class LarsMomentumOptimizer(Optimizer):
    """Momentum with layer-wise adaptive rate scaling (LARS, You et al., 2017): per parameter
    ``local_lr = lr * lars_coeff * ||p|| / (||g|| + lars_weight_decay * ||p||)``, then
    ``v = momentum * v + local_lr * (g + lars_weight_decay * p)`` and ``p -= v`` (the
    ``lars_momentum`` op; dense gradients only). The velocity starts at zero.

    Args:
        learning_rate: a float or a schedule's Variable.
        momentum: the decay ``mu`` of the velocity.
        lars_coeff: the trust coefficient.
        lars_weight_decay: the weight decay inside the ratio and the step.
        regularization, grad_clip, parameter_list, name: as for every optimizer.

    A parameter the transpiler cuts into row blocks takes one ratio per block, as under Fluid
    1.8's transpiler (NOTE(norm-per-block) in ops/lars_dpsgd.py).

    Example::

        fluid.optimizer.LarsMomentum(learning_rate=0.001, momentum=0.9).minimize(avg_cost)
    """

    type = "lars_momentum"

    def __init__(self, learning_rate, momentum, lars_coeff: float = 0.001, lars_weight_decay: float = 0.0005,
                 parameter_list=None, regularization: Any = None, grad_clip: Any = None,
                 name: str | None = None) -> None:
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._momentum = _number("LarsMomentumOptimizer", "momentum", momentum)
        self._lars_coeff = _number("LarsMomentumOptimizer", "lars_coeff", lars_coeff)
        self._lars_weight_decay = _number("LarsMomentumOptimizer", "lars_weight_decay", lars_weight_decay)

    def _append_optimize_op(self, block, param, grad):
        v = self._add_accumulator("velocity", param)
        return block.append_op(
            "lars_momentum", {"Param": [param], "Grad": [grad], "Velocity": [v],
                              "LearningRate": [self._param_lr(block, param)]},
            {"ParamOut": [param], "VelocityOut": [v]},
            {"mu": self._momentum, "lars_coeff": self._lars_coeff, "lars_weight_decay": self._lars_weight_decay},
            role="optimize")


class DpsgdOptimizer(Optimizer):
    """Differentially private SGD (Abadi et al., "Deep Learning with Differential Privacy",
    CCS 2016) as Fluid 1.8 has it: the gradient scaled down to L2 norm ``clip`` when it is
    longer, plus one Gaussian number ``N(0, sigma²) / batch_size`` per parameter and step::

        p -= lr * (g / max(1, ||g|| / clip) + noise / batch_size)

    The noise is counter-based (NOTE(dpsgd-noise) in ops/lars_dpsgd.py): a function of the
    op's seed (``self._seed``, 0 as Fluid sets it) and the step, so runs repeat and a
    distributed run draws one process's numbers; Fluid's came from ``time(NULL)``. Dense
    gradients only. The defaults are Fluid 1.8's.

    Args:
        learning_rate: a float or a schedule's Variable.
        clip: the L2 norm the gradient is clipped to (> 0).
        batch_size: what the noise is divided by (> 0).
        sigma: the noise's standard deviation (>= 0; 0 is plain clipped SGD).
        parameter_list: the parameters to update (default: all).

    Raises:
        ValueError: ``clip`` or ``batch_size`` not positive, ``sigma`` negative.

    Example::

        fluid.optimizer.Dpsgd(learning_rate=0.01, clip=10.0, batch_size=16.0, sigma=1.0).minimize(loss)
    """

    type = "dpsgd"

    def __init__(self, learning_rate=0.001, clip: float = 0.9, batch_size: float = 0.999, sigma: float = 1e-8,
                 parameter_list=None) -> None:
        super().__init__(learning_rate, parameter_list=parameter_list)
        self._clip = _number("DpsgdOptimizer", "clip", clip, positive=True)
        self._batch_size = _number("DpsgdOptimizer", "batch_size", batch_size, positive=True)
        self._sigma = _number("DpsgdOptimizer", "sigma", sigma)
        if self._sigma < 0:
            raise ValueError(f"DpsgdOptimizer: sigma must be >= 0, got {sigma}")
        self._seed = 0  # Fluid 1.8's debugging knob, the op's seed attr

    def _append_optimize_op(self, block, param, grad):
        return block.append_op(
            "dpsgd", {"Param": [param], "Grad": [grad], "LearningRate": [self._param_lr(block, param)]},
            {"ParamOut": [param]},
            {"clip": self._clip, "batch_size": self._batch_size, "sigma": self._sigma, "seed": int(self._seed)},
            role="optimize")


def _number(cls: str, arg: str, value, positive: bool = False) -> float:
    """``value`` as a float; TypeError unless it is a number, ValueError if ``positive`` and not > 0."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{cls}: {arg} must be a number, got {value!r}")
    if positive and not value > 0:
        raise ValueError(f"{cls}: {arg} must be > 0, got {value}")
    return float(value)


LarsMomentum = LarsMomentumOptimizer
Dpsgd = DpsgdOptimizer
