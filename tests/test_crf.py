"""Fluid 1.8's linear-chain CRF (ops/crf.py, placegroup/layers/crf.py): ``linear_chain_crf`` and
its gradient, ``crf_decoding``.

The loss and the Viterbi path equal a brute force over every tag path (short sequences, batches
of several lengths, an empty one, the LoD and the padded forms); the gradients equal float64
central differences through the executor; ties break as Fluid's scan (a loop transcription of
it); bad input says what is wrong. With paddle: every output and gradient of the ops equals
Fluid 1.8.5's, and a tagger (embedding -> fc -> linear_chain_crf, crf_decoding on the same
parameter) trains as in Fluid 1.8.5, loss for loss and path for path. A CRF tagger trains as 2
trainers + 2 pservers equal to one process."""
import itertools
import sys

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import OpError, OutOfRange, ProgramError
from placegroup.ops import get_op_def
from placegroup.ops.registry import KernelContext
from placegroup.values import LoDTensor
from tests.inproc import run_cluster, run_local
from tests.paddle_ref.reference import SCRIPT_HEAD, run_reference

L = fluid.layers
D = 3
LENS = [3, 1, 0, 4, 2]  # an empty sequence among them


def _kernel(op: str, ins: dict) -> dict:
    opdef = get_op_def(op)
    return opdef.kernels["cpu"](np, ins, {}, KernelContext(outputs=(s.name for s in opdef.outputs)))


def _paths(n: int, d: int) -> np.ndarray:
    return np.array(list(itertools.product(range(d), repeat=n)), dtype=np.int64).reshape(-1, n)


def _scores(x: np.ndarray, w: np.ndarray, paths: np.ndarray) -> np.ndarray:
    """Each path's score (NOTE(crf-layout) in ops/crf.py), all paths at once."""
    steps = np.arange(x.shape[0])
    return (w[0, paths[:, 0]] + w[1, paths[:, -1]] + x[steps, paths].sum(1)
            + w[2 + paths[:, :-1], paths[:, 1:]].sum(1))


def _brute_nll(x, w, label) -> float:
    if x.shape[0] == 0:
        return 0.0
    s = _scores(x, w, _paths(x.shape[0], x.shape[1]))
    return float(np.logaddexp.reduce(s) - _scores(x, w, label[None])[0])


def _brute_best(x, w) -> np.ndarray:
    paths = _paths(x.shape[0], x.shape[1])
    return paths[np.argmax(_scores(x, w, paths))]


def _sample(rng, lens=LENS, d=D, dtype=np.float64):
    n = sum(lens)
    return (rng.standard_normal((n, d)).astype(dtype), rng.standard_normal((d + 2, d)).astype(dtype),
            rng.integers(0, d, (n, 1)).astype(np.int64))


def _pad(rows: np.ndarray, lens, t: int, fill=0) -> np.ndarray:
    out = np.full((len(lens), t) + rows.shape[1:], fill, rows.dtype)
    out[np.arange(t)[None] < np.asarray(lens)[:, None]] = rows
    return out


def _split(rows: np.ndarray, lens) -> list:
    return np.split(rows, np.cumsum(lens)[:-1])


def _ins(form: str, x, w, label, lens=LENS, t: int = 5) -> dict:
    """The op's inputs in the LoD form, or padded to ``t`` steps (garbage on padding)."""
    if form == "lod":
        return {"Emission": LoDTensor.from_lengths(x, [lens]), "Transition": w,
                "Label": LoDTensor.from_lengths(label, [lens])}
    junk = np.random.default_rng(99)
    xp = _pad(x, lens, t, 0).astype(x.dtype)
    xp[np.arange(t)[None] >= np.asarray(lens)[:, None]] = junk.standard_normal(x.shape[1]) * 9
    return {"Emission": xp, "Transition": w, "Label": _pad(label[:, 0], lens, t, 7),
            "Length": np.asarray(lens, np.int64)}


# -- the loss and the path against brute force ----------------------------------------------


@pytest.mark.parametrize("form", ["lod", "padded"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_loss_equals_brute_force_over_every_path(form, dtype):
    x, w, label = _sample(np.random.default_rng(0), dtype=dtype)
    out = _kernel("linear_chain_crf", _ins(form, x, w, label))
    want = [_brute_nll(xs.astype(np.float64), w.astype(np.float64), ls[:, 0])
            for xs, ls in zip(_split(x, LENS), _split(label, LENS))]
    assert out["LogLikelihood"].dtype == dtype and out["LogLikelihood"].shape == (len(LENS), 1)
    np.testing.assert_allclose(out["LogLikelihood"][:, 0], want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert out["LogLikelihood"][2, 0] == 0  # the empty sequence
    alpha = out["Alpha"] if form == "lod" else out["Alpha"][np.arange(5)[None] < np.array(LENS)[:, None]]
    np.testing.assert_allclose(alpha.sum(1), 1, rtol=1e-6)  # Fluid's normalised forward vectors
    np.testing.assert_allclose(out["TransitionExps"], np.exp(w), rtol=1e-6)


@pytest.mark.parametrize("form", ["lod", "padded"])
def test_viterbi_equals_brute_force_and_marks_the_label(form):
    x, w, label = _sample(np.random.default_rng(1))
    ins = _ins(form, x, w, label)
    got = _kernel("crf_decoding", {k: v for k, v in ins.items() if k != "Label"})["ViterbiPath"]
    best = np.concatenate([_brute_best(xs, w) if len(xs) else np.zeros(0, np.int64) for xs in _split(x, LENS)])
    if form == "lod":
        assert got.shape == (sum(LENS), 1) and got.dtype == np.int64
        np.testing.assert_array_equal(got[:, 0], best)
    else:
        np.testing.assert_array_equal(got, _pad(best, LENS, 5, 0))  # 0 past each length
    marked = _kernel("crf_decoding", ins)["ViterbiPath"]
    hit = (best == label[:, 0]).astype(np.int64)
    np.testing.assert_array_equal(marked, hit[:, None] if form == "lod" else _pad(hit, LENS, 5, 0))
    assert 0 < hit.sum() < hit.size  # both values occur


def _fluid_scan(x: np.ndarray, w: np.ndarray) -> list:
    """Fluid 1.8's CRFDecoding kernel transcribed loop for loop (the reference for ties)."""
    n, d = x.shape
    alpha, track = np.zeros((n, d), x.dtype), np.zeros((n, d), int)
    alpha[0] = w[0] + x[0]
    for k in range(1, n):
        for i in range(d):
            best, arg = -np.finfo(x.dtype).max, 0
            for j in range(d):
                s = alpha[k - 1, j] + w[j + 2, i]
                if s > best:
                    best, arg = s, j
            alpha[k, i], track[k, i] = best + x[k, i], arg
    best, arg = -np.finfo(x.dtype).max, 0
    for i in range(d):
        if alpha[n - 1, i] + w[1, i] > best:
            best, arg = alpha[n - 1, i] + w[1, i], i
    path = [arg]
    for k in range(n - 1, 0, -1):
        path.insert(0, track[k, path[0]])
    return path


def test_ties_go_to_the_lowest_tag_as_in_fluids_scan():
    rng = np.random.default_rng(2)
    lens = [4, 5, 1, 3, 6]
    x = rng.integers(-1, 2, (sum(lens), 4)).astype(np.float32)  # few values: ties everywhere
    w = rng.integers(-1, 2, (6, 4)).astype(np.float32)
    got = _kernel("crf_decoding", {"Emission": LoDTensor.from_lengths(x, [lens]), "Transition": w})["ViterbiPath"]
    want = np.concatenate([_fluid_scan(xs, w) for xs in _split(x, lens)])
    np.testing.assert_array_equal(got[:, 0], want)
    zeros = _kernel("crf_decoding", {"Emission": LoDTensor.from_lengths(np.zeros((3, 4), np.float32), [[3]]),
                                     "Transition": np.zeros((6, 4), np.float32)})["ViterbiPath"]
    np.testing.assert_array_equal(zeros[:, 0], [0, 0, 0])


# -- gradients against central differences, through the executor ------------------------------


def _crf_program(form: str, t: int = 5):
    x = L.data("x", [t, D] if form == "padded" else [D], dtype="float64", lod_level=0 if form == "padded" else 1)
    y = L.data("y", [t] if form == "padded" else [1], dtype="int64", lod_level=0 if form == "padded" else 1)
    length = L.data("len", [1], dtype="int64") if form == "padded" else None
    x.stop_gradient = False
    cost = L.linear_chain_crf(x, y, param_attr=fluid.ParamAttr(name="crfw"), length=length)
    g = L.data("g", [1], dtype="float64")
    return cost, L.reduce_sum(L.elementwise_mul(cost, g))


@pytest.mark.parametrize("form", ["lod", "padded"])
def test_gradients_equal_central_differences(fresh_programs, form):
    main, startup = fresh_programs
    _, loss = _crf_program(form)
    params_grads = fluid.append_backward(loss)
    assert [(p.name, g.name) for p, g in params_grads] == [("crfw", "crfw@GRAD")]
    types = [op.type for op in main.global_block().ops]
    assert types.count("linear_chain_crf_grad") == 1
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(3)
    x, w, label = _sample(rng)
    scope = fluid.global_scope()
    scope.find_var("crfw").get_tensor().set(w, fluid.CPUPlace())
    ins = _ins(form, x, w, label)
    feed = {"x": ins["Emission"], "y": ins["Label"], "g": rng.standard_normal((len(LENS), 1))}
    if form == "padded":
        feed["len"] = ins["Length"].reshape(-1, 1)

    def loss_at(delta_x=0.0, delta_w=0.0):
        scope.find_var("crfw").get_tensor().set(w + delta_w, fluid.CPUPlace())
        fx = feed["x"]
        f = {**feed, "x": fx.with_data(fx.data + delta_x) if isinstance(fx, LoDTensor) else fx + delta_x}
        try:
            return float(exe.run(main, feed=f, fetch_list=[loss])[0][0])
        finally:
            scope.find_var("crfw").get_tensor().set(w, fluid.CPUPlace())

    dx, dw = exe.run(main, feed=feed, fetch_list=["x@GRAD", "crfw@GRAD"], return_numpy=False)
    dx = np.array(dx)
    xdata = feed["x"].data if form == "lod" else feed["x"]
    num_x = np.zeros_like(xdata)
    for i in np.ndindex(*xdata.shape):
        e = np.zeros_like(xdata)
        e[i] = 1e-6
        num_x[i] = (loss_at(delta_x=e) - loss_at(delta_x=-e)) / 2e-6
    np.testing.assert_allclose(dx, num_x, rtol=1e-6, atol=1e-8)
    if form == "padded":  # padding gets no gradient
        assert not dx[np.arange(5)[None] >= np.array(LENS)[:, None]].any()
    num_w = np.zeros_like(w)
    for i in np.ndindex(*w.shape):
        e = np.zeros_like(w)
        e[i] = 1e-6
        num_w[i] = (loss_at(delta_w=e) - loss_at(delta_w=-e)) / 2e-6
    np.testing.assert_allclose(np.array(dw), num_w, rtol=1e-6, atol=1e-8)


def test_the_layers_make_and_share_fluids_parameter(fresh_programs):
    main = fresh_programs[0]
    x = L.data("x", [4], dtype="float32", lod_level=1)
    y = L.data("y", [1], dtype="int64", lod_level=1)
    cost = L.linear_chain_crf(x, y)
    assert main.global_block().var("linear_chain_crf_0.w_0").shape == (6, 4)  # Fluid's name, Xavier
    assert cost.shape == (-1, 1) and cost.lod_level == 0
    path = L.crf_decoding(x, param_attr=fluid.ParamAttr(name="linear_chain_crf_0.w_0"))
    assert path.dtype == "int64" and path.lod_level == 1 and path.shape == (-1, 1)
    op = main.global_block().ops[-1]
    assert op.type == "crf_decoding" and op.inputs["Transition"] == ["linear_chain_crf_0.w_0"]
    assert fluid.layers.nn.linear_chain_crf is L.linear_chain_crf and fluid.layers.nn.crf_decoding is L.crf_decoding


# -- bad input ---------------------------------------------------------------------------------


def test_bad_input_says_what_is_wrong(fresh_programs):
    main = fresh_programs[0]
    x, w, label = _sample(np.random.default_rng(4))
    ins = _ins("lod", x, w, label)
    with pytest.raises(OutOfRange, match="label tag 3 is out of range: with 3 tags .* a tag is 0..2"):
        _kernel("linear_chain_crf", {**ins, "Label": ins["Label"].with_data(np.full_like(label, 3))})
    with pytest.raises(OutOfRange, match="label tag -1 is out of range"):
        _kernel("crf_decoding", {**ins, "Label": ins["Label"].with_data(np.full_like(label, -1))})
    bad = LoDTensor.from_lengths(label, [[4, 1, 0, 3, 2]])
    with pytest.raises(ValueError, match=r"Emission's LoD \[\[0, 3, 4, 4, 8, 10\]\] must be Label's "
                                         r"\[\[0, 4, 5, 5, 8, 10\]\]"):
        _kernel("linear_chain_crf", {**ins, "Label": bad})
    with pytest.raises(ValueError, match="Label must be a sequence"):
        _kernel("linear_chain_crf", {**ins, "Label": label})
    with pytest.raises(ValueError, match=r"Transition must be \[D \+ 2, D\] = \[5, 3\] .* got Transition\[3, 3\]"):
        _kernel("crf_decoding", {**ins, "Transition": w[2:]})
    with pytest.raises(ValueError, match="Emission must be a sequence"):
        _kernel("crf_decoding", {"Emission": x, "Transition": w})
    with pytest.raises(ValueError, match=r"Length \[3, 9\] must give one length in 0..5 for each of the 2 rows"):
        _kernel("crf_decoding", {"Emission": np.zeros((2, 5, D)), "Transition": w, "Length": np.array([3, 9])})

    xv = L.data("x", [D], dtype="float32", lod_level=1)
    yv = L.data("y", [1], dtype="int64", lod_level=1)
    wrong = L.create_parameter([D + 1, D], "float32", name="wrong")
    with pytest.raises(ProgramError, match=r"Transition must be \[D \+ 2, D\] .* got Transition\[4, 3\]"):
        main.global_block().append_op("linear_chain_crf", {"Emission": [xv], "Transition": [wrong], "Label": [yv]},
                                      {s: [f"o.{s}"] for s in ("Alpha", "EmissionExps", "TransitionExps",
                                                                "LogLikelihood")})
    with pytest.raises(ProgramError, match=r"Emission must be padded \[batch, max_len, D\] \(with Length\)"):
        L.linear_chain_crf(L.data("x2", [D], dtype="float32"), yv, length=L.data("n", [1], dtype="int64"))
    with pytest.raises(TypeError, match="The data type of 'label' in linear_chain_crf must be"):
        L.linear_chain_crf(xv, L.data("yf", [1], dtype="float32", lod_level=1))
    with pytest.raises(ValueError, match="no Parameter name crfw found"):
        L.crf_decoding(xv, param_attr=fluid.ParamAttr(name="crfw"))


def test_a_label_out_of_range_fails_the_run_naming_the_op(fresh_programs):
    main, startup = fresh_programs
    xv = L.data("x", [D], dtype="float32", lod_level=1)
    yv = L.data("y", [1], dtype="int64", lod_level=1)
    loss = L.mean(L.linear_chain_crf(xv, yv))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    x, _, label = _sample(np.random.default_rng(5), dtype=np.float32)
    feed = {"x": fluid.create_lod_tensor(x, [LENS], fluid.CPUPlace()),
            "y": fluid.create_lod_tensor(label + 5, [LENS], fluid.CPUPlace())}
    with pytest.raises(OpError, match="(?s)`linear_chain_crf`.*label tag [5-7] is out of range") as got:
        exe.run(main, feed=feed, fetch_list=[loss])
    assert isinstance(got.value.__cause__, OutOfRange)


# -- against Fluid 1.8.5 -----------------------------------------------------------------------

HEAD = SCRIPT_HEAD + r'''
d = np.load(spec["data"])
place = fluid.CPUPlace()
'''
# every output of linear_chain_crf (fetched by slot), both gradients and crf_decoding (without
# and with a label, and on integer scores where ties abound), in the LoD and the padded forms
OPS_SCRIPT = HEAD + r'''
D, T = spec["D"], spec["T"]
out = {}
for form in ("lod", "padded"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        if form == "lod":
            x = fluid.data("x", [-1, D], "float32", lod_level=1)
            y = fluid.data("y", [-1, 1], "int64", lod_level=1)
            n = None
        else:
            x = fluid.data("x", [-1, T, D], "float32")
            y = fluid.data("y", [-1, T], "int64")
            n = fluid.data("n", [-1], "int64")
        x.stop_gradient = False
        block = main.global_block()
        w = fluid.layers.create_parameter([D + 2, D], "float32", name="w")
        fluid.layers.create_parameter([D + 2, D], "float32", name="wt")
        res = {k: block.create_var(name=k, dtype="float32")
               for k in ("Alpha", "EmissionExps", "TransitionExps", "LogLikelihood")}
        ins = {"Emission": [x], "Transition": [w], "Label": [y]}
        if n is not None:
            ins["Length"] = [n]
        block.append_op(type="linear_chain_crf", inputs=ins, outputs={k: [v] for k, v in res.items()})
        g = fluid.data("g", [-1, 1], "float32")
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(res["LogLikelihood"], g))
        fluid.backward.append_backward(loss)
        dec = [fluid.layers.crf_decoding(x, fluid.ParamAttr(name="w"), length=n),
               fluid.layers.crf_decoding(x, fluid.ParamAttr(name="w"), label=y, length=n),
               fluid.layers.crf_decoding(fluid.layers.round(x), fluid.ParamAttr(name="wt"), length=n)]
    exe = fluid.Executor(place)
    exe.run(startup)
    for name in ("w", "wt"):
        fluid.global_scope().find_var(name).get_tensor().set(d[name], place)
    lens = [d["lens"].tolist()]
    if form == "lod":
        feed = {"x": fluid.create_lod_tensor(d["x"], lens, place), "y": fluid.create_lod_tensor(d["y"], lens, place)}
    else:
        feed = {"x": d["xp"], "y": d["yp"], "n": d["lens"]}
    feed["g"] = d["g"]
    names = ["Alpha", "EmissionExps", "TransitionExps", "LogLikelihood", x.name + "@GRAD", "w@GRAD"]
    got = exe.run(main, feed=feed, fetch_list=names + dec, return_numpy=False)
    for key, v in zip(names[:4] + ["dx", "dw", "path", "hits", "ties"], got):
        out[form + "/" + key] = np.array(v)
np.savez(spec["out"], **out)
'''


def _ops_data():
    rng = np.random.default_rng(6)
    d, t, lens = 5, 7, np.array([3, 1, 0, 7, 2])
    x = (rng.standard_normal((lens.sum(), d)) * 3).astype(np.float32)
    y = rng.integers(0, d, (lens.sum(), 1)).astype(np.int64)
    return {"x": x, "y": y, "lens": lens, "xp": _pad(x, lens, t, 0.5), "yp": _pad(y[:, 0], lens, t, 3),
            "w": rng.standard_normal((d + 2, d)).astype(np.float32),
            "wt": rng.integers(-1, 2, (d + 2, d)).astype(np.float32),
            "g": rng.standard_normal((len(lens), 1)).astype(np.float32)}, {"D": d, "T": t}


@pytest.mark.paddle
def test_every_output_and_gradient_equals_fluid_1_8_5(fluid18_python, tmp_path):
    data, dims = _ops_data()
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, OPS_SCRIPT, tmp_path / "fluid", data, framework="fluid", **dims)
    ours = run_reference(sys.executable, OPS_SCRIPT, tmp_path, data, framework="placegroup", **dims)
    assert sorted(ours) == sorted(theirs)
    for key, want in theirs.items():
        assert ours[key].shape == want.shape and ours[key].dtype == want.dtype, key
        if want.dtype.kind == "i":
            np.testing.assert_array_equal(ours[key], want, err_msg=key)
        elif key.endswith("LogLikelihood"):
            np.testing.assert_allclose(ours[key], want, rtol=1e-5, err_msg=key)
        else:
            np.testing.assert_allclose(ours[key], want, rtol=1e-4, atol=1e-6, err_msg=key)


# a tagger: embedding -> fc -> linear_chain_crf (mean, Adam), crf_decoding on its transition
TAGGER_SCRIPT = HEAD + r'''
V, E, D, T = spec["V"], spec["E"], spec["D"], spec["T"]
padded = spec["form"] == "padded"
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    if padded:
        word = fluid.data("word", [-1, T, 1], "int64")
        tag = fluid.data("tag", [-1, T], "int64")
        length = fluid.data("length", [-1], "int64")
    else:
        word = fluid.data("word", [-1, 1], "int64", lod_level=1)
        tag = fluid.data("tag", [-1, 1], "int64", lod_level=1)
        length = None
    emb = fluid.layers.embedding(word, size=[V, E])
    emission = fluid.layers.fc(emb, size=D, num_flatten_dims=2 if padded else 1)
    crfw = fluid.ParamAttr(name="crfw")
    loss = fluid.layers.mean(fluid.layers.linear_chain_crf(emission, tag, param_attr=crfw, length=length))
    path = fluid.layers.crf_decoding(emission, param_attr=crfw, length=length)
    hits = fluid.layers.crf_decoding(emission, param_attr=crfw, label=tag, length=length)
    fluid.optimizer.Adam(learning_rate=0.1).minimize(loss)
exe = fluid.Executor(place)
exe.run(startup)
names = sorted(p.name for p in main.global_block().all_parameters())
assert names == sorted(k[2:] for k in d.files if k.startswith("p/")), names
for n in names:
    fluid.global_scope().find_var(n).get_tensor().set(d["p/" + n], place)
out = {}
for i in range(spec["steps"]):
    lens = d["lens%d" % i]
    if padded:
        feed = {"word": d["words%d" % i], "tag": d["tags%d" % i], "length": lens}
    else:
        valid = np.arange(T)[None] < lens[:, None]
        feed = {"word": fluid.create_lod_tensor(d["words%d" % i][valid], [lens.tolist()], place),
                "tag": fluid.create_lod_tensor(d["tags%d" % i][valid][:, None], [lens.tolist()], place)}
    got = exe.run(main, feed=feed, fetch_list=[loss, path, hits], return_numpy=False)
    out["loss%d" % i], out["path%d" % i], out["hits%d" % i] = (np.array(v) for v in got)
out.update({"p/" + n: np.array(fluid.global_scope().find_var(n).get_tensor()) for n in names})
np.savez(spec["out"], **out)
'''
TAGGER = {"V": 20, "E": 8, "D": 5, "T": 6, "steps": 4}


def _tagger_data():
    rng = np.random.default_rng(7)
    v, e, d, t = TAGGER["V"], TAGGER["E"], TAGGER["D"], TAGGER["T"]
    shapes = {"embedding_0.w_0": (v, e), "fc_0.w_0": (e, d), "fc_0.b_0": (d,), "crfw": (d + 2, d)}
    data = {"p/" + n: rng.uniform(-0.5, 0.5, s).astype(np.float32) for n, s in shapes.items()}
    for i in range(TAGGER["steps"]):
        lens = rng.integers(1, t + 1, 4).astype(np.int64)
        words = rng.integers(0, v, (4, t, 1)).astype(np.int64)
        data.update({f"lens{i}": lens, f"words{i}": words,
                     f"tags{i}": ((words[:, :, 0] + 1) % d).astype(np.int64)})  # a tag each word predicts
    return data


@pytest.mark.parametrize("form", ["lod", "padded"])
def test_a_tagger_learns(tmp_path, form):
    ours = run_reference(sys.executable, TAGGER_SCRIPT, tmp_path, _tagger_data(), framework="placegroup", form=form,
                         **{**TAGGER, "steps": 4})
    losses = [float(ours[f"loss{i}"].reshape(-1)[0]) for i in range(4)]
    assert losses[-1] < losses[0], losses
    assert not np.array_equal(ours["p/crfw"], _tagger_data()["p/crfw"])
    assert ours["path0"].shape == ((_tagger_data()["lens0"].sum(), 1) if form == "lod" else (4, TAGGER["T"]))


@pytest.mark.paddle
@pytest.mark.parametrize("form", ["lod", "padded"])
def test_a_tagger_trains_as_in_fluid_1_8_5(fluid18_python, tmp_path, form):
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, TAGGER_SCRIPT, tmp_path / "fluid", _tagger_data(), framework="fluid",
                           form=form, **TAGGER)
    ours = run_reference(sys.executable, TAGGER_SCRIPT, tmp_path, _tagger_data(), framework="placegroup", form=form,
                         **TAGGER)
    assert sorted(ours) == sorted(theirs)
    for key, want in theirs.items():
        if key.startswith(("path", "hits")):
            np.testing.assert_array_equal(ours[key], want, err_msg=key)
        elif key.startswith("loss"):
            np.testing.assert_allclose(ours[key], want, rtol=1e-5, err_msg=key)
        else:
            np.testing.assert_allclose(ours[key], want, rtol=1e-4, atol=1e-6, err_msg=key)


# -- across processes ------------------------------------------------------------------------

def _crf_tagger():
    words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
    tags = fluid.layers.data("tags", [1], dtype="int64", lod_level=1)
    emb = fluid.layers.embedding(words, size=[30, 6], param_attr=fluid.ParamAttr(name="emb"))
    feature = fluid.layers.fc(emb, D, param_attr=fluid.ParamAttr(name="emission_w"))
    cost = fluid.layers.linear_chain_crf(feature, tags, param_attr=fluid.ParamAttr(name="transition"))
    loss = fluid.layers.mean(cost)  # a mean over the sequences, each sequence's cost its own
    fluid.optimizer.Adam(learning_rate=0.05).minimize(loss)
    return [words, tags], loss


def test_a_crf_tagger_trains_as_2_trainers_and_2_pservers_equal_to_one_process():
    rng = np.random.default_rng(8)
    batches = []
    for _ in range(4):
        lengths = [int(n) for n in rng.integers(1, 7, 8)]
        n = sum(lengths)
        batches.append((LoDTensor.from_lengths(rng.integers(0, 30, (n, 1)).astype("int64"), [lengths]),
                        LoDTensor.from_lengths(rng.integers(0, D, (n, 1)).astype("int64"), [lengths])))
    local = run_local(_crf_tagger, batches)
    cluster = run_cluster(_crf_tagger, trainers=2, pservers=2, batches=batches)
    np.testing.assert_allclose(np.mean([cluster.losses[0], cluster.losses[1]], axis=0), local.losses[0], rtol=1e-5)
    for name, value in local.params[0].items():
        np.testing.assert_allclose(cluster.params[0][name], value, rtol=1e-5, atol=1e-6, err_msg=name)
