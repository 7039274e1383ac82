"""Resampling ops of Fluid 1.8: ops that move an image's pixels between its channels and its
grid, or resize the grid (pixel_shuffle, space_to_depth, shuffle_channel, bilinear_interp,
nearest_interp, bicubic_interp, trilinear_interp). Shape ops that only reshape or pad are in
ops/shape.py.

Op types, slots, attrs and defaults are Fluid 1.8's; every kernel is vectorised over ``xp``
(numpy or cupy), keeps X's dtype, and runs on float64 for the gradient checks. The channel
moves are reshapes and transposes (NOTE(channel-moves)); the resizes are products with small
per-axis interpolation matrices (NOTE(interp)).
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Meta, check, grad_of, register


# -- pixel_shuffle, space_to_depth, shuffle_channel -----------------------------------------
# NOTE(channel-moves): each of these is a reshape, a transpose and a reshape of the NCHW
# buffer, so its gradient is the inverse transpose. space_to_depth is Paddle's (Darknet's
# reorg): its kernel walks X's buffer with X's dims [N, C, H, W] and writes each entry where
# a [N, C/b², H·b, W·b] tensor would hold it (channel k = off·C/b² + c goes to row h·b + off/b,
# column w·b + off%b), so Out = X viewed as [N, b, b, C/b², H, W], transposed to [N, C/b², H,
# b, W, b], read as [N, C·b², H/b, W/b]; it is not TensorFlow's space_to_depth. (Checked
# against Paddle 1.8.5; Paddle 2.6 no longer has the op.)


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
    return {"Out": _moved(x, (n, b, b, c // (b * b), h, w), _S2D_PERM, (n, c * b * b, h // b, w // b))}


@register("space_to_depth_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={"blocksize": 1}, role="backward")
def space_to_depth_grad(xp, ins, a, ctx):
    x, g, b = ins["X"], ins["Out@GRAD"], a["blocksize"]
    n, c, h, w = x.shape
    return {"X@GRAD": _moved(g, (n, c // (b * b), h, b, w, b), _inverse_perm(_S2D_PERM), x.shape)}


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


# -- bilinear_interp, nearest_interp, bicubic_interp, trilinear_interp ------------------------
# NOTE(interp): Fluid 1.8's interpolate_op.h, per output row k (and column, and depth slice,
# alike): with ratio = (in-1)/(out-1) under align_corners, else in/out (0 when out is 1),
# computed in float32; nearest reads row int(ratio·k + 0.5) (align_corners) or int(ratio·k);
# bilinear (and trilinear, the same rule in D as well) reads rows y0 = int(ratio·k) and
# min(y0 + 1, in - 1) with weight ratio·k - y0 on the second, or, with align_mode 0 and no
# align_corners, the half-pixel form y0 = int(ratio·(k + 0.5) - 0.5) clamped at 0 and weight
# max(ratio·(k + 0.5) - 0.5, 0) - y0. Bicubic is NOTE(bicubic). All are separable, so Out =
# Ry · X · Rxᵀ (trilinear: Rd, Ry and Rx along D, H and W) with Ry [out_h, in_h] and Rx
# [out_w, in_w] holding those weights, and X@GRAD = Ryᵀ · Out@GRAD · Rx. ``scale`` > 0 sets
# out = int(in·scale) (float32) instead of out_d/out_h/out_w.
#
# NOTE(bicubic): Fluid 1.8's bicubic_interp is Keys' cubic convolution with A = -0.75 over the
# 4 rows y0 - 1 .. y0 + 2 (clamped to the edges), where the source position is p = ratio·k
# (align_corners) or ratio·(k + 0.5) - 0.5, *not* clamped at 0, y0 = floor(p) and t = p - y0
# (so the first rows of an upsampling without align_corners lean on row 0 repeated). p, t and
# the weights are computed in X's float type, as the C++ template does; align_mode is ignored.
# (The interpolate_op.h of April 2020 truncated p toward zero instead; Paddle 1.8.5 and 2.6
# floor, checked against both.)

_INTERP_ATTRS = {"out_d": 0, "out_h": 0, "out_w": 0, "scale": 0.0, "interp_method": "bilinear",
                 "align_corners": True, "align_mode": 1, "data_layout": "NCHW"}
# op type -> (interp_method, the 1-D rule of its matrices, number of resized dims)
_INTERPS = {"bilinear_interp": ("bilinear", "linear", 2), "nearest_interp": ("nearest", "nearest", 2),
            "bicubic_interp": ("bicubic", "cubic", 2), "trilinear_interp": ("trilinear", "linear", 3)}


def _interp_out(op: str, sizes, a) -> tuple:
    """The resized dims' output sizes: int(in·scale) when ``scale`` > 0, else out_[d]h/w."""
    if a["scale"] > 0:
        f = np.float32(a["scale"])
        return tuple(-1 if d == -1 else int(np.float32(d) * f) for d in sizes)
    names = ("out_d", "out_h", "out_w")[-len(sizes):]
    said = [f"{n} {a[n]}" for n in names]
    check(all(a[n] > 0 for n in names), f"{op}: {', '.join(said[:-1])} and {said[-1]} must be > 0 (or scale > 0)")
    return tuple(a[n] for n in names)


def _interp_infer(op: str, dims: int):
    def infer(ins, a):
        x, fmt = ins["X"], a["data_layout"]
        check(len(x.shape) == 2 + dims and fmt in ("NCHW", "NHWC"),
              f"{op}: X must be {2 + dims}-D and data_layout NCHW or NHWC, got X{list(x.shape)}, {fmt!r}")
        check(a["align_mode"] in (0, 1), f"{op}: align_mode must be 0 or 1, got {a['align_mode']}")
        axes = range(2, 2 + dims) if fmt == "NCHW" else range(1, 1 + dims)
        out = list(x.shape)
        for ax, n in zip(axes, _interp_out(op, [x.shape[ax] for ax in axes], a)):
            out[ax] = n
        return {"Out": Meta(tuple(out), x.dtype)}

    return infer


def _cubic_weights(t, one):
    """The 4 weights of Keys' cubic convolution (A = -0.75) for taps -1, 0, 1, 2 at fraction t,
    in t's float type (Paddle's get_cubic_upsample_coefficients)."""
    A = one * -0.75

    def near(v):  # |v| <= 1
        return ((A + 2) * v - (A + 3)) * v * v + 1

    def far(v):  # 1 < |v| < 2
        return ((A * v - 5 * A) * v + 8 * A) * v - 4 * A

    return far(t + one), near(t), near(one - t), far(one - t + one)


def _interp_matrix(n_in: int, n_out: int, rule: str, a, dtype) -> np.ndarray:
    """R [n_out, n_in] (numpy float64): row k holds the weights output position k gives the
    inputs (NOTE(interp), NOTE(bicubic))."""
    f32 = np.float32
    ratio = f32(0) if n_out <= 1 else (f32(n_in - 1) / f32(n_out - 1) if a["align_corners"] else f32(n_in) / f32(n_out))
    k = np.arange(n_out, dtype=np.float32)
    rows = np.zeros((n_out, n_in), dtype=np.float64)
    at = np.arange(n_out)
    # the C++ mixes float (ratio·k) and double (· (k + 0.5), + 0.5) arithmetic; so do we
    if rule == "nearest":
        src = (ratio * k + 0.5 if a["align_corners"] else ratio * k).astype(np.int64)
        rows[at, np.minimum(src, n_in - 1)] = 1
        return rows
    if rule == "cubic":
        t_type = np.float64 if np.dtype(dtype) == np.float64 else np.float32
        pos = (ratio * k if a["align_corners"] else np.float64(ratio) * (k + 0.5) - 0.5).astype(t_type)
        base = np.floor(pos).astype(np.int64)
        for tap, w in enumerate(_cubic_weights(pos - base.astype(t_type), t_type(1))):
            np.add.at(rows, (at, np.clip(base - 1 + tap, 0, n_in - 1)), w.astype(np.float64))
        return rows
    half = a["align_mode"] == 0 and not a["align_corners"]
    pos = np.float64(ratio) * (k.astype(np.float64) + 0.5) - 0.5 if half else ratio * k
    lo = np.maximum(np.trunc(pos).astype(np.int64), 0)
    hi = np.minimum(lo + 1, n_in - 1)
    w_hi = (np.maximum(pos, 0).astype(np.float32) if half else pos) - lo.astype(np.float32)
    np.add.at(rows, (at, lo), (f32(1) - w_hi).astype(np.float64))
    np.add.at(rows, (at, hi), w_hi.astype(np.float64))
    return rows


def _along(xp, x, mats):
    """``mats[i]`` [m, n] applied along dim 2 + i of ``x`` (size n there, m after)."""
    for i, r in enumerate(mats):
        ax = 2 + i
        if ax == x.ndim - 1:
            x = xp.matmul(x, r.T)
        else:
            s = x.shape
            x = xp.matmul(r, x.reshape(s[:ax] + (s[ax], -1))).reshape(s[:ax] + (r.shape[0],) + s[ax + 1:])
    return x


def _interp_kernels(op: str, rule: str, dims: int):
    def matrices(xp, n_in, n_out, a, dtype):
        return [xp.asarray(_interp_matrix(i, o, rule, a, dtype)).astype(dtype) for i, o in zip(n_in, n_out)]

    def forward(xp, ins, a, ctx):
        last = a["data_layout"] == "NHWC"
        x = xp.moveaxis(ins["X"], -1, 1) if last else ins["X"]
        mats = matrices(xp, x.shape[2:], _interp_out(op, x.shape[2:], a), a, x.dtype)
        out = _along(xp, x, mats)
        return {"Out": xp.moveaxis(out, 1, -1) if last else out}

    def backward(xp, ins, a, ctx):
        last = a["data_layout"] == "NHWC"
        x, g = ((xp.moveaxis(v, -1, 1) if last else v) for v in (ins["X"], ins["Out@GRAD"]))
        dx = _along(xp, g, [r.T for r in matrices(xp, x.shape[2:], g.shape[2:], a, g.dtype)])
        return {"X@GRAD": xp.moveaxis(dx, 1, -1) if last else dx}

    what = {"nearest": "nearest-neighbour", "linear": "linear", "cubic": "bicubic (NOTE(bicubic))"}[rule]
    where = "D, H and W" if dims == 3 else "H and W"
    forward.__doc__ = (f"Out = X resized in {where} by {what} interpolation, as Fluid 1.8 computes it "
                       f"(NOTE(interp)); the run-time OutSize, SizeTensor and Scale inputs are not supported.")
    return forward, backward


for _op, (_method, _rule, _dims) in _INTERPS.items():
    _fwd, _bwd = _interp_kernels(_op, _rule, _dims)
    register(_op, ins=("X",), outs=("Out",), attrs={**_INTERP_ATTRS, "interp_method": _method},
             infer=_interp_infer(_op, _dims), grad=grad_of(("X",)))(_fwd)
    register(_op + "_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={**_INTERP_ATTRS, "interp_method": _method},
             role="backward")(_bwd)
