"""The conv and pool layers (2-D and 3-D) build Fluid 1.8's programs; small 2-D and 3-D CNNs
train; the ops agree with Paddle's where PLACEGROUP_PADDLE_PYTHON names a python with paddle.

The kernels themselves are checked against numpy references in tests/cases/conv.py (the OpCase
table); here: the layers' shapes, parameter names, initializers and op sequences, whole
programs run by the Executor (forward against the references, float64 gradients against
central differences), the max-pool tie rule, and training; with paddle, every OpCase of the
table (outputs and gradients) against Paddle 2.6 and Fluid 1.8.5 (PLACEGROUP_PADDLE18_PYTHON),
and the two CNNs' per-step SGD losses against Paddle 2.6's.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from placegroup.initializer import NumpyArrayInitializer
from placegroup.ops.registry import GradOpView, KernelContext, get_op_def
from tests.cases.conv import CASES, conv_ref, conv_t_ref, max_index_ref, pool_ref
from tests.op_cases import sample
from tests.test_layers import check_program_gradients, fresh, value
from tests.paddle_ref.reference import run_reference
from tests.test_manip_layers import run_in_paddle

L = fluid.layers


def _ops(main):
    return [op.type for op in main.global_block().ops]


def test_conv2d_builds_fluids_program():
    with fresh() as (main, startup, exe):
        img = L.data("img", shape=[3, 8, 8])
        h = L.conv2d(img, num_filters=4, filter_size=3, padding=1, act="relu")
        g = L.conv2d(h, num_filters=6, filter_size=[3, 2], stride=2, groups=2, bias_attr=False)
        assert h.shape == (-1, 4, 8, 8) and g.shape == (-1, 6, 3, 4)
        assert [p.name for p in main.all_parameters()] == ["conv2d_0.w_0", "conv2d_0.b_0", "conv2d_1.w_0"]
        assert [p.shape for p in main.all_parameters()] == [(4, 3, 3, 3), (4,), (6, 2, 3, 2)]
        assert _ops(main) == ["conv2d", "elementwise_add", "relu", "conv2d"]
        ops = main.global_block().ops
        assert ops[1].attrs["axis"] == 1 and ops[0].attrs["paddings"] == [1, 1] and ops[3].attrs["groups"] == 2
        # Fluid 1.8's default filter initializer: N(0, sqrt(2 / (kh*kw*C))), C the input's channels
        inits = {op.output("Out")[0]: op for op in startup.global_block().ops}
        assert inits["conv2d_0.w_0"].type == "gaussian_random"
        assert inits["conv2d_0.w_0"].attrs["std"] == pytest.approx((2 / (3 * 3 * 3)) ** 0.5)
        assert inits["conv2d_1.w_0"].attrs["std"] == pytest.approx((2 / (3 * 2 * 4)) ** 0.5)
        assert inits["conv2d_0.b_0"].type == "fill_constant"
        exe.run(startup)
        assert value("conv2d_0.w_0").std() == pytest.approx((2 / 27) ** 0.5, rel=0.35)


def test_conv2d_padding_forms_and_depthwise():
    with fresh() as (main, startup, exe):
        img = L.data("img", shape=[4, 9, 9])
        a = L.conv2d(img, 4, 3, padding=[[0, 0], [0, 0], [1, 2], [0, 1]])
        b = L.conv2d(img, 4, 3, padding="SAME", stride=2, dilation=2)
        c = L.conv2d(img, 8, 3, groups=4, use_cudnn=False)  # Fluid's depthwise pick
        d = L.conv2d(img, 4, 3, padding=(1, 1, 2, 2))
        assert (a.shape, b.shape, c.shape, d.shape) == ((-1, 4, 10, 8), (-1, 4, 5, 5), (-1, 8, 7, 7), (-1, 4, 9, 11))
        ops = [op for op in main.global_block().ops if op.type.endswith("conv2d")]
        assert [op.attrs["paddings"] for op in ops] == [[1, 2, 0, 1], [0, 0], [0, 0], [1, 2]]
        assert ops[1].attrs["padding_algorithm"] == "SAME" and ops[2].type == "depthwise_conv2d"
        assert "depthwise_conv2d_0.w_0" in [p.name for p in main.all_parameters()]
        with pytest.raises(ValueError, match="divid"):
            L.conv2d(img, 4, 3, groups=3)
        with pytest.raises(ValueError, match="must be 4-D"):
            L.conv2d(L.data("flat", shape=[4]), 4, 3)
        with pytest.raises(ValueError, match="'SAME' or 'VALID'"):
            L.conv2d(img, 4, 3, padding="FULL")
        with pytest.raises(ProgramError, match="NCHW only"):
            L.conv2d(img, 4, 3, data_format="NHWC")


def test_conv2d_transpose_and_pool_layers():
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[3, 5, 5])
        up = L.conv2d_transpose(x, num_filters=4, filter_size=2, stride=2)
        sized = L.conv2d_transpose(x, num_filters=2, output_size=[11, 12], stride=2, padding=[0, 1])
        assert up.shape == (-1, 4, 10, 10) and sized.shape == (-1, 2, 11, 12)
        assert [p.shape for p in main.all_parameters()][:2] == [(3, 4, 2, 2), (4,)]
        assert main.all_parameters()[0].name == "conv2d_transpose_0.w_0"
        assert main.all_parameters()[2].shape == (3, 2, 3, 6)  # filter size from output_size, as Fluid
        with pytest.raises(ValueError, match="output_size must be set"):
            L.conv2d_transpose(x, 2)
        with pytest.raises(ProgramError, match="must lie in"):
            L.conv2d_transpose(x, 2, output_size=[13, 13], filter_size=3, stride=2)
        pools = [L.pool2d(x, 2, pool_stride=2), L.pool2d(x, 2, pool_stride=2, ceil_mode=True),
                 L.pool2d(x, pool_type="avg", global_pooling=True), L.pool2d(x, 3, "avg", 2, "SAME"),
                 L.adaptive_pool2d(x, [2, 3], "avg")]
        assert [p.shape for p in pools] == [(-1, 3, 2, 2), (-1, 3, 3, 3), (-1, 3, 1, 1), (-1, 3, 3, 3), (-1, 3, 2, 3)]
        out, mask = L.adaptive_pool2d(x, 2, require_index=True)
        assert out.shape == mask.shape == (-1, 3, 2, 2) and mask.dtype == "int32"
        assert _ops(main)[-2:] == ["pool2d", "max_pool2d_with_index"]
        assert main.global_block().ops[-2].attrs["adaptive"] is True
        with pytest.raises(ValueError, match="pool_size must be given"):
            L.pool2d(x)
        with pytest.raises(ValueError, match="ceil_mode must be False"):
            L.pool2d(x, 2, pool_padding="VALID", ceil_mode=True)
        with pytest.raises(ValueError, match="require_index"):
            L.adaptive_pool2d(x, 2, "avg", require_index=True)


def test_programs_run_to_the_references():
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((2, 2, 7, 6)).astype("float32")
    w = rng.standard_normal((3, 2, 3, 3)).astype("float32")
    b = rng.standard_normal(3).astype("float32")
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[2, 7, 6])
        h = L.conv2d(x, 3, 3, stride=2, padding=[1, 0, 2, 1], param_attr=fluid.ParamAttr(
            initializer=NumpyArrayInitializer(w)), bias_attr=fluid.ParamAttr(initializer=NumpyArrayInitializer(b)))
        p = L.pool2d(h, 2, "avg", 1, 1, exclusive=False)
        exe.run(startup)
        got_h, got_p = exe.run(main, feed={"x": xs}, fetch_list=[h, p])
    attrs = {"strides": [2, 2], "paddings": [1, 0, 2, 1], "dilations": [1, 1], "groups": 1,
             "padding_algorithm": "EXPLICIT"}
    want_h = conv_ref({"Input": xs, "Filter": w}, attrs)["Output"] + b[:, None, None]
    np.testing.assert_allclose(got_h, want_h, rtol=1e-5, atol=1e-5)
    pattrs = {"pooling_type": "avg", "ksize": [2, 2], "strides": [1, 1], "paddings": [1, 1], "global_pooling": False,
              "adaptive": False, "ceil_mode": False, "exclusive": False, "padding_algorithm": "EXPLICIT"}
    np.testing.assert_allclose(got_p, pool_ref({"X": want_h}, pattrs)["Out"], rtol=1e-5, atol=1e-5)


def test_whole_program_gradients_float64():
    rng = np.random.default_rng(5)
    feed = {"x": rng.standard_normal((2, 2, 6, 6)), "t": rng.standard_normal((2, 3))}
    with fresh() as (main, startup, exe):
        x, t = L.data("x", shape=[2, 6, 6], dtype="float64"), L.data("t", shape=[3], dtype="float64")
        h = L.conv2d(x, 4, 3, padding=1, act="tanh")
        h = L.pool2d(h, 2, "max", 2)
        h = L.conv2d_transpose(h, 2, filter_size=2, stride=2, groups=2)
        h = L.pool2d(L.conv2d(h, 4, 3, groups=2, use_cudnn=False), 2, "avg", 2, ceil_mode=True)
        h = L.adaptive_pool2d(h, [2, 1], "max")
        loss = L.mean(L.square_error_cost(L.fc(h, 3), t))
        grads = fluid.append_backward(loss)
        exe.run(startup)
        assert {p.name for p, _ in grads} >= {"conv2d_0.w_0", "conv2d_transpose_0.w_0", "depthwise_conv2d_0.w_0"}
        check_program_gradients(exe, main, loss, feed, grads)


def _grad(op, ins, attrs, wrt="X"):
    """``wrt``'s gradient from ``op``'s grad maker and kernels, for dOut = ones."""
    opdef = get_op_def(op)
    attrs = {**opdef.attrs, **attrs}
    outs = opdef.kernels["cpu"](np, ins, attrs, KernelContext(outputs=[s.name for s in opdef.outputs]))
    scope = {**ins, **outs, "Out@GRAD": np.ones_like(outs["Out"])}
    view = GradOpView(op, {k: [k] for k in ins}, {k: [k] for k in outs}, attrs, frozenset([wrt]), lambda n: n + "@G")
    (spec,) = opdef.grad(view)
    gdef = get_op_def(spec.type)
    gins = {s.name: scope[spec.inputs[s.name][0]] for s in gdef.inputs if s.name in spec.inputs}
    got = gdef.kernels["cpu"](np, gins, {**gdef.attrs, **spec.attrs}, KernelContext(outputs=spec.outputs))
    return got[wrt + "@GRAD"]


def test_max_pool_gradient_goes_to_the_first_maximum_only():
    """NOTE(pool-max-grad): ties neither split nor duplicate the gradient."""
    x = np.array([[[[1, 3, 3, 0], [3, 2, 3, 3], [0, 0, 5, 5], [0, 0, 5, 5]]]], np.float32)
    want = np.array([[[[0, 1, 1, 0], [0, 0, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]]]], np.float32)
    got = _grad("pool2d", {"X": x}, {"ksize": [2, 2], "strides": [2, 2]})
    np.testing.assert_array_equal(got, want)
    got = _grad("max_pool2d_with_index", {"X": x}, {"ksize": [2, 2], "strides": [2, 2]})
    np.testing.assert_array_equal(got, want)
    # overlapping windows whose first maximum is the same cell each give it their gradient
    got = _grad("max_pool2d_with_index", {"X": x}, {"ksize": [2, 2], "strides": [1, 1]})
    assert got[0, 0, 2, 2] == 4 and got.sum() == 9


def _cnn(images, labels, steps, init, lr=0.05):
    """conv2d -> pool2d -> conv2d -> pool2d -> fc, softmax cross entropy, SGD: per-step losses."""
    with fresh() as (main, startup, exe):
        attr = (lambda k: fluid.ParamAttr(initializer=NumpyArrayInitializer(init[k]))) if init else (lambda k: None)
        x, y = L.data("img", shape=[1, 8, 8]), L.data("label", shape=[1], dtype="int64")
        h = L.conv2d(x, 4, 3, padding=1, act="relu", param_attr=attr("w1"), bias_attr=attr("b1"))
        h = L.pool2d(h, 2, "max", 2)
        h = L.conv2d(h, 6, 3, act="relu", param_attr=attr("w2"), bias_attr=attr("b2"))
        h = L.pool2d(h, 2, "avg", 2, ceil_mode=True)
        logits = L.fc(h, 2, param_attr=attr("w3"), bias_attr=attr("b3"))
        loss = L.mean(L.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.SGD(lr).minimize(loss)
        exe.run(startup)
        return [float(exe.run(main, feed={"img": images[s], "label": labels[s]}, fetch_list=[loss])[0][0])
                for s in range(steps)]


def _stripes(rng, steps, batch=16):
    """Images of a horizontal (label 0) or vertical (label 1) bar, with noise."""
    labels = rng.integers(0, 2, size=(steps, batch, 1))
    images = 0.3 * rng.standard_normal((steps, batch, 1, 8, 8))
    pos = rng.integers(1, 7, size=(steps, batch))
    for s in range(steps):
        for i in range(batch):
            if labels[s, i, 0]:
                images[s, i, 0, :, pos[s, i]] += 1.5
            else:
                images[s, i, 0, pos[s, i], :] += 1.5
    return images.astype("float32"), labels.astype("int64")


def test_small_cnn_trains():
    images, labels = _stripes(np.random.default_rng(0), 60)
    losses = _cnn(images, labels, 60, None)
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:5]), losses


# -- against Paddle ---------------------------------------------------------------------------

# Each case: its op built with Paddle 2.6's LayerHelper (the 1.x ops still exist), its float
# outputs, and the gradient of sum(out * cot) w.r.t. each float input. The CNN: the model of
# _cnn with paddle.static.nn.conv2d (Fluid 1.x's signature) and the functional pools.
PADDLE_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import paddle
    from paddle.base.layer_helper import LayerHelper
    paddle.enable_static()
    spec = json.loads(sys.argv[1])
    d = dict(np.load(spec["data"]))
    res = {}
    exe = paddle.static.Executor(paddle.CPUPlace())
    for case in spec["cases"]:
        cid = case["id"]
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            ins = {}
            for slot in case["ins"]:
                v = paddle.static.data(cid + slot, d[cid + "/" + slot].shape, "float32")
                v.stop_gradient = False
                ins[slot] = v
            helper = LayerHelper(case["op"])
            outs = {s: helper.create_variable_for_type_inference(dt) for s, dt in case["outs"].items()}
            helper.append_op(type=case["op"], inputs=ins, outputs=outs, attrs=case["attrs"])
            cot = {s: paddle.static.data(cid + s + "cot", d[cid + "/" + s + "@COT"].shape, "float32")
                   for s in case["outs"] if case["outs"][s] == "float32"}
            loss = paddle.add_n([paddle.sum(outs[s] * cot[s]) for s in cot])
            grads = paddle.static.gradients([loss], [ins[s] for s in case["ins"]])
        feed = {cid + s: d[cid + "/" + s] for s in case["ins"]}
        feed.update({cid + s + "cot": d[cid + "/" + s + "@COT"] for s in cot})
        fetch = [outs[s] for s in case["outs"]] + grads
        got = exe.run(main, feed=feed, fetch_list=fetch)
        names = list(case["outs"]) + [s + "@GRAD" for s in case["ins"]]
        res.update({cid + "/" + n: g for n, g in zip(names, got)})
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        F = paddle.nn.functional
        attr = lambda k: paddle.ParamAttr(initializer=paddle.nn.initializer.Assign(d["cnn." + k]))
        x = paddle.static.data("img", [-1, 1, 8, 8], "float32")
        y = paddle.static.data("label", [-1, 1], "int64")
        h = paddle.static.nn.conv2d(x, 4, 3, padding=1, act="relu", param_attr=attr("w1"), bias_attr=attr("b1"))
        h = F.max_pool2d(h, 2, 2)
        h = paddle.static.nn.conv2d(h, 6, 3, act="relu", param_attr=attr("w2"), bias_attr=attr("b2"))
        h = F.avg_pool2d(h, 2, 2, ceil_mode=True)
        logits = paddle.static.nn.fc(h, 2, weight_attr=attr("w3"), bias_attr=attr("b3"))
        loss = paddle.mean(F.softmax_with_cross_entropy(logits, y))
        paddle.optimizer.SGD(0.05).minimize(loss)
    exe.run(startup)
    res["cnn.losses"] = np.array([float(exe.run(main, feed={"img": xb, "label": yb}, fetch_list=[loss])[0])
                                  for xb, yb in zip(d["cnn.images"], d["cnn.labels"])])
    np.savez(spec["out"], **res)
""")


# NOTE(pool-inclusive) in ops/pool.py: Paddle >= 2.0 divides an inclusive average whose window
# runs past the padding (ceil_mode) by the window clipped to input + padding; Fluid 1.8 by kh*kw.
NEWER_IN_PADDLE_2 = {"pool2d-avg_ceil_inclusive"}


def _tie_cases():
    """Pooling on small integers: many ties, so the max's gradient rule shows."""
    ties = lambda r: {"X": r.integers(0, 3, size=(2, 2, 6, 7)).astype(float)}  # noqa: E731
    base = {c.id: c for c in CASES}
    return [(base["pool2d-max_pad_stride"], ties, "pool2d-ties"),
            (base["max_pool2d_with_index-pad_stride"], ties, "index-ties")]


@pytest.mark.paddle
def test_ops_and_a_cnn_match_paddle(paddle26_python, tmp_path):
    rng = np.random.default_rng(9)
    data, cases, ours = {}, [], {}
    for case, sampler, cid in [(c, None, c.id) for c in CASES] + _tie_cases():
        opdef = get_op_def(case.op)
        attrs = {**opdef.attrs, **case.attrs}
        ins = sample(case, 0, np.float32) if sampler is None else {
            k: v.astype(np.float32) for k, v in sampler(np.random.default_rng(0)).items()}
        outs = opdef.kernels["cpu"](np, ins, attrs, KernelContext(outputs=[s.name for s in opdef.outputs]))
        cots = {s: rng.standard_normal(v.shape).astype(np.float32) for s, v in outs.items() if v.dtype.kind == "f"}
        data.update({f"{cid}/{k}": v for k, v in ins.items()})
        data.update({f"{cid}/{k}@COT": v for k, v in cots.items()})
        cases.append({"id": cid, "op": case.op, "ins": list(ins), "attrs": attrs,
                      "outs": {s: v.dtype.name for s, v in outs.items()}})
        scope = {**ins, **outs, **{s + "@GRAD": v for s, v in cots.items()}}
        view = GradOpView(case.op, {k: [k] for k in ins}, {k: [k] for k in outs}, attrs, frozenset(ins),
                          lambda n: n + "@GRAD")
        for spec in opdef.grad(view):
            gdef = get_op_def(spec.type)
            gins = {s.name: scope[spec.inputs[s.name][0]] for s in gdef.inputs if s.name in spec.inputs}
            scope.update(gdef.kernels["cpu"](np, gins, {**gdef.attrs, **spec.attrs},
                                             KernelContext(outputs=spec.outputs)))
        ours.update({f"{cid}/{k}": scope[k] for k in list(outs) + [s + "@GRAD" for s in ins]})
    images, labels = _stripes(np.random.default_rng(1), 12)
    init = {"w1": 0.4 * rng.standard_normal((4, 1, 3, 3)), "b1": 0.1 * rng.standard_normal(4),
            "w2": 0.3 * rng.standard_normal((6, 4, 3, 3)), "b2": 0.1 * rng.standard_normal(6),
            "w3": 0.5 * rng.standard_normal((6, 2)), "b3": np.zeros(2)}
    init = {k: v.astype(np.float32) for k, v in init.items()}
    data.update({"cnn.images": images, "cnn.labels": labels, **{"cnn." + k: v for k, v in init.items()}})
    ref = run_reference(paddle26_python, PADDLE_SCRIPT, tmp_path, data, cases=cases)
    for key, got in ours.items():
        if key.split("/")[0] not in NEWER_IN_PADDLE_2:
            np.testing.assert_allclose(got, ref[key], rtol=1e-4, atol=1e-5, err_msg=key)
    np.testing.assert_allclose(_cnn(images, labels, 12, init), ref["cnn.losses"], rtol=1e-5, atol=1e-6)


# -- 3-D: conv3d, conv3d_transpose, pool3d, adaptive_pool3d ---------------------------------------


def test_3d_layers_build_fluids_programs():
    with fresh() as (main, startup, exe):
        clip = L.data("clip", shape=[3, 6, 8, 8])
        h = L.conv3d(clip, num_filters=4, filter_size=3, padding=1, act="relu")
        g = L.conv3d(h, 6, [2, 3, 3], stride=[1, 2, 2], groups=2, bias_attr=False, padding=[0, 1, 1, 0, 2, 2])
        up = L.conv3d_transpose(g, num_filters=2, filter_size=2, stride=2)
        sized = L.conv3d_transpose(g, num_filters=2, output_size=[12, 7, 9], stride=2, padding=[0, 1, 0])
        assert (h.shape, g.shape, up.shape, sized.shape) == ((-1, 4, 6, 8, 8), (-1, 6, 6, 4, 5), (-1, 2, 12, 8, 10),
                                                             (-1, 2, 12, 7, 9))
        params = main.all_parameters()
        assert [p.name for p in params][:3] == ["conv3d_0.w_0", "conv3d_0.b_0", "conv3d_1.w_0"]
        assert [p.shape for p in params] == [(4, 3, 3, 3, 3), (4,), (6, 2, 2, 3, 3), (6, 2, 2, 2, 2), (2,),
                                             (6, 2, 2, 3, 1), (2,)]  # the last filter from output_size, as Fluid
        ops = [op for op in main.global_block().ops if op.type.startswith("conv3d")]
        assert [op.attrs["paddings"] for op in ops] == [[1, 1, 1], [0, 1, 1, 0, 2, 2], [0, 0, 0], [0, 1, 0]]
        assert [op.attrs["data_format"] for op in ops] == ["NCDHW", "NCDHW", "NCHW", "NCHW"]  # 1.8's transpose
        assert _ops(main)[:4] == ["conv3d", "elementwise_add", "relu", "conv3d"]
        inits = {op.output("Out")[0]: op for op in startup.global_block().ops}
        assert inits["conv3d_0.w_0"].attrs["std"] == pytest.approx((2 / (27 * 3)) ** 0.5)
        assert inits["conv3d_1.w_0"].attrs["std"] == pytest.approx((2 / (18 * 4)) ** 0.5)
        pools = [L.pool3d(clip, 2, pool_stride=2), L.pool3d(clip, [3, 3, 2], "avg", 2, 1, ceil_mode=True),
                 L.pool3d(clip, pool_type="avg", global_pooling=True), L.pool3d(clip, 3, "max", 2, "SAME"),
                 L.adaptive_pool3d(clip, [2, 3, 1], "avg")]
        assert [p.shape for p in pools] == [(-1, 3, 3, 4, 4), (-1, 3, 4, 5, 5), (-1, 3, 1, 1, 1), (-1, 3, 3, 4, 4),
                                            (-1, 3, 2, 3, 1)]
        out, mask = L.adaptive_pool3d(clip, 2, require_index=True)
        assert out.shape == mask.shape == (-1, 3, 2, 2, 2) and mask.dtype == "int32"
        assert _ops(main)[-2:] == ["pool3d", "max_pool3d_with_index"] and out.name.startswith("max_pool3d_with_index")
        with pytest.raises(ValueError, match="must be 5-D"):
            L.conv3d(L.data("img", shape=[3, 8, 8]), 4, 3)
        with pytest.raises(ValueError, match="data_format must be 'NCDHW' or 'NDHWC'"):
            L.conv3d(clip, 4, 3, data_format="NCHW")
        with pytest.raises(ProgramError, match="NCDHW only"):
            L.pool3d(clip, 2, data_format="NDHWC")
        with pytest.raises(ValueError, match="filter_size must be an int or a list/tuple of 3 ints"):
            L.conv3d(clip, 4, [3, 3])
        with pytest.raises(ValueError, match="output_size must be set"):
            L.conv3d_transpose(clip, 2)
        with pytest.raises(ValueError, match="ceil_mode must be False"):
            L.pool3d(clip, 2, pool_padding="VALID", ceil_mode=True)
        with pytest.raises(ValueError, match="require_index"):
            L.adaptive_pool3d(clip, 2, "avg", require_index=True)


def test_3d_programs_run_to_the_references():
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((2, 2, 5, 6, 4)).astype("float32")
    w, b = rng.standard_normal((3, 2, 2, 3, 2)).astype("float32"), rng.standard_normal(3).astype("float32")
    wt = rng.standard_normal((3, 2, 2, 2, 3)).astype("float32")
    init = lambda a: fluid.ParamAttr(initializer=NumpyArrayInitializer(a))  # noqa: E731
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[2, 5, 6, 4])
        h = L.conv3d(x, 3, [2, 3, 2], stride=[2, 1, 1], padding=[1, 0, 1, 1, 0, 1], param_attr=init(w),
                     bias_attr=init(b))
        p = L.pool3d(h, [2, 3, 2], "avg", [1, 2, 1], 1, exclusive=False)
        t = L.conv3d_transpose(h, 2, filter_size=[2, 2, 3], stride=[1, 2, 1], param_attr=init(wt), bias_attr=False,
                               groups=1)
        a, m = L.adaptive_pool3d(t, [2, 3, 2], require_index=True)
        exe.run(startup)
        got_h, got_p, got_t, got_a, got_m = exe.run(main, feed={"x": xs}, fetch_list=[h, p, t, a, m])
    cattrs = {"strides": [2, 1, 1], "paddings": [1, 0, 1, 1, 0, 1], "dilations": [1, 1, 1], "groups": 1,
              "padding_algorithm": "EXPLICIT"}
    want_h = conv_ref({"Input": xs, "Filter": w}, cattrs)["Output"] + b[:, None, None, None]
    np.testing.assert_allclose(got_h, want_h, rtol=1e-5, atol=1e-5)
    pattrs = {"pooling_type": "avg", "ksize": [2, 3, 2], "strides": [1, 2, 1], "paddings": [1, 1, 1],
              "global_pooling": False, "adaptive": False, "ceil_mode": False, "exclusive": False,
              "padding_algorithm": "EXPLICIT"}
    np.testing.assert_allclose(got_p, pool_ref({"X": want_h}, pattrs)["Out"], rtol=1e-5, atol=1e-5)
    tattrs = {**cattrs, "strides": [1, 2, 1], "paddings": [0, 0, 0], "output_size": []}
    want_t = conv_t_ref({"Input": want_h.astype("float32"), "Filter": wt}, tattrs)["Output"]
    np.testing.assert_allclose(got_t, want_t, rtol=1e-5, atol=1e-5)
    want_a = max_index_ref({"X": got_t}, {"ksize": [2, 3, 2], "strides": [1, 1, 1], "paddings": [0, 0, 0],
                                          "global_pooling": False, "adaptive": True})
    np.testing.assert_array_equal(got_a, want_a["Out"])
    np.testing.assert_array_equal(got_m, want_a["Mask"])


def test_3d_whole_program_gradients_float64():
    rng = np.random.default_rng(6)
    feed = {"x": rng.standard_normal((2, 2, 4, 5, 4)), "t": rng.standard_normal((2, 3))}
    with fresh() as (main, startup, exe):
        x, t = L.data("x", shape=[2, 4, 5, 4], dtype="float64"), L.data("t", shape=[3], dtype="float64")
        h = L.conv3d(x, 4, 3, padding=1, act="tanh")
        h = L.pool3d(h, 2, "max", 2, ceil_mode=True)
        h = L.conv3d_transpose(h, 2, filter_size=2, stride=2, groups=2)
        h = L.pool3d(L.conv3d(h, 4, [2, 2, 1], groups=2), [2, 2, 3], "avg", 1, [0, 1, 1])
        h = L.adaptive_pool3d(h, [2, 1, 2], "max")
        loss = L.mean(L.square_error_cost(L.fc(L.adaptive_pool3d(h, 1, "avg"), 3), t))
        grads = fluid.append_backward(loss)
        exe.run(startup)
        assert {p.name for p, _ in grads} >= {"conv3d_0.w_0", "conv3d_transpose_0.w_0", "conv3d_1.w_0"}
        check_program_gradients(exe, main, loss, feed, grads)


def _cnn3d(clips, labels, init, lr=0.05):
    """conv3d -> pool3d (max) -> conv3d_transpose -> adaptive_pool3d (avg) -> fc, softmax cross
    entropy, SGD: per-step losses."""
    with fresh() as (main, startup, exe):
        attr = lambda k: fluid.ParamAttr(initializer=NumpyArrayInitializer(init[k]))  # noqa: E731
        x, y = L.data("clip", shape=[1, 6, 6, 6]), L.data("label", shape=[1], dtype="int64")
        h = L.conv3d(x, 4, 3, padding=1, act="relu", param_attr=attr("w1"), bias_attr=attr("b1"))
        h = L.pool3d(h, 2, "max", 2)
        h = L.conv3d_transpose(h, 3, filter_size=2, stride=2, act="relu", param_attr=attr("w2"), bias_attr=attr("b2"))
        logits = L.fc(L.adaptive_pool3d(h, [1, 2, 2], "avg"), 2, param_attr=attr("w3"), bias_attr=attr("b3"))
        loss = L.mean(L.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.SGD(lr).minimize(loss)
        exe.run(startup)
        return [float(exe.run(main, feed={"clip": clips[s], "label": labels[s]}, fetch_list=[loss])[0][0])
                for s in range(len(clips))]


def _cnn3d_data(steps, batch=6):
    """Clips of a bar moving along depth (label 1) or standing still (label 0), with noise."""
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, size=(steps, batch, 1))
    clips = 0.3 * rng.standard_normal((steps, batch, 1, 6, 6, 6))
    start = rng.integers(0, 3, size=(steps, batch))
    for s in range(steps):
        for i in range(batch):
            for d in range(6):
                clips[s, i, 0, d, :, start[s, i] + (d // 2 if labels[s, i, 0] else 0)] += 1.5
    init = {"w1": 0.3 * rng.standard_normal((4, 1, 3, 3, 3)), "b1": 0.1 * rng.standard_normal(4),
            "w2": 0.3 * rng.standard_normal((4, 3, 2, 2, 2)), "b2": 0.1 * rng.standard_normal(3),
            "w3": 0.5 * rng.standard_normal((12, 2)), "b3": np.zeros(2)}
    return clips.astype("float32"), labels.astype("int64"), {k: v.astype("float32") for k, v in init.items()}


def test_a_small_3d_cnn_trains():
    clips, labels, init = _cnn3d_data(40)
    losses = _cnn3d(clips, labels, init, lr=0.3)
    assert np.mean(losses[-8:]) < 0.7 * np.mean(losses[:4]), losses


CNN3D_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import paddle
    from paddle.base.layer_helper import LayerHelper
    paddle.enable_static()
    spec = json.loads(sys.argv[1])
    d = dict(np.load(spec["data"]))
    main, startup = paddle.static.Program(), paddle.static.Program()

    def op(type, ins, attrs, out="Out"):
        h = LayerHelper(type)
        made = h.create_variable_for_type_inference("float32")
        h.append_op(type=type, inputs=ins, outputs={out: made}, attrs=attrs)
        return made

    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("clip", [-1, 1, 6, 6, 6], "float32")
        y = paddle.static.data("label", [-1, 1], "int64")
        p = {k[6:]: paddle.static.create_parameter(list(v.shape), "float32", name=k[6:],
                                                     default_initializer=paddle.nn.initializer.Assign(v))
             for k, v in d.items() if k.startswith("param.")}
        one = [1, 1, 1]
        h = op("conv3d", {"Input": x, "Filter": p["w1"]}, {"strides": one, "paddings": one, "dilations": one,
                                                          "groups": 1, "data_format": "NCDHW"}, "Output")
        h = op("relu", {"X": op("elementwise_add", {"X": h, "Y": p["b1"]}, {"axis": 1})}, {})
        h = op("pool3d", {"X": h}, {"pooling_type": "max", "ksize": [2, 2, 2], "strides": [2, 2, 2],
                                    "paddings": [0, 0, 0]})
        h = op("conv3d_transpose", {"Input": h, "Filter": p["w2"]},
               {"strides": [2, 2, 2], "paddings": [0, 0, 0], "dilations": one, "groups": 1, "data_format": "NCHW"},
               "Output")
        h = op("relu", {"X": op("elementwise_add", {"X": h, "Y": p["b2"]}, {"axis": 1})}, {})
        h = op("pool3d", {"X": h}, {"pooling_type": "avg", "ksize": [1, 2, 2], "adaptive": True})
        h = paddle.reshape(h, [-1, 12])
        logits = op("elementwise_add", {"X": op("mul", {"X": h, "Y": p["w3"]}, {}), "Y": p["b3"]}, {"axis": 1})
        loss = paddle.mean(paddle.nn.functional.softmax_with_cross_entropy(logits, y))
        paddle.optimizer.SGD(0.05).minimize(loss)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    losses = [float(np.asarray(exe.run(main, feed={"clip": c, "label": l}, fetch_list=[loss])[0]).reshape(()))
              for c, l in zip(d["clips"], d["labels"])]
    np.savez(spec["out"], losses=np.array(losses))
""")


@pytest.mark.paddle
def test_a_small_3d_cnn_trains_as_in_paddle(paddle26_python, tmp_path):
    clips, labels, init = _cnn3d_data(10)
    data = dict(clips=clips, labels=labels, **{"param." + k: v for k, v in init.items()})
    theirs = run_reference(paddle26_python, CNN3D_SCRIPT, tmp_path, data)["losses"]
    np.testing.assert_allclose(_cnn3d(clips, labels, init), theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.paddle
def test_ops_match_paddle_18(fluid18_python, tmp_path):
    """Every case of the table, 2-D and 3-D, in Fluid 1.8.5 itself (its inclusive average with
    ceil_mode included, NOTE(pool-inclusive))."""
    run_in_paddle(fluid18_python, CASES, tmp_path, fluid18=True)
