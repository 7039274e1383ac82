"""Fluid 1.8's cells and ``rnn``: ``RNNCell``, ``GRUCell``, ``LSTMCell``, and ``rnn``, which runs a
cell over the time steps of a padded batch. The decoders built on them are in decoding.py.

A cell maps ``(inputs, states)`` to ``(outputs, new_states)``; both may be nested structures
(lists, tuples, namedtuples, dicts) of Variables (placegroup/layers/utils.py). ``GRUCell`` and
``LSTMCell`` wrap the units of placegroup/layers/rnn_units.py (Fluid's contrib ``BasicGRUUnit``
and ``BasicLSTMUnit``), so their parameters have Fluid's names: ``GRUCell/BasicGRUUnit_0.w_0``
and so on.

NOTE(rnn-while): Fluid 1.8.5 builds ``rnn`` on StaticRNN, whose ``recurrent`` op runs as many steps
as its input has at run time. placegroup's StaticRNN is unrolled and needs T when the program is
built (NOTE(static-rnn-unroll)), so ``rnn`` is a ``While`` loop instead, over T read at run time:

* before the loop: the inputs made time-major ([T, batch, ...]) and, for ``is_reverse``,
  reversed along time; the mask [T, batch] from ``sequence_length`` (``sequence_mask`` up to T,
  transposed, reversed alike); a counter ``i``; and a copy of each initial state, since the loop
  overwrites its states and the caller's vars must keep their values;
* the body: step i's input is ``gather(x, i)`` without its first dim; the cell's ``call``; with
  a mask m, a state past its sequence's end keeps its value (``new * m - old * (m - 1)``, Fluid's
  formula); each output is written at i of a tensor array made outside the loop once its dtype
  is known, as Fluid's ``dynamic_decode`` makes its arrays; the states are overwritten;
* after it: each array stacked into [T, batch, ...], reversed and transposed back.

The outputs and final states are Fluid's. Gradients go through ``while_grad`` (NOTE(block-grad)):
the states are loop vars the body reads and overwrites, which placegroup differentiates at the
value each run read. Step i's input gradient is ``gather``'s, a [T, batch, ...] tensor zero
outside row i, summed over the runs: backwards costs O(T) times the input's size per run.

Building is single-threaded, as in Fluid.
"""
from __future__ import annotations

import dataclasses

from placegroup.datafeed.dtype_checks import check_dtype, check_type, check_variable_and_dtype
from placegroup.ir.framework import Variable, default_main_program
from placegroup.layers import manip, nn, ops, tensor
from placegroup.layers.blocks import While, array_write, create_array
from placegroup.layers.rnn_units import BasicGRUUnit, BasicLSTMUnit
from placegroup.layers.sequence_pad import sequence_mask
from placegroup.layers.utils import assert_same_structure, flatten, map_structure

__all__ = ["RNNCell", "GRUCell", "LSTMCell", "rnn"]

_FLOATS = ("float32", "float64")


@dataclasses.dataclass(frozen=True)
class _Shape:
    """One state's shape with the batch dim first (-1): a leaf, where a list would be a structure."""
    dims: tuple


def _shape_leaves(shapes):
    """``shapes`` (a shape, a list or tuple of ints, or a structure of them) with each shape
    made a ``_Shape``, -1 put first unless it is there."""
    if isinstance(shapes, (list, tuple)) and all(isinstance(d, int) for d in shapes):
        return _Shape(tuple(shapes) if shapes and shapes[0] == -1 else (-1, *shapes))
    if isinstance(shapes, dict):
        return type(shapes)((k, _shape_leaves(v)) for k, v in shapes.items())
    if isinstance(shapes, (list, tuple)):
        leaves = [_shape_leaves(s) for s in shapes]
        return type(shapes)(*leaves) if hasattr(shapes, "_fields") else type(shapes)(leaves)
    raise TypeError(f"RNNCell: a state's shape must be a list or tuple of ints (or a structure of them), got {shapes!r}")


class RNNCell:
    """The base of the cells ``rnn`` and the decoders run: one step from ``(inputs, states)`` to
    ``(outputs, new_states)``, Fluid 1.8's ``fluid.layers.RNNCell``.

    A subclass implements ``call(inputs, states, **kwargs)``, returning ``(outputs,
    new_states)`` with ``new_states`` of the structure of ``states``; calling the cell calls it.
    To let ``get_initial_states`` make the states, it also gives ``state_shape`` (and
    ``state_dtype`` if not float32).

    Thread-safety: build programs from one thread.

    Example::

        class Tanh(fluid.layers.RNNCell):
            def call(self, inputs, states):
                h = fluid.layers.fc([inputs, states], 16, act="tanh")
                return h, h

            @property
            def state_shape(self):
                return [16]

        out, last = fluid.layers.rnn(Tanh(), x)   # x [batch, T, D]
    """

    def call(self, inputs, states, **kwargs):
        """One step: ``(outputs, new_states)`` from ``inputs`` and ``states`` (Variables or
        structures of them); ``new_states`` has the structure of ``states``.

        Raises:
            NotImplementedError: the cell does not implement it.
        """
        raise NotImplementedError("RNNCell must implent the call function.")

    def __call__(self, inputs, states, **kwargs):
        return self.call(inputs, states, **kwargs)

    def get_initial_states(self, batch_ref, shape=None, dtype="float32", init_value=0, batch_dim_idx=0):
        """States filled with ``init_value``, with the batch size of ``batch_ref``.

        Args:
            batch_ref: a Variable (or a structure; its first leaf counts) whose dim
                ``batch_dim_idx`` is the batch size.
            shape: a shape (a list or tuple of ints, -1 put first unless there) or a structure
                of them; None: ``self.state_shape``.
            dtype: "float32" or "float64", or a structure like ``shape``'s; None:
                ``self.state_dtype`` (float32 if the cell has none).
            init_value: the states' value.
            batch_dim_idx: which dim of ``batch_ref`` is the batch.

        Returns:
            A ``fill_constant_batch_size_like`` per shape, in the structure of ``shape``.

        Raises:
            TypeError: ``batch_ref`` is not a float or int Variable, a shape is not a list or
                tuple of ints, or a dtype is not float32 or float64.
            NotImplementedError: no ``shape`` given and the cell has no ``state_shape``.

        Example::

            h0 = cell.get_initial_states(batch_ref=x, shape=[64])   # [batch, 64] zeros
        """
        ref = flatten(batch_ref)[0]
        check_variable_and_dtype(ref, "batch_ref", ["float32", "float64", "int32", "int64"], "RNNCell")
        check_type(shape, "shape", (list, tuple, type(None), int), "RNNCell")
        shapes = _shape_leaves(self.state_shape if shape is None else shape)
        if dtype is None:
            try:
                dtype = self.state_dtype
            except NotImplementedError:
                dtype = "float32"
        for d in flatten(dtype):
            check_dtype(d, "dtype", list(_FLOATS), "RNNCell")
        dtypes = map_structure(lambda _: flatten(dtype)[0], shapes) if len(flatten(dtype)) == 1 else dtype
        return map_structure(lambda s, d: manip.fill_constant_batch_size_like(
            input=ref, shape=list(s.dims), dtype=d, value=init_value, input_dim_idx=batch_dim_idx), shapes, dtypes)

    @property
    def state_shape(self):
        """The states' shapes without the batch dim, for ``get_initial_states``: a list of ints
        or a structure of them."""
        raise NotImplementedError("Please add implementaion for `state_shape` in the used cell.")

    @property
    def state_dtype(self):
        """The states' dtypes for ``get_initial_states``: one, or a structure like
        ``state_shape``'s."""
        raise NotImplementedError("Please add implementaion for `state_dtype` in the used cell.")


class GRUCell(RNNCell):
    """A GRU step, Fluid 1.8's ``fluid.layers.GRUCell``, over ``BasicGRUUnit``:

    .. math::

        u_t, r_t = act_g([x_t, h_{t-1}] W_g + b_g)
        \\tilde{h}_t = act_c([x_t, r_t h_{t-1}] W_c + b_c)
        h_t = u_t h_{t-1} + (1 - u_t) \\tilde{h}_t

    The first call makes the parameters ``<name>/BasicGRUUnit_<n>.w_0`` (W_g), ``.w_1`` (W_c),
    ``.b_0`` (b_g) and ``.b_1`` (b_c), as Fluid names them; every call after shares them.

    Args:
        hidden_size: H, an int.
        param_attr, bias_attr: the weights' and biases' attrs (Xavier and zeros by default;
            a named attr names them ``<name>_gate`` and ``<name>_candidate``).
        gate_activation: act_g, a layer function (default ``fluid.layers.sigmoid``).
        activation: act_c (default ``fluid.layers.tanh``).
        dtype: "float32" or "float64", the parameters'.
        name: the prefix of the parameters' names.

    Call: ``cell(inputs, states)`` with inputs [batch, input_size] and states [batch, H]
    returns ``(h, h)``, h [batch, H].

    Raises:
        TypeError: ``hidden_size`` is not an int, ``dtype`` not float32/float64, or (on a
            call) the inputs or states are not float Variables.

    Thread-safety: build programs from one thread.

    Example::

        cell = fluid.layers.GRUCell(hidden_size=32)
        outputs, last = fluid.layers.rnn(cell, x)   # x [batch, T, D] -> [batch, T, 32], [batch, 32]
    """

    def __init__(self, hidden_size, param_attr=None, bias_attr=None, gate_activation=None, activation=None,
                 dtype="float32", name="GRUCell") -> None:
        check_type(hidden_size, "hidden_size", int, "GRUCell")
        check_dtype(dtype, "dtype", list(_FLOATS), "GRUCell")
        self.hidden_size = hidden_size
        self.gru_unit = BasicGRUUnit(name, hidden_size, param_attr, bias_attr, gate_activation, activation, dtype)

    def call(self, inputs, states):
        """``(h, h)``: the new hidden state from ``inputs`` [batch, input_size] and ``states``
        [batch, H]."""
        check_variable_and_dtype(inputs, "inputs", list(_FLOATS), "GRUCell")
        check_variable_and_dtype(states, "states", list(_FLOATS), "GRUCell")
        new_hidden = self.gru_unit(inputs, states)
        return new_hidden, new_hidden

    @property
    def state_shape(self):
        """``[hidden_size]``: h's shape without the batch dim."""
        return [self.hidden_size]


class LSTMCell(RNNCell):
    """An LSTM step, Fluid 1.8's ``fluid.layers.LSTMCell``, over ``BasicLSTMUnit``:

    .. math::

        i, j, f, o = split([x_t, h_{t-1}] W + b, 4)
        c_t = c_{t-1} \\sigma(f + forget\\_bias) + \\sigma(i) \\tanh(j)
        h_t = \\tanh(c_t) \\sigma(o)

    The first call makes ``<name>/BasicLSTMUnit_<n>.w_0`` (W) and ``.b_0`` (b). As in Fluid
    1.8.5, ``gate_activation`` and ``activation`` are kept but the step uses sigmoid and tanh.

    Args:
        hidden_size: H, an int.
        param_attr, bias_attr: the weight's and bias's attrs (Xavier and zeros by default).
        gate_activation, activation: kept, unused (above).
        forget_bias: added to the forget gate's input (default 1.0).
        dtype: "float32" or "float64", the parameters'.
        name: the prefix of the parameters' names.

    Call: ``cell(inputs, [h, c])`` with inputs [batch, input_size] and h, c [batch, H] returns
    ``(h_new, [h_new, c_new])``.

    Raises:
        TypeError: ``hidden_size`` is not an int, ``dtype`` not float32/float64, or (on a
            call) the states are not a list of two float Variables.

    Thread-safety: build programs from one thread.

    Example::

        cell = fluid.layers.LSTMCell(hidden_size=32)
        outputs, (h, c) = fluid.layers.rnn(cell, x)
    """

    def __init__(self, hidden_size, param_attr=None, bias_attr=None, gate_activation=None, activation=None,
                 forget_bias=1.0, dtype="float32", name="LSTMCell") -> None:
        check_type(hidden_size, "hidden_size", int, "LSTMCell")
        check_dtype(dtype, "dtype", list(_FLOATS), "LSTMCell")
        self.hidden_size = hidden_size
        self.lstm_unit = BasicLSTMUnit(name, hidden_size, param_attr, bias_attr, gate_activation, activation,
                                       forget_bias, dtype)

    def call(self, inputs, states):
        """``(h_new, [h_new, c_new])`` from ``inputs`` [batch, input_size] and ``states``
        ``[h, c]``, each [batch, H]."""
        check_variable_and_dtype(inputs, "inputs", list(_FLOATS), "LSTMCell")
        check_type(states, "states", (list, tuple), "LSTMCell")
        if len(states) != 2:
            raise TypeError(f"LSTMCell: states must be [hidden, cell], got {len(states)} states")
        for k, state in enumerate(states):
            check_variable_and_dtype(state, f"state[{k}]", list(_FLOATS), "LSTMCell")
        new_hidden, new_cell = self.lstm_unit(inputs, *states)
        return new_hidden, [new_hidden, new_cell]

    @property
    def state_shape(self):
        """``[[hidden_size], [hidden_size]]``: h's and c's shapes without the batch dim."""
        return [[self.hidden_size], [self.hidden_size]]


def _swap_batch_time(x):
    return manip.transpose(x, [1, 0] + list(range(2, len(x.shape))))


def _keep_finished(state, new_state, step_mask):
    """``new_state`` where the step's mask is 1, ``state`` where it is 0 (Fluid's formula)."""
    return nn.elementwise_sub(nn.elementwise_mul(new_state, step_mask, axis=0),
                              nn.elementwise_mul(state, step_mask - 1, axis=0))


def array_in_parent(dtype):
    """A tensor array of ``dtype`` made in the parent of the block being built: a loop's output
    array, made once the body has given the output's dtype (as Fluid's ``dynamic_decode`` does)."""
    program = default_main_program()
    inner = program.current_block_idx
    program.current_block_idx = program.current_block().parent_idx
    try:
        return create_array(dtype)
    finally:
        program.current_block_idx = inner


def _check_rnn_args(cell, inputs, initial_states, sequence_length) -> None:
    if not callable(getattr(cell, "call", None)):
        raise TypeError(f"rnn: cell must be an RNNCell (an object with a call method), got {type(cell).__name__}")
    check_type(inputs, "inputs", (Variable, list, tuple, dict), "rnn")
    for k, x in enumerate(flatten(inputs)):
        check_variable_and_dtype(x, f"inputs[{k}]", list(_FLOATS), "rnn")
        if len(x.shape) < 2:
            raise ValueError(f"rnn: inputs[{k}] {x.name!r} must have a batch and a time dim, got {list(x.shape)}")
    check_type(initial_states, "initial_states", (Variable, list, tuple, dict, type(None)), "rnn")
    for k, s in enumerate(flatten(initial_states) if initial_states is not None else ()):
        check_variable_and_dtype(s, f"initial_states[{k}]", list(_FLOATS), "rnn")
    check_type(sequence_length, "sequence_length", (Variable, type(None)), "rnn")
    if sequence_length is not None:
        check_variable_and_dtype(sequence_length, "sequence_length", ["int32", "int64"], "rnn")


def rnn(cell, inputs, initial_states=None, sequence_length=None, time_major=False, is_reverse=False, **kwargs):
    """Run ``cell`` over every time step of ``inputs``, Fluid 1.8's ``fluid.layers.rnn``, as a
    ``While`` loop whose number of steps is read at run time (NOTE(rnn-while)).

    Args:
        cell: an ``RNNCell`` (or an object with its ``call``).
        inputs: a float Variable or a structure of them, [batch, T, ...] (``time_major``:
            [T, batch, ...]); T may be unknown (-1) when the program is built.
        initial_states: the states at step 0, a Variable or a structure of them; None:
            ``cell.get_initial_states(inputs)``. Their ``stop_gradient`` is set False, as in
            Fluid.
        sequence_length: an int [batch] Variable, each sequence's length: past it a state
            keeps its value (the outputs there are still computed, from the padding). None:
            every step counts.
        time_major: the layout of ``inputs`` and the outputs.
        is_reverse: run from the last step to the first (the outputs keep the input's order).
        **kwargs: passed to ``cell.call`` at every step.

    Returns:
        ``(outputs, final_states)``: the cell's outputs stacked over time, [batch, T, ...]
        (``time_major``: [T, batch, ...]), in the structure the cell returns; and the states
        after the last step (with ``sequence_length``: each sequence's own last step).

    Raises:
        TypeError: ``cell`` has no ``call``, an input or state is not a float Variable, or
            ``sequence_length`` not an int Variable.
        ValueError: an input without a time dim, or the cell returns states of another
            structure.

    Thread-safety: build programs from one thread.

    Example::

        x = fluid.data("x", [None, None, 16], "float32")
        length = fluid.data("length", [None], "int64")
        outputs, last = fluid.layers.rnn(fluid.layers.GRUCell(32), x, sequence_length=length)
    """
    _check_rnn_args(cell, inputs, initial_states, sequence_length)
    if initial_states is None:
        initial_states = cell.get_initial_states(batch_ref=inputs, batch_dim_idx=1 if time_major else 0)
    for s in flatten(initial_states):
        s.stop_gradient = False
    if not time_major:
        inputs = map_structure(_swap_batch_time, inputs)
    mask = None
    if sequence_length is not None:
        steps = manip.shape(flatten(inputs)[0])[0]
        mask = manip.transpose(sequence_mask(sequence_length, maxlen=steps, dtype=flatten(initial_states)[0].dtype),
                               [1, 0])
    if is_reverse:
        inputs = map_structure(lambda x: manip.reverse(x, axis=[0]), inputs)
        mask = manip.reverse(mask, axis=[0]) if mask is not None else None
    outputs, final_states = _time_loop(cell, inputs, initial_states, mask, kwargs)
    if is_reverse:
        outputs = map_structure(lambda x: manip.reverse(x, axis=[0]), outputs)
    if not time_major:
        outputs = map_structure(_swap_batch_time, outputs)
    return outputs, final_states


def _time_loop(cell, inputs, initial_states, mask, kwargs):
    """The While loop of NOTE(rnn-while) over time-major ``inputs``: (stacked outputs, states)."""
    steps = tensor.cast(manip.shape(flatten(inputs)[0])[0], "int64")
    i = tensor.fill_constant([1], "int64", 0)
    states = map_structure(tensor.assign, initial_states)
    cond = ops.less_than(i, steps)
    loop = While(cond)
    with loop.block():
        step_inputs = map_structure(lambda x: manip.squeeze(manip.gather(x, i), [0]), inputs)
        outputs, new_states = cell.call(step_inputs, map_structure(lambda s: s, states), **kwargs)
        try:
            assert_same_structure(states, new_states)
        except (TypeError, ValueError) as e:
            raise ValueError(f"rnn: the cell's new states must have the structure of its states: {e}") from None
        if mask is not None:
            step_mask = manip.squeeze(manip.gather(mask, i), [0])
            new_states = map_structure(lambda s, n: _keep_finished(s, n, step_mask), states, new_states)
        arrays = map_structure(lambda o: array_in_parent(o.dtype), outputs)
        map_structure(lambda o, a: array_write(o, i, array=a), outputs, arrays)
        map_structure(lambda n, s: tensor.assign(n, s), new_states, states)
        ops.increment(i, in_place=True)
        ops.less_than(i, steps, cond=cond)
    stacked = map_structure(lambda a: tensor.tensor_array_to_tensor(a, axis=0, use_stack=True)[0], arrays)
    return stacked, states
