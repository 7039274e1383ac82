"""CTR layers (placegroup/layers/ctr.py, ops/ctr.py): data_norm training against a numpy
model (its summaries updated by the optimizer from their statistics "gradients"), cvm's
show/click gradient, hash as XXH64 (published vectors and a scalar reference), shard_index;
and, where PLACEGROUP_PADDLE_PYTHON names a python with paddle, the ops and a data_norm
training run against Paddle 2.6 (@pytest.mark.paddle).
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from placegroup.ops.ctr import xxh64_rows
from placegroup.ops.registry import GradOpView, get_op_def
from tests.paddle_ref.reference import run_reference
from tests.test_ops import _run_grad_ops, run_kernel

L = fluid.layers


def _run(fetch, feed=None, steps=1, startup=True):
    exe, out = fluid.Executor(), []
    if startup:
        exe.run(fluid.default_startup_program())
    for _ in range(steps):
        out.append(exe.run(feed=feed or {}, fetch_list=fetch))
    return out if steps > 1 else out[0]


def _param(name):
    return np.array(fluid.global_scope().find_var(name).get_tensor())


# -- hash: XXH64 -------------------------------------------------------------------------------

_M = (1 << 64) - 1
_P = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def _xxh64_scalar(data: bytes, seed: int) -> int:
    """XXH64 one byte string at a time, in Python ints: the reference for ops/ctr.py."""
    p1, p2, p3, p4, p5 = _P
    rotl = lambda x, r: ((x << r) | (x >> (64 - r))) & _M  # noqa: E731
    rnd = lambda acc, lane: (rotl((acc + lane * p2) & _M, 31) * p1) & _M  # noqa: E731
    word = lambda i, n: int.from_bytes(data[i:i + n], "little")  # noqa: E731
    i, n = 0, len(data)
    if n >= 32:
        v = [(seed + p1 + p2) & _M, (seed + p2) & _M, seed, (seed - p1) & _M]
        while i + 32 <= n:
            v = [rnd(v[k], word(i + 8 * k, 8)) for k in range(4)]
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & _M
        for k in range(4):
            h = ((h ^ rnd(0, v[k])) * p1 + p4) & _M
    else:
        h = (seed + p5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, word(i, 8)), 27) * p1 + p4) & _M
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ ((word(i, 4) * p1) & _M), 23) * p2 + p3) & _M
        i += 4
    while i < n:
        h = (rotl(h ^ ((data[i] * p5) & _M), 11) * p1) & _M
        i += 1
    h = ((h ^ (h >> 33)) * p2) & _M
    h = ((h ^ (h >> 29)) * p3) & _M
    return h ^ (h >> 32)


def _xxh64(data: bytes, seed: int = 0) -> int:
    arr = np.frombuffer(data, np.uint8).reshape(1, -1) if data else np.zeros((1, 0), np.uint8)
    return int(xxh64_rows(np, arr, seed)[0])


@pytest.mark.parametrize("data, seed, want", [
    (b"", 0, 0xEF46DB3751D8E999), (b"a", 0, 0xD24EC4F1A98C6E5B), (b"abc", 0, 0x44BC2CF5AD770999),
    (b"Nobody inspects the spammish repetition", 0, 0xFBCEA83C8A378BF1),
    (b"Nobody inspects the spammish repetition", 1, 0x43F425448D954DB6),
    (bytes(range(100)), 7, 0x80653E7E9B887CDD),
], ids=["empty", "a", "abc", "39B", "39B-seed1", "100B-seed7"])
def test_xxh64_published_vectors(data, seed, want):
    """xxHash's own outputs (the xxhash package, v0.8 algorithm = 0.6.5 for XXH64)."""
    assert _xxh64(data, seed) == want
    assert _xxh64_scalar(data, seed) == want


def test_xxh64_rows_equal_the_scalar_reference_for_every_length_and_seed():
    rng = np.random.default_rng(0)
    for length in list(range(0, 72)) + [96, 131]:
        rows = rng.integers(0, 256, size=(3, length), dtype=np.uint8)
        for seed in (0, 1, 5, (1 << 63) + 3):
            got = xxh64_rows(np, rows, seed)
            assert [int(g) for g in got] == [_xxh64_scalar(bytes(r), seed) for r in rows], (length, seed)


def test_hash_layer_hashes_each_row_bytes_modulo_hash_size():
    x = L.data("x", shape=[2], dtype="int64")
    out = L.hash(x, hash_size=977, num_hash=3)
    assert out.shape == (-1, 3, 1) and out.dtype == "int64" and out.stop_gradient
    ids = np.array([[1, 2], [-7, 1 << 40], [0, 0]], np.int64)
    got, = _run([out], {"x": ids})
    want = [[_xxh64_scalar(r.astype("<i8").tobytes(), k) % 977 for k in range(3)] for r in ids]
    np.testing.assert_array_equal(got.reshape(3, 3), want)


def test_hash_errors_name_the_op():
    with pytest.raises(ProgramError, match="hash: X must be a 2-D int32 or int64"):
        L.hash(L.data("f", shape=[2]), hash_size=10)


# -- shard_index -------------------------------------------------------------------------------


def test_shard_index_layer():
    label = L.data("label", shape=[1], dtype="int64")
    outs = [L.shard_index(label, index_num=20, nshards=3, shard_id=k, ignore_value=-1) for k in range(3)]
    ids = np.array([[0], [6], [7], [13], [14], [19]], np.int64)
    got = _run(outs, {"label": ids})
    # size 7: shard 0 holds 0..6, shard 1 7..13, shard 2 14..19
    np.testing.assert_array_equal(np.hstack(got), [[0, -1, -1], [6, -1, -1], [-1, 0, -1], [-1, 6, -1],
                                                   [-1, -1, 0], [-1, -1, 5]])
    with pytest.raises(ValueError, match=r"shard_id \(3\) must be in \[0, nshards=3\)"):
        L.shard_index(label, 20, 3, 3)


# -- cvm ---------------------------------------------------------------------------------------


def test_cvm_forward_and_its_show_click_gradient():
    """The show/click columns' gradient is the CVM input (NOTE(cvm-grad)); the embedding
    columns get the true derivative."""
    rng = np.random.default_rng(3)
    x = (rng.integers(0, 9, size=(4, 5))).astype(np.float64)
    cvm = rng.integers(0, 9, size=(4, 2)).astype(np.float64)
    for use_cvm in (True, False):
        y = run_kernel("cvm", {"X": x, "CVM": cvm}, {"use_cvm": use_cvm})["Y"]
        dy = rng.standard_normal(y.shape)
        view = GradOpView("cvm", {"X": ["x"], "CVM": ["c"]}, {"Y": ["y"]}, {"use_cvm": use_cvm}, frozenset({"x"}),
                          lambda n: n + "@GRAD")
        grads = _run_grad_ops(get_op_def("cvm").grad(view), {"x": x, "c": cvm, "y": y, "y@GRAD": dy})
        want = np.concatenate([cvm, dy[:, 2:] if use_cvm else dy], axis=1)
        np.testing.assert_array_equal(grads["x@GRAD"], want)


def test_cvm_layer_trains_an_embedding_with_show_click_pushed_as_gradient():
    emb0 = np.arange(20, dtype=np.float32).reshape(4, 5) / 10
    w = fluid.layers.create_parameter([4, 5], "float32", name="emb",
                                      default_initializer=fluid.initializer.NumpyArrayInitializer(emb0))
    show_click = L.data("sc", shape=[2])
    y = L.continuous_value_model(w, show_click, use_cvm=False)
    assert y.shape == (4, 3)
    cost = L.reduce_sum(y * 2.0)
    fluid.optimizer.SGD(0.5).minimize(cost)
    sc = np.array([[1, 0], [3, 1], [2, 2], [5, 0]], np.float32)
    _run([cost], {"sc": sc})
    want = emb0.copy()
    want[:, :2] -= 0.5 * sc
    want[:, 2:] -= 0.5 * 2.0
    np.testing.assert_allclose(_param("emb"), want, rtol=1e-6)


# -- data_norm ---------------------------------------------------------------------------------


def _ctr_data(steps=4, n=8, c=6, seed=11):
    rng = np.random.default_rng(seed)
    xs = [(rng.normal(size=(n, c)) * 3 + 2).astype(np.float32) for _ in range(steps)]
    ys = [(x[:, :1] * 0.5 - 1 + rng.normal(size=(n, 1))).astype(np.float32) for x in xs]
    w0 = rng.uniform(-0.5, 0.5, size=(c, 1)).astype(np.float32)
    return xs, ys, w0


def _numpy_ctr(xs, ys, w0, lr, eps, init=(1e4, 0.0, 1e4), slot_dim=-1):
    """data_norm -> fc(1) -> mean squared error, SGD on w, b and the three summaries."""
    c = w0.shape[0]
    size, total, square = (np.full(c, v, np.float64) for v in init)
    w, b = w0.astype(np.float64), 0.0
    losses = []
    for x, y in zip(xs, ys):
        x = x.astype(np.float64)
        mean, scale = total / size, np.sqrt(size / square)
        h = (x - mean) * scale
        if slot_dim > 0:
            shown = np.repeat(np.abs(x[:, ::slot_dim]) >= 1e-7, slot_dim, axis=1)
            h = np.where(shown, h, 0.0)
        pred = h @ w + b
        losses.append(float(np.mean((pred - y) ** 2)))
        dpred = 2 * (pred - y) / len(x)
        dw, db = h.T @ dpred, dpred.sum()
        if slot_dim > 0:  # per-slot means over the rows that showed (NOTE(data-norm-stats))
            cnt = shown.sum(0)
            some = cnt >= 1
            g_size = np.where(some, 1.0, 0.0)
            g_sum = np.where(some, (x * shown).sum(0) / np.maximum(cnt, 1), 0.0)
            g_sq = np.where(some, (((x - mean) ** 2) * shown).sum(0) / np.maximum(cnt, 1) + cnt * eps, 0.0)
        else:
            g_size, g_sum, g_sq = np.full(c, len(x)), x.sum(0), ((x - mean) ** 2).sum(0) + len(x) * eps
        w, b = w - lr * dw, b - lr * db
        size, total, square = size - lr * g_size, total - lr * g_sum, square - lr * g_sq
    return losses, {"dn.batch_size": size, "dn.batch_sum": total, "dn.batch_square_sum": square, "w": w}


def _build_ctr(c, w0, lr, eps, param_attr=None, slot_dim=-1):
    x = L.data("x", shape=[c])
    y = L.data("y", shape=[1])
    h = L.data_norm(x, epsilon=eps, param_attr=param_attr, slot_dim=slot_dim)
    pred = L.fc(h, 1, param_attr=fluid.ParamAttr("w", initializer=fluid.initializer.NumpyArrayInitializer(w0)),
                bias_attr=fluid.ParamAttr("b"))
    cost = L.mean(L.square_error_cost(pred, y))
    fluid.optimizer.SGD(lr).minimize(cost)
    return cost


@pytest.mark.parametrize("slot_dim", [-1, 3], ids=["columns", "slots"])
def test_data_norm_ctr_model_trains_as_numpy(slot_dim):
    xs, ys, w0 = _ctr_data()
    if slot_dim > 0:
        for x in xs:
            x[::3, 0] = 0.0  # some rows do not show slot 0
    init = {"batch_size": 40.0, "batch_sum": 10.0, "batch_square": 90.0}
    cost = _build_ctr(6, w0, lr=0.05, eps=1e-4, param_attr=init, slot_dim=slot_dim)
    names = [p.name for p in fluid.default_main_program().all_parameters()]
    assert {"dn.batch_size", "dn.batch_sum", "dn.batch_square_sum"} <= set(names)
    exe = fluid.Executor()
    exe.run(fluid.default_startup_program())
    got = [float(exe.run(feed={"x": x, "y": y}, fetch_list=[cost])[0][0]) for x, y in zip(xs, ys)]
    want, params = _numpy_ctr(xs, ys, w0, 0.05, 1e-4, init=(40.0, 10.0, 90.0), slot_dim=slot_dim)
    np.testing.assert_allclose(got, want, rtol=1e-4)
    for name, value in params.items():
        np.testing.assert_allclose(_param(name).reshape(value.shape), value, rtol=1e-4, atol=1e-5, err_msg=name)


def test_data_norm_layer_shapes_names_and_errors():
    x = L.data("x", shape=[5])
    y = L.data_norm(x, name="feat", act="relu")
    assert y.shape == (-1, 5)
    ops = [op.type for op in fluid.default_main_program().global_block().ops]
    assert ops == ["data_norm", "relu"]
    init = {op.output("Out")[0]: op.attrs["value"] for op in fluid.default_startup_program().global_block().ops}
    assert init == {"feat.batch_size": 1e4, "feat.batch_sum": 0.0, "feat.batch_square_sum": 1e4}
    with pytest.raises(ValueError, match="unsupported data layout 'NDHW'"):
        L.data_norm(x, data_layout="NDHW")
    with pytest.raises(ProgramError, match=r"data_norm: X must be \[batch, channels\]"):
        L.data_norm(L.data("img", shape=[3, 4]))


# -- against Paddle 2.6 ------------------------------------------------------------------------


PADDLE_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import paddle
    from paddle.base.layer_helper import LayerHelper
    paddle.enable_static()
    spec = json.loads(sys.argv[1])
    d = dict(np.load(spec["data"]))
    exe, res = paddle.static.Executor(paddle.CPUPlace()), {}
    for case in spec["ops"]:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            ins, feed = {}, {}
            for slot in case["ins"]:
                arr = d[case["id"] + "/" + slot]
                v = paddle.static.data(case["id"] + "." + slot, arr.shape, str(arr.dtype))
                v.stop_gradient = slot not in case["grad"]
                ins[slot], feed[v.name] = [v], arr
            helper = LayerHelper(case["op"])
            outs = {s: [helper.create_variable_for_type_inference(dt)] for s, dt in case["outs"].items()}
            helper.append_op(type=case["op"], inputs=ins, outputs=outs, attrs=case["attrs"])
            fetch = [outs[s][0] for s in case["outs"]]
            names = list(case["outs"])
            if case["grad"]:
                cot = paddle.static.data(case["id"] + ".cot", d[case["id"] + "/cot"].shape, "float32")
                feed[cot.name] = d[case["id"] + "/cot"]
                first = outs[case["grad_out"]][0]
                fetch += paddle.static.gradients([paddle.sum(first * cot)], [ins[s][0] for s in case["grad"]])
                names += [s + "@GRAD" for s in case["grad"]]
        got = exe.run(main, feed=feed, fetch_list=fetch)
        res.update({case["id"] + "//" + n: g for n, g in zip(names, got)})
    # data_norm -> fc -> mse with SGD: per-step losses and the summaries after
    t = spec["train"]
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, t["c"]], "float32")
        y = paddle.static.data("y", [-1, 1], "float32")
        h = paddle.static.nn.data_norm(x, name="dn", epsilon=t["eps"], param_attr=t["init"], slot_dim=t["slot_dim"])
        w = paddle.ParamAttr(name="w", initializer=paddle.nn.initializer.Assign(d["train/w0"]))
        pred = paddle.static.nn.fc(h, 1, weight_attr=w, bias_attr=paddle.ParamAttr(name="b"))
        loss = paddle.mean(paddle.nn.functional.square_error_cost(pred, y))
        paddle.optimizer.SGD(t["lr"]).minimize(loss)
    exe.run(startup)
    losses = [exe.run(main, feed={"x": d["train/x%d" % k], "y": d["train/y%d" % k]}, fetch_list=[loss])[0]
              for k in range(t["steps"])]
    res["train//loss"] = np.array(losses, np.float32).reshape(-1)
    scope = paddle.static.global_scope()
    for n in ("dn.batch_size", "dn.batch_sum", "dn.batch_square_sum", "w"):
        res["train//" + n] = np.array(scope.find_var(n).get_tensor())
    np.savez(spec["out"], **res)
""")


def _paddle_cases(rng):
    f32 = np.float32
    size = rng.uniform(50, 100, 6).astype(f32)
    dn = {"X": rng.normal(size=(5, 6)).astype(f32), "BatchSize": size,
          "BatchSum": (size * 0.3 * rng.normal(size=6)).astype(f32),
          "BatchSquareSum": (size * rng.uniform(0.2, 1.5, 6)).astype(f32)}
    cvm = {"X": np.concatenate([rng.integers(0, 20, (4, 2)), rng.normal(size=(4, 3))], 1).astype(f32),
           "CVM": rng.integers(0, 5, (4, 2)).astype(f32)}
    return [
        ("hash32", "hash", {"X": rng.integers(-1000, 1000, (6, 3)).astype(np.int32)}, {"num_hash": 5, "mod_by": 10007},
         {"Out": "int32"}, ()),
        ("hash64", "hash", {"X": rng.integers(-(1 << 50), 1 << 50, (6, 1)).astype(np.int64)},
         {"num_hash": 2, "mod_by": 1 << 33}, {"Out": "int64"}, ()),
        ("shard", "shard_index", {"X": rng.integers(0, 50, (7, 1)).astype(np.int64)},
         {"index_num": 50, "nshards": 4, "shard_id": 2, "ignore_value": -3}, {"Out": "int64"}, ()),
        ("cvm", "cvm", cvm, {"use_cvm": True}, {"Y": "float32"}, ("X",)),
        ("cvm_off", "cvm", cvm, {"use_cvm": False}, {"Y": "float32"}, ("X",)),
        ("dn", "data_norm", dn, {"epsilon": 1e-5}, {"Y": "float32", "Means": "float32", "Scales": "float32"},
         ("X", "BatchSize", "BatchSum", "BatchSquareSum")),
    ]


@pytest.mark.paddle
def test_ctr_ops_and_data_norm_training_match_paddle(paddle26_python, tmp_path):
    rng = np.random.default_rng(5)
    data, ops, ours = {}, [], {}
    for cid, op, ins, attrs, outs, grad in _paddle_cases(rng):
        data.update({f"{cid}/{s}": a for s, a in ins.items()})
        got = run_kernel(op, ins, {**get_op_def(op).attrs, **attrs})
        ours.update({f"{cid}//{s}": got[s] for s in outs})
        spec = {"id": cid, "op": op, "ins": list(ins), "attrs": attrs, "outs": outs, "grad": list(grad),
                "grad_out": next(iter(outs))}
        if grad:
            first = next(iter(outs))
            cot = rng.standard_normal(got[first].shape).astype(np.float32)
            data[f"{cid}/cot"] = cot
            names = {s: [s.lower()] for s in ins}
            out_names = {s: [f"o.{s}"] for s in got}
            scope = {**{s.lower(): a for s, a in ins.items()}, **{f"o.{s}": v for s, v in got.items()},
                     **{f"o.{s}@GRAD": np.zeros_like(v) for s, v in got.items()}, f"o.{first}@GRAD": cot}
            view = GradOpView(op, names, out_names, {**get_op_def(op).attrs, **attrs},
                              frozenset(s.lower() for s in grad), lambda n: n + "@GRAD")
            grads = _run_grad_ops(get_op_def(op).grad(view), scope)
            ours.update({f"{cid}//{s}@GRAD": grads[s.lower() + "@GRAD"] for s in grad})
        ops.append(spec)
    xs, ys, w0 = _ctr_data(steps=5)
    train = {"c": 6, "eps": 1e-4, "lr": 0.05, "steps": 5, "slot_dim": -1,
             "init": {"batch_size": 40.0, "batch_sum": 10.0, "batch_square": 90.0}}
    data.update({f"train/x{k}": x for k, x in enumerate(xs)} | {f"train/y{k}": y for k, y in enumerate(ys)})
    data["train/w0"] = w0
    cost = _build_ctr(6, w0, train["lr"], train["eps"], param_attr=train["init"])
    exe = fluid.Executor()
    exe.run(fluid.default_startup_program())
    ours["train//loss"] = np.array([exe.run(feed={"x": x, "y": y}, fetch_list=[cost])[0][0] for x, y in zip(xs, ys)])
    for n in ("dn.batch_size", "dn.batch_sum", "dn.batch_square_sum", "w"):
        ours[f"train//{n}"] = _param(n)
    ref = run_reference(paddle26_python, PADDLE_SCRIPT, tmp_path, data, ops=ops, train=train)
    for key, got in ours.items():
        want = ref[key].reshape(got.shape)
        if got.dtype.kind in "iu":
            np.testing.assert_array_equal(got, want, err_msg=key)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=key)
