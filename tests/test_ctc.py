"""CTC (ops/ctc.py, placegroup/layers/ctc.py): ``warpctc`` against a brute-force sum over every
alignment, in the LoD and the padded forms; its gradient against float64 central differences,
with and without norm_by_times (which scales the gradient only, NOTE(ctc-1.8));
``ctc_greedy_decoder`` against a numpy reference, Fluid's all-empty ``[[-1]]`` included; the
errors bad input gets; and (paddle-marked) a small CTC model trained by Fluid 1.8.5 and by
placegroup from the same initial values: same per-step losses and decoded ids.
"""
from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import OpError, ProgramError
from placegroup.ops.registry import KernelContext, get_op_def
from placegroup.values import LoDTensor
from tests.paddle_ref.reference import SCRIPT_HEAD, run_reference

C, BLANK = 4, 2  # 3 classes and the blank, which is not 0
STEPS = [4, 6, 3, 5, 1, 0]  # each logits sequence's length: the last has none
LABELS = [[1, 1], [0, 3, 3], [1], [3, 0, 3], [], []]  # repeats, a label around the blank, empty labels


def _collapse(path, blank) -> list:
    out, prev = [], None
    for p in path:
        if p != prev and p != blank:
            out.append(p)
        prev = p
    return out


def brute_loss(x, label, blank) -> float:
    """-log of the summed probability of every path of len(x) classes that collapses to ``label``
    (softmax over each row of ``x``)."""
    t = x.shape[0]
    logp = x - x.max(axis=1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
    total = -np.inf
    for path in itertools.product(range(x.shape[1]), repeat=t):
        if _collapse(path, blank) == list(label):
            total = np.logaddexp(total, logp[np.arange(t), list(path)].sum())
    return -total


def _logits(seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal((sum(STEPS), C)).astype(dtype)


def _label_tensor():
    ids = np.array([i for lab in LABELS for i in lab], np.int32).reshape(-1, 1)
    return LoDTensor.from_lengths(ids, [[len(lab) for lab in LABELS]])


def _run(op: str, ins: dict, **attrs) -> dict:
    opdef = get_op_def(op)
    keep = set(opdef.wants_lod)
    ins = {k: v if k in keep or not isinstance(v, LoDTensor) else v.data for k, v in ins.items()}
    return opdef.kernels["cpu"](np, ins, {**opdef.attrs, **attrs}, KernelContext(outputs=[s.name for s in opdef.outputs]))


def _ctc(x, norm_by_times=False, dloss=None) -> tuple[np.ndarray, np.ndarray]:
    """(Loss [B], Logits@GRAD) of the LoD form, by the two kernels; Loss@GRAD ``dloss`` (ones)."""
    logits = LoDTensor.from_lengths(x, [STEPS])
    fwd = _run("warpctc", {"Logits": logits, "Label": _label_tensor()}, blank=BLANK, norm_by_times=norm_by_times)
    dloss = np.ones((len(STEPS), 1), x.dtype) if dloss is None else dloss
    bwd = _run("warpctc_grad", {"WarpCTCGrad": fwd["WarpCTCGrad"], "Logits": logits, "Loss@GRAD": dloss},
               blank=BLANK, norm_by_times=norm_by_times)
    return fwd["Loss"].reshape(-1), bwd["Logits@GRAD"]


def _padded(x):
    """The padded form of ``x`` and LABELS: time-major logits, labels padded with an id that is
    no class (ignored past each length), and the lengths."""
    offsets = np.concatenate([[0], np.cumsum(STEPS)])
    logits = np.full((max(STEPS), len(STEPS), C), 9.0, x.dtype)
    for b, (lo, hi) in enumerate(itertools.pairwise(offsets)):
        logits[: hi - lo, b] = x[lo:hi]
    label = np.full((len(LABELS), max(map(len, LABELS))), 99, np.int32)
    for b, lab in enumerate(LABELS):
        label[b, : len(lab)] = lab
    return {"Logits": logits, "Label": label, "LogitsLength": np.array(STEPS, np.int64),
            "LabelLength": np.array([len(lab) for lab in LABELS], np.int64)}


def _want(x) -> np.ndarray:
    offsets = np.concatenate([[0], np.cumsum(STEPS)])
    return np.array([brute_loss(x[lo:hi], lab, BLANK) for (lo, hi), lab in zip(itertools.pairwise(offsets), LABELS)])


# -- the loss -------------------------------------------------------------------------------


def test_loss_is_the_sum_over_every_alignment():
    x = _logits()
    np.testing.assert_allclose(_ctc(x)[0], _want(x), rtol=1e-10)
    # the padded form reads the same sequences
    loss = _run("warpctc", _padded(x), blank=BLANK)["Loss"].reshape(-1)
    np.testing.assert_allclose(loss, _want(x), rtol=1e-10)


def test_the_layer_in_a_program_gives_the_loss():
    x = _logits(1, np.float32)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        logits = fluid.data("x", [None, C], "float32", lod_level=1)
        label = fluid.data("y", [None, 1], "int32", lod_level=1)
        cost = fluid.layers.warpctc(logits, label, blank=BLANK)
        xp, yp, xl, yl = (fluid.data(n, s, d) for n, s, d in (("xp", [max(STEPS), len(STEPS), C], "float32"),
                                                               ("yp", [len(LABELS), 3], "int32"),
                                                               ("xl", [None], "int64"), ("yl", [None], "int64")))
        padded = fluid.layers.warpctc(xp, yp, blank=BLANK, input_length=xl, label_length=yl)
    assert cost.shape == (-1, 1) and padded.shape == (len(STEPS), 1)
    pad = _padded(x)
    exe = fluid.Executor(fluid.CPUPlace())
    got = exe.run(main, feed={"x": LoDTensor.from_lengths(x, [STEPS]), "y": _label_tensor(), "xp": pad["Logits"],
                              "yp": pad["Label"], "xl": pad["LogitsLength"], "yl": pad["LabelLength"]},
                  fetch_list=[cost, padded])
    for g in got:
        assert g.dtype == np.float32 and g.shape == (len(STEPS), 1)
        np.testing.assert_allclose(g.reshape(-1), _want(x.astype(np.float64)), rtol=1e-5)


# -- the gradient ---------------------------------------------------------------------------


def _central(f, x, eps=1e-6) -> np.ndarray:
    grad = np.zeros_like(x)
    for i in range(x.size):
        d = np.zeros(x.size)
        d[i] = eps
        d = d.reshape(x.shape)
        grad.flat[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return grad


@pytest.mark.parametrize("norm_by_times", [False, True])
def test_gradient_equals_central_differences(norm_by_times):
    x = _logits(2)
    w = np.random.default_rng(3).standard_normal((len(STEPS), 1))  # Loss@GRAD
    loss, grad = _ctc(x, norm_by_times, w)
    want = _central(lambda v: float((_ctc(v)[0] * w.reshape(-1)).sum()), x)
    if norm_by_times:  # Fluid 1.8: each sequence's gradient over its length, its loss unchanged
        want /= np.repeat(np.maximum(STEPS, 1), STEPS)[:, None]
    np.testing.assert_allclose(loss, _want(x), rtol=1e-10)
    np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("norm_by_times", [False, True])
def test_the_padded_gradient_is_the_lod_gradient_in_place(norm_by_times):
    x = _logits(4)
    w = np.random.default_rng(5).standard_normal((len(STEPS), 1))
    pad = _padded(x)
    fwd = _run("warpctc", pad, blank=BLANK, norm_by_times=norm_by_times)
    got = _run("warpctc_grad", {"WarpCTCGrad": fwd["WarpCTCGrad"], "Logits": pad["Logits"],
                                "LogitsLength": pad["LogitsLength"], "Loss@GRAD": w},
               blank=BLANK, norm_by_times=norm_by_times)["Logits@GRAD"]
    want = _padded(_ctc(x, norm_by_times, w)[1])["Logits"]
    valid = np.arange(max(STEPS))[:, None] < np.array(STEPS)[None, :]
    np.testing.assert_allclose(got[valid], want[valid], rtol=1e-12, atol=1e-14)
    assert not got[~valid].any()  # zero past each sequence's end, as Fluid's


# -- ctc_greedy_decoder ---------------------------------------------------------------------


def greedy_ref(best, lengths, blank) -> list:
    """Per sequence: the argmax ids with repeats merged and blanks dropped."""
    out, at = [], 0
    for n in lengths:
        out.append(_collapse(best[at:at + n], blank))
        at += n
    return out


def _decode_lod(x, lengths, blank):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = fluid.data("x", [None, x.shape[1]], "float32", lod_level=1)
        out = fluid.layers.ctc_greedy_decoder(v, blank=blank)
    assert out.dtype == "int64" and out.lod_level == 1
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": LoDTensor.from_lengths(x, [lengths])},
                                               fetch_list=[out], return_numpy=False)[0]
    return np.array(got), got.recursive_sequence_lengths()


def test_greedy_decoder_lod():
    r = np.random.default_rng(6)
    lengths = [5, 3, 4, 0, 6]
    x = r.random((sum(lengths), 5)).astype(np.float32)
    x[5:8, 3] = 2.0  # sequence 1 is all blank
    x[12:14, 1] = 2.0  # a repeat in sequence 4
    ids, lod = _decode_lod(x, lengths, blank=3)
    want = greedy_ref(x.argmax(axis=1).tolist(), lengths, 3)
    assert lod == [[len(w) for w in want]] and want[1] == [] and want[3] == []
    np.testing.assert_array_equal(ids.reshape(-1), [i for w in want for i in w])
    assert ids.dtype == np.int64 and ids.shape == (sum(map(len, want)), 1)


def test_greedy_decoder_every_sequence_empty_gives_fluids_minus_one():
    x = np.zeros((5, 3), np.float32)
    x[:, 0] = 1.0  # all blank
    ids, lod = _decode_lod(x, [2, 3], blank=0)
    assert lod == [[0, 0]]  # as Fluid 1.8.5: one row -1, every sequence empty
    np.testing.assert_array_equal(ids, [[-1]])


def test_greedy_decoder_padded():
    r = np.random.default_rng(7)
    b, t, blank, pad_value = 4, 6, 0, -1
    x = r.random((b, t, 5)).astype(np.float32)
    x[1, :, 0] = 2.0  # all blank
    x[2, 1:4, 4] = 3.0  # a repeat
    lengths = np.array([[6], [6], [5], [0]], np.int64)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = fluid.data("x", [None, t, 5], "float32")
        n = fluid.data("n", [None, 1], "int64")
        out, out_len = fluid.layers.ctc_greedy_decoder(v, blank=blank, input_length=n, padding_value=pad_value)
    got, got_len = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x, "n": lengths}, fetch_list=[out, out_len])
    want = [_collapse(x[i, : lengths[i, 0]].argmax(axis=1).tolist(), blank) for i in range(b)]
    np.testing.assert_array_equal(got_len, [[len(w)] for w in want])
    np.testing.assert_array_equal(got, [w + [pad_value] * (t - len(w)) for w in want])
    assert got.dtype == np.int64 and got_len.dtype == np.int64 and want[1] == []


def test_ctc_align_without_merging_keeps_repeats():
    ids = LoDTensor.from_lengths(np.array([[1], [1], [0], [1], [2], [2]], np.int64), [[4, 2]])
    got = _run("ctc_align", {"Input": ids}, blank=0, merge_repeated=False)["Output"]
    np.testing.assert_array_equal(got.data.reshape(-1), [1, 1, 1, 2, 2])
    assert got.recursive_sequence_lengths() == [[3, 2]]


# -- errors ---------------------------------------------------------------------------------


def _ctc_program(blank=BLANK):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        logits = fluid.data("x", [None, C], "float32", lod_level=1)
        label = fluid.data("y", [None, 1], "int32", lod_level=1)
        cost = fluid.layers.warpctc(logits, label, blank=blank)
    return main, cost


@pytest.mark.parametrize("ids, lengths, regex", [
    ([[1], [4], [0]], [[1, 2]], r"Label id 4 \(sequence 1, position 0\) is not a class in \[0, 4\)"),
    ([[1], [1], [0]], [[2, 1]], (r"sequence 0's label has 2 ids with 1 adjacent repeats, so it needs at least 3 "
                                 r"time steps, but its logits sequence has 2")),
    ([[1], [0], [3]], [[1, 1, 1]], r"Logits has 2 sequences but Label has 3"),
])
def test_bad_input_is_a_clear_error(ids, lengths, regex):
    main, cost = _ctc_program()
    x = LoDTensor.from_lengths(np.zeros((5, C), np.float32), [[2, 3]])
    y = LoDTensor.from_lengths(np.array(ids, np.int32), lengths)
    with pytest.raises(OpError, match=regex):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x, "y": y}, fetch_list=[cost])


def test_bad_layer_arguments_are_build_errors():
    with pytest.raises(ProgramError, match=r"blank=4 must be in \[0, 4\)"):
        _ctc_program(blank=4)
    with fluid.program_guard(fluid.Program(), fluid.Program()), pytest.raises(TypeError, match="label"):
        fluid.layers.warpctc(fluid.data("x", [None, C], "float32", lod_level=1),
                             fluid.data("y", [None, 1], "int64", lod_level=1))


# -- against Fluid 1.8.5 --------------------------------------------------------------------

# one script for both frameworks: fc -> fc -> warpctc -> mean, SGD, and the greedy decoding
CTC_SCRIPT = SCRIPT_HEAD + r'''
d = np.load(spec["data"])
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    feat = fluid.layers.data("feat", shape=[spec["D"]], dtype="float32", lod_level=1)
    label = fluid.layers.data("label", shape=[1], dtype="int32", lod_level=1)
    hidden = fluid.layers.fc(feat, size=spec["H"], act="tanh")
    logits = fluid.layers.fc(hidden, size=spec["C"])
    cost = fluid.layers.warpctc(logits, label, blank=spec["blank"], norm_by_times=spec["norm_by_times"])
    loss = fluid.layers.mean(cost)
    fluid.optimizer.SGD(learning_rate=spec["lr"]).minimize(loss)
    decoded = fluid.layers.ctc_greedy_decoder(logits, blank=spec["blank"])
place = fluid.CPUPlace()
exe = fluid.Executor(place)
exe.run(startup)
names = sorted(p.name for p in main.global_block().all_parameters())
assert names == sorted(k[2:] for k in d.files if k.startswith("p/")), names
for n in names:
    fluid.global_scope().find_var(n).get_tensor().set(d["p/" + n], place)
out = {}
for i in range(spec["steps"]):
    feed = {"feat": fluid.create_lod_tensor(d["x%d" % i], [d["xl%d" % i].tolist()], place),
            "label": fluid.create_lod_tensor(d["y%d" % i], [d["yl%d" % i].tolist()], place)}
    l, ids = exe.run(main, feed=feed, fetch_list=[loss, decoded], return_numpy=False)
    out["loss%d" % i] = np.array(l).reshape(-1)
    out["ids%d" % i] = np.array(ids).reshape(-1)
    out["lod%d" % i] = np.array(ids.lod()[0])
out.update({"p/" + n: np.array(fluid.global_scope().find_var(n).get_tensor()) for n in names})
np.savez(spec["out"], **out)
'''
CTC_MODEL = {"D": 6, "H": 8, "C": 5, "blank": 2, "lr": 0.5, "steps": 4}


def _model_data():
    r = np.random.default_rng(8)
    d, h, c = CTC_MODEL["D"], CTC_MODEL["H"], CTC_MODEL["C"]
    data = {"p/fc_0.w_0": r.uniform(-0.5, 0.5, (d, h)), "p/fc_0.b_0": r.uniform(-0.1, 0.1, (h,)),
            "p/fc_1.w_0": r.uniform(-0.8, 0.8, (h, c)), "p/fc_1.b_0": r.uniform(-0.1, 0.1, (c,))}
    data = {k: v.astype(np.float32) for k, v in data.items()}
    classes = np.array([k for k in range(c) if k != CTC_MODEL["blank"]])
    for i in range(CTC_MODEL["steps"]):
        steps = r.integers(5, 10, size=3)
        labels = [r.choice(classes, size=r.integers(1, 4)) for _ in steps]
        labels[0][-1] = labels[0][0]  # a repeat when it is longer than 1
        data[f"x{i}"] = r.standard_normal((steps.sum(), d)).astype(np.float32)
        data[f"xl{i}"] = steps.astype(np.int64)
        data[f"y{i}"] = np.concatenate(labels).astype(np.int32).reshape(-1, 1)
        data[f"yl{i}"] = np.array([len(lab) for lab in labels], np.int64)
    return data


def test_a_ctc_model_trains(tmp_path):
    ours = run_reference(sys.executable, CTC_SCRIPT, tmp_path, _model_data(), framework="placegroup",
                         norm_by_times=False, **CTC_MODEL)
    losses = [float(ours[f"loss{i}"][0]) for i in range(CTC_MODEL["steps"])]
    assert all(np.isfinite(losses)) and not np.array_equal(ours["p/fc_1.w_0"], _model_data()["p/fc_1.w_0"])


@pytest.mark.paddle
@pytest.mark.parametrize("norm_by_times", [False, True])
def test_a_ctc_model_trains_as_in_fluid_1_8_5(tmp_path, fluid18_python, norm_by_times):
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, CTC_SCRIPT, tmp_path / "fluid", _model_data(), framework="fluid",
                           norm_by_times=norm_by_times, **CTC_MODEL)
    ours = run_reference(sys.executable, CTC_SCRIPT, tmp_path, _model_data(), framework="placegroup",
                         norm_by_times=norm_by_times, **CTC_MODEL)
    assert sorted(ours) == sorted(theirs)
    for i in range(CTC_MODEL["steps"]):
        np.testing.assert_allclose(ours[f"loss{i}"], theirs[f"loss{i}"], rtol=1e-5, err_msg=f"step {i}")
        np.testing.assert_array_equal(ours[f"ids{i}"], theirs[f"ids{i}"], err_msg=f"decoded ids, step {i}")
        np.testing.assert_array_equal(ours[f"lod{i}"], theirs[f"lod{i}"], err_msg=f"decoded LoD, step {i}")
    for key in (k for k in theirs if k.startswith("p/")):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-6, err_msg=key)
