"""Resampling ops of Fluid 1.8: ops that move an image's pixels between its channels and its
grid, or resize the grid (pixel_shuffle, space_to_depth, shuffle_channel, bilinear_interp,
nearest_interp). Shape ops that only reshape or pad are in ops/shape.py.

Op types, slots, attrs and defaults are Fluid 1.8's; every kernel is vectorised over ``xp``
(numpy or cupy), keeps X's dtype, and runs on float64 for the gradient checks. The channel
moves are reshapes and transposes (NOTE(channel-moves)); the resizes are products with small
per-axis interpolation matrices (NOTE(interp)).
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Meta, check, grad_of, register
from placegroup.ops.shape import _pad2d_channels_first


# -- pixel_shuffle, space_to_depth, shuffle_channel -----------------------------------------
# NOTE(channel-moves): each of these is a reshape, a transpose and a reshape of the NCHW
# buffer, so its gradient is the inverse transpose. space_to_depth is Paddle's (Darknet's
# reorg): its kernel walks X's buffer with the *output's* dims [N, C·b², H/b, W/b], so
# Out = X viewed as [N, b, b, C, H/b, W/b], transposed to [N, C, H/b, b, W/b, b], read as
# [N, C·b², H/b, W/b]; it is not TensorFlow's space_to_depth.


def _four_d(op: str, x) -> None:
    check(len(x.shape) == 4, f"{op}: X must be 4-D (NCHW), got X{list(x.shape)}")


def _divides(op: str, what: str, n: int, d: int, x) -> None:
    check(n == -1 or n % d == 0, f"{op}: {what} {n} of X{list(x.shape)} is not a multiple of {d}")


def _pixel_shuffle_infer(ins, a):
    x, r = ins["X"], a["upscale_factor"]
    _four_d("pixel_shuffle", x)
    check(r >= 1, f"pixel_shuffle: upscale_factor must be >= 1, got {r}")
    n, c, h, w = x.shape
    _divides("pixel_shuffle", "channels", c, r * r, x)
    return {"Out": Meta((n, -1 if c == -1 else c // (r * r), -1 if h == -1 else h * r, -1 if w == -1 else w * r),
                        x.dtype)}


def _moved(x, view, perm, out):
    return x.reshape(view).transpose(perm).reshape(out)


def _inverse_perm(perm):
    return tuple(int(i) for i in np.argsort(perm))


_PS_PERM = (0, 1, 4, 2, 5, 3)


@register("pixel_shuffle", ins=("X",), outs=("Out",), attrs={"upscale_factor": 1}, infer=_pixel_shuffle_infer,
          grad=grad_of(("X",), uses=()))
def pixel_shuffle(xp, ins, a, ctx):
    """Out[n, c, h·r + i, w·r + j] = X[n, c·r² + i·r + j, h, w] (r = upscale_factor)."""
    x, r = ins["X"], a["upscale_factor"]
    n, c, h, w = x.shape
    return {"Out": _moved(x, (n, c // (r * r), r, r, h, w), _PS_PERM, (n, c // (r * r), h * r, w * r))}


@register("pixel_shuffle_grad", ins=("Out@GRAD",), outs=("X@GRAD",), attrs={"upscale_factor": 1}, role="backward")
def pixel_shuffle_grad(xp, ins, a, ctx):
    g, r = ins["Out@GRAD"], a["upscale_factor"]
    n, c, hr, wr = g.shape
    view = (n, c, hr // r, r, wr // r, r)
    return {"X@GRAD": _moved(g, view, _inverse_perm(_PS_PERM), (n, c * r * r, hr // r, wr // r))}


def _space_to_depth_infer(ins, a):
    x, b = ins["X"], a["blocksize"]
    _four_d("space_to_depth", x)
    check(b >= 1, f"space_to_depth: blocksize must be >= 1, got {b}")
    n, c, h, w = x.shape
    _divides("space_to_depth", "channels", c, b * b, x)
    _divides("space_to_depth", "height", h, b, x)
    _divides("space_to_depth", "width", w, b, x)
    return {"Out": Meta((n, -1 if c == -1 else c * b * b, -1 if h == -1 else h // b, -1 if w == -1 else w // b),
                        x.dtype)}


_S2D_PERM = (0, 3, 4, 1, 5, 2)


@register("space_to_depth", ins=("X",), outs=("Out",), attrs={"blocksize": 1}, infer=_space_to_depth_infer,
          grad=grad_of(("X",), uses=("X",)))
def space_to_depth(xp, ins, a, ctx):
    """Paddle's space_to_depth (Darknet's reorg), NOTE(channel-moves): Out is [N, C·b², H/b, W/b]."""
    x, b = ins["X"], a["blocksize"]
    n, c, h, w = x.shape
    return {"Out": _moved(x, (n, b, b, c, h // b, w // b), _S2D_PERM, (n, c * b * b, h // b, w // b))}


@register("space_to_depth_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={"blocksize": 1}, role="backward")
def space_to_depth_grad(xp, ins, a, ctx):
    x, g, b = ins["X"], ins["Out@GRAD"], a["blocksize"]
    n, c, h, w = x.shape
    return {"X@GRAD": _moved(g, (n, c, h // b, b, w // b, b), _inverse_perm(_S2D_PERM), x.shape)}


def _shuffle_channel_infer(ins, a):
    x, g = ins["X"], a["group"]
    _four_d("shuffle_channel", x)
    check(g >= 1, f"shuffle_channel: group must be >= 1, got {g}")
    _divides("shuffle_channel", "channels", x.shape[1], g, x)
    return {"Out": x}


def _shuffle(x, g):
    n, c, h, w = x.shape
    return _moved(x, (n, g, c // g, h, w), (0, 2, 1, 3, 4), x.shape)


@register("shuffle_channel", ins=("X",), outs=("Out",), attrs={"group": 1}, infer=_shuffle_channel_infer,
          grad=grad_of(("X",), uses=()))
def shuffle_channel(xp, ins, a, ctx):
    """Out channel j·group + i = X channel i·(C/group) + j: the group-major channels transposed.

    NOTE(shuffle-grad): Paddle's shuffle_channel_grad (1.8 and 2.6) applies this *same*
    permutation to Out@GRAD instead of its inverse, so X@GRAD is the true gradient only when
    group² = C (or group is 1 or C). We keep Paddle's rule, as for scatter (NOTE(scatter-grad-1.8)
    in ops/index.py): a ShuffleNet trained here follows the one trained with Fluid."""
    return {"Out": _shuffle(ins["X"], a["group"])}


@register("shuffle_channel_grad", ins=("Out@GRAD",), outs=("X@GRAD",), attrs={"group": 1}, role="backward")
def shuffle_channel_grad(xp, ins, a, ctx):
    return {"X@GRAD": _shuffle(ins["Out@GRAD"], a["group"])}  # See NOTE(shuffle-grad).


# -- bilinear_interp, nearest_interp --------------------------------------------------------
# NOTE(interp): Fluid 1.8's interpolate_op.h, per output row k (and column alike): with
# ratio = (in-1)/(out-1) under align_corners, else in/out (0 when out is 1), computed in
# float32; nearest reads row int(ratio·k + 0.5) (align_corners) or int(ratio·k); bilinear
# reads rows y0 = int(ratio·k) and min(y0 + 1, in - 1) with weight ratio·k - y0 on the
# second, or, with align_mode 0 and no align_corners, the half-pixel form y0 = int(ratio·(k +
# 0.5) - 0.5) clamped at 0 and weight max(ratio·(k + 0.5) - 0.5, 0) - y0. Both are separable,
# so Out = Ry · X · Rxᵀ with Ry [out_h, in_h] and Rx [out_w, in_w] holding those weights, and
# X@GRAD = Ryᵀ · Out@GRAD · Rx. ``scale`` > 0 sets out = int(in·scale) instead of out_h/out_w.

_INTERP_ATTRS = {"out_d": 0, "out_h": 0, "out_w": 0, "scale": 0.0, "interp_method": "bilinear",
                 "align_corners": True, "align_mode": 1, "data_layout": "NCHW"}


def _interp_out(op: str, in_h: int, in_w: int, a) -> tuple:
    if a["scale"] > 0:
        f = np.float32(a["scale"])
        return tuple(-1 if d == -1 else int(np.float32(d) * f) for d in (in_h, in_w))
    check(a["out_h"] > 0 and a["out_w"] > 0, f"{op}: out_h {a['out_h']} and out_w {a['out_w']} must be > 0 "
                                             f"(or scale > 0)")
    return a["out_h"], a["out_w"]


def _interp_infer(op: str):
    def infer(ins, a):
        x, fmt = ins["X"], a["data_layout"]
        check(len(x.shape) == 4 and fmt in ("NCHW", "NHWC"), f"{op}: X must be 4-D and data_layout NCHW or NHWC, "
                                                             f"got X{list(x.shape)}, {fmt!r}")
        check(a["align_mode"] in (0, 1), f"{op}: align_mode must be 0 or 1, got {a['align_mode']}")
        h_ax, w_ax = (2, 3) if fmt == "NCHW" else (1, 2)
        oh, ow = _interp_out(op, x.shape[h_ax], x.shape[w_ax], a)
        out = list(x.shape)
        out[h_ax], out[w_ax] = oh, ow
        return {"Out": Meta(tuple(out), x.dtype)}

    return infer


def _interp_matrix(xp, n_in: int, n_out: int, nearest: bool, a):
    """R [n_out, n_in]: row k holds the weights output position k gives the inputs (NOTE(interp))."""
    f32 = np.float32
    ratio = f32(0) if n_out <= 1 else (f32(n_in - 1) / f32(n_out - 1) if a["align_corners"] else f32(n_in) / f32(n_out))
    k = np.arange(n_out, dtype=np.float32)
    rows = np.zeros((n_out, n_in), dtype=np.float64)
    # the C++ mixes float (ratio·k) and double (· (k + 0.5), + 0.5) arithmetic; so do we
    if nearest:
        src = (ratio * k + 0.5 if a["align_corners"] else ratio * k).astype(np.int64)
        rows[np.arange(n_out), np.minimum(src, n_in - 1)] = 1
        return xp.asarray(rows)
    half = a["align_mode"] == 0 and not a["align_corners"]
    pos = np.float64(ratio) * (k.astype(np.float64) + 0.5) - 0.5 if half else ratio * k
    lo = np.maximum(np.trunc(pos).astype(np.int64), 0)
    hi = np.minimum(lo + 1, n_in - 1)
    w_hi = (np.maximum(pos, 0).astype(np.float32) if half else pos) - lo.astype(np.float32)
    np.add.at(rows, (np.arange(n_out), lo), (f32(1) - w_hi).astype(np.float64))
    np.add.at(rows, (np.arange(n_out), hi), w_hi.astype(np.float64))
    return xp.asarray(rows)


def _interp_kernels(op: str, nearest: bool):
    def matrices(xp, x, a, dtype):
        h, w = x.shape[2], x.shape[3]
        oh, ow = _interp_out(op, h, w, a)
        return (_interp_matrix(xp, h, oh, nearest, a).astype(dtype),
                _interp_matrix(xp, w, ow, nearest, a).astype(dtype))

    def forward(xp, ins, a, ctx):
        x = _pad2d_channels_first(xp, ins["X"], {"data_format": a["data_layout"]})
        ry, rx = matrices(xp, x, a, x.dtype)
        out = xp.matmul(xp.matmul(ry, x), rx.T)
        return {"Out": out if a["data_layout"] == "NCHW" else xp.moveaxis(out, 1, 3)}

    def backward(xp, ins, a, ctx):
        fmt = {"data_format": a["data_layout"]}
        x, g = _pad2d_channels_first(xp, ins["X"], fmt), _pad2d_channels_first(xp, ins["Out@GRAD"], fmt)
        ry, rx = matrices(xp, x, a, g.dtype)
        dx = xp.matmul(xp.matmul(ry.T, g), rx)
        return {"X@GRAD": dx if a["data_layout"] == "NCHW" else xp.moveaxis(dx, 1, 3)}

    forward.__doc__ = (f"Out = X resized in H and W by {'nearest-neighbour' if nearest else 'bilinear'} "
                       f"interpolation, as Fluid 1.8 computes it (NOTE(interp)); the run-time OutSize, SizeTensor "
                       f"and Scale inputs are not supported.")
    return forward, backward


for _op, _nearest in (("bilinear_interp", False), ("nearest_interp", True)):
    _fwd, _bwd = _interp_kernels(_op, _nearest)
    register(_op, ins=("X",), outs=("Out",), attrs={**_INTERP_ATTRS, "interp_method": _op[:-7]},
             infer=_interp_infer(_op), grad=grad_of(("X",)))(_fwd)
    register(_op + "_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={**_INTERP_ATTRS, "interp_method": _op[:-7]},
             role="backward")(_bwd)
