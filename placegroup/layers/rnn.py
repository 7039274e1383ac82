"""Recurrent layers, Fluid 1.8 signatures: ``dynamic_lstm``, ``dynamic_lstmp`` and
``dynamic_gru`` over LoD sequences, ``lstm_unit`` and ``gru_unit`` for one dense step (ops/rnn.py
and ops/lstmp.py have the kernels and the gate layouts, NOTE(rnn-gates)), and ``lstm``, Fluid's
cuDNN LSTM over a padded time-major batch (ops/cudnn_lstm.py, NOTE(cudnn-lstm-layout)).

The sequence layers take input that is already projected to the gates (an ``fc`` of width
4 * hidden or 3 * hidden before them) and hold only the recurrent weight and the bias, named
as Fluid names them (``lstm_0.w_0``, ``lstm_0.b_0``, ``gru_0.w_0``, ...), so initial values
set by name carry over. Building is single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    words = fluid.layers.data("words", shape=[1], dtype="int64", lod_level=1)
    emb = fluid.layers.embedding(words, size=[1000, 16])
    hidden, cell = fluid.layers.dynamic_lstm(fluid.layers.fc(emb, 4 * 32), size=4 * 32)
    sentence = fluid.layers.sequence_pool(hidden, "max")
"""
from __future__ import annotations

from placegroup.ir.framework import Variable
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers.nn import fc
from placegroup.layers.tensor import _op_seed, concat
from placegroup.ops.cudnn_lstm import weight_size
from placegroup.model.param_attr import ParamAttr

__all__ = ["dynamic_lstm", "dynamic_gru", "lstm_unit", "gru_unit", "dynamic_lstmp", "lstm", "beam_search",
           "beam_search_decode"]


def _check_float(layer: str, slot: str, v) -> None:
    if v.dtype not in ("float32", "float64"):
        raise TypeError(f"{layer}: {slot} {v.name!r} must be float32 or float64, got {v.dtype}")


def _check_init(layer: str, slot: str, v, size: int) -> None:
    if v is None:
        return
    _check_float(layer, slot, v)
    if len(v.shape) != 2 or v.shape[1] != size:
        raise ValueError(f"{layer}: {slot} {v.name!r} must be [batch_size, {size}], got {list(v.shape)}")


def dynamic_lstm(input, size: int, h_0=None, c_0=None, param_attr=None, bias_attr=None, use_peepholes: bool = True,
                 is_reverse: bool = False, gate_activation: str = "sigmoid", cell_activation: str = "tanh",
                 candidate_activation: str = "tanh", dtype: str = "float32", name=None):
    """An LSTM over each sequence of a 1-level LoD tensor (Fluid's ``lstm`` op).

    Gates are ordered [candidate, input, forget, output]; with peepholes the bias is
    [1, 7 * hidden] and its last 3 * hidden numbers are the diagonal cell-to-gate weights.

    Args:
        input: the projected input, [T, 4 * hidden], lod_level 1, float32 or float64.
        size: 4 * hidden (Fluid's convention: the width of ``input``).
        h_0, c_0: optional initial hidden and cell states, [batch_size, hidden], one row per
            sequence; both or neither.
        param_attr: the recurrent weight [hidden, 4 * hidden] (Xavier by default).
        bias_attr: the bias (zeros by default); it may not be False.
        use_peepholes, is_reverse, gate_activation, cell_activation, candidate_activation:
            as Fluid ("sigmoid", "tanh", "relu" or "identity").
        dtype: the parameters' dtype.

    Returns:
        (hidden, cell): [T, hidden] each, with the input's LoD.

    Raises:
        ValueError: bias_attr False, size not a multiple of 4 or not the input's width, or
            h_0/c_0 of the wrong shape or only one of them.

    Example::

        hidden, cell = fluid.layers.dynamic_lstm(fluid.layers.fc(emb, 128), size=128, use_peepholes=False)
    """
    if bias_attr is False:
        raise ValueError("dynamic_lstm: bias_attr should not be False (the lstm op needs its bias)")
    _check_float("dynamic_lstm", "input", input)
    if size % 4 or input.shape[-1] != size:
        raise ValueError(f"dynamic_lstm: size must be 4 * hidden size and input's width, "
                         f"got size={size} for input {input.name!r}{list(input.shape)}")
    if (h_0 is None) != (c_0 is None):
        raise ValueError("dynamic_lstm: h_0 and c_0 can be None only at the same time")
    helper = LayerHelper("lstm", name=name)
    d = size // 4
    _check_init("dynamic_lstm", "h_0", h_0, d)
    _check_init("dynamic_lstm", "c_0", c_0, d)
    weight = helper.create_parameter(param_attr, [d, 4 * d], dtype)
    bias = helper.create_parameter(bias_attr, [1, (7 if use_peepholes else 4) * d], dtype, is_bias=True)
    outs = {slot: [helper.create_variable_for_type_inference(dtype)]
            for slot in ("Hidden", "Cell", "BatchGate", "BatchCellPreAct")}
    inputs = {"Input": [input], "Weight": [weight], "Bias": [bias]}
    if h_0 is not None:
        inputs["H0"], inputs["C0"] = [h_0], [c_0]
    helper.append_op("lstm", inputs, outs,
                     {"use_peepholes": use_peepholes, "is_reverse": is_reverse, "gate_activation": gate_activation,
                      "cell_activation": cell_activation, "candidate_activation": candidate_activation})
    return outs["Hidden"][0], outs["Cell"][0]


def dynamic_gru(input, size: int, param_attr=None, bias_attr=None, is_reverse: bool = False,
                gate_activation: str = "sigmoid", candidate_activation: str = "tanh", h_0=None,
                origin_mode: bool = False):
    """A GRU over each sequence of a 1-level LoD tensor (Fluid's ``gru`` op).

    Gates are ordered [update, reset, candidate]; the weight [hidden, 3 * hidden] is read as
    Fluid reads its memory: the first 2 * hidden² numbers are the [hidden, 2 * hidden] gate
    weight, the rest the [hidden, hidden] candidate weight (NOTE(rnn-gates) in ops/rnn.py).

    Args:
        input: the projected input, [T, 3 * hidden], lod_level 1, float32 or float64.
        size: the hidden size (unlike dynamic_lstm's, not the input's width).
        param_attr: the weight [hidden, 3 * hidden] (Xavier by default).
        bias_attr: the bias [1, 3 * hidden] (zeros by default; False: none).
        is_reverse, gate_activation, candidate_activation: as Fluid ("sigmoid", "tanh", "relu"
            or "identity").
        h_0: optional initial hidden state [batch_size, hidden], one row per sequence.
        origin_mode: h = u * h_prev + (1 - u) * c (Cho et al.) instead of
            (1 - u) * h_prev + u * c.

    Returns:
        hidden: [T, hidden], with the input's LoD.

    Raises:
        ValueError: the input's width is not 3 * size, or h_0 has the wrong shape.

    Example::

        hidden = fluid.layers.dynamic_gru(fluid.layers.fc(emb, 3 * 32), size=32)
    """
    _check_float("dynamic_gru", "input", input)
    if input.shape[-1] != 3 * size:
        raise ValueError(f"dynamic_gru: input's width must be 3 * size = {3 * size}, "
                         f"got input {input.name!r}{list(input.shape)}")
    _check_init("dynamic_gru", "h_0", h_0, size)
    helper = LayerHelper("gru")
    dtype = input.dtype
    weight = helper.create_parameter(param_attr, [size, 3 * size], dtype)
    bias = helper.create_parameter(bias_attr, [1, 3 * size], dtype, is_bias=True)
    inputs = {"Input": [input], "Weight": [weight]}
    if bias is not None:
        inputs["Bias"] = [bias]
    if h_0 is not None:
        inputs["H0"] = [h_0]
    outs = {slot: [helper.create_variable_for_type_inference(dtype)]
            for slot in ("Hidden", "BatchGate", "BatchResetHiddenPrev", "BatchHidden")}
    helper.append_op("gru", inputs, outs, {"is_reverse": is_reverse, "gate_activation": gate_activation,
                                           "activation": candidate_activation, "origin_mode": origin_mode})
    return outs["Hidden"][0]


def lstm_unit(x_t, hidden_t_prev, cell_t_prev, forget_bias: float = 0.0, param_attr=None, bias_attr=None,
              name=None):
    """One LSTM step on dense tensors: ``fc([x_t, hidden_t_prev]) -> lstm_unit`` as in Fluid.

    The fc (``fc_N.w_0``/``fc_N.b_0``) gives [N, 4 * D] gates ordered [input, forget,
    output, candidate]; ``forget_bias`` is added to the forget gate.

    Args:
        x_t: the input [N, M]; hidden_t_prev, cell_t_prev: the previous states [N, D].
        forget_bias: added to the forget gate before its sigmoid.
        param_attr, bias_attr: the fc's weight and bias (a bias is always made).

    Returns:
        (h, c): the new hidden and cell states, [N, D] each.

    Raises:
        ValueError: a rank other than 2, or batch or state sizes that disagree.

    Example::

        h, c = fluid.layers.lstm_unit(x, pre_hidden, pre_cell)
    """
    for slot, v in (("x_t", x_t), ("hidden_t_prev", hidden_t_prev), ("cell_t_prev", cell_t_prev)):
        _check_float("lstm_unit", slot, v)
        if len(v.shape) != 2:
            raise ValueError(f"lstm_unit: rank of {slot} must be 2, got {v.name!r}{list(v.shape)}")
    if x_t.shape[0] != hidden_t_prev.shape[0] or x_t.shape[0] != cell_t_prev.shape[0]:
        raise ValueError(f"lstm_unit: the 1st dimensions of x_t, hidden_t_prev and cell_t_prev must be the same, "
                         f"got {list(x_t.shape)}, {list(hidden_t_prev.shape)}, {list(cell_t_prev.shape)}")
    if hidden_t_prev.shape[1] != cell_t_prev.shape[1]:
        raise ValueError(f"lstm_unit: the 2nd dimensions of hidden_t_prev and cell_t_prev must be the same, "
                         f"got {list(hidden_t_prev.shape)} and {list(cell_t_prev.shape)}")
    helper = LayerHelper("lstm_unit", name=name)
    size = cell_t_prev.shape[1]
    gates = fc(concat([x_t, hidden_t_prev], axis=1), 4 * size, param_attr=param_attr,
               bias_attr=ParamAttr() if bias_attr is None else bias_attr)
    c = helper.create_variable_for_type_inference(x_t.dtype)
    h = helper.create_variable_for_type_inference(x_t.dtype)
    helper.append_op("lstm_unit", {"X": [gates], "C_prev": [cell_t_prev]}, {"C": [c], "H": [h]},
                     {"forget_bias": float(forget_bias)})
    return h, c


_UNIT_ACTS = {"identity": 0, "sigmoid": 1, "tanh": 2, "relu": 3}


def gru_unit(input, hidden, size: int, param_attr=None, bias_attr=None, activation: str = "tanh",
             gate_activation: str = "sigmoid", origin_mode: bool = False):
    """One GRU step on dense tensors (Fluid's ``gru_unit`` op).

    NOTE(gru-unit-acts): Fluid 1.8's layer checks ``activation`` and ``gate_activation``
    against its table and then appends the op with tanh and sigmoid whatever they say; so
    does this one, so programs give Fluid's numbers. The op itself honours its int attrs.

    Args:
        input: the projected input [N, 3 * D] (gates [update, reset, candidate]).
        hidden: the previous hidden state [N, D].
        size: 3 * D (Fluid's convention).
        param_attr: the weight [D, 3 * D], read as flat memory (NOTE(rnn-gates) in ops/rnn.py).
        bias_attr: the bias [1, 3 * D]; False: none.
        activation, gate_activation: "identity", "sigmoid", "tanh" or "relu" (see the note).
        origin_mode: h = u * h_prev + (1 - u) * c instead of (1 - u) * h_prev + u * c.

    Returns:
        (hidden, reset_hidden_prev, gate): [N, D], [N, D] and [N, 3 * D].

    Raises:
        ValueError: an unknown activation, or size not 3 * the hidden width.

    Example::

        h, _, _ = fluid.layers.gru_unit(fluid.layers.fc(x, 3 * 32), pre_hidden, size=3 * 32)
    """
    _check_float("gru_unit", "input", input)
    _check_float("gru_unit", "hidden", hidden)
    for k, v in (("activation", activation), ("gate_activation", gate_activation)):
        if v not in _UNIT_ACTS:
            raise ValueError(f"gru_unit: {k} {v!r} is not one of {list(_UNIT_ACTS)}")
    if size % 3 or hidden.shape[-1] != size // 3:
        raise ValueError(f"gru_unit: size must be 3 * hidden's width, got size={size} for hidden "
                         f"{hidden.name!r}{list(hidden.shape)}")
    helper = LayerHelper("gru_unit")
    dtype = input.dtype
    d = size // 3
    weight = helper.create_parameter(param_attr, [d, 3 * d], dtype)
    inputs = {"Input": [input], "HiddenPrev": [hidden], "Weight": [weight]}
    bias = helper.create_parameter(bias_attr, [1, 3 * d], dtype, is_bias=True)
    if bias is not None:
        inputs["Bias"] = [bias]
    outs = {slot: [helper.create_variable_for_type_inference(dtype)] for slot in ("Gate", "ResetHiddenPrev", "Hidden")}
    helper.append_op("gru_unit", inputs, outs, {"activation": 2, "gate_activation": 1, "origin_mode": origin_mode})
    return outs["Hidden"][0], outs["ResetHiddenPrev"][0], outs["Gate"][0]


def dynamic_lstmp(input, size: int, proj_size: int, param_attr=None, bias_attr=None, use_peepholes: bool = True,
                  is_reverse: bool = False, gate_activation: str = "sigmoid", cell_activation: str = "tanh",
                  candidate_activation: str = "tanh", proj_activation: str = "tanh", dtype: str = "float32",
                  name=None, h_0=None, c_0=None, cell_clip=None, proj_clip=None):
    """An LSTM with a recurrent projection (LSTMP, Sak et al. 2014) over each sequence of a
    1-level LoD tensor (Fluid's ``lstmp`` op, NOTE(lstmp-1.8) in ops/lstmp.py).

    The hidden state h [D] is projected to r = act(h W_rh) [P], and r (not h) feeds the gates
    of the next step. As in Fluid 1.8, ``act`` is ``cell_activation`` whenever
    ``proj_activation`` is not "identity". The parameters are ``lstmp_<n>.w_0`` [P, 4D] (the
    recurrent weight), ``lstmp_<n>.w_1`` [D, P] (the projection, made with the same
    ``param_attr``, so a named attr clashes, as in Fluid) and ``lstmp_<n>.b_0`` [1, 7D] (4D
    without peepholes).

    Args:
        input: the projected input [T, 4D], lod_level 1, float32 or float64.
        size: 4D (Fluid's convention: the input's width).
        proj_size: P.
        param_attr, bias_attr: the weights' and the bias's attrs; bias_attr may not be False.
        use_peepholes, is_reverse, gate_activation, cell_activation, candidate_activation,
            proj_activation: as Fluid ("sigmoid", "tanh", "relu" or "identity").
        dtype: the parameters' dtype.
        name: the layer's name (default ``lstmp_<n>``).
        h_0, c_0: optional initial states [batch, P] and [batch, D], one row per sequence.
        cell_clip, proj_clip: clip the cell state / the projection to [-clip, clip] (None: no
            clipping).

    Returns:
        (projection, cell): [T, P] and [T, D], with the input's LoD.

    Raises:
        ValueError: bias_attr False, a size that is not the input's width or not a multiple
            of 4, an initial state of the wrong shape, or a negative clip.
        TypeError: a non-float input or initial state.

    Example::

        proj, cell = fluid.layers.dynamic_lstmp(fluid.layers.fc(emb, 4 * 512), size=4 * 512, proj_size=256)
    """
    if bias_attr is False:
        raise ValueError("dynamic_lstmp: bias_attr should not be False (the lstmp op needs its bias)")
    _check_float("dynamic_lstmp", "input", input)
    if size % 4 or input.shape[-1] != size:
        raise ValueError(f"dynamic_lstmp: size must be 4 * hidden size and input's width, "
                         f"got size={size} for input {input.name!r}{list(input.shape)}")
    d = size // 4
    _check_init("dynamic_lstmp", "h_0", h_0, proj_size)
    _check_init("dynamic_lstmp", "c_0", c_0, d)
    for k, v in (("cell_clip", cell_clip), ("proj_clip", proj_clip)):
        if v is not None and v < 0:
            raise ValueError(f"dynamic_lstmp: {k} should not be negative, got {v}")
    helper = LayerHelper("lstmp", name=name)
    weight = helper.create_parameter(param_attr, [proj_size, 4 * d], dtype)
    proj_weight = helper.create_parameter(param_attr, [d, proj_size], dtype)
    bias = helper.create_parameter(bias_attr, [1, (7 if use_peepholes else 4) * d], dtype, is_bias=True)
    outs = {slot: [helper.create_variable_for_type_inference(dtype)]
            for slot in ("Projection", "Cell", "BatchGate", "BatchCellPreAct", "BatchHidden")}
    inputs = {"Input": [input], "Weight": [weight], "ProjWeight": [proj_weight], "Bias": [bias]}
    if h_0 is not None:
        inputs["H0"] = [h_0]
    if c_0 is not None:
        inputs["C0"] = [c_0]
    helper.append_op("lstmp", inputs, outs,
                     {"use_peepholes": use_peepholes, "is_reverse": is_reverse, "cell_clip": float(cell_clip or 0.0),
                      "proj_clip": float(proj_clip or 0.0), "gate_activation": gate_activation,
                      "cell_activation": cell_activation, "candidate_activation": candidate_activation,
                      "proj_activation": proj_activation})
    return outs["Projection"][0], outs["Cell"][0]


def lstm(input, init_h, init_c, max_len: int, hidden_size: int, num_layers: int, dropout_prob: float = 0.0,
         is_bidirec: bool = False, is_test: bool = False, name=None, default_initializer=None, seed: int = -1):
    """A multi-layer (optionally bidirectional) LSTM over a padded, time-major batch: Fluid
    1.8's cuDNN LSTM (``cudnn_lstm`` op), here on any device (NOTE(cudnn-lstm-layout) in
    ops/cudnn_lstm.py).

    All the weights are one flat parameter ``cudnn_lstm_<n>.w_0`` in cuDNN's layout, so a
    weight saved by Fluid runs here unchanged. No peepholes.

    Args:
        input: [seq_len, batch, input_size] (time major), float32 or float64.
        init_h, init_c: [num_layers * dirs, batch, hidden_size] (dirs = 2 when bidirectional).
        max_len: the most steps ``input`` may have.
        hidden_size, num_layers: the LSTM's size.
        dropout_prob: dropout between layers (never after the last), in training.
        is_bidirec: run each layer in both directions and concatenate them.
        is_test: no dropout.
        name: the layer's name (default ``cudnn_lstm_<n>``).
        default_initializer: the weight's initializer (Xavier by default).
        seed: the dropout masks' seed; -1: one of the op's own (NOTE(layer-seeds) in
            placegroup/layers/tensor.py).

    Returns:
        (out, last_h, last_c): [seq_len, batch, dirs * hidden_size], and the last hidden and
        cell states [num_layers * dirs, batch, hidden_size].

    Raises:
        TypeError: a non-float input or state, or a size that is not an int.

    Example::

        init = fluid.layers.fill_constant([1, 20, 150], "float32", 0.0)
        out, last_h, last_c = fluid.layers.lstm(emb, init, init, max_len=100, hidden_size=150, num_layers=1)
    """
    for slot, v in (("input", input), ("init_h", init_h), ("init_c", init_c)):
        if not isinstance(v, Variable):
            raise TypeError(f"The type of '{slot}' in lstm must be Variable, but received {type(v).__name__}")
        _check_float("lstm", slot, v)
    for k, v in (("max_len", max_len), ("hidden_size", hidden_size), ("num_layers", num_layers)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"The type of '{k}' in lstm must be int, but received {type(v).__name__}")
    helper = LayerHelper("cudnn_lstm", name=name)
    dtype = input.dtype
    input_size = input.shape[-1]
    weight = helper.create_parameter(None, [weight_size(input_size, hidden_size, num_layers, is_bidirec)], dtype,
                                     default_initializer=default_initializer)
    if seed == -1:
        program = helper.main_program
        k = sum(op.type == "cudnn_lstm" for b in program.blocks for op in b.ops)
        seed = program.random_seed or _op_seed(0, "cudnn_lstm", k)
    out, last_h, last_c = (helper.create_variable_for_type_inference(dtype) for _ in range(3))
    helper.append_op("cudnn_lstm", {"Input": [input], "InitH": [init_h], "InitC": [init_c], "W": [weight]},
                     {"Out": [out], "last_h": [last_h], "last_c": [last_c]},
                     {"max_len": max_len, "is_bidirec": is_bidirec, "input_size": input_size,
                      "hidden_size": hidden_size, "num_layers": num_layers, "is_test": is_test,
                      "dropout_prob": float(dropout_prob), "seed": int(seed)})
    return out, last_h, last_c


# -- beam search over LoD tensors (ops/beam_search.py) ------------------------------------------


def _check_var(layer: str, slot: str, v, dtypes: tuple) -> None:
    if not isinstance(v, Variable):
        raise TypeError(f"{layer}: {slot} must be a Variable, got {type(v).__name__}")
    if v.dtype not in dtypes:
        raise TypeError(f"{layer}: {slot} {v.name!r} must be {' or '.join(dtypes)}, got {v.dtype}")


def beam_search(pre_ids, pre_scores, ids, scores, beam_size: int, end_id: int, level: int = 0,
                is_accumulated: bool = True, name=None, return_parent_idx: bool = False):
    """One step of beam search over LoD tensors (Fluid 1.8's ``beam_search`` op): the
    ``beam_size`` best candidates of each source sentence, with the LoD the next step reads.

    The inputs' rows are the prefixes of this step, their 2-level LoD [sources, prefixes of the
    step before]: at the first step ``[[0, 1, ..., n], [0, 1, ..., n]]`` (one prefix per source),
    later the ``selected_ids`` of the step before (NOTE(beam-lod) in ops/beam_search.py). A prefix
    whose ``pre_ids`` is ``end_id`` has ended and offers only ``end_id`` at its own score; a source
    whose kept candidates all extend ended prefixes is dropped (0 candidates), so
    ``is_empty(selected_ids)`` says when every source has finished (NOTE(beam-select)).

    Args:
        pre_ids: the ids chosen at the step before, int64 [rows, 1], lod_level 2.
        pre_scores: their accumulated scores, float32 [rows, 1], the LoD of ``pre_ids``.
        ids: the candidate ids, int64 [rows, K] (``topk``'s indices), or None: column d is id d.
        scores: the candidates' scores, float32 [rows, K], with the 2-level LoD (``lod_reset``
            to ``pre_ids``): accumulated (``log(p) + pre_scores``) when ``is_accumulated``, else
            probabilities whose log the op adds to ``pre_scores``.
        beam_size: candidates kept per source, >= 1.
        end_id: the end-of-sentence id.
        level: the LoD level of ``scores`` that groups its rows by source (keep 0).
        is_accumulated: whether ``scores`` are accumulated log scores.
        name: unused, as in Fluid.
        return_parent_idx: also return each kept candidate's row (int32 [n]), for ``gather``.

    Returns:
        ``(selected_ids, selected_scores)``, int64 and float32 [n, 1] with LoD [row offsets of
        the sources, kept candidates per row], and ``parent_idx`` when asked for.

    Raises:
        TypeError: an input of the wrong type or dtype.
        ValueError: ``beam_size`` < 1; at run time, inputs whose rows or LoD do not agree.

    Example::

        topk_scores, topk_ids = fluid.layers.topk(prob, k=beam_size)
        accu = fluid.layers.elementwise_add(fluid.layers.log(topk_scores),
                                            fluid.layers.reshape(pre_score, [-1]), axis=0)
        accu = fluid.layers.lod_reset(accu, y=pre_ids)
        ids, scores = fluid.layers.beam_search(pre_ids, pre_score, topk_ids, accu, beam_size, end_id=1)
    """
    _check_var("beam_search", "pre_ids", pre_ids, ("int64",))
    _check_var("beam_search", "pre_scores", pre_scores, ("float32", "float64"))
    if ids is not None:
        _check_var("beam_search", "ids", ids, ("int64",))
    _check_var("beam_search", "scores", scores, ("float32", "float64"))
    if int(beam_size) < 1:
        raise ValueError(f"beam_search: beam_size must be >= 1, got {beam_size!r}")
    helper = LayerHelper("beam_search", name=name)
    inputs = {"pre_ids": [pre_ids], "pre_scores": [pre_scores], "scores": [scores]}
    if ids is not None:
        inputs["ids"] = [ids]
    selected_scores = helper.create_variable_for_type_inference(pre_scores.dtype)
    selected_ids = helper.create_variable_for_type_inference(pre_ids.dtype)
    parent_idx = helper.create_variable_for_type_inference("int32")
    helper.append_op("beam_search", inputs, {"selected_ids": [selected_ids], "selected_scores": [selected_scores],
                                             "parent_idx": [parent_idx]},
                     {"level": int(level), "beam_size": int(beam_size), "end_id": int(end_id),
                      "is_accumulated": bool(is_accumulated)})
    if return_parent_idx:
        return selected_ids, selected_scores, parent_idx
    return selected_ids, selected_scores


def beam_search_decode(ids, scores, beam_size: int, end_id: int, name=None):
    """The sentences a beam search found (Fluid 1.8's ``beam_search_decode`` op), read back
    from the tensor arrays of its steps' ``selected_ids`` and ``selected_scores``.

    Each source's sentences run from step 0's token (the start id) to their end, an end token
    repeated by an ended prefix kept once, and come best first by their last accumulated score
    (NOTE(beam-decode) in ops/beam_search.py).

    Args:
        ids: a tensor array (``create_array``/``array_write``) of the steps' ids, int64, each
            with the 2-level LoD of ``beam_search``'s output; step 0 is the start ids.
        scores: the tensor array of their scores, float32, one per step of ``ids``.
        beam_size: the search's beam size (a source may have at most this many sentences).
        end_id: the end-of-sentence id.
        name: unused, as in Fluid.

    Returns:
        ``(sentence_ids, sentence_scores)``: int64 and float32, 1-D, with LoD [[sentences per
        source], [tokens per sentence]]; each token's score is the accumulated one.

    Raises:
        TypeError: an input of the wrong type or dtype.
        ValueError: at run time, steps whose LoDs do not chain, or a source with more than
            ``beam_size`` candidates.

    Example::

        sentences, sentence_scores = fluid.layers.beam_search_decode(ids_array, scores_array,
                                                                     beam_size=3, end_id=1)
    """
    _check_var("beam_search_decode", "ids", ids, ("int64",))
    _check_var("beam_search_decode", "scores", scores, ("float32",))
    helper = LayerHelper("beam_search_decode", name=name)
    sentence_ids = helper.create_variable_for_type_inference(ids.dtype)
    sentence_scores = helper.create_variable_for_type_inference(scores.dtype)
    helper.append_op("beam_search_decode", {"Ids": [ids], "Scores": [scores]},
                     {"SentenceIds": [sentence_ids], "SentenceScores": [sentence_scores]},
                     {"beam_size": int(beam_size), "end_id": int(end_id)})
    return sentence_ids, sentence_scores
