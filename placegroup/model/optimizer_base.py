"""The optimizer base class: learning rate, accumulators, and the ``minimize`` pipeline
(backward -> clip -> regularization -> one update op per parameter).

Subclasses (placegroup/model/optimizer.py) set ``type`` and implement ``_append_optimize_op``;
``ModelAverage`` (placegroup/runtime/averaging.py) uses the accumulators only. Everything here is
re-exported from ``placegroup.optimizer`` (``fluid.optimizer.Optimizer``).

Thread-safety: ``minimize`` edits the programs it is given; build programs from one thread.
"""
from __future__ import annotations

import dataclasses
import warnings
from numbers import Real
from typing import Any

from placegroup.model.backward import append_backward
from placegroup.model.clip import clip_gradients, error_clip_callback
from placegroup.model.initializer import ConstantInitializer
from placegroup.ir import unique_name
from placegroup.ir.framework import Variable, default_main_program, default_startup_program
from placegroup.ir.variable import DYNAMIC_TABLE
from placegroup.model.regularizer import append_regularization_ops
from placegroup.util.dynamic_table import ShowClickEntry, TableConfig

__all__ = ["Optimizer", "global_state_var", "updated_parameters"]


class Optimizer:
    """Base class of the optimizers (Fluid 1.8's ``fluid.optimizer.Optimizer``).

    Subclasses set ``type`` and implement ``_append_optimize_op(block, param, grad)``, which
    appends the update of one parameter; ``apply_gradients`` marks every op it appends with
    ``op.param`` so the transpiler moves the update with its parameter.

    Args:
        learning_rate: a float (made a persistable ``learning_rate_<n>`` var) or a Variable
            (a schedule's output).
        regularization: a regularizer for every parameter without its own.
        name: accepted as Fluid's.
        grad_clip: a ``fluid.clip`` gradient clip (placegroup/model/clip.py).
        parameter_list: the parameters to update (default: all trainable ones).

    Raises:
        TypeError: a learning rate that is neither a number nor a Variable.
    """

    type = ""

    def __init__(self, learning_rate: float | Variable, regularization: Any = None,
                 name: str | None = None, grad_clip: Any = None, parameter_list=None) -> None:
        if not isinstance(learning_rate, (float, int, Variable)):
            raise TypeError(f"learning_rate must be a float or a Variable, got {type(learning_rate)}")
        self._learning_rate = learning_rate
        self.regularization = regularization
        self._grad_clip = grad_clip
        self._parameter_list = list(parameter_list) if parameter_list is not None else None
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

    # NOTE(table-optimizer): a table keyed by raw ids (sparse_embedding) keeps each row's
    # optimizer state beside the row, so its update is one op, dynamic_table_update, whatever the
    # optimizer; the optimizer's kind and hyperparameters go into the table's config in the
    # startup program here, where they are first known. SGD, Adagrad and Adam (lazy, per-row beta
    # powers) are the ones a table has.
    _TABLE_OPTIMIZERS = {"sgd": (), "adagrad": (("epsilon", "_epsilon"), ("initial_accumulator", "_initial_accumulator_value")),
                         "adam": (("beta1", "_beta1"), ("beta2", "_beta2"), ("epsilon", "_epsilon"))}

    def _append_table_update(self, block, param, grad):
        kind = getattr(self, "type", None)
        if kind not in self._TABLE_OPTIMIZERS:
            raise ValueError(f"{type(self).__name__}: the table {param.name!r} (sparse_embedding) keeps its optimizer "
                             f"state per row, which placegroup has for SGD, Adagrad and Adam only")
        sblock = (self._startup or default_startup_program()).global_block()
        made = [op for op in sblock.ops if op.type == "dynamic_table" and param.name in op.output_arg_names]
        if not made:
            raise ValueError(f"{type(self).__name__}: no startup op makes the table {param.name!r}; minimize with "
                             f"the startup program its sparse_embedding was built in")
        lr = self._param_lr(block, param)
        cfg = TableConfig.from_json(made[0].attrs["config"])
        hyper = {field: getattr(self, attr) for field, attr in self._TABLE_OPTIMIZERS[kind]}
        lr0 = self._learning_rate if isinstance(self._learning_rate, Real) else cfg.lr
        made[0].attrs["config"] = param.attrs["table_config"] = dataclasses.replace(
            cfg, optimizer=kind, lr=float(lr0), **hyper).to_json()
        if isinstance(cfg.entry, ShowClickEntry):
            _wire_show_click(block, param.name, cfg.entry)
        return block.append_op("dynamic_table_update", {"Param": [param], "Grad": [grad], "LearningRate": [lr]},
                               {"ParamOut": [param]}, {"optimizer": kind}, role="optimize")

    # -- the public entry points -------------------------------------------------------------
    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, callbacks=None):
        # as Fluid 1.8: error clips (var.error_clip) apply on every minimize
        return append_backward(loss, parameter_list, no_grad_set,
                               callbacks if callbacks is not None else [error_clip_callback])

    def apply_gradients(self, params_grads) -> list:
        ops = []
        for p, g in params_grads:
            if p.trainable:
                block = p.block.program.global_block()
                first = len(block.ops)
                if p.type == DYNAMIC_TABLE:
                    ops.append(self._append_table_update(block, p, g))
                else:
                    ops.append(self._append_optimize_op(block, p, g))
                for op in block.ops[first:]:  # the update op and its helpers (a scaled lr)
                    op.param = p.name
        return ops

    def apply_optimize(self, loss, startup_program, params_grads) -> list:
        """Clip, regularize and apply ``params_grads`` (Fluid 1.8's order: clip ->
        regularization -> update); returns the update ops. ``minimize`` is ``backward`` then
        this; a wrapper (``RecomputeOptimizer``) may call the two halves itself."""
        return self._apply_optimize(loss, startup_program, params_grads)[0]

    def _apply_optimize(self, loss, startup_program, params_grads) -> tuple[list, list]:
        self._startup = startup_program or self._startup or default_startup_program()
        block = loss.block.program.global_block()
        first = len(block.ops)
        params_grads = clip_gradients(params_grads, self._grad_clip)
        clipped = len(block.ops) > first
        if self.regularization is not None or any(p.regularizer for p, _ in params_grads):
            params_grads = append_regularization_ops(params_grads, self.regularization, on_update=clipped)
        return self.apply_gradients(params_grads), params_grads

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """Append backward and optimizer ops for ``loss``.

        Returns:
            ``(optimize_ops, params_grads)`` as in Fluid (the gradients the updates read).
        """
        self._startup = startup_program or default_startup_program()
        params_grads = self.backward(loss, self._startup, parameter_list or self._parameter_list, no_grad_set)
        return self._apply_optimize(loss, self._startup, params_grads)


def _wire_show_click(block, table: str, entry: ShowClickEntry) -> None:
    """Make the gradients of ``table``'s lookups read the show and click vars ``entry`` names
    (NOTE(sighting-weights) in ops/dynamic.py); here, once the program is whole, since Paddle's
    programs may define those vars after the lookup. A program without them (Paddle's own
    tests have one) warns, as Paddle does, and every example counts as shown once and not
    clicked."""
    missing = [name for name in (entry.show_name, entry.click_name) if not block.has_var(name)]
    if missing:
        warnings.warn(f"sparse_embedding {table!r}: its ShowClickEntry reads each example's show and click from "
                      f"the vars {entry.show_name!r} and {entry.click_name!r}, but the program has no var "
                      f"{missing[0]!r}; every example counts as shown once and not clicked (a score of "
                      f"nonclk_coeff, {entry.nonclk_coeff}, per sighting), as Paddle does", stacklevel=4)
        return
    for op in block.ops:
        if op.type == "dynamic_lookup_grad" and op.attrs.get("table") == table:
            op.inputs["Show"], op.inputs["Click"] = [entry.show_name], [entry.click_name]


def global_state_var(name: str, shape, dtype: str, value: float, main=None, startup=None, **attrs) -> Variable:
    """A persistable var ``name`` of ``main`` (default: the default main program), set to
    ``value`` by a ``fill_constant`` in ``startup`` (default: the default startup program);
    the existing var when ``main`` has one. ``attrs`` are the var's typed facts
    (``accumulator_of``)."""
    block = (main or default_main_program()).global_block()
    var = block.create_var(name, shape=list(shape), dtype=dtype, persistable=True, stop_gradient=True,
                           attrs=attrs)
    sblock = (startup or default_startup_program()).global_block()
    if not sblock.has_var(name):
        ConstantInitializer(value)(sblock.create_var(name, shape=list(shape), dtype=dtype, persistable=True), sblock)
    return var


def updated_parameters(block) -> set[str]:
    """The parameters an optimizer updates in ``block`` (its optimize ops' ``op.param``). An op
    that keeps state beside a parameter's update sets ``op.param`` only for these, so it runs
    where the update runs; for any other parameter (batch_norm's running statistics, written
    by the forward pass) it stays with the ops that write the parameter, on the trainers
    (NOTE(averages-placement) in placegroup/runtime/averaging.py)."""
    return {op.param for op in block.ops if op.role == "optimize" and op.param is not None}
