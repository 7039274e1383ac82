"""Fluid 1.8's cell-based RNN and decoding API: ``GRUCell``, ``LSTMCell``, ``rnn`` (a While loop
over T read at run time, NOTE(rnn-while) in placegroup/layers/rnn_cells.py), ``dynamic_decode``
with ``BasicDecoder`` and its helpers and with ``BeamSearchDecoder`` (placegroup/layers/decoding.py),
and the ``gather_tree`` op (ops/gather_tree.py).

Checked against numpy (one cell step; ``rnn`` both layouts, reversed, masked by lengths; greedy
and beam-search decoding; gather_tree's backtrace), against float64 central differences (a
loss through two ``rnn`` loops, w.r.t. the parameters, the input and the initial states), on bad
input, and against Fluid 1.8.5: a seq2seq model trained 4 steps from the same parameters gives
the same per-step losses, parameter names and trained parameters, and greedy and beam-search
decoding from them the same ids.
"""
import sys

import numpy as np
import pytest

import placegroup as fluid
from placegroup.backward import append_backward
from placegroup.errors import OpError
from tests.numeric import central_differences
from tests.paddle_ref.reference import SCRIPT_HEAD, run_reference

L = fluid.layers


def _value(name) -> np.ndarray:
    return np.array(fluid.global_scope().find_var(name).get_tensor())


def _set(values: dict, scope=None) -> None:
    scope = scope or fluid.global_scope()
    for name, v in values.items():
        scope.find_var(name).get_tensor().set(v, fluid.CPUPlace())


def _random_params(program, rng, scale=0.5) -> dict:
    return {p.name: rng.uniform(-scale, scale, p.shape).astype(p.dtype)
            for p in program.global_block().all_parameters()}


# -- numpy references ------------------------------------------------------------------------

def _sig(v):
    return 1 / (1 + np.exp(-v))


def _np_gru(prefix):
    wg, wc, bg, bc = (_value(f"{prefix}.{k}") for k in ("w_0", "w_1", "b_0", "b_1"))

    def step(x, h):
        r, u = np.split(_sig(np.concatenate([x, h], 1) @ wg + bg), 2, axis=1)
        cand = np.tanh(np.concatenate([x, r * h], 1) @ wc + bc)
        return u * h + (1 - u) * cand
    return step


def _np_lstm(prefix, forget_bias=1.0):
    w, b = _value(f"{prefix}.w_0"), _value(f"{prefix}.b_0")

    def step(x, h, c):
        i, j, f, o = np.split(np.concatenate([x, h], 1) @ w + b, 4, axis=1)
        c = c * _sig(f + forget_bias) + _sig(i) * np.tanh(j)
        return np.tanh(c) * _sig(o), c
    return step


def _np_rnn(step, x, h0, lengths=None, reverse=False):
    """x [T, B, D] time-major, a GRU step h = step(x_t, h): (outputs [T, B, H], last h). Past a
    row's length its state stays; its output there is still the step's, as in Fluid."""
    T = x.shape[0]
    h, outs = h0, [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        outs[t] = step(x[t], h)
        h = outs[t] if lengths is None else np.where((t < lengths)[:, None], outs[t], h)
    return np.stack(outs), h


def _np_gather_tree(ids, parents):
    out = np.empty_like(ids)
    T, B, K = ids.shape
    for b in range(B):
        for k in range(K):
            out[T - 1, b, k] = ids[T - 1, b, k]
            p = parents[T - 1, b, k]
            for t in range(T - 2, -1, -1):
                out[t, b, k] = ids[t, b, p]
                p = parents[t, b, p]
    return out


def _log_softmax(v):
    v = v - v.max(-1, keepdims=True)
    return v - np.log(np.exp(v).sum(-1, keepdims=True))


def _np_greedy(gru, emb, w_out, h0, start, end, max_step):
    """BasicDecoder + GreedyEmbeddingHelper: (sample_ids [B, steps], lengths [B])."""
    B = h0.shape[0]
    h, tok = h0, np.full(B, start)
    finished, lengths, ids = np.zeros(B, bool), np.zeros(B, np.int64), []
    step = 0
    while True:
        h = gru(emb[tok], h)
        tok = np.argmax(h @ w_out, axis=-1)
        lengths += ~finished
        finished = finished | (tok == end)
        ids.append(tok)
        step += 1
        if finished.all() or step > max_step:
            return np.stack(ids, 1), lengths


def _np_beam(gru, emb, w_out, h0, start, end, beam, max_step):
    """BeamSearchDecoder under dynamic_decode: the backtraced ids [B, steps, beam] and the final
    scores [B, beam]."""
    B, H = h0.shape
    V = w_out.shape[1]
    h = np.repeat(h0[:, None], beam, 1)
    tok = np.full((B, beam), start)
    scores = np.tile(np.array([0.0] + [-1e9] * (beam - 1)), (B, 1))
    finished = np.zeros((B, beam), bool)
    noend = np.full(V, -1e9)
    noend[end] = 0
    ids, parents, rows = [], [], np.arange(B)[:, None]
    while True:
        h_new = gru(emb[tok].reshape(B * beam, -1), h.reshape(B * beam, H)).reshape(B, beam, H)
        lp = np.where(finished[..., None], noend, _log_softmax(h_new @ w_out)) + scores[..., None]
        flat = lp.reshape(B, beam * V)
        top = np.argsort(-flat, axis=1, kind="stable")[:, :beam]
        src, tok = top // V, top % V
        scores, h = flat[rows, top], h_new[rows, src]
        # NOTE(beam-finished): or-ed with the flags before the step, by position (Fluid 1.8.5)
        finished = finished[rows, src] | (tok == end) | finished
        ids.append(tok)
        parents.append(src)
        if finished.all() or len(ids) > max_step:
            return _np_gather_tree(np.stack(ids), np.stack(parents)).transpose(1, 0, 2), scores


# -- cells and rnn against numpy -------------------------------------------------------------

def test_one_gru_and_lstm_step_equal_numpy(fresh_programs):
    main, startup = fresh_programs
    x = fluid.data("x", [None, 3], "float32")
    h = fluid.data("h", [None, 4], "float32")
    c = fluid.data("c", [None, 4], "float32")
    gru = L.GRUCell(4)
    out, new = gru(x, h)
    assert out is new and gru.state_shape == [4]
    lstm = L.LSTMCell(4, forget_bias=0.5)
    lh, (lh2, lc) = lstm(x, [h, c])
    assert lh is lh2 and lstm.state_shape == [[4], [4]]
    names = [p.name for p in main.global_block().all_parameters()]
    assert names == ["GRUCell/BasicGRUUnit_0.w_0", "GRUCell/BasicGRUUnit_0.w_1", "GRUCell/BasicGRUUnit_0.b_0",
                     "GRUCell/BasicGRUUnit_0.b_1", "LSTMCell/BasicLSTMUnit_0.w_0", "LSTMCell/BasicLSTMUnit_0.b_0"]
    exe = fluid.Executor()
    exe.run(startup)
    rng = np.random.default_rng(0)
    _set(_random_params(main, rng))
    feed = {k: rng.uniform(-1, 1, (2, 3 if k == "x" else 4)).astype("float32") for k in ("x", "h", "c")}
    got = exe.run(main, feed=feed, fetch_list=[out, lh, lc])
    np.testing.assert_allclose(got[0], _np_gru("GRUCell/BasicGRUUnit_0")(feed["x"], feed["h"]), rtol=1e-5, atol=1e-6)
    want_h, want_c = _np_lstm("LSTMCell/BasicLSTMUnit_0", 0.5)(feed["x"], feed["h"], feed["c"])
    np.testing.assert_allclose(got[1], want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], want_c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("is_reverse", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_rnn_over_a_run_time_length_equals_numpy(fresh_programs, time_major, is_reverse, masked):
    main, startup = fresh_programs
    shape = [None, None, 3]  # T unknown when the program is built
    x = fluid.data("x", shape, "float32")
    lengths = fluid.data("len", [None], "int64")
    h0 = fluid.data("h0", [None, 4], "float32")
    outputs, last = L.rnn(L.GRUCell(4, name="g"), x, initial_states=h0, sequence_length=lengths if masked else None,
                          time_major=time_major, is_reverse=is_reverse)
    assert [op.type for op in main.global_block().ops].count("while") == 1
    exe = fluid.Executor()
    exe.run(startup)
    rng = np.random.default_rng(1)
    _set(_random_params(main, rng))
    step = _np_gru("g/BasicGRUUnit_0")
    for T in (3, 6):  # one program, two lengths
        xs = rng.uniform(-1, 1, (T, 3, 3)).astype("float32")  # time-major here
        lens = np.array([T, 1, T - 1])
        h0s = rng.uniform(-1, 1, (3, 4)).astype("float32")
        feed = {"x": xs if time_major else xs.transpose(1, 0, 2), "len": lens, "h0": h0s}
        got_out, got_last = exe.run(main, feed=feed, fetch_list=[outputs, last])
        want_out, want_last = _np_rnn(step, xs, h0s, lens if masked else None, is_reverse)
        np.testing.assert_allclose(got_out, want_out if time_major else want_out.transpose(1, 0, 2), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(got_last, want_last, rtol=1e-5, atol=1e-6)


def test_rnn_makes_zero_states_with_lstm_cells_and_keeps_the_callers_state(fresh_programs):
    main, startup = fresh_programs
    x = fluid.data("x", [None, None, 3], "float32")
    h0 = fluid.data("h0", [None, 4], "float32")
    c0 = L.fill_constant_batch_size_like(x, [-1, 4], "float32", 0.3)
    outputs, (h, c) = L.rnn(L.LSTMCell(4), x, initial_states=[h0, c0])
    zero_out, zero_states = L.rnn(L.LSTMCell(4, name="z"), x)  # states from get_initial_states
    assert isinstance(zero_states, list) and len(zero_states) == 2
    exe = fluid.Executor()
    exe.run(startup)
    rng = np.random.default_rng(2)
    _set(_random_params(main, rng))
    xs, h0s = rng.uniform(-1, 1, (2, 5, 3)).astype("float32"), rng.uniform(-1, 1, (2, 4)).astype("float32")
    got = dict(zip(["out", "h", "c", "zero", "h0", "c0"],
                   exe.run(main, feed={"x": xs, "h0": h0s}, fetch_list=[outputs, h, c, zero_out, h0, c0])))
    for prefix, hh, cc, key in (("LSTMCell/BasicLSTMUnit_0", h0s, np.full((2, 4), 0.3), "out"),
                                ("z/BasicLSTMUnit_0", np.zeros((2, 4)), np.zeros((2, 4)), "zero")):
        step, hs = _np_lstm(prefix), []
        for t in range(5):
            hh, cc = step(xs[:, t], hh, cc)
            hs.append(hh)
        np.testing.assert_allclose(got[key], np.stack(hs, 1), rtol=1e-5, atol=1e-6)
        if key == "out":
            np.testing.assert_allclose(got["h"], hh, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got["c"], cc, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["h0"], h0s)  # the loop overwrote copies, not the caller's vars
    np.testing.assert_allclose(got["c0"], 0.3)


# -- gradients against central differences ---------------------------------------------------

def test_gradients_through_rnn_equal_central_differences():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", [2, 4, 3], dtype="float64", append_batch_size=False)
        lengths = L.data("len", [2], dtype="int64", append_batch_size=False)
        h0 = L.data("h0", [2, 3], dtype="float64", append_batch_size=False)
        c0 = L.data("c0", [2, 3], dtype="float64", append_batch_size=False)
        for v in (x, h0, c0):
            v.stop_gradient = False
        out, (h, c) = L.rnn(L.LSTMCell(3, dtype="float64"), x, initial_states=[h0, c0], sequence_length=lengths,
                            is_reverse=True)
        out2, h2 = L.rnn(L.GRUCell(3, dtype="float64"), out,
                         initial_states=L.fill_constant_batch_size_like(x, [-1, 3], "float64", 0.1),
                         sequence_length=lengths)
        loss = L.mean(out2 * out2) + L.reduce_sum(h * c) + L.reduce_mean(h2)
        append_backward(loss)
    scope, exe = fluid.Scope(), fluid.Executor()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(3)
    params = _random_params(main, rng)
    _set(params, scope)
    feed = {"x": rng.uniform(-1, 1, (2, 4, 3)), "len": np.array([2, 4]), "h0": rng.uniform(-1, 1, (2, 3)),
            "c0": rng.uniform(-1, 1, (2, 3))}
    names = ["x", "h0", "c0", *params]
    got = exe.run(main, feed=feed, fetch_list=[loss] + [n + "@GRAD" for n in names], scope=scope)

    def f(which, value):
        fd = dict(feed)
        if which in fd:
            fd[which] = value
        else:
            _set({which: value}, scope)
        out = exe.run(main, feed=fd, fetch_list=[loss], scope=scope)[0]
        if which not in fd:
            _set({which: params[which]}, scope)
        return float(np.asarray(out).ravel()[0])

    for name, grad in zip(names, got[1:]):
        base = feed[name] if name in feed else params[name]
        numeric = central_differences(lambda v: f(name, v), base)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9, err_msg=f"{name}@GRAD")


# -- gather_tree and decoding against numpy --------------------------------------------------

def test_gather_tree_backtraces_as_numpy(fresh_programs):
    main, _ = fresh_programs
    ids = fluid.data("ids", [None, None, 3], "int64")
    parents = fluid.data("parents", [None, None, 3], "int64")
    out = L.gather_tree(ids, parents)
    assert L.nn.gather_tree is L.gather_tree
    exe = fluid.Executor()
    rng = np.random.default_rng(4)
    i, p = rng.integers(0, 9, (5, 4, 3)), rng.integers(0, 3, (5, 4, 3))
    np.testing.assert_array_equal(exe.run(main, feed={"ids": i, "parents": p}, fetch_list=[out])[0],
                                  _np_gather_tree(i, p))
    # Fluid's docstring example
    i = np.array([[[2, 2], [6, 1]], [[3, 9], [6, 1]], [[0, 1], [9, 0]]])
    p = np.array([[[0, 0], [1, 1]], [[1, 0], [1, 0]], [[0, 0], [0, 1]]])
    main2 = fluid.Program()
    with fluid.program_guard(main2):
        out2 = L.gather_tree(fluid.data("ids", [3, 2, 2], "int64"), fluid.data("parents", [3, 2, 2], "int64"))
    np.testing.assert_array_equal(exe.run(main2, feed={"ids": i, "parents": p}, fetch_list=[out2])[0],
                                  [[[2, 2], [1, 6]], [[3, 3], [6, 1]], [[0, 1], [9, 0]]])
    with pytest.raises(OpError, match="gather_tree: Parents holds 3, out of range for beam_size 2"):
        exe.run(main2, feed={"ids": i, "parents": np.where(p == 1, 3, p)}, fetch_list=[out2])


V, H, BEAM, END = 7, 5, 3, 1


def _decoders(h0, max_step):
    embed = lambda ids: fluid.embedding(ids, [V, H], param_attr=fluid.ParamAttr(name="emb"))
    project = lambda h: L.fc(h, V, num_flatten_dims=len(h.shape) - 1,
                             param_attr=fluid.ParamAttr(name="out_w"), bias_attr=False)
    cell = L.GRUCell(H, name="dec")
    start = L.fill_constant_batch_size_like(h0, [-1], "int64", 0)
    greedy = L.BasicDecoder(cell, L.GreedyEmbeddingHelper(embed, start, end_token=END), output_fn=project)
    outs, _, lengths = L.dynamic_decode(greedy, inits=h0, max_step_num=max_step, return_length=True)
    beam = L.BeamSearchDecoder(cell, start_token=0, end_token=END, beam_size=BEAM, embedding_fn=embed,
                               output_fn=project)
    ids, states = L.dynamic_decode(beam, inits=h0, max_step_num=max_step, is_test=True)
    return outs, lengths, ids, states


@pytest.mark.parametrize("max_step", [2, 8])
def test_greedy_and_beam_search_decoding_equal_numpy(fresh_programs, max_step):
    main, startup = fresh_programs
    h0 = fluid.data("h0", [None, H], "float32")
    outs, lengths, ids, states = _decoders(h0, max_step)
    exe = fluid.Executor()
    exe.run(startup)
    rng = np.random.default_rng(5)
    _set(_random_params(main, rng, scale=1.5))
    h0s = rng.uniform(-1, 1, (4, H)).astype("float32")
    got_ids, got_logits, got_len, got_beams, got_scores = exe.run(
        main, feed={"h0": h0s}, fetch_list=[outs.sample_ids, outs.cell_outputs, lengths, ids, states.log_probs])
    gru, emb, w_out = _np_gru("dec/BasicGRUUnit_0"), _value("emb"), _value("out_w")
    want_ids, want_len = _np_greedy(gru, emb, w_out, h0s, 0, END, max_step)
    np.testing.assert_array_equal(got_ids, want_ids)
    np.testing.assert_array_equal(got_len, want_len)
    assert got_logits.shape == want_ids.shape + (V,)
    want_beams, want_scores = _np_beam(gru, emb, w_out, h0s, 0, END, BEAM, max_step)
    np.testing.assert_array_equal(got_beams, want_beams)
    np.testing.assert_allclose(got_scores, want_scores, rtol=1e-5)


def test_sampling_at_a_low_temperature_picks_the_argmax(fresh_programs):
    main, startup = fresh_programs
    h0 = fluid.data("h0", [None, H], "float32")
    embed = lambda ids: fluid.embedding(ids, [V, H], param_attr=fluid.ParamAttr(name="emb"))
    project = lambda h: L.fc(h, V, param_attr=fluid.ParamAttr(name="out_w"), bias_attr=False)
    start = L.fill_constant_batch_size_like(h0, [-1], "int64", 0)
    got = []
    for temperature in (1e-4, None):
        helper = L.SampleEmbeddingHelper(embed, start, END, softmax_temperature=temperature, seed=3)
        decoder = L.BasicDecoder(L.GRUCell(H, name="dec"), helper, output_fn=project)
        got.append(L.dynamic_decode(decoder, inits=h0, max_step_num=5)[0].sample_ids)
    exe = fluid.Executor()
    exe.run(startup)
    rng = np.random.default_rng(8)
    _set(_random_params(main, rng, scale=1.5))
    h0s = rng.uniform(-1, 1, (4, H)).astype("float32")
    cold, warm = exe.run(main, feed={"h0": h0s}, fetch_list=got)
    want, _ = _np_greedy(_np_gru("dec/BasicGRUUnit_0"), _value("emb"), _value("out_w"), h0s, 0, END, 5)
    np.testing.assert_array_equal(cold, want)
    assert warm.dtype == np.int64 and ((warm >= 0) & (warm < V)).all()


def test_training_helper_decodes_the_given_steps_and_beam_tiling(fresh_programs):
    main, startup = fresh_programs
    trg = fluid.data("trg", [None, None, 3], "float32")
    lengths = fluid.data("len", [None], "int64")
    cell = L.GRUCell(4, name="t")
    decoder = L.BasicDecoder(cell, L.TrainingHelper(trg, lengths))
    outs, last = L.dynamic_decode(decoder, inits=cell.get_initial_states(trg), impute_finished=True)
    tiled = L.BeamSearchDecoder.tile_beam_merge_with_batch(trg, 2)
    exe = fluid.Executor()
    exe.run(startup)
    rng = np.random.default_rng(6)
    _set(_random_params(main, rng))
    xs, lens = rng.uniform(-1, 1, (3, 4, 3)).astype("float32"), np.array([4, 2, 3])
    got_out, got_last, got_tiled = exe.run(main, feed={"trg": xs, "len": lens},
                                           fetch_list=[outs.cell_outputs, last, tiled])
    want_out, want_last = _np_rnn(_np_gru("t/BasicGRUUnit_0"), xs.transpose(1, 0, 2), np.zeros((3, 4)), lens)
    np.testing.assert_allclose(got_last, want_last, rtol=1e-5, atol=1e-6)  # each row's state at its length
    for b, n in enumerate(lens):
        np.testing.assert_allclose(got_out[b, :n], want_out[:n, b], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got_tiled, np.repeat(xs, 2, axis=0))


# -- bad input -------------------------------------------------------------------------------

class _WrongStates(L.RNNCell):
    def call(self, inputs, states):
        return inputs, [states, states]


@pytest.mark.parametrize("build, exc, match", [
    (lambda x: L.rnn(object(), x), TypeError, "rnn: cell must be an RNNCell"),
    (lambda x: L.rnn(L.GRUCell(4), L.cast(x, "int64")), TypeError, "The data type of 'inputs\\[0\\]' in rnn"),
    (lambda x: L.rnn(L.GRUCell(4), L.reduce_sum(x, dim=[1, 2])), ValueError, "must have a batch and a time dim"),
    (lambda x: L.rnn(L.GRUCell(4), x, sequence_length=L.reduce_sum(x, dim=[1, 2])), TypeError,
     "'sequence_length' in rnn"),
    (lambda x: L.rnn(_WrongStates(), x, initial_states=L.reduce_sum(x, dim=1)), ValueError,
     "the cell's new states must have the structure of its states"),
    (lambda x: L.rnn(L.RNNCell(), x), NotImplementedError, "state_shape"),
    (lambda x: L.GRUCell(4.0), TypeError, "The type of 'hidden_size' in GRUCell"),
    (lambda x: L.LSTMCell(4, dtype="int32"), TypeError, "The data type of 'dtype' in LSTMCell"),
    (lambda x: L.LSTMCell(4)(L.reduce_sum(x, dim=1), [L.reduce_sum(x, dim=1)]), TypeError,
     "LSTMCell: states must be \\[hidden, cell\\]"),
    (lambda x: L.GRUCell(4).get_initial_states(x, shape=[[4, "a"]]), TypeError, "a state's shape must be"),
    (lambda x: L.gather_tree(x, x), TypeError, "The data type of 'ids' in gather_tree"),
    (lambda x: L.dynamic_decode(object()), TypeError, "dynamic_decode: decoder must be a Decoder"),
    (lambda x: L.dynamic_decode(L.BasicDecoder(L.GRUCell(4), None), max_step_num=-1), ValueError,
     "max_step_num must be an int >= 0"),
    (lambda x: L.Decoder().step(None, x, x), NotImplementedError, None),
    (lambda x: L.GreedyEmbeddingHelper("emb", L.cast(x, "int64"), 1), TypeError, "embedding_fn must be callable"),
    (lambda x: L.TrainingHelper(x, x), TypeError, "'sequence_length' in TrainingHelper"),
])
def test_bad_input_says_what_is_wrong(fresh_programs, build, exc, match):
    x = fluid.data("x", [None, None, 3], "float32")
    with pytest.raises(exc, match=match):
        build(x)


def test_a_beam_search_vocabulary_must_hold_the_end_token(fresh_programs):
    h0 = fluid.data("h0", [None, 4], "float32")
    decoder = L.BeamSearchDecoder(L.GRUCell(4), start_token=0, end_token=6, beam_size=2,
                                  embedding_fn=lambda ids: fluid.embedding(ids, [6, 4]),
                                  output_fn=lambda h: L.fc(h, 6, num_flatten_dims=2))
    with pytest.raises(ValueError, match="end_token 6 is not an id of the vocabulary of 6"):
        L.dynamic_decode(decoder, inits=h0, max_step_num=3)


# -- against Fluid 1.8.5 ---------------------------------------------------------------------

# A seq2seq model: GRU encoder over padded source with lengths, GRU decoder with teacher forcing
# (rnn over the target's embeddings from the encoder's last state, or dynamic_decode with a
# TrainingHelper), masked softmax cross-entropy, Adam; then greedy and beam-search decoding
# from the trained parameters, built in a program of its own with the same names.
SEQ2SEQ = SCRIPT_HEAD + r'''
L = fluid.layers
d = np.load(spec["data"])
SV, TV, E, H, BEAM = spec["src_vocab"], spec["trg_vocab"], spec["emb"], spec["hidden"], spec["beam"]


def encoder(src, src_len):
    emb = fluid.embedding(src, [SV, E], param_attr=fluid.ParamAttr(name="src_emb"))
    return L.rnn(L.GRUCell(H, name="enc"), emb, sequence_length=src_len)[1]


def trg_embed(ids):
    return fluid.embedding(ids, [TV, E], param_attr=fluid.ParamAttr(name="trg_emb"))


def project(h):
    return L.fc(h, TV, num_flatten_dims=len(h.shape) - 1, param_attr=fluid.ParamAttr(name="out_w"),
                bias_attr=fluid.ParamAttr(name="out_b"))


main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup), fluid.unique_name.guard():
    src = fluid.data("src", [None, None], "int64")
    src_len = fluid.data("src_len", [None], "int64")
    trg = fluid.data("trg", [None, None], "int64")
    label = fluid.data("label", [None, None], "int64")
    trg_len = fluid.data("trg_len", [None], "int64")
    state = encoder(src, src_len)
    cell = L.GRUCell(H, name="dec")
    if spec["decoder"] == "rnn":
        dec_out, _ = L.rnn(cell, trg_embed(trg), initial_states=state, sequence_length=trg_len)
        logits = project(dec_out)
    else:
        helper = L.TrainingHelper(trg_embed(trg), trg_len)
        outs, _ = L.dynamic_decode(L.BasicDecoder(cell, helper, output_fn=project), inits=state)
        logits = outs.cell_outputs
    ce = L.softmax_with_cross_entropy(logits, L.unsqueeze(label, [2]))
    mask = L.sequence_mask(trg_len, maxlen=L.shape(trg)[1], dtype="float32")
    loss = L.reduce_sum(L.squeeze(ce, [2]) * mask) / L.reduce_sum(mask)
    fluid.optimizer.Adam(learning_rate=0.05).minimize(loss)

infer, infer_startup = fluid.Program(), fluid.Program()
with fluid.program_guard(infer, infer_startup), fluid.unique_name.guard():
    src = fluid.data("src", [None, None], "int64")
    src_len = fluid.data("src_len", [None], "int64")
    state = encoder(src, src_len)
    cell = L.GRUCell(H, name="dec")
    beam = L.BeamSearchDecoder(cell, start_token=0, end_token=1, beam_size=BEAM, embedding_fn=trg_embed,
                               output_fn=project)
    ids, beam_states = L.dynamic_decode(beam, inits=state, max_step_num=spec["max_step"], is_test=True)
    start = L.fill_constant_batch_size_like(state, [-1], "int64", 0)
    greedy = L.BasicDecoder(cell, L.GreedyEmbeddingHelper(trg_embed, start, end_token=1), output_fn=project)
    outs, _, lengths = L.dynamic_decode(greedy, inits=state, max_step_num=spec["max_step"], impute_finished=True,
                                        return_length=True)

place = fluid.CPUPlace()
exe = fluid.Executor(place)
exe.run(startup)
names = sorted(p.name for p in main.global_block().all_parameters())
assert names == sorted(k[2:] for k in d.files if k.startswith("p/")), names
assert sorted(p.name for p in infer.global_block().all_parameters()) == names
for n in names:
    fluid.global_scope().find_var(n).get_tensor().set(d["p/" + n], place)
losses = []
for i in range(spec["iters"]):
    feed = {k: d[k + str(i)] for k in ("src", "src_len", "trg", "label", "trg_len")}
    losses.append(exe.run(main, feed=feed, fetch_list=[loss])[0])
out = {"losses": np.array(losses).reshape(-1)}
out.update({"p/" + n: np.array(fluid.global_scope().find_var(n).get_tensor()) for n in names})
got = exe.run(infer, feed={"src": d["src_test"], "src_len": d["src_len_test"]},
              fetch_list=[ids, beam_states.log_probs, outs.sample_ids, lengths])
out.update(beam_ids=got[0], beam_scores=got[1], greedy_ids=got[2], greedy_len=got[3])
np.savez(spec["out"], **out)
'''
S2S = {"src_vocab": 10, "trg_vocab": 9, "emb": 6, "hidden": 8, "beam": 3, "iters": 4, "max_step": 7}


def _s2s_data(batch=4):
    rng = np.random.default_rng(7)
    SV, TV, E, H = S2S["src_vocab"], S2S["trg_vocab"], S2S["emb"], S2S["hidden"]
    shapes = {"src_emb": (SV, E), "trg_emb": (TV, E), "out_w": (H, TV), "out_b": (TV,)}
    for cell in ("enc", "dec"):
        shapes.update({f"{cell}/BasicGRUUnit_0.w_0": (E + H, 2 * H), f"{cell}/BasicGRUUnit_0.w_1": (E + H, H),
                       f"{cell}/BasicGRUUnit_0.b_0": (2 * H,), f"{cell}/BasicGRUUnit_0.b_1": (H,)})
    data = {"p/" + n: rng.uniform(-0.5, 0.5, s).astype("float32") for n, s in shapes.items()}
    for i in range(S2S["iters"]):
        ts, tt = 5 + i % 2, 4 + i % 3  # each batch's own padded lengths
        data[f"src{i}"] = rng.integers(2, SV, (batch, ts)).astype("int64")
        data[f"src_len{i}"] = np.array([ts] + list(rng.integers(1, ts + 1, batch - 1))).astype("int64")
        data[f"trg{i}"] = rng.integers(2, TV, (batch, tt)).astype("int64")
        data[f"trg{i}"][:, 0] = 0  # the start token
        data[f"label{i}"] = rng.integers(1, TV, (batch, tt)).astype("int64")
        data[f"trg_len{i}"] = np.array([tt] + list(rng.integers(1, tt + 1, batch - 1))).astype("int64")
        data[f"label{i}"][0, tt - 1] = 1  # the longest sentence ends with the end token: decoding ends sometimes
    data["src_test"] = rng.integers(2, SV, (5, 6)).astype("int64")
    data["src_len_test"] = np.array([6, 3, 5, 1, 4]).astype("int64")
    return data


def _no_close_scores(ours) -> None:
    """The decoded ids compare only where no two candidates' scores tie; random float parameters
    keep them apart by far more than 1e-6, which this checks on the survivors' final scores."""
    scores = np.sort(ours["beam_scores"], axis=1)
    assert (np.diff(scores, axis=1) > 1e-6).all(), scores


@pytest.mark.parametrize("decoder", ["rnn", "dynamic_decode"])
def test_a_seq2seq_model_trains_and_decodes(tmp_path, decoder):
    ours = run_reference(sys.executable, SEQ2SEQ, tmp_path, _s2s_data(), framework="placegroup", decoder=decoder,
                         **S2S)
    assert ours["losses"].shape == (S2S["iters"],) and np.isfinite(ours["losses"]).all()
    assert not np.array_equal(ours["p/dec/BasicGRUUnit_0.w_0"], _s2s_data()["p/dec/BasicGRUUnit_0.w_0"])
    assert ours["beam_ids"].shape[0] == 5 and ours["beam_ids"].shape[2] == S2S["beam"]
    assert ours["beam_ids"].shape[1] <= S2S["max_step"] + 1


@pytest.mark.paddle
@pytest.mark.parametrize("decoder", ["rnn", "dynamic_decode"])
def test_a_seq2seq_model_trains_and_decodes_as_in_fluid_1_8_5(tmp_path, fluid18_python, decoder):
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, SEQ2SEQ, tmp_path / "fluid", _s2s_data(), framework="fluid",
                           decoder=decoder, **S2S)
    ours = run_reference(sys.executable, SEQ2SEQ, tmp_path, _s2s_data(), framework="placegroup", decoder=decoder,
                         **S2S)
    assert sorted(ours) == sorted(theirs)  # the same parameter names
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=1e-4)
    for key in theirs:
        if key.startswith("p/"):
            np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-4, atol=1e-5, err_msg=key)
    _no_close_scores(ours)
    for key in ("beam_ids", "greedy_ids", "greedy_len"):
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)
    np.testing.assert_allclose(ours["beam_scores"], theirs["beam_scores"], rtol=1e-4)
