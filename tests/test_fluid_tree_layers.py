"""The Fluid 1.8.5 names of the Fluid-tree layers task, used as a user would: each layer built
and run through the executor (with ``append_backward`` where it has a gradient), the
evaluators over several batches, the contrib modules, and the names bound where Fluid binds
them.

Numbers marked "Fluid 1.8.5" come from running real PaddlePaddle 1.8.5 (CPU) on the same
inputs: the deterministic ``_det`` arrays and ``_cot`` cotangents below, the loss being
``sum(out * cot)`` summed over the outputs listed, so each gradient is that of the sum. The
op kernels themselves are checked against loop references in tests/cases/sequence_more.py,
rnn_more.py and contrib.py (tests/test_ops.py).
"""
from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from placegroup.util.var_format import read as _read

L = fluid.layers


def _det(shape, k: float = 0.0, scale: float = 0.9) -> np.ndarray:
    """The deterministic inputs the Fluid 1.8.5 runs used."""
    n = int(np.prod(shape))
    return (np.sin(np.arange(n) * 0.37 + k) * scale).reshape(shape).astype(np.float32)


def _cot(shape) -> np.ndarray:
    """The cotangent the Fluid 1.8.5 runs put on each output."""
    return np.cos(np.arange(int(np.prod(shape))) * 0.29 + 5.0).reshape(shape).astype(np.float32)


def _run(outs, feed, grads=(), params=None):
    """Run the default programs: the outputs, then the gradients of sum(out * cot) of ``grads``
    (a first run finds the outputs' run-time shapes for their cotangents)."""
    main, startup = fluid.default_main_program(), fluid.default_startup_program()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    for name, value in (params or {}).items():
        fluid.global_scope().var(name).get_tensor().set(value, fluid.CPUPlace())
    if grads:
        shapes = [np.asarray(getattr(r, "data", r)).shape
                  for r in exe.run(main, feed=feed, fetch_list=list(outs), return_numpy=False)]
        total = None
        for k, (o, shape) in enumerate(zip(outs, shapes)):
            c = L.data(f"cot{k}", shape=[-1] + list(shape[1:]), dtype=o.dtype, append_batch_size=False)
            feed = {**feed, f"cot{k}": _cot(shape)}
            t = L.reduce_sum(L.elementwise_mul(o, c))
            total = t if total is None else L.elementwise_add(total, t)
        fluid.backward.append_backward(total)
    res = exe.run(main, feed=feed, fetch_list=list(outs) + [g + "@GRAD" for g in grads], return_numpy=False)
    return [np.asarray(getattr(r, "data", r)) for r in res], res


def _lod(values, lengths):
    return fluid.create_lod_tensor(np.asarray(values), [list(lengths)], fluid.CPUPlace())


def _close(got, want, atol=2e-6):
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64), rtol=1e-5,
                               atol=atol)


# Outputs and gradients from real PaddlePaddle Fluid 1.8.5 (CPU) on the _det inputs and _cot cotangents (rounded to
# 1e-6); the decay_* entries are the weights after 3 steps of the decoupled-decay optimizers.
FLUID_1_8_5 = {'row_conv': {'out': [[1.033967, 1.133441], [1.254733, 1.379098], [0.678784, 0.762989],
                      [0.542932, 0.415947], [-0.779241, -0.936933], [-1.130127, -1.327276],
                      [-0.656462, -0.789947]],
              'dx': [[0.214824, 0.481548], [0.829326, 1.229398], [1.585136, 1.718262], [0.679669, 0.647201],
                     [0.385451, 0.213043], [0.416688, -0.104231], [-0.203119, -0.891674]],
              'dw': [[2.608353, 3.022601], [0.652997, 1.353779], [-0.186935, 0.256015]]},
 'im2sequence': {'out': [[0.0, 0.0, 0.0, 0.325454, 0.0, 0.0, -0.319728, 0.006133],
                         [0.0, 0.0, 0.325454, 0.606859, 0.0, 0.0, 0.006133, 0.331164],
                         [0.0, 0.0, 0.606859, 0.806129, 0.0, 0.0, 0.331164, 0.611374],
                         [0.0, 0.0, 0.806129, 0.0, 0.0, 0.0, 0.611374, 0.0],
                         [0.896293, 0.865148, 0.162537, -0.168565, 0.808837, 0.896828, 0.466405, 0.156501],
                         [0.865148, 0.716909, -0.168565, -0.476853, 0.896828, 0.863437, 0.156501,
                          -0.174586],
                         [0.716909, 0.47164, -0.476853, -0.7206, 0.863437, 0.713184, -0.174586, -0.482043],
                         [0.47164, 0.0, -0.7206, 0.0, 0.713184, 0.0, -0.482043, 0.0]],
                 'lod': [[0, 8]],
                 'dx': [[[[0.762786, 0.869844, -1.029857, 0.532936],
                          [-0.142348, -1.047272, 0.618479, 0.204835],
                          [-0.661512, -0.946934, 0.985892, -0.39596], [0.0, 0.0, 0.0, 0.0]],
                         [[0.897462, -0.200347, -0.622179, 1.047823],
                          [-0.964312, -0.536878, 1.030844, -0.867247],
                          [-0.95171, 0.048777, 0.738634, -1.054879], [0.0, 0.0, 0.0, 0.0]]]]},
 'cross_entropy2': {'out': [[1.535372], [2.245295], [0.0], [1.060349]],
                    'dx': [[0.0, 0.0, -1.317059], [-5.156217, 0.0, 0.0], [0.0, 0.0, 0.0],
                           [0.0, -2.644395, 0.0]]},
 'lstmp_default': {'proj': [[0.014046, 0.006937], [0.131203, 0.110096], [-0.041153, -0.028893],
                            [0.142866, 0.108171], [-0.051177, -0.0314]],
                   'cell': [[-0.017861, -0.064087], [-0.292459, 0.014118], [0.134283, 0.082606],
                            [-0.2638, -0.084004], [0.124701, 0.196297]],
                   'grads': {'x': [[-0.31951, -0.123623, 0.007284, 0.010944, -0.0, -0.0, 0.002047,
                                    0.003113],
                                   [-0.356988, -0.181631, 0.065398, -0.004184, 0.001925, 0.002318, 0.03508,
                                    -0.00085],
                                   [-0.459201, -0.198891, -0.062649, -0.018164, -0.0, -0.0, -0.034357,
                                    -0.008904],
                                   [-0.276797, -0.208324, 0.11613, 0.014432, -0.01856, -0.004132, 0.031095,
                                    0.004955],
                                   [-0.070971, -0.02686, -0.017638, -0.006316, 0.010353, 0.001249,
                                    -0.012187, -0.008216]],
                             'lstmp_0.w_0': [[-0.003762, 0.002185, -0.00638, -0.001555, 0.00227, 0.000381,
                                              -0.002528, -0.00139],
                                             [-0.002156, 0.001854, -0.00481, -0.001129, 0.00167, 0.000271,
                                              -0.001973, -0.001038]],
                             'lstmp_0.w_1': [[-0.292161, -0.302843], [0.005449, -0.000909]],
                             'lstmp_0.b_0': [[-1.483468, -0.739329, 0.108524, -0.003287, -0.006282,
                                              -0.000565, 0.021677, -0.009902, 0.019079, 0.001991, -0.005258,
                                              -0.000595, -0.024632, -0.002976]]}},
 'lstmp_clip_relu': {'proj': [[0.013836, 0.006856], [0.127693, 0.107227], [-0.042723, -0.030042],
                              [0.137003, 0.103488], [-0.057542, -0.035748]],
                     'cell': [[-0.017861, -0.064087], [-0.292891, 0.014457], [0.134283, 0.082606],
                              [-0.257744, -0.083218], [0.13902, 0.198253]],
                     'grads': {'x': [[-0.313469, -0.121467, 0.007146, 0.010753, -0.0, -0.0, 0.00204,
                                      0.003087],
                                     [-0.338846, -0.182691, 0.061866, -0.0042, 0.001827, 0.002364, 0.038626,
                                      -0.000867],
                                     [-0.482422, -0.204905, -0.065817, -0.018713, -0.0, -0.0, -0.034749,
                                      -0.008957],
                                     [-0.26207, -0.207304, 0.112207, 0.014386, -0.017622, -0.004043,
                                      0.033241, 0.005079],
                                     [-0.07848, -0.031192, -0.018754, -0.00733, 0.010876, 0.001431,
                                      -0.013707, -0.008521]],
                               'lstmp_0.w_0': [[-0.004244, 0.002056, -0.006507, -0.001677, 0.002268,
                                                0.000402, -0.002764, -0.001396],
                                               [-0.002572, 0.001747, -0.004888, -0.00122, 0.001667,
                                                0.000286, -0.002152, -0.00104]],
                               'lstmp_0.w_1': [[-0.274123, -0.285851], [0.010785, 0.003081]],
                               'lstmp_0.b_0': [[-1.475287, -0.747559, 0.096648, -0.005105, -0.004919,
                                                -0.000247, 0.025451, -0.010179]]}},
 'partial_sum': {'out': [[1.579446, 1.463411], [0.118013, -0.459602]],
                 'dx0': [[0.0, 0.283662, 0.546024, 0.0], [0.0, 0.762786, 0.915846, 0.0]],
                 'dx1': [[0.0, 0.283662, 0.546024, 0.0], [0.0, 0.762786, 0.915846, 0.0]]},
 'partial_concat': {'out': [[0.796634, 0.89416, 0.782812, 0.569251],
                            [0.489284, 0.183015, -0.371271, -0.642617]],
                    'dx0': [[0.0, 0.283662, 0.546024, 0.0], [0.0, 0.992422, 0.986119, 0.0]],
                    'dx1': [[0.0, 0.762786, 0.915846, 0.0], [0.0, 0.897462, 0.733856, 0.0]]},
 'fesp_dense': {'out': [[-0.56956, -0.783009, -0.89048], [0.370907, 0.049276, -0.279025],
                        [-0.187432, 0.106638, 0.386275]],
                'dW': [[0.915846, 0.992422, 0.986119], [0.283662, 0.546024, 0.762786],
                       [0.897462, 0.733856, 0.508965], [0.0, 0.0, 0.0], [0.897462, 0.733856, 0.508965]]},
 'fesp_sparse': {'out': [[-0.991077, -0.543191, -0.021787], [0.370907, 0.049276, -0.279025],
                         [-0.187432, 0.106638, 0.386275]],
                 'dW': {'rows': [1, 3, 3, 0, 4, 2],
                        'values': [[0.283662, 0.546024, 0.762786], [0.283662, 0.546024, 0.762786],
                                   [0.283662, 0.546024, 0.762786], [0.915846, 0.992422, 0.986119],
                                   [0.897462, 0.733856, 0.508965], [0.897462, 0.733856, 0.508965]]}},
 'fea_elementwise_mul,tanh': {'out': [[0.350711, 0.499431, 0.504736], [0.640448, 0.545217, 0.342563]],
                              'dx': [[-0.203185, -0.373786, -0.442146], [-0.656015, -0.679373, -0.5716]],
                              'dy': [-0.466355, -0.631687, -0.828016]},
 'fea_relu,elementwise_add': {'out': [[-0.0, -0.0, -0.0], [-0.0, -0.0, -0.0]],
                              'dx': [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                              'dy': [0.0, 0.0, 0.0]},
 'decay_SGD': {'w': [[0.39824700355529785], [0.4686200022697449], [0.4755679965019226]],
               'b': [0.7036769986152649]},
 'decay_Adam': {'w': [[0.42037200927734375], [0.5123040080070496], [0.5174859762191772]],
                'b': [0.6948660016059875]}}
# chunk_eval inputs and Fluid 1.8.5's six outputs for them (precision, recall, F1 as float32, three counts).
CHUNK_CASES = [{'scheme': 'IOB',
  'inf': [2, 0, 1, 3, 0, 0, 0, 5, 5, 3, 2, 3, 1, 1, 2, 5, 6, 0, 4, 4],
  'lab': [5, 6, 0, 2, 1, 2, 6, 2, 2, 4, 1, 3, 2, 5, 0, 6, 1, 5, 2, 0],
  'lod': [4, 0, 7, 1, 8],
  'seqlen': None,
  'excl': None,
  'out': [0.1875, 0.1764705926179886, 0.18181820213794708, 16, 17, 3]},
 {'scheme': 'IOB',
  'inf': [2, 0, 1, 3, 0, 0, 0, 5, 5, 3, 2, 3, 1, 1, 2, 5, 6, 0, 4, 4],
  'lab': [2, 0, 1, 4, 0, 0, 0, 5, 5, 3, 2, 5, 1, 1, 2, 5, 6, 0, 4, 4],
  'lod': [4, 0, 7, 1, 8],
  'seqlen': None,
  'excl': None,
  'out': [0.875, 0.875, 0.875, 16, 16, 14]},
 {'scheme': 'IOBES',
  'inf': [[[11], [0], [12], [12], [12], [0]], [[11], [5], [11], [8], [4], [8]],
          [[8], [12], [3], [4], [9], [10]]],
  'lab': [[[11], [0], [12], [12], [12], [0]], [[11], [5], [12], [8], [4], [8]],
          [[8], [12], [3], [4], [9], [10]]],
  'lod': None,
  'seqlen': [2, 6, 4],
  'excl': [0],
  'out': [0.8888888955116272, 1.0, 0.9411765336990356, 9, 8, 8]},
 {'scheme': 'plain',
  'inf': [[1, 3, 2, 3, 0, 3], [2, 1, 0, 1, 3, 3], [1, 3, 0, 3, 2, 3]],
  'lab': [[1, 3, 2, 3, 0, 3], [2, 1, 1, 1, 3, 3], [1, 3, 0, 3, 2, 3]],
  'lod': None,
  'seqlen': [6, 3, 0],
  'excl': None,
  'out': [0.6666666865348816, 0.800000011920929, 0.7272727489471436, 6, 5, 4]}]


# -- where the names live -----------------------------------------------------------------------


def test_each_name_is_one_object_at_every_path_fluid_binds_it_to():
    from placegroup.compat import alias_paddle, facade

    alias_paddle()
    import paddle.fluid.contrib.extend_optimizer.extend_optimizer_with_weight_decay as ewd
    import paddle.fluid.contrib.memory_usage_calc as muc
    import paddle.fluid.contrib.model_stat as ms
    import paddle.fluid.contrib.op_frequence as opf
    import paddle.fluid.evaluator as ev

    for name in ("chunk_eval", "im2sequence", "row_conv", "filter_by_instag"):
        assert getattr(L.nn, name) is getattr(L, name)
    assert L.nn.PyFuncRegistry is __import__("placegroup.layers.py_func", fromlist=["x"]).PyFuncRegistry
    rnn_module = facade("fluid.layers.rnn")  # L.rnn is the function rnn, bound over the module as in Fluid
    assert rnn_module.dynamic_lstmp is L.dynamic_lstmp and rnn_module.lstm is L.lstm and rnn_module.rnn is L.rnn
    assert L.io.load is L.load and L.loss.cross_entropy2.__module__ == "placegroup.layers.loss"
    assert L.tensor.save.__name__ == "save" and L.tensor.save_combine and L.tensor.load_combine
    assert not hasattr(L, "cross_entropy2") and not hasattr(L, "PyFuncRegistry")  # as in Fluid
    assert ev.Evaluator is fluid.io.Evaluator and ev.ChunkEvaluator and ev.EditDistance
    c = fluid.contrib
    for name in ("partial_sum", "partial_concat", "fused_embedding_seq_pool", "fused_elemwise_activation"):
        assert getattr(c, name) is getattr(c.layers, name) is getattr(c.layers.nn, name)
    assert c.ctr_metric_bundle is c.layers.ctr_metric_bundle is c.layers.metric_op.ctr_metric_bundle
    assert c.extend_with_decoupled_weight_decay is c.extend_optimizer.extend_with_decoupled_weight_decay \
        is ewd.extend_with_decoupled_weight_decay
    assert c.memory_usage is muc.memory_usage and c.summary is ms.summary
    assert c.op_freq_statistic is opf.op_freq_statistic


# -- fluid.layers.nn ----------------------------------------------------------------------------


@pytest.mark.parametrize("k", range(len(CHUNK_CASES)))
def test_chunk_eval_gives_fluids_numbers(k):
    c = CHUNK_CASES[k]
    inf, lab = np.array(c["inf"], np.int64), np.array(c["lab"], np.int64)
    if c["lod"]:
        i = L.data("i", shape=[1], dtype="int64", lod_level=1)
        j = L.data("j", shape=[1], dtype="int64", lod_level=1)
        feed, seq = {"i": _lod(inf.reshape(-1, 1), c["lod"]), "j": _lod(lab.reshape(-1, 1), c["lod"])}, None
    else:
        i = L.data("i", shape=list(inf.shape), dtype="int64", append_batch_size=False)
        j = L.data("j", shape=list(inf.shape), dtype="int64", append_batch_size=False)
        seq = L.data("s", shape=[len(c["seqlen"])], dtype="int64", append_batch_size=False)
        feed = {"i": inf, "j": lab, "s": np.array(c["seqlen"], np.int64)}
    outs = L.chunk_eval(i, j, c["scheme"], 3, excluded_chunk_types=c["excl"], seq_length=seq)
    got, _ = _run(outs, feed)
    assert [float(v[0]) if v.dtype.kind == "f" else int(v[0]) for v in got] == c["out"]  # Fluid 1.8.5, to the bit
    assert [v.dtype.name for v in got] == ["float32"] * 3 + ["int64"] * 3


def test_chunk_eval_errors():
    x = L.data("x", shape=[1], dtype="float32", lod_level=1)
    y = L.data("y", shape=[1], dtype="int64", lod_level=1)
    with pytest.raises(TypeError, match=r"'input' in chunk_eval must be \['int64'\]"):
        L.chunk_eval(x, y, "IOB", 2)
    with pytest.raises(ProgramError, match="chunk_scheme 'BIOES' is not one of"):
        L.chunk_eval(y, y, "BIOES", 2)


def test_row_conv_gives_fluids_numbers_and_gradients():
    x = L.data("x", shape=[2], dtype="float32", lod_level=1)
    x.stop_gradient = False
    out = L.row_conv(x, 2)
    got, res = _run([out], {"x": _lod(_det((7, 2)), [3, 1, 3])}, grads=["x", "row_conv_0.w_0"],
                    params={"row_conv_0.w_0": _det((3, 2), 1.0)})
    want = FLUID_1_8_5["row_conv"]
    _close(got[0], want["out"])
    _close(got[1], want["dx"])
    _close(got[2], want["dw"])
    assert res[0].lod() == [[0, 3, 4, 7]]
    with pytest.raises(TypeError, match="'input' in row_conv must be"):
        L.row_conv(L.data("z", shape=[2], dtype="float64", lod_level=1), 1)


def test_row_conv_on_a_dense_batch_with_an_activation():
    x = L.data("x", shape=[2, 4, 3], dtype="float32", append_batch_size=False)
    out = L.row_conv(x, 1, act="tanh")
    w = _det((2, 3), 2.0)
    got, _ = _run([out], {"x": _det((2, 4, 3))}, params={"row_conv_0.w_0": w})
    xs = _det((2, 4, 3))
    want = xs * w[0]
    want[:, :-1] += xs[:, 1:] * w[1]  # each row of the batch is its own sequence
    _close(got[0], np.tanh(want))


def test_im2sequence_gives_fluids_numbers_and_gradients():
    x = L.data("x", shape=[1, 2, 4, 4], dtype="float32", append_batch_size=False)
    x.stop_gradient = False
    out = L.im2sequence(x, filter_size=[2, 2], stride=[2, 1], padding=[1, 0, 0, 1])
    assert out.shape == (8, 8) and out.lod_level == 1
    want = FLUID_1_8_5["im2sequence"]
    got, res = _run([out], {"x": _det((1, 2, 4, 4))}, grads=["x"])
    _close(got[0], want["out"])
    _close(got[1], want["dx"])
    assert res[0].lod() == want["lod"]


def test_im2sequence_with_real_image_sizes():
    x = L.data("x", shape=[3, 2, 6, 5], dtype="float32", append_batch_size=False)
    y = L.data("y", shape=[3, 2], dtype="float32", append_batch_size=False)
    out = L.im2sequence(x, filter_size=2, input_image_size=y, out_stride=2)
    _, res = _run([out], {"x": _det((3, 2, 6, 5)), "y": np.array([[6, 5], [4, 4], [5, 3]], np.float32)})
    assert res[0].lod() == [[0, 4, 5, 7]]  # Fluid 1.8.5: 2x2, 1x1 and 2x1 positions
    with pytest.raises(ValueError, match="padding must be an int, 2 ints or 4 ints"):
        L.im2sequence(x, padding=[1, 2, 3])


def test_filter_by_instag_gives_fluids_rows():
    ins = L.data("ins", shape=[3], dtype="float32", lod_level=1)
    ins.stop_gradient = False
    tags = L.data("tags", shape=[1], dtype="int64", lod_level=1)
    keep = L.data("keep", shape=[-1], dtype="int64", append_batch_size=False)
    out, weight = L.filter_by_instag(ins, tags, keep, is_lod=True, out_val_if_empty=7)
    feed = {"ins": _lod(np.arange(12, dtype=np.float32).reshape(4, 3), [1, 2, 0, 1]),
            "tags": _lod(np.array([[0], [1], [1], [3], [0], [3], [2], [6]]), [2, 2, 2, 2])}
    got, res = _run([out, weight], {**feed, "keep": np.array([3])}, grads=["ins"])
    np.testing.assert_array_equal(got[0], [[3, 4, 5], [6, 7, 8]])  # Fluid 1.8.5: instances 1 and 2 (2 rows, 0 rows)
    assert res[0].lod() == [[0, 2, 2]] and res[1].lod() == [[0, 1, 2]]
    np.testing.assert_array_equal(got[1], [[1.0], [1.0]])
    assert got[1].dtype == np.float32  # Fluid's kernel writes float32 (its layer declares float64)
    _close(got[2], np.concatenate([np.zeros((1, 3)), _cot((2, 3)), np.zeros((1, 3))]))
    empty, _ = _run([out, weight], {**feed, "keep": np.array([9])})
    np.testing.assert_array_equal(empty[0], [[7, 7, 7]])  # Fluid 1.8.5: one row of out_val_if_empty, weight 0
    np.testing.assert_array_equal(empty[1], [[0.0]])


def test_cross_entropy2_gives_fluids_numbers_and_gradients():
    p = np.abs(_det((4, 3), 2.0)) + 0.1
    p = (p / p.sum(1, keepdims=True)).astype(np.float32)
    x = L.data("x", shape=[4, 3], dtype="float32", append_batch_size=False)
    x.stop_gradient = False
    lab = L.data("lab", shape=[4, 1], dtype="int64", append_batch_size=False)
    y = L.loss.cross_entropy2(x, lab)
    got, _ = _run([y], {"x": p, "lab": np.array([[2], [0], [-100], [1]])}, grads=["x"])
    _close(got[0], FLUID_1_8_5["cross_entropy2"]["out"])
    _close(got[1], FLUID_1_8_5["cross_entropy2"]["dx"])
    with pytest.raises(TypeError, match="'input' in cross_entropy2"):
        L.loss.cross_entropy2(lab, lab)


def test_py_func_registry_is_the_registry_py_func_uses():
    reg = L.nn.PyFuncRegistry(lambda a, b=2: (a * b, None))
    assert L.nn.PyFuncRegistry.registered_func(reg.id) is reg._func
    assert L.py_func.registered_func(reg.id) is reg._func
    assert L.nn.PyFuncRegistry.registered_func_num() == reg.id + 1
    out = reg(np.ones(2), 3)
    assert isinstance(out[0], fluid.LoDTensor) and out[1] is None
    np.testing.assert_array_equal(np.asarray(out[0].data), [3.0, 3.0])
    assert L.nn.PyFuncRegistry(lambda: 5)()[0].data == 5
    with pytest.raises(TypeError, match="func must be a Python function"):
        L.nn.PyFuncRegistry(None)
    x = L.data("x", shape=[2])
    o = fluid.default_main_program().current_block().create_var(name="o", dtype="float32", shape=[-1, 2])
    L.py_func(np.tanh, x, o)  # a builtin without a signature is called positionally
    op = fluid.default_main_program().global_block().ops[-1]
    assert L.nn.PyFuncRegistry.registered_func(op.attr("forward_callable_id")) is np.tanh


# -- fluid.layers.rnn ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["default", "clip_relu"])
def test_dynamic_lstmp_gives_fluids_numbers_and_gradients(name):
    kw = {} if name == "default" else dict(cell_clip=0.3, proj_clip=0.25, proj_activation="relu", use_peepholes=False)
    x = L.data("x", shape=[8], dtype="float32", lod_level=1)
    x.stop_gradient = False
    proj, cell = L.dynamic_lstmp(x, 8, 2, **kw)
    names = ["lstmp_0.w_0", "lstmp_0.w_1", "lstmp_0.b_0"]
    params = {names[0]: _det((2, 8), 4.0, 0.6), names[1]: _det((2, 2), 5.0, 0.6),
              names[2]: _det((1, 8 if kw else 14), 6.0, 0.6)}
    got, _ = _run([proj, cell], {"x": _lod(_det((5, 8), 3.0), [2, 3])}, grads=["x"] + names, params=params)
    want = FLUID_1_8_5["lstmp_" + name]
    _close(got[0], want["proj"])
    _close(got[1], want["cell"])
    for g, n in zip(got[2:], ["x"] + names):
        _close(g, want["grads"][n], atol=1e-5)


def test_dynamic_lstmp_errors():
    x = L.data("x", shape=[8], dtype="float32", lod_level=1)
    with pytest.raises(ValueError, match="bias_attr should not be False"):
        L.dynamic_lstmp(x, 8, 2, bias_attr=False)
    with pytest.raises(ValueError, match="size must be 4 \\* hidden size and input's width"):
        L.dynamic_lstmp(x, 12, 2)
    with pytest.raises(ValueError, match="cell_clip should not be negative"):
        L.dynamic_lstmp(x, 8, 2, cell_clip=-1.0)
    with pytest.raises(ValueError, match="already|another shape|shape"):  # one named attr for both weights, as Fluid
        L.dynamic_lstmp(x, 8, 2, param_attr=fluid.ParamAttr(name="w"))


def _lstm_naive(x, w, h_size):
    """Fluid 1.8's test_lstm_cudnn_op.lstm_naive: how it reads one layer's flat weight."""
    off = [0]

    def take(n, shape=None):
        v = w[off[0]:off[0] + n]
        off[0] += n
        return v.reshape(shape).T if shape else v

    wi, wf, wc, wo = (take(h_size * x.shape[2], (h_size, x.shape[2])) for _ in range(4))
    ri, rf, rc, ro = (take(h_size * h_size, (h_size, h_size)) for _ in range(4))
    b1, b2 = [take(h_size) for _ in range(4)], [take(h_size) for _ in range(4)]
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    h = c = np.zeros((x.shape[1], h_size))
    out = []
    for e in x:
        i = sig(e @ wi + h @ ri + b1[0] + b2[0])
        f = sig(e @ wf + h @ rf + b1[1] + b2[1])
        o = sig(e @ wo + h @ ro + b1[3] + b2[3])
        c = i * np.tanh(e @ wc + h @ rc + b1[2] + b2[2]) + f * c
        h = o * np.tanh(c)
        out.append(h)
    return np.stack(out)


def test_lstm_reads_the_cudnn_weight_as_fluids_own_test_does():
    x = L.data("x", shape=[5, 3, 4], dtype="float32", append_batch_size=False)
    x.stop_gradient = False
    init = L.fill_constant([1, 3, 6], "float32", 0.0)
    out, last_h, last_c = L.lstm(x, init, init, max_len=5, hidden_size=6, num_layers=1)
    assert out.shape == (5, 3, 6) and last_h.shape == (1, 3, 6)
    w = _det((4 * 6 * 4 + 4 * 6 * 6 + 8 * 6,), 1.0, 0.5)
    got, _ = _run([out, last_h, last_c], {"x": _det((5, 3, 4), 2.0)}, grads=["x", "cudnn_lstm_0.w_0"],
                  params={"cudnn_lstm_0.w_0": w})
    want = _lstm_naive(_det((5, 3, 4), 2.0).astype(np.float64), w.astype(np.float64), 6)
    _close(got[0], want, atol=1e-5)
    _close(got[1][0], want[-1], atol=1e-5)
    assert got[3].shape == (5, 3, 4) and got[4].shape == w.shape and np.abs(got[4]).sum() > 0


def test_lstm_bidirectional_layers_and_errors():
    x = L.data("x", shape=[4, 2, 3], dtype="float32", append_batch_size=False)
    init = L.fill_constant([4, 2, 5], "float32", 0.0)
    out, last_h, _ = L.lstm(x, init, init, max_len=4, hidden_size=5, num_layers=2, is_bidirec=True,
                            dropout_prob=0.3)
    assert out.shape == (4, 2, 10) and last_h.shape == (4, 2, 5)
    w = fluid.default_main_program().global_block().var("cudnn_lstm_0.w_0")
    assert w.shape == (2 * (4 * 5 * 3 + 4 * 5 * 5 + 8 * 5) + 2 * (4 * 5 * 10 + 4 * 5 * 5 + 8 * 5),)  # Fluid's size
    got, _ = _run([out], {"x": _det((4, 2, 3))})
    assert np.isfinite(got[0]).all()
    with pytest.raises(TypeError, match="'max_len' in lstm must be int"):
        L.lstm(x, init, init, max_len=4.0, hidden_size=5, num_layers=2)


# -- load / save layers -------------------------------------------------------------------------


def test_save_layers_write_what_io_load_vars_reads_and_load_layers_read_it(tmp_path):
    w = L.create_parameter([2, 3], "float32", name="w")
    b = L.create_parameter([3], "float32", name="b")
    L.tensor.save(w, str(tmp_path / "w"))
    L.tensor.save_combine([w, b], str(tmp_path / "all" / "params"))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    exe.run(fluid.default_main_program())
    scope = fluid.global_scope()
    wv, bv = np.asarray(scope.find_var("w").get_tensor()), np.asarray(scope.find_var("b").get_tensor())
    assert list(_read(str(tmp_path / "all" / "params"))) == ["w", "b"]
    other = fluid.Scope()
    fluid.io.load_vars(exe, str(tmp_path / "all"), vars=[w, b], filename="params", scope=other)
    np.testing.assert_array_equal(np.asarray(other.find_var("b").get_tensor()), bv)
    fluid.io.load_vars(exe, str(tmp_path), vars=[w], scope=other)  # save's file is named after its var
    np.testing.assert_array_equal(np.asarray(other.find_var("w").get_tensor()), wv)

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = L.create_tensor("float32", name="v")
        u, t = L.create_tensor("float32", name="u"), L.create_tensor("float32", name="t")
        assert L.load(v, str(tmp_path / "w")) is None
        L.tensor.load_combine([u, t], str(tmp_path / "all" / "params"))
    got = exe.run(main, fetch_list=[v, u, t])
    for g, want in zip(got, [wv, wv, bv]):
        np.testing.assert_array_equal(g, want)
    with pytest.raises(TypeError, match="out must be a Variable"):
        L.load("v", str(tmp_path / "w"))
    with pytest.raises(ValueError, match="file_path must be a non-empty path"):
        L.tensor.save(w, "")


# -- fluid.evaluator ----------------------------------------------------------------------------


def test_chunk_evaluator_adds_up_batches_and_resets():
    pred = L.data("pred", shape=[1], dtype="int64", lod_level=1)
    lab = L.data("lab", shape=[1], dtype="int64", lod_level=1)
    with pytest.warns(Warning, match="The ChunkEvaluator is deprecated"):
        ev = fluid.evaluator.ChunkEvaluator(pred, lab, "IOB", 3)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    ev.reset(exe)
    total = np.zeros(3)
    for c in CHUNK_CASES[:2]:
        feed = {"pred": _lod(np.array(c["inf"]).reshape(-1, 1), c["lod"]),
                "lab": _lod(np.array(c["lab"]).reshape(-1, 1), c["lod"])}
        metrics = exe.run(fluid.default_main_program(), feed=feed, fetch_list=ev.metrics)
        assert [float(m[0]) for m in metrics] == c["out"][:3]
        total += c["out"][3:]
    precision, recall, f1 = ev.eval(exe)
    n_infer, n_label, n_correct = total
    _close(precision, [n_correct / n_infer])
    _close(recall, [n_correct / n_label])
    _close(f1, [2 * precision[0] * recall[0] / (precision[0] + recall[0])])
    ev.reset(exe)
    assert [float(v[0]) for v in ev.eval(exe)] == [0.0, 0.0, 0.0]
    assert [s.persistable for s in ev.states] == [True] * 3


def test_edit_distance_evaluator():
    hyp = L.data("hyp", shape=[-1, 4], dtype="int64", append_batch_size=False)
    ref = L.data("ref", shape=[-1, 4], dtype="int64", append_batch_size=False)
    hl = L.data("hl", shape=[-1], dtype="int64", append_batch_size=False)
    rl = L.data("rl", shape=[-1], dtype="int64", append_batch_size=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = fluid.evaluator.EditDistance(hyp, ref, input_length=hl, label_length=rl)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    ev.reset(exe)
    h = np.array([[1, 2, 3, 0], [4, 5, 0, 0], [7, 7, 7, 7]])
    r = np.array([[1, 2, 3, 0], [4, 6, 0, 0], [7, 0, 0, 0]])
    feed = {"hyp": h, "ref": r, "hl": np.array([3, 2, 4]), "rl": np.array([3, 2, 1])}
    exe.run(fluid.default_main_program(), feed=feed)
    exe.run(fluid.default_main_program(), feed=feed)
    distance, error = ev.eval(exe)
    _close(distance, [(0 + 0.5 + 3.0) / 3])  # normalized by the reference's length
    _close(error, [2 / 3])
    with pytest.warns(Warning, match="The Evaluator is deprecated"), pytest.raises(NotImplementedError):
        fluid.evaluator.Evaluator("x").eval(exe)


# -- fluid.contrib ------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["partial_sum", "partial_concat"])
def test_partial_ops_give_fluids_numbers_and_gradients(op):
    xs = []
    for i in range(2):
        v = L.data(f"x{i}", shape=[2, 4], dtype="float32", append_batch_size=False)
        v.stop_gradient = False
        xs.append(v)
    out = getattr(fluid.contrib.layers, op)(xs, start_index=1, length=2)
    got, _ = _run([out], {"x0": _det((2, 4), 7.0), "x1": _det((2, 4), 8.0)}, grads=["x0", "x1"])
    want = FLUID_1_8_5[op]
    _close(got[0], want["out"])
    _close(got[1], want["dx0"])
    _close(got[2], want["dx1"])


def test_partial_concat_takes_one_var_with_a_warning():
    x = L.data("x", shape=[2, 4], dtype="float32", append_batch_size=False)
    with pytest.warns(UserWarning, match="should be list"):
        out = fluid.contrib.layers.partial_concat(x, start_index=2)
    assert out.shape == (2, 2)
    with pytest.raises(TypeError, match="'start_index' in partial_concat must be int"):
        fluid.contrib.layers.partial_concat([x], start_index=1.0)


@pytest.mark.parametrize("name", ["dense", "sparse"])
def test_fused_embedding_seq_pool_gives_fluids_numbers_and_gradients(name):
    ids = L.data("ids", shape=[1], dtype="int64", lod_level=1)
    kw = dict(padding_idx=3) if name == "dense" else dict(is_sparse=True)
    out = fluid.contrib.fused_embedding_seq_pool(ids, [5, 3], param_attr=fluid.ParamAttr(name="W"), **kw)
    feed = {"ids": _lod(np.array([[1], [3], [3], [0], [4], [2]]), [3, 1, 2])}
    got, res = _run([out], feed, grads=["W"], params={"W": _det((5, 3), 9.0)})
    want = FLUID_1_8_5["fesp_" + name]
    _close(got[0], want["out"])
    if name == "dense":
        _close(got[1], want["dW"])
    else:
        g = res[1]
        assert g.rows.tolist() == want["dW"]["rows"] and g.height == 5
        _close(g.values, want["dW"]["values"])
    with pytest.raises(ValueError, match="padding_idx 9 is outside"):
        fluid.contrib.fused_embedding_seq_pool(ids, [5, 3], padding_idx=9)


def test_fused_embedding_seq_pool_leaves_padding_out_of_the_sparse_gradient():
    ids = L.data("ids", shape=[1], dtype="int64", lod_level=1)
    out = fluid.contrib.fused_embedding_seq_pool(ids, [5, 3], is_sparse=True, padding_idx=-2,
                                                 param_attr=fluid.ParamAttr(name="W"))
    assert fluid.default_main_program().global_block().ops[-1].attr("padding_idx") == 3
    _, res = _run([out], {"ids": _lod(np.array([[1], [3], [3], [0]]), [3, 1])}, grads=["W"])
    assert res[1].rows.tolist() == [1, 0]  # Fluid 1.8.5 also lists the padding id 3 (twice), with gradient


@pytest.mark.parametrize("pair", [["elementwise_mul", "tanh"], ["relu", "elementwise_add"]])
def test_fused_elemwise_activation_gives_fluids_numbers_and_gradients(pair):
    x = L.data("x", shape=[2, 3], dtype="float32", append_batch_size=False)
    y = L.data("y", shape=[3], dtype="float32", append_batch_size=False)
    x.stop_gradient = y.stop_gradient = False
    out = fluid.contrib.fused_elemwise_activation(x, y, pair, scale=0.5)
    got, _ = _run([out], {"x": _det((2, 3), 10.0), "y": _det((3,), 11.0)}, grads=["x", "y"])
    want = FLUID_1_8_5["fea_" + ",".join(pair)]
    _close(got[0], want["out"])
    _close(got[1], want["dx"])
    _close(got[2], want["dy"])


def test_fused_elemwise_activation_errors():
    x = L.data("x", shape=[2, 3], dtype="float32", append_batch_size=False)
    with pytest.raises(ValueError, match="the length should be 2"):
        fluid.contrib.fused_elemwise_activation(x, x, ["relu"])
    with pytest.raises(ProgramError, match="not one of the pairs Fluid 1.8 runs"):
        fluid.contrib.fused_elemwise_activation(x, x, "elementwise_add,tanh")


def test_ctr_metric_bundle_adds_up_over_runs():
    p = L.data("p", shape=[1], dtype="float32")
    lab = L.data("lab", shape=[1], dtype="int64")
    outs = fluid.contrib.layers.ctr_metric_bundle(p, lab)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    pv, lv = np.array([[0.2], [0.9], [0.6]], np.float32), np.array([[0], [1], [0]])
    for _ in range(2):
        got = exe.run(fluid.default_main_program(), feed={"p": pv, "lab": lv}, fetch_list=list(outs))
    d = pv - lv
    want = [(d * d).sum(), np.abs(d).sum(), pv.sum(), (1 / (1 + np.exp(-pv))).sum(), lv.sum(), 3.0]
    _close([g[0] for g in got], 2 * np.array(want, np.float64), atol=1e-5)
    with pytest.raises(ValueError, match="must have one shape"):
        fluid.contrib.layers.ctr_metric_bundle(p, L.data("q", shape=[2], dtype="float32"))


@pytest.mark.parametrize("opt", ["SGD", "Adam"])
def test_decoupled_weight_decay_gives_fluids_weights(opt):
    x = L.data("x", shape=[3], dtype="float32")
    y = L.data("y", shape=[1], dtype="float32")
    pred = L.fc(x, 1, param_attr=fluid.ParamAttr(name="w"), bias_attr=fluid.ParamAttr(name="b"))
    loss = L.mean(L.square_error_cost(pred, y))
    cls = fluid.contrib.extend_with_decoupled_weight_decay(getattr(fluid.optimizer, opt))
    o = cls(weight_decay=0.1, learning_rate=0.05, apply_decay_param_fun=lambda n: n == "w")
    o.minimize(loss)
    types = [op.type for op in fluid.default_main_program().global_block().ops if op.role == "optimize"]
    assert types[:3] == ["scale", "elementwise_sub", "assign"] and str(o) == "Weight Decay, params: w"
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    scope = fluid.global_scope()
    scope.var("w").get_tensor().set(_det((3, 1), 1.0), fluid.CPUPlace())
    scope.var("b").get_tensor().set(_det((1,), 2.0), fluid.CPUPlace())
    for step in range(3):
        exe.run(fluid.default_main_program(), feed={"x": _det((4, 3), step), "y": _det((4, 1), step + 0.5)})
    want = FLUID_1_8_5["decay_" + opt]  # Fluid 1.8.5, 3 steps
    _close(np.asarray(scope.find_var("w").get_tensor()), want["w"], atol=1e-5)
    _close(np.asarray(scope.find_var("b").get_tensor()), want["b"], atol=1e-5)


def test_decoupled_weight_decay_arguments():
    ext = fluid.contrib.extend_with_decoupled_weight_decay
    with pytest.raises(TypeError, match="should be a derived class of Optimizer"):
        ext(dict)
    SGDW = ext(fluid.optimizer.SGD)
    with pytest.raises(TypeError, match="coeff should be float or Variable"):
        SGDW(weight_decay=1, learning_rate=0.1)
    x = L.data("x", shape=[3], dtype="float32")
    loss = L.mean(L.fc(x, 1))
    SGDW(weight_decay=0.0, learning_rate=0.1).minimize(loss)  # no decay ops (Fluid 1.8.5 fails here)
    assert "assign" not in [op.type for op in fluid.default_main_program().global_block().ops]


def _small_convnet():
    img = L.data("img", shape=[3, 8, 8], dtype="float32")
    r = L.relu(L.batch_norm(L.conv2d(img, 4, 3, padding=1)))
    return L.fc(L.pool2d(r, 2, pool_stride=2), 5, act="sigmoid")


def test_summary_prints_fluids_table():
    _small_convnet()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert fluid.contrib.summary(fluid.default_main_program()) is None
    assert buf.getvalue() == SUMMARY_1_8_5


def test_memory_usage():
    _small_convnet()
    low, high, unit = fluid.contrib.memory_usage(fluid.default_main_program(), batch_size=10)
    block = fluid.default_main_program().global_block()
    seen, total = set(), 0
    for op in block.ops:
        for n in op.output_arg_names:
            v = block.var(n)
            if n not in seen and v.type == "lod_tensor":
                seen.add(n)
                total += int(np.prod([10 if d == -1 else d for d in v.shape])) * np.dtype(v.dtype).itemsize
    assert unit == "KB" and low == pytest.approx(total / 1024 * 1.05) and high == pytest.approx(total / 1024 * 1.1)
    assert (low, high, unit) == pytest.approx((45.305859375, 47.46328125, "KB"))  # Fluid 1.8.5's, same program
    with pytest.raises(ValueError, match="batch size need to be positive"):
        fluid.contrib.memory_usage(fluid.default_main_program(), 0)
    with pytest.raises(TypeError, match="requires Program"):
        fluid.contrib.memory_usage("main", 1)


def test_op_freq_statistic(capsys):
    x = L.data("x", shape=[4], dtype="float32")
    h = L.relu(L.fc(x, 3))
    L.mean(L.fc(h, 1))
    uni, adj = fluid.contrib.op_freq_statistic(fluid.default_main_program())
    assert uni == [("mul", 2), ("elementwise_add", 2), ("relu", 1), ("mean", 1)]
    assert adj[0] == ("mul->elementwise_add", 2) and ("elementwise_add->relu", 1) in adj
    assert "Var's generate op is not found,x, mul" in capsys.readouterr().out
    with pytest.raises(TypeError, match="should be Porgram"):
        fluid.contrib.op_freq_statistic(None)


SUMMARY_1_8_5 = "\n".join([  # Fluid 1.8.5's output for _small_convnet (activations count the batch dim -1, as there)
    "+-----+------------+-----------+-----------+--------+-------+",
    "| No. |       TYPE |     INPUT |    OUTPUT | PARAMs | FLOPs |",
    "+-----+------------+-----------+-----------+--------+-------+",
    "|   0 |     conv2d | (3, 8, 8) | (4, 8, 8) |    108 | 13824 |",
    "|   1 | batch_norm | (4, 8, 8) | (4, 8, 8) |      8 |   512 |",
    "|   2 |       relu | (4, 8, 8) | (4, 8, 8) |      0 |  -256 |",
    "|   3 |     pool2d | (4, 8, 8) | (4, 4, 4) |      0 |   256 |",
    "|   4 |        mul | (4, 4, 4) |      (5,) |    321 |   320 |",
    "|   5 |    sigmoid |      (5,) |      (5,) |      0 |    -5 |",
    "+-----+------------+-----------+-----------+--------+-------+",
    "Total PARAMs: 437(0.0004M)",
    "Total FLOPs: 14651(0.00G)",
    "Notice: ",
    " now supported ops include [Conv, DepthwiseConv, FC(mul), BatchNorm, Pool, Activation(sigmoid, tanh, relu, "
    "leaky_relu, prelu)]",
    ""])
