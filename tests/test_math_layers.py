"""The math layers of placegroup/layers/ops.py and placegroup/layers/manip.py added for Fluid 1.8
(elementwise_max .. mod, the activations, prelu, resize, lrn, label_smooth, clip_by_norm,
reduce_all/any, where/nonzero, index_select, ...) build programs that the Executor runs to
numpy's answers, with Fluid 1.8's op types, attrs and parameter names; gradients flow through
them; the resize layers (image_resize, interpolate's BICUBIC, resize_trilinear,
image_resize_short) append the ops and attrs Paddle 1.8.5's do. Where PLACEGROUP_PADDLE_PYTHON
names a python with paddle, every OpCase of tests/cases/math.py whose op Paddle 2.6 still has
with 1.8's meaning runs there too and must give the same outputs and gradients; where
PLACEGROUP_PADDLE18_PYTHON names one with Paddle 1.8.5, they all run in 1.8.5 itself."""
from __future__ import annotations

import dataclasses
import math
import textwrap

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from placegroup.initializer import NumpyArrayInitializer
from tests.cases.math import CASES, _interp_ref, _unique_ref
from tests.op_case import OpCase
from tests.test_layers import check_program_gradients, fresh, value
from tests.paddle_ref.reference import run_reference
from tests.test_manip_layers import run_in_paddle

L = fluid.layers
_erf = np.vectorize(math.erf)


def _run(exe, main, feed, outs):
    return exe.run(main, feed=feed, fetch_list=list(outs))


def _check(got, want):
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == np.asarray(w).dtype, f"output {k}: {g.dtype} vs {np.asarray(w).dtype}"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"output {k}")


def test_elementwise_and_activation_layers_match_numpy():
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((4, 3, 5)).astype("float32"), rng.uniform(0.5, 2, (3,)).astype("float32")
    ia, ib = np.array([[-7, 7, 6]]), np.array([[2, -2, 4]])
    with fresh() as (main, startup, exe):
        x, y = L.data("x", shape=[3, 5]), L.data("y", shape=[3], append_batch_size=False)
        a, b = L.data("a", shape=[3], dtype="int64"), L.data("b", shape=[3], dtype="int64")
        outs = [L.elementwise_max(x, y, axis=1), L.elementwise_min(x, y, axis=1, act="relu"),
                L.elementwise_pow(L.abs(x), y, axis=1), L.elementwise_floordiv(a, b), L.elementwise_mod(a, b),
                L.sin(x), L.cos(x), L.atan(x), L.asin(L.scale(x, 0.1)), L.acos(L.scale(x, 0.1)),
                L.log1p(L.abs(x)), L.erf(x), L.gelu(x), L.gelu(x, approximate=True), L.selu(x), L.logsigmoid(x),
                L.hard_swish(x), L.mish(x), L.thresholded_relu(x), L.softshrink(x, alpha=0.3), L.hard_shrink(x),
                L.tanh_shrink(x), L.stanh(x), L.soft_relu(x), L.elementwise_equal(a, b)]
        assert outs[0].shape == (-1, 3, 5) and outs[3].dtype == "int64" and outs[-1].dtype == "bool"
        got = _run(exe, main, {"x": xs, "y": ys, "a": ia, "b": ib}, outs)
    yb = ys.reshape(1, 3, 1)
    sp = np.logaddexp(0, xs)
    want = [np.maximum(xs, yb), np.maximum(np.minimum(xs, yb), 0), np.abs(xs) ** yb, np.array([[-3, -3, 1]]),
            np.array([[-1, 1, 2]]), np.sin(xs), np.cos(xs), np.arctan(xs), np.arcsin(0.1 * xs), np.arccos(0.1 * xs),
            np.log1p(np.abs(xs)), _erf(xs), 0.5 * xs * (1 + _erf(xs / np.sqrt(2))),
            0.5 * xs * (1 + np.tanh(np.sqrt(2 / np.pi) * (xs + 0.044715 * xs ** 3))),
            1.0507009873554805 * np.where(xs > 0, xs, 1.6732632423543772 * np.expm1(xs)), -np.logaddexp(0, -xs),
            xs * np.clip(xs + 3, 0, 6) / 6, xs * np.tanh(sp), np.where(xs > 1, xs, 0),
            np.sign(xs) * np.maximum(np.abs(xs) - 0.3, 0), np.where(np.abs(xs) > 0.5, xs, 0), xs - np.tanh(xs),
            1.7159 * np.tanh(0.67 * xs), sp, ia == ib]
    _check(got, [np.asarray(w).astype(g.dtype) if g.dtype != np.bool_ else w for g, w in zip(got, want)])


@pytest.mark.filterwarnings("ignore:invalid value encountered in log")  # has_nan(log(x)) makes its NaNs
def test_reduction_product_and_test_layers_match_numpy():
    rng = np.random.default_rng(1)
    xs, ws = rng.standard_normal((4, 3)).astype("float32"), rng.standard_normal((3, 2)).astype("float32")
    bs = rng.standard_normal((4, 2, 3)).astype("float32")
    with fresh() as (main, startup, exe):
        x, w = L.data("x", shape=[3]), L.data("w", shape=[3, 2], append_batch_size=False)
        b = L.data("b", shape=[2, 3])
        pos = L.greater_than(x, L.fill_constant([1], "float32", 0.0))
        outs = [L.mul(x, w), L.sum([x, x, x]), L.reduce_all(pos, dim=1), L.reduce_any(pos), L.logsumexp(x, dim=1),
                L.isfinite(x), L.has_inf(x), L.has_nan(L.log(x)), L.size(x), L.rank(b), L.allclose(x, x),
                L.bmm(b, L.transpose(b, [0, 2, 1])), L.dot(x, x), L.addmm(L.fill_constant([1, 2], "float32", 1.0), x, w),
                L.addcmul(x, x, x, value=0.5), L.kron(w, w), L.trace(b, offset=1, dim1=1, dim2=2),
                L.cross(b, b, dim=2), L.dist(x, L.scale(x, 2.0), p=1), L.clip_by_norm(x, max_norm=1.0),
                L.clamp(x, min=-0.5, max=0.5), L.clamp(x, max=0.5)]
        assert [o.dtype for o in outs[2:4]] == ["bool", "bool"] and outs[8].dtype == "int64"
        assert outs[0].shape == (-1, 2) and outs[4].shape == (-1,) and outs[12].shape == (-1, 1)
        got = _run(exe, main, {"x": xs, "w": ws, "b": bs}, outs)
    norm = np.sqrt((xs ** 2).sum())
    want = [xs @ ws, 3 * xs, (xs > 0).all(1), np.array([(xs > 0).any()]), np.log(np.exp(xs).sum(1)),
            np.array([True]), np.array([False]), np.array([True]), np.array([12]), np.array([3], np.int32),
            np.array([True]), bs @ bs.transpose(0, 2, 1), (xs * xs).sum(1, keepdims=True), 1 + xs @ ws,
            xs + 0.5 * xs * xs, np.kron(ws, ws), np.trace(bs, 1, 1, 2), np.zeros_like(bs),
            np.array([np.abs(xs).sum()]), xs / norm if norm > 1 else xs, np.clip(xs, -0.5, 0.5),
            np.clip(xs, 0, 0.5)]
    _check(got, [np.asarray(w).astype(g.dtype) for g, w in zip(got, want)])


def test_shape_and_index_layers_match_numpy():
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((2, 8, 4, 6)).astype("float32")
    ms = rng.standard_normal((2, 3, 3)).astype("float32")
    ids = np.array([4, 2, 4, 7, 2], np.int64)
    with fresh() as (main, startup, exe):
        x, m = L.data("x", shape=[8, 4, 6]), L.data("m", shape=[3, 3])
        i = L.data("i", shape=[5], dtype="int64", append_batch_size=False)
        vals, idx = L.unique(i)
        uv, ui, uc = L.unique_with_counts(i, dtype="int64")
        _, r, c = L.nonzero(L.greater_than(m, L.fill_constant([1], "float32", 0.5)), as_tuple=True)
        outs = [L.flip(x, dims=[2]), L.roll(x, shifts=2, dims=3), L.roll(m, shifts=1), L.tril(m), L.triu(m, 1),
                L.t(L.reshape(L.slice(m, axes=[0], starts=[0], ends=[1]), [3, 3])),
                L.strided_slice(x, [1, 3], [7, 0], [-100, 6], [-3, 2]),
                L.pixel_shuffle(x, 2), L.space_to_depth(x, 2), L.shuffle_channel(x, 4),
                L.pad_constant_like(x, L.slice(x, [3], [0], [4]), pad_value=9.0),
                L.resize_bilinear(x, out_shape=[6, 9]), L.resize_nearest(x, scale=0.5),
                L.image_resize(x, out_shape=[3, 3], resample="NEAREST", align_corners=False),
                L.where(L.greater_than(m, L.fill_constant([1], "float32", 0.5))), r, c, vals, idx, uv, ui, uc,
                L.index_select(x, i, dim=1), L.index_sample(L.reshape(m, [-1, 9]), L.fill_constant([2, 2], "int64", 3)),
                L.scatter_nd(L.assign(np.array([[1], [0], [1]], np.int64)), L.assign(np.ones((3, 3), np.float32)),
                             [2, 3]),
                L.diag(np.array([1.0, 2.0], np.float32)), L.diag_embed(m), *L.meshgrid([i, i]),
                L.multiplex([m, L.scale(m, -1.0)], L.assign(np.array([[1], [0]], np.int32)))]
        assert outs[0].shape == (-1, 8, 4, 6) and outs[6].shape == (-1, 3, 4, 3) and outs[7].shape == (-1, 2, 8, 12)
        assert vals.shape == (-1,) and idx.dtype == "int32" and ui.dtype == uc.dtype == "int64"
        got = _run(exe, main, {"x": xs, "m": ms, "i": ids}, outs)
    n, ch, h, w = xs.shape
    big = ms > 0.5
    coords = np.argwhere(big)
    want = [xs[:, :, ::-1], np.roll(xs, 2, 3), np.roll(ms.reshape(-1), 1).reshape(ms.shape), np.tril(ms),
            np.triu(ms, 1), ms[0].T,
            xs[:, [6, 3, 0]][..., 0:6:2], xs.reshape(n, 2, 2, 2, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, 2, 8, 12),
            got[8], xs.reshape(n, 4, 2, h, w).transpose(0, 2, 1, 3, 4).reshape(xs.shape),
            np.pad(xs[..., :4], [(0, 0)] * 3 + [(0, 2)], constant_values=9.0), got[11], got[12], got[13],
            coords, coords[:, 1:2], coords[:, 2:3], np.array([4, 2, 7]), np.array([0, 1, 0, 2, 1], np.int32),
            np.array([4, 2, 7]), np.array([0, 1, 0, 2, 1]), np.array([2, 2, 1]), xs[:, ids],
            np.full((2, 2), 0, np.float32) + ms.reshape(2, 9)[:, 3:4], np.array([[1, 1, 1], [2, 2, 2]], np.float32),
            np.diag([1.0, 2.0]).astype(np.float32), np.stack([np.diag(v) for v in ms.reshape(-1, 3)]).reshape(2, 3, 3, 3),
            np.repeat(ids[:, None], 5, 1), np.repeat(ids[None, :], 5, 0), np.stack([-ms[0], ms[1]])]
    # space_to_depth and the resizes (got[8], got[11..13]) are checked against loops in tests/cases/math.py
    _check(got, [np.asarray(w).astype(g.dtype) for g, w in zip(got, want)])
    ops = [op.type for op in main.global_block().ops]
    for op_type in ("flip", "roll", "tril_triu", "transpose2", "strided_slice", "pixel_shuffle", "space_to_depth",
                    "shuffle_channel", "pad_constant_like", "bilinear_interp", "nearest_interp", "where_index",
                    "unique", "unique_with_counts", "index_select", "index_sample", "scatter_nd_add", "diag",
                    "diag_embed", "meshgrid", "multiplex"):
        assert op_type in ops, op_type


def test_prelu_and_bilinear_tensor_product_make_fluids_parameters():
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((2, 3, 2, 2)).astype("float32")
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[3, 2, 2])
        a = L.prelu(x, mode="all")
        c = L.prelu(x, mode="channel")
        e = L.prelu(x, mode="element", param_attr=fluid.ParamAttr(name="my_alpha"))
        u, v = L.reshape(x, [-1, 12]), L.reshape(L.slice(x, [1], [0], [1]), [-1, 4])
        btp = L.bilinear_tensor_product(u, v, size=5)
        nob = L.bilinear_tensor_product(u, v, size=2, bias_attr=False)
        params = {p.name: p.shape for p in main.global_block().all_parameters()}
        assert params == {"prelu_0.w_0": (1,), "prelu_1.w_0": (1, 3, 1, 1), "my_alpha": (1, 3, 2, 2),
                          "bilinear_tensor_product_0.w_0": (5, 12, 4), "bilinear_tensor_product_0.b_0": (1, 5),
                          "bilinear_tensor_product_1.w_0": (2, 12, 4)}
        exe.run(startup)
        got = _run(exe, main, {"x": xs}, [a, c, e, btp, nob])
        w0 = value("bilinear_tensor_product_0.w_0")
        np.testing.assert_array_equal(value("prelu_1.w_0"), np.full((1, 3, 1, 1), 0.25, np.float32))
        np.testing.assert_array_equal(value("bilinear_tensor_product_0.b_0"), np.zeros((1, 5), np.float32))
    want_prelu = np.where(xs > 0, xs, 0.25 * xs)
    xu, xv = xs.reshape(2, 12), xs[:, :1].reshape(2, 4)
    np.testing.assert_allclose(got[0], want_prelu, rtol=1e-6)
    np.testing.assert_allclose(got[1], want_prelu, rtol=1e-6)
    np.testing.assert_allclose(got[2], want_prelu, rtol=1e-6)
    np.testing.assert_allclose(got[3], np.einsum("bm,smn,bn->bs", xu, w0, xv), rtol=1e-5, atol=1e-6)
    assert got[4].shape == (2, 2)


def test_label_smooth_lrn_maxout_affine_channel_and_dice_loss():
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((2, 6, 3, 3)).astype("float32")
    labels = np.array([[1], [3]], np.int64)
    probs = rng.uniform(0.1, 1, (2, 4)).astype("float32")
    with fresh() as (main, startup, exe):
        x, lab = L.data("x", shape=[6, 3, 3]), L.data("lab", shape=[1], dtype="int64")
        p = L.data("p", shape=[4])
        smooth = L.label_smooth(L.one_hot(lab, depth=4), epsilon=0.2)
        prior = L.label_smooth(L.one_hot(lab, depth=4), prior_dist=L.assign(np.full((1, 4), 0.25, np.float32)))
        scale = L.assign(np.arange(6, dtype=np.float32))
        outs = [smooth, prior, L.lrn(x, n=3, k=2.0, alpha=0.1, beta=0.5), L.maxout(x, groups=3),
                L.affine_channel(x, scale=scale, bias=scale), L.dice_loss(p, lab)]
        assert outs[3].shape == (-1, 2, 3, 3)
        got = _run(exe, main, {"x": xs, "lab": labels, "p": probs}, outs)
    onehot = np.eye(4, dtype=np.float32)[labels[:, 0]]
    sq = np.pad(xs ** 2, [(0, 0), (1, 1), (0, 0), (0, 0)])
    mid = 2.0 + 0.1 * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:])
    sc = np.arange(6, dtype=np.float32).reshape(1, 6, 1, 1)
    inse = (probs * onehot).sum(1)
    dice = 1 - inse * 2 / (probs.sum(1) + onehot.sum(1) + 1e-5)
    want = [0.8 * onehot + 0.05, 0.9 * onehot + 0.025, xs * mid ** -0.5, xs.reshape(2, 2, 3, 3, 3).max(2),
            xs * sc + sc, np.array([dice.mean()])]
    _check(got, [np.asarray(w, np.float32) for w in want])


def test_gradients_flow_through_the_layers():
    # float64 whole-program gradients vs central differences through the differentiable layers
    rng = np.random.default_rng(5)
    feed = {"x": rng.standard_normal((3, 4, 2, 3)), "i": np.array([2, 0, 3], np.int64)}
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[4, 2, 3], dtype="float64")
        i = L.data("i", shape=[3], dtype="int64", append_batch_size=False)
        h = L.prelu(L.fc(x, 4 * 2 * 3, num_flatten_dims=1), mode="all")
        img = L.reshape(h, [-1, 4, 2, 3])
        a = L.resize_bilinear(L.lrn(img, n=3, alpha=0.1), out_shape=[3, 4], align_corners=False)
        b = L.flip(L.pixel_shuffle(L.maxout(L.concat([img, img, img, img], axis=1), groups=4), 2), dims=[2])
        c = L.gelu(L.index_select(L.flatten(a), i, dim=1))
        d = L.strided_slice(L.roll(img, shifts=1, dims=2), [1, 3], [3, 0], [-100, 3], [-2, 2])
        e = L.elementwise_max(L.sin(h), L.mish(h))
        f = L.bilinear_tensor_product(L.selu(h), L.stanh(h), size=2)
        g = L.tril(L.reshape(L.slice(h, [1], [0], [9]), [-1, 3, 3]))
        terms = [L.reduce_sum(L.square(v)) for v in (a, b, c, d, e, f, g)]
        loss = L.sum(terms)
        params_grads = fluid.append_backward(loss)
        main.verify()
        exe.run(startup)
        names = {p.name for p, _ in params_grads}
        assert {"prelu_0.w_0", "bilinear_tensor_product_0.w_0", "bilinear_tensor_product_0.b_0"} <= names
        check_program_gradients(exe, main, loss, feed, params_grads)


# What Paddle 1.8.5's layers append for the same calls (output var, its shape, the op's attrs),
# read from a program built with the 1.8.5 wheel.
_AT = {"out_d": -1, "out_h": -1, "out_w": -1, "scale": 0.0, "align_corners": True, "align_mode": 1,
       "data_layout": "NCHW"}
_RESIZE_18 = [("bilinear_interp_0.tmp_0", (-1, 3, 4, 6), {**_AT, "out_h": 4, "out_w": 6}),
              ("nearest_interp_0.tmp_0", (-1, 3, 4, 6), {**_AT, "out_h": 4, "out_w": 6}),
              ("bicubic_interp_0.tmp_0", (-1, 3, 5, 7), {**_AT, "out_h": 5, "out_w": 7, "align_corners": False}),
              ("trilinear_interp_0.tmp_0", (-1, 2, 4, 6, 8), {**_AT, "out_d": 4, "out_h": 6, "out_w": 8}),
              ("trilinear_interp_1.tmp_0", (-1, 2, 4, 6, 7), {**_AT, "scale": 1.5, "align_corners": False,
                                                              "align_mode": 0}),
              ("trilinear_interp_2.tmp_0", (-1, 2, 2, 2, 5), {**_AT, "out_d": 2, "out_h": 2, "out_w": 2,
                                                              "data_layout": "NHWC"})]
_RULES = {"bilinear_interp": "linear", "nearest_interp": "nearest", "bicubic_interp": "cubic",
          "trilinear_interp": "linear"}


def test_resize_layers_append_fluid_18s_ops_and_match_the_references():
    rng = np.random.default_rng(8)
    xs, vs = rng.standard_normal((2, 3, 6, 9)).astype("float32"), rng.standard_normal((2, 2, 3, 4, 5)).astype("float32")
    with fresh() as (main, startup, exe):
        img, vol = L.data("img", shape=[3, 6, 9]), L.data("vol", shape=[2, 3, 4, 5])
        outs = [L.image_resize_short(img, 4), L.image_resize_short(img, 4, resample="NEAREST"),
                L.interpolate(img, out_shape=[5, 7], resample="BICUBIC", align_corners=False),
                L.resize_trilinear(vol, out_shape=[4, 6, 8]),
                L.resize_trilinear(vol, scale=1.5, align_corners=False, align_mode=0),
                L.image_resize(vol, out_shape=[2, 2, 2], resample="TRILINEAR", data_format="NDHWC")]
        ops = main.global_block().ops
        for out, op, (name, shape, attrs) in zip(outs, ops, _RESIZE_18, strict=True):
            assert (out.name, out.shape, op.type) == (name, shape, name[:-8])
            want = {**attrs, "interp_method": name[:-15]}
            assert {k: op.attrs[k] for k in want} == want, name
        got = _run(exe, main, {"img": xs, "vol": vs}, outs)
    for k, op in enumerate(ops):
        want = _interp_ref(_RULES[op.type])({"X": xs if got[k].ndim == 4 else vs}, dict(op.attrs))["Out"]
        np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-6, err_msg=f"output {k}, {op.type}")


def test_gradients_flow_through_the_resize_layers():
    # float64 whole-program gradients vs central differences through trilinear and bicubic
    rng = np.random.default_rng(6)
    feed = {"x": rng.standard_normal((2, 6))}
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[6], dtype="float64")
        vol = L.reshape(L.fc(x, 2 * 2 * 3 * 4, num_flatten_dims=1), [-1, 2, 2, 3, 4])
        a = L.resize_trilinear(vol, out_shape=[3, 2, 5], align_corners=False, align_mode=0)
        b = L.interpolate(L.reshape(a, [-1, 6, 2, 5]), scale=1.5, resample="BICUBIC", align_corners=False)
        c = L.image_resize_short(L.reshape(vol, [-1, 4, 3, 4]), 5)
        loss = L.sum([L.reduce_sum(L.square(v)) for v in (a, b, c)])
        params_grads = fluid.append_backward(loss)
        main.verify()
        exe.run(startup)
        check_program_gradients(exe, main, loss, feed, params_grads)


def test_build_errors_name_the_layer_and_values():
    with fresh():
        x = L.data("x", shape=[3, 4])
        with pytest.raises(ValueError, match="prelu: mode should be one of all, channel, element"):
            L.prelu(x, mode="row")
        with pytest.raises(ProgramError, match="lrn: n must be a positive odd number, got 4"):
            L.lrn(L.unsqueeze(x, [1]), n=4)
        img, vol = L.unsqueeze(x, [1]), L.unsqueeze(x, [1, 2])
        with pytest.raises(ValueError, match=r"image_resize: resample must be BILINEAR, TRILINEAR or NEAREST, got "
                                             r"'BICUBIC' \(fluid.layers.interpolate takes BICUBIC\)"):
            L.image_resize(img, out_shape=[2, 2], resample="BICUBIC")
        with pytest.raises(ValueError, match=r"image_resize: TRILINEAR needs a 5-D input, got .*\[-1, 1, 3, 4\]"):
            L.resize_trilinear(img, out_shape=[2, 2, 2])
        with pytest.raises(ValueError, match=r"interpolate: BICUBIC needs a 4-D input"):
            L.interpolate(vol, out_shape=[2, 2], resample="BICUBIC")
        with pytest.raises(ValueError, match="data_format must be NCDHW or NDHWC for a 5-D input, got 'NCHW'"):
            L.resize_trilinear(vol, out_shape=[2, 2, 2], data_format="NCHW")
        with pytest.raises(ValueError, match=r"out_shape must be \[out_d, out_h, out_w\] > 0 for a 5-D input"):
            L.resize_trilinear(vol, out_shape=[2, 2])
        with pytest.raises(ValueError, match="image_resize_short: input must be 4-D"):
            L.image_resize_short(vol, 2)
        with pytest.raises(ValueError, match=r"image_resize_short: H and W of .*\[-1, 3, -1, 4\] must be known"):
            L.image_resize_short(L.data("hw", shape=[-1, 3, -1, 4]), 2)  # a -1 dim: no batch dim added
        with pytest.raises(ValueError, match="one of out_shape and scale"):
            L.resize_bilinear(L.unsqueeze(x, [1]))
        with pytest.raises(ProgramError, match="elementwise_floordiv: X must be int32 or int64"):
            L.elementwise_floordiv(x, x)
        with pytest.raises(ProgramError, match=r"maxout: groups 2 must divide the 3 channels of X\[-1, 3, 4, 1\]"):
            L.maxout(L.unsqueeze(x, [3]), groups=2)
        with pytest.raises(ValueError, match="label_smooth: the value of epsilon must be between 0 and 1"):
            L.label_smooth(x, epsilon=2.0)
        with pytest.raises(ValueError, match="t: input must have rank <= 2"):
            L.t(x)
        with pytest.raises(ValueError, match="clamp: either min or max"):
            L.clamp(x)
        with pytest.raises(ProgramError, match=r"index_select: dim 3 is out of range for X\[-1, 3, 4\]"):
            L.index_select(x, L.assign(np.array([0], np.int64)), dim=3)
        with pytest.raises(ValueError, match="unique_with_counts: x must be 1-D"):
            L.unique_with_counts(x)


def test_reshape_appends_reshape2_with_xshape():
    with fresh() as (main, startup, exe):
        x = L.data("x", shape=[6])
        y = L.reshape(x, [0, 2, 3])
        op = main.global_block().ops[-1]
        assert op.type == "reshape2" and y.name.startswith("reshape2_0") and y.shape == (-1, 2, 3)
        assert main.global_block().var(op.output("XShape")[0]).shape == (0, -1, 6)
        xs = np.arange(12, dtype=np.float32).reshape(2, 6)
        np.testing.assert_array_equal(exe.run(main, feed={"x": xs}, fetch_list=[y])[0], xs.reshape(2, 2, 3))


def test_increment_updates_its_counter_in_place():
    with fresh() as (main, startup, exe):
        counter = L.create_global_var([1], 0.0, "float32", persistable=True)
        step = L.increment(counter, value=2.0)
        fresh_out = L.increment(counter, value=1.0, in_place=False)
        assert step is counter and fresh_out is not counter
        exe.run(startup)
        for k in range(3):
            a, b = exe.run(main, fetch_list=[counter, fresh_out])
            assert float(a[0]) == 2.0 * (k + 1) and float(b[0]) == 2.0 * (k + 1) + 1


# Ops whose Paddle 2.6 kernel is not Fluid 1.8's (NOTE(int-division): 2.6 floors and takes the
# divisor's sign on integers) or that Paddle 2.6 no longer registers.
NOT_AS_IN_PADDLE_2 = {"elementwise_floordiv", "elementwise_mod", "isfinite", "diag", "space_to_depth",
                      "pad_constant_like",
                      # 1.8's mish_op takes softplus(x) = e^x below -threshold; 2.6's does not
                      "mish-threshold",
                      # Paddle 2.6 reads an NHWC affine_channel's channels from dim 1 (1.8: the last)
                      "affine_channel-nhwc",
                      # Paddle 2.6 slices with a negative stride as numpy does, 1.8 anchors at the end
                      # (NOTE(strided-slice-1.8)); 2.6's strided_slice_grad fails on a decreased axis
                      "strided_slice",
                      # Paddle 2.6's max/min/pow grad kernels reject a Y aligned at axis 1
                      "elementwise_max-axis1", "elementwise_min-axis1", "elementwise_pow-axis1"}


# attrs Paddle 2.6 renamed: 1.8 name -> 2.6 name, per op type
RENAMED = {"trace": {"dim1": "axis1", "dim2": "axis2"}, "flip": {"dims": "axis"}, "roll": {"dims": "axis"}}


def _paddle_attrs(case, attrs):
    names = RENAMED.get(case.op, {})
    out = {names.get(k, k): v for k, v in attrs.items()}
    if case.op == "allclose":  # Paddle 2.6 takes its tolerances as strings
        out.update(rtol=str(out["rtol"]), atol=str(out["atol"]))
    return out


# Cases whose gradient is Paddle's rule rather than a derivative (no finite-difference check in
# the OpCase table): their gradients are compared with Paddle's here.
RULES = [dataclasses.replace(c, grad=("X",), name=f"{c.name}_rule".lstrip("_")) for c in CASES
         if c.id in ("shuffle_channel", "soft_relu-threshold")]


# The ops with data-dependent shapes have property cases in the table; here they get inputs and
# references for the comparison.
_IDS = np.array([4, 2, 4, 7, 2, 2])
DATA_DEPENDENT = [OpCase("unique", lambda r: {"X": _IDS}, _unique_ref(False), name="paddle"),
                  OpCase("unique_with_counts", lambda r: {"X": _IDS}, _unique_ref(True), name="paddle"),
                  OpCase("where_index", lambda r: {"Condition": np.array([[True, False, True], [False, False, True]])},
                         lambda i, a: {"Out": np.argwhere(i["Condition"])}, name="paddle")]


@pytest.mark.paddle
def test_math_ops_match_paddle(paddle26_python, tmp_path):
    run_in_paddle(paddle26_python, CASES + RULES + DATA_DEPENDENT, tmp_path, NOT_AS_IN_PADDLE_2, _paddle_attrs,
                  squeezed={"dot"})


# Fluid 1.8.5's strided_slice_grad fails on a decreased axis (as 2.6's does); its non-AVX CPU core
# (the one these machines load) gets one element of pad_constant_like's Y gradient wrong, where the
# gradient is a plain slice of the output's (NOTE(fluid18-noavx) in tests/fluid18_env.py); the op's
# outputs and gradients are still compared with Paddle 2.6's
NOT_AS_IN_PADDLE_18 = {"strided_slice-decrease", "pad_constant_like"}


@pytest.mark.paddle
def test_math_ops_match_paddle_18(fluid18_python, tmp_path):
    run_in_paddle(fluid18_python, CASES + RULES + DATA_DEPENDENT, tmp_path, NOT_AS_IN_PADDLE_18, fluid18=True)


# -- a small model trained here and in Paddle 2.6 --------------------------------------------

TRAIN_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import paddle
    from paddle.base.layer_helper import LayerHelper
    paddle.enable_static()
    spec = json.loads(sys.argv[1])
    d = dict(np.load(spec["data"]))
    main, startup = paddle.static.Program(), paddle.static.Program()

    def op(type, ins, attrs, outs=("Out",)):
        h = LayerHelper(type)
        made = {s: h.create_variable_for_type_inference("float32") for s in outs}
        h.append_op(type=type, inputs=ins, outputs=made, attrs=attrs)
        return made[outs[0]]

    with paddle.static.program_guard(main, startup):
        img = paddle.static.data("img", [-1, 2, 4, 4], "float32")
        label = paddle.static.data("label", [-1, 1], "int64")
        p = {k[6:]: paddle.static.create_parameter(list(v.shape), "float32", name=k[6:],
                                                     default_initializer=paddle.nn.initializer.Assign(v))
             for k, v in d.items() if k.startswith("param.")}
        h = op("bilinear_interp", {"X": img}, {"out_h": 6, "out_w": 6, "interp_method": "bilinear",
                                              "align_corners": False, "align_mode": 0, "data_layout": "NCHW"})
        h = op("prelu", {"X": h, "Alpha": p["alpha"]}, {"mode": "channel"})
        h = op("lrn", {"X": h}, {"n": 3, "k": 1.0, "alpha": 0.1, "beta": 0.75, "data_format": "NCHW"}, ("Out", "MidOut"))
        h = op("maxout", {"X": h}, {"groups": 2, "axis": 1})
        h = paddle.reshape(h, [-1, 36])
        h = op("gelu", {"X": op("elementwise_add", {"X": op("mul", {"X": h, "Y": p["w1"]}, {}), "Y": p["b1"]},
                                {"axis": 1})}, {"approximate": False})
        h = op("elementwise_max", {"X": h, "Y": op("sin", {"X": h}, {})}, {"axis": -1})
        logits = op("elementwise_add", {"X": op("mul", {"X": h, "Y": p["w2"]}, {}), "Y": p["b2"]}, {"axis": 1})
        soft = op("label_smooth", {"X": paddle.nn.functional.one_hot(paddle.reshape(label, [-1]), 3)},
                  {"epsilon": 0.1})
        loss = paddle.mean(paddle.nn.functional.softmax_with_cross_entropy(logits, soft, soft_label=True))
        paddle.optimizer.SGD(0.2).minimize(loss)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    losses = [float(np.asarray(exe.run(main, feed={"img": d["img"][s], "label": d["label"][s]},
                                        fetch_list=[loss])[0]).reshape(())) for s in range(len(d["img"]))]
    np.savez(spec["out"], losses=np.array(losses))
""")


def _model_losses(images, labels, init):
    """resize_bilinear -> prelu (channel) -> lrn -> maxout -> fc + gelu -> max(h, sin h) -> fc,
    label_smooth'd soft cross entropy, SGD: per-step losses."""
    with fresh() as (main, startup, exe):
        attr = lambda k: fluid.ParamAttr(name=k, initializer=NumpyArrayInitializer(init[k]))  # noqa: E731
        x, y = L.data("img", shape=[2, 4, 4]), L.data("label", shape=[1], dtype="int64")
        h = L.resize_bilinear(x, out_shape=[6, 6], align_corners=False, align_mode=0)
        h = L.maxout(L.lrn(L.prelu(h, mode="channel", param_attr=attr("alpha")), n=3, alpha=0.1), groups=2)
        h = L.gelu(L.fc(h, 8, param_attr=attr("w1"), bias_attr=attr("b1")))
        h = L.elementwise_max(h, L.sin(h))
        logits = L.fc(h, 3, param_attr=attr("w2"), bias_attr=attr("b2"))
        soft = L.label_smooth(L.one_hot(y, depth=3), epsilon=0.1)
        loss = L.mean(L.softmax_with_cross_entropy(logits, soft, soft_label=True))
        fluid.optimizer.SGD(0.2).minimize(loss)
        exe.run(startup)
        return [float(exe.run(main, feed={"img": images[s], "label": labels[s]}, fetch_list=[loss])[0][0])
                for s in range(len(images))]


def _model_data(steps=8, batch=6):
    rng = np.random.default_rng(6)
    images = rng.standard_normal((steps, batch, 2, 4, 4)).astype("float32")
    labels = rng.integers(0, 3, size=(steps, batch, 1)).astype("int64")
    init = {"alpha": rng.uniform(0.1, 0.4, (1, 2, 1, 1)), "w1": 0.3 * rng.standard_normal((36, 8)),
            "b1": 0.1 * rng.standard_normal(8), "w2": 0.5 * rng.standard_normal((8, 3)), "b2": np.zeros(3)}
    return images, labels, {k: v.astype("float32") for k, v in init.items()}


def test_a_model_of_the_new_layers_trains():
    images, labels, init = _model_data(steps=30)
    losses = _model_losses(np.concatenate([images[:1]] * 30), np.concatenate([labels[:1]] * 30), init)
    assert losses[-1] < 0.7 * losses[0], losses


@pytest.mark.paddle
def test_a_model_of_the_new_layers_trains_as_in_paddle(paddle26_python, tmp_path):
    images, labels, init = _model_data()
    data = dict(img=images, label=labels, **{"param." + k: v for k, v in init.items()})
    theirs = run_reference(paddle26_python, TRAIN_SCRIPT, tmp_path, data)["losses"]
    np.testing.assert_allclose(_model_losses(images, labels, init), theirs, rtol=1e-5, atol=1e-6)
