"""Fluid 1.8's ``fluid.contrib.layers.rnn_impl``: GRU and LSTM networks of several layers, one
or two directions, built from basic ops on ``fluid.layers.StaticRNN``.

``BasicGRUUnit`` and ``BasicLSTMUnit`` compute one time step (placegroup/layers/rnn_units.py, where
``fluid.layers.GRUCell`` and ``LSTMCell`` reach them too); ``basic_gru`` and ``basic_lstm``
run a stack of them over a [batch, T, input_size] (or [T, batch, input_size]) sequence. The
math, the defaults, the parameter names and shapes, and the initializers are Fluid 1.8.5's; so
are its quirks that a script's numbers or checkpoints depend on (each marked below).

NOTE(rnn-impl-unrolled): Fluid runs the stack as one ``recurrent`` op per direction; here the
StaticRNN is unrolled (NOTE(static-rnn-unroll) in placegroup/layers/static_rnn.py), so T, the
time dim of ``input``, must be known when the program is built, and the program holds T copies
of the step. Two consequences:

* the ``init_hidden``/``init_cell`` slices are taken outside the step (Fluid appends them to
  the global block too), since a memory's ``init`` must be made outside it;
* each time step draws its own dropout mask: the unroll gives each copy of a random op its own
  seed (NOTE(static-rnn-unroll)).

Building a program is single-threaded, as in Fluid.
"""
from __future__ import annotations

import warnings

from placegroup import layers
from placegroup.ir.framework import Variable
from placegroup.layers.rnn_units import BasicGRUUnit, BasicLSTMUnit, _renamed  # the units live below contrib
from placegroup.layers.static_rnn import StaticRNN  # Fluid binds it here too

__all__ = ["BasicGRUUnit", "basic_gru", "BasicLSTMUnit", "basic_lstm"]


def basic_gru(input, init_hidden, hidden_size, num_layers=1, sequence_length=None, dropout_prob=0.0,
              bidirectional=False, batch_first=True, param_attr=None, bias_attr=None, gate_activation=None,
              activation=None, dtype="float32", name="basic_gru"):
    """A GRU of ``num_layers`` ``BasicGRUUnit`` layers, one or two directions, Fluid 1.8's
    ``fluid.contrib.layers.basic_gru``, unrolled over T (NOTE(rnn-impl-unrolled)).

    Layer ``l`` reads layer ``l - 1``'s hidden states (the input for layer 0), after dropout.
    The units are named ``<name>_layers_<l>`` (forward) and ``<name>_reverse_layers_<l>``
    (backward), so the parameters are e.g. ``basic_gru_layers_0/BasicGRUUnit_0.w_0``
    (``BasicGRUUnit``); a named ``param_attr`` gives ``<name>_fw_w_<l>`` and ``<name>_bw_w_<l>``
    (then ``_gate``/``_candidate``), a named ``bias_attr`` ``<name>_fw_b_<l>``/``_bw_b_<l>``.

    With ``sequence_length``, step ``t`` of example ``b`` is padding when ``t >= length[b]``:
    there every layer keeps its previous state (output and last state hold the state of the last
    real step; the backward direction reads the reversed padded sequence, so its states stay at
    their init through the padding).

    Args:
        input: [batch, T, input_size] (``batch_first``) or [T, batch, input_size]; T and
            input_size known.
        init_hidden: [num_layers * D, batch, H] (D = 2 if ``bidirectional`` else 1; entry
            ``l * D + d`` is layer ``l``, direction ``d``), or None for zeros.
        hidden_size: H.
        num_layers: the number of layers.
        sequence_length: int32/int64 [batch], each example's length, or None (no padding).
        dropout_prob: the dropout after each layer's output (each step), ``downgrade_in_infer``
            as Fluid's default; not between time steps.
        bidirectional: add a backward direction, concatenated after the forward one.
        batch_first: the layout of ``input`` and of the output.
        param_attr, bias_attr, gate_activation, activation, dtype: each unit's (BasicGRUUnit).
        name: the prefix of the units' names.

    Returns:
        ``(rnn_out, last_hidden)``: rnn_out [batch, T, D * H] (or [T, batch, D * H]), the last
        layer's hidden states after dropout; last_hidden [num_layers * D, batch, H], each
        layer's and direction's state after the last step.

    Raises:
        ValueError: input not 3-D or its T or input_size unknown; init_hidden of another shape;
            hidden_size or num_layers not positive.
        TypeError: input is not a Variable.

    Thread-safety: build programs from one thread.

    Example::

        words = fluid.data("words", [None, 20, 1], "int64")
        lengths = fluid.data("lengths", [None], "int64")
        emb = fluid.layers.embedding(words, size=[1000, 64])          # [batch, 20, 64]
        out, last = fluid.contrib.layers.basic_gru(emb, None, 128, num_layers=2,
                                                    sequence_length=lengths, bidirectional=True)
        # out [batch, 20, 256], last [4, batch, 128]
    """
    where = f"basic_gru ({name})"
    _check_sizes(where, hidden_size, num_layers)
    direc = 2 if bidirectional else 1
    units = _units(direc, num_layers, name, param_attr, bias_attr, lambda n, p, b: BasicGRUUnit(
        n, hidden_size, p, b, gate_activation, activation, dtype))
    return _run(where, units, input, [init_hidden], hidden_size, sequence_length, dropout_prob, batch_first, dtype,
                "downgrade_in_infer")


def basic_lstm(input, init_hidden, init_cell, hidden_size, num_layers=1, sequence_length=None, dropout_prob=0.0,
               bidirectional=False, batch_first=True, param_attr=None, bias_attr=None, gate_activation=None,
               activation=None, forget_bias=1.0, dtype="float32", name="basic_lstm"):
    """An LSTM of ``num_layers`` ``BasicLSTMUnit`` layers, one or two directions, Fluid 1.8's
    ``fluid.contrib.layers.basic_lstm``, unrolled over T (NOTE(rnn-impl-unrolled)).

    As ``basic_gru``, with a cell state beside the hidden one and units ``BasicLSTMUnit``
    (parameters e.g. ``basic_lstm_layers_0/BasicLSTMUnit_0.w_0`` and ``.b_0``). Dropout is
    ``upscale_in_train`` here, as in Fluid. Fluid 1.8.5's quirk, kept for its parameter names:
    in the backward direction an unnamed ``bias_attr`` is replaced by ``param_attr``
    (NOTE(basic-lstm-bw-bias)).

    Args:
        input: [batch, T, input_size] (``batch_first``) or [T, batch, input_size]; T and
            input_size known.
        init_hidden, init_cell: [num_layers * D, batch, H] each (as ``basic_gru``'s
            init_hidden), or None for zeros. As in Fluid, ``init_cell`` is read only with an
            ``init_hidden`` (alone it is ignored, with a warning).
        hidden_size: H.
        num_layers, sequence_length, dropout_prob, bidirectional, batch_first: as ``basic_gru``.
        param_attr, bias_attr, gate_activation, activation, forget_bias, dtype: each unit's
            (BasicLSTMUnit).
        name: the prefix of the units' names.

    Returns:
        ``(rnn_out, last_hidden, last_cell)``: rnn_out [batch, T, D * H] (or [T, batch, D * H]);
        last_hidden and last_cell [num_layers * D, batch, H].

    Raises:
        ValueError: as ``basic_gru``; ``init_hidden`` without ``init_cell``.
        TypeError: input is not a Variable.

    Thread-safety: build programs from one thread.

    Example::

        words = fluid.data("words", [None, 20, 1], "int64")
        emb = fluid.layers.embedding(words, size=[1000, 64])          # [batch, 20, 64]
        out, last_h, last_c = fluid.contrib.layers.basic_lstm(emb, None, None, 128, num_layers=2)
        # out [batch, 20, 128], last_h and last_c [2, batch, 128]
    """
    where = f"basic_lstm ({name})"
    _check_sizes(where, hidden_size, num_layers)
    if init_hidden is not None and init_cell is None:
        raise ValueError(f"{where}: init_hidden is given but init_cell is None; give both, or neither for zeros")
    if init_hidden is None and init_cell is not None:
        warnings.warn(f"{where}: init_cell is ignored without init_hidden (as in Fluid 1.8); both start at zeros",
                      stacklevel=2)
    direc = 2 if bidirectional else 1

    # NOTE(basic-lstm-bw-bias): Fluid 1.8.5's basic_lstm gives a backward unit whose bias_attr
    # has no name ``param_attr`` itself as its bias_attr (a slip of its code: ``layer_bias_attr =
    # param_attr``). With a named param_attr, every backward layer's bias is then the parameter of
    # that very name, [4H], shared by those layers; with a param_attr initializer, the bias is
    # drawn from it. Kept, so that a script's parameters and checkpoints are Fluid's.
    def bw_bias(l):
        renamed = _renamed(bias_attr, f"_bw_b_{l}")  # a new object only for a named bias_attr
        return renamed if renamed is not bias_attr else param_attr

    units = _units(direc, num_layers, name, param_attr, bias_attr, lambda n, p, b: BasicLSTMUnit(
        n, hidden_size, p, b, gate_activation, activation, forget_bias, dtype), bw_bias=bw_bias)
    return _run(where, units, input, [init_hidden, init_cell if init_hidden is not None else None], hidden_size,
                sequence_length, dropout_prob, batch_first, dtype, "upscale_in_train")


def _check_sizes(where: str, hidden_size, num_layers) -> None:
    for arg, value in (("hidden_size", hidden_size), ("num_layers", num_layers)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{where}: {arg} must be a positive int, got {value!r}")


def _units(direc, num_layers, name, param_attr, bias_attr, make, bw_bias=None) -> list[list]:
    """The units, ``[direction][layer]``, made in Fluid's order (all forward layers first), so
    that their unique names are Fluid's."""
    units = []
    for d, (scope, tag) in enumerate([("_layers_", "fw"), ("_reverse_layers_", "bw")][:direc]):
        units.append([])
        for l in range(num_layers):
            bias = bw_bias(l) if d == 1 and bw_bias is not None else _renamed(bias_attr, f"_{tag}_b_{l}")
            units[d].append(make(f"{name}{scope}{l}", _renamed(param_attr, f"_{tag}_w_{l}"), bias))
    return units


def _run(where, units, input, inits, hidden_size, sequence_length, dropout_prob, batch_first, dtype, dropout_impl):
    """Both directions of a GRU (one state) or an LSTM (hidden, cell): ``(rnn_out, *last)``."""
    direc, num_layers = len(units), len(units[0])
    if not isinstance(input, Variable):
        raise TypeError(f"{where}: input must be a Variable, got {type(input).__name__}")
    shape = list(input.shape or [])
    time_dim = 1 if batch_first else 0
    if len(shape) != 3 or shape[time_dim] is None or shape[time_dim] <= 0:
        layout = "[batch, T, input_size]" if batch_first else "[T, batch, input_size]"
        raise ValueError(f"{where}: input must be {layout} (batch_first={batch_first}) with T known when the program "
                         f"is built (placegroup unrolls the RNN, as StaticRNN); input {input.name!r} has shape "
                         f"{shape}. Give it a fixed length")
    seq_len = int(shape[time_dim])
    if batch_first:
        input = layers.transpose(input, [1, 0, 2])
    mask = None
    if sequence_length is not None:
        mask = layers.transpose(layers.sequence_mask(sequence_length, maxlen=seq_len, dtype=dtype), [1, 0])
    names = ("init_hidden", "init_cell")
    inits = [None if init is None else layers.reshape(_checked_init(where, names[k], init, num_layers * direc,
                                                                    hidden_size, input.shape[1]),
                                                      shape=[num_layers, direc, -1, hidden_size])
             for k, init in enumerate(inits)]

    outs, lasts = [], []
    for d in range(direc):
        seq, step_mask = input, mask
        if d == 1:
            seq = layers.reverse(input, axis=[0])
            step_mask = None if mask is None else layers.reverse(mask, axis=[0])
        layer_inits = [[None if init is None else init[l, d] for init in inits] for l in range(num_layers)]
        out, last = _one_direction(units[d], seq, step_mask, layer_inits, hidden_size, dropout_prob, dropout_impl)
        outs.append(out if d == 0 else layers.reverse(out, axis=[0]))
        lasts.append(last)
    rnn_out = outs[0] if direc == 1 else layers.concat(outs, axis=2)
    if direc == 2:  # [L, B, H] twice -> [L, 2B, H] -> [2L, B, H]: layer l's forward, then its backward
        lasts = [layers.reshape(layers.concat([fw, bw], axis=1), shape=[num_layers * direc, -1, hidden_size])
                 for fw, bw in zip(*lasts)]
    else:
        lasts = lasts[0]
    if batch_first:
        rnn_out = layers.transpose(rnn_out, [1, 0, 2])
    return (rnn_out, *lasts)


def _checked_init(where, arg, init, rows, hidden_size, batch):
    shape = list(init.shape or []) if isinstance(init, Variable) else None
    want = [rows, batch if batch is not None and batch > 0 else -1, hidden_size]
    if shape is None or len(shape) != 3 or any(w > 0 and s is not None and s > 0 and s != w
                                                for s, w in zip(shape, want)):
        raise ValueError(f"{where}: {arg} must be [num_layers * num_directions, batch, hidden_size] = {want}; got "
                         f"{shape if shape is not None else type(init).__name__}"
                         f"{f' ({init.name!r})' if isinstance(init, Variable) else ''}")
    return init


def _one_direction(units, seq, mask, layer_inits, hidden_size, dropout_prob, dropout_impl):
    """One direction's StaticRNN over ``seq`` [T, B, I]: (the last layer's output [T, B, H] after
    dropout, each state's [L, B, H] at the last step)."""
    rnn = StaticRNN()
    n_states = len(layer_inits[0])
    with rnn.step():
        step_input = rnn.step_input(seq)
        step_mask = rnn.step_input(mask) if mask is not None else None
        for unit, inits in zip(units, layer_inits):
            pre = [rnn.memory(init=init) if init is not None else
                   rnn.memory(batch_ref=seq, shape=[-1, hidden_size], ref_batch_dim_idx=1) for init in inits]
            new = unit(step_input, *pre)
            new = list(new) if isinstance(new, tuple) else [new]
            if step_mask is not None:  # padding keeps the previous state: new * m - pre * (m - 1)
                new = [layers.elementwise_mul(n, step_mask, axis=0) - layers.elementwise_mul(p, step_mask - 1, axis=0)
                       for n, p in zip(new, pre)]
            for p, n in zip(pre, new):
                rnn.update_memory(p, n)
            rnn.output(*new)
            step_input = new[0]
            if dropout_prob is not None and dropout_prob > 0.0:
                step_input = layers.dropout(step_input, dropout_prob=dropout_prob,
                                            dropout_implementation=dropout_impl)
        rnn.step_output(step_input)
    outs = rnn()
    lasts = [layers.reshape(layers.concat([outs[l * n_states + k][-1] for l in range(len(units))], axis=0),
                            shape=[len(units), -1, hidden_size]) for k in range(n_states)]
    return outs[-1], lasts
