"""Averages of the parameters for evaluation: ``fluid.optimizer.ExponentialMovingAverage`` and
``fluid.optimizer.ModelAverage``, with Fluid 1.8's signatures, var names and numbers.

Both keep their state in persistable vars beside the parameters, updated by ops appended to
the main program (``ema_update``, ``average_accumulates``: ops/averaging.py), and build two
small programs of their own: ``apply_program`` saves each parameter and writes its average
into it, ``restore_program`` writes the saved value back. ``apply(exe)`` is a context manager
that runs the first, and the second on leaving (``need_restore=True``).

Example::

    opt = fluid.optimizer.Adam(0.001)
    opt.minimize(avg_cost)
    ema = fluid.optimizer.ExponentialMovingAverage(0.999)
    ema.update()
    ...  # train
    with ema.apply(exe):
        exe.run(test_program, feed=..., fetch_list=[...])

NOTE(averages-placement): the update ops carry ``op.param`` (role ``optimize``), so the
transpiler runs each beside its parameter's update: on the pserver that holds the parameter
(each row block with its own share of the state), or on every trainer without pservers. The
averages then equal one process's. A parameter no optimizer updates (batch_norm's running
statistics, written by the forward pass) gets no ``op.param``: its average is kept on the
trainers, where the parameter is written (``optimizer_base.updated_parameters``). ``apply``/``restore`` run on the caller's executor and
read the averages from its scope: in one process, or on trainers in collective mode (no
pservers). With pservers the averages live on the pservers, which no program of the trainer
reads, so ``apply`` raises a RuntimeError naming the missing var.

Thread-safety: construction and ``update`` edit the default programs; build from one thread.
``apply``/``restore`` rewrite parameters in the global scope: not while another thread trains
in it.
"""
from __future__ import annotations

import contextlib
from numbers import Real

from placegroup.executor.scope import global_scope
from placegroup.ir import unique_name
from placegroup.ir.framework import Program, Variable, default_main_program
from placegroup.model.optimizer_base import Optimizer, global_state_var, updated_parameters

__all__ = ["ExponentialMovingAverage", "ModelAverage"]

EMA_STEP_COUNTER = "@EMA_STEP_COUNTER@"
EMA_DECAY = "scheduled_ema_decay_rate"


def averaged_parameters(program) -> list:
    """The parameters Fluid averages: all but those with ``do_model_average=False``."""
    return [p for p in program.global_block().all_parameters()
            if p.attrs.get("do_model_average", getattr(p, "do_model_average", None)) is not False]


def _mirror(block, var, name: str | None = None) -> str:
    """``var`` declared in ``block`` (of an apply/restore program) as persistable: Fluid's
    ``_clone_variable``, so the value stays in the scope between the two programs."""
    name = name or var.name
    block.create_var(name, shape=list(var.shape), dtype=var.dtype, persistable=True, stop_gradient=True)
    return name


class _ApplyRestore:
    """``apply``/``restore`` over the two programs a subclass builds (module docstring)."""

    apply_program: Program
    restore_program: Program
    _what = ""

    def _check_scope(self, program, verb: str) -> None:
        """RuntimeError unless every var ``program`` reads before writing is in the scope."""
        scope, written = global_scope(), set()
        for op in program.global_block().ops:
            for name in op.input_arg_names:
                if name not in written and scope.find_var(name) is None:
                    raise RuntimeError(self._missing(verb, name))
            written.update(op.output_arg_names)

    def _missing(self, verb: str, name: str) -> str:
        saved = {v: p for p, v in self._backups.items()}
        if name in saved:
            return (f"{self._what}.{verb}: {name!r}, the value of {saved[name]!r} apply() saves, is not "
                    f"in the executor's scope: call apply() (with this scope) first")
        return (f"{self._what}.{verb}: {name!r} is not in the executor's scope. Run the startup program "
                f"first. Under the DistributeTranspiler with pservers the averages live on the pservers "
                f"beside their parameters, where apply()/restore() cannot reach them: they run in one "
                f"process, or on trainers without pservers (NOTE(averages-placement) in "
                f"placegroup/runtime/averaging.py)")

    @contextlib.contextmanager
    def apply(self, executor, need_restore: bool = True):
        """Write the averages into the parameters, and back on leaving.

        Args:
            executor: the Executor whose global scope holds the parameters and averages.
            need_restore: run ``restore`` when the block ends (else call it yourself).

        Raises:
            RuntimeError: an average or parameter is not in the scope (the startup program
                was not run, or the averages live on pservers: NOTE(averages-placement)).
        """
        self._check_scope(self.apply_program, "apply")
        executor.run(self.apply_program)
        try:
            yield
        finally:
            if need_restore:
                self.restore(executor)

    def restore(self, executor) -> None:
        """Write back the parameter values ``apply`` saved.

        Raises:
            RuntimeError: ``apply`` has not run in this scope (nothing is saved), or a
                parameter is not in it.
        """
        self._check_scope(self.restore_program, "restore")
        executor.run(self.restore_program)


class ExponentialMovingAverage(_ApplyRestore):
    """Exponential moving averages of the parameters (Fluid 1.8), for evaluation::

        EMA_0 = 0;   EMA_t = decay * EMA_{t-1} + (1 - decay) * param_t

    ``apply`` writes the bias-corrected ``EMA_t / (1 - decay^t)`` into each parameter (``t``:
    the ``update`` steps run, ``@EMA_STEP_COUNTER@``). With ``thres_steps`` (a Variable,
    usually the global step) the decay is ``min(decay, (1 + thres_steps) / (10 + thres_steps))``
    each step, and the correction uses that step's decay, as in Fluid.

    NOTE(ema-apply-1.8): Fluid 1.8's apply program divides the EMA var itself
    (``assign(ema / (1 - decay_pow), output=ema)``) and then copies it into the parameter, so
    the correction stays in the average: training on after an ``apply`` continues from the
    corrected EMA, and a second ``apply`` at the same step divides again. placegroup keeps
    that (1.8's numbers); Paddle 2.x corrects a copy instead, so the two agree up to the first
    ``apply`` and differ after it.

    NOTE(ema-counter): the step counter's ``increment`` has role ``lr_sched``, not Fluid's
    forward role, so a ``clone(for_test=True)`` never advances it and with ``merge_steps`` it
    counts rounds, as the EMA's updates do.

    Args:
        decay: the decay rate, in [0, 1] (usually close to 1).
        thres_steps: None, or a Variable with one element to schedule the decay. The
            schedule (``ema_decay``) is an ``lr_sched`` op, run where the averages are
            updated; with pservers, it must read a var the pservers hold too, such as
            ``autoincreased_step_counter("@LR_DECAY_COUNTER@", begin=0)`` or a learning-rate
            schedule's output (a forward-role counter lives on the trainers only: the
            transpiler refuses the program with a PassError naming ``ema_decay``).
        name: a prefix for the average vars' names.

    Raises:
        ValueError: a decay that is not a number in [0, 1].
        TypeError: a thres_steps that is not a Variable.

    Example::

        ema = fluid.optimizer.ExponentialMovingAverage(0.999, thres_steps=global_step)
        ema.update()                      # after optimizer.minimize
        with ema.apply(exe):              # evaluate with the averages
            exe.run(test_program, feed=feed)
    """

    _what = "ExponentialMovingAverage"

    def __init__(self, decay: float = 0.999, thres_steps=None, name: str | None = None) -> None:
        if isinstance(decay, bool) or not isinstance(decay, Real) or not 0.0 <= decay <= 1.0:
            raise ValueError(f"ExponentialMovingAverage: decay must be a number in [0, 1], got {decay!r}")
        if thres_steps is not None and not isinstance(thres_steps, Variable):
            raise TypeError(f"ExponentialMovingAverage: thres_steps must be a Variable or None, got "
                            f"{type(thres_steps).__name__}")
        self._decay, self._thres_steps, self._name = float(decay), thres_steps, name or ""
        self._step_counter_name = EMA_STEP_COUNTER
        self._decay_var = self._get_ema_decay()
        main = default_main_program()
        self._params = averaged_parameters(main)
        self._ema_vars = {p.name: global_state_var(unique_name.generate(f"{self._name}{p.name}_ema"), p.shape,
                                                   p.dtype, 0.0, accumulator_of=p.name) for p in self._params}
        self._backups = {p.name: unique_name.generate(f"{self._name}{p.name}.ema_tmp") for p in self._params}
        global_state_var(EMA_STEP_COUNTER, [1], "int64", 0.0)  # read by apply even before update()
        self.apply_program, self.restore_program = Program(), Program()
        self._build_apply()
        self._build_restore()

    def _get_ema_decay(self) -> Variable:
        """The decay var (Fluid's ``scheduled_ema_decay_rate``), scheduled by ``ema_decay``."""
        main = default_main_program()
        name = EMA_DECAY if not main.global_block().has_var(EMA_DECAY) else unique_name.generate(EMA_DECAY)
        var = global_state_var(name, [1], "float32", self._decay)
        if self._thres_steps is not None:
            main.global_block().append_op("ema_decay", {"Step": [self._thres_steps]}, {"Out": [var]},
                                          {"decay": self._decay}, role="lr_sched")
        return var

    def _build_apply(self) -> None:
        block = self.apply_program.global_block()
        decay, step = _mirror(block, self._decay_var), _mirror(block, self._counter())
        for p in self._params:
            param, ema = _mirror(block, p), _mirror(block, self._ema_vars[p.name])
            backup = _mirror(block, p, self._backups[p.name])
            block.append_op("assign", {"X": [param]}, {"Out": [backup]})
            # NOTE(ema-apply-1.8): the correction is written into the average itself
            block.append_op("ema_debias", {"EMA": [ema], "Decay": [decay], "Step": [step]}, {"Out": [ema]})
            block.append_op("assign", {"X": [ema]}, {"Out": [param]})

    def _build_restore(self) -> None:
        block = self.restore_program.global_block()
        for p in self._params:
            backup = _mirror(block, p, self._backups[p.name])
            block.append_op("assign", {"X": [backup]}, {"Out": [_mirror(block, p)]})

    def _counter(self) -> Variable:
        return default_main_program().global_block().var(EMA_STEP_COUNTER)

    def update(self) -> None:
        """Append the averages' update to the default main program: the step counter's
        increment (first, NOTE(ema-counter)) and one ``ema_update`` per parameter (at the end:
        call this after ``optimizer.minimize``). Call it once, in the training program."""
        block = default_main_program().global_block()
        counter, updated = self._counter(), updated_parameters(block)
        if not any(op.type == "increment" and op.output("Out") == [counter.name] for op in block.ops):
            block.prepend_op("increment", {"X": [counter]}, {"Out": [counter]}, {"step": 1.0}, role="lr_sched")
        for p in self._params:
            ema = self._ema_vars[p.name]
            op = block.append_op("ema_update", {"Param": [p], "EMA": [ema], "Decay": [self._decay_var]},
                                 {"EMAOut": [ema]}, role="optimize")
            op.param = p.name if p.name in updated else None  # NOTE(averages-placement)


class ModelAverage(Optimizer, _ApplyRestore):
    """The average of each parameter over a sliding window of its last updates (Fluid 1.8),
    for evaluation. Made after ``optimizer.minimize``, it appends one ``average_accumulates``
    op per parameter (ops/averaging.py): ``sum_1 += param`` each step, folded into ``sum_2``
    every 16384 updates, and the window restarts (``sum_3`` keeps the last one) once
    ``num_accumulates >= min_average_window`` and ``>= min(max_average_window,
    num_updates * average_window_rate)``. ``apply`` writes
    ``(sum_1 + sum_2 + sum_3) / (num_accumulates + old_num_accumulates)`` into each parameter.

    Args:
        average_window_rate: the window's length relative to the updates so far (> 0).
        min_average_window, max_average_window: bounds of the window, in updates
            (0 <= min <= max).
        regularization: accepted as Fluid's (ModelAverage is an Optimizer there); unused.
        name: accepted as Fluid's; unused.

    Raises:
        ValueError: a rate that is not a number > 0; ``min_average_window > max_average_window``.
        TypeError: a window bound that is not an int >= 0.

    Example::

        fluid.optimizer.Momentum(0.2, momentum=0.1).minimize(loss)
        model_average = fluid.optimizer.ModelAverage(0.15, min_average_window=10000,
                                                     max_average_window=12500)
        ...  # train
        with model_average.apply(exe):
            exe.run(test_program, feed=feed)
    """

    type = "average_accumulates"
    _what = "ModelAverage"

    def __init__(self, average_window_rate: float, min_average_window: int = 10000,
                 max_average_window: int = 10000, regularization=None, name: str | None = None) -> None:
        if isinstance(average_window_rate, bool) or not isinstance(average_window_rate, Real) \
                or not average_window_rate > 0:
            raise ValueError(f"ModelAverage: average_window_rate must be a number > 0, got {average_window_rate!r}")
        for arg, v in (("min_average_window", min_average_window), ("max_average_window", max_average_window)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise TypeError(f"ModelAverage: {arg} must be an int >= 0, got {v!r}")
        if min_average_window > max_average_window:
            raise ValueError(f"ModelAverage: min_average_window {min_average_window} exceeds "
                             f"max_average_window {max_average_window}")
        super().__init__(0.0, regularization=regularization, name=name)
        self.average_window = float(average_window_rate)
        self.min_average_window, self.max_average_window = min_average_window, max_average_window
        main = default_main_program()
        self._params = averaged_parameters(main)
        self._backups = {p.name: unique_name.generate(f"{p.name}.tmp") for p in self._params}
        updated = updated_parameters(main.global_block())
        for p in self._params:
            self._append_average_accumulate_op(p, p.name in updated)
        self.apply_program, self.restore_program = Program(), Program()
        for p in self._params:
            self._add_average_apply_op(self.apply_program.global_block(), p)
            backup = _mirror(self.restore_program.global_block(), p, self._backups[p.name])
            self.restore_program.global_block().append_op(
                "assign", {"X": [backup]}, {"Out": [_mirror(self.restore_program.global_block(), p)]})

    def _append_average_accumulate_op(self, p, updated: bool) -> None:
        block = p.block.program.global_block()
        sums = [self._add_accumulator(s, p) for s in ("sum_1", "sum_2", "sum_3")]
        counts = [self._add_accumulator(c, p, dtype="int64", shape=[1])
                  for c in ("num_accumulates", "old_num_accumulates", "num_updates")]
        names = ("sum_1", "sum_2", "sum_3", "num_accumulates", "old_num_accumulates", "num_updates")
        op = block.append_op(
            "average_accumulates", {"param": [p], **{f"in_{n}": [v] for n, v in zip(names, sums + counts)}},
            {f"out_{n}": [v] for n, v in zip(names, sums + counts)},
            {"average_window": self.average_window, "min_average_window": self.min_average_window,
             "max_average_window": self.max_average_window}, role="optimize")
        op.param = p.name if updated else None  # NOTE(averages-placement)

    def _add_average_apply_op(self, block, p) -> None:
        """backup = param; param = (sum_1 + sum_2 + sum_3) / float(num_accumulates +
        old_num_accumulates), by Fluid 1.8's sum, cast and elementwise_div ops."""
        acc = {n: _mirror(block, self._accumulators[(n, p.name)])
               for n in ("sum_1", "sum_2", "sum_3", "num_accumulates", "old_num_accumulates")}
        param = _mirror(block, p)
        block.append_op("assign", {"X": [param]}, {"Out": [_mirror(block, p, self._backups[p.name])]})
        count = block.create_var(unique_name.generate("model_average.count"), shape=[1], dtype="int64")
        total = block.create_var(unique_name.generate("model_average.sum"), shape=list(p.shape), dtype=p.dtype)
        count_f = block.create_var(unique_name.generate("model_average.count"), shape=[1], dtype=p.dtype)
        block.append_op("sum", {"X": [acc["num_accumulates"], acc["old_num_accumulates"]]}, {"Out": [count]})
        block.append_op("sum", {"X": [acc["sum_1"], acc["sum_2"], acc["sum_3"]]}, {"Out": [total]})
        block.append_op("cast", {"X": [count]}, {"Out": [count_f]}, {"out_dtype": p.dtype})
        block.append_op("elementwise_div", {"X": [total], "Y": [count_f]}, {"Out": [param]})
