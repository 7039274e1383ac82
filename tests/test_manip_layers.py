"""The layers of placegroup/layers/manip.py build programs that the Executor runs to numpy's
answers, with the shapes (-1 for the batch) that Fluid 1.8 infers; gradients flow through
them; Fluid 1.8's gradient rules that are not derivatives (scatter's X, gather's overwrite)
hold; bad arguments fail at build time naming the op and the values. Where
PLACEGROUP_PADDLE_PYTHON names a python with paddle, every OpCase of tests/cases/manip.py
runs in Paddle 2.6 too (the same op type and attrs) and must give the same outputs and
gradients; where PLACEGROUP_PADDLE18_PYTHON names a python with Paddle 1.8.5 (a Python 3.8
environment with the paddlepaddle 1.8.5 wheel), they run in Paddle 1.8.5 itself."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from placegroup.ops.registry import GradOpView, KernelContext, get_op_def
from tests.cases.manip import CASES
from tests.op_cases import sample
from tests.paddle_ref.reference import run_reference
from tests.test_layers import check_program_gradients, fresh
from tests.test_ops import _run_grad_ops

L = fluid.layers


def _run(exe, main, feed, outs):
    return exe.run(main, feed=feed, fetch_list=list(outs))


def test_reshaping_layers_match_numpy_and_fluid_shapes():
    xs = np.random.default_rng(0).standard_normal((4, 3, 1, 5)).astype("float32")
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[3, 1, 5])
        outs = {
            "transpose": (L.transpose(x, perm=[0, 3, 1, 2]), (-1, 5, 3, 1), xs.transpose(0, 3, 1, 2)),
            "squeeze": (L.squeeze(x, axes=[2]), (-1, 3, 5), xs[:, :, 0]),
            "unsqueeze": (L.unsqueeze(x, axes=[1, -1]), (-1, 1, 3, 1, 5, 1), xs[:, None, ..., None]),
            "flatten": (L.flatten(x), (-1, 15), xs.reshape(4, 15)),
            "flatten0": (L.flatten(x, axis=0), (1, -1), xs.reshape(1, 60)),
            "expand": (L.expand(x, [1, 2, 3, 1]), (-1, 6, 3, 5), np.tile(xs, (1, 2, 3, 1))),
            "reverse": (L.reverse(x, axis=-1), (-1, 3, 1, 5), xs[..., ::-1]),
            "slice": (L.slice(x, axes=[1, 3], starts=[1, -2], ends=[9, 5]), (-1, 2, 1, 2), xs[:, 1:, :, 3:]),
            "crop": (L.crop_tensor(x, shape=[-1, 2, 1, 3], offsets=[0, 1, 0, 1]), (-1, 2, 1, 3), xs[:, 1:3, :, 1:4]),
            "pad": (L.pad(x, [0, 0, 1, 0, 0, 2, 1, 1], pad_value=2.0), (-1, 4, 3, 7),
                    np.pad(xs, [(0, 0), (1, 0), (0, 2), (1, 1)], constant_values=2.0)),
            "pad2d": (L.pad2d(x, [0, 0, 2, 1], mode="edge"), (-1, 3, 1, 8),
                      np.pad(xs, [(0, 0), (0, 0), (0, 0), (2, 1)], mode="edge")),
            "cumsum": (L.cumsum(x, axis=1, reverse=True), (-1, 3, 1, 5), np.cumsum(xs[:, ::-1], 1)[:, ::-1]),
        }
        for name, (var, shape, _) in outs.items():
            assert var.shape == shape, f"{name}: {var.shape}"
        got = _run(exe, main, {"x": xs}, [v for v, _, _ in outs.values()])
    for (name, (_, _, want)), g in zip(outs.items(), got, strict=True):
        assert g.dtype == np.float32, name
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6, err_msg=name)
    ops = [op.type for op in main.global_block().ops]
    for t in ("transpose2", "squeeze2", "unsqueeze2", "flatten2", "expand", "reverse", "slice", "crop_tensor", "pad",
              "pad2d", "cumsum"):
        assert t in ops
    xshape = main.global_block().ops[ops.index("transpose2")].output("XShape")[0]
    assert main.global_block().var(xshape).shape == (0, -1, 3, 1, 5)  # NOTE(xshape)


def test_indexing_layers_match_numpy():
    rng = np.random.default_rng(1)
    table = rng.standard_normal((6, 4)).astype("float32")
    ids = np.array([[3], [0], [3], [2]], np.int64)
    scores = rng.standard_normal((4, 5)).astype("float32")
    with fresh() as (main, startup, exe):
        t = L.data("t", shape=[6, 4], append_batch_size=False)
        i = L.data("i", shape=[1], dtype="int64")
        s = L.data("s", shape=[5])
        g = L.gather(t, i)
        nd = L.gather_nd(t, L.concat([i, i], axis=1))
        sc = L.scatter(t, L.squeeze(i, axes=[1]), L.fill_constant_batch_size_like(i, [-1, 4], "float32", 9.0))
        code = L.one_hot(i, depth=6)
        am, an = L.argmax(s, axis=1), L.argmin(s, axis=-1)
        vals, idx = L.argsort(s, axis=1, descending=True)
        assert (g.shape, nd.shape, sc.shape, code.shape, am.shape) == ((-1, 4), (-1,), (6, 4), (-1, 6), (-1,))
        assert code.dtype == "float32" and am.dtype == "int64" and idx.dtype == "int64" and idx.stop_gradient
        got = _run(exe, main, {"t": table, "i": ids, "s": scores}, [g, nd, sc, code, am, an, vals, idx])
    rows = ids[:, 0]
    want_sc = table.copy()
    want_sc[rows] = 9.0
    order = np.argsort(-scores, 1, kind="stable")
    want = [table[rows], table[rows, rows], want_sc, np.eye(6, dtype=np.float32)[rows], scores.argmax(1),
            scores.argmin(1), np.take_along_axis(scores, order, 1), order]
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.dtype == b.dtype, f"output {k}: {a.dtype} vs {b.dtype}"
        np.testing.assert_allclose(a, b, rtol=1e-6, err_msg=f"output {k}")


def test_shape_fills_stack_and_range():
    xs = np.arange(12, dtype=np.float32).reshape(3, 4)
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[4])
        shp = L.shape(x)
        assert shp.dtype == "int32" and shp.shape == (2,)
        batch = L.fill_constant_batch_size_like(x, shape=[-1, 2], dtype="int64", value=7)
        z, o = L.zeros_like(x), L.ones_like(x)
        st = L.stack([x, o], axis=1)
        parts = L.unstack(x, axis=1)
        r = L.range(0, 10, 3, "int64")
        rv = L.range(L.fill_constant([1], "int32", 5), 1.0, -1.5, "float32")  # a var bound is cast
        ea = L.expand_as(L.slice(x, axes=[1], starts=[0], ends=[1]), x)
        assert (batch.shape, st.shape, len(parts), parts[0].shape, r.shape, ea.shape) == \
               ((-1, 2), (-1, 2, 4), 4, (-1,), (-1,), (-1, 4))
        got = _run(exe, main, {"x": xs}, [shp, batch, z, o, st, *parts, r, rv, ea])
    want = [np.array([3, 4], np.int32), np.full((3, 2), 7, np.int64), np.zeros_like(xs), np.ones_like(xs),
            np.stack([xs, np.ones_like(xs)], 1), *xs.T, np.array([0, 3, 6, 9]), np.array([5.0, 3.5, 2.0], np.float32),
            np.repeat(xs[:, :1], 4, 1)]
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.dtype == b.dtype, f"output {k}: {a.dtype} vs {b.dtype}"
        np.testing.assert_array_equal(a, b, err_msg=f"output {k}")


def test_gradients_flow_through_the_layers():
    # float64 whole-program gradients vs central differences, through every differentiable layer
    rng = np.random.default_rng(3)
    feed = {"x": rng.standard_normal((3, 2, 3)), "ids": np.array([[2], [0], [2]], np.int64)}
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[2, 3], dtype="float64")
        ids = L.data("ids", shape=[1], dtype="int64")
        h = L.fc(x, 6, num_flatten_dims=2)                                  # [-1, 2, 6]
        a = L.transpose(L.unsqueeze(h, axes=[1]), perm=[0, 2, 1, 3])        # [-1, 2, 1, 6]
        b = L.flatten(L.reverse(L.squeeze(a, axes=[2]), axis=[1, 2]))       # [-1, 12]
        c = L.pad2d(L.unsqueeze(h, axes=[1]), [1, 0, 2, 1], mode="reflect")  # [-1, 1, 3, 9]
        d = L.crop_tensor(L.pad(c, [0, 0, 0, 0, 1, 1, 0, 0]), shape=[-1, 1, 2, 5], offsets=[0, 0, 1, 2])
        e = L.slice(L.cumsum(L.expand(h, [1, 2, 1]), axis=1, exclusive=True), axes=[1], starts=[1], ends=[3])
        parts = L.unstack(L.stack([L.reduce_sum(e, dim=1), L.slice(b, axes=[1], starts=[0], ends=[6])]), axis=0)
        table = L.create_parameter([4, 3], "float64", name="table")
        g = L.gather(table, ids, overwrite=False)                           # ids repeat: gradients add
        # only Updates: scatter's X gradient is Fluid 1.8's, not a derivative (tested below)
        base = L.fill_constant_batch_size_like(x, [-1, 3], "float64", 0.5)
        s = L.scatter(base, L.squeeze(ids, axes=[1]), g, overwrite=False)
        nd = L.gather_nd(h, L.concat([L.zeros_like(ids), L.ones_like(ids)], axis=1))  # h[:, 0, 1], repeated
        vals, _ = L.argsort(h, axis=-1, descending=True)
        tiled = L.expand_as(L.slice(g, [1], [0], [1]), s)
        terms = [L.reduce_sum(L.square(t)) for t in (parts[0], parts[1], d, s, nd, vals, tiled)]
        loss = L.sums(terms)
        params_grads = fluid.append_backward(loss)
        main.verify()
        exe.run(startup)
        assert {p.name for p, _ in params_grads} >= {"table", "fc_0.w_0", "fc_0.b_0"}
        check_program_gradients(exe, main, loss, feed, params_grads)


def _grad_kernel(op, ins, outputs, **attrs):
    opdef = get_op_def(op)
    return opdef.kernels["cpu"](np, ins, {**opdef.attrs, **attrs}, KernelContext(outputs=outputs))


def test_scatter_x_gradient_is_fluid_18s():
    # NOTE(scatter-grad-1.8): X@GRAD = Out@GRAD, rows named by Ids included; Updates@GRAD =
    # Out@GRAD[Ids], a repeated id included (overwrite=True)
    g = np.arange(8, dtype=np.float32).reshape(4, 2)
    ids = np.array([1, 3, 1])
    got = _grad_kernel("scatter_grad", {"Ids": ids, "Out@GRAD": g}, ["X@GRAD", "Updates@GRAD"])
    np.testing.assert_array_equal(got["X@GRAD"], g)
    np.testing.assert_array_equal(got["Updates@GRAD"], g[[1, 3, 1]])
    assert set(_grad_kernel("scatter_grad", {"Ids": ids, "Out@GRAD": g}, ["Updates@GRAD"])) == {"Updates@GRAD"}


def test_gather_overwrite_gradient_keeps_the_last_row():
    # NOTE(overwrite): Fluid 1.8's CPU gather_grad with overwrite=True writes the last Out@GRAD
    # row of a repeated index; overwrite=False adds them
    x = np.zeros((4, 2), np.float32)
    idx = np.array([1, 3, 1, 1], np.int32)
    g = np.arange(8, dtype=np.float32).reshape(4, 2)
    last = _grad_kernel("gather_grad", {"X": x, "Index": idx, "Out@GRAD": g}, ["X@GRAD"])["X@GRAD"]
    np.testing.assert_array_equal(last, [[0, 0], [6, 7], [0, 0], [2, 3]])
    added = _grad_kernel("gather_grad", {"X": x, "Index": idx, "Out@GRAD": g}, ["X@GRAD"], overwrite=False)["X@GRAD"]
    np.testing.assert_array_equal(added, [[0, 0], [0 + 4 + 6, 1 + 5 + 7], [0, 0], [2, 3]])


def test_integer_and_bool_data_pass_through():
    xs = np.arange(6, dtype=np.int64).reshape(2, 3)
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[2, 3], dtype="int64", append_batch_size=False)
        m = L.data("m", shape=[2, 3], dtype="bool", append_batch_size=False)
        outs = [L.transpose(x, [1, 0]), L.gather(x, L.assign(np.array([1, 0], np.int32))), L.reverse(m, 1),
                L.flatten(m, axis=0), L.slice(x, [1], [1], [3]), L.cumsum(x, axis=1), L.stack([x, x])]
        assert [o.dtype for o in outs] == ["int64", "int64", "bool", "bool", "int64", "int64", "int64"]
        got = _run(exe, main, {"x": xs, "m": xs % 2 == 0}, outs)
    want = [xs.T, xs[[1, 0]], (xs % 2 == 0)[:, ::-1], (xs % 2 == 0).reshape(1, 6), xs[:, 1:], np.cumsum(xs, 1),
            np.stack([xs, xs])]
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_build_and_run_errors_name_the_problem():
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[3, 4])
        ids = L.data("ids", shape=[1], dtype="int64")
        with pytest.raises(ProgramError, match=r"transpose2: axis \[0, 1\] is not a permutation of 0..2"):
            L.transpose(x, perm=[0, 1])
        with pytest.raises(ProgramError, match="Index must be int32 or int64, got float32"):
            L.gather(x, x)
        with pytest.raises(ProgramError, match="slice: axes entry 5 is out of range"):
            L.slice(x, axes=[5], starts=[0], ends=[1])
        with pytest.raises(ProgramError, match=r"arg_max: axis 3 is out of range for X\[-1, 3, 4\]"):
            L.argmax(x, axis=3)
        with pytest.raises(ProgramError, match="pad2d: mode 'wrap' must be constant, reflect or edge"):
            L.pad2d(L.unsqueeze(x, [1]), [1, 1, 1, 1], mode="wrap")
        with pytest.raises(ValueError, match="one_hot: depth given as a Variable"):
            L.one_hot(ids, depth=ids)
        with pytest.raises(ValueError, match="unstack: num is needed when dim 0"):
            L.unstack(x, axis=0)
        code = L.one_hot(ids, depth=3)
        with pytest.raises(Exception, match="one_hot: X holds 3, out of range for depth 3"):
            exe.run(main, feed={"x": np.zeros((1, 3, 4), np.float32), "ids": np.array([[3]])}, fetch_list=[code])


def test_program_prints_fluid_op_types():
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[3])
        L.unsqueeze(L.transpose(x, [1, 0]), axes=[0])
        text = str(main)
    assert "transpose2(" in text and "unsqueeze2(" in text and "XShape" in text


# -- against Paddle ---------------------------------------------------------------------------

# Each case: its op appended with Paddle 2.6's LayerHelper (the 1.x ops still exist there),
# its outputs, and the gradient of sum(out * cot) w.r.t. each input the case differentiates.
# pad2d has no kernel left in Paddle 2.6: it runs as paddle's pad (pad3d), same numbers.
PADDLE_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import paddle
    from paddle.base.layer_helper import LayerHelper
    paddle.enable_static()
    spec = json.loads(sys.argv[1])
    d = dict(np.load(spec["data"]))
    DTYPES = {"float32": 5, "float64": 6, "int32": 2, "int64": 3, "bool": 0}
    exe, res = paddle.static.Executor(paddle.CPUPlace()), {}
    for case in spec["cases"]:
        cid, a = case["id"], case["attrs"]
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            ins, feed, diff = {}, {}, []
            for slot, n in case["ins"].items():
                ins[slot] = []
                for k in range(n):
                    arr = d[f"{cid}/{slot}/{k}"]
                    v = paddle.static.data(f"{cid}.{slot}.{k}", arr.shape, str(arr.dtype))
                    if slot in case["grad"]:
                        v.stop_gradient = False
                        diff.append((slot, k, v))
                    ins[slot].append(v)
                    feed[v.name] = arr
            if case["op"] == "pad2d":
                t, b, l, r = a["paddings"]
                mode = {"edge": "replicate"}.get(a["mode"], a["mode"])
                outs = {"Out": [paddle.nn.functional.pad(ins["X"][0], [l, r, t, b], mode=mode, value=a["pad_value"],
                                                         data_format=a["data_format"])]}
            else:
                helper = LayerHelper(case["op"])
                outs = {s: [helper.create_variable_for_type_inference(dt) for dt in dts]
                        for s, dts in case["outs"].items()}
                helper.append_op(type=case["op"], inputs=ins, outputs=outs,
                                 attrs={k: DTYPES.get(v, v) if k == "dtype" else v for k, v in a.items()})
            shown = {s: vs for s, vs in outs.items() if s != "XShape"}  # Paddle fetches no XShape data
            fetch = [v for vs in shown.values() for v in vs]
            names = [f"{s}/{k}" for s, vs in shown.items() for k in range(len(vs))]
            if diff:
                terms = []
                for s, vs in outs.items():
                    for k, v in enumerate(vs):
                        cot = d.get(f"{cid}/{s}/{k}@COT")
                        if cot is not None:
                            c = paddle.static.data(f"{cid}.{s}.{k}.cot", cot.shape, "float32")
                            feed[c.name] = cot
                            terms.append(paddle.sum(paddle.reshape(v, [-1]) * paddle.reshape(c, [-1])))
                fetch += paddle.static.gradients([paddle.add_n(terms)], [v for _, _, v in diff])
                names += [f"{s}@GRAD/{k}" for s, k, _ in diff]
        got = exe.run(main, feed=feed, fetch_list=fetch)
        res.update({f"{cid}//{n}": g for n, g in zip(names, got)})
    np.savez(spec["out"], **res)
""")

# The same for Paddle 1.8.5 itself, through Fluid 1.8's own API.
PADDLE18_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import paddle.fluid as fluid
    from paddle.fluid.layer_helper import LayerHelper
    spec = json.loads(sys.argv[1])
    d = dict(np.load(spec["data"]))
    DTYPES = {"float32": 5, "float64": 6, "int32": 2, "int64": 3, "bool": 0}
    exe, res = fluid.Executor(fluid.CPUPlace()), {}
    for case in spec["cases"]:
        cid, a = case["id"], case["attrs"]
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            ins, feed, diff = {}, {}, []
            for slot, n in case["ins"].items():
                ins[slot] = []
                for k in range(n):
                    arr = d[f"{cid}/{slot}/{k}"]
                    v = fluid.data(f"{cid}.{slot}.{k}", list(arr.shape), str(arr.dtype))
                    if slot in case["grad"]:
                        v.stop_gradient = False
                        diff.append((slot, k, v))
                    ins[slot].append(v)
                    feed[v.name] = arr
            helper = LayerHelper(case["op"])
            outs = {s: [helper.create_variable_for_type_inference(dt) for dt in dts] for s, dts in case["outs"].items()}
            helper.append_op(type=case["op"], inputs=ins, outputs=outs,
                             attrs={k: DTYPES.get(v, v) if k == "dtype" else v for k, v in a.items()})
            shown = {s: vs for s, vs in outs.items() if s != "XShape"}
            fetch = [v for vs in shown.values() for v in vs]
            names = [f"{s}/{k}" for s, vs in shown.items() for k in range(len(vs))]
            if diff:
                terms = []
                for s, vs in outs.items():
                    for k, v in enumerate(vs):
                        cot = d.get(f"{cid}/{s}/{k}@COT")
                        if cot is not None:
                            c = fluid.data(f"{cid}.{s}.{k}.cot", list(cot.shape), "float32")
                            feed[c.name] = cot
                            prod = fluid.layers.reshape(v, [-1]) * fluid.layers.reshape(c, [-1])
                            terms.append(fluid.layers.reduce_sum(prod))
                fetch += fluid.gradients([fluid.layers.sums(terms)], [v for _, _, v in diff])
                names += [f"{s}@GRAD/{k}" for s, k, _ in diff]
        got = exe.run(main, feed=feed, fetch_list=fetch)
        res.update({f"{cid}//{n}": g for n, g in zip(names, got)})
    np.savez(spec["out"], **res)
""")

# op types Paddle 2.6 no longer registers
NOT_IN_PADDLE_2 = {"squeeze", "unsqueeze", "flatten", "expand_as", "one_hot"}
# Fluid 1.8.5 refuses to squeeze a listed dim that is not 1 (we keep it, as its InferShape
# does at build time); its non-AVX CPU core (the one these machines load) gets one element of
# pad's X gradient wrong, where the gradient is a plain slice of the output's
# (NOTE(fluid18-noavx) in tests/fluid18_env.py); pad is still compared with Paddle 2.6
NOT_IN_PADDLE_18 = {"squeeze-neg_and_not1", "squeeze2-neg_and_not1", "pad"}


def _listed(v) -> list:
    return v if isinstance(v, list) else [v]


def run_in_paddle(python, cases, tmp_path, skip=frozenset(), adapt=None, squeezed=frozenset(),
                  fluid18=False) -> None:
    """Run each OpCase with a reference (neither its op type nor its id in ``skip``) in Paddle 2.6 through
    PADDLE_SCRIPT (in Paddle 1.8.5 through PADDLE18_SCRIPT when ``fluid18``), with ``python`` (the
    ``paddle26_python`` or ``fluid18_python`` fixture), and assert its
    outputs and its gradients (of sum(out * cot) for the slots the case differentiates) equal
    ours. ``adapt(case, attrs) -> attrs`` rewrites the attrs Paddle gets (an attr Paddle 2.6
    renamed). Ops in ``squeezed`` may give Paddle's outputs without the size-1 dims Fluid 1.8
    kept (dot's [N, 1] is [N] in Paddle 2)."""
    rng = np.random.default_rng(9)
    data, specs, ours = {}, [], {}
    for case in cases:
        if case.ref is None or case.op in skip or case.id in skip:
            continue
        cid, opdef = case.id, get_op_def(case.op)
        attrs = {**opdef.attrs, **case.attrs}
        ins = sample(case, 0, np.float32)
        outs = opdef.kernels["cpu"](np, ins, attrs, KernelContext(outputs=[s.name for s in opdef.outputs]))
        in_names = {s: [f"{s}.{k}" for k in range(len(_listed(v)))] for s, v in ins.items()}
        out_names = {s: [f"o{s}.{k}" for k in range(len(_listed(v)))] for s, v in outs.items()}
        scope = {n: a for s, v in ins.items() for n, a in zip(in_names[s], _listed(v))}
        for s, v in ins.items():
            data.update({f"{cid}/{s}/{k}": a for k, a in enumerate(_listed(v))})
        for s, v in outs.items():
            for k, arr in enumerate(_listed(v)):
                scope[out_names[s][k]] = arr
                scope[out_names[s][k] + "@GRAD"] = np.zeros(arr.shape, arr.dtype)
                if s != "XShape":
                    ours[f"{cid}//{s}/{k}"] = arr
                if arr.dtype.kind == "f" and s != "XShape":
                    cot = rng.standard_normal(arr.shape).astype(np.float32)
                    data[f"{cid}/{s}/{k}@COT"] = scope[out_names[s][k] + "@GRAD"] = cot
        for slot in case.grad:
            view = GradOpView(case.op, in_names, out_names, attrs, frozenset(in_names[slot]), lambda n: n + "@GRAD")
            grads = _run_grad_ops(opdef.grad(view), dict(scope))
            ours.update({f"{cid}//{slot}@GRAD/{k}": grads[n + "@GRAD"] for k, n in enumerate(in_names[slot])})
        specs.append({"id": cid, "op": case.op, "attrs": adapt(case, attrs) if adapt else attrs, "grad": list(case.grad),
                      "ins": {s: len(_listed(v)) for s, v in ins.items()},
                      "outs": {s: [a.dtype.name for a in _listed(v)] for s, v in outs.items()}})
    ref = run_reference(python, PADDLE18_SCRIPT if fluid18 else PADDLE_SCRIPT, tmp_path, data, timeout=600, cases=specs)
    ops = {c.id: c.op for c in cases}
    for key, got in ours.items():
        want = ref[key]
        # Paddle 2 returns 0-d arrays where Fluid 1.8 (and placegroup) return shape [1]
        if want.shape == () or (ops[key.split("//")[0]] in squeezed and want.size == got.size):
            want = want.reshape(got.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=key)
        assert got.dtype == want.dtype, key


@pytest.mark.paddle
def test_manip_ops_match_paddle(paddle26_python, tmp_path):
    run_in_paddle(paddle26_python, CASES, tmp_path, NOT_IN_PADDLE_2)


@pytest.mark.paddle
def test_manip_ops_match_paddle_18(fluid18_python, tmp_path):
    run_in_paddle(fluid18_python, CASES, tmp_path, NOT_IN_PADDLE_18, fluid18=True)


def test_expand_takes_counts_as_variables_read_each_run():
    """Fluid 1.8's expand with a list holding an int Variable (``shape(x)[1]``, as the book's
    seq2seq attention writes it) or one int Variable holding every count."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3, 2], dtype="float32")
        x.stop_gradient = False
        by_list = fluid.layers.expand(fluid.layers.unsqueeze(x, [1]), [1, fluid.layers.shape(x)[1], 1, 1])
        by_tensor = fluid.layers.expand(x, fluid.layers.assign(np.array([1, 2, 1], "int32")))
        fluid.backward.append_backward(fluid.layers.reduce_sum(by_list) + fluid.layers.reduce_sum(by_tensor))
    exe = fluid.Executor()
    exe.run(startup)
    xv = np.arange(4 * 3 * 2, dtype="float32").reshape(4, 3, 2)
    a, b, g = exe.run(main, feed={"x": xv}, fetch_list=[by_list, by_tensor, "x@GRAD"])
    np.testing.assert_array_equal(a, np.tile(xv[:, None], (1, 3, 1, 1)))
    np.testing.assert_array_equal(b, np.tile(xv, (1, 2, 1)))
    np.testing.assert_array_equal(g, np.full_like(xv, 3 + 2))
