"""Optimizers that wrap another: ``fluid.optimizer.LookaheadOptimizer`` and
``RecomputeOptimizer``, with Fluid 1.8's signatures and numbers.

Fluid 1.8's other two wrappers, ``PipelineOptimizer`` (program sections on several devices)
and ``DGCMomentumOptimizer`` (deep gradient compression of the all-reduce between GPUs), are
multi-device strategies placegroup does not have; they raise ``NotImplementedInPlacegroup``.

Thread-safety: ``minimize`` edits the programs it is given; build programs from one thread.
"""
from __future__ import annotations

import warnings
from numbers import Real

from placegroup.ir.framework import Variable, default_startup_program
from placegroup.model.optimizer_base import global_state_var, updated_parameters

__all__ = ["LookaheadOptimizer", "RecomputeNotice", "RecomputeOptimizer"]


class LookaheadOptimizer:
    """Lookahead (Zhang et al., "Lookahead Optimizer: k steps forward, 1 step back", 2019) as
    Fluid 1.8 builds it: ``inner_optimizer`` updates the (fast) parameters every step; every
    ``k``-th step the slow copy moves towards them and they jump to it::

        slow = alpha * fast + (1 - alpha) * slow;   fast = slow

    The slow copies (``<param>@SLOW``) start at the parameters' initial values. The step
    counter ``lookahead_step`` (int32, +1 per step by an ``increment`` of role ``lr_sched``)
    and ``lookahead_k``, ``lookahead_alpha`` are persistable vars, as in Fluid; the test and
    the update of each parameter is one ``lookahead`` op (ops/averaging.py) that runs beside
    the parameter's own update, on its pserver when there are pservers (each one counts the
    steps, as it counts a schedule's).

    NOTE(lookahead-slow-init): Fluid 1.8 starts the slow copy with an ``assign`` from the
    parameter at the end of the startup program. Here the slow copy gets a copy of the
    parameter's own initializer ops instead: the same values (initializers are seeded per
    var name, NOTE(counter-rng)), and, unlike an assign from the whole parameter, an op the
    slice pass can cut into row blocks. A parameter set by hand after the startup program
    leaves the slow copy at the initial value in both.

    Args:
        inner_optimizer: the optimizer of the fast parameters (an ``Optimizer``).
        alpha: the slow weights' step, in [0, 1].
        k: sync every ``k`` steps (an int > 0).

    Raises:
        ValueError: no inner optimizer, alpha outside [0, 1], k not a positive int.

    Example::

        sgd = fluid.optimizer.SGD(learning_rate=0.01)
        fluid.optimizer.LookaheadOptimizer(sgd, alpha=0.5, k=5).minimize(loss)
    """

    def __init__(self, inner_optimizer, alpha: float = 0.5, k: int = 5) -> None:
        if inner_optimizer is None:
            raise ValueError("LookaheadOptimizer: inner_optimizer can not be None")
        if isinstance(alpha, bool) or not isinstance(alpha, Real) or not 0.0 <= alpha <= 1.0:
            raise ValueError(f"LookaheadOptimizer: alpha must be a number in [0, 1], got {alpha!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise ValueError(f"LookaheadOptimizer: k must be a positive integer, got {k!r}")
        self.inner_optimizer, self.alpha, self.k = inner_optimizer, float(alpha), k
        self.type = "lookahead"

    def minimize(self, loss, startup_program=None):
        """The inner optimizer's ``minimize``, then Lookahead's ops for every parameter.

        Returns:
            What the inner optimizer's ``minimize`` returns.
        """
        out = self.inner_optimizer.minimize(loss, startup_program=startup_program)
        startup = startup_program or default_startup_program()
        main = loss.block.program
        block = main.global_block()
        params, updated = block.all_parameters(), updated_parameters(block)
        k = global_state_var("lookahead_k", [1], "int32", self.k, main, startup)
        alpha = global_state_var("lookahead_alpha", [1], "float32", self.alpha, main, startup)
        step = global_state_var("lookahead_step", [1], "int32", 0, main, startup)
        block.append_op("increment", {"X": [step]}, {"Out": [step]}, {"step": 1.0}, role="lr_sched")
        for p in params:
            slow = self._slow_var(p, block, startup.global_block())
            op = block.append_op("lookahead", {"Param": [p], "Slow": [slow], "Step": [step], "K": [k],
                                               "Alpha": [alpha]},
                                 {"ParamOut": [p], "SlowOut": [slow]}, role="optimize")
            op.param = p.name if p.name in updated else None  # NOTE(averages-placement)
        return out

    @staticmethod
    def _slow_var(p, block, sblock):
        """``<p>@SLOW`` in both programs, initialized as ``p`` is (NOTE(lookahead-slow-init))."""
        name = p.name + "@SLOW"
        slow = block.create_var(name, shape=list(p.shape), dtype=p.dtype, persistable=True, stop_gradient=True,
                                attrs={"accumulator_of": p.name})
        inits = [op for op in sblock.ops if p.name in op.output_arg_names]
        if not inits:
            raise ValueError(f"LookaheadOptimizer: parameter {p.name!r} has no initializer in the startup "
                             f"program, so its slow copy {name!r} has nothing to start from")
        sblock.create_var(name, shape=list(p.shape), dtype=p.dtype, persistable=True)
        for op in inits:
            sblock.append_op(op.type, op.inputs, {s: [name if n == p.name else n for n in names]
                                                  for s, names in op.outputs.items()}, dict(op.attrs), role=op.role)
        return slow


class RecomputeNotice(UserWarning):
    """RecomputeOptimizer's checkpoints change nothing in placegroup (said once per process)."""


_noticed = False


class RecomputeOptimizer:
    """Fluid 1.8's recomputation wrapper: ``_set_checkpoints([vars])``, then ``minimize``.

    Recomputation trades compute for memory: Fluid drops the activations between checkpoints
    after the forward pass and recomputes them in the backward pass. placegroup's executor
    keeps what the backward reads, so the wrapped optimizer runs unchanged, with the same
    numbers, and a ``RecomputeNotice`` says once per process that the checkpoints do not change
    memory use.

    Args:
        optimizer: the optimizer to run (an ``Optimizer``).

    Raises:
        ValueError: ``minimize`` before ``_set_checkpoints``.
        TypeError: checkpoints that are not a list of Variables; a loss that is not a Variable.

    Example::

        opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.Adam(learning_rate=0.01))
        opt._set_checkpoints([fc_1, pred])
        opt.minimize(cost)
    """

    def __init__(self, optimizer) -> None:
        self._optimizer = optimizer
        self._checkpoints = None
        self._learning_rate = optimizer._learning_rate

    def _set_checkpoints(self, checkpoints) -> None:
        if not isinstance(checkpoints, (list, tuple)) or not all(isinstance(c, (Variable, str)) for c in checkpoints):
            raise TypeError(f"RecomputeOptimizer: checkpoints must be a list of Variables, got {checkpoints!r}")
        self._checkpoints = list(checkpoints)

    def load(self, stat_dict):
        """Not supported, as in Fluid 1.8."""
        raise NotImplementedError("load function is not supported by Recompute Optimizer for now")

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, callbacks=None):
        """The wrapped optimizer's backward (checkpoints change nothing: the class docstring)."""
        _notice()
        return self._optimizer.backward(loss, startup_program, parameter_list, no_grad_set, callbacks)

    def apply_gradients(self, params_grads) -> list:
        return self._optimizer.apply_gradients(params_grads)

    def apply_optimize(self, loss, startup_program, params_grads) -> list:
        return self._optimizer.apply_optimize(loss, startup_program, params_grads)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """The wrapped optimizer's ``minimize``: ``(optimize_ops, params_grads)``."""
        if not isinstance(loss, Variable):
            raise TypeError(f"RecomputeOptimizer.minimize: the loss must be a Variable, got {type(loss).__name__}")
        if self._checkpoints is None:
            raise ValueError("RecomputeOptimizer.minimize: call _set_checkpoints([...]) first")
        _notice()
        return self._optimizer.minimize(loss, startup_program, parameter_list, no_grad_set)


def _notice() -> None:
    global _noticed
    if not _noticed:
        _noticed = True
        warnings.warn("RecomputeOptimizer: checkpoints do not change memory use in placegroup; the wrapped "
                      "optimizer runs unchanged (shown once per process)", RecomputeNotice, stacklevel=3)
