"""Fluid 1.8's decoding API: ``Decoder`` and ``dynamic_decode``, which runs a decoder step by
step until every sequence is finished; ``BasicDecoder`` with its helpers (``TrainingHelper``,
``GreedyEmbeddingHelper``, ``SampleEmbeddingHelper``); ``BeamSearchDecoder``; and
``gather_tree``, the backtrace of a beam search (its op is in ops/gather_tree.py).

The programs are the ones Fluid 1.8.5 builds, op for op where it matters to a script: the same
loop (a ``While`` whose condition is "not every sequence finished", and the step count), the
same arrays, the same beam-search arithmetic (log-softmax, finished beams forced to the end
token, top-k over beam x vocabulary, gathers by beam). Where Fluid expands a [1] tensor by a
batch size read at run time, placegroup fills a [batch, ...] tensor like the state instead
(``fill_constant_batch_size_like``), which gives the same values.

NOTE(decode-loop): as in Fluid, ``dynamic_decode`` keeps each step's inputs and states in
tensor arrays, written at the step count and read back by the next run, so that the gradient
reaches every step. With ``is_test`` it overwrites the vars ``decoder.initialize`` gave instead,
which hold the last step's values after the loop. The outputs go to arrays made in the loop's
parent block once their dtype is known (rnn_cells.array_in_parent), stacked to [time, batch,
...] after it. The loop stops when every entry of ``finished`` holds or, with
``max_step_num``, once the step count passes it: max_step_num + 1 steps at most, Fluid's rule.

NOTE(beam-finished): Fluid 1.8.5's quirk, kept, since decoded ids depend on it: each step
``dynamic_decode`` or-s the decoder's ``finished`` with the flags from before the step, position
by position. ``BeamSearchDecoder`` has reordered its beams by then, so a beam that takes the
place of a finished one is finished too, and continues with ``end_token`` at no cost (Paddle 2.0
lets a decoder say it ``tracks_own_finished`` to skip the or). A beam search that never
finishes a beam before ``max_step_num`` is not affected.

Building is single-threaded, as in Fluid.
"""
from __future__ import annotations

import collections

import numpy as np

from placegroup.datafeed.dtype_checks import check_type, check_variable_and_dtype
from placegroup.ir.framework import Variable
from placegroup.layers import manip, nn, ops, tensor
from placegroup.layers.blocks import While, array_read, array_write
from placegroup.layers.rnn_cells import array_in_parent
from placegroup.layers.utils import flatten, map_structure
from placegroup.model.layer_helper import LayerHelper

__all__ = ["Decoder", "BeamSearchDecoder", "dynamic_decode", "DecodeHelper", "TrainingHelper",
           "GreedyEmbeddingHelper", "SampleEmbeddingHelper", "BasicDecoder", "gather_tree"]


def gather_tree(ids, parents):
    """The full sequences of a beam search: each beam's ids read back from the last step
    through ``parents`` (Fluid 1.8's ``gather_tree`` op, ops/gather_tree.py).

    Args:
        ids: int32/int64 [max_time, batch_size, beam_size], the id each beam chose per step.
        parents: the same shape and dtype, the beam of the step before each id grew from.

    Returns:
        A Variable like ``ids``: ``out[t, b, k]`` is step t of the sequence that beam k of
        batch entry b ends at the last step.

    Raises:
        TypeError: ``ids`` or ``parents`` is not an int32/int64 Variable.

    Example::

        ids = fluid.data("ids", [None, None, 4], "int64")
        parents = fluid.data("parents", [None, None, 4], "int64")
        sentences = fluid.layers.gather_tree(ids, parents)
    """
    check_variable_and_dtype(ids, "ids", ["int32", "int64"], "gather_tree")
    check_variable_and_dtype(parents, "parents", ["int32", "int64"], "gather_tree")
    helper = LayerHelper("gather_tree")
    out = helper.create_variable_for_type_inference(ids.dtype)
    helper.append_op("gather_tree", {"Ids": [ids], "Parents": [parents]}, {"Out": [out]})
    return out


class Decoder:
    """The base of the decoders ``dynamic_decode`` runs, Fluid 1.8's ``fluid.layers.Decoder``.

    A decoder gives three methods:

    * ``initialize(inits) -> (initial_inputs, initial_states, finished)``, called once before
      the loop; ``finished`` is a bool Variable, one entry per sequence;
    * ``step(time, inputs, states, **kwargs) -> (outputs, next_states, next_inputs,
      finished)``, called in the loop (``time``: the int64 [1] step count), where
      ``next_states`` and ``next_inputs`` have the structure of ``states`` and ``inputs``;
    * ``finalize(outputs, final_states, sequence_lengths) -> (final_outputs, final_states)``,
      optional, called after the loop with each output stacked to [time, batch, ...].

    Thread-safety: build programs from one thread.

    Example::

        decoder = fluid.layers.BasicDecoder(cell, helper, output_fn=project)
        outputs, states = fluid.layers.dynamic_decode(decoder, inits=encoder_state)
    """

    def initialize(self, inits):
        """``(initial_inputs, initial_states, finished)`` from ``inits`` (what
        ``dynamic_decode`` was given). Raises NotImplementedError here."""
        raise NotImplementedError

    def step(self, time, inputs, states, **kwargs):
        """``(outputs, next_states, next_inputs, finished)`` for one step. Raises
        NotImplementedError here."""
        raise NotImplementedError

    def finalize(self, outputs, final_states, sequence_lengths):
        """``(final_outputs, final_states)`` after the loop; NotImplementedError (here) keeps
        them as they are."""
        raise NotImplementedError


class BeamSearchDecoder(Decoder):
    """Beam-search decoding around a cell, Fluid 1.8's ``fluid.layers.BeamSearchDecoder``.

    Each step runs the cell on ``batch_size * beam_size`` rows, takes the log-softmax of its
    (``output_fn``'d) output, adds each beam's score, and keeps the ``beam_size`` best of the
    ``beam_size * vocab_size`` continuations of each batch entry (``topk``). A finished beam
    can only continue with ``end_token``, at no cost. The cell's states, the scores, the
    finished flags and the lengths follow the beam each survivor came from. ``finalize`` reads
    the sentences back with ``gather_tree``. Where two candidates' scores tie, which comes first
    is ``topk``'s choice.

    The cell's inputs and states are tiled to ``[batch_size * beam_size, ...]``; any other
    [batch_size, ...] tensor the cell reads (an attention's encoder output) must be tiled by
    ``tile_beam_merge_with_batch`` first.

    Args:
        cell: an ``RNNCell`` or an object with its ``call``.
        start_token: the id every sequence starts with (an int).
        end_token: the id that finishes a sequence.
        beam_size: the beam width.
        embedding_fn: maps the chosen ids [batch_size, beam_size] to the cell's inputs
            (``fluid.embedding``); None: the cell takes the ids.
        output_fn: applied to the cell's outputs before the scores (the projection to the
            vocabulary, e.g. an ``fc`` with ``num_flatten_dims=2``).

    Thread-safety: build programs from one thread.

    Example::

        decoder = fluid.layers.BeamSearchDecoder(
            fluid.layers.GRUCell(64), start_token=0, end_token=1, beam_size=4,
            embedding_fn=lambda ids: fluid.embedding(ids, [100, 32], param_attr="trg_emb"),
            output_fn=lambda h: fluid.layers.fc(h, 100, num_flatten_dims=2, param_attr="out_w"))
        ids, _ = fluid.layers.dynamic_decode(decoder, inits=encoder_state, max_step_num=20)
    """

    class OutputWrapper(collections.namedtuple("OutputWrapper", ("scores", "predicted_ids", "parent_ids"))):
        """A step's outputs: the survivors' scores, their ids, and the beams they came from."""

    class StateWrapper(collections.namedtuple("StateWrapper", ("cell_states", "log_probs", "finished", "lengths"))):
        """The decoder's states: the cell's, each beam's score, finished flag and length."""

    def __init__(self, cell, start_token, end_token, beam_size, embedding_fn=None, output_fn=None) -> None:
        self.cell, self.embedding_fn, self.output_fn = cell, embedding_fn, output_fn
        self.start_token, self.end_token, self.beam_size = start_token, end_token, beam_size

    @staticmethod
    def tile_beam_merge_with_batch(x, beam_size):
        """``x`` [batch_size, ...] with each entry repeated ``beam_size`` times:
        [batch_size * beam_size, ...] (the dims after the first may be unknown).

        Raises:
            TypeError: ``x`` is not a Variable.

        Example::

            enc_out = fluid.layers.BeamSearchDecoder.tile_beam_merge_with_batch(enc_out, 4)
        """
        check_type(x, "x", Variable, "BeamSearchDecoder.tile_beam_merge_with_batch")
        x = manip.expand(manip.unsqueeze(x, [1]), [1, beam_size] + [1] * (len(x.shape) - 1))
        rank = len(x.shape)  # [batch, beam, ...] -> [..., batch, beam] -> [..., batch * beam] -> [batch * beam, ...]
        x = manip.transpose(x, list(range(2, rank)) + [0, 1])
        x = nn.reshape(x, [0] * (rank - 2) + [-1])
        return manip.transpose(x, [rank - 2] + list(range(rank - 2)))

    def _split_batch_beams(self, x):
        """[batch_size * beam_size, ...] -> [batch_size, beam_size, ...]."""
        check_type(x, "x", Variable, "BeamSearchDecoder._split_batch_beams")
        return nn.reshape(x, [-1, self.beam_size] + list(x.shape[1:]))

    def _merge_batch_beams(self, x):
        """[batch_size, beam_size, ...] -> [batch_size * beam_size, ...]."""
        check_type(x, "x", Variable, "BeamSearchDecoder._merge_batch_beams")
        return nn.reshape(x, [-1] + list(x.shape[2:]))

    def _expand_to_beam_size(self, x):
        """[batch_size, ...] -> [batch_size, beam_size, ...], each entry repeated."""
        check_type(x, "x", Variable, "BeamSearchDecoder._expand_to_beam_size")
        return manip.expand(manip.unsqueeze(x, [1]), [1, self.beam_size] + [1] * (len(x.shape) - 1))

    def _mask_probs(self, probs, finished):
        """``probs`` [batch, beam, vocab] with each finished beam's row replaced by 0 at the end
        token and -1e9 elsewhere (Fluid's formula)."""
        finished = tensor.cast(finished, probs.dtype)
        ended = nn.elementwise_mul(manip.expand(manip.unsqueeze(finished, [2]), [1, 1, self.vocab_size]),
                                   self.noend_mask_tensor, axis=-1)
        return nn.elementwise_sub(ended, nn.elementwise_mul(probs, finished - 1, axis=0))

    def _gather(self, x, indices, batch_size):
        """``x[b, indices[b, k]]`` for x [batch, beam or beam * vocab, ...]: [batch, beam, ...]."""
        batch_size = tensor.cast(batch_size, indices.dtype) if batch_size.dtype != indices.dtype else batch_size
        batch_size.stop_gradient = True
        batch_pos = manip.expand(manip.unsqueeze(manip.range(0, batch_size, 1, dtype=indices.dtype), [1]),
                                 [1, self.beam_size])
        coordinates = manip.stack([batch_pos, indices], axis=2)
        coordinates.stop_gradient = True
        return manip.gather_nd(x, coordinates)

    def initialize(self, initial_cell_states):
        """The first step's inputs (``start_token`` per beam, through ``embedding_fn``), the
        states (the cell's tiled to [batch, beam, ...]; scores 0 for beam 0 and -1e9 for the
        others, so the first step grows beam 0 only; no beam finished; lengths 0) and
        ``finished``."""
        self.kinf = 1e9
        state = flatten(initial_cell_states)[0]
        self.batch_size = manip.shape(state)[0]
        self.start_token_tensor = tensor.fill_constant([1], "int64", self.start_token)
        self.end_token_tensor = tensor.fill_constant([1], "int64", self.end_token)
        init_cell_states = map_structure(self._expand_to_beam_size, initial_cell_states)
        init_inputs = manip.fill_constant_batch_size_like(state, [-1, self.beam_size], "int64", self.start_token)
        first = tensor.assign(np.array([0.0] + [-self.kinf] * (self.beam_size - 1), dtype="float32"))
        log_probs = nn.elementwise_add(
            manip.fill_constant_batch_size_like(state, [-1, self.beam_size], "float32", 0.0), first, axis=-1)
        init_finished = manip.fill_constant_batch_size_like(state, [-1, self.beam_size], "bool", False,
                                                            force_cpu=True)
        init_lengths = manip.zeros_like(init_inputs)
        init_inputs = self.embedding_fn(init_inputs) if self.embedding_fn else init_inputs
        return init_inputs, self.StateWrapper(init_cell_states, log_probs, init_finished, init_lengths), init_finished

    def _beam_search_step(self, time, logits, next_cell_states, beam_state):
        """``(OutputWrapper, StateWrapper)`` of one step from the ``logits`` [batch, beam,
        vocab] (the vocabulary size must be known)."""
        self.vocab_size = logits.shape[-1]
        if self.vocab_size is None or self.vocab_size <= 0:
            raise ValueError(f"BeamSearchDecoder: the last dim of the cell's output (the vocabulary) must be known, "
                             f"got {list(logits.shape)}")
        if not 0 <= self.end_token < self.vocab_size:
            raise ValueError(f"BeamSearchDecoder: end_token {self.end_token} is not an id of the "
                             f"vocabulary of {self.vocab_size}")
        self.vocab_size_tensor = tensor.fill_constant([1], "int64", self.vocab_size)
        noend = np.full([self.vocab_size], -self.kinf, dtype="float32")
        noend[self.end_token] = 0
        self.noend_mask_tensor = tensor.assign(noend)
        step_log_probs = self._mask_probs(ops.log(nn.softmax(logits)), beam_state.finished)
        log_probs = nn.elementwise_add(step_log_probs, beam_state.log_probs, axis=0)
        scores = nn.reshape(log_probs, [-1, self.beam_size * self.vocab_size])
        topk_scores, topk_indices = nn.topk(scores, k=self.beam_size)
        beam_indices = ops.elementwise_floordiv(topk_indices, self.vocab_size_tensor)
        token_indices = ops.elementwise_mod(topk_indices, self.vocab_size_tensor)
        next_log_probs = self._gather(scores, topk_indices, self.batch_size)
        next_cell_states = map_structure(lambda x: self._gather(x, beam_indices, self.batch_size), next_cell_states)
        next_finished = self._gather(beam_state.finished, beam_indices, self.batch_size)
        next_lengths = self._gather(beam_state.lengths, beam_indices, self.batch_size)
        next_lengths = nn.elementwise_add(next_lengths,
                                          tensor.cast(ops.logical_not(next_finished), beam_state.lengths.dtype))
        next_finished = ops.logical_or(next_finished, ops.equal(token_indices, self.end_token_tensor))
        return (self.OutputWrapper(topk_scores, token_indices, beam_indices),
                self.StateWrapper(next_cell_states, next_log_probs, next_finished, next_lengths))

    def step(self, time, inputs, states, **kwargs):
        """One beam-search step: ``(OutputWrapper, StateWrapper, next_inputs, finished)``, the
        next inputs being the chosen ids through ``embedding_fn``."""
        inputs = map_structure(self._merge_batch_beams, inputs)
        cell_states = map_structure(self._merge_batch_beams, states.cell_states)
        cell_outputs, next_cell_states = self.cell(inputs, cell_states, **kwargs)
        cell_outputs = map_structure(self._split_batch_beams, cell_outputs)
        next_cell_states = map_structure(self._split_batch_beams, next_cell_states)
        if self.output_fn is not None:
            cell_outputs = self.output_fn(cell_outputs)
        output, state = self._beam_search_step(time, cell_outputs, next_cell_states, states)
        sample_ids = output.predicted_ids
        sample_ids.stop_gradient = True
        next_inputs = self.embedding_fn(sample_ids) if self.embedding_fn else sample_ids
        return output, state, next_inputs, state.finished

    def finalize(self, outputs, final_states, sequence_lengths):
        """``(ids, final_states)``: the sentences [time, batch, beam] by ``gather_tree``."""
        return gather_tree(outputs.predicted_ids, outputs.parent_ids), final_states


def _swap_batch_time(x):
    return manip.transpose(x, [1, 0] + list(range(2, len(x.shape))))


def _keep_finished(state, new_state, finished):
    """``state`` where ``finished`` holds, else ``new_state`` (bool states through float32)."""
    is_bool = state.dtype == "bool"
    if is_bool:
        state, new_state = tensor.cast(state, "float32"), tensor.cast(new_state, "float32")
    if finished.dtype != state.dtype:
        finished = tensor.cast(finished, state.dtype)
        finished.stop_gradient = True  # a bool's gradient has nowhere to go
    out = nn.elementwise_sub(nn.elementwise_mul(state, finished, axis=0),
                             nn.elementwise_mul(new_state, finished - 1, axis=0))
    return tensor.cast(out, "bool") if is_bool else out


def dynamic_decode(decoder, inits=None, max_step_num=None, output_time_major=False, impute_finished=False,
                   is_test=False, return_length=False, **kwargs):
    """Run ``decoder.step`` until every sequence is finished, Fluid 1.8's
    ``fluid.layers.dynamic_decode`` (a ``While`` loop, NOTE(decode-loop)).

    Args:
        decoder: a ``Decoder``.
        inits: passed to ``decoder.initialize`` (the cell's initial states, mostly).
        max_step_num: an int: stop after step ``max_step_num`` (so at most max_step_num + 1
            steps, as in Fluid); None: only when every sequence is finished.
        output_time_major: the outputs [time, batch, ...] (else [batch, time, ...]).
        impute_finished: a finished sequence's states stay as they were (else the decoder's
            new states are taken even for it).
        is_test: keep only the current step's inputs and states (less memory, no gradient).
        return_length: also return each sequence's length.
        **kwargs: passed to ``decoder.step`` at every step.

    Returns:
        ``(final_outputs, final_states)``, with ``sequence_lengths`` (int64, the shape of
        ``finished``) after them when ``return_length``: the step outputs stacked over time
        (or what ``decoder.finalize`` made of them) and the states after the last step.

    Raises:
        TypeError: ``decoder`` has no ``initialize`` and ``step``, or ``initialize`` gives a
            ``finished`` that is not a bool Variable.
        ValueError: ``max_step_num`` is negative.

    Thread-safety: build programs from one thread.

    Example::

        helper = fluid.layers.GreedyEmbeddingHelper(embed, start_tokens, end_token=1)
        decoder = fluid.layers.BasicDecoder(fluid.layers.GRUCell(64), helper, output_fn=project)
        outputs, _ = fluid.layers.dynamic_decode(decoder, inits=encoder_state, max_step_num=20)
        ids = outputs.sample_ids   # [batch, time]
    """
    if not callable(getattr(decoder, "initialize", None)) or not callable(getattr(decoder, "step", None)):
        raise TypeError(f"dynamic_decode: decoder must be a Decoder (initialize and step), got {type(decoder).__name__}")
    if max_step_num is not None and (not isinstance(max_step_num, int) or max_step_num < 0):
        raise ValueError(f"dynamic_decode: max_step_num must be an int >= 0 or None, got {max_step_num!r}")
    initial_inputs, initial_states, initial_finished = decoder.initialize(inits)
    if not isinstance(initial_finished, Variable) or initial_finished.dtype != "bool":
        raise TypeError(f"dynamic_decode: decoder.initialize must give finished as a bool Variable, "
                        f"got {initial_finished!r}")
    global_inputs, global_states, global_finished = initial_inputs, initial_states, initial_finished
    global_finished.stop_gradient = True
    step_idx = tensor.fill_constant([1], "int64", 0)
    cond = ops.logical_not(ops.reduce_all(initial_finished))
    if max_step_num is not None:
        max_step_num = tensor.fill_constant([1], "int64", max_step_num)
    loop = While(cond, is_test=is_test)
    sequence_lengths = tensor.cast(manip.zeros_like(initial_finished), "int64")
    sequence_lengths.stop_gradient = True
    if is_test:
        inputs, states = initial_inputs, initial_states
    else:
        inputs_arrays = map_structure(lambda x: array_write(x, step_idx), initial_inputs)
        states_arrays = map_structure(lambda x: array_write(x, step_idx), initial_states)
    with loop.block():
        if not is_test:
            inputs = map_structure(lambda a: array_read(a, step_idx), inputs_arrays)
            states = map_structure(lambda a: array_read(a, step_idx), states_arrays)
        outputs, next_states, next_inputs, next_finished = decoder.step(step_idx, inputs, states, **kwargs)
        next_finished = ops.logical_or(next_finished, global_finished)
        next_sequence_lengths = nn.elementwise_add(
            sequence_lengths, tensor.cast(ops.logical_not(global_finished), sequence_lengths.dtype))
        if impute_finished:
            next_states = map_structure(lambda x, y: _keep_finished(x, y, global_finished), states, next_states)
        outputs_arrays = map_structure(lambda x: array_in_parent(x.dtype), outputs)
        map_structure(lambda x, a: array_write(x, step_idx, array=a), outputs, outputs_arrays)
        ops.increment(step_idx, value=1.0, in_place=True)
        if is_test:
            map_structure(tensor.assign, next_inputs, global_inputs)
            map_structure(tensor.assign, next_states, global_states)
        else:
            map_structure(lambda x, a: array_write(x, step_idx, array=a), next_inputs, inputs_arrays)
            map_structure(lambda x, a: array_write(x, step_idx, array=a), next_states, states_arrays)
        tensor.assign(next_finished, global_finished)
        tensor.assign(next_sequence_lengths, sequence_lengths)
        if max_step_num is not None:
            ops.logical_and(ops.logical_not(ops.reduce_all(global_finished)), ops.less_equal(step_idx, max_step_num),
                            cond)
        else:
            ops.logical_not(ops.reduce_all(global_finished), cond)
    final_outputs = map_structure(lambda a: tensor.tensor_array_to_tensor(a, axis=0, use_stack=True)[0],
                                  outputs_arrays)
    final_states = global_states if is_test else map_structure(lambda a: array_read(a, step_idx), states_arrays)
    try:
        final_outputs, final_states = decoder.finalize(final_outputs, final_states, sequence_lengths)
    except NotImplementedError:
        pass
    if not output_time_major:
        final_outputs = map_structure(_swap_batch_time, final_outputs)
    return (final_outputs, final_states, sequence_lengths) if return_length else (final_outputs, final_states)


class DecodeHelper:
    """The base of ``BasicDecoder``'s helpers, Fluid 1.8's ``fluid.layers.DecodeHelper``: how the
    first inputs are made, how an id is picked from a step's outputs, and what the next step
    reads.

    * ``initialize() -> (initial_inputs, initial_finished)``;
    * ``sample(time, outputs, states) -> sample_ids``;
    * ``next_inputs(time, outputs, states, sample_ids) -> (finished, next_inputs, next_states)``.

    Thread-safety: build programs from one thread.

    Example::

        helper = fluid.layers.TrainingHelper(trg_emb, trg_length)   # a DecodeHelper
    """

    def initialize(self):
        """``(initial_inputs, initial_finished)``; None here."""

    def sample(self, time, outputs, states):
        """The ids [batch] picked from ``outputs``; None here."""

    def next_inputs(self, time, outputs, states, sample_ids):
        """``(finished, next_inputs, next_states)``; None here."""


class TrainingHelper(DecodeHelper):
    """Teacher forcing, Fluid 1.8's ``fluid.layers.TrainingHelper``: step t reads step t of
    ``inputs`` (the target's embeddings), whatever was sampled; a sequence is finished after
    its ``sequence_length`` steps. ``sample`` is the argmax of the outputs.

    Args:
        inputs: a Variable or a structure of them, [batch, T, ...] (``time_major``: [T, batch,
            ...]); one step of zeros is padded after the last, so the step after it reads zeros.
        sequence_length: an int [batch] Variable.
        time_major: the layout of ``inputs``.

    Raises:
        TypeError: ``inputs`` holds no Variable or ``sequence_length`` is not an int Variable.

    Thread-safety: build programs from one thread.

    Example::

        helper = fluid.layers.TrainingHelper(trg_emb, trg_length)
        decoder = fluid.layers.BasicDecoder(fluid.layers.GRUCell(64), helper, output_fn=project)
        outputs, _ = fluid.layers.dynamic_decode(decoder, inits=encoder_state)
    """

    def __init__(self, inputs, sequence_length, time_major=False) -> None:
        for k, x in enumerate(flatten(inputs)):
            check_type(x, f"inputs[{k}]", Variable, "TrainingHelper")
        check_variable_and_dtype(sequence_length, "sequence_length", ["int32", "int64"], "TrainingHelper")
        self.inputs, self.sequence_length, self.time_major = inputs, sequence_length, time_major
        self.inputs_ = map_structure(lambda x: manip.pad(
            x, paddings=[0, 1] + [0, 0] * (len(x.shape) - 1) if time_major else
            [0, 0, 0, 1] + [0, 0] * (len(x.shape) - 2)), self.inputs)

    def initialize(self):
        """Step 0 of ``inputs``, and ``finished`` where the length is 0."""
        init_finished = ops.equal(self.sequence_length,
                                  tensor.fill_constant([1], self.sequence_length.dtype, 0))
        init_inputs = map_structure(lambda x: x[0] if self.time_major else x[:, 0], self.inputs)
        return init_inputs, init_finished

    def sample(self, time, outputs, states):
        """The argmax of ``outputs`` along its last dim (int64 [batch])."""
        return manip.argmax(outputs, axis=-1)

    def next_inputs(self, time, outputs, states, sample_ids):
        """Step ``time + 1`` of the (padded) inputs, ``finished`` where ``time + 1 >= length``,
        and ``states`` as they are."""
        time = tensor.cast(time, "int32") if time.dtype != "int32" else time
        if self.sequence_length.dtype != time.dtype:
            self.sequence_length = tensor.cast(self.sequence_length, time.dtype)
        next_time = time + 1
        finished = ops.less_equal(self.sequence_length, next_time)
        axes = [0 if self.time_major else 1]
        next_inputs = map_structure(lambda x: manip.squeeze(
            manip.slice(x, axes=axes, starts=[next_time], ends=[next_time + 1]), axes=axes), self.inputs_)
        return finished, next_inputs, states


class GreedyEmbeddingHelper(DecodeHelper):
    """Greedy decoding, Fluid 1.8's ``fluid.layers.GreedyEmbeddingHelper``: each step's id is the
    argmax of the outputs, and the next step reads its embedding. A sequence is finished once it
    picks ``end_token``.

    Args:
        embedding_fn: maps ids [batch] to the cell's inputs (``fluid.embedding``; with
            ``fluid.layers.embedding``, unsqueeze the ids first).
        start_tokens: an int64 [batch] Variable, the first ids.
        end_token: the id that finishes a sequence (an int).

    Raises:
        TypeError: ``embedding_fn`` is not callable or ``start_tokens`` not an int Variable.

    Thread-safety: build programs from one thread.

    Example::

        start = fluid.layers.fill_constant_batch_size_like(enc_state, [-1], "int64", 0)
        helper = fluid.layers.GreedyEmbeddingHelper(embed, start, end_token=1)
    """

    def __init__(self, embedding_fn, start_tokens, end_token) -> None:
        if not callable(embedding_fn):
            raise TypeError(f"GreedyEmbeddingHelper: embedding_fn must be callable, got {embedding_fn!r}")
        check_variable_and_dtype(start_tokens, "start_tokens", ["int32", "int64"], "GreedyEmbeddingHelper")
        self.embedding_fn, self.start_tokens = embedding_fn, start_tokens
        self.end_token = tensor.fill_constant([1], "int64", end_token)

    def initialize(self):
        """The start tokens' embeddings, and no sequence finished."""
        init_finished = manip.fill_constant_batch_size_like(self.start_tokens, [-1], "bool", False, force_cpu=True)
        return self.embedding_fn(self.start_tokens), init_finished

    def sample(self, time, outputs, states):
        """The argmax of ``outputs`` along its last dim (int64 [batch])."""
        return manip.argmax(outputs, axis=-1)

    def next_inputs(self, time, outputs, states, sample_ids):
        """``finished`` where the id is ``end_token``, the ids' embeddings, and ``states``."""
        return ops.equal(sample_ids, self.end_token), self.embedding_fn(sample_ids), states


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """Sampling decoding, Fluid 1.8's ``fluid.layers.SampleEmbeddingHelper``: as
    ``GreedyEmbeddingHelper``, but each id is drawn from ``softmax(outputs /
    softmax_temperature)`` (``sampling_id``).

    Args:
        embedding_fn, start_tokens, end_token: as ``GreedyEmbeddingHelper``'s.
        softmax_temperature: divides the outputs first (> 0; None: 1).
        seed: the sampling seed (None: a new one each run).

    Raises:
        TypeError: as ``GreedyEmbeddingHelper``.

    Thread-safety: build programs from one thread.

    Example::

        helper = fluid.layers.SampleEmbeddingHelper(embed, start, end_token=1, softmax_temperature=0.7, seed=1)
    """

    def __init__(self, embedding_fn, start_tokens, end_token, softmax_temperature=None, seed=None) -> None:
        super().__init__(embedding_fn, start_tokens, end_token)
        self.softmax_temperature = (tensor.fill_constant([1], "float32", softmax_temperature)
                                    if softmax_temperature is not None else None)
        self.seed = seed

    def sample(self, time, outputs, states):
        """Ids [batch] drawn from ``softmax(outputs / softmax_temperature)``."""
        logits = outputs / self.softmax_temperature if self.softmax_temperature is not None else outputs
        probs = nn.softmax(logits)
        probs.stop_gradient = True  # sampling_id has no gradient
        return tensor.sampling_id(probs, seed=0 if self.seed is None else self.seed, dtype=self.start_tokens.dtype)


class BasicDecoder(Decoder):
    """A cell and a ``DecodeHelper``, Fluid 1.8's ``fluid.layers.BasicDecoder``. A step runs the
    cell, ``output_fn`` on its outputs, ``helper.sample`` for the ids and ``helper.next_inputs``
    for the next step; its outputs are ``OutputWrapper(cell_outputs, sample_ids)``.

    Args:
        cell: an ``RNNCell`` or an object with its ``call``.
        helper: a ``DecodeHelper``.
        output_fn: applied to the cell's outputs before sampling (the projection to the
            vocabulary); None: none.

    Thread-safety: build programs from one thread.

    Example::

        decoder = fluid.layers.BasicDecoder(fluid.layers.GRUCell(64), helper, output_fn=project)
        outputs, states = fluid.layers.dynamic_decode(decoder, inits=encoder_state, max_step_num=20)
        logits, ids = outputs.cell_outputs, outputs.sample_ids
    """

    class OutputWrapper(collections.namedtuple("OutputWrapper", ("cell_outputs", "sample_ids"))):
        """A step's outputs: the cell's (after ``output_fn``) and the ids sampled from them."""

    def __init__(self, cell, helper, output_fn=None) -> None:
        self.cell, self.helper, self.output_fn = cell, helper, output_fn

    def initialize(self, initial_cell_states):
        """The helper's first inputs and ``finished``, and ``initial_cell_states`` as they are."""
        initial_inputs, initial_finished = self.helper.initialize()
        return initial_inputs, initial_cell_states, initial_finished

    def step(self, time, inputs, states, **kwargs):
        """``(OutputWrapper, next_states, next_inputs, finished)`` of one step."""
        cell_outputs, cell_states = self.cell(inputs, states, **kwargs)
        if self.output_fn is not None:
            cell_outputs = self.output_fn(cell_outputs)
        sample_ids = self.helper.sample(time=time, outputs=cell_outputs, states=cell_states)
        sample_ids.stop_gradient = True
        finished, next_inputs, next_states = self.helper.next_inputs(time=time, outputs=cell_outputs,
                                                                     states=cell_states, sample_ids=sample_ids)
        return self.OutputWrapper(cell_outputs, sample_ids), next_states, next_inputs, finished
