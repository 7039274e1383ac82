"""The loss layers of placegroup/layers/loss.py: small models with each train in one process
and their loss falls; nce and hsigmoid name their parameters as Fluid does, train the same
with sparse and dense gradients, and nce draws its negatives as NOTE(nce-sampling) says
(deterministic, by global row, by step for seed 0, from the sampler's distribution).

``test_*_match_paddle`` (marked ``paddle``) train the same models in PaddlePaddle 2.6 (its
legacy Fluid ops through ``LayerHelper``) in a subprocess and compare the per-step losses;
they run only when ``PLACEGROUP_PADDLE_PYTHON`` names a python that has paddle.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import placegroup as fluid
from placegroup.initializer import NumpyArrayInitializer
from placegroup.ir.framework import SELECTED_ROWS
from placegroup.layers.loss import alias_tables
from placegroup.ops.registry import KernelContext, get_op_def
from placegroup.ops.sampled_loss import draw_negatives
from placegroup.values import SelectedRows
from tests.inproc import run_cluster, run_local
from tests.paddle_ref.reference import run_reference
from tests.test_layers import fresh, value

L = fluid.layers
N, D = 32, 8


def _data(seed: int = 0) -> dict:
    r = np.random.default_rng(seed)
    x = r.standard_normal((N, D)).astype(np.float32)
    cls = np.argmax(x @ r.standard_normal((D, 10)), axis=1)
    return {"x": x, "x2": r.standard_normal((N, D)).astype(np.float32), "cls": cls.reshape(-1, 1).astype(np.int64),
            "t": (r.uniform(size=(N, 3)) < 0.5).astype(np.float32),
            "y": (x @ r.standard_normal((D, 2))).astype(np.float32),
            "soft": r.dirichlet(np.ones(4), size=N).astype(np.float32),
            "unit": (lambda u: u / np.linalg.norm(u, axis=1, keepdims=True))(x[:, :4] + 0.1).astype(np.float32)}


# Each head: (feeds it needs, builder(vars) -> per-row or mean loss). The model's features
# are ``x`` (and ``x2`` for pairs); every builder makes its own parameters.
def _fc(h, size, act=None):
    return L.fc(h, size, act=act)


HEADS = {
    "sigmoid_ce": lambda v: L.sigmoid_cross_entropy_with_logits(_fc(v["x"], 3), v["t"], normalize=True),
    "focal": lambda v: L.sigmoid_focal_loss(_fc(v["x"], 3), v["cls32"], L.fill_constant([1], "int32", 1)),
    "teacher_student": lambda v: L.teacher_student_sigmoid_loss(_fc(v["x"], 1), v["ts"]),
    "kldiv_log_softmax": lambda v: L.kldiv_loss(L.log_softmax(_fc(v["x"], 4)), v["soft"], "batchmean"),
    "cos_sim": lambda v: L.scale(L.cos_sim(_fc(v["x"], 4), v["unit"]), -1.0, 1.0),
    "l2_normalize_mse": lambda v: L.mse_loss(L.l2_normalize(_fc(v["x"], 4), axis=1), v["unit"]),
    "smooth_l1": lambda v: L.smooth_l1(_fc(v["x"], 2), v["y"], sigma=2.0),
    "huber": lambda v: L.huber_loss(_fc(v["x"], 2), v["y"], delta=1.0),
    "log_loss": lambda v: L.log_loss(_fc(v["x"], 1, act="sigmoid"), v["t1"]),
    "mse": lambda v: L.mse_loss(_fc(v["x"], 2), v["y"]),
    "rank_loss": lambda v: L.rank_loss(v["t1"], _fc(v["x"], 1), _fc(v["x2"], 1)),
    "margin_rank_loss": lambda v: L.margin_rank_loss(v["pm1"], _fc(v["x"], 1), _fc(v["x2"], 1), margin=0.5),
    "bpr": lambda v: L.bpr_loss(_fc(v["x"], 10), v["cls"]),
    "nce": lambda v: L.nce(v["x"], v["cls"], num_total_classes=10, num_neg_samples=4),
    "nce_log_uniform": lambda v: L.nce(v["x"], v["cls"], num_total_classes=10, num_neg_samples=4,
                                       sampler="log_uniform", seed=7),
    "nce_custom_dist": lambda v: L.nce(v["x"], v["cls"], num_total_classes=10, num_neg_samples=4,
                                       sampler="custom_dist", custom_dist=np.full(10, 0.1)),
    "hsigmoid": lambda v: L.hsigmoid(v["x"], v["cls"], num_classes=10),
    "npair": lambda v: L.npair_loss(_fc(v["xf"], 4), _fc(v["xf"], 4), v["lf"]),
}


def _vars() -> dict:
    v = {k: L.data(k, shape=[s]) for k, s in (("x", D), ("x2", D), ("t", 3), ("y", 2), ("soft", 4), ("unit", 4),
                                             ("t1", 1), ("ts", 1), ("pm1", 1), ("oh", 10))}
    v["cls"] = L.data("cls", shape=[1], dtype="int64")
    v["cls32"] = L.data("cls32", shape=[1], dtype="int32")
    v["xf"] = L.data("xf", shape=[N, D], append_batch_size=False)  # npair_loss needs a known batch
    v["lf"] = L.data("lf", shape=[N], append_batch_size=False)
    return v


def _feed(d: dict) -> dict:
    t1 = d["t"][:, :1]
    ts = np.where(d["cls"] < 3, -2.0, np.where(d["cls"] < 5, -1.0, d["t"][:, 1:2] * 0.8 + (d["cls"] > 7)))
    return {"x": d["x"], "x2": d["x2"], "t": d["t"], "y": d["y"], "soft": d["soft"], "unit": d["unit"], "t1": t1,
            "ts": ts.astype(np.float32), "pm1": 2 * t1 - 1, "cls": d["cls"], "cls32": (d["cls"] % 4).astype(np.int32),
            "oh": np.eye(10, dtype=np.float32)[d["cls"][:, 0]], "xf": d["x"],
            "lf": (d["cls"][:, 0] % 4).astype(np.float32)}


def _train(head: str, steps: int = 40, lr: float = 0.2, build=None) -> np.ndarray:
    with fresh() as (main, startup, exe):
        v = _vars()
        loss = L.mean((build or HEADS[head])(v))
        fluid.optimizer.SGD(learning_rate=lr).minimize(loss)
        exe.run(startup)
        feed = _feed(_data())
        return np.array([exe.run(main, feed=feed, fetch_list=[loss])[0].item() for _ in range(steps)])


LR = {"sigmoid_ce": 20.0, "nce": 3.0, "nce_log_uniform": 3.0, "nce_custom_dist": 3.0}  # small losses: larger steps


@pytest.mark.parametrize("head", sorted(HEADS))
def test_loss_falls(head):
    losses = _train(head, lr=LR.get(head, 0.2))
    assert np.isfinite(losses).all(), losses
    assert losses[-5:].mean() < 0.85 * losses[:5].mean(), f"{head}: {losses[:5]} ... {losses[-5:]}"


def test_layers_shapes_and_values():
    d = _data()
    with fresh() as (main, startup, exe):
        v = _vars()
        sce = L.sigmoid_cross_entropy_with_logits(v["y"], v["y"] * 0 + 0.5)
        outs = [sce, L.cos_sim(v["x"], v["x2"]), L.l2_normalize(v["x"], axis=1), L.log_softmax(v["x"]),
                L.huber_loss(v["y"], v["y"] * 0.5, 0.5), L.mse_loss(v["y"], v["y"] * 0.0)]
        assert [o.shape for o in outs] == [(-1, 2), (-1, 1), (-1, D), (-1, D), (-1, 2), (1,)]
        got = exe.run(main, feed=_feed(d), fetch_list=outs)
    x, x2, y = d["x"], d["x2"], d["y"]
    r = 0.5 * y
    want = [np.logaddexp(0, y) - 0.5 * y,
            ((x * x2).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(x2, axis=1)).reshape(-1, 1),
            x / np.sqrt((x * x).sum(1, keepdims=True) + 1e-12), x - np.log(np.exp(x).sum(1, keepdims=True)),
            np.where(np.abs(r) <= 0.5, r * r / 2, 0.5 * (np.abs(r) - 0.25)), np.array([(y * y).mean()])]
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"output {i}")


def _np_npair(a, p, y, l2_reg=0.002):
    same = (y[:, None] == y[None, :]).astype(np.float64)
    same /= same.sum(1, keepdims=True)
    sim = a @ p.T
    logp = sim - sim.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    ce = -(same * logp).sum(1, keepdims=True)
    l2 = ((a * a).sum(1).mean() + (p * p).sum(1).mean()) * 0.25 * l2_reg
    return l2 + (same * ce).sum(0).mean()


def test_npair_loss_is_fluids_formula():
    d = _feed(_data())
    with fresh() as (main, startup, exe):
        v = _vars()
        loss = L.npair_loss(v["xf"], L.scale(v["xf"], 0.5), v["lf"], l2_reg=0.01)
        assert loss.shape == (1,)
        got = exe.run(main, feed=d, fetch_list=[loss])[0]
        with pytest.raises(ValueError, match="need a known batch size"):
            L.npair_loss(v["x"], v["x"], v["t1"])
    x = d["xf"].astype(np.float64)
    np.testing.assert_allclose(got, [_np_npair(x, 0.5 * x, d["lf"], 0.01)], rtol=1e-5)


# -- nce and hsigmoid: parameters, sparse gradients -----------------------------------------


def test_parameter_names_follow_fluid():
    with fresh() as (main, startup, exe):
        v = _vars()
        L.nce(v["x"], v["cls"], num_total_classes=10, sampler="custom_dist", custom_dist=np.full(10, 0.1))
        L.hsigmoid(v["x"], v["cls"], num_classes=10)
        L.hsigmoid(v["x"], v["cls"], num_classes=6, bias_attr=False, name="tree")
        params = {p.name: (tuple(p.shape), p.trainable) for p in main.global_block().all_parameters()}
    assert params == {"nce_0.w_0": ((10, D), True), "nce_0.b_0": ((10, 1), True), "nce_0.w_1": ((10,), False),
                      "nce_0.w_2": ((10,), False), "nce_0.w_3": ((10,), False),
                      "hierarchical_sigmoid_0.w_0": ((9, D), True), "hierarchical_sigmoid_0.b_0": ((9, 1), True),
                      "tree.w_0": ((5, D), True)}


def test_layer_errors_name_the_problem():
    with fresh():
        v = _vars()
        with pytest.raises(ValueError, match="sampler 'zipf' is not one of"):
            L.nce(v["x"], v["cls"], num_total_classes=10, sampler="zipf")
        with pytest.raises(ValueError, match="custom_dist of 10 probabilities, got 3"):
            L.nce(v["x"], v["cls"], num_total_classes=10, sampler="custom_dist", custom_dist=[0.2, 0.3, 0.5])
        with pytest.raises(ValueError, match="num_classes must be >= 2"):
            L.hsigmoid(v["x"], v["cls"], num_classes=1)
        with pytest.raises(ValueError, match="need is_custom=True"):
            L.hsigmoid(v["x"], v["cls"], num_classes=4, path_table=v["cls"])
        with pytest.warns(UserWarning, match="sparse mode should not be used without custom tree"):
            L.hsigmoid(v["x"], v["cls"], num_classes=4, is_sparse=True)


def _init(name: str, arr):
    return fluid.ParamAttr(name=name, initializer=NumpyArrayInitializer(arr))


_TABLE = np.array([[0, 1, 3], [0, 2, -1], [0, 1, 4], [0, 2, -1]] * (N // 4))
_CODE = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]] * (N // 4))


def _sparse_vs_dense(kind: str, is_sparse: bool) -> tuple[list, np.ndarray]:
    r = np.random.default_rng(3)
    w0, b0 = (0.3 * r.standard_normal((10, D))).astype(np.float32), np.zeros((10, 1), np.float32)
    with fresh() as (main, startup, exe):
        v = _vars()
        if kind == "nce":
            cost = L.nce(v["x"], v["cls"], 10, num_neg_samples=3, param_attr=_init("w", w0), bias_attr=_init("b", b0),
                         seed=2, is_sparse=is_sparse)
        else:
            table = L.data("table", shape=[3], dtype="int64")
            code = L.data("code", shape=[3], dtype="int64")
            cost = L.hsigmoid(v["x"], v["cls"], 5, param_attr=_init("w", w0[:5]), bias_attr=_init("b", b0[:5]),
                              path_table=table, path_code=code, is_custom=True, is_sparse=is_sparse)
        loss = L.mean(cost)
        fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)
        assert (main.global_block().var("w@GRAD").type == SELECTED_ROWS) == is_sparse
        exe.run(startup)
        feed = {**_feed(_data()), **({"table": _TABLE, "code": _CODE} if kind == "hsigmoid" else {})}
        losses = [exe.run(main, feed=feed, fetch_list=[loss])[0].item() for _ in range(5)]
        return losses, value("w")


@pytest.mark.parametrize("kind", ["nce", "hsigmoid"])
def test_sparse_gradients_train_like_dense(kind):
    dense, sparse = _sparse_vs_dense(kind, False), _sparse_vs_dense(kind, True)
    np.testing.assert_allclose(sparse[0], dense[0], rtol=1e-6)
    np.testing.assert_allclose(sparse[1], dense[1], rtol=1e-6, atol=1e-7)
    assert dense[0][-1] < dense[0][0]


def _kernel(op, ins, attrs, outs, **ctx):
    opdef = get_op_def(op)
    return opdef.kernels["cpu"](np, ins, {**opdef.attrs, **attrs}, KernelContext(outputs=outs, **ctx))


def test_nce_sparse_weight_gradient_is_the_dense_one_by_rows():
    r = np.random.default_rng(5)
    ins = {"Input": r.standard_normal((6, 3)), "Label": r.integers(0, 8, (6, 1)), "Weight": r.standard_normal((8, 3)),
           "Bias": r.standard_normal((8, 1))}
    attrs = {"num_total_classes": 8, "num_neg_samples": 5, "seed": 4}
    fwd = _kernel("nce", ins, attrs, ["Cost", "SampleLogits", "SampleLabels"])
    g = {**ins, "SampleLogits": fwd["SampleLogits"], "SampleLabels": fwd["SampleLabels"],
         "Cost@GRAD": r.standard_normal((6, 1))}
    dense = _kernel("nce_grad", g, attrs, ["Weight@GRAD"])["Weight@GRAD"]
    sparse = _kernel("nce_grad", g, {**attrs, "is_sparse": True}, ["Weight@GRAD"])["Weight@GRAD"]
    assert isinstance(sparse, SelectedRows) and sparse.height == 8
    np.testing.assert_array_equal(sparse.rows, np.unique(fwd["SampleLabels"]))  # sorted, distinct, as Fluid's
    np.testing.assert_allclose(sparse.to_dense(), dense, rtol=1e-12)


def test_hsigmoid_sparse_weight_gradient_covers_the_path_table():
    r = np.random.default_rng(6)
    ins = {"X": r.standard_normal((4, 3)), "W": r.standard_normal((5, 3)), "Label": np.zeros((4, 1), np.int64),
           "PathTable": _TABLE[:4], "PathCode": _CODE[:4]}
    fwd = _kernel("hierarchical_sigmoid", ins, {"num_classes": 5}, ["Out", "PreOut"])
    g = {**ins, "PreOut": fwd["PreOut"], "Out@GRAD": r.standard_normal((4, 1))}
    dense = _kernel("hierarchical_sigmoid_grad", g, {"num_classes": 5}, ["W@GRAD"])["W@GRAD"]
    sparse = _kernel("hierarchical_sigmoid_grad", g, {"num_classes": 5, "is_sparse": True}, ["W@GRAD"])["W@GRAD"]
    np.testing.assert_array_equal(sparse.rows, [0, 1, 2, 3, 4])
    np.testing.assert_allclose(sparse.to_dense(), dense, rtol=1e-12)
    with pytest.raises(ValueError, match="is_sparse needs a custom tree"):
        _kernel("hierarchical_sigmoid_grad", {k: v for k, v in g.items() if not k.startswith("Path")},
                {"num_classes": 6, "is_sparse": True}, ["W@GRAD"])


# -- nce sampling (NOTE(nce-sampling)) ------------------------------------------------------


def _nce_run(rows=8, rank=0, step=0, **attrs):
    r = np.random.default_rng(9)
    ins = {"Input": r.standard_normal((16, 3)).astype(np.float32)[rank * rows:(rank + 1) * rows],
           "Label": r.integers(0, 50, (16, 2))[rank * rows:(rank + 1) * rows],
           "Weight": r.standard_normal((50, 3)).astype(np.float32),
           "Bias": r.standard_normal((50, 1)).astype(np.float32)}
    attrs = {"num_total_classes": 50, "num_neg_samples": 6, **attrs}
    return ins, attrs, _kernel("nce", ins, attrs, ["Cost", "SampleLogits", "SampleLabels"], rank=rank, step=step)


@pytest.mark.parametrize("sampler", [0, 1])
def test_nce_cost_is_paddles_formula_on_the_drawn_classes(sampler):
    ins, a, out = _nce_run(sampler=sampler, seed=3)
    sl, o = out["SampleLabels"], out["SampleLogits"].astype(np.float64)
    np.testing.assert_array_equal(sl[:, :2], ins["Label"])
    logits = np.einsum("nd,nkd->nk", ins["Input"].astype(np.float64), ins["Weight"][sl]) + ins["Bias"][sl, 0]
    np.testing.assert_allclose(o, 1 / (1 + np.exp(-logits)), rtol=1e-5)
    q = 1 / 50 if sampler == 0 else np.log((sl + 2.0) / (sl + 1.0)) / np.log(50)
    b = 6 * q
    cost = np.where(np.arange(8) < 2, -np.log(o / (o + b)), -np.log(b / (o + b))).sum(1, keepdims=True)
    np.testing.assert_allclose(out["Cost"], cost, rtol=1e-5)


def test_nce_draws_are_a_function_of_seed_global_row_and_step():
    _, _, whole = _nce_run(rows=16, seed=0, step=4)
    _, _, again = _nce_run(rows=16, seed=0, step=4)
    np.testing.assert_array_equal(again["SampleLabels"], whole["SampleLabels"])
    for rank in (0, 1):  # a trainer's half of the batch draws what one process draws for those rows
        _, _, half = _nce_run(rows=8, rank=rank, seed=0, step=4)
        np.testing.assert_array_equal(half["SampleLabels"][:, 2:], whole["SampleLabels"][rank * 8:(rank + 1) * 8, 2:])
    _, _, later = _nce_run(rows=16, seed=0, step=5)
    assert (later["SampleLabels"][:, 2:] != whole["SampleLabels"][:, 2:]).mean() > 0.5  # seed 0: new ones each step
    _, _, fixed4 = _nce_run(rows=16, seed=11, step=4)
    _, _, fixed5 = _nce_run(rows=16, seed=11, step=5)
    np.testing.assert_array_equal(fixed4["SampleLabels"], fixed5["SampleLabels"])  # a seed: the same every step
    assert (fixed4["SampleLabels"] != whole["SampleLabels"]).any()


def test_nce_samplers_draw_their_distributions():
    c, rows = 12, 20000
    dist = np.linspace(1, 3, c) / np.linspace(1, 3, c).sum()
    want = {0: np.full(c, 1 / c),
            1: np.append(np.log((np.arange(c - 1) + 2) / (np.arange(c - 1) + 1)) / np.log(c), 0.0),  # never c - 1
            2: dist}
    for sampler, p in want.items():
        a = {**get_op_def("nce").attrs, "num_total_classes": c, "num_neg_samples": 5, "sampler": sampler, "seed": 1}
        drawn = draw_negatives(np, a, alias_tables(dist), rows, 0, 0)
        freq = np.bincount(drawn.ravel(), minlength=c) / drawn.size
        np.testing.assert_allclose(freq, p, atol=0.006, err_msg=f"sampler {sampler}")


def test_nce_program_draws_new_negatives_each_step_only_for_seed_0():
    for seed, changes in ((0, True), (5, False)):
        with fresh() as (main, startup, exe):
            v = _vars()
            loss = L.mean(L.nce(v["x"], v["cls"], num_total_classes=10, num_neg_samples=4, seed=seed))
            fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
            labels = next(op for op in main.global_block().ops if op.type == "nce").output("SampleLabels")[0]
            exe.run(startup)
            feed = _feed(_data())
            a, b = (exe.run(main, feed=feed, fetch_list=[labels])[0] for _ in range(2))
        assert (a != b).any() == changes, f"seed {seed}"


def _sampled_model(is_sparse: bool):
    def build():
        x, y = L.data("x", shape=[6]), L.data("y", shape=[1], dtype="int64")
        h = L.fc(x, 4, act="tanh")
        cost = L.mean(L.nce(h, y, num_total_classes=12, num_neg_samples=3, is_sparse=is_sparse)) + \
            L.mean(L.hsigmoid(h, y, num_classes=12))
        fluid.optimizer.SGD(0.5).minimize(cost)
        return [x, y], cost

    return build


@pytest.mark.parametrize("is_sparse", [False, True])
def test_nce_and_hsigmoid_on_two_trainers_equal_one_process(is_sparse):
    r = np.random.default_rng(4)
    batches = [(r.standard_normal((8, 6)).astype(np.float32), r.integers(0, 12, (8, 1))) for _ in range(4)]
    labels = ("nce_0.tmp_2",)  # the nce op's SampleLabels
    local = run_local(_sampled_model(is_sparse), batches, fetch=labels)
    cluster = run_cluster(_sampled_model(is_sparse), trainers=2, pservers=2, batches=batches, fetch=labels)
    for step in range(len(batches)):
        for k in (0, 1):  # trainer k draws the negatives one process draws for its rows
            np.testing.assert_array_equal(cluster.fetched[k][step][0], local.fetched[0][step][0][4 * k:4 * k + 4])
        assert np.mean([cluster.losses[k][step] for k in (0, 1)]) == pytest.approx(local.losses[0][step], rel=1e-5)
    assert not np.array_equal(local.fetched[0][0][0], local.fetched[0][1][0])  # seed 0: new negatives each step
    for name, want in local.params[0].items():
        for k in (0, 1):
            np.testing.assert_allclose(cluster.params[k][name], want, rtol=1e-5, atol=1e-6, err_msg=name)


# -- against PaddlePaddle 2.6 ---------------------------------------------------------------

PADDLE_FEEDS = ("x", "x2", "cls", "t", "t1", "ts", "soft", "unit", "oh", "xf", "lf")
STEPS = 8

# Each model: x [N, D] -> fc (given init) -> the loss op, as Paddle builds it with LayerHelper.
PADDLE_MODELS = ["sigmoid_ce", "huber", "bpr", "rank_loss", "log_loss", "kldiv", "teacher_student", "l2_normalize",
                 "log_softmax", "hsigmoid", "nce_fixed", "npair"]

_PADDLE_RUNNER = textwrap.dedent('''
    import json, sys
    import numpy as np
    import paddle
    from paddle.base.layer_helper import LayerHelper
    paddle.enable_static()
    spec = json.loads(sys.argv[1])
    d = dict(np.load(spec["data"]))
    out = {}

    def op(type, inputs, attrs, outs, dtype="float32"):
        h = LayerHelper(type)
        made = {s: h.create_variable_for_type_inference(dtype) for s in outs}
        h.append_op(type=type, inputs=inputs, outputs=made, attrs=attrs)
        return made[outs[0]]

    def param(name):
        return paddle.ParamAttr(name=name, initializer=paddle.nn.initializer.Assign(d[name]))

    for model in spec["models"]:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [-1, d["x"].shape[1]], "float32")
            x2 = paddle.static.data("x2", [-1, d["x"].shape[1]], "float32")
            cls = paddle.static.data("cls", [-1, 1], "int64")
            t = paddle.static.data("t", [-1, 3], "float32")
            t1 = paddle.static.data("t1", [-1, 1], "float32")
            ts = paddle.static.data("ts", [-1, 1], "float32")
            soft = paddle.static.data("soft", [-1, 4], "float32")
            unit = paddle.static.data("unit", [-1, 4], "float32")
            oh = paddle.static.data("oh", [-1, 10], "float32")
            xf = paddle.static.data("xf", list(d["x"].shape), "float32")
            lf = paddle.static.data("lf", [d["x"].shape[0]], "float32")
            fc = lambda h, n, w: paddle.static.nn.fc(h, n, weight_attr=param(w), bias_attr=param(w + "b"))
            if model == "sigmoid_ce":
                loss = op("sigmoid_cross_entropy_with_logits", {"X": fc(x, 3, "w3"), "Label": t},
                          {"normalize": False, "ignore_index": -100}, ["Out"])
            elif model == "huber":
                loss = op("huber_loss", {"X": fc(x, 1, "w1"), "Y": t1}, {"delta": 0.3}, ["Out", "Residual"])
            elif model == "bpr":
                loss = op("bpr_loss", {"X": fc(x, 10, "w10"), "Label": cls}, {}, ["Y"])
            elif model == "rank_loss":
                loss = op("rank_loss", {"Label": t1, "Left": fc(x, 1, "w1"), "Right": fc(x2, 1, "v1")}, {}, ["Out"])
            elif model == "log_loss":
                p = paddle.nn.functional.sigmoid(fc(x, 1, "w1"))
                loss = op("log_loss", {"Predicted": p, "Labels": t1}, {"epsilon": 1e-4}, ["Loss"])
            elif model == "kldiv":
                logp = op("log_softmax", {"X": fc(x, 4, "w4")}, {"axis": -1}, ["Out"])
                loss = op("kldiv_loss", {"X": logp, "Target": soft}, {"reduction": "batchmean"}, ["Loss"])
            elif model == "teacher_student":
                loss = op("teacher_student_sigmoid_loss", {"X": fc(x, 1, "w1"), "Label": ts},
                          {"soft_max_up_bound": 15.0, "soft_max_lower_bound": -15.0}, ["Y"])
            elif model == "l2_normalize":
                u = op("norm", {"X": fc(x, 4, "w4")}, {"axis": 1, "epsilon": 1e-12}, ["Out", "Norm"])
                loss = paddle.mean(paddle.square(u - unit))
            elif model == "log_softmax":
                logp = paddle.log(paddle.nn.functional.softmax(fc(x, 10, "w10")))
                loss = -paddle.sum(logp * oh, axis=1)
            elif model == "hsigmoid":
                w = paddle.static.create_parameter([9, 4], "float32", attr=param("hw"))
                b = paddle.static.create_parameter([9, 1], "float32", attr=param("hb"))
                h = LayerHelper("hierarchical_sigmoid")
                loss, pre = (h.create_variable_for_type_inference("float32") for _ in range(2))
                h.append_op(type="hierarchical_sigmoid", inputs={"X": fc(x, 4, "w4"), "W": w, "Label": cls, "Bias": b},
                            outputs={"Out": loss, "PreOut": pre, "W_Out": w},
                            attrs={"num_classes": 10, "is_sparse": False, "remote_prefetch": False})
            elif model == "nce_fixed":
                w = paddle.static.create_parameter([10, 4], "float32", attr=param("nw"))
                b = paddle.static.create_parameter([10, 1], "float32", attr=param("nb"))
                h = LayerHelper("nce")
                cost = h.create_variable_for_type_inference("float32")
                logits = h.create_variable_for_type_inference("float32")
                labels = h.create_variable_for_type_inference("int64")
                h.append_op(type="nce", inputs={"Input": fc(x, 4, "w4"), "Label": cls, "Weight": w, "Bias": b},
                            outputs={"Cost": cost, "SampleLogits": logits, "SampleLabels": labels},
                            attrs={"num_total_classes": 10, "num_neg_samples": 3, "seed": 1, "sampler": 1,
                                   "is_sparse": False, "remote_prefetch": False, "custom_neg_classes": [1, 4, 8]})
                loss = cost / 4.0
            elif model == "npair":
                loss = paddle.nn.functional.npair_loss(fc(xf, 4, "w4"), fc(xf, 4, "v4"), lf)
            loss = paddle.mean(loss)
            paddle.optimizer.SGD(learning_rate=0.3).minimize(loss)
        exe = paddle.static.Executor(paddle.CPUPlace())
        scope = paddle.static.Scope()
        with paddle.static.scope_guard(scope):
            exe.run(startup)
            feed = {k: d[k] for k in spec["feeds"]}
            out[model] = np.array([exe.run(main, feed=feed, fetch_list=[loss])[0].reshape(()) for _ in
                                   range(spec["steps"])], np.float32)
    np.savez(spec["out"], **out)
''')


def _paddle_params() -> dict:
    r = np.random.default_rng(21)
    p = {}
    for n, k in (("w1", 1), ("v1", 1), ("w3", 3), ("w4", 4), ("v4", 4), ("w10", 10)):
        p[n] = (0.4 * r.standard_normal((D, k))).astype(np.float32)
        p[n + "b"] = (0.1 * r.standard_normal(k)).astype(np.float32)
    for n, rows in (("hw", 9), ("nw", 10)):  # hsigmoid's and nce's tables over 4 features
        p[n] = (0.4 * r.standard_normal((rows, 4))).astype(np.float32)
        p[n[0] + "b"] = (0.1 * r.standard_normal((rows, 1))).astype(np.float32)
    return p


def _fluid_model(model: str, v: dict, p: dict):
    def fc(h, n, w):
        return L.fc(h, n, param_attr=_init(w, p[w]), bias_attr=_init(w + "b", p[w + "b"]))

    if model == "sigmoid_ce":
        return L.sigmoid_cross_entropy_with_logits(fc(v["x"], 3, "w3"), v["t"])
    if model == "huber":
        return L.huber_loss(fc(v["x"], 1, "w1"), v["t1"], delta=0.3)
    if model == "bpr":
        return L.bpr_loss(fc(v["x"], 10, "w10"), v["cls"])
    if model == "rank_loss":
        return L.rank_loss(v["t1"], fc(v["x"], 1, "w1"), fc(v["x2"], 1, "v1"))
    if model == "log_loss":
        return L.log_loss(L.sigmoid(fc(v["x"], 1, "w1")), v["t1"])
    if model == "kldiv":
        x = fc(v["x"], 4, "w4")
        helper = fluid.layer_helper.LayerHelper("log_softmax")
        logp = helper.create_variable_for_type_inference("float32")
        helper.append_op("log_softmax", {"X": [x]}, {"Out": [logp]}, {"axis": -1})  # Paddle 2.x's op
        return L.kldiv_loss(logp, v["soft"], "batchmean")
    if model == "teacher_student":
        return L.teacher_student_sigmoid_loss(fc(v["x"], 1, "w1"), v["ts"])
    if model == "l2_normalize":
        return L.mse_loss(L.l2_normalize(fc(v["x"], 4, "w4"), axis=1), v["unit"])
    if model == "log_softmax":
        logp = L.log_softmax(fc(v["x"], 10, "w10"))
        return L.scale(L.reduce_sum(logp * v["oh"], dim=1), -1.0)
    if model == "hsigmoid":
        return L.hsigmoid(fc(v["x"], 4, "w4"), v["cls"], 10, param_attr=_init("hw", p["hw"]),
                          bias_attr=_init("hb", p["hb"]))
    if model == "nce_fixed":  # Fluid's test attr: every row's negatives are classes 1, 4, 8
        helper = fluid.layer_helper.LayerHelper("nce")
        w = helper.create_parameter(_init("nw", p["nw"]), [10, 4])
        b = helper.create_parameter(_init("nb", p["nb"]), [10, 1], is_bias=True)
        cost, logits = (helper.create_variable_for_type_inference("float32") for _ in range(2))
        labels = helper.create_variable_for_type_inference("int64")
        helper.append_op("nce", {"Input": [fc(v["x"], 4, "w4")], "Label": [v["cls"]], "Weight": [w], "Bias": [b]},
                         {"Cost": [cost], "SampleLogits": [logits], "SampleLabels": [labels]},
                         {"num_total_classes": 10, "num_neg_samples": 3, "seed": 1, "sampler": 1,
                          "custom_neg_classes": [1, 4, 8]})
        return L.scale(cost, 0.25)
    if model == "npair":
        return L.npair_loss(fc(v["xf"], 4, "w4"), fc(v["xf"], 4, "v4"), v["lf"])
    raise KeyError(model)


@pytest.fixture(scope="module")
def paddle_losses(paddle26_python, tmp_path_factory) -> dict:
    feed = _feed(_data())
    return run_reference(paddle26_python, _PADDLE_RUNNER, tmp_path_factory.mktemp("paddle_loss"),
                         {**{k: feed[k] for k in PADDLE_FEEDS}, **_paddle_params()}, timeout=600,
                         models=PADDLE_MODELS, steps=STEPS, feeds=PADDLE_FEEDS)


@pytest.mark.paddle
@pytest.mark.parametrize("model", PADDLE_MODELS)
def test_losses_match_paddle(model, paddle_losses):
    p = _paddle_params()
    with fresh() as (main, startup, exe):
        loss = L.mean(_fluid_model(model, _vars(), p))
        fluid.optimizer.SGD(learning_rate=0.3).minimize(loss)
        exe.run(startup)
        feed = _feed(_data())
        got = np.array([exe.run(main, feed=feed, fetch_list=[loss])[0].item() for _ in range(STEPS)], np.float32)
    want = paddle_losses[model]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{model}: per-step losses")
    assert got[-1] < got[0]


def test_a_hard_label_without_its_class_dim_gives_the_same_loss():
    """cross_entropy over [B, T, C] probabilities takes [B, T] labels as Fluid 1.8 does (the
    book's seq2seq feeds them so); the loss is [B, T, 1] either way."""
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(5), size=(2, 4)).astype("float32")
    lab = rng.integers(0, 5, (2, 4)).astype("int64")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        probs = fluid.layers.data("p", [2, 4, 5], dtype="float32", append_batch_size=False)
        probs.stop_gradient = False
        flat = fluid.layers.data("flat", [2, 4], dtype="int64", append_batch_size=False)
        col = fluid.layers.data("col", [2, 4, 1], dtype="int64", append_batch_size=False)
        a, b = fluid.layers.cross_entropy(probs, flat), fluid.layers.cross_entropy(probs, col)
        fluid.backward.append_backward(fluid.layers.reduce_sum(a * 2.0) + fluid.layers.reduce_sum(b))
    exe = fluid.Executor()
    exe.run(startup)
    ya, yb, g = exe.run(main, feed={"p": p, "flat": lab, "col": lab[..., None]}, fetch_list=[a, b, "p@GRAD"])
    assert ya.shape == (2, 4, 1)
    np.testing.assert_array_equal(ya, yb)
    np.testing.assert_allclose(ya[..., 0], -np.log(np.take_along_axis(p, lab[..., None], -1))[..., 0], rtol=1e-6)
    want = np.zeros_like(p)
    np.put_along_axis(want, lab[..., None], -3.0 / np.take_along_axis(p, lab[..., None], -1), -1)
    np.testing.assert_allclose(g, want, rtol=1e-5)
