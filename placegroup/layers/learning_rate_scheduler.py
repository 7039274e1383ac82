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
from placegroup.model.initializer import ConstantInitializer
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers.tensor import cast

__all__ = ["piecewise_decay", "exponential_decay", "natural_exp_decay", "inverse_time_decay",
           "polynomial_decay", "cosine_decay", "noam_decay", "linear_lr_warmup", "autoincreased_step_counter"]

LR_DECAY_COUNTER = "@LR_DECAY_COUNTER@"


def autoincreased_step_counter(counter_name=None, begin: int = 1, step: int = 1) -> Variable:
    """A persistable int64 [1] counter that grows by ``step`` every run of the main program
    (Fluid's; default name ``@STEP_COUNTER@``).

    As in Fluid, the startup program sets it to ``begin - 1`` and an ``increment`` op placed
    first in the main program adds ``step`` before anything reads it (NOTE(lr-counter)), so the
    first run reads ``begin - 1 + step``: ``begin`` for the default step of 1. Asking again
    for a name that exists returns that counter unchanged (its ``begin`` and ``step`` stay the
    first caller's). The learning-rate schedules use the one named ``@LR_DECAY_COUNTER@``, whose
    increment is an ``lr_sched`` op (it runs where the schedules run); any other counter's
    increment runs with the forward ops, on every trainer.

    Args:
        counter_name: the counter's var name (default ``@STEP_COUNTER@``).
        begin: the first value (for ``step`` 1).
        step: what each run adds.

    Returns:
        The counter Variable (int64, shape [1], persistable, no gradient).

    Example::

        global_step = fluid.layers.autoincreased_step_counter(counter_name="@LR_DECAY_COUNTER@", begin=0)
    """
    name = counter_name or "@STEP_COUNTER@"
    helper = LayerHelper("global_step_counter")
    block = helper.main_program.global_block()
    if block.has_var(name):
        return block.var(name)
    counter = block.create_var(name, shape=[1], dtype="int64", persistable=True, stop_gradient=True)
    helper.set_variable_initializer(counter, ConstantInitializer(float(begin - 1)))
    block.prepend_op("increment", {"X": [counter]}, {"Out": [counter]}, {"step": float(step)},
                     role="lr_sched" if name == LR_DECAY_COUNTER else "forward")
    return counter


def _decay_step_counter(begin: int = 0) -> Variable:
    """The default main program's decay step counter (made on first use, NOTE(lr-counter)) as
    float32, as Fluid's gives it to the schedules written by hand (``step / warmup_steps``)."""
    return cast(autoincreased_step_counter(LR_DECAY_COUNTER, begin=begin, step=1), "float32")


def _rate(value, what: str, fn: str) -> float:
    if isinstance(value, Variable) or not isinstance(value, Real):
        raise TypeError(f"{fn}: {what} must be a number, got {value!r} (a Variable {what} is not "
                        f"supported by the fused schedule ops)")
    return float(value)


def _schedule(op_type: str, attrs: dict, begin: int = 0, inputs=None, dtype: str = "float32") -> Variable:
    """Append ``op_type(Step=counter, **inputs) -> lr`` and return the lr var ([1])."""
    counter = autoincreased_step_counter(LR_DECAY_COUNTER, begin=begin, step=1)
    block = LayerHelper(op_type).main_program.global_block()
    lr = block.create_var(unique_name.generate("learning_rate"), shape=[1], dtype=dtype, stop_gradient=True)
    block.append_op(op_type, {"Step": [counter], **(inputs or {})}, {"Out": [lr]}, attrs, role="lr_sched")
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


def noam_decay(d_model, warmup_steps, learning_rate=1.0) -> Variable:
    """The Transformer's schedule:
    ``learning_rate * d_model^-0.5 * min(step^-0.5, warmup_steps^-1.5 * step)``.

    Fluid counts this schedule's steps from 1 (its counter begins at 1 when noam_decay makes
    it); a counter another schedule made first begins at 0, and step 0 gives inf, as in Fluid.

    Args:
        d_model: the model width (a number here; Fluid also takes a Variable).
        warmup_steps: steps of rising rate.
        learning_rate: a scale on the whole schedule.

    Returns:
        The learning-rate Variable (float32, shape [1]).

    Example::

        lr = fluid.layers.noam_decay(d_model=512, warmup_steps=4000)
    """
    fn = "noam_decay"
    attrs = {"d_model": _rate(d_model, "d_model", fn), "warmup_steps": _rate(warmup_steps, "warmup_steps", fn),
             "learning_rate": _rate(learning_rate, "learning_rate", fn)}
    return _schedule(fn, attrs, begin=1)


def linear_lr_warmup(learning_rate, warmup_steps, start_lr, end_lr) -> Variable:
    """Linear warmup before another schedule: ``start_lr + (end_lr - start_lr) * step /
    warmup_steps`` while ``step < warmup_steps``, then ``learning_rate``.

    Args:
        learning_rate: a number, or a [1] Variable (another schedule's output).
        warmup_steps: how many steps the warmup lasts (> 0).
        start_lr, end_lr: the warmup's first rate and the rate it heads to.

    Returns:
        The learning-rate Variable ([1], ``learning_rate``'s dtype, float32 for a number).

    Raises:
        ValueError: for warmup_steps <= 0.

    Example::

        base = fluid.layers.piecewise_decay([100, 200], [0.1, 0.01, 0.001])
        lr = fluid.layers.linear_lr_warmup(base, warmup_steps=50, start_lr=1. / 3., end_lr=0.1)
    """
    fn = "linear_lr_warmup"
    attrs = {"warmup_steps": _steps(warmup_steps, fn, "warmup_steps"), "start_lr": _rate(start_lr, "start_lr", fn),
             "end_lr": _rate(end_lr, "end_lr", fn)}
    if isinstance(learning_rate, Variable):
        return _schedule(fn, attrs, inputs={"LearningRate": [learning_rate]}, dtype=learning_rate.dtype)
    return _schedule(fn, {**attrs, "learning_rate": _rate(learning_rate, "learning_rate", fn)})
