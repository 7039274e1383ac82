"""Fluid 1.8's deprecated ``fluid.evaluator``: metrics whose running state lives in the
program, as persistable vars that the main program adds each batch's counts to.

An evaluator appends its metric ops and its accumulating ``sums`` ops to the default main
program when made. ``reset(exe)`` runs a small program that zeroes its states (run it before
the first batch: the states have no initializer, as in Fluid); ``eval(exe)`` runs a small
program that reads them and returns the metric over every batch since the reset.
``fluid.metrics`` (placegroup/model/metrics.py) is the recommended way: it keeps the state in
Python.

Example::

    import placegroup as fluid
    from placegroup.evaluator import ChunkEvaluator
    ev = ChunkEvaluator(pred, label, chunk_scheme="IOB", num_chunk_types=3)
    exe.run(startup)
    ev.reset(exe)
    for batch in batches:
        exe.run(main, feed=batch)
    precision, recall, f1 = ev.eval(exe)

Thread-safety: build and run from one thread, as the programs they edit.
"""
from __future__ import annotations

import warnings

import numpy as np

from placegroup import layers
from placegroup.model.initializer import Constant  # Fluid binds it in this module too
from placegroup.ir import unique_name
from placegroup.ir.framework import Program, Variable, program_guard
from placegroup.model.layer_helper import LayerHelper

__all__ = ["ChunkEvaluator", "EditDistance"]


def _clone_var(block, var: Variable) -> Variable:
    """``var`` declared in ``block`` (of another program), persistable, so a run there reads and
    writes the value the scope holds."""
    return block.create_var(var.name, shape=var.shape, dtype=var.dtype, type=var.type, lod_level=var.lod_level,
                            persistable=True)


class Evaluator:
    """Base class of the evaluators: ``states`` (persistable vars that ``reset`` zeroes) and
    ``metrics`` (the per-batch metric vars).

    Args:
        name: the evaluator's name, a prefix of its states' names.
        **kwargs: accepted as Fluid's LayerHelper arguments.

    Warns:
        Warning: always, as Fluid's: the evaluators are deprecated for ``fluid.metrics``.
    """

    def __init__(self, name: str, **kwargs) -> None:
        kind = type(self).__name__
        warnings.warn(f"The {kind} is deprecated, because maintain a modified program inside evaluator cause bug "
                      f"easily, please use fluid.metrics.{kind} instead.", Warning)
        self.states: list = []
        self.metrics: list = []
        self.helper = LayerHelper(name, **{k: v for k, v in kwargs.items() if k == "name"})

    def reset(self, executor, reset_program=None) -> None:
        """Zero every state: run a program (``reset_program``, or a new one) that fills them.

        Args:
            executor: the Executor whose scope holds the states.
            reset_program: the Program to append the fill ops to (default: a new one).
        """
        if reset_program is None:
            reset_program = Program()
        with program_guard(main_program=reset_program):
            for var in self.states:
                g = _clone_var(reset_program.current_block(), var)
                layers.fill_constant(shape=g.shape, value=0.0, dtype=g.dtype, out=g)
        executor.run(reset_program)

    def eval(self, executor, eval_program=None):
        """The metric over the batches since the last ``reset``; each subclass computes it."""
        raise NotImplementedError()

    def _create_state(self, suffix: str, dtype: str, shape) -> Variable:
        """A new persistable state var ``<unique name>_<suffix>`` of the main program, zero after
        the startup program: Fluid leaves it unset until ``reset``, and its ``sum`` counts an
        unset input as nothing, so a script that never resets still counts from zero."""
        block = self.helper.main_program.current_block()
        state = block.create_var("_".join([unique_name.generate(self.helper.name), suffix]), persistable=True,
                                 dtype=dtype, shape=shape, stop_gradient=True)
        self.helper.set_variable_initializer(state, Constant(0.0))
        self.states.append(state)
        return state

    def _root_block_only(self) -> None:
        if self.helper.main_program.current_block().idx != 0:
            raise ValueError("You can only invoke Evaluator in root block")


class ChunkEvaluator(Evaluator):
    """Precision, recall and F1 of chunk detection over many batches: ``chunk_eval`` each batch,
    its chunk counts added into three int64 states.

    Args:
        input: the predicted ids (see ``fluid.layers.chunk_eval``).
        label: the true ids.
        chunk_scheme: "IOB", "IOE", "IOBES" or "plain".
        num_chunk_types: how many chunk types there are.
        excluded_chunk_types: chunk types left out of the counts.

    Attributes:
        metrics: [precision, recall, f1] of each batch (float32 [1] vars).

    Raises:
        ValueError: made inside a sub-block.

    Example::

        ev = fluid.evaluator.ChunkEvaluator(crf_decode, label, "IOB", num_chunk_types=3)
        ev.reset(exe)
        ...
        precision, recall, f1 = ev.eval(exe)
    """

    def __init__(self, input, label, chunk_scheme: str, num_chunk_types: int, excluded_chunk_types=None) -> None:
        super().__init__("chunk_eval")
        self._root_block_only()
        self.num_infer_chunks = self._create_state(dtype="int64", shape=[1], suffix="num_infer_chunks")
        self.num_label_chunks = self._create_state(dtype="int64", shape=[1], suffix="num_label_chunks")
        self.num_correct_chunks = self._create_state(dtype="int64", shape=[1], suffix="num_correct_chunks")
        precision, recall, f1_score, n_infer, n_label, n_correct = layers.chunk_eval(
            input=input, label=label, chunk_scheme=chunk_scheme, num_chunk_types=num_chunk_types,
            excluded_chunk_types=excluded_chunk_types)
        for state, count in ((self.num_infer_chunks, n_infer), (self.num_label_chunks, n_label),
                             (self.num_correct_chunks, n_correct)):
            layers.sums(input=[state, count], out=state)
        self.metrics.extend([precision, recall, f1_score])

    def eval(self, executor, eval_program=None):
        """(precision, recall, f1) over the batches since ``reset``, float32 [1] arrays; each 0
        where its count (for F1: the correct chunks) is 0."""
        if eval_program is None:
            eval_program = Program()
        block = eval_program.current_block()
        n_infer, n_label, n_correct = (int(np.asarray(v).reshape(-1)[0]) for v in executor.run(
            eval_program, fetch_list=[_clone_var(block, s) for s in self.states]))
        precision = float(n_correct) / n_infer if n_infer else 0
        recall = float(n_correct) / n_label if n_label else 0
        f1 = float(2 * precision * recall) / (precision + recall) if n_correct else 0
        return (np.array([precision], dtype="float32"), np.array([recall], dtype="float32"),
                np.array([f1], dtype="float32"))


class EditDistance(Evaluator):
    """The mean edit distance and the fraction of sequences with any error, over many batches:
    ``edit_distance`` each batch, its sum, pair count and error count added into three states.

    Args:
        input: the hypotheses (see ``fluid.layers.edit_distance``).
        label: the references, as many as ``input``.
        ignored_tokens: token ids removed before comparing.
        **kwargs: ``input_length`` and ``label_length`` (the padded form's lengths, which
            placegroup's ``edit_distance`` needs) go to ``edit_distance``; ``name`` names the
            states.

    Attributes:
        metrics: [the batch's total distance, its number of sequences with errors].

    Raises:
        ValueError: made inside a sub-block.

    Example::

        ev = fluid.evaluator.EditDistance(hyp, ref, input_length=hl, label_length=rl)
        ev.reset(exe)
        ...
        avg_distance, avg_instance_error = ev.eval(exe)
    """

    def __init__(self, input, label, ignored_tokens=None, **kwargs) -> None:
        lengths = {k: kwargs.pop(k) for k in ("input_length", "label_length") if k in kwargs}
        super().__init__("edit_distance", **kwargs)
        self._root_block_only()
        self.total_distance = self._create_state(dtype="float32", shape=[1], suffix="total_distance")
        self.seq_num = self._create_state(dtype="int64", shape=[1], suffix="seq_num")
        self.instance_error = self._create_state(dtype="int64", shape=[1], suffix="instance_error")
        distances, seq_num = layers.edit_distance(input=input, label=label, ignored_tokens=ignored_tokens, **lengths)
        zero = layers.fill_constant(shape=[1], value=0.0, dtype="float32")
        right = layers.reduce_sum(layers.cast(x=layers.equal(distances, zero), dtype="int64"))
        instance_error_count = layers.elementwise_sub(x=seq_num, y=right)
        total_distance = layers.reduce_sum(distances)
        layers.sums(input=[self.total_distance, total_distance], out=self.total_distance)
        layers.sums(input=[self.seq_num, seq_num], out=self.seq_num)
        layers.sums(input=[self.instance_error, instance_error_count], out=self.instance_error)
        self.metrics.append(total_distance)
        self.metrics.append(instance_error_count)

    def eval(self, executor, eval_program=None):
        """(average distance, fraction of sequences with errors) since ``reset``, as float32
        arrays."""
        if eval_program is None:
            eval_program = Program()
        block = eval_program.current_block()
        with program_guard(main_program=eval_program):
            total_distance = _clone_var(block, self.total_distance)
            seq_num = layers.cast(x=_clone_var(block, self.seq_num), dtype="float32")
            instance_error = layers.cast(x=_clone_var(block, self.instance_error), dtype="float32")
            avg_distance = layers.elementwise_div(x=total_distance, y=seq_num)
            avg_instance_error = layers.elementwise_div(x=instance_error, y=seq_num)
            result = executor.run(eval_program, fetch_list=[avg_distance, avg_instance_error])
        return np.array(result[0]), np.array(result[1])
