"""Learning-rate schedules as ops in the program (the placement pass moves them).

Each function appends one fused schedule op (``ops/lr_schedule.py``, role ``lr_sched``) that
reads the program's decay step counter and returns the learning-rate var to hand to an
optimizer, as in Fluid 1.x::

    lr = fluid.layers.piecewise_decay(boundaries=[3, 6, 9], values=[0.1, 0.2, 0.3, 0.4])
    fluid.optimizer.Momentum(learning_rate=lr, momentum=0.9).minimize(avg_cost)

NOTE(lr-counter): the step counter is the persistable int64 var ``@LR_DECAY_COUNTER@``. The
startup program sets it to -1 and an ``increment`` op (role ``lr_sched``), placed first in the
main program, adds 1 before anything reads it, so the first ``exe.run`` sees step 0, the
second step 1, and so on (Fluid's ``autoincreased_step_counter(begin=0)``). One counter serves
every schedule in a program. That is the same step Paddle 3's ``paddle.optimizer.lr``
schedulers give (``last_epoch`` is 0 on the first run, +1 per ``scheduler.step()``), so
``piecewise_decay([3, 6, 9], [a, b, c, d])`` is ``a`` on steps 0-2, ``b`` on 3-5, ``c`` on
6-8 and ``d`` from step 9 on, in both.

Thread-safety: like every layer function, builds the default programs; not for concurrent use.
"""
from __future__ import annotations

from numbers import Real

from placegroup.ir import unique_name
from placegroup.ir.framework import Variable
from placegroup.initializer import ConstantInitializer
from placegroup.layer_helper import LayerHelper

__all__ = ["piecewise_decay", "exponential_decay", "natural_exp_decay", "inverse_time_decay",
           "polynomial_decay", "cosine_decay"]

LR_DECAY_COUNTER = "@LR_DECAY_COUNTER@"


def _decay_step_counter() -> Variable:
    """The default main program's decay step counter, made on first use (NOTE(lr-counter))."""
    helper = LayerHelper("lr_decay_counter")
    block = helper.main_program.global_block()
    if block.has_var(LR_DECAY_COUNTER):
        return block.var(LR_DECAY_COUNTER)
    counter = block.create_var(LR_DECAY_COUNTER, shape=[1], dtype="int64", persistable=True,
                               stop_gradient=True)
    helper.set_variable_initializer(counter, ConstantInitializer(-1.0))
    block.prepend_op("increment", {"X": [counter]}, {"Out": [counter]}, {"step": 1.0}, role="lr_sched")
    return counter


def _rate(value, what: str, fn: str) -> float:
    if isinstance(value, Variable) or not isinstance(value, Real):
        raise TypeError(f"{fn}: {what} must be a number, got {value!r} (a Variable {what} is not "
                        f"supported by the fused schedule ops)")
    return float(value)


def _schedule(op_type: str, attrs: dict) -> Variable:
    """Append ``op_type(Step=counter) -> lr`` and return the lr var (float32 [1])."""
    counter = _decay_step_counter()
    block = LayerHelper(op_type).main_program.global_block()
    lr = block.create_var(unique_name.generate("learning_rate"), shape=[1], dtype="float32",
                          stop_gradient=True)
    block.append_op(op_type, {"Step": [counter]}, {"Out": [lr]}, attrs, role="lr_sched")
    return lr


def _steps(value, fn: str, what: str = "decay_steps"):
    if isinstance(value, bool) or not isinstance(value, Real) or value <= 0:
        raise ValueError(f"{fn}: {what} must be a positive number, got {value!r}")
    return value


def piecewise_decay(boundaries, values) -> Variable:
    """A step function of the global step.

    Args:
        boundaries: increasing step numbers where the rate changes.
        values: ``len(boundaries) + 1`` rates: ``values[i]`` while ``step < boundaries[i]``,
            ``values[-1]`` after the last boundary.

    Returns:
        The learning-rate Variable (float32, shape [1]).

    Raises:
        ValueError: on a length mismatch or boundaries that do not increase.

    Example::

        lr = fluid.layers.piecewise_decay([3, 6, 9], [0.1, 0.2, 0.3, 0.4])  # 0.1 on steps 0-2
    """
    boundaries, values = list(boundaries), [float(v) for v in values]
    if len(values) != len(boundaries) + 1:
        raise ValueError(f"piecewise_decay: values needs len(boundaries) + 1 = {len(boundaries) + 1} "
                         f"entries, got {len(values)} (boundaries={boundaries}, values={values})")
    if any(a >= b for a, b in zip(boundaries, boundaries[1:])):
        raise ValueError(f"piecewise_decay: boundaries must increase, got {boundaries}")
    return _schedule("piecewise_decay", {"boundaries": boundaries, "values": values})


def _decay(op_type: str, learning_rate, decay_steps, decay_rate, staircase: bool) -> Variable:
    return _schedule(op_type, {"learning_rate": _rate(learning_rate, "learning_rate", op_type),
                               "decay_steps": _steps(decay_steps, op_type),
                               "decay_rate": _rate(decay_rate, "decay_rate", op_type),
                               "staircase": bool(staircase)})


def exponential_decay(learning_rate, decay_steps, decay_rate, staircase: bool = False) -> Variable:
    """``learning_rate * decay_rate ^ (step / decay_steps)``; the exponent is floored when
    ``staircase``.

    Example::

        lr = fluid.layers.exponential_decay(0.1, decay_steps=100, decay_rate=0.5, staircase=True)
    """
    return _decay("exponential_decay", learning_rate, decay_steps, decay_rate, staircase)


def natural_exp_decay(learning_rate, decay_steps, decay_rate, staircase: bool = False) -> Variable:
    """``learning_rate * exp(-decay_rate * step / decay_steps)``; ``step / decay_steps`` is
    floored when ``staircase``.

    Example::

        lr = fluid.layers.natural_exp_decay(0.1, decay_steps=100, decay_rate=0.5)
    """
    return _decay("natural_exp_decay", learning_rate, decay_steps, decay_rate, staircase)


def inverse_time_decay(learning_rate, decay_steps, decay_rate, staircase: bool = False) -> Variable:
    """``learning_rate / (1 + decay_rate * step / decay_steps)``; ``step / decay_steps`` is
    floored when ``staircase``.

    Example::

        lr = fluid.layers.inverse_time_decay(0.1, decay_steps=100, decay_rate=0.5)
    """
    return _decay("inverse_time_decay", learning_rate, decay_steps, decay_rate, staircase)


def polynomial_decay(learning_rate, decay_steps, end_learning_rate: float = 0.0001,
                     power: float = 1.0, cycle: bool = False) -> Variable:
    """``(learning_rate - end) * (1 - min(step, decay_steps) / decay_steps) ^ power + end``.

    With ``cycle``, instead of stopping at ``decay_steps`` the period grows to
    ``decay_steps * ceil(step / decay_steps)`` (at least one period), as in Fluid.

    Example::

        lr = fluid.layers.polynomial_decay(0.1, decay_steps=1000, end_learning_rate=0.001)
    """
    fn = "polynomial_decay"
    return _schedule(fn, {"learning_rate": _rate(learning_rate, "learning_rate", fn),
                          "decay_steps": _steps(decay_steps, fn),
                          "end_learning_rate": _rate(end_learning_rate, "end_learning_rate", fn),
                          "power": _rate(power, "power", fn), "cycle": bool(cycle)})


def cosine_decay(learning_rate, step_each_epoch: int, epochs: int) -> Variable:
    """``learning_rate * (cos(epoch * pi / epochs) + 1) / 2`` with
    ``epoch = floor(step / step_each_epoch)``.

    Example::

        lr = fluid.layers.cosine_decay(0.1, step_each_epoch=100, epochs=120)
    """
    fn = "cosine_decay"
    return _schedule(fn, {"learning_rate": _rate(learning_rate, "learning_rate", fn),
                          "step_each_epoch": _steps(step_each_epoch, fn, "step_each_epoch"),
                          "epochs": _steps(epochs, fn, "epochs")})
