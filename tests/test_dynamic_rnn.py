"""DynamicRNN and its LoD machinery (placegroup/layers/dynamic_rnn.py, ops/lod_rank.py,
NOTE(rank-table)): the time-step ops against numpy, gradients through a DynamicRNN against float64
central differences, training against Fluid 1.8.5 (the book's attention decoder written the same
way: step inputs, a memory from a boot vector reordered by rank, static inputs that are sequences,
several outputs), and 2 trainers + 2 pservers equal to one process.
"""
import sys

import numpy as np
import pytest

import placegroup as fluid
from placegroup.backward import append_backward
from placegroup.values import LoDTensor
from tests.inproc import run_cluster, run_local
from tests.numeric import central_differences
from tests.paddle_ref.reference import SCRIPT_HEAD, run_reference

L = fluid.layers
LENGTHS = [3, 1, 4, 4, 2]


def _run(build, feed):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        outs = build()
    exe = fluid.Executor()
    exe.run(startup)
    return exe.run(main, feed=feed, fetch_list=outs, return_numpy=False)


def test_the_time_step_ops_cut_and_join_as_numpy_says():
    x = np.arange(14 * 2, dtype="float32").reshape(14, 2)
    boot = np.arange(5 * 3, dtype="float32").reshape(5, 3)
    seq = LoDTensor.from_lengths(x, [LENGTHS])

    def build():
        xs = L.data("x", [2], lod_level=1)
        b = L.data("boot", [3])
        table = L.control_flow.lod_rank_table(xs)
        steps = L.control_flow.lod_tensor_to_array(xs, table)
        i = L.fill_constant([1], "int64", 2)
        return [L.control_flow.max_sequence_len(table), L.array_read(steps, i),
                L.control_flow.array_to_lod_tensor(steps, table), L.control_flow.reorder_lod_tensor_by_rank(b, table),
                L.control_flow.shrink_memory(L.control_flow.reorder_lod_tensor_by_rank(b, table), i, table),
                L.control_flow.reorder_lod_tensor_by_rank(xs, table)]

    longest, step2, back, ranked, shrunk, seqs = _run(build, {"x": seq, "boot": boot})
    order = [2, 3, 0, 4, 1]  # longest first; equal lengths keep their order
    starts = np.cumsum([0] + LENGTHS)[:-1]
    np.testing.assert_array_equal(np.array(longest), [4])
    np.testing.assert_array_equal(np.array(step2), x[[starts[k] + 2 for k in order if LENGTHS[k] > 2]])
    np.testing.assert_array_equal(np.array(back), x)
    assert back.lod() == [list(np.cumsum([0] + LENGTHS))]
    np.testing.assert_array_equal(np.array(ranked), boot[order])
    np.testing.assert_array_equal(np.array(shrunk), boot[order][:3])
    np.testing.assert_array_equal(np.array(seqs), np.concatenate([x[starts[k]:starts[k] + LENGTHS[k]] for k in order]))
    assert seqs.recursive_sequence_lengths() == [[LENGTHS[k] for k in order]]


def _drnn_model(x, boot, ctx):
    """A DynamicRNN with a step input, a reordered boot memory, a memory of a value, a static input
    that is a batch of sequences (attention over it) and two outputs; the loss."""
    drnn = L.DynamicRNN()
    with drnn.block():
        word = drnn.step_input(x)
        mem = drnn.memory(init=boot, need_reorder=True)
        mem2 = drnn.memory(shape=[2], value=0.5, dtype=x.dtype)
        enc = drnn.static_input(ctx)
        state = L.fc(mem, 3, bias_attr=False, param_attr=fluid.ParamAttr(name="att_w"))
        weights = L.sequence_softmax(L.reduce_sum(L.elementwise_mul(L.sequence_expand(state, enc), enc), dim=1,
                                                  keep_dim=True))
        context = L.sequence_pool(L.elementwise_mul(enc, L.reshape(weights, [-1]), axis=0), "sum")
        h = L.fc([word, mem, context], 3, act="tanh", param_attr=[fluid.ParamAttr(name=n) for n in ("w1", "w2", "w3")],
                 bias_attr=fluid.ParamAttr(name="b"))
        h2 = L.fc([h, mem2], 2, act="sigmoid", param_attr=[fluid.ParamAttr(name="v1"), fluid.ParamAttr(name="v2")],
                  bias_attr=False)
        drnn.update_memory(mem, h)
        drnn.update_memory(mem2, h2)
        drnn.output(h, h2)
    hs, h2s = drnn()
    return L.sequence_last_step(hs), L.sequence_pool(h2s, "sum")


def test_gradients_through_a_dynamic_rnn_equal_central_differences():
    rng = np.random.default_rng(4)
    xv = rng.normal(size=(14, 2))
    bv = rng.normal(size=(5, 3))
    cv = rng.normal(size=(9, 3))
    ctx_lengths = [2, 1, 3, 1, 2]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", [2], dtype="float64", lod_level=1)
        boot = L.data("boot", [3], dtype="float64")
        ctx = L.data("ctx", [3], dtype="float64", lod_level=1)
        x.stop_gradient = boot.stop_gradient = False
        last, pooled = _drnn_model(x, boot, ctx)
        loss = L.mean(L.elementwise_mul(last, last)) + L.reduce_sum(L.sin(pooled))
        for p in main.global_block().all_parameters():
            p.dtype = "float64"
        append_backward(loss)
    scope, exe = fluid.Scope(), fluid.Executor()
    exe.run(startup, scope=scope)
    params = {p.name: rng.uniform(-0.5, 0.5, p.shape) for p in main.global_block().all_parameters()}
    for name, value in params.items():
        scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
    values = {"x": xv, "boot": bv, **params}

    def feed(vals):
        return {"x": LoDTensor.from_lengths(vals["x"], [LENGTHS]), "boot": vals["boot"],
                "ctx": LoDTensor.from_lengths(cv, [ctx_lengths])}

    def f(name, value):
        vals = {**values, name: value}
        if name in params:
            scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
        out = exe.run(main, feed=feed(vals), fetch_list=[loss], scope=scope)[0][0]
        if name in params:
            scope.find_var(name).get_tensor().set(params[name], fluid.CPUPlace())
        return out

    names = ["x", "boot", "att_w", "w1", "w3", "v2"]
    got = exe.run(main, feed=feed(values), fetch_list=[n + "@GRAD" for n in names], scope=scope, return_numpy=False)
    for name, grad in zip(names, got):
        numeric = central_differences(lambda v: f(name, v), values[name])
        np.testing.assert_allclose(np.array(grad), numeric, rtol=1e-6, atol=1e-9, err_msg=f"{name}@GRAD")


TRAIN = SCRIPT_HEAD + r'''
L = fluid.layers
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    words = L.data("words", [1], dtype="int64", lod_level=1)
    src = L.data("src", [1], dtype="int64", lod_level=1)
    y = L.data("y", [1], dtype="int64", lod_level=1)
    emb = L.embedding(words, size=[30, 6], is_sparse=True, param_attr=fluid.ParamAttr(name="emb"))
    enc = L.fc(L.embedding(src, size=[30, 6], param_attr=fluid.ParamAttr(name="src_emb")), 4, act="tanh",
               param_attr=fluid.ParamAttr(name="enc_w"), bias_attr=False)
    boot = L.fc(L.sequence_last_step(enc), 5, act="tanh", param_attr=fluid.ParamAttr(name="boot_w"), bias_attr=False)
    enc_proj = L.fc(enc, 5, bias_attr=False, param_attr=fluid.ParamAttr(name="proj_w"))
    drnn = L.DynamicRNN()
    with drnn.block():
        x = drnn.step_input(emb)
        pre = drnn.memory(init=boot, need_reorder=True)
        enc_in = drnn.static_input(enc)
        proj_in = drnn.static_input(enc_proj)
        state = L.fc(pre, 5, bias_attr=False, param_attr=fluid.ParamAttr(name="state_w"))
        mixed = L.elementwise_add(proj_in, L.sequence_expand(state, proj_in))
        att = L.sequence_softmax(L.fc(mixed, 1, bias_attr=False, param_attr=fluid.ParamAttr(name="att_w")))
        context = L.sequence_pool(L.elementwise_mul(enc_in, L.reshape(att, [-1]), axis=0), "sum")
        gates = L.fc([x, context], 15, bias_attr=False, param_attr=[fluid.ParamAttr(name="gx"), fluid.ParamAttr(name="gc")])
        out = L.gru_unit(gates, pre, 15, param_attr=fluid.ParamAttr(name="gru_w"), bias_attr=fluid.ParamAttr(name="gru_b"))[0]
        prob = L.fc(out, 30, act="softmax", param_attr=fluid.ParamAttr(name="out_w"), bias_attr=fluid.ParamAttr(name="out_b"))
        drnn.update_memory(pre, out)
        drnn.output(prob)
    cost = L.mean(L.cross_entropy(drnn(), y))
    fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(clip_norm=5.0))
    fluid.optimizer.Adam(learning_rate=0.02, regularization=fluid.regularizer.L2Decay(1e-4)).minimize(cost)
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
scope = fluid.global_scope()
rng = np.random.RandomState(3)
params = sorted(p.name for p in main.global_block().all_parameters())
for name in params:
    t = scope.find_var(name).get_tensor()
    t.set(rng.uniform(-0.3, 0.3, np.array(t).shape).astype("float32"), fluid.CPUPlace())
data, place, out = np.random.RandomState(1), fluid.CPUPlace(), {}
for step in range(5):
    src_len = [int(n) for n in data.randint(1, 6, 4)]
    trg_len = [int(n) for n in data.randint(1, 6, 4)]
    def ids(lens):
        return fluid.create_lod_tensor(data.randint(0, 30, (sum(lens), 1)).astype("int64"), [lens], place)
    out["loss%d" % step], = exe.run(main, feed={"src": ids(src_len), "words": ids(trg_len), "y": ids(trg_len)},
                                    fetch_list=[cost])
for name in params:
    out["p_" + name] = np.array(scope.find_var(name).get_tensor())
np.savez(spec["out"], **out)
'''


def test_an_attention_decoder_trains(tmp_path):
    ours = run_reference(sys.executable, TRAIN, tmp_path, None, framework="placegroup")
    losses = [float(ours[f"loss{k}"][0]) for k in range(5)]
    assert all(np.isfinite(losses)) and 3.0 < losses[0] < 3.8  # about log(30) at the start


@pytest.mark.paddle
def test_an_attention_decoder_trains_as_under_fluid_1_8_5(tmp_path, fluid18_python):
    """The book's machine-translation decoder, written the same way: Fluid 1.8.5 and placegroup
    give the same losses and trained parameters from the same initial values."""
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, TRAIN, tmp_path / "fluid", None, framework="fluid")
    ours = run_reference(sys.executable, TRAIN, tmp_path, None, framework="placegroup")
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-4, atol=1e-6, err_msg=key)


def _tagger():
    words = L.data("words", [1], dtype="int64", lod_level=1)
    y = L.data("y", [1], dtype="float32", lod_level=1)
    emb = L.embedding(words, size=[20, 4], param_attr=fluid.ParamAttr(name="emb"))
    drnn = L.DynamicRNN()
    with drnn.block():
        x = drnn.step_input(emb)
        mem = drnn.memory(shape=[3], value=0.0)
        h = L.fc([x, mem], 3, act="tanh", param_attr=[fluid.ParamAttr(name="wx"), fluid.ParamAttr(name="wh")])
        drnn.update_memory(mem, h)
        drnn.output(L.fc(h, 1, param_attr=fluid.ParamAttr(name="out_w")))
    cost = L.sequence_pool(L.square_error_cost(drnn(), y), "sum")  # per sequence, then the mean over them
    loss = L.mean(cost)
    fluid.optimizer.SGD(0.05).minimize(loss)
    return [words, y], loss


def test_a_dynamic_rnn_trains_as_2_trainers_and_2_pservers_equal_to_one_process():
    rng = np.random.default_rng(2)
    batches = []
    for _ in range(4):
        lengths = [int(n) for n in rng.integers(1, 6, 8)]
        n = sum(lengths)
        batches.append((LoDTensor.from_lengths(rng.integers(0, 20, (n, 1)).astype("int64"), [lengths]),
                        LoDTensor.from_lengths(rng.normal(size=(n, 1)).astype("float32"), [lengths])))
    local = run_local(_tagger, batches)
    cluster = run_cluster(_tagger, trainers=2, pservers=2, batches=batches)
    np.testing.assert_allclose(np.mean([cluster.losses[0], cluster.losses[1]], axis=0), local.losses[0], rtol=1e-5)
    for name, value in local.params[0].items():
        np.testing.assert_allclose(cluster.params[0][name], value, rtol=1e-5, atol=1e-7, err_msg=name)


def test_a_dynamic_rnn_trains_over_two_places_as_on_one():
    """CompiledProgram.with_data_parallel: each place runs the loop over its own sequences."""
    rng = np.random.default_rng(6)
    batches = []
    for _ in range(3):
        lengths = [int(n) for n in rng.integers(1, 6, 6)]
        n = sum(lengths)
        batches.append((LoDTensor.from_lengths(rng.integers(0, 20, (n, 1)).astype("int64"), [lengths]),
                        LoDTensor.from_lengths(rng.normal(size=(n, 1)).astype("float32"), [lengths])))
    one, two = run_local(_tagger, batches), run_local(_tagger, batches, places=2)
    for name, value in one.params[0].items():
        np.testing.assert_allclose(two.params[0][name], value, rtol=1e-5, atol=1e-7, err_msg=name)


def _seq2seq():
    """An attention decoder over an encoder's sequences, its loss a mean over sequences (each
    sequence's summed cross entropy), so that trainers fed halves of a batch average to it."""
    src = L.data("src", [1], dtype="int64", lod_level=1)
    words = L.data("words", [1], dtype="int64", lod_level=1)
    y = L.data("y", [1], dtype="int64", lod_level=1)
    enc = L.fc(L.embedding(src, size=[30, 6], param_attr=fluid.ParamAttr(name="src_emb")), 4, act="tanh",
               bias_attr=False)
    boot = L.fc(L.sequence_last_step(enc), 5, act="tanh", bias_attr=False)
    emb = L.embedding(words, size=[30, 6], param_attr=fluid.ParamAttr(name="emb"))
    drnn = L.DynamicRNN()
    with drnn.block():
        x = drnn.step_input(emb)
        pre = drnn.memory(init=boot, need_reorder=True)
        enc_in = drnn.static_input(enc)
        state = L.fc(pre, 4, bias_attr=False)
        att = L.sequence_softmax(L.reduce_sum(L.elementwise_mul(L.sequence_expand(state, enc_in), enc_in), dim=1,
                                              keep_dim=True))
        context = L.sequence_pool(L.elementwise_mul(enc_in, L.reshape(att, [-1]), axis=0), "sum")
        out = L.fc([x, context, pre], 5, act="tanh")
        drnn.update_memory(pre, out)
        drnn.output(L.fc(out, 30, act="softmax"))
    loss = L.mean(L.sequence_pool(L.cross_entropy(drnn(), y), "sum"))
    fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(clip_norm=5.0))
    fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    return [src, words, y], loss


def test_a_seq2seq_model_with_attention_trains_as_2_trainers_and_2_pservers_equal_to_one_process():
    rng = np.random.default_rng(5)
    batches = []
    for _ in range(4):
        src_len, trg_len = ([int(n) for n in rng.integers(1, 6, 8)] for _ in range(2))
        ids = [LoDTensor.from_lengths(rng.integers(0, 30, (sum(lens), 1)).astype("int64"), [lens])
               for lens in (src_len, trg_len, trg_len)]
        batches.append(tuple(ids))
    local = run_local(_seq2seq, batches)
    cluster = run_cluster(_seq2seq, trainers=2, pservers=2, batches=batches)
    np.testing.assert_allclose(np.mean([cluster.losses[0], cluster.losses[1]], axis=0), local.losses[0], rtol=1e-5)
    for name, value in local.params[0].items():
        np.testing.assert_allclose(cluster.params[0][name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_misuse_gets_fluids_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [2], lod_level=1)
        drnn = L.DynamicRNN()
        with pytest.raises(ValueError, match="step_input can only be invoked inside rnn block"):
            drnn.step_input(x)
        with pytest.raises(ValueError, match="can only be visited outside the rnn block"):
            drnn()
        with drnn.block():
            with pytest.raises(ValueError, match="step_input should be invoked before memory"):
                drnn.memory(shape=[2])
            with pytest.raises(RuntimeError, match="static_input\\(\\) must be called after step_input"):
                drnn.static_input(x)
            word = drnn.step_input(x)
            with pytest.raises(ValueError, match="Please invoke memory before update_memory"):
                drnn.update_memory(word, word)
            with pytest.raises(TypeError, match="must be a Variable"):
                drnn.memory(init=3.0)
            drnn.output(word)
        with pytest.raises(ValueError, match="can only be invoke once"):
            with drnn.block():
                pass
